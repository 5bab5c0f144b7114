//! Watches: a stream of `{"type": ..., "object": ...}` lines replayed from the store's
//! history. A watch starts from a resourceVersion (or from now, after ADDED events for what
//! exists), sends BOOKMARKs when asked, ends at its timeout, when faults cut watches, or
//! with an `ERROR` event carrying a `410 Expired` Status once its version has left the
//! history window — the same contract an API server's watch cache gives.
//!
//! A watch holds no lock while it waits: it copies the new events out of the history and
//! is woken by the store's version channel.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::json;
use tokio::sync::watch as channel;
use tokio::time::Instant;

use super::query::Query;
use super::resources::Resource;
use super::selector::{FieldSelector, LabelSelector, labels_of};
use super::status::ApiError;
use crate::cluster::Cluster;
use crate::faults::{Faults, Outage};
use crate::store::{EventType, Stored};

/// The body of a watch response: one chunk per batch of events.
pub type WatchStream = BoxStream<'static, Bytes>;

/// Events copied out of the history per lock taken, so a long backlog never holds the lock
/// for long.
const BATCH: usize = 1000;

/// Watches wanting no timeout get the API server's lower bound of its default (30 to 60
/// minutes, `--min-request-timeout` × (1 + rand)).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// The API server honours whatever timeout a watch asks for; this only keeps a huge one
/// from overflowing the deadline.
const LONGEST_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

struct Watcher {
    cluster: Arc<Cluster>,
    resource: Resource,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    pos: u64,
    pending: VecDeque<Bytes>,
    versions: channel::Receiver<u64>,
    faults: channel::Receiver<Faults>,
    deadline: Instant,
    bookmarks: Option<(Duration, Instant)>,
    done: bool,
    /// Send each object as a one-row Table (kubectl's `get --watch`).
    table: bool,
}

/// Starts a watch of `resource` (in `namespace`, or all) as `query` asks.
pub fn start(
    cluster: &Arc<Cluster>,
    resource: Resource,
    namespace: Option<String>,
    query: &Query,
    table: bool,
) -> Result<WatchStream, ApiError> {
    let labels = LabelSelector::parse(&query.label_selector)?;
    let fields = FieldSelector::parse(&query.field_selector, resource)?;
    let from = query.resource_version_number()?;
    let state = cluster.lock();
    let mut pending = VecDeque::new();
    let mut initial: Vec<Arc<Stored>> = Vec::new();
    let pos = match from {
        Some(rv) if !query.send_initial_events => match state.store.events_after(rv) {
            Ok(_) => rv,
            Err(expired) => {
                pending.push_back(error_frame(&ApiError::expired(format!(
                    "too old resource version: {rv} ({})",
                    expired.oldest
                ))));
                rv
            }
        },
        _ => {
            initial = state
                .store
                .range(resource, namespace.as_deref(), None)
                .filter(|o| fields.matches(resource, o))
                .cloned()
                .collect();
            state.store.rv()
        }
    };
    let versions = state.store.subscribe();
    drop(state);
    let expired = !pending.is_empty();
    for chunk in initial.chunks(BATCH) {
        let mut out = Vec::new();
        for o in chunk {
            if labels.is_empty() || labels.matches(&labels_of(&o.bytes)) {
                push_frame(
                    &mut out,
                    EventType::Added.as_str(),
                    &o.bytes,
                    table.then_some(resource),
                );
            }
        }
        if !out.is_empty() {
            pending.push_back(Bytes::from(out));
        }
    }
    if query.send_initial_events && query.allow_bookmarks {
        pending.push_back(bookmark_frame(resource, pos, true));
    }
    // Clamped: a client's huge timeoutSeconds must not overflow the deadline.
    let timeout = query.timeout_seconds.map_or(DEFAULT_TIMEOUT, |s| {
        Duration::from_secs(s.min(LONGEST_TIMEOUT.as_secs()))
    });
    let interval = cluster.timing.bookmark_interval;
    let watcher = Watcher {
        cluster: cluster.clone(),
        resource,
        namespace,
        labels,
        fields,
        pos,
        pending,
        versions,
        faults: cluster.faults.subscribe(),
        deadline: Instant::now() + timeout,
        bookmarks: query
            .allow_bookmarks
            .then(|| (interval, Instant::now() + interval)),
        done: expired,
        table,
    };
    Ok(futures::stream::unfold(
        watcher,
        |mut w| async move { w.next().await.map(|b| (b, w)) },
    )
    .boxed())
}

