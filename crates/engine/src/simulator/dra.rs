//! The scheduler's DynamicResources plugin, as far as the autoscaler simulates it (upstream's
//! `pkg/simulator/dynamicresources`): a pod's ResourceClaims are allocated devices of the
//! ResourceSlices a node can use, matching each request's DeviceClass and CEL selectors,
//! and not allocated already.
//!
//! Each pod's claims are resolved once per pass ([`DraIndex::build`], `dra_resolve`): a
//! claim allocated already pins the pod to where its devices are (its `nodeSelector`),
//! unless it is the scheduled pod's alone, which a scale-down simulation frees and
//! allocates again where the pod goes; one not allocated (shared by name, or made from a
//! template for the pod) needs devices on the node. Before the claim controller has made a
//! pod's claim, its template stands in for it (upstream waits for the claim: a pass later,
//! the same decision). What no node can help (a missing claim, class or template; a claim
//! feature not simulated) is a `block` that fails the pod everywhere, so it is explained
//! and never causes a scale-up.
//!
//! Devices in use are those of every allocated claim in the snapshot and those this
//! simulation allocated ([`DraIndex::place`], undone in reverse by the simulator's revert);
//! a claim shared by several pods is allocated once. A template's node-local slices are
//! its source node's (upstream's `SanitizedNodeResourceSlices`), each copy's pools its own.
//!
//! Allocation is greedy (`dra_alloc`): requests in order, each one's first alternative that
//! can be satisfied, devices in slice order, once per combination of the values its
//! `matchAttribute` constraints can take on the node. Upstream's allocator backtracks, so a
//! claim whose requests compete for the same devices can fit there and not here: never a
//! node bought that upstream would not use.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use fleetscaler_model::dra::{ClaimSpec, Device, DeviceId, ResourceSlice};
use fleetscaler_model::scheduling::NodeSelector;
use fleetscaler_model::{ClusterSnapshot, Pod, PodId};

use super::SimNode;
use super::dra_cel::Selectors;
use crate::reason::ReasonCode;

/// What a pod's ResourceClaims ask of a node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DraNeeds {
    /// Why no node can run the pod, when none can.
    pub block: Option<(ReasonCode, String)>,
    /// Allocated claims: (the claim, where its devices can be used from).
    pub pinned: Vec<(Arc<str>, NodeSelector)>,
    /// Claims still to be allocated, on the node the pod goes to.
    pub claims: Vec<NeededClaim>,
    /// Allocated claims of a scheduled pod that are its alone (made for it, or reserved for
    /// it only): pinned while it stays; once a scale-down simulation takes it off its node,
    /// their devices are free and they are allocated again where it goes (upstream's
    /// `UnreservePodClaims` deallocates them).
    pub movable: Vec<MovableClaim>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MovableClaim {
    pub key: Arc<str>,
    /// The pod's node, where the devices are.
    pub node: Arc<str>,
    pub selector: Option<NodeSelector>,
    pub devices: Vec<DeviceId>,
    pub spec: Arc<ClaimSpec>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NeededClaim {
    /// `namespace/name` of the claim; a template's, not made yet, `namespace/pod#claim`.
    pub key: Arc<str>,
    pub spec: Arc<ClaimSpec>,
}

/// Devices this simulation allocated to one claim.
#[derive(Clone, Debug)]
struct SimAlloc {
    claim: Arc<str>,
    node: usize,
    devices: Vec<DeviceId>,
    /// The simulated pods sharing it.
    users: usize,
}

/// One device a node can use, with the pool it is counted in.
struct Candidate<'a> {
    driver: &'a Arc<str>,
    pool: Arc<str>,
    device: &'a Device,
}

impl Candidate<'_> {
    fn id(&self) -> DeviceId {
        DeviceId {
            driver: self.driver.clone(),
            pool: self.pool.clone(),
            device: self.device.name.clone(),
        }
    }
}

/// The DRA objects of a pass, each pod's needs, and what the simulation allocated.
#[derive(Default)]
pub struct DraIndex {
    by_pod: HashMap<PodId, Arc<DraNeeds>>,
    objects: Objects,
    eval: Eval,
}

