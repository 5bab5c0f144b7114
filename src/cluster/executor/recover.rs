//! Start-up recovery: what a run killed midway left behind, read straight from the API.
//!
//! - A Machine carrying the delete annotation and [`SCALE_DOWN_FROM_ANNOTATION`], not being
//!   deleted, whose group still has at least the recorded replicas: the run was interrupted
//!   between marking it and lowering the group. Its node was drained before the mark, so the
//!   decrement is finished now (`FinishDecrement`). A group already lower needs nothing.
//! - A node with the `ToBeDeletedByClusterAutoscaler` taint (or the executor's cordon) whose
//!   Machine is not marked for deletion: a removal that never got to the machine. The taint
//!   and cordon are removed (`ClearStaleTaint`). Nodes whose machine is marked, or being
//!   deleted, are going away and keep their taint; nodes without a machine are not ours.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node as K8sNode;
use kube::Api;
use kube::api::{DynamicObject, ListParams};

use super::failure::{Stop, entry_of};
use super::machines::{self, MachineRef};
use super::scale::{self, ScaleTarget};
use super::{CONFLICT_ATTEMPTS, Context, SCALE_DOWN_FROM_ANNOTATION, nodes};
use crate::cluster::cache::discovery::machine_api_resource;
use crate::cluster::error::{CallError, Category};
use crate::cluster::outcome::{Action, Entry};
use crate::engine::nodegroups::{self, GroupRef, NodeGroupId};
use crate::model::machine_kind::MACHINE;
use crate::model::meta::Projector;
use crate::model::{ClusterSnapshot, Machine, MachineApi, Node, ObjectKey, ScalableKind};

/// A machine whose decrement may not have happened.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Pending {
    pub machine: MachineRef,
    pub from: u64,
    /// The group recorded on the machine, if readable.
    pub group: Option<(ScalableKind, ObjectKey)>,
    /// The machine's controller (a MachineSet: of a kind that owns Machines), to find the
    /// group by when none is recorded, and its kind.
    pub owner_set: Option<String>,
    pub owner_kind: Option<ScalableKind>,
}

pub(super) async fn run(
    ctx: &Context,
    dry_run: bool,
    in_flight: &HashSet<Arc<str>>,
) -> Result<Vec<Entry>, CallError> {
    let mut found = Found::default();
    let node_api: Api<K8sNode> = Api::all(ctx.client.clone());
    each_listed(ctx, &node_api, "nodes", |n| found.node(&n)).await?;
    for api in ctx.apis.iter() {
        list_machines(ctx, api, &mut found).await?;
    }
    let mut entries = Vec::new();
    for p in &found.pending {
        entries.extend(finish_decrement(ctx, dry_run, p).await);
    }
    for node in found
        .stale_marks()
        .into_iter()
        .filter(|n| !in_flight.contains(n.as_str()))
    {
        let action = Action::ClearStaleTaint {
            node: node.as_str().into(),
        };
        let result = async {
            if dry_run {
                return Err(Stop::DryRun);
            }
            nodes::unmark(ctx, &node).await
        };
        entries.push(entry_of(action, result.await));
    }
    Ok(entries)
}

/// Objects a page of recovery's lists holds. Smaller than the watches' pages: a page here is
/// whole objects (Nodes with their images, Machines as dynamic JSON with their provider's
/// status), and at 1,000 nodes a page of 500 raised the hub's memory by 8 MiB every five
/// minutes, its peak at scale; ten lists of 100 cost nothing at that interval.
const PAGE: u32 = 100;

/// Every object of a kind, a page at a time, each handed to `take` as its page arrives:
/// recovery runs every few minutes, and a cluster's thousand whole Nodes and Machines (a
/// real Node carries its images, a Machine its provider's status) are never held at once.
async fn each_listed<K>(
    ctx: &Context,
    api: &Api<K>,
    what: &str,
    mut take: impl FnMut(K),
) -> Result<(), CallError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(PAGE);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = ctx
            .call(|| format!("list {what}"), api.list(&params))
            .await?;
        page.items.into_iter().for_each(&mut take);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => token = Some(next),
            None => return Ok(()),
        }
    }
}

