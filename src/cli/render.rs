//! The plan as a person reads it: node groups, scale-ups, pending pods grouped by identical
//! explanation (so thousands of replicas take one line), limits and warnings.

use std::io::{self, Write};

use super::plan::PlanReport;
use crate::engine::plan::PodExplanation;
use crate::engine::template::TemplateSource;
use crate::model::ScalableKind;

pub fn plan(report: &PlanReport, out: &mut impl Write) -> io::Result<()> {
    let p = &report.plan;
    let skipped: Vec<String> = report
        .input
        .skipped
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    writeln!(
        out,
        "Plan at {} from {} object(s) in {}",
        p.now,
        report.input.objects,
        report.input.files.join(", ")
    )?;
    if !skipped.is_empty() {
        writeln!(
            out,
            "Skipped (not used by the autoscaler): {}",
            skipped.join(", ")
        )?;
    }
    health(report, out)?;
    node_groups(report, out)?;
    repairs(report, out)?;
    scale_up(report, out)?;
    pending(report, out)?;
    scale_down(report, out)?;
    limits(report, out)?;
    if !p.warnings.is_empty() {
        writeln!(out, "\nWARNINGS")?;
        for w in &p.warnings {
            writeln!(out, "  {w}")?;
        }
    }
    Ok(())
}

const MAX_ID_COLUMN: usize = 120;

fn node_groups(report: &PlanReport, out: &mut impl Write) -> io::Result<()> {
    let groups = &report.plan.node_groups;
    writeln!(out, "\nNODE GROUPS")?;
    if groups.is_empty() {
        return writeln!(
            out,
            "  none: no {} opts in to autoscaling",
            ScalableKind::names()
        );
    }
    // Capped: a longer id (a hostile dump can hold any) spills past its column instead of
    // reaching the formatter's width limit (65,535), where it panics.
    let width = groups
        .iter()
        .map(|g| g.id.as_str().len())
        .max()
        .unwrap_or(10)
        .clamp(10, MAX_ID_COLUMN);
    writeln!(
        out,
        "  {:<width$}  {:>4} {:>4} {:>6} {:>10} {:>5} {:>8}  TEMPLATE",
        "ID", "MIN", "MAX", "TARGET", "REGISTERED", "READY", "UPCOMING"
    )?;
    let num = |v: Option<u64>| v.map_or("-".to_string(), |n| n.to_string());
    for g in groups {
        if !g.eligible {
            writeln!(
                out,
                "  {:<width$}  ineligible: {}",
                g.id.as_str(),
                g.reason.as_deref().unwrap_or("")
            )?;
            continue;
        }
        let template = match g.template {
            TemplateSource::Node => "node",
            TemplateSource::Annotations => "annotations",
            TemplateSource::InfrastructureTemplate => "infrastructure",
            TemplateSource::None => "none",
        };
        writeln!(
            out,
            "  {:<width$}  {:>4} {:>4} {:>6} {:>10} {:>5} {:>8}  {template}",
            g.id.as_str(),
            num(g.min),
            num(g.max),
            num(g.target),
            g.registered,
            g.ready,
            g.upcoming
        )?;
        for note in g.notes.iter().chain(g.reason.iter()) {
            writeln!(out, "  {:<width$}    {note}", "")?;
        }
        for (key, o) in &g.overrides {
            let value = o.value.as_str().map_or(o.value.to_string(), str::to_string);
            writeln!(out, "  {:<width$}    {key} = {value} ({})", "", o.source)?;
        }
    }
    Ok(())
}

fn health(report: &PlanReport, out: &mut impl Write) -> io::Result<()> {
    let c = &report.plan.health.cluster;
    let state = if c.healthy { "healthy" } else { "UNHEALTHY" };
    writeln!(
        out,
        "\nCLUSTER {state}: {} ready, {} unready, {} not started, {} unregistered, {} long unregistered, {} being removed",
        c.ready, c.unready, c.not_started, c.unregistered, c.long_unregistered, c.deleting
    )?;
    if let Some(r) = &c.reason {
        writeln!(out, "  {r}")?;
    }
    Ok(())
}

/// Corrections made before any scaling: targets fixed, machines deleted.
fn repairs(report: &PlanReport, out: &mut impl Write) -> io::Result<()> {
    let p = &report.plan;
    let groups = p
        .health
        .node_groups
        .iter()
        .filter(|g| g.backoff_until.is_some() || g.scale_up_in_flight.is_some() || !g.healthy);
    let mut lines = Vec::new();
    for g in groups {
        if let Some(f) = &g.scale_up_in_flight {
            let rebuilt = if f.reconstructed {
                " (rebuilt from machine creation times)"
            } else {
                ""
            };
            lines.push(format!(
                "{}: {} node(s) coming since {}, timeout at {}{rebuilt}",
                g.id, f.nodes, f.since, f.deadline
            ));
        }
        if let (Some(until), Some(why)) = (&g.backoff_until, &g.backoff_reason) {
            lines.push(format!("{}: backed off until {until}: {why}", g.id));
        }
        if let Some(r) = g.reason.as_ref().filter(|_| !g.healthy) {
            lines.push(format!("{}: unhealthy: {r}", g.id));
        }
    }
    for f in &p.fix_target_size {
        lines.push(format!(
            "fix target {}: {} -> {}: {}",
            f.node_group, f.from, f.to, f.reason
        ));
    }
    for (what, list) in [
        ("delete failed machine", &p.delete_failed_machines),
        ("delete unregistered machine", &p.delete_unregistered),
    ] {
        for d in list {
            let how = if d.lower_replicas {
                "and lower replicas"
            } else {
                "(replaced)"
            };
            lines.push(format!(
                "{what} {} of {} {how}: {}",
                d.machine, d.node_group, d.reason
            ));
        }
    }
    if lines.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nPROVISIONING")?;
    for l in lines {
        writeln!(out, "  {l}")?;
    }
    Ok(())
}

