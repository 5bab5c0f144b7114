//! Fuzz targets of fleet.toml (declared in tests/fleet/fuzz/mod.rs), through what `check-config
//! --offline` and `plan --config` run: any text is checked without a panic, a valid file
//! prints its report, an invalid one is refused with each problem naming its key (or, for
//! the file as a whole, its line), and hostile settings reach the engine, which plans
//! within the time limit.

use fleetscaler::cli::check_config::{self, CheckConfigArgs, CheckConfigError};
use fleetscaler::cli::plan::{self, OutputFormat, PlanError};
use fleetscaler::config::ConfigError;
use fleetscaler::engine::settings::SETTING_KEYS;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde_json::Value;

use crate::fuzz_support::mutate::{self, Edit};
use crate::fuzz_support::scenarios::{plan_args, scenarios};
use crate::fuzz_support::{self, Reach, Scratch, bounded, excerpt, repo_file};

/// Each problem names a line, or a key the file has (its last part, as the file spells it:
/// `clusters[1].overrides.cores` → `cores`), or, for the file as a whole, why it cannot be
/// read.
fn check_config_error(e: &ConfigError, file: &str, text: &str) -> Result<(), String> {
    let shown = excerpt(&e.to_string(), 600);
    if e.source_name != file || e.issues.is_empty() {
        return Err(format!("the error names no file or no problem: {shown}"));
    }
    for issue in &e.issues {
        let whole_file = matches!(issue.key.as_str(), "<file>" | "<root>");
        let last = issue.key.rsplit('.').next().unwrap_or_default();
        let last = last.split('[').next().unwrap_or_default();
        let named = names_a_line(&issue.message)
            || if whole_file {
                issue.message.starts_with("cannot read it")
            } else {
                !last.is_empty() && text.contains(last)
            };
        if !named {
            return Err(format!(
                "problem {:?} names neither a key of the file nor a line: {shown}",
                issue.key
            ));
        }
    }
    Ok(())
}

