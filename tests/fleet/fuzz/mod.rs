#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Fuzzing on stable Rust, as part of `cargo test`: the dump parser and the engine behind
//! it (here), Kubernetes quantities and Go durations (fuzz_support/numbers.rs), fleet.toml
//! (fuzz_support/fleet_toml.rs), the management cluster's inventory
//! (fuzz_support/inventory.rs). Each target holds its code to: never panics, finishes
//! within a time limit, and every error names where (file and line, document and field, or
//! key).
//!
//! Why proptest, not cargo-fuzz or `arbitrary` with a mutation loop of our own: cargo-fuzz
//! needs a nightly toolchain and libFuzzer, which CI does not install; proptest is the
//! maintained, standard property-testing crate on stable. It is seeded (the default run is
//! the same run everywhere), shrinks a failing input to a small one, and its strategies
//! keep the structure-aware inputs (edits of the scenario dumps, generated Kubernetes
//! objects) short to write.
//!
//! The default run takes a few seconds. To fuzz longer, or from another seed:
//!
//! ```sh
//! FLEETSCALER_FUZZ_CASES=20000 FLEETSCALER_FUZZ_SEED=7 \
//!   CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true cargo test --release --test fuzz
//! ```
//!
//! (A release build runs the engine targets about twenty times faster; keep its overflow
//! checks on, as above: an arithmetic wrap is one of the bugs the targets look for.)
//!
//! `FLEETSCALER_FUZZ_CASES` is the number of cases of every target (default: each target's
//! own, a few hundred), `FLEETSCALER_FUZZ_SEED` the seed (default 12),
//! `FLEETSCALER_FUZZ_TIMEOUT_SECS` the time one case may take (default 20). A failure
//! prints the seed, the command that runs it again and the shrunk input: keep that input
//! as a named #[test] beside the target's others.

use crate::fuzz_support;

mod fleet_toml;
mod inventory;
mod numbers;

use fleetscaler::cli::plan::{self, PlanError};
use fleetscaler::engine::{EngineState, Settings, run_once};
use fleetscaler::model::dump::{DumpError, DumpErrorKind, SnapshotBuilder};
use fuzz_support::mutate::{self, Edit};
use fuzz_support::scenarios::{Scenario, plan_args, scenarios};
use fuzz_support::{Reach, Scratch, bounded, excerpt};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value};

// ---------------------------------------------------------------------------------------
// The dump parser, and the engine on what it reads.

