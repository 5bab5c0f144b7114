//! Logs as JSON, one object a line on stderr, for log collectors:
//! `{"timestamp", "level", "target", "message", "trace_id", "span_id", "fields"}`.
//! `fields` holds the event's fields over those of the spans it is in (the runner's
//! `k8s.cluster.name`); `trace_id` and `span_id` are those of the traced span it was logged
//! in (a pass, one of its phases or writes), so that a line leads to its trace. Without
//! traces, no ids are looked for.

use std::fmt;
use std::io::Write;

use opentelemetry::trace::TraceContextExt;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The log layer of `--log-format json`.
pub(super) struct JsonLogs {
    /// Traces are on: the OpenTelemetry context of the span entered is the line's trace.
    trace_ids: bool,
    write: fn(&str),
}

impl JsonLogs {
    pub(super) fn stderr(trace_ids: bool) -> Self {
        JsonLogs {
            trace_ids,
            write: write_line,
        }
    }
}

/// A span's fields, kept for the lines logged inside it.
struct SpanFields(Map<String, Value>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for JsonLogs {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Map::new();
        attrs.record(&mut Fields(&mut fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        if let Some(fields) = span.extensions_mut().get_mut::<SpanFields>() {
            values.record(&mut Fields(&mut fields.0));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Map::new();
        for span in ctx
            .event_scope(event)
            .into_iter()
            .flat_map(|s| s.from_root())
        {
            if let Some(own) = span.extensions().get::<SpanFields>() {
                fields.extend(own.0.clone());
            }
        }
        event.record(&mut Fields(&mut fields));
        let message = match fields.remove("message") {
            Some(Value::String(m)) => m,
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let meta = event.metadata();
        let line = Line {
            level: meta.level().as_str(),
            target: meta.target(),
            message: &message,
            ids: if self.trace_ids { current_ids() } else { None },
            fields,
        };
        (self.write)(&line.to_json());
    }
}

/// The trace and span of the span entered, when it is sampled (else there is no trace to
/// lead to).
fn current_ids() -> Option<(String, String)> {
    let cx = opentelemetry::Context::current();
    let span = cx.span();
    let sc = span.span_context();
    (sc.is_valid() && sc.is_sampled())
        .then(|| (sc.trace_id().to_string(), sc.span_id().to_string()))
}

/// One log line.
struct Line<'a> {
    level: &'a str,
    target: &'a str,
    message: &'a str,
    ids: Option<(String, String)>,
    fields: Map<String, Value>,
}

impl Line<'_> {
    /// The keys in a fixed order, the timestamp first, as people read them.
    fn to_json(&self) -> String {
        let mut out = String::with_capacity(160);
        out.push('{');
        push(&mut out, "timestamp", &jiff::Timestamp::now().to_string());
        for (key, value) in [
            ("level", self.level),
            ("target", self.target),
            ("message", self.message),
        ] {
            out.push(',');
            push(&mut out, key, value);
        }
        if let Some((trace_id, span_id)) = &self.ids {
            out.push(',');
            push(&mut out, "trace_id", trace_id);
            out.push(',');
            push(&mut out, "span_id", span_id);
        }
        if !self.fields.is_empty() {
            out.push_str(",\"fields\":");
            out.push_str(&Value::Object(self.fields.clone()).to_string());
        }
        out.push('}');
        out
    }
}

fn push(out: &mut String, key: &str, value: &str) {
    out.push_str(&Value::from(key).to_string());
    out.push(':');
    out.push_str(&Value::from(value).to_string());
}

/// One line, in one write so that lines from several threads never interleave. A log line
/// that cannot be written has nowhere else to go: it is dropped.
fn write_line(json: &str) {
    let mut line = Vec::with_capacity(json.len() + 1);
    line.extend_from_slice(json.as_bytes());
    line.push(b'\n');
    let _ = std::io::stderr().lock().write_all(&line);
}

/// A line of the hub's own, outside the subscriber (a stop, an error before logging
/// started), in the same shape.
pub fn line(level: tracing::Level, message: &str) {
    let line = Line {
        level: level.as_str(),
        target: "fleetscaler",
        message,
        ids: None,
        fields: Map::new(),
    };
    write_line(&line.to_json());
}

/// Fields as JSON values: numbers and booleans as such, the rest as text.
struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().into(), Value::from(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), Value::from(format!("{value:?}")));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use opentelemetry::trace::TracerProvider as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

    fn capture(line: &str) {
        LINES.lock().unwrap().push(line.to_string());
    }

    /// The lines `f` logs through a JSON layer, parsed, with OpenTelemetry's layer beside it
    /// when `traced`; and the trace id of the span `f` returns.
    fn logged(traced: bool, f: impl FnOnce() -> tracing::Span) -> (Vec<Value>, String) {
        let json = JsonLogs {
            trace_ids: traced,
            write: capture,
        };
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let otel =
            traced.then(|| tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        let subscriber = tracing_subscriber::Registry::default()
            .with(json)
            .with(otel);
        let (lines, trace_id) = tracing::subscriber::with_default(subscriber, || {
            LINES.lock().unwrap().clear();
            let span = f();
            let trace_id = span.context().span().span_context().trace_id().to_string();
            let lines = std::mem::take(&mut *LINES.lock().unwrap());
            (lines, trace_id)
        });
        let parsed = lines
            .iter()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        (parsed, trace_id)
    }

    #[test]
    fn lines_carry_their_spans_fields_and_with_traces_their_ids() {
        let run = || {
            let cluster = tracing::info_span!("cluster", k8s.cluster.name = "sim-1");
            let _in_cluster = cluster.enter();
            let pass = tracing::info_span!("pass");
            pass.in_scope(|| tracing::info!(pods = 3, ok = true, "scaled up {}", "group-a"));
            pass
        };
        let (lines, _) = logged(false, run);
        let [line] = &lines[..] else {
            panic!("{lines:?}")
        };
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["message"], "scaled up group-a");
        assert_eq!(line["fields"]["k8s.cluster.name"], "sim-1");
        assert_eq!(line["fields"]["pods"], 3);
        assert_eq!(line["fields"]["ok"], true);
        assert!(line.get("trace_id").is_none(), "no traces, no ids: {line}");

        let (lines, trace_id) = logged(true, run);
        assert_eq!(lines[0]["trace_id"], trace_id.as_str(), "{:?}", lines[0]);
        assert_eq!(lines[0]["span_id"].as_str().map(str::len), Some(16));
        assert_ne!(trace_id, opentelemetry::trace::TraceId::INVALID.to_string());
    }

    #[test]
    fn a_line_is_one_json_object_with_the_keys_in_order() {
        let mut fields = Map::new();
        fields.insert("k8s.cluster.name".into(), Value::from("sim-1"));
        fields.insert("pods".into(), Value::from(3));
        let line = Line {
            level: "INFO",
            target: "fleetscaler::cluster",
            message: "scaled \"up\"\nagain",
            ids: Some((
                "0af7651916cd43dd8448eb211c80319c".into(),
                "b7ad6b7169203331".into(),
            )),
            fields,
        };
        let text = line.to_json();
        assert!(!text.contains('\n'), "{text}");
        let parsed: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(parsed["message"], "scaled \"up\"\nagain");
        assert_eq!(parsed["trace_id"], "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(parsed["fields"]["k8s.cluster.name"], "sim-1");
        assert_eq!(parsed["fields"]["pods"], 3);
        let keys: Vec<&str> = [
            "timestamp",
            "level",
            "target",
            "message",
            "trace_id",
            "span_id",
        ]
        .into_iter()
        .filter(|k| text.contains(&format!("\"{k}\":")))
        .collect();
        assert_eq!(keys.len(), 6, "{text}");
        assert!(text.starts_with("{\"timestamp\":"), "{text}");
        assert!(
            parsed["timestamp"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z'))
        );
    }
}
