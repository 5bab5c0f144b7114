//! The replicas that share the fleet, found through the management cluster: each replica
//! renews a Lease of its own (`<prefix>-replica-<identity>`, labelled) every retry period and
//! lists the others'. A replica is alive while its Lease keeps being renewed, judged by when
//! this replica *saw* it change, not by comparing clocks (as client-go's leader election). The
//! Lease also carries what a replica tells the others (`Gossip`): its address, the capacity
//! failures its clusters found, and a glance at each of its clusters for the fleet's health.
//! A clean stop deletes the replica's Lease, so the others take its clusters at once.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::lease_name;
use crate::cluster::error::{CallError, call};
use crate::engine::policy::SharedFailure;
use crate::hub::health::Glance;

/// The label every replica Lease carries (its value: the identity, as written).
pub const REPLICA_LABEL: &str = "fleetscaler.io/replica";
const GOSSIP_ANNOTATION: &str = "fleetscaler.io/gossip";
/// A peer's gossip larger than this is not read (an annotation may hold 256 KiB in all).
const MAX_GOSSIP_BYTES: usize = 128 * 1024;
/// Failures told per replica, newest first.
const MAX_TOLD_FAILURES: usize = 64;
/// Replicas tracked at most.
const MAX_PEERS: usize = 256;

/// How this replica takes part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerConfig {
    pub namespace: String,
    pub prefix: String,
    pub identity: String,
    pub address: Option<String>,
    pub lease_duration: Duration,
    pub retry_period: Duration,
    pub request_timeout: Duration,
}

/// What a replica tells the others on its Lease.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Gossip {
    pub address: Option<String>,
    /// Capacity failures its own clusters found, still in force.
    pub failures: Vec<SharedFailure>,
    /// Its clusters, as the fleet's health needs them.
    pub glances: Vec<Glance>,
}

/// One live replica.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Peer {
    pub identity: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// This replica itself.
    #[serde(rename = "self")]
    pub this: bool,
    #[serde(skip)]
    pub gossip: Gossip,
}

/// Which replicas are alive, judged from what was seen of their Leases and when.
#[derive(Debug, Default)]
pub struct Liveness {
    /// identity → (the renew time last read, when this replica saw it change, lease duration)
    seen: BTreeMap<String, (Option<Timestamp>, Instant, Duration)>,
}

impl Liveness {
    /// Notes one Lease as read at `now` (`wall` the wall clock, for a Lease seen the first
    /// time: one not renewed for long is a leftover of a replica long gone).
    pub fn observe(
        &mut self,
        identity: &str,
        renewed: Option<Timestamp>,
        duration: Duration,
        wall: Timestamp,
        now: Instant,
    ) {
        let full = self.seen.len() >= MAX_PEERS;
        match self.seen.get_mut(identity) {
            Some(entry) if entry.0 == renewed => entry.2 = duration,
            Some(entry) => *entry = (renewed, now, duration),
            None if full => {}
            None => {
                let stale = renewed.is_none_or(|t| {
                    let age = wall.duration_since(t).unsigned_abs();
                    age > duration.saturating_mul(2)
                });
                // A leftover starts out expired; a live one as just renewed.
                let changed = if stale {
                    now.checked_sub(duration).unwrap_or(now)
                } else {
                    now
                };
                self.seen
                    .insert(identity.to_string(), (renewed, changed, duration));
            }
        }
    }

    /// Forgets Leases no longer listed.
    pub fn retain(&mut self, listed: &[String]) {
        self.seen.retain(|id, _| listed.contains(id));
    }

    pub fn alive(&self, identity: &str, now: Instant) -> bool {
        self.seen
            .get(identity)
            .is_some_and(|(_, changed, d)| now.saturating_duration_since(*changed) < *d)
    }
}

