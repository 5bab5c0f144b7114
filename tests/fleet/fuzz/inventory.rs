//! Fuzz target of the management cluster's inventory (declared in tests/fleet/fuzz/mod.rs): Secrets
//! (a whole kubeconfig, Argo CD's config), ClusterProfiles and ManagedClusters, their
//! text mutated and their annotations hostile, read as the hub reads them. Never a panic,
//! bounded, an error that names what is wrong, and a credential never quoted in an error
//! nor shown by a cluster's `Debug`.

use std::collections::BTreeMap;

use fleetscaler::config::membership::{ClusterProfilesSource, ExecPlugin, SecretsSource};
use fleetscaler::hub::membership::{read_cluster_profile, read_managed_cluster, read_secret};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::DynamicObject;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};

use crate::fuzz_support::mutate::{self, Edit};
use crate::fuzz_support::{self, Reach, bounded, excerpt};

/// The credential every input carries: it must never come out.
const TOKEN: &str = "fuzz-secret-token";

const KUBECONFIG: &str = "apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster:
    server: https://api.east:6443
    certificate-authority-data: UEVN
users:
- name: a
  user:
    token: fuzz-secret-token
contexts:
- name: a
  context:
    cluster: a
    user: a
";

const ARGO: &str = r#"{
  "bearerToken": "fuzz-secret-token",
  "tlsClientConfig": {
    "insecure": false,
    "serverName": "api",
    "caData": "UEVN"
  }
}
"#;

const PROFILE_STATUS: &str = "accessProviders:
- name: ocm
  cluster:
    server: https://api.east:6443
    certificate-authority-data: UEVN
    extensions:
    - name: client.authentication.k8s.io/exec
      extension:
        clusterName: east
";

const MANAGED_SPEC: &str = "hubAcceptsClient: true
managedClusterClientConfigs:
- url: https://api.east:6443
  caBundle: UEVN
";

const OVERRIDES: &str = "max_nodes_total = 7
scale_down_unneeded_time = \"5m\"
cores = { min = 1, max = 8 }
";

/// Which object a case reads.
#[derive(Clone, Copy, Debug)]
enum Shape {
    Kubeconfig,
    ClusterApiValue,
    ArgoCd,
    Profile,
    Managed,
}

#[derive(Debug)]
struct Case {
    shape: Shape,
    edits: Vec<Edit>,
    override_edits: Vec<Edit>,
    name: String,
    flag: String,
}

fn case(values: usize, lines: usize) -> impl Strategy<Value = Case> {
    let shape = select(vec![
        Shape::Kubeconfig,
        Shape::ClusterApiValue,
        Shape::ArgoCd,
        Shape::Profile,
        Shape::Managed,
    ]);
    let edits = prop::collection::vec(mutate::edit(values, lines, false), 0..4);
    let override_edits = prop::collection::vec(mutate::edit(values, lines, false), 0..3);
    // Mostly what reads, so that most cases reach the code behind the names and flags.
    let name = prop_oneof![
        8 => Just("east".to_string()),
        1 => select(vec![String::new(), "a b".into(), "-x".into(), "é".into(), "x".repeat(300), "a/b".into()]),
    ];
    let flag = prop_oneof![
        8 => select(vec!["true".to_string(), "false".into()]),
        1 => select(vec!["maybe".to_string(), String::new(), "x".repeat(10_000)]),
    ];
    (shape, edits, override_edits, name, flag).prop_map(
        |(shape, edits, override_edits, name, flag)| Case {
            shape,
            edits,
            override_edits,
            name,
            flag,
        },
    )
}

