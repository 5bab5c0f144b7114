//! Answers built for one request out of the clusters' reports (the fleet, one cluster, a page
//! of a plan) cost memory and CPU in proportion to what they show, and a burst of them would
//! take the hub's memory and the passes' CPU. A turn bounds both: a few answers are built at
//! once, and a few more are held while their clients read them (`body` gives the turn back
//! with the last chunk taken). A request waits a moment for its turn, then is answered 503
//! with `Retry-After`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};

use super::api::text;

/// Answers built at once: each takes milliseconds of CPU.
pub(super) const BUILT_AT_ONCE: usize = 2;
/// Answers built or being sent at once: each holds its bytes (about 600 KiB for the 500
/// pending pods of a cluster with a few node groups) until its client has taken them.
pub(super) const HELD_AT_ONCE: usize = 16;
/// How long a request waits for its turn.
const WAIT: Duration = Duration::from_secs(2);

pub(super) struct Heavy {
    held: Arc<Semaphore>,
    building: Semaphore,
    wait: Duration,
}

/// A turn: to build an answer (let go once built) and to hold it until it is sent.
pub(super) struct Turn<'a> {
    held: OwnedSemaphorePermit,
    _building: SemaphorePermit<'a>,
}

/// The part of a turn an answer holds until its last chunk is taken, in its extensions.
#[derive(Clone)]
pub(super) struct Held {
    _turn: Arc<OwnedSemaphorePermit>,
}

impl Heavy {
    pub(super) fn new() -> Heavy {
        Heavy {
            held: Arc::new(Semaphore::new(HELD_AT_ONCE)),
            building: Semaphore::new(BUILT_AT_ONCE),
            wait: WAIT,
        }
    }

    /// A turn to build an answer; or the 503 to answer instead.
    pub(super) async fn turn(&self) -> Result<Turn<'_>, Response<Full<Bytes>>> {
        let both = async {
            let held = self.held.clone().acquire_owned().await.ok()?;
            let building = self.building.acquire().await.ok()?;
            Some(Turn {
                held,
                _building: building,
            })
        };
        match tokio::time::timeout(self.wait, both).await {
            Ok(Some(turn)) => Ok(turn),
            _ => Err(busy()),
        }
    }

    #[cfg(test)]
    pub(super) fn sending(&self) -> usize {
        HELD_AT_ONCE - self.held.available_permits()
    }
}

impl Turn<'_> {
    /// `answer`, built: the turn to build is given back, the answer holds the rest.
    pub(super) fn answer(self, mut answer: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
        answer.extensions_mut().insert(Held {
            _turn: Arc::new(self.held),
        });
        answer
    }
}

fn busy() -> Response<Full<Bytes>> {
    let mut r = text(
        StatusCode::SERVICE_UNAVAILABLE,
        &format!(
            "busy: {HELD_AT_ONCE} answers are being built or sent and others wait; \
             try again in a second\n"
        ),
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every turn taken: the next request waits its while, then is told to come back; an
    /// answer built gives back its turn to build, and holds the rest until dropped.
    #[tokio::test(start_paused = true)]
    async fn past_the_turns_a_request_waits_then_is_told_to_retry() {
        let heavy = Heavy::new();
        let mut answers = Vec::new();
        for _ in 0..HELD_AT_ONCE {
            let turn = heavy.turn().await.unwrap();
            answers.push(turn.answer(Response::new(Full::new(Bytes::new()))));
        }
        assert_eq!(heavy.sending(), HELD_AT_ONCE);
        let started = tokio::time::Instant::now();
        let refused = heavy.turn().await.err().unwrap();
        assert_eq!(started.elapsed(), WAIT);
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        // An answer sent gives its turn to the next request at once.
        answers.pop();
        assert!(heavy.turn().await.is_ok());
        assert_eq!(started.elapsed(), WAIT);
    }

    #[tokio::test(start_paused = true)]
    async fn a_few_are_built_at_once() {
        let heavy = Heavy::new();
        let building: Vec<_> = futures::future::join_all((0..BUILT_AT_ONCE).map(|_| heavy.turn()))
            .await
            .into_iter()
            .map(|t| t.ok().unwrap())
            .collect();
        assert!(heavy.turn().await.is_err(), "no turn to build");
        drop(building);
        assert!(heavy.turn().await.is_ok());
    }
}
