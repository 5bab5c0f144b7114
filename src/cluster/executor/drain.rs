//! Draining a node: evicting the pods that must move, through the Eviction API (`policy/v1
//! Eviction`), so PodDisruptionBudgets are honoured, then waiting for them to go.
//!
//! Mirror pods (the kubelet's own) and pods that finished or are already terminating stay.
//! DaemonSet pods are not part of the drain: once the others have gone they are evicted best
//! effort (`daemonset_eviction_for_occupied_nodes` / `_for_empty_nodes`, or the pod's
//! `enable-ds-eviction` annotation), so node agents stop gracefully; a refusal is logged and
//! the removal goes on, as upstream's. Each eviction asks for a grace period of
//! the pod's own, capped at `max_pod_grace_period`, and carries the pod's uid as a
//! precondition, so a new pod that took the name is never evicted. A budget that refuses
//! (429) is asked again every `eviction_retry` until `max_pod_eviction_time`; a pod already
//! gone (404, or a uid that no longer matches) is fine. A refusal that asking again cannot
//! change (a pod covered by two budgets, which the API server answers with a 500) ends the
//! drain at once with the server's message, and the node is given back.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, Preconditions};
use kube::Api;
use kube::api::{ListParams, PostParams};
use tokio::time::Instant;

use super::Context;
use super::failure::{Failure, Stop, brief};
use crate::cluster::error::{CallError, Category, Write};
use crate::engine::scale_down::DrainCheck;
use crate::model::meta::Projector;
use crate::model::pod::{DAEMONSET_POD, ENABLE_DS_EVICTION, MIRROR_POD, Pod as ModelPod, PodId};

/// Kubernetes' default termination grace period.
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// A pod to evict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Evictee {
    pub id: PodId,
    pub uid: String,
    /// The grace period to ask for, in seconds.
    pub grace: i64,
}

/// What a pod on a node being removed is to the drain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// Stays where it is: a mirror pod, or one finished or already terminating.
    Left,
    /// Must be evicted, and gone, before the machine is marked.
    Drained,
    /// A DaemonSet pod: evicted best effort, after the others, if its eviction is on.
    DaemonSet,
}

pub(super) fn role(pod: &Pod) -> Role {
    let meta = &pod.metadata;
    let annotations = meta.annotations.as_ref();
    let mirror = annotations.is_some_and(|a| a.contains_key(MIRROR_POD));
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let finished = matches!(phase, Some("Succeeded" | "Failed"));
    if mirror || finished || meta.deletion_timestamp.is_some() {
        return Role::Left;
    }
    let daemonset = meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "DaemonSet")
        || annotations
            .and_then(|a| a.get(DAEMONSET_POD))
            .is_some_and(|v| v == "true");
    if daemonset {
        Role::DaemonSet
    } else {
        Role::Drained
    }
}

/// Whether a pod on a node being removed must be evicted from it before the machine goes.
pub(super) fn needs_eviction(pod: &Pod) -> bool {
    role(pod) == Role::Drained
}

/// Whether a DaemonSet pod is evicted: its annotation decides when it has one (`"true"`
/// only means yes), else the cluster's setting (upstream's `daemonset.PodsToEvict`).
pub(super) fn daemonset_eviction(pod: &Pod, by_default: bool) -> bool {
    match pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ENABLE_DS_EVICTION))
    {
        Some(value) => value == "true",
        None => by_default,
    }
}

/// The pod's own grace period, capped at `max`.
pub(super) fn grace_seconds(pod: &Pod, max: Duration) -> i64 {
    let own = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_GRACE_SECONDS)
        .max(0);
    own.min(i64::try_from(max.as_secs()).unwrap_or(i64::MAX))
}

/// The pods of a node that must be evicted, with their grace periods.
pub(super) fn to_evict(pods: &[Pod], max_grace: Duration) -> Vec<Evictee> {
    evictees(pods.iter().filter(|p| needs_eviction(p)), max_grace)
}

/// The DaemonSet pods of a node to evict best effort, with their grace periods.
pub(super) fn daemonsets_to_evict(
    pods: &[Pod],
    by_default: bool,
    max_grace: Duration,
) -> Vec<Evictee> {
    let chosen = pods
        .iter()
        .filter(|p| role(p) == Role::DaemonSet && daemonset_eviction(p, by_default));
    evictees(chosen, max_grace)
}

