//! The kubeconfig of a cluster found in the inventory, built in memory: one cluster, one
//! user and one context, all named after the cluster.
//!
//! What the inventory holds is written by whoever may write there, so a kubeconfig read from
//! it may not point at the hub's own files (a `tokenFile` of the hub's service account sent
//! to a server of the writer's choice, a CA or key file) and runs no credential plugin unless
//! allowed (it would be a command of the writer's choice, run by the hub).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kube::config::{
    AuthInfo, Cluster, Context, ExecConfig, ExecInteractiveMode, Kubeconfig, NamedAuthInfo,
    NamedCluster, NamedContext, NamedExtension,
};
use secrecy::SecretString;

use crate::config::membership::{ExecPlugin, InlineKubeconfig};

/// The most a kubeconfig read or built may take: a few certificates and a token are a few
/// KiB, and a thousand clusters' kubeconfigs stay within a few tens of MiB.
pub(super) const MAX_KUBECONFIG_BYTES: usize = 64 * 1024;
/// The exec extension a ClusterProfile's access provider may carry for its plugin.
pub(super) const EXEC_EXTENSION: &str = "client.authentication.k8s.io/exec";

/// Why a kubeconfig cannot be built or taken from the inventory. Each message reads on from
/// the place it came from (`data.kubeconfig holds no credentials`), which the callers know
/// and prefix.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("a client certificate needs both the certificate and its key")]
    HalfClientCertificate,
    #[error(
        "holds no credentials (a token, a client certificate, a user and password, or a credential plugin)"
    )]
    NoCredentials,
    #[error("cannot be read as a kubeconfig (YAML or JSON)")]
    Unreadable,
    #[error("context's cluster {0:?} is not in it")]
    NoCluster(String),
    #[error("context's user {0:?} is not in it")]
    NoUser(String),
    #[error("current-context {0:?} is not in it")]
    NoCurrentContext(String),
    #[error("has no current-context and {0} contexts: set current-context")]
    ManyContexts(usize),
    #[error("context {0:?} is empty")]
    EmptyContext(String),
    #[error(
        "names a file ({0}): a kubeconfig from the inventory must carry its data (the *-data keys, token)"
    )]
    NamesFile(&'static str),
    #[error("uses an auth-provider, which the hub does not run")]
    AuthProvider,
    #[error(
        "names a credential plugin (exec), which the hub runs from a Secret only with membership.secrets.allow_exec"
    )]
    ExecNotAllowed,
    #[error("its kubeconfig cannot be written")]
    Unwritable,
    #[error("its kubeconfig takes {0} bytes, more than the {max} KiB allowed", max = MAX_KUBECONFIG_BYTES / 1024)]
    TooLarge(usize),
    /// At most 200 characters of the server.
    #[error("server {0:?} is not an https:// (or http://) URL")]
    BadServer(String),
    #[error("its token is empty")]
    EmptyToken,
    #[error("its token holds a character no HTTP header can carry")]
    TokenNotHeader,
}

/// Data that should be base64 and is not; `what` names its field.
#[derive(Debug, thiserror::Error)]
#[error("{what} is not base64")]
pub struct NotBase64 {
    pub what: String,
}

/// Where a cluster's API server is, and how its certificate is checked.
#[derive(Debug, Default)]
pub(super) struct Endpoint {
    pub server: String,
    /// PEM.
    pub ca: Option<Vec<u8>>,
    pub insecure: bool,
    pub tls_server_name: Option<String>,
    pub proxy_url: Option<String>,
    /// Handed to a credential plugin that asks for the cluster's information.
    pub exec_extension: Option<serde_json::Value>,
}

/// Who the hub is there; at least one of them.
#[derive(Default)]
pub(super) struct Credential {
    pub token: Option<String>,
    /// PEM certificate and key.
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
    pub basic: Option<(String, String)>,
    pub exec: Option<ExecConfig>,
}

/// A kubeconfig for `name` from an endpoint and a credential.
pub(super) fn build(
    name: &str,
    endpoint: Endpoint,
    credential: Credential,
) -> Result<InlineKubeconfig, KubeconfigError> {
    check_server(&endpoint.server)?;
    let cluster = Cluster {
        server: Some(endpoint.server),
        insecure_skip_tls_verify: endpoint.insecure.then_some(true),
        certificate_authority_data: endpoint.ca.map(|pem| STANDARD.encode(pem)),
        proxy_url: endpoint.proxy_url,
        tls_server_name: endpoint.tls_server_name,
        extensions: endpoint.exec_extension.map(|extension| {
            vec![NamedExtension {
                name: EXEC_EXTENSION.into(),
                extension,
            }]
        }),
        ..Cluster::default()
    };
    single(name, cluster, user_of(credential)?)
}

