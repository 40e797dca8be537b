//! Opening a bus by backend: the one place that names a concrete backend, so the runtime above
//! holds only [`Bus`] and [`TaskStore`] and a second backend is a new [`Backend`] variant here.

use crate::backend::Bus;
use crate::clock::{Clock, SystemClock};
use crate::error::BusError;
use crate::kv::{KvStore, SledKv};
use crate::local::{LocalBus, LocalOptions};
use crate::store::{DEFAULT_WINDOW, SledTaskStore, StoreExtras, TaskStore};
use std::sync::Arc;
use std::time::Duration;

/// Which backend carries the messages.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum Backend {
    /// The embedded bus: a broker in this process, tasks journaled in sled.
    #[default]
    Local,
    /// NATS JetStream: several processes under one prefix form one bus (opened by [`connect`]).
    #[cfg(feature = "nats")]
    Nats(crate::nats::NatsOptions),
}

/// What [`open`] needs besides the database.
#[derive(Clone)]
pub struct BusOptions {
    /// The backend to open.
    pub backend: Backend,
    /// How long a finished request id is remembered.
    pub dedup_window: Duration,
    /// Deliveries of one task before it fails for good.
    pub max_attempts: u32,
    /// The time source.
    pub clock: Arc<dyn Clock>,
    /// What the task store has beyond its database (the refusal journal of admissions answered
    /// as failed; a flush fault in tests).
    pub store: StoreExtras,
    /// Bytes the embedded bus's in-memory task event logs may hold together.
    pub replay_bytes: usize,
}

impl Default for BusOptions {
    fn default() -> Self {
        Self {
            backend: Backend::Local,
            dedup_window: DEFAULT_WINDOW,
            max_attempts: 5,
            clock: Arc::new(SystemClock),
            store: StoreExtras::default(),
            replay_bytes: crate::local::DEFAULT_REPLAY_BYTES,
        }
    }
}

/// An open bus: the bus itself and the task store behind it.
#[derive(Clone)]
pub struct OpenBus {
    /// The bus every part talks over.
    pub bus: Arc<dyn Bus>,
    /// Its task store. Outcomes recorded through it emit their task events, as the bus's own do.
    pub ledger: Arc<dyn TaskStore>,
    /// Opens key-value stores on the same backend (sled trees, or JetStream KV buckets).
    pub kv: KvOpener,
}

/// Opens [`KvStore`]s by name on the backend of a bus: a sled tree `kv.<name>` of the process's
/// database (time from its clock), or the JetStream KV bucket `<prefix>_<name>` every node shares.
#[derive(Clone)]
pub struct KvOpener {
    inner: KvInner,
}

#[derive(Clone)]
enum KvInner {
    Sled {
        db: sled::Db,
        clock: Arc<dyn Clock>,
    },
    #[cfg(feature = "nats")]
    Nats(Box<crate::nats::Nats>),
}

impl KvOpener {
    /// Key-value stores in sled trees of `db`.
    pub fn sled(db: sled::Db, clock: Arc<dyn Clock>) -> Self {
        Self {
            inner: KvInner::Sled { db, clock },
        }
    }

    /// True when the stores it opens are shared with other processes (JetStream KV), false for
    /// this process's sled trees.
    pub fn is_shared(&self) -> bool {
        match &self.inner {
            KvInner::Sled { .. } => false,
            #[cfg(feature = "nats")]
            KvInner::Nats(_) => true,
        }
    }

    /// The log store of `kind` (`[a-z0-9_]`) every node shares (a JetStream stream, created
    /// when missing); `None` for the embedded backend, whose logs stay files of the process.
    pub async fn shared_log(
        &self,
        kind: &str,
    ) -> Result<Option<Arc<dyn crate::log::LogStore>>, BusError> {
        match &self.inner {
            KvInner::Sled { .. } => {
                let _ = kind;
                Ok(None)
            }
            #[cfg(feature = "nats")]
            KvInner::Nats(nats) => Ok(Some(Arc::new(
                crate::nats::NatsLog::open(nats, kind).await?,
            ))),
        }
    }

    /// The store `name` (`[a-z0-9_]`), created when missing.
    pub async fn open(&self, name: &str) -> Result<Arc<dyn KvStore>, BusError> {
        match &self.inner {
            KvInner::Sled { db, clock } => {
                let kv = SledKv::open(db, &format!("kv.{name}"), clock.clone())
                    .map_err(|e| BusError::storage(format!("open key-value store {name}"), e))?;
                Ok(Arc::new(kv))
            }
            #[cfg(feature = "nats")]
            KvInner::Nats(nats) => Ok(Arc::new(crate::nats::NatsKv::open(nats, name).await?)),
        }
    }
}

/// Opens the bus `opts.backend` names: [`open`] for the embedded one; for NATS, connects (with
/// retries), checks the server (version, JetStream) and opens the stream and buckets, every
/// failure an error naming the URL. Must be called inside a tokio runtime (an actix `System` has
/// one).
pub async fn connect(opts: BusOptions, db: sled::Db) -> Result<OpenBus, BusError> {
    match &opts.backend {
        Backend::Local => open(opts, db),
        #[cfg(feature = "nats")]
        Backend::Nats(nats) => {
            let nats = crate::nats::Nats::connect(nats.clone()).await?;
            let nats_handle = nats.clone();
            let bus = crate::nats::NatsBus::open(
                nats,
                opts.clock.clone(),
                opts.dedup_window,
                opts.max_attempts,
            )
            .await?;
            let ledger = bus.store().clone();
            let kv = KvOpener {
                inner: KvInner::Nats(Box::new(nats_handle)),
            };
            Ok(OpenBus {
                bus: Arc::new(bus),
                ledger,
                kv,
            })
        }
    }
}

/// Opens the embedded bus over `db`, re-queueing every unfinished task (a network backend is
/// opened by [`connect`]). Must be called inside a tokio runtime (an actix `System` has one).
pub fn open(opts: BusOptions, db: sled::Db) -> Result<OpenBus, BusError> {
    match opts.backend {
        Backend::Local => {
            let kv = KvOpener::sled(db.clone(), opts.clock.clone());
            let store =
                SledTaskStore::with_extras(db, opts.clock.clone(), opts.dedup_window, opts.store)?;
            let local = LocalBus::with_store(
                Arc::new(store),
                LocalOptions {
                    dedup_window: opts.dedup_window,
                    max_attempts: opts.max_attempts,
                    clock: opts.clock,
                    replay_bytes: opts.replay_bytes,
                },
            );
            let ledger = local.ledger().clone();
            Ok(OpenBus {
                bus: Arc::new(local),
                ledger,
                kv,
            })
        }
        #[cfg(feature = "nats")]
        Backend::Nats(nats) => Err(BusError::Invalid(format!(
            "the NATS bus at {} is opened with bus::connect",
            nats.url
        ))),
    }
}