/// What recovery keeps of the Nodes and Machines it reads: the nodes marked for a removal
/// and every machine, projected (to find a marked node's machine), and the machines with a
/// decrement to finish.
#[derive(Default)]
struct Found {
    projector: Projector,
    /// Only marked nodes; every machine.
    kept: ClusterSnapshot,
    pending: Vec<Pending>,
}

impl Found {
    fn node(&mut self, n: &K8sNode) {
        if !nodes::is_marked(n) || n.metadata.deletion_timestamp.is_some() {
            return;
        }
        if let Ok(node) = Node::from_k8s(n, &mut self.projector) {
            self.kept.nodes.push(node);
        }
    }

    fn machine(&mut self, api: MachineApi, m: &DynamicObject) {
        self.pending.extend(pending_decrement(api, m));
        let Ok(value) = serde_json::to_value(m) else {
            return;
        };
        if let Ok(machine) = Machine::from_json(api.group, value, &mut self.projector) {
            self.kept.machines.push(machine);
        }
    }

    /// Marked nodes whose machine is neither marked for deletion nor being deleted.
    fn stale_marks(&self) -> Vec<String> {
        let groups = nodegroups::discover(&self.kept, &[]);
        self.kept
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(ni, node)| {
                let mi = (*groups.machine_of_node.get(ni)?)?;
                let m = self.kept.machines.get(mi)?;
                (!m.marked_for_deletion && !m.deleting).then(|| node.name.to_string())
            })
            .collect()
    }
}

/// The Machines of one API group (at its chosen version); none when the cluster stopped
/// serving it or does not let the hub read it.
async fn list_machines(ctx: &Context, api: MachineApi, found: &mut Found) -> Result<(), CallError> {
    let all: Api<DynamicObject> =
        Api::all_with(ctx.client.clone(), &machines::machine_resource(api));
    let what = format!("{api} machines");
    match each_listed(ctx, &all, &what, |m| found.machine(api, &m)).await {
        Ok(()) => Ok(()),
        // Not served, or not ours to read: its machines are unknown, so no decrement is
        // finished for them and their nodes' taints are left alone (no machine, not ours).
        Err(e) if matches!(e.category(), Category::NotFound | Category::Forbidden) => {
            tracing::debug!(error = %e, "no {api} machines to recover");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The group recorded on a machine of `api`, back to its parts: an id, or the unqualified
/// `<Kind>/<ns>/<name>` an earlier version wrote (the machine's own API group then). A
/// group of the other API group cannot be this machine's.
fn parse_group(id: &str, api: MachineApi) -> Option<(ScalableKind, ObjectKey)> {
    let named = GroupRef::parse(id).ok()?;
    named
        .api
        .is_none_or(|g| g == api.group)
        .then_some((named.kind, named.key))
}

/// The machine's decrement to finish, if it is marked for deletion with a recorded
/// decrement and not being deleted.
fn pending_decrement(api: MachineApi, m: &DynamicObject) -> Option<Pending> {
    if !machines::is_marked(m, api.group) || m.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let from = machines::recorded_from(m)?;
    let owner = m
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && MACHINE.is_owned_by(&o.kind));
    Some(Pending {
        machine: MachineRef {
            api,
            key: ObjectKey::new(
                m.metadata.namespace.as_deref().unwrap_or_default(),
                m.metadata.name.as_deref().unwrap_or_default(),
            ),
        },
        from,
        group: machines::recorded_group(m).and_then(|g| parse_group(g, api)),
        owner_set: owner.map(|o| o.name.clone()),
        owner_kind: owner.and_then(|o| ScalableKind::parse(&o.kind)),
    })
}

/// The group to lower for a pending machine: the one recorded, else the top of its chain of
/// controllers (its MachineSet's MachineDeployment, else its MachineSet), each read for its
/// controller while its kind may have one.
async fn group_of(ctx: &Context, p: &Pending) -> Result<Option<ScaleTarget>, CallError> {
    let target = |kind, key: ObjectKey| ScaleTarget {
        group: NodeGroupId::new(p.machine.api.group, kind, &key),
        api: p.machine.api,
        kind,
        key,
        // The min was checked when the machine was marked; lowering by the one recorded
        // decrement is what was decided then.
        min: 0,
        max: u64::MAX,
        cached: None,
    };
    if let Some((kind, key)) = p.group.clone() {
        return Ok(Some(target(kind, key)));
    }
    let (Some(set), Some(kind)) = (&p.owner_set, p.owner_kind) else {
        return Ok(None);
    };
    let ns = &p.machine.key.namespace;
    let (mut kind, mut name) = (kind, set.clone());
    // Ends: each step goes up the chain, which has no loops (`machine_kind`'s tests).
    loop {
        let described = kind.descriptor();
        if described.owners().next().is_none() {
            break;
        }
        let ar = machine_api_resource(p.machine.api, described);
        let objects: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &ar);
        let object = ctx
            .call(
                || format!("get {} {ns}/{name}", described.name),
                objects.get(&name),
            )
            .await?;
        let owner = object
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true) && described.is_owned_by(&o.kind))
            .and_then(|o| Some((ScalableKind::parse(&o.kind)?, o.name.clone())));
        match owner {
            Some(up) => (kind, name) = up,
            None => break,
        }
    }
    Ok(Some(target(kind, ObjectKey::new(ns, &name))))
}

