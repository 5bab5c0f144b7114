//! `GET /api/v1/clusters/<name>/plan[?offset=N][&limit=M][&pod=NS/NAME][&node=NAME]`: the
//! cluster's last plan, as `fleetscaler plan -o json` prints it, with the lists that grow with
//! the cluster's pods and nodes cut to a page (docs/plan-format.md, "Through the API"):
//! anyone who may create pods can make a plan of any size. Each cut list is followed by a
//! count of what it left out (`pendingPodsOmitted`).
//!
//! The answer without a query is built once per pass, by the first request that asks for it,
//! and shared by every other (they wait for it rather than build their own); a page or a
//! filter is built for its request, in turn with the other heavy answers (`heavy`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use tokio::sync::OnceCell;

use super::api::{not_found, respond, text, to_json};
use super::heavy::Heavy;
use super::trim::{Cut, Field, Trimmed};
use crate::engine::plan::Plan;
use crate::hub::FleetView;

/// Entries of each long list in one answer: pending pods, unneeded and not removable nodes,
/// warnings (as many as `/api/v1/clusters/<name>` lists pending pods).
pub(super) const SHOWN: usize = 500;
/// Pods of one scale-up or one removal.
const PODS_SHOWN: usize = 500;
/// Reasons of one pending pod (one per node group and a few more), unless it is asked for by
/// name.
const REASONS_SHOWN: usize = 50;

/// What the query asks for.
#[derive(Debug, PartialEq, Eq)]
struct Query {
    offset: usize,
    limit: usize,
    pod: Option<String>,
    node: Option<String>,
}

impl Default for Query {
    fn default() -> Query {
        Query {
            offset: 0,
            limit: SHOWN,
            pod: None,
            node: None,
        }
    }
}

/// The shared answers: one per cluster, for its current plan.
#[derive(Default)]
pub(super) struct Plans {
    shared: Mutex<HashMap<String, Shared>>,
}

struct Shared {
    /// The plan answered, not kept alive by the answer: only told apart from the next one.
    plan: Weak<Plan>,
    answer: Arc<OnceCell<Bytes>>,
}

impl Plans {
    /// The answer to the plan of cluster `name` for `query`.
    pub(super) async fn answer(
        &self,
        view: &FleetView,
        name: &str,
        query: Option<&str>,
        heavy: &Heavy,
    ) -> Response<Full<Bytes>> {
        let query = match read_query(query.unwrap_or_default()) {
            Ok(q) => q,
            Err(message) => return text(StatusCode::BAD_REQUEST, &format!("{message}\n")),
        };
        let Some(report) = view.report(name) else {
            return not_found(name);
        };
        let Some(plan) = report.plan else {
            return text(StatusCode::SERVICE_UNAVAILABLE, "no pass has run yet\n");
        };
        if query == Query::default() {
            return answered(self.shared(name, &plan).await);
        }
        match heavy.turn().await {
            Ok(turn) => turn.answer(answered(build(&plan, &query))),
            Err(busy) => busy,
        }
    }

    /// The default answer for `plan`, built by the first to ask.
    async fn shared(&self, name: &str, plan: &Arc<Plan>) -> Result<Bytes, serde_json::Error> {
        let cell = self.cell(name, plan);
        let body = cell
            .get_or_try_init(|| async { build(plan, &Query::default()) })
            .await?;
        Ok(body.clone())
    }

    fn cell(&self, name: &str, plan: &Arc<Plan>) -> Arc<OnceCell<Bytes>> {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        // Answers of plans gone (a cluster removed) go with them.
        shared.retain(|_, s| s.plan.strong_count() > 0);
        let current = shared
            .get(name)
            .filter(|s| std::ptr::eq(s.plan.as_ptr(), Arc::as_ptr(plan)));
        if let Some(s) = current {
            return s.answer.clone();
        }
        // Only clusters of the fleet come here: one answer each.
        let answer = Arc::new(OnceCell::new());
        let fresh = Shared {
            plan: Arc::downgrade(plan),
            answer: answer.clone(),
        };
        shared.insert(name.to_string(), fresh);
        answer
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.shared.lock().unwrap().len()
    }
}

fn answered(built: Result<Bytes, serde_json::Error>) -> Response<Full<Bytes>> {
    match built {
        Ok(body) => respond(StatusCode::OK, "application/json", body),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e}\n")),
    }
}

/// The plan's JSON, cut as `query` says.
fn build(plan: &Plan, query: &Query) -> Result<Bytes, serde_json::Error> {
    let cut = cut(plan, query);
    to_json(&Trimmed::new(plan, &cut))
}

