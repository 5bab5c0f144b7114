//! What the watchers deliver to the cache: one change to one kind of object.

use k8s_openapi::api::{apps::v1 as appsv1, core::v1 as corev1, policy::v1 as policyv1};
use kube::api::DynamicObject;
use kube::runtime::watcher;

use crate::model::{MachineApiGroup, ScalableKind};

/// The kinds of object the cache watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Node,
    Pod,
    Namespace,
    PodDisruptionBudget,
    DaemonSet,
    /// The priority expander's ConfigMap (watched by name only).
    PriorityConfigMap,
    Scalable(MachineApiGroup, ScalableKind),
    Machine(MachineApiGroup),
    ClusterAutoscaler,
    MachineAutoscaler,
}

impl Kind {
    /// How the kind is named in status and errors.
    pub fn describe(self) -> String {
        match self {
            Kind::Node => "nodes".into(),
            Kind::Pod => "pods".into(),
            Kind::Namespace => "namespaces".into(),
            Kind::PodDisruptionBudget => "poddisruptionbudgets".into(),
            Kind::DaemonSet => "daemonsets".into(),
            Kind::PriorityConfigMap => "the priority expander ConfigMap".into(),
            Kind::Scalable(api, kind) => format!("{}s.{}", kind.as_str().to_lowercase(), api),
            Kind::Machine(api) => format!("machines.{api}"),
            Kind::ClusterAutoscaler => "clusterautoscalers".into(),
            Kind::MachineAutoscaler => "machineautoscalers".into(),
        }
    }
}

/// An object as the watch delivered it, before projection.
#[derive(Debug)]
pub enum Object {
    Node(Box<corev1::Node>),
    Pod(Box<corev1::Pod>),
    Namespace(Box<corev1::Namespace>),
    PodDisruptionBudget(Box<policyv1::PodDisruptionBudget>),
    DaemonSet(Box<appsv1::DaemonSet>),
    ConfigMap(Box<corev1::ConfigMap>),
    /// Machine API and OpenShift autoscaling objects, read without generated types.
    Dynamic(Box<DynamicObject>),
}

#[derive(Debug)]
pub enum Change {
    /// The watch (re)started a full list.
    Init,
    /// An object as listed during a (re)list.
    InitApply(Object),
    /// The (re)list is complete: anything not in it is gone.
    InitDone,
    Apply(Object),
    Delete(Object),
    /// The watch failed; it starts over after a backoff.
    Error(WatchError),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchError {
    pub message: String,
    /// The API server refused to list the kind (403): no retry will change that.
    pub forbidden: bool,
}

impl WatchError {
    pub fn new(message: impl Into<String>) -> Self {
        WatchError {
            message: message.into(),
            forbidden: false,
        }
    }

    fn of(e: &watcher::Error) -> Self {
        let forbidden = match e {
            watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.code == 403,
            watcher::Error::WatchError(s) => s.code == 403,
            _ => false,
        };
        WatchError {
            message: e.to_string(),
            forbidden,
        }
    }
}

impl std::fmt::Display for WatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

#[derive(Debug)]
pub struct Update {
    pub kind: Kind,
    pub change: Change,
}

impl Update {
    /// Wraps one item of a kube watcher stream.
    pub fn from_watch<K>(
        kind: Kind,
        item: Result<watcher::Event<K>, watcher::Error>,
        object: fn(K) -> Object,
    ) -> Update {
        let change = match item {
            Ok(watcher::Event::Init) => Change::Init,
            Ok(watcher::Event::InitApply(o)) => Change::InitApply(object(o)),
            Ok(watcher::Event::InitDone) => Change::InitDone,
            Ok(watcher::Event::Apply(o)) => Change::Apply(object(o)),
            Ok(watcher::Event::Delete(o)) => Change::Delete(object(o)),
            Err(e) => Change::Error(WatchError::of(&e)),
        };
        Update { kind, change }
    }
}
