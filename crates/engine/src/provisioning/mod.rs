//! ProvisioningRequests, as upstream's cluster-autoscaler serves them
//! (`pkg/provisioningrequest`, `pkg/processors/provreq`): per request, what this pass
//! decides and the conditions to write.
//!
//! A pass, in upstream's order:
//! 1. `classify` (upstream's `provReqProcessor.refresh` at the loop's start, then its
//!    injector): terminal requests left alone, old ones deleted, a booking past its time
//!    or consumed by scheduled pods expired, a request past its expiry failed, and the
//!    first request available for provisioning taken as the candidate;
//! 2. the booked requests' pods go to scale-up (placed after the pending pods that fit)
//!    and their nodes stay through scale-down;
//! 3. passes alternate between the candidate and the other pending pods, as upstream's
//!    wrapper orchestrator does (a pass with only one kind serves that kind);
//! 4. the candidate is served by its class (`check_capacity`, `atomic`).
//!
//! Deliberate differences: requests are taken oldest first (upstream: its informer's
//! order); one request is served per pass, as upstream without batch processing; the
//! check-capacity processor instance is always empty (upstream's default), so a request
//! naming one in `processorInstance` is not served; the retry time is counted from the
//! last attempt kept in the engine's memory, since conditions written alike are not
//! rewritten (see `conditions`).

mod atomic;
mod check_capacity;
pub mod conditions;
mod memory;
mod pods;
mod turn;

pub use memory::{ProvisioningMemory, Retry, forget_gone};
pub use turn::scale_up;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;

use fleetscaler_model::pod::Pod;
use fleetscaler_model::provisioning::{
    self as pr, BEST_EFFORT_ATOMIC, BOOKING_EXPIRED, CHECK_CAPACITY, ConditionStatus, FAILED,
    PROVISIONED, ProvisioningRequest,
};
use fleetscaler_model::{ClusterSnapshot, ObjectKey, Warning, WarningCode};

use crate::nodegroups::NodeGroupId;
use crate::state::add;
use conditions::ConditionWrite;
use memory::{remember, retry_at};
use pods::{PodsError, Templates, pods_for};

/// Upstream's `defaultReservationTime`: how long a Provisioned request's capacity is booked.
pub const RESERVATION_TIME: Duration = Duration::from_secs(10 * 60);
/// Upstream's `defaultExpirationTime`: a request not provisioned by then fails.
pub const EXPIRATION_TIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// Upstream's `defaultTerminalProvReqTTL`: a request Provisioned or Failed that long ago is deleted.
pub const TERMINAL_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Upstream's `defaultMaxUpdated`: expiries written per pass.
pub const MAX_UPDATED: usize = 20;
/// Upstream's `--provisioning-request-initial-backoff-time` and `-max-backoff-time` defaults.
pub const INITIAL_RETRY: Duration = Duration::from_secs(60);
pub const MAX_RETRY: Duration = Duration::from_secs(10 * 60);
/// Upstream's `--provisioning-request-max-backoff-cache-size` default.
pub const MAX_REMEMBERED: usize = 1000;
/// The requests one pass decides about; the others wait for later passes.
pub const MAX_REQUESTS: usize = 5000;
/// The booked pods one pass places: beyond them, bookings are not simulated (warned).
pub const MAX_BOOKED_PODS: usize = 50_000;

