//! Idle clusters cost nothing. The scan interval still looks at every cluster (the liveness
//! probe, the watches' health, a cache too old to act on), but a pass whose inputs are those
//! of the last one, on a cluster the last pass left settled, would decide the same again: it
//! is skipped. Inputs are the cached objects (any projected change), the cluster's settings,
//! the fleet's policy for it, and what the runner learned between passes (a removal ended, an
//! infrastructure template read). Settled means nothing in the last plan waits on the clock:
//! no pending pod, no action, no ProvisioningRequest but those at rest (a finished one's
//! deletion, days later, waits for a refresh), no unneeded node (its timer runs), no node or machine still
//! coming or unready, no backoff, no cooldown, every node that stays kept for a reason only
//! an event can change. What waits on a timer the plan dates (an unneeded node's
//! `removableAt`, a cooldown's end) skips passes until the first of those is due; anything
//! else unsettled passes every scan. A full pass still runs every `REFRESH` (the status
//! ConfigMap says the autoscaler is alive, as upstream's is rewritten every loop).

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::time::Instant;

use super::RunnerSpec;
use crate::engine::FleetPolicy;
use crate::engine::plan::Plan;
use crate::engine::reason::ReasonCode;

/// The longest an idle cluster goes without a full pass.
pub(super) const REFRESH: Duration = Duration::from_secs(300);

/// What a pass decided from.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Inputs {
    /// `Cache::changes`: every projected change of a cached object.
    pub cache: u64,
    /// What the runner learned between passes (removals ended, templates read).
    pub learned: u64,
    pub spec: Arc<RunnerSpec>,
    pub policy: FleetPolicy,
}

/// What in a plan waits on the clock, and when the first of it is due if the plan dates
/// it all (`None`: something undated waits, and every scan passes).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Unsettled {
    pub why: String,
    pub due: Option<Timestamp>,
}

/// The last full pass: its inputs, when it ran, and until when nothing changes its plan.
#[derive(Debug, Default)]
pub(super) struct Idle {
    last: Option<(Inputs, Instant)>,
    /// Passes on the same inputs decide the same until then (`None`: the next scan).
    stands_until: Option<Instant>,
}

/// Why a pass runs rather than being skipped as idle (`Idle::cause`), counted per cluster
/// (`fleetscaler_passes_total{cause}`): on an idle fleet, what keeps passes running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cause {
    /// No full pass yet, or the last look found the cache untrusted.
    First,
    /// The last plan waits on something undated (a pending pod, a node coming).
    Unsettled,
    /// A cached object changed.
    Changed,
    /// The runner learned something a pass reads (a removal ended, a template read).
    Learned,
    /// fleet.toml's settings for the cluster changed.
    Settings,
    /// The fleet's policy for the cluster changed (a hold, a shared backoff).
    Policy,
    /// A timer the last plan dated is due (an unneeded node's, a cooldown's end).
    Due,
    /// `REFRESH` after the last full pass.
    Refresh,
    /// The cache cannot be trusted: the pass only says why it does not act.
    Untrusted,
}

impl Cause {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Cause::First => "first",
            Cause::Unsettled => "unsettled",
            Cause::Changed => "changed",
            Cause::Learned => "learned",
            Cause::Settings => "settings",
            Cause::Policy => "policy",
            Cause::Due => "due",
            Cause::Refresh => "refresh",
            Cause::Untrusted => "untrusted",
        }
    }
}

impl Idle {
    /// Why the pass due at `now` must run; `None` when it would decide as the last one did
    /// and is skipped.
    pub(super) fn cause(&self, inputs: &Inputs, now: Instant) -> Option<Cause> {
        let Some((last, at)) = &self.last else {
            return Some(Cause::First);
        };
        // What changed is named before what waits: a busy cluster's passes are told apart
        // from its scans.
        let cause = if last.cache != inputs.cache {
            Cause::Changed
        } else if last.learned != inputs.learned {
            Cause::Learned
        } else if last.spec != inputs.spec {
            Cause::Settings
        } else if last.policy != inputs.policy {
            Cause::Policy
        } else if let Some(until) = self.stands_until {
            if now >= *at + REFRESH {
                Cause::Refresh
            } else if now >= until {
                Cause::Due
            } else {
                return None;
            }
        } else {
            Cause::Unsettled
        };
        Some(cause)
    }

