//! The versioned object store of one simulated cluster: every object as its serialized JSON
//! bytes plus the few field values selectors need, one table per resource, one
//! resourceVersion counter for the whole cluster (as etcd has), and a bounded history of
//! change events that watches replay from.
//!
//! Objects are stored as bytes because that is both the most compact form (a parsed
//! `serde_json::Value` tree costs several times more) and the form lists and watches send:
//! serving a list is concatenating byte slices. Writers parse, change and re-serialize;
//! Kubernetes semantics (defaults, status, finalizers) live in `registry`, not here.

mod history;

pub use history::{Expired, HistEvent};

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::api::resources::Resource;

/// Namespace (empty for cluster-scoped resources) and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub namespace: Box<str>,
    pub name: Box<str>,
}

impl Key {
    pub fn new(namespace: &str, name: &str) -> Self {
        Key {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of a cluster-scoped object.
    pub fn cluster(name: &str) -> Self {
        Key::new("", name)
    }
}

/// One stored version of an object.
#[derive(Debug)]
pub struct Stored {
    pub key: Key,
    pub rv: u64,
    /// The object as JSON, `metadata.resourceVersion` included.
    pub bytes: Box<[u8]>,
    /// Values of the resource's indexed fields (`ResourceDef::fields`), `""` when absent.
    pub fields: Box<[Box<str>]>,
}

impl Stored {
    /// The object parsed into a JSON tree, for a writer that changes it.
    pub fn value(&self) -> Value {
        // The bytes were produced by serde_json from a Value, so they always parse; the
        // fallback keeps this total without a panic path.
        serde_json::from_slice(&self.bytes).unwrap_or(Value::Null)
    }

    /// The indexed field `path`, if the resource indexes it.
    pub fn field(&self, resource: Resource, path: &str) -> Option<&str> {
        match path {
            "metadata.name" => Some(&self.key.name),
            "metadata.namespace" => Some(&self.key.namespace),
            _ => {
                let i = resource.def().fields.iter().position(|f| *f == path)?;
                self.fields.get(i).map(|f| &**f)
            }
        }
    }
}

/// Added, modified or deleted, as in a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// The objects of one resource.
#[derive(Debug, Default)]
pub struct Table {
    pub objects: BTreeMap<Key, Arc<Stored>>,
    /// resourceVersion of the last write of any kind, and of the last delete: controllers use
    /// them to skip work when nothing relevant changed.
    pub last_write_rv: u64,
    pub last_delete_rv: u64,
}

/// The store of one cluster.
#[derive(Debug)]
pub struct Store {
    rv: u64,
    tables: Vec<Table>,
    history: history::History,
    notify: tokio::sync::watch::Sender<u64>,
}

impl Store {
    /// An empty store keeping the last `window` events for watches.
    pub fn new(window: usize) -> Self {
        Store {
            rv: 1,
            tables: Resource::ALL.iter().map(|_| Table::default()).collect(),
            history: history::History::new(window),
            notify: tokio::sync::watch::Sender::new(1),
        }
    }

    /// The latest resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// The table of `resource`.
    pub fn table(&self, resource: Resource) -> &Table {
        &self.tables[resource.index()]
    }

    /// The stored object, if present.
    pub fn get(&self, resource: Resource, key: &Key) -> Option<&Arc<Stored>> {
        self.tables[resource.index()].objects.get(key)
    }

    /// The objects of `resource` in `namespace` (all namespaces if `None`), in key order,
    /// starting after `after` when continuing a paged list.
    pub fn range<'a>(
        &'a self,
        resource: Resource,
        namespace: Option<&'a str>,
        after: Option<&Key>,
    ) -> impl Iterator<Item = &'a Arc<Stored>> + 'a {
        use std::ops::Bound;
        let objects = &self.tables[resource.index()].objects;
        let start = match (after, namespace) {
            (Some(k), _) => Bound::Excluded(k.clone()),
            (None, Some(ns)) => Bound::Included(Key::new(ns, "")),
            (None, None) => Bound::Unbounded,
        };
        objects
            .range((start, Bound::Unbounded))
            .map(|(_, v)| v)
            .take_while(move |v| namespace.is_none_or(|ns| &*v.key.namespace == ns))
    }

    /// Writes `object` (a new or changed object) under the next resourceVersion, which is
    /// set into its metadata, and records the event.
    pub fn put(
        &mut self,
        resource: Resource,
        key: Key,
        object: &mut Value,
        ty: EventType,
    ) -> Arc<Stored> {
        let stored = self.version(resource, key, object);
        let table = &mut self.tables[resource.index()];
        table.objects.insert(stored.key.clone(), stored.clone());
        table.last_write_rv = stored.rv;
        self.record(resource, ty, &stored);
        stored
    }

    /// Removes the object, recording a DELETED event carrying `object` (its final state)
    /// under a new resourceVersion.
    pub fn remove(&mut self, resource: Resource, key: &Key, object: &mut Value) -> Arc<Stored> {
        let stored = self.version(resource, key.clone(), object);
        let table = &mut self.tables[resource.index()];
        table.objects.remove(key);
        table.last_write_rv = stored.rv;
        table.last_delete_rv = stored.rv;
        self.record(resource, EventType::Deleted, &stored);
        stored
    }

    /// The events after `rv` (exclusive), or `Expired` if some have left the window.
    pub fn events_after(&self, rv: u64) -> Result<impl Iterator<Item = &HistEvent>, Expired> {
        self.history.after(rv)
    }

    /// Compacts the history to the latest resourceVersion (etcd's compaction): a watch from
    /// any earlier version gets `410 Expired`. Returns that version.
    pub fn compact(&mut self) -> u64 {
        self.history.compact(self.rv);
        self.rv
    }

    /// A receiver that changes whenever a new resourceVersion is written.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.notify.subscribe()
    }

