//! When a cluster's API server last answered: a list page, a watch accepted, a watch event or
//! bookmark. The watches stamp it as they read; the runner's liveness probe reads it, so a
//! cluster whose watches are heard from (an API server sends each watch a bookmark about
//! once a minute: a cluster's thirty watches, one every two seconds) needs no probe of its
//! own to tell it from a hung one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::time::Instant;

/// Shared by a cluster's watches (which stamp it) and its probe (which reads it).
#[derive(Clone, Debug)]
pub struct Heard {
    base: Instant,
    /// Milliseconds from `base` to the last answer.
    millis: Arc<AtomicU64>,
}

impl Heard {
    /// Nothing heard yet: `last` is now.
    pub fn new() -> Self {
        Heard {
            base: Instant::now(),
            millis: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The server answered just now.
    pub fn stamp(&self) {
        let ms = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.millis.fetch_max(ms, Ordering::Relaxed);
    }

    /// When the server last answered (to the millisecond).
    pub fn last(&self) -> Instant {
        self.base + std::time::Duration::from_millis(self.millis.load(Ordering::Relaxed))
    }
}

impl Default for Heard {
    fn default() -> Self {
        Heard::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn the_last_answer_is_what_any_clone_stamped() {
        let heard = Heard::new();
        let start = heard.last();
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(heard.last(), start, "nothing stamped yet");
        heard.clone().stamp();
        assert_eq!(heard.last(), start + Duration::from_secs(3));
    }
}
