//! What answers a request once its connection is up: on the main port, the limits (a body
//! over the cap is refused before anything reads it), then access, then the routes, all
//! within the request's deadline; on the probe port, the probes alone.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Incoming};

use super::api::{self, text};
use super::auth::Access;
use super::throttle::{Throttle, more};
use crate::hub::FleetView;

/// Answers one request.
pub(super) trait Handler: Send + Sync + 'static {
    fn handle(&self, req: Request<Incoming>) -> impl Future<Output = Response<Full<Bytes>>> + Send;
}

/// The main port: the API, the dashboard and `/metrics` (and the probes, behind the same
/// access, for whoever is allowed them).
pub(super) struct Site {
    pub api: api::Api,
    pub access: Access,
    pub max_body_bytes: usize,
    pub deadline: Duration,
    pub late: Throttle,
}

impl Handler for Site {
    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let path = req.uri().path().to_string();
        match tokio::time::timeout(self.deadline, self.respond(req)).await {
            Ok(answer) => answer,
            Err(_) => {
                if let Some(skipped) = self.late.admit() {
                    tracing::warn!(
                        "answering 503: {path} took longer than hub.serving.request_timeout ({}s){}",
                        self.deadline.as_secs(),
                        more(skipped)
                    );
                }
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!(
                        "no answer within {}s (hub.serving.request_timeout)\n",
                        self.deadline.as_secs()
                    ),
                )
            }
        }
    }
}

impl Site {
    async fn respond(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = req.into_parts();
        if let Err(refused) = within(body, self.max_body_bytes).await {
            return refused;
        }
        if let Some(refused) = api::method_refused(&parts.method) {
            return refused;
        }
        if let Err(refused) = self.access.check(&parts).await {
            return refused;
        }
        // Past authentication: the port no longer closes this connection for a newcomer.
        super::slots::proven(&parts.extensions);
        let (path, query) = (parts.uri.path(), parts.uri.query());
        if path.trim_end_matches('/') == "/api/v1/what-if" {
            return super::what_if::answer(&self.api.view, query, self.deadline).await;
        }
        self.api.route(path, query).await
    }
}

/// Refuses (413) a body over `max` bytes, without reading more than that of it.
async fn within(body: Incoming, max: usize) -> Result<(), Response<Full<Bytes>>> {
    let hint = body.size_hint();
    let limit = u64::try_from(max).unwrap_or(u64::MAX);
    if hint.upper() == Some(0) {
        return Ok(());
    }
    let too_large = hint.lower() > limit || Limited::new(body, max).collect().await.is_err();
    if !too_large {
        return Ok(());
    }
    let mut r = text(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!(
            "a request body of at most {max} bytes is accepted (hub.serving.max_request_body_bytes); \
             nothing here reads one\n"
        ),
    );
    // The rest of the body is never read: the connection cannot carry another request.
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    Err(r)
}

/// The probe port: `/livez`, `/healthz`, `/readyz`, plain and open, as the kubelet asks.
pub(super) struct Probes {
    pub view: FleetView,
}

impl Handler for Probes {
    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        // The probes are open: whoever sent a whole head is a client.
        super::slots::proven(req.extensions());
        if let Some(refused) = api::method_refused(req.method()) {
            return refused;
        }
        api::probe_route(&self.view, req.uri().path()).unwrap_or_else(|| {
            text(
                StatusCode::NOT_FOUND,
                "this port serves the probes only: /livez, /readyz, /healthz\n",
            )
        })
    }
}
