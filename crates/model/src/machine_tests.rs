//! Projections of both Machine APIs; the v1beta2 objects are as `kubectl get -o yaml`
//! prints them from Cluster API 1.14 (CAPD), status and all.

use super::*;

#[test]
fn machineset_keeps_autoscaler_annotations_labels_taints_and_zone() {
    let ms = ScalableResource::from_json(
        MachineApiGroup::OpenShift,
        ScalableKind::MachineSet,
        serde_json::json!({
            "metadata": {"name": "worker-a", "namespace": "openshift-machine-api", "annotations": {
                "machine.openshift.io/cluster-api-autoscaler-node-group-max-size": "6",
                "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"replicas": 2, "template": {"spec": {
                "metadata": {"labels": {"node-role.kubernetes.io/worker": ""}},
                "taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}],
                "providerSpec": {"value": {"instanceType": "m5.xlarge", "placement": {"availabilityZone": "us-east-1a"}}}}}}
        }),
        &mut Projector::default(),
    )
    .unwrap();
    assert_eq!(ms.replicas, 2);
    assert_eq!(ms.annotations.len(), 1);
    assert_eq!(ms.template_labels.get(ZONE_LABEL), Some("us-east-1a"));
    assert_eq!(
        ms.template_labels.get("node-role.kubernetes.io/worker"),
        Some("")
    );
    assert_eq!(ms.provider_instance_type.as_deref(), Some("m5.xlarge"));
    assert_eq!(
        ms.template_taints[0].to_string(),
        "dedicated=infra:NoSchedule"
    );
    assert_eq!(ms.platform, None, "a provider spec without a kind");
}

#[test]
fn the_platform_is_read_from_the_provider_spec_or_infrastructure_template_kind() {
    let openshift = |value: serde_json::Value| {
        let json = serde_json::json!({"metadata": {"name": "w", "namespace": "ns"},
            "spec": {"template": {"spec": {"providerSpec": {"value": value}}}}});
        let p = &mut Projector::default();
        ScalableResource::from_json(
            MachineApiGroup::OpenShift,
            ScalableKind::MachineSet,
            json,
            p,
        )
        .unwrap()
        .platform
    };
    let kind =
        |k: &str| serde_json::json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": k});
    assert_eq!(openshift(kind("AWSMachineProviderConfig")), Some("aws"));
    assert_eq!(openshift(kind("OpenstackProviderSpec")), Some("openstack"));
    assert_eq!(openshift(kind("SomeoneElsesProviderSpec")), None);
    assert_eq!(openshift(serde_json::json!({"kind": 3})), None);
    let md = ScalableResource::from_json(
        MachineApiGroup::ClusterApi,
        ScalableKind::MachineDeployment,
        yaml(V1BETA2_MACHINEDEPLOYMENT),
        &mut Projector::default(),
    )
    .unwrap();
    assert_eq!(md.platform, Some("docker"));
}

#[test]
fn capi_template_labels_only_propagate_node_domains() {
    let md = ScalableResource::from_json(
        MachineApiGroup::ClusterApi,
        ScalableKind::MachineDeployment,
        serde_json::json!({
            "metadata": {"name": "md", "namespace": "default"},
            "spec": {"template": {"metadata": {"labels": {
                "cluster.x-k8s.io/cluster-name": "c1",
                "node-role.kubernetes.io/worker": "",
                "tier.node.cluster.x-k8s.io/pool": "a"}}}}
        }),
        &mut Projector::default(),
    )
    .unwrap();
    assert_eq!(md.replicas, 1, "the API default");
    assert!(
        md.template_labels
            .get("cluster.x-k8s.io/cluster-name")
            .is_none()
    );
    assert_eq!(md.template_labels.len(), 2);
}

#[test]
fn machine_failure_from_either_api_shape() {
    let m = Machine::from_json(
        MachineApiGroup::OpenShift,
        serde_json::json!({"metadata": {"name": "m1", "namespace": "ns",
            "annotations": {"machine.openshift.io/delete-machine": "2026-01-01"}},
            "status": {"phase": "Failed", "errorReason": "InvalidConfiguration", "errorMessage": "no capacity"}}),
        &mut Projector::default(),
    )
    .unwrap();
    assert!(m.has_failed() && m.marked_for_deletion);
    assert_eq!(
        m.failure.as_deref(),
        Some("InvalidConfiguration: no capacity")
    );
    let capi = Machine::from_json(
        MachineApiGroup::ClusterApi,
        serde_json::json!({"metadata": {"name": "m2"},
            "status": {"deprecated": {"v1beta1": {"failureMessage": "quota exceeded"}}}}),
        &mut Projector::default(),
    )
    .unwrap();
    assert_eq!(capi.failure.as_deref(), Some("quota exceeded"));
}

