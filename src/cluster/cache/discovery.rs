//! Which of the kinds the cache reads a cluster serves, and at which version.
//!
//! Core kinds are always there, but for ReplicationControllers, PersistentVolumeClaims and
//! PersistentVolumes, looked up like the rest. DaemonSets, the other controllers the drain
//! rules look pods' owners up in (ReplicaSets, StatefulSets, Jobs), PodDisruptionBudgets,
//! StorageClasses and CSINodes, and OpenShift's autoscaling resources are looked up at the
//! versions the hub reads; each Machine API group at the
//! version chosen from its discovery entry ([`MachineApiGroup::choose_version`]: the one the
//! cluster prefers when the hub understands it, so Cluster API ≥ 1.11 is read as v1beta2,
//! without a conversion webhook call per object). A cluster without Cluster API, or without
//! OpenShift's operator, is still autoscaled with what it has; a Machine API served only in
//! versions the hub cannot read is a warning, never a silent lack of node groups, and so is
//! a cluster without the storage kinds (volumes, or attach limits, are then not simulated).

use crate::model::{Warning, WarningCode};
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList;
use kube::Client;
use kube::api::{ApiResource, GroupVersionKind};

use super::update::Kind;
use crate::cluster::error::{CallError, Category, call};
use crate::model::controller::ControllerKind;
use crate::model::machine_api::VersionChoice;
use crate::model::machine_kind::join_names;
use crate::model::{MachineApi, MachineApiGroup, MachineApis, MachineKind};

/// The kinds a cluster serves, with how to reach the ones read without generated types.
#[derive(Clone, Debug, Default)]
pub struct Served {
    pub kinds: Vec<Kind>,
    pub dynamic: BTreeMap<Kind, ApiResource>,
    /// The version of each Machine API group that watches read and the executor writes.
    pub machine_apis: MachineApis,
    /// What a person should know about what is not watched (a Machine API served only in
    /// versions the hub does not understand).
    pub warnings: Vec<Warning>,
}

/// One resource the cache wants: (plural, kind, our kind).
type Resource = (&'static str, &'static str, Kind);

/// The resources of one group version the cache wants.
type Wanted = Vec<Resource>;

/// Group versions read at a fixed version.
const FIXED: &[(&str, &[Resource])] = &[
    (
        "apps/v1",
        &[
            ("daemonsets", "DaemonSet", Kind::DaemonSet),
            (
                "replicasets",
                "ReplicaSet",
                Kind::Controller(ControllerKind::ReplicaSet),
            ),
            (
                "statefulsets",
                "StatefulSet",
                Kind::Controller(ControllerKind::StatefulSet),
            ),
        ],
    ),
    (
        "batch/v1",
        &[("jobs", "Job", Kind::Controller(ControllerKind::Job))],
    ),
    (
        "policy/v1",
        &[(
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            Kind::PodDisruptionBudget,
        )],
    ),
    (
        "storage.k8s.io/v1",
        &[
            ("storageclasses", "StorageClass", Kind::StorageClass),
            ("csinodes", "CSINode", Kind::CsiNode),
        ],
    ),
    (
        "autoscaling.openshift.io/v1",
        &[(
            "clusterautoscalers",
            "ClusterAutoscaler",
            Kind::ClusterAutoscaler,
        )],
    ),
    (
        "autoscaling.openshift.io/v1beta1",
        &[(
            "machineautoscalers",
            "MachineAutoscaler",
            Kind::MachineAutoscaler,
        )],
    ),
];

/// Core kinds a bare or simulated API server may lack, each looked up in the core resource
/// list (every real cluster serves them): (plural, our kind).
const CORE_OPTIONAL: [(&str, Kind); 4] = [
    (
        "replicationcontrollers",
        Kind::Controller(ControllerKind::ReplicationController),
    ),
    ("persistentvolumeclaims", Kind::PersistentVolumeClaim),
    ("persistentvolumes", Kind::PersistentVolume),
    ("podtemplates", Kind::PodTemplate),
];

/// Kinds read through generated types rather than as dynamic objects.
fn read_typed(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::DaemonSet | Kind::PodDisruptionBudget | Kind::Controller(_)
    ) || kind.is_storage()
}

/// The Machine API resources the cache wants of a group, whatever its version: every kind
/// the group serves ([`MachineKind::served_by`]).
fn machine_resources(group: MachineApiGroup) -> Wanted {
    MachineKind::served_by(group)
        .map(|k| (k.plural, k.name, Kind::machine_api(group, k)))
        .collect()
}

