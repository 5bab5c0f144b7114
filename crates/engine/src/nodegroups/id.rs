//! Node group ids, and the names people (and older hubs) give node groups.
//!
//! An id is `<Kind>.<API group>/<namespace>/<name>`, e.g.
//! `MachineSet.machine.openshift.io/openshift-machine-api/worker-a` or
//! `MachineDeployment.cluster.x-k8s.io/default/md-0`: upstream's `<Kind>/<namespace>/<name>`
//! with the kind qualified the way Kubernetes qualifies a kind by its group (`kubectl get
//! machineset.cluster.x-k8s.io`). Both groups are qualified, so an OpenShift MachineSet and a
//! Cluster API MachineSet of the same namespace and name are two groups with two ids; no
//! id of one group is a prefix or a variant of an id of the other.
//!
//! Upstream's unqualified form is still understood where a person or an earlier version
//! wrote it ([`GroupRef`]): it names whichever group has that kind, namespace and name, and is
//! an error when both API groups have one.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use fleetscaler_model::{MachineApiGroup, ObjectKey, ScalableKind};

/// `<Kind>.<API group>/<namespace>/<name>` (see the module's documentation).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeGroupId(Arc<str>);

impl NodeGroupId {
    pub fn new(api: MachineApiGroup, kind: ScalableKind, key: &ObjectKey) -> Self {
        NodeGroupId(
            format!(
                "{}.{}/{}/{}",
                kind.as_str(),
                api.domain(),
                key.namespace,
                key.name
            )
            .into(),
        )
    }

