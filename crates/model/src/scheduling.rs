//! The scheduling constraints of pods and nodes: taints and tolerations, node selectors and
//! required node affinity, inter-pod (anti-)affinity terms, topology spread constraints and
//! host ports, with the simple matching rules that belong to each type.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use super::labels::{LabelSelector, Labels};

pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Taint {
    pub key: Arc<str>,
    pub value: Arc<str>,
    pub effect: TaintEffect,
}

impl Taint {
    pub fn new(key: &str, value: &str, effect: TaintEffect) -> Self {
        Taint {
            key: key.into(),
            value: value.into(),
            effect,
        }
    }

    /// Taints that keep pods off a node; `PreferNoSchedule` only scores.
    pub fn blocks_scheduling(&self) -> bool {
        self.effect != TaintEffect::PreferNoSchedule
    }

    /// Parses the `key=value:Effect` form of the `capacity.cluster-autoscaler.kubernetes.io/taints`
    /// annotation (also `key:Effect`).
    pub fn parse_spec(spec: &str) -> Option<Taint> {
        let (kv, effect) = spec.trim().rsplit_once(':')?;
        let effect = TaintEffect::parse(effect.trim())?;
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        let key = key.trim();
        if key.is_empty() {
            return None;
        }
        Some(Taint::new(key, value.trim(), effect))
    }
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect.as_str())
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Empty with `exists` tolerates every taint key.
    pub key: Arc<str>,
    /// `Exists` when true, `Equal` otherwise.
    pub exists: bool,
    pub value: Arc<str>,
    /// `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if self.key.is_empty() {
            return self.exists;
        }
        self.key == taint.key && (self.exists || self.value == taint.value)
    }
}

/// The first taint on a node that blocks scheduling and that no toleration tolerates.
pub fn untolerated_taint<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .find(|t| t.blocks_scheduling() && !tolerations.iter().any(|tol| tol.tolerates(t)))
}

/// One requirement of a node selector term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeRequirement {
    In(Arc<str>, Arc<[Arc<str>]>),
    NotIn(Arc<str>, Arc<[Arc<str>]>),
    Exists(Arc<str>),
    DoesNotExist(Arc<str>),
    Gt(Arc<str>, i64),
    Lt(Arc<str>, i64),
}

impl NodeRequirement {
    fn matches_value(&self, value: Option<&str>) -> bool {
        let as_int = || value.and_then(|v| v.parse::<i64>().ok());
        match self {
            NodeRequirement::In(_, vs) => value.is_some_and(|v| vs.iter().any(|x| **x == *v)),
            NodeRequirement::NotIn(_, vs) => value.is_none_or(|v| vs.iter().all(|x| **x != *v)),
            NodeRequirement::Exists(_) => value.is_some(),
            NodeRequirement::DoesNotExist(_) => value.is_none(),
            NodeRequirement::Gt(_, n) => as_int().is_some_and(|v| v > *n),
            NodeRequirement::Lt(_, n) => as_int().is_some_and(|v| v < *n),
        }
    }

    pub fn key(&self) -> &Arc<str> {
        match self {
            NodeRequirement::In(k, _)
            | NodeRequirement::NotIn(k, _)
            | NodeRequirement::Exists(k)
            | NodeRequirement::DoesNotExist(k)
            | NodeRequirement::Gt(k, _)
            | NodeRequirement::Lt(k, _) => k,
        }
    }
}

impl fmt::Display for NodeRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |vs: &[Arc<str>]| vs.iter().map(|v| v.as_ref()).collect::<Vec<_>>().join(",");
        match self {
            NodeRequirement::In(k, vs) => write!(f, "{k} in ({})", join(vs)),
            NodeRequirement::NotIn(k, vs) => write!(f, "{k} notin ({})", join(vs)),
            NodeRequirement::Exists(k) => write!(f, "{k} exists"),
            NodeRequirement::DoesNotExist(k) => write!(f, "{k} does not exist"),
            NodeRequirement::Gt(k, n) => write!(f, "{k} > {n}"),
            NodeRequirement::Lt(k, n) => write!(f, "{k} < {n}"),
        }
    }
}

