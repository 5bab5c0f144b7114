//! Traces over OTLP: the OpenTelemetry SDK behind a `tracing` layer, built only when
//! tracing is on (no exporter, no batch worker, no layer otherwise).
//!
//! The SDK's batch worker is a thread of its own that drives each export with a blocking
//! executor; the gRPC (tonic) and HTTP (hyper) clients need the tokio runtime. Exports are
//! therefore spawned onto the hub's runtime ([`OnRuntime`]) and the worker waits for them.
//! The rest of the crate sees no OpenTelemetry type: spans are `tracing` spans with the
//! target [`super::TRACES`], and a span started in another task finds its parent through
//! [`Parent`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::resource::TelemetryResourceDetector;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanData, SpanExporter};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;

use crate::config::tracing::{Protocol, SamplerChoice, Tracing};

/// Whether the OpenTelemetry layer is installed; [`Parent::current`] is free when not.
static ON: AtomicBool = AtomicBool::new(false);

#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    #[error("cannot build the OTLP exporter for {endpoint}: {message}")]
    Exporter { endpoint: String, message: String },
    #[error("traces need a tokio runtime to export from")]
    NoRuntime,
}

/// The tracer provider and the layer that feeds it.
pub(super) struct Pipeline {
    pub provider: SdkTracerProvider,
    pub layer: Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>,
}

/// Builds the exporter, the batch worker and the layer. Must run on the hub's runtime.
pub(super) fn pipeline(t: &Tracing, instance: &str) -> Result<Pipeline, OtelError> {
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| OtelError::NoRuntime)?;
    let exporter = OnRuntime {
        inner: Arc::new(exporter(t)?),
        runtime,
    };
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(sampler(t.sampler))
        .with_resource(resource(t, instance, &env))
        .build();
    let tracer = provider.tracer("fleetscaler");
    // The hub's spans and events, and its warnings as span events; nothing of other crates
    // (kube's HTTP spans would double the writes' spans).
    let wanted = Targets::new()
        .with_target(super::TRACES, tracing::Level::TRACE)
        .with_target("fleetscaler", tracing::Level::WARN);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(wanted)
        .boxed();
    Ok(Pipeline { provider, layer })
}

/// The layer is installed: [`Parent`] has spans to look at from now on.
pub(super) fn installed() {
    ON.store(true, Ordering::Relaxed);
}

fn exporter(t: &Tracing) -> Result<opentelemetry_otlp::SpanExporter, OtelError> {
    let failed = |e: &dyn std::fmt::Display| OtelError::Exporter {
        endpoint: t.endpoint.clone(),
        message: e.to_string(),
    };
    let headers = header_map(&t.headers).map_err(|e| failed(&e))?;
    let https = t.endpoint.starts_with("https://");
    let built = match t.protocol {
        Protocol::Grpc => {
            let mut builder = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(&t.endpoint)
                .with_timeout(t.timeout)
                .with_interceptor(SetMetadata(Arc::new(headers)));
            if https {
                let tls = tonic::transport::ClientTlsConfig::new().with_native_roots();
                builder = builder.with_tls_config(tls);
            }
            builder.build()
        }
        Protocol::HttpProtobuf => {
            let builder = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(&t.endpoint)
                .with_timeout(t.timeout);
            if https {
                let connector = hyper_rustls::HttpsConnectorBuilder::new()
                    .with_native_roots()
                    .map_err(|e| failed(&format!("no system root certificates: {e}")))?
                    .https_or_http()
                    .enable_http1()
                    .build();
                let client =
                    opentelemetry_http::hyper::HyperClient::new(connector, t.timeout, None);
                builder
                    .with_http_client(SetHeaders { client, headers })
                    .build()
            } else {
                let client =
                    opentelemetry_http::hyper::HyperClient::with_default_connector(t.timeout, None);
                builder
                    .with_http_client(SetHeaders { client, headers })
                    .build()
            }
        }
    };
    built.map_err(|e| failed(&e))
}

fn header_map(headers: &[(String, String)]) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    headers
        .iter()
        .map(|(k, v)| {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("{k}: {e}"))?;
            let value = HeaderValue::from_str(v).map_err(|e| format!("{k}: {e}"))?;
            Ok((name, value))
        })
        .collect()
}

/// The headers of fleet.toml win: the exporter adds those of the `OTEL_*` variables
/// itself, then these are set over them on every request.
#[derive(Clone, Debug)]
struct SetMetadata(Arc<Vec<(HeaderName, HeaderValue)>>);

impl tonic::service::Interceptor for SetMetadata {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        for (name, value) in self.0.iter() {
            let key = tonic::metadata::MetadataKey::from_bytes(name.as_str().as_bytes());
            let value = tonic::metadata::MetadataValue::try_from(value.as_bytes());
            if let (Ok(key), Ok(value)) = (key, value) {
                request.metadata_mut().insert(key, value);
            }
        }
        Ok(request)
    }
}

#[derive(Debug)]
struct SetHeaders<C> {
    client: C,
    headers: Vec<(HeaderName, HeaderValue)>,
}

type Sent<'a> = Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'a>>;

