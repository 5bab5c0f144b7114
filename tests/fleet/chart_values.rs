#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The chart's values as an OpenShift admin reads them (docs/install.md), as real Helm
//! renders them (tests/fleet/chart_support): how Prometheus authenticates, the Deployment's
//! scheduling and rollout values, extra objects and rules, and the values of upstream's
//! cluster-autoscaler chart that the chart accepts beside its own names. The refusals (each
//! with its message) are scripts/helm_check.py's REFUSED.

use crate::chart_support;

use chart_support::*;
use serde_json::json;

/// The first endpoint of the one ServiceMonitor of `case`.
fn endpoint(case: &str) -> serde_json::Value {
    one(&docs(case), "ServiceMonitor")["spec"]["endpoints"][0].clone()
}

/// A Secret named in `authorization.credentials` is sent as the Prometheus Operator names
/// it, winning over the older `bearerTokenSecret`; that older name still works alone; and
/// with neither, the deprecated token file is the fallback.
#[test]
fn prometheus_sends_the_token_of_the_secret_named_in_authorization() {
    let e = endpoint("monitor-authorization");
    assert_eq!(
        e["authorization"],
        json!({"type": "Bearer", "credentials": {"name": "scraper", "key": "sa-token"}})
    );
    assert!(e["bearerTokenFile"].is_null(), "{e}");
    let older = endpoint("cert-manager");
    assert_eq!(
        older["authorization"]["credentials"],
        json!({"name": "scraper-token", "key": "token"})
    );
    let fallback = endpoint("multi-cluster");
    assert!(fallback["authorization"].is_null(), "{fallback}");
    assert_eq!(
        fallback["bearerTokenFile"],
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    );
}

#[test]
fn the_deployment_takes_its_priority_spread_strategy_and_history_from_the_values() {
    // By default: upstream's priority class, and a rollout that starts a standby first.
    let rendered = docs("default");
    let deployment = one(&rendered, "Deployment");
    assert_eq!(
        pod_spec(&rendered)["priorityClassName"],
        "system-cluster-critical"
    );
    assert_eq!(deployment["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        deployment["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    );
    assert!(pod_spec(&rendered)["topologySpreadConstraints"].is_null());

    let rendered = docs("deployment-values");
    let deployment = one(&rendered, "Deployment");
    let pod = pod_spec(&rendered);
    assert_eq!(pod["priorityClassName"], "fleet-critical");
    assert_eq!(deployment["spec"]["revisionHistoryLimit"], 3);
    assert_eq!(deployment["spec"]["strategy"], json!({"type": "Recreate"}));
    // A constraint without a selector spreads this release's pods; one with keeps its own.
    let spread = pod["topologySpreadConstraints"].as_array().unwrap();
    assert_eq!(spread.len(), 2, "{spread:?}");
    assert_eq!(
        spread[0]["labelSelector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(spread[0]["topologyKey"], "topology.kubernetes.io/zone");
    assert_eq!(
        spread[1]["labelSelector"],
        json!({"matchLabels": {"team": "platform"}})
    );
}

/// extraObjects go through tpl (a map and a string alike), and rbac.additionalRules become a
/// ClusterRole of their own bound to the pod's service account, whose token is then mounted
/// even where nothing else of the hub needs it (one plain replica, no membership).
#[test]
fn extra_objects_go_through_tpl_and_extra_rules_get_a_cluster_role_of_their_own() {
    let rendered = docs("deployment-values");
    let extra = all(&rendered, "ConfigMap")
        .into_iter()
        .find(|c| c["metadata"]["name"] == "fleetscaler-extra")
        .expect("the extra ConfigMap, its name through tpl");
    assert_eq!(extra["data"]["namespace"], NAMESPACE);
    let role = one(&rendered, "Role");
    assert_eq!(role["metadata"]["name"], "fleetscaler-plugin");
    assert_eq!(role["metadata"]["namespace"], "inventory");

    let additional = one(&rendered, "ClusterRole");
    assert_eq!(additional["metadata"]["name"], "fleetscaler-additional");
    assert_eq!(
        additional["rules"],
        json!([{"apiGroups": [""], "resources": ["secrets"],
                "resourceNames": ["plugin-token"], "verbs": ["get"]}])
    );
    let binding = one(&rendered, "ClusterRoleBinding");
    assert_eq!(binding["roleRef"]["name"], "fleetscaler-additional");
    let pod = pod_spec(&rendered);
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": pod["serviceAccountName"],
                "namespace": NAMESPACE}])
    );
    assert_eq!(pod["automountServiceAccountToken"], true);

    // Without them: no such role, and the single plain replica mounts no token.
    let plain = docs("single");
    assert!(all(&plain, "ClusterRole").is_empty());
    assert_eq!(pod_spec(&plain)["automountServiceAccountToken"], false);
    for case in CASES.into_iter().filter(|c| *c != "deployment-values") {
        let named = |d: &&serde_json::Value| d["metadata"]["name"] == "fleetscaler-additional";
        assert!(!docs(case).iter().any(|d| named(&d)), "{case}");
    }
}
