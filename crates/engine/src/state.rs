//! `EngineState`: what the engine remembers from one pass to the next. It is serializable
//! (JSON, versioned), so `fleetscaler plan --state FILE --save-state FILE` can replay a
//! sequence of dumps and times, and a person can read what the engine remembers.
//!
//! The state is updated as if the plan is carried out; the hub reports what failed with
//! [`EngineState::record_scale_up_failure`] and [`EngineState::record_scale_down_failure`].

use fleetscaler_model::{Warning, WarningCode};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::nodegroups::{GroupRef, NodeGroupId, NodeGroups};
use super::reason::FailureKind;
use super::settings::{Settings, duration_serde};

/// The version of the state format this build reads and writes.
pub const STATE_FORMAT_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineState {
    pub version: u32,
    /// Node name → since when it has been unneeded (without a break).
    #[serde(default)]
    pub unneeded_since: BTreeMap<String, Timestamp>,
    /// Node group id → scale-ups still coming up, oldest first. Each keeps its own deadline,
    /// so pods arriving later never push back the timeout of an earlier scale-up.
    #[serde(default)]
    pub scale_ups: BTreeMap<NodeGroupId, Vec<ScaleUpIncrement>>,
    /// Node group id → its backoff after failures.
    #[serde(default)]
    pub backoff: BTreeMap<NodeGroupId, Backoff>,
    /// Failed machines (`ns/name`) already counted against their group, so each backs it off once.
    #[serde(default)]
    pub failed_machines: BTreeSet<String>,
    #[serde(default)]
    pub last_scale_up: Option<Timestamp>,
    #[serde(default)]
    pub last_scale_down_delete: Option<Timestamp>,
    #[serde(default)]
    pub last_scale_down_failure: Option<Timestamp>,
    /// ProvisioningRequests: whose turn the next pass is, and the retry timing of those
    /// found without capacity.
    #[serde(default, skip_serializing_if = "is_default")]
    pub provisioning: crate::provisioning::ProvisioningMemory,
    /// The priority expander's configuration as last compiled (never saved).
    #[serde(skip)]
    pub priority_cache: crate::expander::PriorityCache,
}

impl Default for EngineState {
    fn default() -> Self {
        EngineState {
            version: STATE_FORMAT_VERSION,
            unneeded_since: BTreeMap::new(),
            scale_ups: BTreeMap::new(),
            backoff: BTreeMap::new(),
            failed_machines: BTreeSet::new(),
            last_scale_up: None,
            last_scale_down_delete: None,
            last_scale_down_failure: None,
            provisioning: Default::default(),
            priority_cache: Default::default(),
        }
    }
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// Nodes asked of a group at one time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleUpIncrement {
    pub nodes: u64,
    pub requested_at: Timestamp,
    /// Not asked by this engine: found after a restart (target above registered nodes), timed
    /// from the oldest machine without a node.
    #[serde(default)]
    pub reconstructed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Backoff {
    #[serde(with = "duration_serde")]
    pub duration: Duration,
    pub until: Timestamp,
    pub last_failure: Timestamp,
    pub reason: String,
    /// States saved before it existed read as a failed size change.
    #[serde(default)]
    pub kind: FailureKind,
    /// The machine whose failure started it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
}

/// Why a state file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("not a fleetscaler state file: {0}")]
    Format(String),
    #[error("state format version {found}; this fleetscaler reads version {STATE_FORMAT_VERSION}")]
    Version { found: u32 },
}

