//! charts/fleetscaler installed into a real management control plane with real Helm (v4's
//! Go SDK through helm-python-sdk, scripts/helm_install.py): every object the chart renders
//! is accepted by the real apiserver (schemas, admission, RBAC escalation checks), and the
//! hub's pods run (under kwok: scheduled, started and Ready, without a container runtime).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use real_support::*;
use serde_json::{Value, json};

const NAMESPACE: &str = "fleetscaler";

/// A node kwok runs pods on, as the management cluster's worker.
const NODE: &str = r#"apiVersion: v1
kind: Node
metadata:
  name: mgmt-worker
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: mgmt-worker
    kubernetes.io/os: linux
spec: {}
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110"}
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
"#;

fn helm_python() -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(Path::new(root).join("scripts/helm-check.sh"))
        .arg("--python")
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm-python-sdk: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn the_chart_installs_on_a_real_management_cluster_and_its_pods_run() {
    let cps = up(&["mgmt"], &["--no-machines"]);
    let mgmt = &cps[0];
    mgmt.apply(NODE);
    eventually(Duration::from_secs(60), "the worker Ready", || {
        mgmt.items(&["nodes"]).iter().any(is_ready).then_some(())
    });
    let managed = std::fs::read_to_string(mgmt.kubeconfig()).unwrap();
    let values = json!({
        "kubeconfigs": {"files": {"prod-east.yaml": managed}},
        "fleet": {"clusters": [{"name": "prod-east", "context": "mgmt"}]},
    });
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(helm_python())
        .arg(Path::new(root).join("scripts/helm_install.py"))
        .arg(mgmt.kubeconfig())
        .arg(Path::new(root).join("charts/fleetscaler"))
        .arg(NAMESPACE)
        .arg(values.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm install: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let release: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(release["status"], "deployed");
    assert_eq!(release["revision"], 1);

    // Every rendered object is there, as the apiserver stored it.
    let manifest = release["manifest"].as_str().unwrap();
    let objects: Vec<Value> = serde_saphyr::from_multiple(manifest).unwrap();
    let objects: Vec<&Value> = objects.iter().filter(|o| o.is_object()).collect();
    assert!(objects.len() >= 6, "{manifest}");
    for o in objects {
        let kind = o["kind"].as_str().unwrap();
        let api_version = o["apiVersion"].as_str().unwrap();
        let group = api_version.split_once('/').map_or("", |(g, _)| g);
        let resource = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        mgmt.kubectl(&["get", &resource, &name(o), "-n", NAMESPACE]);
    }
    // The hub's replicas are scheduled and run.
    let pods = eventually(Duration::from_secs(60), "two hub pods running", || {
        let pods = mgmt.items(&["pods", "-n", NAMESPACE]);
        let running = pods
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count();
        (running == 2).then_some(pods)
    });
    for p in &pods {
        assert_eq!(p["spec"]["nodeName"], "mgmt-worker");
        let ctx = &p["spec"]["securityContext"];
        assert_eq!(ctx["runAsNonRoot"], true, "{p}");
    }
}
