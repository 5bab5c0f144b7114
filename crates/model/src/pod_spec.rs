//! Projection of a Kubernetes pod spec into the interned [`PodSpec`]: requests, node
//! selection, tolerations, host ports, inter-pod (anti-)affinity, topology spread, volumes.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as corev1;

use super::labels::{LabelRequirement, LabelSelector};
use super::meta::{FieldError, Projector, label_selector};
use super::pod::{ClaimRef, PodSpec, Unsimulated, effective_requests};
use super::scheduling::{
    AffinityTerm, HostPort, NamespaceScope, NodeRequirement, NodeSelector, NodeSelectorTerm,
    Protocol, SpreadConstraint, SpreadPolicy, TaintEffect, Toleration,
};

pub fn project(
    spec: &corev1::PodSpec,
    namespace: &Arc<str>,
    pod_labels: Option<&BTreeMap<String, String>>,
    p: &mut Projector,
) -> Result<PodSpec, FieldError> {
    let mut out = PodSpec {
        requests: effective_requests(spec)?,
        node_selector: p.labels(spec.node_selector.as_ref()),
        tolerations: tolerations(spec, p)?,
        host_ports: host_ports(spec, p),
        restart_policy_always: spec.restart_policy.as_deref().is_none_or(|r| r == "Always"),
        termination_grace_seconds: spec.termination_grace_period_seconds,
        ..PodSpec::default()
    };
    let own = pod_labels.cloned().unwrap_or_default();
    if let Some(affinity) = &spec.affinity {
        project_affinity(affinity, namespace, &own, &mut out, p)?;
    }
    project_spread(spec, &own, &mut out, p)?;
    project_volumes(spec, &mut out, p);
    out.resource_claims = super::dra::pod_claims(spec, p)?;
    // Simulated only when the snapshot's DRA objects were read: the engine decides.
    if !out.resource_claims.is_empty() {
        out.unsimulated.push(Unsimulated::DynamicResources);
    }
    out.unsimulated.sort_by_key(|u| *u as u8);
    out.unsimulated.dedup();
    Ok(out)
}

fn tolerations(spec: &corev1::PodSpec, p: &mut Projector) -> Result<Vec<Toleration>, FieldError> {
    let mut out = Vec::new();
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let path = || format!("spec.tolerations[{i}]");
        let exists = match t.operator.as_deref() {
            None | Some("Equal") => false,
            Some("Exists") => true,
            Some(other) => {
                return Err(FieldError::new(
                    path(),
                    format!("unknown operator {other:?} (Equal, Exists)"),
                ));
            }
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(e) => Some(
                TaintEffect::parse(e)
                    .ok_or_else(|| FieldError::new(path(), format!("unknown effect {e:?}")))?,
            ),
        };
        out.push(Toleration {
            key: p.opt_str(t.key.as_ref()),
            exists,
            value: p.opt_str(t.value.as_ref()),
            effect,
        });
    }
    Ok(out)
}

fn host_ports(spec: &corev1::PodSpec, p: &mut Projector) -> Vec<HostPort> {
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let ports = containers.flat_map(|c| c.ports.iter().flatten());
    ports
        .filter_map(|port| {
            let host_port = port.host_port.filter(|hp| *hp > 0)?;
            let protocol = match port.protocol.as_deref() {
                Some("UDP") => Protocol::Udp,
                Some("SCTP") => Protocol::Sctp,
                _ => Protocol::Tcp,
            };
            Some(HostPort {
                port: host_port,
                protocol,
                ip: p.opt_str(port.host_ip.as_ref()),
            })
        })
        .collect()
}

