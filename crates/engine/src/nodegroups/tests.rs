//! Node group discovery: bounds, invalid groups set aside, MachineDeployments and their
//! MachineSets, fleet.toml entries, and same-named resources of the two Machine APIs.

use super::*;
use crate::fixtures::snapshot_of_text as snapshot;

const GROUPS: &str = r#"
apiVersion: machine.openshift.io/v1beta1
kind: MachineSet
metadata:
  name: good
  namespace: openshift-machine-api
  annotations:
    machine.openshift.io/cluster-api-autoscaler-node-group-min-size: "1"
    machine.openshift.io/cluster-api-autoscaler-node-group-max-size: "5"
spec: {replicas: 2}
---
apiVersion: machine.openshift.io/v1beta1
kind: MachineSet
metadata:
  name: bad
  namespace: openshift-machine-api
  annotations:
    machine.openshift.io/cluster-api-autoscaler-node-group-min-size: "three"
    machine.openshift.io/cluster-api-autoscaler-node-group-max-size: "5"
---
apiVersion: machine.openshift.io/v1beta1
kind: MachineSet
metadata:
  name: inverted
  namespace: openshift-machine-api
  annotations:
    machine.openshift.io/cluster-api-autoscaler-node-group-min-size: "6"
    machine.openshift.io/cluster-api-autoscaler-node-group-max-size: "2"
---
apiVersion: machine.openshift.io/v1beta1
kind: MachineSet
metadata:
  name: negative
  namespace: openshift-machine-api
  annotations:
    machine.openshift.io/cluster-api-autoscaler-node-group-max-size: "-1"
---
apiVersion: machine.openshift.io/v1beta1
kind: MachineSet
metadata: {name: plain, namespace: openshift-machine-api}
---
apiVersion: machine.openshift.io/v1beta1
kind: MachineSet
metadata:
  name: by-ma
  namespace: openshift-machine-api
  annotations:
    machine.openshift.io/cluster-api-autoscaler-node-group-min-size: "0"
    machine.openshift.io/cluster-api-autoscaler-node-group-max-size: "3"
---
apiVersion: autoscaling.openshift.io/v1beta1
kind: MachineAutoscaler
metadata: {name: ma, namespace: openshift-machine-api}
spec:
  minReplicas: 1
  maxReplicas: 12
  scaleTargetRef: {apiVersion: machine.openshift.io/v1beta1, kind: MachineSet, name: by-ma}
"#;

#[test]
fn invalid_bounds_set_aside_one_group_only() {
    let groups = discover(&snapshot(GROUPS), &[]);
    let ids: Vec<&str> = groups.groups.iter().map(|g| g.id.as_str()).collect();
    assert_eq!(
        ids,
        vec![
            "MachineSet.machine.openshift.io/openshift-machine-api/by-ma",
            "MachineSet.machine.openshift.io/openshift-machine-api/good"
        ]
    );
    let bad: Vec<(&str, &str)> = groups
        .ineligible
        .iter()
        .map(|g| (g.id.as_str(), g.reason.message.as_str()))
        .collect();
    assert_eq!(bad.len(), 3);
    assert!(bad[0].1.contains("\"three\" is not an integer"), "{bad:?}");
    assert!(
        bad[1].1.contains("min size 6 is greater than max size 2"),
        "{bad:?}"
    );
    assert!(bad[2].1.contains("-1 is negative"), "{bad:?}");
}

#[test]
fn machine_autoscaler_wins_and_says_so() {
    let groups = discover(&snapshot(GROUPS), &[]);
    let g = &groups.groups[0];
    assert_eq!((g.min, g.max), (1, 12));
    assert_eq!(
        g.bounds_source,
        BoundsSource::MachineAutoscaler(ObjectKey::new("openshift-machine-api", "ma"))
    );
    assert!(
        g.bounds_note
            .as_ref()
            .unwrap()
            .contains("overriding annotations min=0 max=3")
    );
}

#[test]
fn two_machine_autoscalers_on_one_target_is_invalid() {
    let extra = GROUPS.replace("name: ma, namespace", "name: ma2, namespace");
    let groups = discover(
        &snapshot(&format!(
            "{GROUPS}---\n{}",
            &extra[extra.rfind("apiVersion: autoscaling").unwrap()..]
        )),
        &[],
    );
    assert!(
        groups
            .ineligible
            .iter()
            .any(|g| g.reason.message.contains("2 MachineAutoscalers"))
    );
}

