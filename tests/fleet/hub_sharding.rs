//! Sharding across hub replicas, end to end: three `fleetscaler run` processes share twelve
//! simulated clusters through Leases on a thirteenth (the management cluster). Each cluster
//! is written to by exactly one replica; killed without a chance to let go (SIGKILL), a
//! replica's clusters are driven again by the others within 30 s; and the simulated
//! clusters' write logs show that no cluster ever received writes from two replicas in the
//! same interval: while the replicas are settled, each cluster hears from its owner alone,
//! and while they come and go, its writers follow one another, never alternate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support;
use crate::replica_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use e2e_support::*;
use fleetscaler::sim::settings::Flavor;
use replica_support::{Replica, fleet_toml, lease_namespace};
use tokio::time::Instant;

const CLUSTERS: usize = 12;
const REPLICAS: [&str; 3] = ["replica-a", "replica-b", "replica-c"];
const TAKEOVER: Duration = Duration::from_secs(30);

/// Which replica holds which clusters' Leases, once every cluster is held by exactly one of
/// `replicas`.
async fn settled(replicas: &[&Replica]) -> BTreeMap<String, &'static str> {
    let mut owners = BTreeMap::new();
    for r in replicas {
        for c in r.writing().await {
            if owners.insert(c.clone(), r.identity).is_some() {
                return BTreeMap::new();
            }
        }
    }
    owners
}

/// How many writes each managed cluster has received so far.
fn marks(fleet: &fleetscaler::sim::fleet::Fleet) -> Vec<usize> {
    let managed = &fleet.clusters()[..CLUSTERS];
    managed
        .iter()
        .map(|c| c.cluster.writes.records().len())
        .collect()
}

/// The replicas that wrote to a cluster in `range` of its writes, in order, each run of
/// writes by one replica counted once.
fn writers(
    c: &fleetscaler::sim::fleet::ClusterHandle,
    range: std::ops::Range<usize>,
) -> Vec<String> {
    let mut runs: Vec<String> = Vec::new();
    let records = c.cluster.writes.records();
    let range = range.start.min(records.len())..range.end.min(records.len());
    for w in &records[range] {
        let Some(replica) = REPLICAS.iter().find(|r| w.agent.contains(*r)) else {
            continue;
        };
        if runs.last().map(String::as_str) != Some(*replica) {
            runs.push(replica.to_string());
        }
    }
    runs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_the_clusters_and_take_over_a_lost_ones() {
    let fleet = quiet_fleet(CLUSTERS + 1, Flavor::OpenShift).await;
    for c in &fleet.clusters()[..CLUSTERS] {
        c.cluster.writes.enable();
    }
    lease_namespace(&fleet.clusters()[CLUSTERS]).await;
    let dir = TempDir::new("e2e-sharding");
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    let mut replicas = Vec::new();
    for identity in REPLICAS {
        let toml = fleet_toml(&kubeconfig, CLUSTERS, identity);
        replicas.push(Replica::start(dir.path(), identity, &toml).await);
    }
    let all: Vec<&Replica> = replicas.iter().collect();
    // Once every replica has seen the others, each holds its share, and only it.
    let owners = eventually(Duration::from_secs(60), "every cluster held once", || {
        let all = all.clone();
        async move {
            let owners = settled(&all).await;
            let shared = REPLICAS.iter().all(|r| owners.values().any(|o| o == r));
            (owners.len() == CLUSTERS && shared).then_some(owners)
        }
    })
    .await;
    let settled_at = marks(&fleet);

    // The lost replica's clusters are driven again by the others.
    let lost = replicas.remove(1);
    let orphans: Vec<String> = owners
        .iter()
        .filter(|(_, r)| **r == lost.identity)
        .map(|(c, _)| c.clone())
        .collect();
    let mut lost = lost;
    let killed_at = marks(&fleet);
    let killed = Instant::now();
    lost.kill();
    let rest: Vec<&Replica> = replicas.iter().collect();
    let after = eventually(TAKEOVER, "the lost replica's clusters held again", || {
        let rest = rest.clone();
        async move {
            let owners = settled(&rest).await;
            (owners.len() == CLUSTERS).then_some(owners)
        }
    })
    .await;
    eprintln!("taken over in {:.1}s", killed.elapsed().as_secs_f64());
    for c in &orphans {
        assert_ne!(after[c], lost.identity);
    }
    for (c, r) in &owners {
        if *r != lost.identity {
            assert_eq!(after[c], *r, "{c} moved though its replica stayed");
        }
    }
    // Driven: a pending pod in one of them gets its scale-up from the new owner.
    let orphan = &orphans[0];
    let sim = fleet
        .clusters()
        .iter()
        .find(|c| c.name() == orphan)
        .unwrap();
    create_pods(sim, "after", 4, "7").await;
    let new_owner = after[orphan];
    eventually(TAKEOVER, "a scale-up by the new owner", || {
        let wrote = sim.cluster.writes.records().iter().any(|w| {
            w.agent.contains(new_owner) && w.method == "PUT" && w.path.ends_with("/scale")
        });
        async move { wrote.then_some(()) }
    })
    .await;

    // No cluster ever heard from two replicas in the same interval.
    for (i, c) in fleet.clusters()[..CLUSTERS].iter().enumerate() {
        let name = c.name().to_string();
        let never_back = |runs: &[String]| {
            let distinct: BTreeSet<&String> = runs.iter().collect();
            assert_eq!(
                distinct.len(),
                runs.len(),
                "{name}: writers alternate: {runs:?}"
            );
        };
        // Starting, replicas joined one by one: a cluster moved on, never back.
        never_back(&writers(c, 0..settled_at[i]));
        let settled = writers(c, settled_at[i]..killed_at[i]);
        assert!(
            settled.iter().all(|w| *w == owners[&name]),
            "{name} heard from {settled:?} while {} owned it",
            owners[&name]
        );
        let since = writers(c, killed_at[i]..usize::MAX);
        never_back(&since);
        assert!(
            since
                .iter()
                .all(|w| *w == after[&name] || *w == owners[&name]),
            "{name} heard from {since:?} after the kill"
        );
        assert_eq!(c.cluster.writes.dropped(), 0);
    }
    drop(replicas);
    fleet.shutdown().await;
}
