//! The election loop on paused time, against an in-memory Lease shared by the replicas.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::*;

/// The Lease, with a resourceVersion as the API server keeps it.
#[derive(Default)]
struct Shared {
    lease: Option<(LeaseRecord, u64)>,
}

/// One replica's view of the shared Lease; `down` makes its calls fail (an API server it
/// cannot reach).
#[derive(Clone)]
struct FakeStore {
    shared: Arc<Mutex<Shared>>,
    down: Arc<AtomicBool>,
}

fn unavailable() -> CallError {
    CallError::Timeout {
        op: "get Lease".into(),
        after: Duration::from_secs(1),
    }
}

fn conflict() -> CallError {
    CallError::Api {
        op: "update Lease".into(),
        source: kube::Error::Api(Box::new(
            kube::core::Status::failure("conflict", "Conflict").with_code(409),
        )),
    }
}

impl LeaseStore for FakeStore {
    type Version = u64;

    async fn get(&self) -> Result<Option<(LeaseRecord, u64)>, CallError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(unavailable());
        }
        Ok(self.shared.lock().unwrap().lease.clone())
    }

    async fn create(&self, record: &LeaseRecord) -> Result<(), CallError> {
        let mut s = self.shared.lock().unwrap();
        if self.down.load(Ordering::SeqCst) {
            return Err(unavailable());
        }
        if s.lease.is_some() {
            return Err(conflict());
        }
        s.lease = Some((record.clone(), 1));
        Ok(())
    }

    async fn update(&self, read: u64, record: &LeaseRecord) -> Result<(), CallError> {
        let mut s = self.shared.lock().unwrap();
        if self.down.load(Ordering::SeqCst) {
            return Err(unavailable());
        }
        match &s.lease {
            Some((_, v)) if *v == read => {
                s.lease = Some((record.clone(), read + 1));
                Ok(())
            }
            _ => Err(conflict()),
        }
    }
}

fn config(identity: &str) -> LeaderConfig {
    LeaderConfig {
        namespace: "fleetscaler".into(),
        lease_name: "fleetscaler".into(),
        identity: identity.into(),
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
    }
}

