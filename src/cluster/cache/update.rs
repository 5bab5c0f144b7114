//! What the watchers deliver to the cache: one change to one kind of object.

use k8s_openapi::api::{
    apps::v1 as appsv1, core::v1 as corev1, policy::v1 as policyv1, storage::v1 as storagev1,
};
use kube::api::DynamicObject;

use super::lean_controller::ControllerObject;
use super::listwatch::Event;
use crate::cluster::error::{CallError, Category};
use crate::model::controller::ControllerKind;
use crate::model::machine_kind::MACHINE;
use crate::model::{MachineApiGroup, MachineKind, ScalableKind, Warning, WarningCode};

/// The kinds of object the cache watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Node,
    Pod,
    Namespace,
    PodDisruptionBudget,
    DaemonSet,
    /// ReplicationControllers, Jobs, ReplicaSets and StatefulSets, read only as keys for the
    /// drain rules (DaemonSets are [`Kind::DaemonSet`], read whole for templates).
    Controller(ControllerKind),
    /// The priority expander's ConfigMap (watched by name only).
    PriorityConfigMap,
    Scalable(MachineApiGroup, ScalableKind),
    Machine(MachineApiGroup),
    ClusterAutoscaler,
    MachineAutoscaler,
    /// The storage objects the scheduler's volume filters read (`model::storage`): without
    /// claims, volumes and classes, volumes are not simulated; without CSINodes, attach
    /// limits and the CSI drivers' zone labels of new nodes are off.
    PersistentVolumeClaim,
    PersistentVolume,
    StorageClass,
    CsiNode,
    /// ProvisioningRequests (`autoscaling.x-k8s.io`, v1 or v1beta1) and the PodTemplates
    /// their pod sets name, watched only where the request kind is served
    /// (`snapshot.provisioning`).
    ProvisioningRequest,
    PodTemplate,
    /// Dynamic resource allocation (`resource.k8s.io`, v1, else v1beta2 or v1beta1): what
    /// the allocator reads (`snapshot.dra`), watched only where the group is served.
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    DeviceClass,
}

impl Kind {
    /// The storage kinds without which volumes are not simulated at all.
    pub const VOLUMES: [Kind; 3] = [
        Kind::PersistentVolumeClaim,
        Kind::PersistentVolume,
        Kind::StorageClass,
    ];

    /// Every storage kind.
    pub const STORAGE: [Kind; 4] = [
        Kind::PersistentVolumeClaim,
        Kind::PersistentVolume,
        Kind::StorageClass,
        Kind::CsiNode,
    ];

    /// The DRA kinds: without all four listed, pods with claims are not simulated.
    pub const DRA: [Kind; 4] = [
        Kind::ResourceClaim,
        Kind::ResourceClaimTemplate,
        Kind::ResourceSlice,
        Kind::DeviceClass,
    ];

    pub fn is_dra(self) -> bool {
        Kind::DRA.contains(&self)
    }

    pub fn is_storage(self) -> bool {
        Kind::STORAGE.contains(&self)
    }

    /// ProvisioningRequests and the PodTemplates they name.
    pub fn is_provisioning(self) -> bool {
        matches!(self, Kind::ProvisioningRequest | Kind::PodTemplate)
    }

    /// The kind the cache stores objects of a Machine API kind of `group` as. Per kind: the
    /// cache keeps Machines apart from what scales, so a new kind that does not scale needs
    /// a store (and a variant) of its own.
    pub fn machine_api(group: MachineApiGroup, kind: &MachineKind) -> Kind {
        match kind.scalable {
            Some(scalable) => Kind::Scalable(group, scalable),
            None => Kind::Machine(group),
        }
    }

    /// The kind a controller's objects are stored as.
    pub fn of_controller(kind: ControllerKind) -> Kind {
        match kind {
            ControllerKind::DaemonSet => Kind::DaemonSet,
            other => Kind::Controller(other),
        }
    }