/// An error from the dump parser names the file, and where in it: a line for a syntax
/// error, the document and item (and for an object, its kind, name and field) otherwise.
fn check_dump_error(e: &DumpError, source: &str) -> Result<(), String> {
    let text = e.to_string();
    let fail = |why: &str| Err(format!("dump error {why}: {}", excerpt(&text, 600)));
    if e.file != source || !text.starts_with(source) {
        return fail("does not name the file");
    }
    if e.message.trim().is_empty() {
        return fail("says nothing");
    }
    match e.kind {
        DumpErrorKind::Syntax if !text.contains("line") => fail("names no line"),
        DumpErrorKind::Shape if !e.location.starts_with("document") => fail("names no document"),
        DumpErrorKind::Object => {
            let field = e.message.split(": ").next().unwrap_or_default();
            if !e.location.starts_with("document") || !e.location.contains(" (") {
                fail("names no document or object")
            } else if field.is_empty() || field.contains(' ') {
                fail("names no field")
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}

const SOURCE: &str = "fuzz.yaml";

/// What `plan` does with text it is given, without files: read it, then two engine passes
/// ten minutes apart, the state between them written and read back as `--save-state` and
/// `--state` do. Bounded: a panic or a hang in any of it is the case's failure. `Ok(true)`
/// when the text was read and planned, `Ok(false)` when it was refused as it should be.
fn parse_and_plan(text: String) -> Result<bool, String> {
    let outcome = bounded(move || {
        let mut builder = SnapshotBuilder::default();
        builder.add_text(&text, SOURCE)?;
        let (snapshot, _) = builder.finish();
        let settings = Settings::default();
        let now: jiff::Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        let mut state = EngineState::default();
        let first = run_once(&snapshot, &mut state, &settings, now);
        let written = state.to_json();
        let Ok(mut state) = EngineState::from_json(&written) else {
            return Ok(Err(format!(
                "the state it wrote does not read back: {written}"
            )));
        };
        let later = now + jiff::SignedDuration::from_mins(10);
        let second = run_once(&snapshot, &mut state, &settings, later);
        let shown = serde_json::to_string(&(first, second)).unwrap();
        Ok(Ok(shown.len()))
    })?;
    match outcome {
        Ok(Ok(_)) => Ok(true),
        Ok(Err(why)) => Err(why),
        Err(e) => check_dump_error(&e, SOURCE).map(|()| false),
    }
}

#[rustfmt::skip]
const YAML_TOKENS: &[&str] = &[
    "\n", "\n  ", "\n- ", ": ", "- ", "---\n", "...\n", "{", "}", "[", "]", ", ", "&a ", "*a",
    "&b ", "*b", "!!str ", "!!int ", "!tag ", "? ", "|\n  ", ">\n  ", "'", "\"", "#",
    "%YAML 1.2\n", "<<: ", "kind: ", "apiVersion: ", "items:", "List", "Node", "Pod", "v1",
    "metadata", "name", "~", "null", "yes", "1e3", "-1", ".inf", "\t", "\\",
];

/// Short pieces of YAML and JSON syntax: random sequences of them reach far deeper into a
/// YAML parser than random bytes do.
fn yamlish() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        select(YAML_TOKENS).prop_map(str::to_string),
        "[a-z0-9./-]{1,6}",
    ];
    prop::collection::vec(token, 0..80).prop_map(|t| t.concat())
}

#[test]
fn dump_parser_never_panics_on_arbitrary_text() {
    let text = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..600)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        any::<String>(),
        yamlish(),
        // The same with the JSON reader in front (it is tried first on `{` and `[`).
        yamlish().prop_map(|s| format!("{{{s}")),
        yamlish().prop_map(|s| format!("[{s}")),
    ];
    fuzz_support::run(
        "dump_parser_never_panics_on_arbitrary_text",
        400,
        text,
        |t| parse_and_plan(t).map(|_| ()),
    );
}

/// Every map key of the scenario dumps: field names, label and annotation keys, the words
/// generated objects are made of.
fn dump_vocabulary(scenarios: &[Scenario]) -> Vec<String> {
    fn keys(v: &Value, out: &mut std::collections::BTreeSet<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    out.insert(k.clone());
                    keys(v, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
            _ => {}
        }
    }
    let mut out = std::collections::BTreeSet::new();
    for s in scenarios {
        for doc in serde_saphyr::from_multiple::<Value>(&s.dump).unwrap() {
            keys(&doc, &mut out);
        }
    }
    out.into_iter().collect()
}

#[rustfmt::skip]
const LEAF_STRINGS: &[&str] = &[
    "", "0", "-1", "500m", "8Ei", "99999999999999999999Ei", "1e308", "2562047h", "-1s",
    "9223372036854775807", "True", "NoSchedule", "NoExecute", "Exists", "In", "Gt", ".*", "(",
    "2026-11-22T10:00:00Z", "9999-12-31T23:59:59Z", "Running", "Failed", "Ready",
    "kubernetes.io/hostname", "topology.kubernetes.io/zone", "openshift-machine-api",
    "MachineSet", "Pod", "Node", "nvidia.com/gpu", "10:\n- .*", "key=value",
];

