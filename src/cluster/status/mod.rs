//! The `cluster-autoscaler-status` ConfigMap, as upstream's cluster-autoscaler (≥ 1.30)
//! writes it: key `status` holding a YAML [`AutoscalerStatus`], annotation
//! `cluster-autoscaler.kubernetes.io/last-updated`. Tools and people who read upstream's
//! status read ours unchanged.
//!
//! [`render`] builds the document from a plan (pure); [`StatusWriter`] writes it: at start
//! (`Initializing`), at the end of each pass, and deletes it on a clean exit, as upstream does.
//! Unlike upstream it does not rewrite the ConfigMap every pass: 1,000 clusters at a 10 s
//! scan interval would be 100 writes a second of nothing new. See [`StatusSettings`].

mod render;

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};

use super::error::{CallError, Category, Write, call, write};
use super::events::ObjectRef;
use super::gate::WriteGate;
use crate::engine::plan::Plan;
pub use render::{
    AutoscalerStatus, BackoffInfo, ConditionStatus, DRY_RUN_NOTE, Phase, RenderOptions,
    StatusMemory, go_time, initializing, render,
};

pub const STATUS_CONFIGMAP: &str = "cluster-autoscaler-status";
pub const STATUS_KEY: &str = "status";
pub const LAST_UPDATED_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/last-updated";

/// How the status is written.
#[derive(Clone, Debug)]
pub struct StatusSettings {
    /// Namespace of the ConfigMap (`hub.status_namespace`).
    pub namespace: String,
    /// Deadline of each API call.
    pub request_timeout: Duration,
    /// An unchanged status is rewritten this often, so `time` and `lastProbeTime` show the
    /// autoscaler is alive. Default 60 s: readers see a status at most a minute old while
    /// the API server sees one write a minute from a quiet cluster.
    pub refresh_interval: Duration,
    /// A changed status waits until this long after the last write. Default 5 s: a cluster
    /// whose state flaps each pass costs at most one write per 5 s, and a change is seen
    /// within one scan interval (10 s by default) anyway.
    pub min_interval: Duration,
    /// Say in `message` that nothing is written but the report.
    pub dry_run: bool,
}

impl StatusSettings {
    pub fn new(namespace: &str, request_timeout: Duration, dry_run: bool) -> Self {
        StatusSettings {
            namespace: namespace.to_string(),
            request_timeout,
            refresh_interval: Duration::from_secs(60),
            min_interval: Duration::from_secs(5),
            dry_run,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("rendering the status ConfigMap as YAML: {0}")]
    Render(String),
}

impl StatusError {
    pub fn category(&self) -> Category {
        match self {
            StatusError::Call(e) => e.category(),
            StatusError::Render(_) => Category::Other,
        }
    }
}

/// What [`StatusWriter::write`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    Written,
    /// Nothing new, or too soon after the last write.
    RateLimited,
    /// This replica may not write (not the leader).
    GateClosed,
}

/// The last document written, without its probe times, and when.
#[derive(Clone, Debug)]
struct LastWrite {
    content: AutoscalerStatus,
    at: Timestamp,
}

/// Whether a document with `content` should be written at `now`.
fn due(
    last: Option<&LastWrite>,
    content: &AutoscalerStatus,
    now: Timestamp,
    s: &StatusSettings,
) -> bool {
    let Some(last) = last else { return true };
    // A clock that stepped back (NTP) would otherwise hold every write until it caught up.
    let Ok(since) = Duration::try_from(now.duration_since(last.at)) else {
        return true;
    };
    if since < s.min_interval {
        return false;
    }
    last.content != *content || since >= s.refresh_interval
}

/// Writes one cluster's status ConfigMap. One per cluster runner; keeps the condition
/// memory and the rate limit between passes.
pub struct StatusWriter {
    api: Api<ConfigMap>,
    settings: StatusSettings,
    gate: WriteGate,
    memory: StatusMemory,
    last: Option<LastWrite>,
    uid: Option<String>,
}

impl StatusWriter {
    pub fn new(client: kube::Client, settings: StatusSettings, gate: WriteGate) -> Self {
        StatusWriter {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            gate,
            memory: StatusMemory::default(),
            last: None,
            uid: None,
        }
    }

    fn options(&self) -> RenderOptions {
        RenderOptions {
            dry_run: self.settings.dry_run,
        }
    }

