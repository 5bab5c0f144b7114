//! Server-side printing: the `meta.k8s.io/v1 Table` form of lists and objects that kubectl
//! asks for (`Accept: application/json;as=Table;...`), with the columns a real cluster's
//! printers (and the CRDs' additionalPrinterColumns) give the served kinds.

use serde_json::{Value, json};

use super::resources::Resource;
use crate::machine_api::node_is_ready;

/// Whether the client asked for a Table.
pub fn wanted(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

type Cell = fn(&Value) -> Value;

fn name(o: &Value) -> Value {
    o["metadata"]["name"].clone()
}

fn age(o: &Value) -> Value {
    let created = o["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let Some(created) = created else {
        return json!("<unknown>");
    };
    let secs = jiff::Timestamp::now()
        .as_second()
        .saturating_sub(created.as_second())
        .max(0);
    json!(human_duration(secs))
}

/// kubectl's short durations: `42s`, `3m12s`, `25m`, `5h3m`, `20h`, `3d4h`, `12d`.
pub fn human_duration(secs: i64) -> String {
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{m}m{}s", s % 60),
        s if s < 3 * 3600 => format!("{m}m"),
        s if s < 8 * 3600 => format!("{h}h{}m", m % 60),
        s if s < 48 * 3600 => format!("{h}h"),
        s if s < 8 * 86400 => format!("{d}d{}h", h % 24),
        _ => format!("{d}d"),
    }
}

fn int(v: &Value) -> Value {
    json!(v.as_i64().unwrap_or(0))
}

fn node_status(o: &Value) -> Value {
    let mut s = if node_is_ready(o) {
        "Ready".to_string()
    } else {
        "NotReady".to_string()
    };
    if o["spec"]["unschedulable"] == true {
        s.push_str(",SchedulingDisabled");
    }
    json!(s)
}

fn node_roles(o: &Value) -> Value {
    let roles: Vec<&str> = o["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .collect()
        })
        .unwrap_or_default();
    json!(if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    })
}

/// A string field as a cell, empty when absent.
fn text(v: &Value) -> Value {
    json!(v.as_str().unwrap_or_default())
}

fn pod_ready(o: &Value) -> Value {
    let total = o["spec"]["containers"].as_array().map_or(0, Vec::len);
    let ready = o["status"]["containerStatuses"]
        .as_array()
        .map_or(0, |c| c.iter().filter(|s| s["ready"] == true).count());
    json!(format!("{ready}/{total}"))
}

fn pod_status(o: &Value) -> Value {
    if o["metadata"].get("deletionTimestamp").is_some() {
        return json!("Terminating");
    }
    json!(o["status"]["phase"].as_str().unwrap_or("Pending"))
}

