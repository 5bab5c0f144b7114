//! Sharding as a person sees it: two `fleetscaler run` replicas share six simulated clusters
//! through Leases on a seventh (the management cluster), and replica A's dashboard, in
//! headless Chromium, says which replica it is and what it runs, lists the clusters replica B
//! runs with links to B's dashboard, and answers a cluster page asked for one of B's
//! clusters by pointing to B, whose link opens that cluster's page on B. One of A's clusters
//! stays held by a replica that is gone (its Lease renewed for an hour just before the test),
//! so A runs it but cannot write to it: the page shows it being taken over. `fleetscaler
//! status` against A says the same in a terminal.
//!
//! Needs Chromium, as tests/fleet/dashboard.rs does: without it the test fails and says so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::dashboard_support;
use crate::e2e_support;
use crate::replica_support;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use dashboard_support::*;
use e2e_support::*;
use fleetscaler::hub::shard::{lease_name, rendezvous};
use fleetscaler::sim::fleet::ClusterHandle;
use fleetscaler::sim::settings::Flavor;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use replica_support::{Replica, fleet_toml, lease_namespace, strings};
use serde_json::Value;

const CLUSTERS: usize = 6;
const A: &str = "replica-a";
const B: &str = "replica-b";
const SETTLE: Duration = Duration::from_secs(60);

/// A cluster's Lease held by a replica that is no longer there, renewed now for an hour: no
/// live replica may take it during the test.
async fn leave_held(management: &ClusterHandle, cluster: &str) {
    let client = management.client().await.unwrap();
    let leases: kube::Api<Lease> = kube::Api::namespaced(client, "fleetscaler");
    let now = MicroTime(jiff::Timestamp::now());
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(lease_name("fleetscaler", "cluster", cluster)),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("replica-gone".into()),
            lease_duration_seconds: Some(3600),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..Default::default()
        }),
    };
    leases.create(&Default::default(), &lease).await.unwrap();
}

/// Replica `r`'s `/api/v1/fleet` once it runs `runs`, writes to `writing`, lists both
/// replicas and knows B's address `b`.
async fn settled(r: &Replica, runs: &[String], writing: &[String], b: &str) -> Option<Value> {
    let fleet = r.fleet().await?;
    let sharding = &fleet["hub"]["sharding"];
    let listed: BTreeSet<String> = fleet["clusters"]
        .as_array()?
        .iter()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect();
    let replicas = sharding["replicas"].as_array()?;
    let b_known = replicas
        .iter()
        .any(|p| p["identity"] == B && p["address"] == b);
    let done = listed == runs.iter().cloned().collect()
        && strings(&sharding["writing"]) == writing.iter().cloned().collect()
        && replicas.len() == 2
        && b_known;
    done.then_some(fleet)
}

