//! What the probes mean, as Kubernetes uses them.
//!
//! Liveness: the hub's own loop still turns (it works out the fleet's health every second);
//! a stuck hub is worth a restart, a failing cluster is not (a restart would not fix it and
//! would drop every other cluster's state). Readiness: the replica can answer for the fleet,
//! that is every cluster has been listed or has failed trying; a cluster that never answers
//! does not keep the replica unready past `READY_GRACE`. Neither depends on holding the lease:
//! a standby replica is live and ready, so that it counts for the PodDisruptionBudget.

use std::time::Duration;

use jiff::Timestamp;

use crate::hub::FleetView;
use crate::hub::health::ClusterState;

/// The hub's loop is considered stuck when its last turn is older than this.
const LOOP_STALL: Duration = Duration::from_secs(30);
/// A replica is ready this long after it started, whatever its clusters do.
const READY_GRACE: Duration = Duration::from_secs(120);

pub fn live(view: &FleetView) -> Result<String, String> {
    live_at(view, Timestamp::now())
}

pub fn ready(view: &FleetView) -> Result<String, String> {
    ready_at(view, Timestamp::now())
}

fn live_at(view: &FleetView, now: Timestamp) -> Result<String, String> {
    let last = view.health().at;
    let idle = age(last, now);
    if idle > LOOP_STALL {
        return Err(format!(
            "the hub's loop last ran {}s ago (at {last}): it is stuck\n",
            idle.as_secs()
        ));
    }
    Ok("ok\n".into())
}

fn ready_at(view: &FleetView, now: Timestamp) -> Result<String, String> {
    live_at(view, now)?;
    let starting: Vec<String> = view
        .glances()
        .iter()
        .filter(|g| g.state == ClusterState::Starting)
        .map(|g| g.name.to_string())
        .collect();
    let up_for = age(view.hub().started, now);
    if starting.is_empty() || up_for > READY_GRACE {
        return Ok("ok\n".into());
    }
    Err(format!(
        "not ready: waiting for the first pass of {} (ready after {}s at most)\n",
        starting.join(", "),
        READY_GRACE.as_secs()
    ))
}

fn age(then: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(then)).unwrap_or(Duration::ZERO)
}