fn project_affinity(
    affinity: &corev1::Affinity,
    namespace: &Arc<str>,
    own: &BTreeMap<String, String>,
    out: &mut PodSpec,
    p: &mut Projector,
) -> Result<(), FieldError> {
    if let Some(node) = &affinity.node_affinity {
        if let Some(required) = &node.required_during_scheduling_ignored_during_execution {
            out.node_affinity = Some(node_selector(
                required,
                "spec.affinity.nodeAffinity.required",
                p,
            )?);
        }
        if node
            .preferred_during_scheduling_ignored_during_execution
            .as_ref()
            .is_some_and(|v| !v.is_empty())
        {
            out.unsimulated.push(Unsimulated::SoftConstraints);
        }
    }
    let soft = |preferred: Option<&Vec<corev1::WeightedPodAffinityTerm>>| {
        preferred.is_some_and(|v| !v.is_empty())
    };
    let base = "spec.affinity";
    if let Some(pa) = &affinity.pod_affinity {
        let required = pa
            .required_during_scheduling_ignored_during_execution
            .as_ref();
        let path = format!("{base}.podAffinity.requiredDuringSchedulingIgnoredDuringExecution");
        out.affinity = affinity_terms(required, &path, namespace, own, out, p)?;
        if soft(
            pa.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        ) {
            out.unsimulated.push(Unsimulated::SoftConstraints);
        }
    }
    if let Some(pa) = &affinity.pod_anti_affinity {
        let required = pa
            .required_during_scheduling_ignored_during_execution
            .as_ref();
        let path = format!("{base}.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution");
        out.anti_affinity = affinity_terms(required, &path, namespace, own, out, p)?;
        if soft(
            pa.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        ) {
            out.unsimulated.push(Unsimulated::SoftConstraints);
        }
    }
    Ok(())
}

pub fn node_selector(
    sel: &corev1::NodeSelector,
    path: &str,
    p: &mut Projector,
) -> Result<NodeSelector, FieldError> {
    let mut terms = Vec::new();
    for (i, t) in sel.node_selector_terms.iter().enumerate() {
        let at = format!("{path}.nodeSelectorTerms[{i}]");
        let mut term = NodeSelectorTerm::default();
        for (j, r) in t.match_expressions.iter().flatten().enumerate() {
            term.match_labels.push(node_requirement(
                r,
                &format!("{at}.matchExpressions[{j}]"),
                p,
            )?);
        }
        for (j, r) in t.match_fields.iter().flatten().enumerate() {
            let at = format!("{at}.matchFields[{j}]");
            if r.key != "metadata.name" {
                return Err(FieldError::new(
                    at,
                    format!("unsupported field {:?} (only metadata.name)", r.key),
                ));
            }
            term.match_name.push(node_requirement(r, &at, p)?);
        }
        terms.push(term);
    }
    Ok(NodeSelector { terms })
}

fn node_requirement(
    r: &corev1::NodeSelectorRequirement,
    path: &str,
    p: &mut Projector,
) -> Result<NodeRequirement, FieldError> {
    let key = p.str(&r.key);
    let values: Arc<[Arc<str>]> = r.values.iter().flatten().map(|v| p.str(v)).collect();
    let int_value = || -> Result<i64, FieldError> {
        match values.as_ref() {
            [v] => v.parse::<i64>().map_err(|_| {
                FieldError::new(
                    path,
                    format!("operator {} needs an integer value, got {v:?}", r.operator),
                )
            }),
            _ => Err(FieldError::new(
                path,
                format!("operator {} needs exactly one value", r.operator),
            )),
        }
    };
    Ok(match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => {
            return Err(FieldError::new(
                path,
                format!("operator {} needs at least one value", r.operator),
            ));
        }
        "In" => NodeRequirement::In(key, values),
        "NotIn" => NodeRequirement::NotIn(key, values),
        "Exists" => NodeRequirement::Exists(key),
        "DoesNotExist" => NodeRequirement::DoesNotExist(key),
        "Gt" => NodeRequirement::Gt(key, int_value()?),
        "Lt" => NodeRequirement::Lt(key, int_value()?),
        other => {
            return Err(FieldError::new(
                path,
                format!("unknown operator {other:?} (In, NotIn, Exists, DoesNotExist, Gt, Lt)"),
            ));
        }
    })
}

