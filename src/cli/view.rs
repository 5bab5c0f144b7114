//! The demo's live view: one line per cluster (phase, nodes, pending pods, last action),
//! redrawn in place on a terminal, with each action printed above as it happens. When
//! stdout is not a terminal, the actions are printed as they happen and the cluster lines
//! every `PLAIN_EVERY`.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use crate::cluster::report::{ClusterReport, Happening, Phase, describe_entry};
use crate::hub::FleetView;

const REDRAW: Duration = Duration::from_secs(1);
const PLAIN_EVERY: Duration = Duration::from_secs(15);

/// Shows the fleet until `cancel` fires.
pub async fn show(view: FleetView, cancel: CancellationToken) {
    let terminal = std::io::stdout().is_terminal();
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut drawn = 0usize;
    let mut last_plain = tokio::time::Instant::now() - PLAIN_EVERY;
    let mut tick = tokio::time::interval(REDRAW);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let reports = view.reports();
        let now = Timestamp::now();
        let mut out = String::new();
        if terminal && drawn > 0 {
            // Back to the top of the block drawn last time, and clear it.
            out.push_str(&format!("\x1b[{drawn}F\x1b[J"));
        }
        for r in &reports {
            for h in new_happenings(r, &mut seen) {
                out.push_str(&happening_line(r, h));
                out.push('\n');
            }
        }
        if terminal || last_plain.elapsed() >= PLAIN_EVERY {
            let block = block(&reports, now);
            drawn = block.len();
            for line in block {
                out.push_str(&line);
                out.push('\n');
            }
            last_plain = tokio::time::Instant::now();
        }
        let mut stdout = std::io::stdout().lock();
        // The reader went away: nothing more to show, the demo goes on until a signal.
        if stdout
            .write_all(out.as_bytes())
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
}

/// Actions a cluster recorded since the last look (at most those still kept).
fn new_happenings<'a>(
    r: &'a ClusterReport,
    seen: &mut HashMap<String, u64>,
) -> impl Iterator<Item = &'a Happening> {
    let before = seen
        .insert(r.name.to_string(), r.actions_total)
        .unwrap_or(0);
    let fresh = usize::try_from(r.actions_total.saturating_sub(before)).unwrap_or(usize::MAX);
    r.recent.iter().skip(r.recent.len().saturating_sub(fresh))
}

fn happening_line(r: &ClusterReport, h: &Happening) -> String {
    let time = h.at.strftime("%H:%M:%S");
    format!("{time} {:<10} {}", r.name, describe_entry(&h.entry))
}

/// The cluster lines, with a header.
pub fn block(reports: &[ClusterReport], now: Timestamp) -> Vec<String> {
    let mut lines = vec![format!(
        "{:<10} {:<10} {:>13} {:>17} {:>7}  last action",
        "cluster", "phase", "nodes (ready)", "pending (stuck)", "groups"
    )];
    lines.extend(reports.iter().map(|r| cluster_line(r, now)));
    lines
}

/// `sim-1  running  9 (9)  3 (0)  4  12s ago: scale up ...`
pub fn cluster_line(r: &ClusterReport, now: Timestamp) -> String {
    let phase = match r.phase {
        Phase::Connecting => "connecting",
        Phase::Syncing => "syncing",
        Phase::Running if r.dry_run => "dry-run",
        Phase::Running => "running",
        Phase::Failed => "FAILED",
        Phase::Misconfigured => "MISCONFIG",
        Phase::Stopped => "stopped",
    };
    let last = match (&r.message, r.last_action()) {
        (Some(m), _) if r.phase != Phase::Running || r.last_action().is_none() => m.clone(),
        (_, Some(h)) => format!("{} ago: {}", ago(h.at, now), describe_entry(&h.entry)),
        (Some(m), None) => m.clone(),
        (None, None) => "-".into(),
    };
    format!(
        "{:<10} {:<10} {:>13} {:>17} {:>7}  {}",
        r.name.as_str(),
        phase,
        format!("{} ({})", r.nodes, r.ready_nodes),
        format!("{} ({})", r.pending_pods, r.stuck_pods),
        r.node_groups,
        last
    )
}

fn ago(then: Timestamp, now: Timestamp) -> String {
    let secs = now.duration_since(then).as_secs().max(0);
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m", secs / 60),
        _ => format!("{}h", secs / 3600),
    }
}
