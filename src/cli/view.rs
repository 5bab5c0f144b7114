//! The demo's live view: one line per cluster (phase, nodes, pending pods, last action),
//! redrawn in place on a terminal, with each action printed above as it happens. When
//! stdout is not a terminal, the actions are printed as they happen and the cluster lines
//! every `PLAIN_EVERY`, as plain lines: no escape sequence at all.
//!
//! The block is redrawn by moving the cursor up as many rows as it took last time, so every
//! row of it must be exactly one row of the terminal: each line is fitted to the terminal's
//! width, read again at every redraw (a window can be resized), and the block to its height
//! (the cursor cannot move above the screen's top). Actions above the block are wrapped here
//! rather than by the terminal; they are not redrawn, so their rows need no counting. Log
//! lines and the demo's own messages wait for the view while it holds a terminal (that is
//! also stderr), and are printed above the block too: written by anyone else, a line would
//! shift the block, and the next redraw would leave its header behind and erase the line.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use super::fit::{fit, sanitize, wrap};
use crate::cluster::report::{ClusterReport, Happening, Phase, describe_entry};
use crate::hub::FleetView;
use crate::telemetry::held;

const REDRAW: Duration = Duration::from_secs(1);
const PLAIN_EVERY: Duration = Duration::from_secs(15);
/// From this width on, a cluster's last action shares its line; below, it has one of its own.
const WIDE: usize = 120;
/// Rows an action above the block takes at most, and the indent of its rows after the first:
/// small, so that a long name (a MachineSet's, with its namespace) still fits on one.
const ACTION_ROWS: usize = 4;
const ACTION_INDENT: usize = 4;

/// The terminal's size, when stdout is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    pub columns: usize,
    pub rows: usize,
}

impl Size {
    /// What a terminal that does not say its size most likely has.
    const FALLBACK: Size = Size {
        columns: 80,
        rows: 24,
    };

    /// Stdout's size now, or the fallback when the terminal does not answer.
    fn of_stdout() -> Size {
        match terminal_size::terminal_size_of(std::io::stdout()) {
            Some((w, h)) if w.0 > 0 && h.0 > 0 => Size {
                columns: usize::from(w.0),
                rows: usize::from(h.0),
            },
            _ => Size::FALLBACK,
        }
    }

    /// The columns a line may take: one less than the terminal has, since some terminals
    /// wrap as soon as the last column is written, before the newline.
    fn line(self) -> usize {
        self.columns.saturating_sub(1).max(1)
    }
}

/// Shows the fleet until `cancel` fires.
pub async fn show(view: FleetView, cancel: CancellationToken) {
    let mut painter = Painter::new(std::io::stdout().is_terminal());
    // Stderr elsewhere (a file) is not in the way of the block.
    let hold = painter.terminal && std::io::stderr().is_terminal();
    if hold {
        held::hold();
    }
    let mut last_plain: Option<tokio::time::Instant> = None;
    let mut tick = tokio::time::interval(REDRAW);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let size = painter.terminal.then(Size::of_stdout);
        let block_due = last_plain.is_none_or(|t| t.elapsed() >= PLAIN_EVERY);
        if block_due {
            last_plain = Some(tokio::time::Instant::now());
        }
        let logs = held::take();
        let out = painter.frame(&view.reports(), Timestamp::now(), size, block_due, &logs);
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
    if hold {
        // What was said since the last redraw (`stopping: ...`), then stderr again.
        held::release();
    }
}

/// What the view remembers between frames.
pub struct Painter {
    terminal: bool,
    /// Actions seen per cluster, so that each is printed once.
    seen: HashMap<String, u64>,
    /// Rows of the block drawn last, to move back over.
    drawn: usize,
}

impl Painter {
    pub fn new(terminal: bool) -> Self {
        Painter {
            terminal,
            seen: HashMap::new(),
            drawn: 0,
        }
    }

