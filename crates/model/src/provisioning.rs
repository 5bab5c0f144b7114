//! ProvisioningRequests (`autoscaling.x-k8s.io`, `v1` and `v1beta1`, the same shape) and
//! the PodTemplates their pod sets name, as far as the engine reads them: the class, the
//! pod sets resolved to pod specs, the parameters and the conditions as written, so that
//! the engine can write only the conditions that change.
//!
//! Every field from outside is bounded as the CRD bounds it (pod sets, parameters, class,
//! messages); an object that breaks a bound or cannot be read is kept with `problem` set,
//! so the engine can name it, and never simulated.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1 as corev1;
use serde_json::Value;

use super::labels::Labels;
use super::meta::{FieldError, ObjectKey, Projector, key_of};
use super::pod::PodSpec;

/// The API group of ProvisioningRequests.
pub const GROUP: &str = "autoscaling.x-k8s.io";
/// The versions read, newest first: upstream's CRD serves `v1` (storage) and `v1beta1`.
pub const VERSIONS: [&str; 2] = ["v1", "v1beta1"];
/// The class that answers from a simulation on the existing nodes, without scaling.
pub const CHECK_CAPACITY: &str = "check-capacity.autoscaling.x-k8s.io";
/// The class that asks for all the nodes a request needs in one scale-up, or none.
pub const BEST_EFFORT_ATOMIC: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";
/// The annotation on a pod that consumes a request (its value: the request's name).
pub const CONSUME_ANNOTATION: &str = "autoscaling.x-k8s.io/consume-provisioning-request";
/// The older spelling upstream still reads.
pub const DEPRECATED_CONSUME_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/consume-provisioning-request";
/// The annotation upstream puts on the pods it makes for a request: the request's class.
pub const CLASS_ANNOTATION: &str = "autoscaling.x-k8s.io/provisioning-class-name";
/// `spec.parameters` key naming the check-capacity processor instance.
pub const PROCESSOR_INSTANCE_PARAMETER: &str = "processorInstance";
/// `spec.parameters` key: `"true"` fails a check-capacity request instead of retrying.
pub const NO_RETRY_PARAMETER: &str = "noRetry";

/// The CRD's bounds: `podSets` maxItems, `parameters` maxProperties, a parameter value's
/// maxLength, the class's maxLength, `provisioningClassDetails` maxProperties.
pub const MAX_POD_SETS: usize = 32;
pub const MAX_PARAMETERS: usize = 100;
pub const MAX_PARAMETER_BYTES: usize = 255;
pub const MAX_CLASS_BYTES: usize = 253;
pub const MAX_DETAILS: usize = 64;
/// Conditions kept per request: upstream writes five types; more are someone else's.
pub const MAX_CONDITIONS: usize = 16;
/// A condition message's maxLength in `metav1.Condition`.
pub const MAX_MESSAGE_BYTES: usize = 32_768;
/// The most pods one request may ask for here: every pod is simulated, and a count of two
/// billion (an int32 allows it) must cost a refusal, not two billion pods. Upstream has no
/// such bound.
pub const MAX_REQUEST_PODS: u64 = 10_000;

/// The condition types (`autoscaling.x-k8s.io/v1`).
pub const ACCEPTED: &str = "Accepted";
pub const PROVISIONED: &str = "Provisioned";
pub const FAILED: &str = "Failed";
pub const BOOKING_EXPIRED: &str = "BookingExpired";
pub const CAPACITY_REVOKED: &str = "CapacityRevoked";

/// `status` of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// One `status.conditions` entry, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub type_: Arc<str>,
    pub status: ConditionStatus,
    pub reason: Arc<str>,
    pub message: Arc<str>,
    pub last_transition: Option<Timestamp>,
    pub observed_generation: Option<i64>,
}

/// One pod set: `count` pods of the PodTemplate `template` (same namespace).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSetRef {
    pub template: Arc<str>,
    pub count: u32,
}

