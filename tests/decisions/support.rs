//! Shared by the scenario and replay tests: comparing a plan (as JSON) with what a test
//! expects of it, as a subset, reporting every difference with its path.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

/// Checks that `expected` is contained in `actual`; records each difference with its path.
pub fn subset(expected: &Value, actual: &Value, path: &str, errors: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, v) in e {
                match a.get(k) {
                    Some(av) => subset(v, av, &format!("{path}.{k}"), errors),
                    None => errors.push(format!("{path}.{k}: missing (expected {v})")),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                errors.push(format!(
                    "{path}: expected {} items, got {}: {actual}",
                    e.len(),
                    a.len()
                ));
                return;
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                subset(ev, av, &format!("{path}[{i}]"), errors);
            }
        }
        (Value::Number(e), Value::Number(a)) if e.as_f64() == a.as_f64() => {}
        (e, a) if e == a => {}
        (e, a) => errors.push(format!("{path}: expected {e}, got {a}")),
    }
}

pub fn keyed<'a>(list: &'a Value, key: &str) -> serde_json::Map<String, Value> {
    let items: &'a [Value] = list.as_array().map(Vec::as_slice).unwrap_or(&[]);
    items
        .iter()
        .map(|v| (v[key].as_str().unwrap_or_default().to_string(), v.clone()))
        .collect()
}

pub fn check_pods(expected: &Value, plan: &Value, errors: &mut Vec<String>) {
    let pods = keyed(&plan["pendingPods"], "pod");
    for (name, want) in expected.as_object().into_iter().flatten() {
        let Some(got) = pods.get(name) else {
            errors.push(format!("pods.{name}: not among the pending pods"));
            continue;
        };
        let mut plain = want.clone();
        let plain_map = plain.as_object_mut().unwrap();
        let codes = plain_map.remove("codes");
        let messages = plain_map.remove("messages");
        subset(&plain, got, &format!("pods.{name}"), errors);
        let reasons = got["reasons"].as_array().cloned().unwrap_or_default();
        if let Some(codes) = codes {
            let got_codes: Vec<Value> = reasons.iter().map(|r| r["code"].clone()).collect();
            subset(
                &codes,
                &Value::Array(got_codes),
                &format!("pods.{name}.codes"),
                errors,
            );
        }
        for m in messages
            .iter()
            .flat_map(|m| m.as_array().cloned().unwrap_or_default())
        {
            let m = m.as_str().unwrap_or_default();
            if !reasons
                .iter()
                .any(|r| r["message"].as_str().unwrap_or_default().contains(m))
            {
                errors.push(format!(
                    "pods.{name}: no reason mentions {m:?}: {}",
                    got["reasons"]
                ));
            }
        }
    }
}

pub fn contains_all(
    expected: Option<&Value>,
    texts: Vec<&str>,
    what: &str,
    errors: &mut Vec<String>,
) {
    for want in expected.and_then(Value::as_array).into_iter().flatten() {
        let want = want.as_str().unwrap_or_default();
        if !texts.iter().any(|t| t.contains(want)) {
            errors.push(format!("{what}: none contains {want:?}: {texts:?}"));
        }
    }
}

/// Checks a plan (as JSON) against an `expect` block; returns every difference.
pub fn check_expect(expect: &Value, plan: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for key in ["scaleUp", "scaleDown", "scaleDownHeld", "unneeded"] {
        if let Some(e) = expect.get(key) {
            subset(e, &plan[key], key, &mut errors);
        }
    }
    if let Some(e) = expect.get("nodeGroups") {
        subset(
            e,
            &Value::Object(keyed(&plan["nodeGroups"], "id")),
            "nodeGroups",
            &mut errors,
        );
    }
    if let Some(e) = expect.get("notRemovable") {
        subset(
            e,
            &Value::Object(keyed(&plan["notRemovable"], "node")),
            "notRemovable",
            &mut errors,
        );
    }
    if let Some(e) = expect.get("provisioningRequests") {
        subset(
            e,
            &Value::Object(keyed(&plan["provisioningRequests"], "request")),
            "provisioningRequests",
            &mut errors,
        );
    }
    if let Some(e) = expect.get("pods") {
        check_pods(e, plan, &mut errors);
    }
    for key in [
        "limits",
        "settings",
        "health",
        "fixTargetSize",
        "deleteFailedMachines",
        "deleteUnregistered",
        "scaleDownPaused",
        "fleetPolicy",
    ] {
        if let Some(e) = expect.get(key) {
            subset(e, &plan[key], key, &mut errors);
        }
    }
    let reasons: Vec<&str> = plan["scaleUp"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["reason"].as_str())
        .collect();
    contains_all(
        expect.get("reasonContains"),
        reasons,
        "scale-up reasons",
        &mut errors,
    );
    let warnings: Vec<&str> = plan["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    contains_all(expect.get("warnings"), warnings, "warnings", &mut errors);
    errors
}
