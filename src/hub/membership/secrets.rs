//! A Secret as a cluster: one carrying the membership label and a whole kubeconfig (key
//! `kubeconfig`, or Cluster API's `value`), or Argo CD's cluster Secret (`name`, `server` and
//! `config`, the JSON of Argo CD's `ClusterConfig`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::config::ExecConfig;
use serde::Deserialize;

use super::annotations::{self, AnnotationError};
use super::kubeconfig::{
    self, Credential, Endpoint, KubeconfigError, MAX_KUBECONFIG_BYTES, NotBase64,
};
use crate::config::ClusterConfig;
use crate::config::membership::{Discovered, ExecPlugin, InlineKubeconfig, SecretsSource};

/// Argo CD's label of its cluster Secrets, and its value.
pub(super) const ARGOCD_LABEL: &str = "argocd.argoproj.io/secret-type";
pub(super) const ARGOCD_CLUSTER: &str = "cluster";

/// Why a Secret gives no cluster. Argo CD's `data.config` is named by place only: its
/// values may be credentials.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(
        "holds no kubeconfig: a `kubeconfig` or `value` key with a whole kubeconfig, or Argo CD's `server` and `config`"
    )]
    NoKubeconfig,
    #[error("data.{key} takes {bytes} bytes, more than the {max} KiB allowed", max = MAX_KUBECONFIG_BYTES / 1024)]
    TooLarge { key: &'static str, bytes: usize },
    #[error("data.{key} is not UTF-8 text")]
    NotUtf8 { key: &'static str },
    /// The kubeconfig in `data.<key>` (`kubeconfig`, `value`, or Argo CD's `config`).
    #[error("data.{key} {source}")]
    Kubeconfig {
        key: &'static str,
        #[source]
        source: KubeconfigError,
    },
    #[error("has Argo CD's data.config but no data.server")]
    NoServer,
    #[error("data.config is not Argo CD's cluster config at {path} (line {line}, column {column})")]
    ArgoConfig {
        path: String,
        line: usize,
        column: usize,
    },
    #[error(transparent)]
    NotBase64(#[from] NotBase64),
    #[error(
        "data.config has a client certificate without its key, or a key without its certificate"
    )]
    HalfClientCertificate,
    #[error(
        "data.config names a credential plugin (execProviderConfig), which the hub runs from a Secret only with membership.secrets.allow_exec"
    )]
    ExecNotAllowed,
    #[error("data.config.execProviderConfig has no command")]
    ExecWithoutCommand,
    #[error(
        "data.config uses awsAuthConfig (Argo CD's EKS authentication), which the hub does not run: give a bearerToken, a client certificate or an execProviderConfig"
    )]
    AwsAuth,
    #[error(transparent)]
    Annotation(#[from] AnnotationError),
}

/// `Secret <namespace>/<name>`, as problems and the API name it.
pub(super) fn object(secret: &Secret) -> String {
    let ns = secret.metadata.namespace.as_deref().unwrap_or_default();
    let name = secret.metadata.name.as_deref().unwrap_or_default();
    format!("Secret {ns}/{name}")
}

/// The cluster `secret` describes.
pub(super) fn read(secret: &Secret, source: &SecretsSource) -> Result<ClusterConfig, SecretError> {
    let name = cluster_name(secret, source)?;
    let whole = |key: &'static str, text: &str| {
        kubeconfig::from_whole(&name, text, source.allow_exec)
            .map_err(|e| SecretError::Kubeconfig { key, source: e })
    };
    let kubeconfig = if let Some(text) = text_of(secret, "kubeconfig")? {
        whole("kubeconfig", &text)?
    } else if let Some(text) = text_of(secret, "value")? {
        whole("value", &text)?
    } else if let Some(config) = text_of(secret, "config")? {
        argocd(&name, secret, &config, source.allow_exec)?
    } else {
        return Err(SecretError::NoKubeconfig);
    };
    let found = Discovered {
        source: object(secret),
        kubeconfig,
    };
    Ok(annotations::cluster(
        &name,
        secret.metadata.annotations.as_ref(),
        found,
    )?)
}

