//! `fleetscaler check-config`: validates fleet.toml (every problem at once, with its key
//! path) and prints what each cluster will run with, and where each value comes from.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::plan::{OutputFormat, settings_with_sources};
use crate::cluster::layering::{Layers, layer};
use crate::config::tracing::TracingState;
use crate::config::{ConfigError, FleetConfig, FleetHealthConfig, HubConfig, MembershipConfig};
use crate::model::duration::format_go_duration;

#[derive(clap::Args, Debug, Clone)]
pub struct CheckConfigArgs {
    /// The fleet configuration (environment overrides FLEETSCALER_<TABLE>__<KEY> apply).
    #[arg(long, short = 'c', value_name = "FILE", default_value = "fleet.toml")]
    pub config: PathBuf,
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Check the file alone, not the kubeconfig files and contexts it names (a fleet.toml
    /// checked away from where the hub runs, e.g. rendered from the Helm chart).
    #[arg(long)]
    pub offline: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckConfigError {
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    #[error("cannot write: {0}")]
    Write(#[from] std::io::Error),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    hub: HubConfig,
    /// `[hub.tracing]` with the `OTEL_*` variables of this process.
    traces: TracingState,
    fleet: FleetHealthConfig,
    /// `[membership]`: clusters found in the management cluster at run time, besides these.
    membership: MembershipConfig,
    clusters: Vec<ClusterReport>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterReport {
    name: String,
    context: String,
    kubeconfig: Option<String>,
    enabled: bool,
    dry_run: bool,
    use_cluster_autoscaler: bool,
    /// `{key: {value, source}}`, before the cluster's own ClusterAutoscaler (read at run time).
    settings: serde_json::Value,
    warnings: Vec<crate::model::Warning>,
}

pub fn run(args: &CheckConfigArgs, out: &mut impl Write) -> Result<(), CheckConfigError> {
    let cfg = FleetConfig::load(&args.config)?;
    if !args.offline {
        let issues = super::kubeconfigs::check(&cfg);
        if !issues.is_empty() {
            return Err(ConfigError::new(&args.config.display().to_string(), issues).into());
        }
    }
    let clusters = cfg
        .clusters
        .iter()
        .map(|c| {
            // Away from the cluster: its ClusterAutoscaler is not known.
            let eff = layer(Layers {
                fleet_defaults: Some(&cfg.defaults),
                cluster_autoscaler: None,
                cluster: Some(c),
                flags: None,
            });
            ClusterReport {
                name: c.name.to_string(),
                context: c.context().to_string(),
                kubeconfig: c.kubeconfig.as_ref().map(|p| p.display().to_string()),
                enabled: c.enabled,
                dry_run: c.dry_run.unwrap_or(cfg.hub.dry_run),
                use_cluster_autoscaler: c.use_cluster_autoscaler,
                settings: settings_with_sources(&eff),
                warnings: eff.warnings.iter().map(|w| w.warning()).collect(),
            }
        })
        .collect();
    // `load` validated the variables: this cannot fail.
    let traces = cfg
        .hub
        .tracing
        .with_process_env()
        .unwrap_or_else(|issues| TracingState::Off {
            why: format!("{} problem(s)", issues.len()),
        });
    let report = Report {
        hub: cfg.hub.clone(),
        traces,
        fleet: cfg.fleet.clone(),
        membership: cfg.membership.clone(),
        clusters,
    };
    match args.output {
        OutputFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &report).map_err(std::io::Error::other)?;
            writeln!(out)?;
        }
        OutputFormat::Text => text(&args.config.display().to_string(), &report, out)?,
    }
    Ok(())
}

/// `degraded when more than 50% of clusters are unhealthy; scale-down then paused fleet-wide`.
fn describe_fleet(f: &FleetHealthConfig) -> String {
    let mut when = vec![format!(
        "more than {}% of clusters",
        f.max_unhealthy_percentage
    )];
    if let Some(n) = f.max_unhealthy_clusters {
        when.push(format!("more than {n} clusters"));
    }
    let mut line = format!("degraded when {} are unhealthy", when.join(" or "));
    if let Some(p) = f.max_unready_nodes_percentage {
        line.push_str(&format!(", or more than {p}% of all nodes unready"));
    }
    let then = if f.pause_scale_down_when_degraded {
        "scale-down then paused in every cluster"
    } else {
        "nothing paused then (pause_scale_down_when_degraded = false)"
    };
    format!("{line}; {then}")
}

fn text(name: &str, r: &Report, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "{name}: valid, {} cluster(s)", r.clusters.len())?;
    let h = &r.hub;
    let le = &h.leader_election;
    writeln!(out, "\n[hub]")?;
    writeln!(
        out,
        "  listen {}; a pass at least every {} (and {} after a relevant event goes quiet, {} at most); API calls time out after {}",
        h.listen,
        format_go_duration(h.scan_interval),
        format_go_duration(h.debounce),
        format_go_duration(h.debounce_max),
        format_go_duration(h.request_timeout)
    )?;
    let turns = match h.pass_concurrency {
        0 => "one per core".to_string(),
        n => n.to_string(),
    };
    writeln!(out, "  engine passes at once across the fleet: {turns}")?;
    let kubeconfigs = if h.kubeconfigs.is_empty() {
        "$KUBECONFIG or ~/.kube/config".to_string()
    } else {
        h.kubeconfigs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    writeln!(
        out,
        "  kubeconfigs: {kubeconfigs}; status namespace {}; dry run: {}",
        h.status_namespace,
        yes(h.dry_run)
    )?;
    if le.enabled {
        let ctx = le.context.as_deref().unwrap_or("in-cluster");
        writeln!(
            out,
            "  leader election: Lease {}/{} on {ctx}",
            le.namespace, le.lease_name
        )?;
    } else {
        writeln!(out, "  leader election: off")?;
    }
    let sh = &h.sharding;
    if sh.enabled {
        let ctx = sh.context.as_deref().unwrap_or("in-cluster");
        writeln!(
            out,
            "  sharding: the replicas share the clusters through Leases {}/{}-* on {ctx} (lease {}, renewed every {})",
            sh.namespace,
            sh.lease_prefix,
            format_go_duration(sh.lease_duration),
            format_go_duration(sh.retry_period)
        )?;
    }
    writeln!(out, "  traces: {}", r.traces.describe())?;
    writeln!(out, "\n[fleet]\n  {}", describe_fleet(&r.fleet))?;
    writeln!(out, "\n[membership]\n  {}", r.membership.describe())?;
    for c in &r.clusters {
        let kc = c.kubeconfig.as_deref().unwrap_or("the hub's kubeconfigs");
        let state = if c.enabled { "enabled" } else { "DISABLED" };
        let writes = if c.dry_run { "dry run" } else { "writes" };
        writeln!(
            out,
            "\ncluster {} (context {} in {kc}; {state}; {writes})",
            c.name, c.context
        )?;
        let ca = if c.use_cluster_autoscaler {
            "its ClusterAutoscaler resource, read at run time, applies between fleet defaults and cluster overrides"
        } else {
            "its ClusterAutoscaler resource is ignored"
        };
        writeln!(out, "  settings ({ca}):")?;
        for (key, v) in c.settings.as_object().into_iter().flatten() {
            let value = v["value"].to_string();
            let source = v["source"].as_str().unwrap_or("");
            writeln!(out, "    {key:<38} {value:<24} {}", words(source))?;
        }
        for w in &c.warnings {
            writeln!(out, "  warning: {w}")?;
        }
    }
    Ok(())
}

/// `clusterOverrides` → `cluster overrides`.
fn words(camel: &str) -> String {
    let mut out = String::new();
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push(' ');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
