//! The what-if for people: per cluster, the settings the proposal changes and the proposed
//! limits it is already over, then each decision that would differ right now, one line
//! each, with the proposed plan's reason. Times are said as ages from the moment of the
//! answer (`removable in 7m`), not as the timestamps the JSON answer carries.

use std::io::{self, Write};

use jiff::Timestamp;

use super::ages::with_ages;
use crate::cluster::what_if::{ClusterAnswer, FleetAnswer, Summary};
use crate::cluster::what_if_over::OverLimit;
use crate::engine::what_if::{Change, Fate, Resize};

pub fn render(answer: &FleetAnswer, out: &mut impl Write) -> io::Result<()> {
    let s = &answer.summary;
    writeln!(out, "What if {}", answer.proposal.join(", "))?;
    writeln!(
        out,
        "{} cluster(s): {} with decisions that change, {} not evaluated; {} scale-up(s), {} removal(s) and {} pod(s) change now",
        s.clusters, s.changed, s.errors, s.scale_ups_changed, s.removals_changed, s.pods_changed,
    )?;
    if let Some(line) = over_summary(s) {
        writeln!(out, "{line}")?;
    }
    for c in &answer.clusters {
        writeln!(out)?;
        cluster(c, answer.at, out)?;
    }
    for note in &answer.notes {
        writeln!(out, "\nNote: {}", with_ages(note, answer.at))?;
    }
    Ok(())
}

/// Clusters already over a limit the proposal sets: the whole fleet, or how many.
fn over_summary(s: &Summary) -> Option<String> {
    let evaluated = s.clusters - s.errors.min(s.clusters);
    match s.over_limits {
        0 => None,
        n if n == evaluated && n > 1 => Some(
            "every cluster is already at or over a proposed limit: none would add a node until back under"
                .into(),
        ),
        n => Some(format!(
            "{n} cluster(s) already at or over a proposed limit: nothing added there until back under"
        )),
    }
}

fn cluster(c: &ClusterAnswer, at: Timestamp, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "{}", c.name)?;
    if let Some(e) = &c.error {
        return writeln!(out, "  error     {}", with_ages(e, at));
    }
    for s in &c.settings {
        writeln!(
            out,
            "  setting   {}: {} -> {} ({})",
            s.key, s.current, s.proposed, s.source
        )?;
    }
    for o in &c.over_limits {
        writeln!(out, "  limit     {}", over_limit(o))?;
    }
    if c.settings.is_empty() {
        writeln!(out, "  no setting of this cluster changes")?;
    } else if c.diff.changes.is_empty() {
        writeln!(out, "  no decision changes now")?;
    }
    for change in &c.diff.changes {
        writeln!(out, "  {}", with_ages(&line(change), at))?;
    }
    if c.diff.not_shown > 0 {
        writeln!(
            out,
            "  ... and {} more change(s) not listed ({} pod(s) change in all)",
            c.diff.not_shown, c.diff.pods_changed
        )?;
    }
    for note in &c.notes {
        writeln!(out, "  note      {}", with_ages(note, at))?;
    }
    Ok(())
}

/// `maxNodesTotal already over: 13 nodes, proposed 11; nothing added until it is back under`
fn over_limit(o: &OverLimit) -> String {
    let (limit, used, unit, proposed) = (&o.limit, o.used, o.unit(), o.proposed);
    if o.over() {
        format!(
            "{limit} already over: {used} {unit}, proposed {proposed}; nothing added until it is back under"
        )
    } else {
        format!(
            "{limit} already at it: {used} {unit}, proposed {proposed}; nothing added while it stays there"
        )
    }
}

fn line(change: &Change) -> String {
    match change {
        Change::ScaleUp {
            node_group,
            current,
            proposed,
            reason,
        } => format!(
            "scale-up  {node_group}: {} now, {} proposed: {reason}",
            resize(current),
            resize(proposed)
        ),
        Change::Removal {
            node,
            node_group,
            proposed,
            reason,
            ..
        } => format!(
            "removal   {node} ({node_group}): {}: {reason}",
            if *proposed { "removed" } else { "kept" }
        ),
        Change::Unneeded {
            node,
            proposed,
            reason,
            ..
        } => format!(
            "unneeded  {node}: {}: {reason}",
            if *proposed {
                "becomes unneeded"
            } else {
                "no longer unneeded"
            }
        ),
        Change::Pod {
            pod,
            current,
            proposed,
            reason,
        } => format!(
            "pod       {pod}: {} -> {}: {reason}",
            fate(current),
            fate(proposed)
        ),
        Change::Limit {
            limit,
            proposed,
            reason,
            ..
        } => format!(
            "limit     {limit} {}: {reason}",
            if *proposed {
                "reached"
            } else {
                "no longer reached"
            }
        ),
        Change::ScaleDownPaused { current, proposed } => format!(
            "scale-down {} -> {}",
            current
                .as_deref()
                .map_or("runs".into(), |w| format!("paused ({w})")),
            proposed
                .as_deref()
                .map_or("runs".into(), |w| format!("paused ({w})"))
        ),
        Change::ClusterHealth {
            proposed, reason, ..
        } => format!(
            "health    {}: {reason}",
            if *proposed { "healthy" } else { "unhealthy" }
        ),
        Change::MachineDeletion {
            machine,
            proposed,
            reason,
            ..
        } => format!(
            "machine   {machine}: {}: {reason}",
            if *proposed { "deleted" } else { "kept" }
        ),
    }
}

