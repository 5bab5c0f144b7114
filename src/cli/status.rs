//! `fleetscaler status`: the fleet at a glance from a running hub's HTTP API, one row per
//! cluster, for people who live in a terminal rather than a browser. It reads
//! `/api/v1/fleet` (over HTTP/1, or HTTPS with the system's root certificates) and never
//! the clusters themselves.
//!
//! `api` is the API's JSON as read, `shape` the stable form `--output json` prints (and the
//! text is drawn from), `text` the table, `fetch` the one request.

pub(super) mod api;
pub(super) mod fetch;
pub(super) mod shape;
mod text;

use std::io::{self, Write};
use std::time::Duration;

use jiff::Timestamp;

use super::plan::OutputFormat;
use crate::config::hub::HubConfig;
use crate::model::duration::parse_go_duration;

#[derive(clap::Args, Debug, Clone)]
pub struct StatusArgs {
    #[command(flatten)]
    pub hub: HubArgs,
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Only this cluster.
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
}

/// How to reach a running hub's API: what `status` and `explain` share.
#[derive(clap::Args, Debug, Clone)]
pub struct HubArgs {
    /// The hub's HTTP API (`hub.listen` of the hub), http:// or https://.
    #[arg(long, short = 's', value_name = "URL", env = "FLEETSCALER_SERVER",
          default_value_t = default_server())]
    pub server: String,
    /// Sent as `Authorization: Bearer TOKEN` (prefer the variable: arguments are visible to
    /// every user of the machine).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "FLEETSCALER_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// How long to wait for the whole answer (Go duration: 10s, 500ms, 1m).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("--server {server:?}: {reason} (expected a URL such as http://127.0.0.1:8080)")]
    BadServer { server: String, reason: String },
    #[error(
        "the token cannot be sent in an HTTP header (it holds a line break or control character)"
    )]
    BadToken,
    #[error("cannot reach the hub at {url}: {cause}")]
    Unreachable { url: String, cause: String },
    #[error("no complete answer from the hub at {url} within {}s (--timeout)", .timeout.as_secs_f64())]
    Timeout { url: String, timeout: Duration },
    #[error("the hub at {url} answered {status}: {excerpt}{hint}")]
    Refused {
        url: String,
        status: http::StatusCode,
        excerpt: String,
        hint: &'static str,
    },
    #[error("the answer of {url} is not the fleet's JSON: at {path}: {message}")]
    Body {
        url: String,
        path: String,
        message: String,
    },
    #[error("the hub at {url} has no cluster named {name:?} (it has: {known})")]
    NoCluster {
        url: String,
        name: String,
        known: String,
    },
    #[error("the hub at {url} does not run cluster {name:?}: replica {replica} does{at}")]
    Elsewhere {
        url: String,
        name: String,
        replica: String,
        /// ` (--server URL)` when the replica's address is known.
        at: String,
    },
    #[error("cannot write: {0}")]
    Write(#[from] io::Error),
}

/// `http://127.0.0.1:<port of the hub's default listen address>`.
pub fn default_server() -> String {
    let listen = HubConfig::default().listen;
    let port = listen
        .rsplit_once(':')
        .map_or(listen.as_str(), |(_, port)| port);
    format!("http://127.0.0.1:{port}")
}

