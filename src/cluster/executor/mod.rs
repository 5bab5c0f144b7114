//! The executor: turns the engine's [`Plan`] into API calls against one cluster, safe to
//! repeat and safe to interrupt.
//!
//! - `scale`: a group's replicas through the `scale` subresource, always written against
//!   the resourceVersion just read, and only if the group still has the replicas the plan
//!   saw (so a repeated plan never scales twice);
//! - `machines`: a Machine marked with its group's delete annotation, and the group lowered
//!   by exactly one; the replicas at the time are written on the Machine first
//!   ([`SCALE_DOWN_FROM_ANNOTATION`]) so that a restarted hub can tell whether the
//!   decrement happened;
//! - `nodes`: the `ToBeDeletedByClusterAutoscaler` taint and the cordon, and their removal;
//! - `drain`: evictions through the Eviction API, retried while a PodDisruptionBudget refuses;
//! - `removal`: one node's scale-down after the taint ([`NodeRemoval`]), rolled back on failure;
//! - `recover`: start-up repair of what an interrupted run left behind;
//! - `resolve`: a plan's group, node and machine names to the objects to write;
//! - `provisioning`: ProvisioningRequests' conditions written to their `status`, after the
//!   scale-ups (an atomic request is provisioned only once its scale-up was written), and
//!   requests past their TTL deleted.
//!
//! Every Machine API call goes through the version discovery chose for the group
//! ([`ExecutorConfig::apis`]), never a fixed one.
//!
//! Every write checks the [`WriteGate`] immediately before it is sent: a replica that lost
//! the lease stops at once. Within one executor, changes to one group's replicas are
//! serialized, so two removals in one group never race on the count they record.

mod drain;
mod failure;
mod machines;
mod mark_seen;
mod nodes;
mod provisioning;
mod recover;
mod removal;
mod resolve;
mod scale;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use removal::NodeRemoval;

use self::failure::{Failure, Stop, entry_of};
use self::machines::MachineDeletion;
use self::resolve::Resolver;
use self::scale::Resize;
use super::error::CallError;
use super::gate::WriteGate;
use super::outcome::{Action, Entry, MachineDeletionKind};
use crate::engine::nodegroups::NodeGroupId;
use crate::engine::plan::{Plan, ScaleDownAction};
use crate::engine::scale_down::DrainCheck;
use crate::engine::settings::Settings;
use crate::model::{ClusterSnapshot, MachineApis};

/// On a Machine: the group's replicas when the executor asked to lower them by one for it.
/// A group still at (or above) this count means the decrement never happened.
pub const SCALE_DOWN_FROM_ANNOTATION: &str = "fleetscaler.io/scale-down-from";
/// On a Machine: the node group (its id, `<Kind>.<API group>/<namespace>/<name>`) whose
/// replicas are lowered for it. Recovery also reads upstream's unqualified form, which an
/// earlier version wrote.
pub const SCALE_DOWN_GROUP_ANNOTATION: &str = "fleetscaler.io/scale-down-group";
/// On a Node: the executor cordoned it (so only then does it uncordon it again).
pub const CORDONED_ANNOTATION: &str = "fleetscaler.io/cordoned-for-scale-down";

/// How many times a read-modify-write is tried when the object keeps changing (409).
const CONFLICT_ATTEMPTS: u32 = 5;

/// Groups resized at once by one pass (distinct groups: the group locks serialize the rest).
const RESIZES_AT_ONCE: usize = 8;

/// What the runner gives the executor.
#[derive(Clone, Debug)]
pub struct ExecutorConfig {
    /// Deadline of every single API call.
    pub request_timeout: Duration,
    /// Plan and report, write nothing: every action is skipped with "dry run".
    pub dry_run: bool,
    /// Checked immediately before every write.
    pub gate: WriteGate,
    /// The version of each Machine API group to write through, as discovery chose it.
    pub apis: MachineApis,
}

