use super::*;

const LIST: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status: {allocatable: {cpu: "4", memory: 16Gi}}
- apiVersion: v1
  kind: Pod
  metadata: {name: web-1, namespace: shop}
  spec: {containers: [{name: c, resources: {requests: {cpu: 500m}}}]}
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: shop}
- apiVersion: machine.openshift.io/v1beta1
  kind: MachineSet
  metadata: {name: worker-a, namespace: openshift-machine-api}
  spec: {replicas: 1}
"#;

fn load(text: &str) -> Result<(ClusterSnapshot, DumpReport), DumpError> {
    let mut b = SnapshotBuilder::default();
    b.add_text(text, "dump.yaml")?;
    Ok(b.finish())
}

#[test]
fn reads_a_list_and_counts_skipped_kinds() {
    let (s, report) = load(LIST).unwrap();
    assert_eq!((s.nodes.len(), s.pods.len(), s.scalables.len()), (1, 1, 1));
    assert_eq!(report.objects, 3);
    assert_eq!(report.skipped.get("Service (v1)"), Some(&1));
}

#[test]
fn reads_both_cluster_api_versions_and_leaves_out_unknown_ones_with_a_warning() {
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: cluster.x-k8s.io/v1beta1
  kind: MachineSet
  metadata: {name: old, namespace: default}
  spec: {replicas: 2}
- apiVersion: cluster.x-k8s.io/v1beta2
  kind: MachineDeployment
  metadata: {name: new, namespace: default}
  spec: {replicas: 3}
- apiVersion: cluster.x-k8s.io/v1beta2
  kind: Machine
  metadata: {name: new-1, namespace: default}
  status: {nodeRef: {name: node-1}, phase: Running}
- apiVersion: cluster.x-k8s.io/v1alpha4
  kind: Machine
  metadata: {name: ancient-1, namespace: default}
- apiVersion: cluster.x-k8s.io/v1alpha4
  kind: Machine
  metadata: {name: ancient-2, namespace: default}
- apiVersion: cluster.x-k8s.io/v1beta2
  kind: MachineHealthCheck
  metadata: {name: mhc, namespace: default}
"#;
    let (s, report) = load(text).unwrap();
    let replicas: Vec<i64> = s.scalables.iter().map(|r| r.replicas).collect();
    assert_eq!(replicas, vec![2, 3]);
    assert_eq!(s.machines[0].node_ref.as_deref(), Some("node-1"));
    assert_eq!(report.objects, 3);
    assert_eq!(
        report
            .skipped
            .get("MachineHealthCheck (cluster.x-k8s.io/v1beta2)"),
        Some(&1)
    );
    assert_eq!(
        report
            .warnings
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![
            "2 Machine object(s) of cluster.x-k8s.io/v1alpha4 left out: fleetscaler reads \
             cluster.x-k8s.io v1beta2 and v1beta1 only"
        ]
    );
}

#[test]
fn reads_multi_document_yaml_and_json() {
    let yaml = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: b}\n";
    assert_eq!(load(yaml).unwrap().0.nodes.len(), 2);
    let json = r#"{"apiVersion":"v1","kind":"NodeList","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}]}"#;
    assert_eq!(load(json).unwrap().0.nodes.len(), 1);
}

#[test]
fn malformed_object_names_source_item_and_field() {
    let bad = LIST.replace("cpu: 500m", "cpu: five");
    let err = load(&bad).unwrap_err().to_string();
    assert_eq!(
        err,
        "dump.yaml: document, items[1] (Pod shop/web-1): spec.containers[0].resources.requests.cpu: \
         quantity \"five\" is not a number followed by an optional suffix (e.g. 500m, 2Gi, 1e3)"
    );
    let err = load("apiVersion: v1\nkind: Node\nmetadata: {name: a}\nspec: {taints: 3}\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("dump.yaml: document (Node a): spec.taints: invalid type"),
        "{err}"
    );
}

