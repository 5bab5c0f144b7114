//! Sharding: several hub replicas share the fleet's clusters, using the management cluster
//! as the only coordinator.
//!
//! - `peers`: each replica renews a Lease of its own and reads the others': the live replicas,
//!   and what each tells the rest (address, shared capacity failures, its clusters' health).
//! - `rendezvous`: from the live replicas, every replica computes the same owner for every
//!   cluster; a replica joining or leaving moves only its share.
//! - A replica runs the clusters it owns, and writes to one only while it holds that
//!   cluster's Lease (`<prefix>-cluster-<name>`, the leader election of `hub::leader` per
//!   cluster), which opens that cluster's write gate. Two replicas that briefly disagree on
//!   who owns a cluster (one has not yet seen a peer come or go) may both run it, but only the
//!   Lease holder writes; a replica that loses a cluster stops its runner (which undoes what
//!   it had under way while it still holds the Lease) and then releases the Lease, so the new
//!   owner takes over at once; a replica that dies has its Leases expire.

pub mod peers;
pub mod rendezvous;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use self::peers::{Gossip, Peer, PeerConfig};
use super::leader::{LeaderConfig, LeaderElector, LeaderState};
use crate::cluster::gate::{self, WriteGate};
use crate::config::hub::Sharding;

/// `<prefix>-<kind>-<name>`, a valid object name whatever `name` is: lower-cased, characters
/// outside `[a-z0-9-]` replaced, and when that changed it or it is long, a hash of the
/// original appended (so two names never share a Lease).
pub fn lease_name(prefix: &str, kind: &str, name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .collect();
    let cleaned = cleaned.trim_matches('-');
    if cleaned == name && name.len() <= 40 {
        return format!("{prefix}-{kind}-{name}");
    }
    let short: String = cleaned.chars().take(40).collect();
    let hash = rendezvous::stable_hash(&[name]) as u32;
    format!(
        "{prefix}-{kind}-{}{hash:08x}",
        if short.is_empty() {
            String::new()
        } else {
            format!("{}-", short.trim_end_matches('-'))
        }
    )
}

/// Sharding's settings, with this replica's identity and address resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardConfig {
    pub peers: PeerConfig,
    pub renew_deadline: Duration,
}

impl ShardConfig {
    pub fn new(s: &Sharding, identity: String, address: Option<String>, timeout: Duration) -> Self {
        ShardConfig {
            peers: PeerConfig {
                namespace: s.namespace.clone(),
                prefix: s.lease_prefix.clone(),
                identity,
                address,
                lease_duration: s.lease_duration,
                retry_period: s.retry_period,
                request_timeout: timeout,
            },
            renew_deadline: s.renew_deadline,
        }
    }

    /// The leader election of one cluster's Lease.
    fn cluster_lease(&self, cluster: &str) -> LeaderConfig {
        let p = &self.peers;
        LeaderConfig {
            namespace: p.namespace.clone(),
            lease_name: lease_name(&p.prefix, "cluster", cluster),
            identity: p.identity.clone(),
            lease_duration: p.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: p.retry_period,
            request_timeout: p.request_timeout,
        }
    }
}

/// Who runs what, as this replica sees it now.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardStatus {
    pub identity: String,
    /// The live replicas, this one included (while its own Lease is renewed).
    pub replicas: Vec<Peer>,
    /// Every cluster of the fleet and the replica that runs it.
    pub owners: BTreeMap<String, String>,
    /// The clusters whose Lease this replica holds now: those it writes to.
    pub writing: Vec<String>,
}

impl ShardStatus {
    /// The clusters this replica runs.
    pub fn mine(&self) -> BTreeSet<String> {
        self.owners
            .iter()
            .filter(|(_, r)| **r == self.identity)
            .map(|(c, _)| c.clone())
            .collect()
    }
}

