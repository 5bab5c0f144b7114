//! The Helm chart as real Helm renders it, for tests/fleet/helm_chart.rs and
//! tests/fleet/chart_observability.rs: runs scripts/helm-check.sh once, reads its manifests,
//! checks each object against its k8s-openapi type (or, for the Prometheus Operator's kinds,
//! by hand), and runs `fleetscaler check-config` on the rendered fleet.toml.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod promql;
pub mod scc;
pub mod serving;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use k8s_openapi::api::{apps, core, networking, policy, rbac};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::e2e_support::TempDir;
use crate::rbac_support::lost_fields;

/// The release namespace and name scripts/helm_check.py renders with.
pub const NAMESPACE: &str = "fleetscaler";
pub const CASES: [&str; 23] = [
    "default",
    "multi-cluster",
    "kubeconfig-files",
    "config-toml",
    "toml-edge",
    "single",
    "deployment-values",
    "upstream-own-names",
    "upstream-names",
    "upstream-both-names",
    "upstream-fills",
    "cert-manager",
    "tls-secret",
    "monitor-authorization",
    "observability",
    "openshift",
    "openshift-forced",
    "openshift-off",
    "sharding",
    "membership",
    "membership-namespaced",
    "membership-managed",
    "membership-config-toml",
];

/// Runs scripts/helm-check.sh once for the whole test binary; the directory of manifests.
pub fn rendered() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = std::env::temp_dir().join(format!("fleetscaler-helm-{}", std::process::id()));
        let run = Command::new("bash")
            .arg(root.join("scripts/helm-check.sh"))
            .arg(&out)
            .current_dir(root)
            .output()
            .expect("bash, to run scripts/helm-check.sh");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(
            run.status.success(),
            "scripts/helm-check.sh failed (it needs python3 with venv and PyPI for \
             helm-python-sdk; on Debian: apt-get install python3 python3-venv):\n{said}"
        );
        eprintln!("{said}");
        out
    })
}

