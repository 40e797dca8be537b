//! `[store]` of `clawbus.toml`: what the embedded store may keep in memory.
//!
//! ```toml
//! [store]
//! cache = 4194304        # bytes of sled's page cache (default 4 MiB; sled's own default is 1 GiB)
//! replay_log = 1048576   # bytes of the in-memory task event logs replays are answered from
//! ```
//!
//! Both are upper bounds on memory that follows the volume of work; a larger cache keeps more of
//! the store in memory (fewer reads), a larger replay log answers more replays from memory instead
//! of synthesising them from the store.

use super::Problem;
use super::span::Source;
use super::validate::byte_size;
use serde::Deserialize;
use toml::Spanned;

/// Default bytes of sled's page cache. A task's records are written and read again within its
/// turn, so the cache serves the tasks in flight; older records (a duplicate of a request from
/// long ago, a listing) are read from disk. 4 MiB rather than 8: 4 MiB less resident under load
/// (`benches/memory.py`, BENCHMARKS.md "A turn's code laid out together, smaller store budgets").
pub const DEFAULT_STORE_CACHE: usize = 4 * 1024 * 1024;

/// `[store]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StoreFile {
    pub cache: Option<Spanned<i64>>,
    pub replay_log: Option<Spanned<i64>>,
}

/// The validated `[store]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreDef {
    /// Bytes of sled's page cache.
    pub cache: usize,
    /// Bytes the in-memory task event logs may hold together.
    pub replay_log: usize,
}

impl Default for StoreDef {
    fn default() -> Self {
        Self {
            cache: DEFAULT_STORE_CACHE,
            replay_log: bus::local::DEFAULT_REPLAY_BYTES,
        }
    }
}

/// Validates `[store]`: each a number of bytes from 1 to 1 GiB, else a problem at its
/// `file:line:col`.
pub(super) fn store_def(src: &Source, f: &StoreFile, problems: &mut Vec<Problem>) -> StoreDef {
    let d = StoreDef::default();
    StoreDef {
        cache: byte_size(src, &f.cache, "store.cache", d.cache, problems),
        replay_log: byte_size(
            src,
            &f.replay_log,
            "store.replay_log",
            d.replay_log,
            problems,
        ),
    }
}
