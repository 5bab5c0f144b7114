//! What the machine controller works on, as one small interface: the objects of a cluster
//! by `Resource` and key, plus the few things a controller needs besides (fresh names, a
//! random source, node readiness). The simulated fleet implements it over its in-memory
//! `State`; `sim::testbed` implements it over a real API server. The controller's logic is
//! written once, against this trait, so the two can never drift apart.

use serde_json::Value;

use crate::api::resources::Resource;
use crate::api::status::ApiError;
use crate::controllers::index::Index;
use crate::machine_api::node_is_ready;
use crate::registry::{DeleteOptions, State};
use crate::rng::Rng;
use crate::store::Key;

/// The objects a machine controller reads and writes.
///
/// Reads see the world's own writes at once (a created Machine is listed by the next call),
/// as a controller's cache is updated from its own writes. Writes have the API server's
/// semantics: `modify` changes an object as a whole, and a world whose resources have a
/// `status` subresource sends the status part there.
/// Whether a failed write was the API refusing the object itself (400, 422 Invalid): no retry
/// can make it pass, unlike a timeout, a conflict or a throttle.
pub trait Refusal {
    fn is_refusal(&self) -> bool;
}

impl Refusal for ApiError {
    fn is_refusal(&self) -> bool {
        matches!(self.code, 400 | 422)
    }
}

pub trait MachineWorld {
    /// A failed write; the logic can build one from a refusal of its own.
    type Error: std::fmt::Display + From<ApiError> + Refusal;

    /// A number that moves whenever an object of `resources` changes, if the world can
    /// tell cheaply; `None` makes the controller work on every pass.
    fn revision(&self, resources: &[Resource]) -> Option<u64>;

    /// Every object of `resource`, in all namespaces, mapped by `f` (key, object).
    fn list<T>(&self, resource: Resource, f: impl FnMut(&Key, &Value) -> T) -> Vec<T>;

    /// Every object of `resource` read as `T` (the fields it names; objects that do not read
    /// as one are left out). A world holding JSON text reads it straight into `T`.
    fn list_as<T: serde::de::DeserializeOwned>(&self, resource: Resource) -> Vec<(Key, T)> {
        let read = self.list(resource, |key, v| {
            serde_json::from_value::<T>(v.clone())
                .ok()
                .map(|t| (key.clone(), t))
        });
        read.into_iter().flatten().collect()
    }

    /// The object at `key`, if there is one.
    fn get(&self, resource: Resource, key: &Key) -> Option<Value>;

    /// Whether there is an object at `key`.
    fn contains(&self, resource: Resource, key: &Key) -> bool {
        self.get(resource, key).is_some()
    }

    /// Creates `object` in `namespace` (ignored for cluster-scoped resources); returns it as
    /// stored, with its uid.
    fn create(
        &mut self,
        resource: Resource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, Self::Error>;

    /// Reads the object at `key`, changes it with `change` and writes back what changed.
    fn modify(
        &mut self,
        resource: Resource,
        key: &Key,
        change: impl FnOnce(&mut Value),
    ) -> Result<(), Self::Error>;

    /// Deletes the object at `key` (a Machine with finalizers is only marked).
    fn delete(&mut self, resource: Resource, key: &Key) -> Result<(), Self::Error>;

    /// Removes the Node `name` (its machine is gone).
    fn delete_node(&mut self, name: &str);

    /// `<prefix><5 random characters>`, not yet taken in `namespace`.
    fn fresh_name(&mut self, resource: Resource, namespace: &str, prefix: &str) -> String;

    /// The random source for names, addresses and instance ids.
    fn rng(&mut self) -> &mut Rng;

    /// Whether the Node `name` exists and reports Ready.
    fn node_ready(&self, name: &str) -> bool;
}

/// The simulated API server's state as a machine controller's world. Writes are the
/// controllers' own (`State::modify`), which watchers see like any client's.
#[derive(Debug)]
pub struct SimWorld<'a> {
    state: &'a mut State,
    /// The controllers' index, for node readiness without parsing nodes; without it (while
    /// a cluster's shape is built) readiness is read from the stored node.
    index: Option<&'a Index>,
}

impl<'a> SimWorld<'a> {
    pub fn new(state: &'a mut State, index: Option<&'a Index>) -> Self {
        SimWorld { state, index }
    }
}

impl MachineWorld for SimWorld<'_> {
    type Error = ApiError;

    fn revision(&self, resources: &[Resource]) -> Option<u64> {
        resources
            .iter()
            .map(|r| self.state.store.table(*r).last_write_rv)
            .max()
    }

    fn list<T>(&self, resource: Resource, mut f: impl FnMut(&Key, &Value) -> T) -> Vec<T> {
        self.state
            .store
            .range(resource, None, None)
            .map(|o| f(&o.key, &o.value()))
            .collect()
    }

    fn list_as<T: serde::de::DeserializeOwned>(&self, resource: Resource) -> Vec<(Key, T)> {
        // Only the fields `T` names are built: no `Value` tree of each whole object (a
        // thousand machines a cluster, read at every pass while some are provisioning).
        self.state
            .store
            .range(resource, None, None)
            .filter_map(|o| Some((o.key.clone(), serde_json::from_slice::<T>(&o.bytes).ok()?)))
            .collect()
    }

    fn get(&self, resource: Resource, key: &Key) -> Option<Value> {
        self.state.store.get(resource, key).map(|o| o.value())
    }

    fn contains(&self, resource: Resource, key: &Key) -> bool {
        self.state.store.get(resource, key).is_some()
    }

    fn create(
        &mut self,
        resource: Resource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        Ok(self.state.create(resource, namespace, object)?.value())
    }

    fn modify(
        &mut self,
        resource: Resource,
        key: &Key,
        change: impl FnOnce(&mut Value),
    ) -> Result<(), ApiError> {
        self.state.modify(resource, key, change).map(drop)
    }

    fn delete(&mut self, resource: Resource, key: &Key) -> Result<(), ApiError> {
        self.state
            .delete(resource, key, &DeleteOptions::default())
            .map(drop)
    }

    fn delete_node(&mut self, name: &str) {
        // The simulated kubelet is gone with its machine: nothing to drain or wait for.
        self.state.purge(Resource::Nodes, &Key::cluster(name));
    }

    fn fresh_name(&mut self, resource: Resource, namespace: &str, prefix: &str) -> String {
        self.state.fresh_name(resource, namespace, prefix)
    }

    fn rng(&mut self) -> &mut Rng {
        &mut self.state.rng
    }

    fn node_ready(&self, name: &str) -> bool {
        match self.index {
            Some(index) => index.nodes.get(name).is_some_and(|n| n.ready),
            None => self
                .state
                .store
                .get(Resource::Nodes, &Key::cluster(name))
                .is_some_and(|n| node_is_ready(&n.value())),
        }
    }
}