/// What the list of API groups decides: the group versions whose resources to look up, the
/// Machine API versions chosen, and the warnings.
#[derive(Debug, Default, PartialEq)]
pub struct Lookup {
    pub group_versions: Vec<(String, Wanted)>,
    pub machine_apis: MachineApis,
    pub warnings: Vec<Warning>,
}

/// Decides from the cluster's API groups what to look up and which Machine API versions to use.
pub fn lookup(groups: &APIGroupList) -> Lookup {
    let served: Vec<&str> = groups
        .groups
        .iter()
        .flat_map(|g| g.versions.iter().map(|v| v.group_version.as_str()))
        .collect();
    let mut out = Lookup::default();
    for (gv, resources) in FIXED {
        if served.contains(gv) {
            out.group_versions
                .push((gv.to_string(), resources.to_vec()));
        }
    }
    if let Some(gv) = provisioning_version(&served) {
        out.group_versions.push((
            gv.to_string(),
            vec![(
                "provisioningrequests",
                "ProvisioningRequest",
                Kind::ProvisioningRequest,
            )],
        ));
    }
    if let Some(gv) = super::dra::version(&served) {
        out.group_versions
            .push((gv, super::dra::RESOURCES.to_vec()));
    }
    for group in MachineApiGroup::ALL {
        let entry = groups.groups.iter().find(|g| g.name == group.domain());
        let versions: Vec<&str> = entry
            .iter()
            .flat_map(|g| g.versions.iter().map(|v| v.version.as_str()))
            .collect();
        let preferred = entry.and_then(|g| g.preferred_version.as_ref());
        match group.choose_version(&versions, preferred.map(|p| p.version.as_str())) {
            VersionChoice::Absent => {}
            VersionChoice::Chosen(version) => {
                let api = MachineApi { group, version };
                out.machine_apis.insert(group, version);
                out.group_versions
                    .push((api.api_version(), machine_resources(group)));
            }
            VersionChoice::Unsupported(found) => out.warnings.push(unsupported(group, &found)),
        }
    }
    out
}

/// The ProvisioningRequest version read: `v1` when served, else `v1beta1` (upstream's
/// client reads v1 only; v1beta1 is read the same, its schema being the same).
fn provisioning_version(served: &[&str]) -> Option<String> {
    use crate::model::provisioning::{GROUP, VERSIONS};
    VERSIONS
        .iter()
        .map(|v| format!("{GROUP}/{v}"))
        .find(|gv| served.contains(&gv.as_str()))
}

fn unsupported(group: MachineApiGroup, found: &[String]) -> Warning {
    let understood: Vec<&str> = group.understood().iter().map(|v| v.as_str()).collect();
    let kinds: Vec<String> = MachineKind::ALL
        .iter()
        .map(|k| format!("{}s", k.name))
        .collect();
    Warning::general(
        WarningCode::UnsupportedVersion,
        format!(
            "the cluster serves {group} only as {}, and fleetscaler reads {} only: its {} are not \
             watched, so none of them is a node group",
            found.join(", "),
            understood.join(" or "),
            join_names(&kinds, "and")
        ),
    )
}

/// Asks the API server which of the wanted kinds it serves, and at which versions.
pub async fn discover(client: &Client, timeout: Duration) -> Result<Served, CallError> {
    let groups = call(
        || "discovery: list API groups".into(),
        timeout,
        client.list_api_groups(),
    )
    .await?;
    let lookup = lookup(&groups);
    let mut served = Served {
        kinds: vec![
            Kind::Node,
            Kind::Pod,
            Kind::Namespace,
            Kind::PriorityConfigMap,
        ],
        dynamic: BTreeMap::new(),
        machine_apis: lookup.machine_apis,
        warnings: lookup.warnings,
    };
    let core = core_kinds(client, timeout).await?;
    for (group_version, resources) in &lookup.group_versions {
        let list = call(
            || format!("discovery: list resources of {group_version}"),
            timeout,
            client.list_api_group_resources(group_version),
        )
        .await?;
        for (plural, kind_name, kind) in resources {
            if list.resources.iter().any(|r| r.name == *plural) {
                served.kinds.push(*kind);
                if !read_typed(*kind) {
                    served
                        .dynamic
                        .insert(*kind, api_resource(group_version, kind_name, plural));
                }
            }
        }
    }
    // PodTemplates are read only for the requests' pod sets: without the request kind they
    // are many, large and useless.
    let requests = served.kinds.contains(&Kind::ProvisioningRequest);
    served.kinds.extend(
        core.into_iter()
            .filter(|k| *k != Kind::PodTemplate || requests),
    );
    served.warnings.extend(storage_warnings(&served.kinds));
    served.warnings.extend(provisioning_warning(&served.kinds));
    served
        .warnings
        .extend(super::dra::not_served_warning(&served.kinds));
    Ok(served)
}

