//! `EventRecorder`: the handle a runner records events through, and the task that writes
//! them as core/v1 Events.
//!
//! `record` never waits: it runs the [`EventFilter`] under a short lock and hands what is
//! admitted to a bounded queue; a full queue or a closed gate drops the event and counts
//! it. The writing task owns nothing but the client: every call has a deadline, and a
//! failed write is counted and forgotten (events are best effort, as in client-go).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::filter::{Admission, EventFilter, FilterSettings};
use super::{EventSpec, REPORTING_CONTROLLER, SOURCE_COMPONENT};
use crate::cluster::ClusterName;
use crate::cluster::error::{CallError, Write, write_in};
use crate::cluster::gate::WriteGate;
use crate::telemetry::Parent;

/// Longer messages are cut: the events API refuses notes over 1 kB.
const MAX_MESSAGE: usize = 1024;

#[derive(Clone, Debug)]
pub struct RecorderSettings {
    pub filter: FilterSettings,
    /// Admitted events waiting to be written. With the default rate limit (burst 25) the
    /// queue only fills while the API server is slow.
    pub queue: usize,
    /// Deadline of each write.
    pub request_timeout: Duration,
    /// `reportingInstance`: which hub replica wrote the event.
    pub instance: String,
}

impl RecorderSettings {
    pub fn new(request_timeout: Duration, instance: &str) -> Self {
        RecorderSettings {
            filter: FilterSettings::default(),
            queue: 256,
            request_timeout,
            instance: instance.to_string(),
        }
    }
}

/// What happened to the events recorded so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventStats {
    /// Written (created, or their count raised).
    pub written: u64,
    pub duplicates: u64,
    pub rate_limited: u64,
    /// Dropped because the queue was full.
    pub queue_full: u64,
    /// Dropped because this replica may not write.
    pub gate_closed: u64,
    /// Writes the API server refused or did not answer in time.
    pub failed: u64,
}

#[derive(Default)]
struct Counters {
    written: AtomicU64,
    duplicates: AtomicU64,
    rate_limited: AtomicU64,
    queue_full: AtomicU64,
    gate_closed: AtomicU64,
    failed: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

struct Shared {
    filter: Mutex<EventFilter>,
    tx: mpsc::Sender<Admitted>,
    gate: WriteGate,
    counters: Counters,
}

struct Admitted {
    spec: EventSpec,
    admission: Admission,
    at: Timestamp,
    /// The pass that recorded it: the write's span goes under it.
    parent: Parent,
}

/// Cheap to clone; one per cluster. The writing task ends once every handle is dropped.
#[derive(Clone)]
pub struct EventRecorder {
    shared: Arc<Shared>,
}

impl EventRecorder {
    /// A recorder for one cluster and its writing task (spawned on the current runtime).
    pub fn spawn(
        client: Client,
        cluster: ClusterName,
        gate: WriteGate,
        settings: RecorderSettings,
    ) -> (EventRecorder, JoinHandle<()>) {
        let (recorder, rx) = EventRecorder::unstarted(gate, &settings);
        let writer = Writer {
            client,
            cluster,
            settings,
            shared: Arc::downgrade(&recorder.shared),
        };
        let task = tokio::spawn(writer.run(rx));
        (recorder, task)
    }

    /// The handle and the receiving end of its queue, with no writer yet.
    fn unstarted(
        gate: WriteGate,
        settings: &RecorderSettings,
    ) -> (EventRecorder, mpsc::Receiver<Admitted>) {
        let (tx, rx) = mpsc::channel(settings.queue.max(1));
        // Names' suffixes start at the wall clock's nanoseconds, as client-go's do, so a
        // restarted hub does not reuse them.
        let seed = Timestamp::now().as_nanosecond().unsigned_abs() as u64;
        let shared = Arc::new(Shared {
            filter: Mutex::new(EventFilter::new(settings.filter.clone(), seed)),
            tx,
            gate,
            counters: Counters::default(),
        });
        (EventRecorder { shared }, rx)
    }