impl EngineState {
    pub fn from_json(text: &str) -> Result<EngineState, StateError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| StateError::Format(e.to_string()))?;
        let found = value
            .get("version")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        if found != u64::from(STATE_FORMAT_VERSION) {
            return Err(StateError::Version {
                found: u32::try_from(found).unwrap_or(u32::MAX),
            });
        }
        serde_path_to_error::deserialize(value)
            .map_err(|e| StateError::Format(format!("{}: {}", e.path(), e.inner())))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Backs a group off after a failure, as upstream: 5m first, doubling after each failure
    /// that comes once the previous backoff ended, at most the max; a failure during a
    /// backoff restarts it at the same length.
    pub fn back_off(
        &mut self,
        group: &NodeGroupId,
        now: Timestamp,
        kind: FailureKind,
        reason: String,
        settings: &Settings,
    ) {
        let duration = match self.backoff.get(group) {
            None => settings.initial_node_group_backoff,
            Some(b) if b.until <= now => b
                .duration
                .checked_mul(2)
                .unwrap_or(settings.max_node_group_backoff)
                .min(settings.max_node_group_backoff),
            Some(b) => b.duration,
        };
        self.backoff.insert(
            group.clone(),
            Backoff {
                duration,
                until: add(now, duration),
                last_failure: now,
                reason,
                kind,
                machine: None,
            },
        );
    }

    /// Forgets backoffs whose last failure is older than the reset time: the next failure
    /// starts over at the initial length.
    pub fn reset_old_backoffs(&mut self, now: Timestamp, settings: &Settings) {
        self.backoff
            .retain(|_, b| add(b.last_failure, settings.node_group_backoff_reset) > now);
    }

    /// The backoff in force for a group, if any.
    pub fn backed_off(&self, group: &NodeGroupId, now: Timestamp) -> Option<&Backoff> {
        self.backoff.get(group).filter(|b| b.until > now)
    }

    /// A scale-up the plan asked for (assumed carried out).
    pub fn record_scale_up(&mut self, group: &NodeGroupId, nodes: u64, now: Timestamp) {
        self.scale_ups
            .entry(group.clone())
            .or_default()
            .push(ScaleUpIncrement {
                nodes,
                requested_at: now,
                reconstructed: false,
            });
        self.last_scale_up = Some(now);
    }

    /// The hub could not raise a group's size: forget the increment and back the group off.
    pub fn record_scale_up_failure(
        &mut self,
        group: &NodeGroupId,
        nodes: u64,
        now: Timestamp,
        reason: String,
        settings: &Settings,
    ) {
        if let Some(increments) = self.scale_ups.get_mut(group) {
            consume_newest(increments, nodes);
        }
        self.back_off(group, now, FailureKind::ScaleUpFailed, reason, settings);
    }

    /// A scale-up the hub did not carry out for a reason that is not the group's fault
    /// (dry run, not the leader, the group changed since the snapshot): forget it, no backoff.
    pub fn forget_scale_up(&mut self, group: &NodeGroupId, nodes: u64) {
        if let Some(increments) = self.scale_ups.get_mut(group) {
            consume_newest(increments, nodes);
            if increments.is_empty() {
                self.scale_ups.remove(group);
            }
        }
    }

    /// The hub could not remove a node: scale-down pauses for `scale_down_delay_after_failure`.
    pub fn record_scale_down_failure(&mut self, now: Timestamp) {
        self.last_scale_down_failure = Some(now);
    }
}

impl EngineState {
    /// Re-keys what a state file remembers under upstream's unqualified group names
    /// (`MachineSet/ns/name`, written before ids carried the API group) to the id of the
    /// group of `groups` it names. An unqualified name that fits a group of each Machine API
    /// is dropped with a warning (returned); one that fits none is left alone.
    pub fn adopt_unqualified_ids(&mut self, groups: &NodeGroups) -> Vec<Warning> {
        let unqualified =
            |k: &NodeGroupId| GroupRef::parse(k.as_str()).is_ok_and(|r| r.api.is_none());
        if !self
            .scale_ups
            .keys()
            .chain(self.backoff.keys())
            .any(unqualified)
        {
            return Vec::new();
        }
        let known: Vec<(GroupRef, &NodeGroupId)> = groups
            .groups
            .iter()
            .map(|g| &g.id)
            .chain(groups.ineligible.iter().map(|g| &g.id))
            .filter_map(|id| GroupRef::parse(id.as_str()).ok().map(|r| (r, id)))
            .filter(|(r, _)| r.api.is_some())
            .collect();
        let mut warnings = Vec::new();
        adopt(&mut self.scale_ups, &known, "scale-ups", &mut warnings);
        adopt(&mut self.backoff, &known, "backoff", &mut warnings);
        warnings
    }
}

