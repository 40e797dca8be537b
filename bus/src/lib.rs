//! The clawbus message bus: envelopes, topics, the task store, task events and backends.
//!
//! It knows nothing of LLMs, agents or config files. Module map:
//! - `envelope`: [`Envelope`] and [`RequestId`], the serde value every message travels in.
//! - [`topic`]: dot-separated [`Topic`]s with NATS-style `*` / `>` wildcards.
//! - [`backend`]: the [`Bus`] trait every backend implements, [`Delivery`], [`Subscription`].
//! - [`store`]: the [`TaskStore`] trait (the task rules) and [`SledTaskStore`];
//!   [`commit`]: group commit to disk.
//! - [`events`]: [`TaskEvent`]s, what happens to a task, on `events.task.<id>` and `events.<topic>`.
//! - [`kv`]: the [`KvStore`](kv::KvStore) trait (create-if-absent, compare-and-set, TTL, watch) and
//!   [`SledKv`](kv::SledKv).
//! - [`log`]: the [`LogStore`](log::LogStore) trait (append-only logs with a fence on the last
//!   sequence) and [`FilesLog`](log::FilesLog).
//! - [`local`]: the embedded backend (a broker in this process).
//! - `nats` (feature `nats`): the distributed backend on NATS JetStream.
//! - [`open`](mod@open): [`open()`] a bus by [`Backend`]; the only place above which no backend is named.
//! - `clock`: injected time.
//! - `task_id`: task ids that carry their request id's bits, and the record keys they name.

pub mod backend;
pub(crate) mod clock;
pub mod commit;
pub(crate) mod envelope;
pub(crate) mod error;
pub mod events;
pub(crate) mod fast_map;
pub(crate) mod json_text;
pub mod kv;
pub mod local;
pub mod log;
#[cfg(feature = "nats")]
pub mod nats;
pub mod open;
pub mod store;
pub(crate) mod task;
pub(crate) mod task_id;
pub(crate) mod to_end;
pub mod topic;

pub use backend::{Bus, Delivery, LinkStatus, Settle, Subscription};
pub use clock::{Clock, Deadline, ManualClock, Sleep, SystemClock};
pub use envelope::{Envelope, Kind, RequestId, RequestIdError};
pub use error::{BusError, ConflictReason};
pub use events::{TaskEvent, TaskEventKind, TaskEventStream};
pub use local::{LocalBus, LocalOptions};
pub use open::{Backend, BusOptions, KvOpener, OpenBus, connect, open};
pub use store::{Completion, SledTaskStore, StoreExtras, TaskStore};
/// The task store's name in earlier versions.
pub type Ledger = SledTaskStore;
pub use task::{Admission, CancelNotice, Outcome, TaskRecord, TaskState};
pub use topic::Topic;
