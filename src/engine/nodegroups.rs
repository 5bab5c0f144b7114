//! Node groups: MachineSets and MachineDeployments (of either Machine API group) that opt in
//! to autoscaling with min/max annotations or a MachineAutoscaler, and the mapping of
//! Machines and Nodes to them.
//!
//! Unlike upstream, where one mis-annotated resource hides every group, a group with invalid
//! bounds is set aside with its reason and the others are unaffected.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use super::reason::{Reason, ReasonCode};
use super::settings::NodeGroupSpec;
use crate::model::autoscaler::MachineAutoscaler;
use crate::model::machine::{MachineApiGroup, ScalableKind, ScalableResource};
use crate::model::node::normalize_provider_id;
use crate::model::{ClusterSnapshot, ObjectKey};

/// `<Kind>/<namespace>/<name>`, the id upstream uses (and the priority expander matches).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeGroupId(Arc<str>);

impl NodeGroupId {
    pub fn new(kind: ScalableKind, key: &ObjectKey) -> Self {
        NodeGroupId(format!("{}/{}/{}", kind.as_str(), key.namespace, key.name).into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeGroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for NodeGroupId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// Where a group's min/max came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BoundsSource {
    Annotations,
    MachineAutoscaler(ObjectKey),
    /// A `node_groups` entry of fleet.toml.
    Config,
}

impl fmt::Display for BoundsSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoundsSource::Annotations => f.write_str("annotations"),
            BoundsSource::MachineAutoscaler(k) => write!(f, "MachineAutoscaler {k}"),
            BoundsSource::Config => f.write_str("fleet.toml"),
        }
    }
}

/// An autoscaled node group.
#[derive(Clone, Debug)]
pub struct NodeGroup {
    pub id: NodeGroupId,
    /// Index of the MachineSet / MachineDeployment in `snapshot.scalables`.
    pub resource: usize,
    pub api: MachineApiGroup,
    pub min: u64,
    pub max: u64,
    /// `spec.replicas`: the size the group is asked to be.
    pub target: u64,
    pub bounds_source: BoundsSource,
    /// What the plan should say about the bounds (e.g. a MachineAutoscaler overriding annotations).
    pub bounds_note: Option<String>,
    /// Indices into `snapshot.scalables` of the MachineSets whose machines belong to this group.
    pub machine_sets: Vec<usize>,
    /// Indices into `snapshot.machines`.
    pub machines: Vec<usize>,
    /// Indices into `snapshot.nodes` of the group's registered nodes.
    pub nodes: Vec<usize>,
}

/// A resource that opted in but cannot be autoscaled, with why.
#[derive(Clone, Debug)]
pub struct IneligibleGroup {
    pub id: NodeGroupId,
    pub reason: Reason,
}

#[derive(Clone, Debug, Default)]
pub struct NodeGroups {
    pub groups: Vec<NodeGroup>,
    pub ineligible: Vec<IneligibleGroup>,
    /// Per snapshot node: the index of its group, if it belongs to one.
    pub group_of_node: Vec<Option<usize>>,
    /// Per snapshot machine: the node it became, if it has registered.
    pub node_of_machine: Vec<Option<usize>>,
    /// Per snapshot node: its machine, if one is found.
    pub machine_of_node: Vec<Option<usize>>,
    pub warnings: Vec<String>,
}

impl NodeGroups {
    pub fn by_id(&self, id: &NodeGroupId) -> Option<&NodeGroup> {
        self.groups.iter().find(|g| &g.id == id)
    }
}

/// What may bound a resource besides its annotations.
#[derive(Clone, Copy)]
struct Claims<'a> {
    autoscalers: Option<&'a Vec<&'a MachineAutoscaler>>,
    config: Option<&'a NodeGroupSpec>,
}

