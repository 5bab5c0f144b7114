//! Scale-down as upstream does it, on a real control plane (kube-apiserver, etcd, the
//! controller-manager with its DaemonSet and disruption controllers, the scheduler, kwok):
//! - a pod owned by a custom resource of its own CRD keeps its node (`NotReplicated`, upstream's
//!   `--skip-nodes-with-custom-controller-pods`), while a node that differs only in its pod's
//!   owner (a Deployment) is drained and removed;
//! - the DaemonSet pods of drained nodes receive a real Eviction, after the other pods;
//! - a node whose two pods need more disruptions than their PodDisruptionBudget allows at
//!   once (one) is still removed, alone, its pods evicted one at a time within the budget (the
//!   second refused with 429 until the first one's replacement runs, when it is not yet).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;

use std::time::Duration;

use real_support::*;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(180);
const GROUP: &str = "sd-workers";

const WIDGET_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

const AGENT: &str = r#"apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: agent
        image: registry.example/agent:1
        resources: {requests: {cpu: 10m, memory: 16Mi}}
"#;

fn fleet_toml(kubeconfig: &std::path::Path) -> String {
    format!(
        r#"{HUB_SECTION}
[defaults]
scale_down_unneeded_time = "5s"
scale_down_delay_after_add = "5s"
scale_down_delay_after_delete = "0s"
scale_down_delay_after_failure = "5s"
node_delete_delay_after_taint = "1s"
max_pod_eviction_time = "90s"

[[clusters]]
name = "sd"
kubeconfig = "{}"
use_cluster_autoscaler = false
"#,
        kubeconfig.display()
    )
}

fn worker_names(cp: &ControlPlane) -> Vec<String> {
    let mut names: Vec<String> = cp
        .items(&["nodes"])
        .iter()
        .filter(|n| is_ready(n))
        .map(name)
        .collect();
    names.sort();
    names
}

/// Applies `yaml` while every worker but `on` is cordoned, so its pods land there, and
/// waits for `pods` pods of `app` to run.
fn place(cp: &ControlPlane, workers: &[String], on: &str, yaml: &str, app: &str, pods: usize) {
    let others: Vec<&String> = workers.iter().filter(|w| *w != on).collect();
    for w in &others {
        cp.kubectl(&["cordon", w]);
    }
    cp.apply(yaml);
    eventually(LONG, &format!("{app} running on {on}"), || {
        (running_pods(cp, app) == pods).then_some(())
    });
    for w in &others {
        cp.kubectl(&["uncordon", w]);
    }
}

/// A pod of 100m owned (as its controller) by the Widget `owner`, bound to `node`.
fn widget_pod(owner: &Value, node: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: widget-worker
  namespace: default
  labels: {{app: widget}}
  ownerReferences:
  - {{apiVersion: example.com/v1, kind: Widget, name: {}, uid: {}, controller: true}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: registry.example/app:1
    resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}
"#,
        name(owner),
        owner["metadata"]["uid"].as_str().unwrap()
    )
}

