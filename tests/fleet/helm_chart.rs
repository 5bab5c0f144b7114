//! The Helm chart (charts/fleetscaler), as real Helm renders it: scripts/helm-check.sh lints
//! it and renders the default values, the multi-cluster example and a few variants with
//! Helm v4's Go SDK (the PyPI package helm-python-sdk, installed into target/helm-venv), and
//! checks that bad values are refused. This test then reads the manifests: every object must
//! be a valid Kubernetes object of its kind (no unknown or misplaced field), the rendered
//! fleet.toml must pass `fleetscaler check-config`, and what matters is asserted: two
//! replicas with leader election, the locked-down pod, the read-only kubeconfig mount, the
//! ServiceMonitor only when asked for, a pod that OpenShift's restricted-v2 SCC admits when
//! the cluster is OpenShift, a Role that allows exactly the hub's Lease calls, and HTTPS
//! with Kubernetes authentication by default with the probes on a plain port (or plain and
//! open on one port). The certificate's sources and the ClusterRoles at work are
//! tests/fleet/chart_serving.rs's; the dashboard and the PrometheusRule are
//! tests/fleet/chart_observability.rs's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::chart_support;
use crate::e2e_support;
use crate::rbac_support;

use std::collections::BTreeSet;
use std::time::Duration;

use base64::Engine as _;
use chart_support::serving::assert_secured;
use chart_support::*;
use e2e_support::{Hub, TempDir, eventually};
use fleetscaler::config::FleetConfig;
use fleetscaler::config::hub::{HubConfig, LeaderElection};
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::Fleet;
use fleetscaler::sim::settings::{FleetSettings, Shape};
use rbac_support::{Account, Policy};
use serde_json::{Value, json};

