//! What `dump` lists: exactly the kinds the hub reads, found as the hub finds them (its
//! discovery, `cluster::cache::discovery`, with the Machine API versions it chose), so that
//! the two cannot drift apart. The storage kinds (claims, volumes, classes, CSINodes) come
//! with the hub's discovery too; `storage` looks them up again only for what it left out
//! (a discovery of their group refused), so that a dump never silently lacks them.

use std::time::Duration;

use k8s_openapi::api::{
    apps::v1 as appsv1, batch::v1 as batchv1, core::v1 as corev1, policy::v1 as policyv1,
    storage::v1 as storagev1,
};
use kube::Client;
use kube::api::ApiResource;

use crate::cluster::cache::Kind;
use crate::cluster::cache::discovery::Served;
use crate::cluster::error::{CallError, Category, call};
use crate::model::controller::ControllerKind;
use crate::model::snapshot::PRIORITY_EXPANDER_CONFIGMAP;
use crate::model::{MachineApiGroup, MachineKind, ScalableKind};

/// One kind to list.
#[derive(Clone, Debug)]
pub(super) struct Source {
    /// How progress and warnings name it: `pods`, `machinesets.cluster.x-k8s.io`.
    pub what: String,
    pub resource: ApiResource,
    /// A field selector, for the kinds the hub reads only in part.
    pub fields: Option<String>,
    /// For node groups: their Machine API and kind, to find the infrastructure templates
    /// they point at.
    pub scalable: Option<(MachineApiGroup, ScalableKind)>,
}

/// The hub watches no finished pod (`cache::watch`): they hold no resources, and a dump of
/// them would only be longer.
const LIVE_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// The storage kinds: (group, version, plural, kind).
const STORAGE: [(&str, &str, &str, &str); 4] = [
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    ("", "v1", "persistentvolumes", "PersistentVolume"),
    ("storage.k8s.io", "v1", "storageclasses", "StorageClass"),
    ("storage.k8s.io", "v1", "csinodes", "CSINode"),
];

/// The sources of the kinds the hub found served, in its order.
pub(super) fn of_served(served: &Served) -> Vec<Source> {
    served
        .kinds
        .iter()
        .filter_map(|kind| source(*kind, served))
        .collect()
}

/// How to list `kind`. Every kind is named, none left to a wildcard: a kind the hub comes to
/// read is a compile error here until the dump lists it too.
fn source(kind: Kind, served: &Served) -> Option<Source> {
    let typed = |resource: ApiResource| Source {
        what: kind.describe(),
        resource,
        fields: None,
        scalable: None,
    };
    let dynamic = || served.dynamic.get(&kind).cloned().map(typed);
    Some(match kind {
        Kind::Node => typed(erase::<corev1::Node>()),
        Kind::Pod => Source {
            fields: Some(LIVE_PODS.into()),
            ..typed(erase::<corev1::Pod>())
        },
        Kind::Namespace => typed(erase::<corev1::Namespace>()),
        Kind::PodDisruptionBudget => typed(erase::<policyv1::PodDisruptionBudget>()),
        Kind::DaemonSet => typed(erase::<appsv1::DaemonSet>()),
        Kind::Controller(c) => typed(controller(c)),
        Kind::PriorityConfigMap => Source {
            what: format!("configmaps named {PRIORITY_EXPANDER_CONFIGMAP}"),
            fields: Some(format!("metadata.name={PRIORITY_EXPANDER_CONFIGMAP}")),
            ..typed(erase::<corev1::ConfigMap>())
        },
        Kind::Scalable(api, k) => Source {
            scalable: Some((api, k)),
            ..dynamic()?
        },
        Kind::Machine(_)
        | Kind::ClusterAutoscaler
        | Kind::MachineAutoscaler
        | Kind::ProvisioningRequest => dynamic()?,
        // At the version the hub reads (v1, else v1beta2 or v1beta1), as served: the dump
        // parser converts them as the hub does.
        Kind::ResourceClaim
        | Kind::ResourceClaimTemplate
        | Kind::ResourceSlice
        | Kind::DeviceClass => dynamic()?,
        // Watched (and so dumped) only where ProvisioningRequests are served.
        Kind::PodTemplate => typed(erase::<corev1::PodTemplate>()),
        Kind::PersistentVolumeClaim => typed(erase::<corev1::PersistentVolumeClaim>()),
        Kind::PersistentVolume => typed(erase::<corev1::PersistentVolume>()),
        Kind::StorageClass => typed(erase::<storagev1::StorageClass>()),
        Kind::CsiNode => typed(erase::<storagev1::CSINode>()),
    })
}

