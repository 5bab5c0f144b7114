//! The watchers that feed the cache: one list and watch (`listwatch`) per kind the cluster
//! serves (as `discovery` found, Machine API kinds at the version chosen there), merged and
//! read by a task into a bounded buffer the runner drains.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use k8s_openapi::api::{
    apps::v1 as appsv1, batch::v1 as batchv1, core::v1 as corev1, policy::v1 as policyv1,
    storage::v1 as storagev1,
};
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::discovery::Served;
use super::heard::Heard;
use super::lean::LeanPod;
use super::lean_controller::LeanController;
use super::lean_dra::LeanDra;
use super::lean_storage::{LeanClaim, LeanPodTemplate, LeanVolume};
use super::listwatch::{Reads, list_watch};
use super::update::{Kind, Object, Update};
use crate::model::controller::ControllerKind;
use crate::model::snapshot::PRIORITY_EXPANDER_CONFIGMAP;

/// Updates read off the watch streams but not yet applied: enough to ride out a long pass
/// without holding the API server's watches back; past it, reading waits for the runner.
/// Each holds a whole object until it is projected, so a fleet of clusters relisting at once
/// holds this many whole pods per cluster: 512 cover a burst of thousands of events a second
/// during a pass of tens of milliseconds.
const BUFFER: usize = 512;

/// The watch streams of one cluster, read by a task of their own so that they are drained
/// while a pass runs (an API server closes a watch whose client stops reading, and the
/// relist that follows costs far more than the wait). The task ends when this is dropped.
pub struct Updates {
    received: mpsc::Receiver<Update>,
    task: JoinHandle<()>,
}

impl Drop for Updates {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Updates {
    /// The next update; `None` once every watch has ended.
    pub async fn next(&mut self) -> Option<Update> {
        self.received.recv().await
    }
}

/// One list and watch per served kind, merged. `deadline` bounds each list page and each
/// watch request's acceptance; every answer of the API server is stamped on `heard`.
pub fn updates(client: &Client, served: &Served, deadline: Duration, heard: Heard) -> Updates {
    let mut all = streams(client, served, &Reads::new(deadline, heard));
    let (send, received) = mpsc::channel(BUFFER);
    let task = tokio::spawn(async move {
        while let Some(update) = all.next().await {
            if send.send(update).await.is_err() {
                return;
            }
        }
    });
    Updates { received, task }
}

fn streams(client: &Client, served: &Served, d: &Reads) -> SelectAll<BoxStream<'static, Update>> {
    let mut all = SelectAll::new();
    for kind in &served.kinds {
        let stream = match kind {
            Kind::Node => {
                typed::<corev1::Node>(client, *kind, None, d, |o| Object::Node(Box::new(o)))
            }
            // Finished pods hold no resources and never move: leave them out of memory. Only
            // what the projection reads is decoded (`lean`).
            Kind::Pod => typed::<LeanPod>(
                client,
                *kind,
                Some("status.phase!=Succeeded,status.phase!=Failed".into()),
                d,
                |o| Object::Pod(Box::new(o.0)),
            ),
            Kind::Namespace => typed::<corev1::Namespace>(client, *kind, None, d, |o| {
                Object::Namespace(Box::new(o))
            }),
            Kind::PodDisruptionBudget => {
                typed::<policyv1::PodDisruptionBudget>(client, *kind, None, d, |o| {
                    Object::PodDisruptionBudget(Box::new(o))
                })
            }
            Kind::DaemonSet => typed::<appsv1::DaemonSet>(client, *kind, None, d, |o| {
                Object::DaemonSet(Box::new(o))
            }),
            Kind::Controller(c) => match controller(client, *c, d) {
                Some(stream) => stream,
                None => continue,
            },
            Kind::PriorityConfigMap => typed::<corev1::ConfigMap>(
                client,
                *kind,
                Some(format!("metadata.name={PRIORITY_EXPANDER_CONFIGMAP}")),
                d,
                |o| Object::ConfigMap(Box::new(o)),
            ),
            Kind::PersistentVolumeClaim
            | Kind::PersistentVolume
            | Kind::StorageClass
            | Kind::CsiNode => match storage(client, *kind, d) {
                Some(stream) => stream,
                None => continue,
            },
            // Only where ProvisioningRequests are served (`discovery`), decoded lean.
            Kind::PodTemplate => typed::<LeanPodTemplate>(client, *kind, None, d, |o| {
                Object::PodTemplate(Box::new(o.0))
            }),
            k if k.is_dra() => match served.dynamic.get(kind) {
                Some(ar) => dra(client, *kind, ar, d),
                None => continue,
            },
            _ => match served.dynamic.get(kind) {
                Some(ar) => dynamic(client, *kind, ar, d),
                None => continue,
            },
        };
        all.push(stream);
    }
    all
}

