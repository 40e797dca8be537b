//! The clawbus message bus: envelopes, topics, the dedup ledger and its backends.
//!
//! It knows nothing of LLMs, agents or config files. Module map:
//! - [`envelope`]: [`Envelope`] and [`RequestId`], the serde value every message travels in.
//! - [`topic`]: dot-separated [`Topic`]s with NATS-style `*` / `>` wildcards.
//! - [`backend`]: the [`Bus`] trait every backend implements, [`Delivery`], [`Subscription`].
//! - [`ledger`]: the dedup ledger and task journal in sled; [`commit`]: group commit to disk.
//! - [`local`]: the embedded backend (an actix broker actor in this process).
//! - [`clock`]: injected time.

pub mod backend;
pub mod clock;
pub mod commit;
pub mod envelope;
pub mod error;
pub mod ledger;
pub mod local;
pub mod task;
pub mod topic;

pub use backend::{Bus, Delivery, Settle, Subscription};
pub use clock::{Clock, ManualClock, SystemClock};
pub use envelope::{Envelope, Kind, RequestId};
pub use error::BusError;
pub use ledger::Ledger;
pub use local::{LocalBus, LocalOptions};
pub use task::{Admission, Outcome, TaskRecord, TaskState};
pub use topic::Topic;
