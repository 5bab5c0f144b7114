//! What DRA drivers publish for a new node: the ResourceSlices a template carries.
//!
//! A template copied from a ready node takes that node's node-local slices (upstream's
//! `SanitizedNodeResourceSlices`: each simulated copy gets pools of its own, which the
//! simulator's DRA index tells apart by the copy), and the devices of them its DaemonSet
//! and static pods' claims hold stay held on every copy. A template built from scale-from-zero
//! annotations has a slice only when its scalable resource carries upstream's Cluster API
//! annotation `capacity.cluster-autoscaler.kubernetes.io/dra-driver` and a GPU count
//! (`capacity.cluster-autoscaler.kubernetes.io/gpu-count`): one device per GPU, `gpu-0`,
//! `gpu-1`, ..., with the attribute `type: "gpu"`, as upstream's `InstanceResourceSlices`.

use std::sync::Arc;

use fleetscaler_model::dra::{
    Allocation, AttributeValue, Device, DeviceId, DeviceNodes, PodClaimSource, ResourceSlice,
};
use fleetscaler_model::{ClusterSnapshot, Quantity, ScalableResource};

use super::simulator::dra::current_slices;
use super::template::CAPACITY_PREFIX;

/// Upstream's Cluster API annotation naming the DRA driver of a new node's GPUs.
pub const DRA_DRIVER_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/dra-driver";

/// Upstream's device type attribute value for those GPUs (`GpuDeviceType`).
const GPU_DEVICE_TYPE: &str = "gpu";

/// At most this many GPUs are made devices of (a ResourceSlice's limit).
const MAX_GPUS: i64 = fleetscaler_model::dra::MAX_DEVICES_PER_SLICE as i64;

/// What a template's copies publish: node-local slices, and the devices of them that the
/// DaemonSet (and static) pods of its source node hold, as they would on every copy
/// (upstream's `SanitizedPodResourceClaims` copies those pods' claims).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TemplateDevices {
    pub slices: Vec<ResourceSlice>,
    pub held: Vec<DeviceId>,
}

/// The node-local slices of `node` (newest generation only) and what its DaemonSet pods
/// hold of them.
pub fn node_devices(snapshot: &ClusterSnapshot, node: &str) -> Arc<TemplateDevices> {
    if !snapshot.dra.listed {
        return Arc::default();
    }
    let slices: Vec<ResourceSlice> = current_slices(&snapshot.dra.slices)
        .into_iter()
        .filter(|s| s.node_local_to() == Some(node))
        .cloned()
        .collect();
    let local = |d: &DeviceId| {
        slices
            .iter()
            .any(|s| s.driver == d.driver && s.pool == d.pool)
    };
    let held = daemon_claims(snapshot, node)
        .flat_map(|a| a.devices.iter())
        .filter(|d| local(d))
        .cloned()
        .collect();
    Arc::new(TemplateDevices { slices, held })
}

/// The allocations of the claims of the DaemonSet and static pods on `node`.
fn daemon_claims<'a>(
    snapshot: &'a ClusterSnapshot,
    node: &'a str,
) -> impl Iterator<Item = &'a Allocation> + 'a {
    let daemons = snapshot.pods.iter().filter(move |p| {
        p.node_name.as_deref() == Some(node)
            && !p.is_terminal()
            && (p.is_daemonset() || p.mirror)
            && !p.spec.resource_claims.is_empty()
    });
    daemons.flat_map(move |p| {
        p.spec.resource_claims.iter().filter_map(move |c| {
            let name = match &c.source {
                PodClaimSource::Claim(n) => n,
                PodClaimSource::Template(_) => {
                    &p.extras()
                        .claim_statuses
                        .iter()
                        .find(|(k, _)| *k == c.name)?
                        .1
                }
            };
            snapshot
                .dra
                .claims
                .iter()
                .find(|x| x.key.namespace == p.id.namespace && x.key.name == *name)?
                .allocation
                .as_ref()
        })
    })
}

/// The slice upstream's Cluster API provider makes for a node group at zero, or none.
/// A GPU count that is not a whole number of GPUs makes none (the rest of the template
/// reads it and warns).
pub fn annotated_slices(own: &ScalableResource) -> Vec<ResourceSlice> {
    let Some(driver) = own
        .annotation(DRA_DRIVER_ANNOTATION)
        .map(str::trim)
        .filter(|d| !d.is_empty())
    else {
        return Vec::new();
    };
    let count = own
        .annotation(&format!("{CAPACITY_PREFIX}gpu-count"))
        .and_then(|v| Quantity::parse(v.trim()).ok())
        .filter(|q| q.nanos() % 1_000_000_000 == 0)
        .map_or(0, |q| q.units_ceil().clamp(0, MAX_GPUS));
    if count == 0 {
        return Vec::new();
    }
    let driver: Arc<str> = driver.into();
    // The node's name is the copy's: `DeviceNodes::Node` is read only to tell node-local.
    let node: Arc<str> = "template".into();
    let devices = (0..count)
        .map(|i| Device {
            name: format!("gpu-{i}").into(),
            attributes: vec![(
                "type".into(),
                AttributeValue::String(GPU_DEVICE_TYPE.into()),
            )],
            capacity: Vec::new(),
            nodes: None,
            allow_multiple: false,
            consumes: Vec::new(),
            tainted: false,
        })
        .collect();
    vec![ResourceSlice {
        name: format!("{node}-{driver}").into(),
        driver,
        pool: node.clone(),
        generation: 0,
        slice_count: 1,
        nodes: Some(DeviceNodes::Node(node)),
        devices,
        counter_sets: Vec::new(),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{machineset, snapshot};

    fn resource(annotations: &[(&str, &str)]) -> ScalableResource {
        let mut ms = machineset("gpu", 0, 4, 0).capacity("8", "32Gi");
        for (k, v) in annotations {
            ms = ms.annotation(k, v);
        }
        snapshot([ms.json()]).scalables.remove(0)
    }

    #[test]
    fn the_annotations_make_one_device_per_gpu() {
        let r = resource(&[
            (DRA_DRIVER_ANNOTATION, "gpu.nvidia.com"),
            ("capacity.cluster-autoscaler.kubernetes.io/gpu-count", "2"),
        ]);
        let slices = annotated_slices(&r);
        assert_eq!(slices.len(), 1);
        let names: Vec<&str> = slices[0].devices.iter().map(|d| &*d.name).collect();
        assert_eq!(names, ["gpu-0", "gpu-1"]);
        assert_eq!(&*slices[0].driver, "gpu.nvidia.com");
        assert!(slices[0].node_local_to().is_some());
        assert_eq!(
            slices[0].devices[0].attributes,
            [("type".into(), AttributeValue::String("gpu".into()))]
        );
    }

    #[test]
    fn without_a_driver_or_a_whole_count_there_is_no_slice() {
        let gpus = ("capacity.cluster-autoscaler.kubernetes.io/gpu-count", "2");
        assert!(annotated_slices(&resource(&[gpus])).is_empty());
        let half = (
            "capacity.cluster-autoscaler.kubernetes.io/gpu-count",
            "1500m",
        );
        assert!(annotated_slices(&resource(&[(DRA_DRIVER_ANNOTATION, "d"), half])).is_empty());
        assert!(annotated_slices(&resource(&[(DRA_DRIVER_ANNOTATION, "d")])).is_empty());
    }
}
