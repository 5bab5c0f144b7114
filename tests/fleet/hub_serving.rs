#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The hub's serving as fleet.toml's `[hub.serving]` sets it, end to end: a hub on the
//! simulated fleet, its main port over HTTPS (a test CA's certificate) behind Kubernetes
//! authentication and authorization, asked of a fake management API server that answers
//! TokenReview and SubjectAccessReview from a table (tests/support/serving_support); the probes
//! plain on their own port; the caps on connections and request sizes; the certificate
//! re-read when its files change; and `fleetscaler run` serving all this from its file.

use crate::e2e_support;
use crate::serving_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use e2e_support::*;
use fleetscaler::config::FleetConfig;
use fleetscaler::config::hub::ServingConfig;
use fleetscaler::server::Endpoints;
use fleetscaler::sim::fleet::Fleet;
use fleetscaler::sim::settings::Flavor;
use serving_support::*;
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

const PROMETHEUS: &str = "system:serviceaccount:monitoring:prometheus";

/// Prometheus reads /metrics; alice (in group platform) reads everything; bob is known to
/// the cluster but granted nothing.
fn tokens() -> Vec<(&'static str, &'static str, &'static [&'static str])> {
    vec![
        ("prom-token", PROMETHEUS, &["system:serviceaccounts"]),
        (
            "alice-token",
            "alice",
            &["platform", "system:authenticated"],
        ),
        ("bob-token", "bob", &["system:authenticated"]),
    ]
}

/// RBAC as the ClusterRoles of docs/hub.md would grant it.
fn decide() -> Decide {
    Arc::new(|s: &Subject, verb: &str, path: &str| {
        let viewer = s.groups.iter().any(|g| g == "platform")
            && (path.starts_with("/fleetscaler/") || path == "/metrics");
        let scraper = s.user == PROMETHEUS && path == "/metrics";
        verb == "get" && (viewer || scraper)
    })
}

/// A hub serving as the chart does (also for tests/fleet/hub_serving_limits.rs).
pub(crate) struct Served {
    fleet: Fleet,
    hub: Hub,
    pub(crate) review: ReviewApi,
    pub(crate) endpoints: Endpoints,
    pub(crate) tls: Arc<rustls::ClientConfig>,
    ca: TestCa,
    dir: TempDir,
    cancel: CancellationToken,
}

impl Served {
    pub(crate) async fn get(&self, path: &str, token: Option<&str>) -> Answer {
        https_get(self.endpoints.main, &self.tls, path, token).await
    }

    pub(crate) async fn stop(self) {
        self.cancel.cancel();
        self.hub.stop().await;
        self.fleet.shutdown().await;
    }
}

