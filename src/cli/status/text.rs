//! The status as a person reads it, kubectl-style: a line on the fleet and its leader, then
//! one row per cluster in aligned columns, times as ages ("3m"). With sharding, a line on
//! this replica's share before the table and one per other replica after it.

use std::io::{self, Write};

use jiff::Timestamp;

use super::shape::{Cluster, Hub, Sharding, Status};
use crate::cli::ages::age;
use crate::hub::health::ClusterState;

/// Between columns, as kubectl.
const GAP: &str = "   ";

pub(super) fn render(s: &Status, out: &mut impl Write) -> io::Result<()> {
    if let Some(line) = header(s) {
        writeln!(out, "{line}")?;
    }
    if let Some(sharding) = &s.sharding {
        writeln!(out, "{}", share(sharding))?;
    }
    if s.clusters.is_empty() {
        writeln!(out, "no clusters")?;
    } else {
        for line in table(&rows(s)) {
            writeln!(out, "{line}")?;
        }
    }
    // Where to look for the clusters this replica does not run.
    for r in s
        .sharding
        .iter()
        .flat_map(|sh| &sh.replicas)
        .filter(|r| !r.this)
    {
        let at = match &r.address {
            Some(address) => format!("at {address}"),
            None => "(address unknown)".into(),
        };
        match r.clusters.len() {
            0 => writeln!(out, "replica {} {at} runs no cluster", r.identity)?,
            n => writeln!(
                out,
                "replica {} {at} runs {n}: {}",
                r.identity,
                r.clusters.join(", ")
            )?,
        }
    }
    Ok(())
}

/// `sharding: replica hub-a (3 replicas), runs 2 of 6 clusters; taking over sim-4 (...)`
fn share(s: &Sharding) -> String {
    if !s.replicas.iter().any(|r| r.this) {
        return format!(
            "sharding: replica {} is not among the live replicas (its Lease is not renewed): \
             it runs no cluster",
            s.identity
        );
    }
    let mut line = format!(
        "sharding: replica {} ({} replicas), runs {} of {} clusters",
        s.identity,
        s.replicas.len(),
        s.runs.len(),
        s.clusters
    );
    match s.taking_over.as_slice() {
        [] => {}
        [one] => line.push_str(&format!(
            "; taking over {one} (writes to it once it holds its Lease)"
        )),
        many => line.push_str(&format!(
            "; taking over {} (writes to them once it holds their Leases)",
            many.join(", ")
        )),
    }
    line
}