    /// A full pass ran on `inputs` at `now` (`clock` on the wall), and `unsettled` says
    /// what in its plan waits on the clock (if anything).
    pub(super) fn passed(
        &mut self,
        inputs: Inputs,
        (now, clock): (Instant, Timestamp),
        unsettled: Option<&Unsettled>,
    ) {
        self.stands_until = match unsettled {
            None => Some(now + REFRESH),
            Some(Unsettled { due: Some(due), .. }) => {
                let wait = due.duration_since(clock);
                Some(now + Duration::try_from(wait).unwrap_or_default())
            }
            Some(Unsettled { due: None, .. }) => None,
        };
        self.last = Some((inputs, now));
    }

    /// A pass was skipped for an untrusted cache, or not run: the next one runs in full.
    pub(super) fn forget(&mut self) {
        self.last = None;
    }
}

/// What in `plan` waits on the clock, and when it is due if the plan dates it; `None` when
/// the plan would stand until an input changes.
pub(super) fn unsettled(plan: &Plan, scale_down_enabled: bool) -> Option<Unsettled> {
    if let Some(why) = undated(plan, scale_down_enabled) {
        return Some(Unsettled { why, due: None });
    }
    let unneeded = plan.unneeded.iter().map(|u| u.removable_at).min();
    let paused = plan.scale_down_paused_until.filter(|_| scale_down_enabled);
    let due = unneeded.into_iter().chain(paused).min()?;
    let why = match (plan.unneeded.len(), paused) {
        (0, _) => format!("scale-down paused until {due}"),
        (n, _) => format!("{n} unneeded node(s) timing, the first due at {due}"),
    };
    Some(Unsettled {
        why,
        due: Some(due),
    })
}

/// What waits on the clock without a date in the plan: every scan passes while it does.
fn undated(plan: &Plan, scale_down_enabled: bool) -> Option<String> {
    let actions = plan.scale_up.len()
        + plan.scale_down.len()
        + plan.scale_down_held.len()
        + plan.fix_target_size.len()
        + plan.delete_failed_machines.len()
        + plan.delete_unregistered.len();
    if actions > 0 {
        return Some(format!("{actions} action(s) in the last pass"));
    }
    if !plan.pending_pods.is_empty() {
        return Some(format!("{} pending pod(s)", plan.pending_pods.len()));
    }
    if let Some(r) = plan
        .provisioning_requests
        .iter()
        .find(|r| !r.decision.is_at_rest())
    {
        return Some(format!(
            "ProvisioningRequest {}: {:?}",
            r.request, r.decision
        ));
    }
    if let Some(why) = health_in_motion(plan) {
        return Some(why);
    }
    let held = plan.fleet_policy.scale_down_hold.is_some();
    if let (Some(paused), true, None, false) = (
        &plan.scale_down_paused,
        scale_down_enabled,
        plan.scale_down_paused_until,
        held,
    ) {
        return Some(format!("scale-down paused: {paused}"));
    }
    plan.not_removable
        .iter()
        .find(|n| !EVENT_DRIVEN.contains(&n.code))
        .map(|n| format!("node {} kept for {}", n.node, n.code.as_str()))
}

/// Nodes or machines still coming, unready or leaving, backoffs: each has a deadline.
fn health_in_motion(plan: &Plan) -> Option<String> {
    let c = &plan.health.cluster;
    if !c.healthy
        || c.unready + c.not_started + c.unregistered + c.long_unregistered + c.deleting > 0
    {
        return Some("nodes or machines not ready yet, or leaving".into());
    }
    plan.health
        .node_groups
        .iter()
        .find(|g| {
            !g.healthy
                || g.backoff_until.is_some()
                || g.fleet_backoff.is_some()
                || g.scale_up_in_flight.is_some()
        })
        .map(|g| format!("node group {} backed off, unhealthy or growing", g.id))
}

