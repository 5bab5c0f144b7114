//! A small Kubernetes RBAC authorizer for tests: loads Roles, ClusterRoles and their bindings
//! from YAML, and says whether a recorded request is allowed for one ServiceAccount, and which
//! of the granted permissions no request used.
//!
//! It follows the RBAC authorizer's rules: a ClusterRoleBinding grants its ClusterRole's rules
//! everywhere; a RoleBinding grants its role's rules in its namespace only (never for
//! cluster-scoped requests or non-resource URLs); a rule matches when its verbs, API groups,
//! resources (`resource` or `resource/subresource`, `*` allowed) and, if it names any,
//! resource names all match. Non-resource URLs match exactly or by a trailing `*`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use fleetscaler::sim::api::audit::RequestRecord;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use serde_json::Value;

/// A ServiceAccount, as bindings name it.
#[derive(Clone, Debug)]
pub struct Account {
    pub namespace: String,
    pub name: String,
}

/// The rules granted to one account, each with where it applies.
#[derive(Debug, Default)]
pub struct Grants {
    /// (namespace the rule is limited to, or `None` for everywhere; the rule).
    pub rules: Vec<(Option<String>, PolicyRule)>,
}

/// The RBAC objects of a YAML stream (other kinds are skipped).
#[derive(Debug, Default)]
pub struct Policy {
    pub roles: Vec<Role>,
    pub cluster_roles: Vec<ClusterRole>,
    pub role_bindings: Vec<RoleBinding>,
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
}

impl Policy {
    /// Parses the documents of `yaml`, each into its k8s-openapi type (unknown fields refused).
    pub fn from_yaml(yaml: &str, origin: &str) -> Policy {
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(yaml).unwrap_or_else(|e| panic!("{origin}: not YAML: {e}"));
        let mut policy = Policy::default();
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            policy.add(doc, origin);
        }
        policy
    }

    pub fn add(&mut self, doc: Value, origin: &str) {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        match kind.as_str() {
            "Role" => self.roles.push(typed(doc, origin)),
            "ClusterRole" => self.cluster_roles.push(typed(doc, origin)),
            "RoleBinding" => self.role_bindings.push(typed(doc, origin)),
            "ClusterRoleBinding" => self.cluster_role_bindings.push(typed(doc, origin)),
            // Not rules, but checked all the same.
            "Namespace" => {
                let _: k8s_openapi::api::core::v1::Namespace = typed(doc, origin);
            }
            "ServiceAccount" => {
                let _: k8s_openapi::api::core::v1::ServiceAccount = typed(doc, origin);
            }
            "Secret" => {
                let _: k8s_openapi::api::core::v1::Secret = typed(doc, origin);
            }
            _ => {}
        }
    }

    /// Everything bound to `account`. Panics on a binding to a role that is not there.
    pub fn grants(&self, account: &Account) -> Grants {
        let mut grants = Grants::default();
        for b in &self.cluster_role_bindings {
            if binds(b.subjects.as_deref(), account) {
                let role = self.cluster_role(&b.role_ref.name);
                for r in role {
                    grants.rules.push((None, r));
                }
            }
        }
        for b in &self.role_bindings {
            if !binds(b.subjects.as_deref(), account) {
                continue;
            }
            let ns = b
                .metadata
                .namespace
                .clone()
                .expect("a RoleBinding's namespace");
            let rules = match b.role_ref.kind.as_str() {
                "ClusterRole" => self.cluster_role(&b.role_ref.name),
                "Role" => {
                    let role = self
                        .roles
                        .iter()
                        .find(|r| {
                            r.metadata.name.as_deref() == Some(&b.role_ref.name)
                                && r.metadata.namespace.as_deref() == Some(&ns)
                        })
                        .unwrap_or_else(|| {
                            panic!(
                                "RoleBinding {ns}/{:?} names a missing Role",
                                b.metadata.name
                            )
                        });
                    role.rules.clone().unwrap_or_default()
                }
                other => panic!("roleRef kind {other}"),
            };
            for r in rules {
                grants.rules.push((Some(ns.clone()), r));
            }
        }
        grants
    }

    fn cluster_role(&self, name: &str) -> Vec<PolicyRule> {
        self.cluster_roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("a binding names the missing ClusterRole {name}"))
            .rules
            .clone()
            .unwrap_or_default()
    }
}

