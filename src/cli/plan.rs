//! `fleetscaler plan`: one decision over saved cluster dumps, offline. Reads the files,
//! layers the settings (upstream defaults, fleet.toml defaults, the dump's own
//! `ClusterAutoscaler`, the cluster's overrides, flags), runs the engine once, and prints
//! the plan as a table or as JSON.

use crate::engine::settings::SettingWarning;
use std::io::Write;
use std::path::PathBuf;

use jiff::Timestamp;
use serde::Serialize;

use super::render;
use crate::cluster::layering::{EffectiveSettings, Layers, layer};
use crate::config::FleetConfig;
use crate::engine::settings::{ExpanderKind, SettingsPatch};
use crate::engine::{EngineState, FleetPolicy, Plan, run_once_with};
use crate::model::dump::{DumpReport, SnapshotBuilder};

#[derive(clap::Args, Debug, Clone)]
pub struct PlanArgs {
    /// A cluster dump: what `fleetscaler dump` writes, what `oc get nodes,pods,... -A -o yaml`
    /// prints, multi-document YAML, or JSON. Repeat to combine several files into one cluster.
    #[arg(long = "snapshot", short = 's', value_name = "FILE", required = true)]
    pub snapshots: Vec<PathBuf>,
    /// fleet.toml to take the cluster's settings from (needs --cluster).
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub config: Option<PathBuf>,
    /// The cluster's name in fleet.toml (needs --config).
    #[arg(long, value_name = "NAME", requires = "config")]
    pub cluster: Option<String>,
    /// The time of the decision, RFC 3339 (default: now).
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
    /// Seed for the random expander and tie-breaks (the same seed gives the same plan).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Expander chain, e.g. `priority,least-waste` (least-waste, most-pods, least-nodes, random, priority).
    #[arg(long, value_name = "LIST")]
    pub expander: Option<String>,
    /// Any setting as in fleet.toml, e.g. `--set max_nodes_total=30 --set 'cores={max=64}'`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// The engine's memory from an earlier pass (JSON); read if the file exists.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// The fleet's policy as the hub gave it to this cluster's pass (JSON, e.g.
    /// `{"scaleDownHold": "fleet degraded: ..."}`; docs/plan-format.md), to replay its plan.
    #[arg(long, value_name = "FILE")]
    pub fleet_policy: Option<PathBuf>,
    /// Where to write the engine's memory after this pass, to replay a sequence of dumps.
    #[arg(long, value_name = "FILE")]
    pub save_state: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Json,
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Read(#[from] crate::files::FileError),
    #[error(transparent)]
    Dump(#[from] crate::model::dump::DumpError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("cluster {name:?} is not in {config} (clusters: {known})")]
    UnknownCluster {
        name: String,
        config: String,
        known: String,
    },
    #[error("{flag}: {message}")]
    Flag { flag: String, message: String },
    #[error("cannot write the plan: {0}")]
    Write(#[from] std::io::Error),
    #[error("state file {path}: {source}")]
    State {
        path: String,
        source: crate::engine::state::StateError,
    },
    #[error("cannot write the state to {path}: {source}")]
    SaveState {
        path: String,
        source: std::io::Error,
    },
}

/// The plan with what it was computed from, as `--output json` prints it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanReport {
    #[serde(flatten)]
    pub plan: Plan,
    pub settings: serde_json::Value,
    pub input: InputReport,
}

#[derive(Serialize)]
pub struct InputReport {
    pub files: Vec<String>,
    pub objects: usize,
    pub skipped: std::collections::BTreeMap<String, usize>,
}

pub fn run(args: &PlanArgs, out: &mut impl Write) -> Result<(), PlanError> {
    let report = compute(args)?;
    match args.output {
        OutputFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &report).map_err(std::io::Error::other)?;
            writeln!(out)?;
        }
        OutputFormat::Text => render::plan(&report, out)?,
    }
    Ok(())
}

