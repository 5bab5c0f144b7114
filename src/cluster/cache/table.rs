//! `Table`: an index from object keys to positions in one of the snapshot's vectors.
//!
//! The cache keeps its objects *in* the `ClusterSnapshot` vectors the engine reads, so a
//! pass borrows them instead of copying. Upserts overwrite in place; removals swap the last
//! item into the hole, which keeps the vector dense at O(1) per change.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// Keys are object names: foldhash (seeded per process) hashes them several times faster
/// than the standard SipHash, which showed at the top of a 30,000-pod list's profile.
type Hasher = foldhash::fast::RandomState;

/// The most objects of one kind a list's announced count reserves room for: Kubernetes'
/// own tested limit of a cluster's pods (150,000). A larger list still fits, by growing.
const MAX_EXPECTED: usize = 150_000;

#[derive(Debug)]
pub struct Table<K> {
    /// Key of the item at each position of the vector this table indexes.
    keys: Vec<K>,
    index: HashMap<K, usize, Hasher>,
    /// Keys seen since the watch restarted a list; `None` outside a re-list.
    relisting: Option<HashSet<K, Hasher>>,
}

impl<K> Default for Table<K> {
    fn default() -> Self {
        Table {
            keys: Vec::new(),
            index: HashMap::default(),
            relisting: None,
        }
    }
}

impl<K: Clone + Eq + Hash> Table<K> {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn get<'a, T>(&self, items: &'a [T], key: &K) -> Option<&'a T> {
        self.index.get(key).and_then(|&i| items.get(i))
    }

    /// Puts `item` under `key`; returns the item it replaced.
    pub fn upsert<T>(&mut self, items: &mut Vec<T>, key: K, item: T) -> Option<T> {
        if let Some(seen) = &mut self.relisting {
            seen.insert(key.clone());
        }
        match self.index.get(&key) {
            Some(&i) if i < items.len() => Some(std::mem::replace(&mut items[i], item)),
            _ => {
                self.index.insert(key.clone(), items.len());
                grow(&mut self.keys);
                self.keys.push(key);
                grow(items);
                items.push(item);
                None
            }
        }
    }

    /// Removes the item under `key`, if there is one, and returns it.
    pub fn remove<T>(&mut self, items: &mut Vec<T>, key: &K) -> Option<T> {
        let i = self.index.remove(key)?;
        if i >= items.len() || i >= self.keys.len() {
            return None;
        }
        let removed = items.swap_remove(i);
        self.keys.swap_remove(i);
        if let Some(moved) = self.keys.get(i) {
            self.index.insert(moved.clone(), i);
        }
        Some(removed)
    }

    /// A watch restarted its list: from now on, remember which keys it sends again. A first
    /// list (nothing held) has nothing to drop at its end, and remembers nothing.
    pub fn begin_relist(&mut self) {
        self.relisting = (!self.keys.is_empty()).then(HashSet::default);
    }

    /// The list under way holds at most `total` objects: room for them all at once, and the
    /// eighth a list leaves (`fit`), so that the vectors are not copied as they grow through
    /// the pages, nor by the first objects after the list. Reserved exactly, a list left its
    /// vector full: the first pod of a burst copied 30,000 pods' vector into one a quarter
    /// larger, both held at once (13 MiB, the hub's peak at 1,000 nodes). Capped at
    /// `MAX_EXPECTED`; what the list leaves unused is given back at its end (`fit`), and
    /// room never written to costs address space, not memory.
    pub fn expect<T>(&mut self, items: &mut Vec<T>, total: usize) {
        let total = total.min(MAX_EXPECTED);
        let total = total + room(total);
        let more = total.saturating_sub(items.len());
        // An allocation refused leaves the growth as it was.
        let _ = items.try_reserve_exact(more);
        let _ = self
            .keys
            .try_reserve_exact(total.saturating_sub(self.keys.len()));
        let _ = self
            .index
            .try_reserve(total.saturating_sub(self.index.len()));
        if let Some(seen) = &mut self.relisting {
            let _ = seen.try_reserve(total.saturating_sub(seen.len()));
        }
    }

    /// The list is complete: drop what it did not contain (deleted while the watch was
    /// down). Returns how many items went.
    pub fn end_relist<T>(&mut self, items: &mut Vec<T>) -> usize {
        let gone: Vec<K> = match self.relisting.take() {
            Some(seen) => self
                .keys
                .iter()
                .filter(|k| !seen.contains(*k))
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        for key in &gone {
            self.remove(items, key);
        }
        self.fit(items);
        gone.len()
    }

    /// Gives back what the list's growth left unused beyond a little room.
    fn fit<T>(&mut self, items: &mut Vec<T>) {
        items.shrink_to(items.len() + room(items.len()));
        self.keys.shrink_to(self.keys.len() + room(self.keys.len()));
        self.index
            .shrink_to(self.index.len() + room(self.index.len()));
    }
}

