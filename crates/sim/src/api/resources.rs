//! The resources the simulated API server serves: one static table, which discovery, the
//! router, the store and the field-selector index all read. Adding a resource is adding a
//! row here (and, if it needs one, a behaviour in `registry`).

/// A served resource. The discriminant indexes the store's tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Namespaces,
    Nodes,
    Pods,
    ConfigMaps,
    Events,
    EventsV1,
    Leases,
    PodDisruptionBudgets,
    OcpMachineSets,
    OcpMachines,
    CapiMachineDeployments,
    CapiMachineSets,
    CapiMachines,
    ClusterAutoscalers,
    MachineAutoscalers,
    /// Cluster API AWS provider's machine templates: scale from zero reads their
    /// `status.capacity`.
    AwsMachineTemplates,
    /// The provider's machines, one per Cluster API Machine: the test bed's cloud
    /// (`sim machines` beside Cluster API's real controllers) launches their instances.
    AwsMachines,
    /// A management cluster's inventory (the hub's `[membership]`): kubeconfig Secrets,
    /// SIG-Multicluster ClusterProfiles, and Open Cluster Management's ManagedClusters with
    /// their ManagedServiceAccounts.
    Secrets,
    ClusterProfiles,
    ManagedClusters,
    ManagedServiceAccounts,
    /// The controllers the hub's drain rules look pods' owners up in. ReplicaSets mirror the
    /// workload generator's (their `spec.replicas` follows its waves); nothing creates the
    /// other three, served so that their lists and watches are answered as a real cluster's.
    ReplicationControllers,
    ReplicaSets,
    StatefulSets,
    Jobs,
    /// The storage objects the hub's volume simulation reads. Nothing binds a claim or
    /// provisions a volume: they are stored as clients write them (status included), so a
    /// test states the cluster's storage as it wants it. CSINodes are the simulated CSI
    /// driver's (`csi`).
    PersistentVolumeClaims,
    PersistentVolumes,
    StorageClasses,
    CsiNodes,
    /// ProvisioningRequests (`autoscaling.x-k8s.io/v1`, as the autoscaler module's CRD
    /// serves it, with its `status` subresource) and the PodTemplates their pod sets name.
    /// Stored as clients write them: the hub writes the conditions.
    ProvisioningRequests,
    PodTemplates,
    /// Dynamic resource allocation (`resource.k8s.io/v1`). The simulated scheduler
    /// allocates claims (writing `status`) and its GPU driver publishes ResourceSlices for
    /// the nodes of groups that declare it (`dra`); the rest is stored as clients write it.
    ResourceClaims,
    ResourceClaimTemplates,
    ResourceSlices,
    DeviceClasses,
}

/// How a resource looks in discovery and which behaviours it has.
#[derive(Debug)]
pub struct ResourceDef {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    /// Has a `status` subresource: writes to the main resource keep the stored status,
    /// writes to `/status` keep everything else.
    pub status: bool,
    /// Has a `scale` subresource backed by `spec.replicas`.
    pub scale: bool,
    /// Field paths (besides `metadata.name` / `metadata.namespace`) usable in field
    /// selectors; their values are extracted when an object is written, so filtering a
    /// list never parses the objects.
    pub fields: &'static [&'static str],
}

const CORE: &str = "";
const APPS: &str = "apps";
const OCP_MACHINE: &str = "machine.openshift.io";
const CAPI: &str = "cluster.x-k8s.io";
const OCP_AUTOSCALING: &str = "autoscaling.openshift.io";
const STORAGE: &str = "storage.k8s.io";
const CAPI_INFRASTRUCTURE: &str = "infrastructure.cluster.x-k8s.io";
const K8S_AUTOSCALING: &str = "autoscaling.x-k8s.io";
const RESOURCE: &str = "resource.k8s.io";
const MULTICLUSTER: &str = "multicluster.x-k8s.io";
const OCM_CLUSTER: &str = "cluster.open-cluster-management.io";
const OCM_AUTHENTICATION: &str = "authentication.open-cluster-management.io";

