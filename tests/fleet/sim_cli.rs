#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `fleetscaler sim` as a user runs it: it writes a kubeconfig whose contexts work, serves
//! the admin endpoint, and exits cleanly on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

fn http(addr: &str, method: &str, path: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: sim\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_command_serves_until_sigterm() {
    let dir = std::env::temp_dir().join(format!("fleetscaler-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
        .args([
            "sim",
            "--clusters",
            "2",
            "--nodes-per-group",
            "1",
            "--timing",
            "fast",
            "--flavor",
            "mixed",
            "--kubeconfig-out",
        ])
        .arg(&kc)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The banner ends with "running"; the admin address is on the "faults:" line.
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut admin = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.split("http://").nth(1) {
            admin = rest.split('/').next().unwrap().to_string();
        }
        if line.starts_with("running") {
            break;
        }
    }
    assert!(!admin.is_empty(), "no admin address printed");
    let yaml = std::fs::read_to_string(&kc).unwrap();
    for context in ["sim-1", "sim-2"] {
        let options = KubeConfigOptions {
            context: Some(context.into()),
            ..Default::default()
        };
        let config =
            Config::from_custom_kubeconfig(Kubeconfig::from_yaml(&yaml).unwrap(), &options)
                .await
                .unwrap();
        let nodes: Api<Node> = Api::all(Client::try_from(config).unwrap());
        assert_eq!(
            nodes
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len(),
            6,
            "{context}"
        );
    }
    let listed = http(&admin, "GET", "/clusters", "");
    assert!(
        listed.contains("\"sim-2\"") && listed.contains("ClusterApi"),
        "{listed}"
    );
    let set = http(
        &admin,
        "PUT",
        "/clusters/sim-1/faults",
        r#"{"errorRate": 1.0, "errorCode": 429}"#,
    );
    assert!(
        set.starts_with("HTTP/1.1 200") && set.contains("\"errorCode\":429"),
        "{set}"
    );
    let bad = http(
        &admin,
        "PUT",
        "/clusters/sim-1/faults",
        r#"{"errorRate": 3}"#,
    );
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
    let missing = http(&admin, "GET", "/clusters/sim-9/faults", "");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    let cleared = http(&admin, "DELETE", "/clusters/sim-1/faults", "");
    assert!(cleared.contains("\"errorRate\":0.0"), "{cleared}");

    // The shell's own `kill`: no procps needed.
    let status = Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", child.id())])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "sim exited with {exit:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
