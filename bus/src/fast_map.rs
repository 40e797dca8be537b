//! The hash map of the bus's per-task paths (the store's kept records, the task event logs, the
//! broker's topics).
//!
//! std's `HashMap` hashes with SipHash-1-3: a bus task hashed a key about 28 times and those
//! hashes were 5 % of its instructions. foldhash is several times cheaper for keys this short
//! and, like std's, seeded at random per process (and per map), so keys taken from outside (a
//! request id, a topic) cannot be chosen to collide without knowing the seed; the maps that hold
//! such keys are bounded besides.

/// A `HashMap` hashed with foldhash (see the module's text); made with `FastMap::default()`.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
