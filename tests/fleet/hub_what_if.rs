//! The fleet what-if from a running hub (`/api/v1/what-if`): every cluster's runner evaluates
//! a proposed change on its own cache. Lowering `max_nodes_total` shows the scale-ups it
//! would cap in the cluster with pending pods, and nothing in the others; nothing is
//! written either way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support;

use std::time::Duration;

use e2e_support::*;
use fleetscaler::sim::settings::Flavor;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(40);

fn cluster<'a>(answer: &'a Value, name: &str) -> &'a Value {
    let clusters = answer["clusters"].as_array().unwrap();
    clusters.iter().find(|c| c["name"] == name).unwrap()
}

fn changes<'a>(c: &'a Value, kind: &str) -> Vec<&'a Value> {
    let all = c["changes"].as_array().unwrap();
    all.iter().filter(|x| x["kind"] == kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lower_max_nodes_total_shows_the_scale_ups_it_would_cap_where_pods_wait() {
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let (a, b) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    let dir = TempDir::new("e2e-what-if");
    let mut config = fleet_config(&fleet, dir.path(), fast_settings());
    // Dry run: the pods stay pending, so what the proposal changes stays to be seen.
    config.hub.dry_run = true;
    let hub = Hub::start(config).await;
    let view = hub.view();
    running_report(&view, "sim-2").await;
    // Three workers of 8 CPUs, one pod of 7 each: two more nodes wanted.
    create_pods(a, "job", 5, "7").await;
    let wanted = eventually(LONG, "sim-1 planning a scale-up", || {
        let plan = view.report("sim-1").and_then(|r| r.plan);
        async move {
            let plan = plan?;
            let added: u64 = plan.scale_up.iter().map(|s| s.to - s.from).sum();
            (added == 2).then_some(added)
        }
    })
    .await;
    let nodes = a
        .list(fleetscaler::sim::api::resources::Resource::Nodes)
        .len();
    let (addr, serving) = serve_http(&hub).await;

    let path = format!("/api/v1/what-if?set=max_nodes_total={nodes}");
    let (status, body) = http_request(addr, "GET", &path).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["proposal"][0], format!("max_nodes_total={nodes}"));
    assert_eq!(answer["summary"]["changed"], 1, "{answer:#}");
    assert_eq!(answer["summary"]["errors"], 0, "{answer:#}");

    let one = cluster(&answer, "sim-1");
    let ups = changes(one, "scaleUp");
    assert!(!ups.is_empty(), "{one:#}");
    let capped: u64 = ups
        .iter()
        .map(|u| u["current"]["to"].as_u64().unwrap() - u["current"]["from"].as_u64().unwrap())
        .sum();
    assert_eq!(capped, wanted);
    assert!(ups.iter().all(|u| u["proposed"].is_null()), "{one:#}");
    assert!(
        ups.iter().all(|u| u["reason"]
            .as_str()
            .unwrap()
            .contains("MaxNodesTotalReached")),
        "{one:#}"
    );
    let limit = changes(one, "limit");
    assert_eq!(limit[0]["limit"], "maxNodesTotal", "{one:#}");
    assert_eq!(limit[0]["proposed"], true);
    assert_eq!(one["podsChanged"], 2, "{one:#}");
    let pod = changes(one, "pod")[0];
    assert_eq!(pod["current"]["outcome"], "scaleUp");
    assert_eq!(pod["proposed"]["outcome"], "noScaleUp");
    assert_eq!(one["settings"][0]["key"], "max_nodes_total");
    assert_eq!(one["settings"][0]["proposed"], nodes);

    // sim-2 has no pending pod: the same setting changes, and no decision.
    let two = cluster(&answer, "sim-2");
    assert_eq!(two["settings"][0]["key"], "max_nodes_total");
    assert_eq!(two["changes"], Value::Array(vec![]), "{two:#}");

    // One cluster only, on request.
    let (_, body) = http_request(addr, "GET", &format!("{path}&cluster=sim-2")).await;
    let only: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(only["clusters"].as_array().unwrap().len(), 1);

    // Mistakes are named; nothing was written.
    let (status, body) = http_request(addr, "GET", "/api/v1/what-if?set=max_nodes_totl=3").await;
    assert_eq!(status, 400);
    assert!(
        body.starts_with(
            "set=max_nodes_totl=3: unknown setting `max_nodes_totl`; did you mean `max_nodes_total`?"
        ),
        "{body}"
    );
    let (status, body) = http_request(addr, "GET", &format!("{path}&cluster=nope")).await;
    assert_eq!(status, 404);
    assert!(
        body.contains("no cluster named \"nope\" (clusters: sim-1, sim-2)"),
        "{body}"
    );
    let (status, _) = http_request(addr, "GET", "/api/v1/what-if").await;
    assert_eq!(status, 400);
    assert_eq!(sum_replicas(&groups(a)), 3, "a what-if wrote");
    assert_eq!(sum_replicas(&groups(b)), 3, "a what-if wrote");
    serving.cancel();
    hub.stop().await;
    fleet.shutdown().await;
}
