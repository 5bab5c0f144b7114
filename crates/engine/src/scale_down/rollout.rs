//! A MachineDeployment rolling out keeps its nodes: upstream's Cluster API provider leaves
//! them out of the scale-down candidates (`ScaleDownNodeUpgradeProcessor`, with
//! `nodegroup.IsMachineDeploymentAndRollingOut`), since its controller is replacing
//! machines already and a removal would fight it. Rolling out means: a MachineSet of the
//! deployment other than the newest revision's still asks for or has machines.

use fleetscaler_model::ClusterSnapshot;
use fleetscaler_model::machine::REVISION_ANNOTATION;
use fleetscaler_model::machine_kind::ScalableKind;

use crate::nodegroups::NodeGroup;

/// Why `group`'s nodes are held, if its MachineDeployment is rolling out. A revision that is
/// not a number holds them too, as upstream skips the node when it cannot tell.
pub(super) fn rolling_out(snapshot: &ClusterSnapshot, group: &NodeGroup) -> Option<String> {
    if snapshot.scalables[group.resource].kind != ScalableKind::MachineDeployment {
        return None;
    }
    let sets: Vec<_> = group
        .machine_sets
        .iter()
        .map(|&i| &snapshot.scalables[i])
        .collect();
    let mut latest: i64 = 0;
    for ms in &sets {
        let Some(text) = ms.annotation(REVISION_ANNOTATION) else {
            continue;
        };
        match text.parse::<i64>() {
            Ok(r) => latest = latest.max(r),
            Err(e) => {
                return Some(format!(
                    "MachineSet {} has revision {text:?}, not a number ({e}): whether its MachineDeployment is rolling out cannot be told",
                    ms.key
                ));
            }
        }
    }
    // Compared as text, as upstream does: a set without the annotation is an old one.
    let latest = latest.to_string();
    sets.iter()
        .filter(|ms| ms.annotation(REVISION_ANNOTATION) != Some(latest.as_str()))
        .find_map(|ms| {
            let machines = ms.replicas.max(ms.status_replicas.unwrap_or(0));
            (machines > 0).then(|| {
                format!(
                    "its MachineDeployment is rolling out: MachineSet {} of an older revision than {latest} still has {machines} machine(s)",
                    ms.key
                )
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::snapshot_of_text;
    use crate::nodegroups::discover;
    use crate::reason::ReasonCode;
    use crate::{EngineState, Settings, run_once};

    /// An autoscaled MachineDeployment with an old MachineSet (revision `old_rev`, `old`
    /// replicas, `old_status` in its status) and the new one (revision 2, one machine), each
    /// with one empty 4-CPU node.
    fn deployment(old_rev: &str, old: i64, old_status: i64) -> ClusterSnapshot {
        let mut text = String::from(
            r#"
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata:
  name: md
  namespace: ns
  uid: md-uid
  annotations:
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "0"
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "5"
spec: {replicas: 2}
"#,
        );
        for (name, rev, replicas, status) in
            [("md-old", old_rev, old, old_status), ("md-new", "2", 1, 1)]
        {
            text.push_str(&format!(
                r#"---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineSet
metadata:
  name: {name}
  namespace: ns
  uid: {name}-uid
  annotations: {{machinedeployment.clusters.x-k8s.io/revision: "{rev}"}}
  ownerReferences: [{{apiVersion: cluster.x-k8s.io/v1beta2, kind: MachineDeployment, name: md, uid: md-uid, controller: true}}]
spec: {{replicas: {replicas}}}
status: {{replicas: {status}}}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata:
  name: {name}-1
  namespace: ns
  ownerReferences: [{{apiVersion: cluster.x-k8s.io/v1beta2, kind: MachineSet, name: {name}, uid: {name}-uid, controller: true}}]
spec: {{providerID: "aws:///us-east-1a/i-{name}"}}
status: {{phase: Running, nodeRef: {{name: node-{name}}}}}
---
apiVersion: v1
kind: Node
metadata: {{name: node-{name}, creationTimestamp: "2026-11-01T00:00:00Z"}}
spec: {{providerID: "aws:///us-east-1a/i-{name}"}}
status:
  allocatable: {{cpu: "4", memory: 16Gi, pods: "110"}}
  capacity: {{cpu: "4", memory: 16Gi, pods: "110"}}
  conditions: [{{type: Ready, status: "True", lastTransitionTime: "2026-11-01T00:00:00Z"}}]
"#
            ));
        }
        snapshot_of_text(&text)
    }

    fn why(s: &ClusterSnapshot) -> Option<String> {
        let groups = discover(s, &[]);
        assert_eq!(groups.groups.len(), 1, "{:?}", groups.ineligible);
        rolling_out(s, &groups.groups[0])
    }

    #[test]
    fn an_old_machine_set_with_machines_means_rolling_out() {
        let held = why(&deployment("1", 1, 1)).unwrap();
        assert!(
            held.contains("ns/md-old") && held.contains("older revision than 2"),
            "{held}"
        );
        // Scaled to zero but its machines not yet gone: still rolling out.
        assert!(why(&deployment("1", 0, 1)).is_some());
        assert_eq!(why(&deployment("1", 0, 0)), None);
    }

    #[test]
    fn revisions_are_read_as_upstream_reads_them() {
        // A newer revision on the "old" set makes the other one the old one.
        let held = why(&deployment("3", 1, 1)).unwrap();
        assert!(held.contains("ns/md-new"), "{held}");
        // Not a number: cannot tell, so held.
        let held = why(&deployment("one", 0, 0)).unwrap();
        assert!(held.contains("not a number"), "{held}");
    }

    #[test]
    fn nodes_of_a_rolling_out_deployment_stay_with_the_reason() {
        let at: jiff::Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        let plan = run_once(
            &deployment("1", 1, 1),
            &mut EngineState::default(),
            &Settings::default(),
            at,
        );
        assert!(plan.unneeded.is_empty(), "{:?}", plan.unneeded);
        for node in ["node-md-old", "node-md-new"] {
            let stays = plan
                .not_removable
                .iter()
                .find(|n| &*n.node == node)
                .unwrap();
            assert_eq!(stays.code, ReasonCode::NodeGroupRollingOut);
        }
        let plan = run_once(
            &deployment("1", 0, 0),
            &mut EngineState::default(),
            &Settings::default(),
            at,
        );
        assert!(!plan.unneeded.is_empty(), "{:?}", plan.not_removable);
        assert!(
            plan.not_removable
                .iter()
                .all(|n| n.code != ReasonCode::NodeGroupRollingOut)
        );
    }
}
