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
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::heard::Heard;
use super::update::WatchError;
use crate::cluster::error::{CallError, call};

/// Objects per page of a list: a cluster's 30,000 pods never arrive as one response.
pub(crate) const PAGE: u32 = 500;
/// The server ends a watch after between this long and twice it, drawn per watch: the API
/// server's own default for a watch that names no timeout (`--min-request-timeout`, 1800 s,
/// × (1 + rand)). client-go's reflector asks for 5–10 minutes, which a fleet pays for: a
/// thousand idle clusters' thirty watches would restart some 65 times a second, where these
/// restart about 11. A dead stream is not left that long: see `SILENT_WATCH`.
const WATCH_SECONDS: u32 = 1800;
/// The API server sends each watch a bookmark about once a minute (its cacher's
/// `bookmarkFrequency`), so a stream silent for three of them and a margin is dead (HTTP/2
/// pings vouch for the connection, not for each stream on it): it is resumed from its last
/// resourceVersion. A server that sends no bookmarks costs a quiet kind a resumption this
/// often, not a stale cache.
const SILENT_WATCH: Duration = Duration::from_secs(200);
/// The first watch after a list ends after between this long and twice it. A cluster's
/// watches start together, after its first lists, and the API server bookmarks each a minute
/// after it started, and every minute on: in step, they would leave the cluster silent for
/// most of each minute, and the liveness probe would fill that silence with requests. The
/// watches that resume from these short ones start at scattered moments, and their bookmarks
/// arrive spread across the minute.
const FIRST_WATCH_SECONDS: u32 = 60;
/// First wait before a failed call is tried again; doubles up to `MAX_RETRY`.
const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(30);
/// A watch that ends sooner than this was cut, not timed out.
const SHORTEST_WATCH: Duration = Duration::from_secs(5);

/// How a kind's list and watch reads: the deadline of a list page and of the API server
/// accepting a watch, where each answer is stamped, and the turn its list pages take.
#[derive(Clone, Debug)]
pub struct Reads {
    pub deadline: Duration,
    pub heard: Heard,
    /// Shared by a cluster's kinds: one list page at a time, from its request until the
    /// consumer has taken the last of its objects. A page is held three times over while it
    /// is read (the response's text, the objects decoded from it, and the objects queued for
    /// the cache), and a cluster's thirty kinds listing at once held all their first pages
    /// together: the hub's peak at start-up, a spike of 25–35 MiB above what the cache
    /// keeps at 1,000 nodes. Turns are taken in order of asking, so a long list of pods
    /// interleaves with the other kinds' short ones rather than holding them back.
    pub pages: Arc<Semaphore>,
}

impl Reads {
    pub fn new(deadline: Duration, heard: Heard) -> Self {
        Reads {
            deadline,
            heard,
            pages: Arc::new(Semaphore::new(1)),
        }
    }
}

