//! What the OTLP exporters of traces and metrics share: the transport (gRPC with tonic,
//! HTTP/protobuf with hyper), TLS with rustls and the system's roots, fleet.toml's headers
//! over those of the variables, and the resource attributes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response};
use opentelemetry::KeyValue;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::resource::TelemetryResourceDetector;

use super::otel::OtelError;

/// Where and how one signal is sent.
pub(super) struct Transport<'a> {
    /// `traces` or `metrics`, for error messages.
    pub signal: &'static str,
    pub endpoint: &'a str,
    pub headers: &'a [(String, String)],
    pub timeout: Duration,
}

impl Transport<'_> {
    pub fn failed(&self, e: &dyn std::fmt::Display) -> OtelError {
        OtelError::Exporter {
            signal: self.signal,
            endpoint: self.endpoint.to_string(),
            message: e.to_string(),
        }
    }

    pub fn https(&self) -> bool {
        self.endpoint.starts_with("https://")
    }

    /// A tonic exporter builder (of spans or metrics) set up for this transport.
    pub fn grpc<B: WithExportConfig + WithTonicConfig>(&self, builder: B) -> Result<B, OtelError> {
        let headers = header_map(self.headers).map_err(|e| self.failed(&e))?;
        let mut builder = builder
            .with_endpoint(self.endpoint)
            .with_timeout(self.timeout)
            .with_interceptor(SetMetadata(Arc::new(headers)));
        if self.https() {
            let tls = tonic::transport::ClientTlsConfig::new().with_native_roots();
            builder = builder.with_tls_config(tls);
        }
        Ok(builder)
    }

    /// An HTTP/protobuf exporter builder set up for this transport.
    pub fn http<B: WithExportConfig + WithHttpConfig>(&self, builder: B) -> Result<B, OtelError> {
        let headers = header_map(self.headers).map_err(|e| self.failed(&e))?;
        let builder = builder
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(self.endpoint)
            .with_timeout(self.timeout);
        Ok(if self.https() {
            let connector = hyper_rustls::HttpsConnectorBuilder::new()
                .with_native_roots()
                .map_err(|e| self.failed(&format!("no system root certificates: {e}")))?
                .https_or_http()
                .enable_http1()
                .build();
            let client = opentelemetry_http::hyper::HyperClient::new(connector, self.timeout, None);
            builder.with_http_client(SetHeaders { client, headers })
        } else {
            let client =
                opentelemetry_http::hyper::HyperClient::with_default_connector(self.timeout, None);
            builder.with_http_client(SetHeaders { client, headers })
        })
    }

    /// The exporter's own build error, named with the endpoint.
    pub fn built<T, E: std::fmt::Display>(&self, built: Result<T, E>) -> Result<T, OtelError> {
        built.map_err(|e| self.failed(&e))
    }
}

pub(super) fn header_map(
    headers: &[(String, String)],
) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    headers
        .iter()
        .map(|(k, v)| {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("{k}: {e}"))?;
            let value = HeaderValue::from_str(v).map_err(|e| format!("{k}: {e}"))?;
            Ok((name, value))
        })
        .collect()
}

/// The headers of fleet.toml win: the traces' exporter adds those of the `OTEL_*`
/// variables itself, then these are set over them on every request (the metrics' sender
/// sets these alone: they are merged with the variables' already).
#[derive(Clone, Debug)]
pub(super) struct SetMetadata(pub Arc<Vec<(HeaderName, HeaderValue)>>);

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

/// The resource of both signals: what the hub knows of itself, then
/// `OTEL_RESOURCE_ATTRIBUTES` over them, then the service name.
pub(super) fn resource(
    service_name: &str,
    user: &[(String, String)],
    instance: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Resource {
    Resource::builder_empty()
        .with_detector(Box::new(TelemetryResourceDetector))
        .with_attributes(resource_attributes(service_name, user, instance, env))
        .build()
}

/// Every attribute but the SDK's own (`telemetry.sdk.*`), in the order they apply.
pub(super) fn resource_attributes(
    service_name: &str,
    user: &[(String, String)],
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
    let user = user
        .iter()
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()));
    let mut merged: Vec<KeyValue> = Vec::new();
    for kv in attributes.into_iter().chain(user) {
        merged.retain(|old| old.key != kv.key);
        merged.push(kv);
    }
    merged.push(KeyValue::new("service.name", service_name.to_string()));
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

/// The process environment, blank values as unset (as the OpenTelemetry SDKs read it).
pub(super) fn process_env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let user = [("host.name", "override"), ("team", "infra")]
            .map(|(k, v)| (k.to_string(), v.to_string()));
        let got = as_pairs(&resource_attributes(
            "fleetscaler",
            &user,
            "fleetscaler-0_1a2b",
            &env,
        ));
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
    fn a_header_that_cannot_be_sent_is_an_error_naming_the_endpoint() {
        let headers = [("bad header".to_string(), "v".to_string())];
        let t = Transport {
            signal: "traces",
            endpoint: "http://collector:4317",
            headers: &headers,
            timeout: Duration::from_secs(1),
        };
        let built = t.grpc(opentelemetry_otlp::SpanExporter::builder().with_tonic());
        let Err(e) = built else {
            panic!("a bad header name builds no exporter");
        };
        let text = e.to_string();
        assert!(
            text.contains("traces exporter for http://collector:4317")
                && text.contains("bad header"),
            "{text}"
        );
    }
}