/// What a pass decides about a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Decision {
    /// It cannot be read as written (a CRD bound broken, a PodTemplate unreadable): left alone.
    Invalid,
    /// Its class is not one this autoscaler serves (upstream's `SupportedProvisioningClass`).
    UnsupportedClass,
    /// Failed or BookingExpired already: nothing more to do.
    Finished,
    /// Provisioned or Failed longer than the terminal TTL ago: delete it.
    Delete,
    /// Its capacity stays booked.
    Booked,
    /// Its booking time is over: BookingExpired.
    BookingExpired,
    /// All its pods are scheduled: BookingExpired.
    BookingConsumed,
    /// Not provisioned within the expiration time: Failed.
    Expired,
    /// A PodTemplate it names is missing: Failed.
    FailedToCreatePods,
    /// Booked, but its PodTemplates are gone: Failed.
    FailedToBookCapacity,
    /// Provisioned is Unknown: left alone, as upstream does.
    LeftAlone,
    /// Not provisioned yet; tried again at `retryAt`.
    RetryLater,
    /// Waits for a pass of its own (another request, or the other pending pods, have this one).
    Waiting,
    /// Its pods fit the cluster: Provisioned.
    CapacityFound,
    /// A scale-up gives its pods their nodes: Provisioned.
    ScaledUp,
    /// Its pods do not fit: Provisioned=False (Failed with `noRetry`).
    CapacityNotFound,
}

/// One request's line in the plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestDecision {
    pub request: ObjectKey,
    /// `autoscaling.x-k8s.io/v1` or `/v1beta1`: the version to write it back at.
    pub api_version: String,
    pub class: Arc<str>,
    pub decision: Decision,
    pub reason: String,
    /// The conditions to write, those already written alike left out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionWrite>,
    /// All the pods its pod sets ask for.
    pub pods: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_group: Option<NodeGroupId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Timestamp>,
}

impl Decision {
    /// Nothing about the request can change by itself soon: a later pass decides the same
    /// until the request or its pods change (a finished request's deletion, days later,
    /// aside).
    pub fn is_at_rest(self) -> bool {
        matches!(
            self,
            Decision::Invalid
                | Decision::UnsupportedClass
                | Decision::Finished
                | Decision::LeftAlone
        )
    }
}

impl RequestDecision {
    fn new(r: &ProvisioningRequest, decision: Decision, reason: impl Into<String>) -> Self {
        RequestDecision {
            request: r.key.clone(),
            api_version: format!("{}/{}", pr::GROUP, r.version),
            class: r.class.clone(),
            decision,
            reason: reason.into(),
            conditions: Vec::new(),
            pods: r.pod_count(),
            node_group: None,
            retry_at: None,
        }
    }

    fn writing(mut self, r: &ProvisioningRequest, writes: Vec<ConditionWrite>) -> Self {
        self.conditions = conditions::changed(r, writes);
        self
    }
}

/// The request this pass may serve, with its pods.
pub struct Candidate<'s> {
    pub request: &'s ProvisioningRequest,
    pub pods: Vec<Pod>,
}

/// What `classify` found.
pub struct Classified<'s> {
    pub decisions: Vec<RequestDecision>,
    /// The pods of the requests whose capacity stays booked.
    pub booked: Vec<Pod>,
    pub candidate: Option<Candidate<'s>>,
    pub warnings: Vec<Warning>,
}

/// Upstream's `SupportedProvisioningClass` with an empty processor instance.
pub fn supported(r: &ProvisioningRequest) -> bool {
    let instance = r
        .parameter(pr::PROCESSOR_INSTANCE_PARAMETER)
        .unwrap_or_default();
    match &*r.class {
        BEST_EFFORT_ATOMIC => true,
        CHECK_CAPACITY => instance.is_empty(),
        _ => false,
    }
}