    /// One redraw: the log lines held for it (whole lines, the terminal's to wrap: they are
    /// not redrawn), the new actions, then the block. On a terminal (`size` given) the block
    /// drawn before is replaced; else the block is printed when `block_due`.
    pub fn frame(
        &mut self,
        reports: &[ClusterReport],
        now: Timestamp,
        size: Option<Size>,
        block_due: bool,
        logs: &str,
    ) -> String {
        let mut lines = Vec::new();
        for r in reports {
            for h in new_happenings(r, &mut self.seen) {
                let line = happening_line(r, h);
                match size {
                    Some(s) => lines.extend(wrap(&line, s.line(), ACTION_INDENT, ACTION_ROWS)),
                    None => lines.push(line),
                }
            }
        }
        let mut out = String::new();
        match size {
            Some(s) => {
                if self.drawn > 0 {
                    // Back to the top of the block drawn last time, and clear from there.
                    out.push_str(&format!("\x1b[{}F\x1b[J", self.drawn));
                }
                out.push_str(logs);
                let block = fitted_block(reports, now, s);
                self.drawn = block.len();
                lines.extend(block);
            }
            None => {
                out.push_str(logs);
                if block_due {
                    lines.extend(block(reports, now));
                }
            }
        }
        for line in lines {
            out.push_str(&line);
            out.push('\n');
        }
        out
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
    let line = format!(
        "{time} {:<10} {}",
        r.name.as_str(),
        describe_entry(&h.entry)
    );
    sanitize(&line).into_owned()
}

const HEADER: [&str; 5] = [
    "cluster",
    "phase",
    "nodes (ready)",
    "pending (stuck)",
    "groups",
];

/// The cluster lines, with a header, one line each, as wide as they are.
pub fn block(reports: &[ClusterReport], now: Timestamp) -> Vec<String> {
    let [name, phase, nodes, pending, groups] = HEADER;
    let mut lines = vec![format!(
        "{name:<10} {phase:<10} {nodes:>13} {pending:>17} {groups:>7}  last action"
    )];
    lines.extend(reports.iter().map(|r| cluster_line(r, now)));
    lines
}

/// The block for a terminal of `size`: no line wider than it, and no more rows than fit
/// above the cursor; a narrow terminal gives each cluster's last action a row of its own.
pub fn fitted_block(reports: &[ClusterReport], now: Timestamp, size: Size) -> Vec<String> {
    let max = size.line();
    let wide = size.columns >= WIDE;
    let header = if wide {
        block(&[], now).remove(0)
    } else {
        "cluster    phase      nodes(ready) pending(stuck) groups".into()
    };
    let entries: Vec<Vec<String>> = reports
        .iter()
        .map(|r| match wide {
            true => vec![cluster_line(r, now)],
            false => vec![narrow_line(r), format!("  {}", last_action(r, now))],
        })
        .collect();
    let budget = size.rows.saturating_sub(1);
    let mut lines = vec![header];
    let mut shown = 0;
    for entry in &entries {
        // The last row of the budget says how many clusters are left out, if any are.
        let reserve = usize::from(shown + 1 < entries.len());
        if lines.len() + entry.len() + reserve > budget {
            break;
        }
        lines.extend(entry.iter().cloned());
        shown += 1;
    }
    if shown < entries.len() {
        let hidden = entries.len() - shown;
        lines.push(format!(
            "… and {hidden} more cluster(s) (a taller terminal shows them)"
        ));
    }
    lines.iter().map(|l| fit(l, max).into_owned()).collect()
}

/// `sim-1  running  9 (9)  3 (0)  4  12s ago: scale up ...`
pub fn cluster_line(r: &ClusterReport, now: Timestamp) -> String {
    let line = format!(
        "{:<10} {:<10} {:>13} {:>17} {:>7}  {}",
        r.name.as_str(),
        phase(r),
        format!("{} ({})", r.nodes, r.ready_nodes),
        format!("{} ({})", r.pending_pods, r.stuck_pods),
        r.node_groups,
        last_action(r, now)
    );
    sanitize(&line).into_owned()
}

/// A cluster's numbers, under the narrow header.
fn narrow_line(r: &ClusterReport) -> String {
    let line = format!(
        "{:<10} {:<10} {:>12} {:>14} {:>6}",
        r.name.as_str(),
        phase(r),
        format!("{} ({})", r.nodes, r.ready_nodes),
        format!("{} ({})", r.pending_pods, r.stuck_pods),
        r.node_groups,
    );
    sanitize(&line).into_owned()
}

fn phase(r: &ClusterReport) -> &'static str {
    match r.phase {
        Phase::Connecting => "connecting",
        Phase::Syncing => "syncing",
        Phase::Running if r.dry_run => "dry-run",
        Phase::Running => "running",
        Phase::Failed => "FAILED",
        Phase::Misconfigured => "MISCONFIG",
        Phase::Stopped => "stopped",
    }
}

/// The cluster's last action and how long ago, or why it has none.
fn last_action(r: &ClusterReport, now: Timestamp) -> String {
    let last = match (&r.message, r.last_action()) {
        (Some(m), _) if r.phase != Phase::Running || r.last_action().is_none() => m.clone(),
        (_, Some(h)) => format!("{} ago: {}", ago(h.at, now), describe_entry(&h.entry)),
        (Some(m), None) => m.clone(),
        (None, None) => "-".into(),
    };
    sanitize(&last).into_owned()
}

fn ago(then: Timestamp, now: Timestamp) -> String {
    let secs = now.duration_since(then).as_secs().max(0);
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m", secs / 60),
        _ => format!("{}h", secs / 3600),
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
