//! The routes: probes, `/api/v1/fleet`, `/api/v1/clusters/<name>` (with its pending pods and
//! why they wait, and its effective settings with their sources) and its last plan.

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use serde::Serialize;

use crate::cluster::report::ClusterReport;
use crate::engine::plan::PodExplanation;
use crate::hub::{FleetView, HubStatus};

/// Pending pods listed per cluster (the plan has them all).
const PENDING_SHOWN: usize = 500;

#[derive(Serialize)]
struct FleetBody {
    hub: HubStatus,
    clusters: Vec<ClusterReport>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterBody<'a> {
    #[serde(flatten)]
    report: &'a ClusterReport,
    /// The pending pods of the last pass, each with its outcome and reasons.
    pending: Vec<&'a PodExplanation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    settings: Option<&'a serde_json::Value>,
}

pub(super) fn route(view: &FleetView, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n");
    }
    if let Some(page) = super::dashboard::route(req.uri().path()) {
        return page;
    }
    let path = req.uri().path().trim_end_matches('/');
    match path.split('/').collect::<Vec<_>>().as_slice() {
        ["", "healthz"] | ["", "readyz"] | ["", "livez"] => text(StatusCode::OK, "ok\n"),
        ["", "api", "v1", "fleet"] => json(&FleetBody {
            hub: view.hub(),
            clusters: view.reports(),
        }),
        ["", "api", "v1", "clusters", name] => match view.report(name) {
            Some(r) => json(&cluster_body(&r)),
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

fn cluster_body(r: &ClusterReport) -> ClusterBody<'_> {
    ClusterBody {
        report: r,
        pending: r
            .plan
            .iter()
            .flat_map(|p| p.pending_pods.iter())
            .take(PENDING_SHOWN)
            .collect(),
        settings: r.settings.as_deref(),
    }
}

fn not_found(name: &str) -> Response<Full<Bytes>> {
    text(
        StatusCode::NOT_FOUND,
        &format!("no cluster named {name:?}\n"),
    )
}

pub(super) fn json<T: Serialize>(value: &T) -> Response<Full<Bytes>> {
    match serde_json::to_vec_pretty(value) {
        Ok(body) => respond(StatusCode::OK, "application/json", body),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e}\n")),
    }
}

pub(super) fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    respond(
        status,
        "text/plain; charset=utf-8",
        body.as_bytes().to_vec(),
    )
}

pub(super) fn respond(
    status: StatusCode,
    content_type: &str,
    body: Vec<u8>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}
