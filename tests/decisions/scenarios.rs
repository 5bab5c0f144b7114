#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Scenario tests: every folder in `tests/scenarios/` holds a cluster dump (`dump.yaml`, as
//! `oc get ... -o yaml` prints it) and the plan it must produce (`expected.yaml`). The plan
//! is computed exactly as `fleetscaler plan` computes it, and compared as a subset: every
//! value written in `expect` must be there; anything not written is not checked.
//!
//! `expect` keys: `scaleUp` (the whole list, in order), `nodeGroups` (by id), `pods` (by
//! `ns/name`, with `codes`: the reason codes in order, and `messages`: substrings of the
//! reasons), `provisioningRequests` (by `ns/name`: `decision`, `reason`, `conditions`...), `limits`, `settings` (by key), `health`, `fixTargetSize`, `deleteFailedMachines`,
//! `deleteUnregistered`, `reasonContains` (substrings of any scale-up reason) and `warnings`
//! (substrings of any warning). `args` may give `state` (a state file in the folder), `seed`,
//! `expander`, `set` (a list of `key=value`), `config`, `cluster`, `fleetPolicy` (a file) and
//! `dump` (another scenario's dump, instead of the folder's own).

use std::path::{Path, PathBuf};

use crate::support;

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
        snapshots: vec![dir.join(text("dump").unwrap_or_else(|| "dump.yaml".into()))],
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
        fleet_policy: text("fleetPolicy").map(|f| dir.join(f)),
        save_state: None,
    }
}

fn check(dir: &Path) -> Vec<String> {
    let spec_text = std::fs::read_to_string(dir.join("expected.yaml")).unwrap();
    let spec: Value = serde_saphyr::from_str(&spec_text).unwrap();
    let report =
        compute(&args_for(dir, &spec)).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let plan = serde_json::to_value(&report).unwrap();
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    support::check_expect(&spec["expect"], &plan)
        .into_iter()
        .map(|e| format!("{name}: {e}"))
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
    support::subset(
        &serde_json::json!({"a": [1, {"b": 2}]}),
        &serde_json::json!({"a": [1, {"b": 3}], "c": 0}),
        "",
        &mut errors,
    );
    assert_eq!(errors, vec![".a[1].b: expected 2, got 3"]);
}
