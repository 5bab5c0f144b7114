#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The simulated API server against kube's own client: reads, selectors, paging, writes,
//! conflicts, patches, preconditions, discovery and malformed input.

use crate::sim_support;

use fleetscaler::sim::settings::Flavor;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Error};
use serde_json::json;
use sim_support::{client, fleet};

fn api_error(e: Error) -> (u16, String) {
    match e {
        Error::Api(s) => (s.code, s.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn selectors_and_paging() {
    let fleet = fleet(Flavor::OpenShift, true, 10_000).await;
    let c = client(fleet.cluster(1).unwrap()).await;
    let pods: Api<Pod> = Api::all(c.clone());
    let all = pods.list(&ListParams::default()).await.unwrap();
    let node = all
        .items
        .iter()
        .find_map(|p| p.spec.as_ref()?.node_name.clone())
        .unwrap();
    let on_node = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .unwrap();
    assert!(!on_node.items.is_empty());
    assert!(
        on_node
            .items
            .iter()
            .all(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some(node.as_str()))
    );
    let running = pods
        .list(&ListParams::default().fields("status.phase=Running"))
        .await
        .unwrap();
    assert!(
        running
            .items
            .iter()
            .all(|p| p.status.as_ref().unwrap().phase.as_deref() == Some("Running"))
    );
    let web = pods
        .list(&ListParams::default().labels("app in (frontend,cart)"))
        .await
        .unwrap();
    assert!(!web.items.is_empty());
    assert!(web.items.iter().all(|p| {
        let app = p.metadata.labels.as_ref().unwrap()["app"].as_str();
        app == "frontend" || app == "cart"
    }));
    // Paging returns every pod exactly once.
    let mut seen = Vec::new();
    let mut params = ListParams::default().limit(7);
    loop {
        let page = pods.list(&params).await.unwrap();
        seen.extend(
            page.items
                .iter()
                .map(|p| (p.metadata.namespace.clone(), p.metadata.name.clone())),
        );
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    // The workload controller may add or remove a few pods meanwhile, never most of them.
    assert!(seen.len() >= all.items.len() / 2);
    let mut dedup = seen.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), seen.len(), "a paged list returned a pod twice");
    // A page of a list with no selector says how many objects follow it, as the API server
    // does; a selector leaves the count out (the server would have to filter them all).
    let nodes: Api<Node> = Api::all(c.clone());
    let every = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len();
    let first = nodes.list(&ListParams::default().limit(2)).await.unwrap();
    assert!(every > 4, "{every} nodes");
    assert_eq!(first.metadata.remaining_item_count, Some(every as i64 - 2));
    let second = ListParams::default()
        .limit(2)
        .continue_token(first.metadata.continue_.as_deref().unwrap());
    let second = nodes.list(&second).await.unwrap();
    assert_eq!(second.metadata.remaining_item_count, Some(every as i64 - 4));
    let named = ListParams::default().limit(2).fields("metadata.name!=x");
    let named = nodes.list(&named).await.unwrap();
    assert!(named.metadata.continue_.is_some());
    assert_eq!(named.metadata.remaining_item_count, None);
    // Namespaced list and an unsupported field selector.
    let shop: Api<Pod> = Api::namespaced(c.clone(), "shop");
    assert!(
        shop.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .all(|p| p.metadata.namespace.as_deref() == Some("shop"))
    );
    let e = pods
        .list(&ListParams::default().fields("spec.bogus=1"))
        .await
        .unwrap_err();
    assert_eq!(api_error(e).0, 400);
    let e = pods
        .list(&ListParams::default().labels("app in (x"))
        .await
        .unwrap_err();
    assert_eq!(api_error(e).0, 400);
    fleet.shutdown().await;
}

#[tokio::test]
async fn writes_conflicts_patches_and_preconditions() {
    let fleet = fleet(Flavor::OpenShift, false, 10_000).await;
    let c = client(fleet.cluster(1).unwrap()).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "status"}, "data": {"a": "1"}}))
            .unwrap();
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    let e = cms.create(&PostParams::default(), &cm).await.unwrap_err();
    assert_eq!(api_error(e), (409, "AlreadyExists".into()));

    // Update with the current resourceVersion works; replaying the old one conflicts.
    let mut changed = created.clone();
    changed
        .data
        .as_mut()
        .unwrap()
        .insert("a".into(), "2".into());
    let updated = cms
        .replace("status", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );
    let e = cms
        .replace("status", &PostParams::default(), &changed)
        .await
        .unwrap_err();
    assert_eq!(api_error(e), (409, "Conflict".into()));

    // Merge, JSON and strategic patches.
    let p = cms
        .patch(
            "status",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"b": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.data.as_ref().unwrap()["b"], "3");
    let jp = http::Request::builder()
        .method("PATCH")
        .uri("/api/v1/namespaces/default/configmaps/status")
        .header("content-type", "application/json-patch+json")
        .body(br#"[{"op":"replace","path":"/data/a","value":"9"}]"#.to_vec())
        .unwrap();
    let p: ConfigMap = c.request(jp).await.unwrap();
    assert_eq!(p.data.as_ref().unwrap()["a"], "9");
    let p = cms
        .patch(
            "status",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"finalizers": ["x/y"]}})),
        )
        .await
        .unwrap();
    assert_eq!(
        p.metadata.finalizers.as_deref(),
        Some(&["x/y".to_string()][..])
    );
    // A patch carrying a stale resourceVersion is a conflict.
    let stale = json!({"metadata": {"resourceVersion": created.metadata.resource_version}, "data": {"c": "1"}});
    let e = cms
        .patch("status", &PatchParams::default(), &Patch::Merge(stale))
        .await
        .unwrap_err();
    assert_eq!(api_error(e).0, 409);
    // Server-side apply creates and merges.
    let applied = cms
        .patch("applied", &PatchParams::apply("hub").force(), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"k": "v"}})))
        .await
        .unwrap();
    assert_eq!(applied.data.unwrap()["k"], "v");

    // Delete: wrong uid precondition conflicts; with finalizers the object lingers.
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("nope".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    assert_eq!(
        api_error(cms.delete("status", &dp).await.unwrap_err()).0,
        409
    );
    cms.delete("status", &DeleteParams::default())
        .await
        .unwrap();
    let lingering = cms.get("status").await.unwrap();
    assert!(lingering.metadata.deletion_timestamp.is_some());
    cms.patch(
        "status",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(
        api_error(cms.get("status").await.unwrap_err()),
        (404, "NotFound".into())
    );
    fleet.shutdown().await;
}

#[tokio::test]
async fn discovery_finds_every_group_and_subresource() {
    let fleet = fleet(Flavor::OpenShift, false, 10_000).await;
    let c = client(fleet.cluster(1).unwrap()).await;
    let discovery = kube::discovery::Discovery::new(c.clone())
        .run()
        .await
        .unwrap();
    let groups: Vec<String> = discovery.groups().map(|g| g.name().to_string()).collect();
    for g in [
        "",
        "policy",
        "coordination.k8s.io",
        "events.k8s.io",
        "machine.openshift.io",
        "cluster.x-k8s.io",
        "autoscaling.openshift.io",
    ] {
        assert!(
            groups.iter().any(|x| x == g),
            "group {g:?} missing from {groups:?}"
        );
    }
    let (ar, caps) = discovery
        .resolve_gvk(&kube::api::GroupVersionKind::gvk(
            "machine.openshift.io",
            "v1beta1",
            "MachineSet",
        ))
        .unwrap();
    assert_eq!(ar.plural, "machinesets");
    assert!(caps.subresources.iter().any(|(s, _)| s.plural == "scale"));
    let version = c.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
    fleet.shutdown().await;
}

#[tokio::test]
async fn malformed_requests_get_status_errors() {
    let fleet = fleet(Flavor::OpenShift, false, 10_000).await;
    let c = client(fleet.cluster(1).unwrap()).await;
    let send = |method: &str, uri: &str, ctype: &str, body: &'static [u8]| {
        http::Request::builder()
            .method(method)
            .uri(uri.to_string())
            .header("content-type", ctype)
            .body(body.to_vec())
            .unwrap()
    };
    let cases: Vec<(http::Request<Vec<u8>>, u16)> = vec![
        (
            send(
                "POST",
                "/api/v1/namespaces/default/configmaps",
                "application/json",
                b"{not json",
            ),
            400,
        ),
        (
            send(
                "POST",
                "/api/v1/namespaces/default/configmaps",
                "application/json",
                b"[1,2]",
            ),
            400,
        ),
        (
            send(
                "POST",
                "/api/v1/namespaces/default/pods",
                "application/json",
                br#"{"metadata":{"name":"p"},"spec":{"containers":7}}"#,
            ),
            422,
        ),
        (
            send(
                "PATCH",
                "/api/v1/nodes/nope",
                "application/merge-patch+json",
                b"{}",
            ),
            404,
        ),
        (
            send("PATCH", "/api/v1/namespaces/default", "text/plain", b"{}"),
            415,
        ),
        (
            send("GET", "/api/v1/pods?limit=lots", "application/json", b""),
            400,
        ),
        (
            send(
                "GET",
                "/api/v1/pods?watch=1&resourceVersion=abc",
                "application/json",
                b"",
            ),
            400,
        ),
        (send("GET", "/api/v1/widgets", "application/json", b""), 404),
        (
            send(
                "POST",
                "/api/v1/namespaces/default/pods/x/eviction",
                "application/json",
                b"{",
            ),
            400,
        ),
        (
            send(
                "PUT",
                "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machinesets/nope/scale",
                "application/json",
                b"{}",
            ),
            404,
        ),
        (
            send(
                "DELETE",
                "/api/v1/namespaces/default/configmaps/x",
                "application/json",
                b"{bad",
            ),
            400,
        ),
    ];
    for (req, code) in cases {
        let what = format!("{} {}", req.method(), req.uri());
        let e = c.request::<serde_json::Value>(req).await.unwrap_err();
        let (got, _) = api_error(e);
        assert_eq!(got, code, "{what}");
    }
    // Nodes deserialize as k8s-openapi Nodes (every required field present).
    let nodes: Api<Node> = Api::all(c);
    assert_eq!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        6
    );
    fleet.shutdown().await;
}

