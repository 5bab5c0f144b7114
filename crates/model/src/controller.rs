//! The controllers a pod's owner is looked up in before its node may go (upstream's
//! replicacount drain rule): ReplicationControllers, DaemonSets, Jobs, ReplicaSets and
//! StatefulSets. Each is kept as its key, its uid and, where the kind has one, its
//! `spec.replicas`: nothing else of them is read.
//!
//! Whether a kind was read in full matters as much as what was read: a pod whose controller
//! is missing from a complete list has lost it, while a kind that was never listed, or could
//! not be, says nothing about the pod ([`Listing`]).

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::meta::{FieldError, ObjectKey, Projector};

/// The controller kinds upstream can look up, in the order its rule tries them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ControllerKind {
    ReplicationController,
    DaemonSet,
    Job,
    ReplicaSet,
    StatefulSet,
}

impl ControllerKind {
    pub const ALL: [ControllerKind; 5] = [
        ControllerKind::ReplicationController,
        ControllerKind::DaemonSet,
        ControllerKind::Job,
        ControllerKind::ReplicaSet,
        ControllerKind::StatefulSet,
    ];

    /// Its `kind`, as objects and owner references write it.
    pub fn name(self) -> &'static str {
        match self {
            ControllerKind::ReplicationController => "ReplicationController",
            ControllerKind::DaemonSet => "DaemonSet",
            ControllerKind::Job => "Job",
            ControllerKind::ReplicaSet => "ReplicaSet",
            ControllerKind::StatefulSet => "StatefulSet",
        }
    }

    /// Its API group (`""` for the core group).
    pub fn group(self) -> &'static str {
        match self {
            ControllerKind::ReplicationController => "",
            ControllerKind::Job => "batch",
            _ => "apps",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            ControllerKind::ReplicationController => "replicationcontrollers",
            ControllerKind::DaemonSet => "daemonsets",
            ControllerKind::Job => "jobs",
            ControllerKind::ReplicaSet => "replicasets",
            ControllerKind::StatefulSet => "statefulsets",
        }
    }

    /// The version the hub reads it at, with its group: `v1`, `apps/v1`, `batch/v1`.
    pub fn api_version(self) -> &'static str {
        match self.group() {
            "" => "v1",
            "batch" => "batch/v1",
            _ => "apps/v1",
        }
    }

    /// Its replica count is held against `min_replica_count` (upstream checks these two).
    pub fn has_min_replicas(self) -> bool {
        matches!(
            self,
            ControllerKind::ReplicationController | ControllerKind::ReplicaSet
        )
    }

    /// The kind of an object of `group` named `kind`, if it is one of these.
    pub fn of_object(group: &str, kind: &str) -> Option<ControllerKind> {
        Self::ALL
            .into_iter()
            .find(|k| k.group() == group && k.name() == kind)
    }

    /// Its position in [`Self::ALL`], for tables with one entry per kind.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ControllerKind {
    /// As RBAC and errors name the resource: `replicasets.apps`, `replicationcontrollers`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.group() {
            "" => f.write_str(self.plural()),
            group => write!(f, "{}.{group}", self.plural()),
        }
    }
}

/// One controller: enough to tell that it exists and how many replicas it asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Controller {
    pub key: ObjectKey,
    /// Empty when the object did not say (a hand-written dump): it is then found by name.
    pub uid: Arc<str>,
    /// `spec.replicas`, for the kinds that have it; `None` when absent or unreadable.
    pub replicas: Option<i32>,
}

