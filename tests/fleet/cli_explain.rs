#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `fleetscaler explain` as a user runs it: the real binary against a real hub autoscaling the
//! simulated fleet. A pending pod's reasons are printed node group by node group, the same
//! as the hub's API gives them; a pod pending in two clusters needs `--cluster`; a pod that
//! is not pending, or a cluster the hub does not run, is a clear error.

use crate::e2e_support;

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::time::Duration;

use e2e_support::*;
use fleetscaler::engine::settings::SettingsPatch;
use fleetscaler::sim::settings::Flavor;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(60);

/// The binary, off the test's runtime (the hub runs on it meanwhile), with none of the
/// caller's `FLEETSCALER_*` variables.
async fn explain(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
            .arg("explain")
            .args(&args)
            .env_remove("FLEETSCALER_SERVER")
            .env_remove("FLEETSCALER_TOKEN")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// Fails with `code` and a message on stderr, nothing on stdout: the message.
fn failed(out: &Output, code: i32) -> String {
    let stderr = lossy_text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", lossy_text(&out.stdout));
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// The hub's own answer for the pod in `cluster`, once its plan has it.
async fn hub_explains(addr: SocketAddr, cluster: &str, pod: &str) -> Value {
    let path = format!("/api/v1/clusters/{cluster}/plan?pod={pod}");
    eventually(LONG, &format!("{cluster} explains {pod}"), || {
        let path = path.clone();
        async move {
            let (code, body) = http_request(addr, "GET", &path).await;
            let plan: Value = serde_json::from_str(&body).ok().filter(|_| code == 200)?;
            let pod = plan["pendingPods"].get(0)?.clone();
            pod["reasons"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
                .then_some(pod)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_prints_a_pending_pods_reasons_group_by_group() {
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let dir = TempDir::new("cli-explain");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), SettingsPatch::default())).await;
    let (addr, stop) = serve_http(&hub).await;
    let server = format!("http://{addr}");
    let (one, two) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    // No node of any group has 100 CPUs: these wait whatever the hub does.
    create_pods(one, "huge", 1, "100").await;
    create_pods(one, "twin", 1, "100").await;
    create_pods(two, "twin", 1, "100").await;
    let api = hub_explains(addr, "sim-1", "default/huge-0").await;
    hub_explains(addr, "sim-2", "default/twin-0").await;

    // Found in the one cluster it waits in, its reasons under each group.
    let out = explain(&["default/huge-0", "--server", &server]).await;
    let said = succeeded(&out);
    assert!(
        said.starts_with("default/huge-0 in cluster sim-1: stuck, no scale-up helps (noScaleUp)\n"),
        "{said}"
    );
    assert!(
        said.contains("\nWhy, node group by node group:\n"),
        "{said}"
    );
    for g in worker_groups(one) {
        let heading = format!(
            "\n  {}  (MachineSet.machine.openshift.io/openshift-machine-api/{})\n    ",
            g.0, g.0
        );
        assert!(said.contains(&heading), "{heading:?} not in\n{said}");
    }
    assert!(said.contains("InsufficientResources: "), "{said}");

    // As JSON: the hub's reasons as its API gives them.
    let out = explain(&["default/huge-0", "--server", &server, "-o", "json"]).await;
    let json: Value = serde_json::from_str(&succeeded(&out)).unwrap();
    assert_eq!(json["cluster"], "sim-1");
    assert_eq!(json["pod"], "default/huge-0");
    assert_eq!(json["outcome"], "noScaleUp");
    assert_eq!(json["nodeGroup"], Value::Null);
    assert_eq!(json["server"], server.as_str());
    let strip = |r: &Value| -> Vec<Value> {
        let mut all = r.as_array().unwrap().clone();
        for r in &mut all {
            r.as_object_mut()
                .unwrap()
                .entry("nodeGroup")
                .or_insert(Value::Null);
        }
        all
    };
    assert_eq!(strip(&json["reasons"]), strip(&api["reasons"]));

    // Pending in both clusters: the clusters are named, and --cluster picks one.
    let out = explain(&["default/twin-0", "--server", &server]).await;
    let err = failed(&out, 2);
    assert!(
        err.contains(
            "pod default/twin-0 is pending in 2 clusters: sim-1, sim-2; name one with --cluster"
        ),
        "{err}"
    );
    let out = explain(&["default/twin-0", "--cluster", "sim-2", "--server", &server]).await;
    assert!(succeeded(&out).starts_with("default/twin-0 in cluster sim-2: "));

    stop.cancel();
    hub.stop().await;
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_pod_or_cluster_is_a_clear_error() {
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let dir = TempDir::new("cli-explain-unknown");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), SettingsPatch::default())).await;
    let (addr, stop) = serve_http(&hub).await;
    let server = format!("http://{addr}");
    for name in ["sim-1", "sim-2"] {
        running_report(&hub.view(), name).await;
    }

    // Not pending anywhere: exit status 1, and what was searched.
    let out = explain(&["default/nope-0", "--server", &server]).await;
    let err = failed(&out, 1);
    assert!(
        err.starts_with(&format!(
            "error: pod default/nope-0 is not pending in any cluster of the hub at {server} \
             (searched: sim-1, sim-2): it runs or is scheduled, has finished, or is not there \
             at all (the hub explains pending pods only)"
        )),
        "{err}"
    );
    let out = explain(&["default/nope-0", "--cluster", "sim-2", "--server", &server]).await;
    assert!(failed(&out, 1).contains("is not pending in cluster sim-2:"));

    // A cluster the hub does not run, a pod not named NAMESPACE/NAME, no hub at all.
    let out = explain(&["default/nope-0", "--cluster", "nope", "--server", &server]).await;
    let err = failed(&out, 2);
    assert!(
        err.contains("has no cluster named \"nope\" (it has: sim-1, sim-2)"),
        "{err}"
    );
    let out = explain(&["nope-0", "--server", &server]).await;
    assert!(failed(&out, 2).contains("expected NAMESPACE/NAME"));
    stop.cancel();
    hub.stop().await;
    let out = explain(&["default/nope-0", "--server", &server, "--timeout", "2s"]).await;
    assert!(failed(&out, 2).contains("cannot reach the hub at"));
    fleet.shutdown().await;
}
