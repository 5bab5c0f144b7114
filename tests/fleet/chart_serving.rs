#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The chart's serving (values `serving`, docs/install.md "Serving"), as real Helm renders
//! it (tests/fleet/chart_support) and put to work: the certificate from cert-manager, OpenShift's
//! service CA or a Secret of yours; the self-signed certificate the chart makes, served by a
//! hub and verified by its CA for the Service's name; and the chart's ClusterRoles deciding
//! a fake management cluster's SubjectAccessReviews (tests/support/serving_support) as the RBAC
//! authorizer would, for Prometheus, a viewer, a stranger and the hub's own reviews.

use crate::chart_support;
use crate::e2e_support;
use crate::rbac_support;

use crate::serving_support::*;
use chart_support::serving::{self, assert_secured, tls_secret};
use chart_support::*;
use e2e_support::TempDir;
use fleetscaler::config::hub::{HubConfig, ServingConfig};
use rbac_support::Policy;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;

#[test]
fn the_certificate_comes_from_cert_manager_openshift_or_a_secret_of_yours() {
    // cert-manager: a Certificate for the Service's names writes the mounted Secret.
    let rendered = docs("cert-manager");
    let cert = one(&rendered, "Certificate");
    assert_eq!(cert["spec"]["secretName"], "fleetscaler-tls");
    assert_eq!(
        cert["spec"]["issuerRef"],
        json!({"name": "platform-ca", "kind": "ClusterIssuer"})
    );
    let names = cert["spec"]["dnsNames"].as_array().unwrap();
    assert!(
        names.contains(&json!("fleetscaler.fleetscaler.svc")),
        "{names:?}"
    );
    assert!(
        all(&rendered, "Secret").is_empty(),
        "cert-manager writes it"
    );
    let config = check_config("cert-manager", &rendered);
    assert_secured(&rendered, &config, "fleetscaler-tls");
    assert_eq!(
        config["hub"]["serving"]["max_connections"], 64,
        "passed through"
    );
    let endpoint = &one(&rendered, "ServiceMonitor")["spec"]["endpoints"][0];
    assert_eq!(
        endpoint["authorization"],
        json!({"type": "Bearer", "credentials": {"name": "scraper-token", "key": "token"}})
    );
    assert!(endpoint["bearerTokenFile"].is_null());

    // OpenShift: the service CA's certificate, asked for by the Service's annotation, and
    // its CA bundle injected into a ConfigMap for a Prometheus to trust.
    for case in ["openshift", "openshift-forced"] {
        let rendered = docs(case);
        let annotations = &one(&rendered, "Service")["metadata"]["annotations"];
        assert_eq!(
            annotations["service.beta.openshift.io/serving-cert-secret-name"], "fleetscaler-tls",
            "{case}"
        );
        let bundle = all(&rendered, "ConfigMap")
            .into_iter()
            .find(|c| c["metadata"]["name"] == "fleetscaler-service-ca")
            .unwrap_or_else(|| panic!("{case}: no CA bundle ConfigMap"));
        assert_eq!(
            bundle["metadata"]["annotations"]["service.beta.openshift.io/inject-cabundle"],
            "true"
        );
        assert!(
            all(&rendered, "Secret").is_empty(),
            "{case}: OpenShift writes it"
        );
        assert_secured(&rendered, &check_config(case, &rendered), "fleetscaler-tls");
    }
    assert!(
        !tls_secret(&docs("openshift-off"), "fleetscaler-tls")
            .0
            .is_empty()
    );

    // Your own Secret, mounted as it is; TLS without authentication: no reviews, no roles.
    let rendered = docs("tls-secret");
    let config = check_config("tls-secret", &rendered);
    assert_eq!(config["hub"]["serving"]["authentication"], "none");
    assert!(config["hub"]["serving"]["tls_cert_file"].is_string());
    for kind in ["Secret", "Certificate", "ClusterRole"] {
        assert!(all(&rendered, kind).is_empty(), "{kind}");
    }
    let volumes = pod_spec(&rendered)["volumes"].as_array().unwrap();
    assert!(
        volumes
            .iter()
            .any(|v| v["secret"]["secretName"] == "my-tls")
    );
    let endpoint = &one(&rendered, "ServiceMonitor")["spec"]["endpoints"][0];
    assert_eq!(endpoint["tlsConfig"], json!({"insecureSkipVerify": true}));
    assert!(
        endpoint["bearerTokenFile"].is_null(),
        "no token without authentication"
    );
}

