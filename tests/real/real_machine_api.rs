//! The hub against the Machine API controllers production runs (Cluster API's core manager,
//! OpenShift's MachineSet and nodelink controllers), the test bed playing only the cloud:
//! - a MachineDeployment rolling out keeps its nodes, however idle (upstream's Cluster API
//!   provider holds them), and the hub neither scales it nor fights the rollout; once the
//!   rollout is over the idle nodes go;
//! - a Machine that Cluster API marks failed (its infrastructure refused; v1beta2 reports it
//!   in `status.deprecated.v1beta1` alone) is deleted by the hub, its group backed off, and
//!   the pod goes to the other group;
//! - the hub killed in the middle of a scale-down, on both APIs at once: the real controllers
//!   finish the removal it started, and the restarted hub neither removes another node nor
//!   adds one back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;

use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use real_support::*;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);
const CAPI_NS: &str = "openshift-cluster-api";

fn hub_toml(clusters: &[(&str, &Path)]) -> String {
    let mut toml = format!(
        r#"{HUB_SECTION}
[defaults]
scale_down_unneeded_time = "5s"
scale_down_delay_after_add = "0s"
scale_down_delay_after_delete = "0s"
scale_down_delay_after_failure = "5s"
node_delete_delay_after_taint = "1s"
"#
    );
    for (name, kubeconfig) in clusters {
        toml.push_str(&format!(
            "\n[[clusters]]\nname = \"{name}\"\nkubeconfig = \"{}\"\nuse_cluster_autoscaler = false\n",
            kubeconfig.display()
        ));
    }
    toml
}

/// A hub over the given control planes, each reached as docs/managed-cluster-rbac.yaml says.
fn hub(dir: &Path, tag: &str, cps: &[&ControlPlane]) -> HubProcess {
    let kubeconfigs: Vec<_> = cps
        .iter()
        .map(|cp| {
            let path = dir.join(format!("{}.kubeconfig", cp.name));
            if !path.exists() {
                managed_kubeconfig(cp, &path);
            }
            (cp.name.as_str(), path)
        })
        .collect();
    let clusters: Vec<(&str, &Path)> = kubeconfigs.iter().map(|(n, p)| (*n, p.as_path())).collect();
    HubProcess::start(dir, tag, &hub_toml(&clusters))
}

fn plan_time(plan: &Value) -> Option<Timestamp> {
    plan["now"].as_str()?.parse().ok()
}

fn spec_replicas(cp: &ControlPlane, resource: &str, ns: &str, name: &str) -> i64 {
    cp.get(&[resource, "-n", ns, name])["spec"]["replicas"]
        .as_i64()
        .unwrap()
}

/// `kubectl annotate` of the `workers` MachineDeployment (`key=value`, or `key-` to remove).
fn annotate_workers(cp: &ControlPlane, annotation: &str) {
    cp.kubectl(&[
        "annotate",
        "machinedeployment",
        "-n",
        CAPI_NS,
        "workers",
        annotation,
    ]);
}

/// The MachineSets of MachineDeployment `md`: (name, spec.replicas, status.replicas).
fn machine_sets(cp: &ControlPlane, md: &str) -> Vec<(String, i64, i64)> {
    cp.items(&[
        "machinesets.cluster.x-k8s.io",
        "-n",
        CAPI_NS,
        "-l",
        &format!("cluster.x-k8s.io/deployment-name={md}"),
    ])
    .iter()
    .map(|ms| {
        (
            name(ms),
            ms["spec"]["replicas"].as_i64().unwrap_or(0),
            ms["status"]["replicas"].as_i64().unwrap_or(0),
        )
    })
    .collect()
}

/// A Cluster API group of `cpu`-CPU workers whose MachineDeployment carries `annotation`.
fn capi_group(
    cluster: &str,
    name: &str,
    replicas: u32,
    max: u32,
    cpu: u32,
    annotation: &str,
) -> String {
    capi_machine_deployment(
        cluster,
        name,
        replicas,
        if replicas > 0 { 1 } else { 0 },
        max,
        cpu,
    )
    .replacen(
        "  annotations:\n",
        &format!("  annotations:\n    {annotation}\n"),
        1,
    )
}

