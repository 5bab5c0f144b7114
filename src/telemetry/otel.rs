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
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanData, SpanExporter};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;

use super::export::{Protocol, Sampling, SpanRef, Traces};
use super::otlp::{Transport, process_env, resource};

/// Whether the OpenTelemetry layer is installed; [`Parent::current`] is free when not.
static ON: AtomicBool = AtomicBool::new(false);

#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    #[error("cannot build the OTLP {signal} exporter for {endpoint}: {message}")]
    Exporter {
        signal: &'static str,
        endpoint: String,
        message: String,
    },
    #[error("{0} need a tokio runtime to export from")]
    NoRuntime(&'static str),
}

/// The tracer provider and the layer that feeds it.
pub(super) struct Pipeline {
    pub provider: SdkTracerProvider,
    pub layer: Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>,
}

/// Builds the exporter, the batch worker and the layer. Must run on the hub's runtime.
pub(super) fn pipeline(t: &Traces, instance: &str) -> Result<Pipeline, OtelError> {
    let runtime =
        tokio::runtime::Handle::try_current().map_err(|_| OtelError::NoRuntime("traces"))?;
    let exporter = OnRuntime {
        inner: Arc::new(exporter(t)?),
        runtime,
    };
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(sampler(t.sampler))
        .with_resource(resource(
            &t.service_name,
            &t.resource,
            instance,
            &process_env,
        ))
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

fn exporter(t: &Traces) -> Result<opentelemetry_otlp::SpanExporter, OtelError> {
    let transport = Transport {
        signal: "traces",
        endpoint: &t.endpoint,
        headers: &t.headers,
        timeout: t.timeout,
    };
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let built = match t.protocol {
        Protocol::Grpc => transport.grpc(builder.with_tonic())?.build(),
        Protocol::HttpProtobuf => transport.http(builder.with_http())?.build(),
    };
    transport.built(built)
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

fn sampler(choice: Sampling) -> Sampler {
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

/// `span`'s ids, for another trace to link to: when traces are on and the span is sampled
/// (an unsampled span is never sent, so a link to it would lead nowhere). None, and free,
/// when traces are off.
pub fn trace_ref(span: &tracing::Span) -> Option<SpanRef> {
    if !ON.load(Ordering::Relaxed) || span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    (sc.is_valid() && sc.is_sampled()).then(|| SpanRef {
        trace_id: sc.trace_id().to_string(),
        span_id: sc.span_id().to_string(),
    })
}

/// Adds to `span` a link to the span `to` names, with `attributes`. Nothing when traces are
/// off, or when the ids do not read as ids (a hand-written fleet policy).
pub fn link(span: &tracing::Span, to: &SpanRef, attributes: &[(&'static str, &str)]) {
    if !ON.load(Ordering::Relaxed) || span.is_disabled() {
        return;
    }
    let Some(linked) = span_context(to) else {
        return;
    };
    let attributes = attributes
        .iter()
        .map(|(k, v)| KeyValue::new(*k, v.to_string()))
        .collect();
    span.add_link_with_attributes(linked, attributes);
}

/// The span `to` names, as a link's target: sampled (it was, to be named), from elsewhere.
fn span_context(to: &SpanRef) -> Option<SpanContext> {
    let trace_id = TraceId::from_hex(&to.trace_id).ok()?;
    let span_id = SpanId::from_hex(&to.span_id).ok()?;
    let cx = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::SAMPLED,
        true,
        TraceState::NONE,
    );
    cx.is_valid().then_some(cx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samplers_map_to_the_sdk() {
        let s = |parent_based, ratio| {
            format!(
                "{:?}",
                sampler(Sampling {
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
        assert_eq!(trace_ref(&tracing::Span::current()), None);
    }

    #[test]
    fn a_span_ref_reads_back_as_the_span_it_names() {
        let to = SpanRef {
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            span_id: "b7ad6b7169203331".into(),
        };
        let cx = span_context(&to).unwrap();
        assert_eq!(cx.trace_id().to_string(), to.trace_id);
        assert_eq!(cx.span_id().to_string(), to.span_id);
        assert!(cx.is_sampled() && cx.is_remote());
        let zeros = SpanRef {
            trace_id: "0".repeat(32),
            span_id: to.span_id.clone(),
        };
        assert!(span_context(&zeros).is_none(), "an invalid trace id");
        let junk = SpanRef {
            trace_id: "not hex".into(),
            span_id: to.span_id.clone(),
        };
        assert!(span_context(&junk).is_none());
    }
}
