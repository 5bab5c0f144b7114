//! The decision, pure: given the Lease as read, this replica's identity and the time, take
//! it, renew it, or wait.
//!
//! Whether another holder's lease has expired is judged as client-go judges it: by how long
//! *this* replica has seen the record unchanged (`leaseDurationSeconds` on its own monotonic
//! clock), not by comparing the record's `renewTime` with its wall clock. Replicas with
//! skewed clocks can therefore never take a lease that is still being renewed. The price is
//! that a replica that just started waits one lease duration before it takes over a lease
//! left behind by a dead holder.

use std::time::Duration;

use jiff::Timestamp;
use tokio::time::Instant;

/// The fields of a Lease's spec that leader election uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRecord {
    /// Empty or absent: free (released by its last holder).
    pub holder: Option<String>,
    pub lease_duration: Duration,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    pub transitions: i32,
}

impl LeaseRecord {
    pub fn holder(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }

    /// The record this replica writes to take or keep the lease at `now`.
    pub fn claimed(
        old: Option<&LeaseRecord>,
        identity: &str,
        lease_duration: Duration,
        now: Timestamp,
    ) -> LeaseRecord {
        let (acquire_time, transitions) = match old {
            Some(o) if o.holder() == Some(identity) => {
                (o.acquire_time.or(Some(now)), o.transitions)
            }
            Some(o) => (Some(now), o.transitions.saturating_add(1)),
            None => (Some(now), 0),
        };
        LeaseRecord {
            holder: Some(identity.to_string()),
            lease_duration,
            acquire_time,
            renew_time: Some(now),
            transitions,
        }
    }

    /// The record a leader leaves behind on a clean exit: no holder, so a standby takes
    /// over on its next try instead of after a lease duration (client-go's ReleaseOnCancel).
    pub fn released(&self, now: Timestamp) -> LeaseRecord {
        LeaseRecord {
            holder: None,
            lease_duration: Duration::from_secs(1),
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: self.transitions,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// There is no Lease: create it, holding it.
    Create,
    /// Free or expired: take it over.
    Acquire,
    /// Ours: renew it.
    Renew,
    /// Someone else holds it and has renewed it within its duration.
    Held { holder: String },
}

/// The record as last seen, and when it was first seen that way (this replica's clock).
#[derive(Clone, Debug, Default)]
pub struct Observer {
    last: Option<(LeaseRecord, Instant)>,
}

impl Observer {
    pub fn decide(&mut self, read: Option<&LeaseRecord>, identity: &str, now: Instant) -> Decision {
        let Some(record) = read else {
            self.last = None;
            return Decision::Create;
        };
        let since = match &self.last {
            Some((seen, at)) if seen == record => *at,
            _ => {
                self.last = Some((record.clone(), now));
                now
            }
        };
        match record.holder() {
            None => Decision::Acquire,
            Some(h) if h == identity => Decision::Renew,
            Some(_) if now >= since + record.lease_duration => Decision::Acquire,
            Some(h) => Decision::Held {
                holder: h.to_string(),
            },
        }
    }

    /// This replica wrote `record` at `now`: that is the state it knows.
    pub fn wrote(&mut self, record: LeaseRecord, now: Instant) {
        self.last = Some((record, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: &str, renewed: i64) -> LeaseRecord {
        LeaseRecord {
            holder: Some(holder.into()),
            lease_duration: Duration::from_secs(15),
            acquire_time: Some(Timestamp::from_second(0).unwrap()),
            renew_time: Some(Timestamp::from_second(renewed).unwrap()),
            transitions: 3,
        }
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_missing_lease_is_created_and_a_free_one_taken() {
        let t0 = Instant::now();
        let mut o = Observer::default();
        assert_eq!(o.decide(None, "me", t0), Decision::Create);
        let mut free = held_by("", 0);
        assert_eq!(o.decide(Some(&free), "me", t0), Decision::Acquire);
        free.holder = None;
        assert_eq!(o.decide(Some(&free), "me", t0), Decision::Acquire);
    }

    #[test]
    fn ours_is_renewed() {
        let mut o = Observer::default();
        assert_eq!(
            o.decide(Some(&held_by("me", 0)), "me", Instant::now()),
            Decision::Renew
        );
    }

    #[test]
    fn anothers_lease_expires_after_its_duration_unchanged_on_our_clock() {
        let t0 = Instant::now();
        let mut o = Observer::default();
        let other = held_by("other", 100);
        let held = Decision::Held {
            holder: "other".into(),
        };
        // Its renewTime says nothing on its own: a stale-looking record seen for the first
        // time still gets a full lease duration.
        assert_eq!(o.decide(Some(&other), "me", t0), held);
        assert_eq!(o.decide(Some(&other), "me", t0 + secs(14)), held);
        assert_eq!(
            o.decide(Some(&other), "me", t0 + secs(15)),
            Decision::Acquire
        );
        // A renewal restarts the clock.
        let renewed = held_by("other", 110);
        assert_eq!(o.decide(Some(&renewed), "me", t0 + secs(16)), held);
        assert_eq!(o.decide(Some(&renewed), "me", t0 + secs(30)), held);
        assert_eq!(
            o.decide(Some(&renewed), "me", t0 + secs(31)),
            Decision::Acquire
        );
    }

    #[test]
    fn claiming_counts_transitions_and_keeps_the_acquire_time_on_renewal() {
        let now = Timestamp::from_second(500).unwrap();
        let d = secs(15);
        let created = LeaseRecord::claimed(None, "me", d, now);
        assert_eq!(created.transitions, 0);
        assert_eq!(created.acquire_time, Some(now));
        let taken = LeaseRecord::claimed(Some(&held_by("other", 1)), "me", d, now);
        assert_eq!(taken.transitions, 4);
        assert_eq!(taken.holder(), Some("me"));
        assert_eq!(taken.acquire_time, Some(now));
        let renewed = LeaseRecord::claimed(Some(&held_by("me", 1)), "me", d, now);
        assert_eq!(renewed.transitions, 3);
        assert_eq!(
            renewed.acquire_time,
            Some(Timestamp::from_second(0).unwrap())
        );
        assert_eq!(renewed.renew_time, Some(now));
        let released = renewed.released(now);
        assert_eq!(released.holder(), None);
        assert_eq!(released.transitions, 3);
    }
}
