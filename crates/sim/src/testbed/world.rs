//! A real API server as the machine controller's world. A pass reads a snapshot listed
//! afresh at its start (a small test cluster; a cache that lagged would make duplicate
//! Machines) and kept up to date with the pass's own writes. Writes go to the server at
//! once, with its semantics: a change of `status` through `/status`, the rest through the
//! object, each conditional on the resourceVersion read, so a 409 only means "next pass".
//!
//! The controller's logic is synchronous, so the world's calls block: a pass runs on a
//! blocking thread (`spawn_blocking`) and each call waits on the runtime with a deadline.
//! A failed call never stops the pass: it is logged, naming the operation and the object,
//! and returned to the logic, which leaves the work to the next pass.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList;
use serde_json::{Value, json};
use tokio::runtime::Handle;

use super::KWOK_NODE_ANNOTATION;
use super::requests::{BuildError, Target, status_dropped_on_create, writes};
use crate::api::resources::Resource;
use crate::api::status::ApiError;
use crate::controllers::machines::{MachineWorld, Refusal};
use crate::machine_api::{MachineApi, node_is_ready};
use crate::rng::Rng;
use crate::settings::Flavor;
use crate::store::Key;

/// A failed call to the server.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    #[error("{op}: no answer within {}s", .after.as_secs_f64())]
    Timeout { op: String, after: Duration },
    #[error("{op}: {}", answer(source))]
    Api {
        op: String,
        #[source]
        source: kube::Error,
    },
    #[error("{op}: cannot build the request: {source}")]
    Request {
        op: String,
        #[source]
        source: BuildError,
    },
    #[error("{op}: not sent, shutting down")]
    Stopped { op: String },
    /// Refused before any request: the object is not in the snapshot, or the logic found it
    /// unusable (a MachineSet with a bad capacity annotation).
    #[error(transparent)]
    Refused(#[from] ApiError),
}

/// What the server said, in one line (kube's own form carries the whole Status).
fn answer(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => {
            format!("{} {}: {}", status.code, status.reason, status.message)
        }
        other => other.to_string(),
    }
}

impl WorldError {
    /// The HTTP status the server answered with, if it answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            WorldError::Api {
                source: kube::Error::Api(status),
                ..
            } => Some(status.code),
            _ => None,
        }
    }
}

impl Refusal for WorldError {
    fn is_refusal(&self) -> bool {
        matches!(self.code(), Some(400 | 422))
    }
}

