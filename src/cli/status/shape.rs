//! What `status` shows, in the stable shape `--output json` prints (docs/hub.md, "fleetscaler
//! status"): every key always present (`null` when unknown), so scripts need not guess.
//! Each cluster is classed as the hub classes it for the fleet's health.

use std::collections::BTreeSet;

use jiff::Timestamp;
use serde::Serialize;

use super::api::{
    ActionDoc, ClusterDoc, FleetDoc, HappeningDoc, HubDoc, PhaseDoc, ShardingDoc, TimedDoc,
};
use crate::hub::health::ClusterState;

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::cli) struct Status {
    pub server: String,
    /// The hub's clock when it last judged the fleet (else this machine's): ages are
    /// counted from it, so a skewed clock here does not age every action.
    pub at: Timestamp,
    pub fleet: Option<Fleet>,
    pub hub: Option<Hub>,
    /// With sharding: who runs what; `null` without.
    pub sharding: Option<Sharding>,
    pub clusters: Vec<Cluster>,
}

/// The replicas sharing the fleet, as the one that answered sees them.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::cli) struct Sharding {
    /// The replica that answered.
    pub identity: String,
    /// Every cluster of the fleet, whichever replica runs it.
    pub clusters: usize,
    /// The clusters this replica runs (those `clusters[]` lists).
    pub runs: Vec<String>,
    /// The clusters whose Lease it holds now: those it writes to.
    pub writing: Vec<String>,
    /// Clusters it runs but does not write to yet (their Lease not held yet).
    pub taking_over: Vec<String>,
    /// The live replicas, this one first, then by identity.
    pub replicas: Vec<Replica>,
}

#[derive(Clone, Debug, Serialize)]
pub(in crate::cli) struct Replica {
    pub identity: String,
    /// `host:port` of its API, when it tells it.
    pub address: Option<String>,
    /// The replica that answered.
    #[serde(rename = "self")]
    pub this: bool,
    /// The clusters it runs.
    pub clusters: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::cli) struct Fleet {
    pub state: String,
    pub reason: String,
    pub since: Timestamp,
    pub clusters: u64,
    pub unhealthy_clusters: u64,
    pub scale_down_paused: bool,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::cli) struct Hub {
    pub leader_election: bool,
    /// This replica may write (always true without leader election).
    pub leading: bool,
    /// This replica's lease identity.
    pub identity: Option<String>,
    /// Who holds the lease, as last seen.
    pub holder: Option<String>,
    pub lease_error: Option<Timed>,
    pub dry_run: bool,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::cli) struct Cluster {
    pub name: String,
    pub health: ClusterState,
    /// Why, when not healthy.
    pub reason: Option<String>,
    pub phase: &'static str,
    pub dry_run: bool,
    pub nodes: u64,
    pub ready_nodes: u64,
    pub unready_nodes: u64,
    pub pending_pods: u64,
    pub stuck_pods: u64,
    pub node_groups: u64,
    pub last_action: Option<LastAction>,
    pub last_error: Option<Timed>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::cli) struct LastAction {
    pub at: Timestamp,
    /// `done`, `skipped` or `failed`.
    pub result: String,
    pub description: String,
}

#[derive(Clone, Debug, Serialize)]
pub(in crate::cli) struct Timed {
    pub at: Timestamp,
    pub message: String,
}

impl Status {
    /// `now` is this machine's clock, used only when the hub does not say its own.
    pub fn from_api(server: &str, mut doc: FleetDoc, now: Timestamp) -> Status {
        let at = doc.fleet.as_ref().and_then(|f| f.at).unwrap_or(now);
        Status {
            server: server.to_string(),
            at,
            fleet: doc.fleet.map(|f| Fleet {
                state: f.state,
                reason: f.reason,
                since: f.since,
                clusters: f.clusters,
                unhealthy_clusters: f.unhealthy_clusters,
                scale_down_paused: f.scale_down_paused,
            }),
            sharding: doc
                .hub
                .as_mut()
                .and_then(|h| h.sharding.take())
                .map(sharding),
            hub: doc.hub.map(hub),
            clusters: doc.clusters.into_iter().map(cluster).collect(),
        }
    }
}

fn hub(h: HubDoc) -> Hub {
    let leader = h.leader;
    Hub {
        leader_election: h.leader_election,
        leading: h.leading,
        identity: leader.as_ref().and_then(|l| l.identity.clone()),
        holder: leader.as_ref().and_then(|l| l.holder.clone()),
        lease_error: leader.and_then(|l| l.error).map(|e| Timed {
            at: e.since,
            message: e.message,
        }),
        dry_run: h.dry_run,
    }
}

