//! fleet.toml `[hub.tracing]`: traces over OTLP, and how it combines with the standard
//! `OTEL_*` environment variables. The hub's metrics over OTLP share the table and its
//! endpoint (`metrics`, a child module: docs/metrics.md).
//!
//! Precedence, key by key: a key set in fleet.toml wins; else the signal-specific variable
//! (`OTEL_EXPORTER_OTLP_TRACES_*`); else the generic one (`OTEL_EXPORTER_OTLP_*`); else the
//! OTLP default. Traces are on when an endpoint is known from either, unless
//! `enabled = false`, `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` (an explicit
//! `enabled = true` wins over both variables, and without an endpoint sends to the OTLP
//! default on localhost). [`resolve`] is pure: the environment is a parameter.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize, Serializer};

use super::ConfigIssue;
use crate::engine::settings::opt_duration_serde;
use crate::model::duration::format_go_duration;
use crate::telemetry::export;

/// The service name when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` names one.
pub const DEFAULT_SERVICE_NAME: &str = "fleetscaler";
/// The OTLP default of each exporter's deadline.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// `[hub.tracing]` as written. Every key is optional: an absent one is taken from the
/// environment (see the module's documentation).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TracingConfig {
    /// `false` turns traces off whatever the environment says; `true` turns them on even
    /// without an endpoint (then the OTLP default on localhost).
    pub enabled: Option<bool>,
    /// The collector: `http://collector:4317` for gRPC, `http://collector:4318` for
    /// HTTP (`/v1/traces` is added when the URL has no path).
    pub endpoint: Option<String>,
    pub protocol: Option<Protocol>,
    /// Sent with every export (an API key, a tenant). Values are never printed.
    #[serde(serialize_with = "names_only")]
    pub headers: BTreeMap<String, String>,
    /// Deadline of one export.
    #[serde(with = "opt_duration_serde")]
    pub timeout: Option<Duration>,
    /// Share of passes traced, 0 to 1 (parent-based trace-id ratio); 1 when absent.
    pub sampler_ratio: Option<f64>,
    /// `true` also sends the metrics of `/metrics` to the same collector; `false` never;
    /// absent, `OTEL_METRICS_EXPORTER=otlp` asks for them.
    pub metrics: Option<bool>,
    /// Where metrics go when it is not where the traces go (a traces endpoint with a path
    /// other than `/v1/traces`). HTTP: `/v1/metrics` is added when the URL has no path.
    pub metrics_endpoint: Option<String>,
    /// How often metrics are sent; 60 s when absent.
    #[serde(with = "opt_duration_serde")]
    pub metrics_interval: Option<Duration>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub enum Protocol {
    #[serde(rename = "grpc")]
    Grpc,
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

impl Protocol {
    /// The same, as telemetry takes it.
    pub fn export(self) -> export::Protocol {
        match self {
            Protocol::Grpc => export::Protocol::Grpc,
            Protocol::HttpProtobuf => export::Protocol::HttpProtobuf,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        }
    }

    fn parse(text: &str) -> Result<Protocol, String> {
        match text.trim() {
            "grpc" => Ok(Protocol::Grpc),
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            other => Err(format!(
                "{other:?} is not supported: use \"grpc\" or \"http/protobuf\""
            )),
        }
    }
}

/// Header values may be credentials: configuration printouts show the names only.
fn names_only<S: Serializer>(headers: &BTreeMap<String, String>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(headers.keys().map(|k| (k, "<redacted>")))
}

/// Which spans are kept: a share of new traces, optionally following the parent's choice.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SamplerChoice {
    pub parent_based: bool,
    /// 1 keeps every trace, 0 none.
    pub ratio: f64,
}

impl fmt::Display for SamplerChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = if self.parent_based {
            "parentbased_"
        } else {
            ""
        };
        if self.ratio >= 1.0 {
            write!(f, "{prefix}always_on")
        } else if self.ratio <= 0.0 {
            write!(f, "{prefix}always_off")
        } else {
            write!(f, "{prefix}traceidratio {}", self.ratio)
        }
    }
}

