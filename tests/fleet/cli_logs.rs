//! `fleetscaler run --log-format json` (or `FLEETSCALER_LOG_FORMAT=json`), the real binary
//! on a simulated cluster: every line on stderr is a JSON object, a line logged in a pass
//! carries the trace and span of that pass as the OTLP receiver got them, and without
//! traces there are no ids. A run that cannot start says why in a JSON line too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support;
use crate::otlp_support;

use std::collections::BTreeSet;
use std::process::Command;

use e2e_support::*;
use fleetscaler::sim::settings::Flavor;
use otlp_support::{HubOptions, HubProcess, LONG, OTEL_VARS, attr, grpc_receiver};
use serde_json::Value;

/// Every line the hub wrote, parsed; a line that is not a JSON log object fails the test.
fn lines(hub: &HubProcess) -> Vec<Value> {
    let log = hub.log();
    // The last line may be half written.
    let complete = log.rsplit_once('\n').map_or("", |(done, _)| done);
    complete
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}\n{log}"));
            for key in ["timestamp", "level", "target", "message"] {
                assert!(v[key].is_string(), "no {key}: {line}");
            }
            v
        })
        .collect()
}

/// The hub on `fleet`'s one cluster, logging JSON at info level, without traces; its
/// directory lives as long as the hub is needed.
fn untraced_json_hub(fleet: &fleetscaler::sim::fleet::Fleet, tag: &str) -> (TempDir, HubProcess) {
    let dir = TempDir::new(tag);
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    let vars = [("FLEETSCALER_LOG_FORMAT", "json"), ("RUST_LOG", "info")];
    let options = HubOptions {
        tracing: "",
        defaults: "",
        vars: &vars,
        args: &[],
        clusters: 1,
    };
    let hub = HubProcess::start(dir.path(), &kubeconfig, options);
    (dir, hub)
}

/// A line logged by the runner of `sim-1` in a pass that scaled up, once there is one.
async fn scale_up_line(hub: &HubProcess, traced: bool) -> Value {
    eventually(LONG, "a log line of a scale-up in sim-1", || {
        let found = lines(hub).into_iter().find(|l| {
            l["level"] == "INFO"
                && l["fields"]["k8s.cluster.name"] == "sim-1"
                && l["target"].as_str().is_some_and(|t| t.contains("runner"))
                && (!traced || l.get("trace_id").is_some())
        });
        async move { found }
    })
    .await
}

/// The trace and span ids of every span named `name` the receiver got, as hex.
fn span_ids(inbox: &otlp_support::Shared, name: &str) -> BTreeSet<(String, String, String)> {
    let inbox = inbox.lock().unwrap();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    inbox
        .traces
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| &ss.spans)
        .filter(|s| s.name == name)
        .map(|s| {
            let cluster = attr(&s.attributes, "k8s.cluster.name").unwrap_or_default();
            (hex(&s.trace_id), hex(&s.span_id), cluster)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_lead_to_the_trace_of_their_pass() {
    let (endpoint, inbox) = grpc_receiver().await;
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let dir = TempDir::new("json-logs");
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    let vars = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("RUST_LOG", "info"),
    ];
    let options = HubOptions {
        tracing: "",
        defaults: "",
        vars: &vars,
        args: &["--log-format", "json"],
        clusters: 1,
    };
    let mut hub = HubProcess::start(dir.path(), &kubeconfig, options);
    hub.address().await;
    // Three workers hold six of these; four wait for more nodes.
    create_pods(&fleet.clusters()[0], "web", 10, "3").await;
    let line = scale_up_line(&hub, true).await;
    let ids = (
        line["trace_id"].as_str().unwrap().to_string(),
        line["span_id"].as_str().unwrap().to_string(),
        "sim-1".to_string(),
    );
    eventually(
        LONG,
        "the pass the line was logged in, at the receiver",
        || {
            let found = span_ids(&inbox, "pass").contains(&ids).then_some(());
            async move { found }
        },
    )
    .await;
    let status = hub.stop().await;
    assert!(status.success(), "{status}: {}", hub.log());
    let all = lines(&hub);
    let stopped = all.iter().any(|l| l["message"] == "stopped");
    assert!(stopped, "the stop is said in JSON too: {}", hub.log());
    assert!(
        all.iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("traces on:"))),
        "{}",
        hub.log()
    );
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_without_traces_carry_no_ids() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let (_dir, mut hub) = untraced_json_hub(&fleet, "json-logs-untraced");
    hub.address().await;
    create_pods(&fleet.clusters()[0], "web", 10, "3").await;
    scale_up_line(&hub, false).await;
    let status = hub.stop().await;
    assert!(status.success(), "{status}: {}", hub.log());
    let all = lines(&hub);
    assert!(
        all.iter().all(|l| l.get("trace_id").is_none()),
        "{}",
        hub.log()
    );
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_cannot_start_says_why_in_json() {
    let dir = TempDir::new("json-logs-refused");
    let kubeconfig = dir.path().join("absent.kubeconfig");
    let options = HubOptions {
        tracing: "[hub.tracing]\nmetrics = true\nmetrics_interval = \"0s\"\n",
        defaults: "",
        vars: &[],
        args: &["--log-format", "json"],
        clusters: 1,
    };
    let mut hub = HubProcess::start(dir.path(), &kubeconfig, options);
    let status = hub.exited().await;
    assert_eq!(status.code(), Some(2), "{}", hub.log());
    let all = lines(&hub);
    let last = all
        .last()
        .unwrap_or_else(|| panic!("no line: {}", hub.log()));
    assert_eq!(last["level"], "ERROR");
    let message = last["message"].as_str().unwrap();
    assert!(
        message.contains("hub.tracing.metrics_interval"),
        "{message}"
    );
}