fn annotations(overrides: &[u8], flag: &str) -> BTreeMap<String, String> {
    [
        (
            "fleetscaler.io/overrides",
            String::from_utf8_lossy(overrides).into_owned(),
        ),
        ("fleetscaler.io/dry-run", flag.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn secret(
    name: &str,
    labels: Value,
    data: &[(&str, &[u8])],
    annotations: BTreeMap<String, String>,
) -> Secret {
    let mut s: Secret = serde_json::from_value(json!({"metadata": {
        "name": "s", "namespace": "fleet", "labels": labels}}))
    .unwrap();
    let _ = name;
    s.metadata.annotations = Some(annotations);
    s.data = Some(
        data.iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
            .collect(),
    );
    s
}

/// A custom resource with `field` parsed from `text` (left out if it does not read).
fn object(
    kind: &str,
    field: &str,
    text: &[u8],
    name: &str,
    annotations: BTreeMap<String, String>,
) -> DynamicObject {
    let parsed: Option<Value> = std::str::from_utf8(text)
        .ok()
        .and_then(|t| serde_saphyr::from_str::<Value>(t).ok());
    let mut o = json!({"apiVersion": "x/v1", "kind": kind,
        "metadata": {"name": name, "namespace": "fleet", "annotations": annotations}});
    if let Some(v) = parsed {
        o[field] = v;
    }
    serde_json::from_value(o).unwrap_or_else(|_| {
        serde_json::from_value(
            json!({"apiVersion": "x/v1", "kind": kind, "metadata": {"name": name}}),
        )
        .unwrap()
    })
}

/// Reads the case's object; `Ok(true)` when it gave a cluster, `Ok(false)` when it was
/// refused as it should be.
fn read(case: Case, values: &[String], lines: &[String]) -> Result<bool, String> {
    let seed = match case.shape {
        Shape::Kubeconfig | Shape::ClusterApiValue => KUBECONFIG,
        Shape::ArgoCd => ARGO,
        Shape::Profile => PROFILE_STATUS,
        Shape::Managed => MANAGED_SPEC,
    };
    let text = mutate::apply(seed, &case.edits, values, lines);
    let overrides = mutate::apply(OVERRIDES, &case.override_edits, values, lines);
    let notes = annotations(&overrides, &case.flag);
    let label = json!({"fleetscaler.io/cluster": case.name});
    // A token copied out of its field (into a server, a name) may be quoted as that field's
    // value: the check holds for tokens left where credentials go.
    let in_place =
        String::from_utf8_lossy(&text).matches(TOKEN).count() == seed.matches(TOKEN).count();
    let shape = case.shape;
    let name = case.name.clone();
    let result = bounded(move || match shape {
        Shape::Kubeconfig => read_secret(
            &secret(&name, label, &[("kubeconfig", &text)], notes),
            &SecretsSource::default(),
        ),
        Shape::ClusterApiValue => read_secret(
            &secret(&name, label, &[("value", &text)], notes),
            &SecretsSource::default(),
        ),
        Shape::ArgoCd => {
            let labels = json!({"argocd.argoproj.io/secret-type": "cluster"});
            let data: [(&str, &[u8]); 3] = [
                ("name", name.as_bytes()),
                ("server", b"https://api.east:6443"),
                ("config", &text),
            ];
            read_secret(
                &secret(&name, labels, &data, notes),
                &SecretsSource::default(),
            )
        }
        Shape::Profile => {
            let source = ClusterProfilesSource {
                enabled: true,
                providers: [(
                    "ocm".to_string(),
                    ExecPlugin {
                        command: "cp-creds".into(),
                        ..ExecPlugin::default()
                    },
                )]
                .into(),
            };
            read_cluster_profile(
                &object("ClusterProfile", "status", &text, "east", notes),
                &source,
            )
        }
        Shape::Managed => {
            let token = secret(
                &name,
                json!({}),
                &[("token", TOKEN.as_bytes()), ("ca.crt", b"PEM")],
                BTreeMap::new(),
            );
            read_managed_cluster(
                &object("ManagedCluster", "spec", &text, "east", notes),
                Ok(&token),
            )
        }
    })?
    .map_err(|e| e.to_string());
    match result {
        Err(e) if e.trim().is_empty() => Err("an error that says nothing".into()),
        Err(e) if in_place && e.contains(TOKEN) => {
            Err(format!("an error quotes the token: {}", excerpt(&e, 300)))
        }
        Err(_) => Ok(false),
        Ok(cluster) => {
            let shown = format!("{cluster:?}");
            if shown.contains(TOKEN) {
                return Err(format!(
                    "a cluster's Debug shows the token: {}",
                    excerpt(&shown, 300)
                ));
            }
            let found = cluster
                .discovered
                .ok_or("a found cluster without its kubeconfig")?;
            fleetscaler::cluster::client::inline_kubeconfig(&found)
                .map(|_| true)
                .map_err(|e| format!("its kubeconfig does not read back: {e}"))
        }
    }
}

#[test]
fn inventory_objects_never_panic_nor_quote_credentials() {
    let values = mutate::hostile_yaml_values();
    let lines = mutate::hostile_yaml_lines();
    let strategy = case(values.len(), lines.len());
    let name = "inventory_objects_never_panic_nor_quote_credentials";
    let reach = Reach::default();
    fuzz_support::run(name, 256, strategy, |c| {
        read(c, &values, &lines).map(|read| reach.count(read))
    });
    reach.require(name, 10);
}
