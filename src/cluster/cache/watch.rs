//! The watchers that feed the cache: one per kind the cluster serves (as `discovery` found,
//! Machine API kinds at the version chosen there), merged into one stream of updates.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use k8s_openapi::api::{apps::v1 as appsv1, core::v1 as corev1, policy::v1 as policyv1};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde::de::DeserializeOwned;

use super::discovery::Served;
use super::update::{Kind, Object, Update};
use crate::model::snapshot::PRIORITY_EXPANDER_CONFIGMAP;

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

/// A watcher that, after an error, waits (with jittered backoff) and starts over with a fresh
/// list.
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
                        tokio::time::sleep(crate::cluster::error::jittered(wait)).await;
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