impl Resource {
    /// Every served resource, in table order.
    pub const ALL: [Resource; 35] = [
        Resource::Namespaces,
        Resource::Nodes,
        Resource::Pods,
        Resource::ConfigMaps,
        Resource::Events,
        Resource::EventsV1,
        Resource::Leases,
        Resource::PodDisruptionBudgets,
        Resource::OcpMachineSets,
        Resource::OcpMachines,
        Resource::CapiMachineDeployments,
        Resource::CapiMachineSets,
        Resource::CapiMachines,
        Resource::ClusterAutoscalers,
        Resource::MachineAutoscalers,
        Resource::AwsMachineTemplates,
        Resource::AwsMachines,
        Resource::Secrets,
        Resource::ClusterProfiles,
        Resource::ManagedClusters,
        Resource::ManagedServiceAccounts,
        Resource::ReplicationControllers,
        Resource::ReplicaSets,
        Resource::StatefulSets,
        Resource::Jobs,
        Resource::PersistentVolumeClaims,
        Resource::PersistentVolumes,
        Resource::StorageClasses,
        Resource::CsiNodes,
        Resource::ProvisioningRequests,
        Resource::PodTemplates,
        Resource::ResourceClaims,
        Resource::ResourceClaimTemplates,
        Resource::ResourceSlices,
        Resource::DeviceClasses,
    ];

    /// The index of this resource's table.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Its discovery and behaviour description.
    pub fn def(self) -> &'static ResourceDef {
        &DEFS[self.index()]
    }

    /// The resource served at `group/version` under `plural`, if any.
    pub fn find(group: &str, version: &str, plural: &str) -> Option<Resource> {
        Resource::ALL.into_iter().find(|r| {
            let d = r.def();
            d.group == group && d.version == version && d.plural == plural
        })
    }

    /// `apiVersion` as written in objects: `v1` or `group/version`.
    pub fn api_version(self) -> String {
        let d = self.def();
        if d.group.is_empty() {
            d.version.to_string()
        } else {
            format!("{}/{}", d.group, d.version)
        }
    }

    /// The Machine API group for machine resources (`None` for the others).
    pub fn machine_group(self) -> Option<&'static str> {
        match self {
            Resource::OcpMachineSets | Resource::OcpMachines => Some(OCP_MACHINE),
            Resource::CapiMachineDeployments
            | Resource::CapiMachineSets
            | Resource::CapiMachines => Some(CAPI),
            _ => None,
        }
    }
}

/// The served group versions, in discovery order, with the preferred one first per group.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in Resource::ALL {
        let d = r.def();
        if !out.contains(&(d.group, d.version)) {
            out.push((d.group, d.version));
        }
    }
    out
}