    /// Records an event, or drops it (a duplicate, over the rate limit, a full queue, a
    /// closed gate). Never waits.
    pub fn record(&self, event: EventSpec) {
        let s = &self.shared;
        if !s.gate.is_open() {
            bump(&s.counters.gate_closed);
            return;
        }
        // A place in the queue first, so an event the filter admits is not lost after it
        // was counted against the window.
        let Ok(permit) = s.tx.try_reserve() else {
            bump(&s.counters.queue_full);
            return;
        };
        let admission = {
            let mut filter = s.filter.lock().unwrap_or_else(|e| e.into_inner());
            filter.admit(&event, tokio::time::Instant::now())
        };
        match admission {
            Admission::Duplicate => bump(&s.counters.duplicates),
            Admission::RateLimited => bump(&s.counters.rate_limited),
            admission => permit.send(Admitted {
                spec: event,
                admission,
                at: Timestamp::now(),
                parent: Parent::current(),
            }),
        }
    }

    pub fn record_all(&self, events: impl IntoIterator<Item = EventSpec>) {
        for e in events {
            self.record(e);
        }
    }

    pub fn stats(&self) -> EventStats {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EventStats {
            written: get(&c.written),
            duplicates: get(&c.duplicates),
            rate_limited: get(&c.rate_limited),
            queue_full: get(&c.queue_full),
            gate_closed: get(&c.gate_closed),
            failed: get(&c.failed),
        }
    }
}

struct Writer {
    client: Client,
    cluster: ClusterName,
    settings: RecorderSettings,
    /// Weak, so that dropping the last recorder closes the queue and ends the task.
    shared: std::sync::Weak<Shared>,
}

impl Writer {
    async fn run(self, mut rx: mpsc::Receiver<Admitted>) {
        while let Some(a) = rx.recv().await {
            let Some(shared) = self.shared.upgrade() else {
                return;
            };
            let c = &shared.counters;
            // The gate may have closed while the event waited.
            if !shared.gate.is_open() {
                bump(&c.gate_closed);
                continue;
            }
            match self.write(&a).await {
                Ok(()) => bump(&c.written),
                Err(e) => {
                    bump(&c.failed);
                    tracing::debug!(
                        k8s.cluster.name = %self.cluster,
                        error = %e,
                        category = e.category().as_str(),
                        "event not written"
                    );
                }
            }
        }
    }

    async fn write(&self, a: &Admitted) -> Result<(), CallError> {
        let ns = a.spec.object.event_namespace();
        let api: Api<Event> = Api::namespaced(self.client.clone(), ns);
        match &a.admission {
            Admission::Repeat { name, count } => {
                let patched = self.bump_count(&api, ns, name, *count, a).await;
                match patched {
                    // Gone (events expire after an hour): write it anew under its name.
                    Err(e) if e.is_not_found() => self.create(&api, ns, name, *count, a).await,
                    other => other,
                }
            }
            Admission::New { name } => self.create(&api, ns, name, 1, a).await,
            Admission::Duplicate | Admission::RateLimited => Ok(()),
        }
    }

