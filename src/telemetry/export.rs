//! What the OTLP exports are told, as the binary resolved it (fleet.toml's `[hub.tracing]`
//! and the `OTEL_*` variables: `config::tracing`). Telemetry's own types, so that it knows
//! nothing of the configuration, the engine or the hub: the binary converts at its edge.

use std::time::Duration;

/// The OTLP transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Grpc,
    HttpProtobuf,
}

/// Which traces are kept: a share of new ones, optionally following the parent's choice.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    pub parent_based: bool,
    /// 1 keeps every trace, 0 none.
    pub ratio: f64,
}

/// Where and how spans are sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Traces {
    /// The URL spans are sent to (for HTTP, with its `/v1/traces` path).
    pub endpoint: String,
    pub protocol: Protocol,
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
    pub sampler: Sampling,
    pub service_name: String,
    /// Resource attributes besides `service.name` and `service.instance.id`.
    pub resource: Vec<(String, String)>,
}

/// Where, how and how often the metrics are sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Metrics {
    /// The URL metrics are sent to (for HTTP, with its `/v1/metrics` path).
    pub endpoint: String,
    pub protocol: Protocol,
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
    pub interval: Duration,
    pub service_name: String,
    pub resource: Vec<(String, String)>,
}

/// A span of another trace, by its ids in lowercase hex (32 and 16 digits).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanRef {
    pub trace_id: String,
    pub span_id: String,
}
