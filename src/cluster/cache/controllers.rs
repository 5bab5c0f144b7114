//! The controllers the drain rules look pods' owners up in (ReplicationControllers, Jobs,
//! ReplicaSets, StatefulSets): stored as keys in the snapshot's `controllers`, with how
//! completely each kind, DaemonSets too, could be read.

use std::collections::BTreeMap;

use super::lean_controller::ControllerObject;
use super::table::Table;
use super::{Cache, Kind};
use crate::model::controller::{Controller, ControllerKind, Listing};
use crate::model::{ClusterSnapshot, FieldError, ObjectKey};

impl Cache {
    /// A kind the cluster serves is read in full once synced (passes wait for that); one it
    /// does not serve has no object to find, and is not looked up.
    pub(super) fn set_controller_listings(&mut self, kinds: &[Kind]) {
        for c in ControllerKind::ALL {
            let listing = if kinds.contains(&Kind::of_controller(c)) {
                Listing::Complete
            } else {
                Listing::Unlisted
            };
            self.snapshot.controllers.set_listing(c, listing);
        }
    }

    /// The watch of `kind` was refused for good: if it is a controller kind, which of its
    /// objects exist is unknown from now on.
    pub(super) fn controllers_unreadable(&mut self, kind: Kind, why: &str) {
        if let Some(c) = ControllerKind::ALL
            .into_iter()
            .find(|c| Kind::of_controller(*c) == kind)
        {
            let why = format!("the hub may not list {c}: {why}");
            self.snapshot
                .controllers
                .set_listing(c, Listing::Unreadable(why.into()));
        }
    }

    /// Projects and stores one controller; what could not be read of it, if anything.
    pub(super) fn store_controller(
        &mut self,
        kind: ControllerKind,
        o: &ControllerObject,
    ) -> Option<FieldError> {
        let m = &o.metadata;
        let (controller, problem) = Controller::project(
            m.namespace.as_deref(),
            m.name.as_deref().unwrap_or_default(),
            m.uid.as_deref(),
            o.replicas.as_ref(),
            &mut self.projector,
        );
        let table = self.controllers.entry(kind).or_default();
        if let Some(items) = self.snapshot.controllers.of_mut(kind) {
            table.upsert(items, controller.key.clone(), controller);
        }
        problem
    }
}

/// A relist of `kind` is complete: what it did not hold is gone. How many went.
pub(super) fn end_controllers(
    tables: &mut BTreeMap<ControllerKind, Table<ObjectKey>>,
    snapshot: &mut ClusterSnapshot,
    kind: ControllerKind,
) -> usize {
    let table = tables.entry(kind).or_default();
    snapshot
        .controllers
        .of_mut(kind)
        .map_or(0, |items| table.end_relist(items))
}

pub(super) fn remove_controller(
    tables: &mut BTreeMap<ControllerKind, Table<ObjectKey>>,
    snapshot: &mut ClusterSnapshot,
    kind: ControllerKind,
    key: &ObjectKey,
) -> bool {
    let table = tables.entry(kind).or_default();
    snapshot
        .controllers
        .of_mut(kind)
        .is_some_and(|items| table.remove(items, key).is_some())
}
