//! A kube client for one cluster, from a context of one or more kubeconfig files.
//!
//! TLS is rustls only. Bearer tokens, client certificates and `exec` credential plugins
//! come from the kubeconfig, as kubectl reads them. kube's built-in retry is turned off:
//! the executor decides itself what a 409 or a 429 means (a PodDisruptionBudget refusing an
//! eviction is a 429 that must be retried on the eviction's own clock, not kube's).

use std::path::PathBuf;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

use super::kubeconfig::server_of;
use crate::config::membership::Discovered;

/// How long a connection may stay silent before it is considered dead. Watches ask the
/// server to end them within 600 s (`listwatch`), and over HTTP/2 pings every 30 s keep a
/// live connection from ever being this quiet.
const WATCH_READ_TIMEOUT: Duration = Duration::from_secs(630);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot read kubeconfig {}: {source}", path.display())]
    ReadKubeconfig {
        path: PathBuf,
        #[source]
        source: KubeconfigError,
    },
    #[error("kubeconfig: {0}")]
    KubeconfigFile(#[source] crate::files::FileError),
    #[error(
        "no kubeconfig: set hub.kubeconfigs or the cluster's kubeconfig in fleet.toml, or KUBECONFIG ({source})"
    )]
    DefaultKubeconfig {
        #[source]
        source: KubeconfigError,
    },
    /// The context fleet.toml names is not in the kubeconfig: a typo, or the wrong file.
    #[error("context {context:?} is not in {place} (its contexts: {known})")]
    UnknownContext {
        context: String,
        place: String,
        known: String,
    },
    #[error("kubeconfig context {context:?}: {source}")]
    Context {
        context: String,
        #[source]
        source: KubeconfigError,
    },
    #[error("building the client for context {context:?}: {message}")]
    Plugin { context: String, message: String },
    #[error("kubeconfig context {context:?}: {source}")]
    Invalid {
        context: String,
        #[source]
        source: ContextError,
    },
    /// The kubeconfig built in memory for a cluster of the management cluster's inventory.
    /// Only the place is told: the text holds credentials.
    #[error("the kubeconfig found in {origin} cannot be read (line {line}, column {column})")]
    Inline {
        origin: String,
        line: usize,
        column: usize,
    },
    #[error("building the client for context {context:?}: {source}")]
    Build {
        context: String,
        #[source]
        source: kube::Error,
    },
    /// No context named, and not running in a pod: `setting` is the key that names one.
    #[error("no in-cluster configuration ({message}); set {setting}")]
    InCluster {
        setting: &'static str,
        message: String,
    },
}

/// What is wrong with a kubeconfig context that kube would take on trust.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    #[error("cluster {cluster:?}: server {server:?} is not an https:// (or http://) URL")]
    Server { cluster: String, server: String },
    #[error(
        "the token of user {user:?} holds a character no HTTP header can carry (a line break?)"
    )]
    Token { user: String },
}

/// The kubeconfig of a cluster found in the management cluster's inventory, held in memory.
pub fn inline_kubeconfig(found: &Discovered) -> Result<Kubeconfig, ClientError> {
    serde_json::from_str(found.kubeconfig.text()).map_err(|e| ClientError::Inline {
        origin: found.source.clone(),
        line: e.line(),
        column: e.column(),
    })
}

/// A client for `context` of `kubeconfig`, with the hub's timeouts.
///
/// Building a client may run the context's `exec` credential plugin, which kube runs as a
/// blocking child process: such a client is built on a blocking thread, with a deadline, so
/// that a slow or hung plugin (a cloud CLI waiting on the network) never stalls other
/// clusters. Any other is built in place (see [`runs_a_command`]).
pub async fn connect(
    kubeconfig: Kubeconfig,
    context: &str,
    request_timeout: Duration,
) -> Result<kube::Client, ClientError> {
    connect_as(kubeconfig, context, request_timeout, &user_agent(None)).await
}

/// `fleetscaler/<version>`, and the hub replica's name when given: API servers record the
/// user agent of every request (audit logs), which says which replica wrote what.
pub fn user_agent(replica: Option<&str>) -> String {
    let version = env!("CARGO_PKG_VERSION");
    match replica {
        Some(r) => format!("fleetscaler/{version} ({r})"),
        None => format!("fleetscaler/{version}"),
    }
}

