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
