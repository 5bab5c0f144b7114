//! What the executor did with a plan, action by action, and how each went.
//!
//! This is the contract between the executor (which writes), the runner (which feeds
//! failures back into the engine's state), and `status` / `events` (which tell users).
//! Every entry carries a human-readable detail or reason.

use std::sync::Arc;

use serde::Serialize;

use super::error::Category;
use crate::engine::nodegroups::NodeGroupId;
use crate::model::ObjectKey;
use crate::model::pod::PodId;

/// One action of a plan, or of start-up recovery, and how it went.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub action: Action,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum Action {
    /// Raise a group's replicas (`from` is what the plan saw, `to` what it asked for).
    ScaleUp {
        group: NodeGroupId,
        from: u64,
        to: u64,
    },
    /// Lower a group's target to what it can reach (a timed-out scale-up).
    FixTargetSize {
        group: NodeGroupId,
        from: u64,
        to: u64,
    },
    /// Delete a machine that failed or never registered: mark it with the group's delete
    /// annotation, then (with `lower_replicas`) lower replicas by one.
    DeleteMachine {
        group: NodeGroupId,
        machine: ObjectKey,
        why: MachineDeletionKind,
        lower_replicas: bool,
    },
    /// First step of a scale-down: taint the node `ToBeDeletedByClusterAutoscaler` (and
    /// cordon it). On success a [`super::executor::NodeRemoval`] carries on.
    MarkNode {
        group: NodeGroupId,
        node: Arc<str>,
        empty: bool,
    },
    /// The rest of a scale-down: evict the node's pods, mark its machine, lower replicas by
    /// one. On failure the marks are removed again.
    RemoveNode {
        group: NodeGroupId,
        node: Arc<str>,
        empty: bool,
        /// The node was unready when chosen (upstream counts its removal as `unready`).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        unready: bool,
        /// Pods evicted (or already gone) before the machine was marked.
        evicted: Vec<PodId>,
        /// Pods whose eviction was refused for good or until the drain gave up.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        not_evicted: Vec<PodId>,
    },
    /// Write a ProvisioningRequest's conditions to its `status` subresource (upstream's
    /// `UpdateProvisioningRequest`), at the version it was read at.
    WriteRequestStatus {
        request: ObjectKey,
        api_version: String,
        conditions: Vec<crate::engine::provisioning::conditions::ConditionWrite>,
    },
    /// Delete a ProvisioningRequest finished longer than the TTL ago (upstream's
    /// `DeleteProvisioningRequest`).
    DeleteRequest {
        request: ObjectKey,
        api_version: String,
    },
    /// Start-up: a `ToBeDeletedByClusterAutoscaler` taint left by an earlier run, removed.
    ClearStaleTaint { node: Arc<str> },
    /// Start-up: a machine an earlier run marked for deletion without lowering replicas;
    /// replicas lowered now.
    FinishDecrement {
        group: NodeGroupId,
        machine: ObjectKey,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum MachineDeletionKind {
    /// The machine reports a failure.
    Failed,
    /// The machine never got a node within `max_node_provision_time`.
    Unregistered,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "result")]
pub enum Outcome {
    /// Written. `detail` says what changed, e.g. `MachineSet ns/a replicas 3 -> 5`.
    Done { detail: String },
    /// Deliberately not written: dry run, not the leader, or the plan no longer matches the
    /// cluster (the next pass plans again from fresh state).
    Skipped { reason: String },
    /// Tried and failed; anything half-done was undone where possible (`error` says what).
    Failed { error: String, category: Category },
}

impl Entry {
    pub fn done(action: Action, detail: impl Into<String>) -> Self {
        Entry {
            action,
            outcome: Outcome::Done {
                detail: detail.into(),
            },
        }
    }

    pub fn skipped(action: Action, reason: impl Into<String>) -> Self {
        Entry {
            action,
            outcome: Outcome::Skipped {
                reason: reason.into(),
            },
        }
    }

    pub fn failed(action: Action, error: impl Into<String>, category: Category) -> Self {
        Entry {
            action,
            outcome: Outcome::Failed {
                error: error.into(),
                category,
            },
        }
    }

    pub fn is_done(&self) -> bool {
        matches!(self.outcome, Outcome::Done { .. })
    }
}
