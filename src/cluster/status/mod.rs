//! The `cluster-autoscaler-status` ConfigMap, as upstream's cluster-autoscaler (≥ 1.30)
//! writes it: key `status` holding a YAML [`AutoscalerStatus`], annotation
//! `cluster-autoscaler.kubernetes.io/last-updated`. Tools and people who read upstream's
//! status read ours unchanged.
//!
//! [`render`] builds the document from a plan (pure); [`StatusWriter`] writes it: at start
//! (`Initializing`), at the end of each pass, and deletes it on a clean exit, as upstream does.
//! Unlike upstream it does not rewrite the ConfigMap every pass: 1,000 clusters at a 10 s
//! scan interval would be 100 writes a second of nothing new. See [`StatusSettings`].
//!
//! The ConfigMap says who wrote it (`fleetscaler.io/status-writer`, `fleetscaler.io/dry-run`).
//! A dry-run hub never overwrites a status a live autoscaler wrote (another hub, or upstream
//! cluster-autoscaler beside which it is being tried), and no hub deletes a status it did
//! not write.

mod render;

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams, Preconditions};

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
/// The hub replica that wrote the status (its instance name).
pub const WRITER_ANNOTATION: &str = "fleetscaler.io/status-writer";
/// `"true"` when the writer was a dry run.
pub const DRY_RUN_ANNOTATION: &str = "fleetscaler.io/dry-run";

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
    /// This hub replica's name, on what it writes.
    pub writer: String,
}

impl StatusSettings {
    pub fn new(namespace: &str, request_timeout: Duration, dry_run: bool, writer: &str) -> Self {
        StatusSettings {
            namespace: namespace.to_string(),
            request_timeout,
            refresh_interval: Duration::from_secs(60),
            min_interval: Duration::from_secs(5),
            dry_run,
            writer: writer.to_string(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("rendering the status ConfigMap as YAML: {0}")]
    Render(#[source] serde_saphyr::SerializeError),
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
    /// The ConfigMap is another autoscaler's: a live one's, for a dry run; another writer's,
    /// for a removal. Left as it is.
    NotOurs,
}

/// Why this writer may not overwrite `existing`, if it may not: a dry run writes only over
/// what a dry run wrote (or nothing).
fn overwrite_refused(existing: &ConfigMap, dry_run: bool) -> Option<String> {
    if !dry_run || note(existing, DRY_RUN_ANNOTATION).is_some_and(|v| v == "true") {
        return None;
    }
    let who = note(existing, WRITER_ANNOTATION).map_or_else(
        || "an autoscaler that is not fleetscaler (upstream cluster-autoscaler?)".to_string(),
        |w| format!("fleetscaler replica {w:?}"),
    );
    Some(format!(
        "the status ConfigMap belongs to a live autoscaler ({who}): a dry run leaves it alone"
    ))
}

/// Whether `existing` is this writer's own (it may delete it).
fn written_by(existing: &ConfigMap, writer: &str) -> bool {
    note(existing, WRITER_ANNOTATION).is_some_and(|w| w == writer)
}

fn note<'a>(cm: &'a ConfigMap, key: &str) -> Option<&'a String> {
    cm.metadata.annotations.as_ref()?.get(key)
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
    /// Why the ConfigMap is another autoscaler's, while it is (said once in the log).
    not_ours: Option<String>,
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
            not_ours: None,
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
        let outcome = self.put(&doc, now).await?;
        // The first pass's status always follows at once.
        self.last = None;
        Ok(outcome)
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
        let outcome = self.put(&doc, now).await?;
        // Not ours either: asked again at the same pace, not every pass.
        self.last = Some(LastWrite { content, at: now });
        Ok(outcome)
    }