fn user_of(credential: Credential) -> Result<AuthInfo, KubeconfigError> {
    let mut user = AuthInfo::default();
    if let Some(token) = credential.token {
        let token = token.trim();
        check_token(token)?;
        user.token = Some(SecretString::from(token.to_string()));
    }
    if let Some((cert, key)) = credential.client_cert {
        if cert.is_empty() || key.is_empty() {
            return Err(KubeconfigError::HalfClientCertificate);
        }
        user.client_certificate_data = Some(STANDARD.encode(cert));
        user.client_key_data = Some(SecretString::from(STANDARD.encode(key)));
    }
    if let Some((username, password)) = credential.basic {
        user.username = Some(username);
        user.password = Some(SecretString::from(password));
    }
    user.exec = credential.exec;
    let any = user.token.is_some()
        || user.client_key_data.is_some()
        || user.password.is_some()
        || user.exec.is_some();
    if !any {
        return Err(KubeconfigError::NoCredentials);
    }
    Ok(user)
}

/// The kubeconfig of a credential plugin configured in fleet.toml.
pub(super) fn exec_of(plugin: &ExecPlugin) -> ExecConfig {
    let env = plugin
        .env
        .iter()
        .map(|(name, value)| {
            [("name", name), ("value", value)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect()
        })
        .collect::<Vec<_>>();
    ExecConfig {
        api_version: Some(plugin.api_version.clone()),
        command: Some(plugin.command.clone()),
        args: (!plugin.args.is_empty()).then(|| plugin.args.clone()),
        env: (!env.is_empty()).then_some(env),
        drop_env: None,
        install_hint: None,
        interactive_mode: Some(ExecInteractiveMode::Never),
        provide_cluster_info: plugin.provide_cluster_info,
        cluster: None,
        other: Default::default(),
    }
}

/// A whole kubeconfig as a Secret holds it (`kubeconfig`, or Cluster API's `value`): its
/// current context (or its only one), kept alone under `name`.
pub(super) fn from_whole(
    name: &str,
    text: &str,
    allow_exec: bool,
) -> Result<InlineKubeconfig, KubeconfigError> {
    if text.len() > MAX_KUBECONFIG_BYTES {
        return Err(KubeconfigError::TooLarge(text.len()));
    }
    // The parser's message may quote the text, which holds credentials: only the fact.
    let whole = Kubeconfig::from_yaml(text).map_err(|_| KubeconfigError::Unreadable)?;
    let context = chosen_context(&whole)?;
    let cluster = whole
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| KubeconfigError::NoCluster(context.cluster.clone()))?;
    let user_name = context.user.clone().unwrap_or_default();
    let user = whole
        .auth_infos
        .iter()
        .find(|u| u.name == user_name)
        .and_then(|u| u.auth_info.clone())
        .ok_or_else(|| KubeconfigError::NoUser(user_name.clone()))?;
    refuse_what_is_not_its_own(&cluster, &user, allow_exec)?;
    if let Some(server) = &cluster.server {
        check_server(server)?;
    }
    let mut user = user;
    if let Some(exec) = user.exec.as_mut() {
        exec.interactive_mode = Some(ExecInteractiveMode::Never);
    }
    single(name, cluster, user)
}

fn chosen_context(whole: &Kubeconfig) -> Result<Context, KubeconfigError> {
    let named = match &whole.current_context {
        Some(current) => whole
            .contexts
            .iter()
            .find(|c| &c.name == current)
            .ok_or_else(|| KubeconfigError::NoCurrentContext(current.clone()))?,
        None => match whole.contexts.as_slice() {
            [only] => only,
            many => {
                return Err(KubeconfigError::ManyContexts(many.len()));
            }
        },
    };
    named
        .context
        .clone()
        .ok_or_else(|| KubeconfigError::EmptyContext(named.name.clone()))
}

/// Files of the hub's own and commands: what a kubeconfig from the inventory may not name.
fn refuse_what_is_not_its_own(
    cluster: &Cluster,
    user: &AuthInfo,
    allow_exec: bool,
) -> Result<(), KubeconfigError> {
    let files = [
        (
            "certificate-authority",
            cluster.certificate_authority.is_some(),
        ),
        ("tokenFile", user.token_file.is_some()),
        ("client-certificate", user.client_certificate.is_some()),
        ("client-key", user.client_key.is_some()),
    ];
    if let Some((key, _)) = files.iter().find(|(_, named)| *named) {
        return Err(KubeconfigError::NamesFile(key));
    }
    if user.auth_provider.is_some() {
        return Err(KubeconfigError::AuthProvider);
    }
    if user.exec.is_some() && !allow_exec {
        return Err(KubeconfigError::ExecNotAllowed);
    }
    Ok(())
}

