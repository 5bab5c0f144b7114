//! Reading a saved cluster dump into a [`ClusterSnapshot`]: what
//! `oc get nodes,pods,pdb,machinesets,machines,... -A -o yaml` prints (a `List`),
//! multi-document YAML, or JSON. Unknown kinds are skipped and counted; an object that
//! cannot be read is an error naming the source, the item and the field.
//!
//! This takes text, not paths: reading files is the caller's business.

use std::collections::BTreeMap;

use k8s_openapi::api::{apps::v1 as appsv1, core::v1 as corev1, policy::v1 as policyv1};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::autoscaler::{ClusterAutoscaler, MachineAutoscaler};
use super::infra::{INFRASTRUCTURE_GROUP, InfrastructureTemplate};
use super::machine::{Machine, ScalableResource};
use super::machine_api::MachineApiGroup;
use super::machine_kind::MachineKind;
use super::meta::{FieldError, Projector, key_of};
use super::node::Node;
use super::pod::Pod;
use super::snapshot::{ClusterSnapshot, PRIORITY_EXPANDER_CONFIGMAP, PriorityExpanderConfig};
use super::warning::{Warning, WarningCode};
use super::workload::{DaemonSet, Namespace, PodDisruptionBudget};

/// Why a dump could not be read: the file, where in it, and what was wrong.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {location}{message}")]
pub struct DumpError {
    pub kind: DumpErrorKind,
    pub file: String,
    /// `document 2, items[5] (Pod shop/web-1): `, or empty for a syntax error.
    pub location: String,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpErrorKind {
    /// Not YAML or JSON at all.
    Syntax,
    /// Not shaped like Kubernetes objects (no kind, not an object).
    Shape,
    /// A Kubernetes object with a field that cannot be read.
    Object,
}

/// What was read: object counts, the kinds skipped because the engine does not use them,
/// and what a person should know about what was left out (Machine API objects of a version
/// the hub does not read).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DumpReport {
    pub objects: usize,
    pub skipped: BTreeMap<String, usize>,
    pub warnings: Vec<Warning>,
}

/// Accumulates one or more dumps into one snapshot.
#[derive(Default)]
pub struct SnapshotBuilder {
    snapshot: ClusterSnapshot,
    projector: Projector,
    report: DumpReport,
    /// Machine API objects of a version the hub does not read: (apiVersion, kind) → count.
    unsupported: BTreeMap<(String, String), usize>,
}

impl SnapshotBuilder {
    /// Adds every object of one dump; `source` names it in errors (usually the file path).
    pub fn add_text(&mut self, text: &str, source: &str) -> Result<(), DumpError> {
        let documents = parse_documents(text).map_err(|e| DumpError {
            kind: DumpErrorKind::Syntax,
            file: source.to_string(),
            location: "not valid YAML or JSON: ".to_string(),
            message: e.to_string(),
        })?;
        let many = documents.len() > 1;
        for (d, doc) in documents.into_iter().enumerate() {
            let item = if many {
                format!("document {}", d + 1)
            } else {
                "document".to_string()
            };
            self.add_value(doc, source, &item)?;
        }
        Ok(())
    }

    pub fn finish(mut self) -> (ClusterSnapshot, DumpReport) {
        self.report.warnings = self
            .unsupported
            .iter()
            .map(|((api_version, kind), n)| {
                let group = MachineApiGroup::from_api_version(api_version);
                let understood = group
                    .map(|g| {
                        let names: Vec<&str> = g.understood().iter().map(|v| v.as_str()).collect();
                        names.join(" and ")
                    })
                    .unwrap_or_default();
                Warning::general(
                    WarningCode::UnsupportedVersion,
                    format!(
                        "{n} {kind} object(s) of {api_version} left out: fleetscaler reads {} {understood} only",
                        group.map_or("", MachineApiGroup::domain)
                    ),
                )
            })
            .collect();
        (self.snapshot, self.report)
    }