/// The clocks of a drain. The defaults are the upstream autoscaler's; tests shorten them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainTiming {
    /// Pause between two rounds of evictions a PodDisruptionBudget refused (upstream: 10 s).
    /// Never longer than `max_pod_eviction_time`.
    pub eviction_retry: Duration,
    /// How often the pods of a node are listed while waiting for evicted pods to go.
    pub poll: Duration,
    /// Added to the longest grace period given while waiting for evicted pods (upstream: 30 s).
    pub headroom: Duration,
}

impl Default for DrainTiming {
    fn default() -> Self {
        DrainTiming {
            eviction_retry: Duration::from_secs(10),
            poll: Duration::from_secs(1),
            headroom: Duration::from_secs(30),
        }
    }
}

/// What every step needs: the client, the call deadline, the gate, the drain clocks and the
/// per-group locks. Cheap to clone; owned by each [`NodeRemoval`].
#[derive(Clone)]
struct Context {
    client: kube::Client,
    timeout: Duration,
    gate: WriteGate,
    apis: MachineApis,
    timing: DrainTiming,
    locks: GroupLocks,
}

impl Context {
    /// Refuses a write when this replica is not the leader.
    fn may_write(&self) -> Result<(), Stop> {
        if self.gate.is_open() {
            Ok(())
        } else {
            Err(Stop::NotLeader)
        }
    }

    /// Runs one API call under the deadline, naming `op` in any error.
    async fn call<T>(
        &self,
        op: impl FnOnce() -> String,
        fut: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, CallError> {
        super::error::call(op, self.timeout, fut).await
    }

    /// [`Context::call`] for a write, in its own span.
    async fn write<T>(
        &self,
        target: super::error::Write<'_>,
        op: impl FnOnce() -> String,
        fut: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, CallError> {
        super::error::write(target, op, self.timeout, fut).await
    }
}

/// One async lock per node group: a group's replicas are changed by one task at a time, so
/// the count recorded on a machine is the count its decrement starts from.
#[derive(Clone, Default)]
struct GroupLocks(Arc<Mutex<HashMap<NodeGroupId, Arc<tokio::sync::Mutex<()>>>>>);

impl GroupLocks {
    fn of(&self, group: &NodeGroupId) -> Arc<tokio::sync::Mutex<()>> {
        // A poisoned map only means another task panicked while inserting; the map is fine.
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(group.clone()).or_default().clone()
    }
}

/// One resize of a plan, with the entry it reports under.
struct Order<'p> {
    action: Action,
    kind: Resize,
    group: &'p NodeGroupId,
    from: u64,
    to: u64,
}

/// What `execute` did: an entry per action, and the removals to carry on.
#[derive(Debug)]
pub struct Execution {
    pub entries: Vec<Entry>,
    pub removals: Vec<NodeRemoval>,
}

/// Carries out plans against one cluster. Cheap to clone (clones share the group locks).
#[derive(Clone)]
pub struct Executor {
    ctx: Context,
    dry_run: bool,
}

impl Executor {
    pub fn new(client: kube::Client, config: ExecutorConfig) -> Self {
        Executor {
            ctx: Context {
                client,
                timeout: config.request_timeout,
                gate: config.gate,
                apis: config.apis,
                timing: DrainTiming::default(),
                locks: GroupLocks::default(),
            },
            dry_run: config.dry_run,
        }
    }

    /// Other drain clocks (tests use milliseconds).
    pub fn with_drain_timing(mut self, timing: DrainTiming) -> Self {
        self.ctx.timing = timing;
        self
    }

    /// Start-up recovery of an earlier run's leftovers: finishes decrements interrupted
    /// after their machine was marked, and clears `ToBeDeletedByClusterAutoscaler` taints
    /// (and the executor's cordons) from nodes whose machine is not marked for deletion.
    /// A list that fails is logged; [`Executor::try_recover`] returns it instead.
    pub async fn recover(&self) -> Vec<Entry> {
        match self.try_recover().await {
            Ok(entries) => entries,
            Err(error) => {
                tracing::warn!(%error, "start-up recovery could not list the cluster");
                Vec::new()
            }
        }
    }

