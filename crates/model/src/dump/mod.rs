//! Reading a saved cluster dump into a [`ClusterSnapshot`]: what `fleetscaler dump` writes
//! (a `List`, with a typed empty list such as `JobList` for each kind listed empty, so that
//! the kind still reads as listed), what `oc get nodes,pods,pdb,... -A -o yaml` prints,
//! multi-document YAML, or JSON. Unknown kinds are skipped and counted; an object that
//! cannot be read is an error naming the source, the item and the field. Controllers (only
//! looked up by the drain rules) are the exception: one that cannot be read is a warning
//! naming it.
//!
//! This takes text, not paths: reading files is the caller's business.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::{
    apps::v1 as appsv1, core::v1 as corev1, policy::v1 as policyv1, storage::v1 as storagev1,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

mod stream;

use super::autoscaler::{ClusterAutoscaler, MachineAutoscaler};
use super::controller::{Controller, ControllerKind, Listing};
use super::infra::{INFRASTRUCTURE_GROUP, InfrastructureTemplate};
use super::machine::{Machine, ScalableResource};
use super::machine_api::MachineApiGroup;
use super::machine_kind::{MACHINE, MachineKind};
use super::meta::{FieldError, Projector, api_group, key_of};
use super::node::Node;
use super::pod::Pod;
use super::provisioning::{self, PodTemplate, ProvisioningRequest};
use super::quote::bounded;
use super::snapshot::{ClusterSnapshot, PRIORITY_EXPANDER_CONFIGMAP, PriorityExpanderConfig};
use super::storage::{CsiNode, PersistentVolume, PersistentVolumeClaim, StorageClass};
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
    /// The Machine APIs whose Machines the dump holds: any Machine of the API, or a typed
    /// `MachineList` of it, even empty (`fleetscaler dump` writes one for an API that has
    /// none). `oc get machines` resolves to one API only, so a dump can lack another's
    /// Machines entirely, and a group of it that wants replicas then looks as if every one
    /// were still coming.
    pub machines_listed: BTreeSet<MachineApiGroup>,
}

/// Accumulates one or more dumps into one snapshot.
#[derive(Default)]
pub struct SnapshotBuilder {
    snapshot: ClusterSnapshot,
    projector: Projector,
    report: DumpReport,
    /// Machine API objects of a version the hub does not read: (apiVersion, kind) → count.
    unsupported: BTreeMap<(String, String), usize>,
    /// Controller kinds the dump holds objects or a list of (see [`Listing`]).
    listed: BTreeSet<ControllerKind>,
    /// Controller kinds with an object that could not be named: which pod's controller it
    /// was is unknown, so none of that kind is judged missing. Says which object and why.
    unnamed: BTreeMap<ControllerKind, String>,
    /// A DRA kind the dump could not list: DRA is off, as the hub has it when refused one.
    dra_refused: bool,
}

impl SnapshotBuilder {
    /// Adds every object of one dump; `source` names it in errors (usually the file path).
    pub fn add_text(&mut self, text: &str, source: &str) -> Result<(), DumpError> {
        let mut add = |value: Value, item: &str| self.add_value(value, source, item);
        stream::for_each_object(text, &mut add).map_err(|stop| match stop {
            stream::Stop::Object(refused) => refused,
            stream::Stop::Syntax(message) => DumpError {
                kind: DumpErrorKind::Syntax,
                file: source.to_string(),
                location: "not valid YAML or JSON: ".to_string(),
                message,
            },
        })
    }

    pub fn finish(mut self) -> (ClusterSnapshot, DumpReport) {
        self.set_listings();
        if self.dra_refused {
            self.snapshot.dra.listed = false;
        }
        // A dump with any claim, volume or class was made with storage in mind (a typed
        // empty list of them counts too); one without leaves volumes unsimulated.
        let st = &mut self.snapshot.storage;
        st.listed |= !(st.claims.is_empty() && st.volumes.is_empty() && st.classes.is_empty());
        let mut warnings: Vec<Warning> = self
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
        warnings.append(&mut self.report.warnings);
        self.report.warnings = warnings;
        (self.snapshot, self.report)
    }

