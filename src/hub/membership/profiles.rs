//! A SIG-Multicluster ClusterProfile (`multicluster.x-k8s.io/v1alpha1`) as a cluster: its
//! `status.accessProviders[]` (or the older `credentialProviders[]`) give, per access
//! provider, the cluster's server and CA (`cluster`, a kubeconfig's cluster entry); the hub
//! brings the credential plugin of the first provider it has one for, as the ClusterProfile
//! credentials KEP (5339) has consumers do.

use kube::api::DynamicObject;
use serde::Deserialize;

use super::annotations::{self, AnnotationError};
use super::kubeconfig::{self, Credential, EXEC_EXTENSION, Endpoint, KubeconfigError, NotBase64};
use crate::config::ClusterConfig;
use crate::config::membership::{ClusterProfilesSource, Discovered};

pub(super) const GROUP: &str = "multicluster.x-k8s.io";
pub(super) const VERSION: &str = "v1alpha1";
pub(super) const KIND: &str = "ClusterProfile";
pub(super) const PLURAL: &str = "clusterprofiles";

/// Providers looked at per profile: a status with more is cut here.
const MAX_PROVIDERS: usize = 32;

/// Why a ClusterProfile gives no cluster.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("status.{}: {}", .0.path(), .0.inner())]
    Status(#[source] serde_path_to_error::Error<serde_json::Error>),
    #[error("has no status.accessProviders yet")]
    NoProviders,
    #[error(
        "none of its access providers ({}) has a plugin in membership.cluster_profiles.providers",
        .0.join(", ")
    )]
    NoPlugin(Vec<String>),
    #[error(transparent)]
    NotBase64(#[from] NotBase64),
    /// The kubeconfig built from the access provider of this name.
    #[error("status.accessProviders[{provider}].cluster: {source}")]
    Kubeconfig {
        provider: String,
        #[source]
        source: KubeconfigError,
    },
    #[error(transparent)]
    Annotation(#[from] AnnotationError),
}

/// `ClusterProfile <namespace>/<name>`.
pub(super) fn object(profile: &DynamicObject) -> String {
    let ns = profile.metadata.namespace.as_deref().unwrap_or_default();
    let name = profile.metadata.name.as_deref().unwrap_or_default();
    format!("{KIND} {ns}/{name}")
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Status {
    access_providers: Vec<AccessProvider>,
    /// The field's name before v0.1 of the API; still written by older cluster managers.
    credential_providers: Vec<AccessProvider>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct AccessProvider {
    name: String,
    cluster: ProviderCluster,
}

/// client-go's `clientcmd/api/v1.Cluster`, as the CRD has it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
struct ProviderCluster {
    server: String,
    certificate_authority_data: Option<String>,
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
    extensions: Vec<NamedExtension>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NamedExtension {
    name: String,
    extension: serde_json::Value,
}

/// The cluster `profile` describes, reached through a provider of `source`.
pub(super) fn read(
    profile: &DynamicObject,
    source: &ClusterProfilesSource,
) -> Result<ClusterConfig, ProfileError> {
    let name = profile.metadata.name.clone().unwrap_or_default();
    let status = match profile.data.get("status") {
        Some(s) => {
            serde_path_to_error::deserialize::<_, Status>(s).map_err(ProfileError::Status)?
        }
        None => Status::default(),
    };
    let providers: Vec<&AccessProvider> = status
        .access_providers
        .iter()
        .chain(&status.credential_providers)
        .take(MAX_PROVIDERS)
        .collect();
    if providers.is_empty() {
        return Err(ProfileError::NoProviders);
    }
    let Some((provider, plugin)) = providers
        .iter()
        .find_map(|p| source.providers.get(&p.name).map(|plugin| (*p, plugin)))
    else {
        let names = providers.iter().map(|p| p.name.clone()).collect();
        return Err(ProfileError::NoPlugin(names));
    };
    let cluster = &provider.cluster;
    let ca = match cluster.certificate_authority_data.as_deref() {
        Some(data) if !data.is_empty() => Some(kubeconfig::decode_base64(
            data,
            format!(
                "status.accessProviders[{}].cluster.certificate-authority-data",
                provider.name
            ),
        )?),
        _ => None,
    };
    let endpoint = Endpoint {
        server: cluster.server.clone(),
        ca,
        insecure: cluster.insecure_skip_tls_verify,
        tls_server_name: cluster.tls_server_name.clone().filter(|s| !s.is_empty()),
        proxy_url: cluster.proxy_url.clone().filter(|s| !s.is_empty()),
        exec_extension: cluster
            .extensions
            .iter()
            .find(|e| e.name == EXEC_EXTENSION)
            .map(|e| e.extension.clone()),
    };
    let credential = Credential {
        exec: Some(kubeconfig::exec_of(plugin)),
        ..Credential::default()
    };
    let kubeconfig = kubeconfig::build(&name, endpoint, credential).map_err(|source| {
        ProfileError::Kubeconfig {
            provider: provider.name.clone(),
            source,
        }
    })?;
    let found = Discovered {
        source: object(profile),
        kubeconfig,
    };
    Ok(annotations::cluster(
        &name,
        profile.metadata.annotations.as_ref(),
        found,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::membership::ExecPlugin;
    use crate::hub::membership::kubeconfig::parse;
    use serde_json::json;

    fn profile(status: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": {"name": "east", "namespace": "fleet",
                "annotations": {"fleetscaler.io/overrides": "max_nodes_total = 4"}},
            "spec": {"clusterManager": {"name": "test"}},
            "status": status,
        }))
        .unwrap()
    }

    fn source() -> ClusterProfilesSource {
        ClusterProfilesSource {
            enabled: true,
            providers: [(
                "ocm".to_string(),
                ExecPlugin {
                    command: "/bin/cp-creds".into(),
                    ..ExecPlugin::default()
                },
            )]
            .into(),
        }
    }

    fn provider(name: &str, server: &str) -> serde_json::Value {
        json!({"name": name, "cluster": {"server": server, "certificate-authority-data": "UEVN",
            "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"clusterName": "east"}}]}})
    }

    #[test]
    fn the_first_provider_the_hub_has_a_plugin_for_is_used() {
        let p = profile(json!({"accessProviders": [
            provider("other", "https://wrong:6443"), provider("ocm", "https://api.east:6443")]}));
        let c = read(&p, &source()).unwrap();
        assert_eq!(c.name, "east");
        assert_eq!(c.source(), "ClusterProfile fleet/east");
        assert_eq!(c.overrides.max_nodes_total, Some(4));
        let k = parse(&c.discovered.unwrap().kubeconfig);
        let cluster = k.clusters[0].cluster.clone().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://api.east:6443"));
        assert_eq!(
            cluster.extensions.unwrap()[0].extension["clusterName"],
            "east"
        );
        let exec = k.auth_infos[0].auth_info.clone().unwrap().exec.unwrap();
        assert_eq!(exec.command.as_deref(), Some("/bin/cp-creds"));
        let old =
            profile(json!({"credentialProviders": [provider("ocm", "https://api.east:6443")]}));
        assert!(read(&old, &source()).is_ok(), "the older field is read too");
    }

    #[test]
    fn each_malformed_profile_is_named() {
        for (status, want) in [
            (json!({}), "no status.accessProviders yet"),
            (
                json!({"accessProviders": [provider("other", "https://a")]}),
                "(other) has a plugin",
            ),
            (
                json!({"accessProviders": [provider("ocm", "api.east")]}),
                "status.accessProviders[ocm].cluster: server",
            ),
            (json!({"accessProviders": "x"}), "status.accessProviders"),
            (
                json!({"accessProviders": [{"name": "ocm", "cluster": {"server": "https://a", "certificate-authority-data": "%"}}]}),
                "certificate-authority-data is not base64",
            ),
        ] {
            let err = read(&profile(status.clone()), &source())
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{status}: {err}");
        }
    }
}
