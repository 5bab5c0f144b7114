//! Balancing similar node groups (one per zone, say): which groups count as similar, and how
//! a scale-up of K nodes is split so that their sizes even out while each stays within its max.
//!
//! Similar, as upstream's comparator: the same capacity for every resource (memory within
//! 1.5 %), allocatable and free resources within 5 %, and the same labels and taints apart
//! from zone, region, hostname and the other per-zone labels.

use std::collections::BTreeSet;

use super::template::TemplateNode;
use fleetscaler_model::resources::Resources;

/// Labels that differ between otherwise identical groups in different zones.
pub const IGNORED_LABELS: [&str; 11] = [
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/fluentd-ds-ready",
    "kops.k8s.io/instancegroup",
    "topology.ebs.csi.aws.com/zone",
    "topology.disk.csi.azure.com/zone",
    "topology.gke.io/zone",
    "topology.k8s.aws/zone-id",
];

/// Labels OpenShift's cluster-autoscaler-operator always passes as `--balancing-ignore-label`
/// on the platform that sets them (AWS, Azure, IBM Cloud, Nutanix): per-instance or
/// per-pool values that would otherwise keep identical groups apart. Each is specific to its
/// platform, so ignoring all of them everywhere changes nothing elsewhere.
pub const PLATFORM_IGNORED_LABELS: [&str; 14] = [
    "alpha.eksctl.io/instance-id",
    "alpha.eksctl.io/nodegroup-name",
    "eks.amazonaws.com/nodegroup",
    "k8s.amazonaws.com/eniConfig",
    "lifecycle",
    "agentpool",
    "kubernetes.azure.com/agentpool",
    "ibm-cloud.kubernetes.io/worker-id",
    "vpc-block-csi-driver-labels",
    "ibm-cloud.kubernetes.io/vpc-instance-id",
    "nutanix.com/prism-element-name",
    "nutanix.com/prism-element-uuid",
    "nutanix.com/prism-host-name",
    "nutanix.com/prism-host-uuid",
];

const MEMORY_RATIO: f64 = 0.015;
const ALLOCATABLE_RATIO: f64 = 0.05;
const FREE_RATIO: f64 = 0.05;

/// What keeps two groups' templates apart.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Dissimilar {
    #[error("they offer different resources")]
    Resources,
    #[error("capacity of {name} differs ({a} vs {b})")]
    Capacity { name: String, a: i64, b: i64 },
    #[error("pod capacity differs ({a} vs {b})")]
    MaxPods { a: i64, b: i64 },
    #[error("{what} {name} differs by more than {}% ({a} vs {b})", .ratio * 100.0)]
    Apart {
        what: &'static str,
        name: String,
        ratio: f64,
        a: i64,
        b: i64,
    },
    /// At most three of the labels only one of them has.
    #[error("labels differ: {0:?}")]
    Labels(Vec<String>),
    #[error("taints differ")]
    Taints,
}

/// Whether two groups' templates are similar enough to balance between.
pub fn similar(
    a: &TemplateNode,
    b: &TemplateNode,
    extra_ignored: &[String],
) -> Result<(), Dissimilar> {
    same_capacity(&a.capacity, &b.capacity)?;
    if a.max_pods != b.max_pods {
        return Err(Dissimilar::MaxPods {
            a: a.max_pods,
            b: b.max_pods,
        });
    }
    within(
        &a.allocatable,
        &b.allocatable,
        ALLOCATABLE_RATIO,
        "allocatable",
    )?;
    within(&a.free(), &b.free(), FREE_RATIO, "free (after DaemonSets)")?;
    let ignored = |k: &str| {
        IGNORED_LABELS.contains(&k)
            || PLATFORM_IGNORED_LABELS.contains(&k)
            || extra_ignored.iter().any(|e| e == k)
    };
    let la = a.labels.without(ignored);
    let lb = b.labels.without(ignored);
    if la != lb {
        let keys = |l: &fleetscaler_model::Labels| {
            l.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<BTreeSet<_>>()
        };
        let (ka, kb) = (keys(&la), keys(&lb));
        let diff = ka.symmetric_difference(&kb).take(3).cloned().collect();
        return Err(Dissimilar::Labels(diff));
    }
    let taints = |t: &TemplateNode| {
        t.taints
            .iter()
            .map(|t| t.to_string())
            .collect::<BTreeSet<_>>()
    };
    if taints(a) != taints(b) {
        return Err(Dissimilar::Taints);
    }
    Ok(())
}

fn names(r: &Resources) -> BTreeSet<String> {
    let mut n: BTreeSet<String> = r.extended.iter().map(|(k, _)| k.to_string()).collect();
    for (name, v) in [
        ("cpu", r.cpu_milli),
        ("memory", r.memory),
        ("ephemeral-storage", r.ephemeral_storage),
    ] {
        if v > 0 {
            n.insert(name.to_string());
        }
    }
    n
}

fn same_capacity(a: &Resources, b: &Resources) -> Result<(), Dissimilar> {
    if names(a) != names(b) {
        return Err(Dissimilar::Resources);
    }
    for name in names(a) {
        let (x, y) = (a.get(&name), b.get(&name));
        let equal = if name == "memory" {
            close(x, y, MEMORY_RATIO)
        } else {
            x == y
        };
        if !equal {
            return Err(Dissimilar::Capacity { name, a: x, b: y });
        }
    }
    Ok(())
}