/// A ProvisioningRequest.
#[derive(Clone, Debug, PartialEq)]
pub struct ProvisioningRequest {
    pub key: ObjectKey,
    pub uid: Arc<str>,
    /// `v1` or `v1beta1`: the version it was read at, the one to write it back at.
    pub version: Arc<str>,
    pub generation: i64,
    pub created: Option<Timestamp>,
    pub class: Arc<str>,
    pub pod_sets: Vec<PodSetRef>,
    pub parameters: BTreeMap<Arc<str>, Arc<str>>,
    pub conditions: Vec<Condition>,
    pub class_details: BTreeMap<Arc<str>, Arc<str>>,
    /// Why it cannot be used as written (a bound broken, a field unreadable).
    pub problem: Option<String>,
}

impl ProvisioningRequest {
    /// The condition of this type, if written.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| &*c.type_ == type_)
    }

    /// The condition of this type is written and `True` (apimeta's `IsStatusConditionTrue`).
    pub fn is_true(&self, type_: &str) -> bool {
        self.condition(type_)
            .is_some_and(|c| c.status == ConditionStatus::True)
    }

    /// All the pods its pod sets ask for (upstream's `PodCount`).
    pub fn pod_count(&self) -> u64 {
        self.pod_sets.iter().map(|s| u64::from(s.count)).sum()
    }

    pub fn parameter(&self, key: &str) -> Option<&str> {
        self.parameters.get(key).map(|v| &**v)
    }

    /// Reads one object of either version. A field of the wrong type is an error naming
    /// it; a bound broken keeps the request with `problem` set.
    pub fn from_json(value: &Value, p: &mut Projector) -> Result<Self, FieldError> {
        let meta = value.get("metadata");
        for field in ["namespace", "name", "uid"] {
            text(
                meta.and_then(|m| m.get(field)),
                &format!("metadata.{field}"),
            )?;
        }
        let mut r = Self::named(value, p);
        let created = text(
            meta.and_then(|m| m.get("creationTimestamp")),
            "metadata.creationTimestamp",
        )?;
        r.created = created
            .map(|t| parse_time(t, "metadata.creationTimestamp"))
            .transpose()?;
        r.generation = meta
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let mut problems = Vec::new();
        let spec = value.get("spec");
        let class = text(
            spec.and_then(|s| s.get("provisioningClassName")),
            "spec.provisioningClassName",
        )?
        .unwrap_or_default();
        if class.len() > MAX_CLASS_BYTES {
            problems.push(format!(
                "spec.provisioningClassName is {} bytes, more than the CRD's {MAX_CLASS_BYTES}",
                class.len()
            ));
        }
        r.pod_sets = pod_sets(spec.and_then(|s| s.get("podSets")), &mut problems, p)?;
        r.parameters = string_map(
            spec.and_then(|s| s.get("parameters")),
            "spec.parameters",
            (MAX_PARAMETERS, MAX_PARAMETER_BYTES),
            &mut problems,
            p,
        )?;
        r.read_status(value.get("status"), &mut problems, p)?;
        if r.pod_count() > MAX_REQUEST_PODS {
            problems.push(format!(
                "asks for {} pods, more than the {MAX_REQUEST_PODS} one request may ask for here",
                r.pod_count()
            ));
        }
        if !problems.is_empty() {
            r.problem = Some(crate::quote::bounded(&problems.join("; "), 1024).into_owned());
        }
        Ok(r)
    }

    fn read_status(
        &mut self,
        status: Option<&Value>,
        problems: &mut Vec<String>,
        p: &mut Projector,
    ) -> Result<(), FieldError> {
        self.conditions = conditions(status.and_then(|s| s.get("conditions")), problems, p)?;
        self.class_details = string_map(
            status.and_then(|s| s.get("provisioningClassDetails")),
            "status.provisioningClassDetails",
            (MAX_DETAILS, MAX_MESSAGE_BYTES),
            problems,
            p,
        )?;
        Ok(())
    }

    /// A request whose fields cannot be read (`why`): kept by name with `problem` set, so
    /// the plan names it and nothing is simulated for it.
    pub fn unreadable(value: &Value, why: &str, p: &mut Projector) -> Self {
        let mut r = Self::named(value, p);
        r.problem = Some(crate::quote::bounded(why, 1024).into_owned());
        r
    }

    /// What names a request (key, uid, version, class), bounded; the rest empty.
    fn named(value: &Value, p: &mut Projector) -> Self {
        let meta = value.get("metadata");
        let field = |k: &str| {
            meta.and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .and_then(|v| v.rsplit_once('/'))
            .map_or("v1", |(_, v)| v);
        let class = value
            .get("spec")
            .and_then(|s| s.get("provisioningClassName"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        ProvisioningRequest {
            key: ObjectKey {
                namespace: p.str(&crate::quote::bounded(field("namespace"), 253)),
                name: p.str(&crate::quote::bounded(field("name"), 253)),
            },
            uid: p.str(&crate::quote::bounded(field("uid"), 64)),
            version: p.str(&crate::quote::bounded(version, 16)),
            generation: 0,
            created: None,
            class: p.str(&crate::quote::bounded(class, MAX_CLASS_BYTES)),
            pod_sets: Vec::new(),
            parameters: BTreeMap::new(),
            conditions: Vec::new(),
            class_details: BTreeMap::new(),
            problem: None,
        }
    }
}

/// A string field, if there; another type is an error naming it.
fn text<'v>(v: Option<&'v Value>, path: &str) -> Result<Option<&'v str>, FieldError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(FieldError::new(
            path,
            format!(
                "expected a string, found {}",
                crate::quote::bounded(&other.to_string(), 64)
            ),
        )),
    }
}

