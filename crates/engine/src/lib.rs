//! The autoscaling decisions, pure: no I/O, no tasks, no clock (time is a parameter).
//!
//! In the upstream autoscaler's vocabulary: node groups and their templates, the scheduling
//! `simulator` with its predicates, the `estimator` (binpacking), the `expander`, resource
//! limits, balancing of similar groups, and the scale-up orchestration. The entry point is
//! [`run_once_with`]: a snapshot, the engine's memory, settings, the fleet's policy and the
//! time in, a [`Plan`] out, every action and every pending pod with its reasons
//! ([`run_once`] for a cluster on its own).
// The settings test spells every key in one `json!` literal, deeper than the default limit.
#![cfg_attr(test, recursion_limit = "256")]

pub mod balance;
pub mod cluster_state;
mod csi;
mod dra_template;
pub mod estimator;
pub mod expander;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod fleet_backoff;
pub mod limits;
pub mod nodegroups;
pub mod plan;
pub mod policy;
pub mod provisioning;
pub mod reason;
pub mod scale_down;
pub mod scale_up;
pub mod settings;
pub mod simulator;
pub mod state;
pub mod template;
pub mod trace;
mod unready_devices;
mod unready_resources;
pub mod what_if;

use fleetscaler_model::{Warning, WarningCode};
use jiff::Timestamp;

use expander::SeededRng;
use fleetscaler_model::ClusterSnapshot;
use nodegroups::NodeGroups;
use plan::NodeGroupStatus;
pub use plan::Plan;
pub use policy::FleetPolicy;
pub use settings::{Settings, SettingsPatch};
pub use state::EngineState;
use template::{TemplateError, TemplateNode, TemplateSource};

/// One decision pass over a cluster on its own (no fleet policy).
pub fn run_once(
    snapshot: &ClusterSnapshot,
    state: &mut EngineState,
    settings: &Settings,
    now: Timestamp,
) -> Plan {
    run_once_with(snapshot, state, settings, &FleetPolicy::none(), now)
}

