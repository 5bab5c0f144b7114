#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `fleetscaler plan` as a user runs it: the real binary, its output, and its errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fleetscaler::config::FleetConfig;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fleetscaler(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const EXAMPLE: &str = "examples/openshift-cluster.yaml";
const NOW: &str = "2026-11-22T10:00:00Z";

#[test]
fn text_output_reads_like_a_report() {
    let out = fleetscaler(&["plan", "--snapshot", EXAMPLE, "--now", NOW]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for want in [
        "NODE GROUPS",
        "MachineSet.machine.openshift.io/openshift-machine-api/gpu-us-east-1a: 0 -> 1 for 1 pod(s)",
        "batch/report-0, batch/report-1, batch/report-2: belowPriorityCutoff",
        "finance/ledger-0: noScaleUp",
        "nodeSelector disktype=nvme does not match",
        "MachineAutoscaler openshift-machine-api/worker-us-east-1a sets min=1 max=10",
        "nvidia-t4  1 / 4",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

#[test]
fn json_output_has_the_documented_fields() {
    let out = fleetscaler(&["plan", "-s", EXAMPLE, "--now", NOW, "--output", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    for g in plan["nodeGroups"].as_array().unwrap() {
        for key in [
            "id",
            "min",
            "max",
            "target",
            "registered",
            "ready",
            "upcoming",
            "template",
        ] {
            assert!(g.get(key).is_some(), "nodeGroups entry without {key}: {g}");
        }
        assert!(["node", "annotations", "none"].contains(&g["template"].as_str().unwrap()));
    }
    for a in plan["scaleUp"].as_array().unwrap() {
        assert!(a["to"].as_u64().unwrap() > a["from"].as_u64().unwrap());
        assert!(!a["pods"].as_array().unwrap().is_empty());
    }
    let outcomes = [
        "scaleUp",
        "fitsExisting",
        "fitsUpcoming",
        "noScaleUp",
        "belowPriorityCutoff",
    ];
    for p in plan["pendingPods"].as_array().unwrap() {
        assert!(outcomes.contains(&p["outcome"].as_str().unwrap()), "{p}");
        assert!(p["pod"].as_str().unwrap().contains('/'));
    }
    for limit in ["maxNodesTotal", "cores", "memoryGiB"] {
        assert!(plan["limits"][limit]["used"].is_number(), "{limit}");
    }
    assert_eq!(
        plan["settings"]["max_nodes_total"]["source"],
        "clusterAutoscaler"
    );
    assert_eq!(plan["input"]["objects"], 50);
}

#[test]
fn settings_from_fleet_toml_and_flags_win_over_the_cluster_autoscaler() {
    let out = fleetscaler(&[
        "plan",
        "-s",
        EXAMPLE,
        "--now",
        NOW,
        "--output",
        "json",
        "--config",
        "fleet.toml.example",
        "--cluster",
        "prod-east",
        "--set",
        "max_nodes_per_scaleup=7",
        "--expander",
        "most-pods",
        "--seed",
        "9",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let s = &plan["settings"];
    assert_eq!(s["max_nodes_total"]["value"], 60);
    assert_eq!(s["max_nodes_total"]["source"], "clusterOverrides");
    assert_eq!(s["pod_priority_threshold"]["source"], "clusterAutoscaler");
    assert_eq!(s["max_node_provision_time"]["source"], "fleetDefaults");
    assert_eq!(s["max_nodes_per_scaleup"]["value"], 7);
    assert_eq!(s["max_nodes_per_scaleup"]["source"], "flags");
    assert_eq!(s["expanders"]["value"], serde_json::json!(["most-pods"]));
    assert_eq!(s["seed"]["value"], 9);
}

#[test]
fn several_files_make_one_cluster() {
    let dir = tempdir("several");
    let text = std::fs::read_to_string(root().join(EXAMPLE)).unwrap();
    // The same objects split in two files: nodes and machine sets apart from pods.
    let (head, tail) = text.split_at(text.find("- apiVersion: v1\n  kind: Pod").unwrap());
    std::fs::write(dir.join("a.yaml"), head).unwrap();
    std::fs::write(
        dir.join("b.yaml"),
        format!("apiVersion: v1\nkind: List\nitems:\n{tail}"),
    )
    .unwrap();
    let a = dir.join("a.yaml").display().to_string();
    let b = dir.join("b.yaml").display().to_string();
    let split = fleetscaler(&["plan", "-s", &a, "-s", &b, "--now", NOW, "-o", "json"]);
    let whole = fleetscaler(&["plan", "-s", EXAMPLE, "--now", NOW, "-o", "json"]);
    assert!(split.status.success(), "{}", stderr(&split));
    let (mut s, mut w): (Value, Value) = (
        serde_json::from_slice(&split.stdout).unwrap(),
        serde_json::from_slice(&whole.stdout).unwrap(),
    );
    s.as_object_mut().unwrap().remove("input");
    w.as_object_mut().unwrap().remove("input");
    assert_eq!(s, w);
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fleetscaler-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn fails_with(args: &[&str], wants: &[&str]) {
    let out = fleetscaler(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?} should fail: {}",
        stdout(&out)
    );
    let err = stderr(&out);
    for want in wants {
        assert!(err.contains(want), "{args:?}: {want:?} not in {err:?}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_is_a_clear_error_never_a_panic() {
    let dir = tempdir("bad");
    let bad = dir.join("bad.yaml");
    let text = std::fs::read_to_string(root().join(EXAMPLE))
        .unwrap()
        .replacen("cpu: 500m", "cpu: half", 1);
    std::fs::write(&bad, text).unwrap();
    let bad = bad.display().to_string();
    fails_with(
        &["plan", "-s", &bad],
        &[
            &bad,
            "items[",
            "(Pod ",
            "spec.containers[0].resources.requests.cpu",
            "\"half\"",
        ],
    );
    fails_with(
        &["plan", "-s", "no/such/file.yaml"],
        &["cannot read no/such/file.yaml"],
    );
    // The cause is said once, not once by the error and again as its source.
    let err = stderr(&fleetscaler(&["plan", "-s", "no/such/file.yaml"]));
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    let garbage = dir.join("garbage.yaml");
    std::fs::write(&garbage, "{{{{ not yaml").unwrap();
    fails_with(
        &["plan", "-s", &garbage.display().to_string()],
        &["not valid YAML or JSON"],
    );
    fails_with(
        &[
            "plan",
            "-s",
            EXAMPLE,
            "--config",
            "fleet.toml.example",
            "--cluster",
            "nope",
        ],
        &["\"nope\"", "prod-east, lab"],
    );
    fails_with(
        &["plan", "-s", EXAMPLE, "--set", "max_nodes_totl=3"],
        &["--set", "did you mean `max_nodes_total`?"],
    );
    fails_with(
        &["plan", "-s", EXAMPLE, "--set", "nonsense"],
        &["expected KEY=VALUE"],
    );
    // Of several, the one that is wrong is named.
    fails_with(
        &[
            "plan",
            "-s",
            EXAMPLE,
            "--set",
            "seed=1",
            "--set",
            "max_nodes_total=-1",
        ],
        &["--set max_nodes_total=-1:"],
    );
    fails_with(
        &["plan", "-s", EXAMPLE, "--now", "yesterday"],
        &["--now", "RFC 3339"],
    );
    fails_with(
        &["plan", "-s", EXAMPLE, "--expander", "cheapest"],
        &["--expander", "cheapest"],
    );
    let cfg = dir.join("fleet.toml");
    std::fs::write(
        &cfg,
        "[[clusters]]\nname = \"a\"\n[clusters.overrides]\ncores = { min = 9, max = 1 }\n",
    )
    .unwrap();
    fails_with(
        &[
            "plan",
            "-s",
            EXAMPLE,
            "--config",
            &cfg.display().to_string(),
            "--cluster",
            "a",
        ],
        &["clusters[0].overrides.cores", "min 9 is greater than max 1"],
    );
}

/// A name past the formatter's width limit (65,535) once panicked the text plan.
/// Every file the program reads has a maximum (docs/hub.md): special files are refused at
/// once, and a file over its kind's limit is named with the limit and how to raise it.
#[test]
fn input_files_are_bounded_and_special_files_refused() {
    fails_with(
        &["plan", "-s", "/dev/zero"],
        &["/dev/zero is a device, not a regular file"],
    );
    let dir = tempdir("bounded");
    let fifo = dir.join("pipe");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let fifo = fifo.display().to_string();
    fails_with(&["check-config", "--config", &fifo], &[&fifo, "is a FIFO"]);
    fails_with(
        &["plan", "-s", EXAMPLE, "--state", "/dev/zero"],
        &["/dev/zero is a device"],
    );
    let out = Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
        .args(["plan", "-s", EXAMPLE, "--now", NOW])
        .env("FLEETSCALER_MAX_DUMP_BYTES", "1000")
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    for want in [
        EXAMPLE,
        "1000 bytes",
        "cluster dump",
        "FLEETSCALER_MAX_DUMP_BYTES",
    ] {
        assert!(err.contains(want), "{want:?} not in {err}");
    }
}

#[test]
fn a_huge_group_name_is_printed_not_a_panic() {
    let dir = tempdir("huge-name");
    let name = "w".repeat(70_000);
    let dump = dir.join("huge.yaml");
    std::fs::write(
        &dump,
        format!(
            "apiVersion: machine.openshift.io/v1beta1\nkind: MachineSet\nmetadata:\n  name: {name}\n  namespace: openshift-machine-api\n  annotations:\n    machine.openshift.io/cluster-api-autoscaler-node-group-min-size: \"0\"\n    machine.openshift.io/cluster-api-autoscaler-node-group-max-size: \"3\"\nspec:\n  replicas: 0\n"
        ),
    )
    .unwrap();
    let out = fleetscaler(&["plan", "-s", &dump.display().to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&name));
}

#[test]
fn the_example_fleet_toml_is_valid() {
    let cfg = FleetConfig::load(Path::new(&root().join("fleet.toml.example"))).unwrap();
    assert_eq!(cfg.clusters.len(), 2);
    assert!(cfg.validate().is_empty());
}

#[test]
fn the_state_file_is_written_read_back_and_checked() {
    let dir = tempdir("state");
    let state = dir.join("state.json");
    let state_arg = state.display().to_string();
    let _ = std::fs::remove_file(&state);
    let dump = |t: &str| format!("tests/replays/scale-down-unneeded-time/t{t}.yaml");
    let first = fleetscaler(&[
        "plan",
        "-s",
        &dump("00"),
        "--now",
        NOW,
        "--state",
        &state_arg,
        "--save-state",
        &state_arg,
    ]);
    assert!(first.status.success(), "{}", stderr(&first));
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(saved["version"], 1);
    assert_eq!(saved["unneededSince"]["worker-a-2"], NOW);
    // Eleven minutes later the remembered clock makes the node due; without it, it is not.
    let later = [
        "plan",
        "-s",
        &dump("11"),
        "--now",
        "2026-11-22T10:11:00Z",
        "-o",
        "json",
    ];
    let with_state = fleetscaler(&[&later[..], &["--state", &state_arg]].concat());
    let plan: Value = serde_json::from_slice(&with_state.stdout).unwrap();
    assert_eq!(
        plan["scaleDown"][0]["node"],
        "worker-a-2",
        "{}",
        stderr(&with_state)
    );
    let without: Value = serde_json::from_slice(&fleetscaler(&later).stdout).unwrap();
    assert_eq!(without["scaleDown"], serde_json::json!([]));
    std::fs::write(&state, r#"{"version": 9}"#).unwrap();
    fails_with(
        &["plan", "-s", EXAMPLE, "--state", &state_arg],
        &["state file", "version 9"],
    );
    std::fs::write(&state, "not json").unwrap();
    fails_with(
        &["plan", "-s", EXAMPLE, "--state", &state_arg],
        &["state file", "not a fleetscaler state file"],
    );
}

#[test]
fn a_state_file_with_upstreams_unqualified_group_names_gives_the_same_plan() {
    let scenario = "tests/scenarios/upcoming-and-existing-nodes";
    let dir = tempdir("old-state");
    let old = dir.join("old-state.json");
    let current = std::fs::read_to_string(root().join(scenario).join("state.json")).unwrap();
    assert!(current.contains("MachineSet.machine.openshift.io/"));
    std::fs::write(
        &old,
        current.replace("MachineSet.machine.openshift.io/", "MachineSet/"),
    )
    .unwrap();
    let plan = |state: &str| -> Value {
        let dump = format!("{scenario}/dump.yaml");
        let out = fleetscaler(&[
            "plan", "-s", &dump, "--now", NOW, "-o", "json", "--state", state,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let with_new = plan(&format!("{scenario}/state.json"));
    let with_old = plan(&old.display().to_string());
    assert_eq!(with_old["scaleUp"], with_new["scaleUp"]);
    assert_eq!(with_old["nodeGroups"], with_new["nodeGroups"]);
    assert!(with_new["nodeGroups"][0]["upcoming"].as_u64().unwrap() > 0);
}

/// A Cluster API group that wants two replicas, in a dump without any Cluster API Machine (as
/// `oc get machines` leaves them out where both Machine APIs are served): every replica would
/// count as a node on its way, so the plan says the dump is short. A typed empty
/// `MachineList` of the API (what `fleetscaler dump` writes for an API without Machines) says
/// the Machines were listed, and the plan believes it.
#[test]
fn a_group_without_machines_in_the_dump_is_warned_about() {
    let dir = tempdir("no-machines");
    let md = "apiVersion: cluster.x-k8s.io/v1beta2\n  kind: MachineDeployment\n  metadata:\n    name: md-0\n    namespace: default\n    annotations:\n      cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: \"1\"\n      cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: \"5\"\n  spec:\n    replicas: 2\n";
    let without = dir.join("without.yaml");
    std::fs::write(
        &without,
        format!("apiVersion: v1\nkind: List\nitems:\n- {md}"),
    )
    .unwrap();
    let listed = dir.join("listed.yaml");
    let empty = "- apiVersion: cluster.x-k8s.io/v1beta2\n  kind: MachineList\n  metadata: {}\n  items: []\n";
    std::fs::write(
        &listed,
        format!("apiVersion: v1\nkind: List\nitems:\n- {md}{empty}"),
    )
    .unwrap();
    let warnings = |path: &Path| -> Vec<String> {
        let out = fleetscaler(&["plan", "-s", &path.display().to_string(), "-o", "json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(plan["nodeGroups"][0]["upcoming"], 2, "{plan:#}");
        let all = plan["warnings"].as_array().unwrap();
        all.iter()
            .map(|w| w.as_str().unwrap().to_string())
            .collect()
    };
    assert!(
        warnings(&without).contains(
            &"the dump has no Machines of group \
              MachineDeployment.cluster.x-k8s.io/default/md-0, which wants 2: upcoming nodes \
              may be invented; make the dump with `fleetscaler dump`"
                .to_string()
        ),
        "{:?}",
        warnings(&without)
    );
    let believed = warnings(&listed);
    assert!(
        !believed.iter().any(|w| w.contains("no Machines")),
        "{believed:?}"
    );
    // The text output shows it among the warnings, where a person reads it.
    let text = stdout(&fleetscaler(&[
        "plan",
        "-s",
        &without.display().to_string(),
    ]));
    assert!(
        text.contains("WARNINGS\n  the dump has no Machines of group"),
        "{text}"
    );
}
