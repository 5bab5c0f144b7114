use std::collections::HashMap;

use super::*;
use crate::fixtures::{node, pod, snapshot};
use crate::reason::ReasonCode;
use fleetscaler_model::ClusterSnapshot;

/// A simulator holding the snapshot's nodes and scheduled pods.
fn sim(s: &ClusterSnapshot) -> Simulator {
    let mut sim = Simulator::new(HashMap::new());
    for (i, n) in s.nodes.iter().enumerate() {
        sim.add_node(SimNode::existing(i, n));
    }
    for p in s.pods.iter().filter(|p| p.node_name.is_some()) {
        let idx = sim
            .nodes()
            .iter()
            .position(|n| Some(&n.name) == p.node_name.as_ref())
            .unwrap();
        sim.place(&PodShape::from(p), idx);
    }
    sim
}

fn pending(s: &ClusterSnapshot, name: &str) -> PodShape {
    PodShape::from(s.pods.iter().find(|p| &*p.id.name == name).unwrap())
}

fn code(r: Result<(), Unfit>) -> Option<ReasonCode> {
    r.err().map(|u| u.code)
}

#[test]
fn static_predicates() {
    let s = snapshot([
        node("small").cpu("1").json(),
        node("gpu")
            .taint("nvidia.com/gpu", "true", "NoSchedule")
            .json(),
        node("cordoned").cordoned().json(),
        node("full").pods(1).json(),
        pod("web").cpu("2").unschedulable().json(),
        pod("ssd")
            .node_selector("disk", "ssd")
            .unschedulable()
            .json(),
        pod("port").host_port(8080).unschedulable().json(),
        pod("holder")
            .host_port(8080)
            .on("gpu")
            .tolerate("nvidia.com/gpu")
            .json(),
        pod("filler").on("full").json(),
    ]);
    let mut sim = sim(&s);
    let web = pending(&s, "web");
    let err = sim.check(&web, 0).unwrap_err();
    assert_eq!(err.code, ReasonCode::InsufficientResources);
    assert_eq!(err.message, "cpu requested 2, only 1 free");
    assert_eq!(code(sim.check(&web, 1)), Some(ReasonCode::UntoleratedTaint));
    assert_eq!(
        code(sim.check(&web, 2)),
        Some(ReasonCode::NodeUnschedulable)
    );
    assert_eq!(code(sim.check(&web, 3)), Some(ReasonCode::TooManyPods));
    let ssd = pending(&s, "ssd");
    let err = sim.check(&ssd, 0).unwrap_err();
    assert_eq!(
        err.message,
        "nodeSelector disk=ssd does not match (node has no disk label)"
    );
    let port = pending(&s, "port");
    assert_eq!(
        code(sim.check(&port, 1)),
        Some(ReasonCode::UntoleratedTaint)
    );
    assert_eq!(sim.check(&port, 0), Ok(()));
}

#[test]
fn host_ports_conflict_after_placement_and_free_after_revert() {
    let s = snapshot([
        node("a").json(),
        pod("p").host_port(80).unschedulable().json(),
    ]);
    let mut sim = sim(&s);
    let p = pending(&s, "p");
    let mark = sim.mark();
    sim.place(&p, 0);
    assert_eq!(code(sim.check(&p, 0)), Some(ReasonCode::HostPortConflict));
    sim.revert(mark);
    assert_eq!(sim.check(&p, 0), Ok(()));
    assert_eq!(sim.node(0).pods, 0);
}

#[test]
fn hostname_anti_affinity_and_its_symmetry() {
    let s = snapshot([
        node("a").json(),
        node("b").json(),
        pod("web-1")
            .label("app", "web")
            .anti_affinity("web", "kubernetes.io/hostname")
            .on("a")
            .json(),
        pod("web-2")
            .label("app", "web")
            .anti_affinity("web", "kubernetes.io/hostname")
            .unschedulable()
            .json(),
        // No anti-affinity of its own, but web-1's keeps it off node a.
        pod("intruder").label("app", "web").unschedulable().json(),
    ]);
    let mut sim = sim(&s);
    let web2 = pending(&s, "web-2");
    let err = sim.check(&web2, 0).unwrap_err();
    assert_eq!(err.code, ReasonCode::PodAntiAffinityConflict);
    assert!(
        err.message.contains("kubernetes.io/hostname=a"),
        "{}",
        err.message
    );
    assert_eq!(sim.check(&web2, 1), Ok(()));
    let intruder = pending(&s, "intruder");
    let err = sim.check(&intruder, 0).unwrap_err();
    assert!(
        err.message.contains("existing pod's anti-affinity"),
        "{}",
        err.message
    );
    assert_eq!(sim.check(&intruder, 1), Ok(()));
}