/// What the pass read: read-only while pods are checked.
#[derive(Default)]
struct Objects {
    classes: HashMap<Arc<str>, Vec<Arc<str>>>,
    /// Node-local slices by node name.
    local: HashMap<Arc<str>, Vec<Arc<ResourceSlice>>>,
    /// Slices for nodes by selector, for all nodes, or per device.
    shared: Vec<Arc<ResourceSlice>>,
    in_use: HashSet<DeviceId>,
}

/// What checking changes: the selectors' caches and the simulation's allocations.
#[derive(Default)]
struct Eval {
    allocs: Vec<SimAlloc>,
    /// Every device in `allocs`, for the lookups of the hot loop.
    allocated: HashSet<DeviceId>,
    /// Movable claims whose pods the simulation took off their node: their devices.
    released: Vec<(Arc<str>, Vec<DeviceId>)>,
    selectors: Selectors,
    /// Selector results by (expression, device) address: both live for the pass.
    matched: HashMap<(usize, usize), bool>,
}

/// The newest generation of each pool: older slices are being replaced (upstream's
/// `GatherPools` ignores them).
pub fn current_slices(slices: &[ResourceSlice]) -> Vec<&ResourceSlice> {
    let mut newest: HashMap<(&str, &str), i64> = HashMap::new();
    for s in slices {
        let g = newest.entry((&s.driver, &s.pool)).or_insert(s.generation);
        *g = (*g).max(s.generation);
    }
    slices
        .iter()
        .filter(|s| newest.get(&(&*s.driver, &*s.pool)) == Some(&s.generation))
        .collect()
}

impl DraIndex {
    pub fn build(snapshot: &ClusterSnapshot) -> Self {
        let dra = &snapshot.dra;
        let with_claims = || {
            snapshot
                .pods
                .iter()
                .filter(|p| !p.spec.resource_claims.is_empty() && !p.is_terminal())
        };
        if !dra.listed || with_claims().next().is_none() {
            return DraIndex::default();
        }
        let mut objects = Objects {
            classes: dra
                .classes
                .iter()
                .map(|c| (c.name.clone(), c.selectors.clone()))
                .collect(),
            ..Objects::default()
        };
        for s in current_slices(&dra.slices) {
            let s = Arc::new(s.clone());
            match s.node_local_to() {
                Some(n) => objects.local.entry(n.into()).or_default().push(s),
                None => objects.shared.push(s),
            }
        }
        objects.in_use = dra
            .claims
            .iter()
            .filter_map(|c| c.allocation.as_ref())
            .flat_map(|a| a.devices.iter().cloned())
            .collect();
        let by_pod = {
            let resolver = Resolver::new(snapshot, &objects.classes);
            with_claims()
                .map(|p| (p.id.clone(), Arc::new(resolver.needs_of(p))))
                .collect()
        };
        DraIndex {
            by_pod,
            objects,
            eval: Eval::default(),
        }
    }

    /// The pod's needs; a pod with claims the index does not know (DRA objects not read)
    /// fits no node, so that no scale-down moves it where its devices may not be.
    pub fn of(&self, pod: &Pod) -> Option<Arc<DraNeeds>> {
        if pod.spec.resource_claims.is_empty() {
            return None;
        }
        let unknown = || {
            Arc::new(DraNeeds {
                block: Some((
                    ReasonCode::NotSimulated,
                    "uses resourceClaims, and the cluster's resource.k8s.io/v1 objects were not read: where its devices are is not known".to_string(),
                )),
                ..DraNeeds::default()
            })
        };
        Some(self.by_pod.get(&pod.id).cloned().unwrap_or_else(unknown))
    }

    /// What the selectors could not evaluate this pass, for its warnings.
    pub fn problems(&self) -> &[String] {
        &self.eval.selectors.problems
    }

