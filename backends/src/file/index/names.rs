//! Sessions' names while the index is built: each session numbered once by its name, and the
//! sessions put in order of their names at the end.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

/// A session, numbered by the builder in the order the scan first met it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SessionNo(pub(super) u32);

/// Sessions' numbers by name: a map from a keyed hash of the name (SipHash with a random key,
/// as `HashMap`'s) to the first session with that hash, the names in a list by number. Growing
/// the map moves numbers only, hashing no name again.
#[derive(Debug, Default)]
pub(super) struct Numbers {
    hasher: RandomState,
    by_hash: HashMap<u64, SessionNo, BuildHasherDefault<Hashed>>,
    /// Sessions whose name's hash an earlier session's has (seldom any).
    clashes: HashMap<String, SessionNo>,
    /// By number.
    names: Vec<String>,
}

impl Numbers {
    pub(super) fn get(&self, name: &str) -> Option<SessionNo> {
        self.find(self.hasher.hash_one(name), name)
    }

    fn find(&self, hash: u64, name: &str) -> Option<SessionNo> {
        let no = *self.by_hash.get(&hash)?;
        if self.names.get(no.0 as usize).is_some_and(|n| n == name) {
            return Some(no);
        }
        self.clashes.get(name).copied()
    }

    /// How many sessions are numbered.
    pub(super) fn len(&self) -> usize {
        self.names.len()
    }

    /// Makes room for `n` more sessions.
    pub(super) fn reserve(&mut self, n: usize) {
        self.by_hash.reserve(n);
        self.names.reserve(n);
    }

    /// The names, by number.
    pub(super) fn into_names(self) -> Vec<String> {
        self.names
    }

    /// The session's number, the next one if it has none yet.
    pub(super) fn number(&mut self, name: &str) -> SessionNo {
        let hash = self.hasher.hash_one(name);
        if let Some(no) = self.find(hash, name) {
            return no;
        }
        // Fewer than `u32::MAX` sessions fit in memory: each holds a name and a batch.
        let no = SessionNo(u32::try_from(self.names.len()).unwrap_or(u32::MAX));
        self.names.push(name.to_owned());
        match self.by_hash.entry(hash) {
            Entry::Vacant(v) => {
                v.insert(no);
            }
            Entry::Occupied(_) => {
                self.clashes.insert(name.to_owned(), no);
            }
        }
        no
    }
}

/// A hasher for keys that are hashes already: it hands on the `u64` it is given.
#[derive(Debug, Default)]
struct Hashed(u64);

impl Hasher for Hashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed with it; any other bytes are folded in all the same.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// `sessions` in order of their names. Each is sorted by the 8 bytes of its name after the
/// prefix all names share (what tells most of them apart), then by the whole name: fewer
/// comparisons go to the names themselves.
pub(super) fn by_name<T>(sessions: Vec<(String, T)>) -> Vec<(String, T)> {
    let mut names = sessions.iter().map(|(n, _)| n.as_bytes());
    let shared = names.next().map_or(0, |first| {
        names.fold(first.len(), |k, n| {
            first.iter().zip(n).take(k).take_while(|(a, b)| a == b).count()
        })
    });
    // Zero-padded, the 8 bytes compare as the names do, though two may tie.
    let key = |name: &str| {
        let mut k = [0u8; 8];
        for (to, b) in k.iter_mut().zip(name.as_bytes().iter().skip(shared)) {
            *to = *b;
        }
        u64::from_be_bytes(k)
    };
    let mut order: Vec<(u64, usize)> =
        sessions.iter().enumerate().map(|(i, (name, _))| (key(name), i)).collect();
    order.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0).then_with(|| {
            let name = |i: usize| sessions.get(i).map(|(n, _)| n.as_str());
            name(a.1).cmp(&name(b.1))
        })
    });
    let mut slots: Vec<Option<(String, T)>> = sessions.into_iter().map(Some).collect();
    let sorted: Vec<(String, T)> =
        order.iter().filter_map(|(_, i)| slots.get_mut(*i).and_then(Option::take)).collect();
    debug_assert!(sorted.windows(2).all(|w| matches!(w, [a, b] if a.0 < b.0)));
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_whose_hash_another_has_keeps_a_number_of_its_own() {
        let mut n = Numbers::default();
        let a = n.number("a");
        // "b" hashing as "a" does: its hash taken by "a".
        let hash_b = n.hasher.hash_one("b");
        n.by_hash.remove(&n.hasher.hash_one("a"));
        n.by_hash.insert(hash_b, a);
        let b = n.number("b");
        assert_ne!(a, b);
        assert_eq!((n.get("b"), n.number("b")), (Some(b), b));
        assert_eq!(n.names, vec!["a".to_owned(), "b".to_owned()]);
    }

    #[test]
    fn names_sorted_by_the_bytes_after_their_shared_prefix_come_out_in_order() {
        let names = ["ab-9", "ab-10", "ab-1", "ab-", "ab-1\u{0}", "ab-100000000", "ab-10000000"];
        let sorted = by_name(names.iter().map(|n| (n.to_string(), ())).collect());
        let mut want = names.to_vec();
        want.sort_unstable();
        assert_eq!(sorted.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), want);
    }
}