    /// How the kind is named in status and errors.
    pub fn describe(self) -> String {
        match self {
            Kind::Node => "nodes".into(),
            Kind::Pod => "pods".into(),
            Kind::Namespace => "namespaces".into(),
            Kind::PodDisruptionBudget => "poddisruptionbudgets".into(),
            Kind::DaemonSet => "daemonsets".into(),
            Kind::Controller(kind) => kind.to_string(),
            Kind::PriorityConfigMap => "the priority expander ConfigMap".into(),
            Kind::Scalable(api, kind) => format!("{}.{api}", kind.plural()),
            Kind::Machine(api) => format!("{}.{api}", MACHINE.plural),
            Kind::ClusterAutoscaler => "clusterautoscalers".into(),
            Kind::MachineAutoscaler => "machineautoscalers".into(),
            Kind::PersistentVolumeClaim => "persistentvolumeclaims".into(),
            Kind::PersistentVolume => "persistentvolumes".into(),
            Kind::StorageClass => "storageclasses.storage.k8s.io".into(),
            Kind::CsiNode => "csinodes.storage.k8s.io".into(),
            Kind::ProvisioningRequest => "provisioningrequests.autoscaling.x-k8s.io".into(),
            Kind::PodTemplate => "podtemplates".into(),
            Kind::ResourceClaim => "resourceclaims.resource.k8s.io".into(),
            Kind::ResourceClaimTemplate => "resourceclaimtemplates.resource.k8s.io".into(),
            Kind::ResourceSlice => "resourceslices.resource.k8s.io".into(),
            Kind::DeviceClass => "deviceclasses.resource.k8s.io".into(),
        }
    }

    /// What the cluster is autoscaled without when the hub may not read the kind, as a
    /// warning says it.
    pub fn unread_means(self) -> &'static str {
        match self {
            // Without a controller kind, a pod's controller of it cannot be found.
            Kind::DaemonSet | Kind::Controller(_) => {
                "nodes running pods of them are not scaled down while \
                 skip_nodes_with_custom_controller_pods is on"
            }
            Kind::PersistentVolumeClaim | Kind::PersistentVolume | Kind::StorageClass => {
                "volumes are not simulated: pods with claims scale up as if their volumes \
                 could be used from any node"
            }
            Kind::CsiNode => {
                "CSI attach limits and the CSI drivers' zone labels on scale-from-zero \
                 templates are off"
            }
            Kind::ProvisioningRequest | Kind::PodTemplate => {
                "ProvisioningRequests are not read: none is decided or written"
            }
            Kind::ResourceClaim
            | Kind::ResourceClaimTemplate
            | Kind::ResourceSlice
            | Kind::DeviceClass => {
                "pods with resource claims are not simulated: none is scaled up for"
            }
            _ => "autoscaling without them",
        }
    }

    /// The warning that the hub may not list the kind (`message`: the API server's refusal).
    pub fn not_allowed(self, message: &str) -> Warning {
        Warning::general(
            WarningCode::NotAllowed,
            format!(
                "not allowed to list {}: {} ({message})",
                self.describe(),
                self.unread_means()
            ),
        )
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
    Controller(Box<ControllerObject>),
    ConfigMap(Box<corev1::ConfigMap>),
    PersistentVolumeClaim(Box<corev1::PersistentVolumeClaim>),
    PersistentVolume(Box<corev1::PersistentVolume>),
    StorageClass(Box<storagev1::StorageClass>),
    CsiNode(Box<storagev1::CSINode>),
    PodTemplate(Box<corev1::PodTemplate>),
    /// Machine API and OpenShift autoscaling objects, read without generated types.
    Dynamic(Box<DynamicObject>),
}

#[derive(Debug)]
pub enum Change {
    /// The watch (re)started a full list.
    Init,
    /// The list holds at most this many objects.
    Expect(usize),
    /// An object as listed during a (re)list.
    InitApply(Object),
    /// The (re)list is complete: anything not in it is gone.
    InitDone,
    Apply(Object),
    Delete(Object),
    /// A watch that had failed works again (resumed where it stopped).
    Resumed,
    /// The watch fell too far behind (410 Gone, with the server's message): a list follows.
    Expired(String),
    /// The watch failed; it resumes (or lists again) after a backoff.
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

    /// A list or watch call that failed (a 403 is for good).
    pub fn of_call(e: &CallError) -> Self {
        WatchError {
            message: e.to_string(),
            forbidden: e.category() == Category::Forbidden,
        }
    }

    /// An error the API server sent inside a watch stream.
    pub fn from_status(s: &kube::core::Status) -> Self {
        WatchError {
            message: format!("watch: {} ({})", s.message, s.code),
            forbidden: s.code == 403,
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
    /// Wraps one step of a kind's list and watch.
    pub fn from_event<K>(kind: Kind, event: Event<K>, object: fn(K) -> Object) -> Update {
        let change = match event {
            Event::Init => Change::Init,
            Event::Expect(n) => Change::Expect(n),
            Event::InitApply(o) => Change::InitApply(object(o)),
            Event::InitDone => Change::InitDone,
            Event::Apply(o) => Change::Apply(object(o)),
            Event::Delete(o) => Change::Delete(object(o)),
            Event::Resumed => Change::Resumed,
            Event::Expired(why) => Change::Expired(why),
            Event::Error(e) => Change::Error(e),
        };
        Update { kind, change }
    }
}
