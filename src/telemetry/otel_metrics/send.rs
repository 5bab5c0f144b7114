//! The OTLP metrics transport: gRPC through tonic's generated `MetricsServiceClient` over a
//! lazily connected `Channel` (fleet.toml's headers as metadata), or HTTP/protobuf as a POST
//! of the encoded request through hyper; TLS with rustls and the system's roots when the
//! URL is `https://`. Built from the traces' [`Transport`] settings.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use prost::Message;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::telemetry::export::Protocol;
use crate::telemetry::otel::OtelError;
use crate::telemetry::otlp::{SetMetadata, Transport, header_map};

/// How much of an HTTP answer is read (to reuse the connection, and for its partial
/// success, which is small).
const ANSWER_LIMIT: usize = 64 * 1024;

type Body = Full<Bytes>;

/// Sends one request at a time to the collector.
pub(super) enum Sender {
    Grpc(MetricsServiceClient<InterceptedService<Channel, SetMetadata>>),
    /// Boxed: its client is several times the size of the gRPC one.
    Http(Box<HttpSender>),
}

pub(super) struct HttpSender {
    client: HttpClient,
    uri: http::Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
}

pub(super) enum HttpClient {
    Plain(Client<HttpConnector, Body>),
    Tls(Client<hyper_rustls::HttpsConnector<HttpConnector>, Body>),
}

/// The sender for `protocol`, its problems named with the endpoint. Must run on the tokio
/// runtime (the gRPC channel's worker is spawned onto it).
pub(super) fn sender(t: &Transport<'_>, protocol: Protocol) -> Result<Sender, OtelError> {
    let headers = header_map(t.headers).map_err(|e| t.failed(&e))?;
    match protocol {
        Protocol::Grpc => {
            let mut endpoint = Endpoint::from_shared(t.endpoint.to_string())
                .map_err(|e| t.failed(&e))?
                .timeout(t.timeout)
                .connect_timeout(t.timeout);
            if t.https() {
                let tls = ClientTlsConfig::new().with_native_roots();
                endpoint = endpoint.tls_config(tls).map_err(|e| t.failed(&e))?;
            }
            // Connected at the first export: a collector not up yet is not an error at start.
            let channel = endpoint.connect_lazy();
            let interceptor = SetMetadata(Arc::new(headers));
            Ok(Sender::Grpc(MetricsServiceClient::with_interceptor(
                channel,
                interceptor,
            )))
        }
        Protocol::HttpProtobuf => {
            let uri: http::Uri = t.endpoint.parse().map_err(|e| t.failed(&e))?;
            let builder = Client::builder(TokioExecutor::new());
            let client = if t.https() {
                let connector = hyper_rustls::HttpsConnectorBuilder::new()
                    .with_native_roots()
                    .map_err(|e| t.failed(&format!("no system root certificates: {e}")))?
                    .https_only()
                    .enable_http1()
                    .build();
                HttpClient::Tls(builder.build(connector))
            } else {
                HttpClient::Plain(builder.build_http())
            };
            Ok(Sender::Http(Box::new(HttpSender {
                client,
                uri,
                headers,
            })))
        }
    }
}

impl Sender {
    /// Sends `request`; the error says what the collector or the connection said. The
    /// caller bounds the time.
    pub(super) async fn send(&self, request: ExportMetricsServiceRequest) -> Result<(), String> {
        match self {
            Sender::Grpc(client) => {
                let answer = client
                    .clone()
                    .export(tonic::Request::new(request))
                    .await
                    .map_err(|s| format!("gRPC {:?}: {}", s.code(), s.message()))?;
                rejected(answer.into_inner().partial_success)
            }
            Sender::Http(http) => {
                let HttpSender {
                    client,
                    uri,
                    headers,
                } = http.as_ref();
                let mut post = http::Request::post(uri.clone())
                    .header(http::header::CONTENT_TYPE, "application/x-protobuf")
                    .body(Full::new(Bytes::from(request.encode_to_vec())))
                    .map_err(|e| e.to_string())?;
                for (name, value) in headers {
                    post.headers_mut().insert(name.clone(), value.clone());
                }
                let answer = match client {
                    HttpClient::Plain(c) => c.request(post).await,
                    HttpClient::Tls(c) => c.request(post).await,
                }
                .map_err(|e| with_sources(&e))?;
                let status = answer.status();
                let body = Limited::new(answer.into_body(), ANSWER_LIMIT)
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                if !status.is_success() {
                    return Err(format!("HTTP {status}"));
                }
                let partial = ExportMetricsServiceResponse::decode(body)
                    .ok()
                    .and_then(|r| r.partial_success);
                rejected(partial)
            }
        }
    }
}

/// A collector that took the request but refused some of its points says why.
fn rejected(partial: Option<ExportMetricsPartialSuccess>) -> Result<(), String> {
    match partial {
        Some(p) if p.rejected_data_points > 0 => Err(format!(
            "{} data point(s) rejected: {}",
            p.rejected_data_points, p.error_message
        )),
        _ => Ok(()),
    }
}

/// A client error's message with its causes (hyper's own says only "client error").
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