/// What of `plan` is shown: a page of each long list (or the pod, or the node, asked for),
/// and the first entries of the lists inside their entries.
fn cut(plan: &Plan, q: &Query) -> Cut {
    let mut fields = vec![
        field("pendingPods", "pendingPodsOmitted", pending(plan, q)),
        field("scaleUp", "scaleUpOmitted", list(0, usize::MAX, pods())),
        field("warnings", "warningsOmitted", page(q)),
    ];
    fields.extend(node_lists(plan, q));
    Cut::Fields(fields)
}

fn pending(plan: &Plan, q: &Query) -> Cut {
    let Some(pod) = &q.pod else {
        let reasons = list(0, REASONS_SHOWN, Cut::Whole);
        let each = Cut::Fields(vec![field("reasons", "reasonsOmitted", reasons)]);
        return list(q.offset, q.limit, each);
    };
    let at = position(&plan.pending_pods, |p| is_pod(&p.pod, pod));
    // One pod asked for by name: all its reasons.
    only(at, Cut::Whole)
}

/// A page of the nodes that could go and of those that stay, and every removal; or the node
/// asked for alone in each.
fn node_lists(plan: &Plan, q: &Query) -> Vec<Field> {
    let Some(node) = q.node.as_deref() else {
        return vec![
            field("unneeded", "unneededOmitted", page(q)),
            field("notRemovable", "notRemovableOmitted", page(q)),
            field("scaleDown", "scaleDownOmitted", list(0, usize::MAX, pods())),
            field(
                "scaleDownHeld",
                "scaleDownHeldOmitted",
                list(0, usize::MAX, pods()),
            ),
        ];
    };
    let unneeded = position(&plan.unneeded, |u| &*u.node == node);
    let kept = position(&plan.not_removable, |n| &*n.node == node);
    let removed = position(&plan.scale_down, |d| &*d.node == node);
    let held = position(&plan.scale_down_held, |d| &*d.node == node);
    vec![
        field("unneeded", "unneededOmitted", only(unneeded, Cut::Whole)),
        field(
            "notRemovable",
            "notRemovableOmitted",
            only(kept, Cut::Whole),
        ),
        field("scaleDown", "scaleDownOmitted", only(removed, pods())),
        field("scaleDownHeld", "scaleDownHeldOmitted", only(held, pods())),
    ]
}

/// The page the query asks for.
fn page(q: &Query) -> Cut {
    list(q.offset, q.limit, Cut::Whole)
}

/// The first pods of a scale-up or a removal.
fn pods() -> Cut {
    let pods = list(0, PODS_SHOWN, Cut::Whole);
    Cut::Fields(vec![field("pods", "podsOmitted", pods)])
}

fn field(name: &'static str, omitted: &'static str, cut: Cut) -> Field {
    Field { name, omitted, cut }
}

fn list(skip: usize, take: usize, each: Cut) -> Cut {
    Cut::List {
        skip,
        take,
        each: Box::new(each),
    }
}

/// The one entry at `at`, or none.
fn only(at: Option<usize>, each: Cut) -> Cut {
    match at {
        Some(i) => list(i, 1, each),
        None => list(0, 0, each),
    }
}

fn position<T>(entries: &[T], is: impl Fn(&T) -> bool) -> Option<usize> {
    entries.iter().position(is)
}

fn is_pod(id: &crate::model::pod::PodId, asked: &str) -> bool {
    asked.split_once('/') == Some((&*id.namespace, &*id.name))
}

/// The query, or what is wrong with it.
fn read_query(query: &str) -> Result<Query, String> {
    let mut q = Query::default();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match &*key {
            "offset" => q.offset = number(&key, &value)?,
            "limit" => q.limit = number(&key, &value)?,
            "pod" => q.pod = Some(value.into_owned()),
            "node" => q.node = Some(value.into_owned()),
            other => {
                return Err(format!(
                    "unknown parameter {}: use offset=N, limit=M (at most {SHOWN}), \
                     pod=NAMESPACE/NAME and node=NAME",
                    crate::model::quote(other)
                ));
            }
        }
    }
    if q.limit > SHOWN {
        return Err(format!("limit={}: at most {SHOWN}", q.limit));
    }
    Ok(q)
}

fn number(key: &str, value: &str) -> Result<usize, String> {
    value
        .parse()
        .map_err(|_| format!("{key}={}: not a number", crate::model::quote(value)))
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