/// Finds the node groups of a snapshot (with those `explicit` in configuration) and maps
/// machines and nodes to them.
pub fn discover(snapshot: &ClusterSnapshot, explicit: &[NodeGroupSpec]) -> NodeGroups {
    let mut out = NodeGroups {
        group_of_node: vec![None; snapshot.nodes.len()],
        node_of_machine: vec![None; snapshot.machines.len()],
        machine_of_node: vec![None; snapshot.nodes.len()],
        ..NodeGroups::default()
    };
    let autoscalers = machine_autoscalers_by_target(snapshot, &mut out.warnings);
    let configured = configured_by_target(snapshot, explicit, &mut out.warnings);
    let claims = |r| claims_of(r, &autoscalers, &configured);
    let autoscaled_md: HashMap<(MachineApiGroup, &ObjectKey), bool> = snapshot
        .scalables
        .iter()
        .filter(|r| r.kind == ScalableKind::MachineDeployment)
        .map(|r| ((r.api, &r.key), opts_in(r, claims(r))))
        .collect();
    for (i, r) in snapshot.scalables.iter().enumerate() {
        let c = claims(r);
        if !opts_in(r, c) {
            continue;
        }
        let id = NodeGroupId::new(r.kind, &r.key);
        match eligibility(r, c, &autoscaled_md) {
            Ok(Some(group)) => out.groups.push(NodeGroup {
                id,
                resource: i,
                ..group
            }),
            Ok(None) => {}
            Err(message) => out.ineligible.push(IneligibleGroup {
                reason: Reason::for_group(&id, ReasonCode::NodeGroupInvalid, message),
                id,
            }),
        }
    }
    out.groups.sort_by(|a, b| a.id.cmp(&b.id));
    out.ineligible.sort_by(|a, b| a.id.cmp(&b.id));
    attach_machines_and_nodes(snapshot, &mut out);
    out
}

type TargetKey<'a> = (MachineApiGroup, ScalableKind, &'a ObjectKey);

fn claims_of<'a>(
    r: &'a ScalableResource,
    autoscalers: &'a HashMap<TargetKey<'a>, Vec<&'a MachineAutoscaler>>,
    configured: &HashMap<TargetKey<'a>, &'a NodeGroupSpec>,
) -> Claims<'a> {
    Claims {
        autoscalers: autoscalers.get(&(r.api, r.kind, &r.key)),
        config: configured.get(&(r.api, r.kind, &r.key)).copied(),
    }
}

/// The `node_groups` entries of fleet.toml, by the resource they name.
fn configured_by_target<'a>(
    snapshot: &'a ClusterSnapshot,
    explicit: &'a [NodeGroupSpec],
    warnings: &mut Vec<String>,
) -> HashMap<TargetKey<'a>, &'a NodeGroupSpec> {
    let mut out = HashMap::new();
    for spec in explicit {
        let api = match spec.api_group.as_deref() {
            Some("cluster.x-k8s.io") => MachineApiGroup::ClusterApi,
            _ => MachineApiGroup::OpenShift,
        };
        let found = snapshot.scalables.iter().find(|r| {
            r.api == api
                && r.kind.as_str() == spec.kind
                && *r.key.namespace == *spec.namespace
                && *r.key.name == *spec.name
        });
        match found {
            Some(r) => {
                out.insert((r.api, r.kind, &r.key), spec);
            }
            None => warnings.push(format!(
                "fleet.toml names node group {} {}/{} ({}), which is not in the cluster",
                spec.kind,
                spec.namespace,
                spec.name,
                api.domain()
            )),
        }
    }
    out
}

fn machine_autoscalers_by_target<'a>(
    snapshot: &'a ClusterSnapshot,
    warnings: &mut Vec<String>,
) -> HashMap<TargetKey<'a>, Vec<&'a MachineAutoscaler>> {
    let resources: HashMap<(MachineApiGroup, ScalableKind, &str, &str), &ObjectKey> = snapshot
        .scalables
        .iter()
        .map(|r| ((r.api, r.kind, &*r.key.namespace, &*r.key.name), &r.key))
        .collect();
    let mut out: HashMap<TargetKey, Vec<&MachineAutoscaler>> = HashMap::new();
    for ma in &snapshot.machine_autoscalers {
        let kind = match ma.target_kind.as_str() {
            "MachineSet" => ScalableKind::MachineSet,
            "MachineDeployment" => ScalableKind::MachineDeployment,
            other => {
                warnings.push(format!(
                    "MachineAutoscaler {} targets kind {other:?}, which cannot be autoscaled",
                    ma.key
                ));
                continue;
            }
        };
        let api = MachineApiGroup::from_api_version(&ma.target_api_version)
            .unwrap_or(MachineApiGroup::OpenShift);
        match resources.get(&(api, kind, &*ma.key.namespace, ma.target_name.as_str())) {
            Some(key) => out.entry((api, kind, *key)).or_default().push(ma),
            None => warnings.push(format!(
                "MachineAutoscaler {} targets {} {}/{}, which is not in the snapshot",
                ma.key, ma.target_kind, ma.key.namespace, ma.target_name
            )),
        }
    }
    out
}

fn opts_in(r: &ScalableResource, c: Claims) -> bool {
    c.config.is_some()
        || c.autoscalers.is_some_and(|m| !m.is_empty())
        || r.annotation(&r.api.min_size_annotation()).is_some()
        || r.annotation(&r.api.max_size_annotation()).is_some()
}