    /// Deletes the ConfigMap (a clean exit, as upstream) if this writer wrote it. Gone
    /// already is fine.
    pub async fn remove(&mut self) -> Result<WriteOutcome, StatusError> {
        if !self.gate.is_open() {
            return Ok(WriteOutcome::GateClosed);
        }
        let ns = self.settings.namespace.clone();
        let timeout = self.settings.request_timeout;
        let found = match call(
            || format!("get ConfigMap {ns}/{STATUS_CONFIGMAP}"),
            timeout,
            self.api.get(STATUS_CONFIGMAP),
        )
        .await
        {
            Ok(cm) => cm,
            Err(e) if e.is_not_found() => return Ok(WriteOutcome::Written),
            Err(e) => return Err(e.into()),
        };
        if !written_by(&found, &self.settings.writer) {
            return Ok(WriteOutcome::NotOurs);
        }
        // Only the object read: one another hub wrote since is left alone.
        let dp = DeleteParams {
            preconditions: found.metadata.uid.map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: found.metadata.resource_version,
            }),
            ..DeleteParams::default()
        };
        let deleted = write(
            self.target("DELETE"),
            || format!("delete ConfigMap {ns}/{STATUS_CONFIGMAP}"),
            timeout,
            self.api.delete(STATUS_CONFIGMAP, &dp),
        )
        .await;
        match deleted {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) if e.is_conflict() => return Ok(WriteOutcome::NotOurs),
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
    async fn put(
        &mut self,
        doc: &AutoscalerStatus,
        now: Timestamp,
    ) -> Result<WriteOutcome, StatusError> {
        let yaml = doc.to_yaml().map_err(StatusError::Render)?;
        let stamp = go_time(now);
        let outcome = match self.put_once(&yaml, &stamp).await {
            Err(e) if e.is_conflict() => self.put_once(&yaml, &stamp).await?,
            other => other?,
        };
        Ok(outcome)
    }

    async fn put_once(&mut self, yaml: &str, stamp: &str) -> Result<WriteOutcome, CallError> {
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
        if let Some(why) = found
            .as_ref()
            .and_then(|cm| overwrite_refused(cm, self.settings.dry_run))
        {
            if self.not_ours.as_ref() != Some(&why) {
                tracing::info!("{why}");
                self.not_ours = Some(why);
            }
            return Ok(WriteOutcome::NotOurs);
        }
        self.not_ours = None;
        let written = match found {
            Some(mut cm) => {
                fill(&mut cm, yaml, stamp, &self.settings);
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
                fill(&mut cm, yaml, stamp, &self.settings);
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
        Ok(WriteOutcome::Written)
    }
}

/// Sets the status key and the annotations (when, who, dry run or not), keeping anything
/// else on the object.
fn fill(cm: &mut ConfigMap, yaml: &str, stamp: &str, s: &StatusSettings) {
    cm.data
        .get_or_insert_with(BTreeMap::new)
        .insert(STATUS_KEY.to_string(), yaml.to_string());
    let notes = cm.metadata.annotations.get_or_insert_with(BTreeMap::new);
    notes.insert(LAST_UPDATED_ANNOTATION.to_string(), stamp.to_string());
    notes.insert(WRITER_ANNOTATION.to_string(), s.writer.clone());
    notes.insert(DRY_RUN_ANNOTATION.to_string(), s.dry_run.to_string());
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
        let s = StatusSettings::new("ns", Duration::from_secs(1), false, "hub-a");
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
        let s = StatusSettings::new("ns", Duration::from_secs(1), true, "hub-a");
        fill(&mut cm, "time: t\n", "2026-01-01 00:00:00 +0000 UTC", &s);
        let data = cm.data.as_ref().unwrap();
        assert_eq!(data["status"], "time: t\n");
        assert_eq!(data["other"], "x");
        let notes = cm.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            notes[LAST_UPDATED_ANNOTATION],
            "2026-01-01 00:00:00 +0000 UTC"
        );
        assert_eq!(notes[WRITER_ANNOTATION], "hub-a");
        assert_eq!(notes[DRY_RUN_ANNOTATION], "true");
        assert!(written_by(&cm, "hub-a") && !written_by(&cm, "hub-b"));
    }

    /// Seed of issue 12: a dry-run hub overwrote the live hub's status, then deleted it.
    #[test]
    fn a_dry_run_writes_only_over_a_dry_run() {
        let live = StatusSettings::new("ns", Duration::from_secs(1), false, "live");
        let dry = StatusSettings::new("ns", Duration::from_secs(1), true, "dry");
        let mut cm = ConfigMap::default();
        fill(&mut cm, "x", "t", &live);
        let why = overwrite_refused(&cm, true).unwrap();
        assert!(why.contains("fleetscaler replica \"live\""), "{why}");
        assert_eq!(overwrite_refused(&cm, false), None, "live over live");
        let upstream = ConfigMap::default();
        assert!(
            overwrite_refused(&upstream, true)
                .unwrap()
                .contains("not fleetscaler")
        );
        fill(&mut cm, "x", "t", &dry);
        assert_eq!(overwrite_refused(&cm, true), None);
    }
}
