//! Kubernetes write semantics over the plain store, per resource, as the API server's
//! "registry strategies" apply them: metadata filled on create, defaults, namespaces that
//! must exist, optimistic concurrency on update, the split between an object and its
//! `status` subresource, `generation`, finalizers, and graceful deletion of pods.
//!
//! Both the HTTP handlers and the simulated controllers write through here, so a
//! controller's change looks exactly like a client's to every watcher.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::resources::Resource;
use crate::api::status::ApiError;
use crate::rng::Rng;
use crate::store::{EventType, Key, Store, Stored};

mod strategy;

use strategy::{apply_defaults, check_schema, check_type, normalize, spec_changed, validate_name};

/// What one cluster's lock guards: its objects and the random source for names and uids.
#[derive(Debug)]
pub struct State {
    pub store: Store,
    pub rng: Rng,
}

/// Which part of an object an update may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// A client write to the object: its status is kept when it has a status subresource.
    Main,
    /// A client write to `/status`: only the status changes.
    Status,
    /// A controller's write: everything given is taken (uid and creation time kept).
    Internal,
}

/// The part of `DeleteOptions` the simulation honours.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub preconditions: Option<Preconditions>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// The current time as Kubernetes writes it (RFC 3339, whole seconds).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// The key of `name` in `namespace` for `resource` (namespace dropped if cluster-scoped).
pub fn key_for(resource: Resource, namespace: &str, name: &str) -> Key {
    if resource.def().namespaced {
        Key::new(namespace, name)
    } else {
        Key::cluster(name)
    }
}

impl State {
    /// A state with an empty store.
    pub fn new(window: usize, seed: u64) -> Self {
        State {
            store: Store::new(window),
            rng: Rng::new(seed),
        }
    }

    /// `<prefix><5 random characters>`, not yet taken in `namespace` (generateName; with
    /// 27^5 suffixes, a large workload would otherwise meet collisions).
    pub fn fresh_name(&mut self, resource: Resource, namespace: &str, prefix: &str) -> String {
        loop {
            let name = format!("{prefix}{}", self.rng.name_suffix());
            if self
                .store
                .get(resource, &key_for(resource, namespace, &name))
                .is_none()
            {
                return name;
            }
        }
    }

    /// Creates `object` in `namespace` (ignored for cluster-scoped resources).
    pub fn create(
        &mut self,
        resource: Resource,
        namespace: &str,
        object: Value,
    ) -> Result<Arc<Stored>, ApiError> {
        self.create_checked(resource, namespace, object, true)
    }

    /// Creates an object the simulation built itself, skipping the schema check (the
    /// initial population of a large cluster would otherwise spend most of its time there).
    pub fn seed(
        &mut self,
        resource: Resource,
        namespace: &str,
        object: Value,
    ) -> Result<Arc<Stored>, ApiError> {
        self.create_checked(resource, namespace, object, false)
    }

