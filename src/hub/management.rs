//! The management cluster: where the hub runs, holding its Leases (leader election,
//! sharding), its inventory of clusters (membership) and the reviews of its API's callers'
//! tokens. One way to reach it for all of them, so that the server too reaches it through
//! the hub and never builds cluster clients itself.

use std::path::PathBuf;
use std::time::Duration;

use crate::cluster::client;
pub use crate::cluster::client::ClientError;

/// A client of the management cluster: `context` of the hub's kubeconfigs when given, else
/// the in-cluster service account. `setting` is the fleet.toml key that names the context,
/// told when there is neither.
pub async fn client(
    kubeconfigs: &[PathBuf],
    context: Option<&str>,
    timeout: Duration,
    setting: &'static str,
) -> Result<kube::Client, ClientError> {
    match context {
        Some(context) => {
            let kubeconfig = crate::cluster::kubeconfig::load_context(None, kubeconfigs, context)?;
            client::connect(kubeconfig, context, timeout).await
        }
        None => {
            let incluster = kube::Config::incluster().map_err(|e| ClientError::InCluster {
                setting,
                message: e.to_string(),
            })?;
            client::from_config(incluster, "in-cluster", timeout)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outside a pod (as tests run) and with no context, the error names the setting to set.
    #[tokio::test]
    async fn without_a_context_outside_a_pod_the_setting_is_named() {
        let err = client(&[], None, Duration::from_secs(1), "hub.sharding.context")
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.starts_with("no in-cluster configuration (")
                && err.ends_with("; set hub.sharding.context"),
            "{err}"
        );
    }
}
