//! Kubernetes Events with upstream's reasons and messages, so `kubectl describe pod`,
//! `kubectl describe node` and `kubectl get events` tell users what the autoscaler did, as
//! they do with upstream's cluster-autoscaler.
//!
//! - [`events_for`] (pure) turns a pass's plan and what the executor did with it into
//!   [`EventSpec`]s: cluster-level events on the status ConfigMap, node events, pod events.
//! - [`EventFilter`] (pure, time is a parameter) is upstream's deduplication (the same event
//!   at most once per 5 minutes, as client-go's spam filter configured by
//!   `--record-duplicated-events=false`) and a per-cluster token bucket.
//! - [`EventRecorder`] is the handle runners record through: it never blocks, and a
//!   background task writes core/v1 Events with a deadline on every call.

mod filter;
mod mapping;
mod pod_reasons;
mod recorder;
mod requests;

use std::sync::Arc;

pub use filter::{Admission, EventFilter, FilterSettings};
pub use mapping::{events_for, events_for_entries};
pub use recorder::{EventRecorder, EventStats, RecorderSettings};

/// `source.component` of every event: what upstream's events carry, so existing filters
/// (`kubectl get events --field-selector source=cluster-autoscaler`) keep working.
pub const SOURCE_COMPONENT: &str = "cluster-autoscaler";
/// `reportingComponent` (the events API's reportingController).
pub const REPORTING_CONTROLLER: &str = "fleetscaler";

/// The object an event is about (`involvedObject`). `kubectl describe` finds events by the
/// object's uid, so it is set whenever it is known.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    pub api_version: Arc<str>,
    pub kind: Arc<str>,
    /// Empty for a cluster-scoped object (a Node).
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub uid: Option<Arc<str>>,
}

impl ObjectRef {
    pub fn pod(namespace: &Arc<str>, name: &Arc<str>, uid: Option<Arc<str>>) -> Self {
        ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: namespace.clone(),
            name: name.clone(),
            uid,
        }
    }

    pub fn node(name: &Arc<str>, uid: Option<Arc<str>>) -> Self {
        ObjectRef {
            api_version: "v1".into(),
            kind: "Node".into(),
            namespace: "".into(),
            name: name.clone(),
            uid,
        }
    }

    /// Where the event object lives: the object's namespace, `default` for a
    /// cluster-scoped object (as client-go does).
    pub fn event_namespace(&self) -> &str {
        if self.namespace.is_empty() {
            "default"
        } else {
            &self.namespace
        }
    }
}

/// `Normal` or `Warning`, as upstream uses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One event to record.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EventSpec {
    pub object: ObjectRef,
    pub event_type: EventType,
    /// Upstream's reason (`ScaledUpGroup`, `TriggeredScaleUp`, ...).
    pub reason: &'static str,
    pub message: String,
}
