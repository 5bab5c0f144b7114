//! Warnings that a client can trigger at will (refused connections, failing reviews) are
//! logged at most once per period, with how many were left out, so that a flood of requests
//! cannot flood the log too.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(super) struct Throttle {
    every: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    last: Option<Instant>,
    skipped: u64,
}

impl Throttle {
    pub(super) fn new(every: Duration) -> Throttle {
        Throttle {
            every,
            state: Mutex::new(State::default()),
        }
    }

    /// `Some(n)` when this occurrence should be logged, `n` being those left out since the
    /// last one logged; `None` when it is to be left out.
    pub(super) fn admit(&self) -> Option<u64> {
        self.admit_at(Instant::now())
    }

    fn admit_at(&self, now: Instant) -> Option<u64> {
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if s.last.is_some_and(|l| now.duration_since(l) < self.every) {
            s.skipped += 1;
            return None;
        }
        s.last = Some(now);
        Some(std::mem::take(&mut s.skipped))
    }
}

/// ", and N more like it" for a log line, or nothing.
pub(super) fn more(skipped: u64) -> String {
    if skipped == 0 {
        String::new()
    } else {
        format!(" (and {skipped} more like it since the last such message)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_message_per_period_counting_the_rest() {
        let t = Throttle::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(t.admit_at(t0), Some(0));
        assert_eq!(t.admit_at(t0 + Duration::from_secs(1)), None);
        assert_eq!(t.admit_at(t0 + Duration::from_secs(9)), None);
        assert_eq!(t.admit_at(t0 + Duration::from_secs(10)), Some(2));
        assert_eq!(t.admit_at(t0 + Duration::from_secs(21)), Some(0));
        assert_eq!(more(0), "");
        assert!(more(2).contains("2 more"));
    }
}