/// The objects of a real cluster that the machine controllers read, and the client that
/// writes them.
pub struct KubeWorld {
    client: kube::Client,
    handle: Handle,
    timeout: Duration,
    /// The resources listed each pass, at the version the server is asked for.
    targets: BTreeMap<Resource, Target>,
    objects: HashMap<Resource, BTreeMap<Key, Value>>,
    rng: Rng,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for KubeWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sizes: BTreeMap<String, usize> = self
            .objects
            .iter()
            .map(|(r, t)| (format!("{}.{}", r.def().plural, r.def().group), t.len()))
            .collect();
        f.debug_struct("KubeWorld")
            .field("targets", &self.targets)
            .field("objects", &sizes)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl KubeWorld {
    /// A world over `client`; calls wait on `handle` at most `timeout` each. Once `stop` is
    /// set, calls fail at once (a pass in progress ends quickly at shutdown).
    pub fn new(
        client: kube::Client,
        handle: Handle,
        timeout: Duration,
        seed: u64,
        stop: Arc<AtomicBool>,
    ) -> Self {
        KubeWorld {
            client,
            handle,
            timeout,
            targets: BTreeMap::new(),
            objects: HashMap::new(),
            rng: Rng::new(seed),
            stop,
        }
    }

    /// The resources the controllers of `apis` work on, Nodes, and `cloud`: the provider's
    /// kinds when this plays Cluster API's infrastructure provider (at Cluster API's
    /// version, v1beta2, as the test bed's CRDs serve them).
    pub fn serve(&mut self, apis: &[MachineApi], cloud: &[Resource]) {
        let mut targets = BTreeMap::new();
        let node = Target {
            resource: Resource::Nodes,
            version: "v1",
        };
        targets.insert(Resource::Nodes, node);
        for api in apis {
            let mut kinds = vec![api.machine_sets, api.machines];
            if api.flavor == Flavor::ClusterApi {
                kinds.push(Resource::CapiMachineDeployments);
            }
            for resource in kinds {
                let version = api.version;
                targets.insert(resource, Target { resource, version });
            }
        }
        for &resource in cloud {
            let version = resource.def().version;
            targets.insert(resource, Target { resource, version });
        }
        self.targets = targets;
    }

    /// Runs one call with the world's deadline. Blocks: call it from a blocking thread.
    fn call<T>(
        &self,
        op: impl FnOnce() -> String,
        fut: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, WorldError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(WorldError::Stopped { op: op() });
        }
        match self
            .handle
            .block_on(tokio::time::timeout(self.timeout, fut))
        {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(source)) => Err(WorldError::Api { op: op(), source }),
            Err(_) => Err(WorldError::Timeout {
                op: op(),
                after: self.timeout,
            }),
        }
    }

    /// Sends `request` (built by `build`) and reads the object answered.
    fn send(
        &self,
        op: &str,
        build: Result<http::Request<Vec<u8>>, BuildError>,
    ) -> Result<Value, WorldError> {
        let request = build.map_err(|source| WorldError::Request {
            op: op.to_string(),
            source,
        })?;
        self.call(|| op.to_string(), self.client.request::<Value>(request))
    }

    /// The server's API groups (`GET /apis`), for discovery.
    pub fn discover(&self) -> Result<APIGroupList, WorldError> {
        self.call(
            || "GET /apis (discovery)".to_string(),
            self.client.list_api_groups(),
        )
    }

    /// Lists every served resource afresh. On an error the snapshot is left as it was and
    /// the error names the list that failed.
    pub fn refresh(&mut self) -> Result<(), WorldError> {
        let mut objects = HashMap::new();
        for target in self.targets.values() {
            let op = target.describe("LIST", None, None);
            let list = self.send(&op, target.list())?;
            let mut items = BTreeMap::new();
            for mut item in list["items"].as_array().cloned().unwrap_or_default() {
                normalize(target, &mut item);
                items.insert(key_of(&item), item);
            }
            objects.insert(target.resource, items);
        }
        self.objects = objects;
        Ok(())
    }

    fn target(&self, resource: Resource) -> Result<Target, WorldError> {
        self.targets.get(&resource).copied().ok_or_else(|| {
            let def = resource.def();
            WorldError::Refused(ApiError::not_found(def.group, def.plural, "(not served)"))
        })
    }

    /// Keeps the server's answer as the snapshot's copy (gone once a deletion completed).
    fn remember(&mut self, target: &Target, mut object: Value) -> Value {
        normalize(target, &mut object);
        let key = key_of(&object);
        let table = self.objects.entry(target.resource).or_default();
        let deleting = object["metadata"].get("deletionTimestamp").is_some();
        let held = object["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if deleting && !held {
            table.remove(&key);
        } else {
            table.insert(key, object.clone());
        }
        object
    }

    /// Logs a failed call once, where it happened, and hands it back.
    fn logged(&self, err: WorldError) -> WorldError {
        match (&err, err.code()) {
            // A conflict only means the object moved on since the list; so does shutting down.
            (WorldError::Stopped { .. }, _) | (_, Some(409)) => {
                tracing::debug!("{err}; retried next pass")
            }
            _ => tracing::warn!("{err}; retried next pass"),
        }
        err
    }

    fn replace_status(
        &mut self,
        target: &Target,
        key: &Key,
        body: &Value,
    ) -> Result<Value, WorldError> {
        let op = target.describe("PUT", Some(key), Some("status"));
        let answer = self.send(&op, target.replace_status(key, body))?;
        Ok(self.remember(target, answer))
    }

    fn create_object(
        &mut self,
        target: &Target,
        namespace: &str,
        mut object: Value,
    ) -> Result<Value, WorldError> {
        object["apiVersion"] = json!(target.api_version());
        if target.resource == Resource::Nodes {
            // kwok manages only the nodes that carry its annotation: it turns them Ready
            // (unless told to leave never-ready ones alone) and runs their pods.
            object["metadata"]["annotations"][KWOK_NODE_ANNOTATION] = json!("fake");
        }
        let status = status_dropped_on_create(target.resource)
            .then(|| object.get("status").cloned())
            .flatten();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let op = target.describe("POST", Some(&Key::new(namespace, name)), None);
        let created = self.send(&op, target.create(namespace, &object))?;
        let mut stored = self.remember(target, created);
        if let Some(status) = status.filter(|s| stored.get("status") != Some(s)) {
            // The server dropped the status it was given: it goes through `/status`.
            stored["status"] = status;
            let key = key_of(&stored);
            stored = self.replace_status(target, &key, &stored)?;
        }
        Ok(stored)
    }

    fn modify_object(&mut self, target: &Target, key: &Key, new: Value) -> Result<(), WorldError> {
        let Some(old) = self.objects.get(&target.resource).and_then(|t| t.get(key)) else {
            let def = target.resource.def();
            return Err(ApiError::not_found(def.group, def.plural, &key.name).into());
        };
        let plan = writes(target.resource, old, &new);
        let mut latest = old.clone();
        if plan.main {
            let op = target.describe("PUT", Some(key), None);
            let answer = self.send(&op, target.replace(key, &new))?;
            latest = self.remember(target, answer);
        }
        if plan.status {
            latest["status"] = new.get("status").cloned().unwrap_or(Value::Null);
            self.replace_status(target, key, &latest)?;
        }
        Ok(())
    }

    fn delete_object(&mut self, target: &Target, key: &Key) -> Result<(), WorldError> {
        let op = target.describe("DELETE", Some(key), None);
        match self.send(&op, target.delete(key)) {
            // A Status: deleted. An object: marked, held by its finalizers.
            Ok(answer) if answer["kind"] == "Status" => self.forget(target.resource, key),
            Ok(object) => {
                self.remember(target, object);
            }
            Err(e) if e.code() == Some(404) => self.forget(target.resource, key),
            Err(e) => return Err(e),
        }
        Ok(())
    }

    fn forget(&mut self, resource: Resource, key: &Key) {
        if let Some(table) = self.objects.get_mut(&resource) {
            table.remove(key);
        }
    }
}