/// The certificate the chart makes (sprig's RSA key and CA) is one the hub serves, and its
/// ca.crt verifies it for the Service's name, as the ServiceMonitor's tlsConfig asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_self_signed_certificate_is_served_and_its_ca_verifies_it() {
    let (cert, key, ca) = tls_secret(&docs("default"), "fleetscaler-tls");
    let dir = TempDir::new("helm-tls");
    let (cert_file, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert_file, cert).unwrap();
    std::fs::write(&key_file, key).unwrap();
    let hub = HubConfig {
        listen: "127.0.0.1:0".into(),
        serving: ServingConfig {
            tls_cert_file: Some(cert_file),
            tls_key_file: Some(key_file),
            probe_listen: "127.0.0.1:0".into(),
            ..ServingConfig::default()
        },
        ..HubConfig::default()
    };
    let (hub, endpoints, cancel) = serving::serve(hub).await;
    let roots: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(ca.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap();
    let trusted = trusting(&roots);
    let name = ServerName::try_from("fleetscaler.fleetscaler.svc").unwrap();
    let tcp = tokio::net::TcpStream::connect(endpoints.main)
        .await
        .unwrap();
    let tls = tokio_rustls::TlsConnector::from(trusted.clone())
        .connect(name, tcp)
        .await
        .expect("the chart's CA verifies the served certificate for the Service's name");
    let answer = exchange(tls, get_request("/metrics", None).as_bytes())
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    // And for 127.0.0.1 (a port-forward); a client trusting another CA is refused.
    assert_eq!(
        https_get(endpoints.main, &trusted, "/livez", None)
            .await
            .status,
        200
    );
    let stranger = TestCa::new().client_config();
    assert!(connect_tls(endpoints.main, &stranger).await.is_err());
    cancel.cancel();
    hub.stop().await;
}

/// The chart's ClusterRoles decide the fake management cluster's SubjectAccessReviews:
/// Prometheus, bound to the metrics reader, scrapes /metrics and reads nothing else; a
/// viewer reads the dashboard, the API and the metrics; an account bound to neither reads
/// nothing. The hub's own reviews are exactly what its auth-delegator ClusterRole grants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_cluster_roles_let_prometheus_and_viewers_in_and_the_hub_review() {
    let rendered = docs("cert-manager");
    let mut policy = Policy::default();
    for doc in &rendered {
        policy.add(doc.clone(), "the cert-manager render");
    }
    let hub_account = serving::account("system:serviceaccount:fleetscaler:fleetscaler").unwrap();
    let hub_grants = policy.grants(&hub_account);
    let review = ReviewApi::start(
        &[
            ("prom", "system:serviceaccount:monitoring:prometheus", &[]),
            ("status", "system:serviceaccount:platform:status", &[]),
            ("other", "system:serviceaccount:default:other", &[]),
        ],
        serving::decided_by(policy),
    )
    .await;
    let dir = TempDir::new("helm-rbac");
    let kubeconfig = dir.path().join("management.kubeconfig");
    review.write_kubeconfig(&kubeconfig, "management");
    let ca = TestCa::new();
    let (cert, key, _) = ca.write_server(dir.path(), "hub");
    let hub = HubConfig {
        listen: "127.0.0.1:0".into(),
        kubeconfigs: vec![kubeconfig],
        serving: secured(cert, key),
        ..HubConfig::default()
    };
    let (hub, endpoints, cancel) = serving::serve(hub).await;
    let tls = ca.client_config();
    let paths = ["/metrics", "/", "/dashboard/app.js", "/api/v1/fleet"];
    for (token, want) in [
        ("prom", [200, 403, 403, 403]),
        ("status", [200, 200, 200, 200]),
        ("other", [403, 403, 403, 403]),
    ] {
        for (path, want) in paths.iter().zip(want) {
            let got = https_get(endpoints.main, &tls, path, Some(token)).await;
            assert_eq!(got.status, want, "{token} {path}: {got:?}");
        }
    }
    cancel.cancel();
    hub.stop().await;

    let used = review.records();
    assert_eq!(used.len(), 2, "{used:?}");
    let denied = hub_grants.denied(&used);
    assert!(
        denied.is_empty(),
        "the chart's ClusterRole denies: {denied:?}"
    );
    let unused: Vec<String> = hub_grants
        .permissions(&used)
        .into_iter()
        .filter(|(name, hit)| !hit && !name.contains(" in "))
        .map(|(name, _)| name)
        .collect();
    assert!(
        unused.is_empty(),
        "cluster-wide grants the hub never used: {unused:?}"
    );
}
