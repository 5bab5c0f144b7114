//! Kube clients built from kubeconfig contexts reach a simulated cluster over HTTPS (rustls)
//! with a bearer token and with an `exec` credential plugin, as kubectl would.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support;

use std::time::Duration;

use e2e_support::{TempDir, quiet_fleet};
use fleetscaler::cluster::{client, kubeconfig};
use fleetscaler::sim::settings::Flavor;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::config::{AuthInfo, ExecConfig, Kubeconfig};

async fn node_count(kubeconfig: Kubeconfig, context: &str) -> usize {
    let kube = client::connect(kubeconfig, context, Duration::from_secs(5))
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(kube);
    nodes.list(&Default::default()).await.unwrap().items.len()
}

#[tokio::test]
async fn token_and_exec_credentials_both_reach_the_cluster() {
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let dir = TempDir::new("client");
    let path = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&path).unwrap();
    let kubeconfig = kubeconfig::load_kubeconfig(None, std::slice::from_ref(&path)).unwrap();
    assert_eq!(node_count(kubeconfig.clone(), "sim-2").await, 6);

    // The same user through an exec plugin that prints the token, as cloud CLIs do.
    let token = fleet.clusters()[0].token().to_string();
    let script = dir.path().join("credential.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\"}}}}'\n"
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let mut exec = kubeconfig;
    let user = exec
        .contexts
        .iter()
        .find(|c| c.name == "sim-1")
        .and_then(|c| c.context.as_ref())
        .map(|c| c.user.clone())
        .unwrap();
    let named = exec
        .auth_infos
        .iter_mut()
        .find(|a| Some(&a.name) == user.as_ref())
        .unwrap();
    named.auth_info = Some(AuthInfo {
        exec: Some(ExecConfig {
            api_version: Some("client.authentication.k8s.io/v1".into()),
            command: Some(script.display().to_string()),
            ..ExecConfig::default()
        }),
        ..AuthInfo::default()
    });
    assert_eq!(node_count(exec, "sim-1").await, 6);
    fleet.shutdown().await;
}

#[tokio::test]
async fn a_wrong_context_or_a_refused_token_is_an_error_naming_it() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let dir = TempDir::new("client-bad");
    let path = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&path).unwrap();
    let kubeconfig = kubeconfig::load_kubeconfig(Some(&path), &[]).unwrap();
    let Err(e) = client::connect(kubeconfig.clone(), "prod-east", Duration::from_secs(1)).await
    else {
        panic!("an unknown context must fail");
    };
    assert!(e.to_string().contains("prod-east"), "{e}");

    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace(fleet.clusters()[0].token(), "wrong");
    let kube = client::connect(
        Kubeconfig::from_yaml(&text).unwrap(),
        "sim-1",
        Duration::from_secs(2),
    )
    .await
    .unwrap();
    let nodes: Api<Node> = Api::all(kube);
    let err = nodes.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 401),
        "{err}"
    );
    fleet.shutdown().await;
}

/// Seed of issue 12: a certificate failure read "client error (Connect)", like a refused
/// connection, and was retried as if it would pass.
#[tokio::test]
async fn an_untrusted_certificate_is_named_and_not_taken_for_an_outage() {
    use fleetscaler::cluster::error::{Category, call};
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let dir = TempDir::new("client-tls");
    let path = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&path).unwrap();
    let mut kubeconfig = kubeconfig::load_kubeconfig(Some(&path), &[]).unwrap();
    // sim-1 presented with sim-2's CA: its certificate is not trusted.
    let ca_of = |kc: &Kubeconfig, name: &str| {
        kc.clusters
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.cluster.as_ref())
            .and_then(|c| c.certificate_authority_data.clone())
            .unwrap()
    };
    let other = ca_of(&kubeconfig, "sim-2");
    for c in kubeconfig.clusters.iter_mut().filter(|c| c.name == "sim-1") {
        c.cluster.as_mut().unwrap().certificate_authority_data = Some(other.clone());
    }
    let kube = client::connect(kubeconfig, "sim-1", Duration::from_secs(2))
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(kube);
    let err = call(
        || "list nodes".into(),
        Duration::from_secs(5),
        nodes.list(&Default::default()),
    )
    .await
    .unwrap_err();
    assert_eq!(err.category(), Category::Tls, "{err}");
    let text = err.to_string();
    assert!(text.contains("certificate"), "{text}");
    fleet.shutdown().await;
}

/// The hub holds one HTTP/2 connection per cluster for all its watches and calls, as
/// client-go does: HTTP/1.1 would need one per open watch (some thirty per cluster), which
/// at a thousand clusters is past a process's file limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clusters_watches_and_calls_share_one_http2_connection() {
    use e2e_support::{Hub, fast_settings, fleet_config, running_report};
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let dir = TempDir::new("client-http2");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    let view = hub.view();
    let report = running_report(&view, "sim-1").await;
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let counts = fleet.clusters()[0].cluster.connections.counts();
    assert_eq!(counts.http1, 0, "{counts:?}");
    assert_eq!(counts.open, 1, "{counts:?}");
    hub.stop().await;
    fleet.shutdown().await;
}
