#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Replays: a sequence of cluster dumps and times, run one after the other through
//! `fleetscaler plan --state FILE --save-state FILE`, as from a shell loop. Each folder in
//! `tests/replays/` holds the dumps and `expected.yaml`: `passes`, each with its `dump`, its
//! `now` and what its plan must contain (`expect`, as in the scenario tests), and may name a
//! `fleetPolicy` file (`--fleet-policy`). A dump may be another replay's (`../<replay>/t00.yaml`).

use crate::support;

use std::path::{Path, PathBuf};

use fleetscaler::cli::plan::{OutputFormat, PlanArgs, compute};
use serde_json::Value;

fn replay(dir: &Path) -> Vec<String> {
    let spec: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("expected.yaml")).unwrap())
            .unwrap();
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let state = std::env::temp_dir().join(format!(
        "fleetscaler-replay-{}-{name}.json",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&state);
    let mut errors = Vec::new();
    for (i, pass) in spec["passes"].as_array().unwrap().iter().enumerate() {
        let args = PlanArgs {
            snapshots: vec![dir.join(pass["dump"].as_str().unwrap())],
            config: None,
            cluster: None,
            now: pass["now"].as_str().map(str::to_string),
            seed: None,
            expander: None,
            set: Vec::new(),
            output: OutputFormat::Json,
            state: Some(state.clone()),
            fleet_policy: pass["fleetPolicy"].as_str().map(|f| dir.join(f)),
            save_state: Some(state.clone()),
        };
        let plan = serde_json::to_value(
            compute(&args).unwrap_or_else(|e| panic!("{name} pass {}: {e}", i + 1)),
        )
        .unwrap();
        let at = pass["dump"].as_str().unwrap_or_default();
        errors.extend(
            support::check_expect(&pass["expect"], &plan)
                .into_iter()
                .map(|e| format!("{name} {at}: {e}")),
        );
    }
    let _ = std::fs::remove_file(&state);
    errors
}

#[test]
fn every_replay_gives_its_expected_plans() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/replays");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 5, "replays missing: {dirs:?}");
    let failures: Vec<String> = dirs.iter().flat_map(|d| replay(d)).collect();
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
