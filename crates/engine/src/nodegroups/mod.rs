//! Node groups: MachineSets and MachineDeployments (of either Machine API group) that opt in
//! to autoscaling with min/max annotations or a MachineAutoscaler, and the mapping of
//! Machines and Nodes to them.
//!
//! Unlike upstream, where one mis-annotated resource hides every group, a group with invalid
//! bounds is set aside with its reason and the others are unaffected. `id` names groups
//! (`<Kind>.<API group>/<namespace>/<name>`, so the two Machine APIs never collide) and
//! reads the names people write; `bounds` is what claims a resource and with which min/max;
//! `options` is what a group's `autoscaling-options-*` annotations override.

mod bounds;
mod id;
mod options;

use fleetscaler_model::{Warning, WarningCode};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

use self::bounds::{
    TargetKey, claims_of, configured_by_target, eligibility, machine_autoscalers_by_target, opts_in,
};
pub use self::id::{GroupRef, NodeGroupId};
pub use self::options::{GroupOptions, GroupOverride};
use super::reason::{Reason, ReasonCode};
use super::settings::NodeGroupSpec;
use fleetscaler_model::autoscaler::MachineAutoscaler;
use fleetscaler_model::machine_kind::MACHINE;
use fleetscaler_model::node::normalize_provider_id;
use fleetscaler_model::{ClusterSnapshot, MachineApiGroup, ObjectKey};

/// Where a group's min/max came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BoundsSource {
    Annotations,
    MachineAutoscaler(ObjectKey),
    /// A `node_groups` entry of fleet.toml.
    Config,
}

impl fmt::Display for BoundsSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoundsSource::Annotations => f.write_str("annotations"),
            BoundsSource::MachineAutoscaler(k) => write!(f, "MachineAutoscaler {k}"),
            BoundsSource::Config => f.write_str("fleet.toml"),
        }
    }
}

/// An autoscaled node group.
#[derive(Clone, Debug)]
pub struct NodeGroup {
    pub id: NodeGroupId,
    /// Index of the MachineSet / MachineDeployment in `snapshot.scalables`.
    pub resource: usize,
    pub api: MachineApiGroup,
    pub min: u64,
    pub max: u64,
    /// `spec.replicas`: the size the group is asked to be.
    pub target: u64,
    pub bounds_source: BoundsSource,
    /// What the plan should say about the bounds (e.g. a MachineAutoscaler overriding annotations).
    pub bounds_note: Option<String>,
    /// Indices into `snapshot.scalables` of the MachineSets whose machines belong to this group.
    pub machine_sets: Vec<usize>,
    /// Indices into `snapshot.machines`.
    pub machines: Vec<usize>,
    /// Indices into `snapshot.nodes` of the group's registered nodes.
    pub nodes: Vec<usize>,
    /// Settings this group's annotations override.
    pub options: GroupOptions,
}

/// A resource that opted in but cannot be autoscaled, with why.
#[derive(Clone, Debug)]
pub struct IneligibleGroup {
    pub id: NodeGroupId,
    pub reason: Reason,
}

#[derive(Clone, Debug, Default)]
pub struct NodeGroups {
    pub groups: Vec<NodeGroup>,
    pub ineligible: Vec<IneligibleGroup>,
    /// Per snapshot node: the index of its group, if it belongs to one.
    pub group_of_node: Vec<Option<usize>>,
    /// Per snapshot machine: the node it became, if it has registered.
    pub node_of_machine: Vec<Option<usize>>,
    /// Per snapshot node: its machine, if one is found.
    pub machine_of_node: Vec<Option<usize>>,
    pub warnings: Vec<Warning>,
}

impl NodeGroups {
    pub fn by_id(&self, id: &NodeGroupId) -> Option<&NodeGroup> {
        self.groups.iter().find(|g| &g.id == id)
    }
}

/// What may bound a resource besides its annotations.
#[derive(Clone, Copy)]
struct Claims<'a> {
    autoscalers: Option<&'a Vec<&'a MachineAutoscaler>>,
    config: Option<&'a NodeGroupSpec>,
}

