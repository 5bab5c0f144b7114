//! The what-if for people: per cluster, the settings the proposal changes, then each
//! decision that would differ right now, one line each, with the proposed plan's reason.

use std::io::{self, Write};

use crate::cluster::what_if::{ClusterAnswer, FleetAnswer};
use crate::engine::what_if::{Change, Fate, Resize};

pub fn render(answer: &FleetAnswer, out: &mut impl Write) -> io::Result<()> {
    let s = &answer.summary;
    writeln!(out, "What if {}", answer.proposal.join(", "))?;
    writeln!(
        out,
        "{} cluster(s): {} with decisions that change, {} not evaluated; {} scale-up(s), {} removal(s) and {} pod(s) change (at {})",
        s.clusters,
        s.changed,
        s.errors,
        s.scale_ups_changed,
        s.removals_changed,
        s.pods_changed,
        answer.at
    )?;
    for c in &answer.clusters {
        writeln!(out)?;
        cluster(c, out)?;
    }
    for note in &answer.notes {
        writeln!(out, "\nNote: {note}")?;
    }
    Ok(())
}

fn cluster(c: &ClusterAnswer, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "{}", c.name)?;
    if let Some(e) = &c.error {
        return writeln!(out, "  error     {e}");
    }
    for s in &c.settings {
        writeln!(
            out,
            "  setting   {}: {} -> {} ({})",
            s.key, s.current, s.proposed, s.source
        )?;
    }
    if c.settings.is_empty() {
        writeln!(out, "  no setting of this cluster changes")?;
    } else if c.diff.changes.is_empty() {
        writeln!(out, "  no decision changes now")?;
    }
    for change in &c.diff.changes {
        writeln!(out, "  {}", line(change))?;
    }
    if c.diff.not_shown > 0 {
        writeln!(
            out,
            "  ... and {} more change(s) not listed ({} pod(s) change in all)",
            c.diff.not_shown, c.diff.pods_changed
        )?;
    }
    for note in &c.notes {
        writeln!(out, "  note      {note}")?;
    }
    Ok(())
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
