#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The container image, built and run on this machine without any registry: `FROM scratch`
//! (Containerfile.local) through scripts/image.sh, with podman (or docker). It is built from
//! the release binary (`cargo build --release`, a no-op when scripts/test.sh has just made
//! it), runs `check-config` on a mounted fleet.toml, serves `/healthz` as the hub, runs as
//! user 65532 and stays small.
//!
//! Nothing here skips itself: without a container engine scripts/image.sh fails, naming the
//! Debian packages to install (scripts/test.sh installs them under CI=true).

use crate::tempdir_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use tempdir_support::TempDir;

/// The image's size as the engine reports it (uncompressed layers). Measured with podman
/// 4.3 on Debian 12: 41.2 MB (41,207,358 bytes: the binary without its debug info 37.8 MB,
/// glibc with libm, libgcc_s and the loader 3.2 MB, the CA bundle 0.2 MB). The bound leaves
/// room for the binary to grow (it grew 4 MB in the hour this was written), and catches an
/// image that would carry the debug info (the unstripped binary alone is 163 MB) or
/// anything it does not need.
const MAX_IMAGE_BYTES: u64 = 64_000_000;

/// The user of the image and of its processes: distroless' nonroot.
const NONROOT: &str = "65532";

fn script(args: &[&str]) -> Output {
    Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/image.sh"))
        .args(args)
        .output()
        .expect("run scripts/image.sh")
}

