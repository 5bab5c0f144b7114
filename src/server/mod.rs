//! The hub's HTTP endpoints: health probes (`probes`), Prometheus metrics (`metrics`), the
//! fleet's JSON API (`api`), read-only views of the runners' reports, and the dashboard page
//! that reads that API (`dashboard`).

mod api;
mod dashboard;
mod metrics;
mod probes;

use std::convert::Infallible;
use std::net::SocketAddr;

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
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
                async move { Ok::<_, Infallible>(api::route(&view, &req)) }
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
