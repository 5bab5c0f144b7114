use super::*;
use fleetscaler_model::autoscaler::ClusterAutoscaler;

#[test]
fn defaults_match_upstream() {
    let s = Settings::default();
    assert_eq!(s.pod_priority_threshold, -10);
    assert_eq!(s.max_nodes_per_scaleup, 1000);
    assert_eq!(s.expanders, vec![ExpanderKind::LeastWaste]);
    assert_eq!(s.max_node_provision_time, Duration::from_secs(900));
    assert_eq!(s.cores.max, Some(320_000));
    assert_eq!(s.scale_down_unneeded_time, Duration::from_secs(600));
    assert_eq!(s.scale_down_delay_after_failure, Duration::from_secs(180));
    assert_eq!(
        (s.max_scale_down_parallelism, s.max_drain_parallelism),
        (10, 1)
    );
    assert_eq!(s.node_group_backoff_reset, Duration::from_secs(3 * 3600));
}

#[test]
fn a_layer_over_another_wins_where_it_says_something() {
    let base = SettingsPatch {
        max_nodes_total: Some(10),
        seed: Some(1),
        ..Default::default()
    };
    let top = SettingsPatch {
        max_nodes_total: Some(3),
        ..Default::default()
    };
    let merged = top.over(&base);
    assert_eq!((merged.max_nodes_total, merged.seed), (Some(3), Some(1)));
    assert_eq!(merged.keys(), ["max_nodes_total", "seed"]);
    assert!(SettingsPatch::default().keys().is_empty());
}

#[test]
fn expander_chains() {
    assert_eq!(
        ExpanderKind::parse_chain("priority,least-waste").unwrap(),
        vec![ExpanderKind::Priority, ExpanderKind::LeastWaste]
    );
    assert!(ExpanderKind::parse_chain("random,random").is_err());
    assert!(
        ExpanderKind::parse_chain("cheapest")
            .unwrap_err()
            .to_string()
            .contains("cheapest")
    );
}

#[test]
fn cluster_autoscaler_patch_keeps_good_fields_and_reports_bad_ones() {
    let ca = ClusterAutoscaler::from_json(serde_json::json!({"metadata": {"name": "default"}, "spec": {
        "podPriorityThreshold": -5,
        "maxNodeProvisionTime": "ten minutes",
        "maxPodGracePeriod": 120,
        "resourceLimits": {"maxNodesTotal": 24, "cores": {"min": 64, "max": 8}, "memory": {"max": 256}},
        "scaleDown": {"enabled": true, "delayAfterAdd": "5m", "unneededTime": "soon", "utilizationThreshold": "0.4"},
        "expanders": ["Priority", "LeastWaste"]
    }}))
    .unwrap();
    let (patch, warnings) = SettingsPatch::from_cluster_autoscaler(&ca.spec);
    let mut s = Settings::default();
    let (set, apply_warnings) = patch.apply_to(&mut s);
    assert!(apply_warnings.is_empty());
    assert_eq!(s.pod_priority_threshold, -5);
    assert_eq!(s.max_nodes_total, Some(24));
    assert_eq!(
        s.memory_gib,
        Range {
            min: 0,
            max: Some(256)
        }
    );
    assert_eq!(s.cores.max, Some(320_000), "invalid range left out");
    assert_eq!(
        s.expanders,
        vec![ExpanderKind::Priority, ExpanderKind::LeastWaste]
    );
    assert_eq!(s.scale_down_delay_after_add, Duration::from_secs(300));
    assert_eq!(s.scale_down_utilization_threshold, 0.4);
    assert_eq!(s.max_pod_grace_period, Duration::from_secs(120));
    let keys: Vec<&str> = warnings.iter().map(|w| w.key.as_str()).collect();
    assert_eq!(
        keys,
        vec![
            "ClusterAutoscaler.spec.maxNodeProvisionTime",
            "ClusterAutoscaler.spec.resourceLimits.cores",
            "ClusterAutoscaler.spec.scaleDown.unneededTime"
        ]
    );
    assert!(set.contains(&"max_nodes_total") && !set.contains(&"cores"));
}