#[test]
fn garbage_is_a_syntax_or_shape_error_not_a_panic() {
    assert!(matches!(
        load("{not json"),
        Err(DumpError {
            kind: DumpErrorKind::Syntax,
            ..
        })
    ));
    assert!(matches!(
        load("key: [unclosed"),
        Err(DumpError {
            kind: DumpErrorKind::Syntax,
            ..
        })
    ));
    assert!(matches!(
        load("- 1\n- 2\n"),
        Err(DumpError {
            kind: DumpErrorKind::Shape,
            ..
        })
    ));
    assert!(matches!(
        load("just a string"),
        Err(DumpError {
            kind: DumpErrorKind::Shape,
            ..
        })
    ));
    assert!(matches!(
        load("metadata: {name: x}"),
        Err(DumpError {
            kind: DumpErrorKind::Shape,
            ..
        })
    ));
    assert_eq!(load("").unwrap().1.objects, 0);
}

/// As kubectl reads them (checked against the test bed's kubectl 1.34): flow-style YAML
/// that starts like JSON, YAML 1.1 booleans, and lists whose items lack kind.
#[test]
fn dumps_read_as_kubectl_reads_them() {
    let flow = "{apiVersion: v1, kind: List, items: [{apiVersion: v1, kind: Node, metadata: {name: a}, spec: {unschedulable: yes}}]}";
    let (s, _) = load(flow).unwrap();
    assert!(
        s.nodes[0].unschedulable,
        "`yes` is true, as YAML 1.1 has it"
    );
    let seq = "- {apiVersion: v1, kind: Node, metadata: {name: a}}\n- {apiVersion: v1, kind: Node, metadata: {name: b}}\n";
    assert_eq!(load(seq).unwrap().0.nodes.len(), 2);
    let err = load("apiVersion: v1\nkind: Node\nmetadata: {name: a, labels: {app: y}}\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("dump.yaml: document (Node a): metadata.labels.app: invalid type: boolean")
            && err.ends_with("as kubectl reads it too: quote it)"),
        "{err}"
    );
    let err = load("kind: List\napiVersion: v1\nitems:\n- metadata: {name: n1}\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "dump.yaml: document, items[0]: object n1 has no kind: every object (and every item of a list) needs kind and apiVersion, as kubectl and the apiserver require"
    );
}

#[test]
fn priority_expander_configmap_is_kept() {
    let text = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cluster-autoscaler-priority-expander","namespace":"kube-system"},"data":{"priorities":"10:\n- .*"}}"#;
    let (s, _) = load(text).unwrap();
    assert_eq!(
        s.priority_expanders[0].priorities.as_deref(),
        Some("10:\n- .*")
    );
}

/// The controllers a pod's owner is looked up in: a kind the dump holds is complete, one it
/// does not hold is unlisted, and an empty typed list (`kubectl get --raw`) counts as held.
#[test]
fn controllers_are_read_as_keys_and_their_kinds_as_listed() {
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: ReplicaSet
  metadata: {name: web-5d8f, namespace: shop, uid: u-rs}
  spec: {replicas: 2, selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}}}
- apiVersion: v1
  kind: ReplicationController
  metadata: {name: old, namespace: shop, uid: u-rc}
  spec: {replicas: 1}
- apiVersion: apps/v1
  kind: StatefulSet
  metadata: {name: db, namespace: shop, uid: u-ss}
  spec: {replicas: 3}
---
apiVersion: batch/v1
kind: JobList
items: []
"#;
    let (s, report) = load(text).unwrap();
    let c = &s.controllers;
    assert_eq!(c.replica_sets[0].replicas, Some(2));
    assert_eq!(&*c.replication_controllers[0].uid, "u-rc");
    assert_eq!(c.stateful_sets.len(), 1);
    assert!(c.jobs.is_empty());
    assert_eq!(report.objects, 3);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    for kind in [
        ControllerKind::ReplicaSet,
        ControllerKind::ReplicationController,
        ControllerKind::StatefulSet,
        ControllerKind::Job,
    ] {
        assert_eq!(c.listing(kind), &Listing::Complete, "{kind}");
    }
    assert_eq!(c.listing(ControllerKind::DaemonSet), &Listing::Unlisted);
    let (s, _) = load(LIST).unwrap();
    assert_eq!(
        s.controllers.listing(ControllerKind::ReplicaSet),
        &Listing::Unlisted
    );
}