#[test]
fn zone_spread_counts_domains_and_updates_incrementally() {
    let s = snapshot([
        node("a1").zone("a").json(),
        node("b1").zone("b").json(),
        pod("w1").label("app", "w").on("a1").json(),
        pod("w2")
            .label("app", "w")
            .spread(1, "topology.kubernetes.io/zone", "w")
            .unschedulable()
            .json(),
    ]);
    let mut sim = sim(&s);
    let w2 = pending(&s, "w2");
    // a holds 1, b holds 0: a second pod in a would make skew 2.
    let err = sim.check(&w2, 0).unwrap_err();
    assert_eq!(err.code, ReasonCode::TopologySpreadViolated);
    assert_eq!(
        err.message,
        "topology.kubernetes.io/zone=a would hold 2 matching pods against a minimum of 0 (maxSkew 1)"
    );
    assert_eq!(sim.check(&w2, 1), Ok(()));
    let mark = sim.mark();
    sim.place(&w2, 1);
    // Now a=1, b=1: either zone takes the next one.
    assert_eq!(sim.check(&w2, 0), Ok(()));
    // A new node in a third zone becomes the minimum domain, holding 0.
    let mut c = sim.node(1).clone();
    c.labels = c.labels.merged(&fleetscaler_model::Labels::from_strs([(
        "topology.kubernetes.io/zone",
        "c",
    )]));
    c.hostname = "c1".into();
    c.requested = Default::default();
    c.pods = 0;
    c.kind = SimNodeKind::New(0);
    let ci = sim.add_node(c);
    assert_eq!(
        code(sim.check(&w2, 0)),
        Some(ReasonCode::TopologySpreadViolated)
    );
    assert_eq!(sim.check(&w2, ci), Ok(()));
    sim.revert(mark);
    assert_eq!(sim.nodes().len(), 2);
    assert_eq!(
        code(sim.check(&w2, 0)),
        Some(ReasonCode::TopologySpreadViolated)
    );
    assert_eq!(sim.check(&w2, 1), Ok(()));
}

#[test]
fn pod_affinity_needs_a_match_in_the_domain_except_for_the_first_pod() {
    let s = snapshot([
        node("a1").zone("a").json(),
        node("b1").zone("b").json(),
        pod("cache").label("app", "cache").on("b1").json(),
        pod("app")
            .affinity("cache", "topology.kubernetes.io/zone")
            .unschedulable()
            .json(),
        pod("lonely")
            .label("app", "lonely")
            .affinity("lonely", "topology.kubernetes.io/zone")
            .unschedulable()
            .json(),
    ]);
    let mut sim = sim(&s);
    let app = pending(&s, "app");
    assert_eq!(
        code(sim.check(&app, 0)),
        Some(ReasonCode::PodAffinityUnsatisfied)
    );
    assert_eq!(sim.check(&app, 1), Ok(()));
    let lonely = pending(&s, "lonely");
    assert_eq!(
        sim.check(&lonely, 0),
        Ok(()),
        "first pod of a self-affine group goes anywhere"
    );
    sim.place(&lonely, 0);
    assert_eq!(
        code(sim.check(&lonely, 1)),
        Some(ReasonCode::PodAffinityUnsatisfied)
    );
    assert_eq!(sim.check(&lonely, 0), Ok(()));
}

#[test]
fn failures_are_monotonic_only_without_affinity_or_spread() {
    let s = snapshot([
        pod("plain")
            .anti_affinity("x", "kubernetes.io/hostname")
            .unschedulable()
            .json(),
        pod("spread")
            .spread(1, "kubernetes.io/hostname", "x")
            .unschedulable()
            .json(),
    ]);
    assert!(Simulator::failures_are_monotonic(&pending(&s, "plain")));
    assert!(!Simulator::failures_are_monotonic(&pending(&s, "spread")));
}

