//! The hub's metrics over OTLP: `[hub.tracing]`'s `metrics*` keys, with the rest of the
//! table (protocol, headers, timeout) and the `OTEL_*` variables read as for traces, but
//! with the metrics' own variables (`OTEL_EXPORTER_OTLP_METRICS_*`).
//!
//! Off unless asked for (`metrics = true` or `OTEL_METRICS_EXPORTER=otlp`): the hub serves
//! the same metrics on `/metrics`, and a hub that already sends traces should not start
//! sending a second copy of its metrics because it was upgraded.

use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};

use super::{
    Protocol, Resolver, Signal, TracingConfig, checked_url, default_endpoint, headers,
    positive_millis, protocol, sdk_disabled, service, timeout, with_signal_path,
};
use crate::config::ConfigIssue;
use crate::model::duration::format_go_duration;

/// The OpenTelemetry default of `OTEL_METRIC_EXPORT_INTERVAL`.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// The effective metrics export.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricsExport {
    /// The URL metrics are sent to (for HTTP, with its `/v1/metrics` path).
    pub endpoint: String,
    pub protocol: Protocol,
    #[serde(serialize_with = "pair_names_only")]
    pub headers: Vec<(String, String)>,
    #[serde(serialize_with = "crate::engine::settings::duration_serde::serialize")]
    pub timeout: Duration,
    /// How often the metrics are read and sent.
    #[serde(serialize_with = "crate::engine::settings::duration_serde::serialize")]
    pub interval: Duration,
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES`, without `service.name`.
    pub resource: Vec<(String, String)>,
}

fn pair_names_only<S: Serializer>(headers: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(headers.iter().map(|(k, _)| (k, "<redacted>")))
}

impl MetricsExport {
    /// What telemetry is told to send the metrics with.
    pub fn export(&self) -> crate::telemetry::export::Metrics {
        crate::telemetry::export::Metrics {
            endpoint: self.endpoint.clone(),
            protocol: self.protocol.export(),
            headers: self.headers.clone(),
            timeout: self.timeout,
            interval: self.interval,
            service_name: self.service_name.clone(),
            resource: self.resource.clone(),
        }
    }

    /// One line for logs (header names only).
    pub fn describe(&self) -> String {
        let mut text = format!(
            "{} to {} every {}, timeout {}, service.name {}",
            self.protocol.as_str(),
            self.endpoint,
            format_go_duration(self.interval),
            format_go_duration(self.timeout),
            self.service_name
        );
        if !self.headers.is_empty() {
            let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
            text.push_str(&format!(", headers {}", names.join(", ")));
        }
        text
    }
}

/// Whether metrics are sent over OTLP, and how.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum MetricsState {
    Off { why: String },
    On(MetricsExport),
}

impl fmt::Display for MetricsState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetricsState::Off { why } => write!(f, "off ({why})"),
            MetricsState::On(m) => write!(f, "on: {}", m.describe()),
        }
    }
}

/// Resolves the metrics export of `[hub.tracing]` against the environment. Every problem
/// is returned at once, each with the fleet.toml key or the variable's name.
pub fn resolve_metrics(
    cfg: &TracingConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<MetricsState, Vec<ConfigIssue>> {
    let mut r = Resolver::new(env, Signal::Metrics);
    let protocol = protocol(cfg, &mut r);
    let off = off_reason(cfg, &mut r);
    let endpoint = endpoint(cfg, protocol, off.is_none(), &mut r);
    let headers = headers(cfg, &mut r);
    let timeout = timeout(cfg, &mut r);
    let interval = interval(cfg, &mut r);
    let (service_name, resource) = service(&mut r);
    let export = MetricsExport {
        endpoint: endpoint.unwrap_or_else(|| default_endpoint(protocol, Signal::Metrics)),
        protocol,
        headers,
        timeout,
        interval,
        service_name,
        resource,
    };
    if off.is_some() {
        r.keep_when_off(&["OTEL_SDK_DISABLED", "OTEL_METRICS_EXPORTER"]);
    }
    r.finish(match off {
        Some(why) => MetricsState::Off { why },
        None => MetricsState::On(export),
    })
}

/// Why metrics are not sent, or `None` when they are.
fn off_reason(cfg: &TracingConfig, r: &mut Resolver) -> Option<String> {
    let disabled = sdk_disabled(r);
    let asked = match r.var("OTEL_METRICS_EXPORTER") {
        Some((key, v)) => match v.trim() {
            "otlp" => Some(true),
            "none" => Some(false),
            _ => {
                r.bad(&key, format!("{v:?} is not supported: only otlp (or none)"));
                None
            }
        },
        None => None,
    };
    match cfg.metrics {
        Some(false) => Some("hub.tracing.metrics = false".into()),
        Some(true) => None,
        None if disabled => Some("OTEL_SDK_DISABLED=true".into()),
        None => match asked {
            Some(true) => None,
            Some(false) => Some("OTEL_METRICS_EXPORTER=none".into()),
            None => Some(
                "not asked for: set hub.tracing.metrics = true or OTEL_METRICS_EXPORTER=otlp"
                    .into(),
            ),
        },
    }
}

/// Where metrics go: `metrics_endpoint`, else where the traces of fleet.toml go, else the
/// metrics' variable (the full URL), else the generic one (a base URL). `on`: whether a
/// traces endpoint that cannot be turned into a metrics one is a problem.
fn endpoint(cfg: &TracingConfig, protocol: Protocol, on: bool, r: &mut Resolver) -> Option<String> {
    let grpc = protocol == Protocol::Grpc;
    if let Some(value) = &cfg.metrics_endpoint {
        let (value, uri) = checked_url("hub.tracing.metrics_endpoint", value, r)?;
        return Some(if grpc {
            value
        } else {
            with_signal_path(&value, uri.path(), Signal::Metrics)
        });
    }
    if let Some(value) = &cfg.endpoint {
        let (value, uri) = checked_url("hub.tracing.endpoint", value, r)?;
        return if grpc {
            Some(value)
        } else {
            from_traces_url(&value, uri.path(), on, r)
        };
    }
    if let Some((key, value)) = r.var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") {
        return checked_url(&key, &value, r).map(|(value, _)| value);
    }
    let (key, value) = r.var("OTEL_EXPORTER_OTLP_ENDPOINT")?;
    let (value, uri) = checked_url(&key, &value, r)?;
    Some(if grpc {
        value
    } else {
        with_signal_path(&value, uri.path(), Signal::Metrics)
    })
}

/// The HTTP metrics URL beside a fleet.toml traces endpoint: `/v1/metrics` for a base URL
/// or one ending in `/v1/traces`; any other path is the collector's own, not guessed at.
fn from_traces_url(value: &str, path: &str, on: bool, r: &mut Resolver) -> Option<String> {
    if let Some(prefix) = value.strip_suffix(Signal::Traces.http_path()) {
        return Some(format!("{prefix}{}", Signal::Metrics.http_path()));
    }
    if path.is_empty() || path == "/" {
        return Some(with_signal_path(value, path, Signal::Metrics));
    }
    if on {
        r.bad(
            "hub.tracing.endpoint",
            format!(
                "{value:?} has a path that is not /v1/traces, so the metrics' URL cannot be derived from it: set hub.tracing.metrics_endpoint"
            ),
        );
    }
    None
}

/// `metrics_interval`, else `OTEL_METRIC_EXPORT_INTERVAL` (milliseconds), else 60 s.
fn interval(cfg: &TracingConfig, r: &mut Resolver) -> Duration {
    if let Some(t) = cfg.metrics_interval {
        if t.is_zero() {
            r.bad(
                "hub.tracing.metrics_interval",
                "must be longer than 0s".into(),
            );
        }
        return t;
    }
    match r.var("OTEL_METRIC_EXPORT_INTERVAL") {
        Some((key, value)) => positive_millis(&key, &value, r).unwrap_or(DEFAULT_INTERVAL),
        None => DEFAULT_INTERVAL,
    }
}