/// A node selector term: every label expression and every field expression must hold.
/// The only field Kubernetes supports is `metadata.name`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeSelectorTerm {
    pub match_labels: Vec<NodeRequirement>,
    pub match_name: Vec<NodeRequirement>,
}

impl NodeSelectorTerm {
    pub fn matches(&self, labels: &Labels, node_name: &str) -> bool {
        self.match_labels
            .iter()
            .all(|r| r.matches_value(labels.get(r.key())))
            && self
                .match_name
                .iter()
                .all(|r| r.matches_value(Some(node_name)))
    }
}

/// `requiredDuringSchedulingIgnoredDuringExecution` of node affinity: any term may match.
/// A term with no expressions matches nothing, as in the scheduler.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeSelector {
    pub terms: Vec<NodeSelectorTerm>,
}

impl NodeSelector {
    /// As [`NodeSelector::matches`], ignoring `metadata.name` fields: the DaemonSet
    /// controller pins each of its pods to its node that way, which says nothing about a
    /// new node.
    pub fn matches_labels_only(&self, labels: &Labels) -> bool {
        self.terms.iter().any(|t| {
            !(t.match_labels.is_empty() && t.match_name.is_empty())
                && t.match_labels
                    .iter()
                    .all(|r| r.matches_value(labels.get(r.key())))
        })
    }

    pub fn matches(&self, labels: &Labels, node_name: &str) -> bool {
        self.terms.iter().any(|t| {
            !(t.match_labels.is_empty() && t.match_name.is_empty()) && t.matches(labels, node_name)
        })
    }
}

/// Which namespaces a pod affinity term looks at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NamespaceScope {
    /// The listed namespaces (the pod's own when the list and selector are both absent).
    Names(Arc<[Arc<str>]>),
    /// The listed namespaces and those whose labels match; an empty selector means all
    /// namespaces. `own` is the pod's namespace: the only one matched when the cluster's
    /// Namespace objects (and so their labels) are unknown.
    Selector {
        names: Arc<[Arc<str>]>,
        selector: LabelSelector,
        own: Arc<str>,
    },
}

/// A required inter-pod affinity or anti-affinity term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AffinityTerm {
    /// `None`: the term matches no pods (a null `labelSelector`).
    pub selector: Option<LabelSelector>,
    pub namespaces: NamespaceScope,
    pub topology_key: Arc<str>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpreadPolicy {
    Honor,
    Ignore,
}

