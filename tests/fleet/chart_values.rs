#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The chart's values as an OpenShift admin reads them (docs/install.md), as real Helm
//! renders them (tests/fleet/chart_support): how Prometheus authenticates, the Deployment's
//! scheduling and rollout values, extra objects and rules, and the values of upstream's
//! cluster-autoscaler chart that the chart accepts beside its own names. The refusals (each
//! with its message) are scripts/helm_check.py's REFUSED.

use crate::chart_support;

use chart_support::promql;
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

/// A rendered case as Helm wrote it.
fn text(case: &str) -> String {
    let path = rendered().join(format!("{case}.yaml"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// Where two renders part, for a readable failure.
fn first_difference(a: &str, b: &str) -> Option<String> {
    let (mut left, mut right) = (a.lines(), b.lines());
    for line in 1.. {
        match (left.next(), right.next()) {
            (None, None) => return None,
            (l, r) if l == r => {}
            (l, r) => return Some(format!("line {line}: {l:?} against {r:?}")),
        }
    }
    None
}

/// Upstream cluster-autoscaler chart's names give the very manifests the chart's own names
/// give; given both, each upstream value saying otherwise, the chart's own names win every
/// time. The settings took effect, so the sameness is not that of two renders ignoring them.
#[test]
fn upstream_chart_names_render_what_the_charts_own_names_render() {
    let own = text("upstream-own-names");
    for case in ["upstream-names", "upstream-both-names"] {
        let difference = first_difference(&own, &text(case));
        assert!(
            difference.is_none(),
            "{case} differs from upstream-own-names: {difference:?}"
        );
    }

    let rendered = docs("upstream-names");
    let monitor = one(&rendered, "ServiceMonitor");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prom");
    assert_eq!(
        monitor["metadata"]["annotations"],
        json!({"team": "platform"})
    );
    assert_eq!(monitor["metadata"]["namespace"], NAMESPACE);
    let e = &monitor["spec"]["endpoints"][0];
    assert_eq!(e["interval"], "15s");
    assert_eq!(e["path"], "/metrics");
    assert_eq!(
        e["relabelings"],
        json!([{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}])
    );
    assert_eq!(e["metricRelabelings"][0]["action"], "drop");
    let rule = one(&rendered, "PrometheusRule");
    assert_eq!(rule["metadata"]["labels"]["release"], "prom");

    let env = literal_env(&rendered);
    for (name, value) in [
        ("FLEETSCALER_DEFAULTS__MAX_NODES_TOTAL", "100"),
        ("HTTPS_PROXY", "http://proxy:3128"),
    ] {
        assert!(
            env.contains(&(name.to_string(), value.to_string())),
            "{name}={value} not in {env:?}"
        );
    }
    let account = one(&rendered, "ServiceAccount");
    assert_eq!(account["metadata"]["name"], "fleet-hub");
    assert_eq!(
        account["metadata"]["annotations"]["example.com/owner"],
        "platform"
    );
    assert_eq!(pod_spec(&rendered)["serviceAccountName"], "fleet-hub");
    let sc = &container(&rendered)["securityContext"];
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true, "the lock-down stays");
    let budget = one(&rendered, "PodDisruptionBudget");
    assert_eq!(budget["spec"]["maxUnavailable"], 1);
    assert!(budget["spec"]["minAvailable"].is_null(), "{budget}");
    assert_eq!(
        budget["metadata"]["annotations"],
        json!({"team": "platform"})
    );
}

/// Upstream's names fill what the chart leaves empty (the ServiceMonitor's switch and
/// interval, whether to create the ServiceAccount) and add to the container's lock-down
/// without loosening it; with neither name, the chart's defaults hold.
#[test]
fn upstream_names_fill_what_the_chart_leaves_empty_and_never_loosen_the_lock_down() {
    let rendered = docs("upstream-fills");
    assert!(all(&rendered, "ServiceAccount").is_empty(), "not created");
    assert_eq!(pod_spec(&rendered)["serviceAccountName"], "existing-sa");
    let binding = one(&rendered, "RoleBinding");
    assert_eq!(binding["subjects"][0]["name"], "existing-sa");
    assert_eq!(endpoint("upstream-fills")["interval"], "10s");
    let sc = &container(&rendered)["securityContext"];
    assert_eq!(sc["runAsUser"], 1000, "added: {sc}");
    assert_eq!(sc["readOnlyRootFilesystem"], true, "not loosened: {sc}");
    assert_eq!(sc["allowPrivilegeEscalation"], false);

    // Neither name: the defaults the chart applies last.
    let rendered = docs("default");
    let account = one(&rendered, "ServiceAccount");
    assert_eq!(
        pod_spec(&rendered)["serviceAccountName"],
        account["metadata"]["name"]
    );
    assert!(all(&rendered, "ServiceMonitor").is_empty());
    assert_eq!(endpoint("multi-cluster")["interval"], "30s");
    assert_eq!(
        one(&rendered, "PodDisruptionBudget")["spec"],
        json!({"minAvailable": 1, "selector": one(&rendered, "Deployment")["spec"]["selector"]})
    );
}

/// prometheusRule.namespace, .interval and .rules (upstream's chart has them under the same
/// names): the rule where asked, every group on the interval, and your rules, through tpl, in
/// a group of their own that Prometheus's own promtool accepts beside the shipped ones.
#[test]
fn the_prometheus_rule_takes_its_namespace_interval_and_your_rules() {
    let rule = one(&docs("upstream-fills"), "PrometheusRule").clone();
    assert_eq!(rule["metadata"]["namespace"], "monitoring");
    let groups = rule["spec"]["groups"].as_array().unwrap();
    assert!(groups.len() >= 2, "{groups:?}");
    for g in groups {
        assert_eq!(g["interval"], "1m", "{}", g["name"]);
    }
    let yours = groups.last().unwrap();
    assert_eq!(yours["name"], "fleetscaler-additional");
    assert_eq!(
        yours["rules"],
        json!([{"alert": "FleetscalerAbsent", "expr": "absent(up{job=\"fleetscaler\"})",
                "for": "5m", "labels": {"severity": "critical"}}])
    );
    let shipped: usize = groups[..groups.len() - 1]
        .iter()
        .map(|g| g["rules"].as_array().unwrap().len())
        .sum();
    let dir = crate::e2e_support::TempDir::new("chart-your-rules");
    let file = dir.path().join("rules.yaml");
    std::fs::write(&file, json!({"groups": groups}).to_string()).unwrap();
    promql::promtool_check_rules(&file, shipped + 1).unwrap_or_else(|e| panic!("{e}"));
}
