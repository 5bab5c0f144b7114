//! The dynamic resource allocation kinds (`resource.k8s.io`: ResourceClaims,
//! ResourceClaimTemplates, ResourceSlices, DeviceClasses), kept in the snapshot's `dra` as
//! the storage kinds are kept in `storage`: projected as they arrive (bounded as the model
//! bounds them: devices per slice, requests per claim), indexed by key.
//!
//! The group is read at v1 where served, else at v1beta2 or v1beta1, each object put in v1's
//! shape by the conversion the dump parser uses (`model::dra::as_v1`). `dra.listed` says
//! whether pods with claims are simulated at all: only once all four kinds have listed (a
//! claim or class not listed yet must never be judged missing). A cluster without the group
//! has the feature off, said once; an object that cannot be read is left out with a warning
//! naming it, which affects only the pods using it.

use kube::api::DynamicObject;
use serde::de::DeserializeOwned;

use super::table::Table;
use super::{Cache, Kind, Object, Update};
use crate::model::dra::{
    self, DeviceClass, Dra, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use crate::model::{FieldError, ObjectKey, Warning};

/// The DRA resources the cache wants of the group: (plural, kind, our kind).
pub const RESOURCES: [(&str, &str, Kind); 4] = [
    ("resourceclaims", "ResourceClaim", Kind::ResourceClaim),
    (
        "resourceclaimtemplates",
        "ResourceClaimTemplate",
        Kind::ResourceClaimTemplate,
    ),
    ("resourceslices", "ResourceSlice", Kind::ResourceSlice),
    ("deviceclasses", "DeviceClass", Kind::DeviceClass),
];

/// The group version read: the first of `model::dra::VERSIONS` served (v1, else v1beta2,
/// else v1beta1; upstream's autoscaler reads v1 only).
pub fn version(served: &[&str]) -> Option<String> {
    dra::VERSIONS
        .iter()
        .map(|v| format!("{}/{v}", dra::GROUP))
        .find(|gv| served.contains(&gv.as_str()))
}

/// A cluster that does not serve the DRA kinds has the feature off: said once, when the hub
/// connects, never an error.
pub fn not_served_warning(kinds: &[Kind]) -> Option<Warning> {
    super::discovery::not_served_warning(&Kind::DRA, kinds, Kind::ResourceClaim)
}

/// Names the version a DRA object was read at on it: items of a list of a built-in kind
/// carry no `apiVersion`, and the conversion needs it.
pub fn stamp(mut update: Update, api_version: &str) -> Update {
    use super::Change;
    if let Change::InitApply(Object::Dynamic(o))
    | Change::Apply(Object::Dynamic(o))
    | Change::Delete(Object::Dynamic(o)) = &mut update.change
    {
        let kind = o.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
        o.types = Some(kube::api::TypeMeta {
            api_version: api_version.into(),
            kind,
        });
    }
    update
}

/// One table per kind, over the vectors of `snapshot.dra`.
#[derive(Debug, Default)]
pub(super) struct DraTables {
    claims: Table<ObjectKey>,
    templates: Table<ObjectKey>,
    slices: Table<ObjectKey>,
    classes: Table<ObjectKey>,
}

impl DraTables {
    pub(super) fn begin_relist(&mut self, kind: Kind) {
        match kind {
            Kind::ResourceClaim => self.claims.begin_relist(),
            Kind::ResourceClaimTemplate => self.templates.begin_relist(),
            Kind::ResourceSlice => self.slices.begin_relist(),
            Kind::DeviceClass => self.classes.begin_relist(),
            _ => {}
        }
    }

    /// The relist of `kind` is complete: what it did not hold is gone. How many went.
    pub(super) fn end_relist(&mut self, kind: Kind, s: &mut Dra) -> usize {
        match kind {
            Kind::ResourceClaim => self.claims.end_relist(&mut s.claims),
            Kind::ResourceClaimTemplate => self.templates.end_relist(&mut s.templates),
            Kind::ResourceSlice => self.slices.end_relist(&mut s.slices),
            Kind::DeviceClass => self.classes.end_relist(&mut s.classes),
            _ => 0,
        }
    }

    pub(super) fn remove(&mut self, kind: Kind, s: &mut Dra, key: &ObjectKey) -> bool {
        match kind {
            Kind::ResourceClaim => self.claims.remove(&mut s.claims, key).is_some(),
            Kind::ResourceClaimTemplate => self.templates.remove(&mut s.templates, key).is_some(),
            Kind::ResourceSlice => self.slices.remove(&mut s.slices, key).is_some(),
            Kind::DeviceClass => self.classes.remove(&mut s.classes, key).is_some(),
            _ => false,
        }
    }
}

impl Cache {
    /// Projects and stores one DRA object. A claim whose allocation changed (allocated or
    /// freed) and a slice new or changed (a driver published devices) wake the runner: a
    /// pending pod may fit now, or need a node no longer. Templates and classes never do
    /// (the pods naming them are what changes). One that cannot be read is an error the
    /// cache reports and forgets the object for.
    pub(super) fn store_dra(&mut self, kind: Kind, object: Object) -> Result<bool, FieldError> {
        let Object::Dynamic(o) = object else {
            let what = format!("the watch of {} delivered another kind", kind.describe());
            return Err(FieldError::new("kind", what));
        };
        let p = &mut self.projector;
        let s = &mut self.snapshot.dra;
        let t = &mut self.dra;
        let key = crate::model::meta::key_of(&o.metadata, p);
        let value = as_v1(*o, kind)?;
        let (unchanged, wake) = match kind {
            Kind::ResourceClaim => {
                let claim = ResourceClaim::from_k8s(&typed(value)?, p)?;
                let old = t.claims.upsert(&mut s.claims, key, claim.clone());
                let was = old.as_ref().and_then(|o| o.allocation.as_ref());
                let wake = was != claim.allocation.as_ref();
                (old.as_ref() == Some(&claim), wake)
            }
            Kind::ResourceClaimTemplate => {
                let template = ResourceClaimTemplate::from_k8s(&typed(value)?, p)?;
                let old = t.templates.upsert(&mut s.templates, key, template.clone());
                (old.as_ref() == Some(&template), false)
            }
            Kind::ResourceSlice => {
                let slice = ResourceSlice::from_k8s(&typed(value)?, p)?;
                let old = t.slices.upsert(&mut s.slices, key, slice.clone());
                let same = old.as_ref() == Some(&slice);
                (same, !same)
            }
            Kind::DeviceClass => {
                let class = DeviceClass::from_k8s(&typed(value)?, p)?;
                let old = t.classes.upsert(&mut s.classes, key, class.clone());
                (old.as_ref() == Some(&class), false)
            }
            other => {
                let what = format!("{} is not a DRA kind", other.describe());
                return Err(FieldError::new("kind", what));
            }
        };
        self.unchanged = unchanged;
        Ok(wake)
    }

    /// Pods with claims are simulated only while all four kinds are watched and listed.
    pub(super) fn refresh_dra_listed(&mut self) {
        self.snapshot.dra.listed = Kind::DRA
            .iter()
            .all(|k| self.kinds.get(k).is_some_and(|s| s.synced));
    }

    /// How many DRA objects are cached, for the status.
    pub(super) fn dra_objects(&self) -> usize {
        let s = &self.snapshot.dra;
        s.claims.len() + s.templates.len() + s.slices.len() + s.classes.len()
    }
}

/// The object in v1's shape, from the version it was read at (stamped by the watch), its
/// `kind` named (a list's items carry none, and the generated types check it).
fn as_v1(o: DynamicObject, kind: Kind) -> Result<serde_json::Value, FieldError> {
    let api_version = o
        .types
        .as_ref()
        .map(|t| t.api_version.clone())
        .unwrap_or_default();
    let version = api_version.rsplit_once('/').map_or("", |(_, v)| v);
    let mut value = serde_json::to_value(&o).map_err(|e| FieldError::new("", e.to_string()))?;
    let name = RESOURCES.iter().find(|r| r.2 == kind).map_or("", |r| r.1);
    if let Some(map) = value.as_object_mut() {
        map.insert("kind".into(), name.into());
    }
    dra::as_v1(value, version).ok_or_else(|| {
        let why = format!("{api_version:?} is not read (resource.k8s.io v1, v1beta2, v1beta1)");
        FieldError::new("apiVersion", why)
    })
}

fn typed<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value)
        .map_err(|e| FieldError::new(e.path().to_string(), e.inner().to_string()))
}

#[cfg(test)]
#[path = "dra_tests.rs"]
mod tests;