/// What a cluster lacking storage kinds is autoscaled without, said once, when the hub
/// connects: without claims, volumes or classes, volumes are not simulated; without
/// CSINodes, attach limits and the CSI drivers' zone labels are off.
pub fn storage_warnings(kinds: &[Kind]) -> Vec<Warning> {
    let missing = |wanted: &[Kind]| -> Vec<String> {
        wanted
            .iter()
            .filter(|k| !kinds.contains(k))
            .map(|k| k.describe())
            .collect()
    };
    let volumes = missing(&Kind::VOLUMES);
    let csi = missing(&[Kind::CsiNode]);
    [(volumes, Kind::PersistentVolumeClaim), (csi, Kind::CsiNode)]
        .into_iter()
        .filter(|(names, _)| !names.is_empty())
        .map(|(names, kind)| {
            let what = join_names(&names, "or");
            let means = kind.unread_means();
            Warning::general(
                WarningCode::NotServed,
                format!("the cluster does not serve {what}: {means}"),
            )
        })
        .collect()
}

/// A cluster that does not serve ProvisioningRequests (no CRD) has the feature off: said
/// once, when the hub connects, never an error.
pub fn provisioning_warning(kinds: &[Kind]) -> Option<Warning> {
    let wanted = [Kind::ProvisioningRequest, Kind::PodTemplate];
    not_served_warning(&wanted, kinds, Kind::ProvisioningRequest)
}

/// The kinds of `wanted` missing from `kinds`, named with what `feature`'s kind unread
/// means, when any is.
pub fn not_served_warning(wanted: &[Kind], kinds: &[Kind], feature: Kind) -> Option<Warning> {
    let missing: Vec<String> = wanted
        .iter()
        .filter(|k| !kinds.contains(k))
        .map(|k| k.describe())
        .collect();
    (!missing.is_empty()).then(|| {
        Warning::general(
            WarningCode::NotServed,
            format!(
                "the cluster does not serve {}: {}",
                join_names(&missing, "or"),
                feature.unread_means()
            ),
        )
    })
}

/// The optional core kinds the cluster serves. A bare or simulated API may lack them, and
/// their watches must not fail forever. Core discovery refused (403) is no answer: every
/// watch is tried, and a refusal there is given up on with a warning like any kind's.
async fn core_kinds(client: &Client, timeout: Duration) -> Result<Vec<Kind>, CallError> {
    let core = call(
        || "discovery: list resources of v1".into(),
        timeout,
        client.list_core_api_resources("v1"),
    )
    .await;
    let names: Option<Vec<String>> = match core {
        Ok(list) => Some(list.resources.into_iter().map(|r| r.name).collect()),
        Err(e) if e.category() == Category::NotFound => Some(Vec::new()),
        Err(e) if e.category() == Category::Forbidden => None,
        Err(e) => return Err(e),
    };
    Ok(served_core(names.as_deref()))
}

/// Of [`CORE_OPTIONAL`], those the core resource list names (all of them without a list).
fn served_core(names: Option<&[String]>) -> Vec<Kind> {
    CORE_OPTIONAL
        .into_iter()
        .filter(|(plural, _)| names.is_none_or(|n| n.iter().any(|r| r == plural)))
        .map(|(_, kind)| kind)
        .collect()
}

