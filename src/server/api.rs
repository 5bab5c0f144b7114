//! The routes: probes, `/metrics`, `/api/v1/fleet` (the fleet's health and every cluster),
//! `/api/v1/clusters/<name>` (with its pending pods and why they wait, and its effective
//! settings with their sources) and its last plan (`plan`). The answers that hold pending
//! pods are built in turn (`heavy`).

use bytes::Bytes;
use http::{Method, Response, StatusCode, header};
use http_body_util::Full;
use serde::Serialize;

use super::heavy::Heavy;
use super::plan::Plans;
use crate::engine::plan::PodExplanation;
use crate::hub::ClusterReport;
use crate::hub::health::{ClusterState, FleetHealth};
use crate::hub::{FleetView, HubStatus};

/// Pending pods listed per cluster (the plan has them all; `pendingPods` counts them).
const PENDING_SHOWN: usize = super::plan::SHOWN;
/// The same, in the fleet-wide answer.
const FLEET_PENDING_SHOWN: usize = 50;

#[derive(Serialize)]
struct FleetBody<'a> {
    hub: HubStatus,
    fleet: FleetHealth,
    /// Capacity failures one cluster found that back off the others' groups of the same
    /// instance type and zone (docs/fleet-intelligence.md).
    #[serde(rename = "sharedFailures")]
    shared_failures: Vec<crate::engine::policy::SharedFailure>,
    clusters: Vec<ClusterBody<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterBody<'a> {
    #[serde(flatten)]
    report: &'a ClusterReport,
    /// How the hub judges the cluster (`hub::health::ClusterState`), and why when it is
    /// not healthy.
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    state_reason: Option<String>,
    /// `state` is `healthy`: the one verdict, never true beside a state that is not.
    healthy: bool,
    /// The pending pods of the last pass, each with its outcome and reasons.
    pending: Vec<&'a PodExplanation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    settings: Option<serde_json::Value>,
}

/// GET and HEAD only: the hub serves nothing else (hyper leaves the body out of a HEAD).
pub(super) fn method_refused(method: &Method) -> Option<Response<Full<Bytes>>> {
    (method != Method::GET && method != Method::HEAD).then(|| {
        text(
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET and HEAD are served\n",
        )
    })
}

/// The main port's routes, and what their answers are built with.
pub(super) struct Api {
    pub view: FleetView,
    /// The plans' answers, shared per pass.
    plans: Plans,
    /// Turns to build the answers that hold pending pods.
    heavy: Heavy,
}

impl Api {
    pub(super) fn new(view: FleetView) -> Api {
        Api {
            view,
            plans: Plans::default(),
            heavy: Heavy::new(),
        }
    }

    /// The answer for `path` (and its `query`) on the main port.
    pub(super) async fn route(&self, path: &str, query: Option<&str>) -> Response<Full<Bytes>> {
        if let Some(page) = super::dashboard::route(path) {
            return page;
        }
        let view = &self.view;
        if let Some(answer) = probe_route(view, path) {
            return answer;
        }
        let path = path.trim_end_matches('/');
        match path.split('/').collect::<Vec<_>>().as_slice() {
            ["", "metrics"] => respond(
                StatusCode::OK,
                crate::telemetry::metrics::CONTENT_TYPE,
                crate::telemetry::metrics::text(&view.metrics()),
            ),
            ["", "api", "v1", "fleet"] => self.in_turn(|| fleet(view)).await,
            ["", "api", "v1", "clusters", name] => match view.report(&segment(name)) {
                Some(r) => {
                    self.in_turn(|| json(&cluster_body(&r, PENDING_SHOWN)))
                        .await
                }
                None => not_found(&segment(name)),
            },
            ["", "api", "v1", "clusters", name, "plan"] => {
                self.plans
                    .answer(view, &segment(name), query, &self.heavy)
                    .await
            }
            _ => text(
                StatusCode::NOT_FOUND,
                "not found; try /api/v1/fleet, /api/v1/clusters/<name>[/plan], /api/v1/what-if?set=KEY=VALUE, /metrics, /readyz\n",
            ),
        }
    }

    /// `build`'s answer, built in turn with the other heavy ones.
    async fn in_turn(
        &self,
        build: impl FnOnce() -> Response<Full<Bytes>>,
    ) -> Response<Full<Bytes>> {
        match self.heavy.turn().await {
            Ok(turn) => turn.answer(build()),
            Err(busy) => busy,
        }
    }
}

/// A path segment as the client meant it: `fleetscaler explain` and the dashboard escape a
/// cluster's name (fleet.toml allows any), so `prod%20east` is the cluster `prod east`.
/// Bytes that are not UTF-8 once decoded stay as sent, and match no cluster.
fn segment(raw: &str) -> std::borrow::Cow<'_, str> {
    let decoded = percent_encoding::percent_decode_str(raw).decode_utf8();
    decoded.unwrap_or(std::borrow::Cow::Borrowed(raw))
}

fn fleet(view: &FleetView) -> Response<Full<Bytes>> {
    let reports = view.reports();
    json(&FleetBody {
        hub: view.hub(),
        fleet: view.health(),
        shared_failures: view.shared_failures(),
        clusters: reports
            .iter()
            .map(|r| cluster_body(r, FLEET_PENDING_SHOWN))
            .collect(),
    })
}

/// The probes' answer for `path`, if it is one of theirs.
pub(super) fn probe_route(view: &FleetView, path: &str) -> Option<Response<Full<Bytes>>> {
    match path.trim_end_matches('/') {
        "/healthz" | "/livez" => Some(probe(super::probes::live(view))),
        "/readyz" => Some(probe(super::probes::ready(view))),
        _ => None,
    }
}

fn probe(result: Result<String, String>) -> Response<Full<Bytes>> {
    match result {
        Ok(body) => text(StatusCode::OK, &body),
        Err(body) => text(StatusCode::SERVICE_UNAVAILABLE, &body),
    }
}

fn cluster_body(r: &ClusterReport, shown: usize) -> ClusterBody<'_> {
    let (state, state_reason) = ClusterState::judged(r, jiff::Timestamp::now());
    ClusterBody {
        report: r,
        state: state.as_str(),
        state_reason,
        healthy: state == ClusterState::Healthy,
        pending: r
            .plan
            .iter()
            .flat_map(|p| p.pending_pods.iter())
            .take(shown)
            .collect(),
        settings: r.settings.as_ref().map(|e| e.with_sources()),
    }
}

pub(super) fn not_found(name: &str) -> Response<Full<Bytes>> {
    text(
        StatusCode::NOT_FOUND,
        &format!("no cluster named {name:?}\n"),
    )
}

pub(super) fn json<T: Serialize>(value: &T) -> Response<Full<Bytes>> {
    match to_json(value) {
        Ok(body) => respond(StatusCode::OK, "application/json", body),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e}\n")),
    }
}

/// `value` as pretty JSON, in no more memory than it takes: an answer is held until its
/// client has read it.
pub(super) fn to_json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Bytes> {
    let mut body = serde_json::to_vec_pretty(value)?;
    body.shrink_to_fit();
    Ok(Bytes::from(body))
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
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::segment;

    #[test]
    fn a_cluster_name_is_read_as_the_client_escaped_it() {
        assert_eq!(segment("prod%20east"), "prod east");
        assert_eq!(segment("a%2Fb"), "a/b");
        assert_eq!(segment("sim-1"), "sim-1");
        // Not UTF-8 once decoded: kept as sent, so it names no cluster rather than another.
        assert_eq!(segment("%FF"), "%FF");
    }
}
