//! The dashboard in a real browser: a simulated fleet, the hub and its HTTP server, and
//! headless Chromium loading the page. What is checked is what a person would see: every
//! cluster in a row with its node counts (as the API says them), a health word and two
//! sparklines; then one cluster's page with its node groups by name and its pending pods
//! with why they wait. A second test drives the page through the DevTools protocol: the
//! keyboard to a cluster, the back button to the fleet, a collapsed section that stays
//! open across refreshes, and the stale-data warning once the hub stops answering.
//!
//! Needs Chromium (`apt-get install chromium`; `scripts/test.sh` installs it under CI), or
//! `FLEETSCALER_CHROMIUM=/path/to/chrome`. Without it the test fails and says so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::dashboard_support;
use crate::e2e_support;

use std::time::Duration;

use dashboard_support::*;
use e2e_support::*;
use fleetscaler::cluster::report::{ClusterReport, Phase};
use fleetscaler::engine::plan::Outcome as PodOutcome;
use fleetscaler::engine::settings::SettingsPatch;
use fleetscaler::hub::FleetView;
use fleetscaler::sim::fleet::FailureMode;
use fleetscaler::sim::settings::Flavor;
use tokio_util::sync::CancellationToken;

const LONG: Duration = Duration::from_secs(60);

/// Node counts per cluster, as the API reports them.
fn counts(view: &FleetView) -> Vec<(String, u64, u64)> {
    view.reports()
        .iter()
        .map(|r| (r.name.to_string(), r.ready_nodes, r.nodes))
        .collect()
}

struct Setup {
    fleet: fleetscaler::sim::fleet::Fleet,
    hub: Hub,
    server: CancellationToken,
    base: String,
    _dir: TempDir,
}

/// Two quiet clusters and the hub over them with its HTTP server; sim-1 adds nodes that
/// never turn ready, and sim-2 has two pods no node group can ever hold (so they stay
/// pending, stuck, with reasons).
async fn setup() -> Setup {
    // Before anything starts: a missing browser is the first thing to say.
    chromium();
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let dir = TempDir::new("dashboard");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), SettingsPatch::default())).await;
    let listener = fleetscaler::server::bind("127.0.0.1:0", "--listen")
        .await
        .unwrap();
    let addr = fleetscaler::server::local_addr(&listener).unwrap();
    let server = CancellationToken::new();
    tokio::spawn(fleetscaler::server::serve(
        listener,
        hub.view(),
        server.clone(),
    ));
    // sim-1 scales up onto nodes that never turn ready (so ready and total differ).
    let sim1 = &fleet.clusters()[0];
    for (group, ..) in worker_groups(sim1) {
        sim1.set_failure_mode(&group, Some(FailureMode::NotReady))
            .unwrap();
    }
    create_pods(sim1, "web", 8, "3").await;
    create_pods(&fleet.clusters()[1], "huge", 2, "100").await;
    let view = hub.view();
    eventually(
        LONG,
        "both clusters ran passes, sim-1 has unready nodes, sim-2 stuck pods",
        || {
            let reports = view.reports();
            let ready = reports.len() == 2
                && reports.iter().all(|r| {
                    r.phase == Phase::Running && r.last_pass.is_some() && r.history.len() >= 3
                })
                && reports
                    .iter()
                    .any(|r| r.name.as_str() == "sim-1" && r.ready_nodes < r.nodes)
                && reports
                    .iter()
                    .any(|r| r.name.as_str() == "sim-2" && r.stuck_pods >= 2);
            async move { ready.then_some(()) }
        },
    )
    .await;
    Setup {
        fleet,
        hub,
        server,
        base: format!("http://{addr}"),
        _dir: dir,
    }
}

impl Setup {
    async fn stop(self) {
        self.server.cancel();
        self.hub.stop().await;
        self.fleet.shutdown().await;
    }
}

/// The fleet page's rows, loaded while the node counts hold still (so the page and the
/// API are compared at the same moment).
async fn fleet_rows(s: &Setup) -> (Vec<(String, u64, u64)>, String) {
    let view = s.hub.view();
    for _ in 0..3 {
        let before = counts(&view);
        let dom = dump_dom(&format!("{}/", s.base)).await;
        if counts(&view) == before {
            return (before, dom);
        }
    }
    panic!("node counts kept changing while the page loaded");
}