/// Parses `doc` into its k8s-openapi type, refusing fields the type does not know: such a
/// field is silently dropped by the type, and in RBAC a dropped `resourceNames` (say, as
/// `resourceName`) would widen a rule.
fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(doc: Value, origin: &str) -> T {
    let name = doc["metadata"]["name"].as_str().unwrap_or("?").to_string();
    let kind = doc["kind"].as_str().unwrap_or("?").to_string();
    let value: T = serde_path_to_error::deserialize(doc.clone())
        .unwrap_or_else(|e| panic!("{origin}: {kind} {name}: {} at {}", e.inner(), e.path()));
    let mut lost = Vec::new();
    lost_fields(&doc, &serde_json::to_value(&value).unwrap(), "", &mut lost);
    assert!(
        lost.is_empty(),
        "{origin}: {kind} {name}: unknown fields {lost:?}"
    );
    value
}

/// Every field of `original` must survive a trip through its k8s-openapi type: one the type
/// does not know (a typo, a field at the wrong level) is dropped, and named in `lost`.
pub fn lost_fields(original: &Value, round: &Value, path: &str, lost: &mut Vec<String>) {
    match (original, round) {
        (Value::Null, _) => {}
        (Value::Object(o), Value::Object(r)) => {
            for (k, v) in o {
                match r.get(k) {
                    Some(rv) => lost_fields(v, rv, &format!("{path}.{k}"), lost),
                    None if v.is_null() => {}
                    None => lost.push(format!("{path}.{k}")),
                }
            }
        }
        (Value::Array(o), Value::Array(r)) if o.len() == r.len() => {
            for (i, (ov, rv)) in o.iter().zip(r).enumerate() {
                lost_fields(ov, rv, &format!("{path}[{i}]"), lost);
            }
        }
        (o, r) if o == r => {}
        (o, r) => lost.push(format!("{path}: {o} became {r}")),
    }
}

fn binds(subjects: Option<&[k8s_openapi::api::rbac::v1::Subject]>, account: &Account) -> bool {
    subjects.into_iter().flatten().any(|s| {
        s.kind == "ServiceAccount"
            && s.name == account.name
            && s.namespace.as_deref() == Some(account.namespace.as_str())
    })
}

fn has(list: Option<&Vec<String>>, want: &str) -> bool {
    list.into_iter().flatten().any(|v| v == "*" || v == want)
}

fn resource_matches(rule: &PolicyRule, r: &RequestRecord) -> bool {
    let full = if r.subresource.is_empty() {
        r.resource.clone()
    } else {
        format!("{}/{}", r.resource, r.subresource)
    };
    rule.resources.iter().flatten().any(|res| {
        res == "*"
            || *res == full
            || (!r.subresource.is_empty() && *res == format!("*/{}", r.subresource))
    })
}

fn url_matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => pattern == path,
    }
}

/// Whether `rule` (limited to `scope`, if any) allows `r`.
pub fn allows(scope: Option<&str>, rule: &PolicyRule, r: &RequestRecord) -> bool {
    if !has(Some(&rule.verbs), &r.verb) {
        return false;
    }
    if !r.is_resource() {
        return scope.is_none()
            && rule
                .non_resource_urls
                .iter()
                .flatten()
                .any(|u| url_matches(u, &r.path));
    }
    if let Some(ns) = scope
        && ns != r.namespace
    {
        return false;
    }
    let names = rule.resource_names.as_deref().unwrap_or_default();
    has(rule.api_groups.as_ref(), &r.api_group)
        && resource_matches(rule, r)
        && (names.is_empty() || names.contains(&r.name))
}

impl Grants {
    pub fn allows(&self, r: &RequestRecord) -> bool {
        self.rules
            .iter()
            .any(|(scope, rule)| allows(scope.as_deref(), rule, r))
    }

    /// The requests of `used` these rules refuse, named.
    pub fn denied(&self, used: &[RequestRecord]) -> Vec<String> {
        used.iter()
            .filter(|r| !self.allows(r))
            .map(|r| r.to_string())
            .collect()
    }

    /// The permissions the rules grant that no request of `used` exercises, named.
    pub fn unused(&self, used: &[RequestRecord]) -> Vec<String> {
        self.permissions(used)
            .into_iter()
            .filter(|(_, hit)| !hit)
            .map(|(name, _)| name)
            .collect()
    }