    /// [`Executor::recover`], failing when the objects to look at cannot be listed.
    pub async fn try_recover(&self) -> Result<Vec<Entry>, CallError> {
        recover::run(&self.ctx, self.dry_run, &HashSet::new()).await
    }

    /// Recovery while removals of this executor are under way (run again whenever this
    /// replica becomes the leader, and now and then while it leads): their nodes, in
    /// `in_flight`, are left alone; decrements take the group locks the removals hold.
    pub async fn reconcile(&self, in_flight: &HashSet<Arc<str>>) -> Result<Vec<Entry>, CallError> {
        recover::run(&self.ctx, self.dry_run, in_flight).await
    }

    /// Carries out a plan: machine deletions, target fixes and scale-ups here (in that
    /// order, so each `from` the engine computed after the previous ones still holds);
    /// for each scale-down the node is tainted (and cordoned) here, and a [`NodeRemoval`]
    /// returned to carry on. Nodes in `in_flight` are already being removed and skipped.
    pub async fn execute(
        &self,
        plan: &Plan,
        snapshot: &ClusterSnapshot,
        settings: &Settings,
        in_flight: &HashSet<Arc<str>>,
    ) -> Execution {
        let resolver = Resolver::new(snapshot, settings, &self.ctx.apis);
        let mut entries = Vec::new();
        let deletions = [
            (&plan.delete_failed_machines, MachineDeletionKind::Failed),
            (&plan.delete_unregistered, MachineDeletionKind::Unregistered),
        ];
        for (list, why) in deletions {
            for d in list {
                entries.push(self.delete_machine(&resolver, d, why).await);
            }
        }
        let fixes = plan.fix_target_size.iter().map(|f| Order {
            action: Action::FixTargetSize {
                group: f.node_group.clone(),
                from: f.from,
                to: f.to,
            },
            kind: Resize::Fix,
            group: &f.node_group,
            from: f.from,
            to: f.to,
        });
        entries.extend(self.resize_all(&resolver, fixes.collect()).await);
        let ups = plan.scale_up.iter().map(|s| Order {
            action: Action::ScaleUp {
                group: s.node_group.clone(),
                from: s.from,
                to: s.to,
            },
            kind: Resize::Up,
            group: &s.node_group,
            from: s.from,
            to: s.to,
        });
        entries.extend(self.resize_all(&resolver, ups.collect()).await);
        let requests = self.provisioning(plan, &entries).await;
        entries.extend(requests);
        let mut removals = Vec::new();
        if plan.scale_down.is_empty() {
            return Execution { entries, removals };
        }
        // Owns a copy of the budgets and controllers (each removal keeps it): made only in
        // the passes that remove nodes, not in every pass.
        let check = DrainCheck::new(snapshot, settings);
        for down in &plan.scale_down {
            let (entry, removal) = self
                .mark_node(&resolver, down, settings, &check, in_flight)
                .await;
            entries.push(entry);
            removals.extend(removal);
        }
        Execution { entries, removals }
    }

    /// Refuses before any work in a dry run or without the lease.
    fn may_act(&self) -> Result<(), Stop> {
        if self.dry_run {
            return Err(Stop::DryRun);
        }
        self.ctx.may_write()
    }

    /// Resizes several groups at once, their entries in the plan's order: each write waits
    /// on the API server, not on the others (a burst's four scale-ups, one after the other,
    /// took 5.7 s on an API server busy creating 3,000 pods).
    async fn resize_all(&self, resolver: &Resolver<'_>, orders: Vec<Order<'_>>) -> Vec<Entry> {
        use futures::StreamExt;
        // Futures made here, not in a closure of the stream: the runner's future must stay
        // `Send` for every lifetime, which a borrowing closure inside it defeats.
        let writes: Vec<_> = orders
            .into_iter()
            .map(|o| async move {
                let result = self.resize(resolver, o.group, o.kind, o.from, o.to);
                entry_of(o.action, result.await)
            })
            .collect();
        futures::stream::iter(writes)
            .buffered(RESIZES_AT_ONCE)
            .collect()
            .await
    }