fn controller(kind: ControllerKind) -> ApiResource {
    match kind {
        ControllerKind::ReplicationController => erase::<corev1::ReplicationController>(),
        ControllerKind::DaemonSet => erase::<appsv1::DaemonSet>(),
        ControllerKind::Job => erase::<batchv1::Job>(),
        ControllerKind::ReplicaSet => erase::<appsv1::ReplicaSet>(),
        ControllerKind::StatefulSet => erase::<appsv1::StatefulSet>(),
    }
}

fn erase<K: kube::Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

/// The kinds the hub may read that this cluster does not serve, as notes: none of them is
/// in the dump, and none is needed.
pub(super) fn not_served(served: &Served) -> Vec<String> {
    let machine_api = MachineApiGroup::ALL
        .into_iter()
        .flat_map(|g| MachineKind::served_by(g).map(move |k| Kind::machine_api(g, k)));
    let controllers = ControllerKind::ALL.into_iter().map(Kind::of_controller);
    let fixed = [
        Kind::PodDisruptionBudget,
        Kind::ClusterAutoscaler,
        Kind::MachineAutoscaler,
        Kind::ProvisioningRequest,
    ];
    controllers
        .chain(fixed)
        .chain(Kind::DRA)
        .chain(machine_api)
        .filter(|k| !served.kinds.contains(k))
        .map(Kind::describe)
        .collect()
}

/// The storage kinds the cluster serves (those the hub lists already are left to it), and
/// the names of those it does not.
pub(super) async fn storage(
    client: &Client,
    known: &[Source],
    deadline: Duration,
) -> Result<(Vec<Source>, Vec<String>), CallError> {
    let mut sources = Vec::new();
    let mut absent = Vec::new();
    for (group, version, plural, kind) in STORAGE {
        let what = match group {
            "" => plural.to_string(),
            g => format!("{plural}.{g}"),
        };
        let listed = known
            .iter()
            .any(|s| s.resource.group == group && s.resource.plural == plural);
        if listed {
            continue;
        }
        if serves(client, group, version, plural, deadline).await? {
            let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
            let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
            sources.push(Source {
                what,
                resource,
                fields: None,
                scalable: None,
            });
        } else {
            absent.push(what);
        }
    }
    Ok((sources, absent))
}