fn single(
    name: &str,
    cluster: Cluster,
    user: AuthInfo,
) -> Result<InlineKubeconfig, KubeconfigError> {
    let kubeconfig = Kubeconfig {
        clusters: vec![NamedCluster {
            name: name.to_string(),
            cluster: Some(cluster),
            ..NamedCluster::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.to_string(),
            auth_info: Some(user),
            ..NamedAuthInfo::default()
        }],
        contexts: vec![NamedContext {
            name: name.to_string(),
            context: Some(Context {
                cluster: name.to_string(),
                user: Some(name.to_string()),
                ..Context::default()
            }),
            ..NamedContext::default()
        }],
        current_context: Some(name.to_string()),
        kind: Some("Config".into()),
        api_version: Some("v1".into()),
        ..Kubeconfig::default()
    };
    let text = serde_json::to_string(&kubeconfig).map_err(|_| KubeconfigError::Unwritable)?;
    if text.len() > MAX_KUBECONFIG_BYTES {
        return Err(KubeconfigError::TooLarge(text.len()));
    }
    Ok(InlineKubeconfig::new(text))
}

/// An http(s) URL with a host, as kube's client needs it (it would panic on less).
fn check_server(server: &str) -> Result<(), KubeconfigError> {
    let ok = server
        .parse::<http::Uri>()
        .ok()
        .is_some_and(|u| matches!(u.scheme_str(), Some("https" | "http")) && u.host().is_some());
    if ok {
        Ok(())
    } else {
        Err(KubeconfigError::BadServer(
            server.chars().take(200).collect(),
        ))
    }
}

fn check_token(token: &str) -> Result<(), KubeconfigError> {
    if token.is_empty() {
        return Err(KubeconfigError::EmptyToken);
    }
    // What kube's client stack would otherwise take on trust and fail on later.
    if http::HeaderValue::from_str(&format!("Bearer {token}")).is_err() {
        return Err(KubeconfigError::TokenNotHeader);
    }
    Ok(())
}

/// PEM from base64 (a Go `[]byte` in JSON, a kubeconfig's `*-data`), named `what` in errors.
pub(super) fn decode_base64(text: &str, what: impl Into<String>) -> Result<Vec<u8>, NotBase64> {
    STANDARD
        .decode(text.trim())
        .map_err(|_| NotBase64 { what: what.into() })
}

/// The token of a kubeconfig built here, for tests.
#[cfg(test)]
pub(super) fn token_of(k: &InlineKubeconfig) -> Option<String> {
    let parsed: Kubeconfig = serde_json::from_str(k.text()).ok()?;
    let user = parsed.auth_infos.first()?.auth_info.clone()?;
    use secrecy::ExposeSecret;
    user.token.map(|t| t.expose_secret().to_string())
}