fn adopt<T>(
    map: &mut BTreeMap<NodeGroupId, T>,
    known: &[(GroupRef, &NodeGroupId)],
    what: &str,
    warnings: &mut Vec<Warning>,
) {
    let unqualified: Vec<(NodeGroupId, GroupRef)> = map
        .keys()
        .filter_map(|k| GroupRef::parse(k.as_str()).ok().map(|r| (k.clone(), r)))
        .filter(|(_, r)| r.api.is_none())
        .collect();
    for (old, named) in unqualified {
        let candidates = known
            .iter()
            .filter_map(|(r, id)| Some((r.api?, r.kind, &r.key, *id)));
        match named.find(candidates) {
            Ok(Some(id)) => {
                if let Some(v) = map.remove(&old) {
                    map.entry(id.clone()).or_insert(v);
                }
            }
            Ok(None) => {}
            Err(e) => {
                map.remove(&old);
                warnings.push(Warning::about(
                    WarningCode::StateForgotten,
                    "state",
                    format!("{what} of {e}; forgotten"),
                ));
            }
        }
    }
}

/// Removes `nodes` from the newest increments (a scale-up that did not happen).
fn consume_newest(increments: &mut Vec<ScaleUpIncrement>, mut nodes: u64) {
    while nodes > 0 {
        let Some(last) = increments.last_mut() else {
            break;
        };
        let take = last.nodes.min(nodes);
        last.nodes -= take;
        nodes -= take;
        if last.nodes == 0 {
            increments.pop();
        }
    }
}

