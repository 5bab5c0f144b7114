//! Histograms carried over into the SDK. OpenTelemetry has no asynchronous histogram, and
//! the SDK's metric data cannot be built outside it (0.33: its fields are crate-private and
//! there is no public producer), so a histogram's new observations since the last
//! collection are recorded again into a synchronous one with the same bounds: one value
//! per new observation, in its bucket, the values spread within their buckets so that
//! their sum is the exposition's. Bucket counts, count and sum then equal `/metrics`.

/// One histogram series' totals as the exposition gives them.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Totals {
    /// Observations at or under each finite bound.
    pub cumulative: Vec<u64>,
    pub count: u64,
    pub sum: f64,
}

/// `(value, times)` to record into a histogram with `bounds` so that it goes from `before`
/// to `after`. Totals that went down (a cluster removed and added again) start over.
pub(super) fn replay(bounds: &[f64], before: &Totals, after: &Totals) -> Vec<(f64, u64)> {
    let Some(now) = per_bucket(bounds, after) else {
        return Vec::new();
    };
    let since = per_bucket(bounds, before).and_then(|then| {
        now.iter()
            .zip(&then)
            .map(|(n, t)| n.checked_sub(*t))
            .collect()
    });
    let (new, sum): (Vec<u64>, f64) = match since {
        Some(new) => (new, after.sum - before.sum),
        None => (now, after.sum),
    };
    spread(bounds, &new, sum)
}

/// Counts per bucket, the last one past every bound; `None` if they do not match the bounds.
fn per_bucket(bounds: &[f64], t: &Totals) -> Option<Vec<u64>> {
    if t.cumulative.len() != bounds.len() {
        return None;
    }
    let mut counts = Vec::with_capacity(bounds.len() + 1);
    let mut under = 0;
    for &c in t.cumulative.iter().chain([t.count].iter()) {
        counts.push(c.checked_sub(under)?);
        under = c;
    }
    Some(counts)
}

/// One value per bucket with new observations: each starts at its bucket's lowest value,
/// then buckets in turn take what is left of the sum, up to their upper bound (the last
/// bucket has none).
fn spread(bounds: &[f64], new: &[u64], sum: f64) -> Vec<(f64, u64)> {
    let ranges: Vec<(f64, f64)> = (0..new.len()).map(|j| range(bounds, j)).collect();
    let lowest: f64 = new
        .iter()
        .zip(&ranges)
        .map(|(&n, (lo, _))| n as f64 * lo)
        .sum();
    let mut left = sum - lowest;
    let mut values = Vec::new();
    for (&n, &(lo, hi)) in new.iter().zip(&ranges) {
        if n == 0 {
            continue;
        }
        let times = n as f64;
        let room = ((hi - lo) * times).max(0.0);
        let take = left.max(0.0).min(room);
        left -= take;
        values.push(((lo + take / times).min(hi), n));
    }
    values
}

/// The values bucket `j` holds: over the bound below (0 for the first bucket, the hub's
/// observations being durations), up to its own.
fn range(bounds: &[f64], j: usize) -> (f64, f64) {
    let hi = bounds.get(j).copied().unwrap_or(f64::INFINITY);
    let lo = match j.checked_sub(1).and_then(|below| bounds.get(below)) {
        Some(below) => below.next_up(),
        None => 0.0f64.min(hi),
    };
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: [f64; 3] = [0.1, 1.0, 10.0];

    /// What an SDK histogram with `BOUNDS` holds after these records.
    fn recorded(values: &[(f64, u64)]) -> Totals {
        let mut t = Totals {
            cumulative: vec![0; BOUNDS.len()],
            ..Totals::default()
        };
        for &(v, n) in values {
            // The SDK's rule: the first bucket whose bound is not below the value.
            let bucket = BOUNDS.partition_point(|&b| b < v);
            for c in t.cumulative.iter_mut().skip(bucket) {
                *c += n;
            }
            t.count += n;
            t.sum += v * n as f64;
        }
        t
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(1.0)
    }

    #[test]
    fn replayed_observations_give_the_same_buckets_count_and_sum() {
        let after = Totals {
            cumulative: vec![2, 3, 7],
            count: 9,
            sum: 0.05 + 0.07 + 0.5 + 2.0 + 3.0 + 4.0 + 9.0 + 30.0 + 45.0,
        };
        let got = recorded(&replay(&BOUNDS, &Totals::default(), &after));
        assert_eq!(got.cumulative, after.cumulative);
        assert_eq!(got.count, after.count);
        assert!(close(got.sum, after.sum), "{} vs {}", got.sum, after.sum);
    }

    #[test]
    fn only_what_is_new_is_replayed_and_a_reset_starts_over() {
        let before = Totals {
            cumulative: vec![1, 1, 1],
            count: 1,
            sum: 0.05,
        };
        let after = Totals {
            cumulative: vec![1, 2, 2],
            count: 3,
            sum: 0.05 + 0.9 + 12.0,
        };
        let values = replay(&BOUNDS, &before, &after);
        let got = recorded(&values);
        assert_eq!(got.cumulative, vec![0, 1, 1]);
        assert_eq!(got.count, 2);
        assert!(close(got.sum, 12.9), "{values:?}");
        assert!(replay(&BOUNDS, &after, &after).is_empty());
        // Fewer than before: the series started over, all of it is new.
        let restarted = Totals {
            cumulative: vec![0, 1, 1],
            count: 1,
            sum: 0.5,
        };
        let got = recorded(&replay(&BOUNDS, &after, &restarted));
        assert_eq!(got.cumulative, restarted.cumulative);
        assert!(close(got.sum, 0.5));
    }

    #[test]
    fn values_stay_in_their_buckets_whatever_the_sum() {
        let after = Totals {
            cumulative: vec![0, 3, 3],
            count: 3,
            // Less than three values over 0.1 can sum to: impossible, but the buckets hold.
            sum: 0.2,
        };
        let got = recorded(&replay(&BOUNDS, &Totals::default(), &after));
        assert_eq!(got.cumulative, after.cumulative);
        let mismatched = Totals {
            cumulative: vec![1],
            count: 1,
            sum: 1.0,
        };
        assert!(replay(&BOUNDS, &Totals::default(), &mismatched).is_empty());
    }
}
