//! An Open Cluster Management (or ACM) ManagedCluster (`cluster.open-cluster-management.io/v1`)
//! as a cluster: the API server from `spec.managedClusterClientConfigs[]` (`url`,
//! `caBundle`), the credentials from the ManagedServiceAccount
//! (`authentication.open-cluster-management.io/v1beta1`) of the configured name in the
//! cluster's namespace: the Secret its `status.tokenSecretRef` names holds `token` and
//! `ca.crt`.

use k8s_openapi::api::core::v1::Secret;
use kube::api::DynamicObject;
use serde::Deserialize;

use super::annotations::{self, AnnotationError};
use super::kubeconfig::{
    self, Credential, Endpoint, KubeconfigError, MAX_KUBECONFIG_BYTES, NotBase64,
};
use crate::cluster::error::CallError;
use crate::config::ClusterConfig;
use crate::config::membership::Discovered;

pub(super) const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";
pub(super) const CLUSTER_VERSION: &str = "v1";
pub(super) const CLUSTER_KIND: &str = "ManagedCluster";
pub(super) const CLUSTER_PLURAL: &str = "managedclusters";
pub(super) const MSA_GROUP: &str = "authentication.open-cluster-management.io";
pub(super) const MSA_VERSION: &str = "v1beta1";
pub(super) const MSA_KIND: &str = "ManagedServiceAccount";
pub(super) const MSA_PLURAL: &str = "managedserviceaccounts";

/// Client configs looked at per cluster.
const MAX_CLIENT_CONFIGS: usize = 16;

/// Why a ManagedCluster's token Secret cannot be had: its ManagedServiceAccount
/// (`account` in `namespace`) or the Secret it names.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("has no {MSA_KIND} {namespace}/{account}")]
    NoAccount { namespace: String, account: String },
    #[error("{MSA_KIND} {namespace}/{account}: status.{}: {}", .source.path(), .source.inner())]
    AccountStatus {
        namespace: String,
        account: String,
        #[source]
        source: serde_path_to_error::Error<serde_json::Error>,
    },
    #[error("{MSA_KIND} {namespace}/{account} has no status.tokenSecretRef yet")]
    NotYet { namespace: String, account: String },
    #[error(
        "Secret {namespace}/{name}, which {MSA_KIND} {namespace}/{account} names, is not there"
    )]
    NoSecret {
        namespace: String,
        name: String,
        account: String,
    },
    #[error(transparent)]
    Get(#[from] CallError),
}