/// Everything `plan` does but printing.
pub fn compute(args: &PlanArgs) -> Result<PlanReport, PlanError> {
    let (snapshot, dump) = read_snapshots(&args.snapshots)?;
    let fleet = match &args.config {
        Some(path) => Some(FleetConfig::load(path)?),
        None => None,
    };
    let cluster = match (&fleet, &args.cluster) {
        (Some(f), Some(name)) => Some(f.cluster(name).ok_or_else(|| {
            PlanError::UnknownCluster {
                name: name.clone(),
                config: args
                    .config
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                known: f
                    .clusters
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }
        })?),
        _ => None,
    };
    let flags = flag_patch(args)?;
    let effective = layer(Layers {
        fleet_defaults: fleet.as_ref().map(|f| &f.defaults),
        cluster_autoscaler: snapshot.cluster_autoscaler().map(|c| &c.spec),
        cluster,
        flags: Some(&flags),
    });
    let now = match &args.now {
        Some(t) => t.parse::<Timestamp>().map_err(|e| PlanError::Flag {
            flag: "--now".into(),
            message: format!("{t:?} is not an RFC 3339 time ({e})"),
        })?,
        None => Timestamp::now(),
    };
    let mut state = read_state(args.state.as_deref())?;
    let policy = read_policy(args.fleet_policy.as_deref())?;
    let mut plan = run_once_with(&snapshot, &mut state, &effective.settings, &policy, now);
    if let Some(path) = &args.save_state {
        std::fs::write(path, state.to_json()).map_err(|source| PlanError::SaveState {
            path: path.display().to_string(),
            source,
        })?;
    }
    let missing = missing_machines(&snapshot, &effective.settings.node_groups, &dump);
    let first = dump
        .warnings
        .iter()
        .cloned()
        .chain(missing)
        .chain(effective.warnings.iter().map(SettingWarning::warning));
    plan.warnings.splice(0..0, first);
    Ok(PlanReport {
        plan,
        settings: settings_with_sources(&effective),
        input: InputReport {
            files: args
                .snapshots
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            objects: dump.objects,
            skipped: dump.skipped,
        },
    })
}

/// Groups that want replicas while the dump holds no Machine of their API at all: the
/// engine counts each replica as a node on its way, which is wrong when the Machines were
/// only left out of the dump (`oc get machines` resolves to one Machine API), so say so.
/// A dump that listed the API's Machines (even none: a typed `MachineList`) is believed.
fn missing_machines(
    snapshot: &crate::model::ClusterSnapshot,
    explicit: &[crate::engine::settings::NodeGroupSpec],
    dump: &DumpReport,
) -> Vec<crate::model::Warning> {
    use crate::model::{Warning, WarningCode};
    if (snapshot.scalables.iter()).all(|r| dump.machines_listed.contains(&r.api)) {
        return Vec::new();
    }
    let groups = crate::engine::nodegroups::discover(snapshot, explicit);
    groups
        .groups
        .iter()
        .filter(|g| g.target > 0 && g.machines.is_empty())
        .filter(|g| !dump.machines_listed.contains(&g.api))
        .map(|g| {
            Warning::general(
                WarningCode::IncompleteDump,
                format!(
                    "the dump has no Machines of group {}, which wants {}: upcoming nodes may \
                     be invented; make the dump with `fleetscaler dump`",
                    g.id, g.target
                ),
            )
        })
        .collect()
}

/// The state file's engine memory; a file that does not exist yet is an empty memory.
fn read_policy(path: Option<&std::path::Path>) -> Result<FleetPolicy, PlanError> {
    let Some(path) = path else {
        return Ok(FleetPolicy::none());
    };
    let name = path.display().to_string();
    let text = crate::files::read_text(path, crate::files::DOCUMENT)?;
    FleetPolicy::from_json(&text).map_err(|e| PlanError::Flag {
        flag: format!("--fleet-policy {name}"),
        message: e.to_string(),
    })
}

fn read_state(path: Option<&std::path::Path>) -> Result<EngineState, PlanError> {
    let Some(path) = path else {
        return Ok(EngineState::default());
    };
    let name = path.display().to_string();
    match crate::files::read_text(path, crate::files::STATE) {
        Ok(text) => {
            EngineState::from_json(&text).map_err(|source| PlanError::State { path: name, source })
        }
        Err(e) if e.is_not_found() => Ok(EngineState::default()),
        Err(e) => Err(e.into()),
    }
}

fn read_snapshots(
    paths: &[PathBuf],
) -> Result<(crate::model::ClusterSnapshot, DumpReport), PlanError> {
    let mut builder = SnapshotBuilder::default();
    for path in paths {
        let name = path.display().to_string();
        let text = crate::files::read_text(path, crate::files::DUMP)?;
        builder.add_text(&text, &name)?;
    }
    Ok(builder.finish())
}

fn flag_patch(args: &PlanArgs) -> Result<SettingsPatch, PlanError> {
    let mut patch =
        crate::config::assign::parse_assignments(&args.set).map_err(|e| PlanError::Flag {
            flag: format!("--set {}", e.assignment),
            message: e.message,
        })?;
    if let Some(seed) = args.seed {
        patch.seed = Some(seed);
    }
    if let Some(list) = &args.expander {
        patch.expanders = Some(
            ExpanderKind::parse_chain(list).map_err(|e| PlanError::Flag {
                flag: "--expander".into(),
                message: e.to_string(),
            })?,
        );
    }
    Ok(patch)
}

/// `{key: {value, source}}` for every setting.
pub fn settings_with_sources(e: &EffectiveSettings) -> serde_json::Value {
    e.with_sources()
}