    /// The rules allow every request of `used`, and grant nothing it does not exercise.
    pub fn assert_exactly(&self, used: &[RequestRecord], rules: &str) {
        let denied = self.denied(used);
        assert!(denied.is_empty(), "{rules} deny: {denied:?}");
        let unused = self.unused(used);
        assert!(
            unused.is_empty(),
            "{rules} grant what the hub never used: {unused:?}"
        );
    }

    /// Each single permission the rules grant, named as `verb group/resource[ named x][ in
    /// ns]` or `verb <url>`, with whether one of `used` exercises it.
    pub fn permissions(&self, used: &[RequestRecord]) -> Vec<(String, bool)> {
        let mut out = BTreeSet::new();
        for (scope, rule) in &self.rules {
            for verb in &rule.verbs {
                for url in rule.non_resource_urls.iter().flatten() {
                    let hit = used
                        .iter()
                        .any(|r| !r.is_resource() && r.verb == *verb && url_matches(url, &r.path));
                    out.insert((format!("{verb} {url}"), hit));
                }
                for group in rule.api_groups.iter().flatten() {
                    for res in rule.resources.iter().flatten() {
                        let one = PolicyRule {
                            api_groups: Some(vec![group.clone()]),
                            resources: Some(vec![res.clone()]),
                            verbs: vec![verb.clone()],
                            resource_names: rule.resource_names.clone(),
                            non_resource_urls: None,
                        };
                        let hit = used
                            .iter()
                            .any(|r| r.is_resource() && allows(scope.as_deref(), &one, r));
                        out.insert((permission_name(scope, group, res, verb, rule), hit));
                    }
                }
            }
        }
        out.into_iter().collect()
    }
}

fn permission_name(
    scope: &Option<String>,
    group: &str,
    res: &str,
    verb: &str,
    rule: &PolicyRule,
) -> String {
    let group = if group.is_empty() { "core" } else { group };
    let mut name = format!("{verb} {group}/{res}");
    if let Some(names) = &rule.resource_names {
        name.push_str(&format!(" named {}", names.join("|")));
    }
    if let Some(ns) = scope {
        name.push_str(&format!(" in {ns}"));
    }
    name
}

/// The matcher's own checks, run by every test binary that includes this module.
pub fn self_check() {
    let yaml = r#"
kind: ClusterRole
apiVersion: rbac.authorization.k8s.io/v1
metadata: {name: c}
rules:
- {apiGroups: [""], resources: [pods/eviction], verbs: [create]}
- {apiGroups: [""], resources: [configmaps], resourceNames: [x], verbs: [list]}
- {nonResourceURLs: ["/apis/*"], verbs: [get]}
---
kind: ClusterRoleBinding
apiVersion: rbac.authorization.k8s.io/v1
metadata: {name: c}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: c}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]
---
kind: Role
apiVersion: rbac.authorization.k8s.io/v1
metadata: {name: r, namespace: status}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [create]}
---
kind: RoleBinding
apiVersion: rbac.authorization.k8s.io/v1
metadata: {name: r, namespace: status}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]
"#;
    let policy = Policy::from_yaml(yaml, "self-check");
    let sa = Account {
        namespace: "ns".into(),
        name: "sa".into(),
    };
    let g = policy.grants(&sa);
    let req = |verb: &str, resource: &str, sub: &str, ns: &str, name: &str| RequestRecord {
        verb: verb.into(),
        api_group: String::new(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
        path: String::new(),
    };
    assert!(g.allows(&req("create", "pods", "eviction", "a", "p")));
    assert!(
        !g.allows(&req("create", "pods", "", "a", "p")),
        "not the pod itself"
    );
    assert!(g.allows(&req("list", "configmaps", "", "", "x")));
    assert!(
        !g.allows(&req("list", "configmaps", "", "", "")),
        "a name is required"
    );
    assert!(g.allows(&req("create", "configmaps", "", "status", "")));
    assert!(
        !g.allows(&req("create", "configmaps", "", "other", "")),
        "the Role's namespace only"
    );
    let discovery = |path: &str| RequestRecord {
        verb: "get".into(),
        path: path.into(),
        ..req("", "", "", "", "")
    };
    assert!(g.allows(&discovery("/apis/policy/v1")));
    assert!(!g.allows(&discovery("/api/v1")));
    let other = Account {
        namespace: "ns".into(),
        name: "someone-else".into(),
    };
    assert!(
        !policy
            .grants(&other)
            .allows(&req("create", "pods", "eviction", "a", "p"))
    );
}