/// One decision pass over one cluster of a fleet: `state` is the engine's memory, updated as
/// if the plan is carried out; `policy` is what the hub decided for the whole fleet.
pub fn run_once_with(
    snapshot: &ClusterSnapshot,
    state: &mut EngineState,
    settings: &Settings,
    policy: &FleetPolicy,
    now: Timestamp,
) -> Plan {
    let groups = nodegroups::discover(snapshot, &settings.node_groups);
    let mut warnings = groups.warnings.clone();
    warnings.extend(state.adopt_unqualified_ids(&groups));
    let (templates, template_warnings) = template::build_all(snapshot, &groups.groups, settings);
    warnings.extend(template_warnings);
    warnings.extend(limits::implausible_nodes(&snapshot.nodes));
    warnings.extend(limits::unmatched_gpu_limits(
        settings,
        &snapshot.nodes,
        &templates,
    ));
    warnings.extend(ignored_cluster_autoscalers(snapshot));
    let mut cluster =
        trace::health(|| cluster_state::assess(snapshot, &groups, state, settings, now));
    fleet_backoff::apply(&mut cluster, &groups, &templates, policy, now);
    let capacity_failures = fleet_backoff::found(&groups, &templates, state, now);
    warnings.extend(cluster.warnings.iter().cloned());
    let priorities = expander::configured(snapshot, settings, state, &mut warnings);
    let mut rng = SeededRng::new(settings.seed);
    let input = scale_up::ScaleUpInput {
        snapshot,
        groups: &groups,
        cluster: &cluster,
        templates: &templates,
        settings,
        priorities: priorities.as_deref(),
        now,
    };
    provisioning::forget_gone(&mut state.provisioning, snapshot);
    let requests = provisioning::classify(snapshot, &state.provisioning, now);
    warnings.extend(requests.warnings.iter().cloned());
    let mut provisioning_requests = Vec::new();
    // One simulation of the cluster for the whole pass: scale-up leaves it as it found it.
    let pods_on = simulator::pods_by_node(snapshot);
    let mut sim = scale_up::base(&input, &pods_on);
    let scale_up = trace::scale_up(|| {
        let (out, decided) = provisioning::scale_up(
            &input,
            &requests,
            &mut state.provisioning,
            &mut sim,
            &mut rng,
            now,
        );
        provisioning_requests = decided;
        out
    });
    warnings.extend(scale_up.warnings);
    if provisioning::counts_as_scale_up(&provisioning_requests) {
        state.last_scale_up = Some(now);
    }
    let mut expected = expected_placements(snapshot, &scale_up.pods);
    // Booked capacity holds its nodes as upstream's booked pods do.
    expected.extend(
        scale_up
            .booked_on
            .iter()
            .filter_map(|(i, node)| Some((requests.booked.get(*i)?, node.clone()))),
    );
    let scale_down = trace::scale_down(|| {
        let input = scale_down::ScaleDownInput {
            snapshot,
            groups: &groups,
            cluster: &cluster,
            settings,
            state,
            now,
            scales_up: !scale_up.actions.is_empty(),
            expected,
            pods_on: &pods_on,
        };
        scale_down::plan(&input, &mut sim)
    });
    let mut scale_down = scale_down;
    let held = hold_scale_down(&mut scale_down, policy);
    remember(state, &scale_up.actions, &scale_down, now);
    let mut plan = Plan {
        now,
        node_groups: node_group_statuses(
            snapshot,
            &groups,
            &cluster,
            &templates,
            &scale_up.upcoming,
        ),
        scale_up: scale_up.actions,
        pending_pods: scale_up.pods,
        limits: scale_up.limits,
        skipped_scale_events: plan::SkippedScaleEvents {
            up: scale_up.skipped,
            down: scale_down.skipped,
        },
        health: cluster.health,
        fix_target_size: cluster.fix_target_size,
        delete_failed_machines: cluster.delete_failed,
        delete_unregistered: cluster.delete_unregistered,
        unneeded: scale_down.unneeded,
        scale_down: scale_down.actions,
        not_removable: scale_down.not_removable,
        scale_down_paused: scale_down.paused,
        scale_down_paused_until: scale_down.paused_until,
        scale_down_held: held,
        fleet_policy: policy.clone(),
        capacity_failures,
        provisioning_requests,
        warnings,
        timed_out: cluster.timed_out,
    };
    fleet_backoff::note(&mut plan);
    plan
}

/// The fleet's hold: the removals planned are kept aside (before the engine remembers them
/// as done, so no cooldown starts), and the plan says why none happens.
fn hold_scale_down(
    scale_down: &mut scale_down::ScaleDownOutput,
    policy: &FleetPolicy,
) -> Vec<plan::ScaleDownAction> {
    let Some(why) = &policy.scale_down_hold else {
        return Vec::new();
    };
    scale_down.paused = Some(why.clone());
    scale_down.paused_until = None;
    std::mem::take(&mut scale_down.actions)
}

/// OpenShift's operator honours only the ClusterAutoscaler named `default`; any other is
/// most likely meant to apply and does not.
fn ignored_cluster_autoscalers(snapshot: &ClusterSnapshot) -> Vec<Warning> {
    snapshot
        .cluster_autoscalers
        .iter()
        .filter(|c| c.name != fleetscaler_model::autoscaler::CLUSTER_AUTOSCALER_NAME)
        .map(|c| {
            Warning::general(
                WarningCode::IgnoredClusterAutoscaler,
                format!(
                    "ClusterAutoscaler {:?} is ignored: only the one named \"default\" is honoured, as OpenShift's operator does",
                    c.name
                ),
            )
        })
        .collect()
}