/// `line 12` somewhere in the message.
fn names_a_line(message: &str) -> bool {
    message
        .match_indices("line ")
        .any(|(at, m)| message[at + m.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

/// `check-config --offline` on `text`, text or JSON: `Ok(true)` when the file was valid
/// and reported, `Ok(false)` when it was refused as it should be.
fn check_config_on(scratch: &Scratch, text: &[u8], json: bool) -> Result<bool, String> {
    let path = scratch.file("fleet.toml", text);
    let output = if json {
        OutputFormat::Json
    } else {
        OutputFormat::Text
    };
    let args = CheckConfigArgs {
        config: path.clone(),
        output,
        offline: true,
    };
    let result = bounded(move || {
        let mut out = Vec::new();
        check_config::run(&args, &mut out).map(|()| String::from_utf8_lossy(&out).into_owned())
    });
    let _ = std::fs::remove_file(&path);
    let name = path.display().to_string();
    match result? {
        Ok(out) if json => serde_json::from_str::<Value>(&out)
            .ok()
            .filter(|v| v["clusters"].is_array())
            .map(|_| true)
            .ok_or_else(|| format!("the JSON report does not read: {}", excerpt(&out, 300))),
        Ok(out) if out.starts_with(&format!("{name}: valid, ")) => Ok(true),
        Ok(out) => Err(format!(
            "the report does not name the file: {}",
            excerpt(&out, 300)
        )),
        Err(CheckConfigError::Invalid(e)) => {
            check_config_error(&e, &name, &String::from_utf8_lossy(text)).map(|()| false)
        }
        Err(other) => Err(format!("unexpected error: {other}")),
    }
}

/// TOML-shaped lines: the file's tables and keys, with values at the edges of their types.
fn tomlish() -> impl Strategy<Value = String> {
    let mut keys: Vec<String> = SETTING_KEYS.iter().map(|k| k.to_string()).collect();
    keys.extend(
        [
            "listen",
            "scan_interval",
            "debounce",
            "request_timeout",
            "kubeconfigs",
            "dry_run",
            "status_namespace",
            "enabled",
            "context",
            "namespace",
            "lease_name",
            "identity",
            "lease_duration",
            "renew_deadline",
            "retry_period",
            "endpoint",
            "protocol",
            "headers",
            "timeout",
            "sampler_ratio",
            "metrics",
            "metrics_interval",
            "max_unhealthy_percentage",
            "max_unhealthy_clusters",
            "max_unready_nodes_percentage",
            "pause_scale_down_when_degraded",
            "name",
            "kubeconfig",
            "use_cluster_autoscaler",
            "kind",
            "api_group",
            "min",
            "max",
            "type",
        ]
        .map(str::to_string),
    );
    let header = select(vec![
        "[hub]",
        "[hub.leader_election]",
        "[hub.tracing]",
        "[hub.serving]",
        "[fleet]",
        "[defaults]",
        "[[clusters]]",
        "[clusters.overrides]",
        "[[clusters.node_groups]]",
        "[x]",
        "",
    ]);
    let value = select(mutate::hostile_toml_values());
    let line = prop_oneof![
        3 => (select(keys), value).prop_map(|(k, v)| format!("{k} = {v}")),
        1 => header.prop_map(str::to_string),
        1 => "[a-z_=\\[\\]\"'{}.,# 0-9-]{0,30}",
    ];
    prop::collection::vec(line, 0..24).prop_map(|l| l.join("\n"))
}

#[test]
fn fleet_toml_never_panics_and_errors_name_the_key_or_line() {
    let scratch = Scratch::new("toml");
    let text = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..400),
        any::<String>().prop_map(String::into_bytes),
        tomlish().prop_map(String::into_bytes),
    ];
    fuzz_support::run(
        "fleet_toml_never_panics_and_errors_name_the_key_or_line",
        150,
        (text, any::<bool>()),
        |(text, json)| {
            let outcome = check_config_on(&scratch, &text, json);
            outcome.map(|_| ()).map_err(|why| {
                let file = excerpt(&String::from_utf8_lossy(&text), 2000);
                format!("{why}\nfile:\n{file}")
            })
        },
    );
}

#[test]
fn fleet_toml_example_mutants_are_checked_or_name_the_key_or_line() {
    let scratch = Scratch::new("toml-example");
    let example = repo_file("fleet.toml.example");
    let values = mutate::hostile_toml_values();
    let lines = mutate::hostile_toml_lines();
    let edits = prop::collection::vec(mutate::edit(values.len(), lines.len(), true), 1..4);
    let reach = Reach::default();
    let name = "fleet_toml_example_mutants_are_checked_or_name_the_key_or_line";
    fuzz_support::run(
        name,
        64,
        (edits, any::<bool>()),
        |(edits, json): (Vec<Edit>, bool)| {
            let bytes = mutate::apply(&example, &edits, &values, &lines);
            let outcome = check_config_on(&scratch, &bytes, json);
            outcome.map(|valid| reach.count(valid)).map_err(|why| {
                let mutant = String::from_utf8_lossy(&bytes);
                let changed = mutate::changed_lines(&example, &mutant, 8);
                format!("{why}\nchanged lines:\n{changed}")
            })
        },
    );
    reach.require(name, 20);
}

/// Values of a setting's type at the edges of its range, as TOML, separated by ` | `. A key
/// not named here (a setting added later) gets the hostile values of every type.
fn edges_of(key: &str) -> &'static str {
    const DURATION: &str =
        r#""0s" | "1ns" | "1s" | "1h" | "2562047h" | "2562047h47m16.854775807s""#;
    const COUNT: &str = "0 | 1 | 2 | 1000000 | 4294967296 | 9223372036854775807";
    const FRACTION: &str = "0.0 | 1.0 | 0.5 | 5e-324 | 0.9999999999999999";
    match key {
        "pod_priority_threshold" => "-2147483648 | 2147483647 | 0 | -10",
        "max_nodes_total"
        | "max_nodes_per_scaleup"
        | "max_scale_down_parallelism"
        | "max_drain_parallelism"
        | "ok_total_unready_count"
        | "seed" => COUNT,
        "cores" | "memory_gib" => {
            "{ min = 0, max = 0 } | { min = 0 } | { max = 1 } | { min = 9223372036854775807 } \
             | { min = 1, max = 1 } | { min = 4611686018427387904, max = 9223372036854775807 }"
        }
        "gpus" => {
            r#"[] | [{ type = "nvidia-t4", min = 0, max = 0 }] | [{ type = "nvidia.com/gpu", min = 9223372036854775807, max = 9223372036854775807 }]"#
        }
        "expanders" => {
            r#"["random"] | ["priority"] | ["most-pods"] | ["least-nodes"] | ["least-waste", "most-pods", "least-nodes", "random", "priority"]"#
        }
        "priorities" => {
            r#"{} | { "10" = [".*"] } | { "2147483647" = [".*"], "-2147483648" = ["worker.*"] } | { "0" = ["("] }"#
        }
        "balancing_ignored_labels" | "startup_taints" => {
            r#"[] | [""] | ["node.kubernetes.io/not-ready"] | ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]"#
        }
        "node_groups" => {
            r#"[] | [{ kind = "MachineSet", namespace = "openshift-machine-api", name = "worker-us-east-1a", max = 9223372036854775807 }] | [{ kind = "MachineDeployment", namespace = "default", name = "md-0", api_group = "cluster.x-k8s.io", min = 5, max = 5 }]"#
        }
        "scale_down_utilization_threshold" | "scale_down_gpu_utilization_threshold" => FRACTION,
        "max_total_unready_percentage" => "0.0 | 100.0 | 45.0 | 5e-324",
        k if k.starts_with("scale_down_enabled")
            || k.starts_with("balance_")
            || k.starts_with("ignore_")
            || k.starts_with("skip_")
            || k.starts_with("cordon_")
            || k.starts_with("enforce_") =>
        {
            "true | false"
        }
        k if k.ends_with("_time")
            || k.ends_with("_delay")
            || k.contains("_delay_")
            || k.ends_with("_backoff")
            || k.ends_with("_reset")
            || k.ends_with("_period") =>
        {
            DURATION
        }
        _ => "",
    }
}

