//! The simulated API server held to the real one: the same requests, sent to a real
//! control plane and to a simulated cluster, must get the same answer (status code, reason,
//! and the message where clients read it). Each case is a behaviour the hub depends on:
//! eviction answers (a budget's 429 with its cause, two budgets' 500), the scale
//! subresource's optimistic concurrency, watches from a compacted resourceVersion (410),
//! strict field validation, and the three patch types.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;
use crate::sim_support;

use std::time::Duration;

use fleetscaler::sim::settings::Flavor;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::{Api, Client};
use real_support::*;
use serde_json::{Value, json};

/// What a request got back: the status code, the Status reason and message.
#[derive(Clone, Debug, PartialEq)]
struct Answer {
    code: u16,
    reason: String,
    message: String,
    causes: Vec<String>,
}

impl Answer {
    fn ok(code: u16) -> Answer {
        Answer {
            code,
            reason: String::new(),
            message: String::new(),
            causes: Vec::new(),
        }
    }

    fn of<T>(result: Result<T, kube::Error>, ok: u16) -> Answer {
        match result {
            Ok(_) => Answer::ok(ok),
            Err(kube::Error::Api(s)) => Answer {
                code: s.code,
                reason: s.reason.clone(),
                message: s.message.clone(),
                causes: s
                    .details
                    .as_ref()
                    .map(|d| d.causes.iter().map(|c| c.reason.clone()).collect())
                    .unwrap_or_default(),
            },
            Err(e) => panic!("no API answer: {e}"),
        }
    }
}

async fn real_client(cp: &ControlPlane) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(cp.kubeconfig()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    config.default_retry = false;
    Client::try_from(config).unwrap()
}

/// A running pod `name` labelled `app=pin` on `node`.
async fn running_pod(client: &Client, node: &str, name: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "pin"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    for _ in 0..300 {
        let p = pods.get(name).await.unwrap();
        if p.status.and_then(|s| s.phase).as_deref() == Some("Running") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("pod {name} never ran");
}

async fn budget(client: &Client, name: &str) {
    let pdbs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "policy",
            "v1",
            "PodDisruptionBudget",
        )),
    );
    let pdb = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "pin"}}}
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
}

async fn evict(client: &Client, name: &str) -> Answer {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"}});
    Answer::of(
        pods.create_subresource::<_, Value>("eviction", name, &PostParams::default(), &eviction)
            .await,
        201,
    )
}

/// Evictions: one budget refuses (429, cause DisruptionBudget) once the disruption
/// controller has counted the pod; two budgets are a 500.
async fn evictions(client: &Client, node: &str) -> Vec<(&'static str, Answer)> {
    running_pod(client, node, "pinned").await;
    budget(client, "one").await;
    // Until the disruption controller has counted the pods, a budget allows nothing: the
    // answer is the same 429 either way.
    let one = evict(client, "pinned").await;
    budget(client, "two").await;
    let two = evict(client, "pinned").await;
    vec![
        ("eviction under one budget", one),
        ("eviction under two budgets", two),
    ]
}

/// The scale subresource written with a resourceVersion that is no longer current.
async fn stale_scale(client: &Client) -> Vec<(&'static str, Answer)> {
    let gvk = GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "MachineSet");
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "openshift-machine-api",
        &ApiResource::from_gvk_with_plural(&gvk, "machinesets"),
    );
    let ms = serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": "pin"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"pin": "x"}},
                 "template": {"metadata": {"labels": {"pin": "x"}}}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &ms).await.unwrap();
    // A machine controller (the simulated one) writes the new set's status once: take the
    // Scale once its version holds still.
    let mut scale = api.get_scale("pin").await.unwrap();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let again = api.get_scale("pin").await.unwrap();
        if again.metadata.resource_version == scale.metadata.resource_version {
            break;
        }
        scale = again;
    }
    let mut raised = scale.clone();
    if let Some(spec) = raised.spec.as_mut() {
        spec.replicas = Some(1);
    }
    let fresh = Answer::of(
        api.replace_scale("pin", &PostParams::default(), &raised)
            .await,
        200,
    );
    // The version read before that write is now stale.
    if let Some(spec) = scale.spec.as_mut() {
        spec.replicas = Some(2);
    }
    let stale = Answer::of(
        api.replace_scale("pin", &PostParams::default(), &scale)
            .await,
        200,
    );
    vec![
        ("scale write", fresh),
        ("scale write, stale resourceVersion", stale),
    ]
}