/// Runs scripts/image.sh and returns its standard output; any failure fails the test with
/// what the script said (a missing engine names the package to install).
fn ok(args: &[&str]) -> String {
    let o = script(args);
    assert!(
        o.status.success(),
        "scripts/image.sh {} failed ({}):\n{}{}",
        args.join(" "),
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Removes what the test made, the container and the image, however it ends.
struct Cleanup {
    tag: String,
    container: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        clean(&self.tag, &self.container);
    }
}

fn clean(tag: &str, container: &str) {
    let o = script(&["clean", "--tag", tag, "--name", container]);
    if !o.status.success() {
        eprintln!(
            "cleaning up {container} and {tag}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One plain HTTP/1.1 GET: the status code and the body, or None if nothing answers yet.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let addr = ([127, 0, 0, 1], port).into();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let status = raw.split(' ').nth(1)?.parse().ok()?;
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((status, body))
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_image_builds_without_a_registry_checks_config_and_serves_healthz_as_non_root() {
    let id = std::process::id();
    let tag = format!("fleetscaler:{}-test-{id}", env!("CARGO_PKG_VERSION"));
    let container = format!("fleetscaler-image-test-{id}");
    // Removed now (a run killed before its cleanup, with the same process id, would have
    // left them) and when the test ends.
    clean(&tag, &container);
    let _cleanup = Cleanup {
        tag: tag.clone(),
        container: container.clone(),
    };

    // Built: the release binary, then the image, with no registry.
    let started = Instant::now();
    assert_eq!(ok(&["build", "--tag", &tag]).trim(), tag);
    eprintln!("image {tag} built in {:.1?}", started.elapsed());

    // Its configuration: non-root, small, the binary as entrypoint.
    let inspect = ok(&["inspect", "--tag", &tag]);
    let field = |key: &str| {
        inspect
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {key} in {inspect}"))
            .to_owned()
    };
    let user = field("user");
    assert!(
        user == NONROOT || user.starts_with(&format!("{NONROOT}:")),
        "the image's user is {user:?}, not {NONROOT} (non-root)"
    );
    let size: u64 = field("size").parse().unwrap();
    eprintln!("image size: {size} bytes");
    assert!(
        size < MAX_IMAGE_BYTES,
        "the image is {size} bytes, over the bound of {MAX_IMAGE_BYTES}"
    );
    assert_eq!(field("entrypoint"), r#"["/fleetscaler"]"#);

    // Its files: the binary (root's, not writable by the user it runs as), the libraries it
    // links and the loader, users, CA certificates, and nothing else.
    let listing = ok(&["files", "--tag", &tag]);
    let mut files = Vec::new();
    for line in listing.lines().filter(|l| !l.starts_with('d')) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (mode, owner, path) = (fields[0], fields[1], *fields.last().unwrap());
        let path = path.trim_start_matches("./");
        let library =
            (path.starts_with("lib/") || path.starts_with("lib64/")) && path.contains(".so");
        assert!(
            library
                || [
                    "fleetscaler",
                    "etc/passwd",
                    "etc/group",
                    "etc/ssl/certs/ca-certificates.crt"
                ]
                .contains(&path),
            "unexpected file in the image: {line}"
        );
        assert!(
            owner.starts_with("root/") || owner.starts_with("0/"),
            "{path} is not root's: {line}"
        );
        assert!(
            !mode[4..].contains('w') || mode.starts_with('l'),
            "{path} is writable by others than root: {line}"
        );
        files.push(path.to_owned());
    }
    for want in [
        "fleetscaler",
        "lib64/ld-linux-x86-64.so.2",
        "etc/passwd",
        "etc/group",
        "etc/ssl/certs/ca-certificates.crt",
    ] {
        assert!(
            files.iter().any(|f| f == want),
            "{want} missing in the image:\n{listing}"
        );
    }
    assert!(
        files.iter().any(|f| f.contains("libc.so")),
        "no libc in the image:\n{listing}"
    );

    // check-config on a mounted fleet.toml: a valid one passes, a misspelt key is refused by
    // name. The kubeconfig beside it is /etc/fleetscaler/kubeconfig.yaml in the container.
    let dir = TempDir::new("image");
    // The container's user reads the mounted files.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // A cluster that is not there: connections to it are refused at once.
    write(
        &dir.path().join("kubeconfig.yaml"),
        "apiVersion: v1\nkind: Config\nclusters: [{name: east, cluster: {server: \"https://127.0.0.1:1\"}}]\nusers: [{name: east, user: {token: t}}]\ncontexts: [{name: east, context: {cluster: east, user: east}}]\ncurrent-context: east\n",
    );
    let fleet = dir.path().join("fleet.toml");
    write(
        &fleet,
        "[hub]\nkubeconfigs = [\"/etc/fleetscaler/kubeconfig.yaml\"]\n\n[[clusters]]\nname = \"east\"\n",
    );
    let bad = dir.path().join("bad.toml");
    write(
        &bad,
        "[defaults]\nscale_down_unneded_time = \"10m\"\n\n[[clusters]]\nname = \"east\"\n",
    );
    for f in ["kubeconfig.yaml", "fleet.toml", "bad.toml"] {
        std::fs::set_permissions(dir.path().join(f), std::fs::Permissions::from_mode(0o644))
            .unwrap();
    }
    let fleet = fleet.display().to_string();
    let valid = ok(&["run-check", "--tag", &tag, &fleet]);
    assert!(
        valid.starts_with("/etc/fleetscaler/fleet.toml: valid, 1 cluster(s)"),
        "{valid}"
    );
    assert!(valid.contains("cluster east (context east"), "{valid}");
    let refused = script(&["run-check", "--tag", &tag, &bad.display().to_string()]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "defaults.scale_down_unneded_time: unknown setting `scale_down_unneded_time`; did you mean `scale_down_unneeded_time`?"
        ),
        "the error does not name the key: {err}"
    );

    // The hub: up, answering /healthz on the host within the deadline, its cluster
    // unreachable; its process runs as 65532 with no capability.
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    ok(&[
        "run-hub", "--tag", &tag, "--name", &container, "--listen", &listen, &fleet,
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match get(port, "/healthz") {
            Some((200, body)) => {
                assert_eq!(body.trim(), "ok");
                break;
            }
            answer => {
                let state = ok(&["state", &container]);
                assert!(
                    state.trim() == "running" && Instant::now() < deadline,
                    "no 200 from /healthz on {listen} (last answer {answer:?}, container {}):\n{}",
                    state.trim(),
                    ok(&["logs", &container])
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    let (status, fleet_json) = get(port, "/api/v1/fleet").expect("the fleet API answers");
    assert_eq!(status, 200, "{fleet_json}");
    assert!(fleet_json.contains("\"east\""), "{fleet_json}");

    let pid = ok(&["pid", &container]);
    let proc_status = std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap();
    let line = |key: &str| {
        proc_status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(line("Uid:"), [NONROOT; 4], "{proc_status}");
    assert_eq!(line("Gid:"), [NONROOT; 4], "{proc_status}");
    assert_eq!(line("CapEff:"), ["0000000000000000"], "{proc_status}");

    // SIGTERM: the hub, PID 1 of its container, stops cleanly.
    let code = ok(&["stop", &container]);
    let logs = ok(&["logs", &container]);
    assert_eq!(code.trim(), "0", "exit status after SIGTERM:\n{logs}");
    assert!(logs.contains("stopped"), "{logs}");
}
