//! What CSI drivers add to a new node, for templates: their zone topology labels and their
//! attach limits.
//!
//! A CSI driver labels every node it runs on with its own zone key
//! (`topology.ebs.csi.aws.com/zone`, `topology.disk.csi.azure.com/zone`, ...), and a volume
//! it provisions is pinned by that key. A template copied from a ready node has those labels
//! already; one built from scale-from-zero annotations has not, so a group at zero in the
//! volume's zone could never serve its pod. Upstream leaves such pods pending unless someone
//! writes the key into the capacity annotations by hand; here the template gets the zone key
//! of each driver that runs on the cluster's existing worker nodes of the same platform
//! (their CSINodes say which), set to the template's zone. Never a key of a driver not seen.
//!
//! Attach limits (NodeVolumeLimits): an existing node has its CSINode's
//! `allocatable.count` per driver; a template copies the CSINode of the ready node it is
//! built from, as upstream builds template node infos, or reads upstream's Cluster API
//! annotation `capacity.cluster-autoscaler.kubernetes.io/csi-driver`
//! (`driver=limit,driver2=limit2`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use fleetscaler_model::labels::Labels;
use fleetscaler_model::node::Node;
use fleetscaler_model::storage::CsiNode;
use fleetscaler_model::{ClusterSnapshot, platform};

/// The zone label a template's zone is read from.
const ZONE: &str = "topology.kubernetes.io/zone";
/// Upstream's Cluster API annotation for a new node's CSI drivers and their limits.
pub const CSI_DRIVER_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/csi-driver";

/// Per CSI driver: how many of its volumes a node may attach.
pub type AttachLimits = Arc<[(Arc<str>, i64)]>;

fn is_control_plane(node: &Node) -> bool {
    node.labels.contains_key("node-role.kubernetes.io/master")
        || node
            .labels
            .contains_key("node-role.kubernetes.io/control-plane")
}

/// The zone keys of the CSI drivers running on worker nodes of `platform`.
pub fn zone_keys(snapshot: &ClusterSnapshot, platform: Option<&str>) -> BTreeSet<Arc<str>> {
    let nodes: HashMap<&str, &Node> = snapshot.nodes.iter().map(|n| (&*n.name, n)).collect();
    let mut keys = BTreeSet::new();
    for csi in &snapshot.storage.csi_nodes {
        let Some(node) = nodes.get(&*csi.name) else {
            continue;
        };
        let node_platform = node
            .provider_id
            .as_deref()
            .and_then(platform::of_provider_id);
        if is_control_plane(node) || node_platform != platform {
            continue;
        }
        let zonal = csi.drivers.iter().flat_map(|d| &d.topology_keys);
        keys.extend(zonal.filter(|k| k.ends_with("/zone")).cloned());
    }
    keys
}

/// `labels` with each of `keys` set to the template's zone, where not set already.
pub fn with_zone_keys(labels: Labels, keys: &BTreeSet<Arc<str>>) -> Labels {
    let Some(zone) = labels.get_arc(ZONE).cloned() else {
        return labels;
    };
    let missing: Vec<(Arc<str>, Arc<str>)> = keys
        .iter()
        .filter(|k| !labels.contains_key(k))
        .map(|k| (k.clone(), zone.clone()))
        .collect();
    if missing.is_empty() {
        return labels;
    }
    labels.merged(&Labels::new(missing))
}

/// The attach limits of an existing node, from its CSINode.
pub fn node_limits(snapshot: &ClusterSnapshot, node: &str) -> AttachLimits {
    snapshot
        .storage
        .csi_nodes
        .iter()
        .find(|c| &*c.name == node)
        .map_or_else(|| Arc::from([]), limits_of)
}

/// The attach limits a CSINode gives its node.
pub fn limits_of(csi: &CsiNode) -> AttachLimits {
    csi.drivers
        .iter()
        .filter_map(|d| Some((d.name.clone(), d.attach_limit?)))
        .collect()
}

/// Upstream's `parseCSIDriverAnnotation`: entries that are not `name=count` with a
/// non-negative count are skipped (the caller warns).
pub fn parse_annotation(value: &str) -> (Vec<(Arc<str>, i64)>, Vec<String>) {
    let mut limits = Vec::new();
    let mut skipped = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let parsed = entry.split_once('=').and_then(|(name, count)| {
            let count = count.trim().parse::<i32>().ok().filter(|c| *c >= 0)?;
            let name = name.trim();
            (!name.is_empty()).then(|| (Arc::from(name), i64::from(count)))
        });
        match parsed {
            Some(limit) => limits.push(limit),
            None => skipped.push(entry.to_string()),
        }
    }
    (limits, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_annotation_reads_as_upstream_reads_it() {
        let (limits, skipped) =
            parse_annotation("ebs.csi.aws.com=25, efs.csi.aws.com = 3,bad,=4,x=-1,y=many");
        let names: Vec<(&str, i64)> = limits.iter().map(|(n, c)| (&**n, *c)).collect();
        assert_eq!(names, [("ebs.csi.aws.com", 25), ("efs.csi.aws.com", 3)]);
        assert_eq!(skipped, ["bad", "=4", "x=-1", "y=many"]);
    }

    #[test]
    fn zone_keys_are_set_to_the_templates_zone_only_where_missing() {
        let keys: BTreeSet<Arc<str>> = ["topology.ebs.csi.aws.com/zone", "topology.gke.io/zone"]
            .into_iter()
            .map(Arc::from)
            .collect();
        let labels = Labels::from_strs([(ZONE, "us-east-1b"), ("topology.gke.io/zone", "kept")]);
        let out = with_zone_keys(labels, &keys);
        assert_eq!(out.get("topology.ebs.csi.aws.com/zone"), Some("us-east-1b"));
        assert_eq!(out.get("topology.gke.io/zone"), Some("kept"));
        let zoneless = with_zone_keys(Labels::default(), &keys);
        assert!(zoneless.is_empty());
    }
}