fn affinity_terms(
    terms: Option<&Vec<corev1::PodAffinityTerm>>,
    path: &str,
    namespace: &Arc<str>,
    own: &BTreeMap<String, String>,
    out: &mut PodSpec,
    p: &mut Projector,
) -> Result<Vec<AffinityTerm>, FieldError> {
    let mut result = Vec::new();
    for (i, t) in terms.into_iter().flatten().enumerate() {
        let at = format!("{path}[{i}]");
        if t.topology_key.is_empty() {
            return Err(FieldError::new(at, "topologyKey must not be empty"));
        }
        let mut selector = match &t.label_selector {
            Some(s) => Some(label_selector(s, &format!("{at}.labelSelector"), p)?),
            None => None,
        };
        if let Some(sel) = selector.as_mut() {
            merge_label_keys(sel, t.match_label_keys.as_ref(), own, false, p);
            merge_label_keys(sel, t.mismatch_label_keys.as_ref(), own, true, p);
        }
        let names: Arc<[Arc<str>]> = t.namespaces.iter().flatten().map(|n| p.str(n)).collect();
        let namespaces = match &t.namespace_selector {
            None if names.is_empty() => NamespaceScope::Names(Arc::from([namespace.clone()])),
            None => NamespaceScope::Names(names),
            Some(ns) => {
                let sel = label_selector(ns, &format!("{at}.namespaceSelector"), p)?;
                if !sel.is_empty() {
                    out.unsimulated.push(Unsimulated::NamespaceSelector);
                }
                NamespaceScope::Selector {
                    names,
                    selector: sel,
                    own: namespace.clone(),
                }
            }
        };
        result.push(AffinityTerm {
            selector,
            namespaces,
            topology_key: p.str(&t.topology_key),
        });
    }
    Ok(result)
}

/// `matchLabelKeys` / `mismatchLabelKeys`: the pod's own value of each key joins the selector.
fn merge_label_keys(
    sel: &mut LabelSelector,
    keys: Option<&Vec<String>>,
    own: &BTreeMap<String, String>,
    mismatch: bool,
    p: &mut Projector,
) {
    for key in keys.into_iter().flatten() {
        if let Some(value) = own.get(key) {
            let values: Arc<[Arc<str>]> = Arc::from([p.str(value)]);
            sel.requirements.push(if mismatch {
                LabelRequirement::NotIn(p.str(key), values)
            } else {
                LabelRequirement::In(p.str(key), values)
            });
        }
    }
}

fn project_spread(
    spec: &corev1::PodSpec,
    own: &BTreeMap<String, String>,
    out: &mut PodSpec,
    p: &mut Projector,
) -> Result<(), FieldError> {
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        let at = format!("spec.topologySpreadConstraints[{i}]");
        match c.when_unsatisfiable.as_str() {
            "DoNotSchedule" => {}
            "ScheduleAnyway" => {
                out.unsimulated.push(Unsimulated::SoftConstraints);
                continue;
            }
            other => {
                return Err(FieldError::new(
                    at,
                    format!("unknown whenUnsatisfiable {other:?} (DoNotSchedule, ScheduleAnyway)"),
                ));
            }
        }
        if c.max_skew < 1 {
            return Err(FieldError::new(
                at,
                format!("maxSkew must be at least 1, got {}", c.max_skew),
            ));
        }
        if c.topology_key.is_empty() {
            return Err(FieldError::new(at, "topologyKey must not be empty"));
        }
        let mut selector = match &c.label_selector {
            Some(s) => Some(label_selector(s, &format!("{at}.labelSelector"), p)?),
            None => None,
        };
        if let Some(sel) = selector.as_mut() {
            merge_label_keys(sel, c.match_label_keys.as_ref(), own, false, p);
        }
        let policy = |v: Option<&String>, default| match v.map(String::as_str) {
            Some("Honor") => Ok(SpreadPolicy::Honor),
            Some("Ignore") => Ok(SpreadPolicy::Ignore),
            None => Ok(default),
            Some(other) => Err(FieldError::new(
                at.clone(),
                format!("unknown policy {other:?} (Honor, Ignore)"),
            )),
        };
        out.spread.push(SpreadConstraint {
            max_skew: c.max_skew,
            topology_key: p.str(&c.topology_key),
            selector,
            min_domains: c.min_domains,
            node_affinity_policy: policy(c.node_affinity_policy.as_ref(), SpreadPolicy::Honor)?,
            node_taints_policy: policy(c.node_taints_policy.as_ref(), SpreadPolicy::Ignore)?,
        });
    }
    Ok(())
}