#[cfg(test)]
pub(super) fn parse(k: &InlineKubeconfig) -> Kubeconfig {
    serde_json::from_str(k.text()).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> Endpoint {
        Endpoint {
            server: "https://api.east:6443".into(),
            ca: Some(b"-----BEGIN CERTIFICATE-----\n".to_vec()),
            ..Endpoint::default()
        }
    }

    fn token(t: &str) -> Credential {
        Credential {
            token: Some(t.into()),
            ..Credential::default()
        }
    }

    #[test]
    fn a_built_kubeconfig_has_one_context_named_after_the_cluster() {
        let k = build("east", endpoint(), token("abc\n")).unwrap();
        let parsed = parse(&k);
        assert_eq!(parsed.current_context.as_deref(), Some("east"));
        assert_eq!(parsed.contexts.len(), 1);
        let cluster = parsed.clusters[0].cluster.clone().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://api.east:6443"));
        assert_eq!(
            STANDARD
                .decode(cluster.certificate_authority_data.unwrap())
                .unwrap(),
            b"-----BEGIN CERTIFICATE-----\n"
        );
        assert_eq!(token_of(&k).as_deref(), Some("abc"), "trimmed");
        assert!(!format!("{k:?}").contains("abc"));
    }

    #[test]
    fn bad_servers_tokens_and_no_credentials_are_named() {
        let mut e = endpoint();
        e.server = "api.east:6443".into();
        assert!(
            build("e", e, token("t"))
                .unwrap_err()
                .to_string()
                .contains("server")
        );
        assert!(
            build("e", endpoint(), token(" "))
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        let err = build("e", endpoint(), token("a\u{7f}b"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("HTTP header"), "{err}");
        let none = build("e", endpoint(), Credential::default())
            .unwrap_err()
            .to_string();
        assert!(none.contains("no credentials"), "{none}");
        let half = Credential {
            client_cert: Some((b"cert".to_vec(), Vec::new())),
            ..Credential::default()
        };
        assert!(
            build("e", endpoint(), half)
                .unwrap_err()
                .to_string()
                .contains("key")
        );
    }

    #[test]
    fn a_plugin_runs_without_a_terminal() {
        let plugin = ExecPlugin {
            command: "/bin/cp-creds".into(),
            args: vec!["--a".into()],
            env: [("K".to_string(), "V".to_string())].into(),
            ..ExecPlugin::default()
        };
        let exec = exec_of(&plugin);
        let credential = Credential {
            exec: Some(exec),
            ..Credential::default()
        };
        let mut e = endpoint();
        e.exec_extension = Some(serde_json::json!({"audience": "x"}));
        let k = build("p", e, credential).unwrap();
        let parsed = parse(&k);
        let exec = parsed.auth_infos[0]
            .auth_info
            .clone()
            .unwrap()
            .exec
            .unwrap();
        assert_eq!(exec.command.as_deref(), Some("/bin/cp-creds"));
        assert_eq!(exec.interactive_mode, Some(ExecInteractiveMode::Never));
        assert_eq!(exec.env.unwrap()[0]["value"], "V");
        let ext = parsed.clusters[0]
            .cluster
            .clone()
            .unwrap()
            .extensions
            .unwrap();
        assert_eq!(ext[0].name, EXEC_EXTENSION);
    }

    const WHOLE: &str = r#"
apiVersion: v1
kind: Config
current-context: admin
clusters:
- name: c
  cluster: {server: "https://api.west:6443", certificate-authority-data: "UEVN"}
- name: other
  cluster: {server: "https://elsewhere:6443"}
users:
- name: u
  user: {token: "west-token"}
contexts:
- name: admin
  context: {cluster: c, user: u}
- name: other
  context: {cluster: other, user: u}
"#;

    #[test]
    fn a_whole_kubeconfig_keeps_its_current_context_alone() {
        let k = from_whole("west", WHOLE, false).unwrap();
        let parsed = parse(&k);
        assert_eq!(parsed.clusters.len(), 1);
        assert_eq!(parsed.clusters[0].name, "west");
        let server = parsed.clusters[0].cluster.clone().unwrap().server;
        assert_eq!(server.as_deref(), Some("https://api.west:6443"));
        assert_eq!(token_of(&k).as_deref(), Some("west-token"));
    }

    #[test]
    fn a_whole_kubeconfig_may_not_name_files_or_run_commands() {
        for (from, to, want) in [
            (
                "{token: \"west-token\"}",
                "{tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}",
                "tokenFile",
            ),
            (
                "certificate-authority-data: \"UEVN\"",
                "certificate-authority: /etc/ca.crt",
                "certificate-authority",
            ),
            (
                "{token: \"west-token\"}",
                "{client-certificate: /a, client-key: /b}",
                "client-certificate",
            ),
            (
                "{token: \"west-token\"}",
                "{exec: {command: sh, apiVersion: client.authentication.k8s.io/v1}}",
                "allow_exec",
            ),
            (
                "{token: \"west-token\"}",
                "{auth-provider: {name: gcp}}",
                "auth-provider",
            ),
            (
                "current-context: admin",
                "current-context: gone",
                "\"gone\"",
            ),
            (
                "current-context: admin",
                "",
                "no current-context and 2 contexts",
            ),
            (
                "{cluster: c, user: u}",
                "{cluster: nope, user: u}",
                "\"nope\"",
            ),
            ("\"https://api.west:6443\"", "\"api.west\"", "server"),
        ] {
            let text = WHOLE.replacen(from, to, 1);
            let err = from_whole("west", &text, false).unwrap_err().to_string();
            assert!(err.contains(want), "{to}: {err}");
        }
        let exec = WHOLE.replace(
            "{token: \"west-token\"}",
            "{exec: {command: sh, apiVersion: client.authentication.k8s.io/v1}}",
        );
        assert!(
            from_whole("west", &exec, true).is_ok(),
            "allowed when asked"
        );
        let err = from_whole("west", "clusters: [", false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot be read"), "{err}");
        let huge = format!("{WHOLE}# {}", "x".repeat(MAX_KUBECONFIG_BYTES));
        assert!(
            from_whole("west", &huge, false)
                .unwrap_err()
                .to_string()
                .contains("KiB")
        );
    }
}
