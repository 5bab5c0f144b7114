//! One simulated cluster: its state behind one lock, its fault switch, timing and
//! credentials. Everything that serves or changes the cluster holds an `Arc<Cluster>`.

use std::sync::{Mutex, MutexGuard};

use crate::api::audit::{RequestLog, WriteLog};
use crate::faults::FaultSwitch;
use crate::registry::State;
use crate::rng::Rng;
use crate::settings::{Flavor, Timing};

/// A simulated cluster.
#[derive(Debug)]
pub struct Cluster {
    /// The kubeconfig context name, `sim-<n>`.
    pub name: String,
    pub flavor: Flavor,
    pub timing: Timing,
    pub faults: FaultSwitch,
    /// The bearer token clients must present.
    pub token: String,
    /// The requests answered, once recording is enabled (tests check RBAC rules with it).
    pub requests: RequestLog,
    /// Every write received, with its sender, once enabled (tests of hub replicas).
    pub writes: WriteLog,
    /// The connections clients opened, and in which protocol.
    pub connections: Connections,
    state: Mutex<State>,
    /// Fault rolls draw from their own source so they do not disturb the state's sequence.
    fault_rng: Mutex<Rng>,
}

impl Cluster {
    pub fn new(
        name: String,
        flavor: Flavor,
        timing: Timing,
        token: String,
        state: State,
        seed: u64,
    ) -> Self {
        Cluster {
            name,
            flavor,
            timing,
            faults: FaultSwitch::default(),
            token,
            requests: RequestLog::default(),
            writes: WriteLog::default(),
            connections: Connections::default(),
            state: Mutex::new(state),
            fault_rng: Mutex::new(Rng::new(seed ^ 0x5eed_fa17)),
        }
    }

    /// The cluster's state. Never held across an `.await`. A panic while holding it cannot
    /// leave an object half-written (writes are single inserts), so a poisoned lock is
    /// still safe to use.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A uniform draw in `[0, 1)` for fault injection.
    pub fn roll(&self) -> f64 {
        self.fault_rng
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .next_f64()
    }
}

/// Counts of a cluster's client connections since it started (after TLS): how many clients
/// hold how many connections is a cost on both sides (HTTP/1.1 needs one per open watch).
#[derive(Debug, Default)]
pub struct Connections {
    http1: std::sync::atomic::AtomicU64,
    http2: std::sync::atomic::AtomicU64,
    closed: std::sync::atomic::AtomicU64,
}

/// [`Connections`] at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectionCounts {
    pub http1: u64,
    pub http2: u64,
    /// Of those opened, how many are still open.
    pub open: u64,
}

impl Connections {
    pub fn opened(&self, http2: bool) {
        let counter = if http2 { &self.http2 } else { &self.http1 };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn closed(&self) {
        self.closed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn counts(&self) -> ConnectionCounts {
        use std::sync::atomic::Ordering::Relaxed;
        let (http1, http2) = (self.http1.load(Relaxed), self.http2.load(Relaxed));
        ConnectionCounts {
            http1,
            http2,
            open: (http1 + http2).saturating_sub(self.closed.load(Relaxed)),
        }
    }
}
