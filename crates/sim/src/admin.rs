//! The fleet's admin endpoint: plain HTTP on loopback (it must stay reachable while a
//! cluster's API is in an injected outage), to read and switch each cluster's faults:
//!
//! - `GET /clusters` — every cluster, its server and faults;
//! - `GET|PUT|DELETE /clusters/<name>/faults` — read, set (a `Faults` JSON body), clear.
//!
//! A PUT replaces every fault of the cluster. Besides the API server's own faults, it can
//! take the cloud's capacity away: with
//! `{"capacity": [{"instanceType": "m6i.2xlarge", "zone": "us-east-1a"}]}` (optional
//! `reason`, default `InsufficientInstanceCapacity`, and `message`), machines of that type
//! in that zone go Failed when they finish provisioning, until the faults are cleared.
//! A body that cannot be read or checked gets a 400 naming the field
//! (`capacity[0].reason has ' ': ...`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::error::SimError;
use crate::faults::Faults;
use crate::fleet::ClusterHandle;

/// Serves the admin endpoint for `clusters` on `127.0.0.1:<port>` (0: any free port).
pub async fn serve(
    clusters: Vec<ClusterHandle>,
    port: u16,
) -> Result<(SocketAddr, JoinHandle<()>), SimError> {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|source| SimError::Listen {
            what: "the admin endpoint".into(),
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| SimError::Listen {
        what: "the admin endpoint".into(),
        source,
    })?;
    let clusters = Arc::new(clusters);
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let clusters = clusters.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let clusters = clusters.clone();
                    async move { Ok::<_, Infallible>(handle(&clusters, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    Ok((addr, task))
}

fn reply(code: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn error(code: StatusCode, message: &str) -> Response<Full<Bytes>> {
    reply(code, &json!({"error": message}))
}

async fn handle(clusters: &[ClusterHandle], req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().trim_matches('/').to_string();
    let segs: Vec<&str> = path.split('/').collect();
    match (req.method().clone(), segs.as_slice()) {
        (Method::GET, ["clusters"]) => {
            let list: Vec<Value> = clusters
                .iter()
                .map(|c| json!({"name": c.name(), "server": c.server_url(), "flavor": format!("{:?}", c.cluster.flavor), "faults": c.faults().get()}))
                .collect();
            reply(StatusCode::OK, &Value::Array(list))
        }
        (method, ["clusters", name, "faults"]) => {
            let Some(cluster) = clusters.iter().find(|c| c.name() == *name) else {
                return error(StatusCode::NOT_FOUND, &format!("no cluster named {name:?}"));
            };
            match method {
                Method::GET => reply(StatusCode::OK, &json!(cluster.faults().get())),
                Method::DELETE => {
                    cluster.faults().clear();
                    reply(StatusCode::OK, &json!(cluster.faults().get()))
                }
                Method::PUT => {
                    let body = match Limited::new(req.into_body(), 64 * 1024).collect().await {
                        Ok(b) => b.to_bytes(),
                        Err(e) => {
                            return error(
                                StatusCode::BAD_REQUEST,
                                &format!("cannot read the body: {e}"),
                            );
                        }
                    };
                    let faults = match Faults::from_json(&body) {
                        Ok(f) => f,
                        Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
                    };
                    cluster.faults().set(faults);
                    reply(StatusCode::OK, &json!(cluster.faults().get()))
                }
                _ => error(StatusCode::METHOD_NOT_ALLOWED, "use GET, PUT or DELETE"),
            }
        }
        _ => error(
            StatusCode::NOT_FOUND,
            "try GET /clusters or /clusters/<name>/faults",
        ),
    }
}
