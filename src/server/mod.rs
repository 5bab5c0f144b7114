//! The hub's HTTP endpoints: health probes and the fleet's JSON API (read-only views of the
//! runners' reports).

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::hub::FleetView;

/// A client gets this long to send its request's headers.
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}: {source}")]
pub struct ListenError {
    pub addr: String,
    #[source]
    pub source: std::io::Error,
}

/// Binds the listen address (so a taken port is reported before anything starts).
pub async fn bind(addr: &str) -> Result<TcpListener, ListenError> {
    TcpListener::bind(addr).await.map_err(|source| ListenError {
        addr: addr.to_string(),
        source,
    })
}

/// Serves until `cancel` fires.
pub async fn serve(listener: TcpListener, view: FleetView, cancel: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => return,
            a = listener.accept() => a,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors, say: wait rather than spin.
                tracing::warn!("accepting an HTTP connection failed: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let view = view.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let view = view.clone();
                async move { Ok::<_, Infallible>(route(&view, &req)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(tcp), service);
            tokio::select! {
                _ = conn => {}
                _ = cancel.cancelled() => {}
            }
        });
    }
}

/// The address a listener is bound to, for printing.
pub fn local_addr(listener: &TcpListener) -> Option<SocketAddr> {
    listener.local_addr().ok()
}

#[derive(Serialize)]
struct FleetBody {
    hub: crate::hub::HubStatus,
    clusters: Vec<crate::cluster::report::ClusterReport>,
}

fn route(view: &FleetView, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n");
    }
    let path = req.uri().path().trim_end_matches('/');
    match path.split('/').collect::<Vec<_>>().as_slice() {
        ["", "healthz"] | ["", "readyz"] | ["", "livez"] => text(StatusCode::OK, "ok\n"),
        ["", "api", "v1", "fleet"] => json(&FleetBody {
            hub: view.hub(),
            clusters: view.reports(),
        }),
        ["", "api", "v1", "clusters", name] => match view.report(name) {
            Some(r) => json(&r),
            None => not_found(name),
        },
        ["", "api", "v1", "clusters", name, "plan"] => match view.report(name) {
            Some(r) => match r.plan {
                Some(plan) => json(&*plan),
                None => text(StatusCode::SERVICE_UNAVAILABLE, "no pass has run yet\n"),
            },
            None => not_found(name),
        },
        _ => text(
            StatusCode::NOT_FOUND,
            "not found; try /api/v1/fleet, /api/v1/clusters/<name>[/plan], /healthz\n",
        ),
    }
}

fn not_found(name: &str) -> Response<Full<Bytes>> {
    text(
        StatusCode::NOT_FOUND,
        &format!("no cluster named {name:?}\n"),
    )
}

fn json<T: Serialize>(value: &T) -> Response<Full<Bytes>> {
    match serde_json::to_vec_pretty(value) {
        Ok(body) => respond(StatusCode::OK, "application/json", body),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e}\n")),
    }
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    respond(
        status,
        "text/plain; charset=utf-8",
        body.as_bytes().to_vec(),
    )
}

fn respond(status: StatusCode, content_type: &str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}