/// One step of a kind's list and watch.
#[derive(Debug)]
pub enum Event<K> {
    /// A full list begins.
    Init,
    /// The list holds at most this many objects (see `Page::expected`).
    Expect(usize),
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
    /// The next watch is the first after a list (`FIRST_WATCH_SECONDS`).
    after_list: bool,
    /// This kind's turn at the cluster's list pages (`Reads::pages`), held from a page's
    /// request until its last object is handed out.
    turn: Option<OwnedSemaphorePermit>,
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
        after_list: false,
        turn: None,
    };
    futures::stream::unfold(start, |mut lw| async move {
        loop {
            if let Some(change) = lw.ready.pop_front() {
                return Some((change, lw));
            }
            // The page is handed out: the next kind's page may be read.
            lw.turn = None;
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
                // Bookmarks prove a quiet stream alive; one without them is dead.
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
        // Closed never: `Reads` keeps the semaphore open for as long as any kind holds it.
        self.turn = self.reads.pages.clone().acquire_owned().await.ok();
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
                    let page = Page::of(&list);
                    if let Some(n) = page.expected(&self.api, &self.fields, &self.reads).await {
                        self.ready.push_back(Event::Expect(n));
                    }
                }
                self.ready
                    .extend(list.items.into_iter().map(Event::InitApply));
                match list.metadata.continue_.filter(|c| !c.is_empty()) {
                    Some(next) => self.phase = Phase::List(Some(next)),
                    None => {
                        self.ready.push_back(Event::InitDone);
                        let version = list.metadata.resource_version.unwrap_or_default();
                        self.phase = Phase::Watch(version);
                        self.after_list = true;
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
        let length = if self.after_list {
            FIRST_WATCH_SECONDS
        } else {
            WATCH_SECONDS
        };
        let mut params = WatchParams::default().timeout(length + jitter_seconds(length));
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
                self.after_list = false;
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

/// What the first page of a list says about the list's size.
struct Page {
    /// More pages follow.
    more: bool,
    items: usize,
    /// `remainingItemCount`: objects after this page.
    remaining: Option<i64>,
}

impl Page {
    fn of<K: Clone>(list: &ObjectList<K>) -> Self {
        Page {
            more: list
                .metadata
                .continue_
                .as_ref()
                .is_some_and(|c| !c.is_empty()),
            items: list.items.len(),
            remaining: list.metadata.remaining_item_count,
        }
    }

    /// How many objects the list holds, at most, when it has more pages: the page's own
    /// count, or, for a list filtered by fields (which the API server does not count), the
    /// count of the kind unfiltered, from a list of one object. The cache then sizes its
    /// vectors once instead of growing them page by page (30,000 pods' vector copied a
    /// dozen times, the last two copies alive together at the hub's memory peak). A count
    /// that fails costs nothing but that growth.
    async fn expected<K>(
        self,
        api: &Api<K>,
        fields: &Option<String>,
        reads: &Reads,
    ) -> Option<usize>
    where
        K: Clone + DeserializeOwned + Debug,
    {
        if !self.more {
            return None;
        }
        let (counted, remaining) = match (self.remaining, fields) {
            (Some(remaining), _) => (self.items, remaining),
            (None, Some(_)) => {
                let one = ListParams::default().limit(1);
                let page = call(|| "count".into(), reads.deadline, api.list(&one))
                    .await
                    .ok()?;
                (page.items.len(), page.metadata.remaining_item_count?)
            }
            (None, None) => return None,
        };
        counted.checked_add(usize::try_from(remaining).ok()?)
    }
}

fn is_gone(e: &CallError) -> bool {
    matches!(e, CallError::Api { source: kube::Error::Api(s), .. } if s.code == 410)
}

/// Up to another `length` seconds, so that watches started together do not all end together.
fn jitter_seconds(length: u32) -> u32 {
    // `jittered` draws between half and one and a half of its duration: shifted to 0..d.
    let d = Duration::from_secs(u64::from(length));
    let spread = crate::cluster::error::jittered(d).saturating_sub(d / 2);
    u32::try_from(spread.as_secs()).unwrap_or(0).min(length)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use bytes::Bytes;
    use http_body_util::BodyExt;
    use http_body_util::combinators::BoxBody;
    use k8s_openapi::api::core::v1::ConfigMap;

    /// How the fake API server answers a watch.
    #[derive(Clone, Copy)]
    enum Watches {
        /// The server ends it at once.
        End,
        /// Accepted, then nothing ever again (a dead stream).
        Silent,
    }

    /// A client whose lists are empty and whose watches answer as `watches` says; the
    /// `timeoutSeconds` of every watch asked for, in order.
    fn fake_server(watches: Watches) -> (kube::Client, Arc<Mutex<Vec<u32>>>) {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let seen = asked.clone();
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let query = req.uri().query().unwrap_or_default().to_string();
            let timeout = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("timeoutSeconds="))
                .and_then(|t| t.parse::<u32>().ok());
            let body: BoxBody<Bytes, Infallible> = match (timeout, watches) {
                (None, _) => {
                    let list = r#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"5"},"items":[]}"#;
                    http_body_util::Full::new(Bytes::from_static(list.as_bytes())).boxed()
                }
                (Some(_), Watches::End) => http_body_util::Empty::new().boxed(),
                (Some(_), Watches::Silent) => {
                    BodyExt::boxed(http_body_util::StreamBody::new(futures::stream::pending::<
                        Result<hyper::body::Frame<Bytes>, Infallible>,
                    >()))
                }
            };
            if let (Some(t), Ok(mut asked)) = (timeout, seen.lock()) {
                asked.push(t);
            }
            async move { Ok::<_, Infallible>(http::Response::new(body)) }
        });
        (kube::Client::new(service, "default"), asked)
    }

    /// A client whose lists come in two pages (two ConfigMaps, then one): the first page
    /// counts what follows (`remainingItemCount`) only when unfiltered, as the API server
    /// does; a one-object list unfiltered counts 41 more. Watches end at once.
    fn paged_server() -> kube::Client {
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let query = req.uri().query().unwrap_or_default().to_string();
            let has = |p: &str| query.split('&').any(|kv| kv.starts_with(p));
            let cm = |n: &str| format!(r#"{{"metadata":{{"name":"{n}","namespace":"d"}}}}"#);
            let meta = if has("timeoutSeconds=") {
                None
            } else if has("continue=") {
                Some((r#"{"resourceVersion":"5"}"#.to_string(), cm("c")))
            } else if query.split('&').any(|kv| kv == "limit=1") {
                let m = r#"{"resourceVersion":"5","continue":"u","remainingItemCount":41}"#;
                Some((m.to_string(), cm("x")))
            } else {
                let count = if has("fieldSelector=") {
                    ""
                } else {
                    r#","remainingItemCount":1"#
                };
                let m = format!(r#"{{"resourceVersion":"5","continue":"t"{count}}}"#);
                Some((m, format!("{},{}", cm("a"), cm("b"))))
            };
            let body = match meta {
                Some((meta, items)) => format!(
                    r#"{{"apiVersion":"v1","kind":"ConfigMapList","metadata":{meta},"items":[{items}]}}"#
                ),
                None => String::new(),
            };
            let body: BoxBody<Bytes, Infallible> =
                http_body_util::Full::new(Bytes::from(body)).boxed();
            async move { Ok::<_, Infallible>(http::Response::new(body)) }
        });
        kube::Client::new(service, "default")
    }

    /// The events of a list until its end, named.
    async fn listed(fields: Option<String>) -> Vec<String> {
        let api = Api::<ConfigMap>::all(paged_server());
        let mut events = list_watch(api, fields, reads());
        let mut seen = Vec::new();
        while let Some(event) = events.next().await {
            seen.push(match event {
                Event::Init => "init".to_string(),
                Event::Expect(n) => format!("expect {n}"),
                Event::InitApply(o) => o.name_any(),
                Event::InitDone => break,
                other => format!("{other:?}"),
            });
        }
        seen
    }

    /// A list in pages announces how many objects it holds, so that the cache sizes its
    /// vectors once: from the first page's count, or, filtered by fields (the server counts
    /// no filtered list), from the kind's count unfiltered, an upper bound.
    #[tokio::test]
    async fn a_paged_list_announces_its_size() {
        assert_eq!(listed(None).await, ["init", "expect 3", "a", "b", "c"]);
        let fields = Some("metadata.name!=z".to_string());
        assert_eq!(listed(fields).await, ["init", "expect 42", "a", "b", "c"]);
    }

    /// A cluster's kinds read their list pages one at a time: the next page is asked for
    /// only once the last one's objects are all handed out, so a cluster holds one page, not
    /// one per kind, at its start.
    #[tokio::test]
    async fn a_clusters_kinds_take_turns_at_list_pages() {
        let shared = reads();
        let name = |side: &'static str| {
            move |event: Event<ConfigMap>| match event {
                Event::InitApply(o) => Some(format!("{side} {}", o.name_any())),
                _ => None,
            }
        };
        let first =
            list_watch(Api::<ConfigMap>::all(paged_server()), None, shared.clone()).map(name("A"));
        let second = list_watch(Api::<ConfigMap>::all(paged_server()), None, shared).map(name("B"));
        let objects: Vec<String> = futures::stream::select(first, second)
            .filter_map(|o| async move { o })
            .take(6)
            .collect()
            .await;
        assert_eq!(objects, ["A a", "A b", "B a", "B b", "A c", "B c"]);
    }

    fn reads() -> Reads {
        Reads::new(Duration::from_secs(10), Heard::new())
    }

    /// The first watch after a list is short (its cluster's watches fall out of step), the
    /// ones resumed after it last as long as the API server's default.
    #[tokio::test(start_paused = true)]
    async fn the_first_watch_after_a_list_is_short_and_the_next_long() {
        let (client, asked) = fake_server(Watches::End);
        let mut events = list_watch(Api::<ConfigMap>::all(client), None, reads());
        let task = tokio::spawn(async move { while events.next().await.is_some() {} });
        while asked.lock().map_or(0, |a| a.len()) < 3 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        task.abort();
        let asked = asked.lock().map(|a| a.clone()).unwrap_or_default();
        assert!((60..=120).contains(&asked[0]), "first watch: {asked:?}");
        for later in &asked[1..] {
            assert!((1800..=3600).contains(later), "later watches: {asked:?}");
        }
    }

    /// A stream with no event or bookmark for three of the server's bookmark intervals is
    /// dead: it is reported and resumed, not trusted for the watch's whole length.
    #[tokio::test(start_paused = true)]
    async fn a_watch_without_bookmarks_is_given_up() {
        let (client, asked) = fake_server(Watches::Silent);
        let mut events = list_watch(Api::<ConfigMap>::all(client), None, reads());
        let start = Instant::now();
        assert!(matches!(events.next().await, Some(Event::Init)));
        assert!(matches!(events.next().await, Some(Event::InitDone)));
        let Some(Event::Error(e)) = events.next().await else {
            panic!("a silent watch must be reported");
        };
        assert!(e.to_string().contains("nothing for 200s"), "{e}");
        assert_eq!(start.elapsed().as_secs(), SILENT_WATCH.as_secs());
        assert!(matches!(events.next().await, Some(Event::Resumed)));
        assert_eq!(
            asked.lock().map(|a| a.len()).unwrap_or(0),
            2,
            "resumed once"
        );
    }
}