impl Watcher {
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            let (drop_watches, hung) = {
                let f = self.faults.borrow_and_update();
                (f.drop_watches, f.outage == Some(Outage::Hang))
            };
            // A hung API server sends nothing, bookmarks included, on the watches it holds.
            if hung && !drop_watches {
                if self.faults.changed().await.is_err() {
                    return None;
                }
                continue;
            }
            if let Some(chunk) = self.pending.pop_front() {
                return Some(chunk);
            }
            if self.done || drop_watches {
                return None;
            }
            self.versions.borrow_and_update();
            match self.drain() {
                Err(error) => {
                    self.done = true;
                    return Some(error);
                }
                Ok((Some(chunk), _)) => return Some(chunk),
                Ok((None, false)) => continue,
                Ok((None, true)) => {}
            }
            let bookmark_at = self.bookmarks.map(|(_, at)| at);
            tokio::select! {
                changed = self.versions.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                _ = self.faults.changed() => {}
                _ = tokio::time::sleep_until(self.deadline) => return None,
                _ = sleep_until_some(bookmark_at) => {
                    if let Some((interval, at)) = &mut self.bookmarks {
                        *at = Instant::now() + *interval;
                    }
                    return Some(bookmark_frame(self.resource, self.pos, false));
                }
            }
        }
    }

    /// Copies out the events after `pos`: a chunk of matching frames (if any) and whether the
    /// watch has caught up, or the ERROR frame of a watch that fell out of the window.
    fn drain(&mut self) -> Result<(Option<Bytes>, bool), Bytes> {
        let (events, caught_up) = {
            let state = self.cluster.lock();
            let events: Vec<(EventType, Arc<Stored>)> = match state.store.events_after(self.pos) {
                Err(expired) => {
                    return Err(error_frame(&ApiError::expired(format!(
                        "too old resource version: {} ({})",
                        self.pos, expired.oldest
                    ))));
                }
                Ok(iter) => iter
                    .take(BATCH)
                    .inspect(|e| self.pos = e.object.rv)
                    .filter(|e| {
                        e.resource == self.resource
                            && self
                                .namespace
                                .as_deref()
                                .is_none_or(|ns| *e.object.key.namespace == *ns)
                            && self.fields.matches(self.resource, &e.object)
                    })
                    .map(|e| (e.ty, e.object.clone()))
                    .collect(),
            };
            (events, self.pos >= state.store.rv())
        };
        let mut out = Vec::new();
        for (ty, object) in events {
            if self.labels.is_empty() || self.labels.matches(&labels_of(&object.bytes)) {
                push_frame(
                    &mut out,
                    ty.as_str(),
                    &object.bytes,
                    self.table.then_some(self.resource),
                );
            }
        }
        Ok(((!out.is_empty()).then(|| Bytes::from(out)), caught_up))
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Appends one event line; as a one-row Table when the client asked for Tables.
fn push_frame(out: &mut Vec<u8>, ty: &str, object: &[u8], table: Option<Resource>) {
    out.extend_from_slice(br#"{"type":""#);
    out.extend_from_slice(ty.as_bytes());
    out.extend_from_slice(br#"","object":"#);
    match table {
        Some(resource) => {
            let rv = serde_json::from_slice::<serde_json::Value>(object)
                .map(|o| o["metadata"]["resourceVersion"].clone())
                .unwrap_or_default();
            let t = super::table::render(resource, &[object], json!({"resourceVersion": rv}));
            out.extend_from_slice(t.to_string().as_bytes());
        }
        None => out.extend_from_slice(object),
    }
    out.extend_from_slice(b"}\n");
}

fn error_frame(error: &ApiError) -> Bytes {
    let mut line = json!({"type": "ERROR", "object": error.to_status()}).to_string();
    line.push('\n');
    Bytes::from(line)
}

fn bookmark_frame(resource: Resource, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let object = json!({"kind": resource.def().kind, "apiVersion": resource.api_version(), "metadata": meta});
    let mut line = json!({"type": "BOOKMARK", "object": object}).to_string();
    line.push('\n');
    Bytes::from(line)
}