/// Whether `group/version` has `plural`. A group version the cluster does not have is a
/// no; discovery refused (403) is a yes: the list then says whether it may be read.
async fn serves(
    client: &Client,
    group: &str,
    version: &str,
    plural: &str,
    deadline: Duration,
) -> Result<bool, CallError> {
    let gv = match group {
        "" => version.to_string(),
        g => format!("{g}/{version}"),
    };
    let op = || format!("discovery: list resources of {gv}");
    let found = match group {
        "" => call(op, deadline, client.list_core_api_resources(version)).await,
        _ => call(op, deadline, client.list_api_group_resources(&gv)).await,
    };
    match found {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == plural)),
        Err(e) if e.category() == Category::NotFound => Ok(false),
        Err(e) if e.category() == Category::Forbidden => Ok(true),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MachineApis;

    fn served(kinds: &[Kind]) -> Served {
        Served {
            kinds: kinds.to_vec(),
            machine_apis: MachineApis::default(),
            ..Served::default()
        }
    }

    #[test]
    fn pods_and_the_priority_configmap_are_read_as_the_hub_reads_them() {
        let s = served(&[Kind::Node, Kind::Pod, Kind::PriorityConfigMap]);
        let sources = of_served(&s);
        let names: Vec<&str> = sources.iter().map(|s| s.what.as_str()).collect();
        assert_eq!(
            names,
            [
                "nodes",
                "pods",
                "configmaps named cluster-autoscaler-priority-expander"
            ]
        );
        assert_eq!(sources[1].fields.as_deref(), Some(LIVE_PODS));
        assert_eq!(sources[1].resource.api_version, "v1");
        assert_eq!(sources[2].resource.plural, "configmaps");
    }

    #[test]
    fn controllers_are_listed_at_their_groups_versions() {
        let kinds: Vec<Kind> = ControllerKind::ALL
            .into_iter()
            .map(Kind::of_controller)
            .collect();
        let sources = of_served(&served(&kinds));
        for (c, s) in ControllerKind::ALL.into_iter().zip(&sources) {
            assert_eq!(s.resource.api_version, c.api_version(), "{c}");
            assert_eq!(s.resource.plural, c.plural(), "{c}");
            assert_eq!(s.resource.kind, c.name(), "{c}");
        }
    }

    /// A Machine API kind is reached the way discovery found it (at the version it chose);
    /// one it did not find is not listed.
    #[test]
    fn machine_api_kinds_come_from_discovery() {
        let md = Kind::Scalable(MachineApiGroup::ClusterApi, ScalableKind::MachineDeployment);
        let mut s = served(&[md, Kind::Machine(MachineApiGroup::OpenShift)]);
        let gvk =
            kube::api::GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "MachineDeployment");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "machinedeployments");
        s.dynamic.insert(md, ar);
        let sources = of_served(&s);
        assert_eq!(sources.len(), 1);
        assert_eq!(sources[0].resource.api_version, "cluster.x-k8s.io/v1beta2");
        assert_eq!(sources[0].what, "machinedeployments.cluster.x-k8s.io");
        assert!(sources[0].scalable.is_some());
    }

    /// ProvisioningRequests at the version discovery chose, PodTemplates as core v1.
    #[test]
    fn provisioning_requests_and_their_templates_are_listed_when_served() {
        let mut s = served(&[Kind::ProvisioningRequest, Kind::PodTemplate]);
        let gvk = kube::api::GroupVersionKind::gvk(
            "autoscaling.x-k8s.io",
            "v1beta1",
            "ProvisioningRequest",
        );
        let ar = ApiResource::from_gvk_with_plural(&gvk, "provisioningrequests");
        s.dynamic.insert(Kind::ProvisioningRequest, ar);
        let sources = of_served(&s);
        let names: Vec<&str> = sources.iter().map(|s| s.what.as_str()).collect();
        assert_eq!(
            names,
            ["provisioningrequests.autoscaling.x-k8s.io", "podtemplates"]
        );
        assert_eq!(
            sources[0].resource.api_version,
            "autoscaling.x-k8s.io/v1beta1"
        );
        assert_eq!(sources[1].resource.plural, "podtemplates");
        let missing = not_served(&served(&[]));
        assert!(missing.contains(&"provisioningrequests.autoscaling.x-k8s.io".to_string()));
    }

    /// The DRA kinds at the version discovery chose (a v1beta1 cluster's are dumped as
    /// v1beta1, which the dump parser converts); a cluster without them says so.
    #[test]
    fn dra_kinds_are_listed_at_the_version_discovery_chose() {
        let mut s = served(&Kind::DRA);
        for (plural, kind, ours) in crate::cluster::cache::dra::RESOURCES {
            let gvk = kube::api::GroupVersionKind::gvk("resource.k8s.io", "v1beta1", kind);
            s.dynamic
                .insert(ours, ApiResource::from_gvk_with_plural(&gvk, plural));
        }
        let sources = of_served(&s);
        let names: Vec<&str> = sources.iter().map(|s| s.what.as_str()).collect();
        assert_eq!(
            names,
            [
                "resourceclaims.resource.k8s.io",
                "resourceclaimtemplates.resource.k8s.io",
                "resourceslices.resource.k8s.io",
                "deviceclasses.resource.k8s.io"
            ]
        );
        assert!(
            sources
                .iter()
                .all(|s| s.resource.api_version == "resource.k8s.io/v1beta1")
        );
        let missing = not_served(&served(&[]));
        assert!(missing.contains(&"resourceslices.resource.k8s.io".to_string()));
        assert!(!not_served(&s).contains(&"deviceclasses.resource.k8s.io".to_string()));
    }

    #[test]
    fn what_is_not_served_is_named() {
        let s = served(&[
            Kind::PodDisruptionBudget,
            Kind::Controller(ControllerKind::ReplicaSet),
        ]);
        let missing = not_served(&s);
        assert!(missing.contains(&"daemonsets".to_string()), "{missing:?}");
        assert!(missing.contains(&"machines.machine.openshift.io".to_string()));
        assert!(!missing.contains(&"poddisruptionbudgets".to_string()));
        assert!(!missing.iter().any(|m| m.starts_with("replicasets")));
    }
}
