//! What reading a dump holds at its peak: the text and the lean snapshot, not a tree of the
//! whole dump (issue 22, point 9: pods with many containers made `plan` hold about 26 times
//! the dump's size). Measured as the process's peak resident memory, so this file holds one
//! test: nothing else runs while it measures (hence a binary of its own, linking only the model).
#![allow(clippy::expect_used)]

use fleetscaler_model::dump::SnapshotBuilder;
use serde_json::{Value, json};

/// The process's peak resident memory (`VmHWM`), in bytes.
fn peak_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .expect("VmHWM in /proc/self/status");
    kib * 1024
}

/// A pod as the apiserver keeps it: twelve containers, each with its environment, mounts,
/// probes and command, and the managed fields kubectl prints.
fn pod(i: usize) -> Value {
    let container = |c: usize| {
        let env: Vec<Value> = (0..20)
            .map(
                |e| json!({"name": format!("VARIABLE_{e}"), "value": format!("value-{i}-{c}-{e}")}),
            )
            .collect();
        json!({
            "name": format!("c{c}"),
            "image": format!("registry.example.com/team/service-{c}:1.2.{i}"),
            "command": ["/bin/server", "--port", format!("80{c}")],
            "args": ["--verbose", "--config", format!("/etc/config/{c}.yaml")],
            "env": env,
            "volumeMounts": [{"name": "config", "mountPath": "/etc/config"},
                             {"name": "data", "mountPath": "/var/data"}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 80}, "periodSeconds": 10},
            "livenessProbe": {"httpGet": {"path": "/live", "port": 80}, "periodSeconds": 10},
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        })
    };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("web-{i}"), "namespace": "shop", "labels": {"app": "web"},
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                "apiVersion": "v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]},
        "spec": {"nodeName": format!("node-{}", i % 50),
            "containers": (0..12).map(container).collect::<Vec<_>>()},
        "status": {"phase": "Running"},
    })
}

/// The same `List` as JSON and as YAML (block style, as kubectl prints it), each built in
/// place: no larger buffer is freed before the measurement.
fn dumps(pods: usize) -> (String, String) {
    let one = serde_json::to_string(&pod(0)).expect("JSON").len();
    let (mut json, mut yaml) = (
        String::with_capacity(one * pods * 2),
        String::with_capacity(one * pods * 2),
    );
    json.push_str("{\"apiVersion\":\"v1\",\"items\":[");
    yaml.push_str("apiVersion: v1\nitems:\n");
    for i in 0..pods {
        let pod = pod(i);
        json.push_str(if i == 0 { "" } else { "," });
        json.push_str(&serde_json::to_string(&pod).expect("JSON"));
        yaml.push_str(&serde_saphyr::to_string(&vec![pod]).expect("YAML"));
    }
    json.push_str("],\"kind\":\"List\",\"metadata\":{}}");
    yaml.push_str("kind: List\nmetadata: {}\n");
    (json, yaml)
}

/// How far reading `text` raises the process's peak memory. The text was built in place
/// (no larger buffer freed before), so the peak so far is the text and what came before it.
fn peak_while_reading(text: &str, pods: usize) -> usize {
    let before = peak_rss();
    let mut builder = SnapshotBuilder::default();
    builder.add_text(text, "dump").expect("the dump reads");
    let (snapshot, _) = builder.finish();
    assert_eq!(snapshot.pods.len(), pods);
    peak_rss().saturating_sub(before)
}

#[test]
fn reading_a_dump_holds_less_than_its_text() {
    let pods = 200;
    let (json, yaml) = dumps(pods);
    // JSON first: its peak is measured after both texts are built.
    for (format, text) in [("JSON", &json), ("YAML", &yaml)] {
        let peak = peak_while_reading(text, pods);
        println!(
            "{format}: text {} KiB, peak beyond it {} KiB ({:.2}x)",
            text.len() / 1024,
            peak / 1024,
            peak as f64 / text.len() as f64
        );
        // A few MiB (the lean snapshot, the allocator's first use of this thread's arena):
        // the bound leaves room for the allocator's whims, and a tree of the dump would be
        // about 26 times the text.
        assert!(
            peak < text.len() + (8 << 20),
            "{format}: reading a {} KiB dump held {} KiB more",
            text.len() / 1024,
            peak / 1024
        );
    }
}
