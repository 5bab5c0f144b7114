//! `fleetscaler explain NAMESPACE/POD`: why a pending pod waits, from a running hub, group
//! by group as the dashboard shows it. It reads the hub's API only (`status`'s client and
//! options): `/api/v1/fleet` for the clusters, then each cluster's last plan narrowed to the
//! pod (`/api/v1/clusters/<name>/plan?pod=NS/NAME`, every reason of it).
//!
//! `shape` is what is printed (and `--output json`'s stable form), `text` the words.

mod shape;
mod text;

use std::io::{self, Write};

use futures::StreamExt;
use jiff::Timestamp;
use serde::Deserialize;

use super::plan::OutputFormat;
use super::status::api::FleetDoc;
use super::status::shape::Status;
use super::status::{HubArgs, StatusError, fetch, fleet, only};
use shape::{Explanation, PodDoc};

/// Clusters asked at once: one small answer each.
const AT_ONCE: usize = 8;

#[derive(clap::Args, Debug, Clone)]
pub struct ExplainArgs {
    /// The pending pod, as NAMESPACE/NAME.
    #[arg(value_name = "NAMESPACE/POD", value_parser = parse_pod)]
    pub pod: PodName,
    /// The cluster the pod is in (default: every cluster of the hub is searched).
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub hub: HubArgs,
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// A pod's namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodName {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for PodName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

fn parse_pod(text: &str) -> Result<PodName, String> {
    match text.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(PodName {
                namespace: ns.into(),
                name: name.into(),
            })
        }
        _ => Err("expected NAMESPACE/NAME, e.g. shop/web-7d9c".into()),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error(transparent)]
    Hub(#[from] StatusError),
    /// Not among the pending pods the hub explains (exit status 1).
    #[error(
        "pod {pod} is not pending in {searched}: it runs or is scheduled, has finished, or is \
         not there at all (the hub explains pending pods only){notes}"
    )]
    NotPending {
        pod: String,
        /// `cluster sim-1`, or `any cluster of the hub at URL (searched: a, b)`.
        searched: String,
        /// `; not searched: ...` when some clusters could not be.
        notes: String,
    },
    #[error("pod {pod} is pending in {} clusters: {}; name one with --cluster", .clusters.len(), .clusters.join(", "))]
    Ambiguous { pod: String, clusters: Vec<String> },
    #[error("the hub at {url} has no cluster to search")]
    NoClusters { url: String },
    #[error("cannot write: {0}")]
    Write(#[from] io::Error),
}

impl ExplainError {
    /// 1 when the pod is simply not pending (as `grep` finding nothing), 2 for an error.
    pub fn exit_status(&self) -> u8 {
        match self {
            ExplainError::NotPending { .. } => 1,
            _ => 2,
        }
    }
}

/// The part of a cluster's plan `explain` reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PlanDoc {
    now: Timestamp,
    #[serde(default)]
    pending_pods: Vec<PodDoc>,
}

/// What one cluster said about the pod.
enum Answer {
    Pending(Box<Explanation>),
    NotPending,
    /// Not searched, with why (no pass yet, gone since the fleet was read).
    Unsearched(String),
}

pub async fn run(args: &ExplainArgs, out: &mut impl Write) -> Result<(), ExplainError> {
    let (url, doc) = fleet(&args.hub).await?;
    let at = doc
        .fleet
        .as_ref()
        .and_then(|f| f.at)
        .unwrap_or(Timestamp::now());
    let searched = clusters(args, &url, doc)?;
    let answers = ask_all(args, &searched.names).await?;
    let explanation = pick(args, &searched, answers)?;
    match args.output {
        OutputFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &explanation).map_err(io::Error::from)?;
            writeln!(out)?;
        }
        OutputFormat::Text => text::render(&explanation, at, out)?,
    }
    Ok(())
}

/// The clusters searched, and those left to other replicas.
struct Searched {
    names: Vec<String>,
    /// With sharding and no `--cluster`: the other replicas' clusters, each replica's as
    /// `sim-2, sim-5 (replica hub-b, --server URL)`.
    elsewhere: Vec<String>,
}

/// The clusters to search: the one asked for (refused as `status --cluster` refuses it,
/// pointing to the replica that runs it), or every one this hub runs.
fn clusters(args: &ExplainArgs, url: &http::Uri, doc: FleetDoc) -> Result<Searched, ExplainError> {
    let status = Status::from_api(&args.hub.server, doc, Timestamp::now());
    let (status, elsewhere) = match &args.cluster {
        Some(name) => (only(status, name, url)?, Vec::new()),
        None => {
            let elsewhere = elsewhere(&status, url);
            (status, elsewhere)
        }
    };
    let names: Vec<String> = status.clusters.into_iter().map(|c| c.name).collect();
    if names.is_empty() {
        return Err(ExplainError::NoClusters {
            url: url.to_string(),
        });
    }
    Ok(Searched { names, elsewhere })
}

/// The clusters other replicas run, by replica, with how to ask each (a replica answers
/// for its own clusters only).
fn elsewhere(status: &Status, url: &http::Uri) -> Vec<String> {
    let Some(sharding) = &status.sharding else {
        return Vec::new();
    };
    let scheme = url.scheme_str().unwrap_or("http");
    let others = sharding
        .replicas
        .iter()
        .filter(|r| !r.this && !r.clusters.is_empty());
    others
        .map(|r| {
            let at = r
                .address
                .as_ref()
                .map(|a| format!(", --server {scheme}://{a}"));
            let (names, who) = (r.clusters.join(", "), &r.identity);
            format!("{names} (replica {who}{})", at.unwrap_or_default())
        })
        .collect()
}