fn columns(resource: Resource) -> Vec<(&'static str, &'static str, i32, Cell)> {
    let s = "string";
    let i = "integer";
    match resource {
        Resource::Nodes => vec![
            ("Name", s, 0, name),
            ("Status", s, 0, node_status),
            ("Roles", s, 0, node_roles),
            ("Age", s, 0, age),
            ("Version", s, 0, |o| {
                o["status"]["nodeInfo"]["kubeletVersion"].clone()
            }),
        ],
        Resource::Pods => vec![
            ("Name", s, 0, name),
            ("Ready", s, 0, pod_ready),
            ("Status", s, 0, pod_status),
            ("Restarts", i, 0, |_| json!(0)),
            ("Age", s, 0, age),
            ("IP", s, 1, |o| {
                json!(o["status"]["podIP"].as_str().unwrap_or("<none>"))
            }),
            ("Node", s, 1, |o| {
                json!(o["spec"]["nodeName"].as_str().unwrap_or("<none>"))
            }),
        ],
        Resource::OcpMachineSets => vec![
            ("Name", s, 0, name),
            ("Desired", i, 0, |o| int(&o["spec"]["replicas"])),
            ("Current", i, 0, |o| int(&o["status"]["replicas"])),
            ("Ready", i, 0, |o| int(&o["status"]["readyReplicas"])),
            ("Available", i, 0, |o| {
                int(&o["status"]["availableReplicas"])
            }),
            ("Age", s, 0, age),
        ],
        // Cluster API v1beta2's printer columns.
        Resource::CapiMachineSets => vec![
            ("Name", s, 0, name),
            ("Cluster", s, 0, |o| o["spec"]["clusterName"].clone()),
            ("Desired", i, 0, |o| int(&o["spec"]["replicas"])),
            ("Current", i, 0, |o| int(&o["status"]["replicas"])),
            ("Ready", i, 0, |o| int(&o["status"]["readyReplicas"])),
            ("Available", i, 0, |o| {
                int(&o["status"]["availableReplicas"])
            }),
            ("Up-to-date", i, 0, |o| {
                int(&o["status"]["upToDateReplicas"])
            }),
            ("Age", s, 0, age),
            ("Version", s, 0, |o| {
                o["spec"]["template"]["spec"]["version"].clone()
            }),
        ],
        Resource::CapiMachineDeployments => vec![
            ("Name", s, 0, name),
            ("Cluster", s, 0, |o| o["spec"]["clusterName"].clone()),
            ("Desired", i, 0, |o| int(&o["spec"]["replicas"])),
            ("Current", i, 0, |o| int(&o["status"]["replicas"])),
            ("Ready", i, 0, |o| int(&o["status"]["readyReplicas"])),
            ("Available", i, 0, |o| {
                int(&o["status"]["availableReplicas"])
            }),
            ("Up-to-date", i, 0, |o| {
                int(&o["status"]["upToDateReplicas"])
            }),
            ("Phase", s, 0, |o| o["status"]["phase"].clone()),
            ("Age", s, 0, age),
            ("Version", s, 0, |o| {
                o["spec"]["template"]["spec"]["version"].clone()
            }),
        ],
        Resource::OcpMachines => vec![
            ("Name", s, 0, name),
            ("Phase", s, 0, |o| o["status"]["phase"].clone()),
            ("Type", s, 0, |o| {
                o["spec"]["providerSpec"]["value"]["instanceType"].clone()
            }),
            ("Region", s, 0, |o| {
                o["spec"]["providerSpec"]["value"]["placement"]["region"].clone()
            }),
            ("Zone", s, 0, |o| {
                o["spec"]["providerSpec"]["value"]["placement"]["availabilityZone"].clone()
            }),
            ("Age", s, 0, age),
            ("Node", s, 1, |o| o["status"]["nodeRef"]["name"].clone()),
        ],
        Resource::CapiMachines => vec![
            ("Name", s, 0, name),
            ("Cluster", s, 0, |o| o["spec"]["clusterName"].clone()),
            ("Node Name", s, 0, |o| {
                o["status"]["nodeRef"]["name"].clone()
            }),
            ("Provider ID", s, 1, |o| o["spec"]["providerID"].clone()),
            ("Phase", s, 0, |o| o["status"]["phase"].clone()),
            ("Age", s, 0, age),
            ("Version", s, 0, |o| o["spec"]["version"].clone()),
        ],
        Resource::PodDisruptionBudgets => vec![
            ("Name", s, 0, name),
            ("Min Available", s, 0, |o| {
                json!(
                    o["spec"]
                        .get("minAvailable")
                        .map_or("N/A".to_string(), |v| v
                            .to_string()
                            .trim_matches('"')
                            .to_string())
                )
            }),
            ("Max Unavailable", s, 0, |o| {
                json!(
                    o["spec"]
                        .get("maxUnavailable")
                        .map_or("N/A".to_string(), |v| v
                            .to_string()
                            .trim_matches('"')
                            .to_string())
                )
            }),
            ("Allowed Disruptions", i, 0, |o| {
                int(&o["status"]["disruptionsAllowed"])
            }),
            ("Age", s, 0, age),
        ],
        Resource::Secrets => vec![
            ("Name", s, 0, name),
            ("Type", s, 0, |o| o["type"].clone()),
            ("Data", i, 0, |o| {
                json!(o["data"].as_object().map_or(0, serde_json::Map::len))
            }),
            ("Age", s, 0, age),
        ],
        Resource::PersistentVolumeClaims => vec![
            ("Name", s, 0, name),
            ("Status", s, 0, |o| text(&o["status"]["phase"])),
            ("Volume", s, 0, |o| text(&o["spec"]["volumeName"])),
            ("StorageClass", s, 0, |o| {
                text(&o["spec"]["storageClassName"])
            }),
            ("Age", s, 0, age),
        ],
        Resource::PersistentVolumes => vec![
            ("Name", s, 0, name),
            ("Status", s, 0, |o| text(&o["status"]["phase"])),
            ("Claim", s, 0, |o| {
                let claim = &o["spec"]["claimRef"];
                match (claim["namespace"].as_str(), claim["name"].as_str()) {
                    (Some(ns), Some(n)) => json!(format!("{ns}/{n}")),
                    _ => json!(""),
                }
            }),
            ("StorageClass", s, 0, |o| {
                text(&o["spec"]["storageClassName"])
            }),
            ("Age", s, 0, age),
        ],
        Resource::StorageClasses => vec![
            ("Name", s, 0, name),
            ("Provisioner", s, 0, |o| text(&o["provisioner"])),
            ("VolumeBindingMode", s, 0, |o| {
                json!(o["volumeBindingMode"].as_str().unwrap_or("Immediate"))
            }),
            ("Age", s, 0, age),
        ],
        Resource::CsiNodes => vec![
            ("Name", s, 0, name),
            ("Drivers", i, 0, |o| {
                json!(o["spec"]["drivers"].as_array().map_or(0, Vec::len))
            }),
            ("Age", s, 0, age),
        ],
        _ => vec![("Name", s, 0, name), ("Age", s, 0, age)],
    }
}

/// The Table of `objects` (serialized), with list metadata `meta`.
pub fn render(resource: Resource, objects: &[&[u8]], meta: Value) -> Value {
    let cols = columns(resource);
    let definitions: Vec<Value> = cols
        .iter()
        .map(|(n, t, p, _)| json!({"name": n, "type": t, "format": if *n == "Name" { "name" } else { "" }, "description": "", "priority": p}))
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .filter_map(|bytes| serde_json::from_slice::<Value>(bytes).ok())
        .map(|o| {
            let cells: Vec<Value> = cols.iter().map(|(_, _, _, f)| f(&o)).map(|c| if c.is_null() { json!("") } else { c }).collect();
            json!({"cells": cells, "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}})
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": definitions, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_accept_header_asks_for_a_table() {
        assert!(wanted(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wanted("application/json"));
    }

    #[test]
    fn durations_read_like_kubectl() {
        assert_eq!(human_duration(42), "42s");
        assert_eq!(human_duration(192), "3m12s");
        assert_eq!(human_duration(3 * 86400 + 4 * 3600), "3d4h");
    }

    #[test]
    fn node_rows() {
        let node = br#"{"metadata":{"name":"n1","labels":{"node-role.kubernetes.io/worker":""}},"status":{"conditions":[{"type":"Ready","status":"True"}],"nodeInfo":{"kubeletVersion":"v1.34.0"}}}"#;
        let t = render(Resource::Nodes, &[node.as_slice()], json!({}));
        assert_eq!(t["rows"][0]["cells"][1], "Ready");
        assert_eq!(t["rows"][0]["cells"][2], "worker");
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "n1");
    }
}