    fn add_value(&mut self, value: Value, source: &str, item: &str) -> Result<(), DumpError> {
        let shape = |message: String| DumpError {
            kind: DumpErrorKind::Shape,
            file: source.to_string(),
            location: format!("{item}: "),
            message,
        };
        let Value::Object(mut map) = value else {
            return Err(shape(format!(
                "expected an object, found {}",
                kind_of_value(&value)
            )));
        };
        let kind = map
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if kind.ends_with("List") && map.contains_key("items") {
            let Some(Value::Array(items)) = map.remove("items") else {
                return Err(shape(format!("{kind}.items is not a list")));
            };
            for (i, it) in items.into_iter().enumerate() {
                self.add_value(it, source, &format!("{item}, items[{i}]"))?;
            }
            return Ok(());
        }
        let api_version = map
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if kind.is_empty() || api_version.is_empty() {
            let missing = if kind.is_empty() {
                "kind"
            } else {
                "apiVersion"
            };
            return Err(shape(format!(
                "object {} has no {missing}: every object (and every item of a list) needs kind and apiVersion, as kubectl and the apiserver require",
                object_name(&map)
            )));
        }
        let name = object_name(&map);
        let value = Value::Object(map);
        self.add_object(&api_version, &kind, value)
            .map_err(|field| DumpError {
                kind: DumpErrorKind::Object,
                file: source.to_string(),
                location: format!("{item} ({kind} {name}): "),
                message: with_yaml_hint(field.to_string()),
            })
    }

    fn add_object(
        &mut self,
        api_version: &str,
        kind: &str,
        value: Value,
    ) -> Result<(), FieldError> {
        let p = &mut self.projector;
        let s = &mut self.snapshot;
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        match (group, kind) {
            ("", "Node") => s
                .nodes
                .push(Node::from_k8s(&typed::<corev1::Node>(value)?, p)?),
            ("", "Pod") => s
                .pods
                .push(Pod::from_k8s(&typed::<corev1::Pod>(value)?, p)?),
            ("", "Namespace") => s
                .namespaces
                .push(Namespace::from_k8s(&typed::<corev1::Namespace>(value)?, p)),
            ("", "ConfigMap") => return self.add_configmap(value),
            ("policy", "PodDisruptionBudget") => {
                // policy/v1beta1 has the same fields the engine reads.
                let v1 = with_api_version(value, "policy/v1");
                s.pdbs.push(PodDisruptionBudget::from_k8s(
                    &typed::<policyv1::PodDisruptionBudget>(v1)?,
                    p,
                )?);
            }
            ("apps", "DaemonSet") => s
                .daemonsets
                .push(DaemonSet::from_k8s(&typed::<appsv1::DaemonSet>(value)?, p)?),
            ("autoscaling.openshift.io", "ClusterAutoscaler") => s
                .cluster_autoscalers
                .push(ClusterAutoscaler::from_json(value)?),
            ("autoscaling.openshift.io", "MachineAutoscaler") => s
                .machine_autoscalers
                .push(MachineAutoscaler::from_json(value, p)?),
            // Any provider's machine template: node groups at zero may read its capacity.
            (INFRASTRUCTURE_GROUP, k) if k.ends_with("Template") => s
                .infrastructure_templates
                .push(InfrastructureTemplate::from_object(group, kind, value, p)?),
            _ => return self.add_machine_api_object(api_version, kind, value),
        }
        self.report.objects += 1;
        Ok(())
    }

    /// Objects of the Machine API kinds ([`MachineKind::ALL`]) of a version the hub reads (both
    /// versions of Cluster API: the projections read the fields where they agree, and the
    /// moved ones from both places). The same kinds at another version are left out with a
    /// warning; anything else is counted as skipped.
    fn add_machine_api_object(
        &mut self,
        api_version: &str,
        kind: &str,
        value: Value,
    ) -> Result<(), FieldError> {
        let described = MachineKind::named(kind);
        let group = MachineApiGroup::from_api_version(api_version);
        let Some((api, described)) = group.zip(described) else {
            *self
                .report
                .skipped
                .entry(format!("{kind} ({api_version})"))
                .or_default() += 1;
            return Ok(());
        };
        let version = api_version.rsplit_once('/').map_or("", |(_, v)| v);
        if api.understands(version).is_none() {
            *self
                .unsupported
                .entry((api_version.to_string(), kind.to_string()))
                .or_default() += 1;
            return Ok(());
        }
        let p = &mut self.projector;
        // Per kind: the projection. Machines are the one kind that does not scale; a new
        // kind that does not scale needs a projection of its own here.
        match described.scalable {
            Some(k) => self
                .snapshot
                .scalables
                .push(ScalableResource::from_json(api, k, value, p)?),
            None => self
                .snapshot
                .machines
                .push(Machine::from_json(api, value, p)?),
        }
        self.report.objects += 1;
        Ok(())
    }