/// Lowers the group of a pending machine by one if it still has the recorded replicas;
/// `None` when there is nothing to do.
async fn finish_decrement(ctx: &Context, dry_run: bool, p: &Pending) -> Option<Entry> {
    let target = match group_of(ctx, p).await {
        Ok(Some(t)) => t,
        Ok(None) => {
            tracing::warn!(machine = %p.machine.key, "machine marked with {SCALE_DOWN_FROM_ANNOTATION} has no group to lower");
            return None;
        }
        Err(e) => {
            let group = NodeGroupId::new(
                p.machine.api.group,
                p.owner_kind.unwrap_or(ScalableKind::MachineSet),
                &ObjectKey::new(
                    &p.machine.key.namespace,
                    p.owner_set.as_deref().unwrap_or("?"),
                ),
            );
            let action = Action::FinishDecrement {
                group,
                machine: p.machine.key.clone(),
            };
            return Some(entry_of(action, Err(Stop::from(e))));
        }
    };
    let action = Action::FinishDecrement {
        group: target.group.clone(),
        machine: p.machine.key.clone(),
    };
    let lock = ctx.locks.of(&target.group);
    let _held = lock.lock().await;
    let mut attempt = 1;
    loop {
        let seen = match scale::read(ctx, &target).await {
            Ok(seen) => seen,
            Err(e) => return Some(entry_of(action, Err(e.into()))),
        };
        if seen.replicas < p.from || seen.replicas == 0 {
            return None;
        }
        if dry_run {
            return Some(entry_of(action, Err(Stop::DryRun)));
        }
        let to = seen.replicas - 1;
        match scale::write(ctx, &target, &seen, to).await {
            Ok(()) => {
                let detail = format!(
                    "{} was marked at {} replicas; {} replicas {} -> {to}",
                    p.machine.describe(),
                    p.from,
                    target.describe(),
                    seen.replicas
                );
                return Some(entry_of(action, Ok(detail)));
            }
            Err(stop) if stop.is_conflict() && attempt < CONFLICT_ATTEMPTS => attempt += 1,
            Err(stop) => return Some(entry_of(action, Err(stop))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::node::TO_BE_DELETED_TAINT;
    use crate::model::{MachineApiGroup, MachineApiVersion};
    use serde_json::json;

    fn machine(
        name: &str,
        annotations: serde_json::Value,
        deleting: bool,
    ) -> (MachineApi, DynamicObject) {
        let mut v = json!({
            "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "ns", "annotations": annotations,
                "ownerReferences": [{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": "set", "uid": "u", "controller": true}]},
            "spec": {"providerID": format!("aws:///us-east-1a/i-{name}")},
        });
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        (OPENSHIFT, serde_json::from_value(v).unwrap())
    }

    fn node(name: &str, tainted: bool) -> K8sNode {
        let taints = if tainted {
            json!([{"key": TO_BE_DELETED_TAINT, "value": "1", "effect": "NoSchedule"}])
        } else {
            json!([])
        };
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"providerID": format!("aws:///us-east-1a/i-{name}"), "taints": taints},
        }))
        .unwrap()
    }

    const DELETE: &str = "machine.openshift.io/delete-machine";
    const GROUP: &str = "fleetscaler.io/scale-down-group";
    const OPENSHIFT: MachineApi = MachineApi {
        group: MachineApiGroup::OpenShift,
        version: MachineApiVersion::V1beta1,
    };

    #[test]
    fn only_marked_machines_with_a_recorded_count_are_pending() {
        let listed = [
            machine(
                "a",
                json!({DELETE: "t", SCALE_DOWN_FROM_ANNOTATION: "3", GROUP: "MachineSet/ns/set"}),
                false,
            ),
            machine("b", json!({DELETE: "t"}), false),
            machine("c", json!({SCALE_DOWN_FROM_ANNOTATION: "3"}), false),
            machine(
                "d",
                json!({DELETE: "t", SCALE_DOWN_FROM_ANNOTATION: "3"}),
                true,
            ),
            machine(
                "e",
                json!({DELETE: "t", SCALE_DOWN_FROM_ANNOTATION: "2", GROUP: "bogus"}),
                false,
            ),
            machine(
                "f",
                json!({DELETE: "t", SCALE_DOWN_FROM_ANNOTATION: "4", GROUP: "MachineDeployment.machine.openshift.io/ns/md"}),
                false,
            ),
            machine(
                "g",
                json!({DELETE: "t", SCALE_DOWN_FROM_ANNOTATION: "5", GROUP: "MachineSet.cluster.x-k8s.io/ns/set"}),
                false,
            ),
        ];
        let pending: Vec<Pending> = listed
            .iter()
            .filter_map(|(api, m)| pending_decrement(*api, m))
            .collect();
        let got: Vec<(&str, u64, Option<ScalableKind>, Option<&str>)> = pending
            .iter()
            .map(|p| {
                (
                    &*p.machine.key.name,
                    p.from,
                    p.group.as_ref().map(|g| g.0),
                    p.owner_set.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("a", 3, Some(ScalableKind::MachineSet), Some("set")),
                ("e", 2, None, Some("set")),
                ("f", 4, Some(ScalableKind::MachineDeployment), Some("set")),
                ("g", 5, None, Some("set")),
            ]
        );
    }

    #[test]
    fn taints_are_stale_only_on_nodes_whose_machine_is_not_going() {
        let listed = [
            machine("kept", json!({}), false),
            machine("going", json!({DELETE: "t"}), false),
            machine("deleting", json!({}), true),
            machine("clean", json!({}), false),
        ];
        let nodes = [
            node("kept", true),
            node("going", true),
            node("deleting", true),
            node("clean", false),
            node("orphan", true),
        ];
        let mut found = Found::default();
        nodes.iter().for_each(|n| found.node(n));
        listed.iter().for_each(|(api, m)| found.machine(*api, m));
        assert_eq!(found.stale_marks(), vec!["kept".to_string()]);
    }

    #[test]
    fn recorded_groups_parse_back_in_either_form() {
        assert_eq!(
            parse_group("MachineDeployment.machine.openshift.io/ns/md", OPENSHIFT),
            Some((ScalableKind::MachineDeployment, ObjectKey::new("ns", "md")))
        );
        assert_eq!(
            parse_group("MachineDeployment/ns/md", OPENSHIFT),
            Some((ScalableKind::MachineDeployment, ObjectKey::new("ns", "md"))),
            "the unqualified form an earlier version wrote"
        );
        assert_eq!(
            parse_group("MachineSet.cluster.x-k8s.io/ns/a", OPENSHIFT),
            None
        );
        assert_eq!(parse_group("MachineSet/ns", OPENSHIFT), None);
        assert_eq!(parse_group("Pod/ns/x", OPENSHIFT), None);
    }
}