/// The objects of one rendered case.
pub fn docs(case: &str) -> Vec<Value> {
    let path = rendered().join(format!("{case}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("{path:?}: not YAML: {e}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

pub fn all<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

pub fn one<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    match all(docs, kind).as_slice() {
        [d] => d,
        other => panic!("expected one {kind}, found {}", other.len()),
    }
}

pub fn check_typed<T: DeserializeOwned + Serialize>(doc: &Value, what: &str) -> Vec<String> {
    let typed: T = match serde_path_to_error::deserialize(doc.clone()) {
        Ok(t) => t,
        Err(e) => return vec![format!("{what}: {} at {}", e.inner(), e.path())],
    };
    let round = serde_json::to_value(&typed).unwrap();
    let mut lost = Vec::new();
    lost_fields(doc, &round, "", &mut lost);
    lost.into_iter()
        .map(|f| format!("{what}: unknown or malformed field {f}"))
        .collect()
}

/// The keys of `value` (an object) that are not in `allowed`, named with `at`.
fn unexpected_keys(value: &Value, allowed: &[&str], at: &str) -> Vec<String> {
    value
        .as_object()
        .into_iter()
        .flat_map(|o| o.keys())
        .filter(|k| !allowed.contains(&k.as_str()))
        .map(|k| format!("unexpected {at}.{k}"))
        .collect()
}

/// The Prometheus Operator's CRD is not in k8s-openapi: its few fields, checked by hand.
pub fn check_service_monitor(doc: &Value, what: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if doc["apiVersion"] != "monitoring.coreos.com/v1" {
        problems.push(format!("{what}: apiVersion {}", doc["apiVersion"]));
    }
    let spec = &doc["spec"];
    problems.extend(unexpected_keys(
        spec,
        &["selector", "namespaceSelector", "endpoints"],
        "spec",
    ));
    let endpoint_keys = [
        "port",
        "path",
        "interval",
        "scrapeTimeout",
        "scheme",
        "tlsConfig",
        "bearerTokenFile",
        "authorization",
        "relabelings",
        "metricRelabelings",
    ];
    let relabel_keys = [
        "sourceLabels",
        "separator",
        "targetLabel",
        "regex",
        "modulus",
        "replacement",
        "action",
    ];
    let tls_keys = [
        "ca",
        "serverName",
        "insecureSkipVerify",
        "cert",
        "keySecret",
    ];
    for e in spec["endpoints"].as_array().into_iter().flatten() {
        problems.extend(unexpected_keys(e, &endpoint_keys, "endpoint"));
        problems.extend(unexpected_keys(&e["tlsConfig"], &tls_keys, "tlsConfig"));
        problems.extend(unexpected_keys(
            &e["tlsConfig"]["ca"],
            &["secret", "configMap"],
            "ca",
        ));
        problems.extend(unexpected_keys(
            &e["authorization"],
            &["type", "credentials"],
            "authorization",
        ));
        for list in ["relabelings", "metricRelabelings"] {
            if !(e[list].is_null() || e[list].is_array()) {
                problems.push(format!("{list} is not a list"));
            }
            for r in e[list].as_array().into_iter().flatten() {
                problems.extend(unexpected_keys(r, &relabel_keys, list));
            }
        }
        if !(e["scheme"].is_null() || e["scheme"] == "https" || e["scheme"] == "http") {
            problems.push(format!("scheme {}", e["scheme"]));
        }
    }
    problems
        .into_iter()
        .map(|p| format!("{what}: {p}"))
        .collect()
}

/// cert-manager's Certificate, checked by hand as the ServiceMonitor: the fields the chart
/// writes, and an issuer named.
pub fn check_certificate(doc: &Value, what: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if doc["apiVersion"] != "cert-manager.io/v1" {
        problems.push(format!("apiVersion {}", doc["apiVersion"]));
    }
    let spec = &doc["spec"];
    let keys = [
        "secretName",
        "dnsNames",
        "duration",
        "renewBefore",
        "privateKey",
        "issuerRef",
    ];
    problems.extend(unexpected_keys(spec, &keys, "spec"));
    problems.extend(unexpected_keys(
        &spec["issuerRef"],
        &["name", "kind", "group"],
        "issuerRef",
    ));
    if spec["issuerRef"]["name"].as_str().is_none_or(str::is_empty) {
        problems.push("no issuerRef.name".into());
    }
    if spec["dnsNames"].as_array().is_none_or(|n| n.is_empty()) {
        problems.push("no dnsNames".into());
    }
    problems
        .into_iter()
        .map(|p| format!("{what}: {p}"))
        .collect()
}

/// The PrometheusRule's fields that Prometheus reads, checked by hand as the ServiceMonitor's.
pub fn check_prometheus_rule(doc: &Value, what: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if doc["apiVersion"] != "monitoring.coreos.com/v1" {
        problems.push(format!("{what}: apiVersion {}", doc["apiVersion"]));
    }
    let unexpected = |value: &Value, allowed: &[&str], at: &str, problems: &mut Vec<String>| {
        for key in value.as_object().into_iter().flat_map(|o| o.keys()) {
            if !allowed.contains(&key.as_str()) {
                problems.push(format!("{what}: unexpected {at}.{key}"));
            }
        }
    };
    unexpected(&doc["spec"], &["groups"], "spec", &mut problems);
    let groups = doc["spec"]["groups"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if groups.is_empty() {
        problems.push(format!("{what}: no rule groups"));
    }
    for g in &groups {
        let at = format!("group {}", g["name"]);
        unexpected(
            g,
            &["name", "interval", "rules", "limit"],
            &at,
            &mut problems,
        );
        for r in g["rules"].as_array().into_iter().flatten() {
            let keys = [
                "alert",
                "record",
                "expr",
                "for",
                "keep_firing_for",
                "labels",
                "annotations",
            ];
            unexpected(r, &keys, &at, &mut problems);
            if r["alert"].is_string() == r["record"].is_string() {
                problems.push(format!("{what}: {at}: a rule is an alert or a record: {r}"));
            }
            if r["expr"].as_str().is_none_or(|e| e.trim().is_empty()) {
                problems.push(format!("{what}: {at}: a rule without expr: {r}"));
            }
            for map in ["labels", "annotations"] {
                let ok = r[map].is_null()
                    || r[map]
                        .as_object()
                        .is_some_and(|m| m.values().all(Value::is_string));
                if !ok {
                    problems.push(format!("{what}: {at}: {map} must map to strings: {r}"));
                }
            }
        }
    }
    problems
}

pub fn check_object(doc: &Value) -> Vec<String> {
    let kind = doc["kind"].as_str().unwrap_or("<no kind>");
    let what = format!("{kind} {}", doc["metadata"]["name"]);
    match kind {
        "Deployment" => check_typed::<apps::v1::Deployment>(doc, &what),
        "Service" => check_typed::<core::v1::Service>(doc, &what),
        "ServiceAccount" => check_typed::<core::v1::ServiceAccount>(doc, &what),
        "ConfigMap" => check_typed::<core::v1::ConfigMap>(doc, &what),
        "Secret" => check_typed::<core::v1::Secret>(doc, &what),
        "Role" => check_typed::<rbac::v1::Role>(doc, &what),
        "RoleBinding" => check_typed::<rbac::v1::RoleBinding>(doc, &what),
        "ClusterRole" => check_typed::<rbac::v1::ClusterRole>(doc, &what),
        "ClusterRoleBinding" => check_typed::<rbac::v1::ClusterRoleBinding>(doc, &what),
        "Certificate" => check_certificate(doc, &what),
        "PodDisruptionBudget" => check_typed::<policy::v1::PodDisruptionBudget>(doc, &what),
        "NetworkPolicy" => check_typed::<networking::v1::NetworkPolicy>(doc, &what),
        "ServiceMonitor" => check_service_monitor(doc, &what),
        "PrometheusRule" => check_prometheus_rule(doc, &what),
        other => vec![format!("{what}: a kind this test does not know: {other}")],
    }
}

pub fn pod_spec(docs: &[Value]) -> &Value {
    &one(docs, "Deployment")["spec"]["template"]["spec"]
}

pub fn container(docs: &[Value]) -> &Value {
    &pod_spec(docs)["containers"][0]
}

/// The environment variables with literal values the Deployment gives the hub.
pub fn literal_env(docs: &[Value]) -> Vec<(String, String)> {
    container(docs)["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?.into(), e["value"].as_str()?.into())))
        .collect()
}

/// The files the pod sees: fleet.toml and, for a Secret the chart made, each kubeconfig;
/// and the kubeconfig Secret's name and directory (all its keys are files there).
pub struct Mounts {
    pub files: BTreeSet<String>,
    pub secret: Option<(String, String)>,
}

pub fn mounts(docs: &[Value]) -> Mounts {
    let mount_of = |volume: &str| {
        let m = container(docs)["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == volume)?;
        assert_eq!(m["readOnly"], true, "volume {volume} is mounted read-only");
        Some(m["mountPath"].as_str().unwrap().to_string())
    };
    let volume = |name: &str| {
        pod_spec(docs)["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .cloned()
    };
    let config_dir = mount_of("config").expect("the config volume mounted");
    let mut files: BTreeSet<String> = volume("config").unwrap()["configMap"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| format!("{config_dir}/{}", item["path"].as_str().unwrap()))
        .collect();
    let secret = mount_of("kubeconfigs").map(|dir| {
        let name = volume("kubeconfigs").unwrap()["secret"]["secretName"]
            .as_str()
            .unwrap()
            .to_string();
        for made in all(docs, "Secret") {
            if made["metadata"]["name"] == name.as_str() {
                let keys = made["data"].as_object().unwrap().keys();
                files.extend(keys.map(|k| format!("{dir}/{k}")));
            }
        }
        (name, dir)
    });
    Mounts { files, secret }
}

/// The one ConfigMap that holds `key`: fleet.toml's, or the dashboard's.
pub fn config_map_with<'a>(docs: &'a [Value], key: &str) -> &'a Value {
    let found: Vec<&Value> = all(docs, "ConfigMap")
        .into_iter()
        .filter(|c| c["data"][key].is_string())
        .collect();
    match found.as_slice() {
        [c] => c,
        other => panic!("expected one ConfigMap with {key}, found {}", other.len()),
    }
}

pub fn fleet_toml(docs: &[Value]) -> String {
    config_map_with(docs, "fleet.toml")["data"]["fleet.toml"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `fleetscaler check-config -o json` on the rendered fleet.toml, with the Deployment's
/// environment (whose FLEETSCALER_* variables override the file, as in the pod).
pub fn check_config(case: &str, docs: &[Value]) -> Value {
    let dir = TempDir::new(&format!("helm-{case}"));
    let file = dir.path().join("fleet.toml");
    std::fs::write(&file, fleet_toml(docs)).unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
        .args(["check-config", "--offline", "-o", "json", "-c"])
        .arg(&file)
        .envs(literal_env(docs))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{case}: the rendered fleet.toml fails check-config:\n{}\n{}",
        String::from_utf8_lossy(&run.stderr),
        fleet_toml(docs)
    );
    serde_json::from_slice(&run.stdout).unwrap()
}
