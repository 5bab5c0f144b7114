//! The scenarios of tests/scenarios as fuzzing seeds: real dumps, and the time and flags
//! each is planned with, so that mutants reach the engine paths the scenario exercises.

use std::path::{Path, PathBuf};

use fleetscaler::cli::plan::PlanArgs;
use serde_json::Value;

pub struct Scenario {
    pub name: String,
    pub dir: PathBuf,
    pub dump: String,
    /// expected.yaml: `now` and `args` are read.
    pub spec: Value,
}

pub fn scenarios() -> Vec<Scenario> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("dump.yaml").is_file())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 14, "scenarios missing in {}", root.display());
    dirs.into_iter()
        .map(|dir| {
            let spec = std::fs::read_to_string(dir.join("expected.yaml")).unwrap();
            Scenario {
                name: dir.file_name().unwrap().to_string_lossy().into_owned(),
                dump: std::fs::read_to_string(dir.join("dump.yaml")).unwrap(),
                spec: serde_saphyr::from_str(&spec).unwrap(),
                dir,
            }
        })
        .collect()
}

/// `fleetscaler plan -s SNAPSHOT -o OUTPUT` with the scenario's own time and flags (as
/// tests/decisions/scenarios.rs gives them) and then `extra`, parsed as the command line is: what a
/// user runs, whatever fields `PlanArgs` grows.
pub fn plan_args(s: &Scenario, snapshot: &Path, output: &str, extra: &[String]) -> PlanArgs {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        plan: PlanArgs,
    }
    let args = s.spec.get("args").cloned().unwrap_or(Value::Null);
    let mut words: Vec<String> = vec!["plan".into(), "-s".into(), snapshot.display().to_string()];
    words.extend(["-o".into(), output.into()]);
    let mut flag = |name: &str, value: String| words.extend([format!("--{name}"), value]);
    if let Some(now) = s.spec.get("now").and_then(Value::as_str) {
        flag("now", now.into());
    }
    // A fleet.toml given in `extra` replaces the scenario's own (and its cluster).
    let own_config = !extra.iter().any(|w| w == "--config");
    let files = [
        ("config", "config"),
        ("state", "state"),
        ("fleetPolicy", "fleet-policy"),
    ];
    for (key, name) in files {
        let file = args.get(key).and_then(Value::as_str);
        if let Some(file) = file.filter(|_| own_config || key != "config") {
            flag(name, s.dir.join(file).display().to_string());
        }
    }
    for key in ["cluster", "expander"] {
        let value = args.get(key).and_then(Value::as_str);
        if let Some(v) = value.filter(|_| own_config || key != "cluster") {
            flag(key, v.into());
        }
    }
    if let Some(seed) = args.get("seed").and_then(Value::as_u64) {
        flag("seed", seed.to_string());
    }
    for kv in args
        .get("set")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        flag("set", kv.as_str().unwrap_or_default().into());
    }
    words.extend(extra.iter().cloned());
    <Cli as clap::Parser>::try_parse_from(words).unwrap().plan
}