#[test]
fn wrong_field_type_names_the_path() {
    let err = ScalableResource::from_json(
        MachineApiGroup::OpenShift,
        ScalableKind::MachineSet,
        serde_json::json!({"metadata": {"name": "x"}, "spec": {"replicas": "three"}}),
        &mut Projector::default(),
    )
    .unwrap_err();
    assert_eq!(err.path, "spec.replicas");
}

fn yaml(text: &str) -> serde_json::Value {
    serde_saphyr::from_str(text).unwrap()
}

const V1BETA2_MACHINEDEPLOYMENT: &str = r#"
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata:
  annotations:
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "5"
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "1"
    machinedeployment.clusters.x-k8s.io/revision: "1"
  creationTimestamp: "2026-01-10T09:00:00Z"
  generation: 2
  labels:
    cluster.x-k8s.io/cluster-name: dev
  name: dev-md-0
  namespace: default
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta2
    kind: Cluster
    name: dev
    uid: 6d3f0d9e-1111-4c55-9f7e-3b1f0c2a0001
  resourceVersion: "4242"
  uid: 1b2c3d4e-2222-4c55-9f7e-3b1f0c2a0002
spec:
  clusterName: dev
  replicas: 1
  rollout:
    strategy:
      rollingUpdate:
        maxSurge: 1
        maxUnavailable: 0
      type: RollingUpdate
  selector:
    matchLabels:
      cluster.x-k8s.io/cluster-name: dev
      cluster.x-k8s.io/deployment-name: dev-md-0
  template:
    metadata:
      labels:
        cluster.x-k8s.io/cluster-name: dev
        cluster.x-k8s.io/deployment-name: dev-md-0
        node-role.kubernetes.io/worker: ""
    spec:
      bootstrap:
        configRef:
          apiGroup: bootstrap.cluster.x-k8s.io
          kind: KubeadmConfigTemplate
          name: dev-md-0
      clusterName: dev
      failureDomain: fd-1
      infrastructureRef:
        apiGroup: infrastructure.cluster.x-k8s.io
        kind: DockerMachineTemplate
        name: dev-md-0
      taints:
      - effect: NoSchedule
        key: dedicated
        propagation: Always
        value: batch
      - effect: PreferNoSchedule
        key: warming
        propagation: OnInitialization
      version: v1.34.0
status:
  availableReplicas: 1
  conditions:
  - lastTransitionTime: "2026-01-10T09:05:00Z"
    message: ""
    observedGeneration: 2
    reason: Available
    status: "True"
    type: Available
  deprecated:
    v1beta1:
      availableReplicas: 1
      readyReplicas: 1
      unavailableReplicas: 0
      updatedReplicas: 1
  observedGeneration: 2
  phase: Running
  readyReplicas: 1
  replicas: 1
  selector: cluster.x-k8s.io/cluster-name=dev,cluster.x-k8s.io/deployment-name=dev-md-0
  upToDateReplicas: 1
"#;

const V1BETA2_MACHINESET: &str = r#"
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineSet
metadata:
  annotations:
    machinedeployment.clusters.x-k8s.io/desired-replicas: "1"
    machinedeployment.clusters.x-k8s.io/max-replicas: "2"
    machinedeployment.clusters.x-k8s.io/revision: "1"
  creationTimestamp: "2026-01-10T09:00:01Z"
  generation: 1
  labels:
    cluster.x-k8s.io/cluster-name: dev
    cluster.x-k8s.io/deployment-name: dev-md-0
    machine-template-hash: "3215486221"
  name: dev-md-0-7xk2p
  namespace: default
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta2
    blockOwnerDeletion: true
    controller: true
    kind: MachineDeployment
    name: dev-md-0
    uid: 1b2c3d4e-2222-4c55-9f7e-3b1f0c2a0002
  resourceVersion: "4240"
  uid: 5e6f7a8b-3333-4c55-9f7e-3b1f0c2a0003
