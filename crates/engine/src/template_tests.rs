use super::*;
use crate::fixtures::snapshot_of_text;
use crate::nodegroups::discover;

fn templates(yaml: &str) -> Vec<Result<TemplateNode, TemplateError>> {
    templates_with(yaml, &Settings::default()).0
}

fn templates_with(
    yaml: &str,
    settings: &Settings,
) -> (
    Vec<Result<TemplateNode, TemplateError>>,
    Vec<fleetscaler_model::Warning>,
) {
    let s = snapshot_of_text(yaml);
    let groups = discover(&s, &[]);
    build_all(&s, &groups.groups, settings)
}

#[test]
fn a_malformed_entry_is_skipped_with_a_warning_and_startup_taints_are_left_out() {
    let yaml = GPU_SET
            .replace("a100,pool=gpu", "a100,broken,=empty,pool=gpu")
            .replace(
                "taints: nvidia.com/gpu=true:NoSchedule",
                "taints: nvidia.com/gpu=true:NoSchedule,not-a-taint,node.cilium.io/agent-not-ready=true:NoSchedule,startup-taint.cluster-autoscaler.kubernetes.io/csi=x:NoExecute",
            );
    let settings = Settings {
        startup_taints: vec!["node.cilium.io/agent-not-ready".into()],
        ..Settings::default()
    };
    let (mut list, warnings) = templates_with(&yaml, &settings);
    let t = list.remove(0).unwrap();
    assert_eq!(t.labels.get("pool"), Some("gpu"));
    assert_eq!(t.gpu_type().as_deref(), Some("a100"));
    let keys: Vec<&str> = t.taints.iter().map(|t| &*t.key).collect();
    assert_eq!(keys, ["nvidia.com/gpu"]);
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(
        warnings
            .iter()
            .all(|w| w.code == fleetscaler_model::WarningCode::InvalidTemplateEntry)
    );
    assert!(
        warnings[0].subject.is_some(),
        "about the group: {:?}",
        warnings[0]
    );
    assert!(
        warnings[0]
            .message
            .contains("labels: entry \"broken\" is not key=value; skipped")
    );
    assert!(
        warnings[2]
            .message
            .contains("taints: entry \"not-a-taint\" is not key=value:Effect")
    );
}

const GPU_SET: &str = r#"
apiVersion: machine.openshift.io/v1beta1
kind: MachineSet
metadata:
  name: gpu
  namespace: openshift-machine-api
  annotations:
    machine.openshift.io/cluster-api-autoscaler-node-group-max-size: "4"
    capacity.cluster-autoscaler.kubernetes.io/cpu: "8"
    capacity.cluster-autoscaler.kubernetes.io/memory: 32Gi
    capacity.cluster-autoscaler.kubernetes.io/gpu-count: "2"
    capacity.cluster-autoscaler.kubernetes.io/gpu-type: nvidia.com/gpu
    capacity.cluster-autoscaler.kubernetes.io/labels: cluster-api/accelerator=a100,pool=gpu
    capacity.cluster-autoscaler.kubernetes.io/taints: nvidia.com/gpu=true:NoSchedule