/// Decides about every request but the candidate, which the pass serves (or not) later.
pub fn classify<'s>(
    snapshot: &'s ClusterSnapshot,
    memory: &ProvisioningMemory,
    now: Timestamp,
) -> Classified<'s> {
    let prs = &snapshot.provisioning;
    let mut out = Classified {
        decisions: Vec::new(),
        booked: Vec::new(),
        candidate: None,
        warnings: Vec::new(),
    };
    if !prs.listed {
        return out;
    }
    let mut order: Vec<&ProvisioningRequest> = prs.requests.iter().collect();
    order.sort_by(|a, b| a.created.cmp(&b.created).then(a.key.cmp(&b.key)));
    if order.len() > MAX_REQUESTS {
        out.warnings.push(Warning::general(
            WarningCode::ProvisioningRequest,
            format!(
                "{} ProvisioningRequests: the {MAX_REQUESTS} oldest are decided about in this pass",
                order.len()
            ),
        ));
        order.truncate(MAX_REQUESTS);
    }
    let mut c = Classifier {
        templates: Templates::of(prs),
        scheduled: scheduled_consumers(snapshot),
        memory,
        now,
        expiries: Expiries::default(),
        out,
    };
    for r in order {
        if let Some(d) = c.settled(r).or_else(|| c.available(r)) {
            c.out.decisions.push(d);
        }
    }
    c.out
}

/// Counts of expiries written this pass (upstream's `maxUpdated` caps both together).
#[derive(Default)]
struct Expiries {
    booking: usize,
    failed: usize,
}

/// What deciding about the requests of one pass reads and gathers.
struct Classifier<'s, 'm> {
    templates: Templates<'s>,
    scheduled: HashMap<(&'s str, &'s str), u64>,
    memory: &'m ProvisioningMemory,
    now: Timestamp,
    expiries: Expiries,
    out: Classified<'s>,
}

impl<'s> Classifier<'s, '_> {
    /// A request settled one way or another: deleted, invalid, not ours, finished, booked
    /// or its booking over, expired, or left alone.
    fn settled(&mut self, r: &'s ProvisioningRequest) -> Option<RequestDecision> {
        if let Some(d) = delete_if_old(r, self.now) {
            return Some(d);
        }
        if let Some(problem) = &r.problem {
            self.out.warnings.push(Warning::about(
                WarningCode::ProvisioningRequest,
                format_args!("ProvisioningRequest {}", r.key),
                format!("{problem}; left alone"),
            ));
            return Some(RequestDecision::new(r, Decision::Invalid, problem.clone()));
        }
        if !supported(r) {
            let why = unsupported_reason(r);
            return Some(RequestDecision::new(r, Decision::UnsupportedClass, why));
        }
        if r.is_true(BOOKING_EXPIRED) || r.is_true(FAILED) {
            let which = if r.is_true(FAILED) {
                FAILED
            } else {
                BOOKING_EXPIRED
            };
            let why = format!("{which} is True: the request is finished");
            return Some(RequestDecision::new(r, Decision::Finished, why));
        }
        if r.is_true(PROVISIONED) {
            return Some(self.booking(r));
        }
        if let Some(d) = expire(r, self.now, &mut self.expiries) {
            return Some(d);
        }
        let unknown = r
            .condition(PROVISIONED)
            .is_some_and(|c| c.status == ConditionStatus::Unknown);
        unknown.then(|| {
            let why = "Provisioned is Unknown: left alone, as upstream does";
            RequestDecision::new(r, Decision::LeftAlone, why)
        })
    }

    /// A request available for provisioning (upstream's injector): retried later, waiting
    /// behind the candidate, failed for a missing PodTemplate, or the candidate (`None`).
    fn available(&mut self, r: &'s ProvisioningRequest) -> Option<RequestDecision> {
        if let Some(at) = retry_at(r, self.memory).filter(|at| *at >= self.now) {
            let mut d = RequestDecision::new(
                r,
                Decision::RetryLater,
                format!("capacity was not found at the last attempt; tried again after {at}"),
            );
            d.retry_at = Some(at);
            return Some(d);
        }
        if self.out.candidate.is_some() {
            // Upstream's injector stops at the first request it can take: the others are
            // not looked at (nor their pods made) until their turn.
            let why = "waits for a pass of its own: one ProvisioningRequest is served per pass, oldest first";
            return Some(RequestDecision::new(r, Decision::Waiting, why));
        }
        match pods_for(r, &self.templates) {
            Ok(pods) => {
                self.out.candidate = Some(Candidate { request: r, pods });
                None
            }
            Err(PodsError::Missing(message)) => {
                let write = ConditionWrite::new(
                    r,
                    FAILED,
                    ConditionStatus::True,
                    conditions::FAILED_TO_CREATE_PODS_REASON,
                    message.as_str(),
                );
                let d = RequestDecision::new(r, Decision::FailedToCreatePods, message.clone());
                Some(d.writing(r, vec![write]))
            }
            Err(PodsError::Unreadable(why)) => {
                self.out.warnings.push(Warning::about(
                    WarningCode::ProvisioningRequest,
                    format_args!("ProvisioningRequest {}", r.key),
                    format!("{why}; not simulated"),
                ));
                Some(RequestDecision::new(r, Decision::Invalid, why))
            }
        }
    }
}

