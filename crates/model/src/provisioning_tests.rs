use super::*;
use serde_json::json;

fn request(spec: Value, status: Value) -> Value {
    json!({
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": "train", "namespace": "ml", "uid": "u-1", "generation": 2,
            "creationTimestamp": "2026-11-27T10:00:00Z"},
        "spec": spec,
        "status": status,
    })
}

#[test]
fn a_request_reads_its_class_pod_sets_parameters_and_conditions() {
    let v = request(
        json!({"provisioningClassName": CHECK_CAPACITY,
            "podSets": [{"podTemplateRef": {"name": "worker"}, "count": 4},
                        {"podTemplateRef": {"name": "driver"}, "count": 1}],
            "parameters": {"noRetry": "true"}}),
        json!({"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
            "message": "ProvisioningRequest is accepted by ClusterAutoscaler",
            "lastTransitionTime": "2026-11-27T10:01:00Z", "observedGeneration": 2}],
            "provisioningClassDetails": {"zone": "us-east-1a"}}),
    );
    let r = ProvisioningRequest::from_json(&v, &mut Projector::default()).unwrap();
    assert_eq!(r.key.to_string(), "ml/train");
    assert_eq!(&*r.class, CHECK_CAPACITY);
    assert_eq!(&*r.version, "v1");
    assert_eq!(r.generation, 2);
    assert_eq!(r.pod_count(), 5);
    assert_eq!(r.parameter(NO_RETRY_PARAMETER), Some("true"));
    assert!(r.is_true(ACCEPTED) && !r.is_true(PROVISIONED));
    let accepted = r.condition(ACCEPTED).unwrap();
    assert_eq!(accepted.observed_generation, Some(2));
    assert_eq!(
        accepted.last_transition,
        Some("2026-11-27T10:01:00Z".parse().unwrap())
    );
    assert_eq!(r.class_details.len(), 1);
    assert!(r.problem.is_none());
}

#[test]
fn v1beta1_reads_the_same() {
    let mut v = request(
        json!({"provisioningClassName": BEST_EFFORT_ATOMIC,
            "podSets": [{"podTemplateRef": {"name": "worker"}, "count": 2}]}),
        Value::Null,
    );
    v["apiVersion"] = json!("autoscaling.x-k8s.io/v1beta1");
    let r = ProvisioningRequest::from_json(&v, &mut Projector::default()).unwrap();
    assert_eq!(&*r.version, "v1beta1");
    assert_eq!(r.pod_count(), 2);
    assert!(r.conditions.is_empty());
}

#[test]
fn broken_bounds_keep_the_request_with_a_problem() {
    let sets: Vec<Value> = (0..40)
        .map(|i| json!({"podTemplateRef": {"name": format!("t{i}")}, "count": 1}))
        .collect();
    let v = request(
        json!({"provisioningClassName": CHECK_CAPACITY, "podSets": sets}),
        Value::Null,
    );
    let r = ProvisioningRequest::from_json(&v, &mut Projector::default()).unwrap();
    assert_eq!(r.pod_sets.len(), MAX_POD_SETS);
    assert!(
        r.problem
            .as_deref()
            .unwrap()
            .contains("spec.podSets has 40")
    );

    let huge = request(
        json!({"provisioningClassName": CHECK_CAPACITY,
            "podSets": [{"podTemplateRef": {"name": "w"}, "count": 2_000_000_000}]}),
        Value::Null,
    );
    let r = ProvisioningRequest::from_json(&huge, &mut Projector::default()).unwrap();
    assert!(r.problem.as_deref().unwrap().contains("2000000000 pods"));
}

#[test]
fn bad_fields_name_their_path() {
    let v = request(
        json!({"provisioningClassName": CHECK_CAPACITY,
            "podSets": [{"podTemplateRef": {"name": "w"}, "count": "four"}]}),
        Value::Null,
    );
    let err = ProvisioningRequest::from_json(&v, &mut Projector::default()).unwrap_err();
    assert_eq!(err.path, "spec.podSets[0].count");
    let v = request(
        json!({"provisioningClassName": CHECK_CAPACITY,
            "podSets": [{"podTemplateRef": {"name": "w"}, "count": 1}]}),
        json!({"conditions": [{"type": "Provisioned", "status": "Maybe"}]}),
    );
    let err = ProvisioningRequest::from_json(&v, &mut Projector::default()).unwrap_err();
    assert_eq!(err.path, "status.conditions[0].status");
}

#[test]
fn a_pod_template_projects_as_a_pod_spec() {
    let t: corev1::PodTemplate = serde_json::from_value(json!({
        "metadata": {"name": "worker", "namespace": "ml"},
        "template": {"metadata": {"labels": {"app": "train"}},
            "spec": {"priority": 100, "containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "3", "memory": "4Gi"}}}]}}
    }))
    .unwrap();
    let (t, problem) = PodTemplate::from_k8s(&t, &mut Projector::default());
    assert!(problem.is_none());
    assert_eq!(t.key.to_string(), "ml/worker");
    assert_eq!(t.priority, Some(100));
    assert_eq!(t.spec.requests.get(crate::resources::CPU), 3000);
    assert_eq!(t.labels.get("app"), Some("train"));
}

#[test]
fn an_unreadable_pod_template_is_kept_by_name() {
    let t: corev1::PodTemplate = serde_json::from_value(json!({
        "metadata": {"name": "worker", "namespace": "ml"},
        "template": {"spec": {"containers": [{"name": "c"}],
            "tolerations": [{"key": "k", "operator": "Sometimes"}]}}
    }))
    .unwrap();
    let (t, problem) = PodTemplate::from_k8s(&t, &mut Projector::default());
    assert!(t.unreadable.is_some());
    assert!(
        problem
            .unwrap()
            .path
            .starts_with("template.spec.tolerations[0]")
    );
}

#[test]
fn a_pod_names_the_request_it_consumes_by_either_annotation() {
    let pod = |annotations: Value| -> corev1::Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ml", "annotations": annotations},
            "spec": {"containers": [{"name": "c"}]}
        }))
        .unwrap()
    };
    let mut p = Projector::default();
    let new = crate::Pod::from_k8s(&pod(json!({CONSUME_ANNOTATION: "train"})), &mut p).unwrap();
    assert_eq!(new.extras().consumes.as_deref(), Some("train"));
    let old = pod(json!({DEPRECATED_CONSUME_ANNOTATION: "old"}));
    let old = crate::Pod::from_k8s(&old, &mut p).unwrap();
    assert_eq!(old.extras().consumes.as_deref(), Some("old"));
    let both = pod(json!({CONSUME_ANNOTATION: "new", DEPRECATED_CONSUME_ANNOTATION: "old"}));
    let both = crate::Pod::from_k8s(&both, &mut p).unwrap();
    assert_eq!(both.extras().consumes.as_deref(), Some("new"));
    let none = crate::Pod::from_k8s(&pod(json!({})), &mut p).unwrap();
    assert!(none.extras().consumes.is_none());
}