    /// Whether the pod's claims can be had on `nodes[idx]`, or the first reason not.
    pub fn check(
        &mut self,
        needs: &DraNeeds,
        nodes: &[SimNode],
        idx: usize,
    ) -> Result<(), (ReasonCode, String)> {
        if let Some(block) = &needs.block {
            return Err(block.clone());
        }
        let node = &nodes[idx];
        for (claim, selector) in &needs.pinned {
            if !selector.matches(&node.labels, &node.name) {
                return Err(elsewhere(claim));
            }
        }
        for m in needs
            .movable
            .iter()
            .filter(|m| !self.eval.is_released(&m.key))
        {
            if m.selector
                .as_ref()
                .is_some_and(|s| !s.matches(&node.labels, &node.name))
            {
                return Err(elsewhere(&m.key));
            }
        }
        let mut picked = Vec::new();
        for (key, spec) in self.to_allocate(needs) {
            if let Some(a) = self.eval.allocs.iter().find(|a| a.claim == key) {
                if a.node != idx {
                    return Err(elsewhere(&key));
                }
                continue;
            }
            let devices = allocate(&self.objects, &mut self.eval, &spec, (node, idx), &picked)
                .map_err(|why| {
                    (
                        ReasonCode::DevicesUnavailable,
                        format!("claim {key}: {why}"),
                    )
                })?;
            picked.extend(devices);
        }
        Ok(())
    }

    /// The claims to allocate where the pod goes: those not allocated, and its movable
    /// ones once released.
    fn to_allocate(&self, needs: &DraNeeds) -> Vec<(Arc<str>, Arc<ClaimSpec>)> {
        let released = needs
            .movable
            .iter()
            .filter(|m| self.eval.is_released(&m.key))
            .map(|m| (m.key.clone(), m.spec.clone()));
        needs
            .claims
            .iter()
            .map(|c| (c.key.clone(), c.spec.clone()))
            .chain(released)
            .collect()
    }

    /// Allocates the pod's claims on `nodes[idx]` (+1), or gives them back (-1).
    pub fn place(&mut self, needs: &DraNeeds, nodes: &[SimNode], idx: usize, delta: i32) {
        if delta < 0 {
            self.unplace(needs, &nodes[idx]);
            return;
        }
        if needs.block.is_some() {
            return;
        }
        // Back on the node its movable claims were allocated on (a removal undone).
        let here = &nodes[idx].name;
        self.eval
            .released
            .retain(|(k, _)| !needs.movable.iter().any(|m| m.key == *k && m.node == *here));
        let mut picked = Vec::new();
        for (key, spec) in self.to_allocate(needs) {
            if let Some(a) = self.eval.allocs.iter_mut().find(|a| a.claim == key) {
                a.users += 1;
                continue;
            }
            // Placed after a successful check, so this succeeds; an existing pod with a
            // claim not allocated yet takes what is free, or nothing.
            let devices = allocate(
                &self.objects,
                &mut self.eval,
                &spec,
                (&nodes[idx], idx),
                &picked,
            )
            .unwrap_or_default();
            picked.extend(devices.iter().cloned());
            self.eval.allocated.extend(devices.iter().cloned());
            self.eval.allocs.push(SimAlloc {
                claim: key,
                node: idx,
                devices,
                users: 1,
            });
        }
    }

    /// The pod taken off `node`: what the simulation allocated for it given back, and its
    /// movable claims, still on their node, released.
    fn unplace(&mut self, needs: &DraNeeds, node: &SimNode) {
        let (allocs, allocated) = (&mut self.eval.allocs, &mut self.eval.allocated);
        let keys = needs.claims.iter().map(|c| &c.key);
        for key in keys.chain(needs.movable.iter().map(|m| &m.key)).rev() {
            if let Some(i) = allocs.iter().rposition(|a| a.claim == *key) {
                allocs[i].users = allocs[i].users.saturating_sub(1);
                if allocs[i].users == 0 {
                    for d in &allocs.remove(i).devices {
                        allocated.remove(d);
                    }
                }
            }
        }
        for m in needs.movable.iter().filter(|m| m.node == node.name) {
            if !self.eval.is_released(&m.key) {
                self.eval.released.push((m.key.clone(), m.devices.clone()));
            }
        }
    }
}

