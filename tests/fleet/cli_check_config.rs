#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `fleetscaler check-config` as a user runs it.

use std::process::{Command, Output};

use serde_json::Value;

/// The file alone (`--offline`): this machine has none of its kubeconfigs.
fn check_config(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleetscaler"));
    cmd.args(["check-config", "--offline"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn json(o: &Output) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn the_example_is_valid_and_every_setting_has_a_source() {
    let text = check_config(&["-c", "fleet.toml.example"], &[]);
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(
        out.starts_with("fleet.toml.example: valid, 2 cluster(s)"),
        "{out}"
    );
    assert!(
        out.contains("cluster prod-east (context prod-east-admin"),
        "{out}"
    );
    assert!(
        out.contains("[fleet]\n  degraded when more than 50% of clusters are unhealthy; scale-down then paused in every cluster"),
        "{out}"
    );
    assert!(
        out.contains("[membership]\n  off: fleet.toml's clusters only"),
        "{out}"
    );
    let found = check_config(
        &["-c", "fleet.toml.example"],
        &[
            ("FLEETSCALER_MEMBERSHIP__ENABLED", "true"),
            ("FLEETSCALER_MEMBERSHIP__CONTEXT", "management"),
            ("FLEETSCALER_MEMBERSHIP__NAMESPACES", "[\"fleet\"]"),
        ],
    );
    let found = String::from_utf8_lossy(&found.stdout);
    assert!(
        found.contains("[membership]\n  read with management in namespaces fleet, every 30s: Secrets labelled fleetscaler.io/cluster\n"),
        "{found}"
    );
    let with_env = check_config(
        &["-c", "fleet.toml.example"],
        &[("FLEETSCALER_FLEET__MAX_UNHEALTHY_CLUSTERS", "2")],
    );
    let with_env = String::from_utf8_lossy(&with_env.stdout);
    assert!(
        with_env.contains("more than 50% of clusters or more than 2 clusters are unhealthy"),
        "{with_env}"
    );
    let r = json(&check_config(
        &["-c", "fleet.toml.example", "-o", "json"],
        &[],
    ));
    let east = &r["clusters"][0];
    assert_eq!(
        east["settings"]["max_nodes_total"],
        serde_json::json!({"value": 60, "source": "clusterOverrides"})
    );
    assert_eq!(
        east["settings"]["pod_priority_threshold"]["source"],
        "fleetDefaults"
    );
    assert_eq!(east["settings"]["node_groups"]["value"][0]["max"], 20);
    assert_eq!(r["clusters"][1]["useClusterAutoscaler"], false);
    assert_eq!(r["hub"]["status_namespace"], "openshift-machine-api");
}

#[test]
fn environment_overrides_apply() {
    let env = [
        ("FLEETSCALER_HUB__LISTEN", "127.0.0.1:9999"),
        ("FLEETSCALER_DEFAULTS__SCALE_DOWN_UNNEEDED_TIME", "7m"),
    ];
    let r = json(&check_config(
        &["-c", "fleet.toml.example", "-o", "json"],
        &env,
    ));
    assert_eq!(r["hub"]["listen"], "127.0.0.1:9999");
    assert_eq!(
        r["clusters"][1]["settings"]["scale_down_unneeded_time"]["value"],
        "7m0s"
    );
}

#[test]
fn every_problem_is_reported_with_its_key_path() {
    let dir = std::env::temp_dir().join(format!("fleetscaler-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        r#"
[hub]
listen = "nowhere"
scan_interval = "0s"

[defaults]
cores = { min = 10, max = 2 }

[[clusters]]
name = "a"
[[clusters.node_groups]]
kind = "MachinePool"
namespace = "x"
name = "y"
max = 3

[[clusters]]
name = "a"
"#,
    )
    .unwrap();
    let o = check_config(&["-c", &bad.display().to_string()], &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    for key in [
        "hub.listen",
        "hub.scan_interval",
        "defaults.cores",
        "clusters[0].node_groups[0]",
        "clusters[1].name",
    ] {
        assert!(err.contains(key), "{key} missing in {err}");
    }
    assert_eq!(
        err.matches("5 problem(s)").count(),
        1,
        "reported once: {err}"
    );
    std::fs::write(&bad, "[defaults]\nunneeded = \"10m\"\n").unwrap();
    let o = check_config(&["-c", &bad.display().to_string()], &[]);
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("defaults.unneeded: unknown setting `unneeded`")
    );
    // A typo is told with the key meant, in the file as in a variable.
    std::fs::write(&bad, "[defaults]\nscale_down_unneded_time = \"10m\"\n").unwrap();
    let o = check_config(&["-c", &bad.display().to_string()], &[]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(
            "defaults.scale_down_unneded_time: unknown setting `scale_down_unneded_time`; did you mean `scale_down_unneeded_time`?"
        ),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = check_config(
        &["-c", "fleet.toml.example"],
        &[("FLEETSCALER_HUB__SCAN_INTERVALL", "5s")],
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("did you mean `scan_interval`?"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::write(
        &bad,
        "[defaults]\nscale_down_unneeded_time = \"ten minutes\"\n",
    )
    .unwrap();
    let o = check_config(&["-c", &bad.display().to_string()], &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("defaults.scale_down_unneeded_time"));
}

/// check-config's errors (stderr) for one fleet.toml text; it must refuse it, not panic.
fn refused(tag: &str, toml: &str) -> String {
    let dir = std::env::temp_dir().join(format!("fleetscaler-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("fleet.toml");
    std::fs::write(&file, toml).unwrap();
    let o = check_config(&["-c", &file.display().to_string()], &[]);
    std::fs::remove_dir_all(&dir).unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// Seeds of issue 12: values that parsed, then hurt: a Lease renewed ~600 times a second,
/// a duration that overflowed a clock and panicked a runner.
#[test]
fn values_that_would_hurt_are_refused() {
    let cluster = "[[clusters]]\nname = \"a\"\n";
    let err = refused(
        "hurt1",
        &format!("[hub]\nrequest_timeout = \"18446744073709551615s\"\n{cluster}"),
    );
    for want in ["hub.request_timeout", "longer than any duration Go"] {
        assert!(err.contains(want), "{want:?} missing in {err}");
    }
    let err = refused(
        "hurt2",
        &format!("[defaults]\nscale_down_unneeded_time = \"2562048h\"\n{cluster}"),
    );
    assert!(
        err.contains("defaults.scale_down_unneeded_time") && err.contains("at most 2562047h"),
        "{err}"
    );
    let err = refused(
        "hurt3",
        &format!(
            "[hub]\nrequest_timeout = \"1h\"\n[hub.leader_election]\nenabled = true\nretry_period = \"0s\"\n{cluster}"
        ),
    );
    for want in [
        "hub.request_timeout: 1h0m0s is longer than the 10m0s a request may take",
        "hub.leader_election.retry_period: 0s would renew the Lease in a busy loop",
    ] {
        assert!(err.contains(want), "{want:?} missing in {err}");
    }
}

/// A huge value is quoted as a short prefix with its length, in the error as in the log
/// and the hub's `lastReload`; a variable that names no key says so; an exclusive bound says
/// it is exclusive.
#[test]
fn errors_quote_a_short_prefix_and_name_what_is_wrong() {
    let cluster = "[[clusters]]\nname = \"a\"\n";
    let huge = "9".repeat(100_000);
    let err = refused("huge", &format!("[hub]\nlisten = \"{huge}\"\n{cluster}"));
    assert!(err.len() < 2_000, "{} bytes of error", err.len());
    assert!(err.contains("hub.listen") && err.contains("bytes"), "{err}");
    let err = refused("huge-key", &format!("[hub]\n{huge} = 1\n{cluster}"));
    assert!(err.len() < 2_000, "{} bytes of error", err.len());

    let dir = std::env::temp_dir().join(format!("fleetscaler-envkey-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("fleet.toml");
    std::fs::write(&file, cluster).unwrap();
    let o = check_config(
        &["-c", &file.display().to_string()],
        &[("FLEETSCALER___", "1")],
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("FLEETSCALER___: does not name a fleet.toml key"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();

    let err = refused(
        "zero-timeout",
        &format!("[hub.serving]\nrequest_timeout = \"0s\"\n{cluster}"),
    );
    assert!(err.contains("0s must be more than 0s and at most"), "{err}");
}

/// Without `--offline`, the kubeconfig files and contexts fleet.toml names are checked too.
#[test]
fn kubeconfig_files_and_contexts_that_do_not_exist_are_refused() {
    let dir = std::env::temp_dir().join(format!("fleetscaler-kc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: a, cluster: {server: \"https://127.0.0.1:1\"}}]\nusers: [{name: a, user: {token: t}}]\ncontexts: [{name: east, context: {cluster: a, user: a}}]\n",
    )
    .unwrap();
    let file = dir.join("fleet.toml");
    std::fs::write(
        &file,
        format!("[hub]\nkubeconfigs = [{kubeconfig:?}]\n[[clusters]]\nname = \"east\"\n[[clusters]]\nname = \"west\"\n"),
    )
    .unwrap();
    let path = file.display().to_string();
    let run = |extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleetscaler"));
        cmd.args(["check-config", "-c", &path]).args(extra);
        cmd.output().unwrap()
    };
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("clusters[1].context: context \"west\" is not in")
            && err.contains("(its contexts: east)"),
        "{err}"
    );
    assert!(run(&["--offline"]).status.success());
    std::fs::remove_dir_all(&dir).unwrap();
}
