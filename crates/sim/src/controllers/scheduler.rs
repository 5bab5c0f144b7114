//! The simulated scheduler: binds each pending pod to a Ready node that fits it (resources,
//! pod count, nodeSelector, required node affinity, taints), preferring the least allocated
//! node as kube-scheduler's default scoring does; a pod that fits nowhere gets
//! `PodScheduled=False` with reason `Unschedulable` and a message counting why, which is
//! what an autoscaler reacts to. A pod with resource claims also needs the devices
//! (`allocate`, which allocates them as it binds). It is written apart from the engine on
//! purpose: the engine's predicates are checked against it, not copied into it.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::allocate::{Devices, Need, Picked, make_claims};
use super::index::{Amounts, Index, NodeInfo};
use crate::api::resources::Resource;
use crate::api::subresources::{bind_pod, set_condition};
use crate::registry::State;
use crate::store::Key;

/// The scheduler's memory between passes.
#[derive(Debug, Default)]
pub struct Scheduler {
    /// The index's capacity epoch when unschedulable pods were last tried.
    tried_epoch: u64,
    /// The index revision of the last pass: nothing new to schedule until it moves.
    seen_revision: Option<u64>,
}

/// Why a node does not fit a pod, in the scheduler's words.
fn misfit(
    pod: &Value,
    requests: &Amounts,
    name: &str,
    node: &NodeInfo,
    used: Amounts,
) -> Option<String> {
    if !node.ready {
        return Some("node(s) had untolerated taint {node.kubernetes.io/not-ready: }".into());
    }
    if node.unschedulable {
        return Some("node(s) were unschedulable".into());
    }
    for taint in &node.taints {
        let effect = taint["effect"].as_str().unwrap_or_default();
        if matches!(effect, "NoSchedule" | "NoExecute") && !tolerated(pod, taint) {
            return Some(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                taint["key"].as_str().unwrap_or_default(),
                taint["value"].as_str().unwrap_or_default()
            ));
        }
    }
    if !selector_fits(pod, name, &node.labels) {
        return Some("node(s) didn't match Pod's node affinity/selector".into());
    }
    let free = |total: i64, used: i64| total - used;
    if requests.pods > free(node.allocatable.pods, used.pods) {
        return Some("Too many pods".into());
    }
    if requests.cpu > free(node.allocatable.cpu, used.cpu) {
        return Some("Insufficient cpu".into());
    }
    if requests.memory > free(node.allocatable.memory, used.memory) {
        return Some("Insufficient memory".into());
    }
    if requests.gpus > free(node.allocatable.gpus, used.gpus) {
        return Some("Insufficient nvidia.com/gpu".into());
    }
    None
}

fn tolerated(pod: &Value, taint: &Value) -> bool {
    pod["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| {
            let effect_ok = t["effect"]
                .as_str()
                .is_none_or(|e| e.is_empty() || taint["effect"] == e);
            let key = t["key"].as_str().unwrap_or_default();
            let key_ok = (key.is_empty() && t["operator"] == "Exists") || taint["key"] == key;
            let value_ok = t["operator"] == "Exists"
                || taint["value"].as_str().unwrap_or_default()
                    == t["value"].as_str().unwrap_or_default();
            effect_ok && key_ok && value_ok
        })
}

fn selector_fits(pod: &Value, node_name: &str, labels: &BTreeMap<String, String>) -> bool {
    let selector_ok = pod["nodeSelector"].as_object().is_none_or(|m| {
        m.iter()
            .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
    });
    let terms = &pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    let affinity_ok = match terms.as_array() {
        None => true,
        Some(terms) => terms.iter().any(|term| {
            let exprs_ok = term["matchExpressions"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|e| {
                    expression_holds(
                        e,
                        labels
                            .get(e["key"].as_str().unwrap_or_default())
                            .map(String::as_str),
                    )
                });
            let fields_ok = term["matchFields"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|e| e["key"] == "metadata.name" && expression_holds(e, Some(node_name)));
            exprs_ok && fields_ok
        }),
    };
    selector_ok && affinity_ok
}

