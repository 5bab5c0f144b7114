//! Workload-side objects the decisions read besides pods: PodDisruptionBudgets (drain
//! safety), DaemonSets (what every new node will also run) and Namespaces (for affinity
//! terms with a namespace selector).

use std::sync::Arc;

use k8s_openapi::api::apps::v1 as appsv1;
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::policy::v1 as policyv1;

use super::labels::{LabelSelector, Labels};
use super::meta::{FieldError, ObjectKey, Projector, key_of, label_selector};
use super::pod::PodSpec;

#[derive(Clone, Debug, PartialEq)]
pub struct PodDisruptionBudget {
    pub key: ObjectKey,
    /// `None`: the budget selects no pods.
    pub selector: Option<LabelSelector>,
    pub disruptions_allowed: i32,
    /// Why the budget could not be read (its selector), when it could not: whether it
    /// covers a pod of its namespace is then unknown, and such pods keep their node.
    pub unreadable: Option<Arc<str>>,
}

impl PodDisruptionBudget {
    pub fn from_k8s(
        pdb: &policyv1::PodDisruptionBudget,
        p: &mut Projector,
    ) -> Result<Self, FieldError> {
        let selector = match pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) {
            Some(s) => Some(label_selector(s, "spec.selector", p)?),
            None => None,
        };
        Ok(PodDisruptionBudget {
            key: key_of(&pdb.metadata, p),
            selector,
            disruptions_allowed: pdb.status.as_ref().map_or(0, |s| s.disruptions_allowed),
            unreadable: None,
        })
    }

    /// A budget whose selector cannot be read (`why`), kept so that the pods of its
    /// namespace keep their nodes rather than lose their protection.
    pub fn unreadable(pdb: &policyv1::PodDisruptionBudget, why: &str, p: &mut Projector) -> Self {
        PodDisruptionBudget {
            key: key_of(&pdb.metadata, p),
            selector: None,
            disruptions_allowed: 0,
            unreadable: Some(why.into()),
        }
    }

    pub fn covers(&self, namespace: &str, labels: &Labels) -> bool {
        *self.key.namespace == *namespace
            && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }
}

/// A DaemonSet's pod template: the pod every matching node runs.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonSet {
    pub key: ObjectKey,
    pub uid: Arc<str>,
    pub labels: Labels,
    pub spec: Arc<PodSpec>,
}

impl DaemonSet {
    pub fn from_k8s(ds: &appsv1::DaemonSet, p: &mut Projector) -> Result<Self, FieldError> {
        let key = key_of(&ds.metadata, p);
        let template = ds.spec.as_ref().map(|s| &s.template);
        let tmeta = template.and_then(|t| t.metadata.as_ref());
        let labels = tmeta.and_then(|m| m.labels.as_ref());
        let empty = corev1::PodSpec::default();
        let spec = template.and_then(|t| t.spec.as_ref()).unwrap_or(&empty);
        let projected = super::pod_spec::project(spec, &key.namespace, labels, p)
            .map_err(|e| FieldError::new(format!("spec.template.{}", e.path), e.message))?;
        Ok(DaemonSet {
            uid: p.opt_str(ds.metadata.uid.as_ref()),
            labels: p.labels(labels),
            spec: p.specs.intern(projected),
            key,
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Namespace {
    pub name: Arc<str>,
    pub labels: Labels,
}

impl Namespace {
    pub fn from_k8s(ns: &corev1::Namespace, p: &mut Projector) -> Self {
        Namespace {
            name: p.opt_str(ns.metadata.name.as_ref()),
            labels: p.labels(ns.metadata.labels.as_ref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdb_covers_matching_pods_in_its_namespace() {
        let pdb: policyv1::PodDisruptionBudget = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2}
        }))
        .unwrap();
        let pdb = PodDisruptionBudget::from_k8s(&pdb, &mut Projector::default()).unwrap();
        let web = Labels::from_strs([("app", "web")]);
        assert!(pdb.covers("shop", &web));
        assert!(!pdb.covers("other", &web));
        assert_eq!(pdb.disruptions_allowed, 0);
    }

    #[test]
    fn daemonset_errors_point_into_the_template() {
        let ds: appsv1::DaemonSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "agent", "namespace": "kube-system"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [
                {"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}}}
        }))
        .unwrap();
        let err = DaemonSet::from_k8s(&ds, &mut Projector::default()).unwrap_err();
        assert_eq!(
            err.path,
            "spec.template.spec.containers[0].resources.requests.cpu"
        );
    }
}
