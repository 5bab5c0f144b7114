//! The hub's serving against a real management control plane (scripts/real-cluster.sh): the
//! hub's real binary with `[hub.serving]` on HTTPS and Kubernetes authentication, reviewing
//! real service-account tokens (TokenReview) and real RBAC (SubjectAccessReview) with the
//! Helm chart's own ClusterRoles, as its own service account bound by the chart's binding.
//! What the fake management API of tests/fleet/hub_serving.rs assumes, the real one is held to.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;
use crate::serving_support;

use std::path::Path;
use std::process::Command;

use real_support::*;
use serde_json::Value;
use serving_support::{TestCa, http_get, https_get};

/// The hub's identity, as the chart names it (release `fleetscaler` in `fleetscaler`).
const HUB_SA: &str = "system:serviceaccount:fleetscaler:fleetscaler";

/// A ClusterRoleBinding of `role` to the service account `namespace/name`.
fn binding(role: &str, namespace: &str, name: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n\
         metadata: {{name: {role}-{namespace}-{name}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}\n\
         subjects: [{{kind: ServiceAccount, name: {name}, namespace: {namespace}}}]\n"
    )
}

/// A short-lived token of the service account `namespace/name`.
fn token(cp: &ControlPlane, namespace: &str, name: &str) -> String {
    cp.kubectl(&["create", "token", name, "-n", namespace, "--duration", "1h"])
        .trim()
        .to_string()
}

/// A kubeconfig reaching `cp` as the hub's service account, context `management`.
fn hub_kubeconfig(cp: &ControlPlane, path: &Path) {
    let view =
        |path: &str| cp.kubectl(&["config", "view", "--raw", "-o", &format!("jsonpath={path}")]);
    let server = view("{.clusters[0].cluster.server}");
    let ca = view("{.clusters[0].cluster.certificate-authority-data}");
    let token = token(cp, "fleetscaler", "fleetscaler");
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: management\n  cluster:\n    \
             server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: hub\n  \
             user:\n    token: {token}\ncontexts:\n- name: management\n  \
             context: {{cluster: management, user: hub}}\ncurrent-context: management\n"
        ),
    )
    .unwrap();
}

/// The chart's ClusterRoles and the hub's ClusterRoleBinding, as real Helm renders them
/// with the default values (scripts/helm-check.sh), applied.
fn apply_chart_rbac(cp: &ControlPlane, dir: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dir.join("helm");
    let run = Command::new("bash")
        .arg(root.join("scripts/helm-check.sh"))
        .arg(&out)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "scripts/helm-check.sh: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(out.join("default.yaml")).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let rbac: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "ClusterRoleBinding")
        .collect();
    assert_eq!(rbac.len(), 4, "three ClusterRoles and the hub's binding");
    for doc in rbac {
        cp.apply(&doc.to_string());
    }
}

#[test]
fn a_real_management_cluster_reviews_the_hubs_clients_with_the_charts_roles() {
    let cps = up(&["mgmt"], &["--no-machines"]);
    let mgmt = &cps[0];
    for ns in ["fleetscaler", "monitoring", "platform"] {
        mgmt.kubectl(&["create", "namespace", ns]);
    }
    for (ns, sa) in [
        ("fleetscaler", "fleetscaler"),
        ("monitoring", "prometheus"),
        ("platform", "alice"),
        ("default", "nobody"),
    ] {
        mgmt.kubectl(&["create", "serviceaccount", sa, "-n", ns]);
    }
    let dir = TempDir::new("real-serving");
    apply_chart_rbac(mgmt, dir.path());
    mgmt.apply(&binding(
        "fleetscaler-metrics-reader",
        "monitoring",
        "prometheus",
    ));
    mgmt.apply(&binding("fleetscaler-viewer", "platform", "alice"));

    let kubeconfig = dir.path().join("management.kubeconfig");
    hub_kubeconfig(mgmt, &kubeconfig);
    let ca = TestCa::new();
    let (cert, key, _) = ca.write_server(dir.path(), "hub");
    let probes = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let toml = format!(
        "[hub]\nkubeconfigs = [{kubeconfig:?}]\n[hub.serving]\ntls_cert_file = {cert:?}\n\
         tls_key_file = {key:?}\nauthentication = \"kubernetes\"\ncontext = \"management\"\n\
         probe_listen = \"{probes}\"\n"
    );
    let hub = HubProcess::start(dir.path(), "serving", &toml);
    let main = hub.addr.parse().unwrap();

    let tokens = [
        ("prometheus", token(mgmt, "monitoring", "prometheus")),
        ("alice", token(mgmt, "platform", "alice")),
        ("nobody", token(mgmt, "default", "nobody")),
    ];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tls = ca.client_config();
    let status =
        |path: &str, token: Option<&str>| rt.block_on(https_get(main, &tls, path, token)).status;
    assert_eq!(status("/metrics", None), 401);
    assert_eq!(status("/metrics", Some("not-a-token")), 401);
    // nobody is authenticated and bound to nothing, so the built-in system:discovery grants
    // them get on /api/*: the hub must not ask RBAC about its API by those paths.
    let paths = ["/metrics", "/", "/dashboard/app.js", "/api/v1/fleet"];
    for ((who, token), want) in tokens.iter().zip([
        [200, 403, 403, 403],
        [200, 200, 200, 200],
        [403, 403, 403, 403],
    ]) {
        for (path, want) in paths.iter().zip(want) {
            assert_eq!(status(path, Some(token)), want, "{who} {path}");
        }
    }
    let fleet = rt.block_on(https_get(main, &tls, "/api/v1/fleet", Some(&tokens[1].1)));
    assert!(fleet.json()["hub"].is_object(), "{fleet:?}");
    assert_eq!(
        rt.block_on(http_get(main, "/metrics")).status,
        400,
        "plain HTTP refused"
    );
    assert_eq!(
        rt.block_on(http_get(probes, "/livez")).status,
        200,
        "open probes"
    );

    // The hub asked as its own service account, with only what the chart grants it.
    let hub_calls: Vec<Value> = audit(mgmt)
        .into_iter()
        .filter(|e| e["user"]["username"] == HUB_SA)
        .collect();
    let resources: std::collections::BTreeSet<(String, String)> = hub_calls
        .iter()
        .map(|e| {
            let o = &e["objectRef"];
            (
                e["verb"].as_str().unwrap_or_default().to_string(),
                o["resource"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        resources,
        [
            ("create", "subjectaccessreviews"),
            ("create", "tokenreviews")
        ]
        .map(|(v, r)| (v.to_string(), r.to_string()))
        .into(),
        "{hub_calls:?}"
    );
    let refused: Vec<&Value> = hub_calls
        .iter()
        .filter(|e| e["responseStatus"]["code"] != 201)
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
    drop(hub);
}
