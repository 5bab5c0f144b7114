//! Connections: accepted up to a cap (beyond it, closed at once, unserved: a slot is held
//! from accept to close, so idle and slow clients count too), TLS when the port has a
//! certificate (a plain HTTP request there gets a 400 saying so), then HTTP/1.1 with a
//! deadline on the request's head, a cap on its size (431 beyond it) and on each write.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::io::WriteDeadline;
use super::site::Handler;
use super::throttle::{Throttle, more};

/// A client gets this long to send its request's head, and to complete a TLS handshake; an
/// idle kept-alive connection is closed after it too.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

/// How one port serves its connections.
#[derive(Clone)]
pub(super) struct Rules {
    /// For log lines: `main` or `probe`.
    pub name: &'static str,
    pub tls: Option<TlsAcceptor>,
    pub max_connections: usize,
    pub max_header_bytes: usize,
    pub write_timeout: Duration,
}

/// Serves `listener` until `cancel` fires.
pub(super) async fn accept<H: Handler>(
    listener: TcpListener,
    rules: Rules,
    handler: Arc<H>,
    cancel: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(rules.max_connections));
    let refusals = Throttle::new(Duration::from_secs(10));
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => return,
            a = listener.accept() => a,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors, say: wait rather than spin.
                tracing::warn!(
                    "accepting a connection on the {} port failed: {e}",
                    rules.name
                );
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refuse(tcp, &rules, &refusals);
            continue;
        };
        let (rules, handler, cancel) = (rules.clone(), handler.clone(), cancel.clone());
        tokio::spawn(async move {
            let _slot = slot;
            connection(tcp, rules, handler, cancel).await;
        });
    }
}

/// Over the cap: closed at once (plain HTTP first gets a 503 if the socket takes it without
/// waiting; TLS gets no handshake, which is the expensive part).
fn refuse(tcp: TcpStream, rules: &Rules, refusals: &Throttle) {
    if rules.tls.is_none() {
        let _ = tcp.try_write(
            b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        );
    }
    if let Some(skipped) = refusals.admit() {
        tracing::warn!(
            "refused a connection on the {} port: {} are being served \
             (hub.serving.max_connections){}",
            rules.name,
            rules.max_connections,
            more(skipped)
        );
    }
}

async fn connection<H: Handler>(
    tcp: TcpStream,
    rules: Rules,
    handler: Arc<H>,
    cancel: CancellationToken,
) {
    let Some(acceptor) = &rules.tls else {
        let io = WriteDeadline::new(tcp, rules.write_timeout);
        return http(io, &rules, handler, cancel).await;
    };
    match tokio::time::timeout(HEADER_TIMEOUT, starts_tls(&tcp)).await {
        Ok(Some(true)) => {}
        Ok(Some(false)) => return plain_http_refused(tcp).await,
        Ok(None) | Err(_) => return,
    }
    let stream = match tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            // Scanners and clients that do not trust the certificate: not worth a warning.
            tracing::debug!("TLS handshake on the {} port failed: {e}", rules.name);
            return;
        }
        Err(_) => return,
    };
    let io = WriteDeadline::new(stream, rules.write_timeout);
    http(io, &rules, handler, cancel).await
}

/// Whether the client's first byte opens a TLS handshake; `None` if it closed first.
async fn starts_tls(tcp: &TcpStream) -> Option<bool> {
    let mut first = [0u8; 1];
    match tcp.peek(&mut first).await {
        Ok(1) => Some(first[0] == TLS_HANDSHAKE),
        _ => None,
    }
}

/// A plain HTTP request on the HTTPS port: a 400 that says so, as Go's servers answer, rather
/// than a handshake error the client cannot read.
async fn plain_http_refused(mut tcp: TcpStream) {
    let body = "this port serves HTTPS: use https://\n";
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let exchange = async {
        tcp.write_all(answer.as_bytes()).await?;
        tcp.shutdown().await?;
        // Read what the client sent until it closes: closing with it unread would reset
        // the connection, and the client could lose the answer.
        let mut sink = [0u8; 4096];
        let mut left: usize = 64 * 1024;
        while left > 0 {
            match tcp.read(&mut sink).await? {
                0 => break,
                n => left = left.saturating_sub(n),
            }
        }
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(HEADER_TIMEOUT, exchange).await;
}

async fn http<T, H>(io: T, rules: &Rules, handler: Arc<H>, cancel: CancellationToken)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Handler,
{
    let service = service_fn(move |req| {
        let handler = handler.clone();
        async move { Ok::<_, Infallible>(handler.handle(req).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_header_size(rules.max_header_bytes);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::select! {
        _ = conn => {}
        _ = cancel.cancelled() => {}
    }
}