impl Controller {
    /// The projection of one object's fields. A controller whose replica count cannot be
    /// read exists all the same: it is kept, and what was wrong is returned beside it.
    pub fn project(
        namespace: Option<&str>,
        name: &str,
        uid: Option<&str>,
        replicas: Option<&Value>,
        p: &mut Projector,
    ) -> (Controller, Option<FieldError>) {
        let (replicas, problem) = match replicas {
            None | Some(Value::Null) => (None, None),
            Some(v) => match v.as_i64().and_then(|r| i32::try_from(r).ok()) {
                Some(r) => (Some(r), None),
                None => (
                    None,
                    Some(FieldError::new(
                        "spec.replicas",
                        format!("expected a whole number of replicas, found {v}"),
                    )),
                ),
            },
        };
        let controller = Controller {
            key: ObjectKey {
                namespace: p.str(namespace.unwrap_or_default()),
                name: p.str(name),
            },
            uid: p.str(uid.unwrap_or_default()),
            replicas,
        };
        (controller, problem)
    }

    /// From an object as a dump holds it. Without a name it cannot be found by anyone:
    /// `Err`, and the caller must not trust the list of its kind to be complete.
    pub fn from_json(
        value: &Value,
        p: &mut Projector,
    ) -> Result<(Controller, Option<FieldError>), FieldError> {
        let meta = &value["metadata"];
        let text = |field: &str| -> Result<Option<&str>, FieldError> {
            match &meta[field] {
                Value::Null => Ok(None),
                Value::String(s) => Ok(Some(s.as_str())),
                other => Err(FieldError::new(
                    format!("metadata.{field}"),
                    format!("expected a string, found {other}"),
                )),
            }
        };
        let name = text("name")?
            .filter(|n| !n.is_empty())
            .ok_or_else(|| FieldError::new("metadata.name", "missing"))?;
        let namespace = text("namespace")?;
        // A uid that cannot be read leaves the controller to be found by its name.
        let (uid, uid_problem) = match text("uid") {
            Ok(uid) => (uid, None),
            Err(e) => (None, Some(e)),
        };
        let (controller, problem) =
            Self::project(namespace, name, uid, value["spec"].get("replicas"), p);
        Ok((controller, uid_problem.or(problem)))
    }
}

/// How completely a kind of controller was read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Listing {
    /// Not looked at: a dump without any of it, or a cluster that does not serve it. Pods
    /// of this kind are judged by the other rules, as if it were not looked up at all.
    #[default]
    Unlisted,
    /// Listed in full: a pod's controller of this kind that is not here is gone.
    Complete,
    /// The cluster serves it but it could not be read (the hub may not list it): whether a
    /// pod's controller exists is unknown, so the pod keeps its node. Says why.
    Unreadable(Arc<str>),
}

/// The controllers of a cluster besides DaemonSets (kept whole in the snapshot, for
/// templates), and how completely each kind, DaemonSets included, was read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Controllers {
    pub replication_controllers: Vec<Controller>,
    pub jobs: Vec<Controller>,
    pub replica_sets: Vec<Controller>,
    pub stateful_sets: Vec<Controller>,
    listings: [Listing; ControllerKind::ALL.len()],
}

impl Controllers {
    /// The controllers of `kind`; `None` for DaemonSets, which the snapshot keeps apart.
    pub fn of(&self, kind: ControllerKind) -> Option<&[Controller]> {
        match kind {
            ControllerKind::ReplicationController => Some(&self.replication_controllers),
            ControllerKind::DaemonSet => None,
            ControllerKind::Job => Some(&self.jobs),
            ControllerKind::ReplicaSet => Some(&self.replica_sets),
            ControllerKind::StatefulSet => Some(&self.stateful_sets),
        }
    }

    pub fn of_mut(&mut self, kind: ControllerKind) -> Option<&mut Vec<Controller>> {
        match kind {
            ControllerKind::ReplicationController => Some(&mut self.replication_controllers),
            ControllerKind::DaemonSet => None,
            ControllerKind::Job => Some(&mut self.jobs),
            ControllerKind::ReplicaSet => Some(&mut self.replica_sets),
            ControllerKind::StatefulSet => Some(&mut self.stateful_sets),
        }
    }

    pub fn listing(&self, kind: ControllerKind) -> &Listing {
        &self.listings[kind.index()]
    }

