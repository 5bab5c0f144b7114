//! What only a hub knows, on the dashboard, in a real browser against a simulated fleet:
//!
//! - A capacity failure in one cluster, shared with the others: the fleet page says what
//!   failed where, with the cloud's error, until when the others hold back and which of
//!   their groups do; the other cluster's page marks its group as backed off for that
//!   cluster's failure.
//! - The what-if page, driven through the DevTools protocol: settings typed into its form
//!   (kept across the page's refreshes), each cluster's answer as the API gives it (the
//!   cluster with pending pods shows its capped scale-up, the other no change), the API's
//!   400 in its own words, and a what-if opened from a shared link.
//!
//! Needs Chromium, as tests/fleet/dashboard.rs does: without it the tests fail and say so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::dashboard_support;
use crate::e2e_support;

use std::time::Duration;

use dashboard_support::*;
use e2e_support::*;
use fleetscaler::engine::settings::SettingsPatch;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::faults::{CapacityFault, DEFAULT_CAPACITY_REASON, Faults};
use fleetscaler::sim::settings::Flavor;
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(40);

/// The last part of a node group's id, as the pages name it.
fn group_name(id: &str) -> &str {
    id.rsplit('/').next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_capacity_failure_shows_on_the_fleet_page_and_the_clusters_it_backs_off() {
    chromium();
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let a = &fleet.clusters()[0];
    let dir = TempDir::new("dashboard-shared-failure");
    // Long enough that the failure is still in force when the pages are read.
    let settings = SettingsPatch {
        initial_node_group_backoff: Some(Duration::from_secs(600)),
        ..fast_settings()
    };
    let hub = Hub::start(fleet_config(&fleet, dir.path(), settings)).await;
    let view = hub.view();
    running_report(&view, "sim-1").await;
    // The cloud has no m6i.2xlarge left for sim-1, in any zone: whichever worker group it
    // scales for its fourth pod (three fill its three workers), the machine fails.
    a.faults().set(Faults {
        capacity: vec![CapacityFault {
            instance_type: "m6i.2xlarge".into(),
            zone: None,
            reason: DEFAULT_CAPACITY_REASON.into(),
            message: None,
        }],
        ..Default::default()
    });
    create_pods(a, "job", 4, "7").await;
    let (group, failure) = eventually(
        LONG,
        "a group of sim-2 backed off for sim-1's failure",
        || {
            let report = view.report("sim-2");
            async move {
                report?.groups.iter().find_map(|g| {
                    let f = g.fleet_backoff.clone()?;
                    Some((g.id.as_str().to_string(), f))
                })
            }
        },
    )
    .await;
    assert_eq!(failure.cluster, "sim-1");
    let (_, base, server) = serve(&hub).await;

    // The fleet page: what failed where, the cloud's error, until when, and who holds back.
    let dom = dump_dom(&format!("{base}/")).await;
    let section = between(&dom, "<section class=\"failures\"", "</section>");
    let seen = text(section);
    assert!(
        seen.contains("Capacity failures shared across the fleet ("),
        "{seen}"
    );
    let headline = format!("{} failed in cluster sim-1", failure.key.describe());
    assert!(seen.contains(&headline), "{headline:?} not in {seen}");
    let machine = failure
        .machine
        .as_deref()
        .expect("the failed machine is named");
    assert!(seen.contains(machine), "{machine} not in {seen}");
    assert!(
        seen.contains(&failure.reason) && failure.reason.contains(DEFAULT_CAPACITY_REASON),
        "the cloud's error {:?} not in {seen}",
        failure.reason
    );
    let zone = failure.key.zone.as_deref().unwrap();
    assert!(
        seen.contains(&format!(
            "Other clusters' groups of m6i.2xlarge in {zone} are backed off until"
        )),
        "{seen}"
    );
    let held = format!("Backed off now: sim-2 ({})", group_name(&group));
    assert!(seen.contains(&held), "{held:?} not in {seen}");
    assert!(
        section.contains("href=\"#/clusters/sim-1\""),
        "the failing cluster links to its page: {section}"
    );

    // sim-2's page: its group backed off for sim-1's failure, said in words.
    let dom = dump_dom(&format!("{base}/#/clusters/sim-2")).await;
    let table = between(&dom, "<table class=\"groups\"", "</table>");
    let rows = body_rows(table);
    let row = rows
        .iter()
        .find(|r| text(r).starts_with(group_name(&group)))
        .unwrap_or_else(|| panic!("no row for {group}: {}", text(table)));
    let seen = text(row);
    assert!(seen.contains("backed off for cluster sim-1"), "{seen}");
    assert!(
        seen.contains(&format!("Fleet backoff: {headline}")),
        "{seen}"
    );
    assert!(seen.contains(DEFAULT_CAPACITY_REASON), "{seen}");
    assert!(
        row.contains("href=\"#/clusters/sim-1\""),
        "a link to sim-1: {row}"
    );
    // Another instance type is not held back.
    let gpu = rows.iter().find(|r| text(r).contains("-gpu-")).unwrap();
    assert!(!text(gpu).contains("backed off"), "{}", text(gpu));

    server.cancel();
    hub.stop().await;
    fleet.shutdown().await;
}

/// The page's text of one cluster's answer.
fn answer_of(b: &mut cdp::Browser, cluster: &str) -> String {
    let js = format!("document.getElementById('what-if-{cluster}')?.closest('section')?.innerText");
    let seen = b.eval(&js);
    seen.as_str()
        .unwrap_or_else(|| panic!("no answer for {cluster}: {}", b.eval(PAGE)))
        .to_string()
}

/// Replaces what the settings field holds, as typing would.
fn type_settings(b: &mut cdp::Browser, text: &str) {
    b.eval("document.getElementById('what-if-set').focus(); document.getElementById('what-if-set').select()");
    b.call("Input.insertText", json!({"text": text}));
}

fn evaluate(b: &mut cdp::Browser) {
    b.eval("document.querySelector('#what-if-form button[type=submit]').click()");
}

/// sim-1's answer on the page against the API's: each scale-up capped (now, proposed, why),
/// the limit reached, the setting, and the pods counted.
fn assert_capped(seen: &str, api: &Value, nodes: usize) {
    let changes = api["changes"].as_array().unwrap();
    let ups: Vec<&Value> = changes.iter().filter(|c| c["kind"] == "scaleUp").collect();
    assert!(!ups.is_empty(), "{api:#}");
    for up in ups {
        let group = group_name(up["nodeGroup"].as_str().unwrap());
        let now = format!(
            "scale up {} → {}",
            up["current"]["from"], up["current"]["to"]
        );
        let line = seen
            .lines()
            .find(|l| l.contains(group) && l.contains("Scale-up"))
            .unwrap_or_else(|| panic!("no scale-up of {group} in {seen}"));
        assert!(
            line.contains(&now) && line.contains("no scale-up"),
            "{line}"
        );
        let why = up["reason"].as_str().unwrap();
        assert!(why.contains("MaxNodesTotalReached"), "{why}");
        assert!(line.contains(why), "{why:?} not in {line}");
    }
    let limit = seen
        .lines()
        .find(|l| l.contains("Limit") && l.contains("maxNodesTotal"))
        .unwrap_or_else(|| panic!("no limit in {seen}"));
    assert!(limit.contains("not reached\treached"), "{limit:?}");
    let setting = seen
        .lines()
        .find(|l| l.starts_with("max_nodes_total"))
        .unwrap_or_else(|| panic!("no setting in {seen}"));
    assert!(
        setting.ends_with(&format!("\t{nodes}\tthe proposal")),
        "{setting:?}"
    );
    let pods = api["podsChanged"].as_u64().unwrap();
    assert!(
        seen.contains(&format!("{pods} pending pods would have another outcome")),
        "{seen}"
    );
    let total = changes.len() as u64 + api["notShown"].as_u64().unwrap_or(0);
    assert!(seen.contains(&format!("{total} changes")), "{seen}");
}

fn what_if_in_the_browser(base: &str, nodes: usize, api: &Value, refusal: &str) {
    let profile = TempDir::new("dashboard-what-if");
    let mut b = cdp::Browser::start(&chromium(), profile.path());
    b.navigate(&format!("{base}/"));
    let fleet_page = "document.querySelectorAll('#clusters tbody tr').length === 2";
    b.wait_for(STEP, "the fleet page", fleet_page, PAGE);

    // From the header's link to a form listing both clusters.
    b.eval("document.getElementById('nav-what-if').click()");
    let form = "location.hash === '#/what-if' \
                && document.querySelectorAll('#what-if-form input[name=cluster]').length === 2";
    b.wait_for(STEP, "the what-if form with both clusters", form, PAGE);
    assert_eq!(b.eval("document.title"), "What if · fleetscaler");
    let proposal = format!("max_nodes_total={nodes}");
    type_settings(&mut b, &proposal);
    // The page's polling goes on, and what is typed stays.
    next_refresh(&mut b);
    assert_eq!(
        b.eval("document.getElementById('what-if-set').value"),
        proposal.as_str()
    );
    evaluate(&mut b);
    let answered = "document.getElementById('what-if-result') !== null";
    b.wait_for(STEP, "the what-if's answer", answered, PAGE);
    // The address is the API's query: the what-if can be shared as a link.
    let link = format!("#/what-if?set=max_nodes_total%3D{nodes}");
    assert_eq!(b.eval("location.hash"), link.as_str());
    let totals = b.eval("document.querySelector('#what-if-answer .totals').innerText");
    let totals = totals.as_str().unwrap();
    assert!(
        totals.contains("2 clusters evaluated") && totals.contains("1 with decisions that change"),
        "{totals}"
    );
    let clusters = api["clusters"].as_array().unwrap();
    let one = clusters.iter().find(|c| c["name"] == "sim-1").unwrap();
    assert_capped(&answer_of(&mut b, "sim-1"), one, nodes);
    // The proposal is sim-1's own node count: it is at the limit, and the page says what
    // that holds back, as the API does.
    let at = &one["overLimits"][0];
    assert_eq!(at["limit"], "maxNodesTotal", "{one}");
    let said = format!("already at it maxNodesTotal: {nodes} nodes, proposed {nodes}");
    assert!(answer_of(&mut b, "sim-1").contains(&said), "{said}");
    let over = api["summary"]["overLimits"].as_u64().unwrap();
    assert!(totals.contains(&format!("{over} cluster")), "{totals}");
    let two = answer_of(&mut b, "sim-2");
    assert!(two.contains("no change"), "{two}");
    assert!(two.contains("No decision changes"), "{two}");
    assert!(
        two.contains("max_nodes_total"),
        "the setting changes there too: {two}"
    );

    // A key that does not exist: the API's 400, in its own words.
    type_settings(&mut b, "max_nodes_totl=3");
    evaluate(&mut b);
    let refused = "document.querySelector('#what-if-answer .error-box') !== null";
    b.wait_for(STEP, "the API's refusal", refused, PAGE);
    let error = b.eval("document.querySelector('#what-if-answer .error-box').innerText");
    let error = error.as_str().unwrap();
    assert!(
        error.starts_with("The hub refused the proposal") && error.contains("HTTP 400"),
        "{error}"
    );
    assert!(refusal.starts_with("set=max_nodes_totl=3: "), "{refusal}");
    assert!(
        error.ends_with(refusal.trim()),
        "{error:?} should end with {refusal:?}"
    );

    // The shared link, opened afresh, with one cluster ticked: evaluated at once.
    b.navigate("about:blank");
    b.navigate(&format!("{base}/{link}&cluster=sim-2"));
    b.wait_for(STEP, "the shared what-if's answer", answered, PAGE);
    assert_eq!(
        b.eval("document.getElementById('what-if-set').value"),
        proposal.as_str()
    );
    let ticked = "[...document.querySelectorAll('#what-if-form input[name=cluster]:checked')]\
                  .map((i) => i.value).join()";
    b.wait_for(
        STEP,
        "the fleet's clusters listed, sim-2 ticked",
        &format!("{ticked} === 'sim-2' && document.querySelectorAll('#what-if-form input[name=cluster]').length === 2"),
        PAGE,
    );
    let totals = b.eval("document.querySelector('#what-if-answer .totals').innerText");
    assert!(
        totals.as_str().unwrap().contains("1 cluster evaluated"),
        "{totals}"
    );
    assert!(answer_of(&mut b, "sim-2").contains("no change"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_what_if_page_shows_each_clusters_answer_and_the_apis_refusal() {
    chromium();
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let a = &fleet.clusters()[0];
    let dir = TempDir::new("dashboard-what-if");
    let mut config = fleet_config(&fleet, dir.path(), fast_settings());
    // Dry run: sim-1's pods stay pending, so its scale-up stays to be capped.
    config.hub.dry_run = true;
    let hub = Hub::start(config).await;
    let view = hub.view();
    running_report(&view, "sim-2").await;
    // Three workers of 8 CPUs, one pod of 7 each: two more nodes wanted.
    create_pods(a, "job", 5, "7").await;
    eventually(LONG, "sim-1 planning a scale-up of two nodes", || {
        let plan = view.report("sim-1").and_then(|r| r.plan);
        async move {
            let added: u64 = plan?.scale_up.iter().map(|s| s.to - s.from).sum();
            (added == 2).then_some(())
        }
    })
    .await;
    let nodes = a.list(Resource::Nodes).len();
    let (addr, base, server) = serve(&hub).await;
    // What the API answers, to hold the page to (nothing changes in between: a dry run).
    let path = format!("/api/v1/what-if?set=max_nodes_total={nodes}");
    let (status, body) = http_request(addr, "GET", &path).await;
    assert_eq!(status, 200, "{body}");
    let api: Value = serde_json::from_str(&body).unwrap();
    let (status, refusal) = http_request(addr, "GET", "/api/v1/what-if?set=max_nodes_totl=3").await;
    assert_eq!(status, 400, "{refusal}");

    tokio::task::spawn_blocking(move || what_if_in_the_browser(&base, nodes, &api, &refusal))
        .await
        .unwrap();
    server.cancel();
    hub.stop().await;
    fleet.shutdown().await;
}
