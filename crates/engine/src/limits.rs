//! Cluster-wide resource limits: `maxNodesTotal`, total cores, total memory (GiB) and GPUs
//! per type, summed over **all** nodes (control plane included) and the nodes coming up,
//! as upstream does. A scale-up is capped so that no maximum is passed; a cluster already
//! past one gets no scale-up, and the plan names the limit. `maxNodesTotal` is checked apart
//! from the resource limits, as upstream does.

use fleetscaler_model::{Warning, WarningCode};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use super::reason::{ReasonCode, Unfit};
use super::settings::Settings;
use super::template::{GPU_LABEL, TemplateError, TemplateNode};
use fleetscaler_model::node::Node;
use fleetscaler_model::resources::Resources;

const GIB: i128 = 1 << 30;

/// What one node counts for, under the limits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeUsage {
    pub cores: u64,
    pub memory: i128,
    pub gpu: Option<(Arc<str>, u64)>,
}

/// More than any machine has: the largest cloud instances have under 1,000 vCPUs, 32 TiB of
/// memory and 16 GPUs. A node claiming more (a broken kubelet, a hostile object) counts as
/// nothing against the cluster's limits, with a warning naming it, instead of making every
/// limit "reached" (upstream sums whatever nodes report).
pub const MAX_PLAUSIBLE_CORES: u64 = 16_384;
pub const MAX_PLAUSIBLE_MEMORY: i128 = 1 << 48;
pub const MAX_PLAUSIBLE_GPUS: u64 = 1_024;

impl NodeUsage {
    fn of(capacity: &Resources, gpu_label: Option<&Arc<str>>) -> Self {
        // Cores count whole, rounded up, as upstream does.
        let cores = u64::try_from(capacity.cpu_milli.max(0))
            .unwrap_or(0)
            .div_ceil(1000);
        let gpu = capacity.gpus().find(|(_, n)| *n > 0).map(|(name, n)| {
            let kind = gpu_label.cloned().unwrap_or_else(|| name.clone());
            (kind, u64::try_from(n).unwrap_or(0))
        });
        NodeUsage {
            cores,
            memory: i128::from(capacity.memory.max(0)),
            gpu,
        }
    }

    /// What a node counts for: nothing when it claims more than any machine has.
    pub fn of_node(node: &Node) -> Self {
        let usage = NodeUsage::of(&node.capacity, node.labels.get_arc(GPU_LABEL));
        if usage.implausible().is_some() {
            NodeUsage::default()
        } else {
            usage
        }
    }

    /// What it claims beyond any machine, if anything.
    fn implausible(&self) -> Option<String> {
        if self.cores > MAX_PLAUSIBLE_CORES {
            return Some(format!(
                "{} cores (at most {MAX_PLAUSIBLE_CORES} are believed)",
                self.cores
            ));
        }
        if self.memory > MAX_PLAUSIBLE_MEMORY {
            return Some(format!(
                "{:.0} GiB of memory (at most {} GiB are believed)",
                gib(self.memory),
                MAX_PLAUSIBLE_MEMORY / GIB
            ));
        }
        let (kind, n) = self.gpu.as_ref()?;
        (*n > MAX_PLAUSIBLE_GPUS)
            .then(|| format!("{n} {kind} GPUs (at most {MAX_PLAUSIBLE_GPUS} are believed)"))
    }

    /// This usage with `count` GPUs of `kind` instead of what the node advertises.
    pub fn with_gpus(mut self, kind: &Arc<str>, count: i64) -> Self {
        self.gpu = Some((kind.clone(), u64::try_from(count).unwrap_or(0)));
        self
    }

    pub fn of_template(t: &TemplateNode) -> Self {
        NodeUsage::of(&t.capacity, t.labels.get_arc(GPU_LABEL))
    }
}

/// A warning for each node that claims more than any machine has, which the limits count as
/// nothing.
pub fn implausible_nodes(nodes: &[Node]) -> Vec<Warning> {
    nodes
        .iter()
        .filter_map(|n| {
            let claim = NodeUsage::of(&n.capacity, n.labels.get_arc(GPU_LABEL)).implausible()?;
            Some(Warning::about(
                WarningCode::ImplausibleCapacity,
                format!("node {}", n.name),
                format!("reports {claim}, more than any machine has: it counts as nothing against the cluster's limits"),
            ))
        })
        .collect()
}

