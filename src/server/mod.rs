//! The hub's HTTP endpoints: health probes (`probes`), `/metrics` (the hub's metrics
//! snapshot, `FleetView::metrics`, encoded as Prometheus text), the fleet's JSON API
//! (`api`), read-only views of the runners' reports, and the dashboard page that reads that
//! API (`dashboard`).
//!
//! They are served as fleet.toml's `[hub.serving]` says (docs/hub.md, "Serving"): over
//! HTTPS when it names a certificate (`tls`, re-read when its files change), to the users
//! RBAC allows when it asks for Kubernetes authentication (`auth`), with a cap on
//! connections that slow or silent clients cannot fill (`slots`), on request sizes and time
//! (`conn`, `site`, `io`), and on answers: a plan's long lists cut to a page (`plan`, `trim`),
//! its default answer built once per pass and shared, the heavy answers built and held a few
//! at a time (`heavy`) and sent in chunks (`body`). A secured main port leaves the probes to a
//! plain port of their own, with slots of its own; otherwise they share the main one.

mod api;
mod auth;
mod body;
mod conn;
mod dashboard;
mod heavy;
mod io;
mod plan;
mod probes;
mod site;
mod slots;
mod throttle;
mod tls;
mod trim;
mod what_if;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use self::auth::Access;
pub use self::auth::AccessError;
use self::conn::Rules;
use self::site::{Probes, Site};
use self::throttle::Throttle;
pub use self::tls::TlsError;
use crate::config::{ConfigError, HubConfig};
use crate::hub::FleetView;

/// The kubelet and little else asks the probe port (a connection that does not send its
/// request is closed for a newcomer: `slots`).
const PROBE_CONNECTIONS: usize = 32;

#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}: {source}{}", taken_hint(.source, .setting))]
pub struct ListenError {
    pub addr: String,
    /// What chose the address (`--listen or hub.listen`), named when the port is taken.
    pub setting: &'static str,
    #[source]
    pub source: std::io::Error,
}

/// A port already in use is the first error a new user meets (a second `demo`, another
/// service on 8080): say how to choose another.
fn taken_hint(source: &std::io::Error, setting: &str) -> String {
    match source.kind() {
        std::io::ErrorKind::AddrInUse => {
            format!(" (another process holds it: choose another address with {setting})")
        }
        _ => String::new(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Listen(#[from] ListenError),
    #[error("hub.serving.tls_cert_file, tls_key_file: {0}")]
    Tls(#[from] TlsError),
    #[error("hub.serving.authentication: {0}")]
    Access(#[from] AccessError),
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Where the hub answers, once serving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoints {
    pub main: SocketAddr,
    /// Whether the main port serves HTTPS.
    pub https: bool,
    /// The plain probe port, while the main port is secured.
    pub probes: Option<SocketAddr>,
}

/// Binds the listen address (so a taken port is reported before anything starts);
/// `setting` is what chose it, for the error.
pub async fn bind(addr: &str, setting: &'static str) -> Result<TcpListener, ListenError> {
    TcpListener::bind(addr).await.map_err(|source| ListenError {
        addr: addr.to_string(),
        setting,
        source,
    })
}

/// What `[hub.serving]` needs before anything is served: the certificate read, the
/// management cluster's client built.
struct Prepared {
    tls: Option<TlsAcceptor>,
    access: Access,
}

impl Prepared {
    async fn new(hub: &HubConfig) -> Result<Prepared, ServeError> {
        let tls = match hub.serving.tls() {
            Some((cert, key)) => Some(tls::acceptor(cert, key)?),
            None => None,
        };
        Ok(Prepared {
            tls,
            access: Access::new(hub).await?,
        })
    }
}

/// Whether `hub.serving` can be served (its certificate read, its client built), so that a
/// hub that could not serve fails at start rather than running unseen.
pub async fn check(hub: &HubConfig) -> Result<(), ServeError> {
    Prepared::new(hub).await.map(drop)
}

/// Serves `view` on `main` as `hub.serving` says, and the probes on `probe_listen` when the
/// main port is secured, until `cancel` fires.
pub async fn start(
    hub: &HubConfig,
    main: TcpListener,
    view: FleetView,
    cancel: CancellationToken,
) -> Result<Endpoints, ServeError> {
    let s = &hub.serving;
    let Prepared { tls, access } = Prepared::new(hub).await?;
    let probes = match s.secured() {
        true => Some(bind(&s.probe_listen, "hub.serving.probe_listen").await?),
        false => None,
    };
    let endpoints = Endpoints {
        main: main.local_addr().map_err(|source| ListenError {
            addr: "the main port".into(),
            setting: "--listen or hub.listen",
            source,
        })?,
        https: tls.is_some(),
        probes: probes.as_ref().and_then(|p| p.local_addr().ok()),
    };
    let rules = Rules {
        name: "main",
        tls,
        max_connections: s.max_connections,
        max_header_bytes: s.max_request_header_bytes,
        write_timeout: s.request_timeout,
    };
    let site = Site {
        api: self::api::Api::new(view.clone()),
        access,
        max_body_bytes: s.max_request_body_bytes,
        deadline: s.request_timeout,
        late: Throttle::new(Duration::from_secs(10)),
    };
    if let Some(probes) = probes {
        let rules = Rules {
            name: "probe",
            tls: None,
            max_connections: PROBE_CONNECTIONS,
            ..rules.clone()
        };
        let handler = Arc::new(Probes { view });
        tokio::spawn(conn::accept(probes, rules, handler, cancel.clone()));
    }
    tokio::spawn(conn::accept(main, rules, Arc::new(site), cancel));
    announce(&endpoints, hub);
    Ok(endpoints)
}

/// Serves until `cancel` fires as an unsecured hub (the demo, tests; `fleetscaler run` calls
/// [`start`] with its `[hub.serving]`). A failure is logged.
pub async fn serve(listener: TcpListener, view: FleetView, cancel: CancellationToken) {
    match start(&HubConfig::default(), listener, view, cancel.clone()).await {
        Ok(_) => cancel.cancelled().await,
        Err(e) => {
            tracing::error!("not serving the API, the dashboard, /metrics or the probes: {e}")
        }
    }
}

fn announce(e: &Endpoints, hub: &HubConfig) {
    let scheme = if e.https { "https" } else { "http" };
    let auth = match hub.serving.authentication {
        crate::config::hub::Authentication::None => "no authentication",
        crate::config::hub::Authentication::Kubernetes => {
            "Kubernetes authentication (TokenReview, SubjectAccessReview)"
        }
    };
    let probes = match e.probes {
        Some(p) => format!("probes on http://{p}/livez, /readyz"),
        None => "probes on the same port".into(),
    };
    tracing::info!("serving {scheme}://{}/ with {auth}; {probes}", e.main);
    if !hub.serving.secured() && !e.main.ip().is_loopback() {
        tracing::warn!(
            "the API, the dashboard and /metrics are served on {} without TLS or \
             authentication: whoever reaches the port reads every cluster's node groups and \
             pods; [hub.serving] secures them (docs/hub.md, \"Serving\")",
            e.main
        );
    }
}

/// The address a listener is bound to, for printing.
pub fn local_addr(listener: &TcpListener) -> Option<SocketAddr> {
    listener.local_addr().ok()
}
