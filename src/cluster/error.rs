//! Errors of calls to a cluster's API server: each names the operation that failed and has
//! a stable [`Category`] that decides what happens next (retry, back off, report) and labels
//! metrics and events.

use std::future::Future;
use std::time::Duration;

use serde::Serialize;

/// What kind of failure a call met. Stable: used in status, metrics and events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Category {
    /// The object changed since it was read (409 on a resourceVersion precondition).
    Conflict,
    /// The object is gone (404).
    NotFound,
    /// Refused for now: a PodDisruptionBudget (429) or throttling.
    TooManyRequests,
    /// Not allowed (401, 403).
    Forbidden,
    /// The request was wrong for the object (400, 422): a bug or an odd object; or the
    /// configuration behind it (a kubeconfig that cannot be used).
    Invalid,
    /// No answer in time.
    Timeout,
    /// The API server failed or could not be reached (5xx, connection errors).
    Unavailable,
    /// The TLS handshake failed: the server's certificate is not trusted (a wrong CA in the
    /// kubeconfig, a name it is not valid for), or the client's is refused. It will not pass
    /// by itself, unlike a refused connection.
    Tls,
    /// A response that could not be read, or anything else.
    Other,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Conflict => "conflict",
            Category::NotFound => "notFound",
            Category::TooManyRequests => "tooManyRequests",
            Category::Forbidden => "forbidden",
            Category::Invalid => "invalid",
            Category::Timeout => "timeout",
            Category::Unavailable => "unavailable",
            Category::Tls => "tls",
            Category::Other => "other",
        }
    }

    /// Worth trying again soon with fresh state.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            Category::Conflict
                | Category::TooManyRequests
                | Category::Timeout
                | Category::Unavailable
        )
    }
}

/// A failed call to a cluster's API server.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("{op}: no answer within {}s", .after.as_secs_f64())]
    Timeout { op: String, after: Duration },
    #[error("{op}: {}", chain(source))]
    Api {
        op: String,
        #[source]
        source: kube::Error,
    },
}

impl CallError {
    pub fn category(&self) -> Category {
        match self {
            CallError::Timeout { .. } => Category::Timeout,
            CallError::Api { source, .. } => category_of(source),
        }
    }

    /// The HTTP status the API server answered with, if it answered.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            CallError::Api {
                source: kube::Error::Api(status),
                ..
            } => Some(status.code),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.category() == Category::NotFound
    }

    pub fn is_conflict(&self) -> bool {
        self.category() == Category::Conflict
    }
}

/// An error and its causes in one line: kube's connection errors say only "client error
/// (Connect)"; what failed (refused, a certificate) is further down.
fn chain(e: &kube::Error) -> String {
    let mut out = e.to_string();
    let mut next = std::error::Error::source(e);
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

/// The TLS failure somewhere in an error's causes, if there is one. rustls's error travels
/// inside `io::Error`s (two, from hyper's connector), whose `source()` skips what they
/// wrap: each is opened with `get_ref`.
fn tls_failure<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(e);
    while let Some(cause) = next {
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        next = match cause
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => cause.source(),
        };
    }
    None
}

fn category_of(e: &kube::Error) -> Category {
    if tls_failure(e).is_some() {
        return Category::Tls;
    }
    match e {
        kube::Error::Api(status) => match status.code {
            409 => Category::Conflict,
            404 => Category::NotFound,
            429 => Category::TooManyRequests,
            401 | 403 => Category::Forbidden,
            400 | 405 | 415 | 422 => Category::Invalid,
            504 => Category::Timeout,
            500..=599 => Category::Unavailable,
            _ => Category::Other,
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::HttpError(_) => {
            Category::Unavailable
        }
        _ => Category::Other,
    }
}

/// `d` give or take half of it, so that callers refused together (a whole fleet's watches
/// after an API server restart, writers throttled at once) do not come back together.
/// Jitter from the clock's nanoseconds: no randomness crate for this.
pub fn jittered(d: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos());
    d / 2 + d.mul_f64(f64::from(nanos % 1_000_000) / 1_000_000.0)
}

/// Runs one API call with a deadline, naming the operation in any error.
///
/// Every call to a cluster goes through here: a hung API server costs one runner at most
/// `timeout` per call, never the hub.
pub async fn call<T>(
    op: impl FnOnce() -> String,
    timeout: Duration,
    fut: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, CallError> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(source)) => Err(CallError::Api { op: op(), source }),
        Err(_) => Err(CallError::Timeout {
            op: op(),
            after: timeout,
        }),
    }
}

/// One write to a cluster's API server, as its span describes it: OTel's HTTP client and
/// Kubernetes conventions (`http.request.method`, `k8s.namespace.name`, `k8s.node.name`,
/// `k8s.pod.name`), plus `fleetscaler.k8s.kind` and `fleetscaler.k8s.name` for every kind,
/// since the conventions name few (no Machine, ConfigMap or Event).
#[derive(Clone, Copy, Debug)]
pub struct Write<'a> {
    /// `PUT`, `PATCH`, `POST`, `DELETE`.
    pub method: &'static str,
    pub kind: &'static str,
    /// `scale`, `eviction`.
    pub subresource: Option<&'static str>,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
}

