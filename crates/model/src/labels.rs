//! Labels, label selectors, and the interner that lets thousands of pods share one copy of
//! the same strings and label sets.
//!
//! A fleet holds millions of pods, and the pods of one workload repeat the same keys,
//! values and specs; interning them is what keeps a projection compact.

use std::collections::HashSet;
use std::hash::Hash;

/// The interners' hasher: fast (every pod's strings and spec are hashed as it is projected),
/// and seeded per process, so names a cluster chooses cannot be made to collide.
type Hasher = foldhash::fast::RandomState;
use std::sync::Arc;

use serde::Serialize;

/// An immutable, sorted set of `key=value` labels; cheap to clone and to share.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Labels(Arc<[(Arc<str>, Arc<str>)]>);

impl Labels {
    /// Builds a label set; a later duplicate key wins, as in a JSON object.
    pub fn new(pairs: impl IntoIterator<Item = (Arc<str>, Arc<str>)>) -> Self {
        let mut v: Vec<(Arc<str>, Arc<str>)> = pairs.into_iter().collect();
        v.reverse();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.dedup_by(|a, b| a.0 == b.0);
        Labels(v.into())
    }

    pub fn from_strs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Labels::new(pairs.into_iter().map(|(k, v)| (Arc::from(k), Arc::from(v))))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| self.0[i].1.as_ref())
    }

    pub fn get_arc(&self, key: &str) -> Option<&Arc<str>> {
        self.0
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v.as_ref()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A copy with `extra` merged in (its values win).
    pub fn merged(&self, extra: &Labels) -> Labels {
        Labels::new(self.0.iter().chain(extra.0.iter()).cloned())
    }

    /// A copy without the keys for which `drop` is true.
    pub fn without(&self, drop: impl Fn(&str) -> bool) -> Labels {
        Labels::new(self.0.iter().filter(|(k, _)| !drop(k)).cloned())
    }

    /// The address of the shared allocation, for identity-keyed caches.
    pub fn as_ptr(&self) -> usize {
        Arc::as_ptr(&self.0) as *const u8 as usize
    }

    /// True when both share the same allocation: a cheap first test for equality.
    pub fn ptr_eq(&self, other: &Labels) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Serialize for Labels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

/// One `matchExpressions` entry of a label selector.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LabelRequirement {
    In(Arc<str>, Arc<[Arc<str>]>),
    NotIn(Arc<str>, Arc<[Arc<str>]>),
    Exists(Arc<str>),
    DoesNotExist(Arc<str>),
}

impl LabelRequirement {
    pub fn matches(&self, labels: &Labels) -> bool {
        match self {
            LabelRequirement::In(k, vs) => {
                labels.get(k).is_some_and(|v| vs.iter().any(|x| **x == *v))
            }
            LabelRequirement::NotIn(k, vs) => {
                labels.get(k).is_none_or(|v| vs.iter().all(|x| **x != *v))
            }
            LabelRequirement::Exists(k) => labels.contains_key(k),
            LabelRequirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }

    pub fn key(&self) -> &str {
        match self {
            LabelRequirement::In(k, _)
            | LabelRequirement::NotIn(k, _)
            | LabelRequirement::Exists(k)
            | LabelRequirement::DoesNotExist(k) => k,
        }
    }
}

/// A `metav1.LabelSelector`: every requirement must hold. The empty selector matches
/// everything; an absent selector is modelled as `Option::None` by its users.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    pub requirements: Vec<LabelRequirement>,
}

impl LabelSelector {
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// From `matchLabels`-style pairs only.
    pub fn from_match_labels<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        LabelSelector {
            requirements: pairs
                .into_iter()
                .map(|(k, v)| LabelRequirement::In(k.into(), Arc::from([Arc::from(v)])))
                .collect(),
        }
    }
}

impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.requirements.is_empty() {
            return f.write_str("<all>");
        }
        let join = |vs: &[Arc<str>]| vs.iter().map(|v| v.as_ref()).collect::<Vec<_>>().join(",");
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r {
                LabelRequirement::In(k, vs) if vs.len() == 1 => write!(f, "{k}={}", vs[0])?,
                LabelRequirement::In(k, vs) => write!(f, "{k} in ({})", join(vs))?,
                LabelRequirement::NotIn(k, vs) => write!(f, "{k} notin ({})", join(vs))?,
                LabelRequirement::Exists(k) => write!(f, "{k}")?,
                LabelRequirement::DoesNotExist(k) => write!(f, "!{k}")?,
            }
        }
        Ok(())
    }
}