spec:
  replicas: 0
  template:
    spec:
      metadata: {labels: {node-role.kubernetes.io/worker: ""}}
      providerSpec: {value: {placement: {availabilityZone: us-east-1c}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {}
  template:
    spec:
      containers: [{name: a, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: gpu-driver, namespace: kube-system}
spec:
  selector: {}
  template:
    spec:
      nodeSelector: {pool: gpu}
      tolerations: [{key: nvidia.com/gpu, operator: Exists}]
      containers: [{name: d, resources: {requests: {cpu: 200m}}}]
"#;

#[test]
fn scale_from_zero_from_annotations() {
    let t = templates(GPU_SET).remove(0).unwrap();
    assert_eq!(t.source, TemplateSource::Annotations);
    assert_eq!((t.capacity.cpu_milli, t.capacity.memory), (8000, 32 << 30));
    assert_eq!(t.capacity.get("nvidia.com/gpu"), 2);
    assert_eq!(
        t.labels.get("topology.kubernetes.io/zone"),
        Some("us-east-1c")
    );
    assert_eq!(t.labels.get("node-role.kubernetes.io/worker"), Some(""));
    assert_eq!(t.gpu_type().as_deref(), Some("a100"));
    assert_eq!(t.taints.len(), 1);
    // The generic agent does not tolerate the GPU taint; the driver does.
    assert_eq!((t.daemon_pods, t.daemon_requests.cpu_milli), (1, 200));
    assert_eq!(t.max_pods, DEFAULT_MAX_PODS);
}

#[test]
fn openshift_legacy_annotations_are_a_fallback() {
    let yaml = r#"
apiVersion: machine.openshift.io/v1beta1
kind: MachineSet
metadata:
  name: old
  namespace: openshift-machine-api
  annotations:
    machine.openshift.io/cluster-api-autoscaler-node-group-max-size: "4"
    machine.openshift.io/vCPU: "4"
    machine.openshift.io/memoryMb: "16384"
    machine.openshift.io/GPU: "1"
    machine.openshift.io/maxPods: "250"
spec: {replicas: 0}
"#;
    let t = templates(yaml).remove(0).unwrap();
    assert_eq!(
        (t.capacity.cpu_milli, t.capacity.memory, t.max_pods),
        (4000, 16 << 30, 250)
    );
    assert_eq!(t.capacity.get("nvidia.com/gpu"), 1);
}

#[test]
fn hostile_or_missing_annotations_explain_themselves() {
    let bad = GPU_SET.replace("gpu-count: \"2\"", "gpu-count: \"two\"");
    let err = templates(&bad).remove(0).unwrap_err().to_string();
    assert!(
        err.contains("gpu-count=\"two\" is not a non-negative integer"),
        "{err}"
    );
    let bad = GPU_SET.replace("memory: 32Gi", "memory: 32 gigs");
    assert!(
        templates(&bad)
            .remove(0)
            .unwrap_err()
            .to_string()
            .contains("annotation capacity.cluster-autoscaler.kubernetes.io/memory")
    );
    let none = GPU_SET.replace("capacity.cluster-autoscaler.kubernetes.io/cpu: \"8\"", "");
    assert!(
        templates(&none)
            .remove(0)
            .unwrap_err()
            .to_string()
            .contains("no ready node to copy")
    );
}

#[test]
fn daemonset_pods_pinned_to_their_node_still_count_on_new_nodes() {
    // No DaemonSet objects: the spec comes from a running pod, which the DaemonSet
    // controller pinned to its node with a metadata.name field.
    let pinned = r#"
---
apiVersion: v1
kind: Pod
metadata:
  name: agent-x
  namespace: kube-system
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: agent-uid, controller: true}]
spec:
  nodeName: other
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchFields: [{key: metadata.name, operator: In, values: [other]}]
  containers: [{name: a, resources: {requests: {cpu: "1"}}}]
"#;
    let without_objects = GPU_SET.replace("nvidia.com/gpu=true:NoSchedule", "x=y:NoSchedule");
    let yaml = format!(
        "{}{pinned}",
        &without_objects[..without_objects.find("---\napiVersion: apps/v1").unwrap()]
    );
    let t = templates(&yaml.replace("taints: nvidia.com/gpu=true:NoSchedule", ""))
        .remove(0)
        .unwrap();
    assert_eq!(t.taints.len(), 1);
    let tolerant = yaml.replace(
        "  containers: [{name: a",
        "  tolerations: [{operator: Exists}]\n  containers: [{name: a",
    );
    let t = templates(&tolerant).remove(0).unwrap();
    assert_eq!((t.daemon_pods, t.daemon_requests.cpu_milli), (1, 1000));
}

/// A Cluster API MachineSet at zero pointing at a DockerMachineTemplate, with `extra`
/// annotations and the template's `status` as given.
fn capi_at_zero(annotations: &str, status: &str) -> String {
    format!(
        r#"
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineSet
metadata:
  name: pool
  namespace: ns
  annotations:
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "3"
{annotations}
spec:
  replicas: 0
  template:
    spec:
      infrastructureRef: {{apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachineTemplate, name: pool}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerMachineTemplate
metadata: {{name: pool, namespace: ns}}
status: {status}
"#
    )
}

#[test]
fn scale_from_zero_from_the_infrastructure_template_with_annotations_over_it() {
    let yaml = capi_at_zero(
        "    capacity.cluster-autoscaler.kubernetes.io/memory: 8Gi\n    capacity.cluster-autoscaler.kubernetes.io/maxPods: \"30\"",
        "{capacity: {cpu: 2500m, memory: 4Gi, pods: '58', nvidia.com/gpu: '1'}, nodeInfo: {architecture: arm64, operatingSystem: linux}}",
    );
    let t = templates(&yaml).remove(0).unwrap();
    assert_eq!(t.source, TemplateSource::InfrastructureTemplate);
    assert_eq!(
        t.from.as_deref(),
        Some("DockerMachineTemplate.infrastructure.cluster.x-k8s.io ns/pool")
    );
    assert_eq!((t.capacity.cpu_milli, t.capacity.memory), (2500, 8 << 30));
    assert_eq!(t.capacity.get("nvidia.com/gpu"), 1);
    assert_eq!(t.max_pods, 30);
    assert_eq!(t.labels.get("kubernetes.io/arch"), Some("arm64"));
    assert_eq!(t.labels.get("kubernetes.io/os"), Some("linux"));
}

#[test]
fn a_template_short_of_memory_says_what_to_set_and_where() {
    let yaml = capi_at_zero("", "{capacity: {cpu: '4'}}");
    let e = templates(&yaml).remove(0).unwrap_err().to_string();
    assert!(
        e.ends_with(
            "or cpu and memory in status.capacity of its infrastructure template \
             DockerMachineTemplate.infrastructure.cluster.x-k8s.io ns/pool"
        ),
        "{e}"
    );
    // The missing half from an annotation completes it.
    let yaml = capi_at_zero(
        "    capacity.cluster-autoscaler.kubernetes.io/memory: 8Gi",
        "{capacity: {cpu: '4'}}",
    );
    let t = templates(&yaml).remove(0).unwrap();
    assert_eq!((t.capacity.cpu_milli, t.capacity.memory), (4000, 8 << 30));
    assert_eq!(t.source, TemplateSource::InfrastructureTemplate);
}

#[test]
fn annotations_alone_keep_the_annotations_source_beside_a_template_without_capacity() {
    let yaml = capi_at_zero(
        "    capacity.cluster-autoscaler.kubernetes.io/cpu: \"2\"\n    capacity.cluster-autoscaler.kubernetes.io/memory: 8Gi",
        "{}",
    );
    let t = templates(&yaml).remove(0).unwrap();
    assert_eq!(t.source, TemplateSource::Annotations);
    assert_eq!(t.from, None);
    assert_eq!(t.labels.get("kubernetes.io/arch"), Some("amd64"));
}

/// An OpenShift MachineSet of AWS machines with one Machine and its node, whose providerID
/// is `provider_id`.
fn aws_set_with_node(provider_id: &str, ready: &str) -> String {
    format!(
        r#"
apiVersion: machine.openshift.io/v1beta1
kind: MachineSet
metadata:
  name: workers
  namespace: openshift-machine-api
  annotations:
    machine.openshift.io/cluster-api-autoscaler-node-group-min-size: "0"
    machine.openshift.io/cluster-api-autoscaler-node-group-max-size: "4"
    capacity.cluster-autoscaler.kubernetes.io/cpu: "8"
    capacity.cluster-autoscaler.kubernetes.io/memory: 32Gi
spec:
  replicas: 1
  template:
    spec:
      providerSpec:
        value: {{kind: AWSMachineProviderConfig, instanceType: m5.2xlarge, placement: {{availabilityZone: us-east-1a}}}}
---
apiVersion: machine.openshift.io/v1beta1
kind: Machine
metadata:
  name: workers-1
  namespace: openshift-machine-api
  ownerReferences: [{{apiVersion: machine.openshift.io/v1beta1, kind: MachineSet, name: workers, uid: ms, controller: true}}]
spec: {{providerID: "{provider_id}"}}
status: {{nodeRef: {{name: node-1}}}}
---
apiVersion: v1
kind: Node
metadata:
  name: node-1
  annotations: {{machine.openshift.io/machine: openshift-machine-api/workers-1}}
  labels: {{node.kubernetes.io/instance-type: m5.2xlarge, topology.kubernetes.io/zone: us-east-1a}}
spec: {{providerID: "{provider_id}"}}
status:
  allocatable: {{cpu: "8", memory: 32Gi, pods: "110"}}
  conditions: [{{type: Ready, status: "{ready}"}}]
"#
    )
}

#[test]
fn the_platform_is_the_nodes_else_the_provider_specs() {
    let platform = |id: &str, ready: &str| {
        let t = templates(&aws_set_with_node(id, ready)).remove(0).unwrap();
        (t.source, t.platform)
    };
    let aws = Some("aws");
    assert_eq!(
        platform("aws:///us-east-1a/i-1", "True"),
        (TemplateSource::Node, aws)
    );
    // What the nodes turned out to be wins, ready to copy or not.
    let gcp = Some("gcp");
    assert_eq!(
        platform("gce://p/us-east-1a/i-1", "True"),
        (TemplateSource::Node, gcp)
    );
    assert_eq!(
        platform("gce://p/us-east-1a/i-1", "False"),
        (TemplateSource::Annotations, gcp)
    );
    // A providerID that says nothing leaves it to the provider spec's kind.
    assert_eq!(platform("i-1", "True"), (TemplateSource::Node, aws));
    assert_eq!(
        platform("kwok://node-1", "True"),
        (TemplateSource::Node, aws)
    );
    // And the capacity key carries it.
    let t = templates(&aws_set_with_node("gce://p/z/i-1", "True"))
        .remove(0)
        .unwrap();
    let key = crate::policy::CapacityKey::of(&t).unwrap();
    assert_eq!(key.platform.as_deref(), Some("gcp"));
    assert_eq!(key.instance_type, "m5.2xlarge");
}

#[test]
fn a_group_at_zero_takes_the_platform_of_its_provider_spec_or_template_kind() {
    let at_zero = aws_set_with_node("aws:///us-east-1a/i-1", "True");
    let at_zero = &at_zero[..at_zero.find("---").unwrap()];
    let t = templates(at_zero).remove(0).unwrap();
    assert_eq!(
        (t.source, t.platform),
        (TemplateSource::Annotations, Some("aws"))
    );
    let yaml = capi_at_zero("", "{capacity: {cpu: '4', memory: 8Gi}}");
    assert_eq!(templates(&yaml).remove(0).unwrap().platform, Some("docker"));
    // A kind not known, or none, is no platform.
    let odd = at_zero.replace("AWSMachineProviderConfig", "MoonMachineProviderConfig");
    assert_eq!(templates(&odd).remove(0).unwrap().platform, None);
    assert_eq!(templates(GPU_SET).remove(0).unwrap().platform, None);
}
