//! A kube client for one cluster, from a context of one or more kubeconfig files.
//!
//! TLS is rustls only. Bearer tokens, client certificates and `exec` credential plugins
//! come from the kubeconfig, as kubectl reads them. kube's built-in retry is turned off:
//! the executor decides itself what a 409 or a 429 means (a PodDisruptionBudget refusing an
//! eviction is a 429 that must be retried on the eviction's own clock, not kube's).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

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

/// Contexts named in an unknown-context error, at most: a kubeconfig of a thousand clusters
/// must not make a thousand-name log line.
const CONTEXTS_NAMED: usize = 20;

/// The context fleet.toml names is in the kubeconfig read from `place` (said in the error:
/// the file, the hub's files, the default kubeconfig), or an error that lists its contexts.
pub fn require_context(
    kubeconfig: &Kubeconfig,
    context: &str,
    place: impl FnOnce() -> String,
) -> Result<(), ClientError> {
    if kubeconfig.contexts.iter().any(|c| c.name == context) {
        return Ok(());
    }
    let names: Vec<&str> = kubeconfig
        .contexts
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let mut known = names
        .iter()
        .take(CONTEXTS_NAMED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.is_empty() {
        known = "none".into();
    } else if names.len() > CONTEXTS_NAMED {
        known.push_str(&format!(", and {} more", names.len() - CONTEXTS_NAMED));
    }
    Err(ClientError::UnknownContext {
        context: context.to_string(),
        place: place(),
        known,
    })
}

/// The API server a context points at, as its kubeconfig says (what a connection error
/// names, beside the context).
pub fn server_of(kubeconfig: &Kubeconfig, context: &str) -> Option<String> {
    let ctx = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)?
        .context
        .as_ref()?;
    kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)?
        .cluster
        .as_ref()?
        .server
        .clone()
}

/// Where a cluster's kubeconfig comes from, as its errors name it.
pub fn kubeconfig_place(cluster_file: Option<&Path>, hub_files: &[PathBuf]) -> String {
    match cluster_file {
        Some(path) => path.display().to_string(),
        None if hub_files.is_empty() => "the default kubeconfig".to_string(),
        None => hub_files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The kubeconfig a cluster reads: its own file if fleet.toml names one, else the hub's
/// files merged in order (the first file wins for a name defined twice, as with KUBECONFIG),
/// else the default (`KUBECONFIG`, `~/.kube/config`).
pub fn load_kubeconfig(
    cluster_file: Option<&Path>,
    hub_files: &[PathBuf],
) -> Result<Kubeconfig, ClientError> {
    let read = read_kubeconfig;
    if let Some(path) = cluster_file {
        return read(path);
    }
    let mut merged: Option<Kubeconfig> = None;
    for path in hub_files {
        let next = read(path)?;
        merged = Some(match merged {
            None => next,
            Some(m) => m
                .merge(next)
                .map_err(|source| ClientError::ReadKubeconfig {
                    path: path.clone(),
                    source,
                })?,
        });
    }
    match merged {
        Some(kc) => Ok(kc),
        None => Kubeconfig::read().map_err(|source| ClientError::DefaultKubeconfig { source }),
    }
}

/// A kubeconfig file, bounded like every file the hub reads (`files::KUBECONFIG`), its
/// relative certificate, key and token paths taken from its directory, as kubectl takes them.
fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, ClientError> {
    let text = crate::files::read_text(path, crate::files::KUBECONFIG)
        .map_err(ClientError::KubeconfigFile)?;
    let mut kubeconfig =
        Kubeconfig::from_yaml(&text).map_err(|source| ClientError::ReadKubeconfig {
            path: path.to_path_buf(),
            source,
        })?;
    if let Some(dir) = path.parent() {
        absolute_paths(&mut kubeconfig, dir);
    }
    Ok(kubeconfig)
}

fn absolute_paths(kubeconfig: &mut Kubeconfig, dir: &Path) {
    let absolute = |file: &mut Option<String>| {
        if let Some(f) = file
            .as_mut()
            .filter(|f| Path::new(f.as_str()).is_relative())
            && let Some(joined) = dir.join(f.as_str()).to_str()
        {
            *f = joined.to_string();
        }
    };
    for cluster in kubeconfig
        .clusters
        .iter_mut()
        .filter_map(|c| c.cluster.as_mut())
    {
        absolute(&mut cluster.certificate_authority);
    }
    for user in kubeconfig
        .auth_infos
        .iter_mut()
        .filter_map(|a| a.auth_info.as_mut())
    {
        absolute(&mut user.client_certificate);
        absolute(&mut user.client_key);
        absolute(&mut user.token_file);
    }
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
/// blocking child process: it runs on a blocking thread, with a deadline, so that a slow
/// or hung plugin (a cloud CLI waiting on the network) never stalls other clusters.
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
/// is not there is [`require_context`]'s to name (or kube's, on paths that do not ask it).
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

    /// A kubeconfig file is read as kube's own reader reads it (relative paths follow the
    /// file), and bounded like every other file: a device is refused before it is read.
    #[test]
    fn a_kubeconfig_file_is_bounded_and_its_relative_paths_follow_it() {
        let dir = std::env::temp_dir().join(format!("fleetscaler-kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config");
        let text = TEST_KUBECONFIG
            .replace(
                "{server: \"https://127.0.0.1:1\"}",
                "{server: \"https://127.0.0.1:1\", certificate-authority: ca.crt}",
            )
            .replace(
                "{token: secret}",
                "{client-certificate: certs/me.crt, client-key: /abs/me.key}",
            );
        std::fs::write(&path, text).unwrap();
        let kc = read_kubeconfig(&path).unwrap();
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
        let at = |f: &str| Some(dir.join(f).display().to_string());
        assert_eq!(cluster.certificate_authority, at("ca.crt"));
        assert_eq!(user.client_certificate, at("certs/me.crt"));
        assert_eq!(user.client_key.as_deref(), Some("/abs/me.key"));
        std::fs::remove_dir_all(&dir).unwrap();
        let err = read_kubeconfig(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/dev/zero") && err.contains("not a regular file"),
            "{err}"
        );
    }

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

    #[test]
    fn an_unreadable_file_is_named() {
        let err = load_kubeconfig(Some(Path::new("/nonexistent/kc")), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/kc"), "{err}");
    }

    #[test]
    fn hub_files_are_merged_in_order() {
        let dir = std::env::temp_dir().join(format!("fleetscaler-kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = dir.join("one");
        let second = dir.join("two");
        std::fs::write(&first, ONE).unwrap();
        std::fs::write(&second, ONE.replace("east", "west")).unwrap();
        let kc = load_kubeconfig(None, &[first, second]).unwrap();
        let names: Vec<_> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["east", "west"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
