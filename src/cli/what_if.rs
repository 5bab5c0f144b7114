//! `fleetscaler what-if`: a proposed change (fleet.toml settings, or a ClusterAutoscaler as it
//! would be applied) evaluated on every cluster's live state, read only. Each cluster of
//! fleet.toml is read as the hub would read it (list only: nothing is written), and both
//! passes, with the settings in force and with the proposal, are compared (`what_if_text`
//! prints the comparison for people; `--output json` is documented in docs/plan-format.md).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;

use super::plan::OutputFormat;
use crate::cluster::client::connect;
use crate::cluster::kubeconfig::load_context;
use crate::cluster::read::look;
use crate::cluster::runner::RunnerSpec;
use crate::cluster::what_if::{
    ClusterAnswer, FleetAnswer, Proposal, evaluate, read_cluster_autoscaler,
};
use crate::config::{ClusterConfig, ConfigError, FleetConfig};
use crate::engine::{EngineState, FleetPolicy};
use crate::model::duration::parse_go_duration;

/// Clusters read at once: each holds a connection and, while it lists, a copy of its objects.
const AT_ONCE: usize = 4;

#[derive(clap::Args, Debug, Clone)]
pub struct WhatIfArgs {
    /// The fleet configuration, as the hub reads it.
    #[arg(long, short = 'c', value_name = "FILE", default_value = "fleet.toml")]
    pub config: PathBuf,
    /// A proposed setting, as in fleet.toml: a bare KEY on top of every cluster's settings
    /// (`max_nodes_total=30`), `defaults.KEY` for fleet.toml's [defaults], which a cluster's
    /// own ClusterAutoscaler and overrides still win over.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// A ClusterAutoscaler (YAML or JSON, named `default`) as it would be applied to each
    /// cluster, in place of its own.
    #[arg(long, value_name = "FILE")]
    pub cluster_autoscaler: Option<PathBuf>,
    /// Only these clusters (repeatable; default: every enabled cluster).
    #[arg(long, value_name = "NAME")]
    pub cluster: Vec<String>,
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// How long to wait for each cluster to be read (Go duration: 60s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_timeout)]
    pub timeout: Duration,
}

fn parse_timeout(text: &str) -> Result<Duration, String> {
    match parse_go_duration(text) {
        Ok(d) if d.is_zero() => Err("must be more than 0".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WhatIfError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("--set {0}")]
    Proposal(#[from] crate::config::assign::AssignError),
    #[error("--cluster-autoscaler: {0}")]
    ClusterAutoscaler(String),
    #[error(
        "nothing proposed: give --set KEY=VALUE (e.g. --set max_nodes_total=30) or --cluster-autoscaler FILE"
    )]
    Nothing,
    #[error("--cluster {name:?} is not in {config} (clusters: {known})")]
    UnknownCluster {
        name: String,
        config: String,
        known: String,
    },
    #[error("cannot write: {0}")]
    Write(#[from] std::io::Error),
    /// The answer was printed, but some clusters are missing from it.
    #[error("not evaluated: {} (each with its error in the answer)", .0.join(", "))]
    NotEvaluated(Vec<String>),
}

impl WhatIfError {
    /// The exit status: 1 for an answer that left clusters out, 2 for no answer at all.
    pub fn exit_status(&self) -> u8 {
        match self {
            WhatIfError::NotEvaluated(_) => 1,
            _ => 2,
        }
    }
}

/// Why a what-if from outside the hub differs from one the hub answers.
const NO_MEMORY: &str = "evaluated on each cluster's live state without the hub's memory: backoffs and unneeded timers start empty here (scale-ups in flight are rebuilt from the machines), so no node has waited long enough to be removed; a running hub answers with its memory: GET /api/v1/what-if";

pub async fn run(args: &WhatIfArgs, out: &mut impl Write) -> Result<(), WhatIfError> {
    let answer = compute(args).await?;
    match args.output {
        OutputFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &answer).map_err(std::io::Error::other)?;
            writeln!(out)?;
        }
        OutputFormat::Text => super::what_if_text::render(&answer, out)?,
    }
    let missing: Vec<String> = answer
        .clusters
        .iter()
        .filter(|c| c.error.is_some())
        .map(|c| c.name.clone())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(WhatIfError::NotEvaluated(missing))
    }
}

/// Everything `what-if` does but printing.
pub async fn compute(args: &WhatIfArgs) -> Result<FleetAnswer, WhatIfError> {
    let config = FleetConfig::load(&args.config)?;
    let ca = match &args.cluster_autoscaler {
        Some(path) => Some(read_ca_file(path)?),
        None => None,
    };
    let proposal = Proposal::from_assignments(&args.set, ca)?;
    if proposal.is_empty() {
        return Err(WhatIfError::Nothing);
    }
    let chosen = chosen_clusters(&config, args)?;
    let proposal = &proposal;
    let config = &config;
    let mut clusters: Vec<ClusterAnswer> = futures::stream::iter(chosen)
        .map(|c| one_cluster(config, c, proposal, args.timeout))
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    let mut answer = FleetAnswer::new(proposal, Timestamp::now(), clusters);
    answer.notes.push(NO_MEMORY.into());
    Ok(answer)
}

fn read_ca_file(
    path: &std::path::Path,
) -> Result<crate::model::autoscaler::ClusterAutoscalerSpec, WhatIfError> {
    let name = path.display().to_string();
    let text = crate::files::read_text(path, crate::files::DOCUMENT)
        .map_err(|e| WhatIfError::ClusterAutoscaler(e.to_string()))?;
    read_cluster_autoscaler(&text, &name).map_err(WhatIfError::ClusterAutoscaler)
}

/// The clusters asked for (any of fleet.toml's), else every enabled one.
fn chosen_clusters<'a>(
    config: &'a FleetConfig,
    args: &WhatIfArgs,
) -> Result<Vec<&'a ClusterConfig>, WhatIfError> {
    if args.cluster.is_empty() {
        return Ok(config.clusters.iter().filter(|c| c.enabled).collect());
    }
    args.cluster
        .iter()
        .map(|name| {
            config
                .cluster(name)
                .ok_or_else(|| WhatIfError::UnknownCluster {
                    name: name.clone(),
                    config: args.config.display().to_string(),
                    known: config
                        .clusters
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
        })
        .collect()
}

/// Reads one cluster and evaluates the proposal on it; what goes wrong is its answer's error.
async fn one_cluster(
    config: &FleetConfig,
    c: &ClusterConfig,
    proposal: &Proposal,
    limit: Duration,
) -> ClusterAnswer {
    let timeout = config.hub.request_timeout;
    let read = async {
        let kubeconfig = load_context(
            c.kubeconfig.as_deref(),
            &config.hub.kubeconfigs,
            c.context(),
        )
        .map_err(|e| e.to_string())?;
        let client = connect(kubeconfig, c.context(), timeout)
            .await
            .map_err(|e| e.to_string())?;
        look(&client, timeout, limit).await
    };
    let seen = match read.await {
        Ok(seen) => seen,
        Err(why) => return ClusterAnswer::failed(&c.name, format!("not evaluated: {why}")),
    };
    let spec = RunnerSpec::of(config, c);
    let state = EngineState::default();
    let now = Timestamp::now();
    let work = || {
        evaluate(
            &c.name,
            &spec,
            &seen.snapshot,
            &state,
            &FleetPolicy::none(),
            proposal,
            now,
        )
    };
    let mut answer = crate::cluster::cpu(work);
    answer
        .notes
        .extend(seen.warnings.iter().map(ToString::to_string));
    answer
}
