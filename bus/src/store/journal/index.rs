//! The journal's index: for each tree, where each key's latest value is, by the key's first 8
//! bytes. The keys themselves stay in the file (each frame holds its key just before its value):
//! about 40 bytes a key in memory, where a map holding the keys took about 200 for the
//! daemon's record keys (8 bytes of the request id's hash and the request id), and grew the
//! daemon by that much for every task of the dedup window.

use crate::fast_map::FastMap;

/// Where a key's latest value is: the value's offset in the journal's bytes (the file, then the
/// bytes not yet written to it), its length, and its key's length (the key lies just before
/// the value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Loc {
    pub(super) at: u64,
    pub(super) len: u32,
    pub(super) key_len: u16,
}

impl Loc {
    /// Where the key is.
    pub(super) fn key_at(&self) -> u64 {
        self.at - u64::from(self.key_len)
    }

    /// The bytes of this entry's frame.
    pub(super) fn frame_len(&self) -> u64 {
        (super::FRAME_HEAD + super::BODY_HEAD) as u64
            + u64::from(self.key_len)
            + u64::from(self.len)
    }
}

/// The locations of the keys sharing one head: one, but for keys whose first 8 bytes agree
/// (62 bits of a hash, or a time and a hash, for the record keys).
#[derive(Debug)]
pub(super) enum Locs {
    One(Loc),
    Many(Vec<Loc>),
}

impl Locs {
    pub(super) fn as_slice(&self) -> &[Loc] {
        match self {
            Self::One(l) => std::slice::from_ref(l),
            Self::Many(v) => v,
        }
    }

    pub(super) fn as_mut_slice(&mut self) -> &mut [Loc] {
        match self {
            Self::One(l) => std::slice::from_mut(l),
            Self::Many(v) => v,
        }
    }
}

/// The first 8 bytes of `key` as a number (zero-padded).
pub(super) fn head(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

/// One tree's index.
#[derive(Default)]
pub(super) struct Keys {
    by_head: FastMap<u64, Locs>,
    count: usize,
}

impl Keys {
    /// How many keys.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.count
    }

    /// The locations of the keys whose head is `head`.
    pub(super) fn at_head(&self, head: u64) -> &[Loc] {
        self.by_head.get(&head).map_or(&[], Locs::as_slice)
    }

    /// Every head, in no particular order.
    pub(super) fn heads(&self) -> Vec<u64> {
        self.by_head.keys().copied().collect()
    }

    /// Every location, with its head.
    pub(super) fn all(&self) -> impl Iterator<Item = (u64, &Loc)> {
        self.by_head
            .iter()
            .flat_map(|(h, locs)| locs.as_slice().iter().map(move |l| (*h, l)))
    }

    /// Every location, mutably.
    pub(super) fn all_mut(&mut self) -> impl Iterator<Item = &mut Loc> {
        self.by_head
            .values_mut()
            .flat_map(|locs| locs.as_mut_slice().iter_mut())
    }

    /// Replaces `old` (a location under `head`, matched by its offset) with `new`: adds `new`
    /// when `old` is `None`, removes `old` when `new` is `None`.
    pub(super) fn replace(&mut self, head: u64, old: Option<Loc>, new: Option<Loc>) {
        if let Some(old) = old {
            let Some(locs) = self.by_head.get_mut(&head) else {
                return;
            };
            match locs {
                Locs::One(l) if l.at == old.at => match new {
                    Some(n) => {
                        *l = n;
                        return;
                    }
                    None => {
                        self.by_head.remove(&head);
                        self.count -= 1;
                        return;
                    }
                },
                Locs::One(_) => {}
                Locs::Many(v) => {
                    if let Some(i) = v.iter().position(|l| l.at == old.at) {
                        match new {
                            Some(n) => {
                                v[i] = n;
                                return;
                            }
                            None => {
                                v.swap_remove(i);
                                self.count -= 1;
                                if v.len() == 1 {
                                    *locs = Locs::One(v[0]);
                                }
                                return;
                            }
                        }
                    }
                }
            }
        }
        let Some(new) = new else { return };
        self.count += 1;
        match self.by_head.get_mut(&head) {
            None => {
                self.by_head.insert(head, Locs::One(new));
            }
            Some(Locs::One(l)) => {
                let first = *l;
                self.by_head.insert(head, Locs::Many(vec![first, new]));
            }
            Some(Locs::Many(v)) => v.push(new),
        }
    }

    /// Moves the location at `old_at` under `head` to `new`; false when none is there.
    pub(super) fn moved(&mut self, head: u64, old_at: u64, new: Loc) -> bool {
        let Some(locs) = self.by_head.get_mut(&head) else {
            return false;
        };
        match locs.as_mut_slice().iter_mut().find(|l| l.at == old_at) {
            Some(l) => {
                *l = new;
                true
            }
            None => false,
        }
    }
}
