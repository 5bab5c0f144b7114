//! Connections: held in the port's slots (`slots`: a new connection over the cap closes the
//! stranger connected longest ago, or the client idle longest, and is refused only while
//! every slot answers an authenticated request), TLS when the port has a certificate (a plain
//! HTTP request there gets a 400 saying so), then HTTP/1.1 with a deadline on the handshake
//! and on each request's head, a cap on the head's size (431 beyond it) and on each write.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::body::{CHUNK, Paced, paced};
use super::io::WriteDeadline;
use super::site::Handler;
use super::slots::{Mark, Slots, Taken};
use super::throttle::{Throttle, more};

/// A client gets this long from connecting to complete its TLS handshake: a handshake takes
/// milliseconds, and a connection that sends nothing holds a slot until then.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// And this long to send each request's head once the connection is ready for it, which is
/// also how long an idle kept-alive connection is kept.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
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
    let slots = Slots::new(rules.max_connections);
    let full = Throttle::new(Duration::from_secs(10));
    while let Some(tcp) = next(&listener, &rules, &cancel).await {
        // Ended by the hub's shutdown, or by the port when it closes this one for another.
        let close = cancel.child_token();
        let slot = match slots.take(close.clone()) {
            Taken::Free(slot) => slot,
            Taken::Evicted(slot) => {
                evicted(&rules, &full);
                slot
            }
            Taken::Full => {
                refuse(tcp, &rules, &full);
                continue;
            }
        };
        let (rules, handler) = (rules.clone(), handler.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = close.cancelled() => {}
                _ = connection(tcp, rules, handler, slot.mark()) => {}
            }
            drop(slot);
        });
    }
}

/// The next connection, or `None` once `cancel` fires.
async fn next(
    listener: &TcpListener,
    rules: &Rules,
    cancel: &CancellationToken,
) -> Option<TcpStream> {
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => return None,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((tcp, _)) => return Some(tcp),
            Err(e) => {
                // Out of file descriptors, say: wait rather than spin.
                tracing::warn!(
                    "accepting a connection on the {} port failed: {e}",
                    rules.name
                );
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

fn evicted(rules: &Rules, full: &Throttle) {
    if let Some(skipped) = full.admit() {
        tracing::warn!(
            "the {} port holds {} connections (hub.serving.max_connections): closed the one \
             that had waited longest without an authenticated request, for a new one{}",
            rules.name,
            rules.max_connections,
            more(skipped)
        );
    }
}

/// Every slot answers an authenticated request: closed at once (plain HTTP first gets a 503
/// if the socket takes it without waiting; TLS gets no handshake, the expensive part).
fn refuse(tcp: TcpStream, rules: &Rules, full: &Throttle) {
    if rules.tls.is_none() {
        let _ = tcp.try_write(
            b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        );
    }
    if let Some(skipped) = full.admit() {
        tracing::warn!(
            "refused a connection on the {} port: all {} are answering requests \
             (hub.serving.max_connections){}",
            rules.name,
            rules.max_connections,
            more(skipped)
        );
    }
}

async fn connection<H: Handler>(tcp: TcpStream, rules: Rules, handler: Arc<H>, mark: Mark) {
    let Some(acceptor) = &rules.tls else {
        let io = WriteDeadline::new(tcp, rules.write_timeout);
        return http(io, &rules, handler, mark).await;
    };
    // One deadline for the first byte and the whole handshake.
    let deadline = tokio::time::Instant::now() + HANDSHAKE_TIMEOUT;
    match tokio::time::timeout_at(deadline, starts_tls(&tcp)).await {
        Ok(Some(true)) => {}
        Ok(Some(false)) => return plain_http_refused(tcp).await,
        Ok(None) | Err(_) => return,
    }
    let stream = match tokio::time::timeout_at(deadline, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            // Scanners and clients that do not trust the certificate: not worth a warning.
            tracing::debug!("TLS handshake on the {} port failed: {e}", rules.name);
            return;
        }
        Err(_) => return,
    };
    let io = WriteDeadline::new(stream, rules.write_timeout);
    http(io, &rules, handler, mark).await
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
    let _ = tokio::time::timeout(HANDSHAKE_TIMEOUT, exchange).await;
}

async fn http<T, H>(io: T, rules: &Rules, handler: Arc<H>, mark: Mark)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Handler,
{
    let service = service_fn(move |req: Request<Incoming>| {
        let (handler, mark) = (handler.clone(), mark.clone());
        async move { Ok::<_, Infallible>(answer(req, &*handler, mark).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_header_size(rules.max_header_bytes)
        // Room for a head on the way in, and on the way out for a chunk or two of an answer
        // (`body`): hyper takes the next one once those are sent.
        .max_buf_size(rules.max_header_bytes + 2 * CHUNK);
    // The connection ends here, or where `accept` closes it.
    let _ = builder.serve_connection(TokioIo::new(io), service).await;
}

/// One request, its connection's slot told how it stands (the handler marks it proven once
/// authentication passes).
async fn answer<H: Handler>(
    mut req: Request<Incoming>,
    handler: &H,
    mark: Mark,
) -> Response<Paced> {
    mark.request();
    req.extensions_mut().insert(mark.clone());
    let answer = handler.handle(req).await;
    mark.answered();
    paced(answer)
}
