//! API errors and their wire form, the Kubernetes `Status` object. Every failure a client
//! can cause ends here with the code and reason a real API server would use, so clients'
//! error handling (conflict retries, 410 re-lists, 429 eviction back-off) is exercised.

use serde_json::{Value, json};

/// A failed API request, as Kubernetes reports it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    pub code: u16,
    /// The `StatusReason`: `NotFound`, `Conflict`, `Invalid`, ...
    pub reason: &'static str,
    pub message: String,
    /// `details`: name, group and kind of the object concerned, if one is.
    pub details: Option<Box<Details>>,
    /// `details.causes`, e.g. the disruption budget that refused an eviction.
    pub causes: Vec<(String, String)>,
    /// Seconds a client should wait (`Retry-After`, `details.retryAfterSeconds`).
    pub retry_after: Option<u32>,
}

/// The object an error is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Details {
    pub name: String,
    pub group: String,
    pub kind: String,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            causes: Vec::new(),
            retry_after: None,
        }
    }

    fn about(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.details = Some(Box::new(Details {
            name: name.to_string(),
            group: group.to_string(),
            kind: kind.to_string(),
        }));
        self
    }

    /// `404 NotFound`: `<plural>[.group] "<name>" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, plural)),
        )
        .about(group, plural, name)
    }

    /// `409 AlreadyExists`.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, plural)),
        )
        .about(group, plural, name)
    }

    /// `409 Conflict` for a write whose resourceVersion (or other precondition) is stale.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, plural)
            ),
        )
        .about(group, plural, name)
    }

    /// The message Kubernetes gives for a stale resourceVersion.
    pub const STALE: &'static str = "the object has been modified; please apply your changes to the latest version and try again";

    /// `422 Invalid`: the object is well-formed JSON but not a valid object.
    pub fn invalid(kind: &str, name: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {message}"),
        )
        .about("", kind, name)
    }

    /// `400 BadRequest`: malformed body, selector or parameter.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// `405 MethodNotAllowed`.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// `415 UnsupportedMediaType` (an unknown patch type).
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got {content_type:?})"
            ),
        )
    }

    /// `403 Forbidden`, as RBAC's authorizer refuses `request` for `user`: `<resource> is
    /// forbidden: User "<user>" cannot <verb> resource "<resource>" in API group "<group>"
    /// at the cluster scope` (or `in the namespace "<ns>"`).
    pub fn forbidden(request: &super::audit::RequestRecord, user: &str) -> Self {
        let r = request;
        let resource = if r.subresource.is_empty() {
            r.resource.clone()
        } else {
            format!("{}/{}", r.resource, r.subresource)
        };
        let scope = if r.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace \"{}\"", r.namespace)
        };
        let named = if r.name.is_empty() {
            String::new()
        } else {
            format!(" \"{}\"", r.name)
        };
        Self::new(
            403,
            "Forbidden",
            format!(
                "{}{named} is forbidden: User \"{user}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
                qualified(&r.api_group, &r.resource),
                r.verb,
                r.api_group
            ),
        )
        .about(&r.api_group, &r.resource, &r.name)
    }

    /// `401 Unauthorized`.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// `403 Forbidden` with `message`, for an injected fault.
    pub fn forbidden_with(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// `410 Expired`: a watch or continue token older than the history the server keeps.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// `429 TooManyRequests`, with a hint when to retry (none for 0, as the API server does
    /// for an eviction a disruption budget refuses).
    pub fn too_many_requests(message: impl Into<String>, retry_after: u32) -> Self {
        let mut e = Self::new(429, "TooManyRequests", message);
        e.retry_after = (retry_after > 0).then_some(retry_after);
        e
    }

    /// A 500 without a reason: an error the API server's code returned as it was, not one
    /// of its typed errors (e.g. an eviction under two budgets).
    pub fn plain_500(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// `500 InternalError`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// Adds a `details.causes` entry.
    pub fn with_cause(mut self, reason: &str, message: impl Into<String>) -> Self {
        self.causes.push((reason.to_string(), message.into()));
        self
    }

    /// The `Status` object sent to the client.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut details = serde_json::Map::new();
        if let Some(d) = &self.details {
            details.insert("name".into(), json!(d.name));
            if !d.group.is_empty() {
                details.insert("group".into(), json!(d.group));
            }
            details.insert("kind".into(), json!(d.kind));
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|(reason, message)| json!({"reason": reason, "message": message}))
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(s) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(s));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

/// A successful `Status` (delete of a collection, eviction accepted).
pub fn success_status(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_reads_like_the_api_server() {
        let s = ApiError::not_found("machine.openshift.io", "machinesets", "w-a").to_status();
        assert_eq!(s["code"], 404);
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(
            s["message"],
            "machinesets.machine.openshift.io \"w-a\" not found"
        );
        assert_eq!(s["details"]["group"], "machine.openshift.io");
    }

    #[test]
    fn forbidden_reads_like_rbac() {
        let request = super::super::audit::attributes(
            &http::Method::GET,
            "/apis/storage.k8s.io/v1/storageclasses/gp3",
            "",
        );
        let e = ApiError::forbidden(&request, "sim-1");
        assert_eq!((e.code, e.reason), (403, "Forbidden"));
        assert_eq!(
            e.message,
            "storageclasses.storage.k8s.io \"gp3\" is forbidden: User \"sim-1\" cannot get \
             resource \"storageclasses\" in API group \"storage.k8s.io\" at the cluster scope"
        );
        let s = e.to_status();
        assert_eq!(s["details"]["kind"], "storageclasses");
        assert_eq!(s["details"]["group"], "storage.k8s.io");
    }

    #[test]
    fn causes_and_retry_are_in_details() {
        let s = ApiError::too_many_requests("no", 1)
            .with_cause("DisruptionBudget", "pdb web")
            .to_status();
        assert_eq!(s["details"]["causes"][0]["reason"], "DisruptionBudget");
        assert_eq!(s["details"]["retryAfterSeconds"], 1);
    }
}