/// Why a ManagedCluster gives no cluster.
#[derive(Debug, thiserror::Error)]
pub enum ManagedError {
    #[error("spec.{}: {}", .0.path(), .0.inner())]
    Spec(#[source] serde_path_to_error::Error<serde_json::Error>),
    #[error("has no spec.managedClusterClientConfigs[].url")]
    NoUrl,
    #[error(transparent)]
    Token(#[from] TokenError),
    /// `secret` is `Secret <namespace>/<name>`.
    #[error("{secret}: {key} takes {bytes} bytes, more than the {max} KiB allowed", max = MAX_KUBECONFIG_BYTES / 1024)]
    TooLarge {
        secret: String,
        key: &'static str,
        bytes: usize,
    },
    #[error("{secret} has no token")]
    NoToken { secret: String },
    #[error("{secret}: token is not text")]
    TokenNotText { secret: String },
    #[error(transparent)]
    NotBase64(#[from] NotBase64),
    /// The kubeconfig built from the client config at `index`.
    #[error("spec.managedClusterClientConfigs[{index}]: {source}")]
    Kubeconfig {
        index: usize,
        #[source]
        source: KubeconfigError,
    },
    #[error(transparent)]
    Annotation(#[from] AnnotationError),
}

/// `ManagedCluster <name>` (cluster-scoped).
pub(super) fn object(cluster: &DynamicObject) -> String {
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    format!("{CLUSTER_KIND} {name}")
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Spec {
    managed_cluster_client_configs: Vec<ClientConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ClientConfig {
    url: String,
    /// base64 PEM (a Go `[]byte`).
    ca_bundle: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct MsaStatus {
    token_secret_ref: Option<SecretRef>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SecretRef {
    name: String,
}

/// The name of the token Secret that `msa` (the ManagedServiceAccount `service_account` in
/// `namespace`, if there is one) points to.
pub(super) fn token_secret_name(
    msa: Option<&DynamicObject>,
    namespace: &str,
    service_account: &str,
) -> Result<String, TokenError> {
    let namespace = namespace.to_string();
    let account = service_account.to_string();
    let Some(msa) = msa else {
        return Err(TokenError::NoAccount { namespace, account });
    };
    let status = match msa.data.get("status") {
        Some(s) => serde_path_to_error::deserialize::<_, MsaStatus>(s).map_err(|source| {
            TokenError::AccountStatus {
                namespace: namespace.clone(),
                account: account.clone(),
                source,
            }
        })?,
        None => MsaStatus::default(),
    };
    match status.token_secret_ref {
        Some(r) if !r.name.is_empty() => Ok(r.name),
        _ => Err(TokenError::NotYet { namespace, account }),
    }
}

/// The cluster `cluster` describes, with `token`: its ManagedServiceAccount's token Secret,
/// or why there is none.
pub(super) fn read(
    cluster: &DynamicObject,
    token: Result<&Secret, TokenError>,
) -> Result<ClusterConfig, ManagedError> {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let spec = match cluster.data.get("spec") {
        Some(s) => serde_path_to_error::deserialize::<_, Spec>(s).map_err(ManagedError::Spec)?,
        None => Spec::default(),
    };
    let Some((i, config)) = spec
        .managed_cluster_client_configs
        .iter()
        .take(MAX_CLIENT_CONFIGS)
        .enumerate()
        .find(|(_, c)| !c.url.is_empty())
    else {
        return Err(ManagedError::NoUrl);
    };
    let secret = token?;
    let secret_name = format!(
        "Secret {}/{}",
        secret.metadata.namespace.as_deref().unwrap_or_default(),
        secret.metadata.name.as_deref().unwrap_or_default()
    );
    let data = |key: &'static str| -> Result<Option<Vec<u8>>, ManagedError> {
        match secret.data.as_ref().and_then(|d| d.get(key)) {
            Some(b) if b.0.len() > MAX_KUBECONFIG_BYTES => Err(ManagedError::TooLarge {
                secret: secret_name.clone(),
                key,
                bytes: b.0.len(),
            }),
            Some(b) if !b.0.is_empty() => Ok(Some(b.0.clone())),
            _ => Ok(None),
        }
    };
    let token = data("token")?.ok_or_else(|| ManagedError::NoToken {
        secret: secret_name.clone(),
    })?;
    let token = String::from_utf8(token).map_err(|_| ManagedError::TokenNotText {
        secret: secret_name.clone(),
    })?;
    let ca = match config.ca_bundle.as_deref().filter(|b| !b.is_empty()) {
        Some(bundle) => Some(kubeconfig::decode_base64(
            bundle,
            format!("spec.managedClusterClientConfigs[{i}].caBundle"),
        )?),
        None => data("ca.crt")?,
    };
    let endpoint = Endpoint {
        server: config.url.clone(),
        ca,
        ..Endpoint::default()
    };
    let credential = Credential {
        token: Some(token),
        ..Credential::default()
    };
    let kubeconfig = kubeconfig::build(&name, endpoint, credential)
        .map_err(|source| ManagedError::Kubeconfig { index: i, source })?;
    let found = Discovered {
        source: object(cluster),
        kubeconfig,
    };
    Ok(annotations::cluster(
        &name,
        cluster.metadata.annotations.as_ref(),
        found,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::membership::kubeconfig::{parse, token_of};
    use k8s_openapi::ByteString;
    use serde_json::json;

    fn cluster(spec: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": {"name": "east", "annotations": {"fleetscaler.io/dry-run": "true"}},
            "spec": spec,
        }))
        .unwrap()
    }

    fn msa(status: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "authentication.open-cluster-management.io/v1beta1",
            "kind": "ManagedServiceAccount",
            "metadata": {"name": "fleetscaler", "namespace": "east"},
            "spec": {"rotation": {}}, "status": status,
        }))
        .unwrap()
    }

    fn token(data: &[(&str, &[u8])]) -> Secret {
        let mut s: Secret = serde_json::from_value(
            json!({"metadata": {"name": "fleetscaler", "namespace": "east"}}),
        )
        .unwrap();
        s.data = Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                .collect(),
        );
        s
    }

    fn spec() -> serde_json::Value {
        json!({"hubAcceptsClient": true, "managedClusterClientConfigs": [
            {"url": ""}, {"url": "https://api.east:6443", "caBundle": "UEVN"}]})
    }

    #[test]
    fn a_managed_cluster_is_reached_with_its_service_accounts_token() {
        let ok = msa(
            json!({"tokenSecretRef": {"name": "fleetscaler", "lastRefreshTimestamp": "2025-01-01T00:00:00Z"}}),
        );
        assert_eq!(
            token_secret_name(Some(&ok), "east", "fleetscaler").unwrap(),
            "fleetscaler"
        );
        let secret = token(&[("token", b"east-token"), ("ca.crt", b"SECRET-CA")]);
        let c = read(&cluster(spec()), Ok(&secret)).unwrap();
        assert_eq!(
            (c.name.as_str(), c.source()),
            ("east", "ManagedCluster east")
        );
        assert_eq!(c.dry_run, Some(true));
        let k = c.discovered.unwrap().kubeconfig;
        assert_eq!(token_of(&k).as_deref(), Some("east-token"));
        let cluster_entry = parse(&k).clusters[0].cluster.clone().unwrap();
        assert_eq!(
            cluster_entry.server.as_deref(),
            Some("https://api.east:6443")
        );
        assert_eq!(
            cluster_entry.certificate_authority_data.as_deref(),
            Some("UEVN"),
            "the ManagedCluster's caBundle wins over the Secret's ca.crt"
        );
        let no_bundle =
            cluster(json!({"managedClusterClientConfigs": [{"url": "https://api.east:6443"}]}));
        let c = read(&no_bundle, Ok(&secret)).unwrap();
        let ca = parse(&c.discovered.unwrap().kubeconfig).clusters[0]
            .cluster
            .clone()
            .unwrap()
            .certificate_authority_data;
        use base64::Engine as _;
        let want = base64::engine::general_purpose::STANDARD.encode("SECRET-CA");
        assert_eq!(ca.as_deref(), Some(want.as_str()));
    }

    #[test]
    fn each_missing_piece_is_named() {
        assert!(
            token_secret_name(None, "east", "fleetscaler")
                .unwrap_err()
                .to_string()
                .contains("has no ManagedServiceAccount east/fleetscaler")
        );
        let pending = msa(json!({}));
        assert!(
            token_secret_name(Some(&pending), "east", "fleetscaler")
                .unwrap_err()
                .to_string()
                .contains("no status.tokenSecretRef yet")
        );
        let broken = msa(json!({"tokenSecretRef": "x"}));
        assert!(
            token_secret_name(Some(&broken), "east", "fleetscaler")
                .unwrap_err()
                .to_string()
                .contains("status.tokenSecretRef")
        );
        let secret = token(&[("token", b"t")]);
        for (c, token, want) in [
            (
                cluster(json!({})),
                Ok(&secret),
                "no spec.managedClusterClientConfigs[].url",
            ),
            (
                cluster(spec()),
                Err(TokenError::Get(CallError::Api {
                    op: "get Secret east/fleetscaler".into(),
                    source: kube::Error::Api(Box::new(
                        kube::core::Status::failure(
                            "secrets \"fleetscaler\" not found",
                            "NotFound",
                        )
                        .with_code(404),
                    )),
                })),
                "not found",
            ),
            (
                cluster(json!({"managedClusterClientConfigs": [{"url": "api.east"}]})),
                Ok(&secret),
                "[0]: server",
            ),
            (
                cluster(json!({"managedClusterClientConfigs": "x"})),
                Ok(&secret),
                "spec.managedClusterClientConfigs",
            ),
        ] {
            let err = read(&c, token).unwrap_err().to_string();
            assert!(err.contains(want), "{want}: {err}");
        }
        let empty = token(&[("ca.crt", b"x")]);
        assert!(
            read(&cluster(spec()), Ok(&empty))
                .unwrap_err()
                .to_string()
                .contains("Secret east/fleetscaler has no token")
        );
        let huge = token(&[("token", &vec![b'a'; MAX_KUBECONFIG_BYTES + 1])]);
        assert!(
            read(&cluster(spec()), Ok(&huge))
                .unwrap_err()
                .to_string()
                .contains("KiB")
        );
    }
}
