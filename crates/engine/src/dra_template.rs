//! What DRA drivers publish for a new node: the ResourceSlices a template carries.
//!
//! A template copied from a ready node takes that node's node-local slices (upstream's
//! `SanitizedNodeResourceSlices`: each simulated copy gets pools of its own, which the
//! simulator's DRA index names after the copy). A template built from scale-from-zero
//! annotations has a slice only when its scalable resource carries upstream's Cluster API
//! annotation `capacity.cluster-autoscaler.kubernetes.io/dra-driver` and a GPU count
//! (`capacity.cluster-autoscaler.kubernetes.io/gpu-count`): one device per GPU, `gpu-0`,
//! `gpu-1`, ..., with the attribute `type: "gpu"`, as upstream's `InstanceResourceSlices`.

use std::sync::Arc;

use fleetscaler_model::dra::{AttributeValue, Device, DeviceNodes, ResourceSlice};
use fleetscaler_model::{ClusterSnapshot, Quantity, ScalableResource};

use super::simulator::dra::current_slices;
use super::template::CAPACITY_PREFIX;

/// Upstream's Cluster API annotation naming the DRA driver of a new node's GPUs.
pub const DRA_DRIVER_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/dra-driver";

/// Upstream's device type attribute value for those GPUs (`GpuDeviceType`).
const GPU_DEVICE_TYPE: &str = "gpu";

/// At most this many GPUs are made devices of (a ResourceSlice's limit).
const MAX_GPUS: i64 = fleetscaler_model::dra::MAX_DEVICES_PER_SLICE as i64;

/// The node-local slices of `node`, newest generation only.
pub fn node_slices(snapshot: &ClusterSnapshot, node: &str) -> Arc<[ResourceSlice]> {
    if !snapshot.dra.listed {
        return Arc::from([]);
    }
    current_slices(&snapshot.dra.slices)
        .into_iter()
        .filter(|s| s.node_local_to() == Some(node))
        .cloned()
        .collect()
}

/// The slice upstream's Cluster API provider makes for a node group at zero, or none.
/// A GPU count that is not a whole number of GPUs makes none (the rest of the template
/// reads it and warns).
pub fn annotated_slices(own: &ScalableResource) -> Arc<[ResourceSlice]> {
    let Some(driver) = own
        .annotation(DRA_DRIVER_ANNOTATION)
        .map(str::trim)
        .filter(|d| !d.is_empty())
    else {
        return Arc::from([]);
    };
    let count = own
        .annotation(&format!("{CAPACITY_PREFIX}gpu-count"))
        .and_then(|v| Quantity::parse(v.trim()).ok())
        .filter(|q| q.nanos() % 1_000_000_000 == 0)
        .map_or(0, |q| q.units_ceil().clamp(0, MAX_GPUS));
    if count == 0 {
        return Arc::from([]);
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
    Arc::from([ResourceSlice {
        name: format!("{node}-{driver}").into(),
        driver,
        pool: node.clone(),
        generation: 0,
        slice_count: 1,
        nodes: Some(DeviceNodes::Node(node)),
        devices,
        counter_sets: Vec::new(),
    }])
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
