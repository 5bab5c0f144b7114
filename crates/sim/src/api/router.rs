//! Request paths to routes: discovery documents, and resource paths in their four shapes
//! (collection, object, subresource; cluster-wide or in a namespace) under `/api/v1` and
//! `/apis/<group>/<version>`.

use super::resources::Resource;

/// What a request path addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Version,
    Health,
    OpenApiIndex,
    OpenApi(String),
    CoreVersions,
    Groups,
    Group(String),
    ResourceList {
        group: String,
        version: String,
    },
    Collection {
        resource: Resource,
        namespace: Option<String>,
    },
    Object {
        resource: Resource,
        namespace: Option<String>,
        name: String,
    },
    Subresource {
        resource: Resource,
        namespace: Option<String>,
        name: String,
        sub: String,
    },
    /// A well-formed resource path naming nothing served.
    UnknownResource(String),
    NotFound,
}

/// Routes `path` (without the query string).
pub fn route(path: &str) -> Route {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        ["openapi", "v3"] => Route::OpenApiIndex,
        ["openapi", "v3", rest @ ..] => Route::OpenApi(rest.join("/")),
        ["healthz" | "readyz" | "livez"] => Route::Health,
        ["api"] => Route::CoreVersions,
        ["api", "v1"] => Route::ResourceList {
            group: String::new(),
            version: "v1".into(),
        },
        ["api", "v1", rest @ ..] => resource_route("", "v1", rest),
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group((*group).to_string()),
        ["apis", group, version] => Route::ResourceList {
            group: (*group).to_string(),
            version: (*version).to_string(),
        },
        ["apis", group, version, rest @ ..] => resource_route(group, version, rest),
        _ => Route::NotFound,
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Route {
    let find = |plural: &str| Resource::find(group, version, plural);
    let unknown = |plural: &str| Route::UnknownResource(plural.to_string());
    let ns = |s: &str| Some(s.to_string());
    match rest {
        // `namespaces/<ns>/<plural>...` unless `<plural>` is a subresource of the namespace.
        ["namespaces", namespace, plural, tail @ ..] if find(plural).is_some() => {
            let Some(resource) = find(plural) else {
                return unknown(plural);
            };
            match tail {
                [] => Route::Collection {
                    resource,
                    namespace: ns(namespace),
                },
                [name] => Route::Object {
                    resource,
                    namespace: ns(namespace),
                    name: (*name).to_string(),
                },
                [name, sub] => Route::Subresource {
                    resource,
                    namespace: ns(namespace),
                    name: (*name).to_string(),
                    sub: (*sub).to_string(),
                },
                _ => Route::NotFound,
            }
        }
        [plural, tail @ ..] => {
            let Some(resource) = find(plural) else {
                return unknown(plural);
            };
            match tail {
                [] => Route::Collection {
                    resource,
                    namespace: None,
                },
                [name] => Route::Object {
                    resource,
                    namespace: None,
                    name: (*name).to_string(),
                },
                [name, sub] => Route::Subresource {
                    resource,
                    namespace: None,
                    name: (*name).to_string(),
                    sub: (*sub).to_string(),
                },
                _ => Route::NotFound,
            }
        }
        [] => Route::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_paths() {
        assert_eq!(
            route("/api/v1/namespaces/a/pods"),
            Route::Collection {
                resource: Resource::Pods,
                namespace: Some("a".into())
            }
        );
        assert_eq!(
            route("/api/v1/namespaces/a/pods/p/eviction"),
            Route::Subresource {
                resource: Resource::Pods,
                namespace: Some("a".into()),
                name: "p".into(),
                sub: "eviction".into()
            }
        );
        assert_eq!(
            route("/api/v1/namespaces/a/status"),
            Route::Subresource {
                resource: Resource::Namespaces,
                namespace: None,
                name: "a".into(),
                sub: "status".into()
            }
        );
        assert_eq!(
            route("/api/v1/nodes"),
            Route::Collection {
                resource: Resource::Nodes,
                namespace: None
            }
        );
        assert_eq!(
            route(
                "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machinesets/w/scale"
            ),
            Route::Subresource {
                resource: Resource::OcpMachineSets,
                namespace: Some("openshift-machine-api".into()),
                name: "w".into(),
                sub: "scale".into()
            }
        );
        assert_eq!(
            route("/api/v1/widgets"),
            Route::UnknownResource("widgets".into())
        );
        assert_eq!(route("/apis/policy"), Route::Group("policy".into()));
        assert_eq!(route("/nope/x"), Route::NotFound);
    }
}