    fn version(&mut self, resource: Resource, key: Key, object: &mut Value) -> Arc<Stored> {
        self.rv += 1;
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(self.rv.to_string()));
        }
        let fields = resource
            .def()
            .fields
            .iter()
            .map(|path| field_value(object, path).into_boxed_str())
            .collect();
        // Serializing a Value cannot fail (its keys are strings); an empty body is the
        // harmless fallback.
        let bytes = serde_json::to_vec(object)
            .unwrap_or_default()
            .into_boxed_slice();
        Arc::new(Stored {
            key,
            rv: self.rv,
            bytes,
            fields,
        })
    }

    fn record(&mut self, resource: Resource, ty: EventType, stored: &Arc<Stored>) {
        self.history.push(HistEvent {
            resource,
            ty,
            object: stored.clone(),
        });
        self.notify.send_replace(self.rv);
    }
}

/// The string form of the field at dotted `path`, as field selectors compare it.
pub fn field_value(object: &Value, path: &str) -> String {
    // Events' `source` selector means `source.component`.
    let path = if path == "source" {
        "source.component"
    } else {
        path
    };
    let mut v = object;
    for part in path.split('.') {
        match v.get(part) {
            Some(next) => v = next,
            None => return String::new(),
        }
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "ns"},
               "spec": {"nodeName": node}, "status": {"phase": "Running"}})
    }

    #[test]
    fn writes_bump_the_version_and_index_fields() {
        let mut s = Store::new(10);
        let mut p = pod("a", "n1");
        let st = s.put(
            Resource::Pods,
            Key::new("ns", "a"),
            &mut p,
            EventType::Added,
        );
        assert_eq!(st.rv, 2);
        assert_eq!(st.field(Resource::Pods, "spec.nodeName"), Some("n1"));
        assert_eq!(st.field(Resource::Pods, "status.phase"), Some("Running"));
        assert_eq!(st.field(Resource::Pods, "metadata.name"), Some("a"));
        assert_eq!(st.value()["metadata"]["resourceVersion"], "2");
    }

    #[test]
    fn range_stays_in_its_namespace_and_continues_after_a_key() {
        let mut s = Store::new(10);
        for (ns, name) in [("a", "1"), ("b", "1"), ("b", "2"), ("c", "1")] {
            let mut p = pod(name, "");
            s.put(Resource::Pods, Key::new(ns, name), &mut p, EventType::Added);
        }
        let names: Vec<_> = s
            .range(Resource::Pods, Some("b"), None)
            .map(|o| o.key.clone())
            .collect();
        assert_eq!(names, vec![Key::new("b", "1"), Key::new("b", "2")]);
        let after = Key::new("b", "1");
        let rest: Vec<_> = s
            .range(Resource::Pods, None, Some(&after))
            .map(|o| o.key.clone())
            .collect();
        assert_eq!(rest, vec![Key::new("b", "2"), Key::new("c", "1")]);
    }

    #[test]
    fn history_expires_beyond_the_window() {
        let mut s = Store::new(3);
        for i in 0..5 {
            let mut p = pod(&i.to_string(), "");
            s.put(
                Resource::Pods,
                Key::new("ns", &i.to_string()),
                &mut p,
                EventType::Added,
            );
        }
        // rv 2..=6 written; the window holds 4, 5, 6.
        assert!(s.events_after(2).is_err());
        assert_eq!(s.events_after(3).map(|e| e.count()).ok(), Some(3));
        assert_eq!(s.events_after(6).map(|e| e.count()).ok(), Some(0));
    }

    #[test]
    fn a_compacted_history_refuses_older_versions_even_when_empty() {
        let mut s = Store::new(10);
        for i in 0..3 {
            let mut p = pod(&i.to_string(), "");
            s.put(
                Resource::Pods,
                Key::new("ns", &i.to_string()),
                &mut p,
                EventType::Added,
            );
        }
        // Before compaction rv 1 replays everything, as etcd does.
        assert_eq!(s.events_after(1).map(|e| e.count()).ok(), Some(3));
        let at = s.compact();
        assert_eq!(at, 4);
        assert!(s.events_after(1).is_err());
        assert!(s.events_after(3).is_err());
        assert_eq!(s.events_after(4).map(|e| e.count()).ok(), Some(0));
    }

    #[test]
    fn remove_records_a_deleted_event() {
        let mut s = Store::new(10);
        let mut p = pod("a", "");
        s.put(
            Resource::Pods,
            Key::new("ns", "a"),
            &mut p,
            EventType::Added,
        );
        s.remove(Resource::Pods, &Key::new("ns", "a"), &mut p);
        assert!(s.get(Resource::Pods, &Key::new("ns", "a")).is_none());
        let last = s
            .events_after(2)
            .ok()
            .and_then(|mut e| e.next().map(|e| e.ty));
        assert_eq!(last, Some(EventType::Deleted));
        assert_eq!(s.table(Resource::Pods).last_delete_rv, 3);
    }
}
