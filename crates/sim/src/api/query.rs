//! The query parameters of list, watch, write and delete requests, parsed once and checked:
//! a malformed value is a `400 BadRequest`, never a silent default.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::status::ApiError;
use crate::store::Key;

/// Parsed query parameters.
#[derive(Clone, Debug, Default)]
pub struct Query {
    pub label_selector: String,
    pub field_selector: String,
    pub limit: Option<usize>,
    pub continue_after: Option<Key>,
    pub watch: bool,
    pub resource_version: Option<String>,
    pub allow_bookmarks: bool,
    pub timeout_seconds: Option<u64>,
    pub send_initial_events: bool,
    pub dry_run: bool,
    pub grace_period_seconds: Option<i64>,
    pub field_manager: Option<String>,
    pub force: bool,
    /// `fieldValidation=Strict`: unknown fields are refused, not dropped.
    pub strict: bool,
}

impl Query {
    /// Parses the raw query string (without `?`).
    pub fn parse(raw: &str) -> Result<Self, ApiError> {
        let mut q = Query::default();
        for (k, v) in form_urlencoded::parse(raw.as_bytes()) {
            match &*k {
                "labelSelector" => q.label_selector = v.into_owned(),
                "fieldSelector" => q.field_selector = v.into_owned(),
                "limit" => {
                    let n: i64 = number(&k, &v)?;
                    q.limit = (n > 0).then_some(n as usize);
                }
                "continue" if !v.is_empty() => q.continue_after = Some(decode_continue(&v)?),
                "watch" => q.watch = boolean(&k, &v)?,
                "resourceVersion" if !v.is_empty() => q.resource_version = Some(v.into_owned()),
                "allowWatchBookmarks" => q.allow_bookmarks = boolean(&k, &v)?,
                "timeoutSeconds" => q.timeout_seconds = Some(number(&k, &v)?),
                "sendInitialEvents" => q.send_initial_events = boolean(&k, &v)?,
                "dryRun" => q.dry_run = v == "All",
                "gracePeriodSeconds" => q.grace_period_seconds = Some(number(&k, &v)?),
                "fieldManager" => q.field_manager = Some(v.into_owned()),
                "force" => q.force = boolean(&k, &v)?,
                "fieldValidation" => q.strict = v == "Strict",
                // Accepted and without effect here: output shaping and validation knobs.
                _ => {}
            }
        }
        Ok(q)
    }

    /// The resourceVersion as a number; absent or `"0"` is `None` ("any, from now").
    pub fn resource_version_number(&self) -> Result<Option<u64>, ApiError> {
        match self.resource_version.as_deref() {
            None | Some("0") => Ok(None),
            Some(s) => s
                .parse()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}"))),
        }
    }
}

fn number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, ApiError> {
    value
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid value for {key}: {value:?}")))
}

fn boolean(key: &str, value: &str) -> Result<bool, ApiError> {
    match value {
        "" | "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(ApiError::bad_request(format!(
            "invalid value for {key}: {value:?}"
        ))),
    }
}

/// The opaque `continue` token for a page that ended at `key`.
pub fn encode_continue(key: &Key) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}\u{0}{}", key.namespace, key.name))
}

fn decode_continue(token: &str) -> Result<Key, ApiError> {
    let invalid = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let (ns, name) = text.split_once('\u{0}').ok_or_else(invalid)?;
    Ok(Key::new(ns, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_list_and_watch_parameters() {
        let q = Query::parse(
            "labelSelector=app%3Dweb&limit=50&watch=1&resourceVersion=12&allowWatchBookmarks=true",
        )
        .unwrap();
        assert_eq!(q.label_selector, "app=web");
        assert_eq!(q.limit, Some(50));
        assert!(q.watch && q.allow_bookmarks);
        assert_eq!(q.resource_version_number().unwrap(), Some(12));
    }

    #[test]
    fn bad_values_are_bad_requests() {
        assert_eq!(Query::parse("limit=ten").unwrap_err().code, 400);
        assert_eq!(Query::parse("watch=maybe").unwrap_err().code, 400);
        assert_eq!(Query::parse("continue=%%%").unwrap_err().code, 400);
        let q = Query::parse("resourceVersion=abc").unwrap();
        assert_eq!(q.resource_version_number().unwrap_err().code, 400);
    }

    #[test]
    fn continue_tokens_round_trip() {
        let key = Key::new("ns", "pod-1");
        let q = Query::parse(&format!("continue={}", encode_continue(&key))).unwrap();
        assert_eq!(q.continue_after, Some(key));
    }
}