/// Renews this replica's Lease, lists the others and publishes the live ones (this one
/// included, while its own renewals succeed) until `cancel`; then deletes its Lease.
pub async fn run(
    client: kube::Client,
    cfg: PeerConfig,
    told: impl Fn() -> Gossip,
    out: watch::Sender<Vec<Peer>>,
    cancel: CancellationToken,
) {
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    let mut liveness = Liveness::default();
    let mut renewed: Option<Instant> = None;
    let mut failing = Failing::default();
    // The first look can miss replicas starting at the same moment (a fresh install, every
    // pod restarted): acting on it, each would start every cluster and drop most of them a
    // retry period later, after listing them all. The replicas are told from the second.
    let mut looked = false;
    loop {
        let sent = Instant::now();
        match renew(&api, &cfg, &told()).await {
            Ok(()) => renewed = Some(sent),
            Err(e) => failing.note(format!("cannot renew this replica's Lease: {e}")),
        }
        match list(&api, &cfg, &mut liveness).await {
            Ok(mut peers) => {
                let me_alive = renewed.is_some_and(|t| t.elapsed() < cfg.lease_duration);
                if me_alive {
                    failing.clear();
                }
                peers.retain(|p| !p.this || me_alive);
                if looked {
                    out.send_if_modified(|old| replace_if_changed(old, peers));
                }
                looked = true;
            }
            Err(e) => failing.note(format!("cannot list the replicas' Leases: {e}")),
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(cfg.retry_period) => {}
        }
    }
    let name = replica_lease(&cfg);
    let deleted = call(
        || format!("delete Lease {}/{name}", cfg.namespace),
        cfg.request_timeout,
        api.delete(&name, &DeleteParams::default()),
    )
    .await;
    if let Err(e) = deleted {
        tracing::warn!("could not delete this replica's Lease; it expires on its own: {e}");
    }
}

/// A failure logged when it starts or changes, not at every retry.
#[derive(Default)]
struct Failing(Option<String>);

impl Failing {
    fn note(&mut self, message: String) {
        if self.0.as_ref() != Some(&message) {
            tracing::warn!("sharding: {message}");
            self.0 = Some(message);
        }
    }

    fn clear(&mut self) {
        if self.0.take().is_some() {
            tracing::info!("sharding: this replica's Lease is renewed again");
        }
    }
}

fn replace_if_changed(old: &mut Vec<Peer>, new: Vec<Peer>) -> bool {
    if *old == new {
        return false;
    }
    *old = new;
    true
}

fn replica_lease(cfg: &PeerConfig) -> String {
    lease_name(&cfg.prefix, "replica", &cfg.identity)
}

/// Creates or refreshes this replica's Lease with what it tells the others.
async fn renew(api: &Api<Lease>, cfg: &PeerConfig, told: &Gossip) -> Result<(), CallError> {
    let name = replica_lease(cfg);
    let op = |verb: &str| format!("{verb} Lease {}/{name}", cfg.namespace);
    let lease = replica_object(cfg, &name, told, Timestamp::now());
    let patch = Patch::Merge(&lease);
    let patched = call(
        || op("patch"),
        cfg.request_timeout,
        api.patch(&name, &PatchParams::default(), &patch),
    )
    .await;
    match patched {
        Err(e) if e.is_not_found() => call(
            || op("create"),
            cfg.request_timeout,
            api.create(&PostParams::default(), &lease),
        )
        .await
        .map(drop),
        other => other.map(drop),
    }
}

fn replica_object(cfg: &PeerConfig, name: &str, told: &Gossip, now: Timestamp) -> Lease {
    let mut told = told.clone();
    told.address = cfg.address.clone();
    told.failures.sort_by_key(|f| std::cmp::Reverse(f.at));
    told.failures.truncate(MAX_TOLD_FAILURES);
    let gossip = serde_json::to_string(&told).unwrap_or_default();
    let seconds = i32::try_from(cfg.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(cfg.namespace.clone()),
            labels: Some([(REPLICA_LABEL.to_string(), label_value(&cfg.identity))].into()),
            annotations: Some([(GOSSIP_ANNOTATION.to_string(), gossip)].into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(cfg.identity.clone()),
            lease_duration_seconds: Some(seconds),
            renew_time: Some(MicroTime(now)),
            ..LeaseSpec::default()
        }),
    }
}