/// The effective tracing settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tracing {
    /// The URL spans are sent to (for HTTP, with its `/v1/traces` path).
    pub endpoint: String,
    pub protocol: Protocol,
    #[serde(serialize_with = "pair_names_only")]
    pub headers: Vec<(String, String)>,
    #[serde(serialize_with = "crate::engine::settings::duration_serde::serialize")]
    pub timeout: Duration,
    pub sampler: SamplerChoice,
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES`, without `service.name`.
    pub resource: Vec<(String, String)>,
}

fn pair_names_only<S: Serializer>(headers: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(headers.iter().map(|(k, _)| (k, "<redacted>")))
}

impl Tracing {
    /// What telemetry is told to send spans with.
    pub fn export(&self) -> export::Traces {
        export::Traces {
            endpoint: self.endpoint.clone(),
            protocol: self.protocol.export(),
            headers: self.headers.clone(),
            timeout: self.timeout,
            sampler: export::Sampling {
                parent_based: self.sampler.parent_based,
                ratio: self.sampler.ratio,
            },
            service_name: self.service_name.clone(),
            resource: self.resource.clone(),
        }
    }

    /// One line for logs and `check-config` (header names only).
    pub fn describe(&self) -> String {
        let mut text = format!(
            "{} to {}, timeout {}, sampler {}, service.name {}",
            self.protocol.as_str(),
            self.endpoint,
            format_go_duration(self.timeout),
            self.sampler,
            self.service_name
        );
        if !self.headers.is_empty() {
            let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
            text.push_str(&format!(", headers {}", names.join(", ")));
        }
        text
    }
}

/// Whether traces are sent, and how.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum TracingState {
    Off { why: String },
    On(Tracing),
}

impl TracingState {
    pub fn describe(&self) -> String {
        match self {
            TracingState::Off { why } => format!("off ({why})"),
            TracingState::On(t) => format!("on: {}", t.describe()),
        }
    }
}

/// The OTLP signal a setting is resolved for: each has its own variables and HTTP path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Signal {
    Traces,
    Metrics,
}

impl Signal {
    /// The signal's part of its variables' names (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
    fn var_part(self) -> &'static str {
        match self {
            Signal::Traces => "TRACES",
            Signal::Metrics => "METRICS",
        }
    }

    /// The OTLP/HTTP path of the signal's exports.
    fn http_path(self) -> &'static str {
        match self {
            Signal::Traces => "/v1/traces",
            Signal::Metrics => "/v1/metrics",
        }
    }
}

/// What one setting resolved to, or the problems found on the way.
struct Resolver<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    signal: Signal,
    issues: Vec<ConfigIssue>,
}

impl<'a> Resolver<'a> {
    fn new(env: &'a dyn Fn(&str) -> Option<String>, signal: Signal) -> Self {
        Resolver {
            env,
            signal,
            issues: Vec::new(),
        }
    }

    /// The variable's value, if set and not blank.
    fn var(&self, key: &str) -> Option<(String, String)> {
        (self.env)(key)
            .filter(|v| !v.trim().is_empty())
            .map(|v| (key.to_string(), v))
    }

    /// The signal-specific variable (`OTEL_EXPORTER_OTLP_TRACES_{suffix}`), else the generic one.
    fn otlp_var(&self, suffix: &str) -> Option<(String, String)> {
        let part = self.signal.var_part();
        self.var(&format!("OTEL_EXPORTER_OTLP_{part}_{suffix}"))
            .or_else(|| self.var(&format!("OTEL_EXPORTER_OTLP_{suffix}")))
    }

    fn bad(&mut self, key: &str, message: String) {
        self.issues.push(ConfigIssue {
            key: key.to_string(),
            message,
        });
    }

    /// With the signal off, the variables that would configure it do not matter (they may
    /// be meant for another program); fleet.toml's keys and the `switches` still do.
    fn keep_when_off(&mut self, switches: &[&str]) {
        self.issues
            .retain(|i| i.key.starts_with("hub.tracing") || switches.contains(&i.key.as_str()));
    }

    /// Every problem found, or `value` when there was none.
    fn finish<T>(self, value: T) -> Result<T, Vec<ConfigIssue>> {
        if self.issues.is_empty() {
            Ok(value)
        } else {
            Err(self.issues)
        }
    }
}

/// Resolves `[hub.tracing]` against the environment (`env` returns a variable's value).
/// Every problem is returned at once, each with the fleet.toml key or the variable's name.
pub fn resolve(
    cfg: &TracingConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<TracingState, Vec<ConfigIssue>> {
    let mut r = Resolver::new(env, Signal::Traces);
    let protocol = protocol(cfg, &mut r);
    let given = cfg.endpoint.is_some()
        || r.var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        || r.var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
    let endpoint = endpoint(cfg, protocol, &mut r);
    let off = off_reason(cfg, given, &mut r);
    let headers = headers(cfg, &mut r);
    let timeout = timeout(cfg, &mut r);
    let sampler = sampler(cfg, &mut r);
    let (service_name, resource) = service(&mut r);
    let tracing = Tracing {
        endpoint: endpoint.unwrap_or_else(|| default_endpoint(protocol, Signal::Traces)),
        protocol,
        headers,
        timeout,
        sampler,
        service_name,
        resource,
    };
    if off.is_some() {
        r.keep_when_off(&["OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"]);
    }
    r.finish(match off {
        Some(why) => TracingState::Off { why },
        None => TracingState::On(tracing),
    })
}

fn protocol(cfg: &TracingConfig, r: &mut Resolver) -> Protocol {
    if let Some(p) = cfg.protocol {
        return p;
    }
    match r.otlp_var("PROTOCOL") {
        Some((key, value)) => Protocol::parse(&value).unwrap_or_else(|e| {
            r.bad(&key, e);
            Protocol::HttpProtobuf
        }),
        None => Protocol::HttpProtobuf,
    }
}

/// The endpoint given, if any, as the URL spans go to.
fn endpoint(cfg: &TracingConfig, protocol: Protocol, r: &mut Resolver) -> Option<String> {
    // (key, value, whether `/v1/traces` is added for HTTP)
    let (key, value, base) = match &cfg.endpoint {
        Some(e) => ("hub.tracing.endpoint".to_string(), e.clone(), true),
        None => match r.var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            Some((k, v)) => (k, v, false),
            None => {
                let (k, v) = r.var("OTEL_EXPORTER_OTLP_ENDPOINT")?;
                (k, v, true)
            }
        },
    };
    let (value, uri) = checked_url(&key, &value, r)?;
    Some(match protocol {
        Protocol::HttpProtobuf if base => with_signal_path(&value, uri.path(), r.signal),
        _ => value,
    })
}

/// The URL, trimmed, if it is an `http://` or `https://` URL with a host.
fn checked_url(key: &str, value: &str, r: &mut Resolver) -> Option<(String, http::Uri)> {
    let value = value.trim().to_string();
    let uri: http::Uri = match value.parse() {
        Ok(uri) => uri,
        Err(e) => {
            r.bad(key, format!("{value:?} is not a URL: {e}"));
            return None;
        }
    };
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    if !scheme_ok || uri.authority().is_none() {
        r.bad(
            key,
            format!("{value:?} must be an http:// or https:// URL with a host"),
        );
        return None;
    }
    Some((value, uri))
}