    /// The ConfigMap as an event's involved object. Its uid is known once it was written or
    /// read; before that the reference goes without one.
    /// A reload turned dry run on or off: the message says so from the next write.
    pub fn set_dry_run(&mut self, dry_run: bool) {
        self.settings.dry_run = dry_run;
    }

    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: self.settings.namespace.as_str().into(),
            name: STATUS_CONFIGMAP.into(),
            uid: self.uid.as_deref().map(Into::into),
        }
    }

    /// Writes `autoscalerStatus: Initializing` (start-up, before the first pass).
    pub async fn initializing(&mut self, now: Timestamp) -> Result<WriteOutcome, StatusError> {
        if !self.gate.is_open() {
            return Ok(WriteOutcome::GateClosed);
        }
        let doc = initializing(self.options(), now);
        self.put(&doc, now).await?;
        // The first pass's status always follows at once.
        self.last = None;
        Ok(WriteOutcome::Written)
    }

    /// Renders the pass's plan and writes it if it is due (see [`StatusSettings`]). The
    /// condition memory moves on every pass, written or not.
    pub async fn write(
        &mut self,
        plan: &Plan,
        now: Timestamp,
    ) -> Result<WriteOutcome, StatusError> {
        let options = self.options();
        let doc = render(plan, &mut self.memory, options, now);
        if !self.gate.is_open() {
            // Another replica writes meanwhile: once this one may again, it writes at once.
            self.last = None;
            return Ok(WriteOutcome::GateClosed);
        }
        let content = doc.content();
        if !due(self.last.as_ref(), &content, now, &self.settings) {
            return Ok(WriteOutcome::RateLimited);
        }
        self.put(&doc, now).await?;
        self.last = Some(LastWrite { content, at: now });
        Ok(WriteOutcome::Written)
    }

    /// Deletes the ConfigMap (a clean exit, as upstream). Gone already is fine.
    pub async fn remove(&mut self) -> Result<WriteOutcome, StatusError> {
        if !self.gate.is_open() {
            return Ok(WriteOutcome::GateClosed);
        }
        let op = || {
            format!(
                "delete ConfigMap {}/{STATUS_CONFIGMAP}",
                self.settings.namespace
            )
        };
        let deleted = write(
            self.target("DELETE"),
            op,
            self.settings.request_timeout,
            self.api.delete(STATUS_CONFIGMAP, &DeleteParams::default()),
        )
        .await;
        match deleted {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        self.last = None;
        self.uid = None;
        Ok(WriteOutcome::Written)
    }

    /// A write to the ConfigMap, for its span.
    fn target(&self, method: &'static str) -> Write<'_> {
        Write {
            method,
            kind: "ConfigMap",
            subresource: None,
            namespace: Some(&self.settings.namespace),
            name: STATUS_CONFIGMAP,
        }
    }

    /// GET, then replace (resourceVersion as precondition) or create. A conflict (someone
    /// wrote in between) is retried once with a fresh read.
    async fn put(&mut self, doc: &AutoscalerStatus, now: Timestamp) -> Result<(), StatusError> {
        let yaml = doc.to_yaml().map_err(StatusError::Render)?;
        let stamp = go_time(now);
        match self.put_once(&yaml, &stamp).await {
            Err(e) if e.is_conflict() => self.put_once(&yaml, &stamp).await?,
            other => other?,
        };
        Ok(())
    }

    async fn put_once(&mut self, yaml: &str, stamp: &str) -> Result<(), CallError> {
        let timeout = self.settings.request_timeout;
        let ns = self.settings.namespace.clone();
        let name = || format!("ConfigMap {ns}/{STATUS_CONFIGMAP}");
        let found = match call(
            || format!("get {}", name()),
            timeout,
            self.api.get(STATUS_CONFIGMAP),
        )
        .await
        {
            Ok(cm) => Some(cm),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        };
        let written = match found {
            Some(mut cm) => {
                fill(&mut cm, yaml, stamp);
                let pp = PostParams::default();
                write(
                    self.target("PUT"),
                    || format!("replace {}", name()),
                    timeout,
                    self.api.replace(STATUS_CONFIGMAP, &pp, &cm),
                )
                .await?
            }
            None => {
                let mut cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(STATUS_CONFIGMAP.to_string()),
                        namespace: Some(ns.clone()),
                        ..ObjectMeta::default()
                    },
                    ..ConfigMap::default()
                };
                fill(&mut cm, yaml, stamp);
                let pp = PostParams::default();
                write(
                    self.target("POST"),
                    || format!("create {}", name()),
                    timeout,
                    self.api.create(&pp, &cm),
                )
                .await?
            }
        };
        self.uid = written.metadata.uid;
        Ok(())
    }
}

/// Sets the status key and the last-updated annotation, keeping anything else on the object.
fn fill(cm: &mut ConfigMap, yaml: &str, stamp: &str) {
    cm.data
        .get_or_insert_with(BTreeMap::new)
        .insert(STATUS_KEY.to_string(), yaml.to_string());
    cm.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(LAST_UPDATED_ANNOTATION.to_string(), stamp.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn doc(phase: Phase) -> AutoscalerStatus {
        AutoscalerStatus {
            time: String::new(),
            autoscaler_status: phase,
            message: None,
            cluster_wide: None,
            node_groups: Vec::new(),
        }
    }

    #[test]
    fn writes_are_rate_limited() {
        let s = StatusSettings::new("ns", Duration::from_secs(1), false);
        let running = doc(Phase::Running);
        assert!(due(None, &running, at(0), &s), "the first write");
        let last = LastWrite {
            content: running.clone(),
            at: at(0),
        };
        assert!(!due(Some(&last), &running, at(30), &s), "nothing new");
        assert!(due(Some(&last), &running, at(60), &s), "a refresh");
        let changed = doc(Phase::Initializing);
        assert!(!due(Some(&last), &changed, at(4), &s), "too soon");
        assert!(due(Some(&last), &changed, at(5), &s), "a change");
        // A clock that stepped back writes once (and counts from there), rather than
        // holding every write until it has caught up.
        assert!(due(Some(&last), &running, at(-100), &s));
    }

    #[test]
    fn fill_keeps_other_keys() {
        let mut cm = ConfigMap {
            data: Some(BTreeMap::from([("other".to_string(), "x".to_string())])),
            ..ConfigMap::default()
        };
        fill(&mut cm, "time: t\n", "2026-01-01 00:00:00 +0000 UTC");
        let data = cm.data.unwrap();
        assert_eq!(data["status"], "time: t\n");
        assert_eq!(data["other"], "x");
        assert_eq!(
            cm.metadata.annotations.unwrap()[LAST_UPDATED_ANNOTATION],
            "2026-01-01 00:00:00 +0000 UTC"
        );
    }
}
