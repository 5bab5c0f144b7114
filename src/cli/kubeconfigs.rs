//! `check-config` beyond the file: the kubeconfig files fleet.toml names can be read, and
//! each enabled cluster's context is in its kubeconfig. A mistake here would otherwise show
//! only at run time, as one cluster failing to connect over and over.

use std::collections::BTreeSet;

use crate::cluster::client::ClientError;
use crate::cluster::kubeconfig::load_context;
use crate::config::{ConfigIssue, FleetConfig};

/// Every kubeconfig problem, each under the key that names the file or the context. The
/// default kubeconfig (`KUBECONFIG`, `~/.kube/config`) is checked only when fleet.toml
/// relies on it for a cluster.
pub fn check(cfg: &FleetConfig) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let mut reported = BTreeSet::new();
    for (i, c) in cfg.clusters.iter().enumerate().filter(|(_, c)| c.enabled) {
        let key = match &c.kubeconfig {
            Some(_) => format!("clusters[{i}].kubeconfig"),
            None => "hub.kubeconfigs".to_string(),
        };
        match load_context(c.kubeconfig.as_deref(), &cfg.hub.kubeconfigs, c.context()) {
            Ok(_) => {}
            Err(e @ ClientError::UnknownContext { .. }) => issues.push(ConfigIssue {
                key: format!("clusters[{i}].context"),
                message: e.to_string(),
            }),
            // One unreadable hub kubeconfig is one problem, however many clusters use it.
            Err(e) => {
                if reported.insert(key.clone()) {
                    issues.push(ConfigIssue {
                        key,
                        message: unreadable(&e),
                    });
                }
            }
        }
    }
    issues
}

fn unreadable(e: &ClientError) -> String {
    format!("{e} (use --offline to check the file away from where the hub runs)")
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cluster::client::TEST_KUBECONFIG as KUBECONFIG;

    #[test]
    fn missing_files_and_contexts_are_named() {
        let dir = std::env::temp_dir().join(format!("fleetscaler-kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("kubeconfig");
        std::fs::write(&good, KUBECONFIG).unwrap();
        let text = format!(
            "[hub]\nkubeconfigs = [{good:?}]\n[[clusters]]\nname = \"east\"\n[[clusters]]\nname = \"west\"\n[[clusters]]\nname = \"lab\"\nkubeconfig = \"/no/such/file\"\n[[clusters]]\nname = \"off\"\nenabled = false\ncontext = \"nowhere\"\n"
        );
        let cfg = FleetConfig::parse(&text, "t.toml").unwrap();
        let issues = check(&cfg);
        let keys: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, ["clusters[1].context", "clusters[2].kubeconfig"]);
        assert!(
            issues[0].message.contains("context \"west\" is not in")
                && issues[0].message.contains("(its contexts: east)"),
            "{}",
            issues[0].message
        );
        assert!(
            issues[1].message.contains("/no/such/file"),
            "{}",
            issues[1].message
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