/// The OTLP/HTTP rule for a base URL: the signal's path (`v1/traces`) appended to its path. A
/// fleet.toml endpoint that already has a path beyond `/` is taken as the full URL.
fn with_signal_path(value: &str, path: &str, signal: Signal) -> String {
    if path.is_empty() || path == "/" {
        format!("{}{}", value.trim_end_matches('/'), signal.http_path())
    } else {
        value.to_string()
    }
}

fn default_endpoint(protocol: Protocol, signal: Signal) -> String {
    match protocol {
        Protocol::Grpc => "http://localhost:4317".into(),
        Protocol::HttpProtobuf => format!("http://localhost:4318{}", signal.http_path()),
    }
}

/// `OTEL_SDK_DISABLED=true`: every signal off unless fleet.toml turns it on.
fn sdk_disabled(r: &mut Resolver) -> bool {
    let Some((key, v)) = r.var("OTEL_SDK_DISABLED") else {
        return false;
    };
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => true,
        "false" => false,
        _ => {
            r.bad(&key, format!("{v:?} is neither true nor false"));
            false
        }
    }
}

/// Why traces are off, or `None` when they are on.
fn off_reason(cfg: &TracingConfig, has_endpoint: bool, r: &mut Resolver) -> Option<String> {
    let sdk_disabled = sdk_disabled(r);
    let exporter_none = match r.var("OTEL_TRACES_EXPORTER") {
        Some((key, v)) => match v.trim() {
            "none" => true,
            "otlp" => false,
            _ => {
                r.bad(&key, format!("{v:?} is not supported: only otlp (or none)"));
                false
            }
        },
        None => false,
    };
    match cfg.enabled {
        Some(false) => Some("hub.tracing.enabled = false".into()),
        Some(true) => None,
        None if sdk_disabled => Some("OTEL_SDK_DISABLED=true".into()),
        None if exporter_none => Some("OTEL_TRACES_EXPORTER=none".into()),
        None if !has_endpoint => {
            Some("no endpoint: set hub.tracing.endpoint or OTEL_EXPORTER_OTLP_ENDPOINT".into())
        }
        None => None,
    }
}