impl Write<'_> {
    /// The write's span, under the current one. Disabled (and free) when traces are off.
    pub fn span(&self) -> tracing::Span {
        use tracing::field::Empty;
        let span = tracing::info_span!(target: crate::telemetry::TRACES, "api_write",
            otel.name = %self.span_name(),
            otel.kind = "client",
            http.request.method = self.method,
            k8s.namespace.name = Empty,
            k8s.node.name = Empty,
            k8s.pod.name = Empty,
            fleetscaler.k8s.kind = self.kind,
            fleetscaler.k8s.name = self.name,
            fleetscaler.k8s.subresource = Empty,
            http.response.status_code = Empty,
            error.type = Empty,
            otel.status_code = Empty,
            otel.status_description = Empty,
        );
        if span.is_disabled() {
            return span;
        }
        if let Some(ns) = self.namespace {
            span.record("k8s.namespace.name", ns);
        }
        if let Some(sub) = self.subresource {
            span.record("fleetscaler.k8s.subresource", sub);
        }
        match self.kind {
            "Node" => span.record("k8s.node.name", self.name),
            "Pod" => span.record("k8s.pod.name", self.name),
            _ => &span,
        };
        span
    }

    /// `PATCH Node`, `PUT MachineSet scale`: the HTTP client convention's `{method} {target}`.
    fn span_name(&self) -> String {
        match self.subresource {
            Some(sub) => format!("{} {} {sub}", self.method, self.kind),
            None => format!("{} {}", self.method, self.kind),
        }
    }
}

/// [`call`] for a write, in its own span (see [`Write`]).
pub async fn write<T>(
    target: Write<'_>,
    op: impl FnOnce() -> String,
    timeout: Duration,
    fut: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, CallError> {
    write_in(target.span(), op, timeout, fut).await
}

/// [`call`] in `span`, which records the failure, if any.
pub async fn write_in<T>(
    span: tracing::Span,
    op: impl FnOnce() -> String,
    timeout: Duration,
    fut: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, CallError> {
    use tracing::Instrument;
    let result = call(op, timeout, fut).instrument(span.clone()).await;
    if let Err(e) = &result {
        record_failure(&span, e);
    }
    result
}

/// On a write's span: `error.type` (the [`Category`]), the status code if the API server
/// answered, and the span's status.
pub fn record_failure(span: &tracing::Span, e: &CallError) {
    if span.is_disabled() {
        return;
    }
    span.record("error.type", e.category().as_str());
    if let Some(code) = e.status_code() {
        span.record("http.response.status_code", i64::from(code));
    }
    span.record("otel.status_code", "error");
    span.record("otel.status_description", tracing::field::display(e));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine names its spans' target itself (it depends on nothing above it); the
    /// telemetry routes only this one to traces, so a phase under another name would be lost
    /// from every trace, or logged.
    #[test]
    fn the_engine_and_the_hub_trace_to_one_target() {
        assert_eq!(crate::engine::trace::TRACES, crate::telemetry::TRACES);
    }

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("x", "y").with_code(code),
        ))
    }

    #[test]
    fn status_codes_map_to_categories() {
        let cases = [
            (409, Category::Conflict),
            (404, Category::NotFound),
            (429, Category::TooManyRequests),
            (403, Category::Forbidden),
            (422, Category::Invalid),
            (503, Category::Unavailable),
            (504, Category::Timeout),
        ];
        for (code, want) in cases {
            let e = CallError::Api {
                op: "patch".into(),
                source: api_error(code),
            };
            assert_eq!(e.category(), want, "{code}");
            assert_eq!(e.status_code(), Some(code));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_hangs_times_out_naming_the_operation() {
        let hang = std::future::pending::<Result<(), kube::Error>>();
        let err = call(|| "get node a".into(), Duration::from_secs(3), hang)
            .await
            .unwrap_err();
        assert_eq!(err.category(), Category::Timeout);
        assert_eq!(err.to_string(), "get node a: no answer within 3s");
    }

    /// The fields a span got, at its creation and later, as text.
    #[derive(Clone, Default)]
    struct Fields(std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>);

    impl tracing::field::Visit for Fields {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            let text = format!("{value:?}").trim_matches('"').to_string();
            self.0
                .lock()
                .unwrap()
                .push((field.name().to_string(), text));
        }
    }

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Fields {
        fn on_new_span(
            &self,
            attrs: &tracing::span::Attributes<'_>,
            _: &tracing::span::Id,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            attrs.record(&mut self.clone());
        }

        fn on_record(
            &self,
            _: &tracing::span::Id,
            values: &tracing::span::Record<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            values.record(&mut self.clone());
        }
    }

    #[tokio::test]
    async fn a_failed_write_is_a_client_span_with_its_error() {
        use tracing_subscriber::layer::SubscriberExt;
        let fields = Fields::default();
        let subscriber = tracing_subscriber::Registry::default().with(fields.clone());
        let _guard = tracing::subscriber::set_default(subscriber);
        let target = Write {
            method: "PATCH",
            kind: "Node",
            subresource: None,
            namespace: None,
            name: "worker-1",
        };
        let refused = async { Err::<(), _>(api_error(409)) };
        let err = write(
            target,
            || "taint node worker-1".into(),
            Duration::from_secs(1),
            refused,
        )
        .await
        .unwrap_err();
        assert!(err.is_conflict());
        let got = fields.0.lock().unwrap().clone();
        let want = [
            ("otel.name", "PATCH Node"),
            ("otel.kind", "client"),
            ("http.request.method", "PATCH"),
            ("k8s.node.name", "worker-1"),
            ("fleetscaler.k8s.kind", "Node"),
            ("error.type", "conflict"),
            ("http.response.status_code", "409"),
            ("otel.status_code", "error"),
        ];
        for (key, value) in want {
            assert!(
                got.iter().any(|(k, v)| k == key && v == value),
                "{key} = {value} not in {got:?}"
            );
        }
        assert!(!got.iter().any(|(k, _)| k == "k8s.pod.name"), "{got:?}");
    }

    #[test]
    fn jitter_stays_within_half_of_the_wait() {
        for ms in [10u64, 500, 30_000] {
            let d = Duration::from_millis(ms);
            let j = jittered(d);
            assert!(j >= d / 2 && j < d + d / 2, "{ms}: {j:?}");
        }
    }
}
