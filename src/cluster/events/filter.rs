//! Which events are written: upstream's deduplication and a per-cluster rate limit. Pure: the
//! time is a parameter.
//!
//! Deduplication is client-go's spam filter as upstream's cluster-autoscaler configures it
//! without `--record-duplicated-events`: an event identical in object, type, reason and
//! message is written at most once per 5 minutes. When it comes back after that, the event
//! already written gets its `count` raised (client-go's aggregation) instead of a new object.
//!
//! The token bucket then bounds what one cluster costs its API server whatever the plan says:
//! 10,000 pods that cannot be helped make 10,000 distinct events, of which a burst of 25 is
//! written and then 2 a second. Refused events are not remembered, so they get another chance
//! on a later pass; what a user most needs (the status ConfigMap's events) comes first in
//! every pass.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::EventSpec;

#[derive(Clone, Debug)]
pub struct FilterSettings {
    /// Identical events within this window are written once (upstream: 5 minutes).
    pub dedupe_window: Duration,
    /// Distinct events remembered; the oldest are forgotten first (client-go: 4096).
    pub dedupe_capacity: usize,
    /// Events written at once after a quiet spell.
    pub burst: u32,
    /// Events written per second in the long run.
    pub per_second: f64,
}

impl Default for FilterSettings {
    fn default() -> Self {
        FilterSettings {
            dedupe_window: Duration::from_secs(300),
            dedupe_capacity: 4096,
            burst: 25,
            per_second: 2.0,
        }
    }
}

/// What to do with an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Write a new event with this name (`<object>.<hex>`, unique within the recorder).
    New { name: Arc<str> },
    /// Seen before, the window has passed: raise the written event's count to `count`.
    Repeat { name: Arc<str>, count: i32 },
    /// Identical to one written within the window: drop it.
    Duplicate,
    /// Over the rate limit: drop it.
    RateLimited,
}

#[derive(Clone, Debug)]
struct Seen {
    last: Instant,
    name: Arc<str>,
    count: i32,
}

pub struct EventFilter {
    settings: FilterSettings,
    seen: HashMap<u64, Seen>,
    /// Keys in the order they were admitted, for forgetting the oldest; an entry whose
    /// time no longer matches `seen` is stale and skipped.
    order: VecDeque<(u64, Instant)>,
    tokens: f64,
    refilled: Option<Instant>,
    next_suffix: u64,
}

impl EventFilter {
    /// `seed` starts the names' hex suffixes: a recorder passes the wall clock's
    /// nanoseconds, as client-go does, so names do not collide across restarts.
    pub fn new(settings: FilterSettings, seed: u64) -> Self {
        let tokens = f64::from(settings.burst);
        EventFilter {
            settings,
            seen: HashMap::new(),
            order: VecDeque::new(),
            tokens,
            refilled: None,
            next_suffix: seed,
        }
    }

    pub fn admit(&mut self, event: &EventSpec, now: Instant) -> Admission {
        let key = key_of(event);
        let previous = self.seen.get(&key).cloned();
        if let Some(seen) = &previous
            && now.saturating_duration_since(seen.last) < self.settings.dedupe_window
        {
            return Admission::Duplicate;
        }
        if !self.take_token(now) {
            return Admission::RateLimited;
        }
        let (admission, seen) = match previous {
            Some(seen) => {
                let count = seen.count.saturating_add(1);
                let name = seen.name;
                (
                    Admission::Repeat {
                        name: name.clone(),
                        count,
                    },
                    Seen {
                        last: now,
                        name,
                        count,
                    },
                )
            }
            None => {
                let name: Arc<str> = format!("{}.{:x}", event.object.name, self.next_suffix).into();
                self.next_suffix = self.next_suffix.wrapping_add(1);
                (
                    Admission::New { name: name.clone() },
                    Seen {
                        last: now,
                        name,
                        count: 1,
                    },
                )
            }
        };
        self.remember(key, seen);
        admission
    }