const CAPI: &str = r#"
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata:
  name: md
  namespace: default
  annotations:
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "1"
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "4"
spec: {replicas: 1}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineSet
metadata:
  name: md-abc
  namespace: default
  ownerReferences: [{apiVersion: cluster.x-k8s.io/v1beta1, kind: MachineDeployment, name: md, uid: u1, controller: true}]
  annotations:
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "9"
spec: {replicas: 1}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Machine
metadata:
  name: md-abc-1
  namespace: default
  ownerReferences: [{apiVersion: cluster.x-k8s.io/v1beta1, kind: MachineSet, name: md-abc, uid: u2, controller: true}]
spec: {providerID: "aws:///us-east-1a/i-1"}
---
apiVersion: v1
kind: Node
metadata: {name: node-1}
spec: {providerID: "aws:///us-east-1a/i-1"}
"#;

#[test]
fn machineset_of_an_autoscaled_deployment_belongs_to_it() {
    let s = snapshot(CAPI);
    let groups = discover(&s, &[]);
    assert_eq!(groups.groups.len(), 1);
    let g = &groups.groups[0];
    assert_eq!(
        g.id.as_str(),
        "MachineDeployment.cluster.x-k8s.io/default/md"
    );
    assert_eq!((g.machines.len(), g.nodes.len()), (1, 1));
    assert_eq!(groups.group_of_node, vec![Some(0)]);
}

#[test]
fn machineset_owned_by_a_plain_deployment_is_ineligible() {
    let s = snapshot(&CAPI.replace("cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: \"1\"\n    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: \"4\"", "x: \"y\""));
    let groups = discover(&s, &[]);
    assert!(groups.groups.is_empty());
    assert!(
        groups.ineligible[0]
            .reason
            .message
            .contains("owned by MachineDeployment default/md")
    );
}

mod configured {
    use super::*;
    use crate::fixtures::{machineset, snapshot};

    fn spec(name: &str, min: u64, max: u64) -> NodeGroupSpec {
        NodeGroupSpec {
            kind: "MachineSet".into(),
            namespace: "openshift-machine-api".into(),
            name: name.into(),
            api_group: None,
            min,
            max,
        }
    }

    #[test]
    fn fleet_toml_groups_win_and_say_what_they_override() {
        let mut plain = machineset("plain", 0, 1, 2).json();
        plain["metadata"]["annotations"] = serde_json::json!({});
        let s = snapshot([machineset("annotated", 1, 3, 1).json(), plain]);
        let groups = discover(
            &s,
            &[
                spec("annotated", 2, 9),
                spec("plain", 0, 4),
                spec("gone", 0, 1),
            ],
        );
        let g: Vec<(&str, u64, u64)> = groups
            .groups
            .iter()
            .map(|g| (g.id.as_str(), g.min, g.max))
            .collect();
        assert_eq!(
            g,
            vec![
                (
                    "MachineSet.machine.openshift.io/openshift-machine-api/annotated",
                    2,
                    9
                ),
                (
                    "MachineSet.machine.openshift.io/openshift-machine-api/plain",
                    0,
                    4
                )
            ]
        );
        assert_eq!(groups.groups[0].bounds_source, BoundsSource::Config);
        assert_eq!(
            groups.groups[0].bounds_note.as_deref(),
            Some("fleet.toml sets min=2 max=9, overriding annotations min=1 max=3")
        );
        assert_eq!(groups.groups[1].bounds_note, None);
        assert!(groups.warnings[0].to_string().contains("gone"));
    }
}

mod both_machine_apis {
    use super::*;
    use crate::fixtures::{cluster_api_machine, machine, machineset, node, snapshot};
    use serde_json::json;

    /// A node linked to its machine by the group's `<group>/machine` annotation only.
    fn annotated_node(name: &str, annotation: &str) -> serde_json::Value {
        let mut n = node(name).json();
        n["metadata"]["annotations"] =
            json!({annotation: format!("openshift-machine-api/{name}-m")});
        if annotation.starts_with("cluster.x-k8s.io") {
            n["metadata"]["annotations"] = json!({
                "cluster.x-k8s.io/machine": format!("{name}-m"),
                "cluster.x-k8s.io/cluster-namespace": "openshift-machine-api"});
        }
        n
    }