/// A warning for each GPU limit whose type no node and no group's template has: such a
/// limit limits nothing, which is most likely a typo (`nvidia.com/gpu` vs the accelerator
/// label's value).
pub fn unmatched_gpu_limits(
    settings: &Settings,
    nodes: &[Node],
    templates: &[Result<TemplateNode, TemplateError>],
) -> Vec<Warning> {
    if settings.gpus.is_empty() {
        return Vec::new();
    }
    let seen: std::collections::BTreeSet<Arc<str>> = nodes
        .iter()
        .map(NodeUsage::of_node)
        .chain(templates.iter().flatten().map(NodeUsage::of_template))
        .filter_map(|u| u.gpu.map(|(kind, _)| kind))
        .collect();
    let known = if seen.is_empty() {
        "none has GPUs".to_string()
    } else {
        let list: Vec<&str> = seen.iter().map(|k| &**k).collect();
        format!("their GPU types: {}", list.join(", "))
    };
    settings
        .gpus
        .iter()
        .filter(|g| !seen.contains(g.gpu_type.as_str()))
        .map(|g| {
            Warning::general(
                WarningCode::UnmatchedLimit,
                format!(
                    "the GPU limit of type {:?} matches no node and no node group's template ({known}): it limits nothing",
                    g.gpu_type
                ),
            )
        })
        .collect()
}

/// Running totals against the limits of one cluster.
#[derive(Clone, Debug)]
pub struct Limits {
    settings_max_nodes: Option<u64>,
    cores: (u64, Option<u64>),
    memory_gib: (u64, Option<u64>),
    gpu_limits: Vec<(String, u64, u64)>,
    nodes: u64,
    used_cores: u64,
    used_memory: i128,
    used_gpus: BTreeMap<Arc<str>, u64>,
    /// The limits that held a scale-up back in this pass (kept through `room`, which options
    /// ask without committing: a limit that stopped any option is reached for its pods).
    reached: RefCell<BTreeSet<LimitName>>,
    /// Groups a cores or memory max left no room for a single node, with that limit.
    starved: RefCell<BTreeSet<(usize, LimitName)>>,
}

/// Which cluster-wide limit.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum LimitName {
    MaxNodesTotal,
    Cores,
    Memory,
    Gpu(String),
}

impl Limits {
    pub fn new(settings: &Settings) -> Self {
        Limits {
            settings_max_nodes: settings.max_nodes_total,
            cores: (settings.cores.min, settings.cores.max),
            memory_gib: (settings.memory_gib.min, settings.memory_gib.max),
            gpu_limits: settings
                .gpus
                .iter()
                .map(|g| (g.gpu_type.clone(), g.min, g.max))
                .collect(),
            nodes: 0,
            used_cores: 0,
            used_memory: 0,
            used_gpus: BTreeMap::new(),
            reached: RefCell::default(),
            starved: RefCell::default(),
        }
    }

    /// Hostile numbers (a node claiming 9e18 GPUs) saturate instead of overflowing.
    pub fn add(&mut self, usage: &NodeUsage, count: u64) {
        self.nodes = self.nodes.saturating_add(count);
        self.used_cores = self
            .used_cores
            .saturating_add(usage.cores.saturating_mul(count));
        self.used_memory = self
            .used_memory
            .saturating_add(usage.memory.saturating_mul(i128::from(count)));
        if let Some((kind, n)) = &usage.gpu {
            let used = self.used_gpus.entry(kind.clone()).or_default();
            *used = used.saturating_add(n.saturating_mul(count));
        }
    }

