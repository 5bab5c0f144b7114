//! `ClusterSnapshot`: everything the engine reads about one cluster at one moment, as
//! compact projections.

use super::autoscaler::{CLUSTER_AUTOSCALER_NAME, ClusterAutoscaler, MachineAutoscaler};
use super::controller::Controllers;
use super::dra::Dra;
use super::infra::{InfraRef, InfrastructureTemplate};
use super::machine::{Machine, ScalableResource};
use super::meta::ObjectKey;
use super::node::Node;
use super::pod::Pod;
use super::provisioning::ProvisioningRequests;
use super::storage::Storage;
use super::workload::{DaemonSet, Namespace, PodDisruptionBudget};

/// The ConfigMap the priority expander reads.
pub const PRIORITY_EXPANDER_CONFIGMAP: &str = "cluster-autoscaler-priority-expander";

/// The priority expander's ConfigMap: its `priorities` key, unparsed.
#[derive(Clone, Debug, PartialEq)]
pub struct PriorityExpanderConfig {
    pub key: ObjectKey,
    pub priorities: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterSnapshot {
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    /// MachineSets and MachineDeployments of both Machine API groups.
    pub scalables: Vec<ScalableResource>,
    pub machines: Vec<Machine>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub daemonsets: Vec<DaemonSet>,
    /// The other controllers a pod's owner is looked up in, and how completely each kind
    /// (DaemonSets too) was read.
    pub controllers: Controllers,
    pub namespaces: Vec<Namespace>,
    pub cluster_autoscalers: Vec<ClusterAutoscaler>,
    pub machine_autoscalers: Vec<MachineAutoscaler>,
    /// Every ConfigMap named `cluster-autoscaler-priority-expander`; the engine reads the one
    /// in the configured namespace and warns about the others.
    pub priority_expanders: Vec<PriorityExpanderConfig>,
    /// Cluster API infrastructure templates the node groups point at (scale from zero).
    pub infrastructure_templates: Vec<InfrastructureTemplate>,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes.
    pub storage: Storage,
    /// ProvisioningRequests and the PodTemplates their pod sets name.
    pub provisioning: ProvisioningRequests,
    /// ResourceClaims, their templates, ResourceSlices and DeviceClasses.
    pub dra: Dra,
}

impl ClusterSnapshot {
    /// The `ClusterAutoscaler` named `default`, the only one OpenShift's operator honours.
    pub fn cluster_autoscaler(&self) -> Option<&ClusterAutoscaler> {
        self.cluster_autoscalers
            .iter()
            .find(|c| c.name == CLUSTER_AUTOSCALER_NAME)
    }

    /// The infrastructure template `reference` names, if it was read.
    pub fn infrastructure_template(&self, reference: &InfraRef) -> Option<&InfrastructureTemplate> {
        self.infrastructure_templates
            .iter()
            .find(|t| t.reference == *reference)
    }
}