/// `fleetscaler status` against `server`: its exit status' success, stdout and stderr.
async fn status(args: &[&str]) -> (bool, String, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
            .arg("status")
            .args(&args)
            .env_remove("FLEETSCALER_SERVER")
            .env_remove("FLEETSCALER_TOKEN")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicas_dashboard_says_what_it_runs_and_points_to_the_other() {
    chromium();
    let fleet = quiet_fleet(CLUSTERS + 1, Flavor::OpenShift).await;
    let management = &fleet.clusters()[CLUSTERS];
    lease_namespace(management).await;
    // Who runs what once both are alive: the fixed hash every replica computes.
    let names: Vec<String> = (1..=CLUSTERS).map(|i| format!("sim-{i}")).collect();
    let (a_runs, b_runs): (Vec<String>, Vec<String>) = names
        .iter()
        .cloned()
        .partition(|c| rendezvous::owner(c, [A, B]) == Some(A));
    assert!(
        a_runs.len() >= 2 && !b_runs.is_empty(),
        "both replicas need clusters: A {a_runs:?}, B {b_runs:?}"
    );
    let held = a_runs[a_runs.len() - 1].clone();
    leave_held(management, &held).await;
    let a_writes: Vec<String> = a_runs[..a_runs.len() - 1].to_vec();

    let dir = TempDir::new("dashboard-sharding");
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    let a = Replica::start(dir.path(), A, &fleet_toml(&kubeconfig, CLUSTERS, A)).await;
    let b = Replica::start(dir.path(), B, &fleet_toml(&kubeconfig, CLUSTERS, B)).await;
    let b_address = b.addr.to_string();
    let (a_ref, b_ref) = (&a, &b);
    let (a_runs_ref, a_writes_ref, b_runs_ref) = (&a_runs, &a_writes, &b_runs);
    let api = eventually(SETTLE, "both replicas holding their shares", || {
        let b_address = b_address.clone();
        async move {
            let fleet = settled(a_ref, a_runs_ref, a_writes_ref, &b_address).await?;
            settled(b_ref, b_runs_ref, b_runs_ref, &b_address).await?;
            Some(fleet)
        }
    })
    .await;
    assert_eq!(api["hub"]["sharding"]["identity"], A);
    let base = format!("http://{}", a.addr);
    let b_base = format!("http://{b_address}/");

    let shares = Shares {
        a_runs: a_runs.clone(),
        b_runs: b_runs.clone(),
        held: held.clone(),
        b_base,
    };
    tokio::task::spawn_blocking(move || in_the_browser(&base, &shares))
        .await
        .unwrap();

    // The same in a terminal.
    let server = format!("http://{}", a.addr);
    let (ok, out, err) = status(&["--server", &server]).await;
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    let share = format!(
        "sharding: replica {A} (2 replicas), runs {} of {CLUSTERS} clusters; taking over ",
        a_runs.len()
    );
    // The held cluster is always being taken over (the others only while a Lease is renewed
    // late: the unit tests hold the exact words).
    let line = lines.get(1).copied().unwrap_or_default();
    let taken = line
        .strip_prefix(&share)
        .unwrap_or_else(|| panic!("{share:?} in {out}"));
    assert!(taken.contains(held.as_str()), "{out}");
    let others = format!(
        "replica {B} at {b_address} runs {}: {}",
        b_runs.len(),
        b_runs.join(", ")
    );
    assert_eq!(lines.last(), Some(&others.as_str()), "{out}");
    let (ok, _, err) = status(&["--server", &server, "--cluster", &b_runs[0]]).await;
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "does not run cluster \"{}\": replica {B} does (--server http://{b_address})",
            b_runs[0]
        )),
        "{err}"
    );
    let (ok, out, err) = status(&["--server", &server, "-o", "json"]).await;
    assert!(ok, "{err}");
    let json: Value = serde_json::from_str(&out).unwrap();
    let taking_over = strings(&json["sharding"]["takingOver"]);
    assert!(taking_over.contains(&held), "{json:#}");
    assert_eq!(
        json["sharding"]["replicas"][1]["address"],
        b_address.as_str()
    );

    drop((a, b));
    fleet.shutdown().await;
}

