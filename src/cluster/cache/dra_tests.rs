use serde_json::{Value, json};
use tokio::time::Instant;

use super::super::{Cache, Change, Kind, Object, Update};
use super::{not_served_warning, stamp, version};

fn update(kind: Kind, change: Change) -> Update {
    Update { kind, change }
}

/// An object as a list's item arrives (no `apiVersion`), stamped as the watch stamps it.
fn object(kind: Kind, api_version: &str, value: Value) -> Object {
    let o = Object::Dynamic(Box::new(serde_json::from_value(value).unwrap()));
    match stamp(update(kind, Change::Apply(o)), api_version).change {
        Change::Apply(o) => o,
        _ => unreachable!(),
    }
}

fn claim(name: &str, allocated: bool) -> Object {
    let mut c = json!({
        "metadata": {"name": name, "namespace": "ml", "managedFields": [{"manager": "x"}]},
        "spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": "gpu.example.com"}}]}}
    });
    if allocated {
        c["status"] = json!({"allocation": {"devices": {"results": [{"request": "gpu",
            "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]});
    }
    object(Kind::ResourceClaim, "resource.k8s.io/v1", c)
}

fn slice(name: &str, devices: usize) -> Object {
    let devices: Vec<Value> = (0..devices)
        .map(|i| json!({"name": format!("gpu-{i}")}))
        .collect();
    object(
        Kind::ResourceSlice,
        "resource.k8s.io/v1",
        json!({"metadata": {"name": name}, "spec": {"driver": "gpu.example.com",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "n1", "devices": devices}}),
    )
}

fn class(name: &str) -> Object {
    object(
        Kind::DeviceClass,
        "resource.k8s.io/v1",
        json!({"metadata": {"name": name}, "spec": {"selectors": [
            {"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}),
    )
}

/// A v1beta1 template, as an older cluster serves it: converted to v1's shape.
fn template_v1beta1(name: &str) -> Object {
    object(
        Kind::ResourceClaimTemplate,
        "resource.k8s.io/v1beta1",
        json!({"metadata": {"name": name, "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "deviceClassName": "gpu.example.com", "count": 2}]}}}}),
    )
}

fn list(c: &mut Cache, kind: Kind, objects: Vec<Object>) -> bool {
    let now = Instant::now();
    c.apply(update(kind, Change::Init), now);
    for o in objects {
        c.apply(update(kind, Change::InitApply(o)), now);
    }
    c.apply(update(kind, Change::InitDone), now)
}

fn listed_cache() -> Cache {
    let mut c = Cache::new(&Kind::DRA);
    list(&mut c, Kind::ResourceClaim, vec![claim("a", false)]);
    list(
        &mut c,
        Kind::ResourceClaimTemplate,
        vec![template_v1beta1("t")],
    );
    list(&mut c, Kind::ResourceSlice, vec![slice("n1-gpu", 2)]);
    assert!(!c.snapshot().dra.listed, "a kind not listed yet");
    list(&mut c, Kind::DeviceClass, vec![class("gpu.example.com")]);
    c
}

/// Pods with claims are simulated once all four kinds have listed, never before; each
/// object reaches the snapshot's `dra` (a v1beta1 one in v1's shape) and leaves it.
#[tokio::test]
async fn dra_is_listed_once_all_four_kinds_are() {
    let mut c = listed_cache();
    let s = c.snapshot();
    assert!(s.dra.listed);
    assert_eq!(s.dra.claims.len(), 1);
    assert_eq!(s.dra.slices[0].devices.len(), 2);
    assert_eq!(&*s.dra.classes[0].name, "gpu.example.com");
    let choice = &s.dra.templates[0].spec.requests[0].choices[0];
    assert_eq!(&*choice.class, "gpu.example.com");
    assert_eq!(
        choice.mode,
        fleetscaler_model::dra::AllocationMode::ExactCount(2)
    );
    assert_eq!(c.stats().other, 4);
    let gone = update(Kind::ResourceClaim, Change::Delete(claim("a", false)));
    assert!(
        !c.apply(gone, Instant::now()),
        "a claim going wakes nothing"
    );
    assert!(c.snapshot().dra.claims.is_empty());
}

/// A claim allocated, or a slice published or changed, wakes the runner; the same object
/// again is no change at all (an idle pass is skipped), and a class never wakes.
#[tokio::test]
async fn an_allocation_or_a_slice_wakes_the_runner_and_repeats_are_no_change() {
    let mut c = listed_cache();
    let now = Instant::now();
    let changes = c.changes();
    let apply = |c: &mut Cache, kind, o| c.apply(update(kind, Change::Apply(o)), now);
    assert!(!apply(&mut c, Kind::ResourceClaim, claim("a", false)));
    assert_eq!(c.changes(), changes, "the same claim is no change");
    assert!(apply(&mut c, Kind::ResourceClaim, claim("a", true)));
    assert!(!apply(&mut c, Kind::ResourceClaim, claim("a", true)));
    assert!(apply(&mut c, Kind::ResourceSlice, slice("n2-gpu", 1)));
    assert!(apply(&mut c, Kind::ResourceSlice, slice("n2-gpu", 4)));
    assert!(!apply(&mut c, Kind::ResourceSlice, slice("n2-gpu", 4)));
    assert!(!apply(&mut c, Kind::DeviceClass, class("other")));
    assert_eq!(c.changes(), changes + 4);
}

/// A slice past the API's bound on devices, or a class with a selector without CEL, is a
/// problem naming the object; it is left out, the rest stays, nothing panics.
#[tokio::test]
async fn a_bad_object_is_a_problem_naming_it_and_left_out() {
    let mut c = listed_cache();
    let now = Instant::now();
    let big = update(Kind::ResourceSlice, Change::Apply(slice("n1-gpu", 129)));
    assert!(!c.apply(big, now));
    let bad = object(
        Kind::DeviceClass,
        "resource.k8s.io/v1",
        json!({"metadata": {"name": "bad"}, "spec": {"selectors": [{}]}}),
    );
    c.apply(update(Kind::DeviceClass, Change::Apply(bad)), now);
    let problems: Vec<String> = c.problems().collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("deviceclasses.resource.k8s.io bad: spec.selectors[0]"),
        "{problems:?}"
    );
    assert!(
        problems[1].contains("resourceslices.resource.k8s.io n1-gpu: spec.devices"),
        "{problems:?}"
    );
    let s = c.snapshot();
    assert!(s.dra.slices.is_empty(), "the slice is not kept as it was");
    assert_eq!(s.dra.classes.len(), 1);
    assert!(s.dra.listed);
}

/// Refused for good (403): the kind is given up on and DRA stays unsimulated.
#[tokio::test]
async fn a_refused_kind_leaves_dra_unlisted() {
    let mut c = Cache::new(&Kind::DRA);
    for kind in [
        Kind::ResourceClaim,
        Kind::ResourceClaimTemplate,
        Kind::DeviceClass,
    ] {
        list(&mut c, kind, Vec::new());
    }
    c.give_up_on(Kind::ResourceSlice, "forbidden");
    assert!(c.is_synced());
    assert!(!c.snapshot().dra.listed);
}

#[test]
fn v1_is_read_when_served_else_v1beta2_else_v1beta1() {
    let gv = |served: &[&str]| version(served);
    assert_eq!(
        gv(&["resource.k8s.io/v1beta1", "resource.k8s.io/v1"]).as_deref(),
        Some("resource.k8s.io/v1")
    );
    assert_eq!(
        gv(&["resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"]).as_deref(),
        Some("resource.k8s.io/v1beta2")
    );
    assert_eq!(gv(&["resource.k8s.io/v1alpha3"]), None);
}

#[test]
fn a_cluster_without_dra_is_warned_once() {
    let w = not_served_warning(&[Kind::Pod]).unwrap();
    assert_eq!(
        w.to_string(),
        "the cluster does not serve resourceclaims.resource.k8s.io, \
         resourceclaimtemplates.resource.k8s.io, resourceslices.resource.k8s.io or \
         deviceclasses.resource.k8s.io: pods with resource claims are not simulated: none \
         is scaled up for"
    );
    assert!(not_served_warning(&Kind::DRA).is_none());
}

/// Discovery wants the four kinds of the version chosen, read as dynamic objects.
#[test]
fn discovery_wants_the_four_kinds_at_the_version_chosen() {
    use super::super::discovery::lookup;
    let groups: k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList =
        serde_json::from_value(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
            "name": "resource.k8s.io",
            "versions": [{"groupVersion": "resource.k8s.io/v1beta2", "version": "v1beta2"},
                {"groupVersion": "resource.k8s.io/v1beta1", "version": "v1beta1"}],
            "preferredVersion": {"groupVersion": "resource.k8s.io/v1beta2", "version": "v1beta2"}
        }]}))
        .unwrap();
    let found = lookup(&groups);
    assert_eq!(found.group_versions.len(), 1);
    let (gv, wanted) = &found.group_versions[0];
    assert_eq!(gv, "resource.k8s.io/v1beta2");
    let kinds: Vec<Kind> = wanted.iter().map(|r| r.2).collect();
    assert_eq!(kinds, Kind::DRA);
    assert!(found.warnings.is_empty());
}

/// A list's items carry no apiVersion nor kind: the watch's stamp names the version, the
/// kind is the watch's.
#[tokio::test]
async fn an_item_without_api_version_or_kind_is_read_at_the_watched_version() {
    let mut c = Cache::new(&Kind::DRA);
    let bare = Object::Dynamic(Box::new(
        serde_json::from_value(json!({"metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": []}}))
        .unwrap(),
    ));
    let stamped = stamp(
        update(Kind::DeviceClass, Change::Apply(bare)),
        "resource.k8s.io/v1beta1",
    );
    c.apply(stamped, Instant::now());
    assert_eq!(
        c.problems().count(),
        0,
        "{:?}",
        c.problems().collect::<Vec<_>>()
    );
    assert_eq!(c.snapshot().dra.classes.len(), 1);
    let unstamped = Object::Dynamic(Box::new(
        serde_json::from_value(json!({"metadata": {"name": "other"}, "spec": {}})).unwrap(),
    ));
    c.apply(
        update(Kind::DeviceClass, Change::Apply(unstamped)),
        Instant::now(),
    );
    let problems: Vec<String> = c.problems().collect();
    assert!(problems[0].contains("is not read"), "{problems:?}");
}
