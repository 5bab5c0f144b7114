//! Running totals of what one cluster's runner did, kept in its report (which outlives
//! runner restarts), for the hub's Prometheus endpoint. Gauges are not kept here: they are
//! read off the report's latest pass when scraped.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::error::Category;
use super::outcome::{Action, Entry, MachineDeletionKind, Outcome};
use crate::engine::plan::Plan;

/// Upper bounds (seconds) of the duration buckets: a pass takes milliseconds on a small
/// cluster and seconds on a large one; writes bounded by the request timeout.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Upper bounds (seconds) for the time from a pod seen unschedulable to its scale-up written.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// A Prometheus histogram: counts per upper bound (not cumulative), a sum and a count.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    pub bounds: &'static [f64],
    /// One more than `bounds`: the last counts observations above every bound.
    counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, value: f64) {
        let slot = self
            .bounds
            .iter()
            .position(|b| value <= *b)
            .unwrap_or(self.bounds.len());
        if let Some(c) = self.counts.get_mut(slot) {
            *c += 1;
        }
        self.sum += value;
        self.count += 1;
    }

    /// `(upper bound, observations at or below it)` for each bound, as Prometheus wants.
    pub fn cumulative(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        self.bounds
            .iter()
            .zip(self.counts.iter())
            .scan(0, |acc, (b, c)| {
                *acc += c;
                Some((*b, *acc))
            })
    }
}

/// Upstream's `errors_total{type}` values (`utils/errors`), each served from the start.
pub const ERROR_TYPES: [&str; 7] = [
    "cloudProviderError",
    "apiCallError",
    "internalError",
    "transientError",
    "configurationError",
    "nodeGroupDoesNotExistError",
    "unexpectedScaleDownStateError",
];
/// Upstream's `failed_scale_ups_total{reason}` values.
pub const FAILED_SCALE_UP_REASONS: [&str; 3] = ["cloudProviderError", "apiCallError", "timeout"];
/// Upstream's `scaled_down_nodes_total{reason}` values.
pub const SCALE_DOWN_REASONS: [&str; 3] = ["underutilized", "empty", "unready"];

/// What the runner did since the hub started watching this cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct Counters {
    /// Nodes asked for by scale-ups that were written.
    pub scaled_up_nodes: u64,
    /// Nodes removed, by upstream's reason: `underutilized`, `empty` or `unready`.
    pub scaled_down_nodes: BTreeMap<&'static str, u64>,
    /// Scale-ups that failed, by upstream's reason: `cloudProviderError` (the Machine API,
    /// upstream's cloud provider, refused the new size) or `timeout` (nodes never came).
    pub failed_scale_ups: BTreeMap<&'static str, u64>,
    /// Pods evicted from nodes being removed.
    pub evicted_pods: u64,
    /// Pods whose eviction was refused for good or until the drain gave up.
    pub failed_evictions: u64,
    /// Scale events a cores or memory limit held back, by `(direction, reason)` as upstream's
    /// `skipped_scale_events_count` labels them.
    pub skipped_scale_events: BTreeMap<(&'static str, &'static str), u64>,
    /// Machines deleted because they failed or never registered.
    pub deleted_machines: BTreeMap<&'static str, u64>,
    /// Failed calls and actions, by upstream's error type.
    pub errors: BTreeMap<&'static str, u64>,
    /// Durations by upstream's `function` label: `main` (the pass), `autoscaling` (the engine).
    pub durations: BTreeMap<&'static str, Histogram>,
    pub scale_up_latency: Histogram,
    /// How long passes waited for a turn on the fleet's pool.
    pub pass_queue: Histogram,
    /// When each activity (`main`, `scaleUp`, `scaleDown`) last happened.
    pub last_activity: BTreeMap<&'static str, Timestamp>,
    /// Passes not run because nothing changed since a pass that left the cluster settled.
    pub idle_skips: u64,
    /// Passes run, by why they ran (`runner::idle::Cause`).
    pub passes_by_cause: BTreeMap<&'static str, u64>,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            scaled_up_nodes: 0,
            scaled_down_nodes: BTreeMap::new(),
            failed_scale_ups: BTreeMap::new(),
            evicted_pods: 0,
            failed_evictions: 0,
            skipped_scale_events: BTreeMap::new(),
            deleted_machines: BTreeMap::new(),
            errors: BTreeMap::new(),
            durations: BTreeMap::new(),
            scale_up_latency: Histogram::new(&LATENCY_BUCKETS),
            pass_queue: Histogram::new(&DURATION_BUCKETS),
            last_activity: BTreeMap::new(),
            idle_skips: 0,
            passes_by_cause: BTreeMap::new(),
        }
    }
}