#[test]
fn fits_agrees_with_check_without_formatting() {
    let s = snapshot([
        node("a").zone("a").json(),
        node("b")
            .zone("b")
            .taint("dedicated", "db", "NoSchedule")
            .json(),
        pod("w1").label("app", "w").on("a").json(),
        pod("w2")
            .label("app", "w")
            .cpu("1")
            .spread(1, "topology.kubernetes.io/zone", "w")
            .unschedulable()
            .json(),
        pod("big").cpu("9").unschedulable().json(),
    ]);
    let mut sim = sim(&s);
    for name in ["w2", "big"] {
        let p = pending(&s, name);
        for n in 0..2 {
            let (fast, full) = (sim.fits(&p, n), sim.check(&p, n));
            assert_eq!(
                fast.as_ref().map_err(|u| u.code),
                full.as_ref().map_err(|u| u.code),
                "{name} on {n}"
            );
            if let Err(u) = fast {
                assert!(u.message.is_empty());
                assert!(!full.unwrap_err().message.is_empty());
            }
        }
    }
}

#[test]
fn removing_a_pod_frees_its_space_ports_and_topology_and_reverts() {
    let s = snapshot([
        node("a").cpu("2").json(),
        node("b").cpu("2").json(),
        pod("web-1")
            .label("app", "web")
            .cpu("2")
            .host_port(80)
            .anti_affinity("web", "kubernetes.io/hostname")
            .on("a")
            .json(),
        pod("web-2")
            .label("app", "web")
            .cpu("2")
            .host_port(80)
            .anti_affinity("web", "kubernetes.io/hostname")
            .unschedulable()
            .json(),
    ]);
    let mut sim = sim(&s);
    let running = PodShape::from(s.pods.iter().find(|p| &*p.id.name == "web-1").unwrap());
    let web2 = pending(&s, "web-2");
    assert_eq!(
        code(sim.check(&web2, 0)),
        Some(ReasonCode::InsufficientResources)
    );
    let mark = sim.mark();
    sim.remove_pod(&running, 0);
    assert_eq!(
        sim.check(&web2, 0),
        Ok(()),
        "cpu, port and anti-affinity all freed"
    );
    assert_eq!(sim.pods_on(0).len(), 0);
    sim.place(&running, 1);
    assert_eq!(
        code(sim.check(&web2, 1)),
        Some(ReasonCode::InsufficientResources)
    );
    sim.revert(mark);
    assert_eq!(sim.pods_on(0).len(), 1);
    assert_eq!(sim.pods_on(1).len(), 0);
    assert_eq!(
        code(sim.check(&web2, 0)),
        Some(ReasonCode::InsufficientResources)
    );
    let mut only_ports = web2.clone();
    let mut spec = (*only_ports.spec).clone();
    spec.requests = Default::default();
    spec.anti_affinity.clear();
    only_ports.spec = std::sync::Arc::new(spec);
    assert_eq!(
        code(sim.check(&only_ports, 0)),
        Some(ReasonCode::HostPortConflict)
    );
}

#[test]
fn the_first_pod_rule_looks_at_all_affinity_terms() {
    let both = |name: &str| {
        pod(name)
            .label("app", "a")
            .affinity("a", "topology.kubernetes.io/zone")
            .affinity("b", "topology.kubernetes.io/zone")
    };
    let s = snapshot([
        node("z1").zone("one").json(),
        node("z2").zone("two").json(),
        pod("b-0").label("app", "b").on("z2").json(),
        both("new").unschedulable().json(),
    ]);
    let mut first = sim(&s);
    let p = pending(&s, "new");
    // A pod matches the second term, so this is not the first of its kind: the first term
    // (no app=a anywhere) cannot be satisfied.
    assert_eq!(
        code(first.check(&p, 1)),
        Some(ReasonCode::PodAffinityUnsatisfied)
    );
    // Without the b pod, it is the first of its kind... but must match all its own terms.
    let s = snapshot([
        node("z1").zone("one").json(),
        both("new").unschedulable().json(),
    ]);
    let mut sim2 = sim(&s);
    assert_eq!(
        code(sim2.check(&pending(&s, "new"), 0)),
        Some(ReasonCode::PodAffinityUnsatisfied)
    );
}
