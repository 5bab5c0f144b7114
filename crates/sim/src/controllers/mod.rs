//! The simulated controllers of one cluster — machine controller, scheduler, kubelets,
//! workload generator and disruption controller — run as one task that ticks at the
//! cluster's pace. One task per cluster keeps the controllers' order fixed (a pass sees the
//! writes of the previous step) and shares one pod and node index among them.

pub mod allocate;
pub mod disruption;
pub mod index;
pub mod kubelet;
pub mod machines;
pub mod scheduler;
pub mod workloads;

use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use crate::api::resources::Resource;
use crate::cluster::Cluster;
use crate::registry::State;

/// Everything the controllers of one cluster remember between ticks.
#[derive(Debug)]
pub struct Controllers {
    pub index: index::Index,
    /// `None` when Machines are left to a controller outside the simulation
    /// (`fleetscaler sim machines`).
    pub machines: Option<machines::MachineController>,
    pub scheduler: scheduler::Scheduler,
    pub kubelets: kubelet::Kubelets,
    pub workloads: Option<workloads::Workloads>,
    pods_seen_rv: u64,
    budgets_at: Option<Instant>,
}

impl Controllers {
    pub fn new(
        machines: Option<machines::MachineController>,
        workloads: Option<workloads::Workloads>,
    ) -> Self {
        Controllers {
            index: index::Index::default(),
            machines,
            scheduler: scheduler::Scheduler::default(),
            kubelets: kubelet::Kubelets::default(),
            workloads,
            pods_seen_rv: 0,
            budgets_at: None,
        }
    }

    /// One tick of every controller, in a fixed order.
    pub fn step(&mut self, state: &mut State, cluster: &Cluster, now: Instant) {
        let timing = &cluster.timing;
        self.index.sync(&state.store, now);
        if let Some(machines) = &mut self.machines {
            // The cloud behind the simulated machines is the cluster's fault switch.
            machines.set_capacity_faults(cluster.faults.capacity());
            machines.step(
                &mut machines::SimWorld::new(state, Some(&self.index)),
                timing,
                now,
            );
            self.index.sync(&state.store, now);
        }
        self.kubelets.step(state, &self.index, timing, now);
        self.index.sync(&state.store, now);
        self.scheduler.step(state, &self.index);
        self.index.sync(&state.store, now);
        if let Some(w) = &mut self.workloads {
            w.step(state, &self.index, timing.wave_period, now);
            self.index.sync(&state.store, now);
        }
        // Budgets only change with pods (or with the budgets themselves), and are recomputed
        // at most every few ticks, as the disruption controller batches its work.
        let changed = |s: &State| {
            s.store
                .table(Resource::Pods)
                .last_write_rv
                .max(s.store.table(Resource::PodDisruptionBudgets).last_write_rv)
        };
        let rested = self
            .budgets_at
            .is_none_or(|at| now.saturating_duration_since(at) >= timing.tick * 4);
        if changed(state) != self.pods_seen_rv && rested {
            disruption::step(state, &self.index);
            self.pods_seen_rv = changed(state);
            self.budgets_at = Some(now);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine_api::MachineApi;
    use crate::settings::{Flavor, Shape, Timing};
    use crate::shape;
    use std::time::Duration;

    /// A cluster settled after its delays ran out, and whether it writes again `later`.
    fn writes_after_settling(wave_period: Duration, later: Duration) -> bool {
        let mut state = State::new(100_000, 3);
        let shape = Shape {
            nodes_per_group: 20,
            pods_per_node: 30,
            ..Shape::default()
        };
        let built = shape::build(&mut state, "sim-1", Flavor::OpenShift, &shape).unwrap();
        let timing = Timing {
            wave_period,
            ..Timing::fast()
        };
        let cluster = Cluster::new(
            "sim-1".into(),
            Flavor::OpenShift,
            timing.clone(),
            "t".into(),
            State::new(10, 1),
            1,
        );
        let now = Instant::now();
        let workloads = workloads::Workloads::new(built.replica_sets, built.daemon_sets, now);
        let mut ctl = Controllers::new(
            Some(machines::MachineController::new(MachineApi::of(
                Flavor::OpenShift,
            ))),
            Some(workloads),
        );
        // Let every delay run out, then see whether anything more is written.
        for i in 0..50 {
            ctl.step(&mut state, &cluster, now + timing.machine_provision * i);
        }
        let rv = state.store.rv();
        let revision = ctl.index.revision;
        ctl.step(&mut state, &cluster, now + later);
        let wrote = state.store.rv() != rv;
        assert_eq!(wrote, ctl.index.revision != revision);
        wrote
    }

    #[tokio::test]
    async fn a_quiet_cluster_goes_quiet() {
        let day = Duration::from_secs(86_400);
        assert!(!writes_after_settling(day, Duration::from_secs(3)));
    }

    /// Waves move the workloads (a quarter of a day-long wave in, every deployment is at its
    /// peak); a zero period holds them at their base for ever: an idle fleet.
    #[tokio::test]
    async fn a_zero_wave_period_holds_the_workloads_still() {
        let (day, quarter) = (Duration::from_secs(86_400), Duration::from_secs(21_600));
        assert!(
            writes_after_settling(day, quarter),
            "the wave moved nothing"
        );
        assert!(!writes_after_settling(Duration::ZERO, quarter));
    }

    #[tokio::test]
    async fn kubelets_bring_registered_nodes_up() {
        let mut state = State::new(1000, 3);
        let shape = Shape {
            nodes_per_group: 1,
            pods_per_node: 3,
            workloads: false,
            ..Shape::default()
        };
        shape::build(&mut state, "sim-1", Flavor::OpenShift, &shape).unwrap();
        let timing = Timing::fast();
        let cluster = Cluster::new(
            "sim-1".into(),
            Flavor::OpenShift,
            timing.clone(),
            "t".into(),
            State::new(10, 1),
            1,
        );
        let mut ctl = Controllers::new(
            Some(machines::MachineController::new(MachineApi::of(
                Flavor::OpenShift,
            ))),
            None,
        );
        let now = Instant::now();
        ctl.step(&mut state, &cluster, now);
        // A node registers not Ready after the index was built.
        let name = state
            .store
            .range(Resource::Nodes, None, None)
            .next()
            .unwrap()
            .key
            .name
            .to_string();
        let key = crate::store::Key::cluster(&name);
        let stamp = crate::registry::now_rfc3339();
        state
            .modify(Resource::Nodes, &key, |v| {
                crate::machine_api::set_node_ready(v, false, &stamp)
            })
            .unwrap();
        ctl.step(&mut state, &cluster, now + timing.tick);
        assert!(!crate::machine_api::node_is_ready(
            &state.store.get(Resource::Nodes, &key).unwrap().value()
        ));
        ctl.step(
            &mut state,
            &cluster,
            now + timing.tick + timing.node_boot * 2,
        );
        assert!(crate::machine_api::node_is_ready(
            &state.store.get(Resource::Nodes, &key).unwrap().value()
        ));
    }
}
