//! A node group's bounds and what claims a resource: its min/max annotations, a
//! MachineAutoscaler targeting it, or a `node_groups` entry of fleet.toml (which wins), and
//! why a resource that opted in cannot be autoscaled.

use fleetscaler_model::{Warning, WarningCode};
use std::collections::HashMap;

use super::{BoundsSource, Claims, GroupRef, NodeGroup, NodeGroupId};
use crate::settings::NodeGroupSpec;
use fleetscaler_model::autoscaler::MachineAutoscaler;
use fleetscaler_model::{
    ClusterSnapshot, MachineApiGroup, ObjectKey, ScalableKind, ScalableResource,
};

pub(super) type TargetKey<'a> = (MachineApiGroup, ScalableKind, &'a ObjectKey);

pub(super) fn claims_of<'a>(
    r: &'a ScalableResource,
    autoscalers: &'a HashMap<TargetKey<'a>, Vec<&'a MachineAutoscaler>>,
    configured: &HashMap<TargetKey<'a>, &'a NodeGroupSpec>,
) -> Claims<'a> {
    Claims {
        autoscalers: autoscalers.get(&(r.api, r.kind, &r.key)),
        config: configured.get(&(r.api, r.kind, &r.key)).copied(),
    }
}

/// The `node_groups` entries of fleet.toml, by the resource they name. An entry without
/// `api_group` names whichever Machine API has the resource, and is refused (with a warning)
/// when both have one.
pub(super) fn configured_by_target<'a>(
    snapshot: &'a ClusterSnapshot,
    explicit: &'a [NodeGroupSpec],
    warnings: &mut Vec<Warning>,
) -> HashMap<TargetKey<'a>, &'a NodeGroupSpec> {
    let mut out = HashMap::new();
    for spec in explicit {
        let (Some(kind), Ok(api)) = (ScalableKind::parse(&spec.kind), spec_api(spec)) else {
            // `NodeGroupSpec::check` refused it when the configuration was read.
            continue;
        };
        let named = GroupRef {
            api,
            kind,
            key: ObjectKey::new(&spec.namespace, &spec.name),
        };
        let resources = snapshot
            .scalables
            .iter()
            .map(|r| (r.api, r.kind, &r.key, r));
        match named.find(resources) {
            Ok(Some(r)) => {
                out.insert((r.api, r.kind, &r.key), spec);
            }
            Ok(None) => warnings.push(Warning::general(
                WarningCode::NodeGroupNotFound,
                format!("fleet.toml names node group {named}, which is not in the cluster"),
            )),
            Err(e) => warnings.push(Warning::about(
                WarningCode::NodeGroupNotFound,
                "fleet.toml node_groups",
                format!("{e}; set api_group to say which (the entry is not applied)"),
            )),
        }
    }
    out
}

/// The API group an entry names, if it names one.
fn spec_api(spec: &NodeGroupSpec) -> Result<Option<MachineApiGroup>, ()> {
    match spec.api_group.as_deref() {
        None => Ok(None),
        Some(domain) => MachineApiGroup::from_domain(domain).map(Some).ok_or(()),
    }
}

pub(super) fn machine_autoscalers_by_target<'a>(
    snapshot: &'a ClusterSnapshot,
    warnings: &mut Vec<Warning>,
) -> HashMap<TargetKey<'a>, Vec<&'a MachineAutoscaler>> {
    let resources: HashMap<(MachineApiGroup, ScalableKind, &str, &str), &ObjectKey> = snapshot
        .scalables
        .iter()
        .map(|r| ((r.api, r.kind, &*r.key.namespace, &*r.key.name), &r.key))
        .collect();
    let mut out: HashMap<TargetKey, Vec<&MachineAutoscaler>> = HashMap::new();
    for ma in &snapshot.machine_autoscalers {
        let Some(kind) = ScalableKind::parse(&ma.target_kind) else {
            warnings.push(Warning::general(
                WarningCode::InvalidBounds,
                format!(
                    "MachineAutoscaler {} targets kind {:?}, which cannot be autoscaled",
                    ma.key, ma.target_kind
                ),
            ));
            continue;
        };
        let api = MachineApiGroup::from_api_version(&ma.target_api_version)
            .unwrap_or(MachineApiGroup::OpenShift);
        match resources.get(&(api, kind, &*ma.key.namespace, ma.target_name.as_str())) {
            Some(key) => out.entry((api, kind, *key)).or_default().push(ma),
            None => warnings.push(Warning::general(
                WarningCode::InvalidBounds,
                format!(
                    "MachineAutoscaler {} targets {} {}/{}, which is not in the snapshot",
                    ma.key, ma.target_kind, ma.key.namespace, ma.target_name
                ),
            )),
        }
    }
    out
}