fn parse_time(t: &str, path: &str) -> Result<Timestamp, FieldError> {
    t.parse::<Timestamp>()
        .map_err(|e| FieldError::new(path, format!("not an RFC 3339 time: {e}")))
}

fn pod_sets(
    v: Option<&Value>,
    problems: &mut Vec<String>,
    p: &mut Projector,
) -> Result<Vec<PodSetRef>, FieldError> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        problems.push("spec.podSets is missing".to_string());
        return Ok(Vec::new());
    };
    let Some(items) = v.as_array() else {
        return Err(FieldError::new("spec.podSets", "expected a list"));
    };
    if items.len() > MAX_POD_SETS {
        problems.push(format!(
            "spec.podSets has {} entries, more than the CRD's {MAX_POD_SETS}",
            items.len()
        ));
    }
    let mut out = Vec::new();
    for (i, item) in items.iter().take(MAX_POD_SETS).enumerate() {
        let name = item
            .get("podTemplateRef")
            .and_then(|r| r.get("name"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty());
        let Some(name) = name else {
            return Err(FieldError::new(
                format!("spec.podSets[{i}].podTemplateRef.name"),
                "missing or not a string",
            ));
        };
        let count = item.get("count").and_then(Value::as_i64).ok_or_else(|| {
            FieldError::new(
                format!("spec.podSets[{i}].count"),
                "missing or not an integer",
            )
        })?;
        let Ok(count) = u32::try_from(count) else {
            return Err(FieldError::new(
                format!("spec.podSets[{i}].count"),
                format!("{count} is not a count of pods (the CRD's minimum is 1)"),
            ));
        };
        if count == 0 {
            problems.push(format!(
                "spec.podSets[{i}].count is 0, below the CRD's minimum 1"
            ));
        }
        out.push(PodSetRef {
            template: p.str(name),
            count,
        });
    }
    Ok(out)
}

fn string_map(
    v: Option<&Value>,
    path: &str,
    (max_entries, max_bytes): (usize, usize),
    problems: &mut Vec<String>,
    p: &mut Projector,
) -> Result<BTreeMap<Arc<str>, Arc<str>>, FieldError> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(BTreeMap::new());
    };
    let Some(map) = v.as_object() else {
        return Err(FieldError::new(path, "expected a map of strings"));
    };
    if map.len() > max_entries {
        problems.push(format!(
            "{path} has {} entries, more than the CRD's {max_entries}",
            map.len()
        ));
    }
    let mut out = BTreeMap::new();
    for (k, v) in map.iter().take(max_entries) {
        let Some(s) = v.as_str() else {
            return Err(FieldError::new(format!("{path}.{k}"), "expected a string"));
        };
        if s.len() > max_bytes {
            problems.push(format!(
                "{path}.{k} is {} bytes, more than the CRD's {max_bytes}",
                s.len()
            ));
        }
        let s = crate::quote::bounded(s, max_bytes);
        out.insert(p.str(&crate::quote::bounded(k, 256)), p.str(&s));
    }
    Ok(out)
}

