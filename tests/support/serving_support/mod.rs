//! For the tests of the hub's serving (tests/fleet/hub_serving.rs, tests/fleet/helm_chart.rs): a fake
//! management API server answering TokenReview and SubjectAccessReview (the simulated
//! fleet's API server serves neither), test certificates from a CA of their own, and a
//! client that speaks raw HTTP/1.1 over TLS or plain TCP, so every status, header and
//! refusal is seen as it is.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use fleetscaler::sim::api::audit::RequestRecord;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// The token the hub presents to the fake management cluster.
pub const HUB_TOKEN: &str = "hub-token";

/// A user as the fake TokenReview names them.
#[derive(Clone, Debug)]
pub struct Subject {
    pub user: String,
    pub groups: Vec<String>,
}

/// Whether `subject` may `verb` the non-resource URL `path`.
pub type Decide = Arc<dyn Fn(&Subject, &str, &str) -> bool + Send + Sync>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Up,
    /// Every review answered 500.
    Failing,
    /// Every review left unanswered.
    Hanging,
}

/// One review the hub asked for.
#[derive(Clone, Debug)]
pub struct Call {
    /// `tokenreviews` or `subjectaccessreviews`.
    pub resource: String,
    pub method: String,
    /// The hub's own credential, as sent.
    pub authorization: Option<String>,
    pub body: Value,
}

struct State {
    tokens: BTreeMap<String, Subject>,
    decide: Decide,
    mode: Mutex<Mode>,
    calls: Mutex<Vec<Call>>,
}

pub struct ReviewApi {
    pub addr: SocketAddr,
    state: Arc<State>,
    cancel: CancellationToken,
}

impl ReviewApi {
    /// Serves on a free loopback port: `tokens` maps a token to its user and groups.
    pub async fn start(tokens: &[(&str, &str, &[&str])], decide: Decide) -> ReviewApi {
        let state = Arc::new(State {
            tokens: tokens
                .iter()
                .map(|(t, user, groups)| {
                    let subject = Subject {
                        user: user.to_string(),
                        groups: groups.iter().map(|g| g.to_string()).collect(),
                    };
                    (t.to_string(), subject)
                })
                .collect(),
            decide,
            mode: Mutex::new(Mode::Up),
            calls: Mutex::new(Vec::new()),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cancel = CancellationToken::new();
        let (serving, stop) = (state.clone(), cancel.clone());
        tokio::spawn(async move {
            loop {
                let tcp = tokio::select! {
                    _ = stop.cancelled() => return,
                    a = listener.accept() => a.unwrap().0,
                };
                let (state, stop) = (serving.clone(), stop.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(answer(&state, req).await) }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service);
                    tokio::select! {
                        _ = conn => {}
                        _ = stop.cancelled() => {}
                    }
                });
            }
        });
        ReviewApi {
            addr,
            state,
            cancel,
        }
    }

    pub fn set_mode(&self, mode: Mode) {
        *self.state.mode.lock().unwrap() = mode;
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state.calls.lock().unwrap().clone()
    }

    pub fn count(&self, resource: &str) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.resource == resource)
            .count()
    }

    /// The calls as an authorizer sees them, for checking RBAC rules against.
    pub fn records(&self) -> Vec<RequestRecord> {
        let mut out: Vec<RequestRecord> = self
            .calls()
            .iter()
            .map(|c| RequestRecord {
                verb: if c.method == "POST" {
                    "create"
                } else {
                    "other"
                }
                .into(),
                api_group: match c.resource.as_str() {
                    "tokenreviews" => "authentication.k8s.io",
                    _ => "authorization.k8s.io",
                }
                .into(),
                resource: c.resource.clone(),
                subresource: String::new(),
                namespace: String::new(),
                name: String::new(),
                path: String::new(),
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// A kubeconfig whose `context` reaches this server as the hub, with [`HUB_TOKEN`].
    pub fn write_kubeconfig(&self, path: &Path, context: &str) {
        let text = format!(
            "apiVersion: v1\nkind: Config\n\
             clusters: [{{name: {context}, cluster: {{server: \"http://{}\"}}}}]\n\
             users: [{{name: hub, user: {{token: {HUB_TOKEN}}}}}]\n\
             contexts: [{{name: {context}, context: {{cluster: {context}, user: hub}}}}]\n\
             current-context: {context}\n",
            self.addr
        );
        std::fs::write(path, text).unwrap();
    }
}

impl Drop for ReviewApi {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

async fn answer(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body: Value = body
        .collect()
        .await
        .ok()
        .and_then(|b| serde_json::from_slice(&b.to_bytes()).ok())
        .unwrap_or(Value::Null);
    let resource = parts
        .uri
        .path()
        .rsplit('/')
        .next()
        .unwrap_or("")
        .to_string();
    state.calls.lock().unwrap().push(Call {
        resource: resource.clone(),
        method: parts.method.to_string(),
        authorization: parts
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(String::from),
        body: body.clone(),
    });
    let mode = *state.mode.lock().unwrap();
    match mode {
        Mode::Hanging => std::future::pending().await,
        Mode::Failing => {
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "etcdserver: request timed out", "code": 500});
            return reply(StatusCode::INTERNAL_SERVER_ERROR, status);
        }
        Mode::Up => {}
    }
    match (parts.method.as_str(), parts.uri.path()) {
        ("POST", "/apis/authentication.k8s.io/v1/tokenreviews") => {
            reply(StatusCode::CREATED, token_review(state, body))
        }
        ("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews") => {
            reply(StatusCode::CREATED, access_review(state, body))
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}),
        ),
    }
}

