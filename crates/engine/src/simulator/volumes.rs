//! The scheduler's volume filters, as far as a node's labels decide them: where the
//! PersistentVolumes of a pod's claims can be used from (VolumeBinding: a bound volume's node
//! affinity, an unbound `WaitForFirstConsumer` claim's allowed topologies or free local
//! volumes), their zones (VolumeZone), `ReadWriteOncePod` claims in use (VolumeRestrictions)
//! and claims that wait for the volume controllers rather than for a node.
//!
//! Each pod's needs are resolved once per pass from the snapshot's storage objects; a pod
//! that no node can help (a missing claim, a claim waiting to be bound) gets a `block` that
//! fails it on every node, so it is explained and never causes a scale-up.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use fleetscaler_model::pod::ClaimRef;
use fleetscaler_model::scheduling::NodeSelector;
use fleetscaler_model::storage::{
    PersistentVolume, PersistentVolumeClaim, StorageClass, ZONE_LABELS,
};
use fleetscaler_model::{ClusterSnapshot, Pod, PodId};

use super::SimNode;
use crate::reason::ReasonCode;

/// What a pod's volumes ask of a node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VolumeNeeds {
    /// Each must be matched: (what it comes from, the selector).
    pub selectors: Vec<(String, NodeSelector)>,
    /// VolumeZone: the zone and region labels of the pod's bound volumes.
    pub zones: Vec<VolumeZone>,
    /// The CSI driver of each of its volumes, for the attach limits.
    pub drivers: Vec<Arc<str>>,
    /// Why no node can run the pod, when none can.
    pub block: Option<(ReasonCode, String)>,
}