/// The strings of a JSON array.
fn strings_of(list: &Value) -> Vec<String> {
    let items = list.as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// The value of `snapshot` in the page once `ready` holds for it, within `STEP`.
fn settle(
    page: &mut cdp::Browser,
    what: &str,
    snapshot: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let started = std::time::Instant::now();
    loop {
        let seen = page.eval(snapshot);
        if ready(&seen) {
            return seen;
        }
        assert!(
            started.elapsed() < STEP,
            "timed out after {STEP:?} waiting for {what}: {seen:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Who runs what, as the page should say it.
struct Shares {
    a_runs: Vec<String>,
    b_runs: Vec<String>,
    /// A's cluster whose Lease stays held by a replica that is gone.
    held: String,
    /// B's dashboard: `http://<B's address>/`.
    b_base: String,
}

fn in_the_browser(base: &str, shares: &Shares) {
    let Shares {
        a_runs,
        b_runs,
        held,
        b_base,
    } = shares;
    let (held, b_base) = (held.as_str(), b_base.as_str());
    let profile = TempDir::new("dashboard-sharding-chromium");
    let mut page = cdp::Browser::start(&chromium(), profile.path());
    page.navigate(&format!("{base}/"));
    // The page as one snapshot: the header's items, each row's first cell, the other
    // replicas' section and its links.
    let snapshot = "({header: [...document.querySelectorAll('#hub > li')].map((li) => li.innerText), \
         rows: [...document.querySelectorAll('#clusters tbody tr')].map((r) => r.querySelector('th').innerText), \
         section: document.querySelector('section.replicas')?.innerText, \
         links: [...document.querySelectorAll('section.replicas a')].map((a) => a.href)})";
    // A replica stops writing for a moment when it renews a Lease late (a loaded machine):
    // the page is read once it shows A holding its share, as the API said it did.
    let writes = format!("writes to {} now", a_runs.len() - 1);
    let seen = settle(&mut page, "the fleet page with A's share", snapshot, |s| {
        let header = strings_of(&s["header"]);
        s["section"].is_string()
            && s["rows"].as_array().map(Vec::len) == Some(a_runs.len())
            && header.contains(&writes)
    });

    // The header: which replica, of how many, what it runs and writes to, what it takes over.
    let header = strings_of(&seen["header"]);
    let share = format!(
        "replica {A} of 2, runs {} of {CLUSTERS} clusters",
        a_runs.len()
    );
    assert_eq!(header[..2], [share, writes], "{header:?}");
    let taking_over = format!("taking over {held}");
    assert_eq!(header.get(2), Some(&taking_over), "{header:?}");
    // Its own clusters' rows; the one whose Lease it does not hold says so.
    let rows = strings_of(&seen["rows"]);
    for (row, name) in rows.iter().zip(a_runs) {
        assert!(row.starts_with(name.as_str()), "{rows:?}");
        assert_eq!(row.contains("taking over"), name == held, "{rows:?}");
    }

    // The other replica's clusters, with links to its dashboard and to each cluster there.
    let section = text(seen["section"].as_str().unwrap());
    let listed = format!(
        "replica {B} open its dashboard ({}) runs {} cluster{}: {}",
        b_base.trim_start_matches("http://").trim_end_matches('/'),
        b_runs.len(),
        if b_runs.len() == 1 { "" } else { "s" },
        b_runs.join(", ")
    );
    assert!(
        section.starts_with(&format!(
            "Clusters the other replicas run ({})",
            b_runs.len()
        )),
        "{section:?}"
    );
    assert!(section.contains(&listed), "{listed:?} not in {section:?}");
    let links = seen["links"].clone();
    let mut expected = vec![Value::from(b_base)];
    expected.extend(
        b_runs
            .iter()
            .map(|c| Value::from(format!("{b_base}#/clusters/{c}"))),
    );
    assert_eq!(links, Value::Array(expected));

    // A cluster page asked for one of B's clusters points to B, and the link opens it there.
    let theirs = &b_runs[0];
    page.navigate(&format!("{base}/#/clusters/{theirs}"));
    page.wait_for(
        STEP,
        "the page pointing to the other replica",
        "document.querySelector('#main .elsewhere a') !== null",
        PAGE,
    );
    let said = page.eval("document.querySelector('#main .elsewhere').innerText");
    let said = said.as_str().unwrap();
    assert!(
        said.starts_with(&format!(
            "Replica {B} runs {theirs}, not this replica ({A})."
        )),
        "{said:?}"
    );
    assert!(!said.contains("no cluster named"), "{said:?}");
    let there = format!("{b_base}#/clusters/{theirs}");
    assert_eq!(
        page.eval("document.querySelector('#main .elsewhere a').href"),
        there.as_str()
    );
    page.eval("document.querySelector('#main .elsewhere a').click()");
    let opened = format!(
        "location.href === {there:?} \
         && document.querySelector('#main .facts') !== null \
         && document.querySelector('#main h2').innerText.startsWith({theirs:?})"
    );
    page.wait_for(
        STEP,
        "the cluster's page on the other replica",
        &opened,
        PAGE,
    );
    // B says it is B, running the clusters it runs.
    let header = page.eval("document.getElementById('hub').innerText");
    let b_share = format!("replica {B} of 2, runs {} of {CLUSTERS}", b_runs.len());
    assert!(
        header.as_str().unwrap().contains(&b_share),
        "{b_share:?} not in {header}"
    );
}