/// Finds the node groups of a snapshot (with those `explicit` in configuration) and maps
/// machines and nodes to them.
pub fn discover(snapshot: &ClusterSnapshot, explicit: &[NodeGroupSpec]) -> NodeGroups {
    let mut out = NodeGroups {
        group_of_node: vec![None; snapshot.nodes.len()],
        node_of_machine: vec![None; snapshot.machines.len()],
        machine_of_node: vec![None; snapshot.nodes.len()],
        ..NodeGroups::default()
    };
    let autoscalers = machine_autoscalers_by_target(snapshot, &mut out.warnings);
    let configured = configured_by_target(snapshot, explicit, &mut out.warnings);
    let claims = |r| claims_of(r, &autoscalers, &configured);
    let autoscaled_owners: HashMap<TargetKey, bool> = snapshot
        .scalables
        .iter()
        .filter(|r| r.kind.descriptor().owns_scalables())
        .map(|r| ((r.api, r.kind, &r.key), opts_in(r, claims(r))))
        .collect();
    for (i, r) in snapshot.scalables.iter().enumerate() {
        let c = claims(r);
        if !opts_in(r, c) {
            continue;
        }
        let id = NodeGroupId::new(r.api, r.kind, &r.key);
        match eligibility(r, c, &autoscaled_owners) {
            Ok(Some(group)) => out.groups.push(NodeGroup {
                options: GroupOptions::parse(r, &id, &mut out.warnings),
                id,
                resource: i,
                ..group
            }),
            Ok(None) => {}
            Err(e) => out.ineligible.push(IneligibleGroup {
                reason: Reason::for_group(&id, ReasonCode::NodeGroupInvalid, e.to_string()),
                id,
            }),
        }
    }
    out.groups.sort_by(|a, b| a.id.cmp(&b.id));
    out.ineligible.sort_by(|a, b| a.id.cmp(&b.id));
    warn_above_max(&mut out);
    attach_machines_and_nodes(snapshot, &mut out);
    out
}

/// A group asked for more replicas than its max (someone scaled it by hand, or lowered the
/// max): it gets no node until it is back within bounds, which the plan should say.
fn warn_above_max(out: &mut NodeGroups) {
    for g in out.groups.iter().filter(|g| g.target > g.max) {
        out.warnings.push(Warning::about(
            WarningCode::AboveMaxSize,
            format!("node group {}", g.id),
            format!(
                "replicas {} are above its max {}: no node is added to it until it is back within its bounds; nodes it does not need may still go",
                g.target, g.max
            ),
        ));
    }
}

fn attach_machines_and_nodes(snapshot: &ClusterSnapshot, out: &mut NodeGroups) {
    // The resource that owns machines (api, ns, name) → group index: the group's own (a
    // MachineSet), or one it owns (a MachineDeployment's MachineSets), by the chain.
    let mut ms_group: HashMap<(MachineApiGroup, &str, &str), usize> = HashMap::new();
    for (gi, g) in out.groups.iter_mut().enumerate() {
        let r = &snapshot.scalables[g.resource];
        let kind = r.kind.descriptor();
        for (si, s) in snapshot.scalables.iter().enumerate() {
            let owned = kind.owns == Some(s.kind.descriptor())
                && s.api == r.api
                && s.key.namespace == r.key.namespace
                && s.owner
                    .as_ref()
                    .is_some_and(|o| &*o.kind == kind.name && o.name == r.key.name);
            if si == g.resource && kind.owns_machines() || owned {
                g.machine_sets.push(si);
                ms_group.insert((s.api, &s.key.namespace, &s.key.name), gi);
            }
        }
    }
    let mut machine_group: BTreeMap<usize, usize> = BTreeMap::new();
    for (mi, m) in snapshot.machines.iter().enumerate() {
        let Some(owner) = m.owner.as_ref().filter(|o| MACHINE.is_owned_by(&o.kind)) else {
            continue;
        };
        if let Some(&gi) = ms_group.get(&(m.api, &*m.key.namespace, &*owner.name)) {
            out.groups[gi].machines.push(mi);
            machine_group.insert(mi, gi);
        }
    }
    let by_provider: HashMap<&str, usize> = snapshot
        .machines
        .iter()
        .enumerate()
        .filter_map(|(i, m)| Some((normalize_provider_id(m.provider_id.as_deref()?), i)))
        .collect();
    let by_key: HashMap<(MachineApiGroup, &str, &str), usize> = snapshot
        .machines
        .iter()
        .enumerate()
        .map(|(i, m)| ((m.api, &*m.key.namespace, &*m.key.name), i))
        .collect();
    let by_node_ref: HashMap<&str, usize> = snapshot
        .machines
        .iter()
        .enumerate()
        .filter_map(|(i, m)| Some((m.node_ref.as_deref()?, i)))
        .collect();
    for (ni, node) in snapshot.nodes.iter().enumerate() {
        let machine = node
            .provider_id
            .as_deref()
            .and_then(|p| by_provider.get(normalize_provider_id(p)))
            .or_else(|| {
                node.machine
                    .as_ref()
                    .and_then(|(api, k)| by_key.get(&(*api, &*k.namespace, &*k.name)))
            })
            .or_else(|| by_node_ref.get(&*node.name));
        if let Some(&mi) = machine {
            out.node_of_machine[mi] = Some(ni);
            out.machine_of_node[ni] = Some(mi);
        }
        if let Some(gi) = machine.and_then(|mi| machine_group.get(mi)) {
            out.groups[*gi].nodes.push(ni);
            out.group_of_node[ni] = Some(*gi);
        }
    }
}

#[cfg(test)]
mod tests;
