//! One GET of the hub's API over HTTP/1, plain or TLS (rustls on ring, the system's root
//! certificates, which `SSL_CERT_FILE` / `SSL_CERT_DIR` replace), under one deadline.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::rt::TokioExecutor;

use super::StatusError;

/// Far above any fleet's answer; a bound so that a wrong server cannot exhaust memory.
const MAX_BODY: usize = 256 << 20;
/// Characters of a refusal's body quoted in the error.
const EXCERPT: usize = 300;

/// `<server>/api/v1/fleet`; a path in the server's URL (a proxy's prefix) is kept.
pub(in crate::cli) fn fleet_url(server: &str) -> Result<Uri, StatusError> {
    api_url(server, "/api/v1/fleet")
}

/// `<server><path>` (`path` from `/`, with its query if any, already escaped); a path in
/// the server's URL (a proxy's prefix) is kept.
pub(in crate::cli) fn api_url(server: &str, path: &str) -> Result<Uri, StatusError> {
    let bad = |reason: &str| StatusError::BadServer {
        server: server.to_string(),
        reason: reason.to_string(),
    };
    if !server.starts_with("http://") && !server.starts_with("https://") {
        return Err(bad("not an http:// or https:// URL"));
    }
    let uri: Uri = format!("{}{path}", server.trim_end_matches('/'))
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if server.contains(['?', '#']) {
        return Err(bad("a query or fragment cannot be added to"));
    }
    Ok(uri)
}

/// The body of a 200 answer to GET `url`.
pub(in crate::cli) async fn get(
    url: &Uri,
    token: Option<&str>,
    timeout: Duration,
) -> Result<Bytes, StatusError> {
    let request = request(url, token)?;
    let exchange = async {
        if url.scheme_str() == Some("https") {
            let client = Client::builder(TokioExecutor::new()).build(tls_connector(url)?);
            send(client, request, token.is_some()).await
        } else {
            let client = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
            send(client, request, token.is_some()).await
        }
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or_else(|_| {
            Err(StatusError::Timeout {
                url: url.to_string(),
                timeout,
            })
        })
}

fn request(url: &Uri, token: Option<&str>) -> Result<Request<Empty<Bytes>>, StatusError> {
    let mut request =
        Request::get(url.clone())
            .body(Empty::new())
            .map_err(|e| StatusError::BadServer {
                server: url.to_string(),
                reason: e.to_string(),
            })?;
    let headers = request.headers_mut();
    headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    headers.insert(
        header::USER_AGENT,
        HeaderValue::from_static(concat!("fleetscaler/", env!("CARGO_PKG_VERSION"))),
    );
    if let Some(token) = token {
        let mut value =
            HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| StatusError::BadToken)?;
        // Kept out of hyper's debug output.
        value.set_sensitive(true);
        headers.insert(header::AUTHORIZATION, value);
    }
    Ok(request)
}

fn tls_connector(url: &Uri) -> Result<hyper_rustls::HttpsConnector<HttpConnector>, StatusError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider)
        .map_err(|e| StatusError::Unreachable {
            url: url.to_string(),
            cause: format!("no root certificates to check its certificate with: {e}"),
        })?;
    Ok(builder.https_only().enable_http1().build())
}

async fn send<C>(
    client: Client<C, Empty<Bytes>>,
    request: Request<Empty<Bytes>>,
    sent_token: bool,
) -> Result<Bytes, StatusError>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    let url = request.uri().to_string();
    let response = client
        .request(request)
        .await
        .map_err(|e| StatusError::Unreachable {
            url: url.clone(),
            cause: causes(&e),
        })?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| StatusError::Unreachable {
            url: url.clone(),
            cause: format!("the answer broke off: {}", causes(&*e)),
        })?
        .to_bytes();
    if status != StatusCode::OK {
        return Err(StatusError::Refused {
            url,
            status,
            excerpt: excerpt(&body),
            hint: hint(status, sent_token),
        });
    }
    Ok(body)
}

fn hint(status: StatusCode, sent_token: bool) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN if !sent_token => {
            " (no token was sent: --token or FLEETSCALER_TOKEN)"
        }
        _ => "",
    }
}

/// An error and its causes on one line: hyper's own message ("client error (Connect)")
/// says little without them.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

/// The start of a body on one line, or `(empty body)`.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let words: Vec<&str> = text.split_whitespace().collect();
    let line = words.join(" ");
    if line.is_empty() {
        return "(empty body)".into();
    }
    match line.char_indices().nth(EXCERPT) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_url_keeps_a_prefix_and_refuses_what_is_not_a_url() {
        let url = |s: &str| fleet_url(s).map(|u| u.to_string());
        assert_eq!(
            url("http://127.0.0.1:8080").unwrap(),
            "http://127.0.0.1:8080/api/v1/fleet"
        );
        assert_eq!(
            url("https://hub.example/fleetscaler/").unwrap(),
            "https://hub.example/fleetscaler/api/v1/fleet"
        );
        for bad in [
            "127.0.0.1:8080",
            "ftp://hub",
            "http://",
            "http://hub/?x=1",
            "not a url",
        ] {
            let err = url(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }

    #[test]
    fn the_token_goes_as_a_sensitive_bearer_header() {
        let url = fleet_url("http://hub").unwrap();
        let r = request(&url, Some("s3cret")).unwrap();
        let auth = r.headers().get(header::AUTHORIZATION).unwrap();
        assert_eq!(auth, "Bearer s3cret");
        assert!(auth.is_sensitive());
        assert!(
            request(&url, None)
                .unwrap()
                .headers()
                .get(header::AUTHORIZATION)
                .is_none()
        );
        assert!(matches!(
            request(&url, Some("a\nb")),
            Err(StatusError::BadToken)
        ));
    }

    #[test]
    fn an_excerpt_is_one_line_and_short() {
        assert_eq!(
            excerpt(b"no cluster named \"x\"\n"),
            "no cluster named \"x\""
        );
        assert_eq!(excerpt(b" \n"), "(empty body)");
        let long = "\u{e9}".repeat(1000);
        let e = excerpt(long.as_bytes());
        assert_eq!(e.chars().count(), EXCERPT + 3);
    }

    #[test]
    fn a_refusal_without_a_token_hints_at_one() {
        assert!(hint(StatusCode::UNAUTHORIZED, false).contains("FLEETSCALER_TOKEN"));
        assert_eq!(hint(StatusCode::UNAUTHORIZED, true), "");
        assert_eq!(hint(StatusCode::NOT_FOUND, false), "");
    }
}