fn resize(r: &Option<Resize>) -> String {
    r.map_or("none".into(), |r| format!("{}->{}", r.from, r.to))
}

fn fate(f: &Fate) -> String {
    match &f.node_group {
        Some(g) => format!("{} ({g})", f.outcome.as_str()),
        None => f.outcome.as_str().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cluster::layering::SettingSource;
    use crate::cluster::what_if::{Proposal, SettingChange};
    use crate::engine::what_if::{Diff, Why};

    fn answer(clusters: Vec<ClusterAnswer>) -> FleetAnswer {
        let asked = ["max_nodes_total=11".to_string()];
        let proposal = Proposal::from_assignments(&asked, None).unwrap();
        FleetAnswer::new(&proposal, "2025-06-01T12:00:00Z".parse().unwrap(), clusters)
    }

    /// A cluster whose nodes are `nodes`, under a proposed maximum of 11.
    fn cluster(name: &str, nodes: f64, changes: Vec<Change>) -> ClusterAnswer {
        ClusterAnswer {
            name: name.into(),
            settings: vec![SettingChange {
                key: "max_nodes_total",
                current: json!(null),
                proposed: json!(11),
                source: SettingSource::Flags,
            }],
            over_limits: (nodes >= 11.0)
                .then(|| OverLimit {
                    limit: "maxNodesTotal".into(),
                    used: nodes,
                    current: None,
                    proposed: 11,
                })
                .into_iter()
                .collect(),
            diff: Diff {
                changes,
                ..Diff::default()
            },
            ..ClusterAnswer::default()
        }
    }

    fn text(a: &FleetAnswer) -> String {
        let mut out = Vec::new();
        render(a, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_limit_every_cluster_is_already_over_is_said_for_the_fleet_and_each() {
        let text = text(&answer(vec![
            cluster("east", 13.0, vec![]),
            cluster("west", 11.0, vec![]),
        ]));
        assert!(
            text.contains("\nevery cluster is already at or over a proposed limit: none would add a node until back under\n"),
            "{text}"
        );
        assert!(
            text.contains("\neast\n  setting   max_nodes_total: null -> 11 (flags)\n  limit     maxNodesTotal already over: 13 nodes, proposed 11; nothing added until it is back under\n  no decision changes now\n"),
            "{text}"
        );
        assert!(
            text.contains("  limit     maxNodesTotal already at it: 11 nodes, proposed 11; nothing added while it stays there\n"),
            "{text}"
        );
        // One of two: it is counted.
        let text = super::tests::text(&answer(vec![
            cluster("east", 13.0, vec![]),
            cluster("west", 9.0, vec![]),
        ]));
        assert!(
            text.contains("\n1 cluster(s) already at or over a proposed limit"),
            "{text}"
        );
        assert_eq!(text.matches("already over").count(), 1, "{text}");
    }

    #[test]
    fn times_are_said_as_ages_from_the_answer() {
        let paused = Change::ScaleDownPaused {
            current: Some("scale-up at 2025-06-01T11:58:00Z: no scale-down within scale_down_delay_after_add (10m0s), until 2025-06-01T12:08:00Z".into()),
            proposed: None,
        };
        let limit = Change::Limit {
            limit: "maxNodesTotal".into(),
            current: false,
            proposed: true,
            reason: Why::Said(
                "unneeded since 2025-06-01T11:57:00Z, removable at 2025-06-01T12:07:00Z".into(),
            ),
        };
        let text = text(&answer(vec![cluster("east", 9.0, vec![paused, limit])]));
        assert!(!text.contains("2025-"), "{text}");
        assert!(
            text.contains("  scale-down paused (scale-up 2m ago: no scale-down within scale_down_delay_after_add (10m0s), for another 8m) -> runs\n"),
            "{text}"
        );
        assert!(
            text.contains("reached: unneeded since 3m ago, removable in 7m\n"),
            "{text}"
        );
        assert!(text.contains("pod(s) change now\n"), "{text}");
    }
}