    fn add_configmap(&mut self, value: Value) -> Result<(), FieldError> {
        let cm = typed::<corev1::ConfigMap>(value)?;
        if cm.metadata.name.as_deref() != Some(PRIORITY_EXPANDER_CONFIGMAP) {
            *self
                .report
                .skipped
                .entry("ConfigMap (v1)".to_string())
                .or_default() += 1;
            return Ok(());
        }
        let config = PriorityExpanderConfig {
            key: key_of(&cm.metadata, &mut self.projector),
            priorities: cm.data.and_then(|mut d| d.remove("priorities")),
        };
        // The autoscaler's own namespace wins over a copy elsewhere.
        let preferred = |c: &PriorityExpanderConfig| {
            matches!(&*c.key.namespace, "openshift-machine-api" | "kube-system")
        };
        if self
            .snapshot
            .priority_expander
            .as_ref()
            .is_none_or(|old| !preferred(old) || preferred(&config))
        {
            self.snapshot.priority_expander = Some(config);
        }
        self.report.objects += 1;
        Ok(())
    }
}

fn typed<T: DeserializeOwned>(value: Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value)
        .map_err(|e| FieldError::new(e.path().to_string(), e.inner()))
}

fn with_api_version(mut value: Value, api_version: &str) -> Value {
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), Value::String(api_version.into()));
    }
    value
}

fn object_name(map: &serde_json::Map<String, Value>) -> String {
    let meta = map.get("metadata");
    let field = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    match (field("namespace"), field("name")) {
        ("", "") => "<unnamed>".to_string(),
        ("", name) => name.to_string(),
        (ns, name) => format!("{ns}/{name}"),
    }
}

/// Dumps are read as kubectl reads them: an unquoted `y`, `yes`, `on` is a YAML 1.1
/// boolean, which no string field takes. Say so, since the text looks like a string.
fn with_yaml_hint(message: String) -> String {
    if message.contains("invalid type: boolean") && message.contains("expected a string") {
        format!(
            "{message} (an unquoted y, yes, on, n, no or off is a boolean in YAML, as kubectl reads it too: quote it)"
        )
    } else {
        message
    }
}

fn kind_of_value(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// JSON (one value, or several concatenated) or multi-document YAML. A top-level list (a
/// JSON array, a YAML sequence) holds objects, as a `List`'s items do.
/// The YAML parser's limits, grown with the dump: the default 250,000 nodes is a cluster of
/// about a thousand pods, and a dump is as large as its cluster. Every node takes at least
/// two bytes of text, so nodes and events stay bounded by the text's size; aliases keep the
/// parser's own limits, so an alias bomb still cannot expand past them.
fn yaml_options(len: usize) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = budget.max_nodes.max(len / 2);
    budget.max_events = budget.max_events.max(len);
    budget.max_documents = budget.max_documents.max(len / 16);
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(len);
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

fn parse_documents(text: &str) -> Result<Vec<Value>, serde_saphyr::Error> {
    let trimmed = text.trim_start();
    let json = (trimmed.starts_with('{') || trimmed.starts_with('['))
        .then(|| {
            serde_json::Deserializer::from_str(text)
                .into_iter::<Value>()
                .collect::<Result<Vec<Value>, _>>()
        })
        .and_then(Result::ok);
    // Flow-style YAML (`{kind: List, items: []}`) starts like JSON and is not JSON.
    let values = match json {
        Some(values) => values,
        None => serde_saphyr::from_multiple_with_options::<Value>(text, yaml_options(text.len()))?,
    };
    Ok(values
        .into_iter()
        .flat_map(|v| match v {
            Value::Array(items) => items,
            other => vec![other],
        })
        .collect())
}

#[cfg(test)]
mod tests {
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
            err.starts_with(
                "dump.yaml: document (Node a): metadata.labels.app: invalid type: boolean"
            ) && err.ends_with("as kubectl reads it too: quote it)"),
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
            s.priority_expander.unwrap().priorities.as_deref(),
            Some("10:\n- .*")
        );
    }
}
