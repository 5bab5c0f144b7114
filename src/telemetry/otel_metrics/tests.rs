use std::sync::Mutex;

use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use prost::Message;
use tokio::net::TcpListener;

use super::*;
use crate::telemetry::export::{Metrics, Protocol};
use crate::telemetry::metrics::Type;

/// What a receiver got, and how many requests it refuses first.
#[derive(Default)]
struct Inbox {
    requests: Vec<ExportMetricsServiceRequest>,
    paths: Vec<String>,
    content_types: Vec<String>,
    x_test: Vec<String>,
    refuse: usize,
}

type Shared = Arc<Mutex<Inbox>>;

/// An HTTP/protobuf receiver on loopback: its `/v1/metrics` URL.
async fn receiver(inbox: Shared) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let inbox = inbox.clone();
            let serve = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let inbox = inbox.clone();
                async move {
                    let header = |name: &str| {
                        req.headers()
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_string()
                    };
                    let (path, content_type, x_test) = (
                        req.uri().path().to_string(),
                        header("content-type"),
                        header("x-test"),
                    );
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    let mut inbox = inbox.lock().unwrap();
                    let status = if inbox.refuse > 0 {
                        inbox.refuse -= 1;
                        503
                    } else {
                        inbox
                            .requests
                            .push(ExportMetricsServiceRequest::decode(body).unwrap());
                        inbox.paths.push(path);
                        inbox.content_types.push(content_type);
                        inbox.x_test.push(x_test);
                        200
                    };
                    let answer = hyper::Response::builder()
                        .status(status)
                        .body(Full::new(bytes::Bytes::new()))
                        .unwrap();
                    Ok::<_, std::convert::Infallible>(answer)
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), serve),
            );
        }
    });
    format!("http://{addr}/v1/metrics")
}

fn settings(endpoint: &str, interval: Duration) -> Metrics {
    Metrics {
        endpoint: endpoint.to_string(),
        protocol: Protocol::HttpProtobuf,
        headers: vec![("x-test".into(), "yes".into())],
        timeout: Duration::from_secs(5),
        interval,
        service_name: "fleetscaler".into(),
        resource: vec![],
    }
}

/// A counter that grows by one at every reading.
fn counting() -> Source {
    let n = Arc::new(Mutex::new(0.0));
    Arc::new(move || {
        let mut n = n.lock().unwrap();
        *n += 1.0;
        let mut e = MetricsSnapshot::builder();
        e.family("x_total", Type::Counter, "Things.")
            .sample(&[("cluster", "a")], *n);
        e.finish()
    })
}

fn value(request: &ExportMetricsServiceRequest) -> f64 {
    use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
    let m = &request.resource_metrics[0].scope_metrics[0].metrics[0];
    let Some(metric::Data::Sum(s)) = &m.data else {
        panic!("{m:?}");
    };
    match s.data_points[0].value {
        Some(number_data_point::Value::AsDouble(v)) => v,
        other => panic!("{other:?}"),
    }
}

async fn until(inbox: &Shared, n: usize) {
    for _ in 0..500 {
        if inbox.lock().unwrap().requests.len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("fewer than {n} exports");
}

#[tokio::test]
async fn exports_every_interval_and_once_more_at_shutdown() {
    let inbox = Shared::default();
    let endpoint = receiver(inbox.clone()).await;
    let pending = exporter(&settings(&endpoint, Duration::from_millis(50)), "replica-0").unwrap();
    let pipeline = start(pending, counting());
    until(&inbox, 2).await;
    pipeline.shutdown(Duration::from_secs(5)).await.unwrap();
    let inbox = inbox.lock().unwrap();
    let values: Vec<f64> = inbox.requests.iter().map(value).collect();
    let want: Vec<f64> = (1..=values.len()).map(|n| n as f64).collect();
    assert_eq!(values, want, "one reading per export, the last at shutdown");
    assert!(inbox.paths.iter().all(|p| p == "/v1/metrics"));
    assert!(
        inbox
            .content_types
            .iter()
            .all(|c| c == "application/x-protobuf")
    );
    assert!(inbox.x_test.iter().all(|h| h == "yes"));
    let starts: Vec<u64> = inbox
        .requests
        .iter()
        .map(|r| {
            use opentelemetry_proto::tonic::metrics::v1::metric;
            let m = &r.resource_metrics[0].scope_metrics[0].metrics[0];
            match &m.data {
                Some(metric::Data::Sum(s)) => s.data_points[0].start_time_unix_nano,
                _ => 0,
            }
        })
        .collect();
    assert!(
        starts.iter().all(|s| *s > 0 && *s == starts[0]),
        "{starts:?}"
    );
    let resource = inbox.requests[0].resource_metrics[0]
        .resource
        .as_ref()
        .unwrap();
    let keys: Vec<&str> = resource
        .attributes
        .iter()
        .map(|kv| kv.key.as_str())
        .collect();
    assert!(
        keys.contains(&"service.name") && keys.contains(&"service.instance.id"),
        "{keys:?}"
    );
}

#[tokio::test]
async fn refused_exports_stop_nothing() {
    let inbox = Shared::default();
    inbox.lock().unwrap().refuse = 3;
    let endpoint = receiver(inbox.clone()).await;
    let pending = exporter(&settings(&endpoint, Duration::from_millis(20)), "replica-0").unwrap();
    let pipeline = start(pending, counting());
    until(&inbox, 1).await;
    assert_eq!(
        value(&inbox.lock().unwrap().requests[0]),
        4.0,
        "the totals of the reading that went through"
    );
    pipeline.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn a_collector_that_is_not_there_is_an_error_at_shutdown_not_before() {
    // A port nothing listens on.
    let free = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}/v1/metrics", free.local_addr().unwrap());
    drop(free);
    for protocol in [Protocol::HttpProtobuf, Protocol::Grpc] {
        let mut m = settings(&endpoint, Duration::from_secs(3600));
        m.protocol = protocol;
        let pipeline = start(exporter(&m, "replica-0").unwrap(), counting());
        let last = pipeline.shutdown(Duration::from_secs(5)).await;
        assert!(last.is_err(), "{protocol:?}: {last:?}");
    }
}

#[tokio::test]
async fn a_bad_header_builds_no_sender_and_names_the_endpoint() {
    let mut m = settings("http://collector:4317", Duration::from_secs(60));
    m.headers = vec![("bad header".into(), "v".into())];
    for protocol in [Protocol::HttpProtobuf, Protocol::Grpc] {
        m.protocol = protocol;
        let Err(e) = exporter(&m, "replica-0") else {
            panic!("a bad header name builds no sender");
        };
        let text = e.to_string();
        assert!(
            text.contains("metrics exporter for http://collector:4317")
                && text.contains("bad header"),
            "{text}"
        );
    }
}
