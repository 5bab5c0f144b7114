#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `fleetscaler status` as a user runs it: the real binary against a real hub autoscaling
//! the simulated fleet (over HTTP and, through a TLS front, HTTPS), and against servers
//! that refuse, answer nonsense, never answer or are not there.

use crate::e2e_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use e2e_support::*;
use fleetscaler::engine::settings::SettingsPatch;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::Fleet;
use fleetscaler::sim::settings::Flavor;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const LONG: Duration = Duration::from_secs(60);

/// The binary, with none of the caller's `FLEETSCALER_*` variables.
fn fleetscaler(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleetscaler"));
    cmd.args(args)
        .env_remove("FLEETSCALER_SERVER")
        .env_remove("FLEETSCALER_TOKEN");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The same, off the test's runtime (the hub runs on it meanwhile).
async fn status(args: &[&str], env: &[(&str, &str)]) -> Output {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        fleetscaler(&args, &env)
    })
    .await
    .unwrap()
}

/// Fails with a message (exit status 2, no panic): its stderr.
fn failed(out: &Output) -> String {
    let stderr = lossy_text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    stderr
}

/// The hub's HTTP server on a free port.
async fn serve(hub: &Hub) -> SocketAddr {
    let listener = fleetscaler::server::bind("127.0.0.1:0", "--listen")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let cancel = hub.cancel.clone();
    tokio::spawn(fleetscaler::server::serve(listener, hub.view(), cancel));
    addr
}

async fn fleet_json(addr: SocketAddr) -> Option<Value> {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = "GET /api/v1/fleet HTTP/1.0\r\nHost: test\r\n\r\n";
    tcp.write_all(request.as_bytes()).await.ok()?;
    let mut raw = String::new();
    tcp.read_to_string(&mut raw).await.ok()?;
    serde_json::from_str(raw.split_once("\r\n\r\n")?.1).ok()
}

/// Every cluster has passed over all of its nodes with nothing pending, and sim-1 has
/// scaled up for the pods: from here on the numbers hold still (no load, scale-down
/// minutes away), so the binary's answer can be compared with the API's.
fn settled(api: &Value, fleet: &Fleet) -> bool {
    let Some(clusters) = api["clusters"].as_array() else {
        return false;
    };
    clusters.len() == fleet.clusters().len()
        && clusters.iter().zip(fleet.clusters()).all(|(c, sim)| {
            c["phase"] == "running"
                && c["lastPass"].is_object()
                && c["pendingPods"] == 0
                && c["readyNodes"] == c["nodes"]
                && c["nodes"] == sim.list(Resource::Nodes).len()
        })
        && clusters[0]["recent"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
        && running(&pods(&fleet.clusters()[0], "web")) == 8
}

/// `NAME HEALTH NODES PENDING GROUPS AGE WHAT...` of the row naming `name` (numbers are
/// plain once settled: nothing unready or stuck).
fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row for {name}:\n{table}"));
    line.split_whitespace().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_every_cluster_of_a_running_hub() {
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let dir = TempDir::new("cli-status");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), SettingsPatch::default())).await;
    let addr = serve(&hub).await;
    let server = format!("http://{addr}");
    create_pods(&fleet.clusters()[0], "web", 8, "3").await;
    let sims = &fleet;
    let api = eventually(
        LONG,
        "both clusters settled, sim-1 scaled up",
        || async move {
            let api = fleet_json(addr).await?;
            settled(&api, sims).then_some(api)
        },
    )
    .await;

    let table = succeeded(&status(&["status", "--server", &server], &[]).await);
    let first = table.lines().next().unwrap();
    assert!(first.starts_with("fleet healthy for "), "{table}");
    assert!(first.contains("no leader election"), "{table}");
    for c in api["clusters"].as_array().unwrap() {
        let cells = row(&table, c["name"].as_str().unwrap());
        assert_eq!(cells[1], "healthy", "{table}");
        assert_eq!(cells[2], c["nodes"].to_string(), "{table}");
        assert!(c["nodes"].as_u64().unwrap() >= 2, "{c}");
        assert_eq!(cells[3], "0", "{table}");
        assert_eq!(cells[4], c["nodeGroups"].to_string(), "{table}");
        assert!(c["nodeGroups"].as_u64().unwrap() >= 1, "{c}");
    }
    // sim-1's last action: an age as kubectl writes one, then what was done.
    let sim1 = row(&table, "sim-1");
    let age = sim1[5];
    let unit = age.trim_start_matches(|c: char| c.is_ascii_digit());
    assert!(unit.starts_with('s') || unit.starts_with('m'), "{table}");
    assert!(sim1[6..].join(" ").contains("replicas"), "{table}");

    let json = status(&["status", "-o", "json", "--server", &server], &[]).await;
    let json: Value = serde_json::from_str(&succeeded(&json)).unwrap();
    assert_eq!(json["server"], server.as_str());
    assert_eq!(json["fleet"]["state"], "healthy");
    assert_eq!(json["hub"]["leaderElection"], false);
    assert_eq!(json["hub"]["leading"], true);
    let names: Vec<&Value> = json["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["name"])
        .collect();
    assert_eq!(names, ["sim-1", "sim-2"]);
    for (c, a) in json["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .zip(api["clusters"].as_array().unwrap())
    {
        assert_eq!(c["health"], "healthy", "{c}");
        assert_eq!(c["reason"], Value::Null, "{c}");
        assert_eq!(c["nodes"], a["nodes"], "{c}");
        assert_eq!(c["nodeGroups"], a["nodeGroups"], "{c}");
    }
    assert_eq!(json["clusters"][0]["lastAction"]["result"], "done");

    // The server from the environment, one cluster.
    let env = [("FLEETSCALER_SERVER", server.as_str())];
    let one = succeeded(&status(&["status", "--cluster", "sim-2"], &env).await);
    assert_eq!(one.lines().count(), 3, "{one}");
    row(&one, "sim-2");
    let err = failed(&status(&["status", "--cluster", "nope"], &env).await);
    assert!(err.contains("no cluster named \"nope\""), "{err}");
    assert!(err.contains("sim-1, sim-2"), "{err}");

    https(addr, dir.path()).await;
    hub.stop().await;
    fleet.shutdown().await;
}

/// The same hub behind TLS: trusted through `SSL_CERT_FILE`, refused without it.
async fn https(hub: SocketAddr, dir: &std::path::Path) {
    let creds = fleetscaler::sim::tls::credentials("status-test").unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &creds.ca_pem).unwrap();
    let front = tls_front(hub, creds.server_config).await;
    let server = format!("https://{front}");
    let ca = ca.to_str().unwrap();
    let trusted = [("SSL_CERT_FILE", ca)];
    let out = status(&["status", "-o", "json", "-s", &server], &trusted).await;
    let json: Value = serde_json::from_str(&succeeded(&out)).unwrap();
    assert_eq!(json["clusters"].as_array().map(Vec::len), Some(2), "{json}");

    let err = failed(&status(&["status", "-s", &server], &[]).await);
    assert!(
        err.contains(&format!("cannot reach the hub at {server}/api/v1/fleet")),
        "{err}"
    );
    assert!(err.contains("certificate"), "{err}");
}