impl VolumeNeeds {
    /// Whether `node` can use the pod's volumes, or the first reason it cannot.
    pub fn check(&self, node: &SimNode) -> Result<(), (ReasonCode, String)> {
        if let Some(block) = &self.block {
            return Err(block.clone());
        }
        self.check_attach(node)?;
        for (what, selector) in &self.selectors {
            if !selector.matches(&node.labels, &node.name) {
                return Err((
                    ReasonCode::VolumeNodeAffinityConflict,
                    format!("{what} cannot be used from this node (volume node affinity conflict)"),
                ));
            }
        }
        // As VolumeZone: a node without any zone or region label is not constrained.
        if !ZONE_LABELS.iter().any(|k| node.labels.contains_key(k)) {
            return Ok(());
        }
        for VolumeZone {
            key,
            values,
            volume,
        } in &self.zones
        {
            let actual = node
                .labels
                .get(key)
                .or_else(|| node.labels.get(ga_label(key)));
            if !actual.is_some_and(|v| values.iter().any(|z| **z == *v)) {
                return Err((
                    ReasonCode::VolumeZoneConflict,
                    format!(
                        "volume {volume} is in {key} {}, the node is in {}",
                        values.join(" or "),
                        actual.unwrap_or("none")
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl VolumeNeeds {
    /// NodeVolumeLimits: the node's attach limit of each driver leaves room for the pod's
    /// volumes. Volumes are counted per pod, so one shared by two pods on a node counts
    /// twice (upstream counts it once): cautious, never a node bought for a fit it lacks.
    fn check_attach(&self, node: &SimNode) -> Result<(), (ReasonCode, String)> {
        for (driver, limit) in node.attach_limits.iter() {
            let wanted = self.drivers.iter().filter(|d| *d == driver).count() as i64;
            if wanted == 0 {
                continue;
            }
            let used = attached(&node.attached, driver);
            if used + wanted > *limit {
                return Err((
                    ReasonCode::VolumeLimitReached,
                    format!(
                        "node has {used} of its {limit} {driver} volumes attached; the pod needs {wanted} more"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Counts the pod's volumes on (or, with a negative `delta`, off) a node.
    pub fn attach(&self, on: &mut Vec<(Arc<str>, i64)>, delta: i64) {
        for driver in &self.drivers {
            match on.iter_mut().find(|(d, _)| d == driver) {
                Some((_, n)) => *n += delta,
                None => on.push((driver.clone(), delta)),
            }
        }
    }
}

fn attached(on: &[(Arc<str>, i64)], driver: &str) -> i64 {
    on.iter()
        .find(|(d, _)| &**d == driver)
        .map_or(0, |(_, n)| *n)
}

/// One zone or region label of a bound volume.
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeZone {
    pub key: Arc<str>,
    /// The values a node's label may have.
    pub values: Vec<Arc<str>>,
    pub volume: Arc<str>,
}

/// The GA label a beta zone or region label was renamed to.
fn ga_label(key: &str) -> &str {
    match key {
        "failure-domain.beta.kubernetes.io/zone" => "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region" => "topology.kubernetes.io/region",
        other => other,
    }
}

/// Every pod's volume needs, resolved once per pass.
#[derive(Default)]
pub struct VolumeIndex {
    by_pod: HashMap<PodId, Arc<VolumeNeeds>>,
}

impl VolumeIndex {
    pub fn build(snapshot: &ClusterSnapshot) -> Self {
        let with_claims = || {
            snapshot
                .pods
                .iter()
                .filter(|p| !p.spec.claims.is_empty() && !p.is_terminal())
        };
        if !snapshot.storage.listed || with_claims().next().is_none() {
            return VolumeIndex::default();
        }
        let storage = StorageView::new(snapshot);
        let by_pod = with_claims()
            .map(|p| (p.id.clone(), Arc::new(storage.needs_of(p))))
            .collect();
        VolumeIndex { by_pod }
    }

    pub fn of(&self, pod: &Pod) -> Option<Arc<VolumeNeeds>> {
        if pod.spec.claims.is_empty() {
            return None;
        }
        self.by_pod.get(&pod.id).cloned()
    }
}

/// The storage objects, indexed for the lookups a pod's claims make.
struct StorageView<'a> {
    claims: HashMap<(&'a str, &'a str), &'a PersistentVolumeClaim>,
    volumes: HashMap<&'a str, &'a PersistentVolume>,
    classes: HashMap<&'a str, &'a StorageClass>,
    default_class: Option<&'a StorageClass>,
    /// `(namespace, claim)` of the claims scheduled pods use.
    in_use: HashSet<(&'a str, String)>,
    /// Every CSI driver some node runs: a provisioner among them attaches its volumes.
    csi_drivers: HashSet<&'a str>,
}

impl<'a> StorageView<'a> {
    fn new(s: &'a ClusterSnapshot) -> Self {
        let st = &s.storage;
        let mut in_use = HashSet::new();
        for p in s
            .pods
            .iter()
            .filter(|p| p.node_name.is_some() && !p.is_terminal())
        {
            for c in &p.spec.claims {
                in_use.insert((&*p.id.namespace, c.claim_name(&p.id.name)));
            }
        }
        StorageView {
            claims: st
                .claims
                .iter()
                .map(|c| ((&*c.key.namespace, &*c.key.name), c))
                .collect(),
            volumes: st.volumes.iter().map(|v| (&*v.name, v)).collect(),
            classes: st.classes.iter().map(|c| (&*c.name, c)).collect(),
            default_class: st.classes.iter().find(|c| c.is_default),
            in_use,
            csi_drivers: st
                .csi_nodes
                .iter()
                .flat_map(|n| &n.drivers)
                .map(|d| &*d.name)
                .collect(),
        }
    }

    fn needs_of(&self, pod: &Pod) -> VolumeNeeds {
        let mut needs = VolumeNeeds::default();
        for claim in &pod.spec.claims {
            if let Err(block) = self.add_claim(pod, claim, &mut needs) {
                needs.block = Some(block);
                break;
            }
        }
        needs
    }

    fn add_claim(
        &self,
        pod: &Pod,
        claim: &ClaimRef,
        needs: &mut VolumeNeeds,
    ) -> Result<(), (ReasonCode, String)> {
        let ns = &*pod.id.namespace;
        let name = claim.claim_name(&pod.id.name);
        let found = self.claims.get(&(ns, name.as_str())).copied();
        let (class, rwop) = match (found, claim) {
            (Some(c), _) => (c.storage_class.clone(), c.read_write_once_pod),
            // Made by the ephemeral volume controller once the pod exists: as its template.
            (
                None,
                ClaimRef::Ephemeral {
                    storage_class,
                    read_write_once_pod,
                    ..
                },
            ) => (storage_class.clone(), *read_write_once_pod),
            (None, ClaimRef::Claim(_)) => {
                return Err((
                    ReasonCode::VolumeMissing,
                    format!("persistentvolumeclaim {ns}/{name} does not exist"),
                ));
            }
        };
        if rwop && pod.node_name.is_none() && self.in_use.contains(&(ns, name.clone())) {
            return Err((
                ReasonCode::VolumeClaimInUse,
                format!("claim {ns}/{name} is ReadWriteOncePod and another pod uses it"),
            ));
        }
        match found.and_then(|c| c.volume_name.as_ref()) {
            Some(volume) => self.add_bound(ns, &name, volume, needs),
            None => self.add_unbound(ns, &name, class.as_deref(), needs),
        }
    }

    fn add_bound(
        &self,
        ns: &str,
        claim: &str,
        volume: &Arc<str>,
        needs: &mut VolumeNeeds,
    ) -> Result<(), (ReasonCode, String)> {
        let Some(pv) = self.volumes.get(&**volume) else {
            return Err((
                ReasonCode::VolumeMissing,
                format!(
                    "claim {ns}/{claim} is bound to persistentvolume {volume}, which does not exist"
                ),
            ));
        };
        if let Some(why) = &pv.unreadable {
            return Err((
                ReasonCode::VolumeMissing,
                format!(
                    "claim {ns}/{claim} is bound to persistentvolume {volume}, which cannot be read ({why})"
                ),
            ));
        }
        if let Some(affinity) = &pv.node_affinity {
            needs.selectors.push((
                format!("volume {volume} of claim {ns}/{claim}"),
                affinity.clone(),
            ));
        }
        needs.drivers.extend(pv.csi_driver.iter().cloned());
        for (key, values) in &pv.zone_labels {
            needs.zones.push(VolumeZone {
                key: key.clone(),
                values: values.clone(),
                volume: volume.clone(),
            });
        }
        Ok(())
    }

    fn add_unbound(
        &self,
        ns: &str,
        claim: &str,
        class: Option<&str>,
        needs: &mut VolumeNeeds,
    ) -> Result<(), (ReasonCode, String)> {
        let waits = |why: String| Err((ReasonCode::VolumeNotBound, why));
        let class = match class {
            Some("") => {
                return waits(format!(
                    "claim {ns}/{claim} has no StorageClass and is not bound: it waits for a PersistentVolume to be bound to it, not for a node"
                ));
            }
            Some(name) => self.classes.get(name).copied().ok_or_else(|| {
                (
                    ReasonCode::VolumeMissing,
                    format!("claim {ns}/{claim}: storageclass {name} does not exist"),
                )
            })?,
            None => match self.default_class {
                Some(c) => c,
                None => {
                    return waits(format!(
                        "claim {ns}/{claim} names no StorageClass and the cluster has no default one: it waits for a PersistentVolume, not for a node"
                    ));
                }
            },
        };
        if !class.wait_for_first_consumer {
            return waits(format!(
                "claim {ns}/{claim} is not bound yet and its StorageClass {} binds immediately: it waits for its volume to be provisioned, not for a node",
                class.name
            ));
        }
        if class.static_only() {
            return self.add_local_choices(ns, claim, class, needs);
        }
        if self.csi_drivers.contains(&*class.provisioner) {
            needs.drivers.push(class.provisioner.clone());
        }
        if let Some(topologies) = &class.allowed_topologies {
            needs.selectors.push((
                format!(
                    "claim {ns}/{claim} (StorageClass {} allowedTopologies)",
                    class.name
                ),
                topologies.clone(),
            ));
        }
        Ok(())
    }

    /// A claim of a class without a provisioner can only bind a free volume made beforehand:
    /// the pod may go where one of them can be used, and nowhere new.
    fn add_local_choices(
        &self,
        ns: &str,
        claim: &str,
        class: &StorageClass,
        needs: &mut VolumeNeeds,
    ) -> Result<(), (ReasonCode, String)> {
        let free: Vec<&&PersistentVolume> = self
            .volumes
            .values()
            .filter(|v| v.available && v.storage_class.as_deref() == Some(&*class.name))
            .collect();
        if free.is_empty() {
            return Err((
                ReasonCode::VolumeNotBound,
                format!(
                    "claim {ns}/{claim}: StorageClass {} has no provisioner and no free PersistentVolume: no node, new or old, can bind it",
                    class.name
                ),
            ));
        }
        let mut any = NodeSelector::default();
        for v in free {
            match &v.node_affinity {
                Some(a) => any.terms.extend(a.terms.iter().cloned()),
                // A free volume usable from anywhere: no constraint at all.
                None => return Ok(()),
            }
        }
        needs.selectors.push((
            format!(
                "claim {ns}/{claim} (free volumes of StorageClass {})",
                class.name
            ),
            any,
        ));
        Ok(())
    }
}

#[cfg(test)]
#[path = "volumes_tests.rs"]
mod tests;