const DEFS: [ResourceDef; 35] = [
    ResourceDef {
        group: CORE,
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        singular: "namespace",
        namespaced: false,
        short_names: &["ns"],
        status: true,
        scale: false,
        fields: &["status.phase"],
    },
    ResourceDef {
        group: CORE,
        version: "v1",
        kind: "Node",
        plural: "nodes",
        singular: "node",
        namespaced: false,
        short_names: &["no"],
        status: true,
        scale: false,
        fields: &["spec.unschedulable", "spec.providerID"],
    },
    ResourceDef {
        group: CORE,
        version: "v1",
        kind: "Pod",
        plural: "pods",
        singular: "pod",
        namespaced: true,
        short_names: &["po"],
        status: true,
        scale: false,
        fields: &[
            "spec.nodeName",
            "status.phase",
            "spec.schedulerName",
            "status.nominatedNodeName",
        ],
    },
    ResourceDef {
        group: CORE,
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        singular: "configmap",
        namespaced: true,
        short_names: &["cm"],
        status: false,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: CORE,
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        namespaced: true,
        short_names: &["ev"],
        status: false,
        scale: false,
        fields: &[
            "involvedObject.kind",
            "involvedObject.name",
            "involvedObject.namespace",
            "involvedObject.uid",
            "reason",
            "type",
            "source",
        ],
    },
    ResourceDef {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        namespaced: true,
        short_names: &["ev"],
        status: false,
        scale: false,
        fields: &[
            "regarding.kind",
            "regarding.name",
            "regarding.namespace",
            "reason",
            "type",
        ],
    },
    ResourceDef {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        singular: "lease",
        namespaced: true,
        short_names: &[],
        status: false,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: "policy",
        version: "v1",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        namespaced: true,
        short_names: &["pdb"],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: OCP_MACHINE,
        version: "v1beta1",
        kind: "MachineSet",
        plural: "machinesets",
        singular: "machineset",
        namespaced: true,
        short_names: &[],
        status: true,
        scale: true,
        fields: &[],
    },
    ResourceDef {
        group: OCP_MACHINE,
        version: "v1beta1",
        kind: "Machine",
        plural: "machines",
        singular: "machine",
        namespaced: true,
        short_names: &[],
        status: true,
        scale: false,
        fields: &["status.phase"],
    },
    ResourceDef {
        group: CAPI,
        version: "v1beta2",
        kind: "MachineDeployment",
        plural: "machinedeployments",
        singular: "machinedeployment",
        namespaced: true,
        short_names: &["md"],
        status: true,
        scale: true,
        fields: &[],
    },
    ResourceDef {
        group: CAPI,
        version: "v1beta2",
        kind: "MachineSet",
        plural: "machinesets",
        singular: "machineset",
        namespaced: true,
        short_names: &["ms"],
        status: true,
        scale: true,
        fields: &[],
    },
    ResourceDef {
        group: CAPI,
        version: "v1beta2",
        kind: "Machine",
        plural: "machines",
        singular: "machine",
        namespaced: true,
        short_names: &["ma"],
        status: true,
        scale: false,
        fields: &["status.phase"],
    },
    ResourceDef {
        group: OCP_AUTOSCALING,
        version: "v1",
        kind: "ClusterAutoscaler",
        plural: "clusterautoscalers",
        singular: "clusterautoscaler",
        namespaced: false,
        short_names: &["ca"],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: OCP_AUTOSCALING,
        version: "v1beta1",
        kind: "MachineAutoscaler",
        plural: "machineautoscalers",
        singular: "machineautoscaler",
        namespaced: true,
        short_names: &["ma"],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: CAPI_INFRASTRUCTURE,
        version: "v1beta2",
        kind: "AWSMachineTemplate",
        plural: "awsmachinetemplates",
        singular: "awsmachinetemplate",
        namespaced: true,
        short_names: &[],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: CAPI_INFRASTRUCTURE,
        version: "v1beta2",
        kind: "AWSMachine",
        plural: "awsmachines",
        singular: "awsmachine",
        namespaced: true,
        short_names: &[],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: CORE,
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        singular: "secret",
        namespaced: true,
        short_names: &[],
        status: false,
        scale: false,
        fields: &["type"],
    },
    ResourceDef {
        group: MULTICLUSTER,
        version: "v1alpha1",
        kind: "ClusterProfile",
        plural: "clusterprofiles",
        singular: "clusterprofile",
        namespaced: true,
        short_names: &[],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: OCM_CLUSTER,
        version: "v1",
        kind: "ManagedCluster",
        plural: "managedclusters",
        singular: "managedcluster",
        namespaced: false,
        short_names: &["mcl", "mcls"],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: OCM_AUTHENTICATION,
        version: "v1beta1",
        kind: "ManagedServiceAccount",
        plural: "managedserviceaccounts",
        singular: "managedserviceaccount",
        namespaced: true,
        short_names: &[],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: CORE,
        version: "v1",
        kind: "ReplicationController",
        plural: "replicationcontrollers",
        singular: "replicationcontroller",
        namespaced: true,
        short_names: &["rc"],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: APPS,
        version: "v1",
        kind: "ReplicaSet",
        plural: "replicasets",
        singular: "replicaset",
        namespaced: true,
        short_names: &["rs"],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: APPS,
        version: "v1",
        kind: "StatefulSet",
        plural: "statefulsets",
        singular: "statefulset",
        namespaced: true,
        short_names: &["sts"],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: "batch",
        version: "v1",
        kind: "Job",
        plural: "jobs",
        singular: "job",
        namespaced: true,
        short_names: &[],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: CORE,
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        namespaced: true,
        short_names: &["pvc"],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: CORE,
        version: "v1",
        kind: "PersistentVolume",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        namespaced: false,
        short_names: &["pv"],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: STORAGE,
        version: "v1",
        kind: "StorageClass",
        plural: "storageclasses",
        singular: "storageclass",
        namespaced: false,
        short_names: &["sc"],
        status: false,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: STORAGE,
        version: "v1",
        kind: "CSINode",
        plural: "csinodes",
        singular: "csinode",
        namespaced: false,
        short_names: &[],
        status: false,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: K8S_AUTOSCALING,
        version: "v1",
        kind: "ProvisioningRequest",
        plural: "provisioningrequests",
        singular: "provisioningrequest",
        namespaced: true,
        short_names: &["provreq", "provreqs"],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: CORE,
        version: "v1",
        kind: "PodTemplate",
        plural: "podtemplates",
        singular: "podtemplate",
        namespaced: true,
        short_names: &[],
        status: false,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: RESOURCE,
        version: "v1",
        kind: "ResourceClaim",
        plural: "resourceclaims",
        singular: "resourceclaim",
        namespaced: true,
        short_names: &[],
        status: true,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: RESOURCE,
        version: "v1",
        kind: "ResourceClaimTemplate",
        plural: "resourceclaimtemplates",
        singular: "resourceclaimtemplate",
        namespaced: true,
        short_names: &[],
        status: false,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: RESOURCE,
        version: "v1",
        kind: "ResourceSlice",
        plural: "resourceslices",
        singular: "resourceslice",
        namespaced: false,
        short_names: &[],
        status: false,
        scale: false,
        fields: &[],
    },
    ResourceDef {
        group: RESOURCE,
        version: "v1",
        kind: "DeviceClass",
        plural: "deviceclasses",
        singular: "deviceclass",
        namespaced: false,
        short_names: &[],
        status: false,
        scale: false,
        fields: &[],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_rows_match_the_enum() {
        for (i, r) in Resource::ALL.into_iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        assert_eq!(Resource::find("", "v1", "pods"), Some(Resource::Pods));
        assert_eq!(
            Resource::find("cluster.x-k8s.io", "v1beta2", "machinesets"),
            Some(Resource::CapiMachineSets)
        );
        // Cluster API is served at v1beta2 only, as the test bed's CRDs serve it.
        assert_eq!(
            Resource::find("cluster.x-k8s.io", "v1beta1", "machinesets"),
            None
        );
        assert_eq!(Resource::find("", "v1", "widgets"), None);
        assert_eq!(
            Resource::find(
                "cluster.open-cluster-management.io",
                "v1",
                "managedclusters"
            ),
            Some(Resource::ManagedClusters)
        );
        assert!(!Resource::ManagedClusters.def().namespaced);
        assert_eq!(
            Resource::find("apps", "v1", "replicasets"),
            Some(Resource::ReplicaSets)
        );
        assert_eq!(Resource::find("batch", "v1", "jobs"), Some(Resource::Jobs));
        assert_eq!(
            Resource::find("storage.k8s.io", "v1", "csinodes"),
            Some(Resource::CsiNodes)
        );
        assert!(!Resource::PersistentVolumes.def().namespaced);
        assert!(Resource::PersistentVolumeClaims.def().namespaced);
        assert_eq!(
            Resource::find("autoscaling.x-k8s.io", "v1", "provisioningrequests"),
            Some(Resource::ProvisioningRequests)
        );
        assert!(Resource::ProvisioningRequests.def().status);
        assert_eq!(
            Resource::find("resource.k8s.io", "v1", "resourceclaims"),
            Some(Resource::ResourceClaims)
        );
        assert!(Resource::ResourceClaims.def().status);
        assert!(!Resource::ResourceSlices.def().namespaced);
        assert_eq!(
            Resource::find("", "v1", "podtemplates"),
            Some(Resource::PodTemplates)
        );
        // DaemonSets live inside the simulation only.
        assert_eq!(Resource::find("apps", "v1", "daemonsets"), None);
    }

    #[test]
    fn api_versions_are_written_as_in_objects() {
        assert_eq!(Resource::Pods.api_version(), "v1");
        assert_eq!(
            Resource::OcpMachineSets.api_version(),
            "machine.openshift.io/v1beta1"
        );
    }

    #[test]
    fn group_versions_list_each_once() {
        let gvs = group_versions();
        assert!(gvs.contains(&("autoscaling.openshift.io", "v1")));
        assert!(gvs.contains(&("autoscaling.openshift.io", "v1beta1")));
        assert_eq!(gvs.iter().filter(|gv| gv.0.is_empty()).count(), 1);
    }
}