/// TLS in front of `backend`, with the given server certificate.
async fn tls_front(backend: SocketAddr, config: Arc<rustls::ServerConfig>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    addr
}

#[test]
fn an_unreachable_hub_is_named_with_its_url() {
    // A port that was free a moment ago: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!("http://127.0.0.1:{port}");
    let err = failed(&fleetscaler(&["status", "--server", &server], &[]));
    assert!(
        err.contains(&format!("cannot reach the hub at {server}/api/v1/fleet")),
        "{err}"
    );
    assert!(err.contains("refused"), "{err}");
    let err = failed(&fleetscaler(&["status", "--server", "hub:8080"], &[]));
    assert!(err.contains("not an http:// or https:// URL"), "{err}");
}

/// A one-request server: answers `response` (or, when `None`, holds the connection until
/// the client gives up) and hands back the request it read.
fn fake_hub(response: Option<String>) -> (String, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (mut tcp, _) = listener.accept().unwrap();
        let head = read_head(&mut tcp);
        match response {
            Some(r) => tcp.write_all(r.as_bytes()).unwrap(),
            // Returns when the client closes the connection.
            None => while tcp.read(&mut [0; 64]).is_ok_and(|n| n > 0) {},
        }
        head
    });
    (server, handle)
}

fn read_head(tcp: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && tcp.read(&mut byte).is_ok_and(|n| n == 1) {
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

fn answer(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[test]
fn the_token_is_sent_and_a_refusal_is_quoted() {
    let (server, request) = fake_hub(Some(answer("401 Unauthorized", "token required\n")));
    let env = [
        ("FLEETSCALER_SERVER", server.as_str()),
        ("FLEETSCALER_TOKEN", "s3cret"),
    ];
    let err = failed(&fleetscaler(&["status"], &env));
    assert!(
        err.contains(&format!(
            "the hub at {server}/api/v1/fleet answered 401 Unauthorized: token required"
        )),
        "{err}"
    );
    assert!(!err.contains("no token was sent"), "{err}");
    let request = request.join().unwrap().to_ascii_lowercase();
    assert!(
        request.starts_with("get /api/v1/fleet http/1.1\r\n"),
        "{request}"
    );
    assert!(
        request.contains("\r\nauthorization: bearer s3cret\r\n"),
        "{request}"
    );

    let (server, _) = fake_hub(Some(answer("403 Forbidden", "")));
    let err = failed(&fleetscaler(&["status", "-s", &server], &[]));
    assert!(
        err.contains("answered 403 Forbidden: (empty body) (no token was sent"),
        "{err}"
    );
}

#[test]
fn an_answer_that_is_not_the_fleet_names_the_field() {
    let body = r#"{"clusters": [{"name": "a", "phase": "running", "since": "2025-01-01T00:00:00Z",
        "nodes": "many", "pendingPods": 0, "nodeGroups": 1}]}"#;
    let (server, _) = fake_hub(Some(answer("200 OK", body)));
    let err = failed(&fleetscaler(&["status", "-s", &server], &[]));
    assert!(
        err.contains("is not the fleet's JSON: at clusters[0].nodes: invalid type"),
        "{err}"
    );
}

#[test]
fn a_hub_that_never_answers_meets_the_deadline() {
    let (server, request) = fake_hub(None);
    let err = failed(&fleetscaler(
        &["status", "-s", &server, "--timeout", "1s"],
        &[],
    ));
    assert!(
        err.contains(&format!(
            "no complete answer from the hub at {server}/api/v1/fleet within 1s"
        )),
        "{err}"
    );
    // The fake hub saw the request, then the client hang up.
    assert!(request.join().unwrap().starts_with("GET /api/v1/fleet"));
}
