//! Each pod's `resourceClaims` resolved into what it needs of a node: allocated claims
//! that pin it (or move with it), claims to allocate, or why no node can help.

use std::collections::HashMap;
use std::sync::Arc;

use fleetscaler_model::dra::{
    ClaimSpec, PodClaim, PodClaimSource, ResourceClaim, ResourceClaimTemplate,
};
use fleetscaler_model::{ClusterSnapshot, Pod};

use super::{DraNeeds, MovableClaim, NeededClaim};
use crate::reason::ReasonCode;

/// The claims, by namespace and name, for resolving pods' `resourceClaims`.
pub(super) struct Resolver<'a> {
    claims: HashMap<(&'a str, &'a str), &'a ResourceClaim>,
    templates: HashMap<(&'a str, &'a str), &'a ResourceClaimTemplate>,
    classes: &'a HashMap<Arc<str>, Vec<Arc<str>>>,
}

impl<'a> Resolver<'a> {
    pub(super) fn new(
        snapshot: &'a ClusterSnapshot,
        classes: &'a HashMap<Arc<str>, Vec<Arc<str>>>,
    ) -> Self {
        let dra = &snapshot.dra;
        Resolver {
            claims: dra
                .claims
                .iter()
                .map(|c| ((&*c.key.namespace, &*c.key.name), c))
                .collect(),
            templates: dra
                .templates
                .iter()
                .map(|t| ((&*t.key.namespace, &*t.key.name), t))
                .collect(),
            classes,
        }
    }

    pub(super) fn needs_of(&self, pod: &Pod) -> DraNeeds {
        let mut needs = DraNeeds::default();
        for claim in &pod.spec.resource_claims {
            if let Err(block) = self.add_claim(pod, claim, &mut needs) {
                needs.block = Some(block);
                break;
            }
        }
        needs
    }

    fn add_claim(
        &self,
        pod: &Pod,
        claim: &PodClaim,
        needs: &mut DraNeeds,
    ) -> Result<(), (ReasonCode, String)> {
        let ns = &*pod.id.namespace;
        let missing = |what: String| Err((ReasonCode::DeviceClaimMissing, what));
        let generated = pod
            .extras()
            .claim_statuses
            .iter()
            .find(|(name, _)| *name == claim.name)
            .map(|(_, made)| made);
        let (name, found) = match (&claim.source, generated) {
            (PodClaimSource::Claim(name), _) | (PodClaimSource::Template(_), Some(name)) => {
                (name, self.claims.get(&(ns, &**name)).copied())
            }
            (PodClaimSource::Template(template), None) => {
                // Made by the resource claim controller once the pod exists: as its template.
                let Some(t) = self.templates.get(&(ns, &**template)) else {
                    return missing(format!(
                        "resourceclaimtemplate {ns}/{template} (claim {} of the pod) does not exist",
                        claim.name
                    ));
                };
                let key: Arc<str> = format!("{ns}/{}#{}", pod.id.name, claim.name).into();
                return self.add_unallocated(key, &t.spec, needs);
            }
        };
        let Some(found) = found else {
            return missing(format!("resourceclaim {ns}/{name} does not exist"));
        };
        let key: Arc<str> = format!("{ns}/{name}").into();
        let Some(a) = &found.allocation else {
            return self.add_unallocated(key, &found.spec, needs);
        };
        // The pod's alone: made for it, or reserved for it only.
        let alone = generated.is_some() || found.reserved_for.iter().all(|r| *r == pod.id.name);
        match &pod.node_name {
            Some(node) if alone && found.spec.unsimulated.is_none() => {
                needs.movable.push(MovableClaim {
                    key,
                    node: node.clone(),
                    selector: a.node_selector.clone(),
                    devices: a.devices.clone(),
                    spec: Arc::new(found.spec.clone()),
                });
            }
            _ => {
                if let Some(sel) = &a.node_selector {
                    needs.pinned.push((key, sel.clone()));
                }
            }
        }
        Ok(())
    }

    fn add_unallocated(
        &self,
        key: Arc<str>,
        spec: &ClaimSpec,
        needs: &mut DraNeeds,
    ) -> Result<(), (ReasonCode, String)> {
        if let Some(feature) = &spec.unsimulated {
            return Err((
                ReasonCode::NotSimulated,
                format!(
                    "claim {key} uses {feature}, which the simulation does not allocate: no node is bought for it"
                ),
            ));
        }
        for request in &spec.requests {
            for choice in &request.choices {
                if !self.classes.contains_key(&choice.class) {
                    return Err((
                        ReasonCode::DeviceClassMissing,
                        format!(
                            "claim {key}, request {}: deviceclass {} does not exist",
                            request.name, choice.class
                        ),
                    ));
                }
            }
        }
        needs.claims.push(NeededClaim {
            key,
            spec: Arc::new(spec.clone()),
        });
        Ok(())
    }
}