/// The label's value; else, for Argo CD's Secret, its `name`; else the Secret's own name.
fn cluster_name(secret: &Secret, source: &SecretsSource) -> Result<String, SecretError> {
    let labels = secret.metadata.labels.as_ref();
    if let Some(value) = labels.and_then(|l| l.get(&source.label))
        && !value.is_empty()
    {
        return Ok(value.clone());
    }
    let argocd = labels.and_then(|l| l.get(ARGOCD_LABEL)).map(String::as_str);
    if argocd == Some(ARGOCD_CLUSTER)
        && let Some(name) = text_of(secret, "name")?
    {
        return Ok(name.trim().to_string());
    }
    Ok(secret.metadata.name.clone().unwrap_or_default())
}

/// A key of the Secret's data as text, bounded.
fn text_of(secret: &Secret, key: &'static str) -> Result<Option<String>, SecretError> {
    let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(key)) else {
        return Ok(None);
    };
    if bytes.0.len() > MAX_KUBECONFIG_BYTES {
        return Err(SecretError::TooLarge {
            key,
            bytes: bytes.0.len(),
        });
    }
    String::from_utf8(bytes.0.clone())
        .map(Some)
        .map_err(|_| SecretError::NotUtf8 { key })
}

/// Argo CD's `ClusterConfig` (pkg/apis/application/v1alpha1), the part the hub reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ArgoConfig {
    username: Option<String>,
    password: Option<String>,
    bearer_token: Option<String>,
    tls_client_config: ArgoTls,
    exec_provider_config: Option<ArgoExec>,
    aws_auth_config: Option<serde_json::Value>,
    proxy_url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ArgoTls {
    insecure: bool,
    server_name: Option<String>,
    /// base64 PEM (a Go `[]byte`).
    ca_data: Option<String>,
    cert_data: Option<String>,
    key_data: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ArgoExec {
    command: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    api_version: Option<String>,
}

fn argocd(
    name: &str,
    secret: &Secret,
    config: &str,
    allow_exec: bool,
) -> Result<InlineKubeconfig, SecretError> {
    let server = text_of(secret, "server")?.ok_or(SecretError::NoServer)?;
    let mut de = serde_json::Deserializer::from_str(config);
    // The parser's own message may quote a value, which may be a credential: the place only.
    let argo: ArgoConfig =
        serde_path_to_error::deserialize(&mut de).map_err(|e| SecretError::ArgoConfig {
            path: e.path().to_string(),
            line: e.inner().line(),
            column: e.inner().column(),
        })?;
    let tls = &argo.tls_client_config;
    let endpoint = Endpoint {
        server: server.trim().to_string(),
        ca: decoded(tls.ca_data.as_deref(), "tlsClientConfig.caData")?,
        insecure: tls.insecure,
        tls_server_name: tls.server_name.clone().filter(|s| !s.is_empty()),
        proxy_url: argo.proxy_url.clone().filter(|s| !s.is_empty()),
        exec_extension: None,
    };
    let client_cert = match (
        decoded(tls.cert_data.as_deref(), "tlsClientConfig.certData")?,
        decoded(tls.key_data.as_deref(), "tlsClientConfig.keyData")?,
    ) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => return Err(SecretError::HalfClientCertificate),
    };
    let exec = match argo.exec_provider_config {
        Some(_) if !allow_exec => {
            return Err(SecretError::ExecNotAllowed);
        }
        Some(e) => Some(argo_exec(e)?),
        None => None,
    };
    let basic = match (argo.username.filter(|u| !u.is_empty()), argo.password) {
        (Some(u), Some(p)) => Some((u, p)),
        _ => None,
    };
    let credential = Credential {
        token: argo.bearer_token.filter(|t| !t.is_empty()),
        client_cert,
        basic,
        exec,
    };
    let nothing = credential.token.is_none()
        && credential.client_cert.is_none()
        && credential.basic.is_none()
        && credential.exec.is_none();
    if nothing && argo.aws_auth_config.is_some() {
        return Err(SecretError::AwsAuth);
    }
    kubeconfig::build(name, endpoint, credential).map_err(|source| SecretError::Kubeconfig {
        key: "config",
        source,
    })
}