fn evictees<'p>(pods: impl Iterator<Item = &'p Pod>, max_grace: Duration) -> Vec<Evictee> {
    pods.map(|p| Evictee {
        id: PodId {
            namespace: p.metadata.namespace.as_deref().unwrap_or_default().into(),
            name: p.metadata.name.as_deref().unwrap_or_default().into(),
        },
        uid: p.metadata.uid.clone().unwrap_or_default(),
        grace: grace_seconds(p, max_grace),
    })
    .collect()
}

/// Why one of the pods that would be evicted must keep its node after all (the engine's
/// drain rules, on pods as they are now): a pod that arrived after the plan, annotated
/// `safe-to-evict: "false"`, without a controller, with local storage, or one that cannot
/// be read.
pub(super) fn blocker(pods: &[Pod], check: &DrainCheck) -> Option<String> {
    let mut projector = Projector::default();
    let mut projected = Vec::new();
    for pod in pods.iter().filter(|p| needs_eviction(p)) {
        match ModelPod::from_k8s(pod, &mut projector) {
            Ok(p) => projected.push(p),
            Err(e) => {
                let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                return Some(format!("pod {ns}/{name} cannot be read ({e})"));
            }
        }
    }
    check.blocker(&projected, jiff::Timestamp::now())
}

/// The pods bound to `node`, listed fresh.
pub(super) async fn list_pods(ctx: &Context, node: &str) -> Result<Vec<Pod>, CallError> {
    let api: Api<Pod> = Api::all(ctx.client.clone());
    let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let list = ctx
        .call(|| format!("list pods of node {node}"), api.list(&params))
        .await?;
    Ok(list.items)
}

/// What one eviction came to.
enum Evicted {
    /// Evicted, or already gone.
    Yes,
    /// Refused for now (a budget, or an error worth retrying).
    NotYet(CallError),
}

async fn evict(ctx: &Context, p: &Evictee) -> Result<Evicted, Stop> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &p.id.namespace);
    let eviction = Eviction {
        metadata: ObjectMeta {
            name: Some(p.id.name.to_string()),
            namespace: Some(p.id.namespace.to_string()),
            ..ObjectMeta::default()
        },
        delete_options: Some(DeleteOptions {
            grace_period_seconds: Some(p.grace),
            preconditions: Some(Preconditions {
                uid: Some(p.uid.clone()).filter(|u| !u.is_empty()),
                resource_version: None,
            }),
            ..DeleteOptions::default()
        }),
    };
    ctx.may_write()?;
    tracing::debug!(k8s.pod.name = %p.id, grace = p.grace, "evicting pod");
    // `Api::evict` sends `delete_options` in snake case, which the API server ignores (and
    // with it the grace period): the Eviction object is posted as it is defined instead.
    let params = PostParams::default();
    let sent =
        api.create_subresource::<_, serde_json::Value>("eviction", &p.id.name, &params, &eviction);
    let target = Write {
        method: "POST",
        kind: "Pod",
        subresource: Some("eviction"),
        namespace: Some(&p.id.namespace),
        name: &p.id.name,
    };
    match ctx
        .write(target, || format!("evict pod {}", p.id), sent)
        .await
    {
        Ok(_) => Ok(Evicted::Yes),
        Err(e) if e.category() == Category::NotFound => Ok(Evicted::Yes),
        // The uid precondition failed (the name now belongs to another pod), or the budget
        // changed under the eviction: whichever, the next round finds out.
        Err(e) if e.category() == Category::Conflict => Ok(Evicted::NotYet(e)),
        Err(e) if matches!(e.category(), Category::Forbidden | Category::Invalid) => Err(e.into()),
        Err(e) if refused_for_good(&e) => Err(Failure::EvictionRefused {
            pod: p.id.to_string(),
            message: brief(&e),
        }
        .into()),
        Err(e) => Ok(Evicted::NotYet(e)),
    }
}

/// What the API server's eviction subresource says when a pod is covered by more than one
/// PodDisruptionBudget (as an internal error, 500): no retry will ever get through.
const MULTIPLE_BUDGETS: &str = "more than one PodDisruptionBudget";

/// An eviction refusal that holds until a person changes the budgets.
fn refused_for_good(e: &CallError) -> bool {
    match e {
        CallError::Api {
            source: kube::Error::Api(status),
            ..
        } => status.code == 500 && status.message.contains(MULTIPLE_BUDGETS),
        _ => false,
    }
}

