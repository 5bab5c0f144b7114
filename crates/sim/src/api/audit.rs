//! A record of the requests a simulated cluster answered, in the terms of the Kubernetes
//! authorizer (verb, API group, resource, subresource, namespace, name), so that a test can
//! check a set of RBAC rules against what a client really did.
//!
//! The attributes are derived from the request the way the API server's `RequestInfo` does
//! it, not from this server's router: a GET without a name is `list` (or `watch` with
//! `watch=true`), a DELETE without one is `deletecollection`, a list or watch whose field
//! selector asks for one `metadata.name` carries that name (so `resourceNames` rules apply
//! to it), and discovery paths (`/api`, `/apis/<group>/<version>`) are non-resource URLs.
//!
//! Off by default, so serving costs one atomic load per request; once [`RequestLog::enable`]d
//! it keeps each distinct request once, up to [`MAX_DISTINCT`].

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use http::Method;
use serde::Serialize;

/// Distinct requests kept; further new ones are counted in [`RequestLog::dropped`].
pub const MAX_DISTINCT: usize = 20_000;

/// One request as an authorizer sees it. A non-resource request has `path` set and every
/// resource field empty.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct RequestRecord {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// `""` for the core group.
    pub api_group: String,
    pub resource: String,
    pub subresource: String,
    /// `""` for cluster-scoped resources and requests across all namespaces.
    pub namespace: String,
    /// `""` for collections (unless a field selector names one object).
    pub name: String,
    /// The URL path of a non-resource request (discovery, `/version`).
    pub path: String,
}

impl RequestRecord {
    pub fn is_resource(&self) -> bool {
        self.path.is_empty()
    }
}

impl std::fmt::Display for RequestRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.is_resource() {
            return write!(f, "{} {}", self.verb, self.path);
        }
        let group = if self.api_group.is_empty() {
            "core"
        } else {
            &self.api_group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)?;
        if !self.subresource.is_empty() {
            write!(f, "/{}", self.subresource)?;
        }
        if !self.namespace.is_empty() {
            write!(f, " in {}", self.namespace)?;
        }
        if !self.name.is_empty() {
            write!(f, " named {}", self.name)?;
        }
        Ok(())
    }
}

/// The requests one simulated cluster answered, once each.
#[derive(Debug, Default)]
pub struct RequestLog {
    enabled: AtomicBool,
    seen: Mutex<BTreeSet<RequestRecord>>,
    dropped: AtomicU64,
}

impl RequestLog {
    /// Starts recording (requests answered before are not known).
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
    }

    /// Records an authenticated request, if recording is on.
    pub fn record(&self, method: &Method, path: &str, query: &str) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let record = attributes(method, path, query);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= MAX_DISTINCT && !seen.contains(&record) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        seen.insert(record);
    }

    /// Every distinct request recorded so far, sorted.
    pub fn records(&self) -> Vec<RequestRecord> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.iter().cloned().collect()
    }

    /// New distinct requests not kept because the log was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Writes kept at most by a [`WriteLog`]; older ones are dropped (and counted).
pub const MAX_WRITES: usize = 100_000;

/// One write a simulated cluster received, whoever sent it and whatever came of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WriteRecord {
    /// When it arrived, on this process's monotonic clock (milliseconds since the log began).
    pub at_ms: u64,
    /// The `User-Agent` it came with (the hub puts its replica's name in it).
    pub agent: String,
    pub method: String,
    pub path: String,
}

/// Every write a simulated cluster received, in order, once enabled: which client wrote
/// when, so that a test can tell whether two hub replicas ever wrote to the same cluster
/// in the same interval.
#[derive(Debug, Default)]
pub struct WriteLog {
    enabled: AtomicBool,
    start: std::sync::OnceLock<std::time::Instant>,
    writes: Mutex<std::collections::VecDeque<WriteRecord>>,
    dropped: AtomicU64,
}

impl WriteLog {
    pub fn enable(&self) {
        self.start.get_or_init(std::time::Instant::now);
        self.enabled.store(true, Ordering::Relaxed);
    }

    /// Notes a request if it writes (POST, PUT, PATCH, DELETE) and the log is on.
    pub fn record(&self, method: &Method, path: &str, agent: &str) {
        let writes = [Method::POST, Method::PUT, Method::PATCH, Method::DELETE];
        if !self.enabled.load(Ordering::Relaxed) || !writes.contains(method) {
            return;
        }
        let at = self.start.get().map_or(0, |s| s.elapsed().as_millis());
        let record = WriteRecord {
            at_ms: u64::try_from(at).unwrap_or(u64::MAX),
            agent: agent.chars().take(256).collect(),
            method: method.to_string(),
            path: path.chars().take(1024).collect(),
        };
        let mut w = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        if w.len() >= MAX_WRITES {
            w.pop_front();
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        w.push_back(record);
    }

    /// The writes kept, oldest first.
    pub fn records(&self) -> Vec<WriteRecord> {
        let w = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        w.iter().cloned().collect()
    }

    /// Writes dropped because the log was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Subresources of a namespace: `namespaces/<ns>/status` is the namespace's, not a resource
/// named `status` in it (as the API server decides).
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// The authorizer's attributes of a request.
pub fn attributes(method: &Method, path: &str, query: &str) -> RequestRecord {
    let verb = method.as_str().to_ascii_lowercase();
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // `/api/<version>/<resource>...` or `/apis/<group>/<version>/<resource>...`.
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] if !rest.is_empty() => ("", rest),
        ["apis", group, _version, rest @ ..] if !rest.is_empty() => (*group, rest),
        _ => {
            return RequestRecord {
                verb,
                path: path.to_string(),
                ..blank()
            };
        }
    };
    let mut record = RequestRecord {
        verb: match *method {
            Method::GET | Method::HEAD => "get".into(),
            Method::POST => "create".into(),
            Method::PUT => "update".into(),
            _ => verb,
        },
        api_group: group.to_string(),
        ..blank()
    };
    let mut rest = rest;
    if let ["namespaces", namespace, tail @ ..] = rest {
        record.namespace = (*namespace).to_string();
        if !tail.is_empty() && !NAMESPACE_SUBRESOURCES.contains(&tail[0]) {
            rest = tail;
        }
    }
    let mut it = rest.iter();
    record.resource = it.next().map(|s| s.to_string()).unwrap_or_default();
    record.name = it.next().map(|s| s.to_string()).unwrap_or_default();
    record.subresource = it.next().map(|s| s.to_string()).unwrap_or_default();
    if record.name.is_empty() {
        collection_verb(&mut record, query);
    }
    record
}

