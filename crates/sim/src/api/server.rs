//! The HTTPS front of one simulated cluster: the accept loop (where outages refuse or hang
//! connections), TLS, HTTP/2 or HTTP/1.1 with hyper (as ALPN agrees), bearer-token authentication, injected latency and
//! errors, body limits, and the conversion of handler replies into responses.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use super::handler::{ApiRequest, Reply, handle};
use super::status::ApiError;
use crate::cluster::Cluster;
use crate::faults::Outage;

/// A response body: a whole document or a watch stream.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Request bodies above this are refused, as the API server's 3 MiB limit.
const MAX_BODY: usize = 3 * 1024 * 1024;

/// A TLS handshake that takes longer than this is abandoned.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The connection is dropped rather than answered (an outage on a kept-alive connection).
#[derive(Debug, thiserror::Error)]
#[error("connection dropped by an injected outage")]
struct Dropped;

/// Serves `cluster` on `listener` until `shutdown` turns true.
pub async fn serve(
    cluster: Arc<Cluster>,
    listener: TcpListener,
    acceptor: TlsAcceptor,
    mut shutdown: watch::Receiver<bool>,
) {
    let address = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        let Ok((tcp, _peer)) = accepted else { continue };
        match cluster.faults.get().outage {
            Some(Outage::Refuse) => {
                drop(tcp);
                continue;
            }
            Some(Outage::Hang) => {
                let mut faults = cluster.faults.subscribe();
                let mut shutdown = shutdown.clone();
                tokio::spawn(async move {
                    let _held = tcp;
                    loop {
                        tokio::select! {
                            changed = faults.changed() => {
                                if changed.is_err() || faults.borrow().outage != Some(Outage::Hang) {
                                    return;
                                }
                            }
                            _ = shutdown.changed() => return,
                        }
                    }
                });
                continue;
            }
            None => {}
        }
        let cluster = cluster.clone();
        let acceptor = acceptor.clone();
        let address = address.clone();
        let mut shutdown = shutdown.clone();
        tokio::spawn(async move {
            let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
            else {
                return;
            };
            let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            cluster.connections.opened(http2);
            let counted = cluster.clone();
            let service = service_fn(move |req| {
                let cluster = cluster.clone();
                let address = address.clone();
                async move { serve_request(&cluster, req, address).await }
            });
            let io = TokioIo::new(tls);
            tokio::select! {
                _ = serve_connection(io, service, http2) => {}
                _ = shutdown.changed() => {}
            }
            counted.connections.closed();
        });
    }
}

/// One connection in the protocol its TLS handshake agreed (ALPN): HTTP/2 multiplexes a
/// client's requests and watches, as the API server's Go stack does.
async fn serve_connection<S>(
    io: TokioIo<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>,
    service: S,
    http2: bool,
) where
    S: hyper::service::Service<Request<Incoming>, Response = Response<Body>, Error = Dropped>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    if http2 {
        let builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        let _ = builder.serve_connection(io, service).await;
    } else {
        let builder = hyper::server::conn::http1::Builder::new();
        let _ = builder.serve_connection(io, service).await;
    }
}

async fn serve_request(
    cluster: &Arc<Cluster>,
    req: Request<Incoming>,
    address: String,
) -> Result<Response<Body>, Dropped> {
    let faults = cluster.faults.get();
    match faults.outage {
        Some(Outage::Refuse) => return Err(Dropped),
        Some(Outage::Hang) => {
            let mut rx = cluster.faults.subscribe();
            while rx.borrow_and_update().outage == Some(Outage::Hang) {
                if rx.changed().await.is_err() {
                    break;
                }
            }
            return Err(Dropped);
        }
        None => {}
    }
    if faults.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(faults.latency_ms.min(600_000))).await;
    }
    let authorized = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| t == cluster.token);
    if !authorized {
        return Ok(respond(Reply::from(ApiError::unauthorized())));
    }
    let path = req.uri().path();
    if !faults.forbidden.is_empty() {
        let query = req.uri().query().unwrap_or_default();
        let request = super::audit::attributes(req.method(), path, query);
        if request.is_resource() && faults.forbids(&request.api_group, &request.resource) {
            let refused = ApiError::forbidden(&request, &cluster.name);
            return Ok(respond(Reply::from(refused)));
        }
    }
    // Matched with the query, so that `watch=true` targets the watches alone.
    let target = req.uri().path_and_query().map_or(path, |pq| pq.as_str());
    let targeted =
        faults.error_paths.is_empty() || faults.error_paths.iter().any(|p| target.contains(p));
    if faults.error_rate > 0.0 && targeted && cluster.roll() < faults.error_rate {
        let error = match faults.error_code {
            429 => ApiError::too_many_requests(
                "Too many requests, please try again later. (injected)",
                1,
            ),
            403 => ApiError::forbidden_with(format!(
                "{path} is forbidden: User \"system:serviceaccount:fleetscaler:fleetscaler-hub\" cannot access it (injected)"
            )),
            _ => ApiError::internal("Internal error occurred: injected fault"),
        };
        return Ok(respond(Reply::from(error)));
    }
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            let error = if e
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                ApiError::bad_request(format!("the request body exceeds {MAX_BODY} bytes"))
                    .with_code(413, "RequestEntityTooLarge")
            } else {
                ApiError::bad_request(format!("cannot read the request body: {e}"))
            };
            return Ok(respond(Reply::from(error)));
        }
    };
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let agent = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let request = ApiRequest {
        agent,
        accept,
        method: parts.method,
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        content_type,
        body,
        server_address: address,
    };
    tracing::trace!(cluster = %cluster.name, method = %request.method, path = %request.path, "request");
    Ok(respond(handle(cluster, request)))
}

impl ApiError {
    /// The same error under another code and reason.
    pub fn with_code(mut self, code: u16, reason: &'static str) -> Self {
        self.code = code;
        self.reason = reason;
        self
    }
}

fn respond(reply: Reply) -> Response<Body> {
    let (code, body, retry_after) = match reply {
        Reply::Json(code, value) => {
            let retry = value["details"]["retryAfterSeconds"].as_u64();
            let bytes = serde_json::to_vec(&value).unwrap_or_default();
            (code, Full::new(Bytes::from(bytes)).boxed_unsync(), retry)
        }
        Reply::Raw(code, bytes) => (code, Full::new(bytes).boxed_unsync(), None),
        Reply::Watch(stream) => {
            let frames = stream.map(|chunk| Ok::<_, Infallible>(Frame::data(chunk)));
            (200, StreamBody::new(frames).boxed_unsync(), None)
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    if let Some(seconds) = retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}