/// [`connect`], sending `agent` as the user agent.
pub async fn connect_as(
    kubeconfig: Kubeconfig,
    context: &str,
    request_timeout: Duration,
    agent: &str,
) -> Result<kube::Client, ClientError> {
    if !runs_a_command(&kubeconfig, context) {
        return build_client(kubeconfig, context, request_timeout, agent).await;
    }
    let handle = tokio::runtime::Handle::current();
    let name = context.to_string();
    let agent = agent.to_string();
    let build = tokio::task::spawn_blocking(move || {
        handle.block_on(build_client(kubeconfig, &name, request_timeout, &agent))
    });
    let limit = (request_timeout * 3).max(MIN_CONNECT_TIMEOUT);
    match tokio::time::timeout(limit, build).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(ClientError::Plugin {
            context: context.to_string(),
            message: format!("building the client stopped: {join}"),
        }),
        Err(_) => Err(ClientError::Plugin {
            context: context.to_string(),
            message: format!(
                "no client after {}s (a credential plugin that does not return?)",
                limit.as_secs()
            ),
        }),
    }
}

/// The context's user gets its credentials from a command (`exec`, or an `auth-provider`
/// that names one), which kube runs as a blocking child process while the client is built.
///
/// Only then is a blocking thread worth its cost. A thousand clusters connecting at once
/// otherwise took some 270 blocking threads, and each kept, after it ended, the allocator's
/// pages holding the long-lived parts of the clients it had built (their TLS settings,
/// connection pools): some 200 MiB at 333 clusters.
fn runs_a_command(kubeconfig: &Kubeconfig, context: &str) -> bool {
    let user = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref()?.user.as_deref());
    let Some(user) = user else {
        return false;
    };
    kubeconfig
        .auth_infos
        .iter()
        .find(|a| a.name == user)
        .and_then(|a| a.auth_info.as_ref())
        .is_some_and(|a| a.exec.is_some() || a.auth_provider.is_some())
}

/// A credential plugin gets at least this long.
const MIN_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

async fn build_client(
    kubeconfig: Kubeconfig,
    context: &str,
    request_timeout: Duration,
    agent: &str,
) -> Result<kube::Client, ClientError> {
    check_context(&kubeconfig, context).map_err(|source| ClientError::Invalid {
        context: context.to_string(),
        source,
    })?;
    let options = KubeConfigOptions {
        context: Some(context.to_string()),
        ..KubeConfigOptions::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|source| ClientError::Context {
            context: context.to_string(),
            source,
        })?;
    from_config_as(config, context, request_timeout, agent)
}

/// What kube's client stack takes on trust and panics on later, checked here: the cluster's
/// server is an http(s) URL, and the user's token fits in an HTTP header. A context that
/// is not there is [`super::kubeconfig::require_context`]'s to name (or kube's, on paths that do not ask it).
fn check_context(kubeconfig: &Kubeconfig, context: &str) -> Result<(), ContextError> {
    use secrecy::ExposeSecret;
    let Some(ctx) = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
    else {
        return Ok(());
    };
    if let Some(server) = server_of(kubeconfig, context) {
        let ok = server.parse::<http::Uri>().ok().is_some_and(|u| {
            matches!(u.scheme_str(), Some("https" | "http")) && u.host().is_some()
        });
        if !ok {
            return Err(ContextError::Server {
                cluster: ctx.cluster.clone(),
                server,
            });
        }
    }
    let token = ctx.user.as_deref().and_then(|user| {
        let info = kubeconfig.auth_infos.iter().find(|a| a.name == user)?;
        Some((user, info.auth_info.as_ref()?.token.as_ref()?))
    });
    if let Some((user, token)) = token
        && http::HeaderValue::from_str(&format!("Bearer {}", token.expose_secret())).is_err()
    {
        return Err(ContextError::Token {
            user: user.to_string(),
        });
    }
    Ok(())
}

/// A client from an already resolved configuration (the simulated fleet hands these out).
pub fn from_config(
    config: kube::Config,
    context: &str,
    request_timeout: Duration,
) -> Result<kube::Client, ClientError> {
    from_config_as(config, context, request_timeout, &user_agent(None))
}

