//! Expanders: how one scale-up option is chosen when several node groups could help.
//! A chain (`priority,least-waste`) narrows the options step by step, as upstream; what is
//! left tied at the end is settled by a seeded random pick, so a plan can be reproduced.

mod priorities;
mod source;

pub use priorities::{MAX_PRIORITY_REGEX_BYTES, MAX_PRIORITY_REGEXES, Priorities, PriorityCache};
pub(crate) use source::configured;

use super::nodegroups::NodeGroupId;
use super::settings::ExpanderKind;
use fleetscaler_model::resources::Resources;

/// What an expander knows of one option.
#[derive(Clone, Debug)]
pub struct OptionView<'a> {
    pub group: &'a NodeGroupId,
    pub node_count: u64,
    pub pod_count: usize,
    /// Sum of the requests of the option's pods.
    pub requested: Resources,
    /// Capacity of one new node.
    pub node_capacity: &'a Resources,
}

/// A small deterministic generator (SplitMix64): reproducible random picks from a seed.
#[derive(Clone, Debug)]
pub struct SeededRng(u64);

impl SeededRng {
    pub fn new(seed: u64) -> Self {
        SeededRng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn pick(&mut self, n: usize) -> usize {
        if n <= 1 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// Chooses one option: the index into `options`, with how it was chosen.
pub fn choose(
    options: &[OptionView],
    chain: &[ExpanderKind],
    priorities: Option<&Priorities>,
    rng: &mut SeededRng,
) -> (usize, String) {
    let mut left: Vec<usize> = (0..options.len()).collect();
    // Ids decide the order ties are broken in, not the order options were found in.
    left.sort_by(|&a, &b| options[a].group.cmp(options[b].group));
    let mut steps = Vec::new();
    for kind in chain {
        if left.len() <= 1 {
            break;
        }
        let before = left.len();
        left = apply(*kind, options, &left, priorities, rng);
        steps.push(format!("{kind} kept {} of {before}", left.len()));
    }
    let chosen = left[rng.pick(left.len())];
    if left.len() > 1 {
        steps.push(format!("seeded random pick among {} tied", left.len()));
    }
    let how = if options.len() == 1 {
        "the only option".to_string()
    } else {
        format!(
            "chosen from {} options: {}",
            options.len(),
            steps.join(", ")
        )
    };
    (chosen, how)
}

fn apply(
    kind: ExpanderKind,
    options: &[OptionView],
    left: &[usize],
    priorities: Option<&Priorities>,
    rng: &mut SeededRng,
) -> Vec<usize> {
    match kind {
        ExpanderKind::LeastWaste => best_by(left, |i| -waste(&options[i])),
        ExpanderKind::MostPods => best_by(left, |i| options[i].pod_count as f64),
        ExpanderKind::LeastNodes => best_by(left, |i| -(options[i].node_count as f64)),
        ExpanderKind::Random => vec![left[rng.pick(left.len())]],
        ExpanderKind::Priority => {
            let Some(p) = priorities else {
                return left.to_vec();
            };
            let with: Vec<(usize, i32)> = left
                .iter()
                .filter_map(|&i| p.priority_of(options[i].group).map(|pr| (i, pr)))
                .collect();
            match with.iter().map(|(_, pr)| *pr).max() {
                // No option matches any tier: upstream keeps them all.
                None => left.to_vec(),
                Some(top) => with
                    .into_iter()
                    .filter(|(_, pr)| *pr == top)
                    .map(|(i, _)| i)
                    .collect(),
            }
        }
    }
}

/// Unused fraction of the new nodes' CPU plus that of memory: lower is better.
pub fn waste(o: &OptionView) -> f64 {
    let part = |avail: i64, req: i64| {
        let avail = avail as f64 * o.node_count as f64;
        if avail <= 0.0 {
            0.0
        } else {
            (avail - req as f64) / avail
        }
    };
    part(o.node_capacity.cpu_milli, o.requested.cpu_milli)
        + part(o.node_capacity.memory, o.requested.memory)
}

fn best_by(left: &[usize], score: impl Fn(usize) -> f64) -> Vec<usize> {
    let best = left
        .iter()
        .map(|&i| score(i))
        .fold(f64::NEG_INFINITY, f64::max);
    left.iter()
        .copied()
        .filter(|&i| (score(i) - best).abs() < 1e-9)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetscaler_model::{MachineApiGroup, ObjectKey, ScalableKind};
    use std::collections::BTreeMap;

    fn id(name: &str) -> NodeGroupId {
        NodeGroupId::new(
            MachineApiGroup::OpenShift,
            ScalableKind::MachineSet,
            &ObjectKey::new("ns", name),
        )
    }

    #[test]
    fn least_waste_prefers_the_snug_fit() {
        let (a, b) = (id("big"), id("small"));
        let big = Resources::new(16000, 64 << 30);
        let small = Resources::new(4000, 16 << 30);
        let req = Resources::new(3500, 12 << 30);
        let options = [
            OptionView {
                group: &a,
                node_count: 1,
                pod_count: 3,
                requested: req.clone(),
                node_capacity: &big,
            },
            OptionView {
                group: &b,
                node_count: 1,
                pod_count: 3,
                requested: req,
                node_capacity: &small,
            },
        ];
        let (i, how) = choose(
            &options,
            &[ExpanderKind::LeastWaste],
            None,
            &mut SeededRng::new(0),
        );
        assert_eq!(options[i].group, &b);
        assert!(how.contains("least-waste kept 1 of 2"), "{how}");
    }

    #[test]
    fn priority_then_least_waste_and_seeded_ties() {
        let groups = [id("spot-a"), id("spot-b"), id("on-demand")];
        let cap = Resources::new(4000, 16 << 30);
        let options: Vec<OptionView> = groups
            .iter()
            .map(|g| OptionView {
                group: g,
                node_count: 1,
                pod_count: 1,
                requested: Resources::new(1000, 0),
                node_capacity: &cap,
            })
            .collect();
        let mut warnings = vec![];
        let prio = Priorities::parse_configmap(
            "10:\n  - .*on-demand.*\n50:\n  - .*spot.*\n  - '['\n",
            &mut warnings,
        )
        .unwrap();
        assert_eq!(warnings.len(), 1, "the bad regex is reported");
        let chain = [ExpanderKind::Priority, ExpanderKind::LeastWaste];
        let (first, how) = choose(&options, &chain, Some(&prio), &mut SeededRng::new(7));
        assert!(options[first].group.as_str().contains("spot"));
        assert!(how.contains("seeded random pick among 2 tied"), "{how}");
        let (again, _) = choose(&options, &chain, Some(&prio), &mut SeededRng::new(7));
        assert_eq!(first, again, "same seed, same pick");
        let picks: std::collections::HashSet<usize> = (0..20)
            .map(|s| choose(&options, &chain, Some(&prio), &mut SeededRng::new(s)).0)
            .collect();
        assert_eq!(picks.len(), 2, "different seeds reach both tied groups");
    }

    #[test]
    fn priority_without_a_match_keeps_everything_and_bad_config_warns() {
        let mut warnings = vec![];
        assert!(Priorities::parse_configmap("not: [a map of ints]", &mut warnings).is_none());
        assert_eq!(warnings.len(), 1);
        let g = [id("a"), id("b")];
        let cap = Resources::new(1000, 1);
        let options: Vec<OptionView> = g
            .iter()
            .enumerate()
            .map(|(n, g)| OptionView {
                group: g,
                node_count: 1,
                pod_count: n + 1,
                requested: Resources::default(),
                node_capacity: &cap,
            })
            .collect();
        let prio = Priorities::compile(
            &BTreeMap::from([(5, vec!["nothing".to_string()])]),
            &mut warnings,
        );
        let (i, _) = choose(
            &options,
            &[ExpanderKind::Priority, ExpanderKind::MostPods],
            Some(&prio),
            &mut SeededRng::new(1),
        );
        assert_eq!(options[i].pod_count, 2);
    }

    #[test]
    fn priorities_written_for_upstream_ids_still_match() {
        let mut warnings = vec![];
        let prio = Priorities::parse_configmap(
            "10:\n  - ^MachineSet/ns/a$\n20:\n  - ^MachineSet\\.cluster\\.x-k8s\\.io/ns/a$\n",
            &mut warnings,
        )
        .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let key = ObjectKey::new("ns", "a");
        let os = NodeGroupId::new(MachineApiGroup::OpenShift, ScalableKind::MachineSet, &key);
        let capi = NodeGroupId::new(MachineApiGroup::ClusterApi, ScalableKind::MachineSet, &key);
        assert_eq!(prio.priority_of(&os), Some(10), "upstream's form");
        assert_eq!(
            prio.priority_of(&capi),
            Some(20),
            "the id, which tells the groups apart"
        );
        assert_eq!(prio.priority_of(&id("b")), None);
    }
}
