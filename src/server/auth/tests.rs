use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use http::Request;
use http_body_util::BodyExt;

use super::*;

/// Tokens and what they may read, and how often each review was asked.
#[derive(Default)]
struct Table {
    users: BTreeMap<&'static str, &'static str>,
    /// (user, path) allowed.
    allowed: Vec<(&'static str, &'static str)>,
    down: Mutex<bool>,
    token_reviews: AtomicUsize,
    access_reviews: AtomicUsize,
    asked: Mutex<Vec<(String, String)>>,
}

impl Reviews for Arc<Table> {
    async fn token(&self, token: &str) -> Result<Option<User>, ReviewError> {
        self.token_reviews.fetch_add(1, Ordering::SeqCst);
        if *self.down.lock().unwrap() {
            return Err(ReviewError("connection refused".into()));
        }
        Ok(self.users.get(token).map(|name| User {
            name: name.to_string(),
            uid: format!("uid-{name}"),
            groups: vec!["system:authenticated".into()],
            extra: BTreeMap::new(),
        }))
    }

    async fn access(&self, user: &User, verb: &str, path: &str) -> Result<bool, ReviewError> {
        self.access_reviews.fetch_add(1, Ordering::SeqCst);
        if *self.down.lock().unwrap() {
            return Err(ReviewError("connection refused".into()));
        }
        self.asked
            .lock()
            .unwrap()
            .push((verb.to_string(), path.to_string()));
        Ok(self
            .allowed
            .iter()
            .any(|(u, p)| *u == user.name && *p == path))
    }
}

fn table() -> Arc<Table> {
    Arc::new(Table {
        users: BTreeMap::from([("prom-token", "prometheus"), ("alice-token", "alice")]),
        allowed: vec![
            ("prometheus", "/metrics"),
            ("alice", "/fleetscaler/"),
            ("alice", "/fleetscaler/api/v1/fleet"),
        ],
        ..Table::default()
    })
}

fn parts(method: &str, path: &str, authorization: Option<&str>) -> Parts {
    let mut b = Request::builder().method(method).uri(path);
    if let Some(a) = authorization {
        b = b.header(header::AUTHORIZATION, a);
    }
    b.body(()).unwrap().into_parts().0
}

async fn check(gate: &Gate<Arc<Table>>, path: &str, auth: Option<&str>) -> (u16, String) {
    match gate.check(&parts("GET", path, auth)).await {
        Ok(()) => (200, String::new()),
        Err(r) => {
            let status = r.status().as_u16();
            let body = r.into_body().collect().await.unwrap().to_bytes();
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    }
}

#[tokio::test]
async fn no_token_or_a_refused_one_is_401_and_a_denied_path_403() {
    let t = table();
    let gate = Gate::new(t.clone());
    let (status, body) = check(&gate, "/metrics", None).await;
    assert_eq!(
        (status, body.contains("no bearer token")),
        (401, true),
        "{body}"
    );
    let (status, _) = check(&gate, "/metrics", Some("Basic cHJvbTp4")).await;
    assert_eq!(status, 401, "only bearer tokens");
    let (status, body) = check(&gate, "/metrics", Some("Bearer stolen")).await;
    assert_eq!(
        (status, body.contains("not accepted")),
        (401, true),
        "{body}"
    );
    let (status, body) = check(&gate, "/api/v1/fleet", Some("Bearer prom-token")).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("\"prometheus\" may not get /api/v1/fleet"),
        "{body}"
    );
    assert!(
        body.contains("/fleetscaler/api/v1/fleet"),
        "the URL RBAC is asked: {body}"
    );
    assert_eq!(
        check(&gate, "/metrics", Some("bearer prom-token")).await.0,
        200
    );
    assert_eq!(
        t.token_reviews.load(Ordering::SeqCst),
        2,
        "each token reviewed once"
    );
}

#[tokio::test]
async fn answers_are_cached_and_the_dashboard_is_checked_as_one_url() {
    let t = table();
    let gate = Gate::new(t.clone());
    for path in ["/", "/index.html", "/dashboard/app.js", "/favicon.ico", "/"] {
        assert_eq!(
            check(&gate, path, Some("Bearer alice-token")).await.0,
            200,
            "{path}"
        );
    }
    for _ in 0..3 {
        assert_eq!(
            check(&gate, "/metrics", Some("Bearer alice-token")).await.0,
            403
        );
        assert_eq!(check(&gate, "/metrics", Some("Bearer nope")).await.0, 401);
    }
    assert_eq!(
        t.token_reviews.load(Ordering::SeqCst),
        2,
        "alice's and nope's"
    );
    assert_eq!(
        *t.asked.lock().unwrap(),
        [
            ("get".to_string(), "/fleetscaler/".to_string()),
            ("get".into(), "/metrics".into())
        ],
        "one review per question, as get"
    );
}

#[tokio::test]
async fn head_is_checked_as_get() {
    let t = table();
    let gate = Gate::new(t.clone());
    let r = gate
        .check(&parts("HEAD", "/metrics", Some("Bearer prom-token")))
        .await;
    assert!(r.is_ok());
    assert_eq!(t.asked.lock().unwrap()[0].0, "get");
}

#[tokio::test]
async fn a_failing_review_is_503_and_not_remembered() {
    let t = table();
    let gate = Gate::new(t.clone());
    *t.down.lock().unwrap() = true;
    let (status, body) = check(&gate, "/metrics", Some("Bearer prom-token")).await;
    assert_eq!(status, 503, "{body}");
    *t.down.lock().unwrap() = false;
    assert_eq!(
        check(&gate, "/metrics", Some("Bearer prom-token")).await.0,
        200
    );
    assert_eq!(t.token_reviews.load(Ordering::SeqCst), 2, "asked again");
}

/// The API's paths are Kubernetes' discovery URLs, which every authenticated user may get:
/// RBAC is asked about them under /fleetscaler; /metrics stays itself.
#[test]
fn rbac_is_asked_about_the_hubs_own_urls() {
    for (path, asked) in [
        ("/metrics", "/metrics"),
        ("/api/v1/fleet", "/fleetscaler/api/v1/fleet"),
        (
            "/api/v1/clusters/a/plan",
            "/fleetscaler/api/v1/clusters/a/plan",
        ),
        ("/", "/fleetscaler/"),
        ("/dashboard/app.js", "/fleetscaler/"),
        ("/livez", "/fleetscaler/livez"),
        ("/metrics/", "/fleetscaler/metrics/"),
    ] {
        assert_eq!(rbac_path(path), asked, "{path}");
    }
}

#[test]
fn the_cache_keeps_a_digest_of_the_token() {
    let key = token_key("secret-token");
    assert_eq!(key.len(), 32);
    assert_ne!(&*key, b"secret-token".as_slice());
    assert_eq!(key, token_key("secret-token"));
    assert_ne!(key, token_key("secret-tokem"));
}