fn unsupported_reason(r: &ProvisioningRequest) -> String {
    if &*r.class == CHECK_CAPACITY {
        return format!(
            "parameters.{} names a check-capacity processor instance; this autoscaler is none (upstream's --check-capacity-processor-instance is empty), so it is not served",
            pr::PROCESSOR_INSTANCE_PARAMETER
        );
    }
    format!(
        "class {} is not served: only {CHECK_CAPACITY} and {BEST_EFFORT_ATOMIC} are",
        fleetscaler_model::quote(&r.class)
    )
}

/// Upstream's `DeleteOldProvReqs`: Provisioned or Failed written longer than the terminal
/// TTL ago, whatever the class.
fn delete_if_old(r: &ProvisioningRequest, now: Timestamp) -> Option<RequestDecision> {
    let old = [PROVISIONED, FAILED].into_iter().find_map(|t| {
        let since = r.condition(t)?.last_transition?;
        (add(since, TERMINAL_TTL) < now).then_some((t, since))
    })?;
    let why = format!(
        "{} since {}, more than 7 days ago (upstream's terminal TTL): delete it",
        old.0, old.1
    );
    Some(RequestDecision::new(r, Decision::Delete, why))
}

impl<'s> Classifier<'s, '_> {
    /// A Provisioned request: booked, or its booking over (by time, or by its pods scheduled).
    fn booking(&mut self, r: &'s ProvisioningRequest) -> RequestDecision {
        let since = r.condition(PROVISIONED).and_then(|c| c.last_transition);
        if let Some(since) = since
            && add(since, RESERVATION_TIME) < self.now
            && self.expiries.booking < MAX_UPDATED
        {
            self.expiries.booking += 1;
            let write = ConditionWrite::new(
                r,
                BOOKING_EXPIRED,
                ConditionStatus::True,
                conditions::CAPACITY_RESERVATION_TIME_EXPIRED_REASON,
                conditions::CAPACITY_RESERVATION_TIME_EXPIRED_MSG,
            );
            let why = format!(
                "Provisioned since {since}: the 10 minutes its capacity is booked for are over"
            );
            return RequestDecision::new(r, Decision::BookingExpired, why).writing(r, vec![write]);
        }
        let running = self
            .scheduled
            .get(&(&*r.key.namespace, &*r.key.name))
            .copied()
            .unwrap_or(0);
        if running >= r.pod_count() {
            let write = ConditionWrite::new(
                r,
                BOOKING_EXPIRED,
                ConditionStatus::True,
                conditions::CAPACITY_BOOKING_CONSUMED_REASON,
                conditions::CAPACITY_BOOKING_CONSUMED_MSG,
            );
            let why =
                format!("{running} pod(s) consuming it are scheduled: the booking is used up");
            return RequestDecision::new(r, Decision::BookingConsumed, why).writing(r, vec![write]);
        }
        match pods_for(r, &self.templates) {
            Ok(pods) if self.out.booked.len() + pods.len() <= MAX_BOOKED_PODS => {
                let why = format!(
                    "Provisioned: its {} pod(s) hold their capacity until the booking expires or they are scheduled ({running} are)",
                    pods.len()
                );
                self.out.booked.extend(pods);
                RequestDecision::new(r, Decision::Booked, why)
            }
            Ok(pods) => {
                self.out.warnings.push(Warning::about(
                    WarningCode::ProvisioningRequest,
                    format_args!("ProvisioningRequest {}", r.key),
                    format!(
                        "its {} booked pods are not simulated: this pass already books {MAX_BOOKED_PODS} at most",
                        pods.len()
                    ),
                ));
                RequestDecision::new(
                    r,
                    Decision::Booked,
                    "Provisioned: booked, but beyond the pods one pass simulates",
                )
            }
            Err(PodsError::Missing(message) | PodsError::Unreadable(message)) => {
                let message = format!("Couldn't create pods, err: {message}");
                let write = ConditionWrite::new(
                    r,
                    FAILED,
                    ConditionStatus::True,
                    conditions::FAILED_TO_BOOK_CAPACITY_REASON,
                    message.as_str(),
                );
                RequestDecision::new(r, Decision::FailedToBookCapacity, message.clone())
                    .writing(r, vec![write])
            }
        }
    }
}

