//! A watch request and its response read as kube's `Api::watch` reads them (one JSON event a
//! line), but holding nothing between events and bounded per event.
//!
//! kube frames the body with a `LinesCodec` whose buffer starts at 8 KiB and keeps whatever
//! it grew to: some thirty watches a cluster held a quarter of a megabyte each, most of them
//! on kinds that send an event every few minutes, and a line had no limit. Here a line that
//! arrives whole in one frame is decoded where it lies; only a line split across frames is
//! copied, and that copy is given back as soon as the line is decoded.

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use http_body_util::BodyExt;
use kube::api::{WatchEvent, WatchParams};
use kube::core::Status;
use kube::{Api, Error};
use serde::de::DeserializeOwned;

/// The longest event accepted: an object is at most 1.5 MiB in etcd, and its JSON in a watch
/// event a little more. A longer line is an error, not an allocation without end.
pub const MAX_EVENT: usize = 8 * 1024 * 1024;

/// Starts a watch of `api` from `version`; the events as they arrive.
pub async fn watch<K>(
    api: &Api<K>,
    params: &WatchParams,
    version: &str,
) -> kube::Result<BoxStream<'static, kube::Result<WatchEvent<K>>>>
where
    K: kube::Resource + Clone + DeserializeOwned + Send + 'static,
{
    let request = kube::core::Request::new(api.resource_url());
    let mut request = request
        .watch(params, version)
        .map_err(Error::BuildRequest)?;
    request.headers_mut().insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    request.extensions_mut().insert("watch");
    let client = api.clone().into_client();
    let response = client.send(request.map(kube::client::Body::from)).await?;
    let status = response.status();
    let body = response.into_body();
    if status.is_client_error() || status.is_server_error() {
        return Err(refused(status, body).await);
    }
    Ok(events(body.into_data_stream()).boxed())
}

/// The API server's refusal as kube reports it: its `Status`, or the text of the body.
async fn refused(status: http::StatusCode, body: kube::client::Body) -> Error {
    let bytes = match body.collect_bytes().await {
        Ok(bytes) => bytes,
        Err(e) => return e,
    };
    let parsed = serde_json::from_slice::<Status>(&bytes).ok();
    let status = parsed.unwrap_or_else(|| {
        let text = String::from_utf8_lossy(&bytes);
        Status::failure(text.trim(), "Failed to parse error data").with_code(status.as_u16())
    });
    Error::Api(status.boxed())
}

/// What is left of the body: the unread part of its current frame, and the start of a line
/// that frame did not finish.
struct Reader<S> {
    body: S,
    rest: Bytes,
    partial: Vec<u8>,
    ended: bool,
}

/// The body's lines decoded as watch events.
pub fn events<K, S>(body: S) -> impl Stream<Item = kube::Result<WatchEvent<K>>>
where
    K: DeserializeOwned,
    S: Stream<Item = kube::Result<Bytes>> + Unpin,
{
    let reader = Reader {
        body,
        rest: Bytes::new(),
        partial: Vec::new(),
        ended: false,
    };
    futures::stream::unfold(reader, |mut reader| async move {
        let event = reader.next().await?;
        Some((event, reader))
    })
}

impl<S> Reader<S>
where
    S: Stream<Item = kube::Result<Bytes>> + Unpin,
{
    async fn next<K: DeserializeOwned>(&mut self) -> Option<kube::Result<WatchEvent<K>>> {
        while !self.ended {
            if let Some(event) = self.line().map(decode).and_then(skip_empty) {
                return Some(event);
            }
            if self.rest.is_empty()
                && let Some(end) = self.read().await
            {
                return end.and_then(skip_empty);
            }
        }
        None
    }

    /// The next whole line of what has been read; the rest of an unfinished line is kept in
    /// `partial`.
    fn line(&mut self) -> Option<Bytes> {
        let Some(end) = self.rest.iter().position(|b| *b == b'\n') else {
            self.keep_partial();
            return None;
        };
        let line = self.rest.split_to(end + 1).slice(..end);
        if self.rest.is_empty() {
            // An empty slice would still hold the connection's read buffer.
            self.rest = Bytes::new();
        }
        if self.partial.is_empty() {
            return Some(line);
        }
        let mut whole = std::mem::take(&mut self.partial);
        whole.extend_from_slice(&line);
        Some(Bytes::from(whole))
    }

    fn keep_partial(&mut self) {
        if !self.rest.is_empty() {
            self.partial.extend_from_slice(&self.rest);
            self.rest = Bytes::new();
        }
    }

    /// Reads the next frame. `Some` when the stream ends: with an error, or the last line of
    /// a body that did not end in a newline.
    async fn read<K: DeserializeOwned>(&mut self) -> Option<Option<kube::Result<WatchEvent<K>>>> {
        if self.partial.len() > MAX_EVENT {
            self.ended = true;
            let too_long = format!("a watch event longer than {MAX_EVENT} bytes");
            return Some(Some(Err(Error::ReadEvents(std::io::Error::other(
                too_long,
            )))));
        }
        match self.body.next().await {
            Some(Ok(frame)) => {
                self.rest = frame;
                None
            }
            Some(Err(e)) => {
                self.ended = true;
                // A stream cut short by the connection is resumed like one the server
                // ended, as kube does.
                Some((!cut_short(&e)).then_some(Err(e)))
            }
            None => {
                self.ended = true;
                let last = std::mem::take(&mut self.partial);
                Some((!last.is_empty()).then(|| decode(Bytes::from(last))))
            }
        }
    }
}

/// An empty line (or a last line cut mid-object) is no event.
fn skip_empty<K>(event: kube::Result<WatchEvent<K>>) -> Option<kube::Result<WatchEvent<K>>> {
    match event {
        Err(Error::SerdeError(e)) if e.is_eof() => None,
        other => Some(other),
    }
}

fn decode<K: DeserializeOwned>(line: Bytes) -> kube::Result<WatchEvent<K>> {
    serde_json::from_slice::<WatchEvent<K>>(&line).map_err(|e| {
        match serde_json::from_slice::<Status>(&line) {
            Ok(status) if !e.is_eof() => Error::Api(status.boxed()),
            _ => Error::SerdeError(e),
        }
    })
}

fn cut_short(e: &Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::UnexpectedEof
        {
            return true;
        }
        source = err.source();
    }
    e.to_string().contains("unexpected EOF")
}

#[cfg(test)]
#[path = "watch_lines_tests.rs"]
mod tests;