#[rustfmt::skip]
const KINDS: &[(&str, &str)] = &[
    ("v1", "Node"), ("v1", "Pod"), ("v1", "Namespace"), ("v1", "ConfigMap"), ("v1", "Service"),
    ("v1", "List"), ("policy/v1", "PodDisruptionBudget"),
    ("policy/v1beta1", "PodDisruptionBudget"), ("apps/v1", "DaemonSet"),
    ("autoscaling.openshift.io/v1", "ClusterAutoscaler"),
    ("autoscaling.openshift.io/v1beta1", "MachineAutoscaler"),
    ("machine.openshift.io/v1beta1", "MachineSet"), ("machine.openshift.io/v1beta1", "Machine"),
    ("cluster.x-k8s.io/v1beta1", "MachineDeployment"),
    ("cluster.x-k8s.io/v1beta2", "MachineSet"), ("cluster.x-k8s.io/v1beta2", "Machine"),
    ("cluster.x-k8s.io/v1alpha4", "Machine"),
    ("infrastructure.cluster.x-k8s.io/v1beta1", "AWSMachineTemplate"),
];

/// Leaves of generated objects: values at the edges of every type a field may have.
fn leaf() -> impl Strategy<Value = Value> {
    let strings = select(LEAF_STRINGS);
    prop_oneof![
        strings.prop_map(|s| Value::String(s.into())),
        select(vec![
            i64::MAX,
            i64::MIN,
            -1,
            0,
            1,
            3,
            250,
            i64::from(i32::MAX) + 1
        ])
        .prop_map(Value::from),
        Just(Value::from(u64::MAX)),
        Just(Value::from(1e308)),
        Just(Value::from(0.5)),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ]
}

