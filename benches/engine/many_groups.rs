//! Many node groups: `groups` scale-from-zero MachineSets of one shape (the same instance
//! type and labels in many zones: every pair is similar, the worst case for balancing), one
//! busy worker in the first group, three control-plane nodes, and `pending` pending pods
//! (none: a quiet pass; some: a pass that balances).

use serde_json::{Value, json};

use super::synthetic::{machine, machineset, node, pod};
use fleetscaler::model::ClusterSnapshot;
use fleetscaler::model::dump::SnapshotBuilder;

pub fn build(groups: usize, pending: usize) -> ClusterSnapshot {
    let capacity = [
        ("capacity.cluster-autoscaler.kubernetes.io/cpu", "8"),
        ("capacity.cluster-autoscaler.kubernetes.io/memory", "32Gi"),
    ];
    let mut items: Vec<Value> = Vec::new();
    for g in 0..groups {
        let zone = format!("zone-{g}");
        let name = format!("w-{zone}");
        let replicas = usize::from(g == 0);
        items.push(machineset(
            &name,
            replicas,
            50,
            &zone,
            "m5.2xlarge",
            None,
            &capacity,
        ));
        if g == 0 {
            items.push(node("w-0", &zone, "m5.2xlarge", 8, 32, None));
            items.push(machine("w-0", &name, &zone));
            // Busy enough that no pending pod fits it: each needs a new node.
            let owner = ("ReplicaSet", "busy-1");
            let busy = pod(
                "busy-0",
                "shop",
                "6",
                "1Gi",
                Some("w-0"),
                owner,
                "busy",
                json!({}),
            );
            items.push(busy);
        }
    }
    for i in 0..3 {
        let master = Some("node-role.kubernetes.io/master");
        items.push(node(
            &format!("master-{i}"),
            "zone-0",
            "m5.2xlarge",
            8,
            32,
            master,
        ));
    }
    for i in 0..pending {
        let owner = ("ReplicaSet", "web-1");
        let p = pod(
            &format!("web-{i}"),
            "shop",
            "7",
            "1Gi",
            None,
            owner,
            "web",
            json!({}),
        );
        items.push(p);
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let mut b = SnapshotBuilder::default();
    b.add_text(&list.to_string(), "many-groups")
        .expect("the synthetic cluster is valid");
    b.finish().0
}