/// A `DoNotSchedule` topology spread constraint (`ScheduleAnyway` ones only score, and are
/// counted in the pod's `soft_spread_constraints`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpreadConstraint {
    pub max_skew: i32,
    pub topology_key: Arc<str>,
    pub selector: Option<LabelSelector>,
    pub min_domains: Option<i32>,
    pub node_affinity_policy: SpreadPolicy,
    pub node_taints_policy: SpreadPolicy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Protocol {
    #[serde(rename = "TCP")]
    Tcp,
    #[serde(rename = "UDP")]
    Udp,
    #[serde(rename = "SCTP")]
    Sctp,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostPort {
    pub port: i32,
    pub protocol: Protocol,
    /// Empty or `0.0.0.0` means every address.
    pub ip: Arc<str>,
}

impl HostPort {
    pub fn conflicts_with(&self, other: &HostPort) -> bool {
        let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
        self.port == other.port
            && self.protocol == other.protocol
            && (wildcard(&self.ip) || wildcard(&other.ip) || self.ip == other.ip)
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let proto = match self.protocol {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        };
        write!(f, "{}/{proto}", self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tol(key: &str, exists: bool, value: &str, effect: Option<TaintEffect>) -> Toleration {
        Toleration {
            key: key.into(),
            exists,
            value: value.into(),
            effect,
        }
    }

    #[test]
    fn tolerations_match_like_the_scheduler() {
        let gpu = Taint::new("nvidia.com/gpu", "true", TaintEffect::NoSchedule);
        assert!(tol("nvidia.com/gpu", true, "", None).tolerates(&gpu));
        assert!(
            tol(
                "nvidia.com/gpu",
                false,
                "true",
                Some(TaintEffect::NoSchedule)
            )
            .tolerates(&gpu)
        );
        assert!(!tol("nvidia.com/gpu", false, "false", None).tolerates(&gpu));
        assert!(!tol("nvidia.com/gpu", true, "", Some(TaintEffect::NoExecute)).tolerates(&gpu));
        assert!(tol("", true, "", None).tolerates(&gpu));
        assert!(!tol("", false, "", None).tolerates(&gpu));
        let soft = Taint::new("x", "", TaintEffect::PreferNoSchedule);
        assert_eq!(
            untolerated_taint(&[soft.clone(), gpu.clone()], &[]),
            Some(&gpu)
        );
        assert_eq!(untolerated_taint(&[soft], &[]), None);
    }

    #[test]
    fn node_selector_terms_are_ored_expressions_anded() {
        let labels = Labels::from_strs([("zone", "a"), ("cores", "16")]);
        let vals = |vs: &[&str]| {
            vs.iter()
                .map(|v| Arc::from(*v))
                .collect::<Arc<[Arc<str>]>>()
        };
        let term = |reqs: Vec<NodeRequirement>| NodeSelectorTerm {
            match_labels: reqs,
            match_name: vec![],
        };
        let sel = NodeSelector {
            terms: vec![
                term(vec![NodeRequirement::In("zone".into(), vals(&["b"]))]),
                term(vec![
                    NodeRequirement::Gt("cores".into(), 8),
                    NodeRequirement::DoesNotExist("gpu".into()),
                ]),
            ],
        };
        assert!(sel.matches(&labels, "n1"));
        let not_in_exists = NodeSelector {
            terms: vec![term(vec![
                NodeRequirement::NotIn("zone".into(), vals(&["b", "c"])),
                NodeRequirement::Exists("cores".into()),
            ])],
        };
        assert!(not_in_exists.matches(&labels, "n1"));
        let gt_not_a_number = NodeSelector {
            terms: vec![term(vec![NodeRequirement::Gt("zone".into(), 0)])],
        };
        assert!(!gt_not_a_number.matches(&labels, "n1"));
        let lt = NodeSelector {
            terms: vec![term(vec![NodeRequirement::Lt("cores".into(), 8)])],
        };
        assert!(!lt.matches(&labels, "n1"));
        let by_name = NodeSelector {
            terms: vec![NodeSelectorTerm {
                match_labels: vec![],
                match_name: vec![NodeRequirement::In("name".into(), vals(&["n2"]))],
            }],
        };
        assert!(!by_name.matches(&labels, "n1") && by_name.matches(&labels, "n2"));
        assert!(
            !NodeSelector {
                terms: vec![NodeSelectorTerm::default()]
            }
            .matches(&labels, "n1")
        );
    }

    #[test]
    fn taint_spec_parsing() {
        assert_eq!(
            Taint::parse_spec("gpu=true:NoSchedule"),
            Some(Taint::new("gpu", "true", TaintEffect::NoSchedule))
        );
        assert_eq!(
            Taint::parse_spec("dedicated:NoExecute"),
            Some(Taint::new("dedicated", "", TaintEffect::NoExecute))
        );
        assert_eq!(Taint::parse_spec("gpu=true"), None);
        assert_eq!(Taint::parse_spec("=v:NoSchedule"), None);
        assert_eq!(Taint::parse_spec("k=v:Sometimes"), None);
    }

    #[test]
    fn host_ports_conflict_on_same_port_protocol_and_overlapping_ip() {
        let p = |port, ip: &str| HostPort {
            port,
            protocol: Protocol::Tcp,
            ip: ip.into(),
        };
        assert!(p(80, "").conflicts_with(&p(80, "10.0.0.1")));
        assert!(!p(80, "10.0.0.2").conflicts_with(&p(80, "10.0.0.1")));
        assert!(!p(80, "").conflicts_with(&p(81, "")));
        let udp = HostPort {
            protocol: Protocol::Udp,
            ..p(80, "")
        };
        assert!(!udp.conflicts_with(&p(80, "")));
    }
}