fn within(a: &Resources, b: &Resources, ratio: f64, what: &'static str) -> Result<(), Dissimilar> {
    for name in names(a).union(&names(b)) {
        let (x, y) = (a.get(name), b.get(name));
        if !close(x, y, ratio) {
            return Err(Dissimilar::Apart {
                what,
                name: name.clone(),
                ratio,
                a: x,
                b: y,
            });
        }
    }
    Ok(())
}

fn close(x: i64, y: i64, ratio: f64) -> bool {
    let larger = x.max(y) as f64;
    (x - y).abs() as f64 <= larger * ratio
}

/// One group in a balanced split: its current size (target) and its max.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitGroup {
    pub index: usize,
    pub current: u64,
    pub max: u64,
}

/// Splits `total` new nodes so sizes even out ("water-filling"): the smallest group grows
/// first, groups at their max drop out. Ties go to the earlier group in `groups` (the
/// expander's choice comes first). Returns `(index, added)` for the groups that grow.
pub fn split(total: u64, groups: &[SplitGroup]) -> Vec<(usize, u64)> {
    let mut sizes: Vec<(SplitGroup, u64)> = groups
        .iter()
        .map(|g| (*g, g.current))
        .filter(|(g, _)| g.current < g.max)
        .collect();
    let mut left = total;
    while left > 0 {
        let Some(min) = sizes
            .iter()
            .filter(|(g, s)| *s < g.max)
            .map(|(_, s)| *s)
            .min()
        else {
            break;
        };
        for (g, s) in sizes.iter_mut() {
            if left == 0 {
                break;
            }
            if *s == min && *s < g.max {
                *s += 1;
                left -= 1;
            }
        }
    }
    sizes
        .into_iter()
        .filter(|(g, s)| *s > g.current)
        .map(|(g, s)| (g.index, s - g.current))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::TemplateSource;
    use fleetscaler_model::Labels;
    use std::sync::Arc;

    fn g(index: usize, current: u64, max: u64) -> SplitGroup {
        SplitGroup {
            index,
            current,
            max,
        }
    }

    #[test]
    fn seed_example_a1_b3_c6_plus_4() {
        assert_eq!(
            split(4, &[g(0, 1, 10), g(1, 3, 10), g(2, 6, 10)]),
            vec![(0, 3), (1, 1)]
        );
    }

    #[test]
    fn upstream_examples() {
        let four = [g(0, 1, 10), g(1, 3, 10), g(2, 5, 10), g(3, 5, 10)];
        assert_eq!(split(4, &four), vec![(0, 3), (1, 1)]);
        assert_eq!(split(5, &four), vec![(0, 4), (1, 1)], "sizes 5 and 4");
        assert_eq!(split(10, &four), vec![(0, 5), (1, 3), (2, 1), (3, 1)]);
        assert_eq!(split(4, &[g(0, 1, 3), g(1, 3, 10)]), vec![(0, 2), (1, 2)]);
        assert_eq!(
            split(100, &[g(0, 1, 3), g(1, 3, 5)]),
            vec![(0, 2), (1, 2)],
            "never past a max"
        );
        assert_eq!(
            split(1, &[g(0, 2, 9), g(1, 2, 9)]),
            vec![(0, 1)],
            "ties go to the first"
        );
    }

    fn template(cpu: i64, mem: i64, zone: &str, extra: &[(&str, &str)]) -> TemplateNode {
        let r = Resources::new(cpu, mem);
        let mut labels = vec![
            ("topology.kubernetes.io/zone", zone),
            ("node.kubernetes.io/instance-type", "m5.xlarge"),
        ];
        labels.extend_from_slice(extra);
        TemplateNode {
            source: TemplateSource::Node,
            from: None,
            labels: Labels::from_strs(labels),
            platform: None,
            taints: Arc::from([]),
            capacity: r.clone(),
            allocatable: r,
            max_pods: 110,
            daemon_requests: Resources::default(),
            daemon_pods: 0,
            daemon_ports: vec![],
            attach_limits: Arc::from([]),
            dra_devices: Default::default(),
        }
    }

    #[test]
    fn similarity_rules() {
        let a = template(4000, 16 << 30, "a", &[]);
        assert_eq!(
            similar(&a, &template(4000, 16 << 30, "b", &[]), &[]),
            Ok(())
        );
        // Memory within 1.5 % counts as the same capacity.
        assert_eq!(
            similar(&a, &template(4000, (16 << 30) - (100 << 20), "b", &[]), &[]),
            Ok(())
        );
        assert!(
            similar(&a, &template(8000, 16 << 30, "b", &[]), &[])
                .unwrap_err()
                .to_string()
                .contains("cpu")
        );
        let pool = template(4000, 16 << 30, "b", &[("pool", "x")]);
        assert!(
            similar(&a, &pool, &[])
                .unwrap_err()
                .to_string()
                .contains("labels differ")
        );
        assert_eq!(similar(&a, &pool, &["pool".to_string()]), Ok(()));
    }

    #[test]
    fn openshift_platform_labels_never_keep_groups_apart() {
        let ibm = |worker: &str, zone: &str| {
            template(
                4000,
                16 << 30,
                zone,
                &[
                    ("ibm-cloud.kubernetes.io/worker-id", worker),
                    ("nutanix.com/prism-host-name", worker),
                    ("lifecycle", if zone == "a" { "spot" } else { "normal" }),
                    ("k8s.amazonaws.com/eniConfig", zone),
                ],
            )
        };
        assert_eq!(similar(&ibm("w-1", "a"), &ibm("w-2", "b"), &[]), Ok(()));
    }
}
