//! The pods of a request, as upstream's `PodsForProvisioningRequest` makes them from its
//! PodTemplates (`pkg/provisioningrequest/pods/pods.go`).

use std::collections::HashMap;
use std::sync::Arc;

use fleetscaler_model::meta::OwnerRef;
use fleetscaler_model::pod::{Pod, PodExtras, PodId, PodPhase};
use fleetscaler_model::provisioning::{self as pr, ProvisioningRequest, ProvisioningRequests};

/// The PodTemplates by (namespace, name), looked up once per pass.
pub(super) struct Templates<'s>(HashMap<(&'s str, &'s str), &'s pr::PodTemplate>);

impl<'s> Templates<'s> {
    pub(super) fn of(prs: &'s ProvisioningRequests) -> Self {
        Templates(
            prs.pod_templates
                .iter()
                .map(|t| ((&*t.key.namespace, &*t.key.name), t))
                .collect(),
        )
    }

    fn get(&self, namespace: &str, name: &str) -> Option<&'s pr::PodTemplate> {
        self.0.get(&(namespace, name)).copied()
    }
}

pub(super) enum PodsError {
    /// Upstream's `errMissingPodTemplates` text.
    Missing(String),
    /// A PodTemplate this engine could not read.
    Unreadable(String),
}

/// The request's pods from its PodTemplates, as upstream's `PodsForProvisioningRequest`
/// makes them: `<request>-<set>-<index>`, in the request's namespace, owned by it, carrying
/// the consume and class annotations (here: `consumes`), created when the request was.
pub(super) fn pods_for(r: &ProvisioningRequest, prs: &Templates) -> Result<Vec<Pod>, PodsError> {
    let ns = &*r.key.namespace;
    let missing: Vec<&str> = r
        .pod_sets
        .iter()
        .filter(|s| prs.get(ns, &s.template).is_none())
        .map(|s| &*s.template)
        .collect();
    if !missing.is_empty() {
        return Err(PodsError::Missing(format!(
            "missing pod templates, {} pod templates were referenced, {} templates were missing: {}",
            r.pod_sets.len(),
            missing.len(),
            missing.join(",")
        )));
    }
    let mut pods = Vec::new();
    for (i, set) in r.pod_sets.iter().enumerate() {
        let Some(t) = prs.get(ns, &set.template) else {
            continue;
        };
        if let Some(why) = &t.unreadable {
            return Err(PodsError::Unreadable(format!(
                "PodTemplate {}: {why}",
                t.key
            )));
        }
        for j in 0..set.count {
            pods.push(pod(r, t, i, j));
        }
    }
    Ok(pods)
}

fn pod(r: &ProvisioningRequest, t: &pr::PodTemplate, set: usize, index: u32) -> Pod {
    let name: Arc<str> = format!("{}-{set}-{index}", r.key.name).into();
    Pod {
        uid: format!("{}/{name}", r.key.namespace).into(),
        id: PodId {
            namespace: r.key.namespace.clone(),
            name,
        },
        labels: t.labels.clone(),
        spec: t.spec.clone(),
        owner: Some(OwnerRef {
            kind: "ProvisioningRequest".into(),
            name: r.key.name.clone(),
            uid: r.uid.clone(),
            group: Some(pr::GROUP.into()),
        }),
        priority: t.priority,
        node_name: None,
        phase: PodPhase::Pending,
        unschedulable: true,
        created: r.created,
        deleting: None,
        mirror: false,
        // A request's pods are made from its PodTemplates: no claims were made for them yet
        // (a template's claims are simulated from the template, as for a new pod).
        extras: PodExtras {
            consumes: Some(r.key.name.clone()),
            ..PodExtras::default()
        }
        .boxed(),
    }
}
