#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Scenario tests: every folder in `tests/scenarios/` holds a cluster dump (`dump.yaml`, as
//! `oc get ... -o yaml` prints it) and the plan it must produce (`expected.yaml`). The plan
//! is computed exactly as `fleetscaler plan` computes it, and compared as a subset: every
//! value written in `expect` must be there; anything not written is not checked.
//!
//! `expect` keys: `scaleUp` (the whole list, in order), `nodeGroups` (by id), `pods` (by
//! `ns/name`, with `codes`: the reason codes in order, and `messages`: substrings of the
//! reasons), `limits`, `settings` (by key), `health`, `fixTargetSize`, `deleteFailedMachines`,
//! `deleteUnregistered`, `reasonContains` (substrings of any scale-up reason) and `warnings`
//! (substrings of any warning). `args` may give `state` (a state file in the folder), `seed`,
//! `expander`, `set` (a list of `key=value`), `config` and `cluster`.

use std::path::{Path, PathBuf};

use fleetscaler::cli::plan::{OutputFormat, PlanArgs, compute};
use serde_json::Value;

fn scenario_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn args_for(dir: &Path, spec: &Value) -> PlanArgs {
    let extra = spec.get("args").cloned().unwrap_or(Value::Null);
    let text = |k: &str| extra.get(k).and_then(Value::as_str).map(str::to_string);
    PlanArgs {
        snapshots: vec![dir.join("dump.yaml")],
        config: text("config").map(|c| dir.join(c)),
        cluster: text("cluster"),
        now: spec.get("now").and_then(Value::as_str).map(str::to_string),
        seed: extra.get("seed").and_then(Value::as_u64),
        expander: text("expander"),
        set: extra
            .get("set")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        output: OutputFormat::Json,
        state: text("state").map(|f| dir.join(f)),
        save_state: None,
    }
}

/// Checks that `expected` is contained in `actual`; records each difference with its path.
fn subset(expected: &Value, actual: &Value, path: &str, errors: &mut Vec<String>) {
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

fn keyed<'a>(list: &'a Value, key: &str) -> serde_json::Map<String, Value> {
    let items: &'a [Value] = list.as_array().map(Vec::as_slice).unwrap_or(&[]);
    items
        .iter()
        .map(|v| (v[key].as_str().unwrap_or_default().to_string(), v.clone()))
        .collect()
}

fn check_pods(expected: &Value, plan: &Value, errors: &mut Vec<String>) {
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

fn contains_all(expected: Option<&Value>, texts: Vec<&str>, what: &str, errors: &mut Vec<String>) {
    for want in expected.and_then(Value::as_array).into_iter().flatten() {
        let want = want.as_str().unwrap_or_default();
        if !texts.iter().any(|t| t.contains(want)) {
            errors.push(format!("{what}: none contains {want:?}: {texts:?}"));
        }
    }
}

fn check(dir: &Path) -> Vec<String> {
    let spec_text = std::fs::read_to_string(dir.join("expected.yaml")).unwrap();
    let spec: Value = serde_saphyr::from_str(&spec_text).unwrap();
    let report =
        compute(&args_for(dir, &spec)).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let plan = serde_json::to_value(&report).unwrap();
    let expect = &spec["expect"];
    let mut errors = Vec::new();
    if let Some(e) = expect.get("scaleUp") {
        subset(e, &plan["scaleUp"], "scaleUp", &mut errors);
    }
    if let Some(e) = expect.get("nodeGroups") {
        subset(
            e,
            &Value::Object(keyed(&plan["nodeGroups"], "id")),
            "nodeGroups",
            &mut errors,
        );
    }
    if let Some(e) = expect.get("pods") {
        check_pods(e, &plan, &mut errors);
    }
    for key in [
        "limits",
        "settings",
        "health",
        "fixTargetSize",
        "deleteFailedMachines",
        "deleteUnregistered",
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
        .into_iter()
        .map(|e| format!("{}: {e}", dir.file_name().unwrap().to_string_lossy()))
        .collect()
}

#[test]
fn every_scenario_gives_its_expected_plan() {
    let dirs = scenario_dirs();
    assert!(dirs.len() >= 14, "scenarios missing: {dirs:?}");
    let failures: Vec<String> = dirs.iter().flat_map(|d| check(d)).collect();
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn plans_are_reproducible_for_a_seed() {
    for dir in scenario_dirs() {
        let spec: Value =
            serde_saphyr::from_str(&std::fs::read_to_string(dir.join("expected.yaml")).unwrap())
                .unwrap();
        let a = serde_json::to_value(compute(&args_for(&dir, &spec)).unwrap()).unwrap();
        let b = serde_json::to_value(compute(&args_for(&dir, &spec)).unwrap()).unwrap();
        assert_eq!(a, b, "{}", dir.display());
    }
}

#[test]
fn the_harness_catches_a_wrong_expectation() {
    let mut errors = Vec::new();
    subset(
        &serde_json::json!({"a": [1, {"b": 2}]}),
        &serde_json::json!({"a": [1, {"b": 3}], "c": 0}),
        "",
        &mut errors,
    );
    assert_eq!(errors, vec![".a[1].b: expected 2, got 3"]);
}