    async fn resize(
        &self,
        resolver: &Resolver<'_>,
        group: &NodeGroupId,
        kind: Resize,
        from: u64,
        to: u64,
    ) -> Result<String, Stop> {
        self.may_act()?;
        let target = resolver.target(group)?;
        let lock = self.ctx.locks.of(group);
        let _held = lock.lock().await;
        scale::resize(&self.ctx, &target, kind, from, to).await
    }

    async fn delete_machine(
        &self,
        resolver: &Resolver<'_>,
        d: &crate::engine::plan::MachineDeletion,
        why: MachineDeletionKind,
    ) -> Entry {
        let action = Action::DeleteMachine {
            group: d.node_group.clone(),
            machine: d.machine.clone(),
            why,
            lower_replicas: d.lower_replicas,
        };
        let result = async {
            self.may_act()?;
            let target = resolver.target(&d.node_group)?;
            let machine = resolver.machine(&d.machine, &d.node_group)?;
            let deletion = MachineDeletion {
                target: &target,
                machine: &machine,
            };
            if !d.lower_replicas {
                return deletion.mark_and_delete(&self.ctx).await;
            }
            let lock = self.ctx.locks.of(&d.node_group);
            let _held = lock.lock().await;
            match deletion.mark_and_lower(&self.ctx).await {
                Ok(lowered) => Ok(lowered.detail(&machine)),
                Err(unfinished) => Err(unfinished.into_stop()),
            }
        };
        entry_of(action, result.await)
    }

    /// Step (a) of a scale-down: taint (and cordon) the node, and hand back the rest.
    async fn mark_node(
        &self,
        resolver: &Resolver<'_>,
        down: &ScaleDownAction,
        settings: &Settings,
        check: &DrainCheck,
        in_flight: &HashSet<Arc<str>>,
    ) -> (Entry, Option<NodeRemoval>) {
        let action = Action::MarkNode {
            group: down.node_group.clone(),
            node: down.node.clone(),
            empty: down.empty,
        };
        if in_flight.contains(&down.node) {
            return (Entry::skipped(action, "already being removed"), None);
        }
        let prepared = async {
            self.may_act()?;
            let target = resolver.target(&down.node_group)?;
            let machine = resolver.machine_of_node(&down.node, &down.node_group)?;
            let cordon = settings.cordon_node_before_terminating;
            let detail = match nodes::mark(&self.ctx, &down.node, cordon).await {
                Ok(detail) => detail,
                // No answer: the taint may be on. Nothing may be left behind.
                Err(stop) if stop.may_have_landed() && self.ctx.may_write().is_ok() => {
                    let undo = match nodes::unmark(&self.ctx, &down.node).await {
                        Ok(done) => done,
                        Err(e) => format!("the taint may be left on node {}: {e}", down.node),
                    };
                    return Err(stop.with_undo(undo));
                }
                Err(stop) => return Err(stop),
            };
            Ok::<_, Stop>((detail, target, machine))
        };
        match prepared.await {
            Ok((detail, target, machine)) => {
                let removal = NodeRemoval::new(
                    self.ctx.clone(),
                    down,
                    target,
                    machine,
                    removal::Limits::of(settings),
                    check.clone(),
                );
                (Entry::done(action, detail), Some(removal))
            }
            Err(stop) => (entry_of(action, Err(stop)), None),
        }
    }
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("timeout", &self.ctx.timeout)
            .field("dry_run", &self.dry_run)
            .field("timing", &self.ctx.timing)
            .finish_non_exhaustive()
    }
}

/// `Failure` is internal; the conversion keeps `?` working on API calls.
impl From<CallError> for Stop {
    fn from(e: CallError) -> Self {
        Stop::Fail(Failure::Call(e))
    }
}
