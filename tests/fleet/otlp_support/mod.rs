//! OTLP receivers on loopback, as a collector would be: gRPC (tonic) and HTTP/protobuf
//! (hyper and prost), each taking traces and metrics; and `fleetscaler run` as a child
//! process (the tracing subscriber is global to a process) with its stderr in a file.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use prost::Message;
use tokio::net::TcpListener;

pub const LONG: Duration = Duration::from_secs(30);

/// What a receiver got: the export requests of each signal, and the `x-test` header of each.
#[derive(Default)]
pub struct Inbox {
    pub traces: Vec<ExportTraceServiceRequest>,
    pub metrics: Vec<ExportMetricsServiceRequest>,
    pub x_test: Vec<String>,
    /// The paths requests were sent to (HTTP), in order.
    pub paths: Vec<String>,
}

pub type Shared = Arc<Mutex<Inbox>>;

struct Grpc(Shared);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let header = x_test(request.metadata().get("x-test").map(|v| v.as_bytes()));
        let mut inbox = self.0.lock().unwrap();
        inbox.x_test.extend(header);
        inbox.traces.push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        let header = x_test(request.metadata().get("x-test").map(|v| v.as_bytes()));
        let mut inbox = self.0.lock().unwrap();
        inbox.x_test.extend(header);
        inbox.metrics.push(request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

fn x_test(value: Option<&[u8]>) -> Option<String> {
    value.map(|v| String::from_utf8(v.to_vec()).unwrap())
}

/// A gRPC OTLP receiver (traces and metrics) on loopback: its endpoint and what it got.
pub async fn grpc_receiver() -> (String, Shared) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let inbox = Shared::default();
    let incoming = futures::stream::unfold(listener, |l| async move {
        let accepted = l.accept().await.map(|(stream, _)| stream);
        Some((accepted, l))
    });
    let both = Both {
        traces: TraceServiceServer::new(Grpc(inbox.clone())),
        metrics: MetricsServiceServer::new(Grpc(inbox.clone())),
    };
    let server = tonic::transport::Server::builder().serve_with_incoming(both, incoming);
    tokio::spawn(server);
    (endpoint, inbox)
}

/// Both services on one port, by the gRPC path (tonic's router would need axum).
#[derive(Clone)]
struct Both {
    traces: TraceServiceServer<Grpc>,
    metrics: MetricsServiceServer<Grpc>,
}

type GrpcRequest = http::Request<tonic::body::Body>;

impl tonic::codegen::Service<GrpcRequest> for Both {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = tonic::codegen::BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: GrpcRequest) -> Self::Future {
        let metrics = "/opentelemetry.proto.collector.metrics.";
        if request.uri().path().starts_with(metrics) {
            self.metrics.call(request)
        } else {
            self.traces.call(request)
        }
    }
}

/// An OTLP/HTTP receiver (protobuf bodies at `/v1/traces` and `/v1/metrics`) on loopback.
pub async fn http_receiver() -> (String, Shared) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let inbox = Shared::default();
    let shared = inbox.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let inbox = shared.clone();
            let service = hyper::service::service_fn(move |req| receive(req, inbox.clone()));
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
            );
        }
    });
    (endpoint, inbox)
}

async fn receive(
    req: http::Request<hyper::body::Incoming>,
    inbox: Shared,
) -> Result<http::Response<Full<Bytes>>, Infallible> {
    assert_eq!(
        req.headers()["content-type"],
        "application/x-protobuf",
        "OTLP/HTTP with protobuf"
    );
    let path = req.uri().path().to_string();
    let header = x_test(req.headers().get("x-test").map(|v| v.as_bytes()));
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let answer = {
        let mut inbox = inbox.lock().unwrap();
        inbox.x_test.extend(header);
        inbox.paths.push(path.clone());
        match path.as_str() {
            "/v1/traces" => {
                inbox
                    .traces
                    .push(ExportTraceServiceRequest::decode(body).unwrap());
                ExportTraceServiceResponse::default().encode_to_vec()
            }
            "/v1/metrics" => {
                inbox
                    .metrics
                    .push(ExportMetricsServiceRequest::decode(body).unwrap());
                ExportMetricsServiceResponse::default().encode_to_vec()
            }
            other => panic!("an OTLP export to {other}"),
        }
    };
    Ok(http::Response::builder()
        .header("content-type", "application/x-protobuf")
        .body(Full::new(Bytes::from(answer)))
        .unwrap())
}