impl<C: HttpClient> HttpClient for SetHeaders<C> {
    fn send_bytes<'a, 'b>(&'a self, mut request: Request<Bytes>) -> Sent<'b>
    where
        'a: 'b,
        Self: 'b,
    {
        for (name, value) in &self.headers {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        self.client.send_bytes(request)
    }
}

/// An exporter whose exports run on the tokio runtime, whichever thread asks for them.
#[derive(Debug)]
struct OnRuntime<E> {
    inner: Arc<E>,
    runtime: tokio::runtime::Handle,
}

impl<E: SpanExporter + 'static> SpanExporter for OnRuntime<E> {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        let inner = self.inner.clone();
        let task = self.runtime.spawn(async move { inner.export(batch).await });
        async move {
            task.await.unwrap_or_else(|e| {
                Err(OTelSdkError::InternalFailure(format!(
                    "the export task ended: {e}"
                )))
            })
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        // Called while the provider is built, before any export shares the exporter.
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.set_resource(resource);
        }
    }
}

fn sampler(choice: SamplerChoice) -> Sampler {
    let root = if choice.ratio >= 1.0 {
        Sampler::AlwaysOn
    } else if choice.ratio <= 0.0 {
        Sampler::AlwaysOff
    } else {
        Sampler::TraceIdRatioBased(choice.ratio)
    };
    if choice.parent_based {
        Sampler::ParentBased(Box::new(root))
    } else {
        root
    }
}

/// The resource attributes: what the hub knows of itself, then `OTEL_RESOURCE_ATTRIBUTES`
/// over them, then the service name.
fn resource(t: &Tracing, instance: &str, env: &dyn Fn(&str) -> Option<String>) -> Resource {
    Resource::builder_empty()
        .with_detector(Box::new(TelemetryResourceDetector))
        .with_attributes(resource_attributes(t, instance, env))
        .build()
}

/// Every attribute but the SDK's own (`telemetry.sdk.*`), in the order they apply.
pub(super) fn resource_attributes(
    t: &Tracing,
    instance: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
        KeyValue::new("service.instance.id", instance.to_string()),
    ];
    if let Some(host) = host_name(env) {
        attributes.push(KeyValue::new("host.name", host));
    }
    for (key, var) in [
        ("k8s.pod.name", "POD_NAME"),
        ("k8s.namespace.name", "POD_NAMESPACE"),
    ] {
        if let Some(value) = env(var) {
            attributes.push(KeyValue::new(key, value));
        }
    }
    let user = t
        .resource
        .iter()
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()));
    let mut merged: Vec<KeyValue> = Vec::new();
    for kv in attributes.into_iter().chain(user) {
        merged.retain(|old| old.key != kv.key);
        merged.push(kv);
    }
    merged.push(KeyValue::new("service.name", t.service_name.clone()));
    merged
}

fn host_name(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    env("HOSTNAME").or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
    })
}

/// The span a span started in another task belongs under (a removal, an event written
/// later): taken where the work was decided, given to the new span before it starts.
/// Holding it does not keep the parent open. Empty, and free, when traces are off.
#[derive(Clone, Debug, Default)]
pub struct Parent(Option<Context>);

impl Parent {
    /// The current span, when traces are on and it is recorded.
    pub fn current() -> Parent {
        if !ON.load(Ordering::Relaxed) {
            return Parent(None);
        }
        let cx = tracing::Span::current().context();
        Parent(cx.has_active_span().then_some(cx))
    }

    /// Makes `span` (just created, not yet entered) a child of this parent.
    pub fn adopt(&self, span: &tracing::Span) {
        if let Some(cx) = &self.0 {
            // Fails only for a disabled span or one already started: then it stays a root.
            let _ = span.set_parent(cx.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tracing::DEFAULT_SERVICE_NAME;

    fn tracing_with(resource: Vec<(&str, &str)>) -> Tracing {
        Tracing {
            endpoint: "http://c:4318/v1/traces".into(),
            protocol: Protocol::HttpProtobuf,
            headers: Vec::new(),
            timeout: Duration::from_secs(1),
            sampler: SamplerChoice {
                parent_based: true,
                ratio: 1.0,
            },
            service_name: DEFAULT_SERVICE_NAME.into(),
            resource: resource
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn as_pairs(kvs: &[KeyValue]) -> Vec<(String, String)> {
        kvs.iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect()
    }

    #[test]
    fn resource_attributes_follow_the_conventions_and_the_user_wins() {
        let env = |k: &str| match k {
            "HOSTNAME" => Some("node-7".to_string()),
            "POD_NAME" => Some("fleetscaler-0".to_string()),
            "POD_NAMESPACE" => Some("fleetscaler".to_string()),
            _ => None,
        };
        let t = tracing_with(vec![("host.name", "override"), ("team", "infra")]);
        let got = as_pairs(&resource_attributes(&t, "fleetscaler-0_1a2b", &env));
        let want = [
            ("service.version", env!("CARGO_PKG_VERSION")),
            ("service.instance.id", "fleetscaler-0_1a2b"),
            ("k8s.pod.name", "fleetscaler-0"),
            ("k8s.namespace.name", "fleetscaler"),
            ("host.name", "override"),
            ("team", "infra"),
            ("service.name", "fleetscaler"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn samplers_map_to_the_sdk() {
        let s = |parent_based, ratio| {
            format!(
                "{:?}",
                sampler(SamplerChoice {
                    parent_based,
                    ratio
                })
            )
        };
        assert_eq!(s(false, 1.0), "AlwaysOn");
        assert_eq!(s(false, 0.0), "AlwaysOff");
        assert_eq!(s(false, 0.5), "TraceIdRatioBased(0.5)");
        assert!(s(true, 0.5).starts_with("ParentBased"), "{}", s(true, 0.5));
    }

    #[test]
    fn a_parent_taken_while_traces_are_off_is_empty() {
        assert!(Parent::current().0.is_none());
    }
}
