//! What every projection shares: object keys, owner references, the interner bundle used
//! while projecting, and conversion of the common Kubernetes field types, each failure
//! naming the field it came from.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use serde::Serialize;

use super::labels::{Interner, LabelRequirement, LabelSelector, Labels, ValueInterner};
use super::pod::PodSpec;
use super::quantity::Quantity;
use super::resources::{CPU, PODS, Resources};
use super::scheduling::{Taint, TaintEffect};

/// A field of an object that could not be projected, with where it is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

/// The longest path and message a [`FieldError`] keeps: an object from outside may hold a
/// key or value of any size, and its error must not.
const MAX_PATH_BYTES: usize = 256;
const MAX_MESSAGE_BYTES: usize = 512;

impl FieldError {
    pub fn new(path: impl Into<String>, message: impl fmt::Display) -> Self {
        let path = path.into();
        let message = message.to_string();
        FieldError {
            path: crate::quote::bounded(&path, MAX_PATH_BYTES).into_owned(),
            message: crate::quote::bounded(&message, MAX_MESSAGE_BYTES).into_owned(),
        }
    }
}

/// `namespace/name` of a namespaced object, or just `name` for a cluster-scoped one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl ObjectKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        ObjectKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

impl Serialize for ObjectKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The controlling owner of an object (`ownerReferences` entry with `controller: true`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerRef {
    pub kind: Arc<str>,
    pub name: Arc<str>,
    pub uid: Arc<str>,
    /// The API group of its `apiVersion` (`""` for the core group); `None` when that cannot
    /// be read as a group and version.
    pub group: Option<Arc<str>>,
}

/// The interners one store uses while projecting objects.
#[derive(Default)]
pub struct Projector {
    pub strings: Interner,
    pub specs: ValueInterner<PodSpec>,
}

impl Projector {
    pub fn str(&mut self, s: &str) -> Arc<str> {
        self.strings.str(s)
    }

    pub fn opt_str(&mut self, s: Option<&String>) -> Arc<str> {
        self.strings.str(s.map_or("", String::as_str))
    }

    pub fn labels(&mut self, map: Option<&BTreeMap<String, String>>) -> Labels {
        match map {
            Some(m) if !m.is_empty() => self.strings.labels(m),
            // Interned too, so pods without labels still share one label set.
            _ => self.strings.intern_labels(Labels::default()),
        }
    }

    pub fn prune(&mut self) {
        self.strings.prune();
        self.specs.prune();
    }
}

pub fn key_of(meta: &metav1::ObjectMeta, p: &mut Projector) -> ObjectKey {
    ObjectKey {
        namespace: p.opt_str(meta.namespace.as_ref()),
        name: p.opt_str(meta.name.as_ref()),
    }
}

pub fn controller_of(meta: &metav1::ObjectMeta, p: &mut Projector) -> Option<OwnerRef> {
    let refs = meta.owner_references.as_ref()?;
    let owner = refs.iter().find(|r| r.controller == Some(true))?;
    Some(OwnerRef {
        kind: p.str(&owner.kind),
        name: p.str(&owner.name),
        uid: p.str(&owner.uid),
        group: api_group(&owner.api_version).map(|g| p.str(g)),
    })
}

/// The group of an `apiVersion` (`apps/v1` → `apps`, `v1` → the core group `""`), read as
/// apimachinery's `ParseGroupVersion` reads it: more than one `/` is not a group version.
pub fn api_group(api_version: &str) -> Option<&str> {
    match api_version.split_once('/') {
        None => Some(""),
        Some((group, version)) if !version.contains('/') => Some(group),
        Some(_) => None,
    }
}

pub fn timestamp(t: Option<&metav1::Time>) -> Option<jiff::Timestamp> {
    t.map(|t| t.0)
}

pub fn annotation<'a>(meta: &'a metav1::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// A resource list (`requests`, `capacity`, ...) as amounts, plus its `pods` entry if any.
pub fn resource_list(
    map: Option<&BTreeMap<String, K8sQuantity>>,
    path: &str,
) -> Result<(Resources, Option<i64>), FieldError> {
    let mut out = Resources::default();
    let mut pods = None;
    for (name, q) in map.into_iter().flatten() {
        let parsed = Quantity::parse_non_negative(&q.0)
            .map_err(|e| FieldError::new(format!("{path}.{name}"), e))?;
        match name.as_str() {
            CPU => out.cpu_milli = parsed.milli_ceil(),
            PODS => pods = Some(parsed.units_ceil()),
            other => out.set(other, parsed.units_ceil()),
        }
    }
    Ok((out, pods))
}

/// A taint list (node `spec.taints`, a machine template's `taints`).
pub fn taints(
    list: &[k8s_openapi::api::core::v1::Taint],
    path: &str,
    p: &mut Projector,
) -> Result<Vec<Taint>, FieldError> {
    list.iter()
        .enumerate()
        .map(|(i, t)| {
            let effect = TaintEffect::parse(&t.effect).ok_or_else(|| {
                FieldError::new(
                    format!("{path}[{i}].effect"),
                    format!("unknown effect {:?}", t.effect),
                )
            })?;
            Ok(Taint {
                key: p.str(&t.key),
                value: p.opt_str(t.value.as_ref()),
                effect,
            })
        })
        .collect()
}

pub fn label_selector(
    sel: &metav1::LabelSelector,
    path: &str,
    p: &mut Projector,
) -> Result<LabelSelector, FieldError> {
    let mut requirements = Vec::new();
    for (k, v) in sel.match_labels.iter().flatten() {
        requirements.push(LabelRequirement::In(p.str(k), Arc::from([p.str(v)])));
    }
    for (i, e) in sel.match_expressions.iter().flatten().enumerate() {
        let key = p.str(&e.key);
        let values: Arc<[Arc<str>]> = e.values.iter().flatten().map(|v| p.str(v)).collect();
        let at = || format!("{path}.matchExpressions[{i}]");
        let req = match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(FieldError::new(
                    at(),
                    format!("operator {} needs at least one value", e.operator),
                ));
            }
            "In" => LabelRequirement::In(key, values),
            "NotIn" => LabelRequirement::NotIn(key, values),
            "Exists" => LabelRequirement::Exists(key),
            "DoesNotExist" => LabelRequirement::DoesNotExist(key),
            other => {
                return Err(FieldError::new(
                    at(),
                    format!("unknown operator {other:?} (In, NotIn, Exists, DoesNotExist)"),
                ));
            }
        };
        requirements.push(req);
    }
    Ok(LabelSelector { requirements })
}