    /// How many more nodes like `usage` fit under every limit, and which limit binds when
    /// that is fewer than `wanted`.
    pub fn room(&self, usage: &NodeUsage, wanted: u64) -> (u64, Option<Unfit>) {
        let mut allowed = wanted;
        let mut binding = None;
        let mut reached = self.reached.borrow_mut();
        let mut cap = |n: u64, name: LimitName, code: ReasonCode, message: String| {
            if n < wanted {
                reached.insert(name);
            }
            if n < allowed {
                allowed = n;
                binding = Some(Unfit::new(code, message));
            }
        };
        if let Some(max) = self.settings_max_nodes {
            cap(
                max.saturating_sub(self.nodes),
                LimitName::MaxNodesTotal,
                ReasonCode::MaxNodesTotalReached,
                format!(
                    "maxNodesTotal {max}: the cluster has {} nodes, upcoming ones included",
                    self.nodes
                ),
            );
        }
        if let (Some(max), per) = (self.cores.1, usage.cores)
            && per > 0
        {
            cap(
                max.saturating_sub(self.used_cores) / per,
                LimitName::Cores,
                ReasonCode::ResourceLimitReached,
                format!(
                    "cores limit {max}: {} in use, a new node adds {per}",
                    self.used_cores
                ),
            );
        }
        if let (Some(max), per) = (self.memory_gib.1, usage.memory)
            && per > 0
        {
            let left = (i128::from(max) * GIB - self.used_memory).max(0);
            cap(
                u64::try_from(left / per).unwrap_or(u64::MAX),
                LimitName::Memory,
                ReasonCode::ResourceLimitReached,
                format!(
                    "memory limit {max}GiB: {:.1}GiB in use, a new node adds {:.1}GiB",
                    gib(self.used_memory),
                    gib(per)
                ),
            );
        }
        if let Some((kind, per)) = &usage.gpu
            && let Some((_, _, max)) = self.gpu_limits.iter().find(|(t, _, _)| **t == **kind)
            && *per > 0
        {
            let used = self.used_gpus.get(kind).copied().unwrap_or(0);
            cap(
                max.saturating_sub(used) / per,
                LimitName::Gpu(kind.to_string()),
                ReasonCode::ResourceLimitReached,
                format!("GPU limit {max} for {kind}: {used} in use, a new node adds {per}"),
            );
        }
        (allowed, binding)
    }

    /// `room` for one more node of group `gi`. A group that a cores or memory max leaves no
    /// room at all is remembered, as upstream's `IsNodeGroupResourceExceeded` counts it in
    /// `skipped_scale_events_count{direction="up"}`, once per group and pass.
    pub fn room_for_one(&self, gi: usize, usage: &NodeUsage) -> (u64, Option<Unfit>) {
        let (room, binding) = self.room(usage, 1);
        if room == 0 {
            let mut starved = self.starved.borrow_mut();
            if let Some(max) = self.cores.1
                && usage.cores > max.saturating_sub(self.used_cores)
            {
                starved.insert((gi, LimitName::Cores));
            }
            if let Some(max) = self.memory_gib.1
                && usage.memory > i128::from(max) * GIB - self.used_memory
            {
                starved.insert((gi, LimitName::Memory));
            }
        }
        (room, binding)
    }

    /// The groups a cores or memory max starved in this pass, per limit.
    pub fn skipped(&self) -> SkippedByLimit {
        let starved = self.starved.borrow();
        let count = |name: LimitName| starved.iter().filter(|(_, n)| *n == name).count() as u64;
        SkippedByLimit {
            cpu: count(LimitName::Cores),
            memory: count(LimitName::Memory),
        }
    }

    pub fn report(&self) -> LimitsReport {
        let reached = self.reached.borrow();
        let hit = |name: LimitName| reached.contains(&name);
        LimitsReport {
            max_nodes_total: LimitEntry {
                used: self.nodes as f64,
                min: None,
                max: self.settings_max_nodes,
                reached: hit(LimitName::MaxNodesTotal),
            },
            cores: LimitEntry {
                used: self.used_cores as f64,
                min: Some(self.cores.0),
                max: self.cores.1,
                reached: hit(LimitName::Cores),
            },
            memory_gib: LimitEntry {
                used: (gib(self.used_memory) * 100.0).round() / 100.0,
                min: Some(self.memory_gib.0),
                max: self.memory_gib.1,
                reached: hit(LimitName::Memory),
            },
            gpus: self
                .gpu_limits
                .iter()
                .map(|(kind, min, max)| GpuLimitEntry {
                    gpu_type: kind.clone(),
                    used: self.used_gpus.get(kind.as_str()).copied().unwrap_or(0),
                    min: *min,
                    max: *max,
                    reached: hit(LimitName::Gpu(kind.clone())),
                })
                .collect(),
        }
    }
}

