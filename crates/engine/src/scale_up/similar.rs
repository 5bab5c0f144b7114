//! Which groups are similar enough to balance with, found lazily and cheaply: a pass that
//! balances nothing (nothing pending, balancing off) never compares templates, and one that
//! does compares classes, not groups.
//!
//! Groups whose templates are identical in everything `balance::similar` looks at form one
//! class, and are similar to each other; classes are compared only within a bucket of the
//! same exactly compared parts (labels and taints but the ignored ones, max pods, resources
//! and their exact capacities but memory's), since `similar` needs those equal. So 2,000
//! groups of one instance type in 2,000 zones are one class, and a pass compares nothing.

use std::cell::OnceCell;
use std::collections::HashMap;

use crate::balance::{self, IGNORED_LABELS, PLATFORM_IGNORED_LABELS};
use crate::template::{TemplateError, TemplateNode};

pub(super) struct Similar<'a> {
    templates: &'a [Result<TemplateNode, TemplateError>],
    extra_ignored: &'a [String],
    classes: OnceCell<Classes>,
}

struct Classes {
    /// Per group, its class (none without a template).
    class_of: Vec<Option<usize>>,
    /// Per class, its groups; the first stands for the class in comparisons.
    members: Vec<Vec<usize>>,
    /// Per class, the other classes of its bucket.
    bucket_of: Vec<usize>,
    buckets: Vec<Vec<usize>>,
    /// Per class, the classes similar to it (itself included), found on first use.
    similar: Vec<OnceCell<Vec<usize>>>,
}

impl<'a> Similar<'a> {
    pub fn new(
        templates: &'a [Result<TemplateNode, TemplateError>],
        extra_ignored: &'a [String],
    ) -> Self {
        Similar {
            templates,
            extra_ignored,
            classes: OnceCell::new(),
        }
    }

    /// The groups similar to `gi`, but `gi` itself.
    pub fn peers_of(&self, gi: usize) -> impl Iterator<Item = usize> + '_ {
        let classes = self.classes.get_or_init(|| self.classify());
        let similar = classes
            .class_of
            .get(gi)
            .copied()
            .flatten()
            .map_or(&[][..], |c| self.similar_classes(classes, c));
        similar
            .iter()
            .flat_map(move |&c| classes.members[c].iter().copied())
            .filter(move |&g| g != gi)
    }

    fn similar_classes<'c>(&self, classes: &'c Classes, c: usize) -> &'c [usize] {
        classes.similar[c].get_or_init(|| {
            let of = |k: usize| self.template(classes.members[k][0]);
            let (Some(me), bucket) = (of(c), &classes.buckets[classes.bucket_of[c]]) else {
                return vec![c];
            };
            bucket
                .iter()
                .copied()
                .filter(|&k| {
                    k == c
                        || of(k)
                            .is_some_and(|t| balance::similar(me, t, self.extra_ignored).is_ok())
                })
                .collect()
        })
    }

    fn template(&self, gi: usize) -> Option<&TemplateNode> {
        self.templates.get(gi).and_then(|t| t.as_ref().ok())
    }

    fn classify(&self) -> Classes {
        let mut class_by_key: HashMap<String, usize> = HashMap::new();
        let mut bucket_by_key: HashMap<String, usize> = HashMap::new();
        let mut c = Classes {
            class_of: Vec::with_capacity(self.templates.len()),
            members: Vec::new(),
            bucket_of: Vec::new(),
            buckets: Vec::new(),
            similar: Vec::new(),
        };
        for gi in 0..self.templates.len() {
            let Some(t) = self.template(gi) else {
                c.class_of.push(None);
                continue;
            };
            let (bucket_key, class_key) = keys(t, self.extra_ignored);
            let class = *class_by_key.entry(class_key).or_insert_with(|| {
                let bucket = *bucket_by_key.entry(bucket_key).or_insert_with(|| {
                    c.buckets.push(Vec::new());
                    c.buckets.len() - 1
                });
                c.members.push(Vec::new());
                c.bucket_of.push(bucket);
                c.similar.push(OnceCell::new());
                c.buckets[bucket].push(c.members.len() - 1);
                c.members.len() - 1
            });
            c.members[class].push(gi);
            c.class_of.push(Some(class));
        }
        c
    }
}

/// The bucket key (what `similar` needs equal) and the class key (all it compares, exactly).
fn keys(t: &TemplateNode, extra_ignored: &[String]) -> (String, String) {
    let ignored = |k: &str| {
        IGNORED_LABELS.contains(&k)
            || PLATFORM_IGNORED_LABELS.contains(&k)
            || extra_ignored.iter().any(|e| e == k)
    };
    let labels: Vec<String> = t
        .labels
        .without(ignored)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut taints: Vec<String> = t.taints.iter().map(|t| t.to_string()).collect();
    taints.sort();
    taints.dedup();
    let mut exact = t.capacity.clone();
    exact.memory = i64::from(exact.memory > 0);
    let bucket = format!("{labels:?}|{taints:?}|{}|{exact:?}", t.max_pods);
    let class = format!(
        "{bucket}|{:?}|{:?}|{:?}",
        t.capacity,
        t.allocatable,
        t.free()
    );
    (bucket, class)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{machineset, snapshot};
    use crate::nodegroups;
    use crate::settings::Settings;
    use crate::template;

    /// The classes give exactly the pairs the comparator gives, group by group.
    #[test]
    fn peers_are_exactly_the_groups_the_comparator_finds_similar() {
        let zero = |name: &str, cpu: &str, mem: &str, zone: &str, extra: Option<&str>| {
            let mut ms = machineset(name, 0, 5, 0).json();
            let a = &mut ms["metadata"]["annotations"];
            a["capacity.cluster-autoscaler.kubernetes.io/cpu"] = cpu.into();
            a["capacity.cluster-autoscaler.kubernetes.io/memory"] = mem.into();
            let mut labels = format!("topology.kubernetes.io/zone={zone}");
            if let Some(l) = extra {
                labels.push_str(&format!(",{l}"));
            }
            a["capacity.cluster-autoscaler.kubernetes.io/labels"] = labels.into();
            ms
        };
        let s = snapshot(vec![
            zero("a", "8", "32Gi", "z1", None),
            zero("b", "8", "32Gi", "z2", None),
            // Memory within 1.5 %: similar, yet another class.
            zero("c", "8", "32300Mi", "z3", None),
            zero("d", "16", "32Gi", "z1", None),
            zero("e", "8", "32Gi", "z1", Some("tier=gold")),
            zero("f", "8", "31Gi", "z4", None),
        ]);
        let settings = Settings::default();
        let groups = nodegroups::discover(&s, &[]);
        let (templates, _) = template::build_all(&s, &groups.groups, &settings);
        let similar = Similar::new(&templates, &[]);
        for a in 0..templates.len() {
            let mut got: Vec<usize> = similar.peers_of(a).collect();
            got.sort();
            let want: Vec<usize> = (0..templates.len())
                .filter(|&b| b != a)
                .filter(|&b| {
                    let (Ok(ta), Ok(tb)) = (&templates[a], &templates[b]) else {
                        return false;
                    };
                    balance::similar(ta, tb, &[]).is_ok()
                })
                .collect();
            assert_eq!(got, want, "group {}", groups.groups[a].id);
        }
        let a = groups
            .groups
            .iter()
            .position(|g| g.id.as_str().ends_with("/a"))
            .unwrap();
        assert_eq!(similar.peers_of(a).count(), 2, "b and c, not d, e or f");
    }
}
