//! Task ids that name their record: a task's id carries 62 bits of a hash of its request id, and
//! the embedded store keys its records by the same 62 bits before the request id. A record is
//! then found from its task id by a prefix scan, with no index written per task.
//!
//! A task id is a UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, the version, 12 bits that keep
//! ids made in one millisecond by one process in order, the variant, then the request id's 62
//! bits ([`prefix_of`]): from SHA-256(`clawbus task id` ‖ 0 ‖ request id), led by the time of a
//! UUIDv7 the request id begins with. The hash is cryptographic so that nobody can make many
//! request ids share all 62 bits (which would make those lookups scan them all) unless they choose
//! UUIDv7-led ids of one millisecond, which only slows the lookups of their own tasks; it is
//! unkeyed so that every process, on every machine, works out the same bits for a request id.
//!
//! An envelope whose id does not carry its request id's bits (made by an earlier version, by hand,
//! or given another request id after it was made) still works: the store then writes the
//! task-id index entry, as before.

use crate::envelope::RequestId;
use sha2::{Digest as _, Sha256};
use std::sync::atomic::{AtomicU64, Ordering};
use uuid::Uuid;

/// What the hash is of, before the request id: these bits mean nothing else.
const DOMAIN: &[u8] = b"clawbus task id\0";

/// The 62 bits a request id's task ids carry, as the 8 bytes that start its record's key: the
/// first byte keeps 6 bits (the id's variant takes the other 2).
///
/// A request id that begins with a UUIDv7 (every id the daemon makes, and the ids derived from
/// them) puts that UUID's 46 low bits of milliseconds first, then 16 bits of the hash: its
/// records are then written in time order, at the tree's end, as its text keyed them before,
/// instead of all over the tree (which kept every leaf in use: 60 MiB instead of 44 after 30,000
/// daemon tasks). Any other request id's bits are 62 bits of the hash.
///
/// Worked out once per request id (its clones share them).
pub(crate) fn prefix_of(request_id: &RequestId) -> [u8; 8] {
    *request_id.bits(|text| {
        let digest = Sha256::new()
            .chain_update(DOMAIN)
            .chain_update(text.as_bytes())
            .finalize();
        let hash = u64::from_be_bytes([
            digest[0], digest[1], digest[2], digest[3], digest[4], digest[5], digest[6], digest[7],
        ]);
        let bits = match leading_v7_millis(text) {
            Some(ms) => (ms & MILLIS_MASK) << 16 | hash >> 48,
            None => hash,
        };
        (bits & BITS_MASK).to_be_bytes()
    })
}

/// The 62 bits kept (the id's variant takes the other 2).
const BITS_MASK: u64 = (1 << 62) - 1;

/// The milliseconds kept of a leading UUIDv7 (46 bits: until the year 4199).
const MILLIS_MASK: u64 = (1 << 46) - 1;

/// The Unix milliseconds of the UUIDv7 that `text` begins with (hyphenated, 36 characters).
fn leading_v7_millis(text: &str) -> Option<u64> {
    let id = Uuid::try_parse(text.get(..36)?).ok()?;
    if id.get_version_num() != 7 {
        return None;
    }
    Some(unix_millis(&id))
}

/// A UUIDv7's 48 bits of Unix milliseconds.
fn unix_millis(id: &Uuid) -> u64 {
    id.as_bytes()[..6]
        .iter()
        .fold(0, |n, b| n << 8 | u64::from(*b))
}

/// The last minted id's milliseconds and sequence (`ms << 12 | seq`), so that ids this process
/// mints are unique and in order even for one request id in one millisecond.
static LAST: AtomicU64 = AtomicU64::new(0);

/// A fresh task id for `request_id`: time-ordered, unique in this process, carrying the request
/// id's bits.
pub(crate) fn mint(request_id: &RequestId) -> Uuid {
    let fresh = Uuid::now_v7();
    let ms = unix_millis(&fresh);
    let mut bytes = fresh.into_bytes();
    // The millisecond, and the 12 bits after the version (the uuid crate's random start of its
    // counter for this millisecond): the start of this millisecond's sequence.
    let start = ms << 12 | (u64::from(bytes[6] & 0x07) << 8 | u64::from(bytes[7]));
    let mut last = LAST.load(Ordering::Relaxed);
    let stamp = loop {
        // A sequence that runs past 12 bits borrows the next millisecond, as RFC 9562 allows.
        let next = if start > last { start } else { last + 1 };
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(now) => last = now,
        }
    };
    bytes[..6].copy_from_slice(&(stamp >> 12).to_be_bytes()[2..]);
    bytes[6] = 0x70 | ((stamp >> 8) & 0x0f) as u8;
    bytes[7] = stamp as u8;
    let prefix = prefix_of(request_id);
    bytes[8] = 0x80 | prefix[0];
    bytes[9..].copy_from_slice(&prefix[1..]);
    Uuid::from_bytes(bytes)
}