#[test]
fn a_rolling_out_machine_deployment_keeps_its_idle_nodes_until_the_rollout_ends() {
    let cps = up(&["roll"], &["--provision-delay", "1s"]);
    let cp = &cps[0];
    cp.apply(&capi_group("roll", "workers", 2, 4, 4, "team: rollout"));
    eventually(LONG, "two workers Ready", || {
        (ready_nodes(cp) == 2).then_some(())
    });
    let old_nodes = node_names(cp);

    // A rollout (a new infrastructure template) whose new machine's node never turns Ready:
    // with the default strategy (surge one, none unavailable) the old machines stay until
    // it does.
    cp.apply(
        "apiVersion: infrastructure.cluster.x-k8s.io/v1beta2\nkind: AWSMachineTemplate\n\
         metadata: {name: workers-v2, namespace: openshift-cluster-api}\n\
         spec: {template: {spec: {instanceType: m6i.xlarge}}}\n",
    );
    annotate_workers(cp, "sim.fleetscaler.io/failure-mode=not-ready");
    cp.kubectl(&[
        "patch",
        "machinedeployment",
        "-n",
        CAPI_NS,
        "workers",
        "--type=merge",
        "-p",
        r#"{"spec":{"template":{"spec":{"infrastructureRef":{"name":"workers-v2"}}}}}"#,
    ]);
    eventually(LONG, "the rollout's new machine set", || {
        (machine_sets(cp, "workers").len() == 2).then_some(())
    });

    let dir = TempDir::new("real-rollout");
    let hub = hub(dir.path(), "hub", &[cp]);
    // The two idle old nodes would go after 5 s unneeded; the hub holds them instead, with
    // upstream's reason, pass after pass until well past that time.
    let held_since = eventually(LONG, "the old nodes held for the rollout", || {
        let plan = hub.plan("roll")?;
        let held = plan["notRemovable"]
            .as_array()?
            .iter()
            .filter(|n| n["code"] == "NodeGroupRollingOut")
            .count();
        (held == 2).then(|| plan_time(&plan)).flatten()
    });
    eventually(LONG, "a pass 15 s after the hold began", || {
        let plan = hub.plan("roll")?;
        let now = plan_time(&plan)?;
        (now.duration_since(held_since).as_secs() >= 15).then_some(())
    });
    let plan = hub.plan("roll").unwrap();
    assert!(
        plan["unneeded"].as_array().unwrap().is_empty(),
        "{}",
        plan["unneeded"]
    );
    assert!(plan["scaleDown"].as_array().unwrap().is_empty());
    assert_eq!(
        spec_replicas(cp, "machinedeployment", CAPI_NS, "workers"),
        2,
        "never scaled"
    );
    assert!(tainted_for_deletion(cp).is_empty());
    assert!(
        old_nodes.iter().all(|n| node_names(cp).contains(n)),
        "an old node went"
    );

    // The rollout ends: new machines get Ready nodes, the old ones are replaced.
    annotate_workers(cp, "sim.fleetscaler.io/failure-mode-");
    for node in cp.items(&["nodes"]).iter().filter(|n| !is_ready(n)) {
        cp.kubectl(&[
            "annotate",
            "node",
            &name(node),
            "sim.fleetscaler.io/never-ready-",
        ]);
    }
    eventually(LONG, "the rollout over", || {
        let sets = machine_sets(cp, "workers");
        let old_gone = sets
            .iter()
            .filter(|(_, spec, status)| *spec == 0 && *status == 0)
            .count();
        (sets.len() == 2 && old_gone == 1).then_some(())
    });
    // Now nothing holds the idle nodes: the hub takes the group down to its min.
    eventually(LONG, "the idle nodes removed", || {
        (spec_replicas(cp, "machinedeployment", CAPI_NS, "workers") == 1
            && node_names(cp).len() == 1)
            .then_some(())
    });
    assert!(
        old_nodes.iter().all(|n| !node_names(cp).contains(n)),
        "the rollout replaced them"
    );
    assert_eq!(refused_hub_requests(cp), Vec::<String>::new());
    assert!(hub.stop().success());
}

