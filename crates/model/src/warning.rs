//! What a person should know about input that was read but not all used: an annotation
//! refused, an object left out, a setting that did not apply. A warning never stops a pass;
//! it reaches the plan, the cluster's report, `check-config` and the logs.
//!
//! Typed so that code can tell warnings apart without reading their words, and so that the
//! subject (the group, pod, setting or object it is about) is set once, where the warning
//! is made, instead of being prefixed by hand at each layer. Written out (JSON, text) as one
//! line, `subject: message`, as it always was.

use std::fmt;

use serde::{Serialize, Serializer};

/// What kind of input a warning is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WarningCode {
    /// Machine API objects of a version the hub does not read were left out.
    UnsupportedVersion,
    /// An object of the cluster could not be read and was left out.
    UnreadableObject,
    /// The hub may not list a kind (RBAC): the cluster is read without it.
    NotAllowed,
    /// The cluster does not serve a kind the hub reads: what it is for is off.
    NotServed,
    /// A setting (fleet.toml, a ClusterAutoscaler, a flag, a proposal) was refused: the
    /// layer below it stands.
    InvalidSetting,
    /// A ClusterAutoscaler other than the one named `default`: ignored.
    IgnoredClusterAutoscaler,
    /// fleet.toml's `node_groups` names a group that is not there, or not only one.
    NodeGroupNotFound,
    /// Min/max annotations or a MachineAutoscaler that do not make a node group.
    InvalidBounds,
    /// A per-group `autoscaling-options-*` annotation refused.
    InvalidGroupOption,
    /// An entry of a scale-from-zero capacity annotation skipped.
    InvalidTemplateEntry,
    /// A pod annotation refused.
    InvalidPodAnnotation,
    /// A limit on a resource no node or template of the cluster has.
    UnmatchedLimit,
    /// The priority expander's configuration, missing or in part invalid.
    PriorityExpander,
    /// Something in the engine's memory that could not be carried over.
    StateForgotten,
    /// A group below its min size that cannot grow now.
    MinSizeBlocked,
    /// The scale-up pass met something it could not do as simulated.
    ScaleUp,
    /// A group whose replicas are above its max.
    AboveMaxSize,
    /// A node claiming more than any machine has: it counts as nothing against the limits.
    ImplausibleCapacity,
    /// Nodes that should have GPUs and still advertise none past their startup time.
    ResourcesNotReady,
    /// A saved dump lacks objects a decision depends on (the Machines of a group that wants
    /// replicas): what the plan makes of it may be wrong.
    IncompleteDump,
    /// A ProvisioningRequest that cannot be served as written (a PodTemplate missing, a
    /// bound broken): it is left alone.
    ProvisioningRequest,
}

impl WarningCode {
    /// The code's name, as logs and traces print it.
    pub fn as_str(self) -> &'static str {
        match self {
            WarningCode::UnsupportedVersion => "UnsupportedVersion",
            WarningCode::UnreadableObject => "UnreadableObject",
            WarningCode::NotAllowed => "NotAllowed",
            WarningCode::NotServed => "NotServed",
            WarningCode::InvalidSetting => "InvalidSetting",
            WarningCode::IgnoredClusterAutoscaler => "IgnoredClusterAutoscaler",
            WarningCode::NodeGroupNotFound => "NodeGroupNotFound",
            WarningCode::InvalidBounds => "InvalidBounds",
            WarningCode::InvalidGroupOption => "InvalidGroupOption",
            WarningCode::InvalidTemplateEntry => "InvalidTemplateEntry",
            WarningCode::InvalidPodAnnotation => "InvalidPodAnnotation",
            WarningCode::UnmatchedLimit => "UnmatchedLimit",
            WarningCode::PriorityExpander => "PriorityExpander",
            WarningCode::StateForgotten => "StateForgotten",
            WarningCode::MinSizeBlocked => "MinSizeBlocked",
            WarningCode::ScaleUp => "ScaleUp",
            WarningCode::AboveMaxSize => "AboveMaxSize",
            WarningCode::ImplausibleCapacity => "ImplausibleCapacity",
            WarningCode::ResourcesNotReady => "ResourcesNotReady",
            WarningCode::IncompleteDump => "IncompleteDump",
            WarningCode::ProvisioningRequest => "ProvisioningRequest",
        }
    }
}

impl fmt::Display for WarningCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One warning: its code, what it is about (when it is about one thing), and what to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pub code: WarningCode,
    /// The group, pod, setting or object, as the line names it; none for the cluster as a
    /// whole.
    pub subject: Option<String>,
    pub message: String,
}

impl Warning {
    /// A warning about `subject`.
    pub fn about(
        code: WarningCode,
        subject: impl fmt::Display,
        message: impl Into<String>,
    ) -> Self {
        let subject = subject.to_string();
        Warning {
            code,
            subject: Some(crate::quote::bounded(&subject, MAX_SUBJECT_BYTES).into_owned()),
            message: bound_message(message.into()),
        }
    }

    /// A warning about the cluster as a whole.
    pub fn general(code: WarningCode, message: impl Into<String>) -> Self {
        Warning {
            code,
            subject: None,
            message: bound_message(message.into()),
        }
    }
}

/// The longest subject and message a warning keeps: warnings name objects from outside and
/// reach the plan, the API and the status ConfigMap.
const MAX_SUBJECT_BYTES: usize = 256;
const MAX_MESSAGE_BYTES: usize = 1024;

fn bound_message(message: String) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        message
    } else {
        crate::quote::bounded(&message, MAX_MESSAGE_BYTES).into_owned()
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.subject {
            Some(subject) => write!(f, "{subject}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// As one line: what the plan's and the API's readers have always been given.
impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_reads_as_its_subject_then_its_message() {
        let w = Warning::about(
            WarningCode::InvalidGroupOption,
            "MachineSet/ns/a",
            "annotation x: refused",
        );
        assert_eq!(w.to_string(), "MachineSet/ns/a: annotation x: refused");
        let json = serde_json::to_string(&w).unwrap_or_default();
        assert_eq!(json, "\"MachineSet/ns/a: annotation x: refused\"");
        let g = Warning::general(WarningCode::PriorityExpander, "no configuration");
        assert_eq!(g.to_string(), "no configuration");
    }
}