/// [`from_config`], sending `agent` as the user agent (replacing any the kubeconfig gave).
pub fn from_config_as(
    mut config: kube::Config,
    context: &str,
    request_timeout: Duration,
    agent: &str,
) -> Result<kube::Client, ClientError> {
    if let Ok(value) = http::HeaderValue::from_str(agent) {
        config
            .headers
            .retain(|(name, _)| name != http::header::USER_AGENT);
        config.headers.push((http::header::USER_AGENT, value));
    }
    config.connect_timeout = Some(request_timeout);
    config.write_timeout = Some(request_timeout);
    config.read_timeout = Some(WATCH_READ_TIMEOUT);
    config.default_retry = false;
    super::http::client(config).map_err(|source| ClientError::Build {
        context: context.to_string(),
        source,
    })
}

/// A kubeconfig with one context, `east`, for the tests that need one.
#[cfg(test)]
pub(crate) const TEST_KUBECONFIG: &str = r#"
apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: a
  user: {token: secret}
contexts:
- name: east
  context: {cluster: a, user: a}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = TEST_KUBECONFIG;

    /// Seeds of issue 12: both once panicked inside kube's client stack.
    #[tokio::test]
    async fn a_server_without_scheme_or_a_token_with_a_line_break_is_an_error() {
        for (from, to, want) in [
            (
                "https://127.0.0.1:1",
                "127.0.0.1:6443",
                "server \"127.0.0.1:6443\"",
            ),
            ("https://127.0.0.1:1", "ftp://h:1", "server \"ftp://h:1\""),
            (
                "token: secret",
                "token: \"sec\\r\\nret\"",
                "token of user \"a\"",
            ),
        ] {
            let kc = Kubeconfig::from_yaml(&ONE.replace(from, to)).unwrap();
            let Err(err) = connect(kc, "east", Duration::from_secs(1)).await else {
                panic!("{to} must fail");
            };
            let err = err.to_string();
            assert!(err.contains(want), "{err}");
        }
    }

    #[tokio::test]
    async fn a_missing_context_is_named() {
        let kc = Kubeconfig::from_yaml(ONE).unwrap();
        let Err(err) = connect(kc, "west", Duration::from_secs(1)).await else {
            panic!("a missing context must fail");
        };
        let err = err.to_string();
        assert!(err.contains("\"west\""), "{err}");
    }

    #[test]
    fn only_a_user_running_a_command_is_built_on_a_blocking_thread() {
        let kc = |text: &str| Kubeconfig::from_yaml(text).unwrap();
        assert!(!runs_a_command(&kc(ONE), "east"));
        assert!(!runs_a_command(&kc(ONE), "west"));
        let exec = ONE.replace(
            "{token: secret}",
            "{exec: {apiVersion: client.authentication.k8s.io/v1, command: aws}}",
        );
        assert!(runs_a_command(&kc(&exec), "east"));
        let provider = ONE.replace(
            "{token: secret}",
            "{auth-provider: {name: gcp, config: {cmd-path: gcloud}}}",
        );
        assert!(runs_a_command(&kc(&provider), "east"));
    }

    #[tokio::test]
    async fn a_context_becomes_a_client() {
        let kc = Kubeconfig::from_yaml(ONE).unwrap();
        let client = connect(kc, "east", Duration::from_secs(1)).await.unwrap();
        assert_eq!(client.default_namespace(), "default");
    }

    /// The plugin returns only once another task of the runtime has run (it waits for a
    /// file that task writes): with one worker, a client build that blocked the worker would
    /// never let that task run, and the plugin gives up with an error instead.
    #[cfg(unix)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_slow_credential_plugin_blocks_no_other_task() {
        let dir = std::env::temp_dir().join(format!("fleetscaler-plugin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let release = dir.join("release");
        let started = dir.join("started");
        let slow = format!(
            r#"
apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {{server: "https://127.0.0.1:1"}}
users:
- name: a
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: sh
      args: ["-c", "touch {started}; for i in $(seq 600); do if [ -f {release} ]; then echo '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"t\"}}}}'; exit 0; fi; sleep 0.05; done; echo never released >&2; exit 1"]
      interactiveMode: Never
contexts:
- name: a
  context: {{cluster: a, user: a}}
"#,
            release = release.display(),
            started = started.display()
        );
        let kc = Kubeconfig::from_yaml(&slow).unwrap();
        let building = tokio::spawn(connect(kc, "a", Duration::from_secs(1)));
        // Runs only if the build left the one worker free, and only once the plugin runs.
        let writer = tokio::spawn(async move {
            while !started.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            std::fs::write(&release, b"go")
        });
        writer.await.unwrap().unwrap();
        let built = building.await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(built.is_ok(), "{:?}", built.err());
    }
}