spec:
  clusterName: dev
  replicas: 1
  selector:
    matchLabels:
      cluster.x-k8s.io/cluster-name: dev
      machine-template-hash: "3215486221"
  template:
    metadata:
      labels:
        cluster.x-k8s.io/cluster-name: dev
        cluster.x-k8s.io/deployment-name: dev-md-0
        machine-template-hash: "3215486221"
        node-role.kubernetes.io/worker: ""
    spec:
      bootstrap:
        configRef:
          apiGroup: bootstrap.cluster.x-k8s.io
          kind: KubeadmConfigTemplate
          name: dev-md-0
      clusterName: dev
      infrastructureRef:
        apiGroup: infrastructure.cluster.x-k8s.io
        kind: DockerMachineTemplate
        name: dev-md-0
      version: v1.34.0
status:
  availableReplicas: 1
  deprecated:
    v1beta1:
      availableReplicas: 1
      fullyLabeledReplicas: 1
      readyReplicas: 1
  observedGeneration: 1
  readyReplicas: 1
  replicas: 1
  selector: cluster.x-k8s.io/cluster-name=dev,machine-template-hash=3215486221
  upToDateReplicas: 1
"#;

const V1BETA2_MACHINE: &str = r#"
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata:
  annotations:
    cluster.x-k8s.io/delete-machine: "2026-01-10T10:00:00Z"
  creationTimestamp: "2026-01-10T09:00:02Z"
  finalizers:
  - machine.cluster.x-k8s.io
  generation: 3
  labels:
    cluster.x-k8s.io/cluster-name: dev
    cluster.x-k8s.io/deployment-name: dev-md-0
    cluster.x-k8s.io/set-name: dev-md-0-7xk2p
  name: dev-md-0-7xk2p-q8w4z
  namespace: default
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta2
    blockOwnerDeletion: true
    controller: true
    kind: MachineSet
    name: dev-md-0-7xk2p
    uid: 5e6f7a8b-3333-4c55-9f7e-3b1f0c2a0003
  resourceVersion: "4301"
  uid: 9a0b1c2d-4444-4c55-9f7e-3b1f0c2a0004
spec:
  bootstrap:
    configRef:
      apiGroup: bootstrap.cluster.x-k8s.io
      kind: KubeadmConfig
      name: dev-md-0-7xk2p-q8w4z
    dataSecretName: dev-md-0-7xk2p-q8w4z
  clusterName: dev
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: DockerMachine
    name: dev-md-0-7xk2p-q8w4z
  providerID: docker:////dev-md-0-7xk2p-q8w4z
  version: v1.34.0
status:
  addresses:
  - address: 172.18.0.5
    type: InternalIP
  conditions:
  - lastTransitionTime: "2026-01-10T09:02:00Z"
    message: ""
    observedGeneration: 3
    reason: Ready
    status: "True"
    type: Ready
  deprecated:
    v1beta1:
      conditions:
      - lastTransitionTime: "2026-01-10T09:02:00Z"
        status: "True"
        type: Ready
  initialization:
    bootstrapDataSecretCreated: true
    infrastructureProvisioned: true
  lastUpdated: "2026-01-10T09:02:00Z"
  nodeInfo:
    architecture: amd64
    bootID: 0e2f
    containerRuntimeVersion: containerd://2.1.4
    kernelVersion: 6.8.0
    kubeProxyVersion: ""
    kubeletVersion: v1.34.0
    machineID: 1c9d
    operatingSystem: linux
    osImage: Debian GNU/Linux 12 (bookworm)
    systemUUID: 1c9d
  nodeRef:
    name: dev-md-0-7xk2p-q8w4z
  observedGeneration: 3
  phase: Running
"#;

