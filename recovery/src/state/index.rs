//! Call id → the call an event naming it belongs to, without cloning ids on the hot path.
//!
//! The map is keyed by a 64-bit hash of the id (FNV-1a with a final mix: fast on short ids, no
//! randomness). A slot is checked against the call's real id; ids whose hashes collide are kept in
//! a second map keyed by the id itself (SipHash), so a lookup stays O(1) whatever the ids are.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use stepjournal_codec::CallId;

/// Passes a `u64` that is already a hash through unchanged.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) ^ u64::from(b) ^ (self.0 >> 56);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type FixedSip = BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

fn hash(id: &CallId) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in id.as_str().as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // splitmix64's finalizer spreads the bits the table reads.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CallIndex {
    by_hash: HashMap<u64, u32, BuildHasherDefault<PassThrough>>,
    /// Ids whose hash slot holds another id.
    collided: HashMap<CallId, u32, FixedSip>,
}

impl CallIndex {
    /// The call bound to `id`; `id_of` gives a call's id by index.
    pub(crate) fn get<'a>(
        &self,
        id: &CallId,
        id_of: impl Fn(u32) -> Option<&'a CallId>,
    ) -> Option<u32> {
        self.get_hashed(hash(id), id, id_of)
    }

    fn get_hashed<'a>(
        &self,
        h: u64,
        id: &CallId,
        id_of: impl Fn(u32) -> Option<&'a CallId>,
    ) -> Option<u32> {
        if let Some(&i) = self.by_hash.get(&h)
            && id_of(i) == Some(id)
        {
            return Some(i);
        }
        if self.collided.is_empty() { None } else { self.collided.get(id).copied() }
    }

    /// Makes room for `n` more ids.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.by_hash.reserve(n);
    }

    /// Binds `id` to call `index`.
    pub(crate) fn insert<'a>(
        &mut self,
        id: &CallId,
        index: u32,
        id_of: impl Fn(u32) -> Option<&'a CallId>,
    ) {
        self.insert_hashed(hash(id), id, index, id_of);
    }

    fn insert_hashed<'a>(
        &mut self,
        h: u64,
        id: &CallId,
        index: u32,
        id_of: impl Fn(u32) -> Option<&'a CallId>,
    ) {
        if let Some(&old) = self.by_hash.get(&h)
            && let Some(old_id) = id_of(old).filter(|o| *o != id)
        {
            self.collided.insert(old_id.clone(), old);
        }
        self.by_hash.insert(h, index);
        if !self.collided.is_empty() {
            self.collided.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_whose_hashes_collide_are_still_found() {
        let ids: Vec<CallId> = ["a", "b", "c", "a"].into_iter().map(CallId::new).collect();
        let id_of = |i: u32| ids.get(i as usize);
        let mut index = CallIndex::default();
        // Every id lands in one slot, as if all their hashes were equal.
        for (i, id) in ids.iter().enumerate() {
            index.insert_hashed(7, id, i as u32, id_of);
        }
        assert_eq!(index.get_hashed(7, &ids[1], id_of), Some(1));
        assert_eq!(index.get_hashed(7, &ids[2], id_of), Some(2));
        assert_eq!(index.get_hashed(7, &ids[0], id_of), Some(3), "the latest binding wins");
        assert_eq!(index.get_hashed(7, &CallId::new("z"), id_of), None);
    }
}
