//! Pods with volumes, through whole passes: where they make the engine scale, and where not.

use serde_json::Value;

use crate::fixtures::{group_node, machineset, node, pod, pvc, snapshot, storage_class, zonal_pv};
use crate::plan::{Outcome, Plan};
use crate::reason::ReasonCode;
use crate::{EngineState, Settings, run_once};

const CSI_ZONE: &str = "topology.ebs.csi.aws.com/zone";

/// A group per zone, each with one full 4-CPU node labelled as the EBS driver labels it.
fn zonal_groups(zones: &[&str]) -> Vec<Value> {
    let mut items = Vec::new();
    for z in zones {
        let g = format!("w-{z}");
        let n = format!("{g}-0");
        items.push(machineset(&g, 0, 5, 1).json());
        let zoned = node(&n).cpu("4").zone(z).label(CSI_ZONE, z);
        items.extend(group_node(&n, &g, zoned));
        items.push(pod(&format!("fill-{z}")).cpu("4").on(&n).json());
    }
    items.push(storage_class("gp3", true, &[]));
    items
}

fn plan(items: Vec<Value>) -> Plan {
    run_once(
        &snapshot(items),
        &mut EngineState::default(),
        &Settings::default(),
        "2026-11-22T10:00:00Z".parse().unwrap(),
    )
}

fn web(claim: &str) -> Value {
    pod("web-0").cpu("1").claim(claim).unschedulable().json()
}

fn scaled(p: &Plan) -> Vec<String> {
    p.scale_up
        .iter()
        .map(|a| a.node_group.to_string())
        .collect()
}

fn codes(p: &Plan, pod: &str) -> (Outcome, Vec<ReasonCode>) {
    let e = p.pending_pods.iter().find(|e| &*e.pod.name == pod).unwrap();
    (e.outcome, e.reasons.iter().map(|r| r.code).collect())
}

#[test]
fn a_bound_zonal_volume_scales_its_zone_only() {
    // Both zones in turn: the groups are otherwise equal, so no tie-break decides it.
    for zone in ["us-east-1a", "us-east-1b"] {
        let mut items = zonal_groups(&["us-east-1a", "us-east-1b"]);
        items.push(pvc("data", "gp3", Some("pv")));
        items.push(zonal_pv("pv", zone));
        items.push(web("data"));
        let p = plan(items);
        let groups = scaled(&p);
        assert_eq!(groups.len(), 1, "{groups:?}");
        assert!(
            groups[0].ends_with(&format!("/w-{zone}")),
            "{zone}: {groups:?}"
        );
    }
}

#[test]
fn without_a_group_in_the_volumes_zone_nothing_is_bought() {
    let mut items = zonal_groups(&["us-east-1a"]);
    items.push(pvc("data", "gp3", Some("pv-b")));
    items.push(zonal_pv("pv-b", "us-east-1b"));
    items.push(web("data"));
    let p = plan(items);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    let (outcome, codes) = codes(&p, "web-0");
    assert_eq!(outcome, Outcome::NoScaleUp);
    assert!(
        codes.contains(&ReasonCode::VolumeNodeAffinityConflict),
        "{codes:?}"
    );
}

#[test]
fn legacy_zone_labels_on_the_volume_count_too() {
    let mut items = zonal_groups(&["us-east-1a", "us-east-1b"]);
    items.push(pvc("data", "gp3", Some("pv-old")));
    items.push(serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "pv-old", "labels": {"failure-domain.beta.kubernetes.io/zone": "us-east-1a"}},
        "spec": {"storageClassName": "gp3"}, "status": {"phase": "Bound"}}));
    items.push(web("data"));
    let p = plan(items);
    let groups = scaled(&p);
    assert!(
        groups.len() == 1 && groups[0].ends_with("/w-us-east-1a"),
        "{groups:?}"
    );
}

#[test]
fn an_unbound_claim_of_an_immediate_class_waits_for_its_volume_not_a_node() {
    let mut items = zonal_groups(&["us-east-1a"]);
    items.push(storage_class("fast", false, &[]));
    items.push(pvc("data", "fast", None));
    items.push(web("data"));
    let p = plan(items);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    let (_, codes) = codes(&p, "web-0");
    assert!(codes.contains(&ReasonCode::VolumeNotBound), "{codes:?}");
}

#[test]
fn wait_for_first_consumer_follows_the_allowed_topologies() {
    let mut items = zonal_groups(&["us-east-1a", "us-east-1b"]);
    items.push(storage_class("b-only", true, &["us-east-1b"]));
    items.push(pvc("data", "b-only", None));
    items.push(web("data"));
    let p = plan(items);
    let groups = scaled(&p);
    assert!(
        groups.len() == 1 && groups[0].ends_with("/w-us-east-1b"),
        "{groups:?}"
    );
}

#[test]
fn a_missing_claim_or_volume_is_named_and_buys_nothing() {
    let mut items = zonal_groups(&["us-east-1a"]);
    items.push(pvc("orphan", "gp3", Some("pv-gone")));
    items.push(web("nowhere"));
    items.push(pod("web-1").cpu("1").claim("orphan").unschedulable().json());
    let p = plan(items);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    for name in ["web-0", "web-1"] {
        let (_, codes) = codes(&p, name);
        assert!(
            codes.contains(&ReasonCode::VolumeMissing),
            "{name}: {codes:?}"
        );
    }
    let text = format!("{:?}", p.pending_pods);
    assert!(
        text.contains("persistentvolumeclaim default/nowhere does not exist"),
        "{text}"
    );
    assert!(
        text.contains("bound to persistentvolume pv-gone, which does not exist"),
        "{text}"
    );
}

