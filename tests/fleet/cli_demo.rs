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
