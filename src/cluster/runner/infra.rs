//! Cluster API infrastructure templates, read for scale from zero. Their kinds are the
//! providers' own (AWSMachineTemplate, DockerMachineTemplate, ...), so they cannot be
//! watched like the kinds the hub knows: a task of the runner reads the ones the node
//! groups point at, when a new one is pointed at and every `REFRESH` after, each read with
//! the read deadline. Passes never wait for it; what it read last is what they use, and
//! what it could not read is in the cluster's problems.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::cluster::error::{CallError, call};
use crate::model::FieldError;
use crate::model::ScalableResource;
use crate::model::infra::{InfraRef, InfrastructureTemplate};

/// Templates change rarely (a provider fills `status.capacity` once); this is how stale a
/// template's capacity may get.
const REFRESH: Duration = Duration::from_secs(300);
/// At most this many templates are read per cluster: one cluster's objects must not make the
/// hub send thousands of requests.
pub(super) const MAX_TEMPLATES: usize = 200;

/// A template that could not be read, as the cluster's problems tell it.
#[derive(Debug, thiserror::Error)]
#[error("infrastructure template {reference}: {source}")]
struct Unread {
    reference: InfraRef,
    #[source]
    source: ReadError,
}

/// Why a template could not be read.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(transparent)]
    Get(#[from] CallError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Template(#[from] FieldError),
}

/// Why a template's kind cannot be reached; remembered for the other templates of the kind
/// (hence shared).
#[derive(Clone, Debug, thiserror::Error)]
enum ResolveError {
    #[error(transparent)]
    Discovery(Arc<CallError>),
    #[error("the cluster serves no kind {kind} in {group}")]
    NoKind { kind: Arc<str>, group: Arc<str> },
}

/// What the task read last.
#[derive(Default)]
struct Read {
    templates: BTreeMap<InfraRef, InfrastructureTemplate>,
    /// Templates that could not be read, with why.
    problems: Vec<String>,
    /// Bumped by every read that changed what was read, so the runner copies (and passes
    /// on) only what changed.
    generation: u64,
}

/// The reading task of one runner; it stops when this is dropped.
pub(super) struct InfraTemplates {
    wanted: watch::Sender<BTreeSet<InfraRef>>,
    read: Arc<Mutex<Read>>,
    /// Told when a read finished, so a pass can use it without waiting for the scan interval.
    done: Arc<Notify>,
    task: JoinHandle<()>,
    /// The generation last taken by the runner.
    taken: u64,
}

impl Drop for InfraTemplates {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl InfraTemplates {
    pub(super) fn start(client: Client, deadline: Duration) -> Self {
        let (wanted, mut wanted_rx) = watch::channel(BTreeSet::new());
        let read = Arc::new(Mutex::new(Read::default()));
        let done = Arc::new(Notify::new());
        let (shared, told) = (read.clone(), done.clone());
        let task = tokio::spawn(async move {
            let mut reader = Reader::new(client, deadline);
            loop {
                let refs = wanted_rx.borrow_and_update().clone();
                if !refs.is_empty() {
                    let (templates, problems) = reader.read_all(&refs).await;
                    let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
                    let mut r = lock(&shared);
                    // A refresh that read what was there already is no news: telling the
                    // runner would cost an idle cluster a pass every refresh.
                    if r.generation == 0 || r.templates != templates || r.problems != problems {
                        r.templates = templates;
                        r.problems = problems;
                        r.generation += 1;
                        drop(r);
                        told.notify_one();
                    }
                }
                // A new reference is read at once; the rest wait for the refresh.
                let changed = tokio::time::timeout(REFRESH, wanted_rx.changed()).await;
                if matches!(changed, Ok(Err(_))) {
                    return;
                }
            }
        });
        InfraTemplates {
            wanted,
            read,
            done,
            task,
            taken: 0,
        }
    }

    /// Says which templates the node groups point at now (a change is read at once).
    pub(super) fn want<'a>(&self, scalables: impl Iterator<Item = &'a ScalableResource>) {
        let refs = wanted(scalables);
        self.wanted.send_if_modified(|old| {
            let changed = *old != refs;
            if changed {
                *old = refs;
            }
            changed
        });
    }

    /// What was read since the last call, if anything: the templates, and the problems.
    pub(super) fn take(&mut self) -> Option<(Vec<InfrastructureTemplate>, Vec<String>)> {
        let r = lock(&self.read);
        if r.generation == self.taken {
            return None;
        }
        self.taken = r.generation;
        Some((r.templates.values().cloned().collect(), r.problems.clone()))
    }

    /// Resolves when a read has finished.
    pub(super) async fn read_done(&self) {
        self.done.notified().await
    }
}

/// Reads the templates `scalables` point at, once (a look at a cluster without a runner):
/// the templates, and the problems.
pub(crate) async fn read_once<'a>(
    client: Client,
    deadline: Duration,
    scalables: impl Iterator<Item = &'a ScalableResource>,
) -> (Vec<InfrastructureTemplate>, Vec<String>) {
    let refs = wanted(scalables);
    if refs.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let (templates, problems) = Reader::new(client, deadline).read_all(&refs).await;
    let problems = problems.iter().map(ToString::to_string).collect();
    (templates.into_values().collect(), problems)
}

