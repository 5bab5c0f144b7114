//! When the next pass runs: at least every scan interval, and soon after something relevant
//! happens. A wake-up (a pod turning unschedulable, a node turning ready) starts a batch; the
//! pass runs once the cluster has been quiet for `debounce`, and at the latest `debounce_max`
//! after the batch's first wake-up, so a burst makes one pass and a steady stream still gets
//! one (Karpenter's idle and maximum batch durations).

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug)]
pub(super) struct Schedule {
    quiet: Duration,
    max: Duration,
    scan: Duration,
    /// The periodic floor.
    periodic: Instant,
    /// The batch under way: its first wake-up and when it is due.
    batch: Option<(Instant, Instant)>,
}

impl Schedule {
    /// A schedule whose first pass is due at once.
    pub(super) fn new(quiet: Duration, max: Duration, scan: Duration, now: Instant) -> Self {
        Schedule {
            quiet,
            max: max.max(quiet),
            scan,
            periodic: now,
            batch: None,
        }
    }

    /// Something relevant happened at `now`.
    pub(super) fn woken(&mut self, now: Instant) {
        let first = self.batch.map_or(now, |(first, _)| first);
        let due = (now + self.quiet).min(first + self.max);
        self.batch = Some((first, due));
    }

    /// When the next pass is due.
    pub(super) fn next(&self) -> Instant {
        match self.batch {
            Some((_, due)) => due.min(self.periodic),
            None => self.periodic,
        }
    }

    /// A pass ran, ending at `now`: what woke it is answered.
    pub(super) fn passed(&mut self, now: Instant) {
        self.batch = None;
        self.periodic = now + self.scan;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn schedule(t0: Instant) -> Schedule {
        let mut s = Schedule::new(200 * MS, 2000 * MS, 10_000 * MS, t0);
        s.passed(t0);
        s
    }

    #[test]
    fn a_lone_event_is_answered_after_the_quiet_window() {
        let t0 = Instant::now();
        let mut s = schedule(t0);
        assert_eq!(s.next(), t0 + 10_000 * MS, "the periodic floor");
        s.woken(t0 + 1000 * MS);
        assert_eq!(s.next(), t0 + 1200 * MS);
        s.passed(t0 + 1250 * MS);
        assert_eq!(s.next(), t0 + 11_250 * MS);
    }

    #[test]
    fn a_burst_waits_for_quiet_but_no_longer_than_the_maximum() {
        let t0 = Instant::now();
        let mut s = schedule(t0);
        for i in 0..10 {
            s.woken(t0 + i * 100 * MS);
        }
        assert_eq!(s.next(), t0 + 1100 * MS, "quiet after the last event");
        for i in 10..40 {
            s.woken(t0 + i * 100 * MS);
        }
        assert_eq!(
            s.next(),
            t0 + 2000 * MS,
            "a steady stream still gets its pass"
        );
    }

    #[test]
    fn the_periodic_floor_wins_when_sooner() {
        let t0 = Instant::now();
        let mut s = schedule(t0);
        s.woken(t0 + 9900 * MS);
        assert_eq!(s.next(), t0 + 10_000 * MS);
        let fresh = Schedule::new(200 * MS, 100 * MS, 10_000 * MS, t0);
        assert_eq!(fresh.next(), t0, "the first pass at once");
    }
}
