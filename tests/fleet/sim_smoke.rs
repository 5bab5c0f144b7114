#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Smoke: a simulated cluster answers the kube client over HTTPS.

use fleetscaler::sim::fleet::Fleet;
use fleetscaler::sim::settings::FleetSettings;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};

#[tokio::test]
async fn lists_nodes_and_pods() {
    let fleet = Fleet::start(FleetSettings::default()).await.unwrap();
    let client = fleet.cluster(1).unwrap().client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 3 + 6);
    // Every node of the initial shape is Ready from the start, control plane included.
    let ready = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    assert!(list.items.iter().all(ready));
    let pods: Api<Pod> = Api::all(client);
    let list = pods.list(&ListParams::default()).await.unwrap();
    assert!(list.items.len() > 20, "{}", list.items.len());
    fleet.shutdown().await;
}
