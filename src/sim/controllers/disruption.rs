//! PodDisruptionBudget status, as the disruption controller keeps it: expected and healthy
//! pods, the healthy count the budget demands (`minAvailable` / `maxUnavailable`, integers
//! or percentages), and `disruptionsAllowed`, which the eviction subresource checks.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use super::index::{Index, PodInfo};
use crate::sim::api::resources::Resource;
use crate::sim::api::subresources::set_condition;
use crate::sim::registry::{State, WriteMode};

/// Whether a `LabelSelector` object (`matchLabels`, `matchExpressions`) selects `labels`.
/// An empty or missing selector selects nothing (the policy/v1 rule for PDBs).
pub fn selector_matches(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    Selector::of(selector).matches(labels)
}

/// A `LabelSelector` read once, to be matched against many pods.
struct Selector<'a> {
    labels: Vec<(&'a str, Option<&'a str>)>,
    /// (key, operator, values)
    exprs: Vec<(&'a str, &'a str, Vec<&'a str>)>,
}

impl<'a> Selector<'a> {
    fn of(selector: &'a Value) -> Self {
        let labels = selector["matchLabels"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect())
            .unwrap_or_default();
        let exprs = selector["matchExpressions"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|e| {
                        let values = e["values"]
                            .as_array()
                            .map(|v| v.iter().filter_map(Value::as_str).collect())
                            .unwrap_or_default();
                        let key = e["key"].as_str().unwrap_or_default();
                        (key, e["operator"].as_str().unwrap_or_default(), values)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Selector { labels, exprs }
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        if self.labels.is_empty() && self.exprs.is_empty() {
            return false;
        }
        let labels_ok = self
            .labels
            .iter()
            .all(|(k, v)| labels.get(*k).map(String::as_str) == *v);
        labels_ok
            && self.exprs.iter().all(|(key, op, values)| {
                let actual = labels.get(*key).map(String::as_str);
                match *op {
                    "In" => actual.is_some_and(|a| values.contains(&a)),
                    "NotIn" => actual.is_none_or(|a| !values.contains(&a)),
                    "Exists" => actual.is_some(),
                    "DoesNotExist" => actual.is_none(),
                    _ => false,
                }
            })
    }
}

/// An int-or-percent value scaled against `total`; percentages round up, as Kubernetes does.
fn scaled(value: &Value, total: i64) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.trim().parse().ok()?;
            Some((pct * total + 99) / 100)
        }
        _ => None,
    }
}

/// The healthy pods a budget demands of `expected` pods.
pub fn desired_healthy(spec: &Value, expected: i64) -> i64 {
    if let Some(min) = spec.get("minAvailable").and_then(|v| scaled(v, expected)) {
        return min;
    }
    if let Some(max) = spec.get("maxUnavailable").and_then(|v| scaled(v, expected)) {
        return (expected - max).max(0);
    }
    0
}

/// Recomputes the status of every PodDisruptionBudget.
pub fn step(state: &mut State, index: &Index) {
    let budgets: Vec<_> = state
        .store
        .range(Resource::PodDisruptionBudgets, None, None)
        .cloned()
        .collect();
    if budgets.is_empty() {
        return;
    }
    // A budget selects pods of its own namespace only: one look at every pod, then each
    // budget reads its namespace's (a cluster of 30,000 pods and dozens of budgets).
    let mut by_namespace: HashMap<&str, Vec<&PodInfo>> = HashMap::new();
    for (key, pod) in &index.pods {
        if !pod.terminating {
            by_namespace.entry(&key.namespace).or_default().push(pod);
        }
    }
    for pdb in budgets {
        let mut value = pdb.value();
        let selector_value = value["spec"]["selector"].clone();
        let selector = Selector::of(&selector_value);
        let (mut expected, mut healthy) = (0i64, 0i64);
        let pods = by_namespace
            .get(&*pdb.key.namespace)
            .map_or(&[][..], Vec::as_slice);
        for pod in pods {
            if !selector.matches(&pod.labels) {
                continue;
            }
            expected += 1;
            if pod.phase == "Running" {
                healthy += 1;
            }
        }
        let desired = desired_healthy(&value["spec"], expected);
        let allowed = (healthy - desired).max(0);
        let generation = value["metadata"]["generation"].clone();
        let status = &mut value["status"];
        status["observedGeneration"] = generation;
        status["expectedPods"] = json!(expected);
        status["currentHealthy"] = json!(healthy);
        status["desiredHealthy"] = json!(desired);
        status["disruptionsAllowed"] = json!(allowed);
        status["disruptedPods"] = json!({});
        let (cond, reason) = if allowed > 0 {
            ("True", "SufficientPods")
        } else {
            ("False", "InsufficientPods")
        };
        set_condition(
            &mut value,
            "DisruptionAllowed",
            cond,
            Some(reason),
            Some(""),
        );
        let _ = state.update(
            Resource::PodDisruptionBudgets,
            &pdb.key,
            value,
            WriteMode::Internal,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_in_numbers_and_percentages() {
        assert_eq!(desired_healthy(&json!({"minAvailable": 2}), 5), 2);
        assert_eq!(desired_healthy(&json!({"minAvailable": "50%"}), 5), 3);
        assert_eq!(desired_healthy(&json!({"maxUnavailable": 1}), 5), 4);
        assert_eq!(desired_healthy(&json!({"maxUnavailable": "25%"}), 5), 3);
        assert_eq!(desired_healthy(&json!({}), 5), 0);
    }

    #[test]
    fn selectors_with_expressions() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        assert!(selector_matches(
            &json!({"matchLabels": {"app": "web"}}),
            &labels
        ));
        assert!(selector_matches(
            &json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}),
            &labels
        ));
        assert!(!selector_matches(&json!({}), &labels));
        assert!(!selector_matches(
            &json!({"matchLabels": {"app": "db"}}),
            &labels
        ));
    }
}