/// What one drain's evictions came to, kept as they go (also when the drain fails), for the
/// removal's outcome and upstream's `evicted_pods_total{eviction_result}`.
#[derive(Debug, Default)]
pub(super) struct Evictions {
    /// Evicted, or found gone.
    pub done: Vec<Evictee>,
    /// Refused for good, or still refused when the drain gave up.
    pub refused: Vec<Evictee>,
}

/// Evicts `pods`, retrying refusals every `retry` until `limit` has passed.
pub(super) async fn evict_all(
    ctx: &Context,
    node: &str,
    pods: Vec<Evictee>,
    limit: Duration,
    out: &mut Evictions,
) -> Result<(), Stop> {
    let deadline = Instant::now() + limit;
    let retry = ctx.timing.eviction_retry.min(limit);
    let mut pending = pods;
    loop {
        let mut refused = Vec::new();
        let mut last = None;
        for p in pending {
            match evict(ctx, &p).await {
                Ok(Evicted::Yes) => out.done.push(p),
                Ok(Evicted::NotYet(e)) => {
                    last = Some(e);
                    refused.push(p);
                }
                Err(stop) => {
                    out.refused.push(p);
                    return Err(stop);
                }
            }
        }
        let Some(last) = last else { return Ok(()) };
        let now = Instant::now();
        if now >= deadline {
            tracing::warn!(k8s.node.name = node, error = %brief(&last), "evictions still refused");
            let stop = Failure::EvictionTimedOut {
                node: node.to_string(),
                after: limit,
                pods: refused.iter().map(|p| p.id.to_string()).collect(),
                last: brief(&last),
            };
            out.refused.extend(refused);
            return Err(stop.into());
        }
        let wait = retry.min(deadline - now);
        // Once a round, with the server's answer: a drain held by a budget says so.
        tracing::info!(k8s.node.name = node, pods = refused.len(), error = %brief(&last),
            "evictions refused; retrying in {}s", wait.as_secs_f64());
        tokio::time::sleep(wait).await;
        pending = refused;
    }
}

/// Evicts DaemonSet pods best effort, as upstream's best-effort eviction group: refusals
/// are retried as the others' until `limit`, then logged; they are not waited for, and
/// nothing here stops the removal. Returns how many were evicted.
pub(super) async fn evict_best_effort(
    ctx: &Context,
    node: &str,
    pods: Vec<Evictee>,
    limit: Duration,
) -> usize {
    if pods.is_empty() {
        return 0;
    }
    let mut out = Evictions::default();
    if let Err(stop) = evict_all(ctx, node, pods, limit, &mut out).await {
        tracing::warn!(k8s.node.name = node, reason = %stop,
            "DaemonSet pods not all evicted; the node is removed all the same");
    }
    out.done.len()
}

