//! Why a step of the executor stopped: deliberately (dry run, not the leader, a plan that no
//! longer matches the cluster) or by failing, each failure with its [`Category`].

use std::time::Duration;

use crate::cluster::error::{CallError, Category};
use crate::cluster::outcome::{Action, Entry};

/// Why a step did not (fully) go through.
#[derive(Debug)]
pub(super) enum Stop {
    /// A dry run writes nothing.
    DryRun,
    /// The write gate is closed: another replica leads.
    NotLeader,
    /// Deliberately not written; the reason (usually: the plan no longer matches the cluster).
    Skip(String),
    Fail(Failure),
}

impl Stop {
    pub(super) fn is_conflict(&self) -> bool {
        matches!(self, Stop::Fail(Failure::Call(e)) if e.is_conflict())
    }

    /// A write that got no answer (a timeout, a lost connection) may have been applied.
    pub(super) fn may_have_landed(&self) -> bool {
        matches!(self, Stop::Fail(Failure::Call(e)) if e.status_code().is_none())
    }

    /// An answer that says "not now" (429, 5xx): worth another try in a moment.
    pub(super) fn is_transient(&self) -> bool {
        matches!(self, Stop::Fail(Failure::Call(e))
            if e.status_code().is_some_and(|c| c == 429 || c >= 500))
    }

    /// The reason of a deliberate stop, or `None` for a failure.
    pub(super) fn skip_reason(&self) -> Option<String> {
        match self {
            Stop::DryRun => Some("dry run".to_string()),
            Stop::NotLeader => Some("not the leader".to_string()),
            Stop::Skip(reason) => Some(reason.clone()),
            Stop::Fail(_) => None,
        }
    }

    /// This stop with a note of what was undone (or left) after it.
    pub(super) fn with_undo(self, undo: impl Into<String>) -> Stop {
        match self {
            Stop::Fail(f) => Stop::Fail(f.with_undo(undo)),
            other => {
                let reason = other.skip_reason().unwrap_or_default();
                Stop::Skip(format!("{reason}; {}", undo.into()))
            }
        }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Fail(failure) => failure.fmt(f),
            other => f.write_str(&other.skip_reason().unwrap_or_default()),
        }
    }
}

impl From<Failure> for Stop {
    fn from(f: Failure) -> Self {
        Stop::Fail(f)
    }
}

/// A step that failed. Messages name the object and what was wrong.
#[derive(Debug, thiserror::Error)]
pub(super) enum Failure {
    #[error("{}", brief(.0))]
    Call(#[from] CallError),
    /// Lowering the group would take it below its min size.
    #[error("{group} has {replicas} replicas, at its min size {min}: lowering it would go below")]
    AtMin {
        group: String,
        replicas: u64,
        min: u64,
    },
    /// The cluster changed under the plan in a way that makes the step unsafe.
    #[error("{0}")]
    Changed(String),
    /// PodDisruptionBudgets (or errors) kept refusing evictions.
    #[error(
        "evicting pods of node {node}: {} still not evicted after {}s ({}); last error: {last}",
        pods.len(), after.as_secs_f64(), pods.join(", ")
    )]
    EvictionTimedOut {
        node: String,
        after: Duration,
        pods: Vec<String>,
        last: String,
    },
    /// An eviction the API server refuses whatever the timing (a pod under two budgets).
    #[error("evicting pod {pod} is refused for good: {message}")]
    EvictionRefused { pod: String, message: String },
    /// Evicted pods did not go within their grace period and the headroom.
    #[error(
        "pods evicted from node {node} still there after {}s: {}",
        after.as_secs_f64(), pods.join(", ")
    )]
    PodsRemain {
        node: String,
        after: Duration,
        pods: Vec<String>,
    },
    /// A value the API cannot take (replicas outside int32).
    #[error("{0}")]
    Invalid(String),
    /// A failure, and what was (or could not be) undone after it.
    #[error("{cause}; {undo}")]
    RolledBack { cause: Box<Failure>, undo: String },
}

impl Failure {
    pub(super) fn category(&self) -> Category {
        match self {
            Failure::Call(e) => e.category(),
            Failure::AtMin { .. } | Failure::Changed(_) => Category::Conflict,
            Failure::EvictionTimedOut { .. } => Category::TooManyRequests,
            Failure::EvictionRefused { .. } => Category::Invalid,
            Failure::PodsRemain { .. } => Category::Timeout,
            Failure::Invalid(_) => Category::Invalid,
            Failure::RolledBack { cause, .. } => cause.category(),
        }
    }

    /// This failure with a note of what was undone (or left).
    pub(super) fn with_undo(self, undo: impl Into<String>) -> Failure {
        Failure::RolledBack {
            cause: Box::new(self),
            undo: undo.into(),
        }
    }
}

/// A failed call in one line: the operation, the API server's message, its code and reason
/// (kube's own rendering carries the whole Status object).
pub(super) fn brief(e: &CallError) -> String {
    match e {
        CallError::Api {
            op,
            source: kube::Error::Api(status),
        } => {
            let message = status.message.trim().trim_end_matches('.');
            format!("{op}: {message} ({} {})", status.code, status.reason)
        }
        other => other.to_string(),
    }
}

/// The entry of an action from its result: `Ok(detail)` is Done.
pub(super) fn entry_of(action: Action, result: Result<String, Stop>) -> Entry {
    match result {
        Ok(detail) => Entry::done(action, detail),
        Err(Stop::Fail(f)) => {
            tracing::warn!(error = %f, category = f.category().as_str(), ?action, "executor action failed");
            Entry::failed(action, f.to_string(), f.category())
        }
        Err(stop) => {
            let reason = stop.skip_reason().unwrap_or_default();
            tracing::debug!(%reason, ?action, "executor action skipped");
            Entry::skipped(action, reason)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rolled_back_failure_keeps_its_cause_category_and_says_what_was_undone() {
        let f = Failure::AtMin {
            group: "MachineSet ns/a".into(),
            replicas: 1,
            min: 1,
        }
        .with_undo("taint removed");
        assert_eq!(f.category(), Category::Conflict);
        assert_eq!(
            f.to_string(),
            "MachineSet ns/a has 1 replicas, at its min size 1: lowering it would go below; taint removed"
        );
    }

    #[test]
    fn api_errors_read_in_one_line() {
        let status = kube::core::Status::failure(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            "TooManyRequests",
        )
        .with_code(429);
        let e = CallError::Api {
            op: "evict pod shop/a".into(),
            source: kube::Error::Api(Box::new(status)),
        };
        assert_eq!(
            Failure::Call(e).to_string(),
            "evict pod shop/a: Cannot evict pod as it would violate the pod's disruption budget (429 TooManyRequests)"
        );
    }

    #[test]
    fn deliberate_stops_become_skipped_entries() {
        let action = Action::ClearStaleTaint { node: "n".into() };
        let e = entry_of(action.clone(), Err(Stop::NotLeader));
        assert_eq!(e, Entry::skipped(action.clone(), "not the leader"));
        let e = entry_of(action.clone(), Err(Stop::DryRun));
        assert_eq!(e, Entry::skipped(action, "dry run"));
    }
}