/// The record key prefix `task_id` carries, when it is a UUIDv7 of the RFC variant (whether
/// it is really its request id's is known only with the request id: see [`carries`]).
pub(crate) fn prefix_in(task_id: Uuid) -> Option<[u8; 8]> {
    let bytes = task_id.as_bytes();
    if task_id.get_version_num() != 7 || bytes[8] & 0xc0 != 0x80 {
        return None;
    }
    let mut prefix = [0u8; 8];
    prefix.copy_from_slice(&bytes[8..]);
    prefix[0] &= 0x3f;
    Some(prefix)
}

/// Whether `task_id` carries the bits of `prefix` (a request id's, from [`prefix_of`]).
pub(crate) fn carries(task_id: Uuid, prefix: &[u8; 8]) -> bool {
    prefix_in(task_id).as_ref() == Some(prefix)
}

/// The key of `request_id`'s record in the embedded store: its prefix, then its store key.
pub(crate) fn record_key(request_id: &RequestId) -> Vec<u8> {
    let prefix = prefix_of(request_id);
    let store_key = request_id.store_key();
    let mut key = Vec::with_capacity(prefix.len() + store_key.len());
    key.extend_from_slice(&prefix);
    key.extend_from_slice(store_key.as_bytes());
    key
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn rid(s: &str) -> RequestId {
        RequestId::parse(s).unwrap()
    }

    #[test]
    fn a_minted_id_is_a_time_ordered_uuid_v7_carrying_its_request_ids_bits() {
        let a = mint(&rid("job-1"));
        assert_eq!(a.get_version_num(), 7);
        assert_eq!(a.get_variant(), uuid::Variant::RFC4122);
        assert!(carries(a, &prefix_of(&rid("job-1"))));
        assert!(!carries(a, &prefix_of(&rid("job-2"))));
        // Many in one millisecond, for one request id: all different, in order.
        let mut last = a;
        for _ in 0..10_000 {
            let b = mint(&rid("job-1"));
            assert!(b.as_bytes()[..8] > last.as_bytes()[..8], "{b} after {last}");
            assert_eq!(b.get_version_num(), 7);
            last = b;
        }
        let plain = Uuid::now_v7();
        assert_eq!(prefix_in(plain).map(|_| ()), Some(()));
        assert!(!carries(plain, &prefix_of(&rid("job-1"))));
        assert_eq!(prefix_in(Uuid::new_v4()), None);
        assert_eq!(prefix_in(Uuid::nil()), None);
    }

    #[test]
    fn request_ids_made_in_time_order_key_their_records_in_time_order() {
        let mut ids: Vec<RequestId> = (0..200).map(|_| RequestId::random()).collect();
        ids.push(rid(&format!("{}/writer", RequestId::random())));
        let prefixes: Vec<[u8; 8]> = ids.iter().map(prefix_of).collect();
        for (id, p) in ids.iter().zip(&prefixes) {
            let ms = leading_v7_millis(id.as_str()).unwrap();
            let millis = u64::from_be_bytes(*p) >> 16;
            assert_eq!(millis, ms & MILLIS_MASK, "{id}");
            assert!(carries(mint(id), p));
        }
        for pair in prefixes.windows(2) {
            assert!(pair[0][..6] <= pair[1][..6], "time order kept");
        }
        // Only a UUID of version 7 at the start counts.
        assert_eq!(leading_v7_millis(&Uuid::new_v4().to_string()), None);
        assert_eq!(leading_v7_millis("01890a5d-ac96"), None);
        assert_eq!(
            leading_v7_millis("x01890a5d-ac96-774b-bcce-b302099a8057"),
            None
        );
    }

    #[test]
    fn the_bits_are_the_same_in_every_version_and_process() {
        // Records on disk are keyed by these bits: they must never change.
        assert_eq!(
            prefix_of(&rid("job-1")),
            [0x3e, 0x26, 0xad, 0x7f, 0xab, 0xbf, 0x84, 0x5c]
        );
        let v7 = prefix_of(&rid("01890a5d-ac96-774b-bcce-b302099a8057"));
        assert_eq!(&v7[..6], &[0x01, 0x89, 0x0a, 0x5d, 0xac, 0x96]);
        let key = record_key(&rid("x.y"));
        assert_eq!(&key[..8], &prefix_of(&rid("x.y")));
        assert_eq!(&key[8..], b"x_2Ey");
    }
}