    fn take_token(&mut self, now: Instant) -> bool {
        if let Some(at) = self.refilled {
            let earned = now.saturating_duration_since(at).as_secs_f64() * self.settings.per_second;
            self.tokens = (self.tokens + earned).min(f64::from(self.settings.burst));
        }
        self.refilled = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn remember(&mut self, key: u64, seen: Seen) {
        self.order.push_back((key, seen.last));
        self.seen.insert(key, seen);
        while self.seen.len() > self.settings.dedupe_capacity {
            let Some((old, at)) = self.order.pop_front() else {
                break;
            };
            if self.seen.get(&old).is_some_and(|s| s.last == at) {
                self.seen.remove(&old);
            }
        }
        // Re-admitted keys leave stale entries behind; sweep them now and then.
        if self.order.len() > 2 * self.settings.dedupe_capacity + 64 {
            let seen = &self.seen;
            self.order
                .retain(|(k, at)| seen.get(k).is_some_and(|s| s.last == *at));
        }
    }
}

/// client-go's spam key: object (with uid), type, reason and message.
fn key_of(e: &EventSpec) -> u64 {
    let mut h = DefaultHasher::new();
    e.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::events::{EventType, ObjectRef};

    fn event(pod: &str, message: &str) -> EventSpec {
        EventSpec {
            object: ObjectRef::pod(&"ns".into(), &pod.into(), Some(format!("{pod}-uid").into())),
            event_type: EventType::Normal,
            reason: "NotTriggerScaleUp",
            message: message.to_string(),
        }
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn identical_events_are_written_once_per_window_then_counted() {
        let t0 = Instant::now();
        let mut f = EventFilter::new(FilterSettings::default(), 0xa0);
        let e = event("web", "no group fits");
        assert_eq!(
            f.admit(&e, t0),
            Admission::New {
                name: "web.a0".into()
            }
        );
        assert_eq!(f.admit(&e, t0 + secs(10)), Admission::Duplicate);
        assert_eq!(f.admit(&e, t0 + secs(299)), Admission::Duplicate);
        assert_eq!(
            f.admit(&e, t0 + secs(300)),
            Admission::Repeat {
                name: "web.a0".into(),
                count: 2
            }
        );
        // Another message, another object: not duplicates.
        assert!(matches!(
            f.admit(&event("web", "other"), t0 + secs(301)),
            Admission::New { .. }
        ));
        assert_eq!(
            f.admit(&event("api", "no group fits"), t0 + secs(301)),
            Admission::New {
                name: "api.a2".into()
            }
        );
    }

    #[test]
    fn a_flood_is_cut_to_the_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut f = EventFilter::new(FilterSettings::default(), 0);
        let admitted = (0..10_000)
            .filter(|i| {
                matches!(
                    f.admit(&event(&format!("p{i}"), "m"), t0),
                    Admission::New { .. }
                )
            })
            .count();
        assert_eq!(admitted, 25);
        // One second later: two more.
        let later = (0..100)
            .filter(|i| {
                matches!(
                    f.admit(&event(&format!("q{i}"), "m"), t0 + secs(1)),
                    Admission::New { .. }
                )
            })
            .count();
        assert_eq!(later, 2);
        // A refused event was not remembered: it goes through once tokens are back.
        assert!(matches!(
            f.admit(&event("p9999", "m"), t0 + secs(60)),
            Admission::New { .. }
        ));
    }

    #[test]
    fn duplicates_cost_no_tokens() {
        let t0 = Instant::now();
        let settings = FilterSettings {
            burst: 1,
            per_second: 0.0,
            ..FilterSettings::default()
        };
        let mut f = EventFilter::new(settings, 0);
        let e = event("web", "m");
        assert!(matches!(f.admit(&e, t0), Admission::New { .. }));
        for i in 0..100 {
            assert_eq!(f.admit(&e, t0 + secs(i)), Admission::Duplicate);
        }
        assert_eq!(f.admit(&event("x", "m"), t0), Admission::RateLimited);
    }

    #[test]
    fn memory_is_bounded_and_forgets_the_oldest() {
        let t0 = Instant::now();
        let settings = FilterSettings {
            dedupe_capacity: 10,
            burst: 1000,
            ..FilterSettings::default()
        };
        let mut f = EventFilter::new(settings, 0);
        for i in 0..50 {
            f.admit(&event(&format!("p{i}"), "m"), t0);
        }
        assert_eq!(f.seen.len(), 10);
        // The newest are remembered, the oldest forgotten.
        assert_eq!(f.admit(&event("p49", "m"), t0), Admission::Duplicate);
        assert!(matches!(
            f.admit(&event("p0", "m"), t0),
            Admission::New { .. }
        ));
        // Re-admitting the same keys does not grow the order queue without bound.
        for round in 1..200u64 {
            for i in 0..10 {
                f.admit(&event(&format!("r{i}"), "m"), t0 + secs(300 * round));
            }
        }
        assert!(f.order.len() <= 2 * 10 + 64 + 1, "{}", f.order.len());
    }
}