/// Bad input never stops the dump: a bad replica count is a warning naming the object (the
/// controller stays present); an object without a name leaves its kind unreadable.
#[test]
fn bad_controllers_are_warnings_naming_the_object() {
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: ReplicaSet
  metadata: {name: web-5d8f, namespace: shop, uid: u-rs}
  spec: {replicas: many}
- apiVersion: batch/v1
  kind: Job
  metadata: {namespace: ops}
"#;
    let (s, report) = load(text).unwrap();
    let warnings: Vec<String> = report.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [
            "ReplicaSet shop/web-5d8f: spec.replicas: expected a whole number of replicas, \
             found \"many\"; the controller counts as present",
            "Job ops/: metadata.name: missing; no pod's Job is judged missing",
        ]
    );
    assert_eq!(s.controllers.replica_sets[0].replicas, None);
    assert_eq!(
        s.controllers.listing(ControllerKind::ReplicaSet),
        &Listing::Complete
    );
    let Listing::Unreadable(why) = s.controllers.listing(ControllerKind::Job) else {
        panic!("a Job without a name leaves Jobs unreadable");
    };
    assert!(why.contains("Job ops/"), "{why}");
}

/// A kind `fleetscaler dump` was not allowed to list is written as its typed empty list,
/// marked: it reads as the hub reads a refused kind, unread rather than empty.
#[test]
fn a_kind_the_dump_could_not_list_is_unread_not_empty() {
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: ReplicaSetList
  metadata: {annotations: {fleetscaler.io/unreadable: "forbidden (403: replicasets.apps is forbidden)"}}
  items: []
- apiVersion: v1
  kind: PersistentVolumeClaimList
  metadata: {annotations: {fleetscaler.io/unreadable: "forbidden (403: no)"}}
  items: []
- apiVersion: batch/v1
  kind: JobList
  metadata: {}
  items: []
"#;
    let (s, report) = load(text).unwrap();
    let Listing::Unreadable(why) = s.controllers.listing(ControllerKind::ReplicaSet) else {
        panic!("a refused ReplicaSetList leaves ReplicaSets unreadable");
    };
    assert!(
        why.contains("ReplicaSet (apps/v1) could not be listed"),
        "{why}"
    );
    assert_eq!(
        s.controllers.listing(ControllerKind::Job),
        &Listing::Complete
    );
    assert!(
        !s.storage.listed,
        "a refused claim list says nothing of storage"
    );
    let warnings: Vec<String> = report.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [
            "the dump could not list ReplicaSet (apps/v1): forbidden (403: replicasets.apps is \
             forbidden); no pod's ReplicaSet is judged missing",
            "the dump could not list PersistentVolumeClaim (v1): forbidden (403: no)",
        ]
    );
    assert!(
        report
            .warnings
            .iter()
            .all(|w| w.code == WarningCode::NotAllowed)
    );
}

/// Several `kubectl get -o yaml` outputs joined by `---` (their items before their kind, as
/// kubectl prints them), a trailing marker: every object read, each error naming its place.
#[test]
fn lists_in_several_documents_are_read_item_by_item() {
    let node = |n: &str| format!("- apiVersion: v1\n  kind: Node\n  metadata: {{name: {n}}}\n");
    let text = format!(
        "apiVersion: v1\nitems:\n{}{}kind: List\n---\napiVersion: v1\nitems:\n{}kind: NodeList\n---\n",
        node("a"),
        node("b"),
        node("c")
    );
    let (s, report) = load(&text).unwrap();
    assert_eq!(s.nodes.len(), 3);
    assert_eq!(report.objects, 3);
    let bad = text.replace("name: c}\n", "name: c}\n  spec: {taints: 3}\n");
    let err = load(&bad).unwrap_err().to_string();
    assert!(
        err.starts_with("dump.yaml: document 2, items[0] (Node c): spec.taints: invalid type"),
        "{err}"
    );
    let err = load("[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}}, 3]")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "dump.yaml: document, [1]: expected an object, found a number"
    );
}

