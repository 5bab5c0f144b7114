use super::*;
use crate::cluster::outcome::{Action, Entry};
use crate::model::ClusterName;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_750_000_000 + secs).unwrap()
}

/// A running cluster whose last action is `detail`, `n` times over.
fn cluster(name: &str, detail: &str, n: u64) -> ClusterReport {
    let mut r = ClusterReport::new(ClusterName::new(name), false, at(0));
    r.phase = Phase::Running;
    (r.nodes, r.ready_nodes, r.pending_pods, r.node_groups) = (9, 9, 3, 4);
    for _ in 0..n {
        let action = Action::ClearStaleTaint {
            node: "worker-1".into(),
        };
        r.recent.push_back(Happening {
            at: at(1),
            entry: Entry::done(action, detail),
        });
        r.actions_total += 1;
    }
    r
}

const LONG: &str = "MachineSet openshift-machine-api/sim-1-worker-us-east-1a replicas 2 -> 3 (a long detail, as a failure's can be)";

fn lines(frame: &str) -> Vec<&str> {
    frame.lines().collect()
}

/// The rows a frame moves up over, from its leading `ESC [ n F`.
fn moves_up(frame: &str) -> usize {
    frame
        .strip_prefix("\x1b[")
        .and_then(|rest| rest.split_once('F'))
        .map_or(0, |(n, _)| n.parse().unwrap())
}

#[test]
fn every_line_on_a_terminal_fits_its_width() {
    for columns in [20, 40, 60, 100, 119, 120, 180] {
        let size = Size { columns, rows: 40 };
        let mut painter = Painter::new(true);
        let reports = [cluster("sim-1", LONG, 2), cluster("sim-2", "ok", 0)];
        let frame = painter.frame(&reports, at(30), Some(size), true, "");
        for line in lines(&frame) {
            let shown = line.rsplit("\x1b[J").next().unwrap();
            assert!(
                crate::cli::fit::width(shown) < columns,
                "{columns}: {shown:?}"
            );
        }
        assert_eq!(
            frame.lines().filter(|l| l.starts_with("cluster ")).count(),
            1
        );
    }
}

#[test]
fn each_redraw_moves_up_over_exactly_the_rows_drawn_before() {
    let size = Size {
        columns: 60,
        rows: 30,
    };
    let mut painter = Painter::new(true);
    let first = painter.frame(&[cluster("sim-1", LONG, 1)], at(5), Some(size), true, "");
    assert_eq!(moves_up(&first), 0);
    // The action (wrapped over rows of its own), then the header and the cluster's two rows.
    let block_rows = lines(&first)
        .iter()
        .skip_while(|l| !l.starts_with("cluster "))
        .count();
    assert_eq!(block_rows, 3, "{first}");
    assert!(lines(&first).len() > 4, "{first}");
    let second = painter.frame(&[cluster("sim-1", LONG, 1)], at(6), Some(size), true, "");
    assert_eq!(moves_up(&second), block_rows);
    // Nothing new happened: only the block again.
    assert_eq!(lines(&second).len(), block_rows, "{second}");
    let wide = Size {
        columns: 180,
        rows: 30,
    };
    let third = painter.frame(&[cluster("sim-1", LONG, 1)], at(7), Some(wide), true, "");
    assert_eq!(moves_up(&third), block_rows);
    assert_eq!(
        moves_up(&painter.frame(&[], at(8), Some(wide), true, "")),
        2
    );
}

#[test]
fn an_action_above_the_block_is_wrapped_not_cut_and_printed_once() {
    let size = Size {
        columns: 60,
        rows: 30,
    };
    let mut painter = Painter::new(true);
    let frame = painter.frame(&[cluster("sim-1", LONG, 1)], at(5), Some(size), true, "");
    let action: Vec<&str> = lines(&frame)
        .into_iter()
        .take_while(|l| !l.starts_with("cluster "))
        .collect();
    assert!(action[0].contains("sim-1"), "{action:?}");
    let words: Vec<&str> = action.iter().flat_map(|l| l.split_whitespace()).collect();
    assert!(words.ends_with(&["can", "be)"]), "{action:?}");
    assert!(
        action[1].starts_with(&" ".repeat(ACTION_INDENT)),
        "{action:?}"
    );
    let again = painter.frame(&[cluster("sim-1", LONG, 1)], at(6), Some(size), true, "");
    assert!(!again.contains("can be)"), "{again}");
}

#[test]
fn a_block_taller_than_the_terminal_says_how_many_clusters_it_leaves_out() {
    let reports: Vec<ClusterReport> = (1..=30)
        .map(|i| cluster(&format!("sim-{i}"), "ok", 0))
        .collect();
    let size = Size {
        columns: 60,
        rows: 10,
    };
    let frame = Painter::new(true).frame(&reports, at(5), Some(size), true, "");
    let rows = lines(&frame);
    assert!(rows.len() < size.rows, "{frame}");
    // The header, three clusters of two rows, and the count of the others.
    assert_eq!(rows.len(), 1 + 3 * 2 + 1, "{frame}");
    assert_eq!(
        rows[7],
        "… and 27 more cluster(s) (a taller terminal shows them)"
    );
    // When every cluster fits, none is said to be left out.
    let tall = Size {
        columns: 180,
        rows: 32,
    };
    let frame = Painter::new(true).frame(&reports, at(5), Some(tall), true, "");
    assert_eq!(lines(&frame).len(), 31, "{frame}");
}

#[test]
fn piped_output_has_no_escape_sequence_and_the_block_only_when_due() {
    let mut r = cluster("sim-1", "taint\x1b[2A\nnode", 1);
    r.message = Some("\x1b[31mred\x1b[0m".into());
    let mut painter = Painter::new(false);
    let frame = painter.frame(std::slice::from_ref(&r), at(5), None, true, "");
    assert!(!frame.contains('\x1b'), "{frame:?}");
    assert_eq!(lines(&frame).len(), 3, "{frame:?}");
    assert!(frame.contains("sim-1"), "{frame}");
    assert_eq!(painter.frame(&[r], at(6), None, false, ""), "");
}

#[test]
fn a_wide_terminal_keeps_one_line_per_cluster() {
    let size = Size {
        columns: 180,
        rows: 30,
    };
    let block = fitted_block(&[cluster("sim-1", "replicas 2 -> 3", 1)], at(5), size);
    assert_eq!(block.len(), 2);
    assert!(block[0].ends_with("last action"), "{block:?}");
    assert!(block[1].ends_with("4s ago: replicas 2 -> 3"), "{block:?}");
}

#[test]
fn log_lines_held_for_the_view_come_above_the_block_and_are_not_counted() {
    let size = Size {
        columns: 60,
        rows: 30,
    };
    let mut painter = Painter::new(true);
    let first = painter.frame(&[cluster("sim-1", "ok", 0)], at(5), Some(size), true, "");
    let drawn = lines(&first).len();
    let log = "WARN a log line longer than the terminal is wide, which the terminal wraps itself\n";
    let second = painter.frame(&[cluster("sim-1", "ok", 1)], at(6), Some(size), true, log);
    let after_clear = second.split_once("\x1b[J").unwrap().1;
    assert!(after_clear.starts_with(log), "{second:?}");
    assert_eq!(moves_up(&second), drawn);
    let third = painter.frame(&[cluster("sim-1", "ok", 1)], at(7), Some(size), true, "");
    assert_eq!(
        moves_up(&third),
        drawn,
        "the log's rows are not the block's"
    );
}
