//! List, then watch from the list's resourceVersion, as client-go's reflector does: a watch
//! that fails or times out resumes from the last resourceVersion seen (bookmarks keep it
//! fresh on quiet kinds), and only a 410 Gone (the version was compacted away) costs a full
//! list again. Errors wait a jittered, doubling backoff.
//!
//! Unlike kube's watcher, this says when a failed watch is live again (`Resumed`: the API
//! server accepted the watch request): a quiet kind has no event to prove it, and a failing
//! kind makes the cache stale until something does.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::heard::Heard;
use super::update::WatchError;
use crate::cluster::error::{CallError, call};

/// Objects per page of a list: a cluster's 30,000 pods never arrive as one response.
const PAGE: u32 = 500;
/// The server ends a watch after between this long and twice it, drawn per watch as
/// client-go's reflector does (`minWatchTimeout` × (1 + rand)): a fleet's watches do not
/// restart in step, and a thousand idle clusters' thirty watches restart some 65 times a
/// second rather than 100 with a fixed 290 s. Each is resumed from its last resourceVersion
/// at once.
const WATCH_SECONDS: u32 = 300;
/// A watch stream silent this long is given up: past the server's own end of it (with the
/// most jitter), with a margin.
const SILENT_WATCH: Duration = Duration::from_secs(2 * WATCH_SECONDS as u64 + 30);
/// First wait before a failed call is tried again; doubles up to `MAX_RETRY`.
const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(30);
/// A watch that ends sooner than this was cut, not timed out.
const SHORTEST_WATCH: Duration = Duration::from_secs(5);

/// How a kind's list and watch reads: the deadline of a list page and of the API server
/// accepting a watch, and where each answer is stamped.
#[derive(Clone, Debug)]
pub struct Reads {
    pub deadline: Duration,
    pub heard: Heard,
}

/// One step of a kind's list and watch.
#[derive(Debug)]
pub enum Event<K> {
    /// A full list begins.
    Init,
    /// An object of the list.
    InitApply(K),
    /// The list is complete: anything not in it is gone.
    InitDone,
    Apply(K),
    Delete(K),
    /// A watch that had failed was accepted again.
    Resumed,
    /// The watch's resourceVersion was compacted away (410 Gone): a full list follows.
    Expired(String),
    /// A call failed; it is tried again after a backoff.
    Error(WatchError),
}

/// What to do next.
enum Phase<K> {
    /// List from the start (`None`) or from a continue token.
    List(Option<String>),
    /// Start a watch from this resourceVersion.
    Watch(String),
    Watching {
        version: String,
        events: BoxStream<'static, kube::Result<WatchEvent<K>>>,
        since: Instant,
    },
}

struct ListWatch<K: Clone + DeserializeOwned + Debug + 'static> {
    api: Api<K>,
    fields: Option<String>,
    reads: Reads,
    phase: Phase<K>,
    /// Changes ready to hand out, in order.
    ready: VecDeque<Event<K>>,
    /// The wait before the next call, after an error or a watch that ended at once.
    retry: Option<Duration>,
    /// Wait `retry` before the next call.
    wait: bool,
    /// A call failed since the watch last worked: its return is news.
    failed: bool,
}

/// The changes of one kind, for as long as the stream is polled.
pub fn list_watch<K>(
    api: Api<K>,
    fields: Option<String>,
    reads: Reads,
) -> BoxStream<'static, Event<K>>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let start = ListWatch {
        api,
        fields,
        reads,
        phase: Phase::List(None),
        ready: VecDeque::new(),
        retry: None,
        wait: false,
        failed: false,
    };
    futures::stream::unfold(start, |mut lw| async move {
        loop {
            if let Some(change) = lw.ready.pop_front() {
                return Some((change, lw));
            }
            // Nothing stays reserved between changes: a page of 500 whole objects (a Pod is
            // over a kilobyte before its heap), or even room for a few, kept by each of
            // thirty watches of a thousand clusters, would be most of the hub's memory.
            if lw.ready.capacity() > 0 {
                lw.ready = VecDeque::new();
            }
            lw.step().await;
        }
    })
    .boxed()
}

