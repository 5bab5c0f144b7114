//! PodDisruptionBudget status, as the disruption controller keeps it: expected and healthy
//! pods, the healthy count the budget demands (`minAvailable` / `maxUnavailable`, integers
//! or percentages), and `disruptionsAllowed`, which the eviction subresource checks.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::index::Index;
use crate::sim::api::resources::Resource;
use crate::sim::api::subresources::set_condition;
use crate::sim::registry::{State, WriteMode};

/// Whether a `LabelSelector` object (`matchLabels`, `matchExpressions`) selects `labels`.
/// An empty or missing selector selects nothing (the policy/v1 rule for PDBs).
pub fn selector_matches(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    let Some(sel) = selector.as_object() else {
        return false;
    };
    let match_labels = sel.get("matchLabels").and_then(Value::as_object);
    let exprs = sel.get("matchExpressions").and_then(Value::as_array);
    if match_labels.is_none_or(|m| m.is_empty()) && exprs.is_none_or(|e| e.is_empty()) {
        return false;
    }
    let labels_ok = match_labels.is_none_or(|m| {
        m.iter()
            .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
    });
    let exprs_ok = exprs.is_none_or(|list| {
        list.iter().all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let actual = labels.get(key).map(String::as_str);
            match e["operator"].as_str().unwrap_or_default() {
                "In" => actual.is_some_and(|a| values.contains(&a)),
                "NotIn" => actual.is_none_or(|a| !values.contains(&a)),
                "Exists" => actual.is_some(),
                "DoesNotExist" => actual.is_none(),
                _ => false,
            }
        })
    });
    labels_ok && exprs_ok
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
    for pdb in budgets {
        let mut value = pdb.value();
        let selector = value["spec"]["selector"].clone();
        let (mut expected, mut healthy) = (0i64, 0i64);
        for (key, pod) in &index.pods {
            if *key.namespace != *pdb.key.namespace
                || pod.terminating
                || !selector_matches(&selector, &pod.labels)
            {
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
