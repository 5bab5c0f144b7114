//! The fleet's health: each cluster classed from its report, then the fleet judged against
//! `[fleet]` of fleet.toml. A degraded fleet holds back scale-down in every cluster (when
//! configured), and the API, the dashboard and `/metrics` say so and why.

use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::cluster::ClusterName;
use crate::cluster::fleet_inputs::ScaleDownHold;
use crate::cluster::report::{ClusterReport, Phase};
use crate::config::FleetHealthConfig;

/// A cluster as the fleet counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClusterState {
    /// Running, and its last pass found it healthy.
    Healthy,
    /// Running, but too many unready nodes, or a pass could not trust its data.
    Unhealthy,
    /// Its runner failed and is waiting to be restarted.
    Failed,
    /// Its configuration cannot be used (fleet.toml or its kubeconfig): a mistake to fix, not
    /// an outage, so it does not count against the fleet.
    Misconfigured,
    /// Connecting or listing before its first pass.
    Starting,
    /// Disabled, removed or shutting down: not counted.
    Stopped,
}

/// The longest a cluster may take to connect and list everything before it counts as failed.
pub const STARTUP_LIMIT: Duration = Duration::from_secs(180);

impl ClusterState {
    pub const ALL: [ClusterState; 6] = [
        ClusterState::Healthy,
        ClusterState::Unhealthy,
        ClusterState::Failed,
        ClusterState::Misconfigured,
        ClusterState::Starting,
        ClusterState::Stopped,
    ];

    pub fn of(r: &ClusterReport) -> Self {
        Self::at(r, Timestamp::now())
    }

    /// A cluster still connecting or syncing past `STARTUP_LIMIT` has failed to start: it
    /// counts against the fleet instead of looking like a cluster that is about to be fine.
    pub fn at(r: &ClusterReport, now: Timestamp) -> Self {
        Self::judged(r, now).0
    }

    /// The state, with what a person needs to know when it is not healthy (served by the
    /// API, so that clients never judge for themselves).
    pub fn judged(r: &ClusterReport, now: Timestamp) -> (Self, Option<String>) {
        let message = || r.message.clone().unwrap_or_else(|| r.phase.as_str().into());
        match r.phase {
            Phase::Connecting | Phase::Syncing
                if Duration::try_from(now.duration_since(r.since))
                    .is_ok_and(|d| d > STARTUP_LIMIT) =>
            {
                let minutes = STARTUP_LIMIT.as_secs() / 60;
                let why = format!("not started after {minutes} minutes: {}", message());
                (ClusterState::Failed, Some(why))
            }
            Phase::Connecting | Phase::Syncing => (ClusterState::Starting, Some(message())),
            Phase::Failed => (ClusterState::Failed, r.message.clone()),
            Phase::Misconfigured => (ClusterState::Misconfigured, r.message.clone()),
            Phase::Stopped => (ClusterState::Stopped, r.message.clone()),
            Phase::Running => match &r.last_pass {
                None => (
                    ClusterState::Starting,
                    Some(
                        r.message
                            .clone()
                            .unwrap_or_else(|| "waiting for its first pass".into()),
                    ),
                ),
                Some(pass) if pass.skipped.is_some() => {
                    (ClusterState::Unhealthy, pass.skipped.clone())
                }
                Some(_) if r.nodes_healthy => (ClusterState::Healthy, None),
                Some(_) => (ClusterState::Unhealthy, r.nodes_health_reason.clone()),
            },
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ClusterState::Healthy => "healthy",
            ClusterState::Unhealthy => "unhealthy",
            ClusterState::Failed => "failed",
            ClusterState::Misconfigured => "misconfigured",
            ClusterState::Starting => "starting",
            ClusterState::Stopped => "stopped",
        }
    }

    fn counts_against(self) -> bool {
        matches!(self, ClusterState::Unhealthy | ClusterState::Failed)
    }
}

/// What the fleet's judgement needs of one cluster: read while the report is borrowed, so
/// the every-second assessment copies no history, actions or plans.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Glance {
    pub name: ClusterName,
    pub state: ClusterState,
    pub nodes: u64,
    pub unready_nodes: u64,
}

