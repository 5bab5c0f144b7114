//! From the names in a plan to the objects to write: a node group to its MachineSet or
//! MachineDeployment (with its bounds), a node to its Machine, a Machine to its API group,
//! each group at the version discovery chose for it. A name the snapshot no longer resolves
//! means the plan is stale: the action is skipped and the next pass plans again.

use std::sync::Arc;

use super::failure::{Failure, Stop};
use super::machines::MachineRef;
use super::scale::ScaleTarget;
use crate::engine::nodegroups::{self, NodeGroupId, NodeGroups};
use crate::engine::settings::Settings;
use crate::model::{ClusterSnapshot, Machine, MachineApi, MachineApiGroup, MachineApis, ObjectKey};

pub(super) struct Resolver<'a> {
    snapshot: &'a ClusterSnapshot,
    groups: NodeGroups,
    apis: &'a MachineApis,
}

impl<'a> Resolver<'a> {
    pub(super) fn new(
        snapshot: &'a ClusterSnapshot,
        settings: &Settings,
        apis: &'a MachineApis,
    ) -> Self {
        Resolver {
            snapshot,
            groups: nodegroups::discover(snapshot, &settings.node_groups),
            apis,
        }
    }

    /// The version to write a group through. The cache only holds groups discovery found, so
    /// a miss means the snapshot and the executor disagree about the cluster.
    fn api(&self, group: MachineApiGroup) -> Result<MachineApi, Stop> {
        self.apis.get(group).ok_or_else(|| {
            Stop::Fail(Failure::Invalid(format!(
                "the cluster serves {group} in no version fleetscaler writes"
            )))
        })
    }

    fn machine_ref(&self, m: &Machine) -> Result<MachineRef, Stop> {
        Ok(MachineRef {
            api: self.api(m.api)?,
            key: m.key.clone(),
        })
    }

    /// The scalable resource behind a group, with its bounds.
    pub(super) fn target(&self, id: &NodeGroupId) -> Result<ScaleTarget, Stop> {
        let g = self.groups.by_id(id).ok_or_else(|| {
            Stop::Skip(format!(
                "node group {id} is not an autoscaled group in the snapshot any more"
            ))
        })?;
        let r = self.snapshot.scalables.get(g.resource).ok_or_else(|| {
            Stop::Skip(format!(
                "node group {id}: its resource is not in the snapshot"
            ))
        })?;
        Ok(ScaleTarget {
            group: g.id.clone(),
            api: self.api(r.api)?,
            kind: r.kind,
            key: r.key.clone(),
            min: g.min,
            max: g.max,
            cached: r.resource_version.clone().and_then(|version| {
                let replicas = u64::try_from(r.replicas).ok()?;
                Some((replicas, version))
            }),
        })
    }

    /// A machine named by the plan, in the API group of the plan's node group (a Machine of
    /// the other Machine API may have the same namespace and name).
    pub(super) fn machine(&self, key: &ObjectKey, group: &NodeGroupId) -> Result<MachineRef, Stop> {
        let api = self.groups.by_id(group).map(|g| g.api);
        let m = self
            .snapshot
            .machines
            .iter()
            .find(|m| &m.key == key && api.is_none_or(|a| a == m.api))
            .ok_or_else(|| Stop::Skip(format!("machine {key} is not in the snapshot any more")))?;
        self.machine_ref(m)
    }

    /// The machine of a node the plan removes, checking that the node is still in `group`.
    pub(super) fn machine_of_node(
        &self,
        node: &Arc<str>,
        group: &NodeGroupId,
    ) -> Result<MachineRef, Stop> {
        let ni = self
            .snapshot
            .nodes
            .iter()
            .position(|n| n.name == *node)
            .ok_or_else(|| Stop::Skip(format!("node {node} is not in the snapshot any more")))?;
        let in_group = self.groups.group_of_node[ni].map(|gi| &self.groups.groups[gi].id);
        if in_group != Some(group) {
            return Err(Stop::Skip(format!(
                "node {node} is not in node group {group} in the snapshot"
            )));
        }
        let mi = self.groups.machine_of_node[ni]
            .ok_or_else(|| Stop::Skip(format!("node {node} has no machine in the snapshot")))?;
        self.machine_ref(&self.snapshot.machines[mi])
    }
}
