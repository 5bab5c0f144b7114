//! Which of the kinds the cache reads a cluster serves, and the watchers that feed the cache.
//!
//! Core kinds are always there. DaemonSets, PodDisruptionBudgets, both Machine APIs and
//! OpenShift's autoscaling resources are looked up in discovery: a cluster without Cluster
//! API, or without OpenShift's operator, is still autoscaled with what it has.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use k8s_openapi::api::{apps::v1 as appsv1, core::v1 as corev1, policy::v1 as policyv1};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde::de::DeserializeOwned;

use super::update::{Kind, Object, Update};
use crate::cluster::error::{CallError, call};
use crate::model::snapshot::PRIORITY_EXPANDER_CONFIGMAP;
use crate::model::{MachineApiGroup, ScalableKind};

/// The kinds a cluster serves, with how to reach the ones read without generated types.
#[derive(Clone, Debug, Default)]
pub struct Served {
    pub kinds: Vec<Kind>,
    pub dynamic: BTreeMap<Kind, ApiResource>,
}

/// A group version and the resources of it the cache wants: (plural, kind, our kind).
struct Wanted {
    group_version: &'static str,
    resources: &'static [(&'static str, &'static str, Kind)],
}

const OPENSHIFT: MachineApiGroup = MachineApiGroup::OpenShift;
const CAPI: MachineApiGroup = MachineApiGroup::ClusterApi;

const WANTED: &[Wanted] = &[
    Wanted {
        group_version: "apps/v1",
        resources: &[("daemonsets", "DaemonSet", Kind::DaemonSet)],
    },
    Wanted {
        group_version: "policy/v1",
        resources: &[(
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            Kind::PodDisruptionBudget,
        )],
    },
    Wanted {
        group_version: "machine.openshift.io/v1beta1",
        resources: &[
            (
                "machinesets",
                "MachineSet",
                Kind::Scalable(OPENSHIFT, ScalableKind::MachineSet),
            ),
            ("machines", "Machine", Kind::Machine(OPENSHIFT)),
        ],
    },
    Wanted {
        group_version: "cluster.x-k8s.io/v1beta1",
        resources: &[
            (
                "machinedeployments",
                "MachineDeployment",
                Kind::Scalable(CAPI, ScalableKind::MachineDeployment),
            ),
            (
                "machinesets",
                "MachineSet",
                Kind::Scalable(CAPI, ScalableKind::MachineSet),
            ),
            ("machines", "Machine", Kind::Machine(CAPI)),
        ],
    },
    Wanted {
        group_version: "autoscaling.openshift.io/v1",
        resources: &[(
            "clusterautoscalers",
            "ClusterAutoscaler",
            Kind::ClusterAutoscaler,
        )],
    },
    Wanted {
        group_version: "autoscaling.openshift.io/v1beta1",
        resources: &[(
            "machineautoscalers",
            "MachineAutoscaler",
            Kind::MachineAutoscaler,
        )],
    },
];

/// Asks the API server which of the wanted kinds it serves.
pub async fn discover(client: &Client, timeout: Duration) -> Result<Served, CallError> {
    let groups = call(
        || "discovery: list API groups".into(),
        timeout,
        client.list_api_groups(),
    )
    .await?;
    let served_versions: Vec<String> = groups
        .groups
        .iter()
        .flat_map(|g| g.versions.iter().map(|v| v.group_version.clone()))
        .collect();
    let mut served = Served {
        kinds: vec![
            Kind::Node,
            Kind::Pod,
            Kind::Namespace,
            Kind::PriorityConfigMap,
        ],
        dynamic: BTreeMap::new(),
    };
    for wanted in WANTED {
        if !served_versions.iter().any(|v| v == wanted.group_version) {
            continue;
        }
        let list = call(
            || format!("discovery: list resources of {}", wanted.group_version),
            timeout,
            client.list_api_group_resources(wanted.group_version),
        )
        .await?;
        for (plural, kind_name, kind) in wanted.resources {
            if list.resources.iter().any(|r| r.name == *plural) {
                served.kinds.push(*kind);
                if !matches!(kind, Kind::DaemonSet | Kind::PodDisruptionBudget) {
                    served
                        .dynamic
                        .insert(*kind, api_resource(wanted.group_version, kind_name, plural));
                }
            }
        }
    }
    Ok(served)
}

