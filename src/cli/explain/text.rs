//! An explanation as a person reads it: the outcome in the dashboard's words, then the
//! reasons node group by node group (the group's name first, as the dashboard shows it,
//! its full id beside it), times in them said as ages from the hub's pass.

use std::io::{self, Write};

use jiff::Timestamp;

use super::shape::Explanation;
use crate::cli::ages::{age, with_ages};

pub(super) fn render(e: &Explanation, now: Timestamp, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "{} in cluster {}: {} ({})",
        e.pod,
        e.cluster,
        outcome_words(&e.outcome),
        e.outcome
    )?;
    if let Some(g) = &e.node_group {
        writeln!(out, "  node group {g}")?;
    }
    if let Some(n) = &e.node {
        writeln!(out, "  node {n}")?;
    }
    writeln!(
        out,
        "  as of the hub's pass at {:.0}, {} ago",
        e.plan_at,
        age(e.plan_at, now)
    )?;
    if e.reasons.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nWhy, node group by node group:")?;
    for (group, reasons) in e.by_group() {
        match group {
            Some(id) => writeln!(out, "  {}  ({id})", short_name(id))?,
            None => writeln!(out, "  not about one node group")?,
        }
        for r in reasons {
            writeln!(out, "    {}: {}", r.code, with_ages(&r.message, e.plan_at))?;
        }
    }
    Ok(())
}

/// The dashboard's words for an outcome (`podOutcome` in dom.js).
fn outcome_words(outcome: &str) -> &str {
    match outcome {
        "scaleUp" => "a scale-up is for it",
        "fitsExisting" => "fits an existing node",
        "fitsUpcoming" => "fits a node being added",
        "noScaleUp" => "stuck, no scale-up helps",
        "belowPriorityCutoff" => "below the priority cutoff, never scaled up for",
        other => other,
    }
}

/// A group's name: the last part of its id, as the dashboard shows it.
fn short_name(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::explain::shape::{PodDoc, ReasonDoc};

    fn reason(group: Option<&str>, code: &str, message: &str) -> ReasonDoc {
        ReasonDoc {
            node_group: group.map(str::to_string),
            code: code.into(),
            message: message.into(),
        }
    }

    #[test]
    fn reasons_read_group_by_group() {
        let a = "MachineSet.machine.openshift.io/openshift-machine-api/worker-a";
        let b = "MachineSet.machine.openshift.io/openshift-machine-api/gpu-b";
        let at: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        let pod = PodDoc {
            pod: "shop/web-1".into(),
            outcome: "noScaleUp".into(),
            node_group: None,
            node: None,
            reasons: vec![
                reason(None, "InsufficientResources", "no existing node fits"),
                reason(Some(a), "MaxSizeReached", "at its max 3"),
                reason(
                    Some(b),
                    "NodeGroupBackedOff",
                    "backed off until 2026-11-22T10:05:00Z",
                ),
                reason(Some(a), "NotSimulated", "volumes"),
            ],
        };
        let e = Explanation::new("http://hub", "east", at, pod);
        let mut out = Vec::new();
        let now: Timestamp = "2026-11-22T10:00:07Z".parse().unwrap();
        render(&e, now, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            format!(
                "shop/web-1 in cluster east: stuck, no scale-up helps (noScaleUp)\n\
                 \x20 as of the hub's pass at 2026-11-22T10:00:00Z, 7s ago\n\
                 \n\
                 Why, node group by node group:\n\
                 \x20 worker-a  ({a})\n\
                 \x20   MaxSizeReached: at its max 3\n\
                 \x20   NotSimulated: volumes\n\
                 \x20 gpu-b  ({b})\n\
                 \x20   NodeGroupBackedOff: backed off for another 5m\n\
                 \x20 not about one node group\n\
                 \x20   InsufficientResources: no existing node fits\n"
            )
        );
    }
}