/// Every cluster's answer, in the clusters' order.
async fn ask_all(
    args: &ExplainArgs,
    clusters: &[String],
) -> Result<Vec<(String, Answer)>, ExplainError> {
    let asked = futures::stream::iter(clusters)
        .map(|c| async move { ask(args, c).await.map(|a| (c.clone(), a)) })
        .buffered(AT_ONCE)
        .collect::<Vec<_>>()
        .await;
    Ok(asked.into_iter().collect::<Result<_, _>>()?)
}

/// The cluster's last plan, narrowed to the pod.
async fn ask(args: &ExplainArgs, cluster: &str) -> Result<Answer, StatusError> {
    let url = fetch::api_url(&args.hub.server, &plan_path(cluster, &args.pod))?;
    let body = match fetch::get(&url, args.hub.token.as_deref(), args.hub.timeout).await {
        Ok(body) => body,
        Err(StatusError::Refused { status, .. })
            if status == http::StatusCode::SERVICE_UNAVAILABLE =>
        {
            return Ok(Answer::Unsearched(format!("{cluster} (no pass yet)")));
        }
        Err(StatusError::Refused { status, .. }) if status == http::StatusCode::NOT_FOUND => {
            return Ok(Answer::Unsearched(format!(
                "{cluster} (no longer run here)"
            )));
        }
        Err(e) => return Err(e),
    };
    let plan: PlanDoc = serde_json::from_slice(&body).map_err(|e| StatusError::Body {
        url: url.to_string(),
        path: format!("line {}", e.line()),
        message: e.to_string(),
    })?;
    let wanted = args.pod.to_string();
    Ok(
        match plan.pending_pods.into_iter().find(|p| p.pod == wanted) {
            Some(pod) => Answer::Pending(Box::new(Explanation::new(
                &args.hub.server,
                cluster,
                plan.now,
                pod,
            ))),
            None => Answer::NotPending,
        },
    )
}

/// What a path segment may hold as it is (RFC 3986's unreserved characters).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `/api/v1/clusters/<name>/plan?pod=<ns>/<name>`, escaped.
fn plan_path(cluster: &str, pod: &PodName) -> String {
    let name = percent_encoding::utf8_percent_encode(cluster, SEGMENT);
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("pod", &pod.to_string())
        .finish();
    format!("/api/v1/clusters/{name}/plan?{query}")
}

/// The one explanation, or why there is none.
fn pick(
    args: &ExplainArgs,
    searched: &Searched,
    answers: Vec<(String, Answer)>,
) -> Result<Explanation, ExplainError> {
    let mut found = Vec::new();
    let mut unsearched = Vec::new();
    for (_, answer) in answers {
        match answer {
            Answer::Pending(e) => found.push(*e),
            Answer::NotPending => {}
            Answer::Unsearched(why) => unsearched.push(why),
        }
    }
    if found.len() > 1 {
        return Err(ExplainError::Ambiguous {
            pod: args.pod.to_string(),
            clusters: found.into_iter().map(|e| e.cluster).collect(),
        });
    }
    found.pop().ok_or_else(|| ExplainError::NotPending {
        pod: args.pod.to_string(),
        searched: match &args.cluster {
            Some(c) => format!("cluster {c}"),
            None => format!(
                "any cluster of the hub at {} (searched: {})",
                args.hub.server,
                searched.names.join(", ")
            ),
        },
        notes: not_searched(&unsearched, &searched.elsewhere),
    })
}

/// `; not searched: ...` and `; run by other replicas, not searched: ...`, when any.
fn not_searched(unsearched: &[String], elsewhere: &[String]) -> String {
    let mut notes = String::new();
    if !unsearched.is_empty() {
        notes.push_str(&format!("; not searched: {}", unsearched.join(", ")));
    }
    if !elsewhere.is_empty() {
        let others = elsewhere.join("; ");
        notes.push_str(&format!("; run by other replicas, not searched: {others}"));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_namespace_slash_name() {
        let pod = parse_pod("shop/web-7d9c").unwrap();
        assert_eq!(
            (pod.namespace.as_str(), pod.name.as_str()),
            ("shop", "web-7d9c")
        );
        for bad in ["web", "/web", "shop/", "a/b/c", ""] {
            assert!(parse_pod(bad).is_err(), "{bad}");
        }
    }

    /// With sharding, a pod not found here may wait in another replica's cluster: the
    /// message says which clusters those are and how to ask their replica.
    #[test]
    fn other_replicas_clusters_are_named_as_not_searched() {
        let doc =
            crate::cli::status::api::parse(include_bytes!("status/fixture_sharded.json")).unwrap();
        let url: http::Uri = "http://10.0.0.5:8080/api/v1/fleet".parse().unwrap();
        let status = Status::from_api("http://10.0.0.5:8080", doc, Timestamp::UNIX_EPOCH);
        let others = elsewhere(&status, &url);
        assert_eq!(
            others,
            [
                "sim-2, sim-5, sim-6 (replica hub-b, --server http://10.0.0.6:8080)",
                "sim-3 (replica hub-c)"
            ]
        );
        assert_eq!(
            not_searched(&["sim-4 (no pass yet)".into()], &others[1..]),
            "; not searched: sim-4 (no pass yet); run by other replicas, not searched: \
             sim-3 (replica hub-c)"
        );
    }

    #[test]
    fn the_plan_path_is_escaped() {
        let pod = parse_pod("shop/web 1").unwrap();
        assert_eq!(
            plan_path("east-1", &pod),
            "/api/v1/clusters/east-1/plan?pod=shop%2Fweb+1"
        );
    }
}