fn api_resource(group_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = group_version.split_once('/').unwrap_or(("", group_version));
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: group_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// One merged stream of updates from a watcher per served kind. Each watcher lists, then
/// watches, re-lists after a 410, and backs off on errors (which it also reports).
pub fn updates(client: &Client, served: &Served) -> SelectAll<BoxStream<'static, Update>> {
    let mut all = SelectAll::new();
    for kind in &served.kinds {
        let stream = match kind {
            Kind::Node => {
                typed::<corev1::Node>(client, *kind, plain(), |o| Object::Node(Box::new(o)))
            }
            // Finished pods hold no resources and never move: leave them out of memory.
            Kind::Pod => typed::<corev1::Pod>(
                client,
                *kind,
                plain().fields("status.phase!=Succeeded,status.phase!=Failed"),
                |o| Object::Pod(Box::new(o)),
            ),
            Kind::Namespace => typed::<corev1::Namespace>(client, *kind, plain(), |o| {
                Object::Namespace(Box::new(o))
            }),
            Kind::PodDisruptionBudget => {
                typed::<policyv1::PodDisruptionBudget>(client, *kind, plain(), |o| {
                    Object::PodDisruptionBudget(Box::new(o))
                })
            }
            Kind::DaemonSet => typed::<appsv1::DaemonSet>(client, *kind, plain(), |o| {
                Object::DaemonSet(Box::new(o))
            }),
            Kind::PriorityConfigMap => typed::<corev1::ConfigMap>(
                client,
                *kind,
                plain().fields(&format!("metadata.name={PRIORITY_EXPANDER_CONFIGMAP}")),
                |o| Object::ConfigMap(Box::new(o)),
            ),
            _ => match served.dynamic.get(kind) {
                Some(ar) => dynamic(client, *kind, ar),
                None => continue,
            },
        };
        all.push(stream);
    }
    all
}

fn plain() -> watcher::Config {
    watcher::Config::default()
}

fn typed<K>(
    client: &Client,
    kind: Kind,
    config: watcher::Config,
    object: fn(K) -> Object,
) -> BoxStream<'static, Update>
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let api: Api<K> = Api::all(client.clone());
    relisting(api, config)
        .map(move |item| Update::from_watch(kind, item, object))
        .boxed()
}

fn dynamic(client: &Client, kind: Kind, ar: &ApiResource) -> BoxStream<'static, Update> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    relisting(api, plain())
        .map(move |item| Update::from_watch(kind, item, |o| Object::Dynamic(Box::new(o))))
        .boxed()
}

/// First wait before a failed watch starts over; doubles up to `MAX_RETRY`.
const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(30);

type Events<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

struct Relisting<K: kube::Resource + Clone> {
    api: Api<K>,
    config: watcher::Config,
    current: Option<Events<K>>,
    retry: Option<Duration>,
}

/// A watcher that, after an error, waits (with backoff) and starts over with a fresh list.
///
/// kube's watcher resumes a failed watch silently, so a recovered watch of a quiet kind
/// would never prove it works again. Starting over yields a full list whose end (`InitDone`)
/// is that proof, and which also repairs anything missed while the watch was down.
fn relisting<K>(api: Api<K>, config: watcher::Config) -> Events<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let start = Relisting {
        api,
        config,
        current: None,
        retry: None,
    };
    futures::stream::unfold(start, |mut st| async move {
        loop {
            let events = match &mut st.current {
                Some(events) => events,
                None => {
                    if let Some(wait) = st.retry {
                        tokio::time::sleep(wait).await;
                    }
                    st.current
                        .insert(watcher(st.api.clone(), st.config.clone()).boxed())
                }
            };
            match events.next().await {
                Some(Ok(event)) => {
                    if matches!(event, watcher::Event::InitDone) {
                        st.retry = None;
                    }
                    return Some((Ok(event), st));
                }
                Some(Err(e)) => {
                    st.current = None;
                    st.retry = Some(st.retry.map_or(FIRST_RETRY, |r| (r * 2).min(MAX_RETRY)));
                    return Some((Err(e), st));
                }
                None => st.current = None,
            }
        }
    })
    .boxed()
}