fn scale_down(report: &PlanReport, out: &mut impl Write) -> io::Result<()> {
    let p = &report.plan;
    writeln!(out, "\nSCALE-DOWN")?;
    if let Some(why) = &p.scale_down_paused {
        writeln!(out, "  paused: {why}")?;
    }
    for a in &p.scale_down_held {
        writeln!(
            out,
            "  held back: {} of {} would go: {}",
            a.node, a.node_group, a.reason
        )?;
    }
    for a in &p.scale_down {
        let kind = if a.empty { "empty" } else { "drain" };
        writeln!(
            out,
            "  remove {} of {} ({kind}): {}",
            a.node, a.node_group, a.reason
        )?;
        for m in &a.pods {
            writeln!(out, "      {} -> {}", m.pod, m.destination)?;
        }
    }
    for u in p
        .unneeded
        .iter()
        .filter(|u| !p.scale_down.iter().any(|a| a.node == u.node))
    {
        writeln!(
            out,
            "  unneeded {} of {}: utilization {} since {}, removable at {}",
            u.node, u.node_group, u.utilization, u.since, u.removable_at
        )?;
    }
    // Nodes that stay, grouped by reason code so a large cluster stays readable.
    let mut codes: Vec<_> = p.not_removable.iter().map(|n| n.code).collect();
    codes.sort();
    codes.dedup();
    for code in codes {
        let nodes: Vec<_> = p.not_removable.iter().filter(|n| n.code == code).collect();
        let names: Vec<&str> = nodes.iter().take(3).map(|n| &*n.node).collect();
        let more = if nodes.len() > 3 {
            format!(", ... ({} nodes)", nodes.len())
        } else {
            String::new()
        };
        writeln!(
            out,
            "  stays ({code}): {}{more}: e.g. {}",
            names.join(", "),
            nodes[0].message
        )?;
    }
    if p.scale_down.is_empty()
        && p.unneeded.is_empty()
        && p.not_removable.is_empty()
        && p.scale_down_paused.is_none()
    {
        writeln!(out, "  none")?;
    }
    Ok(())
}

fn scale_up(report: &PlanReport, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "\nSCALE-UP")?;
    if report.plan.scale_up.is_empty() {
        return writeln!(out, "  none");
    }
    for a in &report.plan.scale_up {
        writeln!(
            out,
            "  {}: {} -> {} for {} pod(s)",
            a.node_group,
            a.from,
            a.to,
            a.pods.len()
        )?;
        writeln!(out, "    {}", a.reason)?;
    }
    Ok(())
}

/// Pods whose explanations read the same, printed once.
fn grouped(pods: &[PodExplanation]) -> Vec<(&PodExplanation, Vec<String>)> {
    let mut groups: Vec<(&PodExplanation, Vec<String>)> = Vec::new();
    for e in pods {
        let same = |g: &PodExplanation| {
            g.outcome == e.outcome
                && g.node_group == e.node_group
                && g.reasons == e.reasons
                && e.node.is_none()
        };
        match groups.iter_mut().find(|(g, _)| same(g)) {
            Some((_, names)) => names.push(e.pod.to_string()),
            None => groups.push((e, vec![e.pod.to_string()])),
        }
    }
    groups
}

fn pending(report: &PlanReport, out: &mut impl Write) -> io::Result<()> {
    let pods = &report.plan.pending_pods;
    writeln!(out, "\nPENDING PODS ({})", pods.len())?;
    if pods.is_empty() {
        return writeln!(out, "  none");
    }
    for (e, names) in grouped(pods) {
        let who = match names.len() {
            1 => names[0].clone(),
            n if n <= 3 => names.join(", "),
            n => format!("{}, ... ({n} pods)", names[..2].join(", ")),
        };
        let target = match (&e.node_group, &e.node) {
            (_, Some(node)) => format!(" on {node}"),
            (Some(g), None) => format!(" -> {g}"),
            _ => String::new(),
        };
        writeln!(out, "  {who}: {}{target}", e.outcome.as_str())?;
        for r in &e.reasons {
            writeln!(out, "      {r}")?;
        }
    }
    Ok(())
}

fn limits(report: &PlanReport, out: &mut impl Write) -> io::Result<()> {
    let l = &report.plan.limits;
    let max = |m: Option<u64>| m.map_or("unlimited".to_string(), |m| m.to_string());
    writeln!(out, "\nLIMITS (all nodes, upcoming included)")?;
    writeln!(
        out,
        "  nodes   {} / {}",
        l.max_nodes_total.used,
        max(l.max_nodes_total.max)
    )?;
    writeln!(out, "  cores   {} / {}", l.cores.used, max(l.cores.max))?;
    writeln!(
        out,
        "  memory  {} / {} GiB",
        l.memory_gib.used,
        max(l.memory_gib.max)
    )?;
    for g in &l.gpus {
        writeln!(out, "  {}  {} / {}", g.gpu_type, g.used, g.max)?;
    }
    Ok(())
}
