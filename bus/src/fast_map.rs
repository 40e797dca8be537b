//! The hash map of the bus's per-task paths: the store's kept records, the task event logs, the
//! broker's and the listeners' topics.
//!
//! std's `HashMap` hashes with SipHash-1-3: a bus task hashed a key about 28 times, and those
//! hashes were 5 % of its instructions. foldhash costs a fraction of that for keys this short. Its
//! seed differs per process (drawn from where the address-space randomisation put the stack, the
//! code and the heap, and from the clock; std's comes from the OS's random source) and per map,
//! so no fixed list of keys collides in every daemon; it does not claim to stand against an
//! attacker who studies one daemon's timings to learn its seed. The one map here keyed by text
//! from outside, the store's kept records (by request id), holds at most two generations of
//! 512 KiB of records of tasks in flight (a few thousand entries at most), so even keys made to
//! collide cost a bounded scan there, not an unbounded one; the others are keyed by ids and
//! topics this process made or subscribed.

/// A `HashMap` hashed with foldhash (see the module's text); made with `FastMap::default()`.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