/// `Ok(None)`: part of an autoscaled MachineDeployment, not a group of its own.
fn eligibility(
    r: &ScalableResource,
    c: Claims,
    autoscaled_md: &HashMap<(MachineApiGroup, &ObjectKey), bool>,
) -> Result<Option<NodeGroup>, String> {
    if let Some(owner) = r.owner.as_ref().filter(|o| &*o.kind == "MachineDeployment") {
        let md = ObjectKey {
            namespace: r.key.namespace.clone(),
            name: owner.name.clone(),
        };
        if autoscaled_md.get(&(r.api, &md)).copied().unwrap_or(false) {
            return Ok(None);
        }
        return Err(format!(
            "owned by MachineDeployment {md}, which sets its replicas; put the autoscaler annotations on the MachineDeployment"
        ));
    }
    if r.annotation(&r.api.paused_annotation()).is_some() {
        return Err(format!("paused ({} annotation)", r.api.paused_annotation()));
    }
    let (min, max, source, note) = match c.config {
        Some(spec) => configured_bounds(r, spec, c.autoscalers),
        None => bounds(r, c.autoscalers)?,
    };
    Ok(Some(NodeGroup {
        id: NodeGroupId::new(r.kind, &r.key),
        resource: 0,
        api: r.api,
        min,
        max,
        target: u64::try_from(r.replicas).unwrap_or(0),
        bounds_source: source,
        bounds_note: note,
        machine_sets: Vec::new(),
        machines: Vec::new(),
        nodes: Vec::new(),
    }))
}

/// Bounds from fleet.toml, noting what they override.
fn configured_bounds(
    r: &ScalableResource,
    spec: &NodeGroupSpec,
    mas: Option<&Vec<&MachineAutoscaler>>,
) -> (u64, u64, BoundsSource, Option<String>) {
    let (min, max) = (spec.min, spec.max);
    let overridden = match bounds(r, mas) {
        Ok((m, x, source, _))
            if (m, x) != (min, max)
                && (mas.is_some() || r.annotation(&r.api.max_size_annotation()).is_some()) =>
        {
            Some(format!("{source} min={m} max={x}"))
        }
        Err(e) if mas.is_some() || r.annotation(&r.api.max_size_annotation()).is_some() => {
            Some(format!("invalid cluster bounds ({e})"))
        }
        _ => None,
    };
    let note = overridden.map(|o| format!("fleet.toml sets min={min} max={max}, overriding {o}"));
    (min, max, BoundsSource::Config, note)
}

fn bounds(
    r: &ScalableResource,
    mas: Option<&Vec<&MachineAutoscaler>>,
) -> Result<(u64, u64, BoundsSource, Option<String>), String> {
    let from_annotations = || -> Result<(u64, u64), String> {
        let min_key = r.api.min_size_annotation();
        let max_key = r.api.max_size_annotation();
        let min = parse_size(r.annotation(&min_key), &min_key)?;
        let max = parse_size(r.annotation(&max_key), &max_key)?;
        check_bounds(min, max, "annotations")
    };
    match mas.map(Vec::as_slice) {
        None | Some([]) => {
            let (min, max) = from_annotations()?;
            Ok((min, max, BoundsSource::Annotations, None))
        }
        Some([ma]) => {
            let to_u64 = |v: Option<i64>, field: &str| {
                u64::try_from(v.unwrap_or(0)).map_err(|_| {
                    format!(
                        "MachineAutoscaler {}: {field} {} is negative",
                        ma.key,
                        v.unwrap_or(0)
                    )
                })
            };
            let (min, max) = check_bounds(
                to_u64(ma.min_replicas, "minReplicas")?,
                to_u64(ma.max_replicas, "maxReplicas")?,
                &format!("MachineAutoscaler {}", ma.key),
            )?;
            let note = match from_annotations() {
                Ok((amin, amax))
                    if (amin, amax) != (min, max)
                        && r.annotation(&r.api.max_size_annotation()).is_some() =>
                {
                    Some(format!(
                        "MachineAutoscaler {} sets min={min} max={max}, overriding annotations min={amin} max={amax}",
                        ma.key
                    ))
                }
                _ => None,
            };
            Ok((
                min,
                max,
                BoundsSource::MachineAutoscaler(ma.key.clone()),
                note,
            ))
        }
        Some(many) => {
            let names: Vec<String> = many.iter().map(|m| m.key.to_string()).collect();
            Err(format!(
                "targeted by {} MachineAutoscalers ({}); keep exactly one",
                many.len(),
                names.join(", ")
            ))
        }
    }
}

