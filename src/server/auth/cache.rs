//! The reviews' answers, kept a short while so that a Prometheus scraping every few seconds
//! or a dashboard polling costs the management cluster one review per minute, not one per
//! request. Bounded: when full, expired entries go first, then those closest to expiring,
//! so that many tokens or paths cannot grow it without end.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(super) struct TtlCache<K, V> {
    capacity: usize,
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    pub(super) fn new(capacity: usize) -> TtlCache<K, V> {
        TtlCache {
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn get(&self, key: &K, now: Instant) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match entries.get(key) {
            Some((v, expires)) if *expires > now => Some(v.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    pub(super) fn insert(&self, key: K, value: V, ttl: Duration, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, (_, expires)| *expires > now);
        }
        while entries.len() >= self.capacity && !entries.contains_key(&key) {
            let soonest = entries
                .iter()
                .min_by_key(|(_, (_, expires))| *expires)
                .map(|(k, _)| k.clone());
            match soonest {
                Some(k) => entries.remove(&k),
                None => break,
            };
        }
        entries.insert(key, (value, now + ttl));
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn an_entry_lives_for_its_ttl_only() {
        let c = TtlCache::new(4);
        let t0 = Instant::now();
        c.insert("a", 1, MINUTE, t0);
        assert_eq!(c.get(&"a", t0 + Duration::from_secs(59)), Some(1));
        assert_eq!(c.get(&"a", t0 + MINUTE), None);
        assert_eq!(c.len(), 0, "an expired entry is dropped when met");
    }

    #[test]
    fn a_full_cache_drops_the_expired_then_the_soonest_to_expire() {
        let c = TtlCache::new(3);
        let t0 = Instant::now();
        c.insert("short", 1, Duration::from_secs(1), t0);
        c.insert("long", 2, MINUTE * 10, t0);
        c.insert("mid", 3, MINUTE, t0);
        c.insert("new", 4, MINUTE, t0 + Duration::from_secs(2));
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&"short", t0), None, "expired, dropped first");
        c.insert("newer", 5, MINUTE * 5, t0 + Duration::from_secs(3));
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&"mid", t0), None, "closest to expiring");
        for (k, v) in [("long", 2), ("new", 4), ("newer", 5)] {
            assert_eq!(c.get(&k, t0 + Duration::from_secs(3)), Some(v), "{k}");
        }
        // Replacing a key never evicts another.
        c.insert("long", 6, MINUTE, t0);
        assert_eq!(c.len(), 3);
    }
}