fn sharding(s: ShardingDoc) -> Sharding {
    let runs_on = |identity: &str| -> Vec<String> {
        let owned = s.owners.iter().filter(|(_, r)| r.as_str() == identity);
        owned.map(|(c, _)| c.clone()).collect()
    };
    let mut replicas: Vec<Replica> = s
        .replicas
        .iter()
        .map(|r| Replica {
            identity: r.identity.clone(),
            address: r.address.clone(),
            this: r.this || r.identity == s.identity,
            clusters: runs_on(&r.identity),
        })
        .collect();
    // An owner not among the replicas listed is still named, without an address.
    let unlisted: BTreeSet<&String> = s
        .owners
        .values()
        .filter(|o| !s.replicas.iter().any(|r| &r.identity == *o))
        .collect();
    replicas.extend(unlisted.into_iter().map(|o| Replica {
        identity: o.clone(),
        address: None,
        this: *o == s.identity,
        clusters: runs_on(o),
    }));
    replicas.sort_by(|a, b| (!a.this, &a.identity).cmp(&(!b.this, &b.identity)));
    let runs = runs_on(&s.identity);
    let taking_over = runs
        .iter()
        .filter(|c| !s.writing.contains(c))
        .cloned()
        .collect();
    Sharding {
        clusters: s.owners.len(),
        runs,
        writing: s.writing,
        taking_over,
        replicas,
        identity: s.identity,
    }
}

fn cluster(c: ClusterDoc) -> Cluster {
    Cluster {
        health: c.state,
        reason: c.state_reason,
        phase: phase_name(c.phase),
        dry_run: c.dry_run,
        nodes: c.nodes,
        ready_nodes: c.ready_nodes,
        unready_nodes: c.unready_nodes,
        pending_pods: c.pending_pods,
        stuck_pods: c.stuck_pods,
        node_groups: c.node_groups,
        last_action: c.recent.last().map(last_action),
        last_error: c
            .last_error
            .map(|TimedDoc { at, message }| Timed { at, message }),
        name: c.name,
    }
}

fn phase_name(p: PhaseDoc) -> &'static str {
    match p {
        PhaseDoc::Connecting => "connecting",
        PhaseDoc::Syncing => "syncing",
        PhaseDoc::Running => "running",
        PhaseDoc::Failed => "failed",
        PhaseDoc::Stopped => "stopped",
    }
}

fn last_action(h: &HappeningDoc) -> LastAction {
    let o = &h.outcome;
    let description = match (o.result.as_str(), &o.detail, &o.reason, &o.error) {
        ("done", Some(detail), _, _) => detail.clone(),
        ("skipped", _, Some(reason), _) => format!("{} skipped: {reason}", action(&h.action)),
        ("failed", _, _, Some(error)) => format!("{} failed: {error}", action(&h.action)),
        (result, ..) => format!("{} ({result})", action(&h.action)),
    };
    LastAction {
        at: h.at,
        result: o.result.clone(),
        description,
    }
}