impl Counters {
    pub fn observe_duration(&mut self, function: &'static str, seconds: f64) {
        self.durations
            .entry(function)
            .or_insert_with(|| Histogram::new(&DURATION_BUCKETS))
            .observe(seconds);
    }

    /// Counts what a pass's plan says happened: scale-ups found timed out (upstream's
    /// `failed_scale_ups_total{reason="timeout"}`) and scale events a limit held back.
    pub fn record_plan(&mut self, plan: &Plan) {
        if !plan.timed_out.is_empty() {
            *self.failed_scale_ups.entry("timeout").or_default() += plan.timed_out.len() as u64;
        }
        let s = &plan.skipped_scale_events;
        for (direction, by) in [("up", s.up), ("down", s.down)] {
            for (reason, n) in [
                ("CpuResourceLimit", by.cpu),
                ("MemoryResourceLimit", by.memory),
            ] {
                if n > 0 {
                    *self
                        .skipped_scale_events
                        .entry((direction, reason))
                        .or_default() += n;
                }
            }
        }
    }

    pub fn record_pass_cause(&mut self, cause: &'static str) {
        *self.passes_by_cause.entry(cause).or_default() += 1;
    }

    pub fn record_error(&mut self, category: Category) {
        *self.errors.entry(error_type(category)).or_default() += 1;
    }

    /// Counts one action's outcome.
    pub fn record_entry(&mut self, entry: &Entry, now: Timestamp) {
        match (&entry.action, &entry.outcome) {
            (Action::ScaleUp { from, to, .. }, Outcome::Done { .. }) => {
                self.scaled_up_nodes += to.saturating_sub(*from);
                self.last_activity.insert("scaleUp", now);
            }
            (Action::ScaleUp { .. }, Outcome::Failed { .. }) => {
                *self
                    .failed_scale_ups
                    .entry("cloudProviderError")
                    .or_default() += 1;
            }
            (
                Action::RemoveNode {
                    empty,
                    unready,
                    evicted,
                    not_evicted,
                    ..
                },
                outcome,
            ) => {
                self.evicted_pods += evicted.len() as u64;
                self.failed_evictions += not_evicted.len() as u64;
                if matches!(outcome, Outcome::Done { .. }) {
                    // Upstream's `nodeScaleDownReason`: readiness first, then a drain.
                    let why = match (*unready, *empty) {
                        (true, _) => "unready",
                        (false, true) => "empty",
                        (false, false) => "underutilized",
                    };
                    *self.scaled_down_nodes.entry(why).or_default() += 1;
                    self.last_activity.insert("scaleDown", now);
                }
            }
            (Action::DeleteMachine { why, .. }, Outcome::Done { .. }) => {
                let why = match why {
                    MachineDeletionKind::Failed => "failed",
                    MachineDeletionKind::Unregistered => "unregistered",
                };
                *self.deleted_machines.entry(why).or_default() += 1;
            }
            _ => {}
        }
        if let Outcome::Failed { category, .. } = &entry.outcome {
            self.record_error(*category);
        }
    }
}