fn parse_size(value: Option<&str>, key: &str) -> Result<u64, String> {
    let Some(text) = value else { return Ok(0) };
    let n: i64 = text
        .trim()
        .parse()
        .map_err(|_| format!("annotation {key}={text:?} is not an integer"))?;
    u64::try_from(n).map_err(|_| format!("annotation {key}={n} is negative"))
}

fn check_bounds(min: u64, max: u64, source: &str) -> Result<(u64, u64), String> {
    if max == 0 {
        return Err(format!(
            "max size is 0 ({source}): the group can never grow"
        ));
    }
    if min > max {
        return Err(format!(
            "min size {min} is greater than max size {max} ({source})"
        ));
    }
    Ok((min, max))
}

fn attach_machines_and_nodes(snapshot: &ClusterSnapshot, out: &mut NodeGroups) {
    // MachineSet (api, ns, name) → group index, directly or through its MachineDeployment.
    let mut ms_group: HashMap<(MachineApiGroup, &str, &str), usize> = HashMap::new();
    for (gi, g) in out.groups.iter_mut().enumerate() {
        let r = &snapshot.scalables[g.resource];
        for (si, s) in snapshot.scalables.iter().enumerate() {
            let owned_by_md = r.kind == ScalableKind::MachineDeployment
                && s.kind == ScalableKind::MachineSet
                && s.api == r.api
                && s.key.namespace == r.key.namespace
                && s.owner
                    .as_ref()
                    .is_some_and(|o| &*o.kind == "MachineDeployment" && o.name == r.key.name);
            if si == g.resource && r.kind == ScalableKind::MachineSet || owned_by_md {
                g.machine_sets.push(si);
                ms_group.insert((s.api, &s.key.namespace, &s.key.name), gi);
            }
        }
    }
    let mut machine_group: BTreeMap<usize, usize> = BTreeMap::new();
    for (mi, m) in snapshot.machines.iter().enumerate() {
        let Some(owner) = m.owner.as_ref().filter(|o| &*o.kind == "MachineSet") else {
            continue;
        };
        if let Some(&gi) = ms_group.get(&(m.api, &*m.key.namespace, &*owner.name)) {
            out.groups[gi].machines.push(mi);
            machine_group.insert(mi, gi);
        }
    }
    let by_provider: HashMap<&str, usize> = snapshot
        .machines
        .iter()
        .enumerate()
        .filter_map(|(i, m)| Some((normalize_provider_id(m.provider_id.as_deref()?), i)))
        .collect();
    let by_key: HashMap<(&str, &str), usize> = snapshot
        .machines
        .iter()
        .enumerate()
        .map(|(i, m)| ((&*m.key.namespace, &*m.key.name), i))
        .collect();
    let by_node_ref: HashMap<&str, usize> = snapshot
        .machines
        .iter()
        .enumerate()
        .filter_map(|(i, m)| Some((m.node_ref.as_deref()?, i)))
        .collect();
    for (ni, node) in snapshot.nodes.iter().enumerate() {
        let machine = node
            .provider_id
            .as_deref()
            .and_then(|p| by_provider.get(normalize_provider_id(p)))
            .or_else(|| {
                node.machine
                    .as_ref()
                    .and_then(|k| by_key.get(&(&*k.namespace, &*k.name)))
            })
            .or_else(|| by_node_ref.get(&*node.name));
        if let Some(&mi) = machine {
            out.node_of_machine[mi] = Some(ni);
            out.machine_of_node[ni] = Some(mi);
        }
        if let Some(gi) = machine.and_then(|mi| machine_group.get(mi)) {
            out.groups[*gi].nodes.push(ni);
            out.group_of_node[ni] = Some(*gi);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::dump::SnapshotBuilder;

    fn snapshot(yaml: &str) -> ClusterSnapshot {
        let mut b = SnapshotBuilder::default();
        b.add_text(yaml, "test").unwrap();
        b.finish().0
    }

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
                "MachineSet/openshift-machine-api/by-ma",
                "MachineSet/openshift-machine-api/good"
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
        assert_eq!(g.id.as_str(), "MachineDeployment/default/md");
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
}

#[cfg(test)]
mod configured {
    use super::*;
    use crate::engine::fixtures::{machineset, snapshot};

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
                ("MachineSet/openshift-machine-api/annotated", 2, 9),
                ("MachineSet/openshift-machine-api/plain", 0, 4)
            ]
        );
        assert_eq!(groups.groups[0].bounds_source, BoundsSource::Config);
        assert_eq!(
            groups.groups[0].bounds_note.as_deref(),
            Some("fleet.toml sets min=2 max=9, overriding annotations min=1 max=3")
        );
        assert_eq!(groups.groups[1].bounds_note, None);
        assert!(groups.warnings[0].contains("gone"));
    }
}