    async fn bump_count(
        &self,
        api: &Api<Event>,
        ns: &str,
        name: &str,
        count: i32,
        a: &Admitted,
    ) -> Result<(), CallError> {
        let patch = serde_json::json!({"count": count, "lastTimestamp": Time(a.at)});
        write_in(
            span("PATCH", ns, name, &a.parent),
            || format!("patch Event {ns}/{name}"),
            self.settings.request_timeout,
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await
        .map(|_| ())
    }

    async fn create(
        &self,
        api: &Api<Event>,
        ns: &str,
        name: &str,
        count: i32,
        a: &Admitted,
    ) -> Result<(), CallError> {
        let event = event_object(&a.spec, ns, name, count, a.at, &self.settings.instance);
        write_in(
            span("POST", ns, name, &a.parent),
            || format!("create Event {ns}/{name}"),
            self.settings.request_timeout,
            api.create(&PostParams::default(), &event),
        )
        .await
        .map(|_| ())
    }
}

/// The span of an event's write: written after its pass, it still belongs to it.
fn span(method: &'static str, ns: &str, name: &str, parent: &Parent) -> tracing::Span {
    let span = Write {
        method,
        kind: "Event",
        subresource: None,
        namespace: Some(ns),
        name,
    }
    .span();
    parent.adopt(&span);
    span
}

/// The core/v1 Event, as client-go's recorder writes it.
fn event_object(
    spec: &EventSpec,
    ns: &str,
    name: &str,
    count: i32,
    at: Timestamp,
    instance: &str,
) -> Event {
    let o = &spec.object;
    Event {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(ns.to_string()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some(o.api_version.to_string()),
            kind: Some(o.kind.to_string()),
            namespace: (!o.namespace.is_empty()).then(|| o.namespace.to_string()),
            name: Some(o.name.to_string()),
            uid: o.uid.as_deref().map(str::to_string),
            ..ObjectReference::default()
        },
        reason: Some(spec.reason.to_string()),
        message: Some(cut(&spec.message, MAX_MESSAGE)),
        type_: Some(spec.event_type.as_str().to_string()),
        source: Some(EventSource {
            component: Some(SOURCE_COMPONENT.to_string()),
            host: None,
        }),
        first_timestamp: Some(Time(at)),
        last_timestamp: Some(Time(at)),
        count: Some(count),
        reporting_component: Some(REPORTING_CONTROLLER.to_string()),
        reporting_instance: Some(instance.to_string()),
        ..Event::default()
    }
}

/// At most `max` bytes, cut on a character boundary.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::events::{EventType, ObjectRef};
    use crate::cluster::gate;

    fn spec() -> EventSpec {
        EventSpec {
            object: ObjectRef::node(&"n1".into(), Some("n1-uid".into())),
            event_type: EventType::Warning,
            reason: "ScaleDownFailed",
            message: "é".repeat(600),
        }
    }

    #[test]
    fn the_event_object_is_what_client_go_writes() {
        let at = Timestamp::from_second(1_800_000_000).unwrap();
        let e = event_object(&spec(), "default", "n1.1f", 1, at, "hub-0");
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["metadata"]["namespace"], "default");
        assert_eq!(
            v["involvedObject"],
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "n1-uid"})
        );
        assert_eq!(v["source"]["component"], "cluster-autoscaler");
        assert_eq!(v["reportingComponent"], "fleetscaler");
        assert_eq!(v["type"], "Warning");
        assert_eq!(v["count"], 1);
        assert_eq!(v["firstTimestamp"], v["lastTimestamp"]);
        assert!(e.message.unwrap().len() <= MAX_MESSAGE);
    }

    #[test]
    fn a_closed_gate_drops_and_a_full_queue_drops_without_waiting() {
        let (tx, gate) = gate::channel(false);
        let mut settings = RecorderSettings::new(Duration::from_millis(50), "hub");
        settings.queue = 1;
        let (rec, mut rx) = EventRecorder::unstarted(gate, &settings);
        rec.record(spec());
        assert_eq!(rec.stats().gate_closed, 1);
        tx.send_replace(true);
        let mut other = spec();
        for i in 0..3 {
            other.message = format!("m{i}");
            rec.record(other.clone());
        }
        assert_eq!(rec.stats().queue_full, 2, "{:?}", rec.stats());
        let first = rx.try_recv().unwrap();
        assert_eq!(first.spec.message, "m0");
        assert!(matches!(first.admission, Admission::New { .. }));
        // With room again, a duplicate of what was admitted is recognised.
        other.message = "m0".into();
        rec.record(other);
        assert_eq!(rec.stats().duplicates, 1);
        assert!(rx.try_recv().is_err());
    }
}