fn health_words(report: &ClusterReport) -> &'static str {
    match (report.phase, report.nodes_healthy) {
        (Phase::Running, true) => "healthy",
        (Phase::Running, false) => "unhealthy",
        _ => "failed",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_and_cluster_pages_show_what_the_api_says() {
    let s = setup().await;
    let (counts, dom) = fleet_rows(&s).await;

    let table = between(&dom, "<table class=\"clusters\"", "</table>");
    let rows = body_rows(table);
    assert_eq!(rows.len(), 2, "one row per cluster: {table}");
    let view = s.hub.view();
    for (name, ready, nodes) in &counts {
        let row = rows
            .iter()
            .find(|r| text(r).starts_with(name.as_str()))
            .unwrap_or_else(|| panic!("no row for {name}: {table}"));
        let seen = text(row);
        assert!(
            seen.contains(&format!("{ready} / {nodes}")),
            "{name}: ready / total nodes should read {ready} / {nodes}: {seen}"
        );
        let report = view.report(name).unwrap();
        assert!(
            seen.contains(health_words(&report)),
            "{name}: no health word in {seen}"
        );
        assert!(
            row.contains(&format!("href=\"#/clusters/{name}\"")),
            "{name}: no link to its page"
        );
        assert_eq!(
            row.matches("<svg class=\"spark\"").count(),
            2,
            "{name}: two sparklines"
        );
        assert_eq!(row.matches("<polyline").count(), 2, "{name}: with lines");
    }
    let sim2 = rows.iter().find(|r| text(r).starts_with("sim-2")).unwrap();
    let report = view.report("sim-2").unwrap();
    assert!(
        text(sim2).contains(&format!("{} / {}", report.pending_pods, report.stuck_pods)),
        "pending / stuck of sim-2: {}",
        text(sim2)
    );
    assert!(
        dom.contains("role=\"status\""),
        "the refresh status is announced"
    );
    assert!(text(&dom).contains("Updated"), "no refresh time shown");

    // One cluster's page: its node groups by name, its pending pods and why they wait.
    let dom = dump_dom(&format!("{}/#/clusters/sim-2", s.base)).await;
    let heading = text(between(&dom, "<h2", "</h2>"));
    assert!(heading.contains("sim-2"), "{heading}");
    let groups = between(&dom, "<table class=\"groups\"", "</table>");
    let plan = report.plan.clone().unwrap();
    for g in plan.node_groups.iter() {
        let name = g.id.as_str().rsplit('/').next().unwrap();
        assert!(
            text(groups).contains(name),
            "node group {name} missing: {}",
            text(groups)
        );
    }
    let pending = between(&dom, "<table class=\"pending\"", "</table>");
    let stuck: Vec<_> = plan
        .pending_pods
        .iter()
        .filter(|p| p.outcome == PodOutcome::NoScaleUp)
        .filter(|p| p.pod.name.starts_with("huge-"))
        .collect();
    assert_eq!(stuck.len(), 2, "{:?}", plan.pending_pods);
    for p in stuck {
        let pod = p.pod.to_string();
        let row = body_rows(pending)
            .into_iter()
            .find(|r| text(r).starts_with(&pod))
            .unwrap_or_else(|| panic!("no row for {pod}: {}", text(pending)));
        let seen = text(row);
        assert!(seen.contains("stuck: no scale-up helps"), "{seen}");
        let reason = &p.reasons.first().expect("a stuck pod has reasons").message;
        assert!(
            seen.contains(reason.as_str()),
            "{pod}: {reason:?} not in {seen}"
        );
    }
    let back = between(&dom, "<p class=\"back\"", "</p>");
    assert!(
        back.contains("href=\"#/\""),
        "a way back to the fleet: {back}"
    );

    // A cluster the hub does not have says so.
    let dom = dump_dom(&format!("{}/#/clusters/nope", s.base)).await;
    assert!(
        text(&dom).contains("The hub has no cluster named “nope”"),
        "{}",
        text(&dom)
    );
    s.stop().await;
}

/// The keyboard's way to a link: Tab until it has focus.
fn tab_to(b: &mut cdp::Browser, href: &str) {
    let focused = "document.activeElement && document.activeElement.getAttribute('href')";
    for _ in 0..40 {
        if b.eval(focused) == href {
            return;
        }
        b.press("Tab", 9, None);
    }
    panic!("Tab never reached the link to {href}: {}", b.eval(PAGE));
}

fn browse(base: &str, server: CancellationToken) {
    let profile = TempDir::new("dashboard-cdp");
    let mut b = cdp::Browser::start(&chromium(), profile.path());
    b.navigate(&format!("{base}/"));
    let fleet_page = "document.querySelector('main h2')?.textContent === 'Fleet' \
                      && document.querySelectorAll('#clusters tbody tr').length === 2";
    b.wait_for(STEP, "the fleet page", fleet_page, PAGE);

    // Keyboard only: Tab to sim-2's link (which keeps the focus across a refresh), Enter.
    tab_to(&mut b, "#/clusters/sim-2");
    next_refresh(&mut b);
    assert_eq!(
        b.eval("document.activeElement.getAttribute('href')"),
        "#/clusters/sim-2",
        "a refresh moved the keyboard focus"
    );
    b.press("Enter", 13, Some("\r"));
    let cluster_page = "location.hash === '#/clusters/sim-2' \
                        && document.querySelector('main h2')?.textContent.startsWith('sim-2') \
                        && document.querySelector('table.pending') !== null";
    b.wait_for(STEP, "sim-2's page", cluster_page, PAGE);
    let pending = b.eval("document.querySelector('table.pending').innerText");
    let pending = pending.as_str().unwrap_or_default();
    assert!(pending.contains("default/huge-0"), "{pending}");
    assert_eq!(b.eval("document.title"), "sim-2 · fleetscaler");

    // The settings, opened, stay open across the next refreshes.
    b.eval("document.querySelector('details[data-key=settings] summary').click()");
    next_refresh(&mut b);
    assert_eq!(
        b.eval("document.querySelector('details[data-key=settings]').open"),
        true,
        "the settings closed on refresh"
    );
    let settings = b.eval("document.querySelector('table.settings').innerText");
    assert!(
        settings
            .as_str()
            .unwrap_or_default()
            .contains("scale_down_unneeded_time"),
        "{settings}"
    );

    // The browser's back button returns to the fleet.
    b.back();
    b.wait_for(STEP, "the fleet page after Back", fleet_page, PAGE);
    assert_eq!(b.eval("location.hash"), "");

    // The hub stops answering: the page says its data is stale, and keeps it.
    server.cancel();
    let stale = "document.body.classList.contains('stale') \
                 && document.getElementById('refresh').textContent.startsWith('Stale')";
    b.wait_for(STEP, "the stale-data warning", stale, PAGE);
    assert_eq!(
        b.eval("document.querySelectorAll('#clusters tbody tr').length"),
        2,
        "the last data stays on screen"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyboard_back_button_and_a_stale_warning_work_in_the_browser() {
    let s = setup().await;
    let (base, server) = (s.base.clone(), s.server.clone());
    tokio::task::spawn_blocking(move || browse(&base, server))
        .await
        .unwrap();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degraded_fleet_shows_a_banner_naming_the_cluster_at_fault() {
    chromium();
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let dir = TempDir::new("dashboard-degraded");
    let mut config = fleet_config(&fleet, dir.path(), SettingsPatch::default());
    config.fleet.max_unhealthy_clusters = Some(0);
    let hub = Hub::start(config).await;
    let listener = fleetscaler::server::bind("127.0.0.1:0", "--listen")
        .await
        .unwrap();
    let base = format!(
        "http://{}",
        fleetscaler::server::local_addr(&listener).unwrap()
    );
    let server = CancellationToken::new();
    tokio::spawn(fleetscaler::server::serve(
        listener,
        hub.view(),
        server.clone(),
    ));
    let view = hub.view();
    fleet.clusters()[1]
        .faults()
        .set(fleetscaler::sim::faults::Faults {
            error_rate: 1.0,
            error_code: 500,
            drop_watches: true,
            ..Default::default()
        });
    eventually(LONG, "the fleet degraded by sim-2", || {
        let h = view.health();
        async move { (h.state == fleetscaler::hub::health::FleetState::Degraded).then_some(()) }
    })
    .await;
    let page = text(&dump_dom(&format!("{base}/")).await);
    assert!(page.contains("Fleet degraded:"), "{page}");
    assert!(
        page.contains("sim-2 ("),
        "the banner names the cluster: {page}"
    );
    assert!(
        page.contains("Scale-down is paused across the fleet."),
        "{page}"
    );

    fleet.clusters()[1].faults().clear();
    eventually(LONG, "the fleet healthy again", || {
        let h = view.health();
        async move { (h.state == fleetscaler::hub::health::FleetState::Healthy).then_some(()) }
    })
    .await;
    let page = text(&dump_dom(&format!("{base}/")).await);
    assert!(!page.contains("Fleet degraded"), "{page}");
    server.cancel();
    hub.stop().await;
    fleet.shutdown().await;
}