    fn create_checked(
        &mut self,
        resource: Resource,
        namespace: &str,
        mut object: Value,
        validate: bool,
    ) -> Result<Arc<Stored>, ApiError> {
        let def = resource.def();
        check_type(resource, &object)?;
        normalize(resource, &mut object);
        let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
            return Err(ApiError::invalid(def.kind, "", "metadata: Required value"));
        };
        let name = match meta.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => match meta.get("generateName").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => {
                    let prefix = prefix.to_string();
                    self.fresh_name(resource, namespace, &prefix)
                }
                _ => {
                    return Err(ApiError::invalid(
                        def.kind,
                        "",
                        "metadata.name: Required value: name or generateName is required",
                    ));
                }
            },
        };
        validate_name(def.kind, &name)?;
        let namespace = if def.namespaced {
            match meta.get("namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() && ns != namespace => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => namespace.to_string(),
            }
        } else {
            String::new()
        };
        if def.namespaced {
            if namespace.is_empty() {
                return Err(ApiError::bad_request(
                    "a namespace is required for a namespaced resource",
                ));
            }
            if self
                .store
                .get(Resource::Namespaces, &Key::cluster(&namespace))
                .is_none()
            {
                return Err(ApiError::not_found("", "namespaces", &namespace));
            }
            meta.insert("namespace".into(), json!(namespace));
        } else {
            meta.remove("namespace");
        }
        let key = Key::new(&namespace, &name);
        if self.store.get(resource, &key).is_some() {
            return Err(ApiError::already_exists(def.group, def.plural, &name));
        }
        meta.insert("name".into(), json!(name));
        meta.insert("uid".into(), json!(self.rng.uuid()));
        meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
        meta.insert("generation".into(), json!(1));
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        meta.remove("managedFields");
        object["apiVersion"] = json!(resource.api_version());
        object["kind"] = json!(def.kind);
        apply_defaults(resource, &mut object);
        if validate {
            check_schema(resource, &object, &name)?;
        }
        Ok(self.store.put(resource, key, &mut object, EventType::Added))
    }

    /// Replaces the object at `key` with `object`, under `mode`. A non-empty
    /// `metadata.resourceVersion` in `object` must be the stored one (else 409 Conflict).
    pub fn update(
        &mut self,
        resource: Resource,
        key: &Key,
        mut object: Value,
        mode: WriteMode,
    ) -> Result<Arc<Stored>, ApiError> {
        let def = resource.def();
        let Some(old) = self.store.get(resource, key).cloned() else {
            return Err(ApiError::not_found(def.group, def.plural, &key.name));
        };
        check_type(resource, &object)?;
        normalize(resource, &mut object);
        if !object.get("metadata").is_some_and(Value::is_object) {
            return Err(ApiError::invalid(
                def.kind,
                &key.name,
                "metadata: Required value",
            ));
        }
        let meta = &object["metadata"];
        if meta
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| n != &*key.name)
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({})",
                meta["name"].as_str().unwrap_or_default(),
                key.name
            )));
        }
        if let Some(rv) = meta.get("resourceVersion").and_then(Value::as_str)
            && !rv.is_empty()
            && rv != old.rv.to_string()
        {
            return Err(ApiError::conflict(
                def.group,
                def.plural,
                &key.name,
                ApiError::STALE,
            ));
        }
        let old_value = old.value();
        if mode == WriteMode::Status {
            let status = object.get("status").cloned();
            object = old_value.clone();
            match status {
                Some(s) => object["status"] = s,
                None => {
                    if let Some(o) = object.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        } else if mode == WriteMode::Main && def.status {
            match old_value.get("status") {
                Some(s) => object["status"] = s.clone(),
                None => {
                    if let Some(o) = object.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        }
        // Identity and server-owned metadata always come from the stored object.
        for field in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match old_value["metadata"].get(field) {
                Some(v) => object["metadata"][field] = v.clone(),
                None => {
                    if let Some(m) = object["metadata"].as_object_mut() {
                        m.remove(field);
                    }
                }
            }
        }
        object["metadata"]["name"] = json!(&*key.name);
        object["metadata"]["resourceVersion"] = json!(old.rv.to_string());
        if def.namespaced {
            object["metadata"]["namespace"] = json!(&*key.namespace);
        }
        object["apiVersion"] = json!(resource.api_version());
        object["kind"] = json!(def.kind);
        if object == old_value {
            // A no-op write changes nothing, not even the resourceVersion.
            return Ok(old);
        }
        if spec_changed(&old_value, &object) {
            let generation = old_value["metadata"]["generation"].as_i64().unwrap_or(1);
            object["metadata"]["generation"] = json!(generation + 1);
        }
        // Controllers' writes are trusted (and frequent): only clients' are checked.
        if mode != WriteMode::Internal {
            check_schema(resource, &object, &key.name)?;
        }
        let deleting = object["metadata"].get("deletionTimestamp").is_some();
        let finalizers_left = object["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if deleting && !finalizers_left && resource != Resource::Pods {
            // The last finalizer is gone: the deletion completes.
            return Ok(self.store.remove(resource, key, &mut object));
        }
        Ok(self
            .store
            .put(resource, key.clone(), &mut object, EventType::Modified))
    }

    /// Reads, changes with `change` and writes back the object at `key` as a controller.
    pub fn modify(
        &mut self,
        resource: Resource,
        key: &Key,
        change: impl FnOnce(&mut Value),
    ) -> Result<Arc<Stored>, ApiError> {
        let def = resource.def();
        let Some(old) = self.store.get(resource, key) else {
            return Err(ApiError::not_found(def.group, def.plural, &key.name));
        };
        let mut v = old.value();
        change(&mut v);
        self.update(resource, key, v, WriteMode::Internal)
    }

    /// Deletes the object at `key`: at once, or by marking it (finalizers; pods that a
    /// kubelet must stop first). Returns the object's last state.
    pub fn delete(
        &mut self,
        resource: Resource,
        key: &Key,
        opts: &DeleteOptions,
    ) -> Result<Arc<Stored>, ApiError> {
        let def = resource.def();
        let Some(old) = self.store.get(resource, key).cloned() else {
            return Err(ApiError::not_found(def.group, def.plural, &key.name));
        };
        let mut object = old.value();
        if let Some(pre) = &opts.preconditions {
            let uid = object["metadata"]["uid"].as_str().unwrap_or_default();
            if let Some(want) = &pre.uid
                && want != uid
            {
                return Err(ApiError::conflict(
                    def.group,
                    def.plural,
                    &key.name,
                    &format!(
                        "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                    ),
                ));
            }
            if let Some(want) = &pre.resource_version
                && *want != old.rv.to_string()
            {
                return Err(ApiError::conflict(
                    def.group,
                    def.plural,
                    &key.name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {}",
                        old.rv
                    ),
                ));
            }
        }
        if resource == Resource::Namespaces {
            self.delete_namespace_contents(&key.name);
        }
        let has_finalizers = object["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        let grace = if resource == Resource::Pods
            && !object["spec"]["nodeName"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
        {
            opts.grace_period_seconds
                .or_else(|| object["spec"]["terminationGracePeriodSeconds"].as_i64())
                .unwrap_or(30)
                .max(0)
        } else {
            0
        };
        let already = object["metadata"].get("deletionTimestamp").is_some();
        if has_finalizers || grace > 0 {
            if already {
                return Ok(old);
            }
            object["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            object["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            return Ok(self
                .store
                .put(resource, key.clone(), &mut object, EventType::Modified));
        }
        Ok(self.store.remove(resource, key, &mut object))
    }

    /// Removes an object now, whatever its finalizers or grace period (a kubelet finishing a
    /// pod, the garbage collector).
    pub fn purge(&mut self, resource: Resource, key: &Key) -> Option<Arc<Stored>> {
        let mut object = self.store.get(resource, key)?.value();
        Some(self.store.remove(resource, key, &mut object))
    }

    fn delete_namespace_contents(&mut self, namespace: &str) {
        for resource in Resource::ALL {
            if !resource.def().namespaced {
                continue;
            }
            let keys: Vec<Key> = self
                .store
                .range(resource, Some(namespace), None)
                .map(|o| o.key.clone())
                .collect();
            for key in keys {
                self.purge(resource, &key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        let mut s = State::new(100, 1);
        s.create(
            Resource::Namespaces,
            "",
            json!({"metadata": {"name": "ns"}}),
        )
        .unwrap();
        s
    }

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}})
    }

    #[test]
    fn create_fills_metadata_and_refuses_duplicates() {
        let mut s = state();
        let o = s
            .create(Resource::ConfigMaps, "ns", cm("x"))
            .unwrap()
            .value();
        assert_eq!(o["metadata"]["namespace"], "ns");
        assert!(o["metadata"]["uid"].is_string());
        let e = s.create(Resource::ConfigMaps, "ns", cm("x")).unwrap_err();
        assert_eq!((e.code, e.reason), (409, "AlreadyExists"));
    }

    #[test]
    fn a_secrets_string_data_is_stored_as_data() {
        let mut s = state();
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "stringData": {"token": "abc"}, "data": {"ca.crt": "UEVN", "token": "eA=="}});
        let o = s.create(Resource::Secrets, "ns", secret).unwrap().value();
        assert_eq!(o["data"]["token"], "YWJj", "stringData wins over data");
        assert_eq!(o["data"]["ca.crt"], "UEVN");
        assert!(o.get("stringData").is_none());
        assert_eq!(o["type"], "Opaque");
        let update = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "stringData": {"token": "def"}});
        let o = s
            .update(
                Resource::Secrets,
                &Key::new("ns", "s"),
                update,
                WriteMode::Main,
            )
            .unwrap()
            .value();
        assert_eq!(o["data"]["token"], "ZGVm");
        let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"},
            "data": {"k": 3}});
        assert_eq!(
            s.create(Resource::Secrets, "ns", bad).unwrap_err().code,
            422
        );
    }

    #[test]
    fn create_in_a_missing_namespace_is_not_found() {
        let mut s = state();
        let e = s.create(Resource::ConfigMaps, "nope", cm("x")).unwrap_err();
        assert_eq!(e.code, 404);
    }

    #[test]
    fn generate_name_and_invalid_names() {
        let mut s = state();
        let o = s
            .create(
                Resource::ConfigMaps,
                "ns",
                json!({"metadata": {"generateName": "web-"}}),
            )
            .unwrap();
        assert!(o.key.name.starts_with("web-") && o.key.name.len() == 9);
        let e = s
            .create(Resource::ConfigMaps, "ns", cm("Bad_Name"))
            .unwrap_err();
        assert_eq!(e.code, 422);
    }

    #[test]
    fn stale_update_conflicts_and_noop_keeps_version() {
        let mut s = state();
        let first = s.create(Resource::ConfigMaps, "ns", cm("x")).unwrap();
        let key = first.key.clone();
        let same = s
            .update(Resource::ConfigMaps, &key, first.value(), WriteMode::Main)
            .unwrap();
        assert_eq!(same.rv, first.rv);
        let mut changed = first.value();
        changed["data"]["a"] = json!("2");
        let second = s
            .update(Resource::ConfigMaps, &key, changed.clone(), WriteMode::Main)
            .unwrap();
        assert!(second.rv > first.rv);
        assert_eq!(second.value()["metadata"]["generation"], 2);
        let e = s
            .update(Resource::ConfigMaps, &key, changed, WriteMode::Main)
            .unwrap_err();
        assert_eq!((e.code, e.reason), (409, "Conflict"));
    }

    #[test]
    fn main_writes_keep_status_and_status_writes_keep_spec() {
        let mut s = state();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
        let p = s.create(Resource::Pods, "ns", pod).unwrap();
        let mut v = p.value();
        v["status"]["phase"] = json!("Running");
        v["metadata"]["labels"] = json!({"x": "y"});
        let after = s
            .update(Resource::Pods, &p.key, v.clone(), WriteMode::Main)
            .unwrap()
            .value();
        assert_eq!(after["status"]["phase"], "Pending");
        assert_eq!(after["metadata"]["labels"]["x"], "y");
        v["metadata"]["resourceVersion"] = after["metadata"]["resourceVersion"].clone();
        v["metadata"]["labels"] = json!({"x": "z"});
        let after = s
            .update(Resource::Pods, &p.key, v, WriteMode::Status)
            .unwrap()
            .value();
        assert_eq!(after["status"]["phase"], "Running");
        assert_eq!(after["metadata"]["labels"]["x"], "y");
    }

    #[test]
    fn wrongly_shaped_core_objects_are_invalid() {
        let mut s = state();
        let bad = json!({"metadata": {"name": "p"}, "spec": {"containers": "nope"}});
        assert_eq!(s.create(Resource::Pods, "ns", bad).unwrap_err().code, 422);
    }

    #[test]
    fn finalizers_hold_deletion_until_removed() {
        let mut s = state();
        let mut o = cm("x");
        o["metadata"]["finalizers"] = json!(["keep"]);
        let c = s.create(Resource::ConfigMaps, "ns", o).unwrap();
        let marked = s
            .delete(Resource::ConfigMaps, &c.key, &DeleteOptions::default())
            .unwrap();
        assert!(marked.value()["metadata"]["deletionTimestamp"].is_string());
        s.modify(Resource::ConfigMaps, &c.key, |v| {
            v["metadata"]["finalizers"] = json!([])
        })
        .unwrap();
        assert!(s.store.get(Resource::ConfigMaps, &c.key).is_none());
    }

    #[test]
    fn delete_preconditions_are_checked() {
        let mut s = state();
        let c = s.create(Resource::ConfigMaps, "ns", cm("x")).unwrap();
        let opts = DeleteOptions {
            preconditions: Some(Preconditions {
                uid: Some("other".into()),
                resource_version: None,
            }),
            ..Default::default()
        };
        assert_eq!(
            s.delete(Resource::ConfigMaps, &c.key, &opts)
                .unwrap_err()
                .code,
            409
        );
    }

    #[test]
    fn bound_pods_terminate_gracefully() {
        let mut s = state();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": [{"name": "c"}]}});
        let p = s.create(Resource::Pods, "ns", pod).unwrap();
        let d = s
            .delete(Resource::Pods, &p.key, &DeleteOptions::default())
            .unwrap();
        assert_eq!(d.value()["metadata"]["deletionGracePeriodSeconds"], 30);
        let now = DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        s.delete(Resource::Pods, &p.key, &now).unwrap();
        assert!(s.store.get(Resource::Pods, &p.key).is_none());
    }
}
