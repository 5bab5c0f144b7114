//! Where the priority expander's configuration comes from: fleet.toml's `priorities`, else
//! the `cluster-autoscaler-priority-expander` ConfigMap of one namespace per cluster, the
//! one upstream's autoscaler runs in. A copy in any other namespace is ignored with a
//! warning: a tenant who can write ConfigMaps in their own namespace must not steer which
//! instances the cluster buys.

use std::sync::Arc;

use fleetscaler_model::snapshot::PRIORITY_EXPANDER_CONFIGMAP;
use fleetscaler_model::{ClusterSnapshot, MachineApiGroup, Warning, WarningCode};

use super::Priorities;
use crate::settings::{self, Settings};
use crate::state::EngineState;

/// The priority expander's configuration: from the settings (fleet.toml), else from the
/// cluster's `cluster-autoscaler-priority-expander` ConfigMap in the autoscaler's namespace;
/// compiled once per change (`state` keeps it).
pub(crate) fn configured(
    snapshot: &ClusterSnapshot,
    settings: &Settings,
    state: &mut EngineState,
    warnings: &mut Vec<Warning>,
) -> Option<Arc<Priorities>> {
    if !settings
        .expanders
        .contains(&settings::ExpanderKind::Priority)
    {
        return None;
    }
    let cache = &mut state.priority_cache;
    if let Some(map) = &settings.priorities {
        return cache.from_settings(map, warnings);
    }
    let namespace = priority_config_namespace(snapshot, settings);
    for other in snapshot
        .priority_expanders
        .iter()
        .filter(|c| *c.key.namespace != *namespace)
    {
        warnings.push(Warning::general(
            WarningCode::PriorityExpander,
            format!(
                "ConfigMap {} is ignored: the priority expander reads {PRIORITY_EXPANDER_CONFIGMAP} from namespace {namespace} only (setting `priority_config_namespace`)",
                other.key
            ),
        ));
    }
    let text = snapshot
        .priority_expanders
        .iter()
        .find(|c| *c.key.namespace == *namespace)
        .and_then(|c| c.priorities.as_deref());
    let Some(text) = text else {
        warnings.push(Warning::general(
            WarningCode::PriorityExpander,
            format!("the priority expander has no configuration (no `priorities` setting and no {PRIORITY_EXPANDER_CONFIGMAP} ConfigMap with a `priorities` key in namespace {namespace}): it keeps every option"),
        ));
        return None;
    };
    cache.from_configmap(text, warnings)
}

/// Where upstream's autoscaler runs, and so reads its priority ConfigMap from: its own
/// namespace (`--namespace`), `openshift-machine-api` as OpenShift's operator deploys it.
fn priority_config_namespace<'a>(snapshot: &ClusterSnapshot, settings: &'a Settings) -> &'a str {
    if let Some(ns) = &settings.priority_config_namespace {
        return ns;
    }
    // A dump may hold no Namespaces: OpenShift's own kinds tell as well.
    let openshift = snapshot
        .namespaces
        .iter()
        .any(|n| &*n.name == OPENSHIFT_MACHINE_API)
        || !snapshot.cluster_autoscalers.is_empty()
        || snapshot
            .scalables
            .iter()
            .any(|r| r.api == MachineApiGroup::OpenShift);
    if openshift {
        OPENSHIFT_MACHINE_API
    } else {
        "kube-system"
    }
}

const OPENSHIFT_MACHINE_API: &str = "openshift-machine-api";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{machineset, snapshot};
    use crate::nodegroups::NodeGroupId;
    use fleetscaler_model::ObjectKey;
    use serde_json::{Value, json};

    fn configmap(namespace: &str, priorities: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": PRIORITY_EXPANDER_CONFIGMAP, "namespace": namespace},
            "data": {"priorities": priorities}})
    }

    fn priority_first() -> Settings {
        Settings {
            expanders: vec![settings::ExpanderKind::Priority],
            ..Settings::default()
        }
    }

    /// The priority the configuration gives OpenShift group `w`, and the warnings.
    fn priority_of_w(items: Vec<Value>, settings: &Settings) -> (Option<i32>, Vec<String>) {
        let mut warnings = Vec::new();
        let p = configured(
            &snapshot(items),
            settings,
            &mut EngineState::default(),
            &mut warnings,
        );
        let id = NodeGroupId::new(
            MachineApiGroup::OpenShift,
            fleetscaler_model::ScalableKind::MachineSet,
            &ObjectKey::new("openshift-machine-api", "w"),
        );
        let texts = warnings.iter().map(|w| w.to_string()).collect();
        (p.and_then(|p| p.priority_of(&id)), texts)
    }

    #[test]
    fn on_openshift_the_operators_namespace_is_read_and_a_tenants_copy_ignored() {
        let items = vec![
            machineset("w", 0, 5, 1).json(),
            configmap("openshift-machine-api", "10:\n- .*"),
            configmap("tenant-a", "99:\n- .*"),
        ];
        let (priority, warnings) = priority_of_w(items, &priority_first());
        assert_eq!(priority, Some(10));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0]
                .contains("ConfigMap tenant-a/cluster-autoscaler-priority-expander is ignored")
                && warnings[0].contains("from namespace openshift-machine-api only"),
            "{warnings:?}"
        );
    }

    #[test]
    fn only_a_tenants_copy_leaves_the_expander_unconfigured() {
        let items = vec![
            machineset("w", 0, 5, 1).json(),
            configmap("kube-system", "99:\n- .*"),
        ];
        let (priority, warnings) = priority_of_w(items, &priority_first());
        assert_eq!(priority, None);
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("no cluster-autoscaler-priority-expander ConfigMap with a `priorities` key in namespace openshift-machine-api")),
            "{warnings:?}"
        );
    }

    #[test]
    fn the_setting_names_the_namespace() {
        let items = vec![
            machineset("w", 0, 5, 1).json(),
            configmap("openshift-machine-api", "10:\n- .*"),
            configmap("autoscaling", "30:\n- .*"),
        ];
        let settings = Settings {
            priority_config_namespace: Some("autoscaling".into()),
            ..priority_first()
        };
        let (priority, warnings) = priority_of_w(items, &settings);
        assert_eq!(priority, Some(30));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }

    #[test]
    fn without_openshift_kinds_kube_system_is_read() {
        let items = vec![configmap("kube-system", "10:\n- .*")];
        let mut warnings = Vec::new();
        let p = configured(
            &snapshot(items),
            &priority_first(),
            &mut EngineState::default(),
            &mut warnings,
        );
        assert!(p.is_some() && warnings.is_empty(), "{warnings:?}");
    }
}