impl<K> ListWatch<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    async fn step(&mut self) {
        if let Some(wait) = self.retry.filter(|_| self.wait) {
            tokio::time::sleep(crate::cluster::error::jittered(wait)).await;
        }
        match std::mem::replace(&mut self.phase, Phase::List(None)) {
            // Boxed: a call's future (kube's request, its deadline) is large, and inline it
            // would size this future, held by every watch for its whole life, while the
            // watch spends nearly all of it waiting on its stream.
            Phase::List(token) => Box::pin(self.list(token)).await,
            Phase::Watch(version) => Box::pin(self.start_watch(version)).await,
            Phase::Watching {
                version,
                mut events,
                since,
            } => {
                // The server ends a watch within WATCH_SECONDS: one silent past that is
                // dead (HTTP/2 pings vouch for the connection, not for each stream on it).
                match tokio::time::timeout(SILENT_WATCH, events.next()).await {
                    Ok(next) => self.watched(version, (events, since), next),
                    Err(_) => {
                        let silent = format!("watch: nothing for {}s", SILENT_WATCH.as_secs());
                        self.fail(WatchError::new(silent), Phase::Watch(version));
                    }
                }
            }
        }
    }

    async fn list(&mut self, token: Option<String>) {
        let mut params = ListParams::default().limit(PAGE);
        if let Some(fields) = &self.fields {
            params = params.fields(fields);
        }
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let first = token.is_none();
        match call(
            || "list".into(),
            self.reads.deadline,
            self.api.list(&params),
        )
        .await
        {
            Ok(list) => {
                self.reads.heard.stamp();
                if first {
                    self.ready.push_back(Event::Init);
                }
                self.ready
                    .extend(list.items.into_iter().map(Event::InitApply));
                match list.metadata.continue_.filter(|c| !c.is_empty()) {
                    Some(next) => self.phase = Phase::List(Some(next)),
                    None => {
                        self.ready.push_back(Event::InitDone);
                        let version = list.metadata.resource_version.unwrap_or_default();
                        self.phase = Phase::Watch(version);
                        self.succeeded();
                        self.retry = None;
                    }
                }
            }
            // An expired continue token: the list starts over.
            Err(e) if is_gone(&e) => self.phase = Phase::List(None),
            Err(e) => self.fail(WatchError::of_call(&e), Phase::List(None)),
        }
    }

    async fn start_watch(&mut self, version: String) {
        let mut params = WatchParams::default().timeout(WATCH_SECONDS + jitter_seconds());
        if let Some(fields) = &self.fields {
            params = params.fields(fields);
        }
        let watch = call(
            || "watch".into(),
            self.reads.deadline,
            super::watch_lines::watch(&self.api, &params, &version),
        );
        match watch.await {
            Ok(events) => {
                self.reads.heard.stamp();
                if self.failed {
                    self.ready.push_back(Event::Resumed);
                }
                self.succeeded();
                self.phase = Phase::Watching {
                    version,
                    events: events.boxed(),
                    since: Instant::now(),
                };
            }
            Err(e) if is_gone(&e) => self.expired(e.to_string()),
            Err(e) => self.fail(WatchError::of_call(&e), Phase::Watch(version)),
        }
    }

    fn watched(
        &mut self,
        mut version: String,
        open: (BoxStream<'static, kube::Result<WatchEvent<K>>>, Instant),
        next: Option<kube::Result<WatchEvent<K>>>,
    ) {
        if let Some(Ok(_)) = &next {
            self.reads.heard.stamp();
        }
        let mut seen = |o: &K| {
            if let Some(v) = o.resource_version() {
                version = v;
            }
        };
        let change = match next {
            Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                seen(&o);
                Event::Apply(o)
            }
            Some(Ok(WatchEvent::Deleted(o))) => {
                seen(&o);
                Event::Delete(o)
            }
            Some(Ok(WatchEvent::Bookmark(b))) => {
                version = b.metadata.resource_version;
                return self.keep_watching(version, open);
            }
            // Compacted past our version: only a list can catch up.
            Some(Ok(WatchEvent::Error(s))) if s.code == 410 => {
                return self.expired(format!("{} ({})", s.message, s.code));
            }
            Some(Ok(WatchEvent::Error(s))) => {
                let error = WatchError::from_status(&s);
                return self.fail(error, Phase::Watch(version));
            }
            Some(Err(e)) => {
                let error = WatchError::of_call(&CallError::Api {
                    op: "watch".into(),
                    source: e,
                });
                return self.fail(error, Phase::Watch(version));
            }
            // The server's timeout: resume at once; a watch cut as soon as it starts (a
            // proxy, an API server shedding load) waits like an error, unreported.
            None => {
                if open.1.elapsed() < SHORTEST_WATCH {
                    self.back_off();
                } else {
                    self.retry = None;
                }
                self.phase = Phase::Watch(version);
                return;
            }
        };
        self.retry = None;
        self.ready.push_back(change);
        self.keep_watching(version, open);
    }

    fn keep_watching(
        &mut self,
        version: String,
        (events, since): (BoxStream<'static, kube::Result<WatchEvent<K>>>, Instant),
    ) {
        self.phase = Phase::Watching {
            version,
            events,
            since,
        };
    }

    /// A call worked: no wait before the next. The backoff itself is forgotten only once
    /// data flows, so that a watch accepted and cut at once keeps backing off.
    fn succeeded(&mut self) {
        self.failed = false;
        self.wait = false;
    }

    fn back_off(&mut self) {
        self.wait = true;
        self.retry = Some(self.retry.map_or(FIRST_RETRY, |r| (r * 2).min(MAX_RETRY)));
    }

    fn expired(&mut self, why: String) {
        self.ready.push_back(Event::Expired(why));
        self.phase = Phase::List(None);
    }

    fn fail(&mut self, error: WatchError, then: Phase<K>) {
        self.failed = true;
        self.back_off();
        self.ready.push_back(Event::Error(error));
        self.phase = then;
    }
}

fn is_gone(e: &CallError) -> bool {
    matches!(e, CallError::Api { source: kube::Error::Api(s), .. } if s.code == 410)
}

/// Up to another `WATCH_SECONDS`, so that watches started together do not all end together.
fn jitter_seconds() -> u32 {
    // `jittered` draws between half and one and a half of its duration: shifted to 0..d.
    let d = Duration::from_secs(u64::from(WATCH_SECONDS));
    let spread = crate::cluster::error::jittered(d).saturating_sub(d / 2);
    u32::try_from(spread.as_secs())
        .unwrap_or(0)
        .min(WATCH_SECONDS)
}