/// A controller kind's list and watch, decoding only its key, uid and replicas (`None` for
/// DaemonSets, which are watched whole as [`Kind::DaemonSet`]).
fn controller(
    client: &Client,
    kind: ControllerKind,
    d: &Reads,
) -> Option<BoxStream<'static, Update>> {
    let k = Kind::Controller(kind);
    Some(match kind {
        ControllerKind::ReplicationController => {
            typed::<LeanController<corev1::ReplicationController>>(client, k, None, d, |o| {
                Object::Controller(Box::new(o.object))
            })
        }
        ControllerKind::Job => typed::<LeanController<batchv1::Job>>(client, k, None, d, |o| {
            Object::Controller(Box::new(o.object))
        }),
        ControllerKind::ReplicaSet => {
            typed::<LeanController<appsv1::ReplicaSet>>(client, k, None, d, |o| {
                Object::Controller(Box::new(o.object))
            })
        }
        ControllerKind::StatefulSet => {
            typed::<LeanController<appsv1::StatefulSet>>(client, k, None, d, |o| {
                Object::Controller(Box::new(o.object))
            })
        }
        ControllerKind::DaemonSet => return None,
    })
}

/// A storage kind's list and watch. Claims and volumes, which a cluster has as many of as
/// stateful pods, are decoded lean (`lean_storage`); classes and CSINodes are few and small.
fn storage(client: &Client, kind: Kind, d: &Reads) -> Option<BoxStream<'static, Update>> {
    Some(match kind {
        Kind::PersistentVolumeClaim => typed::<LeanClaim>(client, kind, None, d, |o| {
            Object::PersistentVolumeClaim(Box::new(o.0))
        }),
        Kind::PersistentVolume => typed::<LeanVolume>(client, kind, None, d, |o| {
            Object::PersistentVolume(Box::new(o.0))
        }),
        Kind::StorageClass => typed::<storagev1::StorageClass>(client, kind, None, d, |o| {
            Object::StorageClass(Box::new(o))
        }),
        Kind::CsiNode => {
            typed::<storagev1::CSINode>(client, kind, None, d, |o| Object::CsiNode(Box::new(o)))
        }
        _ => return None,
    })
}

fn typed<K>(
    client: &Client,
    kind: Kind,
    fields: Option<String>,
    reads: &Reads,
    object: fn(K) -> Object,
) -> BoxStream<'static, Update>
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let api: Api<K> = Api::all(client.clone());
    list_watch(api, fields, reads.clone())
        .map(move |event| Update::from_event(kind, event, object))
        .boxed()
}

/// A DRA kind's list and watch at the version discovery chose, decoded lean
/// (`lean_dra`), each object stamped with that version for the conversion to v1.
fn dra(client: &Client, kind: Kind, ar: &ApiResource, reads: &Reads) -> BoxStream<'static, Update> {
    let api: Api<LeanDra> = Api::all_with(client.clone(), ar);
    let api_version = ar.api_version.clone();
    list_watch(api, None, reads.clone())
        .map(move |event| {
            let update = Update::from_event(kind, event, |o| Object::Dynamic(Box::new(o.0)));
            super::dra::stamp(update, &api_version)
        })
        .boxed()
}

fn dynamic(
    client: &Client,
    kind: Kind,
    ar: &ApiResource,
    reads: &Reads,
) -> BoxStream<'static, Update> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    list_watch(api, None, reads.clone())
        .map(move |event| Update::from_event(kind, event, |o| Object::Dynamic(Box::new(o))))
        .boxed()
}
