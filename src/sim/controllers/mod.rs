//! The simulated controllers of one cluster — machine controller, scheduler, kubelets,
//! workload generator and disruption controller — run as one task that ticks at the
//! cluster's pace. One task per cluster keeps the controllers' order fixed (a pass sees the
//! writes of the previous step) and shares one pod and node index among them.

pub mod disruption;
pub mod index;
pub mod kubelet;
pub mod machines;
pub mod scheduler;
pub mod workloads;

use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use crate::sim::api::resources::Resource;
use crate::sim::cluster::Cluster;
use crate::sim::registry::State;

/// Everything the controllers of one cluster remember between ticks.
#[derive(Debug)]
pub struct Controllers {
    pub index: index::Index,
    pub machines: machines::MachineController,
    pub scheduler: scheduler::Scheduler,
    pub kubelets: kubelet::Kubelets,
    pub workloads: Option<workloads::Workloads>,
    pods_seen_rv: u64,
}

impl Controllers {
    pub fn new(
        machines: machines::MachineController,
        workloads: Option<workloads::Workloads>,
    ) -> Self {
        Controllers {
            index: index::Index::default(),
            machines,
            scheduler: scheduler::Scheduler::default(),
            kubelets: kubelet::Kubelets::default(),
            workloads,
            pods_seen_rv: 0,
        }
    }

    /// One tick of every controller, in a fixed order.
    pub fn step(&mut self, state: &mut State, cluster: &Cluster, now: Instant) {
        let timing = &cluster.timing;
        self.index.sync(&state.store, now);
        self.machines.step(state, &self.index, timing, now);
        self.index.sync(&state.store, now);
        self.kubelets.step(state, &self.index, timing, now);
        self.index.sync(&state.store, now);
        self.scheduler.step(state, &self.index);
        self.index.sync(&state.store, now);
        if let Some(w) = &mut self.workloads {
            w.step(state, &self.index, timing.wave_period, now);
            self.index.sync(&state.store, now);
        }
        // Budgets only change with pods (or with the budgets themselves).
        let rv = state.store.table(Resource::Pods).last_write_rv.max(
            state
                .store
                .table(Resource::PodDisruptionBudgets)
                .last_write_rv,
        );
        if rv != self.pods_seen_rv {
            disruption::step(state, &self.index);
            self.pods_seen_rv = state.store.table(Resource::Pods).last_write_rv.max(
                state
                    .store
                    .table(Resource::PodDisruptionBudgets)
                    .last_write_rv,
            );
        }
    }
}

/// Runs the controllers of `cluster` until `shutdown` turns true.
pub async fn run(
    cluster: Arc<Cluster>,
    mut controllers: Controllers,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(cluster.timing.tick);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.changed() => return,
        }
        let now = Instant::now();
        let mut state = cluster.lock();
        controllers.step(&mut state, &cluster, now);
    }
}