/// Kubernetes-shaped objects of every kind the parser reads (and some it skips), their
/// fields drawn from the scenarios' vocabulary and their leaves from [`leaf`].
fn generated_dump(vocabulary: Vec<String>) -> impl Strategy<Value = String> {
    let name = select(vocabulary);
    let tree = leaf().prop_recursive(5, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((name.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    });
    let kinds = select(KINDS);
    let names = select(vec![
        "a",
        "b",
        "worker-a",
        "cluster-autoscaler-priority-expander",
        "default",
    ]);
    let namespaces = select(vec!["", "default", "kube-system", "openshift-machine-api"]);
    let object = (kinds, names, namespaces, tree.clone(), tree.clone(), tree).prop_map(
        |((api_version, kind), name, namespace, meta, spec, status)| {
            let mut metadata = match meta {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            metadata.insert("name".into(), name.into());
            metadata.insert("namespace".into(), namespace.into());
            serde_json::json!({
                "apiVersion": api_version, "kind": kind, "metadata": metadata,
                "spec": spec, "status": status,
            })
        },
    );
    (prop::collection::vec(object, 1..6), any::<bool>()).prop_map(|(items, as_json)| {
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
        if as_json {
            serde_json::to_string(&list).unwrap()
        } else {
            serde_saphyr::to_string(&list).unwrap()
        }
    })
}

#[test]
fn dump_parser_and_engine_survive_generated_objects() {
    let vocabulary = dump_vocabulary(&scenarios());
    let reach = Reach::default();
    let name = "dump_parser_and_engine_survive_generated_objects";
    fuzz_support::run(name, 128, generated_dump(vocabulary), |text| {
        parse_and_plan(text).map(|planned| reach.count(planned))
    });
    reach.require(name, 5);
}

/// Mutants of the real dumps through `fleetscaler plan` itself (files, settings layering,
/// the engine, text or JSON output): parsed and planned within the time limit, or refused
/// with an error naming where.
#[test]
fn dump_mutants_plan_in_bounded_time_or_name_where() {
    let scenarios = scenarios();
    let values = mutate::hostile_yaml_values();
    let lines = mutate::hostile_yaml_lines();
    let scratch = Scratch::new("dumps");
    let reach = Reach::default();
    let name = "dump_mutants_plan_in_bounded_time_or_name_where";
    let strategy = (
        0..scenarios.len(),
        prop::collection::vec(mutate::edit(values.len(), lines.len(), false), 1..4),
        any::<bool>(),
    );
    fuzz_support::run(
        name,
        64,
        strategy,
        |(which, edits, json): (usize, Vec<Edit>, bool)| {
            let s = &scenarios[which];
            let bytes = mutate::apply(&s.dump, &edits, &values, &lines);
            let mutant = String::from_utf8_lossy(&bytes).into_owned();
            let path = scratch.file("dump.yaml", &bytes);
            let args = plan_args(s, &path, if json { "json" } else { "text" }, &[]);
            let result = bounded(move || {
                let mut out = Vec::new();
                plan::run(&args, &mut out).map(|()| out.len())
            });
            let _ = std::fs::remove_file(&path);
            reach.count(matches!(result, Ok(Ok(_))));
            let why = match result {
                Ok(Ok(0)) => Err("the plan printed nothing".to_string()),
                Ok(Ok(_)) => Ok(()),
                Ok(Err(PlanError::Dump(e))) => check_dump_error(&e, &path.display().to_string()),
                // Invalid UTF-8 (a flipped byte): refused naming the file.
                Ok(Err(PlanError::Read(fleetscaler::files::FileError::NotText { path: p })))
                    if p == path.display().to_string() =>
                {
                    Ok(())
                }
                Ok(Err(other)) => Err(format!("unexpected error: {other}")),
                Err(e) => Err(e),
            };
            why.map_err(|why| {
                format!(
                    "{why}\nscenario {}, changed lines:\n{}",
                    s.name,
                    mutate::changed_lines(&s.dump, &mutant, 8)
                )
            })
        },
    );
    reach.require(name, 20);
}

/// Each input is read or refused within the time limit, the error naming where.
fn all_bounded(cases: Vec<(&str, String)>) {
    let failures: Vec<String> = cases
        .into_iter()
        .filter_map(|(name, text)| {
            parse_and_plan(text)
                .err()
                .map(|why| format!("{name}: {why}"))
        })
        .collect();
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

const NODE: &str = "{apiVersion: v1, kind: Node, metadata: {name: node-x}}";

/// Aliases that expand far past their text: the YAML reader's budget (250,000 nodes) must
/// stop them on the path `plan` takes. Each costs about a second in a debug build, the
/// price of reaching that bound, so there are two: anchors, and merge keys.
#[test]
fn dump_parser_bounds_alias_expansion() {
    let refs = |level: usize| vec![format!("*n{}", level - 1); 10].join(", ");
    let levels: String = (1..=6)
        .map(|l| format!("x{l}: &n{l} [{}]\n", refs(l)))
        .collect();
    let keys: String = (0..1_000).map(|i| format!("k{i}: {i}, ")).collect();
    let merges: String = (0..400).map(|i| format!("m{i}: {{<<: *b}}\n")).collect();
    all_bounded(vec![
        (
            "billion laughs of Nodes as a List's items",
            format!("apiVersion: v1\nkind: List\nx0: &n0 [{NODE}]\n{levels}items: *n6\n"),
        ),
        (
            "merge keys copying a large mapping",
            format!("b: &b {{{keys}}}\n{merges}"),
        ),
    ]);
}

/// Depth, size and count past each bound (and no further, to keep the run short).
#[test]
fn dump_parser_bounds_hostile_documents() {
    let deep = |open: &str, leaf: &str, close: &str, n| {
        format!("{}{leaf}{}", open.repeat(n), close.repeat(n))
    };
    let long_name = format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: '{}'}}\n",
        "n".repeat(1 << 20)
    );
    let many_nodes = format!(
        "apiVersion: v1\nkind: List\nitems:\n{}",
        format!("- {NODE}\n").repeat(2_000)
    );
    let hostile: String = (mutate::hostile_yaml_values().iter().enumerate())
        .map(|(i, v)| format!("k{i}: {v}\n"))
        .collect();
    all_bounded(vec![
        ("deep flow sequence", deep("[", "", "]", 100_000)),
        ("deep flow mapping", deep("{a: ", "1", "}", 50_000)),
        ("deep JSON object", deep("{\"a\":", "1", "}", 50_000)),
        (
            "deep block sequence",
            (0..200).map(|i| format!("{}- \n", " ".repeat(i))).collect(),
        ),
        (
            "Lists in Lists",
            deep("{kind: List, apiVersion: v1, items: [", "", "]}", 40),
        ),
        ("many documents", format!("{NODE}\n---\n").repeat(1_100)),
        ("a long string", long_name),
        ("a long key", format!("{}: 1\n", "k".repeat(1 << 20))),
        ("many Nodes of one name", many_nodes),
        ("a huge number", format!("a: 1{}\n", "0".repeat(100_000))),
        (
            "an undefined alias",
            "apiVersion: v1\nkind: Node\nmetadata: *nowhere\n".into(),
        ),
        ("a recursive alias", "a: &a [*a]\n".into()),
        ("every hostile value", hostile),
    ]);
}

