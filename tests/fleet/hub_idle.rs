//! Idle clusters cost nothing (issue 26, point 3): the hub keeps looking at a cluster every
//! scan interval, but a pass whose inputs are those of the last settled one is skipped and
//! counted; any change of what a pass reads brings the passes back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support::*;

use std::time::Duration;

use fleetscaler::sim::settings::Flavor;

const LONG: Duration = Duration::from_secs(60);

/// (when the last pass ran, passes skipped as idle) of `cluster`, once it has run a pass;
/// the last look is never older than the last pass.
fn passes(hub: &Hub, cluster: &str) -> Option<(jiff::Timestamp, u64)> {
    let r = hub.view().report(cluster)?;
    let at = r.last_pass?.at;
    assert!(
        r.looked_at.is_some_and(|looked| looked >= at),
        "{:?}",
        r.looked_at
    );
    Some((at, r.counters.idle_skips))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_cluster_is_looked_at_without_passes_until_something_changes() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let sim = &fleet.clusters()[0];
    let dir = TempDir::new("hub-idle");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    // Settled: every group at its minimum and busy or kept, nothing pending. Each scan
    // (300 ms here) is then a look, not a pass.
    let (settled_at, skips) = eventually(LONG, "passes skipped as idle", || {
        let seen = passes(&hub, "sim-1").filter(|(_, skips)| *skips >= 3);
        async move { seen }
    })
    .await;
    eventually(LONG, "more looks, and still no pass", || {
        let seen = passes(&hub, "sim-1");
        async move {
            let (at, now_skips) = seen?;
            assert_eq!(at, settled_at, "a pass ran with nothing changed");
            (now_skips >= skips + 3).then_some(())
        }
    })
    .await;
    let settled = hub.view().report("sim-1").and_then(|r| r.last_pass);
    assert_eq!(
        settled.and_then(|p| p.waits_on),
        None,
        "settled: nothing waits"
    );
    let looked = hub.view().report("sim-1").and_then(|r| r.looked_at);
    assert!(
        looked.is_some_and(|l| l > settled_at),
        "looks go on: {looked:?}"
    );
    let metrics = fleetscaler::telemetry::metrics::text(&hub.view().metrics());
    assert!(
        metrics.contains("fleetscaler_idle_passes_skipped_total{cluster=\"sim-1\"}"),
        "{metrics}"
    );

    // A pending pod is a change: a pass runs, and while it waits the passes go on.
    create_pods(sim, "huge", 1, "100").await;
    let (woken_at, _) = eventually(LONG, "a pass after the change", || {
        let seen = passes(&hub, "sim-1").filter(|(at, _)| *at > settled_at);
        async move { seen }
    })
    .await;
    let woken = hub.view().report("sim-1").and_then(|r| r.last_pass);
    let cause = woken.map(|p| p.cause).unwrap_or_default();
    assert!(
        cause.starts_with("changed: ") && cause.contains("pods"),
        "{cause}"
    );
    eventually(LONG, "passes again while a pod waits", || {
        let seen = passes(&hub, "sim-1").filter(|(at, _)| *at > woken_at);
        async move { seen }
    })
    .await;
    let last = hub.view().report("sim-1").and_then(|r| r.last_pass);
    let last = last.expect("a pass ran");
    assert_eq!(last.waits_on.as_deref(), Some("1 pending pod(s)"));
    assert_eq!(last.cause, "unsettled", "a waiting pod passes every scan");
    let metrics = fleetscaler::telemetry::metrics::text(&hub.view().metrics());
    for cause in ["first", "changed", "unsettled"] {
        let sample = format!("fleetscaler_passes_total{{cluster=\"sim-1\",cause=\"{cause}\"}}");
        assert!(metrics.contains(&sample), "{sample} in {metrics}");
    }
    hub.stop().await;
    fleet.shutdown().await;
}
