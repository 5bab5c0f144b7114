//! Where the lease lives: a `coordination.k8s.io/v1` Lease read and written with the
//! resourceVersion as precondition, so of two replicas writing at once one gets a 409 and
//! loses the race. A trait, so that the election loop is tested on paused time with an
//! in-memory store.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use super::decide::LeaseRecord;
use crate::cluster::error::{CallError, call};

pub(super) trait LeaseStore {
    /// What was read, to be handed back to `update` (the resourceVersion precondition).
    type Version;

    async fn get(&self) -> Result<Option<(LeaseRecord, Self::Version)>, CallError>;
    async fn create(&self, record: &LeaseRecord) -> Result<(), CallError>;
    async fn update(&self, read: Self::Version, record: &LeaseRecord) -> Result<(), CallError>;
}

pub(super) struct KubeLeases {
    pub api: Api<Lease>,
    pub namespace: String,
    pub name: String,
    pub timeout: Duration,
}

impl KubeLeases {
    fn op(&self, verb: &str) -> String {
        format!("{verb} Lease {}/{}", self.namespace, self.name)
    }
}

impl LeaseStore for KubeLeases {
    type Version = Lease;

    async fn get(&self) -> Result<Option<(LeaseRecord, Lease)>, CallError> {
        let lease = call(
            || self.op("get"),
            self.timeout,
            self.api.get_opt(&self.name),
        )
        .await?;
        Ok(lease.map(|l| (record_of(l.spec.as_ref()), l)))
    }

    async fn create(&self, record: &LeaseRecord) -> Result<(), CallError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec_of(record, None)),
        };
        let pp = PostParams::default();
        call(
            || self.op("create"),
            self.timeout,
            self.api.create(&pp, &lease),
        )
        .await?;
        Ok(())
    }

    async fn update(&self, mut read: Lease, record: &LeaseRecord) -> Result<(), CallError> {
        read.spec = Some(spec_of(record, read.spec.take()));
        let pp = PostParams::default();
        call(
            || self.op("update"),
            self.timeout,
            self.api.replace(&self.name, &pp, &read),
        )
        .await?;
        Ok(())
    }
}

fn record_of(spec: Option<&LeaseSpec>) -> LeaseRecord {
    let spec = spec.cloned().unwrap_or_default();
    let seconds = spec.lease_duration_seconds.unwrap_or(0).max(0);
    LeaseRecord {
        holder: spec.holder_identity,
        lease_duration: Duration::from_secs(u64::try_from(seconds).unwrap_or(0)),
        acquire_time: spec.acquire_time.map(|t| t.0),
        renew_time: spec.renew_time.map(|t| t.0),
        transitions: spec.lease_transitions.unwrap_or(0),
    }
}

/// The spec for `record`, keeping fields leader election does not own (strategy,
/// preferredHolder) from what was read.
fn spec_of(record: &LeaseRecord, old: Option<LeaseSpec>) -> LeaseSpec {
    // Whole seconds, at least one: a lease of 0 s would be expired as soon as written.
    let seconds = record.lease_duration.as_secs_f64().ceil().max(1.0);
    let seconds = if seconds >= f64::from(i32::MAX) {
        i32::MAX
    } else {
        seconds as i32
    };
    LeaseSpec {
        holder_identity: record.holder.clone(),
        lease_duration_seconds: Some(seconds),
        acquire_time: record.acquire_time.map(MicroTime),
        renew_time: record.renew_time.map(MicroTime),
        lease_transitions: Some(record.transitions),
        ..old.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_the_lease_spec() {
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let record = LeaseRecord {
            holder: Some("hub-a".into()),
            lease_duration: Duration::from_millis(1500),
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: 2,
        };
        let old = LeaseSpec {
            strategy: Some("OldestEmulationVersion".into()),
            ..LeaseSpec::default()
        };
        let spec = spec_of(&record, Some(old));
        assert_eq!(spec.lease_duration_seconds, Some(2));
        assert_eq!(spec.strategy.as_deref(), Some("OldestEmulationVersion"));
        let back = record_of(Some(&spec));
        assert_eq!(back.holder(), Some("hub-a"));
        assert_eq!(back.lease_duration, Duration::from_secs(2));
        assert_eq!(back.transitions, 2);
        assert_eq!(back.renew_time, Some(now));
        assert_eq!(record_of(None).holder(), None);
    }
}