/// The templates `scalables` point at, as the API server answers them (whole objects, with
/// their `apiVersion` and `kind`), read once: what `fleetscaler dump` writes so that `plan`
/// reads them back as the hub reads them. And the problems, as [`read_once`] tells them.
pub(crate) async fn get_once<'a>(
    client: Client,
    deadline: Duration,
    scalables: impl Iterator<Item = &'a ScalableResource>,
) -> (Vec<serde_json::Value>, Vec<String>) {
    let mut reader = Reader::new(client, deadline);
    let mut objects = Vec::new();
    let mut problems = Vec::new();
    for reference in wanted(scalables) {
        match reader.get(&reference).await {
            Ok(object) => objects.push(object),
            Err(source) => problems.push(Unread { reference, source }.to_string()),
        }
    }
    (objects, problems)
}

/// The templates the Cluster API resources point at, at most `MAX_TEMPLATES`.
fn wanted<'a>(scalables: impl Iterator<Item = &'a ScalableResource>) -> BTreeSet<InfraRef> {
    let mut refs = BTreeSet::new();
    for reference in scalables.filter_map(|r| r.infrastructure_ref.as_ref()) {
        if refs.len() == MAX_TEMPLATES {
            break;
        }
        refs.insert(reference.clone());
    }
    refs
}

/// Reads templates, remembering how to reach each kind.
struct Reader {
    client: Client,
    deadline: Duration,
    /// (group, kind) → how to reach it, or why it cannot be.
    resolved: BTreeMap<(Arc<str>, Arc<str>), Result<ApiResource, ResolveError>>,
}

impl Reader {
    fn new(client: Client, deadline: Duration) -> Self {
        Reader {
            client,
            deadline,
            resolved: BTreeMap::new(),
        }
    }

    async fn read_all(
        &mut self,
        refs: &BTreeSet<InfraRef>,
    ) -> (BTreeMap<InfraRef, InfrastructureTemplate>, Vec<Unread>) {
        // Kinds are looked up again on every refresh: a provider installed later is found.
        self.resolved.clear();
        let mut templates = BTreeMap::new();
        let mut problems = Vec::new();
        for reference in refs {
            match self.read(reference).await {
                Ok(t) => {
                    templates.insert(reference.clone(), t);
                }
                Err(source) => problems.push(Unread {
                    reference: reference.clone(),
                    source,
                }),
            }
        }
        (templates, problems)
    }

    async fn read(&mut self, reference: &InfraRef) -> Result<InfrastructureTemplate, ReadError> {
        let value = self.get(reference).await?;
        Ok(InfrastructureTemplate::from_json(reference.clone(), value)?)
    }

    /// The template as the API server answers it, its type named even if the answer did not.
    async fn get(&mut self, reference: &InfraRef) -> Result<serde_json::Value, ReadError> {
        let resource = self.resolve(reference).await?;
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &reference.namespace, &resource);
        let mut object = call(
            || format!("get {reference}"),
            self.deadline,
            api.get(&reference.name),
        )
        .await?;
        object.types.get_or_insert_with(|| kube::core::TypeMeta {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        });
        Ok(serde_json::to_value(&object)?)
    }

    /// The resource serving the reference's kind, at the version its group prefers.
    async fn resolve(&mut self, reference: &InfraRef) -> Result<ApiResource, ResolveError> {
        let key = (reference.api_group.clone(), reference.kind.clone());
        if let Some(known) = self.resolved.get(&key) {
            return known.clone();
        }
        let found = call(
            || format!("discovery of {}", reference.api_group),
            self.deadline,
            kube::discovery::group(&self.client, &reference.api_group),
        )
        .await
        .map_err(|e| ResolveError::Discovery(Arc::new(e)))
        .and_then(|group| {
            group
                .recommended_kind(&reference.kind)
                .map(|(resource, _)| resource)
                .ok_or_else(|| ResolveError::NoKind {
                    kind: reference.kind.clone(),
                    group: reference.api_group.clone(),
                })
        });
        self.resolved.insert(key, found.clone());
        found
    }
}

/// The read state stays consistent whatever panicked while holding it.
fn lock(read: &Mutex<Read>) -> MutexGuard<'_, Read> {
    read.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Projector;
    use crate::model::{MachineApiGroup, ScalableKind};

    fn md(name: &str, template: Option<&str>) -> ScalableResource {
        let infra = template.map(|t| {
            serde_json::json!({"apiGroup": "infrastructure.cluster.x-k8s.io",
                "kind": "AWSMachineTemplate", "name": t})
        });
        let value = serde_json::json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"template": {"spec": {"infrastructureRef": infra}}}});
        ScalableResource::from_json(
            MachineApiGroup::ClusterApi,
            ScalableKind::MachineDeployment,
            value,
            &mut Projector::default(),
        )
        .unwrap()
    }

    #[test]
    fn the_templates_wanted_are_distinct_and_bounded() {
        let many: Vec<ScalableResource> = (0..MAX_TEMPLATES + 50)
            .map(|i| md(&format!("md-{i}"), Some(&format!("t-{i}"))))
            .chain([md("shared", Some("t-0")), md("none", None)])
            .collect();
        let refs = wanted(many.iter());
        assert_eq!(refs.len(), MAX_TEMPLATES);
        let few = [md("a", Some("t")), md("b", Some("t")), md("c", None)];
        let refs = wanted(few.iter());
        assert_eq!(refs.len(), 1);
        let only = refs.first().unwrap();
        assert_eq!(
            only.to_string(),
            "AWSMachineTemplate.infrastructure.cluster.x-k8s.io ns/t"
        );
    }
}
