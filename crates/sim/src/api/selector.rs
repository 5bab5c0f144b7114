//! Label and field selectors in their query-string syntax (`app=web,tier!=db`,
//! `env in (a,b)`, `!legacy`, `spec.nodeName=node-1`). Parsing refuses what the API server
//! refuses, with a `400 BadRequest`, so a client's malformed selector fails loudly here too.

use std::collections::BTreeMap;

use super::resources::Resource;
use super::status::ApiError;
use crate::store::Stored;

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; empty matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses the `labelSelector` query syntax.
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "unable to parse requirement: found {part:?} in label selector {text:?}"
                ))
            })?);
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether the selector has no requirement.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

/// Splits on commas outside parentheses (`a in (x,y),b` is two requirements).
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn parse_requirement(part: &str) -> Option<Requirement> {
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        return valid_key(key).then(|| Requirement::DoesNotExist(key.to_string()));
    }
    for (op, is_in) in [(" notin ", false), (" in ", true)] {
        if let Some(i) = part.find(op) {
            let key = part[..i].trim();
            let rest = part[i + op.len()..].trim();
            let inner = rest.strip_prefix('(')?.strip_suffix(')')?;
            let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
            if !valid_key(key) || !values.iter().all(|v| valid_value(v)) {
                return None;
            }
            return Some(if is_in {
                Requirement::In(key.into(), values)
            } else {
                Requirement::NotIn(key.into(), values)
            });
        }
    }
    let (key, value, negate) = if let Some((k, v)) = part.split_once("!=") {
        (k, v, true)
    } else if let Some((k, v)) = part.split_once("==") {
        (k, v, false)
    } else if let Some((k, v)) = part.split_once('=') {
        (k, v, false)
    } else {
        let key = part.trim();
        return valid_key(key).then(|| Requirement::Exists(key.to_string()));
    };
    let (key, value) = (key.trim(), value.trim());
    if !valid_key(key) || !valid_value(value) {
        return None;
    }
    Some(if negate {
        Requirement::NotEquals(key.into(), value.into())
    } else {
        Requirement::Equals(key.into(), value.into())
    })
}

/// A parsed field selector: `path=value` / `path!=value` terms, all of which must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<(String, String, bool)>,
}

impl FieldSelector {
    /// Parses a field selector for `resource`; unsupported paths are refused as the API
    /// server refuses them (`field label not supported`).
    pub fn parse(text: &str, resource: Resource) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (path, value, negate) = if let Some((p, v)) = part.split_once("!=") {
                (p, v, true)
            } else if let Some((p, v)) = part.split_once("==") {
                (p, v, false)
            } else if let Some((p, v)) = part.split_once('=') {
                (p, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {part:?}"
                )));
            };
            let path = path.trim();
            let supported = matches!(path, "metadata.name" | "metadata.namespace")
                || resource.def().fields.contains(&path);
            if !supported {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {path}"
                )));
            }
            terms.push((path.to_string(), value.trim().to_string(), negate));
        }
        Ok(FieldSelector { terms })
    }

    /// Whether the selector has no terms (every object matches).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether `object` satisfies every term.
    pub fn matches(&self, resource: Resource, object: &Stored) -> bool {
        self.terms.iter().all(|(path, value, negate)| {
            let actual = object.field(resource, path).unwrap_or_default();
            (actual == value) != *negate
        })
    }

    /// The value an equality term requires for `path`, if there is one.
    pub fn required(&self, path: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|(p, _, negate)| p == path && !negate)
            .map(|(_, v, _)| v.as_str())
    }
}

/// Reads only `metadata.labels` of a serialized object; a label selector needs nothing else.
pub fn labels_of(bytes: &[u8]) -> BTreeMap<String, String> {
    #[derive(serde::Deserialize)]
    struct Obj {
        #[serde(default)]
        metadata: Meta,
    }
    #[derive(serde::Deserialize, Default)]
    struct Meta {
        #[serde(default)]
        labels: Option<BTreeMap<String, String>>,
    }
    serde_json::from_slice::<Obj>(bytes)
        .ok()
        .and_then(|o| o.metadata.labels)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selector_operators() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let ok = |s: &str| LabelSelector::parse(s).unwrap().matches(&l);
        assert!(ok("app=web"));
        assert!(ok("app==web,tier!=db"));
        assert!(ok("tier in (front, back)"));
        assert!(!ok("tier notin (front)"));
        assert!(ok("app,!legacy"));
        assert!(!ok("legacy"));
        assert!(ok(""));
    }

    #[test]
    fn malformed_label_selectors_are_bad_requests() {
        for s in ["app=(", "a in b", "=x", "app=we b", "!"] {
            let e = LabelSelector::parse(s).unwrap_err();
            assert_eq!(e.code, 400, "{s}");
        }
    }

    #[test]
    fn unsupported_field_is_refused() {
        let e = FieldSelector::parse("spec.foo=bar", Resource::Pods).unwrap_err();
        assert_eq!(e.message, "field label not supported: spec.foo");
        let f =
            FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed", Resource::Pods).unwrap();
        assert_eq!(f.required("spec.nodeName"), Some("n1"));
    }

    #[test]
    fn labels_are_read_without_the_rest() {
        let l = labels_of(br#"{"metadata":{"labels":{"a":"b"}},"spec":{"x":[1,2]}}"#);
        assert_eq!(l.get("a").map(String::as_str), Some("b"));
        assert!(labels_of(b"not json").is_empty());
    }
}
