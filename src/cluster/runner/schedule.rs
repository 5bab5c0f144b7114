//! When the next pass runs: at least every scan interval, and soon after something relevant
//! happens. A wake-up (a pod turning unschedulable, a node turning ready) starts a batch; the
//! pass runs once the cluster has been quiet for `debounce`, and at the latest `debounce_max`
//! after the batch's first wake-up, so a burst makes one pass and a steady stream still gets
//! one (Karpenter's idle and maximum batch durations). A batch due while its burst is still
//! arriving (`burst`) is held for another quiet window, within the same maximum. While a
//! batch gathers, the runner looks at it every quiet window, so that a burst too large to be
//! seen whole within the maximum is decided on at once (`burst::Arriving::beyond`, at the
//! `pace` measured between the looks).

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug)]
pub(super) struct Schedule {
    quiet: Duration,
    max: Duration,
    scan: Duration,
    /// The periodic floor.
    periodic: Instant,
    /// The batch under way.
    batch: Option<Batch>,
}

#[derive(Clone, Copy, Debug)]
struct Batch {
    /// Its first wake-up.
    first: Instant,
    /// When its pass is due.
    due: Instant,
    /// When the runner next looks at the burst before the pass is due (every quiet window:
    /// a wake-up every few milliseconds keeps the batch from being due until its maximum,
    /// and a burst too large to wait for is told apart by looking).
    look: Instant,
    /// The first look that asked for a pace, and the count it saw.
    pace_from: Option<(Instant, u64)>,
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
        match &mut self.batch {
            Some(b) => b.due = (now + self.quiet).min(b.first + self.max),
            None => {
                let due = now + self.quiet;
                self.batch = Some(Batch {
                    first: now,
                    due,
                    look: due,
                    pace_from: None,
                });
            }
        }
    }

    /// When the runner next wakes: a look at the batch, its pass, or the periodic floor.
    pub(super) fn next(&self) -> Instant {
        match self.batch {
            Some(b) => b.due.min(b.look).min(self.periodic),
            None => self.periodic,
        }
    }

    /// Whether the pass is due at `now` (not only a look at the batch).
    pub(super) fn is_due(&self, now: Instant) -> bool {
        self.batch.is_none_or(|b| now >= b.due) || now >= self.periodic
    }

    /// The batch was looked at, at `now`: the next look a quiet window later.
    pub(super) fn looked(&mut self, now: Instant) {
        if let Some(b) = &mut self.batch {
            b.look = now + self.quiet;
        }
    }

    /// How fast `count` (a running count, such as the pods turned unschedulable) grew, a
    /// second, since the batch's first look that asked: `None` at that look and until a
    /// quiet window later.
    pub(super) fn pace(&mut self, now: Instant, count: u64) -> Option<f64> {
        let b = self.batch.as_mut()?;
        let (since, from) = *b.pace_from.get_or_insert((now, count));
        let span = now.saturating_duration_since(since);
        let grown = count.saturating_sub(from) as f64;
        (span >= self.quiet).then(|| grown / span.as_secs_f64())
    }

    /// The longest a batch waits.
    pub(super) fn max(&self) -> Duration {
        self.max
    }

    /// The batch came due at `now` while more of its burst is still arriving: it waits
    /// another quiet window, never past its maximum. False (run the pass) when the periodic
    /// floor is due too, or the maximum is reached.
    pub(super) fn hold(&mut self, now: Instant) -> bool {
        if !self.holdable(now) {
            return false;
        }
        if let Some(b) = &mut self.batch {
            b.due = (now + self.quiet).min(b.first + self.max);
            b.look = now + self.quiet;
        }
        true
    }

    /// Whether a pass due at `now` is a batch that may still wait.
    pub(super) fn holdable(&self, now: Instant) -> bool {
        self.batch
            .is_some_and(|b| now < self.periodic && now < b.first + self.max)
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
        assert_eq!(
            s.next(),
            t0 + 200 * MS,
            "a look after the first quiet window"
        );
        assert!(!s.is_due(t0 + 200 * MS));
        s.looked(t0 + 1000 * MS);
        assert_eq!(s.next(), t0 + 1100 * MS, "quiet after the last event");
        assert!(s.is_due(t0 + 1100 * MS));
        // A wake-up every 100 ms, and the runner's looks in between, as it would.
        for i in 10..40 {
            let now = t0 + i * 100 * MS;
            if s.next() <= now && !s.is_due(now) {
                s.looked(now);
            }
            s.woken(now);
        }
        assert_eq!(
            s.next(),
            t0 + 2000 * MS,
            "a steady stream still gets its pass"
        );
        assert!(s.is_due(t0 + 2000 * MS));
    }

    #[test]
    fn the_pace_is_measured_between_looks_a_quiet_window_apart_within_a_batch() {
        let t0 = Instant::now();
        let mut s = schedule(t0);
        assert_eq!(s.pace(t0, 5), None, "no batch");
        s.woken(t0);
        assert_eq!(
            s.pace(t0 + 200 * MS, 40),
            None,
            "the first look sets the start"
        );
        assert_eq!(
            s.pace(t0 + 300 * MS, 60),
            None,
            "less than a quiet window later"
        );
        assert_eq!(s.pace(t0 + 400 * MS, 60), Some(100.0));
        s.passed(t0 + 500 * MS);
        s.woken(t0 + 600 * MS);
        assert_eq!(s.pace(t0 + 800 * MS, 60), None, "a new batch, a new start");
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