/// A request without a name: get is list or watch (named by a `metadata.name` field
/// selector, if it has one), delete is deletecollection.
fn collection_verb(record: &mut RequestRecord, query: &str) {
    match record.verb.as_str() {
        "get" => {
            let mut watch = false;
            for (k, v) in form_urlencoded::parse(query.as_bytes()) {
                match &*k {
                    "watch" => watch = !matches!(v.to_ascii_lowercase().as_str(), "false" | "0"),
                    "fieldSelector" => record.name = selected_name(&v).unwrap_or_default(),
                    _ => {}
                }
            }
            record.verb = if watch { "watch" } else { "list" }.into();
        }
        "delete" => record.verb = "deletecollection".into(),
        _ => {}
    }
}

/// The name a field selector requires exactly (`metadata.name=x` or `==x`), if it does.
fn selected_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let value = term
            .strip_prefix("metadata.name==")
            .or_else(|| term.strip_prefix("metadata.name="))?;
        (!value.is_empty() && !value.contains('/')).then(|| value.to_string())
    })
}

fn blank() -> RequestRecord {
    RequestRecord {
        verb: String::new(),
        api_group: String::new(),
        resource: String::new(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        path: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: Method, path: &str, query: &str) -> String {
        attributes(&method, path, query).to_string()
    }

    #[test]
    fn verbs_follow_the_api_servers_request_info() {
        assert_eq!(attrs(Method::GET, "/api/v1/nodes", ""), "list core/nodes");
        assert_eq!(
            attrs(
                Method::GET,
                "/api/v1/pods",
                "watch=true&fieldSelector=status.phase%21%3DFailed"
            ),
            "watch core/pods"
        );
        assert_eq!(
            attrs(Method::GET, "/api/v1/pods", "watch=0"),
            "list core/pods"
        );
        assert_eq!(
            attrs(Method::GET, "/api/v1/nodes/n1", ""),
            "get core/nodes named n1"
        );
        assert_eq!(
            attrs(Method::PATCH, "/api/v1/nodes/n1", ""),
            "patch core/nodes named n1"
        );
        assert_eq!(
            attrs(Method::POST, "/api/v1/namespaces/shop/pods/p/eviction", ""),
            "create core/pods/eviction in shop named p"
        );
        assert_eq!(
            attrs(
                Method::PUT,
                "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machinesets/w/scale",
                ""
            ),
            "update machine.openshift.io/machinesets/scale in openshift-machine-api named w"
        );
        assert_eq!(
            attrs(
                Method::DELETE,
                "/api/v1/namespaces/a/pods",
                "labelSelector=app%3Dx"
            ),
            "deletecollection core/pods in a"
        );
        assert_eq!(
            attrs(Method::POST, "/api/v1/namespaces/a/events", ""),
            "create core/events in a"
        );
    }

    #[test]
    fn namespaces_and_their_subresources() {
        assert_eq!(
            attrs(Method::GET, "/api/v1/namespaces", "watch=true"),
            "watch core/namespaces"
        );
        assert_eq!(
            attrs(Method::GET, "/api/v1/namespaces/a", ""),
            "get core/namespaces in a named a"
        );
        assert_eq!(
            attrs(Method::PUT, "/api/v1/namespaces/a/finalize", ""),
            "update core/namespaces/finalize in a named a"
        );
    }

    #[test]
    fn a_name_field_selector_names_the_object() {
        assert_eq!(
            attrs(
                Method::GET,
                "/api/v1/configmaps",
                "fieldSelector=metadata.name%3Dcluster-autoscaler-priority-expander&watch=true"
            ),
            "watch core/configmaps named cluster-autoscaler-priority-expander"
        );
        assert_eq!(selected_name("a=b,metadata.name==x"), Some("x".into()));
        assert_eq!(selected_name("metadata.name!=x"), None);
    }

    #[test]
    fn discovery_is_non_resource() {
        for path in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/policy",
            "/apis/policy/v1",
            "/version",
        ] {
            let r = attributes(&Method::GET, path, "");
            assert!(!r.is_resource(), "{path}");
            assert_eq!(r.to_string(), format!("get {path}"));
        }
    }

    #[test]
    fn the_log_keeps_distinct_requests_once_and_only_when_enabled() {
        let log = RequestLog::default();
        log.record(&Method::GET, "/api/v1/nodes", "");
        assert!(log.records().is_empty());
        log.enable();
        log.record(&Method::GET, "/api/v1/nodes", "");
        log.record(&Method::GET, "/api/v1/nodes", "watch=true");
        log.record(&Method::GET, "/api/v1/nodes", "");
        let seen: Vec<String> = log.records().iter().map(|r| r.to_string()).collect();
        assert_eq!(seen, ["list core/nodes", "watch core/nodes"]);
        assert_eq!(log.dropped(), 0);
    }
}