    /// A kind the dump holds (objects, or an empty `<Kind>List`) is complete; one it does not
    /// hold says nothing about pods' controllers; one with an object that has no name
    /// cannot be trusted either way.
    fn set_listings(&mut self) {
        for kind in ControllerKind::ALL {
            let listing = match self.unnamed.get(&kind) {
                Some(why) => Listing::Unreadable(why.as_str().into()),
                None if self.listed.contains(&kind) => Listing::Complete,
                None => Listing::Unlisted,
            };
            self.snapshot.controllers.set_listing(kind, listing);
        }
    }

    /// One ReplicationController, Job, ReplicaSet or StatefulSet. Bad input is a warning
    /// naming the object, never an error: the controller is kept whenever it can be named.
    fn add_controller(&mut self, kind: ControllerKind, value: &Value) {
        self.listed.insert(kind);
        let subject = format!(
            "{} {}",
            kind.name(),
            value.as_object().map_or_else(String::new, object_name)
        );
        match Controller::from_json(value, &mut self.projector) {
            Ok((controller, problem)) => {
                if let Some(list) = self.snapshot.controllers.of_mut(kind) {
                    list.push(controller);
                }
                if let Some(problem) = problem {
                    self.report.warnings.push(Warning::about(
                        WarningCode::UnreadableObject,
                        subject,
                        format!("{problem}; the controller counts as present"),
                    ));
                }
            }
            Err(problem) => {
                let why = format!("{subject} in the dump cannot be read ({problem})");
                self.report.warnings.push(Warning::about(
                    WarningCode::UnreadableObject,
                    subject,
                    format!("{problem}; no pod's {} is judged missing", kind.name()),
                ));
                self.unnamed.entry(kind).or_insert(why);
            }
        }
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
            match refused_list(&map) {
                Some(why) => self.note_refused_list(&map, &kind, why),
                None => self.note_controller_list(&map, &kind),
            }
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

    /// A kind `fleetscaler dump` was not allowed to list, marked so on its empty typed
    /// list: as for the hub, a pod's controller of that kind is never judged missing, and
    /// the kind does not count as listed.
    fn note_refused_list(&mut self, map: &serde_json::Map<String, Value>, kind: &str, why: &str) {
        let api_version = map
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let item_kind = kind.strip_suffix("List").unwrap_or_default();
        let what = format!("{item_kind} ({api_version})");
        let mut message = format!("the dump could not list {what}: {}", bounded(why, 300));
        if let Some(c) =
            api_group(api_version).and_then(|g| ControllerKind::of_object(g, item_kind))
        {
            self.unnamed
                .entry(c)
                .or_insert_with(|| format!("{what} could not be listed when the dump was made"));
            message.push_str(&format!("; no pod's {} is judged missing", c.name()));
        }
        if api_group(api_version) == Some(super::dra::GROUP) && DRA_KINDS.contains(&item_kind) {
            self.dra_refused = true;
            message.push_str("; pods with resource claims are not simulated");
        }
        self.report
            .warnings
            .push(Warning::general(WarningCode::NotAllowed, message));
    }

    /// `kubectl get --raw` answers with a typed list (`ReplicaSetList`), and `fleetscaler
    /// dump` writes one for each kind it listed empty: even empty, it says the kind was listed.
    fn note_controller_list(&mut self, map: &serde_json::Map<String, Value>, kind: &str) {
        let api_version = map
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let item_kind = kind.strip_suffix("List").unwrap_or_default();
        if item_kind == MACHINE.name
            && let Some(api) = MachineApiGroup::from_api_version(api_version)
        {
            self.report.machines_listed.insert(api);
        }
        if matches!(
            item_kind,
            "PersistentVolumeClaim" | "PersistentVolume" | "StorageClass"
        ) {
            self.snapshot.storage.listed = true;
        }
        if item_kind == "ProvisioningRequest" && api_group(api_version) == Some(provisioning::GROUP)
        {
            self.snapshot.provisioning.listed = true;
        }
        if api_group(api_version) == Some(super::dra::GROUP) && DRA_KINDS.contains(&item_kind) {
            self.snapshot.dra.listed = true;
        }
        if let Some(c) =
            api_group(api_version).and_then(|g| ControllerKind::of_object(g, item_kind))
        {
            self.listed.insert(c);
        }
    }

    fn add_object(
        &mut self,
        api_version: &str,
        kind: &str,
        value: Value,
    ) -> Result<(), FieldError> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        // DaemonSets are read whole, for templates; the other controllers only as keys.
        if let Some(c) =
            ControllerKind::of_object(group, kind).filter(|c| *c != ControllerKind::DaemonSet)
        {
            self.add_controller(c, &value);
            self.report.objects += 1;
            return Ok(());
        }
        let p = &mut self.projector;
        let s = &mut self.snapshot;
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
            ("", "PodTemplate") => return self.add_pod_template(value),
            (provisioning::GROUP, "ProvisioningRequest") => {
                return self.add_provisioning_request(api_version, value);
            }
            ("", "PersistentVolumeClaim") => s.storage.claims.push(
                PersistentVolumeClaim::from_k8s(&typed::<corev1::PersistentVolumeClaim>(value)?, p),
            ),
            ("", "PersistentVolume") => {
                let pv = typed::<corev1::PersistentVolume>(value)?;
                let volume = PersistentVolume::from_k8s(&pv, p).unwrap_or_else(|e| {
                    let why = e.to_string();
                    let name = pv.metadata.name.as_deref().unwrap_or_default();
                    self.report.warnings.push(Warning::about(
                        WarningCode::UnreadableObject,
                        format!("PersistentVolume {name}"),
                        format!("{why}; only the pods whose claims are bound to it are held"),
                    ));
                    PersistentVolume::unreadable(&pv, &why, p)
                });
                s.storage.volumes.push(volume);
            }
            ("storage.k8s.io", "StorageClass") => s.storage.classes.push(StorageClass::from_k8s(
                &typed::<storagev1::StorageClass>(value)?,
                p,
            )),
            ("storage.k8s.io", "CSINode") => s
                .storage
                .csi_nodes
                .push(CsiNode::from_k8s(&typed::<storagev1::CSINode>(value)?, p)),
            ("policy", "PodDisruptionBudget") => {
                // policy/v1beta1 has the same fields the engine reads.
                let v1 = with_api_version(value, "policy/v1");
                s.pdbs.push(PodDisruptionBudget::from_k8s(
                    &typed::<policyv1::PodDisruptionBudget>(v1)?,
                    p,
                )?);
            }
            ("apps", "DaemonSet") => {
                s.daemonsets
                    .push(DaemonSet::from_k8s(&typed::<appsv1::DaemonSet>(value)?, p)?);
                self.listed.insert(ControllerKind::DaemonSet);
            }

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
            (super::dra::GROUP, _) => return self.add_dra(api_version, kind, value),
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
            None => {
                self.snapshot
                    .machines
                    .push(Machine::from_json(api, value, p)?);
                self.report.machines_listed.insert(api);
            }
        }
        self.report.objects += 1;
        Ok(())
    }

    /// A PodTemplate: a spec that cannot be read is a warning naming it (the requests
    /// naming it are then not simulated), never an error.
    fn add_pod_template(&mut self, value: Value) -> Result<(), FieldError> {
        let t = typed::<corev1::PodTemplate>(value)?;
        let (template, problem) = PodTemplate::from_k8s(&t, &mut self.projector);
        if let Some(problem) = problem {
            self.report.warnings.push(Warning::about(
                WarningCode::UnreadableObject,
                format!("PodTemplate {}", template.key),
                format!("{problem}; the ProvisioningRequests naming it are not simulated"),
            ));
        }
        self.snapshot.provisioning.pod_templates.push(template);
        self.report.objects += 1;
        Ok(())
    }

    /// A ProvisioningRequest of a version read (`v1`, `v1beta1`); another version is left
    /// out, counted as skipped. One that breaks the CRD's bounds, or cannot be read, is kept
    /// with its problem (a warning; the engine leaves it alone), never refusing the dump.
    fn add_provisioning_request(
        &mut self,
        api_version: &str,
        value: Value,
    ) -> Result<(), FieldError> {
        let version = api_version.rsplit_once('/').map_or("", |(_, v)| v);
        if !provisioning::VERSIONS.contains(&version) {
            *self
                .report
                .skipped
                .entry(format!("ProvisioningRequest ({api_version})"))
                .or_default() += 1;
            return Ok(());
        }
        let request =
            ProvisioningRequest::from_json(&value, &mut self.projector).unwrap_or_else(|e| {
                let why = e.to_string();
                let r = ProvisioningRequest::unreadable(&value, &why, &mut self.projector);
                self.report.warnings.push(Warning::about(
                    WarningCode::UnreadableObject,
                    format!("ProvisioningRequest {}", r.key),
                    format!("{why}; it is left alone"),
                ));
                r
            });
        self.snapshot.provisioning.listed = true;
        self.snapshot.provisioning.requests.push(request);
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
        self.snapshot.priority_expanders.push(config);
        self.report.objects += 1;
        Ok(())
    }
}