/// Settings at the edges of their types, from fleet.toml, into the engine on a real dump:
/// `plan --config F --cluster fuzz` plans within the time limit, or the file is refused
/// naming the key.
#[test]
fn hostile_settings_plan_in_bounded_time_or_name_the_key() {
    let scenarios = scenarios();
    let scratch = Scratch::new("settings");
    let dumps: Vec<_> = scenarios
        .iter()
        .map(|s| scratch.file("dump.yaml", s.dump.as_bytes()))
        .collect();
    // Mostly values of the key's own type at its edges (the engine sees them); some of any
    // type (the file is refused, naming the key).
    let setting =
        (select(SETTING_KEYS.to_vec()), any::<Index>(), 0..5).prop_map(|(key, pick, any_type)| {
            let values: Vec<String> = if any_type == 0 {
                mutate::hostile_toml_values()
            } else {
                let edges = edges_of(key);
                if edges.is_empty() {
                    mutate::hostile_toml_values()
                } else {
                    edges.split(" | ").map(str::to_string).collect()
                }
            };
            (key, values[pick.index(values.len())].clone())
        });
    let strategy = (
        0..scenarios.len(),
        prop::collection::vec(setting, 1..4),
        any::<bool>(),
    );
    let reach = Reach::default();
    let target = "hostile_settings_plan_in_bounded_time_or_name_the_key";
    fuzz_support::run(target, 24, strategy, |(which, settings, in_defaults)| {
        let s = &scenarios[which];
        let table: String = settings
            .iter()
            .map(|(k, v)| format!("{k} = {v}\n"))
            .collect();
        let text = if in_defaults {
            format!("[defaults]\n{table}\n[[clusters]]\nname = \"fuzz\"\n")
        } else {
            format!("[[clusters]]\nname = \"fuzz\"\n[clusters.overrides]\n{table}")
        };
        let config = scratch.file("fleet.toml", text.as_bytes());
        let name = config.display().to_string();
        let extra = [
            "--config".into(),
            name.clone(),
            "--cluster".into(),
            "fuzz".into(),
        ];
        let args = plan_args(s, &dumps[which], "json", &extra);
        let outcome = bounded(move || plan::run(&args, &mut Vec::new()))?;
        reach.count(outcome.is_ok());
        let why = match outcome {
            Ok(()) => Ok(()),
            Err(PlanError::Config(e)) => check_config_error(&e, &name, &text),
            Err(other) => Err(format!("unexpected error: {other}")),
        };
        why.map_err(|why| {
            let file = excerpt(&text, 2000);
            format!("{why}\nscenario {}, fleet.toml:\n{file}", s.name)
        })
    });
    reach.require(target, 10);
}

// Regressions found by the targets above (seed 1, 2000 cases): problems that named neither
// the key nor the line (fixed in src/config/mod.rs, `strict_types`).

/// `FleetConfig::build` reports the `config` crate's build error as `<file>: number too
/// large to fit in target type`: an integer between 2^63 and 2^64 passes `strict_types`
/// (toml reads it as a u64) and the `config` crate, which holds i64, refuses it without a
/// key. The `toml` crate's own error says `line 2, column 19`.
#[test]
fn an_integer_past_i64_names_its_key() {
    let text = "[defaults]\nmax_nodes_total = 9223372036854775808\n";
    let e = fleetscaler::config::FleetConfig::parse(text, "fleet.toml").unwrap_err();
    let issue = &e.issues[0];
    assert!(
        issue.key == "defaults.max_nodes_total" || issue.message.contains("line 2"),
        "{e}"
    );
}

/// A table header of 5,000 dotted keys is refused as `<file>: recursion limit`, from the
/// `toml` crate itself, with no line: `strict_types` returns early on a syntax error and
/// the `config` crate passes the message on as it is.
#[test]
fn a_too_deep_table_header_names_its_line() {
    let text = format!("[hub]\n[{}a]\n", "a.".repeat(5_000));
    let e = fleetscaler::config::FleetConfig::parse(&text, "fleet.toml").unwrap_err();
    assert!(e.issues[0].message.contains("line 2"), "{e}");
}

/// A TOML date where a table is expected is refused naming the line, but the key and the
/// message carry the `toml` crate's internal field name:
/// `clusters[0].overrides.cores.$__toml_private_datetime: unknown field
/// `$__toml_private_datetime`, expected `min` or `max` (line 4)` (src/config/mod.rs,
/// `strict_types`, passes serde's error on as it is). It should read as a type error of
/// `cores`.
#[test]
fn a_date_where_a_table_is_expected_is_a_type_error_of_the_key() {
    let text = "[[clusters]]\nname = \"a\"\n[clusters.overrides]\ncores = 1979-05-27T07:32:00Z\n";
    let e = fleetscaler::config::FleetConfig::parse(text, "fleet.toml").unwrap_err();
    assert_eq!(e.issues[0].key, "clusters[0].overrides.cores", "{e}");
    assert!(!e.to_string().contains("$__toml_private"), "{e}");
}
