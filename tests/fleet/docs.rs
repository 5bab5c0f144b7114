#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The documentation keeps up with the code: every reason code is documented.

use fleetscaler::engine::reason::ReasonCode;

#[test]
fn plan_format_documents_every_reason_code() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/plan-format.md"))
        .unwrap();
    let missing: Vec<&str> = ReasonCode::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !doc.contains(&format!("| `{c}` |")))
        .collect();
    assert!(missing.is_empty(), "undocumented reason codes: {missing:?}");
}

#[test]
fn fleet_toml_example_documents_every_setting_and_hub_key() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fleet.toml.example"))
        .unwrap();
    let hub_keys = serde_json::to_value(fleetscaler::config::HubConfig::default()).unwrap();
    let hub_keys = hub_keys.as_object().unwrap().keys().cloned();
    let fleet_keys =
        serde_json::to_value(fleetscaler::config::FleetHealthConfig::default()).unwrap();
    let fleet_keys = fleet_keys.as_object().unwrap().keys().cloned();
    let missing: Vec<String> = fleetscaler::engine::settings::SETTING_KEYS
        .iter()
        .map(|k| k.to_string())
        .chain(hub_keys)
        .chain(fleet_keys)
        .filter(|k| {
            !text.contains(&format!("{k} ="))
                && !text.contains(&format!("[hub.{k}]"))
                && !text.contains(&format!("[fleet.{k}]"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "keys not in fleet.toml.example: {missing:?}"
    );
}

#[test]
fn fleet_toml_example_documents_every_membership_key() {
    use fleetscaler::config::membership::{ExecPlugin, MembershipConfig};
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fleet.toml.example"))
        .unwrap();
    let mut missing = Vec::new();
    let membership = serde_json::to_value(MembershipConfig::default()).unwrap();
    let mut tables = vec![("membership".to_string(), membership)];
    while let Some((path, table)) = tables.pop() {
        for (key, value) in table.as_object().unwrap() {
            let here = format!("{path}.{key}");
            if value.is_object() {
                if !text.contains(&format!("[{here}")) {
                    missing.push(here.clone());
                }
                tables.push((here, value.clone()));
            } else if !text.contains(&format!("{key} =")) {
                missing.push(here);
            }
        }
    }
    let plugin = serde_json::to_value(ExecPlugin::default()).unwrap();
    for key in plugin.as_object().unwrap().keys() {
        if !text.contains(&format!("{key} =")) {
            missing.push(format!("membership.cluster_profiles.providers.NAME.{key}"));
        }
    }
    assert!(
        missing.is_empty(),
        "membership keys not in fleet.toml.example: {missing:?}"
    );
}