/// The annotation `fleetscaler dump` puts on the empty typed list of a kind it was not
/// allowed to list, saying why.
pub const UNREADABLE_ANNOTATION: &str = "fleetscaler.io/unreadable";

fn refused_list(map: &serde_json::Map<String, Value>) -> Option<&str> {
    map.get("metadata")?
        .get("annotations")?
        .get(UNREADABLE_ANNOTATION)?
        .as_str()
}

/// The kinds of `resource.k8s.io` the allocator reads.
const DRA_KINDS: [&str; 4] = [
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
    "DeviceClass",
];

impl SnapshotBuilder {
    /// A DRA object: v1, or v1beta2 (the same shape). One that cannot be read is a warning
    /// naming it and is left out (a pod needing it is then held, never scaled up for).
    fn add_dra(&mut self, api_version: &str, kind: &str, value: Value) -> Result<(), FieldError> {
        if !DRA_KINDS.contains(&kind) {
            self.report
                .skipped
                .entry(kind.to_string())
                .and_modify(|n| *n += 1)
                .or_insert(1);
            return Ok(());
        }
        self.snapshot.dra.listed = true;
        let subject = format!(
            "{kind} {}",
            value.as_object().map_or_else(String::new, object_name)
        );
        let version = api_version.rsplit_once('/').map_or("", |(_, v)| v);
        let value = match super::dra::as_v1(value, version) {
            Some(value) => value,
            None => {
                self.report.warnings.push(Warning::about(
                    WarningCode::UnsupportedVersion,
                    subject,
                    format!(
                        "{api_version} is not read (resource.k8s.io v1, v1beta2 and v1beta1 only); left out"
                    ),
                ));
                return Ok(());
            }
        };
        let p = &mut self.projector;
        let d = &mut self.snapshot.dra;
        let read = match kind {
            "ResourceClaim" => typed(value)
                .and_then(|c| super::dra::ResourceClaim::from_k8s(&c, p))
                .map(|c| d.claims.push(c)),
            "ResourceClaimTemplate" => typed(value)
                .and_then(|t| super::dra::ResourceClaimTemplate::from_k8s(&t, p))
                .map(|t| d.templates.push(t)),
            "ResourceSlice" => typed(value)
                .and_then(|s| super::dra::ResourceSlice::from_k8s(&s, p))
                .map(|s| d.slices.push(s)),
            _ => typed(value)
                .and_then(|c| super::dra::DeviceClass::from_k8s(&c, p))
                .map(|c| d.classes.push(c)),
        };
        self.report.objects += 1;
        if let Err(e) = read {
            self.report.warnings.push(Warning::about(
                WarningCode::UnreadableObject,
                subject,
                format!("{e}; left out"),
            ));
        }
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

#[cfg(test)]
mod tests;
