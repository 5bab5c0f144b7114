//! What the engine remembers about requests between passes: whose turn the next pass is,
//! and when a request found without capacity is tried again (upstream's injector keeps the
//! same in its backoff cache, and reads the last attempt off `lastTransitionTime`, which is
//! not rewritten here when nothing changes).

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use fleetscaler_model::ClusterSnapshot;
use fleetscaler_model::provisioning::{ConditionStatus, PROVISIONED, ProvisioningRequest};

use super::{Decision, INITIAL_RETRY, MAX_REMEMBERED, MAX_RETRY};
use crate::settings::duration_serde;
use crate::state::add;

/// What the engine remembers about requests between passes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningMemory {
    /// The next pass with both a request to serve and other pending pods serves the request.
    #[serde(default)]
    pub request_turn: bool,
    /// Request uid → when it was last tried without success, and its next wait (upstream's
    /// backoff cache).
    #[serde(default)]
    pub retries: BTreeMap<String, Retry>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    pub last_attempt: Timestamp,
    #[serde(with = "duration_serde")]
    pub wait: Duration,
}

/// When a request found without capacity may be tried again: its last attempt (the
/// engine's memory, else Provisioned's transition time) plus its wait.
pub(super) fn retry_at(r: &ProvisioningRequest, memory: &ProvisioningMemory) -> Option<Timestamp> {
    let c = r.condition(PROVISIONED)?;
    if c.status != ConditionStatus::False {
        return None;
    }
    let remembered = memory.retries.get(&*r.uid);
    let last = remembered
        .map(|m| m.last_attempt)
        .into_iter()
        .chain(c.last_transition)
        .max()?;
    Some(add(last, remembered.map_or(INITIAL_RETRY, |m| m.wait)))
}

/// Retry timing after an attempt (upstream's injector doubles the wait up to its max and
/// forgets a request once Provisioned or Failed).
pub(super) fn remember(
    memory: &mut ProvisioningMemory,
    r: &ProvisioningRequest,
    d: Decision,
    now: Timestamp,
) {
    let uid = r.uid.to_string();
    if d != Decision::CapacityNotFound {
        memory.retries.remove(&uid);
        return;
    }
    // A first attempt waits the initial time; a retry doubles the wait it waited.
    let retried = r
        .condition(PROVISIONED)
        .is_some_and(|c| c.status == ConditionStatus::False);
    let waited = memory.retries.get(&uid).map_or(INITIAL_RETRY, |m| m.wait);
    let wait = if retried {
        (waited * 2).min(MAX_RETRY)
    } else {
        INITIAL_RETRY
    };
    memory.retries.insert(
        uid,
        Retry {
            last_attempt: now,
            wait,
        },
    );
    while memory.retries.len() > MAX_REMEMBERED {
        let oldest = memory
            .retries
            .iter()
            .min_by_key(|(_, m)| m.last_attempt)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => memory.retries.remove(&k),
            None => break,
        };
    }
}

/// Forgets the retry timing of requests no longer in the cluster.
pub fn forget_gone(memory: &mut ProvisioningMemory, snapshot: &ClusterSnapshot) {
    if memory.retries.is_empty() {
        return;
    }
    let present: std::collections::HashSet<&str> = snapshot
        .provisioning
        .requests
        .iter()
        .map(|r| &*r.uid)
        .collect();
    memory
        .retries
        .retain(|uid, _| present.contains(uid.as_str()));
}