fn gib(bytes: i128) -> f64 {
    bytes as f64 / GIB as f64
}

/// Scale events a cores or memory limit held back in one pass, as upstream counts them in
/// `cluster_autoscaler_skipped_scale_events_count{reason="CpuResourceLimit" | "MemoryResourceLimit"}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SkippedByLimit {
    pub cpu: u64,
    pub memory: u64,
}

/// Usage against each limit, for the plan. Memory is in GiB, as in the ClusterAutoscaler.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitsReport {
    pub max_nodes_total: LimitEntry,
    pub cores: LimitEntry,
    #[serde(rename = "memoryGiB")]
    pub memory_gib: LimitEntry,
    pub gpus: Vec<GpuLimitEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LimitEntry {
    pub used: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<u64>,
    pub max: Option<u64>,
    /// The limit held a scale-up back in this pass (fewer nodes than wanted, or none).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reached: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuLimitEntry {
    #[serde(rename = "type")]
    pub gpu_type: String,
    pub used: u64,
    pub min: u64,
    pub max: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reached: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{GpuLimit, Range};

    fn usage(cores: u64, gib: i128) -> NodeUsage {
        NodeUsage {
            cores,
            memory: gib * GIB,
            gpu: None,
        }
    }

    #[test]
    fn seed_example_64_cores_30_used_8_per_node_gives_4() {
        let settings = Settings {
            cores: Range {
                min: 0,
                max: Some(64),
            },
            ..Settings::default()
        };
        let mut limits = Limits::new(&settings);
        limits.add(&usage(30, 120), 1);
        let (n, binding) = limits.room(&usage(8, 32), 10);
        assert_eq!(n, 4);
        let binding = binding.unwrap();
        assert_eq!(binding.code, ReasonCode::ResourceLimitReached);
        assert_eq!(
            binding.message,
            "cores limit 64: 30 in use, a new node adds 8"
        );
    }

    #[test]
    fn max_nodes_total_and_memory_and_gpus() {
        let settings = Settings {
            max_nodes_total: Some(5),
            memory_gib: Range {
                min: 0,
                max: Some(100),
            },
            gpus: vec![GpuLimit {
                gpu_type: "a100".into(),
                min: 0,
                max: 4,
            }],
            ..Settings::default()
        };
        let mut limits = Limits::new(&settings);
        limits.add(&usage(4, 16), 3);
        assert_eq!(limits.room(&usage(4, 16), 10).0, 2);
        assert_eq!(
            limits.room(&usage(4, 16), 10).1.unwrap().code,
            ReasonCode::MaxNodesTotalReached
        );
        assert_eq!(
            limits.room(&usage(4, 40), 10).0,
            1,
            "100GiB - 48GiB used leaves one 40GiB node"
        );
        let gpu = NodeUsage {
            gpu: Some(("a100".into(), 2)),
            ..usage(8, 1)
        };
        limits.add(&gpu, 1);
        assert_eq!(limits.room(&gpu, 10).0, 1);
        let report = limits.report();
        assert_eq!(report.gpus[0].used, 2);
        assert!(report.max_nodes_total.reached && report.memory_gib.reached);
        assert!(report.gpus[0].reached && !report.cores.reached);
        assert!(!Limits::new(&settings).report().max_nodes_total.reached);
    }

    #[test]
    fn already_past_a_limit_allows_nothing() {
        let settings = Settings {
            cores: Range {
                min: 0,
                max: Some(16),
            },
            ..Settings::default()
        };
        let mut limits = Limits::new(&settings);
        limits.add(&usage(20, 1), 1);
        assert_eq!(limits.room(&usage(4, 1), 3).0, 0);
    }

    #[test]
    fn hostile_amounts_saturate() {
        let mut limits = Limits::new(&Settings::default());
        let huge = NodeUsage {
            cores: u64::MAX / 2,
            memory: i128::MAX / 2,
            gpu: Some(("t4".into(), u64::MAX / 2)),
        };
        limits.add(&huge, 3);
        limits.add(&huge, 3);
        assert_eq!(limits.room(&usage(4, 1), 1).0, 0);
        assert_eq!(limits.report().cores.used, u64::MAX as f64);
    }
}
