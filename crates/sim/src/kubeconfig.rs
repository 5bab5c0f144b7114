//! The kubeconfig of a simulated fleet: one cluster, user and context per simulated cluster
//! (`sim-1`, `sim-2`, ...), each with the cluster's CA and bearer token, as a real fleet's
//! kubeconfig would hold them.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;

use crate::error::SimError;

/// What the kubeconfig needs of one cluster.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    pub server: String,
    pub ca_pem: String,
    pub token: String,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig<'a> {
    api_version: &'static str,
    kind: &'static str,
    clusters: Vec<Named<ClusterEntry>>,
    users: Vec<Named<UserEntry<'a>>>,
    contexts: Vec<Named<ContextEntry<'a>>>,
    current_context: &'a str,
}

#[derive(Serialize)]
struct Named<T> {
    name: String,
    #[serde(flatten)]
    value: T,
}

#[derive(Serialize)]
struct ClusterEntry {
    cluster: ClusterFields,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct ClusterFields {
    server: String,
    certificate_authority_data: String,
}

#[derive(Serialize)]
struct UserEntry<'a> {
    user: UserFields<'a>,
}

#[derive(Serialize)]
struct UserFields<'a> {
    token: &'a str,
}

#[derive(Serialize)]
struct ContextEntry<'a> {
    context: ContextFields<'a>,
}

#[derive(Serialize)]
struct ContextFields<'a> {
    cluster: &'a str,
    user: &'a str,
    namespace: &'static str,
}

/// The kubeconfig YAML for `entries`; the first is the current context.
pub fn render(entries: &[Entry]) -> Result<String, SimError> {
    let config = Kubeconfig {
        api_version: "v1",
        kind: "Config",
        clusters: entries
            .iter()
            .map(|e| Named {
                name: e.name.clone(),
                value: ClusterEntry {
                    cluster: ClusterFields {
                        server: e.server.clone(),
                        certificate_authority_data: STANDARD.encode(&e.ca_pem),
                    },
                },
            })
            .collect(),
        users: entries
            .iter()
            .map(|e| Named {
                name: e.name.clone(),
                value: UserEntry {
                    user: UserFields { token: &e.token },
                },
            })
            .collect(),
        contexts: entries
            .iter()
            .map(|e| Named {
                name: e.name.clone(),
                value: ContextEntry {
                    context: ContextFields {
                        cluster: &e.name,
                        user: &e.name,
                        namespace: "default",
                    },
                },
            })
            .collect(),
        current_context: entries.first().map_or("", |e| e.name.as_str()),
    };
    serde_saphyr::to_string(&config).map_err(|e| SimError::Kubeconfig(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_reads_what_we_write() {
        let entries = vec![
            Entry {
                name: "sim-1".into(),
                server: "https://127.0.0.1:1".into(),
                ca_pem: "PEM".into(),
                token: "t1".into(),
            },
            Entry {
                name: "sim-2".into(),
                server: "https://127.0.0.1:2".into(),
                ca_pem: "PEM".into(),
                token: "t2".into(),
            },
        ];
        let yaml = render(&entries).unwrap();
        let parsed = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        assert_eq!(parsed.current_context.as_deref(), Some("sim-1"));
        assert_eq!(parsed.contexts.len(), 2);
        let user = parsed.auth_infos[1].auth_info.as_ref().unwrap();
        assert!(user.token.is_some());
        let cluster = parsed.clusters[1].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:2"));
    }
}