#[test]
fn a_dump_without_storage_objects_leaves_volumes_unsimulated() {
    let mut items = zonal_groups(&["us-east-1a"]);
    items.retain(|i| i["kind"] != "StorageClass");
    items.push(web("data"));
    let p = plan(items);
    // As before volumes were simulated: the pod scales up, with the gap named.
    assert_eq!(p.scale_up.len(), 1);
    let (_, codes) = codes(&p, "web-0");
    assert!(codes.contains(&ReasonCode::NotSimulated), "{codes:?}");
}

#[test]
fn a_pod_pinned_by_its_volume_keeps_a_node_with_no_other_home_in_its_zone() {
    // Two half-empty nodes in different zones: without the volume, either could go.
    let mut items = Vec::new();
    for z in ["us-east-1a", "us-east-1b"] {
        let g = format!("w-{z}");
        let n = format!("{g}-0");
        items.push(machineset(&g, 0, 5, 1).json());
        items.extend(group_node(
            &n,
            &g,
            node(&n).cpu("4").zone(z).label(CSI_ZONE, z),
        ));
    }
    items.push(storage_class("gp3", true, &[]));
    items.push(pvc("data", "gp3", Some("pv-a")));
    items.push(zonal_pv("pv-a", "us-east-1a"));
    items.push(
        pod("db-0")
            .cpu("500m")
            .owner("StatefulSet", "db")
            .claim("data")
            .on("w-us-east-1a-0")
            .json(),
    );
    let p = plan(items);
    let stays = p
        .not_removable
        .iter()
        .find(|n| &*n.node == "w-us-east-1a-0")
        .expect("the zone-a node is kept");
    assert_eq!(stays.code, ReasonCode::NoPlaceToMovePods, "{stays:?}");
}

fn csi_node(node: &str, limit: i64) -> Value {
    serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": node,
            "allocatable": {"count": limit}, "topologyKeys": [CSI_ZONE]}]}})
}

#[test]
fn a_node_at_its_attach_limit_takes_no_more_volumes_and_a_new_one_does() {
    for (limit, outcome) in [(1, Outcome::ScaleUp), (2, Outcome::FitsExisting)] {
        let mut items = Vec::new();
        items.push(machineset("w", 0, 5, 1).json());
        let n = node("w-0")
            .cpu("8")
            .zone("us-east-1a")
            .label(CSI_ZONE, "us-east-1a");
        items.extend(group_node("w-0", "w", n));
        items.push(csi_node("w-0", limit));
        items.push(storage_class("gp3", true, &[]));
        for (claim, pv) in [("old", "pv-old"), ("new", "pv-new")] {
            items.push(pvc(claim, "gp3", Some(pv)));
            items.push(zonal_pv(pv, "us-east-1a"));
        }
        items.push(pod("db-0").cpu("1").claim("old").on("w-0").json());
        items.push(web("new"));
        // Room for the CPU either way; for a second EBS volume only below the limit. The
        // new node copies w-0's CSINode, so it takes the pod.
        let p = plan(items);
        assert_eq!(
            codes(&p, "web-0").0,
            outcome,
            "limit {limit}: {:?}",
            p.pending_pods
        );
    }
}

#[test]
fn a_group_at_zero_gets_the_csi_zone_key_of_the_drivers_seen_on_its_platform() {
    let mut items = Vec::new();
    // A running worker in zone a, with the EBS driver: its CSINode shows the driver's key.
    items.push(machineset("w-a", 1, 5, 1).json());
    let a = node("w-a-0")
        .cpu("4")
        .zone("us-east-1a")
        .label(CSI_ZONE, "us-east-1a")
        .provider_id("aws:///us-east-1a/i-0");
    items.extend(group_node("w-a-0", "w-a", a));
    items.push(pod("fill").cpu("4").on("w-a-0").json());
    items.push(csi_node("w-a-0", 25));
    // Zone b's group is at zero: its template comes from annotations.
    let b = machineset("w-b", 0, 5, 0)
        .capacity("4", "16Gi")
        .node_label("topology.kubernetes.io/zone", "us-east-1b");
    items.push(b.json());
    items.push(storage_class("gp3", true, &[]));
    items.push(pvc("data", "gp3", Some("pv-b")));
    items.push(zonal_pv("pv-b", "us-east-1b"));
    items.push(web("data"));
    let p = plan(items);
    let groups = scaled(&p);
    assert!(
        groups.len() == 1 && groups[0].ends_with("/w-b"),
        "{groups:?} {:?}",
        p.pending_pods
    );
}

#[test]
fn a_volume_that_cannot_be_read_holds_only_the_pods_bound_to_it() {
    let mut items = zonal_groups(&["us-east-1a"]);
    let mut bad = zonal_pv("pv-bad", "us-east-1a");
    bad["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchFields"] =
        serde_json::json!([{"key": "spec.nodeName", "operator": "In", "values": ["x"]}]);
    items.push(bad);
    items.push(pvc("bad", "gp3", Some("pv-bad")));
    items.push(web("bad"));
    items.push(pod("plain").cpu("1").unschedulable().json());
    let p = plan(items);
    let (_, held) = codes(&p, "web-0");
    assert_eq!(held[0], ReasonCode::VolumeMissing, "{:?}", p.pending_pods);
    let text = format!("{:?}", p.pending_pods);
    assert!(
        text.contains("persistentvolume pv-bad, which cannot be read"),
        "{text}"
    );
    assert_eq!(codes(&p, "plain").0, Outcome::ScaleUp);
}
