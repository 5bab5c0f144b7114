//! The EBS CSI driver, as every simulated cluster runs it (a DaemonSet on every node of a
//! real AWS cluster): a node that turns Ready registers the driver, which labels the node
//! with its zone under the driver's own key and makes the node's CSINode (the driver, its
//! attach limit, that key); a node gone takes its CSINode with it (its owner, which the
//! garbage collector follows). The cluster's default StorageClass provisions through it,
//! binding where the pod goes. Nothing provisions or attaches a volume: claims and volumes
//! exist only as clients write them. The hub reads all of it (attach limits, and the zone
//! key on templates of groups scaled from zero).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::resources::Resource;
use crate::api::status::ApiError;
use crate::machine_api::set_node_ready;
use crate::registry::State;
use crate::store::{Key, Stored};

pub const DRIVER: &str = "ebs.csi.aws.com";
/// The node label the driver reports its topology with, and pins its volumes by.
pub const ZONE_KEY: &str = "topology.ebs.csi.aws.com/zone";
/// Volumes a node may attach, about what the driver reports on a Nitro instance (its
/// attachment slots less the root volume and a network interface).
pub const ATTACH_LIMIT: i64 = 25;
/// The default StorageClass, named as OpenShift names it on AWS.
pub const DEFAULT_CLASS: &str = "gp3-csi";

/// The cluster's default StorageClass: the driver's, bound where the pod goes.
pub fn default_class() -> Value {
    json!({
        "metadata": {"name": DEFAULT_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": DRIVER,
        "parameters": {"type": "gp3", "encrypted": "true"},
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": true,
        "volumeBindingMode": "WaitForFirstConsumer"
    })
}

/// Marks `node` Ready as its kubelet reports it, with the driver registered on it: the zone
/// label, and its CSINode (and the ResourceSlice of its DRA driver, if its group runs one:
/// `crate::dra`). Returns the node as written.
pub fn node_ready(state: &mut State, node: &str, stamp: &str) -> Result<Arc<Stored>, ApiError> {
    let written = state.modify(Resource::Nodes, &Key::cluster(node), |v| {
        set_node_ready(v, true, stamp);
        let zone = v["metadata"]["labels"]["topology.kubernetes.io/zone"].clone();
        if zone.is_string() {
            v["metadata"]["labels"][ZONE_KEY] = zone;
        }
    })?;
    let value = written.value();
    let zonal = value["metadata"]["labels"][ZONE_KEY].is_string();
    if zonal
        && state
            .store
            .get(Resource::CsiNodes, &Key::cluster(node))
            .is_none()
    {
        let uid = value["metadata"]["uid"].clone();
        state.seed(Resource::CsiNodes, "", csi_node(node, &uid))?;
    }
    // The group's DRA driver, if it runs one, publishes its devices too.
    crate::dra::publish(state, &value)?;
    Ok(written)
}

fn csi_node(node: &str, uid: &Value) -> Value {
    json!({
        "metadata": {"name": node,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}]},
        "spec": {"drivers": [{"name": DRIVER, "nodeID": format!("i-{node}"),
            "allocatable": {"count": ATTACH_LIMIT}, "topologyKeys": [ZONE_KEY]}]}
    })
}

/// Removes the CSINodes whose node is gone, as the garbage collector does.
pub fn collect(state: &mut State, exists: impl Fn(&str) -> bool) {
    let gone: Vec<Key> = state
        .store
        .range(Resource::CsiNodes, None, None)
        .filter(|s| !exists(&s.key.name))
        .map(|s| s.key.clone())
        .collect();
    for key in gone {
        state.purge(Resource::CsiNodes, &key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_turning_ready_registers_the_driver_once() {
        let mut state = State::new(100, 7);
        let node = json!({"metadata": {"name": "n1",
                "labels": {"topology.kubernetes.io/zone": "us-east-1b"}},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        state.seed(Resource::Nodes, "", node).unwrap();
        for _ in 0..2 {
            let written = node_ready(&mut state, "n1", "2026-01-01T00:00:00Z").unwrap();
            assert_eq!(
                written.value()["metadata"]["labels"][ZONE_KEY],
                "us-east-1b"
            );
        }
        let csi: Vec<Value> = state
            .store
            .range(Resource::CsiNodes, None, None)
            .map(|s| s.value())
            .collect();
        assert_eq!(csi.len(), 1);
        let driver = &csi[0]["spec"]["drivers"][0];
        assert_eq!(
            (
                driver["name"].clone(),
                driver["allocatable"]["count"].clone()
            ),
            (json!(DRIVER), json!(ATTACH_LIMIT))
        );
        assert_eq!(csi[0]["metadata"]["ownerReferences"][0]["kind"], "Node");
        collect(&mut state, |n| n != "n1");
        assert_eq!(state.store.range(Resource::CsiNodes, None, None).count(), 0);
    }

    #[test]
    fn a_node_without_a_zone_gets_no_csinode() {
        let mut state = State::new(100, 7);
        let node = json!({"metadata": {"name": "bare"}, "status": {"conditions": []}});
        state.seed(Resource::Nodes, "", node).unwrap();
        node_ready(&mut state, "bare", "2026-01-01T00:00:00Z").unwrap();
        assert_eq!(state.store.range(Resource::CsiNodes, None, None).count(), 0);
    }
}