#[test]
fn bad_thresholds_are_reported() {
    let ca = ClusterAutoscaler::from_json(
        serde_json::json!({"spec": {"scaleDown": {"enabled": false, "utilizationThreshold": "1.5"}}}),
    )
    .unwrap();
    let (patch, warnings) = SettingsPatch::from_cluster_autoscaler(&ca.spec);
    assert_eq!(
        warnings[0].key,
        "ClusterAutoscaler.spec.scaleDown.utilizationThreshold"
    );
    assert_eq!(patch.scale_down_enabled, Some(false));
    let patch = SettingsPatch {
        scale_down_utilization_threshold: Some(-0.1),
        max_drain_parallelism: Some(0),
        ..Default::default()
    };
    let (_, warnings) = patch.apply_to(&mut Settings::default());
    assert_eq!(warnings.len(), 2);
}

#[test]
fn setting_keys_cover_every_patch_field() {
    let mut json: serde_json::Value = serde_json::json!({
        "pod_priority_threshold": 0, "max_nodes_total": 1, "cores": {"max": 2}, "memory_gib": {"max": 2},
        "gpus": [], "max_nodes_per_scaleup": 5, "expanders": ["random"], "priorities": {"1": ["x"]}, "priority_config_namespace": "ops",
        "balance_similar_node_groups": true, "balancing_ignored_labels": [], "node_groups": [], "new_pod_scale_up_delay": "30s",
        "scale_down_enabled": false, "scale_down_delay_after_add": "1m", "scale_down_delay_after_delete": "1m",
        "scale_down_delay_after_failure": "1m", "scale_down_unneeded_time": "1m", "scale_down_unready_time": "1m",
        "scale_down_utilization_threshold": 0.3, "scale_down_gpu_utilization_threshold": 0.3,
        "ignore_daemonsets_utilization": true, "skip_nodes_with_local_storage": false,
        "skip_nodes_with_system_pods": false, "skip_nodes_with_custom_controller_pods": false,
        "blocking_system_pod_disruption_timeout": "30m",
        "max_pod_grace_period": "30s", "max_scale_down_parallelism": 3,
        "max_pod_eviction_time": "1m", "daemonset_eviction_for_occupied_nodes": false,
        "daemonset_eviction_for_empty_nodes": true, "node_delete_delay_after_taint": "1s", "cordon_node_before_terminating": false,
        "enforce_node_group_min_size": true, "startup_taints": ["node.cilium.io/agent-not-ready"],
        "max_drain_parallelism": 2, "max_node_provision_time": "1m", "max_node_startup_time": "1m",
        "ok_total_unready_count": 1, "max_total_unready_percentage": 10.0, "initial_node_group_backoff": "1m",
        "max_node_group_backoff": "2m", "node_group_backoff_reset": "1h", "seed": 3
    });
    // One literal more would pass serde_json's macro recursion limit.
    json["min_replica_count"] = serde_json::json!(2);
    assert_eq!(
        json.as_object().unwrap().len(),
        SETTING_KEYS.len(),
        "the test lists every key"
    );
    let full: SettingsPatch = serde_json::from_value(json).unwrap();
    let (mut set, warnings) = full.apply_to(&mut Settings::default());
    assert!(warnings.is_empty(), "{warnings:?}");
    set.sort();
    let mut keys = SETTING_KEYS.to_vec();
    keys.sort();
    assert_eq!(set, keys);
}

#[test]
fn zero_max_nodes_total_means_unlimited() {
    let mut s = Settings {
        max_nodes_total: Some(5),
        ..Settings::default()
    };
    let patch = SettingsPatch {
        max_nodes_total: Some(0),
        ..Default::default()
    };
    patch.apply_to(&mut s);
    assert_eq!(s.max_nodes_total, None);
}

#[test]
fn a_priority_config_namespace_must_be_a_namespace_name() {
    let patch = SettingsPatch {
        priority_config_namespace: Some("Tenant_A".into()),
        ..Default::default()
    };
    let mut s = Settings::default();
    let (set, warnings) = patch.apply_to(&mut s);
    assert!(set.is_empty());
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].key, "priority_config_namespace");
    assert!(
        warnings[0]
            .message
            .contains("\"Tenant_A\" is not a namespace name")
    );
    assert_eq!(s.priority_config_namespace, None);
}