fn argo_exec(e: ArgoExec) -> Result<ExecConfig, SecretError> {
    if e.command.trim().is_empty() {
        return Err(SecretError::ExecWithoutCommand);
    }
    let plugin = ExecPlugin {
        command: e.command,
        args: e.args,
        env: e.env,
        api_version: e
            .api_version
            .unwrap_or_else(|| ExecPlugin::default().api_version),
        provide_cluster_info: false,
    };
    Ok(kubeconfig::exec_of(&plugin))
}

fn decoded(text: Option<&str>, what: &str) -> Result<Option<Vec<u8>>, NotBase64> {
    match text.filter(|t| !t.is_empty()) {
        Some(t) => kubeconfig::decode_base64(t, format!("data.config.{what}")).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::membership::kubeconfig::{parse, token_of};
    use k8s_openapi::ByteString;
    use serde_json::json;

    const WHOLE: &str = "apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters:\n- name: a\n  cluster: {server: \"https://api.west:6443\"}\nusers:\n- name: a\n  user: {token: west-token}\ncontexts:\n- name: a\n  context: {cluster: a, user: a}\n";

    fn secret(name: &str, labels: serde_json::Value, data: &[(&str, &str)]) -> Secret {
        let data: BTreeMap<String, ByteString> = data
            .iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
            .collect();
        let mut s: Secret = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "fleet", "labels": labels}
        }))
        .unwrap();
        s.data = Some(data);
        s
    }

    fn source() -> SecretsSource {
        SecretsSource::default()
    }

    #[test]
    fn a_labelled_secret_is_named_by_its_label_or_its_own_name() {
        let labelled = secret(
            "s1",
            json!({"fleetscaler.io/cluster": "west"}),
            &[("kubeconfig", WHOLE)],
        );
        let c = read(&labelled, &source()).unwrap();
        assert_eq!(c.name, "west");
        assert_eq!(c.source(), "Secret fleet/s1");
        let found = c.discovered.unwrap();
        assert_eq!(token_of(&found.kubeconfig).as_deref(), Some("west-token"));
        let bare = secret(
            "west-2",
            json!({"fleetscaler.io/cluster": ""}),
            &[("value", WHOLE)],
        );
        assert_eq!(read(&bare, &source()).unwrap().name, "west-2");
    }

    #[test]
    fn argo_cd_secrets_are_read() {
        let config = json!({
            "bearerToken": "argo-token",
            "tlsClientConfig": {"insecure": false, "serverName": "api", "caData": "UEVN",
                "certData": "Q0VSVA==", "keyData": "S0VZ"},
        });
        let s = secret(
            "cluster-api.east-123",
            json!({"argocd.argoproj.io/secret-type": "cluster"}),
            &[
                ("name", "east"),
                ("server", "https://api.east:6443"),
                ("config", &config.to_string()),
            ],
        );
        let c = read(&s, &source()).unwrap();
        assert_eq!(c.name, "east");
        let k = c.discovered.unwrap().kubeconfig;
        assert_eq!(token_of(&k).as_deref(), Some("argo-token"));
        let parsed = parse(&k);
        let cluster = parsed.clusters[0].cluster.clone().unwrap();
        assert_eq!(cluster.tls_server_name.as_deref(), Some("api"));
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("UEVN"));
        let user = parsed.auth_infos[0].auth_info.clone().unwrap();
        assert_eq!(user.client_certificate_data.as_deref(), Some("Q0VSVA=="));
    }

    #[test]
    fn each_malformed_secret_is_named() {
        let argo = json!({"argocd.argoproj.io/secret-type": "cluster"});
        let exec = json!({"execProviderConfig": {"command": "argocd-k8s-auth", "args": ["aws"]}})
            .to_string();
        let aws = json!({"awsAuthConfig": {"clusterName": "x"}}).to_string();
        let no_key =
            json!({"bearerToken": "t", "tlsClientConfig": {"certData": "Q0VSVA=="}}).to_string();
        for (s, want) in [
            (
                secret("a", json!({"fleetscaler.io/cluster": ""}), &[]),
                "holds no kubeconfig",
            ),
            (
                secret(
                    "a",
                    json!({"fleetscaler.io/cluster": ""}),
                    &[("kubeconfig", "clusters: [")],
                ),
                "data.kubeconfig cannot be read",
            ),
            (
                secret(
                    "a",
                    json!({"fleetscaler.io/cluster": "bad name"}),
                    &[("kubeconfig", WHOLE)],
                ),
                "cluster name \"bad name\"",
            ),
            (
                secret("a", argo.clone(), &[("name", "e"), ("config", "{}")]),
                "no data.server",
            ),
            (
                secret(
                    "a",
                    argo.clone(),
                    &[
                        ("name", "e"),
                        ("server", "https://e"),
                        ("config", "{\"bearerToken\": 3}"),
                    ],
                ),
                "at bearerToken",
            ),
            (
                secret(
                    "a",
                    argo.clone(),
                    &[("name", "e"), ("server", "https://e"), ("config", "{}")],
                ),
                "no credentials",
            ),
            (
                secret(
                    "a",
                    argo.clone(),
                    &[("name", "e"), ("server", "https://e"), ("config", &exec)],
                ),
                "allow_exec",
            ),
            (
                secret(
                    "a",
                    argo.clone(),
                    &[("name", "e"), ("server", "https://e"), ("config", &aws)],
                ),
                "awsAuthConfig",
            ),
            (
                secret(
                    "a",
                    argo.clone(),
                    &[("name", "e"), ("server", "https://e"), ("config", &no_key)],
                ),
                "without its key",
            ),
            (
                secret(
                    "a",
                    argo.clone(),
                    &[
                        ("name", "e"),
                        ("server", "https://e"),
                        (
                            "config",
                            "{\"bearerToken\": \"t\", \"tlsClientConfig\": {\"caData\": \"%%\"}}",
                        ),
                    ],
                ),
                "caData is not base64",
            ),
        ] {
            let err = read(&s, &source()).unwrap_err().to_string();
            assert!(err.contains(want), "{want}: {err}");
        }
        let secret_token = json!({"bearerToken": {"nested": "hunter2"}}).to_string();
        let s = secret(
            "a",
            argo.clone(),
            &[
                ("name", "e"),
                ("server", "https://e"),
                ("config", &secret_token),
            ],
        );
        let err = read(&s, &source()).unwrap_err().to_string();
        assert!(!err.contains("hunter2"), "values are never quoted: {err}");
        let allowed = SecretsSource {
            allow_exec: true,
            ..source()
        };
        let s = secret(
            "a",
            argo,
            &[("name", "e"), ("server", "https://e"), ("config", &exec)],
        );
        assert!(read(&s, &allowed).is_ok());
    }

    #[test]
    fn what_is_read_is_bounded() {
        let huge = "x".repeat(MAX_KUBECONFIG_BYTES + 1);
        let s = secret(
            "a",
            json!({"fleetscaler.io/cluster": ""}),
            &[("kubeconfig", &huge)],
        );
        let err = read(&s, &source()).unwrap_err().to_string();
        assert!(err.contains("data.kubeconfig takes"), "{err}");
        let mut s = secret("a", json!({"fleetscaler.io/cluster": ""}), &[]);
        s.data = Some([("kubeconfig".to_string(), ByteString(vec![0xff, 0xfe]))].into());
        assert!(
            read(&s, &source())
                .unwrap_err()
                .to_string()
                .contains("not UTF-8")
        );
    }
}