    pub fn set_listing(&mut self, kind: ControllerKind, listing: Listing) {
        self.listings[kind.index()] = listing;
    }

    /// How many controllers are kept, for sizes in status.
    pub fn len(&self) -> usize {
        self.replication_controllers.len()
            + self.jobs.len()
            + self.replica_sets.len()
            + self.stateful_sets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_are_named_as_the_api_names_them() {
        let named: Vec<String> = ControllerKind::ALL.iter().map(|k| k.to_string()).collect();
        assert_eq!(
            named,
            [
                "replicationcontrollers",
                "daemonsets.apps",
                "jobs.batch",
                "replicasets.apps",
                "statefulsets.apps"
            ]
        );
        assert_eq!(
            ControllerKind::of_object("apps", "ReplicaSet"),
            Some(ControllerKind::ReplicaSet)
        );
        assert_eq!(ControllerKind::of_object("kruise.io", "StatefulSet"), None);
        assert_eq!(ControllerKind::Job.api_version(), "batch/v1");
        assert_eq!(ControllerKind::ReplicationController.api_version(), "v1");
    }

    #[test]
    fn a_controller_is_its_key_uid_and_replicas() {
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-5d8f", "namespace": "shop", "uid": "u-1", "labels": {"a": "b"}},
            "spec": {"replicas": 3, "selector": {}, "template": {}}});
        let (c, problem) = Controller::from_json(&rs, &mut Projector::default()).unwrap();
        assert_eq!(problem, None);
        assert_eq!(c.key, ObjectKey::new("shop", "web-5d8f"));
        assert_eq!((&*c.uid, c.replicas), ("u-1", Some(3)));
        let job =
            json!({"metadata": {"name": "backup", "namespace": "ops"}, "spec": {"parallelism": 2}});
        let (c, problem) = Controller::from_json(&job, &mut Projector::default()).unwrap();
        assert_eq!((problem, &*c.uid, c.replicas), (None, "", None));
    }

    #[test]
    fn a_bad_replica_count_or_uid_is_a_problem_beside_a_controller_kept() {
        for (replicas, uid) in [(json!("three"), json!("u")), (json!(3), json!(7))] {
            let rs = json!({"metadata": {"name": "web", "namespace": "shop", "uid": uid},
                "spec": {"replicas": replicas}});
            let (c, problem) = Controller::from_json(&rs, &mut Projector::default()).unwrap();
            assert_eq!(c.key, ObjectKey::new("shop", "web"));
            let problem = problem.unwrap().to_string();
            assert!(
                problem.starts_with("spec.replicas") || problem.starts_with("metadata.uid"),
                "{problem}"
            );
        }
        let huge = json!({"metadata": {"name": "web"}, "spec": {"replicas": 1u64 << 40}});
        let (c, problem) = Controller::from_json(&huge, &mut Projector::default()).unwrap();
        assert_eq!((c.replicas, problem.is_some()), (None, true));
    }

    #[test]
    fn a_controller_without_a_name_is_an_error() {
        for meta in [json!({}), json!({"name": ""}), json!({"name": 5})] {
            let err = Controller::from_json(&json!({"metadata": meta}), &mut Projector::default())
                .unwrap_err();
            assert_eq!(err.path, "metadata.name");
        }
    }

    #[test]
    fn listings_start_unlisted_and_daemonsets_are_kept_apart() {
        let mut c = Controllers::default();
        for kind in ControllerKind::ALL {
            assert_eq!(c.listing(kind), &Listing::Unlisted);
        }
        c.set_listing(ControllerKind::Job, Listing::Complete);
        assert_eq!(c.listing(ControllerKind::Job), &Listing::Complete);
        assert!(c.of(ControllerKind::DaemonSet).is_none());
        assert!(c.of_mut(ControllerKind::ReplicaSet).is_some());
        assert!(c.is_empty());
    }
}