#[tokio::test]
async fn leases_and_both_event_apis() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Event;
    use k8s_openapi::api::events::v1::Event as EventV1;
    let fleet = fleet(Flavor::OpenShift, false, 10_000).await;
    let c = client(fleet.cluster(1).unwrap()).await;
    // Leader election: create, renew with the current version, lose on a stale one.
    let leases: Api<Lease> = Api::namespaced(c.clone(), "openshift-machine-api");
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "fleetscaler"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})).unwrap();
    let held = leases.create(&PostParams::default(), &lease).await.unwrap();
    let mut renewed = held.clone();
    renewed.spec.as_mut().unwrap().holder_identity = Some("b".into());
    leases
        .replace("fleetscaler", &PostParams::default(), &renewed)
        .await
        .unwrap();
    assert_eq!(
        api_error(
            leases
                .replace("fleetscaler", &PostParams::default(), &held)
                .await
                .unwrap_err()
        )
        .0,
        409
    );
    // Core events select by involved object; events.k8s.io events are served too.
    let events: Api<Event> = Api::namespaced(c.clone(), "default");
    let ev: Event = serde_json::from_value(json!({"metadata": {"name": "e1"}, "reason": "ScaledUpGroup", "type": "Normal",
        "involvedObject": {"kind": "ConfigMap", "name": "cluster-autoscaler-status", "namespace": "default"}, "message": "scaled"})).unwrap();
    events.create(&PostParams::default(), &ev).await.unwrap();
    let found = events
        .list(
            &ListParams::default()
                .fields("involvedObject.name=cluster-autoscaler-status,reason=ScaledUpGroup"),
        )
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    let v1: Api<EventV1> = Api::namespaced(c, "default");
    let ev1: EventV1 = serde_json::from_value(json!({"metadata": {"name": "e2"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "reason": "TriggeredScaleUp", "type": "Normal", "action": "ScaleUp", "reportingController": "fleetscaler", "reportingInstance": "hub",
        "regarding": {"kind": "Pod", "name": "web", "namespace": "default"}})).unwrap();
    v1.create(&PostParams::default(), &ev1).await.unwrap();
    assert_eq!(
        v1.list(&ListParams::default().fields("regarding.name=web"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    fleet.shutdown().await;
}

#[tokio::test]
async fn hostile_numbers_are_refused_or_clamped() {
    let fleet = fleet(Flavor::OpenShift, false, 10_000).await;
    let cluster = fleet.cluster(1).unwrap();
    let c = client(cluster).await;
    let get = |uri: String| http::Request::builder().uri(uri).body(Vec::new()).unwrap();
    // A resourceVersion at the top of u64 and a huge timeout neither panic nor hang.
    let watch = get(format!(
        "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={}&timeoutSeconds={}",
        u64::MAX,
        u64::MAX
    ));
    let started = tokio::time::timeout(std::time::Duration::from_secs(5), c.request_stream(watch))
        .await
        .unwrap();
    assert!(started.is_ok());
    // Replica counts beyond int32 are invalid, through the object as through its scale.
    let sets = sim_support::machine_api(
        &c,
        "machine.openshift.io",
        "MachineSet",
        "machinesets",
        "openshift-machine-api",
    );
    let name = format!("{}-worker-us-east-1a", cluster.infra);
    let e = sets
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1u64 << 40}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(e).0, 422);
    let e = sets
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": "three"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(e).0, 422);
    fleet.shutdown().await;
}