/// Audited evictions of pods whose name starts with `prefix`, by status code, in order.
fn evictions(cp: &ControlPlane, prefix: &str) -> Vec<(i64, String)> {
    audit(cp)
        .iter()
        .filter(|e| e["objectRef"]["subresource"] == "eviction" && e["stage"] == "ResponseComplete")
        .filter(|e| {
            e["objectRef"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .map(|e| {
            let code = e["responseStatus"]["code"].as_i64().unwrap_or(0);
            let at = e["stageTimestamp"].as_str().unwrap_or_default().to_string();
            (code, at)
        })
        .collect()
}

#[test]
fn custom_controller_pods_keep_their_node_daemonsets_are_evicted_and_a_budget_at_risk_drains_alone()
{
    let cps = up(&["sd"], &["--provision-delay", "1s"]);
    let cp = &cps[0];
    cp.apply(&openshift_machine_set("sd", GROUP, 4, 1, 6, 4));
    let workers = eventually(LONG, "four workers Ready", || {
        let w = worker_names(cp);
        (w.len() == 4).then_some(w)
    });
    let (a, b, c, d) = (&workers[0], &workers[1], &workers[2], &workers[3]);

    cp.apply(WIDGET_CRD);
    cp.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=60s",
    ]);
    cp.apply(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\n",
    );
    let widget = cp.get(&["widgets.example.com", "-n", "default", "w1"]);
    cp.apply(&widget_pod(&widget, a));
    cp.apply(AGENT);
    eventually(LONG, "an agent pod on every worker", || {
        (running_pods(cp, "agent") == 4).then_some(())
    });
    // b: the same small pod as a's, of a Deployment; c: busy; d: two pods under a budget
    // that allows one disruption.
    place(
        cp,
        &workers,
        b,
        &deployment("filler", 1, "100m"),
        "filler",
        1,
    );
    place(cp, &workers, c, &deployment("busy", 1, "2500m"), "busy", 1);
    place(cp, &workers, d, &deployment("web", 2, "100m"), "web", 2);
    cp.apply(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: default}\n\
         spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}\n",
    );
    eventually(LONG, "the budget allowing one disruption", || {
        let pdb = cp.get(&["pdb", "-n", "default", "web"]);
        (pdb["status"]["disruptionsAllowed"] == 1).then_some(())
    });
    assert_eq!(running_pods(cp, "widget"), 1);

    let dir = TempDir::new("real-scale-down");
    let kubeconfig = dir.path().join("sd.kubeconfig");
    managed_kubeconfig(cp, &kubeconfig);
    let hub = HubProcess::start(dir.path(), "hub", &fleet_toml(&kubeconfig));

    eventually(LONG, "b and d drained and removed", || {
        let w = worker_names(cp);
        (w == [a.clone(), c.clone()]).then_some(())
    });
    let replicas = cp.get(&[
        "machinesets.machine.openshift.io",
        "-n",
        "openshift-machine-api",
        GROUP,
    ])["spec"]["replicas"]
        .as_i64();
    assert_eq!(replicas, Some(2));
    // a is kept for its Widget's pod, in a pass after the removals, and says why.
    eventually(LONG, "a kept as NotReplicated", || {
        let plan = http_get(&hub.addr, "/api/v1/clusters/sd/plan")?;
        let plan: Value = serde_json::from_str(&plan).ok()?;
        let kept = plan["notRemovable"]
            .as_array()?
            .iter()
            .find(|n| n["node"] == a.as_str())?
            .clone();
        (kept["code"] == "NotReplicated").then_some(kept)
    });
    assert_eq!(
        running_pods(cp, "widget"),
        1,
        "the Widget's pod was not touched"
    );
    assert!(
        evictions(cp, "widget").is_empty(),
        "the Widget's pod was evicted"
    );
    assert_eq!(running_pods(cp, "filler"), 1);
    assert_eq!(running_pods(cp, "web"), 2);

    // The DaemonSet pods of b and d were evicted, not just deleted with their node.
    let agents: Vec<_> = evictions(cp, "agent")
        .into_iter()
        .filter(|(code, _)| *code == 201)
        .collect();
    assert_eq!(agents.len(), 2, "{agents:?}");
    // The budget's two pods went one at a time: both evicted, never against the budget. The
    // second eviction is refused (429) until the first pod's replacement runs, unless the
    // replacement (kwok makes it run at once) was counted before it was asked: then no refusal.
    let web = evictions(cp, "web");
    let made: Vec<&String> = web
        .iter()
        .filter(|(c, _)| *c == 201)
        .map(|(_, at)| at)
        .collect();
    assert_eq!(made.len(), 2, "{web:?}");
    if let Some(refused) = web.iter().find(|(c, _)| *c == 429).map(|(_, at)| at) {
        assert!(made[0] <= refused && refused <= made[1], "{web:?}");
    }
    assert_eq!(refused_hub_requests(cp), Vec::<String>::new());
    assert!(hub.stop().success());
}