/// A syntax error in a later document counts lines from the start of the file, as the
/// person reading the message counts them.
#[test]
fn a_syntax_error_names_the_line_of_the_whole_file() {
    let text =
        "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: [Node\n";
    let err = load(text).unwrap_err();
    assert_eq!(err.kind, DumpErrorKind::Syntax);
    assert!(err.message.contains("line 6"), "{}", err.message);
}

#[test]
fn a_volume_that_cannot_be_read_is_a_warning_not_a_refused_dump() {
    let text = r#"{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pv-odd"},"spec":{"nodeAffinity":{"required":{"nodeSelectorTerms":[{"matchFields":[{"key":"spec.nodeName","operator":"In","values":["x"]}]}]}}}}"#;
    let (s, report) = load(text).unwrap();
    assert!(s.storage.listed);
    assert_eq!(s.storage.volumes[0].name.as_ref(), "pv-odd");
    assert!(s.storage.volumes[0].unreadable.is_some());
    let warning = report.warnings[0].to_string();
    assert!(
        warning.contains("PersistentVolume pv-odd") && warning.contains("matchFields[0]"),
        "{warning}"
    );
}

/// The Machines of an API count as listed when the dump holds one of them, or a typed
/// `MachineList` of that API even empty (what `fleetscaler dump` writes for an API with
/// none); `plan` warns about groups of an API whose Machines were never listed.
#[test]
fn machines_count_as_listed_per_api() {
    let (_, report) = load(LIST).unwrap();
    assert!(report.machines_listed.is_empty());
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: machine.openshift.io/v1beta1
  kind: Machine
  metadata: {name: worker-a-1, namespace: openshift-machine-api}
- apiVersion: cluster.x-k8s.io/v1beta2
  kind: MachineList
  metadata: {}
  items: []
"#;
    let (s, report) = load(text).unwrap();
    assert_eq!(s.machines.len(), 1);
    assert_eq!(
        report.machines_listed.into_iter().collect::<Vec<_>>(),
        [MachineApiGroup::OpenShift, MachineApiGroup::ClusterApi]
    );
}

#[test]
fn provisioning_requests_and_pod_templates_are_read_at_both_versions() {
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: PodTemplate
  metadata: {name: worker, namespace: ml}
  template:
    spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "2"}}}]}
- apiVersion: autoscaling.x-k8s.io/v1
  kind: ProvisioningRequest
  metadata: {name: a, namespace: ml}
  spec:
    provisioningClassName: check-capacity.autoscaling.x-k8s.io
    podSets: [{podTemplateRef: {name: worker}, count: 3}]
- apiVersion: autoscaling.x-k8s.io/v1beta1
  kind: ProvisioningRequest
  metadata: {name: b, namespace: ml}
  spec:
    provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
    podSets: [{podTemplateRef: {name: worker}, count: 1}]
- apiVersion: autoscaling.x-k8s.io/v1alpha9
  kind: ProvisioningRequest
  metadata: {name: c, namespace: ml}
"#;
    let (s, report) = load(text).unwrap();
    let p = &s.provisioning;
    assert!(p.listed);
    assert_eq!(p.requests.len(), 2);
    assert_eq!(&*p.requests[1].version, "v1beta1");
    assert!(p.template("ml", "worker").is_some());
    assert_eq!(
        report
            .skipped
            .get("ProvisioningRequest (autoscaling.x-k8s.io/v1alpha9)"),
        Some(&1)
    );
}

#[test]
fn without_provisioning_requests_the_feature_is_off_and_an_empty_list_turns_it_on() {
    let (s, _) = load(LIST).unwrap();
    assert!(!s.provisioning.listed);
    let text = "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequestList\nitems: []\n";
    let (s, _) = load(text).unwrap();
    assert!(s.provisioning.listed && s.provisioning.requests.is_empty());
}