/// Upstream's `errors_total{type}` values for an error category.
fn error_type(category: Category) -> &'static str {
    match category {
        Category::Timeout | Category::Unavailable | Category::TooManyRequests => "transientError",
        Category::Forbidden | Category::Tls => "configurationError",
        Category::NotFound => "nodeGroupDoesNotExistError",
        Category::Conflict | Category::Invalid => "apiCallError",
        Category::Other => "internalError",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::nodegroups::NodeGroupId;
    use crate::model::pod::PodId;
    use crate::model::{MachineApiGroup, ObjectKey, ScalableKind};

    fn group() -> NodeGroupId {
        NodeGroupId::new(
            MachineApiGroup::OpenShift,
            ScalableKind::MachineSet,
            &ObjectKey::new("ns", "a"),
        )
    }

    #[test]
    fn a_histogram_counts_each_value_in_the_first_bucket_that_holds_it() {
        let mut h = Histogram::new(&[1.0, 2.0]);
        for v in [0.5, 1.0, 1.5, 9.0] {
            h.observe(v);
        }
        assert_eq!(h.cumulative().collect::<Vec<_>>(), [(1.0, 2), (2.0, 3)]);
        assert_eq!(h.count, 4);
        assert!((h.sum - 12.0).abs() < 1e-9);
    }

    #[test]
    fn written_scale_ups_count_their_nodes_and_failures_their_category() {
        let mut c = Counters::default();
        let up = Action::ScaleUp {
            group: group(),
            from: 2,
            to: 5,
        };
        c.record_entry(&Entry::done(up.clone(), "ok"), Timestamp::UNIX_EPOCH);
        c.record_entry(
            &Entry::failed(up.clone(), "slow", Category::Timeout),
            Timestamp::UNIX_EPOCH,
        );
        c.record_entry(&Entry::skipped(up, "dry run"), Timestamp::UNIX_EPOCH);
        assert_eq!(c.scaled_up_nodes, 3);
        // A size the Machine API refused is upstream's cloud provider failing.
        assert_eq!(c.failed_scale_ups.get("cloudProviderError"), Some(&1));
        assert_eq!(c.errors.get("transientError"), Some(&1));
        assert!(c.last_activity.contains_key("scaleUp"));
    }

    #[test]
    fn removals_count_evictions_even_when_they_fail_later() {
        let mut c = Counters::default();
        let pod = PodId {
            namespace: "ns".into(),
            name: "p".into(),
        };
        let remove = |empty| Action::RemoveNode {
            group: group(),
            node: "n1".into(),
            empty,
            unready: false,
            evicted: vec![pod.clone(), pod.clone()],
            not_evicted: Vec::new(),
        };
        c.record_entry(&Entry::done(remove(false), "gone"), Timestamp::UNIX_EPOCH);
        c.record_entry(
            &Entry::failed(remove(false), "pdb", Category::TooManyRequests),
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(c.evicted_pods, 4);
        assert_eq!(c.scaled_down_nodes.get("underutilized"), Some(&1));
        assert_eq!(c.scaled_down_nodes.get("empty"), None);
        let unready = Action::RemoveNode {
            group: group(),
            node: "n2".into(),
            empty: true,
            unready: true,
            evicted: Vec::new(),
            not_evicted: vec![pod.clone()],
        };
        c.record_entry(&Entry::done(unready, "gone"), Timestamp::UNIX_EPOCH);
        assert_eq!(
            c.scaled_down_nodes.get("unready"),
            Some(&1),
            "readiness first"
        );
        assert_eq!(c.failed_evictions, 1);
    }

    #[test]
    fn a_plan_counts_timed_out_scale_ups_and_events_a_limit_held_back() {
        use crate::engine::limits::SkippedByLimit;
        use crate::engine::plan::SkippedScaleEvents;
        let mut c = Counters::default();
        let snapshot = crate::engine::fixtures::snapshot(Vec::new());
        let mut plan = crate::engine::run_once(
            &snapshot,
            &mut crate::engine::EngineState::default(),
            &crate::engine::Settings::default(),
            Timestamp::UNIX_EPOCH,
        );
        plan.skipped_scale_events = SkippedScaleEvents {
            up: SkippedByLimit { cpu: 2, memory: 0 },
            down: SkippedByLimit { cpu: 0, memory: 1 },
        };
        c.record_plan(&plan);
        c.record_plan(&plan);
        assert_eq!(
            c.skipped_scale_events.get(&("up", "CpuResourceLimit")),
            Some(&4)
        );
        assert_eq!(
            c.skipped_scale_events.get(&("down", "MemoryResourceLimit")),
            Some(&2)
        );
        assert_eq!(
            c.skipped_scale_events.get(&("up", "MemoryResourceLimit")),
            None
        );
        assert_eq!(c.failed_scale_ups.get("timeout"), None);
    }
}