/// Issue 25, point 4: an unreachable cluster's failure is one line (the runner's, naming
/// the cluster and the cause), not followed by kube's vaguer "failed with error client error
/// (Connect)" at ERROR level.
#[tokio::test]
async fn an_unreachable_cluster_fails_in_one_line_per_attempt() {
    let dir = TempDir::new("json-logs-unreachable");
    let kubeconfig = dir.path().join("refused.kubeconfig");
    let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = refused.local_addr().unwrap().port();
    drop(refused);
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster: {{server: \"https://127.0.0.1:{port}\"}}\n\
             users:\n- name: a\n  user: {{token: t}}\ncontexts:\n- name: sim-1\n  context: {{cluster: a, user: a}}\n"
        ),
    )
    .unwrap();
    let options = HubOptions {
        tracing: "",
        defaults: "",
        vars: &[],
        args: &["--log-format", "json"],
        clusters: 1,
    };
    let mut hub = HubProcess::start(dir.path(), &kubeconfig, options);
    eventually(LONG, "two failed attempts reported", || {
        let failed = lines(&hub)
            .into_iter()
            .filter(|l| {
                l["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("cluster runner failed"))
            })
            .count();
        async move { (failed >= 2).then_some(()) }
    })
    .await;
    let all = lines(&hub);
    let kube: Vec<&Value> = all
        .iter()
        .filter(|l| l["target"].as_str().is_some_and(|t| t.starts_with("kube")))
        .collect();
    assert!(kube.is_empty(), "kube's own lines: {kube:?}");
    let failed = all
        .iter()
        .find(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains("cluster runner failed"))
        })
        .unwrap();
    assert_eq!(failed["fields"]["k8s.cluster.name"], "sim-1", "{failed}");
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("Connection refused"),
        "{failed}"
    );
    // Issue 25, point 4: where it was talking to.
    let server = format!("(server https://127.0.0.1:{port}, context sim-1)");
    assert!(
        failed["message"].as_str().unwrap().contains(&server),
        "{failed}"
    );
    hub.stop().await;
}

#[test]
fn an_unknown_log_format_is_refused() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fleetscaler"));
    for var in OTEL_VARS {
        command.env_remove(var);
    }
    let out = command
        .args(["run", "--config", "/nonexistent/fleet.toml"])
        .env("FLEETSCALER_LOG_FORMAT", "xml")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("xml") && err.contains("--log-format"), "{err}");
}

/// Issue 25, point 9: while a cluster's sync is held up (its pods cannot be listed), `run`
/// says how far it got and what it waits for, and when it is done, how long it took and
/// what it holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_sync_reports_its_progress_then_its_end() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let cluster = &fleet.clusters()[0];
    cluster.faults().set(fleetscaler::sim::faults::Faults {
        error_rate: 1.0,
        error_code: 500,
        error_paths: vec!["/api/v1/pods".into()],
        ..Default::default()
    });
    let (_dir, mut hub) = untraced_json_hub(&fleet, "json-logs-sync");
    let said = |hub: &HubProcess, words: &'static str| {
        lines(hub).into_iter().find(|l| {
            l["fields"]["k8s.cluster.name"] == "sim-1"
                && l["message"].as_str().is_some_and(|m| m.contains(words))
        })
    };
    let progress = eventually(LONG, "a sync progress line", || {
        let found = said(&hub, "syncing for");
        async move { found }
    })
    .await;
    let message = progress["message"].as_str().unwrap();
    assert!(
        message.contains("objects so far; listing pods; failing: "),
        "{message}"
    );
    cluster.faults().clear();
    let done = eventually(LONG, "the sync's end", || {
        let found = said(&hub, "synced in");
        async move { found }
    })
    .await;
    let message = done["message"].as_str().unwrap();
    assert!(
        message.contains(" nodes, ") && message.contains(" pods, "),
        "{message}"
    );
    hub.stop().await;
    fleet.shutdown().await;
}
