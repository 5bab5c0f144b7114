//! Cluster API infrastructure machine templates (AWSMachineTemplate, DockerMachineTemplate,
//! any provider's kind): the capacity a new machine of a group will have, for scale from zero
//! when the group carries no capacity annotations. Providers that support it publish
//! `status.capacity` (resource name to quantity) and `status.nodeInfo` (architecture,
//! operatingSystem) on the template; nothing else of the object is read.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use super::meta::{FieldError, Projector, key_of};
use super::quantity::Quantity;

/// The one API group every Cluster API infrastructure provider uses for its templates.
pub const INFRASTRUCTURE_GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// Which infrastructure template a MachineSet or MachineDeployment points at. The template
/// lives in the resource's namespace; the version is whichever the cluster serves (v1beta1
/// resources name an `apiVersion`, v1beta2 ones only an `apiGroup`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InfraRef {
    pub api_group: Arc<str>,
    pub kind: Arc<str>,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl fmt::Display for InfraRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{} {}/{}",
            self.kind, self.api_group, self.namespace, self.name
        )
    }
}

/// What an infrastructure template says about the machines made from it.
#[derive(Clone, Debug, PartialEq)]
pub struct InfrastructureTemplate {
    pub reference: InfraRef,
    /// `status.capacity`, entries that are not quantities left out (see `skipped`).
    pub capacity: BTreeMap<Arc<str>, Quantity>,
    /// `status.nodeInfo.architecture` (e.g. `arm64`).
    pub architecture: Option<Arc<str>>,
    /// `status.nodeInfo.operatingSystem` (e.g. `linux`, `windows`).
    pub operating_system: Option<Arc<str>>,
    /// Entries of `status.capacity` that could not be read, each with why.
    pub skipped: Vec<String>,
}

/// At most this many capacity entries are kept: a template is a handful of resources, and
/// a hostile one must not grow the hub.
const MAX_CAPACITY_ENTRIES: usize = 64;

#[derive(Deserialize, Default)]
#[serde(default)]
struct Wire {
    metadata: ObjectMeta,
    status: StatusWire,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct StatusWire {
    capacity: BTreeMap<String, serde_json::Value>,
    node_info: NodeInfoWire,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct NodeInfoWire {
    architecture: Option<String>,
    operating_system: Option<String>,
}

impl InfrastructureTemplate {
    /// Reads the template object `reference` names, as the API server returned it.
    pub fn from_json(reference: InfraRef, value: serde_json::Value) -> Result<Self, FieldError> {
        Ok(Self::from_wire(reference, parse(value)?))
    }

    /// Reads a template object found in a dump: its reference is its own kind and name.
    pub fn from_object(
        api_group: &str,
        kind: &str,
        value: serde_json::Value,
        p: &mut Projector,
    ) -> Result<Self, FieldError> {
        let wire = parse(value)?;
        let key = key_of(&wire.metadata, p);
        let reference = InfraRef {
            api_group: p.str(api_group),
            kind: p.str(kind),
            namespace: key.namespace,
            name: key.name,
        };
        Ok(Self::from_wire(reference, wire))
    }

    fn from_wire(reference: InfraRef, wire: Wire) -> Self {
        let mut capacity = BTreeMap::new();
        let mut skipped = Vec::new();
        for (name, value) in wire.status.capacity.into_iter().take(MAX_CAPACITY_ENTRIES) {
            let text = match &value {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                other => other.to_string(),
            };
            match Quantity::parse_non_negative(text.trim()) {
                Ok(q) => {
                    capacity.insert(Arc::from(name), q);
                }
                Err(e) => skipped.push(format!("status.capacity.{name} = {text:?}: {e}")),
            }
        }
        let text = |s: Option<String>| s.filter(|s| !s.trim().is_empty()).map(Arc::from);
        InfrastructureTemplate {
            reference,
            capacity,
            architecture: text(wire.status.node_info.architecture),
            operating_system: text(wire.status.node_info.operating_system),
            skipped,
        }
    }

    pub fn get(&self, resource: &str) -> Option<Quantity> {
        self.capacity.get(resource).copied()
    }
}

fn parse(value: serde_json::Value) -> Result<Wire, FieldError> {
    serde_path_to_error::deserialize(value)
        .map_err(|e| FieldError::new(e.path().to_string(), e.inner()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reference() -> InfraRef {
        InfraRef {
            api_group: INFRASTRUCTURE_GROUP.into(),
            kind: "DockerMachineTemplate".into(),
            namespace: "default".into(),
            name: "workers".into(),
        }
    }

    #[test]
    fn capacity_and_node_info_are_read() {
        let t = InfrastructureTemplate::from_json(
            reference(),
            json!({"status": {
                "capacity": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 1, "pods": "110"},
                "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux"}}}),
        )
        .unwrap();
        assert_eq!(t.get("cpu").map(|q| q.milli_ceil()), Some(4000));
        assert_eq!(t.get("memory").map(|q| q.units_ceil()), Some(16 << 30));
        assert_eq!(t.get("nvidia.com/gpu").map(|q| q.units_ceil()), Some(1));
        assert_eq!(t.architecture.as_deref(), Some("arm64"));
        assert_eq!(t.operating_system.as_deref(), Some("linux"));
        assert!(t.skipped.is_empty());
    }

    #[test]
    fn a_malformed_entry_is_skipped_and_named() {
        let t = InfrastructureTemplate::from_json(
            reference(),
            json!({"status": {"capacity": {"cpu": "four", "memory": "8Gi", "x": "-1"}}}),
        )
        .unwrap();
        assert_eq!(t.get("cpu"), None);
        assert!(t.get("memory").is_some());
        assert_eq!(t.skipped.len(), 2, "{:?}", t.skipped);
        assert!(
            t.skipped[0].contains("status.capacity.cpu"),
            "{:?}",
            t.skipped
        );
    }

    #[test]
    fn a_template_without_status_has_no_capacity() {
        let t = InfrastructureTemplate::from_json(reference(), json!({"spec": {}})).unwrap();
        assert!(t.capacity.is_empty());
        assert_eq!(t.architecture, None);
    }

    #[test]
    fn a_status_of_the_wrong_shape_names_the_field() {
        let e = InfrastructureTemplate::from_json(reference(), json!({"status": {"capacity": 3}}))
            .unwrap_err();
        assert!(e.to_string().contains("status.capacity"), "{e}");
    }

    #[test]
    fn a_reference_names_kind_group_and_object() {
        assert_eq!(
            reference().to_string(),
            "DockerMachineTemplate.infrastructure.cluster.x-k8s.io default/workers"
        );
    }
}