    /// An id as written (a state file, a test, an older hub's unqualified form): refused
    /// unless it reads as a node group, saying what is wrong.
    pub fn parse(text: &str) -> Result<NodeGroupId, String> {
        GroupRef::parse(text)?;
        Ok(NodeGroupId(text.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Upstream's `<Kind>/<namespace>/<name>`, without the API group: what priority
    /// expander regexes written for upstream's cluster-autoscaler match.
    pub fn unqualified(&self) -> String {
        let (kind, rest) = self.0.split_once('/').unwrap_or((&self.0, ""));
        let kind = kind.split_once('.').map_or(kind, |(k, _)| k);
        format!("{kind}/{rest}")
    }
}

/// Maps keyed by id are looked up by the id's text (ids order as their text does).
impl std::borrow::Borrow<str> for NodeGroupId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeGroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for NodeGroupId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// As saved (a state file, a fleet policy): an id, or upstream's unqualified
/// `<Kind>/<ns>/<name>` that an earlier hub wrote, which stays as written until
/// [`crate::EngineState::adopt_unqualified_ids`] finds the group it names. Anything else is
/// refused, saying what is wrong.
impl<'de> serde::Deserialize<'de> for NodeGroupId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        NodeGroupId::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A node group as written in text: an id, or upstream's unqualified `<Kind>/<ns>/<name>`
/// (then `api` is open, and the group is found by kind, namespace and name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRef {
    pub api: Option<MachineApiGroup>,
    pub kind: ScalableKind,
    pub key: ObjectKey,
}

impl GroupRef {
    /// Reads `MachineSet.cluster.x-k8s.io/ns/name` or `MachineSet/ns/name`; the error says
    /// what is wrong with the text.
    pub fn parse(text: &str) -> Result<GroupRef, String> {
        let mut parts = text.splitn(3, '/');
        let (kind, ns, name) = match (parts.next(), parts.next(), parts.next()) {
            (Some(k), Some(ns), Some(name)) if !ns.is_empty() && !name.is_empty() => (k, ns, name),
            _ => {
                return Err(format!(
                    "node group {text:?} is not <Kind>.<API group>/<namespace>/<name>"
                ));
            }
        };
        let (kind, api) = match kind.split_once('.') {
            Some((kind, domain)) => {
                let api = MachineApiGroup::from_domain(domain).ok_or_else(|| {
                    format!(
                        "node group {text:?}: API group {domain:?} is not machine.openshift.io or cluster.x-k8s.io"
                    )
                })?;
                (kind, Some(api))
            }
            None => (kind, None),
        };
        let kind = ScalableKind::parse(kind).ok_or_else(|| {
            format!(
                "node group {text:?}: kind {kind:?} is not {}",
                ScalableKind::names()
            )
        })?;
        Ok(GroupRef {
            api,
            kind,
            key: ObjectKey::new(ns, name),
        })
    }

    /// Whether this names the group of `api`, `kind` and `key`.
    pub fn names(&self, api: MachineApiGroup, kind: ScalableKind, key: &ObjectKey) -> bool {
        self.api.is_none_or(|a| a == api) && self.kind == kind && self.key == *key
    }

    /// The one of `candidates` (api group, kind, key, item) this names. `Ok(None)`: none;
    /// an error naming both when an unqualified name fits one of each API group.
    pub fn find<'a, T>(
        &self,
        candidates: impl IntoIterator<Item = (MachineApiGroup, ScalableKind, &'a ObjectKey, T)>,
    ) -> Result<Option<T>, String> {
        let mut found: Vec<(MachineApiGroup, T)> = candidates
            .into_iter()
            .filter(|(api, kind, key, _)| self.names(*api, *kind, key))
            .map(|(api, _, _, item)| (api, item))
            .collect();
        if found.len() > 1 {
            let ids: Vec<String> = found
                .iter()
                .map(|(api, _)| NodeGroupId::new(*api, self.kind, &self.key).to_string())
                .collect();
            return Err(format!(
                "{self} is ambiguous: both {} exist",
                ids.join(" and ")
            ));
        }
        Ok(found.pop().map(|(_, item)| item))
    }
}

impl fmt::Display for GroupRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.api {
            Some(api) => write!(f, "{}", NodeGroupId::new(api, self.kind, &self.key)),
            None => write!(f, "{}/{}", self.kind.as_str(), self.key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENSHIFT: MachineApiGroup = MachineApiGroup::OpenShift;
    const CAPI: MachineApiGroup = MachineApiGroup::ClusterApi;

    fn key() -> ObjectKey {
        ObjectKey::new("ns", "a")
    }

    #[test]
    fn ids_of_the_two_api_groups_never_collide() {
        let os = NodeGroupId::new(OPENSHIFT, ScalableKind::MachineSet, &key());
        let capi = NodeGroupId::new(CAPI, ScalableKind::MachineSet, &key());
        assert_eq!(os.as_str(), "MachineSet.machine.openshift.io/ns/a");
        assert_eq!(capi.as_str(), "MachineSet.cluster.x-k8s.io/ns/a");
        assert_ne!(os, capi);
        assert_eq!(os.unqualified(), "MachineSet/ns/a");
        assert_eq!(capi.unqualified(), os.unqualified());
    }

    #[test]
    fn ids_and_upstream_names_parse_back() {
        let id = NodeGroupId::new(CAPI, ScalableKind::MachineDeployment, &key());
        assert_eq!(
            GroupRef::parse(id.as_str()),
            Ok(GroupRef {
                api: Some(CAPI),
                kind: ScalableKind::MachineDeployment,
                key: key()
            })
        );
        let old = GroupRef::parse("MachineSet/ns/a").unwrap();
        assert_eq!(old.api, None);
        assert!(old.names(OPENSHIFT, ScalableKind::MachineSet, &key()));
        assert!(old.names(CAPI, ScalableKind::MachineSet, &key()));
        assert!(!old.names(CAPI, ScalableKind::MachineDeployment, &key()));
        // Names may hold dots; only the kind is split.
        let dotted = GroupRef::parse("MachineSet.cluster.x-k8s.io/ns/a.b").unwrap();
        assert_eq!(dotted.key, ObjectKey::new("ns", "a.b"));
    }

    #[test]
    fn bad_names_say_what_is_wrong() {
        let err = |t: &str| GroupRef::parse(t).unwrap_err();
        assert!(
            err("MachineSet/ns").contains("is not <Kind>"),
            "{}",
            err("MachineSet/ns")
        );
        assert!(err("Pod/ns/x").contains("kind \"Pod\""));
        assert!(err("MachineSet.example.com/ns/x").contains("API group \"example.com\""));
    }

    #[test]
    fn an_unqualified_name_of_both_groups_is_ambiguous() {
        let (k1, k2) = (key(), key());
        let both = [
            (OPENSHIFT, ScalableKind::MachineSet, &k1, 1),
            (CAPI, ScalableKind::MachineSet, &k2, 2),
        ];
        let old = GroupRef::parse("MachineSet/ns/a").unwrap();
        let err = old.find(both).unwrap_err();
        assert_eq!(
            err,
            "MachineSet/ns/a is ambiguous: both MachineSet.machine.openshift.io/ns/a and \
             MachineSet.cluster.x-k8s.io/ns/a exist"
        );
        let qualified = GroupRef::parse("MachineSet.cluster.x-k8s.io/ns/a").unwrap();
        assert_eq!(qualified.find(both), Ok(Some(2)));
        assert_eq!(old.find([both[0]]), Ok(Some(1)));
        assert_eq!(old.find(Vec::<(_, _, &ObjectKey, u8)>::new()), Ok(None));
    }
}