/// The variable's headers (signal-specific, else generic), then fleet.toml's over them.
fn headers(cfg: &TracingConfig, r: &mut Resolver) -> Vec<(String, String)> {
    let mut merged = BTreeMap::new();
    if let Some((key, value)) = r.otlp_var("HEADERS") {
        match parse_pairs(&value) {
            Ok(pairs) => merged.extend(pairs),
            Err(e) => r.bad(&key, e),
        }
    }
    merged.extend(cfg.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
    for (name, value) in &merged {
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            r.bad(
                "hub.tracing.headers",
                format!("{name:?} is not a header name"),
            );
        } else if http::HeaderValue::from_str(value).is_err() {
            r.bad(
                "hub.tracing.headers",
                format!("the value of {name:?} is not a valid header value"),
            );
        }
    }
    merged.into_iter().collect()
}

/// `key1=value1,key2=value2` with percent-encoded values (the W3C baggage format the OTel
/// specification uses for headers and resource attributes).
fn parse_pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    for item in text.split(',').filter(|i| !i.trim().is_empty()) {
        let Some((k, v)) = item.split_once('=') else {
            return Err(format!("{:?} is not key=value", item.trim()));
        };
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s.trim())
                .decode_utf8()
                .map(|c| c.into_owned())
                .map_err(|_| format!("{:?} is not UTF-8 once decoded", s.trim()))
        };
        let key = decode(k)?;
        if key.is_empty() {
            return Err(format!("{:?} has an empty key", item.trim()));
        }
        pairs.push((key, decode(v)?));
    }
    Ok(pairs)
}

fn timeout(cfg: &TracingConfig, r: &mut Resolver) -> Duration {
    if let Some(t) = cfg.timeout {
        if t.is_zero() {
            r.bad("hub.tracing.timeout", "must be longer than 0s".into());
        }
        return t;
    }
    let Some((key, value)) = r.otlp_var("TIMEOUT") else {
        return DEFAULT_TIMEOUT;
    };
    positive_millis(&key, &value, r).unwrap_or(DEFAULT_TIMEOUT)
}

/// A variable holding a positive number of milliseconds (`OTEL_EXPORTER_OTLP_TIMEOUT`).
fn positive_millis(key: &str, value: &str, r: &mut Resolver) -> Option<Duration> {
    match value.trim().parse::<u64>() {
        Ok(ms) if ms > 0 => Some(Duration::from_millis(ms)),
        _ => {
            r.bad(
                key,
                format!("{value:?} is not a positive number of milliseconds"),
            );
            None
        }
    }
}

