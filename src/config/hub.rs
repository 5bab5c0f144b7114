//! The hub's own settings: fleet.toml `[hub]`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ConfigIssue;
pub use super::serving::{Authentication, ServingConfig};
use super::tracing::TracingConfig;
use crate::engine::settings::duration_serde;
use crate::model::duration::format_go_duration;

pub(crate) use crate::model::meta::is_dns_label;

const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
const MIN_RETRY_PERIOD: Duration = Duration::from_millis(100);

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HubConfig {
    /// Address of the HTTP endpoints (metrics, API, dashboard; the probes too unless
    /// `serving` secures this port).
    pub listen: String,
    /// A pass runs at least this often for every cluster.
    #[serde(with = "duration_serde")]
    pub scan_interval: Duration,
    /// A relevant watch event (a new unschedulable pod, a node turning ready, a MachineSet
    /// change) starts a pass once the cluster has been quiet this long, so a burst of events
    /// makes one pass...
    #[serde(with = "duration_serde")]
    pub debounce: Duration,
    /// ...but never later than this after the first event of the burst.
    #[serde(with = "duration_serde")]
    pub debounce_max: Duration,
    /// Engine passes that run at once, across the fleet (CPU work: more than the cores only
    /// adds waiting); the rest queue, first come first served. 0: the number of cores.
    pub pass_concurrency: usize,
    /// Timeout of every call to a cluster's API server.
    #[serde(with = "duration_serde")]
    pub request_timeout: Duration,
    /// Kubeconfig files whose contexts the clusters name; empty means `$KUBECONFIG`, else
    /// `~/.kube/config`.
    pub kubeconfigs: Vec<PathBuf>,
    /// Plan and report for every cluster without writing to any.
    pub dry_run: bool,
    /// Namespace, in each cluster, of the status ConfigMap and of the events about it.
    pub status_namespace: String,
    pub leader_election: LeaderElection,
    /// The clusters shared among several replicas, each run by one at a time.
    pub sharding: Sharding,
    /// Traces over OTLP (docs/tracing.md); the `OTEL_*` variables fill what is not set.
    pub tracing: TracingConfig,
    /// TLS, authentication and limits of the HTTP endpoints (docs/hub.md, "Serving").
    pub serving: ServingConfig,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            listen: "0.0.0.0:8080".into(),
            scan_interval: Duration::from_secs(10),
            debounce: Duration::from_millis(200),
            debounce_max: Duration::from_secs(2),
            pass_concurrency: 0,
            request_timeout: Duration::from_secs(10),
            kubeconfigs: Vec::new(),
            dry_run: false,
            status_namespace: "openshift-machine-api".into(),
            leader_election: LeaderElection::default(),
            sharding: Sharding::default(),
            tracing: TracingConfig::default(),
            serving: ServingConfig::default(),
        }
    }
}

/// Only the replica holding the Lease acts; the others wait, ready to take over.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LeaderElection {
    pub enabled: bool,
    /// Kubeconfig context of the management cluster holding the Lease; in-cluster config when absent.
    pub context: Option<String>,
    pub namespace: String,
    pub lease_name: String,
    /// This replica's name in the Lease; the host name when absent.
    pub identity: Option<String>,
    #[serde(with = "duration_serde")]
    pub lease_duration: Duration,
    #[serde(with = "duration_serde")]
    pub renew_deadline: Duration,
    #[serde(with = "duration_serde")]
    pub retry_period: Duration,
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            enabled: false,
            context: None,
            namespace: "fleetscaler".into(),
            lease_name: "fleetscaler".into(),
            identity: None,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Replicas share the clusters: each runs the clusters rendezvous hashing gives it among the
/// live replicas, and writes to one only while it holds that cluster's Lease (docs/hub.md,
/// "Sharding").
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Sharding {
    pub enabled: bool,
    /// Kubeconfig context of the management cluster holding the Leases; in-cluster when absent.
    pub context: Option<String>,
    pub namespace: String,
    /// The Leases are `<prefix>-replica-<identity>` (one per replica, its heartbeat) and
    /// `<prefix>-cluster-<cluster>` (one per cluster, held by the replica that writes to it).
    pub lease_prefix: String,
    /// This replica's name; the host name and a random suffix when absent.
    pub identity: Option<String>,
    /// Where the other replicas and users reach this replica's API (`host:port`); by default
    /// `$POD_IP` (else the host name) and the listen port.
    pub advertise: Option<String>,
    #[serde(with = "duration_serde")]
    pub lease_duration: Duration,
    #[serde(with = "duration_serde")]
    pub renew_deadline: Duration,
    #[serde(with = "duration_serde")]
    pub retry_period: Duration,
}