fn project_volumes(spec: &corev1::PodSpec, out: &mut PodSpec, p: &mut Projector) {
    for v in spec.volumes.iter().flatten() {
        let on_disk = v
            .empty_dir
            .as_ref()
            .is_some_and(|e| e.medium.as_deref() != Some("Memory"));
        if v.host_path.is_some() || on_disk {
            out.local_volumes.push(p.str(&v.name));
        }
        if let Some(claim) = &v.persistent_volume_claim {
            out.claims.push(ClaimRef::Claim(p.str(&claim.claim_name)));
        } else if let Some(e) = &v.ephemeral {
            let spec = e.volume_claim_template.as_ref().map(|t| &t.spec);
            out.claims.push(ClaimRef::Ephemeral {
                volume: p.str(&v.name),
                storage_class: spec
                    .and_then(|s| s.storage_class_name.as_deref())
                    .map(|c| p.str(c)),
                read_write_once_pod: spec
                    .and_then(|s| s.access_modes.as_ref())
                    .is_some_and(|m| m.iter().any(|m| m == "ReadWriteOncePod")),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::Labels;

    fn pod_spec(json: serde_json::Value) -> corev1::PodSpec {
        serde_json::from_value(json).unwrap()
    }

    fn project_json(
        json: serde_json::Value,
        labels: &[(&str, &str)],
    ) -> Result<PodSpec, FieldError> {
        let own: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        project(
            &pod_spec(json),
            &Arc::from("default"),
            Some(&own),
            &mut Projector::default(),
        )
    }

    #[test]
    fn affinity_terms_default_to_own_namespace_and_merge_label_keys() {
        let spec = project_json(
            serde_json::json!({
                "containers": [],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "matchLabelKeys": ["pod-template-hash"],
                    "topologyKey": "kubernetes.io/hostname"
                }]}}
            }),
            &[("app", "web"), ("pod-template-hash", "abc")],
        )
        .unwrap();
        let term = &spec.anti_affinity[0];
        assert_eq!(
            term.namespaces,
            NamespaceScope::Names(Arc::from([Arc::from("default")]))
        );
        let own = Labels::from_strs([("app", "web"), ("pod-template-hash", "abc")]);
        let other = Labels::from_strs([("app", "web"), ("pod-template-hash", "xyz")]);
        let sel = term.selector.as_ref().unwrap();
        assert!(sel.matches(&own) && !sel.matches(&other));
    }

    #[test]
    fn spread_constraints_keep_only_hard_ones() {
        let spec = project_json(
            serde_json::json!({
                "containers": [],
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                     "labelSelector": {"matchLabels": {"app": "web"}}},
                    {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
                     "labelSelector": {"matchLabels": {"app": "web"}}}
                ]
            }),
            &[],
        )
        .unwrap();
        assert_eq!(spec.spread.len(), 1);
        assert_eq!(spec.spread[0].node_taints_policy, SpreadPolicy::Ignore);
        assert_eq!(spec.unsimulated, vec![Unsimulated::SoftConstraints]);
    }

    #[test]
    fn invalid_constraints_name_their_field() {
        let err = project_json(
            serde_json::json!({"containers": [], "topologySpreadConstraints": [
                {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
            &[],
        )
        .unwrap_err();
        assert_eq!(err.path, "spec.topologySpreadConstraints[0]");
        let err = project_json(
            serde_json::json!({"containers": [], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["many"]}]}]}}}}),
            &[],
        )
        .unwrap_err();
        assert_eq!(
            err.path,
            "spec.affinity.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0]"
        );
        let err = project_json(
            serde_json::json!({"containers": [], "tolerations": [{"key": "k", "operator": "Maybe"}]}),
            &[],
        )
        .unwrap_err();
        assert_eq!(err.path, "spec.tolerations[0]");
    }

    #[test]
    fn volumes_and_ports() {
        let spec = project_json(
            serde_json::json!({
                "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}]}],
                "volumes": [
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "shm", "emptyDir": {"medium": "Memory"}},
                    {"name": "logs", "hostPath": {"path": "/var/log"}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "cache", "ephemeral": {"volumeClaimTemplate": {"spec": {
                        "storageClassName": "gp3", "accessModes": ["ReadWriteOncePod"]}}}}
                ]
            }),
            &[],
        )
        .unwrap();
        assert_eq!(spec.host_ports.len(), 1);
        assert_eq!(spec.host_ports[0].port, 8080);
        let locals: Vec<&str> = spec.local_volumes.iter().map(|v| v.as_ref()).collect();
        assert_eq!(locals, vec!["scratch", "logs"]);
        assert!(spec.unsimulated.is_empty(), "{:?}", spec.unsimulated);
        assert_eq!(spec.claims[0], ClaimRef::Claim("data".into()));
        assert_eq!(
            spec.claims[1],
            ClaimRef::Ephemeral {
                volume: "cache".into(),
                storage_class: Some("gp3".into()),
                read_write_once_pod: true
            }
        );
        assert_eq!(spec.claims[1].claim_name("web-0"), "web-0-cache");
    }
}