fn conditions(
    v: Option<&Value>,
    problems: &mut Vec<String>,
    p: &mut Projector,
) -> Result<Vec<Condition>, FieldError> {
    let Some(items) = v.and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    if items.len() > MAX_CONDITIONS {
        problems.push(format!(
            "status.conditions has {} entries, more than the {MAX_CONDITIONS} read",
            items.len()
        ));
    }
    let mut out = Vec::new();
    for (i, c) in items.iter().take(MAX_CONDITIONS).enumerate() {
        let path = |f: &str| format!("status.conditions[{i}].{f}");
        let field = |f: &str| c.get(f).and_then(Value::as_str).unwrap_or_default();
        let status = match field("status") {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            "Unknown" => ConditionStatus::Unknown,
            other => {
                return Err(FieldError::new(
                    path("status"),
                    format!(
                        "{:?} is not True, False or Unknown",
                        crate::quote::bounded(other, 64)
                    ),
                ));
            }
        };
        let last_transition = match c.get("lastTransitionTime").and_then(Value::as_str) {
            Some(t) => Some(parse_time(t, &path("lastTransitionTime"))?),
            None => None,
        };
        out.push(Condition {
            type_: p.str(&crate::quote::bounded(field("type"), 316)),
            status,
            reason: p.str(&crate::quote::bounded(field("reason"), 1024)),
            message: p.str(&crate::quote::bounded(field("message"), MAX_MESSAGE_BYTES)),
            last_transition,
            observed_generation: c.get("observedGeneration").and_then(Value::as_i64),
        });
    }
    Ok(out)
}

/// A PodTemplate: the pod spec of a pod set, projected as a pod's.
#[derive(Clone, Debug, PartialEq)]
pub struct PodTemplate {
    pub key: ObjectKey,
    /// `template.metadata.labels`.
    pub labels: Labels,
    pub spec: Arc<PodSpec>,
    /// `template.spec.priority`.
    pub priority: Option<i32>,
    /// Why its spec could not be read; the requests naming it are not simulated.
    pub unreadable: Option<Arc<str>>,
}

impl PodTemplate {
    /// Projects a PodTemplate; a spec that cannot be read keeps the template by name with
    /// `unreadable` set (and the error returned beside it, for a warning).
    pub fn from_k8s(t: &corev1::PodTemplate, p: &mut Projector) -> (Self, Option<FieldError>) {
        let key = key_of(&t.metadata, p);
        let template = t.template.as_ref();
        let meta = template.and_then(|t| t.metadata.as_ref());
        let labels_map = meta.and_then(|m| m.labels.as_ref());
        let empty = corev1::PodSpec::default();
        let spec = template.and_then(|t| t.spec.as_ref()).unwrap_or(&empty);
        let labels = p.labels(labels_map);
        match super::pod_spec::project(spec, &key.namespace, labels_map, p) {
            Ok(projected) => (
                PodTemplate {
                    key,
                    labels,
                    spec: p.specs.intern(projected),
                    priority: spec.priority,
                    unreadable: None,
                },
                None,
            ),
            Err(e) => {
                let e = FieldError::new(format!("template.{}", e.path), e.message);
                (
                    PodTemplate {
                        key,
                        labels,
                        spec: p.specs.intern(PodSpec::default()),
                        priority: None,
                        unreadable: Some(e.to_string().into()),
                    },
                    Some(e),
                )
            }
        }
    }
}

/// The ProvisioningRequests of a cluster and the PodTemplates in their namespaces.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProvisioningRequests {
    /// Whether ProvisioningRequests were read at all: a cluster that does not serve the
    /// kind (or a dump without it) has the feature off, never an error.
    pub listed: bool,
    pub requests: Vec<ProvisioningRequest>,
    pub pod_templates: Vec<PodTemplate>,
}

impl ProvisioningRequests {
    /// The PodTemplate `name` in `namespace`.
    pub fn template(&self, namespace: &str, name: &str) -> Option<&PodTemplate> {
        self.pod_templates
            .iter()
            .find(|t| &*t.key.namespace == namespace && &*t.key.name == name)
    }
}

#[cfg(test)]
#[path = "provisioning_tests.rs"]
mod tests;
