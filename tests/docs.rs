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