/// List items of built-in kinds come without `apiVersion` and `kind`; writes need them.
fn normalize(target: &Target, object: &mut Value) {
    if object.get("apiVersion").is_none() {
        object["apiVersion"] = json!(target.api_version());
    }
    if object.get("kind").is_none() {
        object["kind"] = json!(target.resource.def().kind);
    }
}

fn key_of(object: &Value) -> Key {
    Key::new(
        object["metadata"]["namespace"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default(),
    )
}

impl MachineWorld for KubeWorld {
    type Error = WorldError;

    fn revision(&self, _: &[Resource]) -> Option<u64> {
        // Listed afresh every pass: there is nothing cheaper to compare.
        None
    }

    fn list<T>(&self, resource: Resource, mut f: impl FnMut(&Key, &Value) -> T) -> Vec<T> {
        self.objects
            .get(&resource)
            .map(|t| t.iter().map(|(k, v)| f(k, v)).collect())
            .unwrap_or_default()
    }

    fn get(&self, resource: Resource, key: &Key) -> Option<Value> {
        self.objects.get(&resource)?.get(key).cloned()
    }

    fn contains(&self, resource: Resource, key: &Key) -> bool {
        self.objects
            .get(&resource)
            .is_some_and(|t| t.contains_key(key))
    }

    fn create(
        &mut self,
        resource: Resource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, WorldError> {
        let target = self.target(resource)?;
        self.create_object(&target, namespace, object)
            .map_err(|e| self.logged(e))
    }

    fn modify(
        &mut self,
        resource: Resource,
        key: &Key,
        change: impl FnOnce(&mut Value),
    ) -> Result<(), WorldError> {
        let target = self.target(resource)?;
        let Some(mut new) = self.get(resource, key) else {
            let def = resource.def();
            return Err(ApiError::not_found(def.group, def.plural, &key.name).into());
        };
        change(&mut new);
        self.modify_object(&target, key, new)
            .map_err(|e| self.logged(e))
    }

    fn delete(&mut self, resource: Resource, key: &Key) -> Result<(), WorldError> {
        let target = self.target(resource)?;
        self.delete_object(&target, key).map_err(|e| self.logged(e))
    }

    fn delete_node(&mut self, name: &str) {
        if let Ok(target) = self.target(Resource::Nodes) {
            let _ = self
                .delete_object(&target, &Key::cluster(name))
                .map_err(|e| self.logged(e));
        }
    }

    fn fresh_name(&mut self, resource: Resource, namespace: &str, prefix: &str) -> String {
        loop {
            let name = format!("{prefix}{}", self.rng.name_suffix());
            if !self.contains(resource, &Key::new(namespace, &name)) {
                return name;
            }
        }
    }

    fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    fn node_ready(&self, name: &str) -> bool {
        self.objects
            .get(&Resource::Nodes)
            .and_then(|t| t.get(&Key::cluster(name)))
            .is_some_and(node_is_ready)
    }
}