/// A label value: at most 63 of `[A-Za-z0-9._-]`, starting and ending alphanumeric.
fn label_value(identity: &str) -> String {
    let cleaned: String = identity
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// The live replicas among the labelled Leases, sorted by identity.
async fn list(
    api: &Api<Lease>,
    cfg: &PeerConfig,
    liveness: &mut Liveness,
) -> Result<Vec<Peer>, CallError> {
    let params = ListParams::default()
        .labels(REPLICA_LABEL)
        .limit(MAX_PEERS as u32);
    let leases = call(
        || format!("list Leases in {} labelled {REPLICA_LABEL}", cfg.namespace),
        cfg.request_timeout,
        api.list(&params),
    )
    .await?;
    let (now, wall) = (Instant::now(), Timestamp::now());
    let mut listed = Vec::new();
    let mut peers = Vec::new();
    for lease in leases.items {
        let spec = lease.spec.clone().unwrap_or_default();
        let Some(identity) = spec.holder_identity.clone() else {
            continue;
        };
        let duration = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(0).max(1)).unwrap_or(1),
        );
        liveness.observe(&identity, spec.renew_time.map(|t| t.0), duration, wall, now);
        listed.push(identity.clone());
        if liveness.alive(&identity, now) {
            peers.push(peer_of(&lease, identity, &cfg.identity));
        }
    }
    liveness.retain(&listed);
    peers.sort_by(|a, b| a.identity.cmp(&b.identity));
    peers.dedup_by(|a, b| a.identity == b.identity);
    Ok(peers)
}

fn peer_of(lease: &Lease, identity: String, me: &str) -> Peer {
    let gossip = lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(GOSSIP_ANNOTATION))
        .filter(|g| g.len() <= MAX_GOSSIP_BYTES)
        .and_then(|g| serde_json::from_str::<Gossip>(g).ok())
        .unwrap_or_default();
    Peer {
        this: identity == me,
        address: gossip.address.clone(),
        identity,
        gossip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_replica_is_alive_while_its_lease_keeps_changing() {
        let (t0, wall) = (Instant::now(), Timestamp::now());
        let mut l = Liveness::default();
        let renewed = |s: i64| Some(wall + jiff::SignedDuration::from_secs(s));
        l.observe("a", renewed(0), 15 * S, wall, t0);
        assert!(l.alive("a", t0 + 14 * S));
        assert!(
            !l.alive("a", t0 + 15 * S),
            "not renewed for a lease duration"
        );
        l.observe("a", renewed(10), 15 * S, wall, t0 + 10 * S);
        assert!(l.alive("a", t0 + 20 * S), "renewed");
        assert!(!l.alive("b", t0), "never seen");
        l.retain(&[]);
        assert!(!l.alive("a", t0 + 20 * S), "forgotten once not listed");
    }

    #[test]
    fn a_leftover_lease_is_not_taken_for_a_live_replica() {
        let (t0, wall) = (Instant::now() + 60 * S, Timestamp::now());
        let mut l = Liveness::default();
        let old = Some(wall - jiff::SignedDuration::from_secs(600));
        l.observe("gone", old, 15 * S, wall, t0);
        assert!(!l.alive("gone", t0));
        // Even with clocks apart by less than a lease duration, a fresh one counts.
        let recent = Some(wall - jiff::SignedDuration::from_secs(20));
        l.observe("skewed", recent, 15 * S, wall, t0);
        assert!(l.alive("skewed", t0));
    }

    #[test]
    fn the_replica_lease_carries_what_it_tells_bounded() {
        let cfg = PeerConfig {
            namespace: "fleetscaler".into(),
            prefix: "fleetscaler".into(),
            identity: "Hub_A/1".into(),
            address: Some("10.0.0.5:8080".into()),
            lease_duration: 15 * S,
            retry_period: 2 * S,
            request_timeout: 5 * S,
        };
        let lease = replica_object(
            &cfg,
            "fleetscaler-replica-x",
            &Gossip::default(),
            Timestamp::now(),
        );
        let labels = lease.metadata.labels.unwrap();
        assert_eq!(labels[REPLICA_LABEL], "Hub_A-1");
        let gossip = &lease.metadata.annotations.unwrap()[GOSSIP_ANNOTATION];
        let read: Gossip = serde_json::from_str(gossip).unwrap();
        assert_eq!(read.address.as_deref(), Some("10.0.0.5:8080"));
        assert_eq!(lease.spec.unwrap().lease_duration_seconds, Some(15));
        assert_eq!(label_value("-x-"), "x");
    }
}