pub fn value(kv: &KeyValue) -> Option<String> {
    Some(match kv.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(s) => s.clone(),
        any_value::Value::IntValue(i) => i.to_string(),
        any_value::Value::BoolValue(b) => b.to_string(),
        any_value::Value::DoubleValue(d) => d.to_string(),
        other => format!("{other:?}"),
    })
}

pub fn attr(kvs: &[KeyValue], key: &str) -> Option<String> {
    kvs.iter().find(|kv| kv.key == key).and_then(value)
}

pub fn attrs(kvs: &[KeyValue]) -> HashMap<String, String> {
    kvs.iter()
        .filter_map(|kv| Some((kv.key.clone(), value(kv)?)))
        .collect()
}

/// The variables of the process running the test must not reach the hub.
pub const OTEL_VARS: &[&str] = &[
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_METRIC_EXPORT_INTERVAL",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "POD_NAME",
    "POD_NAMESPACE",
    "FLEETSCALER_LOG_FORMAT",
];

/// `fleetscaler run` as a child process; killed if the test fails before stopping it.
pub struct HubProcess {
    child: std::process::Child,
    log: PathBuf,
}

/// What the hub is started with.
pub struct HubOptions<'a> {
    /// fleet.toml text after `[hub]`'s keys (`[hub.tracing]`, say).
    pub tracing: &'a str,
    /// fleet.toml keys of `[defaults]`, after the fast timing every hub here has.
    pub defaults: &'a str,
    pub vars: &'a [(&'a str, &'a str)],
    pub args: &'a [&'a str],
    /// `sim-1` to `sim-<clusters>` of the simulated fleet.
    pub clusters: usize,
}

impl HubProcess {
    pub fn start(dir: &Path, kubeconfig: &Path, options: HubOptions<'_>) -> Self {
        let config = dir.join("fleet.toml");
        std::fs::write(&config, fleet_toml(kubeconfig, &options)).unwrap();
        let log = dir.join("hub.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_fleetscaler"));
        command.args(["run", "--config"]).arg(&config);
        command.args(options.args);
        for var in OTEL_VARS {
            command.env_remove(var);
        }
        let child = command
            .envs(options.vars.iter().copied())
            // Export often, so the test does not wait for the default 5 s batches.
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        HubProcess { child, log }
    }

    /// What the hub wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The address of the hub's HTTP endpoints, once it says it serves them.
    pub async fn address(&self) -> String {
        wait_for("the hub to serve HTTP", || {
            let log = self.log();
            log.split("serving http://").nth(1).and_then(|rest| {
                let end = rest.find('/')?;
                Some(rest[..end].to_string())
            })
        })
        .await
    }

    /// SIGTERM, as Kubernetes stops a pod, then its exit status.
    pub async fn stop(&mut self) -> ExitStatus {
        let kill = Command::new("sh")
            .args(["-c", &format!("kill -TERM {}", self.child.id())])
            .status()
            .unwrap();
        assert!(kill.success());
        self.exited().await
    }

    /// Its exit status, once it exited.
    pub async fn exited(&mut self) -> ExitStatus {
        wait_for("the hub to exit", || self.child.try_wait().unwrap()).await
    }
}

/// Polls `check` until it has an answer, for at most [`LONG`].
async fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {LONG:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fleet_toml(kubeconfig: &Path, options: &HubOptions<'_>) -> String {
    let clusters: String = (1..=options.clusters)
        .map(|i| format!("\n[[clusters]]\nname = \"sim-{i}\"\nuse_cluster_autoscaler = false\n"))
        .collect();
    format!(
        r#"[hub]
listen = "127.0.0.1:0"
scan_interval = "300ms"
debounce = "50ms"
request_timeout = "2s"
kubeconfigs = [{kubeconfig:?}]
{tracing}
[defaults]
scale_down_unneeded_time = "1s"
scale_down_delay_after_add = "1s"
scale_down_delay_after_delete = "0s"
node_delete_delay_after_taint = "0s"
max_node_provision_time = "20s"
{defaults}
{clusters}"#,
        tracing = options.tracing,
        defaults = options.defaults
    )
}

/// A plain HTTP/1.0 GET of the hub's `path`; the body, if the answer is 200.
pub async fn http_get(addr: &str, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: test\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.ok()?;
    let mut raw = String::new();
    tcp.read_to_string(&mut raw).await.ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    head.split(' ')
        .nth(1)
        .is_some_and(|code| code == "200")
        .then(|| body.to_string())
}
