//! `fleetscaler demo` as a user runs it: it serves the fleet's API, its clusters come up,
//! its kubeconfig lives in a private directory (not the working directory) while it runs,
//! and SIGTERM (or Ctrl-C) stops it cleanly with exit status 0, removing that directory.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn get(addr: &str, path: &str) -> Option<String> {
    let mut tcp = TcpStream::connect(addr).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(tcp, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut body = String::new();
    tcp.read_to_string(&mut body).ok()?;
    Some(body)
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// `  kubeconfig: PATH (removed when the demo stops)` and the kubectl line naming it.
fn kubeconfig_path(line: &str, kubectl: &str) -> PathBuf {
    let path = line
        .strip_prefix("  kubeconfig: ")
        .and_then(|rest| rest.strip_suffix(" (removed when the demo stops)"))
        .unwrap_or_else(|| panic!("no kubeconfig in {line:?}"));
    assert!(
        kubectl.contains(&format!("export KUBECONFIG={path};")),
        "{kubectl}"
    );
    PathBuf::from(path)
}

#[cfg(unix)]
#[test]
fn demo_serves_its_fleet_keeps_its_kubeconfig_private_and_stops_cleanly_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("fleetscaler-demo-test-{}", std::process::id()));
    // The user's working directory, and their $XDG_RUNTIME_DIR.
    let (cwd, runtime) = (dir.join("checkout"), dir.join("run"));
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&runtime).unwrap();
    let mut demo = Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
        .args(["demo", "--clusters", "2", "--listen", "127.0.0.1:0"])
        .current_dir(&cwd)
        .env("XDG_RUNTIME_DIR", &runtime)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(demo.stdout.take().unwrap()).lines();
    let mut line = || lines.next().unwrap().unwrap();
    let first = line();
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no API address in {first:?}"))
        .to_string();
    let (where_line, kubectl_line) = (line(), line());
    let kubeconfig = kubeconfig_path(&where_line, &kubectl_line);
    assert!(kubeconfig.starts_with(&runtime), "{kubeconfig:?}");
    assert!(kubeconfig.is_file(), "{kubeconfig:?}");
    assert_eq!(mode(&kubeconfig), 0o600);
    let private = kubeconfig.parent().unwrap().to_path_buf();
    assert_ne!(
        private, runtime,
        "the kubeconfig has a directory of its own"
    );
    assert_eq!(mode(&private), 0o700);
    let clusters = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(clusters.contains("sim-2"), "{clusters}");
    assert_eq!(
        std::fs::read_dir(&cwd).unwrap().count(),
        0,
        "written into the working directory"
    );
    // Keep reading both pipes so the demo never blocks on a full one.
    std::thread::spawn(move || for _ in lines {});
    let mut stderr_pipe = demo.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });

    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let body = get(&addr, "/api/v1/fleet").unwrap_or_default();
        // Both clusters have made a pass (so each has a plan).
        if body.matches("\"lastPass\"").count() == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "clusters never ran: {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(get(&addr, "/healthz").unwrap().contains("ok"));
    // The dashboard and the metrics, as a person and Prometheus would fetch them.
    assert!(get(&addr, "/").unwrap().contains("<title>"));
    assert!(
        get(&addr, "/metrics")
            .unwrap()
            .contains("cluster_autoscaler_nodes_count{cluster=\"sim-1\",state=\"ready\"}")
    );
    assert!(
        get(&addr, "/api/v1/clusters/sim-1/plan")
            .unwrap()
            .contains("\"nodeGroups\"")
    );
    assert!(
        get(&addr, "/api/v1/clusters/nope")
            .unwrap()
            .starts_with("HTTP/1.0 404")
    );

    let kill = Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", demo.id())])
        .status()
        .unwrap();
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = demo.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the demo did not stop within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = stderr.join().unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("stopped"), "{stderr}");
    assert!(!private.exists(), "{private:?} is left after a clean stop");
    assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 25, point 4: a port already in use (a second demo, another service) says how to
/// choose another, once.
#[test]
fn a_taken_port_says_how_to_choose_another() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
        .args(["demo", "--clusters", "1", "--listen", &addr])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let hint = "(another process holds it: choose another address with --listen)";
    assert!(err.contains(&format!("cannot listen on {addr}: ")), "{err}");
    assert_eq!(err.matches(hint).count(), 1, "{err}");
    drop(taken);
}

/// `fleetscaler demo` in a tmux pane of its own (a tmux server of its own, its socket in the
/// test's directory), read as a person sees it.
struct Pane {
    socket: PathBuf,
    columns: usize,
}