/// Why a resource that opted in is not a node group.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum BoundsError {
    #[error(
        "owned by {kind} {owner}, which sets its replicas; put the autoscaler annotations on the {kind}"
    )]
    Owned {
        kind: &'static str,
        owner: ObjectKey,
    },
    #[error("paused ({annotation} annotation)")]
    Paused { annotation: String },
    #[error("annotation {key}={text:?} is not an integer")]
    NotAnInteger { key: String, text: String },
    #[error("annotation {key}={value} is negative")]
    NegativeAnnotation { key: String, value: i64 },
    #[error("MachineAutoscaler {autoscaler}: {field} {value} is negative")]
    NegativeReplicas {
        autoscaler: ObjectKey,
        field: &'static str,
        value: i64,
    },
    #[error("max size is 0 ({from}): the group can never grow")]
    MaxZero { from: BoundsSource },
    #[error("min size {min} is greater than max size {max} ({from})")]
    MinAboveMax {
        min: u64,
        max: u64,
        from: BoundsSource,
    },
    #[error("targeted by {} MachineAutoscalers ({}); keep exactly one", .0.len(), .0.join(", "))]
    ManyAutoscalers(Vec<String>),
}

pub(super) fn opts_in(r: &ScalableResource, c: Claims) -> bool {
    c.config.is_some()
        || c.autoscalers.is_some_and(|m| !m.is_empty())
        || r.annotation(&r.api.min_size_annotation()).is_some()
        || r.annotation(&r.api.max_size_annotation()).is_some()
}

/// `Ok(None)`: part of an autoscaled owner (a MachineSet of an autoscaled
/// MachineDeployment), not a group of its own. `autoscaled_owners`: whether each resource
/// that owns others in the chain opts in.
pub(super) fn eligibility(
    r: &ScalableResource,
    c: Claims,
    autoscaled_owners: &HashMap<TargetKey, bool>,
) -> Result<Option<NodeGroup>, BoundsError> {
    let owner = r.owner.as_ref().and_then(|o| {
        let kind = ScalableKind::parse(&o.kind)?;
        r.kind
            .descriptor()
            .is_owned_by(&o.kind)
            .then_some((kind, o))
    });
    if let Some((kind, owner)) = owner {
        let key = ObjectKey {
            namespace: r.key.namespace.clone(),
            name: owner.name.clone(),
        };
        if autoscaled_owners
            .get(&(r.api, kind, &key))
            .copied()
            .unwrap_or(false)
        {
            return Ok(None);
        }
        return Err(BoundsError::Owned {
            kind: kind.as_str(),
            owner: key,
        });
    }
    if r.annotation(&r.api.paused_annotation()).is_some() {
        return Err(BoundsError::Paused {
            annotation: r.api.paused_annotation(),
        });
    }
    let (min, max, source, note) = match c.config {
        Some(spec) => configured_bounds(r, spec, c.autoscalers),
        None => bounds(r, c.autoscalers)?,
    };
    Ok(Some(NodeGroup {
        id: NodeGroupId::new(r.api, r.kind, &r.key),
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
        options: Default::default(),
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
) -> Result<(u64, u64, BoundsSource, Option<String>), BoundsError> {
    let from_annotations = || -> Result<(u64, u64), BoundsError> {
        let min_key = r.api.min_size_annotation();
        let max_key = r.api.max_size_annotation();
        let min = parse_size(r.annotation(&min_key), &min_key)?;
        let max = parse_size(r.annotation(&max_key), &max_key)?;
        check_bounds(min, max, BoundsSource::Annotations)
    };
    match mas.map(Vec::as_slice) {
        None | Some([]) => {
            let (min, max) = from_annotations()?;
            Ok((min, max, BoundsSource::Annotations, None))
        }
        Some([ma]) => {
            let to_u64 = |v: Option<i64>, field: &'static str| {
                let value = v.unwrap_or(0);
                u64::try_from(value).map_err(|_| BoundsError::NegativeReplicas {
                    autoscaler: ma.key.clone(),
                    field,
                    value,
                })
            };
            let (min, max) = check_bounds(
                to_u64(ma.min_replicas, "minReplicas")?,
                to_u64(ma.max_replicas, "maxReplicas")?,
                BoundsSource::MachineAutoscaler(ma.key.clone()),
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
            let names = many.iter().map(|m| m.key.to_string()).collect();
            Err(BoundsError::ManyAutoscalers(names))
        }
    }
}

fn parse_size(value: Option<&str>, key: &str) -> Result<u64, BoundsError> {
    let Some(text) = value else { return Ok(0) };
    let n: i64 = text.trim().parse().map_err(|_| BoundsError::NotAnInteger {
        key: key.to_string(),
        text: text.to_string(),
    })?;
    u64::try_from(n).map_err(|_| BoundsError::NegativeAnnotation {
        key: key.to_string(),
        value: n,
    })
}

fn check_bounds(min: u64, max: u64, from: BoundsSource) -> Result<(u64, u64), BoundsError> {
    if max == 0 {
        return Err(BoundsError::MaxZero { from });
    }
    if min > max {
        return Err(BoundsError::MinAboveMax { min, max, from });
    }
    Ok((min, max))
}