/// Room kept or added beyond `len` items: an eighth.
fn room(len: usize) -> usize {
    len / 8 + 1
}

/// Makes room for one more item by a quarter rather than `Vec`'s doubling: a small cluster's
/// objects are mostly that slack otherwise (up to half of each vector), a thousand times
/// over; still geometric, so a list of thousands stays amortised O(1) a push.
fn grow<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact(v.len() / 4 + 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upserts_replace_in_place_and_removals_keep_the_index_true() {
        let mut t = Table::default();
        let mut items = Vec::new();
        for (k, v) in [("a", 1), ("b", 2), ("c", 3)] {
            assert_eq!(t.upsert(&mut items, k, v), None);
        }
        assert_eq!(t.upsert(&mut items, "b", 20), Some(2));
        assert_eq!(t.remove(&mut items, &"a"), Some(1));
        assert_eq!(t.remove(&mut items, &"a"), None);
        assert_eq!(t.get(&items, &"c"), Some(&3));
        assert_eq!(t.get(&items, &"b"), Some(&20));
        assert_eq!(items.len(), 2);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn a_relist_drops_what_it_did_not_send_again() {
        let mut t = Table::default();
        let mut items = Vec::new();
        for k in ["a", "b", "c", "d"] {
            t.upsert(&mut items, k, k.to_uppercase());
        }
        t.begin_relist();
        t.upsert(&mut items, "b", "B2".to_string());
        t.upsert(&mut items, "e", "E".to_string());
        assert_eq!(t.end_relist(&mut items), 3);
        let mut left = items.clone();
        left.sort();
        assert_eq!(left, ["B2", "E"]);
        assert_eq!(t.get(&items, &"e").map(String::as_str), Some("E"));
        assert_eq!(t.get(&items, &"a"), None);
    }

    #[test]
    fn a_list_announced_fills_its_room_without_moving_and_a_first_list_tracks_nothing() {
        let mut t = Table::default();
        let mut items: Vec<u64> = Vec::new();
        t.begin_relist();
        assert!(
            t.relisting.is_none(),
            "nothing held: nothing to drop at the end"
        );
        t.expect(&mut items, 1000);
        let (at, room) = (items.as_ptr(), items.capacity());
        assert!(room >= 1000);
        for k in 0..1000 {
            t.upsert(&mut items, k, k);
        }
        assert_eq!(items.as_ptr(), at, "the vector was copied as it grew");
        assert_eq!(t.end_relist(&mut items), 0);
        assert_eq!(items.len(), 1000);
        // The list's end leaves room for an eighth more: the objects that follow it (a
        // burst of new pods) do not copy the vector either.
        for k in 1000..1000 + 1000 / 8 {
            t.upsert(&mut items, k, k);
        }
        assert_eq!(items.as_ptr(), at, "the vector was copied after the list");
        for k in 1000..1000 + 1000 / 8 {
            t.remove(&mut items, &k);
        }
        // A relist tracks what it sees again; an announced count past the cap reserves the
        // cap, and what it left unused is given back.
        t.begin_relist();
        t.expect(&mut items, usize::MAX);
        assert!(items.capacity() >= MAX_EXPECTED);
        for k in 0..10 {
            t.upsert(&mut items, k, k);
        }
        assert_eq!(t.end_relist(&mut items), 990);
        assert!(items.capacity() <= 10 + 10 / 8 + 1, "{}", items.capacity());
    }

    #[test]
    fn vectors_grow_by_a_quarter_and_a_list_leaves_an_eighth_of_room() {
        let mut t = Table::default();
        let mut items = Vec::new();
        t.begin_relist();
        for k in 0..1000 {
            t.upsert(&mut items, k, k);
        }
        assert!(
            items.capacity() <= 1000 + 1000 / 4 + 4,
            "{}",
            items.capacity()
        );
        t.end_relist(&mut items);
        assert!(
            items.capacity() <= 1000 + 1000 / 8 + 1,
            "{}",
            items.capacity()
        );
        assert!(t.keys.capacity() <= 1000 + 1000 / 8 + 1);
        assert_eq!(t.get(&items, &999), Some(&999));
    }
}