impl Pane {
    /// The demo of two clusters, with the load's waves short enough that the first scale-up
    /// comes within seconds.
    fn demo(dir: &Path, columns: usize, rows: usize) -> Pane {
        let runtime = dir.join("run");
        std::fs::create_dir_all(&runtime).unwrap();
        // The pane stays after the demo exits, so that a crash can be read.
        let conf = dir.join("tmux.conf");
        std::fs::write(
            &conf,
            "set -g remain-on-exit on\nset -g history-limit 50000\n",
        )
        .unwrap();
        let pane = Pane {
            socket: dir.join("tmux.sock"),
            columns,
        };
        let size = [columns.to_string(), rows.to_string()];
        let xdg = format!("XDG_RUNTIME_DIR={}", runtime.display());
        let mut args = vec!["-f", conf.to_str().unwrap(), "new-session", "-d"];
        args.extend(["-x", &size[0], "-y", &size[1], "-e", &xdg]);
        args.extend([env!("CARGO_BIN_EXE_fleetscaler"), "demo", "--clusters", "2"]);
        args.extend(["--listen", "127.0.0.1:0", "--wave-period-secs", "10"]);
        let out = pane.tmux(&args);
        assert!(out.status.success(), "{out:?}");
        pane
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env("TERM", "xterm-256color")
            .output()
            .unwrap_or_else(|e| panic!("tmux is needed for this test (apt-get install tmux): {e}"))
    }

    /// Everything the pane shows and has scrolled off, a line the terminal wrapped joined
    /// again (so that it shows as wider than the pane).
    fn text(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-J", "-S", "-"]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Polls the pane until `done` says it shows what was awaited.
    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let text = self.text();
            if done(&text) {
                return text;
            }
            assert!(Instant::now() < deadline, "never {what}:\n{text}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// The oldest last action the block shows, in seconds (`  12s ago: MachineSet ...`).
fn oldest_action_secs(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.split_once("s ago: ").map(|(before, _)| before))
        .filter_map(|before| before.rsplit(' ').next()?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// Issue 25, point 1: at any width the live view redraws its block in place, with no line
/// wider than the terminal (a line that wrapped used to leave a copy of the block behind on
/// every redraw).
fn the_live_view_fits_the_terminal(columns: usize) {
    let dir = crate::e2e_support::TempDir::new(&format!("cli-demo-tmux-{columns}"));
    let pane = Pane::demo(dir.path(), columns, 30);
    let text = pane.wait_for("a scale action, shown for five redraws", |t| {
        t.contains(" replicas ") && oldest_action_secs(t) >= 5
    });
    // The lines before the view (the kubeconfig's path) are the terminal's to wrap.
    let (intro, view) = text.split_once("Ctrl-C to stop\n").unwrap();
    assert!(intro.contains("fleetscaler demo:"), "{text}");
    let headers = view.lines().filter(|l| l.starts_with("cluster ")).count();
    assert_eq!(headers, 1, "one block, redrawn in place:\n{text}");
    for line in view.lines() {
        let shown = line.trim_end().chars().count();
        assert!(shown <= pane.columns, "{shown} columns: {line:?}\n{text}");
    }
    let block: Vec<&str> = view
        .lines()
        .skip_while(|l| !l.starts_with("cluster "))
        .collect();
    assert!(block.iter().any(|l| l.starts_with("sim-1 ")), "{text}");
    assert!(block.iter().any(|l| l.starts_with("sim-2 ")), "{text}");
    let out = pane.tmux(&["send-keys", "C-c"]);
    assert!(out.status.success(), "{out:?}");
    // Ctrl-C stops the demo: its pane dies (tmux does not always learn the exit status; the
    // SIGTERM test above checks it is 0).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = pane.tmux(&["display-message", "-p", "#{pane_dead}"]);
        if String::from_utf8_lossy(&out.stdout).trim() == "1" {
            break;
        }
        assert!(Instant::now() < deadline, "not stopped:\n{}", pane.text());
        std::thread::sleep(Duration::from_millis(200));
    }
    // What the demo says while it stops is printed below the block, not drawn over.
    let text = pane.text();
    let after = text.split_once("Ctrl-C to stop\n").unwrap().1;
    assert_eq!(after.matches("\ncluster ").count(), 1, "{text}");
    assert!(after.contains("stopping: undoing scale-downs"), "{text}");
    assert!(after.contains("\nstopped\n"), "{text}");
}

#[test]
fn the_live_view_fits_a_terminal_of_60_columns() {
    the_live_view_fits_the_terminal(60);
}

#[test]
fn the_live_view_fits_a_terminal_of_100_columns() {
    the_live_view_fits_the_terminal(100);
}

/// Issue 25, point 1: with stdout piped (a file, `| tee`), the view writes plain lines: no
/// escape sequence at all, the cluster lines as they are.
#[test]
fn piped_output_has_no_escape_sequences() {
    let dir = crate::e2e_support::TempDir::new("cli-demo-piped");
    let mut demo = Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
        .args(["demo", "--clusters", "2", "--listen", "127.0.0.1:0"])
        .args(["--wave-period-secs", "10"])
        .env("XDG_RUNTIME_DIR", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = demo.stdout.take().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let into = seen.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = stdout.read(&mut chunk) {
            into.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let text = loop {
        let text = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
        if text.contains(" replicas ") && text.contains("\ncluster ") {
            break text;
        }
        assert!(Instant::now() < deadline, "no scale action:\n{text}");
        std::thread::sleep(Duration::from_millis(250));
    };
    let _ = demo.kill();
    let _ = demo.wait();
    assert!(!text.contains('\x1b'), "{text:?}");
    assert!(text.contains("\nsim-1 "), "{text}");
}