/// Upstream's `refresh`: not provisioned within the expiration time, the request fails.
fn expire(
    r: &ProvisioningRequest,
    now: Timestamp,
    expiries: &mut Expiries,
) -> Option<RequestDecision> {
    let created = r.created?;
    if add(created, EXPIRATION_TIME) >= now
        || expiries.failed >= MAX_UPDATED - expiries.booking.min(MAX_UPDATED)
    {
        return None;
    }
    expiries.failed += 1;
    let write = ConditionWrite::new(
        r,
        FAILED,
        ConditionStatus::True,
        conditions::EXPIRED_REASON,
        conditions::EXPIRED_MSG,
    );
    let why = format!("created at {created} and not provisioned within 7 days: it fails");
    Some(RequestDecision::new(r, Decision::Expired, why).writing(r, vec![write]))
}

/// Scheduled pods consuming a request, per (namespace, request): upstream counts the pods
/// carrying the annotation on the snapshot's nodes.
fn scheduled_consumers(snapshot: &ClusterSnapshot) -> HashMap<(&str, &str), u64> {
    let mut out = HashMap::new();
    for p in &snapshot.pods {
        if let (Some(name), Some(_)) = (&p.extras().consumes, &p.node_name)
            && !p.is_terminal()
        {
            *out.entry((&*p.id.namespace, &**name)).or_insert(0) += 1;
        }
    }
    out
}

/// Upstream reports a check-capacity request found as a successful scale-up
/// (`ScaleUpSuccessful`), which starts scale-down's cooldown (`scale_down_delay_after_add`)
/// as a real scale-up does: the found capacity is not removed under the request.
pub fn counts_as_scale_up(decisions: &[RequestDecision]) -> bool {
    decisions
        .iter()
        .any(|d| d.decision == Decision::CapacityFound && &*d.class == CHECK_CAPACITY)
}

/// What serving the candidate came to, from the scale-up pass that ran its pods.
pub struct Served {
    pub outcome: crate::scale_up::RequestOutcome,
    /// The group the scale-up grows, when it scaled.
    pub node_group: Option<NodeGroupId>,
}

/// The candidate's decision: served (`served`), or waiting (`waiting` says why).
pub fn candidate_decision(
    c: &Candidate,
    served: Option<&Served>,
    waiting: &str,
    memory: &mut ProvisioningMemory,
    now: Timestamp,
) -> RequestDecision {
    let r = c.request;
    let Some(served) = served else {
        return RequestDecision::new(r, Decision::Waiting, waiting);
    };
    let d = if &*r.class == CHECK_CAPACITY {
        check_capacity::decide(r, &served.outcome)
    } else {
        atomic::decide(r, served)
    };
    remember(memory, r, d.decision, now);
    d
}

#[cfg(test)]
mod tests;
