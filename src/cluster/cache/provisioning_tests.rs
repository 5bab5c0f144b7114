use serde_json::json;
use tokio::time::Instant;

use super::super::lean_storage::LeanPodTemplate;
use super::super::{Cache, Change, Kind, Object, Update};

fn update(kind: Kind, change: Change) -> Update {
    Update { kind, change }
}

fn request(name: &str, count: u32, conditions: serde_json::Value) -> Object {
    Object::Dynamic(Box::new(
        serde_json::from_value(json!({
            "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": name, "namespace": "batch", "uid": format!("uid-{name}"),
                "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                "podSets": [{"podTemplateRef": {"name": "t"}, "count": count}]},
            "status": {"conditions": conditions}
        }))
        .unwrap(),
    ))
}

fn template(name: &str) -> Object {
    let json = json!({
        "metadata": {"name": name, "namespace": "batch",
            "managedFields": [{"manager": "kubectl"}]},
        "template": {"metadata": {"labels": {"app": "train"}},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "1"}}}]}}
    });
    let lean: LeanPodTemplate = serde_json::from_value(json).unwrap();
    Object::PodTemplate(Box::new(lean.0))
}

fn list(c: &mut Cache, kind: Kind, objects: Vec<Object>) -> bool {
    let now = Instant::now();
    c.apply(update(kind, Change::Init), now);
    for o in objects {
        c.apply(update(kind, Change::InitApply(o)), now);
    }
    c.apply(update(kind, Change::InitDone), now)
}

/// Requests are decided once both kinds have listed, never on a template not listed yet;
/// each object reaches the snapshot's `provisioning` and leaves it.
#[tokio::test]
async fn requests_are_listed_once_requests_and_templates_are() {
    let mut c = Cache::new(&[Kind::ProvisioningRequest, Kind::PodTemplate]);
    list(
        &mut c,
        Kind::ProvisioningRequest,
        vec![request("a", 2, json!([]))],
    );
    assert!(!c.snapshot().provisioning.listed);
    assert!(list(&mut c, Kind::PodTemplate, vec![template("t")]));
    let s = c.snapshot();
    assert!(s.provisioning.listed);
    assert_eq!(s.provisioning.requests.len(), 1);
    assert_eq!(s.provisioning.requests[0].pod_count(), 2);
    let t = s.provisioning.template("batch", "t").unwrap();
    assert_eq!(t.labels.get("app"), Some("train"));
    assert!(t.unreadable.is_none());
    let now = Instant::now();
    c.apply(
        update(Kind::PodTemplate, Change::Delete(template("t"))),
        now,
    );
    assert!(c.snapshot().provisioning.pod_templates.is_empty());
}

/// A new or changed request wakes the runner (it wants a decision); the same one again
/// does not, nor does a template.
#[tokio::test]
async fn a_request_changed_wakes_the_runner() {
    let mut c = Cache::new(&[Kind::ProvisioningRequest, Kind::PodTemplate]);
    list(&mut c, Kind::ProvisioningRequest, vec![]);
    list(&mut c, Kind::PodTemplate, vec![]);
    let now = Instant::now();
    let apply = |c: &mut Cache, kind, o| c.apply(update(kind, Change::Apply(o)), now);
    assert!(apply(
        &mut c,
        Kind::ProvisioningRequest,
        request("a", 1, json!([]))
    ));
    assert!(!apply(
        &mut c,
        Kind::ProvisioningRequest,
        request("a", 1, json!([]))
    ));
    let provisioned = json!([{"type": "Provisioned", "status": "True", "reason": "R",
        "message": "m", "lastTransitionTime": "2026-01-01T00:01:00Z"}]);
    assert!(apply(
        &mut c,
        Kind::ProvisioningRequest,
        request("a", 1, provisioned)
    ));
    assert!(!apply(&mut c, Kind::PodTemplate, template("t")));
    assert!(c.apply(
        update(
            Kind::ProvisioningRequest,
            Change::Delete(request("a", 1, json!([])))
        ),
        now
    ));
    assert!(c.snapshot().provisioning.requests.is_empty());
}

/// A request that cannot be read stays by name with its problem (the engine names it and
/// leaves it alone), and the problem is reported.
#[tokio::test]
async fn an_unreadable_request_is_kept_with_its_problem() {
    let mut c = Cache::new(&[Kind::ProvisioningRequest, Kind::PodTemplate]);
    let bad = Object::Dynamic(Box::new(
        serde_json::from_value(json!({
            "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": "bad", "namespace": "batch", "uid": "u"},
            "spec": {"provisioningClassName": 7}
        }))
        .unwrap(),
    ));
    list(&mut c, Kind::ProvisioningRequest, vec![bad]);
    list(&mut c, Kind::PodTemplate, vec![]);
    let s = c.snapshot();
    assert_eq!(s.provisioning.requests.len(), 1);
    assert!(s.provisioning.requests[0].problem.is_some());
    let problems: Vec<String> = c.problems().collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("provisioningrequests.autoscaling.x-k8s.io batch/bad"));
}

/// A kind given up on (403) turns the feature off rather than deciding on half the input.
#[tokio::test]
async fn templates_refused_turn_requests_off() {
    let mut c = Cache::new(&[Kind::ProvisioningRequest, Kind::PodTemplate]);
    list(&mut c, Kind::ProvisioningRequest, vec![]);
    c.give_up_on(Kind::PodTemplate, "forbidden");
    assert!(c.is_synced());
    assert!(!c.snapshot().provisioning.listed);
}