fn expression_holds(e: &Value, actual: Option<&str>) -> bool {
    let values: Vec<&str> = e["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let number = |s: &str| s.parse::<i64>().ok();
    match e["operator"].as_str().unwrap_or_default() {
        "In" => actual.is_some_and(|a| values.contains(&a)),
        "NotIn" => actual.is_none_or(|a| !values.contains(&a)),
        "Exists" => actual.is_some(),
        "DoesNotExist" => actual.is_none(),
        "Gt" => actual
            .and_then(number)
            .zip(values.first().and_then(|v| number(v)))
            .is_some_and(|(a, v)| a > v),
        "Lt" => actual
            .and_then(number)
            .zip(values.first().and_then(|v| number(v)))
            .is_some_and(|(a, v)| a < v),
        _ => false,
    }
}

/// Least-allocated score: the lower the larger share of CPU or memory in use, the better.
fn load(node: &NodeInfo, used: Amounts, requests: &Amounts) -> f64 {
    let share = |u: i64, r: i64, t: i64| {
        if t > 0 {
            (u + r) as f64 / t as f64
        } else {
            1.0
        }
    };
    share(used.cpu, requests.cpu, node.allocatable.cpu).max(share(
        used.memory,
        requests.memory,
        node.allocatable.memory,
    ))
}

impl Scheduler {
    /// One pass over the pending pods.
    pub fn step(&mut self, state: &mut State, index: &Index) {
        if self.seen_revision == Some(index.revision) && index.capacity_epoch == self.tried_epoch {
            return;
        }
        self.seen_revision = Some(index.revision);
        let retry_unschedulable = index.capacity_epoch != self.tried_epoch;
        self.tried_epoch = index.capacity_epoch;
        // The waiting set is ordered by key: a stable order of placement.
        let pending: Vec<(&Key, &super::index::PodInfo)> = index
            .waiting
            .iter()
            .filter_map(|k| index.pods.get(k).map(|p| (k, p)))
            .filter(|(_, p)| retry_unschedulable || !p.unschedulable)
            .collect();
        if pending.is_empty() {
            return;
        }
        // Bindings made in this pass, not yet seen by the index.
        let mut added: HashMap<&str, Amounts> = HashMap::new();
        // The cluster's devices, read once by the first pod with claims.
        let mut devices: Option<Devices> = None;
        for (key, pod) in pending {
            let Some(spec) = pod.spec.as_deref() else {
                continue;
            };
            // Pods for another scheduler are left to it (tests bind them through the API).
            if spec["schedulerName"]
                .as_str()
                .is_some_and(|s| s != "default-scheduler")
            {
                continue;
            }
            let needs = match claims(state, &mut devices, key, spec) {
                Ok(needs) => needs,
                Err(why) => {
                    let message = format!("0/{} nodes are available: {why}.", index.nodes.len());
                    mark_unschedulable(state, key, pod.unschedulable, &message);
                    continue;
                }
            };
            let mut best: Option<(&str, f64, Picked)> = None;
            let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
            for (name, node) in &index.nodes {
                let mut used = index.usage.get(name).copied().unwrap_or_default();
                if let Some(a) = added.get(name.as_str()) {
                    used.cpu += a.cpu;
                    used.memory += a.memory;
                    used.gpus += a.gpus;
                    used.pods += a.pods;
                }
                let fit = match misfit(spec, &pod.requests, name, node, used) {
                    Some(reason) => Err(reason),
                    None => match (&needs, &devices) {
                        (Some(needs), Some(d)) => d.pick(needs, name).map_err(str::to_string),
                        _ => Ok(Vec::new()),
                    },
                };
                match fit {
                    Err(reason) => *reasons.entry(reason).or_default() += 1,
                    Ok(picked) => {
                        let score = load(node, used, &pod.requests);
                        if best.as_ref().is_none_or(|(_, s, _)| score < *s) {
                            best = Some((name, score, picked));
                        }
                    }
                }
            }
            match best {
                Some((node, _, picked)) => {
                    if let (Some(needs), Some(d)) = (&needs, &mut devices) {
                        d.allocate(state, key, node, needs, picked);
                    }
                    if bind_pod(state, key, node).is_ok() {
                        let a = added.entry(node).or_default();
                        a.cpu += pod.requests.cpu;
                        a.memory += pod.requests.memory;
                        a.gpus += pod.requests.gpus;
                        a.pods += 1;
                    }
                }
                None => {
                    let detail: Vec<String> =
                        reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
                    let message = format!(
                        "0/{} nodes are available: {}.",
                        index.nodes.len(),
                        detail.join(", ")
                    );
                    mark_unschedulable(state, key, pod.unschedulable, &message);
                }
            }
        }
    }
}

/// What the pod's resource claims need (`None` without claims), or why this scheduler will
/// not place it; the claims of its templates are made first (`make_claims`). The devices are
/// read the first time a pod has claims.
fn claims(
    state: &mut State,
    devices: &mut Option<Devices>,
    key: &Key,
    spec: &Value,
) -> Result<Option<Vec<Need>>, String> {
    if spec["resourceClaims"].as_array().is_none_or(Vec::is_empty) {
        return Ok(None);
    }
    make_claims(state, key, spec);
    let d = devices.get_or_insert_with(|| Devices::read(state));
    d.needs(state, key, spec).map(Some)
}

/// `PodScheduled=False` with reason `Unschedulable`; a pod that stays unschedulable is
/// written once, not on every pass.
fn mark_unschedulable(state: &mut State, key: &Key, already: bool, message: &str) {
    if already {
        return;
    }
    let _ = state.modify(Resource::Pods, key, |v| {
        set_condition(
            v,
            "PodScheduled",
            "False",
            Some("Unschedulable"),
            Some(message),
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(labels: &[(&str, &str)], taints: Value) -> NodeInfo {
        NodeInfo {
            allocatable: Amounts {
                cpu: 4000,
                memory: 8 << 30,
                gpus: 0,
                pods: 110,
            },
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            taints: taints.as_array().cloned().unwrap_or_default(),
            ready: true,
            unschedulable: false,
            never_ready: false,
            ip: String::new(),
            since: tokio::time::Instant::now(),
        }
    }

    fn req(cpu: i64) -> Amounts {
        Amounts {
            cpu,
            memory: 1 << 20,
            gpus: 0,
            pods: 1,
        }
    }

    #[test]
    fn resources_taints_and_selectors() {
        let plain = node(&[("zone", "a")], json!([]));
        let pod = json!({});
        assert_eq!(
            misfit(&pod, &req(5000), "n", &plain, Amounts::default()).as_deref(),
            Some("Insufficient cpu")
        );
        assert!(misfit(&pod, &req(1000), "n", &plain, Amounts::default()).is_none());
        let tainted = node(
            &[],
            json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
        );
        assert!(
            misfit(&pod, &req(1), "n", &tainted, Amounts::default())
                .unwrap()
                .contains("untolerated taint")
        );
        let tolerant = json!({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]});
        assert!(misfit(&tolerant, &req(1), "n", &tainted, Amounts::default()).is_none());
        let picky = json!({"nodeSelector": {"zone": "b"}});
        assert!(
            misfit(&picky, &req(1), "n", &plain, Amounts::default())
                .unwrap()
                .contains("affinity/selector")
        );
    }

    #[test]
    fn node_affinity_terms_and_match_fields() {
        let labels: BTreeMap<String, String> = [("zone".to_string(), "a".to_string())].into();
        let pod = |term: Value| json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}});
        assert!(selector_fits(
            &pod(
                json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]})
            ),
            "n1",
            &labels
        ));
        assert!(!selector_fits(
            &pod(
                json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]})
            ),
            "n1",
            &labels
        ));
        assert!(selector_fits(
            &pod(
                json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]})
            ),
            "n1",
            &labels
        ));
        assert!(!selector_fits(
            &pod(
                json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]})
            ),
            "n1",
            &labels
        ));
    }
}