/// A Kubernetes namespace name: an RFC 1123 label.
pub fn is_dns_label(name: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    (1..=63).contains(&name.len())
        && name.chars().all(ok_char)
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_list_names_the_bad_field() {
        let mut m = BTreeMap::new();
        m.insert("cpu".to_string(), K8sQuantity("2".into()));
        m.insert("memory".to_string(), K8sQuantity("lots".into()));
        let err = resource_list(Some(&m), "status.allocatable").unwrap_err();
        assert_eq!(err.path, "status.allocatable.memory");
        m.insert("memory".to_string(), K8sQuantity("1Gi".into()));
        m.insert("pods".to_string(), K8sQuantity("110".into()));
        let (r, pods) = resource_list(Some(&m), "x").unwrap();
        assert_eq!((r.cpu_milli, r.memory, pods), (2000, 1 << 30, Some(110)));
    }

    #[test]
    fn api_groups_are_read_as_apimachinery_reads_them() {
        assert_eq!(api_group("apps/v1"), Some("apps"));
        assert_eq!(api_group("v1"), Some(""));
        assert_eq!(api_group(""), Some(""));
        assert_eq!(api_group("kruise.io/v1beta1"), Some("kruise.io"));
        assert_eq!(api_group("a/b/c"), None);
    }

    #[test]
    fn selector_rejects_unknown_operators() {
        let sel = metav1::LabelSelector {
            match_expressions: Some(vec![metav1::LabelSelectorRequirement {
                key: "app".into(),
                operator: "Like".into(),
                values: None,
            }]),
            match_labels: None,
        };
        let err = label_selector(&sel, "spec.selector", &mut Projector::default()).unwrap_err();
        assert_eq!(err.path, "spec.selector.matchExpressions[0]");
        assert!(err.message.contains("Like"));
    }
}