#[test]
fn an_unreadable_pod_template_or_request_is_a_warning() {
    let text = r#"
- apiVersion: v1
  kind: PodTemplate
  metadata: {name: worker, namespace: ml}
  template: {spec: {containers: [{name: c}], tolerations: [{key: k, operator: Sometimes}]}}
"#;
    let text = format!(
        "apiVersion: v1\nkind: List\nitems:\n{}",
        text.trim_start_matches('\n')
    );
    let (s, report) = load(&text).unwrap();
    assert!(s.provisioning.pod_templates[0].unreadable.is_some());
    assert!(report.warnings[0].subject.as_deref() == Some("PodTemplate ml/worker"));
    let bad = r#"
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: a, namespace: ml}
spec: {podSets: [{podTemplateRef: {name: w}, count: many}]}
"#;
    let (s, report) = load(bad).unwrap();
    let r = &s.provisioning.requests[0];
    assert_eq!(r.key.to_string(), "ml/a");
    assert!(
        r.problem
            .as_deref()
            .unwrap()
            .contains("spec.podSets[0].count")
    );
    let w = &report.warnings[0];
    assert_eq!(w.subject.as_deref(), Some("ProvisioningRequest ml/a"));
}

#[test]
fn dra_objects_are_read_in_v1_and_v1beta2_and_the_rest_warned() {
    let text = r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec: {selectors: [{cel: {expression: "device.driver == 'gpu.example.com'"}}]}
---
apiVersion: resource.k8s.io/v1beta2
kind: ResourceSlice
metadata: {name: n1-gpu}
spec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1},
  devices: [{name: gpu-0, attributes: {model: {string: A100}}}]}
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceSlice
metadata: {name: old}
spec: {driver: gpu.example.com, nodeName: n2, pool: {name: n2, generation: 1, resourceSliceCount: 1},
  devices: [{name: gpu-0, basic: {attributes: {model: {string: T4}}, capacity: {memory: {value: 16Gi}}}}]}
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: t4, namespace: ml}
spec: {spec: {devices: {requests: [{name: gpu, deviceClassName: gpu.example.com, count: 2}]}}}
---
apiVersion: resource.k8s.io/v1alpha3
kind: DeviceClass
metadata: {name: ancient}
spec: {}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: bad, namespace: ml}
spec: {devices: {requests: [{name: a}]}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplateList
items: []
"#;
    let (s, report) = load(text).unwrap();
    assert!(s.dra.listed);
    assert_eq!(s.dra.classes.len(), 1);
    assert_eq!(s.dra.slices.len(), 2);
    assert_eq!(&*s.dra.slices[0].devices[0].name, "gpu-0");
    // v1beta1's basic device, read as v1's.
    let old = &s.dra.slices[1].devices[0];
    assert_eq!(old.attributes.len(), 1);
    assert_eq!(old.capacity.len(), 1);
    let choice = &s.dra.templates[0].spec.requests[0].choices[0];
    assert_eq!(&*choice.class, "gpu.example.com");
    assert_eq!(choice.mode, crate::dra::AllocationMode::ExactCount(2));
    assert!(s.dra.claims.is_empty());
    let warnings: Vec<String> = report.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("DeviceClass ancient") && w.contains("v1alpha3")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("ResourceClaim ml/bad") && w.contains("requests[0]")),
        "{warnings:?}"
    );
}

#[test]
fn a_dump_without_dra_objects_leaves_dra_off() {
    let (s, _) = load(r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}"#).unwrap();
    assert!(!s.dra.listed);
    let (s, _) =
        load(r#"{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClassList","items":[]}"#).unwrap();
    assert!(s.dra.listed);
}

/// A DRA kind `fleetscaler dump` was refused leaves DRA off, as the hub has it, whatever
/// else of the group was listed.
#[test]
fn a_refused_dra_kind_leaves_dra_off() {
    let text = r#"{"apiVersion":"v1","kind":"List","items":[
        {"apiVersion":"resource.k8s.io/v1","kind":"DeviceClassList","items":[]},
        {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSliceList","items":[],
         "metadata":{"annotations":{"fleetscaler.io/unreadable":"forbidden (403: no)"}}}]}"#;
    let (s, report) = load(text).unwrap();
    assert!(!s.dra.listed);
    let warned = report
        .warnings
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>();
    assert!(
        warned.iter().any(
            |w| w.contains("could not list ResourceSlice (resource.k8s.io/v1)")
                && w.ends_with("pods with resource claims are not simulated")
        ),
        "{warned:?}"
    );
}