/// As `cluster::report::describe_action` words it.
fn action(a: &ActionDoc) -> String {
    let or_dash = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".into());
    let (group, node, machine) = (or_dash(&a.group), or_dash(&a.node), or_dash(&a.machine));
    let sizes = match (a.from, a.to) {
        (Some(from), Some(to)) => format!(" {from} -> {to}"),
        _ => String::new(),
    };
    match a.kind.as_str() {
        "scaleUp" => format!("scale up {group}{sizes}"),
        "fixTargetSize" => format!("lower the target of {group}{sizes}"),
        "deleteMachine" => match a.why.as_deref() {
            Some("unregistered") => format!("delete machine {machine} (never registered)"),
            Some(why) => format!("delete machine {machine} ({why})"),
            None => format!("delete machine {machine}"),
        },
        "markNode" => format!("taint node {node} for removal"),
        "removeNode" => format!("remove node {node}"),
        "clearStaleTaint" => format!("clear a stale taint on node {node}"),
        "finishDecrement" => format!("finish the interrupted removal of machine {machine}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::api::parse;
    use super::*;

    fn fixture() -> Status {
        let doc = parse(include_bytes!("fixture.json")).unwrap();
        Status::from_api("http://hub:8080", doc, Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn ages_count_from_the_hubs_clock() {
        let s = fixture();
        assert_eq!(s.at.to_string(), "2025-06-01T12:00:00Z");
        let doc = parse(br#"{"clusters": []}"#).unwrap();
        let now = Timestamp::UNIX_EPOCH;
        assert_eq!(Status::from_api("x", doc, now).at, now);
    }

    #[test]
    fn clusters_are_classed_with_the_reason_when_not_healthy() {
        let s = fixture();
        let classes: Vec<_> = s
            .clusters
            .iter()
            .map(|c| (c.health.as_str(), c.reason.as_deref().unwrap_or("")))
            .collect();
        assert_eq!(
            classes,
            [
                ("healthy", ""),
                ("unhealthy", "2 of 5 nodes unready (more than 45%)"),
                (
                    "failed",
                    "connecting: tcp connect error: Connection refused (os error 111)"
                ),
            ]
        );
    }

    #[test]
    fn the_last_action_says_what_and_how_it_went() {
        let s = fixture();
        let last = |i: usize| s.clusters[i].last_action.clone().map(|a| a.description);
        assert_eq!(
            last(0).as_deref(),
            Some("MachineSet openshift-machine-api/sim-1-worker-b replicas 2 -> 3")
        );
        assert_eq!(
            last(1).as_deref(),
            Some(
                "scale up MachineDeployment.cluster.x-k8s.io/default/sim-2-md-0 1 -> 2 failed: 409 Conflict"
            )
        );
        assert_eq!(last(2), None);
    }

    #[test]
    fn the_json_shape_has_every_key_even_when_unknown() {
        let json = serde_json::to_value(fixture()).unwrap();
        let keys = |v: &serde_json::Value| {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k.join(",")
        };
        assert_eq!(keys(&json), "at,clusters,fleet,hub,server,sharding");
        assert_eq!(json["sharding"], serde_json::Value::Null);
        assert_eq!(
            keys(&json["clusters"][2]),
            "dryRun,health,lastAction,lastError,name,nodeGroups,nodes,pendingPods,phase,\
             readyNodes,reason,stuckPods,unreadyNodes"
        );
        assert_eq!(json["clusters"][2]["lastAction"], serde_json::Value::Null);
        assert_eq!(json["hub"]["holder"], "hub-0");
        assert_eq!(json["fleet"]["unhealthyClusters"], 2);
    }

    fn sharded() -> Status {
        let doc = parse(include_bytes!("fixture_sharded.json")).unwrap();
        Status::from_api("http://10.0.0.5:8080", doc, Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn sharding_says_who_runs_what_and_what_is_taken_over() {
        let s = sharded().sharding.unwrap();
        assert_eq!(s.identity, "hub-a");
        assert_eq!(s.clusters, 6);
        assert_eq!(s.runs, ["sim-1", "sim-4"]);
        assert_eq!(s.writing, ["sim-1"]);
        assert_eq!(s.taking_over, ["sim-4"]);
        let replicas: Vec<_> = s
            .replicas
            .iter()
            .map(|r| {
                (
                    r.identity.as_str(),
                    r.address.as_deref(),
                    r.this,
                    r.clusters.join(","),
                )
            })
            .collect();
        assert_eq!(
            replicas,
            [
                ("hub-a", Some("10.0.0.5:8080"), true, "sim-1,sim-4".into()),
                (
                    "hub-b",
                    Some("10.0.0.6:8080"),
                    false,
                    "sim-2,sim-5,sim-6".into()
                ),
                ("hub-c", None, false, "sim-3".into()),
            ]
        );
    }

    #[test]
    fn an_owner_missing_from_the_replicas_is_still_named() {
        let body = br#"{"hub": {"sharding": {"identity": "a",
            "replicas": [{"identity": "a", "self": true}],
            "owners": {"x": "a", "y": "z", "w": "z"}, "writing": ["x"]}}, "clusters": []}"#;
        let doc = parse(body).unwrap();
        let s = Status::from_api("x", doc, Timestamp::UNIX_EPOCH);
        let s = s.sharding.unwrap();
        let z = &s.replicas[1];
        assert_eq!((z.identity.as_str(), z.address.as_deref()), ("z", None));
        assert_eq!(z.clusters, ["w", "y"]);
        assert!(s.taking_over.is_empty());
    }

    #[test]
    fn the_sharded_json_has_every_key() {
        let json = serde_json::to_value(sharded()).unwrap();
        let s = &json["sharding"];
        let mut keys: Vec<&String> = s.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "clusters",
                "identity",
                "replicas",
                "runs",
                "takingOver",
                "writing"
            ]
        );
        assert_eq!(s["replicas"][2]["address"], serde_json::Value::Null);
        assert_eq!(s["replicas"][0]["self"], true);
        assert_eq!(s["replicas"][1]["clusters"][0], "sim-2");
        // The hub's own part is read as before.
        assert_eq!(json["hub"]["leaderElection"], false);
    }
}
