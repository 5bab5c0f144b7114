//! The part of `/api/v1/fleet` that `status` reads, as the hub serializes it
//! (`server::api`, `ClusterReport`, `HubStatus`, `FleetHealth`). What the table needs is
//! required, so that an answer without it is named by its field path; the rest is optional,
//! so that an older or newer hub still shows.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Deserialize;

use crate::hub::health::ClusterState;

#[derive(Debug, Deserialize)]
pub(in crate::cli) struct FleetDoc {
    pub hub: Option<HubDoc>,
    pub fleet: Option<FleetHealthDoc>,
    pub clusters: Vec<ClusterDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::cli) struct HubDoc {
    #[serde(default)]
    pub leader_election: bool,
    #[serde(default)]
    pub leading: bool,
    pub leader: Option<LeaderDoc>,
    #[serde(default)]
    pub dry_run: bool,
    /// With sharding (`hub::shard::ShardStatus`); hubs without it leave it out.
    pub sharding: Option<ShardingDoc>,
}

#[derive(Debug, Deserialize)]
pub(in crate::cli) struct ShardingDoc {
    pub identity: String,
    /// The live replicas, this one included.
    #[serde(default)]
    pub replicas: Vec<ReplicaDoc>,
    /// Every cluster of the fleet and the replica that runs it.
    #[serde(default)]
    pub owners: BTreeMap<String, String>,
    /// The clusters whose Lease this replica holds now.
    #[serde(default)]
    pub writing: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(in crate::cli) struct ReplicaDoc {
    pub identity: String,
    pub address: Option<String>,
    #[serde(rename = "self", default)]
    pub this: bool,
}

#[derive(Debug, Deserialize)]
pub(in crate::cli) struct LeaderDoc {
    pub identity: Option<String>,
    pub holder: Option<String>,
    pub error: Option<LeaseErrorDoc>,
}

#[derive(Debug, Deserialize)]
pub(in crate::cli) struct LeaseErrorDoc {
    pub since: Timestamp,
    pub message: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::cli) struct FleetHealthDoc {
    pub state: String,
    #[serde(default)]
    pub reason: String,
    pub since: Timestamp,
    /// When the hub worked this out (every second): the hub's clock.
    pub at: Option<Timestamp>,
    #[serde(default)]
    pub clusters: u64,
    #[serde(default)]
    pub unhealthy_clusters: u64,
    #[serde(default)]
    pub scale_down_paused: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::cli) enum PhaseDoc {
    Connecting,
    Syncing,
    Running,
    Failed,
    Stopped,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::cli) struct ClusterDoc {
    pub name: String,
    pub phase: PhaseDoc,
    #[serde(default)]
    pub dry_run: bool,
    pub nodes: u64,
    #[serde(default)]
    pub ready_nodes: u64,
    #[serde(default)]
    pub unready_nodes: u64,
    pub pending_pods: u64,
    #[serde(default)]
    pub stuck_pods: u64,
    pub node_groups: u64,
    /// The hub's judgement (`hub::health::ClusterState`) and why.
    pub state: ClusterState,
    pub state_reason: Option<String>,
    pub last_error: Option<TimedDoc>,
    /// Newest last.
    #[serde(default)]
    pub recent: Vec<HappeningDoc>,
}

#[derive(Clone, Debug, Deserialize)]
pub(in crate::cli) struct TimedDoc {
    pub at: Timestamp,
    pub message: String,
}

#[derive(Debug, Deserialize)]
pub(in crate::cli) struct HappeningDoc {
    pub at: Timestamp,
    pub action: ActionDoc,
    pub outcome: OutcomeDoc,
}

/// `cluster::outcome::Action`, every variant's fields optional.
#[derive(Debug, Deserialize)]
pub(in crate::cli) struct ActionDoc {
    #[serde(rename = "type")]
    pub kind: String,
    pub group: Option<String>,
    pub node: Option<String>,
    pub machine: Option<String>,
    pub from: Option<u64>,
    pub to: Option<u64>,
    pub why: Option<String>,
}

/// `cluster::outcome::Outcome`.
#[derive(Debug, Deserialize)]
pub(in crate::cli) struct OutcomeDoc {
    pub result: String,
    pub detail: Option<String>,
    pub reason: Option<String>,
    pub error: Option<String>,
}

/// Why an answer is not the fleet's JSON, and where.
#[derive(Debug, PartialEq)]
pub(in crate::cli) struct ParseError {
    /// `clusters[0].nodes`, or `.` when the text is not JSON at all.
    pub path: String,
    pub message: String,
}

pub(in crate::cli) fn parse(body: &[u8]) -> Result<FleetDoc, ParseError> {
    let mut json = serde_json::Deserializer::from_slice(body);
    let doc = serde_path_to_error::deserialize(&mut json).map_err(|e| ParseError {
        path: e.path().to_string(),
        message: e.inner().to_string(),
    })?;
    json.end().map_err(|e| ParseError {
        path: ".".into(),
        message: e.to_string(),
    })?;
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_reads() {
        let doc = parse(include_bytes!("fixture.json")).unwrap();
        assert_eq!(doc.clusters.len(), 3);
        assert_eq!(doc.clusters[0].phase, PhaseDoc::Running);
        assert_eq!(doc.clusters[0].recent[1].action.kind, "scaleUp");
        assert!(doc.hub.unwrap().leader_election);
    }

    #[test]
    fn the_sharded_fixture_reads() {
        let doc = parse(include_bytes!("fixture_sharded.json")).unwrap();
        let sharding = doc.hub.and_then(|h| h.sharding).unwrap();
        assert_eq!(sharding.identity, "hub-a");
        assert_eq!(sharding.replicas.len(), 3);
        assert!(sharding.replicas[0].this);
        assert_eq!(sharding.owners.len(), 6);
        assert_eq!(sharding.writing, ["sim-1"]);
    }

    #[test]
    fn sharding_tolerates_missing_lists() {
        let body = br#"{"hub": {"sharding": {"identity": "a"}}, "clusters": []}"#;
        let sharding = parse(body).unwrap().hub.and_then(|h| h.sharding).unwrap();
        assert!(sharding.replicas.is_empty() && sharding.owners.is_empty());
    }

    #[test]
    fn a_wrong_field_is_named_by_its_path() {
        let body =
            br#"{"clusters": [{"name": "a", "phase": "running", "since": "2025-01-01T00:00:00Z",
            "nodes": "many", "pendingPods": 0, "nodeGroups": 1}]}"#;
        let err = parse(body).unwrap_err();
        assert_eq!(err.path, "clusters[0].nodes");
        assert!(err.message.contains("invalid type"), "{err:?}");
    }

    #[test]
    fn a_missing_field_is_named_with_its_parent() {
        let body =
            br#"{"clusters": [{"name": "a", "phase": "running", "since": "2025-01-01T00:00:00Z",
            "nodes": 3, "nodeGroups": 1}]}"#;
        let err = parse(body).unwrap_err();
        assert_eq!(err.path, "clusters[0]");
        assert!(err.message.contains("pendingPods"), "{err:?}");
        let err = parse(br#"{"hub": {}}"#).unwrap_err();
        assert!(err.message.contains("clusters"), "{err:?}");
    }

    #[test]
    fn text_that_is_not_json_is_refused() {
        let err = parse(b"<html>proxy error</html>").unwrap_err();
        assert_eq!(err.path, ".");
        let err = parse(br#"{"clusters": []} trailing"#).unwrap_err();
        assert!(err.message.contains("trailing"), "{err:?}");
    }

    #[test]
    fn an_unknown_phase_is_named() {
        let body =
            br#"{"clusters": [{"name": "a", "phase": "dancing", "since": "2025-01-01T00:00:00Z",
            "nodes": 3, "pendingPods": 0, "nodeGroups": 1}]}"#;
        assert_eq!(parse(body).unwrap_err().path, "clusters[0].phase");
    }
}
