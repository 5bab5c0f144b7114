//! The storage objects the scheduler's volume filters read (PersistentVolumeClaims,
//! PersistentVolumes, StorageClasses, CSINodes), kept in the snapshot's `storage` as the
//! other kinds are kept in theirs: projected as they arrive, indexed by key.
//!
//! `storage.listed` says whether the engine may simulate volumes at all: only once claims,
//! volumes and classes have all listed. A cluster that does not serve one of them, or whose
//! hub may not list it, leaves volumes unsimulated (pods with claims then scale up as
//! before, the gap named on each); CSINodes only add attach limits and zone labels.

use super::table::Table;
use super::{Cache, Kind, Object};
use crate::model::meta::key_of;
use crate::model::storage::{
    CsiNode, PersistentVolume, PersistentVolumeClaim, Storage, StorageClass,
};
use crate::model::{FieldError, ObjectKey};

/// One table per storage kind, over the vectors of `snapshot.storage`.
#[derive(Debug, Default)]
pub(super) struct StorageTables {
    claims: Table<ObjectKey>,
    volumes: Table<ObjectKey>,
    classes: Table<ObjectKey>,
    csi_nodes: Table<ObjectKey>,
}

impl StorageTables {
    pub(super) fn begin_relist(&mut self, kind: Kind) {
        if let Some(table) = self.table(kind) {
            table.begin_relist();
        }
    }

    /// The relist of `kind` is complete: what it did not hold is gone. How many went.
    pub(super) fn end_relist(&mut self, kind: Kind, s: &mut Storage) -> usize {
        match kind {
            Kind::PersistentVolumeClaim => self.claims.end_relist(&mut s.claims),
            Kind::PersistentVolume => self.volumes.end_relist(&mut s.volumes),
            Kind::StorageClass => self.classes.end_relist(&mut s.classes),
            Kind::CsiNode => self.csi_nodes.end_relist(&mut s.csi_nodes),
            _ => 0,
        }
    }

    pub(super) fn remove(&mut self, kind: Kind, s: &mut Storage, key: &ObjectKey) -> bool {
        match kind {
            Kind::PersistentVolumeClaim => self.claims.remove(&mut s.claims, key).is_some(),
            Kind::PersistentVolume => self.volumes.remove(&mut s.volumes, key).is_some(),
            Kind::StorageClass => self.classes.remove(&mut s.classes, key).is_some(),
            Kind::CsiNode => self.csi_nodes.remove(&mut s.csi_nodes, key).is_some(),
            _ => false,
        }
    }

    fn table(&mut self, kind: Kind) -> Option<&mut Table<ObjectKey>> {
        match kind {
            Kind::PersistentVolumeClaim => Some(&mut self.claims),
            Kind::PersistentVolume => Some(&mut self.volumes),
            Kind::StorageClass => Some(&mut self.classes),
            Kind::CsiNode => Some(&mut self.csi_nodes),
            _ => None,
        }
    }
}

impl Cache {
    /// Projects and stores one storage object. Storage changes never wake the runner: a
    /// volume bound or a class added only matters to pods already waiting, which the next
    /// scan looks at again (upstream looks every scan interval, whatever changed).
    pub(super) fn store_storage(&mut self, kind: Kind, object: Object) -> Result<bool, FieldError> {
        let p = &mut self.projector;
        let s = &mut self.snapshot.storage;
        let t = &mut self.storage;
        match (kind, object) {
            (Kind::PersistentVolumeClaim, Object::PersistentVolumeClaim(o)) => {
                let claim = PersistentVolumeClaim::from_k8s(&o, p);
                t.claims.upsert(&mut s.claims, claim.key.clone(), claim);
            }
            // The only projection that can fail (a node affinity it cannot read): kept as a
            // placeholder that holds the pods whose claims are bound to it (they wait, named
            // with why, rather than buy a node the volume may not reach), as a dump keeps it;
            // the problem is reported all the same.
            (Kind::PersistentVolume, Object::PersistentVolume(o)) => {
                let (volume, problem) = match PersistentVolume::from_k8s(&o, p) {
                    Ok(volume) => (volume, None),
                    Err(e) => (PersistentVolume::unreadable(&o, &e.to_string(), p), Some(e)),
                };
                t.volumes
                    .upsert(&mut s.volumes, key_of(&o.metadata, p), volume);
                return problem.map_or(Ok(false), Err);
            }
            (Kind::StorageClass, Object::StorageClass(o)) => {
                let class = StorageClass::from_k8s(&o, p);
                t.classes
                    .upsert(&mut s.classes, key_of(&o.metadata, p), class);
            }
            (Kind::CsiNode, Object::CsiNode(o)) => {
                let csi = CsiNode::from_k8s(&o, p);
                t.csi_nodes
                    .upsert(&mut s.csi_nodes, key_of(&o.metadata, p), csi);
            }
            _ => {
                let what = format!("the watch of {} delivered another kind", kind.describe());
                return Err(FieldError::new("kind", what));
            }
        }
        Ok(false)
    }

    /// Volumes are simulated only while claims, volumes and classes are all watched (served
    /// and allowed) and listed: a pass must never take a kind it could not read for an
    /// empty one (a claim judged missing buys nothing; a volume judged missing neither).
    pub(super) fn refresh_storage_listed(&mut self) {
        self.snapshot.storage.listed = Kind::VOLUMES
            .iter()
            .all(|k| self.kinds.get(k).is_some_and(|s| s.synced));
    }

    /// How many storage objects are cached, for the status.
    pub(super) fn storage_objects(&self) -> usize {
        let s = &self.snapshot.storage;
        s.claims.len() + s.volumes.len() + s.classes.len() + s.csi_nodes.len()
    }
}

#[cfg(test)]
#[path = "storage_tests.rs"]
mod tests;