fn api_resource(group_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = group_version.split_once('/').unwrap_or(("", group_version));
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: group_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// A Machine API kind at the version chosen for its group: how the executor reaches it.
pub fn machine_api_resource(api: MachineApi, kind: &MachineKind) -> ApiResource {
    let gvk = GroupVersionKind::gvk(api.group.domain(), api.version.as_str(), kind.name);
    ApiResource::from_gvk_with_plural(&gvk, kind.plural)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MachineApiVersion;

    const OPENSHIFT: MachineApiGroup = MachineApiGroup::OpenShift;
    const CAPI: MachineApiGroup = MachineApiGroup::ClusterApi;

    /// An API group list as `GET /apis` answers it.
    fn groups(entries: &[(&str, &[&str], &str)]) -> APIGroupList {
        let groups: Vec<serde_json::Value> = entries
            .iter()
            .map(|(name, versions, preferred)| {
                let gv = |v: &str| serde_json::json!({"groupVersion": format!("{name}/{v}"), "version": v});
                serde_json::json!({
                    "name": name,
                    "versions": versions.iter().map(|v| gv(v)).collect::<Vec<_>>(),
                    "preferredVersion": gv(preferred),
                })
            })
            .collect();
        serde_json::from_value(
            serde_json::json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
        )
        .unwrap()
    }

    fn looked_up(p: &Lookup) -> Vec<&str> {
        p.group_versions.iter().map(|(gv, _)| gv.as_str()).collect()
    }

    #[test]
    fn cluster_api_is_read_as_v1beta2_when_the_cluster_prefers_it() {
        let p = lookup(&groups(&[
            ("apps", &["v1"], "v1"),
            ("cluster.x-k8s.io", &["v1beta2", "v1beta1"], "v1beta2"),
        ]));
        assert_eq!(looked_up(&p), vec!["apps/v1", "cluster.x-k8s.io/v1beta2"]);
        assert_eq!(
            p.machine_apis.get(CAPI).map(|a| a.version),
            Some(MachineApiVersion::V1beta2)
        );
        assert_eq!(p.machine_apis.get(OPENSHIFT), None);
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn each_machine_api_is_watched_for_the_kinds_it_serves() {
        use crate::model::ScalableKind;
        let plurals = |g| -> Vec<&str> { machine_resources(g).iter().map(|r| r.0).collect() };
        assert_eq!(plurals(OPENSHIFT), ["machinesets", "machines"]);
        assert_eq!(
            plurals(CAPI),
            ["machinesets", "machinedeployments", "machines"]
        );
        let md = Kind::Scalable(CAPI, ScalableKind::MachineDeployment);
        assert!(machine_resources(CAPI).contains(&("machinedeployments", "MachineDeployment", md)));
        assert!(machine_resources(OPENSHIFT).contains(&(
            "machines",
            "Machine",
            Kind::Machine(OPENSHIFT)
        )));
        assert_eq!(md.describe(), "machinedeployments.cluster.x-k8s.io");
        assert_eq!(
            Kind::Machine(OPENSHIFT).describe(),
            "machines.machine.openshift.io"
        );
    }

    #[test]
    fn the_controllers_pods_are_looked_up_in_are_wanted_from_apps_and_batch() {
        let p = lookup(&groups(&[
            ("apps", &["v1"], "v1"),
            ("batch", &["v1"], "v1"),
        ]));
        assert_eq!(looked_up(&p), vec!["apps/v1", "batch/v1"]);
        let wanted: Vec<Kind> = p
            .group_versions
            .iter()
            .flat_map(|(_, resources)| resources.iter().map(|r| r.2))
            .collect();
        for kind in ControllerKind::ALL {
            if kind != ControllerKind::ReplicationController {
                assert!(wanted.contains(&Kind::of_controller(kind)), "{kind}");
            }
        }
        assert_eq!(
            Kind::Controller(ControllerKind::Job).describe(),
            "jobs.batch"
        );
    }

    #[test]
    fn storage_classes_and_csinodes_are_wanted_from_storage_k8s_io_and_read_typed() {
        let p = lookup(&groups(&[("storage.k8s.io", &["v1", "v1beta1"], "v1")]));
        assert_eq!(looked_up(&p), vec!["storage.k8s.io/v1"]);
        let wanted: Vec<&Resource> = p.group_versions.iter().flat_map(|(_, r)| r).collect();
        assert_eq!(
            wanted,
            [
                &("storageclasses", "StorageClass", Kind::StorageClass),
                &("csinodes", "CSINode", Kind::CsiNode)
            ]
        );
        assert!(Kind::STORAGE.iter().all(|k| read_typed(*k)));
        assert!(!read_typed(Kind::ClusterAutoscaler));
        assert_eq!(Kind::CsiNode.describe(), "csinodes.storage.k8s.io");
    }

    #[test]
    fn claims_and_volumes_are_watched_when_the_core_list_names_them() {
        let names = |n: &[&str]| -> Vec<String> { n.iter().map(|s| s.to_string()).collect() };
        let bare = served_core(Some(&names(&["pods", "nodes", "persistentvolumes"])));
        assert_eq!(bare, [Kind::PersistentVolume]);
        let full = names(&[
            "replicationcontrollers",
            "persistentvolumeclaims",
            "persistentvolumes",
            "podtemplates",
        ]);
        assert_eq!(served_core(Some(&full)).len(), 4);
        // Core discovery refused: every watch is tried (a refusal there is a warning).
        assert_eq!(served_core(None).len(), 4);
        assert_eq!(
            CORE_OPTIONAL[0].0,
            ControllerKind::ReplicationController.plural()
        );
    }

    #[test]
    fn a_cluster_without_storage_kinds_is_warned_once_per_feature() {
        let all = [
            Kind::Pod,
            Kind::PersistentVolumeClaim,
            Kind::PersistentVolume,
        ]
        .into_iter()
        .chain([Kind::StorageClass, Kind::CsiNode])
        .collect::<Vec<_>>();
        assert!(storage_warnings(&all).is_empty());
        let text = |kinds: &[Kind]| -> Vec<String> {
            storage_warnings(kinds)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            text(&all[..3]),
            [
                "the cluster does not serve storageclasses.storage.k8s.io: volumes are not \
                 simulated: pods with claims scale up as if their volumes could be used from \
                 any node",
                "the cluster does not serve csinodes.storage.k8s.io: CSI attach limits and the \
                 CSI drivers' zone labels on scale-from-zero templates are off"
            ]
        );
        let none = storage_warnings(&[Kind::Pod]);
        assert_eq!(none.len(), 2);
        assert_eq!(none[0].code, WarningCode::NotServed);
        assert!(
            none[0].message.starts_with(
                "the cluster does not serve persistentvolumeclaims, persistentvolumes or \
                 storageclasses.storage.k8s.io: volumes are not simulated"
            ),
            "{}",
            none[0].message
        );
    }

    #[test]
    fn provisioning_requests_are_read_as_v1_when_served_else_v1beta1() {
        let wanted = |p: &Lookup| -> Vec<(String, Kind)> {
            p.group_versions
                .iter()
                .flat_map(|(gv, r)| r.iter().map(move |r| (gv.clone(), r.2)))
                .collect()
        };
        let both = lookup(&groups(&[(
            "autoscaling.x-k8s.io",
            &["v1", "v1beta1"],
            "v1",
        )]));
        assert_eq!(
            wanted(&both),
            [(
                "autoscaling.x-k8s.io/v1".to_string(),
                Kind::ProvisioningRequest
            )]
        );
        let old = lookup(&groups(&[(
            "autoscaling.x-k8s.io",
            &["v1beta1"],
            "v1beta1",
        )]));
        assert_eq!(looked_up(&old), ["autoscaling.x-k8s.io/v1beta1"]);
        let none = lookup(&groups(&[("apps", &["v1"], "v1")]));
        assert!(!wanted(&none).iter().any(|(_, k)| k.is_provisioning()));
        assert!(!read_typed(Kind::ProvisioningRequest));
    }

    #[test]
    fn a_cluster_without_provisioning_requests_is_warned_once() {
        let w = provisioning_warning(&[Kind::Pod]).unwrap();
        assert_eq!(w.code, WarningCode::NotServed);
        assert_eq!(
            w.to_string(),
            "the cluster does not serve provisioningrequests.autoscaling.x-k8s.io or \
             podtemplates: ProvisioningRequests are not read: none is decided or written"
        );
        let both = [Kind::ProvisioningRequest, Kind::PodTemplate];
        assert!(provisioning_warning(&both).is_none());
    }

    #[test]
    fn an_older_cluster_api_is_read_as_v1beta1() {
        let p = lookup(&groups(&[
            ("machine.openshift.io", &["v1beta1", "v1"], "v1"),
            ("cluster.x-k8s.io", &["v1beta1"], "v1beta1"),
        ]));
        assert_eq!(
            looked_up(&p),
            vec!["machine.openshift.io/v1beta1", "cluster.x-k8s.io/v1beta1"]
        );
        let apis: Vec<String> = p.machine_apis.iter().map(|a| a.to_string()).collect();
        assert_eq!(
            apis,
            vec!["machine.openshift.io/v1beta1", "cluster.x-k8s.io/v1beta1"]
        );
    }

    #[test]
    fn a_machine_api_in_unknown_versions_only_is_a_warning_naming_them() {
        let p = lookup(&groups(&[("cluster.x-k8s.io", &["v1", "v1alpha4"], "v1")]));
        assert!(looked_up(&p).is_empty());
        assert_eq!(p.machine_apis, MachineApis::default());
        assert_eq!(p.warnings[0].code, WarningCode::UnsupportedVersion);
        assert_eq!(
            p.warnings
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            vec![
                "the cluster serves cluster.x-k8s.io only as v1, v1alpha4, and fleetscaler \
                 reads v1beta2 or v1beta1 only: its MachineSets, MachineDeployments and \
                 Machines are not watched, so none of them is a node group"
            ]
        );
    }
}