// ---------------------------------------------------------------------------------------
// The harness itself: a target that could not fail would prove nothing.

#[test]
fn the_harness_reports_panics_overruns_and_shrunk_inputs() {
    // A panic in a worker is a failure that says where it happened.
    let panicked = bounded(|| -> u32 { panic!("boom") }).unwrap_err();
    assert!(
        panicked.contains("boom") && panicked.contains("tests/fleet/fuzz/mod.rs"),
        "{panicked}"
    );
    // A case that does not finish in time is a failure (its worker waits on a channel that
    // is closed when the test ends).
    let (hold, wait) = std::sync::mpsc::channel::<()>();
    let overrun = fuzz_support::bounded_for(std::time::Duration::from_millis(50), move || {
        let _ = wait.recv();
    });
    assert!(overrun.unwrap_err().contains("did not finish"));
    drop(hold);
    // A failing property is shrunk to its smallest input and reported with the seed.
    let failed = std::panic::catch_unwind(|| {
        fuzz_support::run("harness", 100, 17..1000u32, |n| {
            if n >= 17 {
                Err(format!("{n} is too big"))
            } else {
                Ok(())
            }
        })
    });
    let message = *failed.unwrap_err().downcast::<String>().unwrap();
    assert!(message.contains("minimal input: 17"), "{message}");
    assert!(message.contains("FLEETSCALER_FUZZ_SEED="), "{message}");
}

// ---------------------------------------------------------------------------------------
// Regressions: inputs the targets found, kept as they were shrunk.

/// Found by `dump_parser_bounds_hostile_documents` while sizing its inputs: a valid dump of a
/// few thousand objects was refused as "budget breached: Nodes { nodes: 250001 }" (the YAML
/// parser's default budget is made for configuration files). The budget now grows with the
/// input, aliases staying bounded (`dump_parser_bounds_hostile_documents` keeps the bombs
/// refused).
#[test]
fn a_large_valid_yaml_dump_is_read() {
    let pod = "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: web-NUM\n    namespace: shop\n    labels: {app: web, tier: front, team: a}\n  spec:\n    containers:\n    - name: main\n      image: registry.example.com/web:1\n      resources: {requests: {cpu: 100m, memory: 128Mi}}\n    tolerations:\n    - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute}\n  status: {phase: Pending}\n";
    let items: String = (0..8_000)
        .map(|i| pod.replace("NUM", &i.to_string()))
        .collect();
    let text = format!("apiVersion: v1\nkind: List\nitems:\n{items}");
    let mut builder = SnapshotBuilder::default();
    let read = builder
        .add_text(&text, "dump.yaml")
        .map_err(|e| excerpt(&e.to_string(), 300));
    assert_eq!(read, Ok(()));
    assert_eq!(builder.finish().0.pods.len(), 8_000);
}
