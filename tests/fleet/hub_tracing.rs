//! Traces over OTLP, end to end: `fleetscaler run` (a child process, since the tracing
//! subscriber is global to a process) autoscales a simulated cluster with pending pods and
//! sends its spans to a real OTLP receiver in this test, over gRPC (tonic, configured by the
//! standard `OTEL_*` variables) and over HTTP/protobuf (hyper and prost, configured by
//! fleet.toml `[hub.tracing]`). The test reads the spans as a trace viewer would: names,
//! attributes, parent links, reason events and resource attributes, and that a clean stop
//! sends the last spans. Metrics, not asked for, are not sent (tests/fleet/hub_otlp_metrics.rs
//! asks for them).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support;
use crate::otlp_support;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use e2e_support::*;
use fleetscaler::sim::fleet::FailureMode;
use fleetscaler::sim::settings::Flavor;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::Link;
use otlp_support::{
    HubOptions, HubProcess, OTEL_VARS, Shared, attr, attrs, grpc_receiver, http_receiver,
};

const LONG: Duration = Duration::from_secs(30);

/// One span with its resource's attributes.
#[derive(Clone, Debug)]
struct Got {
    resource: HashMap<String, String>,
    span: Span,
}

impl Got {
    fn attr(&self, key: &str) -> Option<String> {
        attr(&self.span.attributes, key)
    }

    fn is_child_of(&self, parent: &Got) -> bool {
        self.span.trace_id == parent.span.trace_id
            && self.span.parent_span_id == parent.span.span_id
    }

    fn events(&self, name: &str) -> Vec<HashMap<String, String>> {
        let events = self.span.events.iter().filter(|e| e.name == name);
        events.map(|e| attrs(&e.attributes)).collect()
    }
}

fn spans(inbox: &Shared) -> Vec<Got> {
    let inbox = inbox.lock().unwrap();
    let mut all = Vec::new();
    for request in &inbox.traces {
        for rs in &request.resource_spans {
            let resource = rs.resource.as_ref().map(|r| attrs(&r.attributes));
            for ss in &rs.scope_spans {
                all.extend(ss.spans.iter().map(|s| Got {
                    resource: resource.clone().unwrap_or_default(),
                    span: s.clone(),
                }));
            }
        }
    }
    all
}

/// A pass that scaled up, with its spans: (pass, its children).
fn scale_up_pass(all: &[Got]) -> Option<(Got, Vec<Got>)> {
    all.iter()
        .filter(|g| g.span.name == "pass")
        .filter(|g| g.attr("fleetscaler.scale_ups").is_some_and(|n| n != "0"))
        .find_map(|pass| {
            let children: Vec<Got> = all
                .iter()
                .filter(|c| c.is_child_of(pass))
                .cloned()
                .collect();
            let wrote = children
                .iter()
                .any(|c| c.span.name == "PUT MachineSet scale");
            let named: Vec<&str> = children.iter().map(|c| c.span.name.as_str()).collect();
            let phases = ["snapshot", "health", "scale_up", "scale_down"];
            (wrote && phases.iter().all(|p| named.contains(p))).then(|| (pass.clone(), children))
        })
}

/// A removal of a node: its own span, in the trace of the pass that decided it, with the
/// writes of the removal under it.
fn removal(all: &[Got]) -> Option<(Got, Got)> {
    all.iter()
        .filter(|g| g.span.name == "remove_node")
        .find_map(|removal| {
            let pass = all
                .iter()
                .find(|p| p.span.name == "pass" && removal.is_child_of(p))?;
            let writes: Vec<&str> = all
                .iter()
                .filter(|w| w.is_child_of(removal))
                .map(|w| w.span.name.as_str())
                .collect();
            let marked =
                writes.contains(&"PATCH Machine") && writes.contains(&"PUT MachineSet scale");
            marked.then(|| (pass.clone(), removal.clone()))
        })
}

