//! The exposition `/metrics` serves, read when the SDK collects and handed to it as
//! instruments of the same names: gauges and counters as observable instruments (their
//! callbacks run at collection time), histograms replayed (`replay`). The SDK has no
//! producer of ready-made metrics to plug in (0.33), hence one instrument per family,
//! created as families appear (a histogram once it has a series to take its bounds from).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{AsyncInstrument, Histogram, Meter};
use tokio::sync::Notify;

use super::replay::{Totals, replay};
use crate::telemetry::metrics::{Family, Type, parse};

/// What `/metrics` serves now.
pub type Source = Arc<dyn Fn() -> String + Send + Sync>;

/// The bounds of each histogram family, which the SDK's view reads.
pub(super) type Bounds = Arc<RwLock<HashMap<String, Vec<f64>>>>;

pub(super) struct Bridge {
    source: Source,
    /// A snapshot serves every callback of one collection, and is read again after this.
    fresh_for: Duration,
    /// How often families are looked for without being told (before any instrument has
    /// a callback to notice them).
    retry: Duration,
    bounds: Bounds,
    state: Mutex<State>,
    /// A family without an instrument yet was seen.
    new_family: Notify,
}

#[derive(Default)]
struct State {
    snapshot: Option<(Instant, Arc<Snapshot>)>,
    registered: HashSet<String>,
    histograms: HashMap<String, Histogram<f64>>,
    /// Each histogram series' totals when last replayed, by family and labels.
    replayed: HashMap<(String, Vec<(String, String)>), Totals>,
    /// The exposition could not be read: said once.
    unreadable: bool,
}

/// One reading of the exposition, by family name.
struct Snapshot(HashMap<String, Family>);

impl Bridge {
    pub(super) fn new(
        source: Source,
        fresh_for: Duration,
        retry: Duration,
        bounds: Bounds,
    ) -> Self {
        Bridge {
            source,
            fresh_for,
            retry,
            bounds,
            state: Mutex::default(),
            new_family: Notify::new(),
        }
    }

    /// Creates instruments for the families there are, then for each new one as it is seen.
    /// Outside the SDK's collection: creating an instrument takes the lock a collection holds.
    pub(super) async fn register_families(self: Arc<Self>, meter: Meter) {
        loop {
            if let Some(snapshot) = self.snapshot() {
                self.register(&meter, &snapshot);
            }
            let _ = tokio::time::timeout(self.retry, self.new_family.notified()).await;
        }
    }

    fn register(self: &Arc<Self>, meter: &Meter, snapshot: &Snapshot) {
        for family in snapshot.0.values() {
            let wanted = self
                .state
                .lock()
                .is_ok_and(|s| needs_instrument(&s.registered, family));
            if !wanted {
                continue;
            }
            let histogram = self.instrument(meter, family);
            if let Ok(mut state) = self.state.lock() {
                state.registered.insert(family.name.clone());
                if let Some(h) = histogram {
                    state.histograms.insert(family.name.clone(), h);
                }
            }
        }
    }

    /// The family's instrument; a histogram's, to replay into, is returned.
    fn instrument(self: &Arc<Self>, meter: &Meter, family: &Family) -> Option<Histogram<f64>> {
        let name = family.name.clone();
        let bridge = self.clone();
        let observe = move |o: &dyn AsyncInstrument<f64>| bridge.observe(&name, o);
        let help = family.help.clone();
        match family.kind {
            Type::Gauge => {
                meter
                    .f64_observable_gauge(family.name.clone())
                    .with_description(help)
                    .with_callback(observe)
                    .build();
                None
            }
            Type::Counter => {
                meter
                    .f64_observable_counter(family.name.clone())
                    .with_description(help)
                    .with_callback(observe)
                    .build();
                None
            }
            Type::Histogram => {
                let bounds = family.histograms().first()?.bounds.clone();
                if let Ok(mut all) = self.bounds.write() {
                    all.insert(family.name.clone(), bounds.clone());
                }
                let histogram = meter
                    .f64_histogram(family.name.clone())
                    .with_description(help)
                    .with_boundaries(bounds)
                    .build();
                Some(histogram)
            }
        }
    }

    /// A callback: the family's samples as they are now, `cluster` named as OpenTelemetry
    /// names it.
    fn observe(&self, name: &str, o: &dyn AsyncInstrument<f64>) {
        let Some(snapshot) = self.snapshot() else {
            return;
        };
        for sample in snapshot.0.get(name).map_or(&[][..], |f| &f.samples) {
            o.observe(sample.value, &attributes(&sample.labels));
        }
    }

    /// The exposition as last read, read again once no longer fresh (the histograms'
    /// new observations recorded then).
    fn snapshot(&self) -> Option<Arc<Snapshot>> {
        let mut state = self.state.lock().ok()?;
        if let Some((at, snapshot)) = &state.snapshot
            && at.elapsed() < self.fresh_for
        {
            return Some(snapshot.clone());
        }
        let families = match parse(&(self.source)()) {
            Ok(families) => families,
            Err(e) => {
                if !std::mem::replace(&mut state.unreadable, true) {
                    tracing::warn!("metrics over OTLP: cannot read the hub's own metrics: {e}");
                }
                return None;
            }
        };
        let snapshot = Arc::new(Snapshot(
            families.into_iter().map(|f| (f.name.clone(), f)).collect(),
        ));
        replay_histograms(&mut state, &snapshot);
        if snapshot
            .0
            .values()
            .any(|f| needs_instrument(&state.registered, f))
        {
            self.new_family.notify_one();
        }
        state.snapshot = Some((Instant::now(), snapshot.clone()));
        Some(snapshot)
    }
}

/// Not registered yet, and with what its instrument needs (a histogram: a series to take
/// its bounds from).
fn needs_instrument(registered: &HashSet<String>, family: &Family) -> bool {
    !registered.contains(&family.name)
        && (family.kind != Type::Histogram || !family.samples.is_empty())
}

/// Records each histogram series' observations since it was last replayed.
fn replay_histograms(state: &mut State, snapshot: &Snapshot) {
    let State {
        histograms,
        replayed,
        ..
    } = state;
    let mut seen = HashMap::new();
    for (name, histogram) in histograms.iter() {
        let Some(family) = snapshot.0.get(name) else {
            continue;
        };
        for series in family.histograms() {
            let key = (name.clone(), series.labels);
            let after = Totals {
                cumulative: series.cumulative,
                count: series.count,
                sum: series.sum,
            };
            let before = replayed.remove(&key).unwrap_or_default();
            let attributes = attributes(&key.1);
            for (value, times) in replay(&series.bounds, &before, &after) {
                for _ in 0..times {
                    histogram.record(value, &attributes);
                }
            }
            seen.insert(key, after);
        }
    }
    // Series gone from the exposition are forgotten: back, they start over.
    *replayed = seen;
}

/// A sample's labels as attributes: the fleet.toml cluster is `k8s.cluster.name`, as in the
/// traces; the other labels keep their names.
fn attributes(labels: &[(String, String)]) -> Vec<KeyValue> {
    labels
        .iter()
        .map(|(k, v)| {
            let key = if k == "cluster" {
                "k8s.cluster.name".to_string()
            } else {
                k.clone()
            };
            KeyValue::new(key, v.clone())
        })
        .collect()
}