impl Glance {
    pub fn of(r: &ClusterReport) -> Self {
        Glance {
            name: r.name.clone(),
            state: ClusterState::of(r),
            nodes: r.nodes,
            unready_nodes: r.unready_nodes,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FleetState {
    Healthy,
    Degraded,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetHealth {
    pub state: FleetState,
    /// Why, in a sentence, naming the clusters at fault.
    pub reason: String,
    /// Clusters counted: every cluster not stopped.
    pub clusters: usize,
    pub unhealthy_clusters: usize,
    pub starting_clusters: usize,
    pub nodes: u64,
    pub unready_nodes: u64,
    /// Unready nodes over all nodes of the fleet (0 without nodes).
    pub unready_ratio: f64,
    /// True while scale-down is held back in every cluster.
    pub scale_down_paused: bool,
    /// When the state last changed.
    pub since: Timestamp,
    /// When this was worked out (the hub does so every second).
    pub at: Timestamp,
}

impl FleetHealth {
    pub fn starting(now: Timestamp) -> Self {
        FleetHealth {
            state: FleetState::Healthy,
            reason: "no cluster has reported yet".into(),
            clusters: 0,
            unhealthy_clusters: 0,
            starting_clusters: 0,
            nodes: 0,
            unready_nodes: 0,
            unready_ratio: 0.0,
            scale_down_paused: false,
            since: now,
            at: now,
        }
    }

    /// Why scale-down is held back in every cluster, while it is.
    pub fn hold(&self) -> Option<ScaleDownHold> {
        self.scale_down_paused
            .then(|| ScaleDownHold::FleetDegraded {
                why: self.reason.clone(),
            })
    }
}

/// Judges the fleet from a glance at each of its clusters.
pub fn assess(
    clusters: &[Glance],
    config: &FleetHealthConfig,
    previous: &FleetHealth,
    now: Timestamp,
) -> FleetHealth {
    let counted: Vec<&Glance> = clusters
        .iter()
        .filter(|g| g.state != ClusterState::Stopped)
        .collect();
    let at_fault: Vec<String> = counted
        .iter()
        .filter(|g| g.state.counts_against())
        .map(|g| format!("{} ({})", g.name, g.state.as_str()))
        .collect();
    let nodes: u64 = counted.iter().map(|g| g.nodes).sum();
    let unready: u64 = counted.iter().map(|g| g.unready_nodes).sum();
    let unready_ratio = if nodes == 0 {
        0.0
    } else {
        unready as f64 / nodes as f64
    };
    let breach = breach(config, counted.len(), at_fault.len(), unready_ratio);
    let state = match breach {
        Some(_) => FleetState::Degraded,
        None => FleetState::Healthy,
    };
    let reason = describe(breach, counted.len(), &at_fault);
    FleetHealth {
        state,
        reason,
        clusters: counted.len(),
        unhealthy_clusters: at_fault.len(),
        starting_clusters: counted
            .iter()
            .filter(|g| g.state == ClusterState::Starting)
            .count(),
        nodes,
        unready_nodes: unready,
        unready_ratio,
        scale_down_paused: state == FleetState::Degraded && config.pause_scale_down_when_degraded,
        since: if state == previous.state {
            previous.since
        } else {
            now
        },
        at: now,
    }
}

/// The first threshold crossed, said as the part of the reason that names it.
fn breach(
    config: &FleetHealthConfig,
    clusters: usize,
    unhealthy: usize,
    unready_ratio: f64,
) -> Option<String> {
    if let Some(max) = config.max_unhealthy_clusters
        && unhealthy > max as usize
    {
        return Some(format!("more than {max} clusters unhealthy"));
    }
    let pct = config.max_unhealthy_percentage;
    if clusters > 0 && unhealthy as f64 * 100.0 > pct * clusters as f64 {
        return Some(format!("more than {pct}% of clusters unhealthy"));
    }
    if let Some(max) = config.max_unready_nodes_percentage
        && unready_ratio * 100.0 > max
    {
        return Some(format!(
            "{:.1}% of the fleet's nodes unready, more than {max}%",
            unready_ratio * 100.0
        ));
    }
    None
}

fn describe(breach: Option<String>, clusters: usize, at_fault: &[String]) -> String {
    let unhealthy = if at_fault.is_empty() {
        format!("all {clusters} clusters healthy or starting")
    } else {
        format!(
            "{} of {clusters} clusters unhealthy: {}",
            at_fault.len(),
            at_fault.join(", ")
        )
    };
    match breach {
        Some(b) => format!("{b}; {unhealthy}"),
        None => unhealthy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::report::PassSummary;

    fn report(name: &str, phase: Phase, healthy: bool, nodes: u64, unready: u64) -> ClusterReport {
        // Now: a cluster starting since long ago would count as failed.
        let now = Timestamp::now();
        let mut r = ClusterReport::new(ClusterName::new(name), false, now);
        r.set_phase(phase, None, now);
        r.nodes_healthy = healthy;
        r.nodes = nodes;
        r.unready_nodes = unready;
        r.last_pass = Some(PassSummary {
            at: now,
            took_ms: 1.0,
            engine_ms: 1.0,
            queued_ms: 0.0,
            scale_ups: 0,
            scale_downs: 0,
            skipped: None,
            waits_on: None,
            cause: "first".into(),
        });
        r
    }

    fn glances(reports: &[ClusterReport]) -> Vec<Glance> {
        reports.iter().map(Glance::of).collect()
    }

    fn judge(reports: &[ClusterReport], config: &FleetHealthConfig) -> FleetHealth {
        let start = FleetHealth::starting(Timestamp::UNIX_EPOCH);
        assess(&glances(reports), config, &start, Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn more_than_the_percentage_of_unhealthy_clusters_degrades_the_fleet() {
        let config = FleetHealthConfig::default();
        let reports = [
            report("a", Phase::Running, false, 10, 6),
            report("b", Phase::Failed, false, 0, 0),
            report("c", Phase::Running, true, 10, 0),
        ];
        let h = judge(&reports, &config);
        assert_eq!(h.state, FleetState::Degraded);
        assert!(h.scale_down_paused);
        assert_eq!(h.unhealthy_clusters, 2);
        assert!(
            h.reason.contains("a (unhealthy), b (failed)"),
            "{}",
            h.reason
        );
        assert!(
            h.hold()
                .is_some_and(|r| r.to_string().contains("more than 50% of clusters"))
        );
        // Exactly half is not more than half.
        let h = judge(&reports[..1], &config);
        assert_eq!(h.state, FleetState::Degraded);
        let two = [reports[0].clone(), reports[2].clone()];
        assert_eq!(judge(&two, &config).state, FleetState::Healthy);
    }

    /// Issue 25, point 3: two of three clusters with a mistyped context paused scale-down in
    /// the third, healthy one.
    #[test]
    fn misconfigured_clusters_never_degrade_it() {
        let config = FleetHealthConfig::default();
        let reports = [
            report("a", Phase::Misconfigured, false, 0, 0),
            report("b", Phase::Misconfigured, false, 0, 0),
            report("c", Phase::Running, true, 3, 0),
        ];
        let h = judge(&reports, &config);
        assert_eq!(h.state, FleetState::Healthy, "{}", h.reason);
        assert!(!h.scale_down_paused);
        assert_eq!(ClusterState::of(&reports[0]).as_str(), "misconfigured");
    }

    #[test]
    fn starting_and_stopped_clusters_never_degrade_it() {
        let config = FleetHealthConfig::default();
        let reports = [
            report("a", Phase::Syncing, false, 0, 0),
            report("b", Phase::Stopped, false, 0, 0),
            report("c", Phase::Running, true, 3, 0),
        ];
        let h = judge(&reports, &config);
        assert_eq!(h.state, FleetState::Healthy);
        assert_eq!((h.clusters, h.starting_clusters), (2, 1));
        assert!(h.hold().is_none());
    }

    #[test]
    fn a_count_or_an_unready_share_can_degrade_it_and_pausing_is_optional() {
        let healthy = || report("ok", Phase::Running, true, 10, 0);
        let reports = [
            report("a", Phase::Failed, false, 0, 0),
            healthy(),
            healthy(),
            healthy(),
        ];
        let config = FleetHealthConfig {
            max_unhealthy_clusters: Some(0),
            pause_scale_down_when_degraded: false,
            ..FleetHealthConfig::default()
        };
        let h = judge(&reports, &config);
        assert_eq!(h.state, FleetState::Degraded);
        assert!(!h.scale_down_paused);
        let unready = [report("a", Phase::Running, true, 10, 4), healthy()];
        let config = FleetHealthConfig {
            max_unready_nodes_percentage: Some(15.0),
            ..FleetHealthConfig::default()
        };
        let h = judge(&unready, &config);
        assert_eq!(h.state, FleetState::Degraded);
        assert!((h.unready_ratio - 0.2).abs() < 1e-9);
        assert!(h.reason.starts_with("20.0% of the fleet's nodes unready"));
    }

    /// Seed of issue 12: a runner that never got past connecting looked like one about to
    /// be fine, and the fleet read healthy.
    #[test]
    fn a_cluster_that_cannot_start_counts_as_failed_and_says_since_when() {
        let mut r = report("a", Phase::Connecting, true, 1, 0);
        r.message = Some("listing pods".into());
        let t = r.since;
        let later = |s: i64| t.checked_add(jiff::SignedDuration::from_secs(s)).unwrap();
        assert_eq!(
            ClusterState::judged(&r, later(10)),
            (ClusterState::Starting, Some("listing pods".into()))
        );
        let limit = STARTUP_LIMIT.as_secs() as i64;
        assert_eq!(
            ClusterState::judged(&r, later(limit + 1)),
            (
                ClusterState::Failed,
                Some("not started after 3 minutes: listing pods".into())
            )
        );
        assert!(ClusterState::Failed.counts_against());
    }

    #[test]
    fn a_skipped_pass_makes_a_cluster_unhealthy_and_since_moves_only_on_change() {
        let mut r = report("a", Phase::Running, true, 1, 0);
        assert_eq!(ClusterState::of(&r), ClusterState::Healthy);
        if let Some(p) = r.last_pass.as_mut() {
            p.skipped = Some("stale".into());
        }
        assert_eq!(
            ClusterState::judged(&r, Timestamp::now()),
            (ClusterState::Unhealthy, Some("stale".into()))
        );
        let config = FleetHealthConfig::default();
        let first = judge(std::slice::from_ref(&r), &config);
        let later = Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(5);
        let again = assess(&glances(std::slice::from_ref(&r)), &config, &first, later);
        assert_eq!(again.since, first.since);
        assert_eq!(again.at, later);
    }
}