/// Deduplicates strings, label sets and whole values so equal ones share one allocation.
///
/// One interner lives as long as the store it feeds (a dump being loaded, or one cluster's
/// caches); `prune` drops what nothing else holds any more.
#[derive(Default)]
pub struct Interner {
    strings: HashSet<Arc<str>, Hasher>,
    labels: HashSet<Labels, Hasher>,
}

impl Interner {
    pub fn str(&mut self, s: &str) -> Arc<str> {
        if let Some(found) = self.strings.get(s) {
            return found.clone();
        }
        let arc: Arc<str> = Arc::from(s);
        self.strings.insert(arc.clone());
        arc
    }

    pub fn labels<'a>(
        &mut self,
        pairs: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Labels {
        let built = Labels::new(
            pairs
                .into_iter()
                .map(|(k, v)| (self.str(k), self.str(v)))
                .collect::<Vec<_>>(),
        );
        self.intern_labels(built)
    }

    pub fn intern_labels(&mut self, labels: Labels) -> Labels {
        if let Some(found) = self.labels.get(&labels) {
            return found.clone();
        }
        self.labels.insert(labels.clone());
        labels
    }

    /// Forgets entries no projection refers to any more.
    pub fn prune(&mut self) {
        // Label sets hold strings: drop unused sets first so their strings can go too.
        self.labels.retain(|l| Arc::strong_count(&l.0) > 1);
        self.strings.retain(|s| Arc::strong_count(s) > 1);
    }
}

/// Interns whole values of any hashable type (pod scheduling specs, taint lists).
pub struct ValueInterner<T: Hash + Eq> {
    values: HashSet<Arc<T>, Hasher>,
}

impl<T: Hash + Eq> Default for ValueInterner<T> {
    fn default() -> Self {
        ValueInterner {
            values: HashSet::default(),
        }
    }
}

impl<T: Hash + Eq> ValueInterner<T> {
    pub fn intern(&mut self, value: T) -> Arc<T> {
        if let Some(found) = self.values.get(&value) {
            return found.clone();
        }
        let arc = Arc::new(value);
        self.values.insert(arc.clone());
        arc
    }

    pub fn prune(&mut self) {
        self.values.retain(|v| Arc::strong_count(v) > 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(vs: &[&str]) -> Arc<[Arc<str>]> {
        vs.iter().map(|v| Arc::from(*v)).collect()
    }

    #[test]
    fn labels_sorted_and_last_duplicate_wins() {
        let l = Labels::from_strs([("b", "2"), ("a", "1"), ("b", "3")]);
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![("a", "1"), ("b", "3")]);
        assert_eq!(l.get("b"), Some("3"));
        assert_eq!(l.get("c"), None);
    }

    #[test]
    fn selector_operators() {
        let l = Labels::from_strs([("app", "web"), ("tier", "front")]);
        let sel = |r| LabelSelector {
            requirements: vec![r],
        };
        assert!(sel(LabelRequirement::In("app".into(), set(&["web", "api"]))).matches(&l));
        assert!(!sel(LabelRequirement::In("app".into(), set(&["api"]))).matches(&l));
        assert!(sel(LabelRequirement::NotIn("app".into(), set(&["api"]))).matches(&l));
        assert!(sel(LabelRequirement::NotIn("zone".into(), set(&["a"]))).matches(&l));
        assert!(!sel(LabelRequirement::NotIn("app".into(), set(&["web"]))).matches(&l));
        assert!(sel(LabelRequirement::Exists("tier".into())).matches(&l));
        assert!(sel(LabelRequirement::DoesNotExist("zone".into())).matches(&l));
        assert!(LabelSelector::default().matches(&l));
        assert_eq!(
            LabelSelector::from_match_labels([("app", "web")]).to_string(),
            "app=web"
        );
    }

    #[test]
    fn interner_shares_and_prunes() {
        let mut i = Interner::default();
        let a = i.str("zone-a");
        let b = i.str("zone-a");
        assert!(Arc::ptr_eq(&a, &b));
        let k = "k".to_string();
        let v = "v".to_string();
        let l1 = i.labels([(&k, &v)]);
        let l2 = i.labels([(&k, &v)]);
        assert!(l1.ptr_eq(&l2));
        drop((a, b, l1, l2));
        i.prune();
        assert!(i.strings.is_empty() && i.labels.is_empty());
    }
}