/// A watch from a resourceVersion long compacted away.
async fn old_watch(client: &Client) -> Vec<(&'static str, Answer)> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut events = cms
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    let answer = match events.next().await {
        Some(Ok(WatchEvent::Error(e))) => Answer {
            code: e.code,
            reason: e.reason,
            message: String::new(),
            causes: Vec::new(),
        },
        other => panic!("a watch from resourceVersion 1 answered {other:?}"),
    };
    vec![("watch from a compacted resourceVersion", answer)]
}

/// A field the type does not have, under `fieldValidation=Strict`; and the patch types.
async fn validation_and_patches(client: &Client, node: &str) -> Vec<(&'static str, Answer)> {
    // As kubectl sends it (kube's PostParams has no fieldValidation).
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "strict"}, "bogus": 1});
    let request =
        http::Request::post("/api/v1/namespaces/default/configmaps?fieldValidation=Strict")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&bad).unwrap())
            .unwrap();
    let mut strict = Answer::of(client.request::<Value>(request).await, 201);
    // The message names the field in both; its wording around it is the apiserver's own.
    assert!(strict.message.contains("bogus"), "{strict:?}");
    strict.message.clear();
    let nodes: Api<Node> = Api::all(client.clone());
    let pp = PatchParams::default();
    let merge = Answer::of(
        nodes
            .patch(
                node,
                &pp,
                &Patch::Merge(json!({"metadata": {"labels": {"pin": "merge"}}})),
            )
            .await,
        200,
    );
    let strategic = Answer::of(
        nodes
            .patch(
                node,
                &pp,
                &Patch::Strategic(json!({"metadata": {"labels": {"pin": "smp"}}})),
            )
            .await,
        200,
    );
    // kube's own json_patch version, whatever this crate's is.
    let ops = serde_json::from_value(json!([
        {"op": "replace", "path": "/metadata/labels/pin", "value": "json"}
    ]))
    .unwrap();
    let json = Answer::of(nodes.patch(node, &pp, &Patch::Json::<()>(ops)).await, 200);
    vec![
        ("unknown field, strict validation", strict),
        ("merge patch of a node", merge),
        ("strategic merge patch of a node", strategic),
        ("JSON patch of a node", json),
    ]
}

async fn answers(client: &Client, node: &str) -> Vec<(&'static str, Answer)> {
    let mut all = evictions(client, node).await;
    all.extend(stale_scale(client).await);
    all.extend(old_watch(client).await);
    all.extend(validation_and_patches(client, node).await);
    all
}

const KWOK_NODE: &str = r#"apiVersion: v1
kind: Node
metadata:
  name: pin-node
  annotations: {kwok.x-k8s.io/node: fake}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulated_api_server_answers_as_the_real_one() {
    let cps = tokio::task::block_in_place(|| up(&["pin"], &["--no-machines", "--no-watch-cache"]));
    let cp = &cps[0];
    tokio::task::block_in_place(|| {
        cp.apply(KWOK_NODE);
        eventually(Duration::from_secs(60), "the node Ready", || {
            cp.items(&["nodes"]).iter().any(is_ready).then_some(())
        });
        // The OpenAPI document kubectl validates and explains with is whole (a build with
        // the wrong Go toolchain serves a broken one).
        let explained = cp.kubectl(&[
            "explain",
            "machinesets.spec.replicas",
            "--api-version=machine.openshift.io/v1beta1",
        ]);
        assert!(
            explained.contains("FIELD: replicas <integer>"),
            "{explained}"
        );
        // Compaction moves etcd's floor past resourceVersion 1, as on any live cluster.
        cp.compact();
    });
    let real = answers(&real_client(cp).await, "pin-node").await;

    let fleet = sim_support::fleet(Flavor::OpenShift, false, 100).await;
    let sim = &fleet.clusters()[0];
    sim.compact();
    let client = sim_support::client(sim).await;
    let node = Api::<Node>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    let simulated = answers(&client, &node).await;

    let differences: Vec<String> = real
        .iter()
        .zip(&simulated)
        .filter(|(r, s)| r.1 != s.1)
        .map(|(r, s)| format!("{}:\n  real {:?}\n  sim  {:?}", r.0, r.1, s.1))
        .collect();
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    // The cases answer what the hub relies on.
    let code = |what: &str| real.iter().find(|(w, _)| *w == what).unwrap().1.code;
    assert_eq!(code("eviction under one budget"), 429);
    assert_eq!(code("eviction under two budgets"), 500);
    assert_eq!(code("scale write, stale resourceVersion"), 409);
    assert_eq!(code("watch from a compacted resourceVersion"), 410);
    fleet.shutdown().await;
}