fn token_review(state: &State, mut review: Value) -> Value {
    let token = review["spec"]["token"].as_str().unwrap_or_default();
    review["status"] = match state.tokens.get(token) {
        Some(s) => json!({"authenticated": true, "user": {"username": s.user,
            "uid": format!("uid-{}", s.user), "groups": s.groups}, "audiences": ["api"]}),
        None => json!({"user": {}, "error": "invalid bearer token"}),
    };
    review
}

fn access_review(state: &State, mut review: Value) -> Value {
    let spec = &review["spec"];
    let subject = Subject {
        user: spec["user"].as_str().unwrap_or_default().to_string(),
        groups: spec["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g.as_str().map(String::from))
            .collect(),
    };
    let attrs = &spec["nonResourceAttributes"];
    let verb = attrs["verb"].as_str().unwrap_or_default();
    let path = attrs["path"].as_str().unwrap_or_default();
    let allowed = !path.is_empty() && (state.decide)(&subject, verb, path);
    review["status"] = json!({"allowed": allowed});
    review
}

fn reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

/// A CA of the test's own, and server certificates it signs.
pub struct TestCa {
    key: rcgen::KeyPair,
    params: rcgen::CertificateParams,
    pub der: CertificateDer<'static>,
}

impl TestCa {
    pub fn new() -> TestCa {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "fleetscaler test CA");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        let der = CertificateDer::from(cert.der().to_vec());
        TestCa { key, params, der }
    }

    /// A server certificate for 127.0.0.1 and localhost: (PEM chain, PEM key, its DER).
    pub fn server(&self, name: &str) -> (String, String, Vec<u8>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }

    /// Writes a server certificate into `dir` as tls.crt and tls.key, replacing the files
    /// as the kubelet does (new files renamed over the old); returns their paths and DER.
    pub fn write_server(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf, Vec<u8>) {
        let (cert, key, der) = self.server(name);
        let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
        for (path, text) in [(&c, cert), (&k, key)] {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, path).unwrap();
        }
        (c, k, der)
    }

    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        trusting(std::slice::from_ref(&self.der))
    }
}

/// A TLS client configuration that trusts `roots` only.
pub fn trusting(roots: &[CertificateDer<'static>]) -> Arc<rustls::ClientConfig> {
    let mut store = rustls::RootCertStore::empty();
    for r in roots {
        store.add(r.clone()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store)
        .with_no_client_auth();
    Arc::new(config)
}

/// An answer as read off the wire.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// `GET path` with `Connection: close` and, if given, the bearer token.
pub fn get_request(path: &str, token: Option<&str>) -> String {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!("GET {path} HTTP/1.1\r\nHost: hub\r\n{auth}Connection: close\r\n\r\n")
}

/// Sends `request` as is and reads the answer to the end.
pub async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    request: &[u8],
) -> std::io::Result<Answer> {
    stream.write_all(request).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let Some((head, body)) = raw.split_once("\r\n\r\n") else {
        return Err(std::io::Error::other(format!("no HTTP answer: {raw:?}")));
    };
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status: {head:?}")))?;
    Ok(Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    })
}

/// A TLS connection to `addr`, checking its certificate for 127.0.0.1 against `tls`.
pub async fn connect_tls(
    addr: SocketAddr,
    tls: &Arc<rustls::ClientConfig>,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::IpAddress(addr.ip().into());
    tokio_rustls::TlsConnector::from(tls.clone())
        .connect(name, tcp)
        .await
}

pub async fn https_get(
    addr: SocketAddr,
    tls: &Arc<rustls::ClientConfig>,
    path: &str,
    token: Option<&str>,
) -> Answer {
    let stream = connect_tls(addr, tls).await.unwrap();
    exchange(stream, get_request(path, token).as_bytes())
        .await
        .unwrap()
}

pub async fn http_get(addr: SocketAddr, path: &str) -> Answer {
    let tcp = TcpStream::connect(addr).await.unwrap();
    exchange(tcp, get_request(path, None).as_bytes())
        .await
        .unwrap()
}

/// `[hub.serving]` with TLS from `cert` and `key`, Kubernetes authentication through the
/// kubeconfig context `management`, and the probes on a free port.
pub fn secured(cert: PathBuf, key: PathBuf) -> fleetscaler::config::hub::ServingConfig {
    fleetscaler::config::hub::ServingConfig {
        tls_cert_file: Some(cert),
        tls_key_file: Some(key),
        authentication: fleetscaler::config::hub::Authentication::Kubernetes,
        context: Some("management".into()),
        probe_listen: "127.0.0.1:0".into(),
        ..Default::default()
    }
}