/// The story both protocols tell: a pass with pending pods scales up, and its trace shows it;
/// with `scale_down`, the pods then go and so does a node.
async fn a_pass_that_scales_up_is_traced(
    tracing: &str,
    vars: &[(&str, &str)],
    inbox: &Shared,
    scale_down: bool,
) -> Vec<Got> {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let dir = TempDir::new("tracing");
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    let options = HubOptions {
        tracing,
        defaults: "",
        vars,
        args: &[],
        clusters: 1,
    };
    let mut hub = HubProcess::start(dir.path(), &kubeconfig, options);
    eventually(LONG, "a first pass span", || {
        let any = spans(inbox).iter().any(|g| g.span.name == "pass");
        async move { any.then_some(()) }
    })
    .await;
    // Three workers hold six of these; four wait for more nodes.
    create_pods(&fleet.clusters()[0], "web", 10, "3").await;
    let found = tokio::time::timeout(LONG, async {
        loop {
            if let Some(found) = scale_up_pass(&spans(inbox)) {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let (pass, children) = found.unwrap_or_else(|_| {
        let names: Vec<String> = spans(inbox).iter().map(|g| g.span.name.clone()).collect();
        panic!(
            "no traced scale-up pass; spans {names:?}; hub log:\n{}",
            hub.log()
        )
    });
    if scale_down {
        delete_pods(&fleet.clusters()[0], "web").await;
        let found = eventually(LONG, "a traced node removal", || {
            let found = removal(&spans(inbox));
            async move { found }
        })
        .await;
        let (pass, removal) = found;
        assert_eq!(removal.attr("k8s.cluster.name").as_deref(), Some("sim-1"));
        assert!(removal.attr("k8s.node.name").is_some());
        assert!(removal.attr("error.type").is_none(), "{removal:?}");
        assert!(
            pass.attr("fleetscaler.scale_downs")
                .is_some_and(|n| n != "0")
        );
    }
    let status = hub.stop().await;
    assert!(status.success(), "{status}: {}", hub.log());
    let all = spans(inbox);
    check_pass(&pass, &children, &all);
    // Sent at the clean stop: the shutdown's removal of the status ConfigMap.
    let shutdown = all.iter().find(|g| g.span.name == "shutdown");
    let shutdown = shutdown.unwrap_or_else(|| panic!("no shutdown span; hub log:\n{}", hub.log()));
    assert!(
        all.iter()
            .any(|g| g.span.name == "DELETE ConfigMap" && g.is_child_of(shutdown)),
        "the status ConfigMap's deletion is under the shutdown span"
    );
    fleet.shutdown().await;
    all
}

fn check_pass(pass: &Got, children: &[Got], all: &[Got]) {
    assert_eq!(pass.attr("k8s.cluster.name").as_deref(), Some("sim-1"));
    assert!(
        pass.span.parent_span_id.is_empty(),
        "a pass is a trace's root"
    );
    // Counts are integers (OTLP has no unsigned ones: they would arrive as text).
    let pending = pass
        .span
        .attributes
        .iter()
        .find(|kv| kv.key == "fleetscaler.pods.pending");
    let pending = pending.and_then(|kv| kv.value.as_ref()?.value.clone());
    assert!(
        matches!(pending, Some(any_value::Value::IntValue(n)) if n >= 1),
        "{pass:?}"
    );
    let child = |name: &str| children.iter().find(|c| c.span.name == name).unwrap();

    let write = child("PUT MachineSet scale");
    assert_eq!(write.attr("http.request.method").as_deref(), Some("PUT"));
    assert_eq!(
        write.attr("k8s.namespace.name").as_deref(),
        Some("openshift-machine-api")
    );
    assert_eq!(
        write.attr("fleetscaler.k8s.kind").as_deref(),
        Some("MachineSet")
    );
    assert_eq!(
        write.attr("fleetscaler.k8s.subresource").as_deref(),
        Some("scale")
    );
    assert!(
        write
            .attr("fleetscaler.k8s.name")
            .is_some_and(|n| !n.is_empty())
    );
    assert!(write.attr("error.type").is_none(), "{write:?}");

    let scale_up = child("scale_up");
    let actions = scale_up.events("scale-up");
    assert!(!actions.is_empty(), "{scale_up:?}");
    for a in &actions {
        assert!(
            a["reason"].contains("pod"),
            "the reason names the pods: {a:?}"
        );
        assert!(
            a["node_group"].starts_with("MachineSet.machine.openshift.io/openshift-machine-api/"),
            "{a:?}"
        );
        assert!(a["to"].parse::<u64>().unwrap() > a["from"].parse::<u64>().unwrap());
    }
    let pods = scale_up.events("pending pod");
    assert!(
        !pods.is_empty() && pods.len() <= 20,
        "{} pod events",
        pods.len()
    );
    assert!(pods.iter().any(|p| p["outcome"] == "scaleUp"), "{pods:?}");
    assert!(
        pods.iter().all(|p| p["k8s.pod.name"].starts_with("web-")),
        "{pods:?}"
    );

    let health = child("health");
    assert_eq!(
        health.attr("fleetscaler.cluster.healthy").as_deref(),
        Some("true")
    );
    // Events are written by their own task after the pass, still under its trace.
    let event_write = all
        .iter()
        .find(|g| g.span.name == "POST Event" && g.is_child_of(pass));
    assert!(
        event_write.is_some(),
        "an event write under the scale-up pass"
    );
}

fn check_resource(all: &[Got], service_name: &str) {
    let r = &all[0].resource;
    assert_eq!(r["service.name"], service_name, "{r:?}");
    assert_eq!(r["service.version"], env!("CARGO_PKG_VERSION"));
    assert!(
        r["service.instance.id"].starts_with("fleetscaler-0_"),
        "{r:?}"
    );
    assert!(!r["host.name"].is_empty());
    assert_eq!(r["k8s.pod.name"], "fleetscaler-0");
    assert_eq!(r["k8s.namespace.name"], "autoscaling");
    assert_eq!(r["telemetry.sdk.language"], "rust");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_traces_configured_by_the_otel_variables() {
    let (endpoint, inbox) = grpc_receiver().await;
    let vars = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-test=from-env"),
        ("OTEL_SERVICE_NAME", "fleetscaler-grpc"),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment.name=test",
        ),
        ("POD_NAME", "fleetscaler-0"),
        ("POD_NAMESPACE", "autoscaling"),
        // Were metrics sent without being asked for, they would come this often.
        ("OTEL_METRIC_EXPORT_INTERVAL", "100"),
    ];
    let all = a_pass_that_scales_up_is_traced("", &vars, &inbox, true).await;
    check_resource(&all, "fleetscaler-grpc");
    assert_eq!(all[0].resource["deployment.environment.name"], "test");
    let headers = inbox.lock().unwrap().x_test.clone();
    assert!(
        !headers.is_empty() && headers.iter().all(|h| h == "from-env"),
        "{headers:?}"
    );
    assert_eq!(
        inbox.lock().unwrap().metrics.len(),
        0,
        "metrics not asked for"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_protobuf_traces_configured_by_fleet_toml() {
    let (endpoint, inbox) = http_receiver().await;
    let tracing = format!(
        "[hub.tracing]\nendpoint = {endpoint:?}\nprotocol = \"http/protobuf\"\ntimeout = \"5s\"\nheaders = {{ x-test = \"from-file\" }}\n"
    );
    // fleet.toml wins over the variables: the header and the endpoint are the file's.
    let vars = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-test=from-env"),
        ("POD_NAME", "fleetscaler-0"),
        ("POD_NAMESPACE", "autoscaling"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "100"),
    ];
    let all = a_pass_that_scales_up_is_traced(&tracing, &vars, &inbox, false).await;
    check_resource(&all, "fleetscaler");
    let headers = inbox.lock().unwrap().x_test.clone();
    assert!(
        !headers.is_empty() && headers.iter().all(|h| h == "from-file"),
        "{headers:?}"
    );
    let paths = inbox.lock().unwrap().paths.clone();
    assert!(paths.iter().all(|p| p == "/v1/traces"), "{paths:?}");
}

/// Both clusters prefer their us-east-1a group, so sim-1 scales it first and fails.
const PREFER_US_EAST_1A: &str = r#"expanders = ["priority"]
priorities = { "20" = [".*worker-us-east-1a.*"], "10" = [".*"] }
balance_similar_node_groups = false
"#;

/// A pass of `cluster` linking to another trace: the pass and its first link.
fn linked_pass(all: &[Got], cluster: &str) -> Option<(Got, Link)> {
    all.iter()
        .filter(|g| g.span.name == "pass" && g.attr("k8s.cluster.name").as_deref() == Some(cluster))
        .find_map(|g| Some((g.clone(), g.span.links.first()?.clone())))
}

/// The span a link leads to, once it was received.
fn linked_span<'a>(all: &'a [Got], link: &Link) -> Option<&'a Got> {
    all.iter()
        .find(|g| g.span.trace_id == link.trace_id && g.span.span_id == link.span_id)
}

/// Shared failure knowledge in traces: a pass of sim-2 whose us-east-1a group the fleet backs
/// off for sim-1's capacity failure links to sim-1's pass that found the failure, so a trace
/// viewer goes from "why did sim-2 not scale that group" to where it failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_backed_off_by_the_fleet_links_to_the_failing_pass() {
    let (endpoint, inbox) = http_receiver().await;
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let a = &fleet.clusters()[0];
    let zone_a = worker_groups(a)
        .into_iter()
        .find(|g| g.0.ends_with("worker-us-east-1a"))
        .unwrap();
    // Its machines fail with InsufficientInstanceCapacity.
    a.set_failure_mode(&zone_a.0, Some(FailureMode::Fail))
        .unwrap();
    let dir = TempDir::new("tracing-fleet");
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    let tracing = format!("[hub.tracing]\nendpoint = {endpoint:?}\n");
    let options = HubOptions {
        tracing: &tracing,
        defaults: PREFER_US_EAST_1A,
        vars: &[],
        args: &[],
        clusters: 2,
    };
    let mut hub = HubProcess::start(dir.path(), &kubeconfig, options);
    // Each worker (8 CPUs) takes one pod of 7: the fourth needs a new node.
    create_pods(a, "job", 4, "7").await;
    let found = tokio::time::timeout(LONG, async {
        loop {
            let all = spans(&inbox);
            if let Some((pass, link)) = linked_pass(&all, "sim-2")
                && let Some(failing) = linked_span(&all, &link)
            {
                return (pass, link, failing.clone());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let (pass, link, failing) = found.unwrap_or_else(|_| {
        panic!(
            "no pass of sim-2 linked to a pass received; hub log:\n{}",
            hub.log()
        )
    });
    // The link leads to sim-1's pass that found the failure.
    assert_eq!(failing.span.name, "pass");
    assert_eq!(failing.attr("k8s.cluster.name").as_deref(), Some("sim-1"));
    assert_eq!(
        failing.attr("fleetscaler.capacity_failures").as_deref(),
        Some("1"),
        "{failing:?}"
    );
    assert!(
        failing.span.events.iter().any(|e| e
            .name
            .starts_with("no capacity for m6i.2xlarge in us-east-1a")),
        "{failing:?}"
    );
    // The link names where it leads; the pass says how many groups the fleet backed off.
    let link_attrs = attrs(&link.attributes);
    assert_eq!(link_attrs["k8s.cluster.name"], "sim-1");
    let failed_group = &link_attrs["fleetscaler.node_group"];
    assert!(
        failed_group.starts_with("MachineSet.machine.openshift.io/")
            && failed_group.ends_with(&format!("/{}", zone_a.0)),
        "{failed_group}"
    );
    assert_eq!(pass.span.links.len(), 1, "one link per failing pass");
    assert_eq!(
        pass.attr("fleetscaler.fleet_backoffs").as_deref(),
        Some("1")
    );
    assert_ne!(pass.span.trace_id, failing.span.trace_id, "two traces");
    let status = hub.stop().await;
    assert!(status.success(), "{status}: {}", hub.log());
    // sim-1 never backs off for its own failure, so its passes link nowhere.
    let all = spans(&inbox);
    assert!(linked_pass(&all, "sim-1").is_none());
    fleet.shutdown().await;
}

/// `fleetscaler check-config` with the given variables (the test's own OTEL ones removed).
fn check_config(dir: &Path, toml: &str, vars: &[(&str, &str)], json: bool) -> std::process::Output {
    let config = dir.join("fleet.toml");
    std::fs::write(&config, toml).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_fleetscaler"));
    command
        .args(["check-config", "--offline", "-c"])
        .arg(&config);
    if json {
        command.args(["-o", "json"]);
    }
    for var in OTEL_VARS {
        command.env_remove(var);
    }
    command.envs(vars.iter().copied()).output().unwrap()
}

#[test]
fn check_config_shows_the_effective_tracing_and_names_bad_variables() {
    let dir = TempDir::new("tracing-check");
    let toml =
        "[hub.tracing]\nprotocol = \"grpc\"\nheaders = { authorization = \"Bearer tok-3f9a\" }\n";
    let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317")];
    let out = check_config(dir.path(), toml, &vars, false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("traces: on: grpc to http://collector:4317, timeout 10s, sampler parentbased_always_on, service.name fleetscaler, headers authorization"),
        "{text}"
    );
    assert!(
        !text.contains("tok-3f9a"),
        "header values are never printed: {text}"
    );
    let json = check_config(dir.path(), toml, &vars, true);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["traces"]["state"], "on");
    assert_eq!(report["traces"]["endpoint"], "http://collector:4317");
    assert_eq!(
        report["hub"]["tracing"]["headers"]["authorization"],
        "<redacted>"
    );
    assert!(!String::from_utf8_lossy(&json.stdout).contains("tok-3f9a"));

    let off = check_config(dir.path(), "", &[], false);
    let text = String::from_utf8_lossy(&off.stdout);
    assert!(text.contains("traces: off (no endpoint"), "{text}");

    let bad = check_config(
        dir.path(),
        "",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ],
        false,
    );
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success());
    assert!(
        err.contains("OTEL_EXPORTER_OTLP_PROTOCOL: \"http/json\" is not supported"),
        "{err}"
    );
}