fn sampler(cfg: &TracingConfig, r: &mut Resolver) -> SamplerChoice {
    let always = |parent_based| SamplerChoice {
        parent_based,
        ratio: 1.0,
    };
    if let Some(ratio) = cfg.sampler_ratio {
        if !(0.0..=1.0).contains(&ratio) {
            r.bad(
                "hub.tracing.sampler_ratio",
                format!("{ratio} is not within 0 and 1"),
            );
        }
        return SamplerChoice {
            parent_based: true,
            ratio: ratio.clamp(0.0, 1.0),
        };
    }
    let Some((key, name)) = r.var("OTEL_TRACES_SAMPLER") else {
        return always(true);
    };
    let (parent_based, kind) = match name.trim().strip_prefix("parentbased_") {
        Some(rest) => (true, rest.to_string()),
        None => (false, name.trim().to_string()),
    };
    match kind.as_str() {
        "always_on" => always(parent_based),
        "always_off" => SamplerChoice {
            parent_based,
            ratio: 0.0,
        },
        "traceidratio" => SamplerChoice {
            parent_based,
            ratio: sampler_arg(r),
        },
        _ => {
            r.bad(
                &key,
                format!("{name:?} is not supported: use always_on, always_off, traceidratio or their parentbased_ forms"),
            );
            always(true)
        }
    }
}

/// `OTEL_TRACES_SAMPLER_ARG`: the ratio, 1 when absent.
fn sampler_arg(r: &mut Resolver) -> f64 {
    let Some((key, value)) = r.var("OTEL_TRACES_SAMPLER_ARG") else {
        return 1.0;
    };
    match value.trim().parse::<f64>() {
        Ok(ratio) if (0.0..=1.0).contains(&ratio) => ratio,
        _ => {
            r.bad(&key, format!("{value:?} is not a ratio within 0 and 1"));
            1.0
        }
    }
}

/// The service name (`OTEL_SERVICE_NAME` wins over the attribute `service.name`) and the
/// other attributes of `OTEL_RESOURCE_ATTRIBUTES`.
fn service(r: &mut Resolver) -> (String, Vec<(String, String)>) {
    let mut attributes = Vec::new();
    if let Some((key, value)) = r.var("OTEL_RESOURCE_ATTRIBUTES") {
        match parse_pairs(&value) {
            Ok(pairs) => attributes = pairs,
            Err(e) => r.bad(&key, e),
        }
    }
    let from_attributes = attributes
        .iter()
        .find(|(k, _)| k == "service.name")
        .map(|(_, v)| v.clone());
    let name = r
        .var("OTEL_SERVICE_NAME")
        .map(|(_, v)| v.trim().to_string())
        .or(from_attributes)
        .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_string());
    attributes.retain(|(k, _)| k != "service.name");
    (name, attributes)
}

impl TracingConfig {
    /// The effective settings with the `OTEL_*` variables of this process.
    pub fn with_process_env(&self) -> Result<TracingState, Vec<ConfigIssue>> {
        resolve(self, &|k| std::env::var(k).ok())
    }

    /// The effective metrics export with the `OTEL_*` variables of this process.
    pub fn metrics_with_process_env(&self) -> Result<MetricsState, Vec<ConfigIssue>> {
        resolve_metrics(self, &|k| std::env::var(k).ok())
    }

    /// Problems of `[hub.tracing]` and of the `OTEL_*` variables of this process, for traces
    /// and metrics (a problem both meet is named once).
    pub fn validate(&self, issues: &mut Vec<ConfigIssue>) {
        let traces = self.with_process_env().err().unwrap_or_default();
        let metrics = self.metrics_with_process_env().err().unwrap_or_default();
        for issue in traces.into_iter().chain(metrics) {
            if !issues.contains(&issue) {
                issues.push(issue);
            }
        }
    }
}

#[path = "tracing_metrics.rs"]
mod metrics;
pub use metrics::{MetricsExport, MetricsState, resolve_metrics};

#[cfg(test)]
#[path = "tracing_tests.rs"]
mod tests;