    #[test]
    fn same_named_machinesets_of_the_two_apis_are_two_groups() {
        let mut os_machine = machine("m", "a", None);
        os_machine["spec"]["providerID"] = json!("test:///os-node");
        let mut capi_machine = cluster_api_machine(machine("m", "a", None));
        capi_machine["spec"]["providerID"] = json!("test:///capi-node");
        let s = snapshot([
            machineset("a", 1, 3, 1).json(),
            machineset("a", 2, 6, 1).cluster_api().json(),
            os_machine,
            capi_machine,
            node("os-node").provider_id("test:///os-node").json(),
            node("capi-node").provider_id("test:///capi-node").json(),
        ]);
        let groups = discover(&s, &[]);
        let found: Vec<(&str, u64, Vec<&str>)> = groups
            .groups
            .iter()
            .map(|g| {
                let nodes = g.nodes.iter().map(|&n| &*s.nodes[n].name).collect();
                (g.id.as_str(), g.max, nodes)
            })
            .collect();
        assert_eq!(
            found,
            vec![
                (
                    "MachineSet.cluster.x-k8s.io/openshift-machine-api/a",
                    6,
                    vec!["capi-node"]
                ),
                (
                    "MachineSet.machine.openshift.io/openshift-machine-api/a",
                    3,
                    vec!["os-node"]
                ),
            ]
        );
        assert_eq!(groups.groups[0].machines.len(), 1);
        assert_eq!(groups.groups[1].machines.len(), 1);
    }

    #[test]
    fn a_node_annotation_names_the_machine_of_its_own_api() {
        let os_node = "os";
        let capi_node = "capi";
        let s = snapshot([
            machineset("a", 1, 3, 1).json(),
            machineset("a", 1, 3, 1).cluster_api().json(),
            machine(&format!("{os_node}-m"), "a", None),
            machine(&format!("{capi_node}-m"), "a", None),
            cluster_api_machine(machine(&format!("{os_node}-m"), "a", None)),
            cluster_api_machine(machine(&format!("{capi_node}-m"), "a", None)),
            annotated_node(os_node, "machine.openshift.io/machine"),
            annotated_node(capi_node, "cluster.x-k8s.io/machine"),
        ]);
        let groups = discover(&s, &[]);
        let api_of_node = |name: &str| {
            let ni = s.nodes.iter().position(|n| &*n.name == name).unwrap();
            let mi = groups.machine_of_node[ni].unwrap();
            let gi = groups.group_of_node[ni].unwrap();
            (s.machines[mi].api, groups.groups[gi].api)
        };
        assert_eq!(
            api_of_node(os_node),
            (MachineApiGroup::OpenShift, MachineApiGroup::OpenShift)
        );
        assert_eq!(
            api_of_node(capi_node),
            (MachineApiGroup::ClusterApi, MachineApiGroup::ClusterApi)
        );
    }

    #[test]
    fn a_fleet_toml_entry_without_api_group_must_not_be_ambiguous() {
        let s = snapshot([
            machineset("a", 1, 3, 1).json(),
            machineset("a", 1, 3, 1).cluster_api().json(),
            machineset("only-capi", 1, 3, 1).cluster_api().json(),
        ]);
        let spec = |name: &str, api_group: Option<&str>| NodeGroupSpec {
            kind: "MachineSet".into(),
            namespace: "openshift-machine-api".into(),
            name: name.into(),
            api_group: api_group.map(String::from),
            min: 0,
            max: 9,
        };
        let groups = discover(
            &s,
            &[
                spec("a", None),
                spec("only-capi", None),
                spec("a", Some("cluster.x-k8s.io")),
            ],
        );
        let from_config: Vec<&str> = groups
            .groups
            .iter()
            .filter(|g| g.bounds_source == BoundsSource::Config)
            .map(|g| g.id.as_str())
            .collect();
        assert_eq!(
            from_config,
            vec![
                "MachineSet.cluster.x-k8s.io/openshift-machine-api/a",
                "MachineSet.cluster.x-k8s.io/openshift-machine-api/only-capi"
            ]
        );
        assert_eq!(groups.warnings.len(), 1, "{:?}", groups.warnings);
        assert!(
            groups.warnings[0].to_string().starts_with(
                "fleet.toml node_groups: MachineSet/openshift-machine-api/a is ambiguous"
            ),
            "{:?}",
            groups.warnings
        );
    }
}