/// Why a node stays that only an event can change (a pod, a budget, an annotation, a
/// group's size): no timer of the engine's runs out on them.
const EVENT_DRIVEN: [ReasonCode; 13] = [
    ReasonCode::ScaleDownDisabledAnnotation,
    ReasonCode::NotAutoscaled,
    ReasonCode::NotUnderutilized,
    ReasonCode::NoPlaceToMovePods,
    ReasonCode::NotReplicated,
    ReasonCode::ControllerNotFound,
    ReasonCode::LocalStorageRequested,
    ReasonCode::NotSafeToEvictAnnotation,
    ReasonCode::NotEnoughPdb,
    ReasonCode::NodeGroupMinSizeReached,
    ReasonCode::MinimalResourceLimitExceeded,
    ReasonCode::MinReplicasReached,
    ReasonCode::NotSimulated,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClusterConfig;
    use crate::engine::fixtures::{group_node, machineset, node, pod, snapshot};
    use crate::engine::settings::{Settings, SettingsPatch};
    use crate::engine::state::EngineState;
    use crate::model::ClusterSnapshot;
    use jiff::Timestamp;

    fn plan_of(s: &ClusterSnapshot) -> Plan {
        let now: Timestamp = "2026-11-27T10:00:00Z".parse().unwrap();
        crate::engine::run_once(s, &mut EngineState::default(), &Settings::default(), now)
    }

    /// One 4-CPU worker at its group's minimum, busy: nothing waits on the clock.
    fn busy() -> Vec<serde_json::Value> {
        let mut items = vec![machineset("w", 1, 5, 1).json()];
        items.extend(group_node("n1", "w", node("n1").cpu("4")));
        items.push(pod("load").cpu("3").on("n1").json());
        items
    }

    #[test]
    fn a_busy_cluster_at_rest_is_settled() {
        let plan = plan_of(&snapshot(busy()));
        assert_eq!(unsettled(&plan, true), None, "{plan:#?}");
    }

    #[test]
    fn what_waits_on_the_clock_keeps_the_cluster_unsettled() {
        let mut pending = busy();
        pending.push(pod("big").cpu("3").unschedulable().json());
        let why = unsettled(&plan_of(&snapshot(pending)), true).unwrap();
        assert!(
            why.why.contains("action") || why.why.contains("pending"),
            "{why:?}"
        );
        assert_eq!(why.due, None, "undated: every scan passes");

        // An idle node above the group's minimum: unneeded, its timer running.
        let mut idle = vec![machineset("w", 1, 5, 2).json()];
        idle.extend(group_node("n1", "w", node("n1").cpu("4")));
        idle.extend(group_node("n2", "w", node("n2").cpu("4")));
        idle.push(pod("load").cpu("3").on("n1").json());
        let why = unsettled(&plan_of(&snapshot(idle)), true).unwrap();
        assert!(why.why.contains("unneeded"), "{why:?}");
        let due: Timestamp = "2026-11-27T10:10:00Z".parse().unwrap();
        assert_eq!(
            why.due,
            Some(due),
            "removable after scale_down_unneeded_time"
        );

        // A machine asked for that has no node yet: its provisioning deadline runs.
        let mut growing = busy();
        growing[0] = machineset("w", 1, 5, 2).json();
        let why = unsettled(&plan_of(&snapshot(growing)), true).unwrap();
        assert!(
            why.why.contains("not ready yet") || why.why.contains("growing"),
            "{why:?}"
        );
    }

    fn inputs(cache: u64) -> Inputs {
        Inputs {
            cache,
            learned: 0,
            spec: Arc::new(RunnerSpec {
                cluster: ClusterConfig::named("c"),
                defaults: SettingsPatch::default(),
                dry_run: false,
            }),
            policy: FleetPolicy::none(),
        }
    }

    fn clock() -> Timestamp {
        "2026-11-27T10:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_pass_is_skipped_only_on_the_same_inputs_of_a_settled_cluster() {
        let t0 = Instant::now();
        let mut idle = Idle::default();
        let later = t0 + Duration::from_secs(10);
        assert_eq!(idle.cause(&inputs(1), t0), Some(Cause::First));
        idle.passed(inputs(1), (t0, clock()), None);
        assert_eq!(idle.cause(&inputs(1), later), None, "skipped");
        assert_eq!(idle.cause(&inputs(2), later), Some(Cause::Changed));
        let mut other = inputs(1);
        other.learned = 1;
        assert_eq!(idle.cause(&other, t0), Some(Cause::Learned));
        other = inputs(1);
        Arc::make_mut(&mut other.spec).dry_run = true;
        assert_eq!(idle.cause(&other, t0), Some(Cause::Settings));
        other = inputs(1);
        other.policy.scale_down_hold = Some("a fleet-wide hold".into());
        assert_eq!(idle.cause(&other, t0), Some(Cause::Policy));
        assert_eq!(idle.cause(&inputs(1), t0 + REFRESH), Some(Cause::Refresh));
        let pending = Unsettled {
            why: "1 pending pod(s)".into(),
            due: None,
        };
        idle.passed(inputs(1), (t0, clock()), Some(&pending));
        assert_eq!(idle.cause(&inputs(1), later), Some(Cause::Unsettled));
        assert_eq!(
            idle.cause(&inputs(2), later),
            Some(Cause::Changed),
            "a change is named before what waits"
        );
        idle.passed(inputs(1), (t0, clock()), None);
        idle.forget();
        assert_eq!(
            idle.cause(&inputs(1), t0),
            Some(Cause::First),
            "after a skipped pass"
        );
    }

    #[test]
    fn a_dated_timer_skips_passes_until_it_is_due() {
        let t0 = Instant::now();
        let mut idle = Idle::default();
        let timing = Unsettled {
            why: "1 unneeded node(s) timing".into(),
            due: Some("2026-11-27T10:02:00Z".parse().unwrap()),
        };
        idle.passed(inputs(1), (t0, clock()), Some(&timing));
        assert_eq!(idle.cause(&inputs(1), t0 + Duration::from_secs(119)), None);
        assert_eq!(
            idle.cause(&inputs(1), t0 + Duration::from_secs(120)),
            Some(Cause::Due)
        );
        assert_eq!(
            idle.cause(&inputs(2), t0 + Duration::from_secs(1)),
            Some(Cause::Changed)
        );
        let overdue = Unsettled {
            due: Some("2026-11-27T09:59:00Z".parse().unwrap()),
            ..timing
        };
        idle.passed(inputs(1), (t0, clock()), Some(&overdue));
        assert_eq!(idle.cause(&inputs(1), t0), Some(Cause::Due), "already due");
    }

    /// A cooldown after a scale-up is dated by the plan; a fleet's hold is an input.
    #[test]
    fn a_cooldown_is_dated_and_a_fleet_hold_is_no_timer() {
        let mut plan = plan_of(&snapshot(busy()));
        let until: Timestamp = "2026-11-27T10:10:00Z".parse().unwrap();
        plan.scale_down_paused = Some("scale-up at ...".into());
        plan.scale_down_paused_until = Some(until);
        let why = unsettled(&plan, true).unwrap();
        assert_eq!(why.due, Some(until), "{why:?}");
        assert_eq!(unsettled(&plan, false), None, "scale-down disabled");
        plan.scale_down_paused_until = None;
        assert_eq!(unsettled(&plan, true).unwrap().due, None, "undated pause");
        plan.fleet_policy.scale_down_hold = Some("fleet degraded".into());
        assert_eq!(unsettled(&plan, true), None, "held: the policy is an input");
    }
}