#[test]
fn v1beta2_machinedeployment_reads_replicas_bounds_labels_and_taints() {
    let md = ScalableResource::from_json(
        MachineApiGroup::ClusterApi,
        ScalableKind::MachineDeployment,
        yaml(V1BETA2_MACHINEDEPLOYMENT),
        &mut Projector::default(),
    )
    .unwrap();
    assert_eq!(md.key, ObjectKey::new("default", "dev-md-0"));
    assert_eq!(md.replicas, 1);
    assert_eq!(
        md.annotation("cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"),
        Some("5")
    );
    assert!(md.owner.is_none(), "a Cluster owns it, not as controller");
    assert_eq!(md.template_labels.len(), 1, "only node-role propagates");
    assert_eq!(
        md.template_labels.get("node-role.kubernetes.io/worker"),
        Some("")
    );
    let taints: Vec<String> = md.template_taints.iter().map(|t| t.to_string()).collect();
    assert_eq!(
        taints,
        vec!["dedicated=batch:NoSchedule", "warming:PreferNoSchedule"]
    );
    assert_eq!(md.provider_zone, None);
    assert!(md.created.is_some());
}

#[test]
fn v1beta2_machineset_belongs_to_its_deployment() {
    let ms = ScalableResource::from_json(
        MachineApiGroup::ClusterApi,
        ScalableKind::MachineSet,
        yaml(V1BETA2_MACHINESET),
        &mut Projector::default(),
    )
    .unwrap();
    let owner = ms.owner.as_ref().unwrap();
    assert_eq!(
        (&*owner.kind, &*owner.name),
        ("MachineDeployment", "dev-md-0")
    );
    assert_eq!(ms.replicas, 1);
    // The deployment's revision it was made for is kept (is the deployment rolling out?);
    // no other annotation of it is the autoscaler's.
    let kept: Vec<&str> = ms.annotations.keys().map(|k| &**k).collect();
    assert_eq!(kept, ["machinedeployment.clusters.x-k8s.io/revision"]);
    assert_eq!(ms.status_replicas, Some(1));
}

#[test]
fn v1beta2_machine_reads_its_node_provider_id_and_mark() {
    let m = Machine::from_json(
        MachineApiGroup::ClusterApi,
        yaml(V1BETA2_MACHINE),
        &mut Projector::default(),
    )
    .unwrap();
    assert_eq!(m.node_ref.as_deref(), Some("dev-md-0-7xk2p-q8w4z"));
    assert_eq!(
        m.provider_id.as_deref(),
        Some("docker:////dev-md-0-7xk2p-q8w4z")
    );
    assert_eq!(m.phase.as_deref(), Some("Running"));
    assert_eq!(m.owner.as_ref().map(|o| &*o.name), Some("dev-md-0-7xk2p"));
    assert!(m.marked_for_deletion);
    assert!(!m.has_failed() && !m.deleting);
}

#[test]
fn v1beta2_machine_failure_is_read_from_the_deprecated_block() {
    // As Cluster API 1.14's Machine controller leaves a Machine whose infrastructure failed
    // (seen in the test bed): no phase Failed (v1beta2 never sets it), the failure in the
    // v1beta1 fields alone.
    let mut value = yaml(V1BETA2_MACHINE);
    value["status"]["phase"] = "Pending".into();
    value["status"]["deprecated"]["v1beta1"]["failureReason"] = "CreateError".into();
    value["status"]["deprecated"]["v1beta1"]["failureMessage"] =
        "DockerMachine dev-md-0-7xk2p-q8w4z: container failed to start".into();
    let m = Machine::from_json(
        MachineApiGroup::ClusterApi,
        value,
        &mut Projector::default(),
    )
    .unwrap();
    assert!(m.has_failed());
    assert_eq!(
        m.failure.as_deref(),
        Some("CreateError: DockerMachine dev-md-0-7xk2p-q8w4z: container failed to start")
    );
}

#[test]
fn v1beta2_machine_without_a_node_yet_has_no_node_ref() {
    let mut value = yaml(V1BETA2_MACHINE);
    let status = value["status"].as_object_mut().unwrap();
    status.remove("nodeRef");
    status.insert("phase".into(), "Provisioning".into());
    status.insert(
        "initialization".into(),
        serde_json::json!({"bootstrapDataSecretCreated": true}),
    );
    let m = Machine::from_json(
        MachineApiGroup::ClusterApi,
        value,
        &mut Projector::default(),
    )
    .unwrap();
    assert_eq!(m.node_ref, None);
    assert_eq!(m.phase.as_deref(), Some("Provisioning"));
    assert!(!m.has_failed());
}