/// Waits until the evicted pods have left the node: their longest grace period plus the
/// headroom at most.
pub(super) async fn wait_gone(ctx: &Context, node: &str, evicted: &[Evictee]) -> Result<(), Stop> {
    if evicted.is_empty() {
        return Ok(());
    }
    let longest = evicted.iter().map(|p| p.grace).max().unwrap_or(0);
    let limit = Duration::from_secs(u64::try_from(longest).unwrap_or(0)) + ctx.timing.headroom;
    let deadline = Instant::now() + limit;
    let uids: HashSet<&str> = evicted.iter().map(|p| p.uid.as_str()).collect();
    loop {
        let pods = list_pods(ctx, node).await?;
        let left: Vec<String> = pods
            .iter()
            .filter(|p| p.metadata.uid.as_deref().is_some_and(|u| uids.contains(u)))
            .map(|p| {
                format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref().unwrap_or_default(),
                    p.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Failure::PodsRemain {
                node: node.to_string(),
                after: limit,
                pods: left,
            }
            .into());
        }
        tokio::time::sleep(ctx.timing.poll.min(deadline - now)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(extra: serde_json::Value) -> Pod {
        let mut v = json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Running"},
        });
        merge(&mut v, extra);
        serde_json::from_value(v).unwrap()
    }

    fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
        match (a, b) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    #[test]
    fn only_pods_that_must_move_are_evicted() {
        let owner = |kind: &str| json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": "o", "uid": "x", "controller": true}]}});
        assert!(needs_eviction(&pod(json!({}))));
        assert!(needs_eviction(&pod(owner("ReplicaSet"))));
        assert!(!needs_eviction(&pod(owner("DaemonSet"))));
        assert!(!needs_eviction(&pod(
            json!({"metadata": {"annotations": {MIRROR_POD: "x"}}})
        )));
        assert!(!needs_eviction(&pod(
            json!({"status": {"phase": "Succeeded"}})
        )));
        assert!(!needs_eviction(&pod(
            json!({"status": {"phase": "Failed"}})
        )));
        assert!(!needs_eviction(&pod(
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})
        )));
        // A pending pod bound to the node still has to go.
        assert!(needs_eviction(&pod(
            json!({"status": {"phase": "Pending"}})
        )));
    }

    /// Upstream's `daemonset.PodsToEvict` (utils/daemonset): the pod's enable-ds-eviction
    /// annotation decides when present ("true" only means yes), else the setting.
    #[test]
    fn daemonset_pods_are_evicted_as_their_annotation_or_the_setting_says() {
        let ds = |annotation: Option<&str>| {
            let mut extra = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1",
                "kind": "DaemonSet", "name": "agent", "uid": "d", "controller": true}]}});
            if let Some(v) = annotation {
                extra["metadata"]["annotations"] = json!({ ENABLE_DS_EVICTION: v });
            }
            pod(extra)
        };
        let plain = pod(json!({}));
        let marked = pod(json!({"metadata": {"annotations": {DAEMONSET_POD: "true"}}}));
        assert_eq!(role(&ds(None)), Role::DaemonSet);
        assert_eq!(role(&marked), Role::DaemonSet);
        assert_eq!(role(&plain), Role::Drained);
        for (annotation, by_default, evicted) in [
            (None, true, true),
            (None, false, false),
            (Some("true"), false, true),
            (Some("false"), true, false),
            (Some("yes"), true, false),
        ] {
            assert_eq!(
                daemonset_eviction(&ds(annotation), by_default),
                evicted,
                "{annotation:?} with the setting {by_default}"
            );
        }
        let pods = [plain, ds(None), ds(Some("false")), marked];
        let chosen = daemonsets_to_evict(&pods, true, Duration::from_secs(600));
        assert_eq!(chosen.len(), 2, "the DaemonSet's pod and the annotated one");
        assert!(daemonsets_to_evict(&pods, false, Duration::from_secs(600)).is_empty());
        // A terminating DaemonSet pod is already going.
        let going = pod(json!({"metadata": {
            "deletionTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {DAEMONSET_POD: "true", ENABLE_DS_EVICTION: "true"},
        }}));
        assert_eq!(role(&going), Role::Left);
    }

    #[test]
    fn grace_is_the_pods_own_capped_at_the_setting() {
        let max = Duration::from_secs(600);
        assert_eq!(grace_seconds(&pod(json!({})), max), 30);
        let long = pod(json!({"spec": {"terminationGracePeriodSeconds": 3600}}));
        assert_eq!(grace_seconds(&long, max), 600);
        let short = pod(json!({"spec": {"terminationGracePeriodSeconds": 5}}));
        assert_eq!(grace_seconds(&short, Duration::ZERO), 0);
        let e = to_evict(&[short], max);
        assert_eq!(
            e,
            vec![Evictee {
                id: PodId {
                    namespace: "ns".into(),
                    name: "p".into()
                },
                uid: "u1".into(),
                grace: 5
            }]
        );
    }

    fn api_error(code: u16, reason: &str, message: &str) -> CallError {
        CallError::Api {
            op: "evict pod ns/p".into(),
            source: kube::Error::Api(Box::new(
                kube::core::Status::failure(message, reason).with_code(code),
            )),
        }
    }

    #[test]
    fn a_pod_under_two_budgets_is_refused_for_good_and_a_busy_server_is_not() {
        // What kube-apiserver answers (pkg/registry/core/pod/storage/eviction.go).
        let two = api_error(
            500,
            "InternalError",
            "Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        );
        assert!(refused_for_good(&two));
        assert!(!refused_for_good(&api_error(
            500,
            "InternalError",
            "etcdserver: request timed out"
        )));
        assert!(!refused_for_good(&api_error(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget."
        )));
    }
}