/// A hub on one simulated cluster, serving with TLS and Kubernetes authentication; `tune`
/// changes the serving settings first.
pub(crate) async fn served(tune: impl FnOnce(&mut ServingConfig)) -> Served {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let dir = TempDir::new("serving");
    let review = ReviewApi::start(&tokens(), decide()).await;
    let management = dir.path().join("management.kubeconfig");
    review.write_kubeconfig(&management, "management");
    let ca = TestCa::new();
    let (cert, key, _) = ca.write_server(dir.path(), "hub");
    let mut config: FleetConfig = fleet_config(&fleet, dir.path(), fast_settings());
    config.hub.kubeconfigs.push(management);
    config.hub.serving = serving_support::secured(cert, key);
    tune(&mut config.hub.serving);
    let hub = Hub::start(config.clone()).await;
    let cancel = CancellationToken::new();
    let listener = fleetscaler::server::bind("127.0.0.1:0", "--listen")
        .await
        .unwrap();
    let endpoints = fleetscaler::server::start(&config.hub, listener, hub.view(), cancel.clone())
        .await
        .unwrap();
    let tls = ca.client_config();
    Served {
        fleet,
        hub,
        review,
        endpoints,
        tls,
        ca,
        dir,
        cancel,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_and_metrics_answer_only_the_users_rbac_allows_over_https() {
    let s = served(|_| {}).await;
    assert!(s.endpoints.https);
    let probes = s
        .endpoints
        .probes
        .expect("a probe port, the main one being secured");

    // Plain HTTP on the HTTPS port: refused with a 400 that says so, nothing served.
    let plain = http_get(s.endpoints.main, "/api/v1/fleet").await;
    assert_eq!(plain.status, 400, "{plain:?}");
    assert!(plain.body.contains("HTTPS"), "{plain:?}");

    let what_if = "/api/v1/what-if?set=max_nodes_total=3";
    for path in [
        "/api/v1/fleet",
        "/metrics",
        "/",
        "/api/v1/clusters/sim-1",
        what_if,
    ] {
        let none = s.get(path, None).await;
        assert_eq!(none.status, 401, "{path} without a token: {none:?}");
        assert!(none.body.contains("no bearer token"), "{none:?}");
        assert_eq!(
            none.header("www-authenticate").as_deref(),
            Some("Bearer realm=\"fleetscaler\"")
        );
        let stolen = s.get(path, Some("stolen")).await;
        assert_eq!(
            stolen.status, 401,
            "{path} with a refused token: {stolen:?}"
        );
        let bob = s.get(path, Some("bob-token")).await;
        assert_eq!(bob.status, 403, "{path} for bob: {bob:?}");
        assert!(bob.body.contains("\"bob\" may not get"), "{bob:?}");
    }

    // Prometheus scrapes /metrics, and nothing else.
    let metrics = s.get("/metrics", Some("prom-token")).await;
    assert_eq!(metrics.status, 200, "{metrics:?}");
    assert!(
        metrics.body.contains("fleetscaler_fleet_degraded"),
        "{}",
        metrics.body
    );
    assert_eq!(s.get("/api/v1/fleet", Some("prom-token")).await.status, 403);

    // A person of the platform group: the API's JSON and the dashboard.
    let fleet = eventually(
        Duration::from_secs(30),
        "the fleet's JSON with sim-1",
        || {
            let s = &s;
            async move {
                let a = s.get("/api/v1/fleet", Some("alice-token")).await;
                assert_eq!(a.status, 200, "{a:?}");
                let json = a.json();
                (json["clusters"][0]["name"] == "sim-1").then_some(json)
            }
        },
    )
    .await;
    assert!(fleet["hub"]["started"].is_string(), "{fleet}");
    let page = s.get("/", Some("alice-token")).await;
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert_eq!(
        s.get("/dashboard/app.js", Some("alice-token")).await.status,
        200
    );
    // The what-if is the API's too: alice may ask it, prometheus may not.
    let answer = s.get(what_if, Some("alice-token")).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["clusters"][0]["name"], "sim-1");
    assert_eq!(s.get(what_if, Some("prom-token")).await.status, 403);

    // The probes: plain HTTP on their own port, no token; nothing else there.
    assert_eq!(http_get(probes, "/livez").await.status, 200);
    eventually(
        Duration::from_secs(30),
        "/readyz 200 on the probe port",
        || async move { (http_get(probes, "/readyz").await.status == 200).then_some(()) },
    )
    .await;
    assert_eq!(http_get(probes, "/healthz").await.status, 200);
    let other = http_get(probes, "/api/v1/fleet").await;
    assert_eq!(other.status, 404, "{other:?}");

    // What the hub asked: with its own credential, each token once (answers are cached),
    // and each access as a non-resource URL with verb get.
    let calls = s.review.calls();
    assert!(
        calls
            .iter()
            .all(|c| c.authorization.as_deref() == Some(&format!("Bearer {HUB_TOKEN}")[..])),
        "{calls:?}"
    );
    let reviewed = |token: &str| {
        calls
            .iter()
            .filter(|c| c.resource == "tokenreviews" && c.body["spec"]["token"] == token)
            .count()
    };
    assert_eq!(reviewed("prom-token"), 1, "{calls:?}");
    assert_eq!(reviewed("bob-token"), 1, "{calls:?}");
    let dashboard_reviews: Vec<&Call> = calls
        .iter()
        .filter(|c| c.resource == "subjectaccessreviews")
        .filter(|c| c.body["spec"]["user"] == "alice")
        .filter(|c| c.body["spec"]["nonResourceAttributes"]["path"] == "/fleetscaler/")
        .collect();
    assert_eq!(
        dashboard_reviews.len(),
        1,
        "the page and its assets are checked as /fleetscaler/"
    );
    assert_eq!(
        dashboard_reviews[0].body["spec"]["nonResourceAttributes"]["verb"],
        "get"
    );
    assert_eq!(
        dashboard_reviews[0].body["spec"]["groups"],
        serde_json::json!(["platform", "system:authenticated"])
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_that_fails_or_hangs_is_503_and_the_next_request_asks_again() {
    let s = served(|c| c.request_timeout = Duration::from_secs(3)).await;
    s.review.set_mode(Mode::Failing);
    let failed = s.get("/metrics", Some("prom-token")).await;
    assert_eq!(failed.status, 503, "{failed:?}");
    assert!(failed.body.contains("try again"), "{failed:?}");

    // Unanswered: the request's deadline ends it (hub.request_timeout, 2 s, ends the call).
    s.review.set_mode(Mode::Hanging);
    let started = std::time::Instant::now();
    let hung = s.get("/metrics", Some("prom-token")).await;
    assert_eq!(hung.status, 503, "{hung:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    s.review.set_mode(Mode::Up);
    assert_eq!(s.get("/metrics", Some("prom-token")).await.status, 200);
    s.stop().await;
}

/// Over the cap, a new connection is served and the one that has waited longest without an
/// authenticated request is closed for it (tests/fleet/hub_serving_limits.rs floods it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_cap_the_connection_waiting_longest_is_closed_for_a_new_one() {
    let s = served(|c| c.max_connections = 2).await;
    // Two connections, handshaken (so the hub has accepted them) and silent.
    let mut first = connect_tls(s.endpoints.main, &s.tls).await.unwrap();
    let second = connect_tls(s.endpoints.main, &s.tls).await.unwrap();
    // A third is served, and the first closed at once (not after the 5 s a head is given).
    let third = connect_tls(s.endpoints.main, &s.tls).await.unwrap();
    let mut sink = [0u8; 64];
    let closed = tokio::time::timeout(Duration::from_secs(2), first.read(&mut sink)).await;
    assert!(
        matches!(closed, Ok(Ok(0) | Err(_))),
        "the first connection is still open: {closed:?}"
    );
    // The later two are served.
    for stream in [second, third] {
        let request = get_request("/metrics", Some("prom-token"));
        let answer = exchange(stream, request.as_bytes()).await.unwrap();
        assert_eq!(answer.status, 200);
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_requests_are_refused_before_any_review() {
    let s = served(|c| {
        c.max_request_header_bytes = 4096;
        c.max_request_body_bytes = 16;
    })
    .await;
    let send = |request: Vec<u8>| {
        let s = &s;
        async move {
            let stream = connect_tls(s.endpoints.main, &s.tls).await.unwrap();
            exchange(stream, &request).await.unwrap()
        }
    };
    let long = format!(
        "GET /metrics HTTP/1.1\r\nHost: hub\r\nX-Padding: {}\r\nConnection: close\r\n\r\n",
        "x".repeat(8192)
    );
    assert_eq!(send(long.into_bytes()).await.status, 431);
    // A declared body over the cap: refused at once, the body never read.
    let declared = "GET /metrics HTTP/1.1\r\nHost: hub\r\nContent-Length: 100000\r\n\r\n";
    let a = send(declared.as_bytes().to_vec()).await;
    assert_eq!(a.status, 413, "{a:?}");
    assert_eq!(a.header("connection").as_deref(), Some("close"));
    // A chunked body over the cap: read up to the cap only.
    let chunked = format!(
        "GET /metrics HTTP/1.1\r\nHost: hub\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n{}\r\n0\r\n\r\n",
        "y".repeat(64)
    );
    assert_eq!(send(chunked.into_bytes()).await.status, 413);
    // A small body is let through (and ignored); then access decides as ever.
    let small =
        "GET /metrics HTTP/1.1\r\nHost: hub\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi";
    assert_eq!(send(small.as_bytes().to_vec()).await.status, 401);
    let post =
        "POST /metrics HTTP/1.1\r\nHost: hub\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    assert_eq!(send(post.as_bytes().to_vec()).await.status, 405);
    assert_eq!(s.review.calls().len(), 0, "no review for a refused request");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_certificate_is_served_without_a_restart() {
    let s = served(|_| {}).await;
    let served_der = |s: &Served| {
        let (addr, tls) = (s.endpoints.main, s.tls.clone());
        async move {
            let stream = connect_tls(addr, &tls).await.unwrap();
            let (_, conn) = stream.get_ref();
            conn.peer_certificates().unwrap()[0].to_vec()
        }
    };
    let before = served_der(&s).await;
    let (_, _, renewed) = s.ca.write_server(s.dir.path(), "hub-renewed");
    assert_ne!(before, renewed);
    eventually(
        Duration::from_secs(10),
        "the renewed certificate served",
        || {
            let (s, renewed) = (&s, &renewed);
            async move { (served_der(s).await == *renewed).then_some(()) }
        },
    )
    .await;
    assert_eq!(s.get("/metrics", Some("prom-token")).await.status, 200);
    s.stop().await;
}

/// Without `[hub.serving]`: plain HTTP, no authentication, the probes on the same port, as
/// the hub always served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_the_hub_serves_plain_and_open_on_one_port() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let dir = TempDir::new("serving-default");
    let config = fleet_config(&fleet, dir.path(), fast_settings());
    let hub = Hub::start(config.clone()).await;
    let cancel = CancellationToken::new();
    let listener = fleetscaler::server::bind("127.0.0.1:0", "--listen")
        .await
        .unwrap();
    let e = fleetscaler::server::start(&config.hub, listener, hub.view(), cancel.clone())
        .await
        .unwrap();
    assert_eq!((e.https, e.probes), (false, None));
    assert_eq!(http_get(e.main, "/livez").await.status, 200);
    assert_eq!(http_get(e.main, "/metrics").await.status, 200);
    let fleet_json = http_get(e.main, "/api/v1/fleet").await;
    assert_eq!(fleet_json.status, 200);
    assert!(fleet_json.json()["hub"].is_object());
    cancel.cancel();
    hub.stop().await;
    fleet.shutdown().await;
}

/// A free loopback port (bound and let go: the hub binds it next).
pub(crate) fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A hub process, killed when dropped (a failed test leaves nothing running).
pub(crate) struct Running(pub(crate) std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `fleetscaler run` itself: `[hub.serving]` of its file decides how it serves; a
/// certificate it cannot read stops it at start, naming the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleetscaler_run_serves_as_its_file_says() {
    let dir = TempDir::new("serving-run");
    let review = ReviewApi::start(&tokens(), decide()).await;
    let management = dir.path().join("management.kubeconfig");
    review.write_kubeconfig(&management, "management");
    let ca = TestCa::new();
    let (cert, key, _) = ca.write_server(dir.path(), "hub");
    let (main, probes) = (free_port(), free_port());
    let file = dir.path().join("fleet.toml");
    let toml = |cert: &std::path::Path| {
        format!(
            "[hub]\nlisten = \"{main}\"\nkubeconfigs = [{management:?}]\n\
             [hub.serving]\ntls_cert_file = {cert:?}\ntls_key_file = {key:?}\n\
             authentication = \"kubernetes\"\ncontext = \"management\"\n\
             probe_listen = \"{probes}\"\n"
        )
    };
    std::fs::write(&file, toml(&cert)).unwrap();
    let hub = Running(
        std::process::Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
            .args(["run", "--config"])
            .arg(&file)
            .env("RUST_LOG", "warn")
            .spawn()
            .unwrap(),
    );
    eventually(
        Duration::from_secs(30),
        "the probe port ready",
        || async move {
            let tcp = tokio::net::TcpStream::connect(probes).await.ok()?;
            let a = exchange(tcp, get_request("/readyz", None).as_bytes())
                .await
                .ok()?;
            (a.status == 200).then_some(())
        },
    )
    .await;
    let tls = ca.client_config();
    assert_eq!(https_get(main, &tls, "/metrics", None).await.status, 401);
    assert_eq!(
        https_get(main, &tls, "/metrics", Some("prom-token"))
            .await
            .status,
        200
    );
    assert_eq!(
        http_get(main, "/metrics").await.status,
        400,
        "plain HTTP refused"
    );
    drop(hub);

    // A certificate that is not there: refused at start, the file named.
    std::fs::write(&file, toml(&dir.path().join("missing.crt"))).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
        .args(["run", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("missing.crt"), "{said}");
}