impl Objects {
    /// The devices `node` (`nodes[idx]`) can use: its own slices (a template copy's, in
    /// pools of its own, told apart by the copy's index: names can repeat across options),
    /// then the shared ones that reach it; with the counters their pools share.
    fn candidates<'a>(&'a self, node: &'a SimNode, idx: usize) -> Visible<'a> {
        let mut out = Visible::default();
        let copied = !node.dra_devices.slices.is_empty();
        let own: Vec<&'a ResourceSlice> = if copied {
            node.dra_devices.slices.iter().collect()
        } else {
            self.local
                .get(&node.name)
                .into_iter()
                .flatten()
                .map(|s| &**s)
                .collect()
        };
        for s in own {
            let pool: Arc<str> = if copied {
                format!("{}@{idx}", s.pool).into()
            } else {
                s.pool.clone()
            };
            out.add_counters(s, &pool);
            for device in &s.devices {
                let held = |h: &DeviceId| {
                    h.driver == s.driver && h.pool == s.pool && h.device == device.name
                };
                if copied && node.dra_devices.held.iter().any(held) {
                    out.held.push(DeviceId {
                        driver: s.driver.clone(),
                        pool: pool.clone(),
                        device: device.name.clone(),
                    });
                }
                out.devices.push(Candidate {
                    driver: &s.driver,
                    pool: pool.clone(),
                    device,
                });
            }
        }
        for s in &self.shared {
            let reaches = |d: &Device| {
                let reach = d.nodes.as_ref().or(s.nodes.as_ref());
                reach.is_some_and(|r| r.reach(&node.labels, &node.name))
            };
            if s.nodes
                .as_ref()
                .is_some_and(|r| r.reach(&node.labels, &node.name))
                || s.devices.iter().any(reaches)
            {
                out.add_counters(s, &s.pool);
            }
            for device in s.devices.iter().filter(|d| reaches(d)) {
                out.devices.push(Candidate {
                    driver: &s.driver,
                    pool: s.pool.clone(),
                    device,
                });
            }
        }
        out
    }
}

/// A counter of a pool's shared set: (driver, pool, set, counter).
type CounterKey = (Arc<str>, Arc<str>, Arc<str>, Arc<str>);

/// What one node can use: devices, and the counters partitions of them take from.
#[derive(Default)]
struct Visible<'a> {
    devices: Vec<Candidate<'a>>,
    /// A template copy's devices its DaemonSet pods take, as every copy's are.
    held: Vec<DeviceId>,
    /// Each shared counter's value, in nano-units.
    capacity: HashMap<CounterKey, i128>,
}

impl Visible<'_> {
    fn add_counters(&mut self, s: &ResourceSlice, pool: &Arc<str>) {
        for set in &s.counter_sets {
            for (name, q) in &set.counters {
                let key = (
                    s.driver.clone(),
                    pool.clone(),
                    set.name.clone(),
                    name.clone(),
                );
                self.capacity.insert(key, q.nanos());
            }
        }
    }
}

impl Eval {
    fn matches(&mut self, expr: &Arc<str>, driver: &str, device: &Device) -> bool {
        let key = (
            Arc::as_ptr(expr) as *const u8 as usize,
            device as *const Device as usize,
        );
        if let Some(m) = self.matched.get(&key) {
            return *m;
        }
        let m = self.selectors.matches(expr, driver, device);
        if self.matched.len() < 1 << 20 {
            self.matched.insert(key, m);
        }
        m
    }

    fn in_use(&self, objects: &Objects, id: &DeviceId, taken: &[DeviceId]) -> bool {
        let released = || self.released.iter().any(|(_, d)| d.contains(id));
        (objects.in_use.contains(id) && !released())
            || taken.contains(id)
            || self.allocated.contains(id)
    }

    fn is_released(&self, claim: &str) -> bool {
        self.released.iter().any(|(k, _)| &**k == claim)
    }
}

fn elsewhere(claim: &str) -> (ReasonCode, String) {
    (
        ReasonCode::DeviceClaimAllocatedElsewhere,
        format!("claim {claim} is allocated to devices this node cannot use"),
    )
}
#[path = "dra_resolve.rs"]
mod resolve;
use resolve::Resolver;

#[path = "dra_alloc.rs"]
mod alloc;
use alloc::allocate;

#[cfg(test)]
#[path = "dra_tests.rs"]
mod tests;
