//! DRA devices not published yet: upstream's `DraCustomResourcesProcessor` counts a node
//! whose node-local ResourceSlices lack a driver its group's template has as not ready
//! (`ResourceUnready`), so that a node whose DRA driver is still starting is neither
//! copied into a template nor taken for a node without devices (which would buy another
//! node for the pods waiting for it).
//!
//! What a group's nodes should publish: the drivers of the node-local slices on any of its
//! nodes (its nodes are alike; upstream compares with the template, copied from one of
//! them), or, when none publishes any, the driver its scale-from-zero annotation
//! `dra-driver` names when it also declares GPUs. Upstream counts complete pools per driver; this counts drivers, which a
//! node publishing only part of its pools passes (its missing devices then look absent:
//! cautious, no node is bought for them).

use std::collections::HashSet;
use std::sync::Arc;

use fleetscaler_model::ClusterSnapshot;
use fleetscaler_model::node::Node;

use super::dra_template::annotated_slices;
use super::nodegroups::NodeGroup;
use super::simulator::dra::current_slices;

/// The drivers each node publishes node-local slices of, by node name.
pub struct Published<'a> {
    by_node: HashSet<(&'a str, &'a str)>,
    /// Whether the slices were read at all: unread, no node waits for any.
    listed: bool,
}

impl<'a> Published<'a> {
    pub fn index(snapshot: &'a ClusterSnapshot) -> Self {
        let by_node = if snapshot.dra.listed {
            current_slices(&snapshot.dra.slices)
                .into_iter()
                .filter_map(|s| Some((s.node_local_to()?, &*s.driver)))
                .collect()
        } else {
            HashSet::new()
        };
        Published {
            by_node,
            listed: snapshot.dra.listed,
        }
    }

    /// The drivers the group's nodes should publish.
    pub fn expected(&self, snapshot: &ClusterSnapshot, group: &NodeGroup) -> Vec<Arc<str>> {
        let mut drivers: Vec<Arc<str>> = Vec::new();
        if !self.listed {
            return drivers;
        }
        for &i in &group.nodes {
            let name = &*snapshot.nodes[i].name;
            for (_, driver) in self.by_node.iter().filter(|(n, _)| *n == name) {
                if !drivers.iter().any(|d| &**d == *driver) {
                    drivers.push((*driver).into());
                }
            }
        }
        // What the nodes publish wins over what the annotation says: a driver named
        // differently there must not hold every node as starting.
        if drivers.is_empty() {
            let own = &snapshot.scalables[group.resource];
            drivers.extend(annotated_slices(own).iter().map(|s| s.driver.clone()));
        }
        drivers
    }

    /// The node lacks slices of a driver its group's nodes publish: its driver is starting.
    pub fn pending(&self, node: &Node, expected: &[Arc<str>]) -> bool {
        expected
            .iter()
            .any(|d| !self.by_node.contains(&(&*node.name, &**d)))
    }
}
