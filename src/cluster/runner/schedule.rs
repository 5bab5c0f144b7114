//! When the next pass runs: at least every scan interval, and soon after something relevant
//! happens. A wake-up (a pod turning unschedulable, a node turning ready) starts a batch; the
//! pass runs once the cluster has been quiet for `debounce`, and at the latest `debounce_max`
//! after the batch's first wake-up, so a burst makes one pass and a steady stream still gets
//! one (Karpenter's idle and maximum batch durations). A batch due while its burst is still
//! arriving (`burst`) is held for another quiet window, within the same maximum.

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

    /// The batch came due at `now` while more of its burst is still arriving: it waits
    /// another quiet window, never past its maximum. False (run the pass) when the periodic
    /// floor is due too, or the maximum is reached.
    pub(super) fn hold(&mut self, now: Instant) -> bool {
        if !self.holdable(now) {
            return false;
        }
        if let Some((first, due)) = &mut self.batch {
            *due = (now + self.quiet).min(*first + self.max);
        }
        true
    }

    /// Whether a pass due at `now` is a batch that may still wait.
    pub(super) fn holdable(&self, now: Instant) -> bool {
        self.batch
            .is_some_and(|(first, _)| now < self.periodic && now < first + self.max)
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
    fn a_burst_still_arriving_is_held_up_to_the_maximum() {
        let t0 = Instant::now();
        let mut s = schedule(t0);
        s.woken(t0 + 1000 * MS);
        // Due at 1200; the burst's pods are still being created: another quiet window.
        assert!(s.hold(t0 + 1200 * MS));
        assert_eq!(s.next(), t0 + 1400 * MS);
        assert!(s.hold(t0 + 2900 * MS));
        assert_eq!(
            s.next(),
            t0 + 3000 * MS,
            "never past the first wake-up + max"
        );
        assert!(
            !s.hold(t0 + 3000 * MS),
            "the maximum is reached: the pass runs"
        );
        s.passed(t0 + 3050 * MS);
        assert!(!s.hold(t0 + 3100 * MS), "nothing to hold without a batch");
    }

    #[test]
    fn the_periodic_floor_is_never_held() {
        let t0 = Instant::now();
        let mut s = schedule(t0);
        s.woken(t0 + 9_900 * MS);
        assert!(!s.hold(t0 + 10_000 * MS));
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