impl Default for Sharding {
    fn default() -> Self {
        Sharding {
            enabled: false,
            context: None,
            namespace: "fleetscaler".into(),
            lease_prefix: "fleetscaler".into(),
            identity: None,
            advertise: None,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl Sharding {
    fn validate(&self, leader_election: bool, bad: &mut impl FnMut(&str, String)) {
        if !self.enabled {
            return;
        }
        if leader_election {
            bad(
                "sharding.enabled",
                "sharding elects a writer per cluster: turn hub.leader_election off".into(),
            );
        }
        if !is_dns_label(&self.namespace) {
            bad(
                "sharding.namespace",
                format!("{:?} is not a namespace name", self.namespace),
            );
        }
        if !is_dns_label(&self.lease_prefix) || self.lease_prefix.len() > 30 {
            bad(
                "sharding.lease_prefix",
                format!(
                    "{:?}: lower-case letters, digits and '-', at most 30 (Lease names are built on it)",
                    self.lease_prefix
                ),
            );
        }
        if self.retry_period < MIN_RETRY_PERIOD {
            bad(
                "sharding.retry_period",
                format!("at least {}", format_go_duration(MIN_RETRY_PERIOD)),
            );
        }
        if !(self.retry_period < self.renew_deadline && self.renew_deadline < self.lease_duration) {
            bad(
                "sharding",
                "needs retry_period < renew_deadline < lease_duration".into(),
            );
        }
    }
}

impl HubConfig {
    pub fn validate(&self, issues: &mut Vec<ConfigIssue>) {
        let mut bad = |key: &str, message: String| {
            issues.push(ConfigIssue {
                key: format!("hub.{key}"),
                message,
            })
        };
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            bad(
                "listen",
                format!("{:?} is not an address such as 0.0.0.0:8080", self.listen),
            );
        }
        for (key, d) in [
            ("scan_interval", self.scan_interval),
            ("request_timeout", self.request_timeout),
        ] {
            if d.is_zero() {
                bad(key, "must be longer than 0s".into());
            }
        }
        if self.debounce > self.debounce_max {
            bad(
                "debounce_max",
                format!(
                    "{} is shorter than hub.debounce ({}): a burst would wait longer than its maximum",
                    format_go_duration(self.debounce_max),
                    format_go_duration(self.debounce)
                ),
            );
        }
        if !is_dns_label(&self.status_namespace) {
            bad(
                "status_namespace",
                format!(
                    "{:?} is not a namespace name (lower-case letters, digits and '-', at most 63)",
                    self.status_namespace
                ),
            );
        }
        // A call allowed to hang longer than this is not a deadline.
        if self.request_timeout > MAX_REQUEST_TIMEOUT {
            bad(
                "request_timeout",
                format!(
                    "{} is longer than the {} a request may take",
                    format_go_duration(self.request_timeout),
                    format_go_duration(MAX_REQUEST_TIMEOUT)
                ),
            );
        }
        let le = &self.leader_election;
        if le.enabled && le.retry_period < MIN_RETRY_PERIOD {
            bad(
                "leader_election.retry_period",
                format!(
                    "{} would renew the Lease in a busy loop: at least {}",
                    format_go_duration(le.retry_period),
                    format_go_duration(MIN_RETRY_PERIOD)
                ),
            );
        }
        if le.enabled
            && !(le.retry_period < le.renew_deadline && le.renew_deadline < le.lease_duration)
        {
            bad(
                "leader_election",
                "needs retry_period < renew_deadline < lease_duration".into(),
            );
        }
        self.sharding.validate(le.enabled, &mut bad);
        self.tracing.validate(issues);
        self.serving.validate(&self.listen, issues);
    }
}
