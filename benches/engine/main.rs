//! Engine benchmark: one `run_once` pass on a synthetic cluster of 1,000 nodes, 30,000
//! running pods, 2,000 pending pods and 20 node groups. Prints the distribution of pass
//! times and what the pass decided (so a pass that does nothing cannot look fast).
//!
//! `cargo bench --bench engine` (optionally `-- --iterations N`). Under `cargo test` it runs
//! two passes as a smoke test, checking that passes over the same input agree.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod many_groups;
mod synthetic;

use std::time::{Duration, Instant};

use fleetscaler::engine::plan::Outcome;
use fleetscaler::engine::{EngineState, Settings, run_once};
use jiff::Timestamp;

fn main() {
    // `cargo bench` passes --bench; under `cargo test` this is a smoke run of two passes.
    let benching = std::env::args().any(|a| a == "--bench");
    let iterations: usize = std::env::args()
        .skip_while(|a| a != "--iterations")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(if benching { 30 } else { 2 });
    let shape = synthetic::Shape {
        nodes: 1000,
        running_pods: 30_000,
        pending_pods: 2000,
    };
    let started = Instant::now();
    let snapshot = synthetic::build(&shape);
    let built = started.elapsed();
    let settings = Settings {
        balance_similar_node_groups: true,
        ..Settings::default()
    };
    let now = Timestamp::UNIX_EPOCH;

    let plan = run_once(&snapshot, &mut EngineState::default(), &settings, now);
    let mut times: Vec<Duration> = (0..iterations)
        .map(|_| {
            let t = Instant::now();
            let p = run_once(&snapshot, &mut EngineState::default(), &settings, now);
            let elapsed = t.elapsed();
            assert_eq!(p, plan, "passes over the same input must agree");
            elapsed
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let pct = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];

    println!(
        "engine pass: {} nodes, {} pods ({} pending), {} node groups",
        snapshot.nodes.len(),
        snapshot.pods.len(),
        snapshot.pods.iter().filter(|p| p.unschedulable).count(),
        plan.node_groups.len()
    );
    println!(
        "  snapshot built and projected in {:.0} ms (not part of the pass)",
        ms(built)
    );
    println!(
        "  {iterations} passes: min {:.1} ms, median {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        ms(times[0]),
        ms(pct(0.5)),
        ms(pct(0.9)),
        ms(*times.last().unwrap())
    );
    let count = |o: Outcome| plan.pending_pods.iter().filter(|e| e.outcome == o).count();
    let added: u64 = plan.scale_up.iter().map(|a| a.to - a.from).sum();
    println!(
        "  decided: {} scale-ups adding {added} nodes; pending pods: {} scaleUp, {} fitsExisting, {} fitsUpcoming, {} noScaleUp, {} belowPriorityCutoff",
        plan.scale_up.len(),
        count(Outcome::ScaleUp),
        count(Outcome::FitsExisting),
        count(Outcome::FitsUpcoming),
        count(Outcome::NoScaleUp),
        count(Outcome::BelowPriorityCutoff)
    );
    // The pods claiming a GPU through DRA can go only to the DRA group: it must be scaled.
    let dra: Vec<String> = plan
        .scale_up
        .iter()
        .filter(|a| a.node_group.to_string().contains("dra-"))
        .map(|a| {
            let mut apps = std::collections::BTreeMap::<&str, usize>::new();
            for p in &a.pods {
                *apps
                    .entry(p.name.rsplit_once('-').map_or("", |s| s.0))
                    .or_default() += 1;
            }
            format!("{} +{} for {apps:?}", a.node_group, a.to - a.from)
        })
        .collect();
    println!("  DRA GPU group: {}", dra.join(", "));
    assert_eq!(
        dra.len(),
        1,
        "the DRA group is scaled for the claiming pods"
    );
    if !benching {
        scale_down_pass(&snapshot, 1, None);
        many_groups_passes(&[50], 1);
        return;
    }
    println!(
        "  scale-down: {} unneeded, {} removed, {} kept with a reason{}",
        plan.unneeded.len(),
        plan.scale_down.len(),
        plan.not_removable.len(),
        plan.scale_down_paused
            .as_ref()
            .map_or(String::new(), |p| format!(" (paused: {p})"))
    );
    let goal = Duration::from_millis(100);
    println!(
        "  goal: median <= {} ms: {}",
        goal.as_millis(),
        if pct(0.5) <= goal { "met" } else { "NOT met" }
    );
    scale_down_pass(&snapshot, iterations, Some(goal));
    many_groups_passes(&[500, 1000, 2000], iterations.min(5));
}

/// Passes over clusters of many similar node groups with balancing on: a quiet one, and one
/// whose pending pods each need a node (so the chosen group is balanced over all the
/// others). Goal: well under a second at 2,000 groups.
fn many_groups_passes(sizes: &[usize], iterations: usize) {
    let settings = Settings {
        balance_similar_node_groups: true,
        ..Settings::default()
    };
    let now = Timestamp::UNIX_EPOCH;
    for &groups in sizes {
        for pending in [0, 3] {
            let snapshot = many_groups::build(groups, pending);
            let mut best = Duration::MAX;
            let mut plan = None;
            for _ in 0..iterations.max(1) {
                let t = Instant::now();
                let p = run_once(&snapshot, &mut EngineState::default(), &settings, now);
                best = best.min(t.elapsed());
                plan = Some(p);
            }
            let plan = plan.unwrap();
            if pending == 0 {
                phases(&snapshot, &settings, now);
            }
            let groups_grown = plan.scale_up.len();
            let added: u64 = plan.scale_up.iter().map(|a| a.to - a.from).sum();
            assert_eq!(plan.node_groups.len(), groups);
            assert_eq!(
                added as usize, pending,
                "each pending pod needs a node of its own"
            );
            println!(
                "many groups: {groups} similar groups, {pending} pending: best of {} passes {:.1} ms; {added} nodes over {groups_grown} groups",
                iterations.max(1),
                best.as_secs_f64() * 1000.0
            );
        }
    }
}

/// The same cluster with no pending pods, remembering its unneeded nodes for 20 minutes:
/// a pass where scale-down removes nodes.
fn scale_down_pass(
    snapshot: &fleetscaler::model::ClusterSnapshot,
    iterations: usize,
    goal: Option<Duration>,
) {
    let mut quiet = snapshot.clone();
    quiet.pods.retain(|p| !p.unschedulable);
    let now = Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_hours(1);
    // Remember the nodes a quiet pass finds unneeded as unneeded for 20 minutes already.
    let settings = Settings::default();
    let found = run_once(&quiet, &mut EngineState::default(), &settings, now);
    let mut state = EngineState::default();
    for u in &found.unneeded {
        state.unneeded_since.insert(
            u.node.to_string(),
            now - jiff::SignedDuration::from_mins(20),
        );
    }
    let mut times: Vec<Duration> = (0..iterations.max(1))
        .map(|_| {
            let mut st = state.clone();
            let t = Instant::now();
            run_once(&quiet, &mut st, &settings, now);
            t.elapsed()
        })
        .collect();
    times.sort();
    let plan = run_once(&quiet, &mut state.clone(), &settings, now);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = times[times.len() / 2];
    println!("scale-down pass (no pending pods, candidates unneeded for 20m):");
    println!(
        "  {} passes: min {:.1} ms, median {:.1} ms, max {:.1} ms",
        times.len(),
        ms(times[0]),
        ms(median),
        ms(*times.last().unwrap())
    );
    let empty = plan.scale_down.iter().filter(|a| a.empty).count();
    println!(
        "  decided: remove {} nodes ({} empty, {} drained); {} unneeded; {} kept with a reason",
        plan.scale_down.len(),
        empty,
        plan.scale_down.len() - empty,
        plan.unneeded.len(),
        plan.not_removable.len()
    );
    if let Some(goal) = goal {
        let met = if median <= goal { "met" } else { "NOT met" };
        println!("  goal: median <= {} ms: {met}", goal.as_millis());
    }
}

/// Where a quiet pass over many groups spends its time, phase by phase.
fn phases(snapshot: &fleetscaler::model::ClusterSnapshot, settings: &Settings, now: Timestamp) {
    use fleetscaler::engine::{cluster_state, nodegroups, template};
    let t = Instant::now();
    let groups = nodegroups::discover(snapshot, &settings.node_groups);
    let discovered = t.elapsed();
    let t = Instant::now();
    let (templates, _) = template::build_all(snapshot, &groups.groups, settings);
    let built = t.elapsed();
    let t = Instant::now();
    let mut state = EngineState::default();
    let cluster = cluster_state::assess(snapshot, &groups, &mut state, settings, now);
    let assessed = t.elapsed();
    let t = Instant::now();
    let input = fleetscaler::engine::scale_up::ScaleUpInput {
        snapshot,
        groups: &groups,
        cluster: &cluster,
        templates: &templates,
        settings,
        priorities: None,
        now,
    };
    let _ = fleetscaler::engine::scale_up::plan(
        &input,
        &mut fleetscaler::engine::expander::SeededRng::new(1),
    );
    let scaled_up = t.elapsed();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "  phases: node groups {:.1} ms, templates ({}) {:.1} ms, cluster state {:.1} ms, scale-up {:.1} ms",
        ms(discovered),
        templates.len(),
        ms(built),
        ms(assessed),
        ms(scaled_up)
    );
}
