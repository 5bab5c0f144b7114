//! The chart's serving put to work: the certificate it makes, served by a hub; and its
//! ClusterRoles deciding the SubjectAccessReviews of a fake management cluster
//! (tests/support/serving_support), as the RBAC authorizer would.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::serving_support;

use std::collections::BTreeSet;
use std::sync::Arc;

use base64::Engine as _;
use fleetscaler::config::FleetConfig;
use fleetscaler::config::hub::HubConfig;
use fleetscaler::server::Endpoints;
use fleetscaler::sim::api::audit::RequestRecord;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use self::serving_support::{Decide, Subject};
use super::{all, container, pod_spec};
use crate::e2e_support::Hub;
use crate::rbac_support::{Account, Policy};

/// The rendered kubernetes.io/tls Secret `name`: its tls.crt, tls.key and ca.crt, decoded.
pub fn tls_secret(docs: &[Value], name: &str) -> (String, String, String) {
    let secret = all(docs, "Secret")
        .into_iter()
        .find(|s| s["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no Secret {name}"));
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let key = |k: &str| {
        let data = secret["data"][k]
            .as_str()
            .unwrap_or_else(|| panic!("{name} has no {k}"));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap();
        String::from_utf8(bytes).unwrap()
    };
    (key("tls.crt"), key("tls.key"), key("ca.crt"))
}

/// A hub without clusters, serving as `hub` says on loopback.
pub async fn serve(hub: HubConfig) -> (Hub, Endpoints, CancellationToken) {
    let config = FleetConfig {
        hub,
        ..FleetConfig::default()
    };
    let running = Hub::start(config.clone()).await;
    let cancel = CancellationToken::new();
    let listener = fleetscaler::server::bind("127.0.0.1:0", "--listen")
        .await
        .unwrap();
    let endpoints =
        fleetscaler::server::start(&config.hub, listener, running.view(), cancel.clone())
            .await
            .unwrap();
    (running, endpoints, cancel)
}

/// The account a service account's user name names (`system:serviceaccount:<ns>:<name>`).
pub fn account(user: &str) -> Option<Account> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    Some(Account {
        namespace: namespace.into(),
        name: name.into(),
    })
}

/// SubjectAccessReviews decided by `policy`, as the RBAC authorizer decides non-resource
/// URLs for a service account.
pub fn decided_by(policy: Policy) -> Decide {
    let policy = Arc::new(policy);
    Arc::new(move |s: &Subject, verb: &str, path: &str| {
        let Some(account) = account(&s.user) else {
            return false;
        };
        policy.grants(&account).allows(&RequestRecord {
            verb: verb.into(),
            api_group: String::new(),
            resource: String::new(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
            path: path.into(),
        })
    })
}

/// HTTPS from the Secret `tls_secret`, mounted read-only where fleet.toml says, Kubernetes
/// authentication (with the token it needs), the probes on their own port.
pub fn assert_secured(docs: &[Value], config: &Value, tls_secret: &str) {
    let serving = &config["hub"]["serving"];
    assert_eq!(serving["authentication"], "kubernetes", "{config}");
    assert_eq!(serving["probe_listen"], "0.0.0.0:8081");
    assert_eq!(serving["context"], Value::Null, "in-cluster");
    let mount = container(docs)["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "tls")
        .expect("the certificate mounted")
        .clone();
    assert_eq!(mount["readOnly"], true);
    let dir = mount["mountPath"].as_str().unwrap();
    assert_eq!(serving["tls_cert_file"], format!("{dir}/tls.crt"));
    assert_eq!(serving["tls_key_file"], format!("{dir}/tls.key"));
    let volume = pod_spec(docs)["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "tls")
        .unwrap()
        .clone();
    assert_eq!(volume["secret"]["secretName"], tls_secret);
    assert_eq!(volume["secret"]["defaultMode"], 0o440);
    assert_eq!(pod_spec(docs)["automountServiceAccountToken"], true);
    let names: BTreeSet<&str> = all(docs, "ClusterRole")
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "fleetscaler-auth-delegator",
            "fleetscaler-metrics-reader",
            "fleetscaler-viewer"
        ])
    );
}
