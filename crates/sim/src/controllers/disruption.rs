//! PodDisruptionBudget status, as the disruption controller keeps it: expected and healthy
//! pods, the healthy count the budget demands (`minAvailable` / `maxUnavailable`, integers
//! or percentages), and `disruptionsAllowed`, which the eviction subresource checks.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::index::Index;
use crate::api::resources::Resource;
use crate::api::subresources::set_condition;
use crate::registry::{State, WriteMode};
use crate::store::Key;

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
        .map(|pdb| (pdb.key.clone(), pdb.value()))
        .collect();
    if budgets.is_empty() {
        return;
    }
    let counts = count(&budgets, index);
    for ((key, mut value), (expected, healthy)) in budgets.into_iter().zip(counts) {
        write_status(&mut value, expected, healthy);
        let _ = state.update(
            Resource::PodDisruptionBudgets,
            &key,
            value,
            WriteMode::Internal,
        );
    }
}

/// Expected and healthy pods of each budget, in one look at every pod: a budget selects
/// pods of its own namespace only, and a cluster has tens of thousands of pods and a few
/// budgets (grouping the pods by namespace first cost more than the matching).
fn count(budgets: &[(Key, Value)], index: &Index) -> Vec<(i64, i64)> {
    let selectors: Vec<(&str, Selector<'_>)> = budgets
        .iter()
        .map(|(key, value)| (&*key.namespace, Selector::of(&value["spec"]["selector"])))
        .collect();
    let mut counts = vec![(0i64, 0i64); budgets.len()];
    for (key, pod) in &index.pods {
        if pod.terminating {
            continue;
        }
        for (i, (namespace, selector)) in selectors.iter().enumerate() {
            if *namespace == &*key.namespace && selector.matches(&pod.labels) {
                counts[i].0 += 1;
                counts[i].1 += i64::from(pod.phase == "Running");
            }
        }
    }
    counts
}

fn write_status(value: &mut Value, expected: i64, healthy: i64) {
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
    set_condition(value, "DisruptionAllowed", cond, Some(reason), Some(""));
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

    fn pod(phase: &str, app: &str, terminating: bool) -> super::super::index::PodInfo {
        super::super::index::PodInfo {
            node: "n1".into(),
            phase: phase.into(),
            terminating,
            requests: Default::default(),
            labels: [("app".to_string(), app.to_string())].into(),
            owner_uid: String::new(),
            since: tokio::time::Instant::now(),
            spec: None,
            unschedulable: false,
        }
    }

    #[test]
    fn a_budget_counts_the_live_pods_it_selects_in_its_namespace_only() {
        let mut index = Index::default();
        let pods = [
            ("shop", "a", "Running", "web", false),
            ("shop", "b", "Pending", "web", false),
            ("shop", "c", "Running", "web", true),
            ("shop", "d", "Running", "db", false),
            ("other", "e", "Running", "web", false),
        ];
        for (ns, name, phase, app, terminating) in pods {
            index
                .pods
                .insert(Key::new(ns, name), pod(phase, app, terminating));
        }
        let budget = |ns: &str, app: &str| {
            let value = json!({"spec": {"selector": {"matchLabels": {"app": app}}}});
            (Key::new(ns, app), value)
        };
        let budgets = [
            budget("shop", "web"),
            budget("shop", "db"),
            budget("empty", "web"),
        ];
        assert_eq!(count(&budgets, &index), [(2, 1), (1, 1), (0, 0)]);
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
