use serde_json::{Value, json};

use super::*;
use crate::model::meta::Projector;
use crate::model::pod::Pod;
use crate::sim::rng::Rng;
use crate::sim::workload::{Placement, catalog, pod};

/// The projection of `json` read as a lean pod and as the whole generated Pod.
fn both(json: &Value) -> (Result<Pod, String>, Result<Pod, String>) {
    let bytes = serde_json::to_vec(json).unwrap();
    let lean: LeanPod = serde_json::from_slice(&bytes).unwrap();
    let full: corev1::Pod = serde_json::from_slice(&bytes).unwrap();
    let project =
        |p: &corev1::Pod| Pod::from_k8s(p, &mut Projector::default()).map_err(|e| e.to_string());
    (project(&lean.0), project(&full))
}

/// A pod using every field the projection reads, and much that it does not.
fn rich_pod() -> Value {
    let selector = json!({"matchLabels": {"app": "db"}});
    json!({
        "metadata": {
            "name": "db-0", "namespace": "shop", "uid": "u-1", "resourceVersion": "4711",
            "labels": {"app": "db"},
            "annotations": {
                "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
                "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "scratch, cache",
                "cluster-autoscaler.kubernetes.io/pod-scale-up-delay": "30s",
                "kubectl.kubernetes.io/last-applied-configuration": "{\"big\": true}"
            },
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
                "uid": "u-ss", "controller": true}],
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "deletionTimestamp": "2026-01-01T01:00:00Z",
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:containers": {}}}}]
        },
        "spec": {
            "containers": [{
                "name": "db", "image": "postgres:16",
                "env": [{"name": "PGDATA", "value": "/data"}],
                "livenessProbe": {"exec": {"command": ["pg_isready"]}},
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                              "limits": {"nvidia.com/gpu": "1"}},
                "ports": [{"containerPort": 5432, "hostPort": 5432, "protocol": "TCP",
                           "hostIP": "0.0.0.0"}]
            }],
            "initContainers": [
                {"name": "init", "resources": {"requests": {"cpu": "2"}}},
                {"name": "proxy", "restartPolicy": "Always",
                 "resources": {"requests": {"cpu": "100m"}}}
            ],
            "overhead": {"cpu": "50m"},
            "nodeName": "n1",
            "nodeSelector": {"disk": "ssd"},
            "priority": 1000,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 45,
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In",
                         "values": ["a", "b"]}]}]}},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]}
            },
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db",
                             "effect": "NoSchedule"}],
            "topologySpreadConstraints": [{"maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}],
            "volumes": [
                {"name": "scratch", "emptyDir": {}},
                {"name": "shm", "emptyDir": {"medium": "Memory"}},
                {"name": "host", "hostPath": {"path": "/var/log"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}},
                {"name": "kube-api-access", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"},
                {"name": "scratch-gpu", "resourceClaimTemplateName": "one-gpu"}],
            "serviceAccountName": "db",
            "schedulerName": "default-scheduler"
        },
        "status": {
            "phase": "Pending",
            "nominatedNodeName": "n2",
            "resourceClaimStatuses": [{"name": "scratch-gpu", "resourceClaimName": "db-0-scratch-gpu-x2k9f"}],
            "conditions": [{"type": "PodScheduled", "status": "False",
                            "reason": "Unschedulable", "message": "0/3 nodes are available"}],
            "containerStatuses": [{"name": "db", "image": "postgres:16", "imageID": "",
                                   "ready": false, "restartCount": 0}]
        }
    })
}

#[test]
fn a_lean_pod_projects_as_the_whole_pod_does() {
    let (lean, full) = both(&rich_pod());
    let full = full.unwrap();
    assert!(
        full.unschedulable && full.extras().nominated_node.is_some() && full.deleting.is_some()
    );
    assert_eq!(full.extras().claim_statuses.len(), 1, "{:?}", full.extras);
    assert_eq!(lean.unwrap(), full);
}

#[test]
fn every_simulated_pod_projects_the_same_lean_or_whole() {
    let mut rng = Rng::new(7);
    let (sets, daemons) = catalog(&mut rng, 12, 30, 7500, 31 << 30, 0.6);
    let templates = sets
        .iter()
        .map(|s| (&s.template, "ReplicaSet"))
        .chain(daemons.iter().map(|d| (&d.template, "DaemonSet")));
    let mut checked = 0;
    for (template, kind) in templates {
        for placement in [
            Placement::Unbound,
            Placement::Pinned("n1"),
            Placement::Running("n1", "10.0.0.1"),
        ] {
            let now = "2026-01-01T00:00:00Z";
            let json = pod("p", "ns", (kind, "owner", "uid"), template, placement, now);
            let (lean, full) = both(&json);
            assert_eq!(lean, full, "{json}");
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} pods checked");
}

#[test]
fn a_pod_the_projection_refuses_is_refused_the_same_way() {
    let mut bad = rich_pod();
    bad["spec"]["tolerations"][0]["operator"] = json!("Sometimes");
    let (lean, full) = both(&bad);
    let full = full.unwrap_err();
    assert!(full.contains("spec.tolerations[0]"), "{full}");
    assert_eq!(lean.unwrap_err(), full);
}

#[test]
fn what_the_projection_does_not_read_is_not_built() {
    let lean: LeanPod = serde_json::from_value(rich_pod()).unwrap();
    let pod = lean.0;
    assert!(pod.metadata.managed_fields.is_none());
    assert_eq!(pod.metadata.resource_version.as_deref(), Some("4711"));
    let spec = pod.spec.unwrap();
    assert!(spec.containers[0].env.is_none() && spec.containers[0].image.is_none());
    assert!(spec.service_account_name.is_none());
    let projected = spec
        .volumes
        .unwrap()
        .into_iter()
        .find(|v| v.name == "kube-api-access");
    assert!(projected.is_some_and(|v| v.projected.is_none()));
    assert!(pod.status.unwrap().container_statuses.is_none());
}

#[test]
fn a_watch_event_of_a_lean_pod_decodes() {
    let event = json!({"type": "MODIFIED", "object": rich_pod()});
    let decoded: kube::api::WatchEvent<LeanPod> = serde_json::from_value(event).unwrap();
    let kube::api::WatchEvent::Modified(pod) = decoded else {
        panic!("not a modification");
    };
    assert_eq!(kube::ResourceExt::name_any(&pod), "db-0");
    assert_eq!(
        <LeanPod as kube::Resource>::url_path(&(), Some("shop")),
        "/api/v1/namespaces/shop/pods"
    );
}