/// `fleet healthy for 12m: all 3 clusters healthy or starting; leader: this replica (hub-0)`
fn header(s: &Status) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(f) = &s.fleet {
        let state = match f.state.as_str() {
            "healthy" => "healthy".to_string(),
            other => other.to_uppercase(),
        };
        let paused = if f.scale_down_paused {
            "; scale-down paused in every cluster"
        } else {
            ""
        };
        let since = age(f.since, s.at);
        parts.push(format!("fleet {state} for {since}: {}{paused}", f.reason));
    }
    if let Some(h) = &s.hub {
        // With sharding there is no leader: the sharding line says who runs what.
        if s.sharding.is_none() {
            parts.push(leader(h, s.at));
        }
        if h.dry_run {
            parts.push("dry run".into());
        }
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn leader(h: &Hub, now: Timestamp) -> String {
    let me = h.identity.as_deref().unwrap_or("this replica");
    let mut text = match (h.leader_election, h.leading, &h.holder) {
        (false, ..) => "no leader election".to_string(),
        (true, true, _) => format!("leader: this replica ({me})"),
        (true, false, Some(holder)) => format!("standby ({me}); leader: {holder}"),
        (true, false, None) => format!("standby ({me}); no leader"),
    };
    if let Some(e) = &h.lease_error {
        let since = age(e.at, now);
        text.push_str(&format!(
            "; the lease has failed for {since}: {}",
            e.message
        ));
    }
    text
}

fn rows(s: &Status) -> Vec<Vec<String>> {
    let reasons = s.clusters.iter().any(|c| c.reason.is_some());
    let mut titles: Vec<String> = [
        "NAME",
        "HEALTH",
        "NODES",
        "PENDING",
        "GROUPS",
        "LAST ACTION",
    ]
    .map(String::from)
    .into();
    if reasons {
        titles.push("REASON".into());
    }
    // The ages of the last actions line up, so that their descriptions do too.
    let ages: Vec<Option<String>> = s
        .clusters
        .iter()
        .map(|c| c.last_action.as_ref().map(|a| age(a.at, s.at)))
        .collect();
    let age_width = ages.iter().flatten().map(|a| a.len()).max().unwrap_or(0);
    let mut rows = vec![titles];
    for (c, age) in s.clusters.iter().zip(ages) {
        let last = match (&c.last_action, age) {
            (Some(a), Some(age)) => format!("{age:<age_width$}  {}", a.description),
            _ => "-".into(),
        };
        let mut row = cluster_row(c, last);
        if reasons {
            row.push(c.reason.clone().unwrap_or_else(|| "-".into()));
        }
        rows.push(row);
    }
    rows
}

fn cluster_row(c: &Cluster, last_action: String) -> Vec<String> {
    vec![
        c.name.clone(),
        health(c),
        nodes(c),
        pending(c),
        c.node_groups.to_string(),
        last_action,
    ]
}

fn health(c: &Cluster) -> String {
    match (c.health, c.dry_run) {
        (ClusterState::Healthy, true) => "healthy (dry run)".into(),
        (state, _) => state.as_str().into(),
    }
}

/// `9`, or `12 (9 ready)` while some are not (unready, starting or being removed).
fn nodes(c: &Cluster) -> String {
    match c.ready_nodes {
        r if r == c.nodes => r.to_string(),
        r => format!("{} ({r} ready)", c.nodes),
    }
}

/// `3`, or `3 (1 stuck)` when some no scale-up can help.
fn pending(c: &Cluster) -> String {
    match c.stuck_pods {
        0 => c.pending_pods.to_string(),
        n => format!("{} ({n} stuck)", c.pending_pods),
    }
}

/// Aligned columns; the last one is not padded (no trailing blanks).
fn table(rows: &[Vec<String>]) -> Vec<String> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            let cells = rows.iter().filter_map(|r| r.get(i));
            cells.map(|c| c.chars().count()).max().unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|row| {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let pad = widths[i].saturating_sub(cell.chars().count());
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad));
                    line.push_str(GAP);
                }
            }
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::api::parse;
    use super::*;

    fn fixture() -> Status {
        let doc = parse(include_bytes!("fixture.json")).unwrap();
        Status::from_api("http://hub:8080", doc, Timestamp::UNIX_EPOCH)
    }

    fn rendered(s: &Status) -> String {
        let mut out = Vec::new();
        render(s, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_fleet_renders_as_a_table() {
        let expected = "\
fleet healthy for 12m: 2 of 3 clusters unhealthy: sim-2 (unhealthy), sim-3 (failed); leader: this replica (hub-0)
NAME    HEALTH      NODES         PENDING       GROUPS   LAST ACTION                                                                                        REASON
sim-1   healthy     9             3 (1 stuck)   4        3m    MachineSet openshift-machine-api/sim-1-worker-b replicas 2 -> 3                              -
sim-2   unhealthy   5 (3 ready)   0             2        120m  scale up MachineDeployment.cluster.x-k8s.io/default/sim-2-md-0 1 -> 2 failed: 409 Conflict   2 of 5 nodes unready (more than 45%)
sim-3   failed      0             0             0        -                                                                                                  connecting: tcp connect error: Connection refused (os error 111)
";
        assert_eq!(rendered(&fixture()), expected);
    }

    #[test]
    fn healthy_clusters_need_no_reason_column() {
        let mut s = fixture();
        s.clusters.truncate(1);
        let text = rendered(&s);
        assert!(!text.contains("REASON"), "{text}");
        assert!(text.lines().all(|l| !l.ends_with(' ')), "{text:?}");
    }

    #[test]
    fn a_degraded_fleet_and_a_standby_say_so() {
        let mut s = fixture();
        if let Some(f) = s.fleet.as_mut() {
            f.state = "degraded".into();
            f.scale_down_paused = true;
        }
        if let Some(h) = s.hub.as_mut() {
            h.leading = false;
            h.holder = Some("hub-1".into());
            h.lease_error = Some(super::super::shape::Timed {
                at: "2025-06-01T11:59:30Z".parse().unwrap(),
                message: "409 Conflict".into(),
            });
        }
        let first = rendered(&s).lines().next().unwrap_or_default().to_string();
        assert!(first.starts_with("fleet DEGRADED for 12m: "), "{first}");
        assert!(
            first.contains("; scale-down paused in every cluster"),
            "{first}"
        );
        assert!(
            first.ends_with(
                "standby (hub-0); leader: hub-1; the lease has failed for 30s: 409 Conflict"
            ),
            "{first}"
        );
    }

    #[test]
    fn without_hub_or_fleet_only_the_rows_show() {
        let doc = parse(br#"{"clusters": []}"#).unwrap();
        let s = Status::from_api("x", doc, Timestamp::UNIX_EPOCH);
        assert_eq!(rendered(&s), "no clusters\n");
    }

    fn sharded() -> Status {
        let doc = parse(include_bytes!("fixture_sharded.json")).unwrap();
        Status::from_api("http://10.0.0.5:8080", doc, Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn a_sharded_hub_says_its_share_and_where_the_others_are() {
        let expected = "\
fleet healthy for 12m: all 6 clusters healthy or starting
sharding: replica hub-a (3 replicas), runs 2 of 6 clusters; taking over sim-4 (writes to it once it holds its Lease)
NAME    HEALTH     NODES   PENDING   GROUPS   LAST ACTION                                                           REASON
sim-1   healthy    5       0         3        3m  MachineSet openshift-machine-api/sim-1-worker-b replicas 2 -> 3   -
sim-4   starting   0       0         0        -                                                                     waiting for the first pass
replica hub-b at 10.0.0.6:8080 runs 3: sim-2, sim-5, sim-6
replica hub-c (address unknown) runs 1: sim-3
";
        assert_eq!(rendered(&sharded()), expected);
    }

    #[test]
    fn a_replica_without_clusters_or_a_live_lease_says_so() {
        let mut s = sharded();
        s.clusters.clear();
        if let Some(sh) = s.sharding.as_mut() {
            sh.replicas[2].clusters.clear();
        }
        let text = rendered(&s);
        assert!(text.contains("\nno clusters\n"), "{text}");
        assert!(
            text.ends_with("replica hub-c (address unknown) runs no cluster\n"),
            "{text}"
        );
        if let Some(sh) = s.sharding.as_mut() {
            sh.replicas.clear();
        }
        let text = rendered(&s);
        assert!(
            text.contains(
                "sharding: replica hub-a is not among the live replicas (its Lease is not \
                 renewed): it runs no cluster"
            ),
            "{text}"
        );
    }
}