/// `t + d`, saturating at the largest time instead of failing.
pub fn add(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: &str = "MachineSet.machine.openshift.io/ns/g";

    fn id(text: &str) -> NodeGroupId {
        NodeGroupId::parse(text).unwrap()
    }

    fn at(minutes: i64) -> Timestamp {
        Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_mins(minutes)
    }

    #[test]
    fn backoff_doubles_caps_and_resets_as_upstream() {
        let s = Settings::default();
        let mut st = EngineState::default();
        let mut lengths = Vec::new();
        let mut t = 0;
        for _ in 0..5 {
            st.back_off(&id(G), at(t), FailureKind::Timeout, "timeout".into(), &s);
            let b = &st.backoff[G];
            lengths.push(b.duration.as_secs() / 60);
            // The next failure comes once this backoff has ended.
            t += (b.duration.as_secs() / 60) as i64;
        }
        assert_eq!(lengths, vec![5, 10, 20, 30, 30]);
        assert!(st.backed_off(&id(G), at(t - 1)).is_some());
        assert!(st.backed_off(&id(G), at(t)).is_none());
        // Three hours without a failure: forgotten, the next one starts at 5m again.
        st.reset_old_backoffs(at(t - 30 + 180 + 1), &s);
        assert!(st.backoff.is_empty());
        st.back_off(
            &id(G),
            at(t + 200),
            FailureKind::Timeout,
            "timeout".into(),
            &s,
        );
        assert_eq!(st.backoff[G].duration.as_secs(), 300);
    }

    #[test]
    fn a_failure_during_a_backoff_restarts_it_at_the_same_length() {
        let s = Settings::default();
        let mut st = EngineState::default();
        st.back_off(&id(G), at(0), FailureKind::Timeout, "a".into(), &s);
        st.back_off(&id(G), at(2), FailureKind::Timeout, "b".into(), &s);
        assert_eq!(st.backoff[G].duration.as_secs(), 300);
        assert_eq!(st.backoff[G].until, at(7));
    }

    #[test]
    fn round_trips_and_refuses_other_versions() {
        let mut st = EngineState::default();
        st.record_scale_up(&id("MachineSet.machine.openshift.io/ns/a"), 2, at(1));
        st.unneeded_since.insert("node-1".into(), at(0));
        let back = EngineState::from_json(&st.to_json()).unwrap();
        assert_eq!(back, st);
        let err = EngineState::from_json(r#"{"version": 7}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("version 7"), "{err}");
        assert!(EngineState::from_json("[]").is_err());
        assert!(
            EngineState::from_json(r#"{"version": 1, "backoff": 3}"#)
                .unwrap_err()
                .to_string()
                .contains("backoff")
        );
    }

    #[test]
    fn a_failed_scale_up_is_forgotten_and_backs_off() {
        let s = Settings::default();
        let mut st = EngineState::default();
        st.record_scale_up(&id(G), 2, at(0));
        st.record_scale_up(&id(G), 3, at(1));
        st.record_scale_up_failure(&id(G), 3, at(1), "forbidden".into(), &s);
        assert_eq!(st.scale_ups[G].len(), 1);
        assert!(st.backed_off(&id(G), at(2)).is_some());
    }

    #[test]
    fn a_scale_up_not_carried_out_is_forgotten_without_backoff() {
        let mut st = EngineState::default();
        st.record_scale_up(&id(G), 2, at(0));
        st.record_scale_up(&id(G), 3, at(1));
        st.forget_scale_up(&id(G), 4);
        assert_eq!(st.scale_ups[G][0].nodes, 1);
        st.forget_scale_up(&id(G), 1);
        assert!(!st.scale_ups.contains_key(G));
        assert!(st.backoff.is_empty());
    }

    #[test]
    fn an_absurd_backoff_from_a_state_file_does_not_overflow() {
        let s = Settings::default();
        let mut st = EngineState::default();
        st.backoff.insert(
            id(G),
            Backoff {
                duration: Duration::MAX,
                until: at(0),
                last_failure: at(0),
                kind: FailureKind::Timeout,
                reason: "x".into(),
                machine: None,
            },
        );
        st.back_off(&id(G), at(1), FailureKind::Timeout, "again".into(), &s);
        assert_eq!(st.backoff[G].duration, s.max_node_group_backoff);
    }

    #[test]
    fn unqualified_group_names_of_an_older_state_are_adopted_unless_ambiguous() {
        use crate::fixtures::{machineset, snapshot};
        use fleetscaler_model::{MachineApiGroup, ObjectKey, ScalableKind};
        let s = snapshot([
            machineset("only", 1, 3, 1).json(),
            machineset("both", 1, 3, 1).json(),
            machineset("both", 1, 3, 1).cluster_api().json(),
        ]);
        let groups = crate::nodegroups::discover(&s, &[]);
        assert_eq!(groups.groups.len(), 3, "{:?}", groups.warnings);
        let mut st = EngineState::default();
        st.record_scale_up(&id("MachineSet/openshift-machine-api/only"), 2, at(0));
        st.record_scale_up(&id("MachineSet/openshift-machine-api/gone"), 1, at(0));
        st.back_off(
            &id("MachineSet/openshift-machine-api/both"),
            at(0),
            FailureKind::Timeout,
            "x".into(),
            &Settings::default(),
        );
        let warnings = st.adopt_unqualified_ids(&groups);
        let only = NodeGroupId::new(
            MachineApiGroup::OpenShift,
            ScalableKind::MachineSet,
            &ObjectKey::new("openshift-machine-api", "only"),
        );
        let keys: Vec<&str> = st.scale_ups.keys().map(NodeGroupId::as_str).collect();
        assert_eq!(
            keys,
            vec![only.as_str(), "MachineSet/openshift-machine-api/gone"]
        );
        assert!(st.backoff.is_empty());
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].to_string().starts_with(
                "state: backoff of MachineSet/openshift-machine-api/both is ambiguous"
            ),
            "{warnings:?}"
        );
    }
}
