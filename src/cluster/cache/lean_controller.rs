//! ReplicaSets, ReplicationControllers, Jobs and StatefulSets as the cache reads them off
//! lists and watches: their name, namespace, uid and `spec.replicas`, nothing more. The drain
//! rules only ask whether a pod's controller exists and how many replicas it asks for; a
//! ReplicaSet's pod template (the bulk of it) is skipped, only parsed.

use std::borrow::Cow;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use serde::Deserialize;
use serde_json::Value;

/// One controller of kind `K` (a generated type, which names the resource for the watch),
/// holding only what the projection reads.
#[derive(Debug)]
pub struct LeanController<K> {
    pub object: ControllerObject,
    kind: PhantomData<fn() -> K>,
}

/// What is kept of a controller until it is projected, whatever its kind.
#[derive(Clone, Debug, Default)]
pub struct ControllerObject {
    pub metadata: metav1::ObjectMeta,
    /// `spec.replicas` as sent: read leniently by the projection, so that one odd value is
    /// a problem named on its object instead of a list that cannot be decoded.
    pub replicas: Option<Value>,
}

impl<K> Clone for LeanController<K> {
    fn clone(&self) -> Self {
        LeanController {
            object: self.object.clone(),
            kind: PhantomData,
        }
    }
}

impl<K> kube::Resource for LeanController<K>
where
    K: kube::Resource<DynamicType = ()>,
{
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &metav1::ObjectMeta {
        &self.object.metadata
    }
    fn meta_mut(&mut self) -> &mut metav1::ObjectMeta {
        &mut self.object.metadata
    }
}

impl<'de, K> Deserialize<'de> for LeanController<K> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(d)?;
        let m = wire.metadata;
        Ok(LeanController {
            object: ControllerObject {
                metadata: metav1::ObjectMeta {
                    name: m.name,
                    namespace: m.namespace,
                    uid: m.uid,
                    // The watch resumes from the last version seen.
                    resource_version: m.resource_version,
                    ..Default::default()
                },
                replicas: wire.spec.and_then(|s| s.replicas),
            },
            kind: PhantomData,
        })
    }
}

#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: WireMeta,
    spec: Option<WireSpec>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
}

#[derive(Deserialize)]
struct WireSpec {
    replicas: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1 as appsv1;
    use kube::Resource;

    #[test]
    fn only_the_key_uid_and_replicas_are_kept() {
        let rs = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-5d8f", "namespace": "shop", "uid": "u-1",
                "resourceVersion": "42", "labels": {"app": "web"},
                "managedFields": [{"manager": "kube-controller-manager"}],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                    "name": "web", "uid": "u-d", "controller": true}]},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "web:1",
                        "env": [{"name": "A", "value": "b"}]}]}}},
            "status": {"replicas": 3, "readyReplicas": 3}
        });
        let lean: LeanController<appsv1::ReplicaSet> = serde_json::from_value(rs).unwrap();
        let m = &lean.object.metadata;
        assert_eq!(
            (m.name.as_deref(), m.namespace.as_deref(), m.uid.as_deref()),
            (Some("web-5d8f"), Some("shop"), Some("u-1"))
        );
        assert_eq!(m.resource_version.as_deref(), Some("42"));
        assert!(m.labels.is_none() && m.managed_fields.is_none());
        assert_eq!(lean.object.replicas, Some(serde_json::json!(3)));
        assert_eq!(
            LeanController::<appsv1::ReplicaSet>::plural(&()),
            "replicasets"
        );
        assert_eq!(LeanController::<appsv1::StatefulSet>::group(&()), "apps");
    }

    #[test]
    fn odd_replicas_and_missing_fields_still_decode() {
        for spec in [
            serde_json::json!({"replicas": "three"}),
            serde_json::json!({}),
            serde_json::json!(null),
        ] {
            let job = serde_json::json!({"metadata": {"name": "backup"}, "spec": spec});
            let lean: LeanController<k8s_openapi::api::batch::v1::Job> =
                serde_json::from_value(job).unwrap();
            assert_eq!(lean.object.metadata.name.as_deref(), Some("backup"));
        }
        let bare: LeanController<appsv1::ReplicaSet> =
            serde_json::from_value(serde_json::json!({})).unwrap();
        assert!(bare.object.metadata.name.is_none() && bare.object.replicas.is_none());
    }
}