/// Assigns `clusters` over the live `replicas` (none to anyone while there is none: a
/// replica that cannot renew its own Lease runs nothing).
pub fn assign(identity: &str, replicas: &[Peer], clusters: &[String]) -> ShardStatus {
    let ids: Vec<&str> = replicas.iter().map(|p| p.identity.as_str()).collect();
    let owners = clusters
        .iter()
        .filter_map(|c| {
            rendezvous::owner(c, ids.iter().copied()).map(|r| (c.clone(), r.to_string()))
        })
        .collect();
    ShardStatus {
        identity: identity.to_string(),
        replicas: replicas.to_vec(),
        owners,
        writing: Vec::new(),
    }
}

/// A running replica's part in the sharding: its peers task and the client for Leases.
pub struct Shards {
    client: kube::Client,
    cfg: ShardConfig,
    peers: watch::Receiver<Vec<Peer>>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

/// One cluster's Lease, held while this replica runs the cluster.
pub struct ClusterLease {
    pub gate: WriteGate,
    pub state: watch::Receiver<LeaderState>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl ClusterLease {
    /// Stops writing and releases the Lease (after the cluster's runner has stopped).
    pub async fn release(self) {
        self.cancel.cancel();
        let _ = self.task.await;
    }
}

impl Shards {
    /// Starts renewing this replica's Lease and watching the others'. `told` says what to
    /// tell them (called every retry period).
    pub fn start(
        client: kube::Client,
        cfg: ShardConfig,
        told: impl Fn() -> Gossip + Send + 'static,
    ) -> Shards {
        let (out, peers) = watch::channel(Vec::new());
        let cancel = CancellationToken::new();
        let task = tokio::spawn(peers::run(
            client.clone(),
            cfg.peers.clone(),
            told,
            out,
            cancel.clone(),
        ));
        Shards {
            client,
            cfg,
            peers,
            cancel,
            task,
        }
    }

    pub fn identity(&self) -> &str {
        &self.cfg.peers.identity
    }

    /// The live replicas; changes are announced on the receiver.
    pub fn peers(&self) -> watch::Receiver<Vec<Peer>> {
        self.peers.clone()
    }

    /// Starts electing this replica as the writer of `cluster`.
    pub fn lease(&self, cluster: &str) -> ClusterLease {
        let elector = LeaderElector::new(self.client.clone(), self.cfg.cluster_lease(cluster));
        let state = elector.state();
        let (open, gate) = gate::channel(false);
        let cancel = CancellationToken::new();
        let task = tokio::spawn(elector.run(open, cancel.clone()));
        ClusterLease {
            gate,
            state,
            cancel,
            task,
        }
    }

    /// Leaves the fleet: deletes this replica's Lease so the others take its clusters at once.
    pub async fn stop(self) {
        self.cancel.cancel();
        let _ = self.task.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(id: &str) -> Peer {
        Peer {
            identity: id.into(),
            address: None,
            this: false,
            gossip: Gossip::default(),
        }
    }

    #[test]
    fn lease_names_are_valid_and_distinct() {
        assert_eq!(
            lease_name("fs", "cluster", "prod-east"),
            "fs-cluster-prod-east"
        );
        let odd = lease_name("fs", "cluster", "Prod_East");
        assert!(odd.starts_with("fs-cluster-prod-east-"), "{odd}");
        assert_ne!(odd, lease_name("fs", "cluster", "prod.east"));
        let long = lease_name("fs", "replica", &"x".repeat(300));
        assert!(long.len() <= 63, "{long}");
        let weird = lease_name("fs", "cluster", "日本");
        assert!(
            weird
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{weird}"
        );
        assert!(!weird.ends_with('-') && !weird.contains("--"), "{weird}");
    }

    #[test]
    fn every_cluster_has_one_owner_among_the_live_replicas() {
        let clusters: Vec<String> = (1..=12).map(|i| format!("sim-{i}")).collect();
        let replicas = [peer("a"), peer("b"), peer("c")];
        let status = assign("b", &replicas, &clusters);
        assert_eq!(status.owners.len(), 12);
        let all: BTreeSet<String> = ["a", "b", "c"]
            .iter()
            .flat_map(|r| assign(r, &replicas, &clusters).mine())
            .collect();
        assert_eq!(all.len(), 12, "each cluster run by exactly one");
        assert!(assign("a", &[], &clusters).mine().is_empty());
    }
}