#[test]
fn a_machine_cluster_api_reports_failed_is_deleted_and_its_group_backed_off() {
    let cps = up(&["failed"], &["--provision-delay", "1s"]);
    let cp = &cps[0];
    // Least waste picks the 4-CPU group for a 3-CPU pod; its cloud has no capacity.
    cp.apply(&capi_group(
        "failed",
        "small",
        0,
        3,
        4,
        "sim.fleetscaler.io/failure-mode: fail",
    ));
    cp.apply(&capi_group("failed", "large", 0, 3, 8, "team: spare"));
    let dir = TempDir::new("real-failed");
    let hub = hub(dir.path(), "hub", &[cp]);
    cp.apply(&deployment("big", 1, "3"));

    // Cluster API v1beta2 reports it in the v1beta1 fields alone (no phase Failed).
    let failed = eventually(
        LONG,
        "Cluster API reporting the small group's Machine failed",
        || {
            cp.items(&["machines.cluster.x-k8s.io", "-n", CAPI_NS])
                .into_iter()
                .find(|m| m["status"]["deprecated"]["v1beta1"]["failureReason"] == "CreateError")
        },
    );
    let message = failed["status"]["deprecated"]["v1beta1"]["failureMessage"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("AWSMachine"),
        "Cluster API's words: {message}"
    );
    assert_eq!(
        failed["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"], "small",
        "the pod's first choice"
    );
    eventually(LONG, "the pod running on the large group's node", || {
        (running_pods(cp, "big") == 1).then_some(())
    });
    eventually(
        LONG,
        "the failed machine deleted and the small group back to 0",
        || {
            let gone = cp
                .try_kubectl(&[
                    "get",
                    "machine.cluster.x-k8s.io",
                    "-n",
                    CAPI_NS,
                    &name(&failed),
                ])
                .is_err();
            (gone && spec_replicas(cp, "machinedeployment", CAPI_NS, "small") == 0).then_some(())
        },
    );
    assert_eq!(spec_replicas(cp, "machinedeployment", CAPI_NS, "large"), 1);
    let node = cp.items(&["pods", "-n", "default", "-l", "app=big"])[0]["spec"]["nodeName"]
        .as_str()
        .unwrap()
        .to_string();
    let machine = cp
        .items(&["machines.cluster.x-k8s.io", "-n", CAPI_NS])
        .into_iter()
        .find(|m| m["status"]["nodeRef"]["name"] == node.as_str())
        .unwrap();
    assert_eq!(
        machine["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"],
        "large"
    );
    assert_eq!(refused_hub_requests(cp), Vec::<String>::new());
    assert!(hub.stop().success());
}

/// Both APIs: (the group's resource, namespace, name).
const GROUPS: [(&str, &str, &str); 2] = [
    (
        "machinesets.machine.openshift.io",
        "openshift-machine-api",
        "ocp-worker-a",
    ),
    ("machinedeployments.cluster.x-k8s.io", CAPI_NS, "capi-md-a"),
];

#[test]
fn a_hub_killed_mid_scale_down_leaves_the_real_controllers_to_finish_it() {
    let cps = up(&["ocp", "capi"], &["--provision-delay", "1s"]);
    let (ocp, capi) = (&cps[0], &cps[1]);
    ocp.apply(&openshift_machine_set("ocp", GROUPS[0].2, 2, 1, 4, 4));
    capi.apply(&capi_machine_deployment("capi", GROUPS[1].2, 2, 1, 4, 4));
    for cp in &cps {
        eventually(LONG, "two workers Ready", || {
            (ready_nodes(cp) == 2).then_some(())
        });
    }
    let before: Vec<Vec<String>> = cps.iter().map(node_names).collect();
    let dir = TempDir::new("real-restart");
    let first = hub(dir.path(), "first", &[ocp, capi]);
    // Killed once it has lowered both groups: the Machines it marked are being deleted.
    eventually(LONG, "both groups lowered by the hub", || {
        cps.iter()
            .zip(GROUPS)
            .all(|(cp, (res, ns, g))| spec_replicas(cp, res, ns, g) == 1)
            .then_some(())
    });
    first.kill();

    for (cp, before) in cps.iter().zip(&before) {
        eventually(
            LONG,
            "the real controllers removing the marked machine's node",
            || (node_names(cp).len() == 1).then_some(()),
        );
        let after = node_names(cp);
        assert!(
            before.contains(&after[0]),
            "{}: a new node {after:?}",
            cp.name
        );
    }
    let second = hub(dir.path(), "second", &[ocp, capi]);
    let started = Timestamp::now();
    // 15 s of looks: passes, or passes skipped as nothing changed since a settled one.
    for cp in &cps {
        eventually(LONG, "the restarted hub looking 15 s on", || {
            let report = second.api(&format!("/api/v1/clusters/{}", cp.name));
            let looked: Timestamp = report["lookedAt"].as_str()?.parse().ok()?;
            (looked.duration_since(started).as_secs() >= 15).then_some(())
        });
    }
    for ((cp, before), (res, ns, g)) in cps.iter().zip(&before).zip(GROUPS) {
        let plan = second.plan(&cp.name).unwrap();
        assert!(
            plan["scaleUp"].as_array().unwrap().is_empty(),
            "{}: {}",
            cp.name,
            plan["scaleUp"]
        );
        assert!(
            plan["scaleDown"].as_array().unwrap().is_empty(),
            "{}: at its min",
            cp.name
        );
        assert_eq!(spec_replicas(cp, res, ns, g), 1, "{}", cp.name);
        let after = node_names(cp);
        assert_eq!(after.len(), 1, "{}", cp.name);
        assert!(before.contains(&after[0]), "{}", cp.name);
        assert!(
            tainted_for_deletion(cp).is_empty(),
            "{}: a taint left",
            cp.name
        );
        assert_eq!(refused_hub_requests(cp), Vec::<String>::new());
    }
    assert!(second.stop().success());
}