/// Pending pods found to fit an existing node: the scheduler will put them there. Usually
/// a few among tens of thousands of pods: those are looked up in one scan of the snapshot,
/// rather than every pod indexed on every pass.
fn expected_placements<'a>(
    snapshot: &'a ClusterSnapshot,
    pods: &[plan::PodExplanation],
) -> Vec<(&'a fleetscaler_model::Pod, std::sync::Arc<str>)> {
    let fits: Vec<&plan::PodExplanation> = pods
        .iter()
        .filter(|e| e.outcome == plan::Outcome::FitsExisting && e.node.is_some())
        .collect();
    if fits.is_empty() {
        return Vec::new();
    }
    let position: std::collections::HashMap<&fleetscaler_model::PodId, usize> =
        fits.iter().enumerate().map(|(i, e)| (&e.pod, i)).collect();
    let mut found = vec![None; fits.len()];
    for pod in &snapshot.pods {
        if let Some(&i) = position.get(&pod.id) {
            found[i] = Some(pod);
        }
    }
    fits.iter()
        .zip(found)
        .filter_map(|(e, pod)| Some((pod?, e.node.clone()?)))
        .collect()
}

/// Updates the engine's memory as if the plan is carried out.
fn remember(
    state: &mut EngineState,
    ups: &[plan::ScaleUpAction],
    down: &scale_down::ScaleDownOutput,
    now: Timestamp,
) {
    for a in ups {
        state.record_scale_up(&a.node_group, a.to - a.from, now);
    }
    state.unneeded_since = down.unneeded_since.clone();
    if !down.actions.is_empty() {
        state.last_scale_down_delete = Some(now);
    }
}

fn node_group_statuses(
    snapshot: &ClusterSnapshot,
    groups: &NodeGroups,
    cluster: &cluster_state::ClusterState,
    templates: &[Result<TemplateNode, TemplateError>],
    upcoming: &[u64],
) -> Vec<NodeGroupStatus> {
    let mut out: Vec<NodeGroupStatus> = groups
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| NodeGroupStatus {
            id: g.id.clone(),
            eligible: true,
            min: Some(g.min),
            max: Some(g.max),
            target: Some(g.target),
            registered: cluster.groups[i].registered(),
            ready: g
                .nodes
                .iter()
                // A Ready node with a startup taint left is not ready yet.
                .filter(|&&n| {
                    snapshot.nodes[n].is_ready()
                        && matches!(
                            cluster.readiness[n],
                            cluster_state::NodeReadiness::Ready
                                | cluster_state::NodeReadiness::Deleting
                        )
                })
                .count() as u64,
            upcoming: upcoming.get(i).copied().unwrap_or(0),
            template: templates[i]
                .as_ref()
                .map_or(TemplateSource::None, |t| t.source.clone()),
            platform: templates[i].as_ref().ok().and_then(|t| t.platform),
            bounds_from: Some(g.bounds_source.to_string()),
            reason: templates[i].as_ref().err().map(ToString::to_string),
            notes: g
                .bounds_note
                .iter()
                .cloned()
                .chain(templates[i].as_ref().ok().and_then(template_note))
                .collect(),
            overrides: g.options.report(),
        })
        .collect();
    out.extend(groups.ineligible.iter().map(|g| NodeGroupStatus {
        id: g.id.clone(),
        eligible: false,
        min: None,
        max: None,
        target: None,
        registered: 0,
        ready: 0,
        upcoming: 0,
        template: TemplateSource::None,
        platform: None,
        bounds_from: None,
        reason: Some(g.reason.message.clone()),
        notes: Vec::new(),
        overrides: Default::default(),
    }));
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// Names the infrastructure template a group's new nodes were modelled on.
fn template_note(t: &TemplateNode) -> Option<String> {
    let from = t.from.as_deref()?;
    (t.source == TemplateSource::InfrastructureTemplate)
        .then(|| format!("template from the infrastructure template {from} (status.capacity)"))
}