struct Replica {
    gate: watch::Receiver<bool>,
    state: watch::Receiver<LeaderState>,
    down: Arc<AtomicBool>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn start(shared: &Arc<Mutex<Shared>>, identity: &str) -> Replica {
    let store = FakeStore {
        shared: shared.clone(),
        down: Arc::new(AtomicBool::new(false)),
    };
    let down = store.down.clone();
    let (gate_tx, gate) = watch::channel(false);
    let cfg = config(identity);
    let state_tx = watch::Sender::new(LeaderState {
        identity: identity.into(),
        leading: false,
        holder: None,
        transitions: 0,
        error: None,
    });
    let state = state_tx.subscribe();
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    let task = tokio::spawn(async move {
        Election {
            store,
            cfg: &cfg,
            gate: &gate_tx,
            state: &state_tx,
            observer: Observer::default(),
        }
        .run(&token)
        .await;
    });
    Replica {
        gate,
        state,
        down,
        cancel,
        task,
    }
}

fn holder(shared: &Arc<Mutex<Shared>>) -> Option<String> {
    let s = shared.lock().unwrap();
    s.lease
        .as_ref()
        .and_then(|(r, _)| r.holder().map(str::to_string))
}

async fn settle() {
    // Let spawned tasks run their ready work without moving the clock.
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

async fn advance(d: Duration) {
    tokio::time::advance(d).await;
    settle().await;
}

#[tokio::test(start_paused = true)]
async fn one_replica_leads_and_renews_the_other_waits() {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let a = start(&shared, "a");
    settle().await;
    let b = start(&shared, "b");
    settle().await;
    assert!(*a.gate.borrow());
    assert!(!*b.gate.borrow());
    assert_eq!(holder(&shared).as_deref(), Some("a"));
    assert_eq!(b.state.borrow().holder.as_deref(), Some("a"));
    assert!(a.state.borrow().leading);
    let renewed = |s: &Arc<Mutex<Shared>>| s.lock().unwrap().lease.as_ref().unwrap().1;
    let before = renewed(&shared);
    for _ in 0..30 {
        advance(Duration::from_secs(1)).await;
        assert!(*a.gate.borrow() && !*b.gate.borrow());
    }
    assert!(renewed(&shared) >= before + 14, "renewed every 2s");
    a.cancel.cancel();
    b.cancel.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_leader_releases_and_the_standby_takes_over_at_its_next_try() {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let a = start(&shared, "a");
    settle().await;
    let b = start(&shared, "b");
    settle().await;
    a.cancel.cancel();
    settle().await;
    assert!(
        !*a.gate.borrow(),
        "the gate closes before the lease is released"
    );
    assert_eq!(holder(&shared), None);
    a.task.await.unwrap();
    advance(Duration::from_secs(2)).await;
    assert!(*b.gate.borrow(), "taken within one retry period");
    let s = shared.lock().unwrap();
    let (record, _) = s.lease.as_ref().unwrap();
    assert_eq!(record.holder(), Some("b"));
    assert_eq!(record.transitions, 1);
    drop(s);
    b.cancel.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_closes_its_gate_before_the_lease_expires() {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let a = start(&shared, "a");
    settle().await;
    let b = start(&shared, "b");
    settle().await;
    // a's last renewal happens at t=2s, then its API server is gone.
    advance(Duration::from_secs(2)).await;
    a.down.store(true, Ordering::SeqCst);
    let mut closed_at = None;
    let mut taken_at = None;
    for t in 3..=30 {
        advance(Duration::from_secs(1)).await;
        if closed_at.is_none() && !*a.gate.borrow() {
            closed_at = Some(t);
        }
        if taken_at.is_none() && *b.gate.borrow() {
            taken_at = Some(t);
        }
        assert!(
            !(*a.gate.borrow() && *b.gate.borrow()),
            "two leaders at t={t}s"
        );
    }
    // Renew deadline 10s after the last renewal at 2s; tries come every 2s.
    let closed = closed_at.unwrap();
    assert!((12..=14).contains(&closed), "closed at {closed}s");
    // The lease (15s) expires for b 15s after b last saw it change (t=2s or t=4s,
    // depending on who ran first at t=2s); b tries every 2s.
    let taken = taken_at.unwrap();
    assert!((17..=21).contains(&taken), "taken at {taken}s");
    assert!(closed < taken);
    a.cancel.cancel();
    b.cancel.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_sees_another_holder_closes_its_gate_at_once() {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let a = start(&shared, "a");
    settle().await;
    {
        let mut s = shared.lock().unwrap();
        let (record, v) = s.lease.clone().unwrap();
        let taken = LeaseRecord::claimed(
            Some(&record),
            "intruder",
            record.lease_duration,
            Timestamp::now(),
        );
        s.lease = Some((taken, v + 1));
    }
    advance(Duration::from_secs(2)).await;
    assert!(!*a.gate.borrow());
    assert_eq!(a.state.borrow().holder.as_deref(), Some("intruder"));
    assert!(!a.state.borrow().leading);
    a.cancel.cancel();
    a.task.await.unwrap();
    // It did not release what is not its own.
    assert_eq!(holder(&shared).as_deref(), Some("intruder"));
}

/// Seed of issue 12: lease failures were logged at debug only and nowhere in the API.
#[tokio::test(start_paused = true)]
async fn a_lease_call_failing_is_in_the_state_until_one_succeeds() {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let a = start(&shared, "a");
    settle().await;
    assert!(a.state.borrow().error.is_none());
    a.down.store(true, Ordering::SeqCst);
    advance(Duration::from_secs(2)).await;
    let error = a.state.borrow().error.clone().unwrap();
    assert!(
        error.message.starts_with("renewal failed, retrying"),
        "{error:?}"
    );
    a.down.store(false, Ordering::SeqCst);
    advance(Duration::from_secs(2)).await;
    assert!(a.state.borrow().error.is_none());
    assert!(*a.gate.borrow());
    a.cancel.cancel();
}