pub(super) fn parse_timeout(text: &str) -> Result<Duration, String> {
    match parse_go_duration(text) {
        Ok(d) if d.is_zero() => Err("must be more than 0".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

/// Fetches the fleet and prints it.
pub async fn run(args: &StatusArgs, out: &mut impl Write) -> Result<(), StatusError> {
    let (url, doc) = fleet(&args.hub).await?;
    let mut status = shape::Status::from_api(&args.hub.server, doc, Timestamp::now());
    if let Some(name) = &args.cluster {
        status = only(status, name, &url)?;
    }
    match args.output {
        OutputFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &status).map_err(io::Error::from)?;
            writeln!(out)?;
        }
        OutputFormat::Text => text::render(&status, out)?,
    }
    Ok(())
}

/// The hub's `/api/v1/fleet`, read: its URL and what it says.
pub(super) async fn fleet(hub: &HubArgs) -> Result<(http::Uri, api::FleetDoc), StatusError> {
    let url = fetch::fleet_url(&hub.server)?;
    let body = fetch::get(&url, hub.token.as_deref(), hub.timeout).await?;
    let doc = api::parse(&body).map_err(|e| StatusError::Body {
        url: url.to_string(),
        path: e.path,
        message: e.message,
    })?;
    Ok((url, doc))
}

/// The status narrowed to one cluster (the fleet's line stays: it is about the hub).
pub(super) fn only(
    mut status: shape::Status,
    name: &str,
    url: &http::Uri,
) -> Result<shape::Status, StatusError> {
    if status.clusters.iter().any(|c| c.name == name) {
        status.clusters.retain(|c| c.name == name);
        return Ok(status);
    }
    // With sharding, another replica may run it: say which, and how to ask it.
    let owner = status.sharding.as_ref().and_then(|sh| {
        let r = sh
            .replicas
            .iter()
            .find(|r| !r.this && r.clusters.iter().any(|c| c == name))?;
        let scheme = url.scheme_str().unwrap_or("http");
        let at = r
            .address
            .as_ref()
            .map(|a| format!(" (--server {scheme}://{a})"))
            .unwrap_or_default();
        Some((r.identity.clone(), at))
    });
    if let Some((replica, at)) = owner {
        return Err(StatusError::Elsewhere {
            url: url.to_string(),
            name: name.to_string(),
            replica,
            at,
        });
    }
    let names: Vec<&str> = status.clusters.iter().map(|c| c.name.as_str()).collect();
    let known = match names.len() {
        0 => "no clusters".to_string(),
        1..=10 => names.join(", "),
        n => format!("{}, ... ({n} clusters)", names[..10].join(", ")),
    };
    Err(StatusError::NoCluster {
        url: url.to_string(),
        name: name.to_string(),
        known,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_server_is_the_hubs_default_port_on_loopback() {
        let port = HubConfig::default()
            .listen
            .parse::<std::net::SocketAddr>()
            .map(|a| a.port())
            .ok();
        assert_eq!(
            Some(default_server()),
            port.map(|p| format!("http://127.0.0.1:{p}"))
        );
    }

    #[test]
    fn timeouts_read_as_go_durations() {
        assert_eq!(parse_timeout("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_timeout("1m30s"), Ok(Duration::from_secs(90)));
        assert!(parse_timeout("0s").is_err());
        assert!(parse_timeout("ten").is_err());
    }

    #[test]
    fn an_unknown_cluster_is_refused_naming_those_there_are() {
        let doc = api::parse(include_bytes!("status/fixture.json")).unwrap();
        let status = shape::Status::from_api("http://hub", doc, Timestamp::UNIX_EPOCH);
        let url: http::Uri = "http://hub/api/v1/fleet".parse().unwrap();
        let one = only(status.clone(), "sim-2", &url).unwrap();
        assert_eq!(one.clusters.len(), 1);
        assert!(one.fleet.is_some());
        let err = only(status, "nope", &url).unwrap_err().to_string();
        assert!(err.contains("\"nope\""), "{err}");
        assert!(err.contains("sim-1, sim-2, sim-3"), "{err}");
    }

    #[test]
    fn a_cluster_another_replica_runs_is_pointed_to() {
        let doc = api::parse(include_bytes!("status/fixture_sharded.json")).unwrap();
        let status = shape::Status::from_api("http://hub", doc, Timestamp::UNIX_EPOCH);
        let url: http::Uri = "http://10.0.0.5:8080/api/v1/fleet".parse().unwrap();
        let err = only(status.clone(), "sim-5", &url).unwrap_err().to_string();
        assert_eq!(
            err,
            "the hub at http://10.0.0.5:8080/api/v1/fleet does not run cluster \"sim-5\": \
             replica hub-b does (--server http://10.0.0.6:8080)"
        );
        let err = only(status.clone(), "sim-3", &url).unwrap_err().to_string();
        assert!(err.ends_with("replica hub-c does"), "{err}");
        let err = only(status, "nope", &url).unwrap_err().to_string();
        assert!(err.contains("(it has: sim-1, sim-4)"), "{err}");
    }
}
