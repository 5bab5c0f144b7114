//! PodDisruptionBudget status, as the disruption controller keeps it.

use std::collections::BTreeMap;

use serde_json::Value;

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