#[test]
fn every_rendered_object_is_a_valid_kubernetes_object() {
    let mut problems = Vec::new();
    for case in CASES {
        for doc in docs(case) {
            problems.extend(
                check_object(&doc)
                    .into_iter()
                    .map(|p| format!("{case}: {p}")),
            );
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn default_values_run_two_replicas_with_leader_election_in_a_locked_down_pod() {
    let docs = docs("default");
    let deployment = one(&docs, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = pod_spec(&docs);
    let c = container(&docs);
    assert_eq!(
        c["args"],
        json!(["run", "--config", "/etc/fleetscaler/fleet.toml"])
    );
    let sc = &c["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    // The probes on their plain port: the main one is HTTPS behind authentication.
    assert_eq!(
        c["livenessProbe"]["httpGet"],
        json!({"path": "/livez", "port": "probes"})
    );
    assert_eq!(
        c["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "probes"})
    );
    assert_eq!(
        c["ports"],
        json!([{"name": "https", "containerPort": 8080, "protocol": "TCP"},
               {"name": "probes", "containerPort": 8081, "protocol": "TCP"}])
    );
    assert!(c["resources"]["requests"]["cpu"].is_string());
    assert!(c["resources"]["limits"]["memory"].is_string());
    // The identity in the Lease comes from the pod's name.
    let env = c["env"].as_array().unwrap();
    assert!(
        env.iter().any(|e| e["name"] == "POD_NAME"
            && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"),
        "{env:?}"
    );
    assert_eq!(pod["automountServiceAccountToken"], true);
    let anti =
        &pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(
        anti["podAffinityTerm"]["topologyKey"],
        "kubernetes.io/hostname"
    );
    let checksum = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        .as_str()
        .expect("a checksum of the config on the pod template");
    assert_eq!(checksum.len(), 64);

    let service = one(&docs, "Service");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "https", "port": 8080, "targetPort": "https", "protocol": "TCP"}])
    );
    assert_eq!(
        service["spec"]["selector"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(one(&docs, "PodDisruptionBudget")["spec"]["minAvailable"], 1);
    assert!(all(&docs, "NetworkPolicy").is_empty());

    let config = check_config("default", &docs);
    let le = &config["hub"]["leader_election"];
    assert_eq!(le["enabled"], true, "{config}");
    assert_eq!(le["namespace"], NAMESPACE);
    assert_eq!(le["context"], Value::Null, "in-cluster");
    assert_eq!(config["hub"]["listen"], "0.0.0.0:8080");
    let role = one(&docs, "Role");
    assert_eq!(role["rules"][0]["resourceNames"], json!([le["lease_name"]]));
    assert_secured(&docs, &config, "fleetscaler-tls");
}

#[test]
fn the_multi_cluster_example_mounts_every_kubeconfig_and_passes_check_config() {
    let docs = docs("multi-cluster");
    let config = check_config("multi-cluster", &docs);
    let clusters = config["clusters"].as_array().unwrap();
    let names: Vec<&str> = clusters
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["prod-east", "prod-west", "lab"]);
    let dry: Vec<bool> = clusters
        .iter()
        .map(|c| c["dryRun"].as_bool().unwrap())
        .collect();
    assert_eq!(dry, [false, false, true], "{config}");
    assert_eq!(config["hub"]["leader_election"]["enabled"], true);
    // Overrides reach the cluster's effective settings.
    let east = &clusters[0]["settings"]["max_nodes_total"];
    assert_eq!(east["value"], 120, "{east}");
    assert_eq!(east["source"], "clusterOverrides");

    // Every kubeconfig fleet.toml names is in the directory of the user's Secret, read-only.
    let Mounts { secret, .. } = mounts(&docs);
    let (secret, dir) = secret.expect("the kubeconfig Secret mounted");
    assert_eq!(secret, "fleet-kubeconfigs");
    let mut named: Vec<String> = config["hub"]["kubeconfigs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    named.extend(
        clusters
            .iter()
            .filter_map(|c| c["kubeconfig"].as_str().map(String::from)),
    );
    assert_eq!(named.len(), 3);
    for path in &named {
        assert!(
            path.starts_with(&format!("{dir}/")),
            "{path} is not under {dir}"
        );
    }
    let made: Vec<&Value> = all(&docs, "Secret")
        .into_iter()
        .filter(|s| s["metadata"]["name"] != "fleetscaler-tls")
        .collect();
    assert!(made.is_empty(), "an existing Secret is not made again");

    // Prometheus scrapes over HTTPS, checks the certificate against the chart's CA for the
    // Service's name, and sends its own service-account token.
    let monitor = one(&docs, "ServiceMonitor");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(endpoint["port"], "https");
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(
        endpoint["tlsConfig"],
        json!({"serverName": "fleetscaler.fleetscaler.svc",
               "ca": {"secret": {"name": "fleetscaler-tls", "key": "ca.crt"}}})
    );
    assert_eq!(
        endpoint["bearerTokenFile"],
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    );
    let policy = one(&docs, "NetworkPolicy");
    assert_eq!(
        policy["spec"]["policyTypes"],
        json!(["Ingress"]),
        "egress stays open"
    );
    assert_eq!(policy["spec"]["ingress"][0]["ports"][0]["port"], "https");
    // The kubelet reaches the probe port from the node, whatever ingressFrom says.
    assert_eq!(
        policy["spec"]["ingress"][1],
        json!({"ports": [{"port": "probes", "protocol": "TCP"}]})
    );
    assert_eq!(
        policy["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "monitoring"
    );
}

#[test]
fn the_toml_writer_carries_strings_and_numbers_exactly() {
    let docs = docs("toml-edge");
    let config = check_config("toml-edge", &docs);
    assert_eq!(
        config["clusters"][0]["context"],
        "a \"quoted\" \\ context\twith\nnewline, <ü> & #hash"
    );
    let settings = &config["clusters"][0]["settings"];
    assert_eq!(
        settings["pod_priority_threshold"]["value"], -10,
        "{settings}"
    );
    assert_eq!(settings["max_nodes_total"]["value"], 7);
    assert_eq!(settings["max_nodes_total"]["source"], "fleetDefaults");
    assert_eq!(settings["scale_down_utilization_threshold"]["value"], 0.65);
    assert_eq!(
        settings["balancing_ignored_labels"]["value"],
        json!(["topology.ebs.csi.aws.com/zone"])
    );
    assert_eq!(
        settings["priorities"]["value"],
        json!({"5": [".*\\.spot$"]}),
        "{settings}"
    );
}

#[test]
fn the_service_monitor_is_rendered_only_when_enabled() {
    let enabled = [
        "multi-cluster",
        "cert-manager",
        "tls-secret",
        "monitor-authorization",
        "upstream-own-names",
        "upstream-names",
        "upstream-both-names",
        "upstream-fills",
    ];
    for case in CASES.into_iter().filter(|c| !enabled.contains(c)) {
        assert!(all(&docs(case), "ServiceMonitor").is_empty(), "{case}");
    }
    let monitor = one(&docs("multi-cluster"), "ServiceMonitor").clone();
    assert_eq!(
        monitor["metadata"]["labels"]["release"], "kube-prometheus-stack",
        "the label kube-prometheus-stack's Prometheus selects by"
    );
}

#[test]
fn kubeconfigs_given_as_values_become_a_mounted_secret() {
    let docs = docs("kubeconfig-files");
    let secret = all(&docs, "Secret")
        .into_iter()
        .find(|s| s["metadata"]["name"] == "fleetscaler-kubeconfigs")
        .expect("the kubeconfig Secret");
    let data = secret["data"]["prod-east.yaml"].as_str().unwrap();
    let text = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    assert!(
        String::from_utf8(text)
            .unwrap()
            .contains("server: \"https://api.example.com:6443\"")
    );
    let config = check_config("kubeconfig-files", &docs);
    let file = "/etc/fleetscaler/kubeconfigs/prod-east.yaml";
    assert_eq!(config["hub"]["kubeconfigs"], json!([file]));
    assert!(mounts(&docs).files.contains(file), "{file} is not mounted");
    let annotations = &one(&docs, "Deployment")["spec"]["template"]["metadata"]["annotations"];
    assert!(
        annotations["checksum/kubeconfigs"].is_string(),
        "{annotations}"
    );
}

#[test]
fn config_toml_is_used_verbatim_with_leader_election_from_the_environment() {
    let docs = docs("config-toml");
    assert_eq!(fleet_toml(&docs), "[[clusters]]\nname = \"prod-east\"\n");
    let config = check_config("config-toml", &docs);
    assert_eq!(
        config["hub"]["leader_election"]["enabled"], true,
        "{config}"
    );
    assert_eq!(config["hub"]["leader_election"]["namespace"], NAMESPACE);
    assert_eq!(config["hub"]["listen"], "0.0.0.0:8080");
    assert_secured(&docs, &config, "fleetscaler-tls");
    let (secret, dir) = mounts(&docs).secret.expect("the kubeconfig Secret mounted");
    assert_eq!(
        (secret.as_str(), dir.as_str()),
        ("mine", "/etc/fleetscaler/kubeconfigs")
    );
}

/// One replica, plain and open: no leader election and no reviews, so no role, no token,
/// no budget, no certificate, and the probes on the one port, as the chart served before.
#[test]
fn one_plain_replica_gets_no_role_no_token_no_budget_and_one_port() {
    let docs = docs("single");
    assert_eq!(one(&docs, "Deployment")["spec"]["replicas"], 1);
    assert_eq!(pod_spec(&docs)["automountServiceAccountToken"], false);
    let kinds = [
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "PodDisruptionBudget",
        "Secret",
    ];
    for kind in kinds {
        assert!(all(&docs, kind).is_empty(), "{kind}");
    }
    let config = check_config("single", &docs);
    assert_eq!(config["hub"]["leader_election"]["enabled"], false);
    let serving = &config["hub"]["serving"];
    assert_eq!(serving["authentication"], "none", "{config}");
    assert_eq!(serving["tls_cert_file"], Value::Null);
    let c = container(&docs);
    assert_eq!(
        c["ports"],
        json!([{"name": "http", "containerPort": 8080, "protocol": "TCP"}])
    );
    assert_eq!(c["livenessProbe"]["httpGet"]["port"], "http");
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], "http");
    let policy = one(&docs, "NetworkPolicy");
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(
        policy["spec"]["ingress"].as_array().unwrap().len(),
        1,
        "one port"
    );
    let egress = policy["spec"]["egress"].as_array().unwrap();
    assert_eq!(egress[0]["ports"][0]["port"], 53, "DNS");
    assert_eq!(egress[1]["to"][0]["ipBlock"]["cidr"], "10.0.0.1/32");
}

/// On OpenShift (found by the API it serves, or forced by `openshift.enabled`) the pod fixes
/// no UID, GID or fsGroup, which restricted-v2 assigns from the namespace's range, and keeps
/// the rest of the lock-down; elsewhere (or forced off) it runs as the image's 65532, which
/// restricted-v2 refuses.
#[test]
fn on_openshift_the_pod_leaves_its_ids_to_restricted_v2() {
    for case in ["openshift", "openshift-forced"] {
        let docs = docs(case);
        let refused = scc::restricted_v2(pod_spec(&docs), scc::NAMESPACE_RANGE);
        assert!(
            refused.is_empty(),
            "{case}: restricted-v2 refuses {refused:?}"
        );
        let pod = &pod_spec(&docs)["securityContext"];
        let c = &container(&docs)["securityContext"];
        for key in ["runAsUser", "runAsGroup", "fsGroup", "supplementalGroups"] {
            assert!(pod[key].is_null(), "{case}: pod {key}: {pod}");
            assert!(c[key].is_null(), "{case}: container {key}: {c}");
        }
        for sc in [pod, c] {
            assert_eq!(sc["runAsNonRoot"], true, "{case}");
            assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault", "{case}");
        }
        assert_eq!(c["allowPrivilegeEscalation"], false, "{case}");
        assert_eq!(c["capabilities"]["drop"], json!(["ALL"]), "{case}");
        assert_eq!(c["readOnlyRootFilesystem"], true, "{case}");
    }
    for case in ["default", "openshift-off"] {
        let docs = docs(case);
        let pod = &pod_spec(&docs)["securityContext"];
        for key in ["runAsUser", "runAsGroup", "fsGroup"] {
            assert_eq!(pod[key], 65532, "{case}: {key}");
        }
        let refused = scc::restricted_v2(pod_spec(&docs), scc::NAMESPACE_RANGE);
        assert_eq!(
            refused,
            [
                format!("pod: runAsUser 65532 outside {:?}", scc::NAMESPACE_RANGE),
                format!("pod: fsGroup 65532 outside {:?}", scc::NAMESPACE_RANGE),
            ],
            "{case}"
        );
    }
}

/// The chart's Role against the hub's real Lease calls: a hub with leader election on a
/// simulated management cluster takes the Lease and releases it on stop, every request
/// recorded; the rendered Role and RoleBinding must allow each one, and grant nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_role_allows_exactly_the_hubs_lease_calls() {
    let docs = docs("default");
    // The namespaced Role: the ClusterRoles are for serving, checked below.
    let mut policy = Policy::default();
    for doc in docs.iter().filter(|d| d["kind"] != "ClusterRoleBinding") {
        policy.add(doc.clone(), "the default render");
    }
    let account = one(&docs, "ServiceAccount");
    let grants = policy.grants(&Account {
        namespace: NAMESPACE.into(),
        name: account["metadata"]["name"].as_str().unwrap().into(),
    });
    let rendered = check_config("default", &docs);
    let lease_name = rendered["hub"]["leader_election"]["lease_name"]
        .as_str()
        .unwrap()
        .to_string();

    let fleet = Fleet::start(FleetSettings {
        shape: Shape {
            nodes_per_group: 1,
            pods_per_node: 0,
            workloads: false,
            ..Shape::default()
        },
        ..FleetSettings::default()
    })
    .await
    .unwrap();
    let management = &fleet.clusters()[0];
    management
        .state()
        .create(
            Resource::Namespaces,
            "",
            json!({"metadata": {"name": NAMESPACE}}),
        )
        .unwrap();
    management.cluster.requests.enable();
    let dir = TempDir::new("helm-lease");
    let kubeconfig = dir.path().join("management.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    // The rendered election, reached through a context instead of in-cluster, and no
    // managed cluster: the only requests are the election's.
    let config = FleetConfig {
        hub: HubConfig {
            listen: "127.0.0.1:0".into(),
            kubeconfigs: vec![kubeconfig],
            leader_election: LeaderElection {
                enabled: true,
                context: Some(management.name().to_string()),
                namespace: NAMESPACE.into(),
                lease_name: lease_name.clone(),
                lease_duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_millis(200),
                ..LeaderElection::default()
            },
            ..HubConfig::default()
        },
        ..FleetConfig::default()
    };
    let hub = Hub::start(config).await;
    let view = hub.view();
    eventually(Duration::from_secs(20), "the hub leading", || {
        let leading = view.hub().leading;
        async move { leading.then_some(()) }
    })
    .await;
    // A renewal (the Lease's renewTime moves), then a clean stop that releases the Lease.
    let renew_time = || {
        management
            .get(Resource::Leases, NAMESPACE, &lease_name)
            .map(|l| l["spec"]["renewTime"].clone())
    };
    let first = renew_time();
    eventually(Duration::from_secs(5), "a renewal", || {
        let now = renew_time();
        let first = first.clone();
        async move { (now.is_some() && now != first).then_some(()) }
    })
    .await;
    hub.stop().await;
    let used = management.cluster.requests.records();
    fleet.shutdown().await;

    grants.assert_exactly(&used, "the chart's Role");
    let verbs: BTreeSet<&str> = used.iter().map(|r| r.verb.as_str()).collect();
    assert_eq!(
        verbs,
        BTreeSet::from(["create", "get", "update"]),
        "{used:?}"
    );
}
