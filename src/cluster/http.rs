//! The HTTP stack under a cluster's kube client: HTTP/2 when the API server offers it
//! (every API server does), so that one TLS connection carries all of a cluster's watches
//! and calls, as client-go's transport does; HTTP/1.1 otherwise.
//!
//! kube's own stack (`kube::Client::try_from`) speaks HTTP/1.1 only: one connection per open
//! watch, some thirty per cluster. At a thousand clusters that is thirty thousand TLS
//! connections, past a process's file limit and most of the hub's memory. The layers are
//! kube's own (base URI, authentication, extra headers, the connector's timeouts); kube's
//! request tracing layer and its retry layer are left out (the hub turns retries off and
//! traces its passes, not each request).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::ConfigExt;
use tower::{BoxError, ServiceBuilder};

/// How often an HTTP/2 connection is pinged, and how long an answer may take: a connection
/// whose server has gone silent is found within this, whatever its watches are doing.
const PING_EVERY: Duration = Duration::from_secs(30);
const PING_ANSWER: Duration = Duration::from_secs(10);

/// HTTP/2 flow-control windows: how much a server may send ahead of what is read, on one
/// stream and on the whole connection (bounded: at most this much of a cluster's
/// responses waits in buffers while its runner is busy).
const STREAM_WINDOW: u32 = 4 << 20;
const CONNECTION_WINDOW: u32 = 8 << 20;

/// TLS sessions a client remembers for resumption: one API server, a few tickets.
const TLS_SESSIONS: usize = 4;

/// Requests sent by every cluster client of this process, for the benches' requests per
/// second.
static REQUESTS_SENT: AtomicU64 = AtomicU64::new(0);

/// How many requests the process's cluster clients have sent so far (watches count once).
pub fn requests_sent() -> u64 {
    REQUESTS_SENT.load(Ordering::Relaxed)
}

/// A client for `config` whose connections speak HTTP/2 where the server agrees.
pub fn client(config: kube::Config) -> kube::Result<kube::Client> {
    let connector = connector(&config)?;
    let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .http2_keep_alive_interval(PING_EVERY)
        .http2_keep_alive_timeout(PING_ANSWER)
        .http2_keep_alive_while_idle(true)
        // Lists of thousands of pods share the connection with every watch: windows of a
        // few list pages, fixed, as client-go's transport has (4 MiB a stream). Not adaptive:
        // its bandwidth pings go on every 25 s on a connection that receives anything,
        // which an idle cluster's bookmarks always do (1,000 clusters: 40 round trips a
        // second of idle CPU for windows that stay put).
        .http2_initial_stream_window_size(STREAM_WINDOW)
        .http2_initial_connection_window_size(CONNECTION_WINDOW)
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_request(|request| {
            REQUESTS_SENT.fetch_add(1, Ordering::Relaxed);
            request
        })
        .map_err(BoxError::from)
        .service(http);
    Ok(kube::Client::new(service, config.default_namespace))
}

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// TLS with both protocols offered (ALPN `h2`, `http/1.1`), under kube's timeouts.
fn connector(config: &kube::Config) -> kube::Result<TimeoutConnector<Https>> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let mut tls = config.rustls_client_config()?;
    // rustls keeps room for 256 servers' session tickets by default, made at once (some
    // 15 KiB a client); a cluster's client talks to one API server.
    tls.resumption = rustls::client::Resumption::in_memory_sessions(TLS_SESSIONS);
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let builder = match &config.tls_server_name {
        Some(name) => {
            let name = rustls::pki_types::ServerName::try_from(name.clone()).map_err(|e| {
                kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(e))
            })?;
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        }
        None => builder,
    };
    let mut connector = TimeoutConnector::new(builder.enable_all_versions().wrap_connector(http));
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    Ok(connector)
}
