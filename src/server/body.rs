//! An answer's body as hyper sends it: in chunks copied off the answer, which hyper takes one
//! by one as the connection sends them (its write buffer is capped, `conn`). What the answer
//! holds, its bytes and its turn among the heavy answers (`heavy::Held`), is let go when the
//! last chunk is taken: a client that reads slowly holds one answer, never more, and the
//! chunks queued for it are copies that hold nothing else.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use futures::FutureExt;
use http::Response;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, SizeHint};

use super::heavy::Held;

/// The most hyper is handed at once.
pub(super) const CHUNK: usize = 16 * 1024;

pub(super) struct Paced {
    left: Bytes,
    /// The answer's turn, if it took one: given back with the last chunk.
    held: Option<Held>,
}

/// `answer` with its body paced, holding the turn its handler left in its extensions.
pub(super) fn paced(answer: Response<Full<Bytes>>) -> Response<Paced> {
    let (mut parts, body) = answer.into_parts();
    let held = parts.extensions.remove::<Held>();
    let left = whole(body);
    Response::from_parts(parts, Paced { left, held })
}

/// The bytes of a `Full` body, which has them at once.
fn whole(body: Full<Bytes>) -> Bytes {
    match body.collect().now_or_never() {
        Some(Ok(collected)) => collected.to_bytes(),
        Some(Err(never)) => match never {},
        None => Bytes::new(),
    }
}

impl Body for Paced {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if this.left.is_empty() {
            this.held = None;
            return Poll::Ready(None);
        }
        let n = this.left.len().min(CHUNK);
        let chunk = Bytes::copy_from_slice(&this.left[..n]);
        this.left.advance(n);
        if this.left.is_empty() {
            // The answer's bytes and its turn, let go with the last chunk.
            this.left = Bytes::new();
            this.held = None;
        }
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.left.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::heavy::Heavy;

    #[tokio::test]
    async fn the_answer_goes_in_chunks_and_its_turn_with_the_last() {
        let heavy = Heavy::new();
        let data: Vec<u8> = (0..CHUNK * 2 + 100).map(|i| i as u8).collect();
        let turn = heavy.turn().await.unwrap();
        let answer = turn.answer(Response::new(Full::new(Bytes::from(data.clone()))));
        let mut body = paced(answer).into_body();
        assert_eq!(body.size_hint().exact(), Some(data.len() as u64));
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        while let Some(frame) = body.frame().await {
            let chunk = frame.unwrap().into_data().unwrap();
            sizes.push(chunk.len());
            got.extend_from_slice(&chunk);
            if !body.is_end_stream() {
                assert_eq!(heavy.sending(), 1, "the turn held while chunks are left");
            }
        }
        assert_eq!(got, data);
        assert_eq!(sizes, [CHUNK, CHUNK, 100]);
        assert_eq!(
            heavy.sending(),
            0,
            "the turn given back with the last chunk"
        );
    }
}
