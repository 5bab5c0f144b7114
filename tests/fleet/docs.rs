#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The documentation keeps up with the code: every reason code is documented.

use std::path::Path;

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

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// README.md and every page of docs/, with their paths from the repository's root.
fn pages() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    names.sort();
    names.insert(0, "README.md".into());
    names
        .into_iter()
        .map(|n| (read(&n), n))
        .map(|(t, n)| (n, t))
        .collect()
}

/// configuration.md's map of fleet.toml lists every table fleet.toml.example has.
#[test]
fn configuration_map_lists_every_table_of_the_example() {
    let map = read("docs/configuration.md");
    let map = map.split("```").nth(1).unwrap();
    let listed: Vec<&str> = map
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let example = read("fleet.toml.example");
    let mut missing: Vec<String> = example
        .lines()
        .map(|l| l.trim_start_matches(['#', ' ']))
        .filter(|l| l.starts_with('[') && !l.contains('"'))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|table| {
            !listed
                .iter()
                .any(|entry| match entry.strip_suffix("NAME]") {
                    Some(prefix) => table.starts_with(prefix),
                    None => entry == table,
                })
        })
        .map(str::to_string)
        .collect();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "tables not in configuration.md's map: {missing:?}"
    );
}

/// A file of this repository named in the docs (`src/...` in backquotes, a relative link)
/// exists: a moved file leaves no stale pointer behind.
#[test]
fn files_the_docs_name_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let prefixes = [
        "src/", "crates/", "tests/", "scripts/", "charts/", "docs/", ".ci/",
    ];
    let mut missing = Vec::new();
    for (name, text) in pages() {
        let dir = Path::new(&name).parent().unwrap().to_path_buf();
        let quoted = text.split('`').skip(1).step_by(2);
        let named = quoted
            .filter(|q| prefixes.iter().any(|p| q.starts_with(p)) && !q.contains([' ', '*', '<']))
            .map(|q| root.join(q.trim_end_matches('/')));
        let linked = text
            .split("](")
            .skip(1)
            .filter_map(|l| l.split([')', '#']).next())
            .filter(|l| !l.is_empty() && !l.contains("://") && !l.starts_with("mailto:"))
            .map(|l| root.join(&dir).join(l));
        for path in named.chain(linked) {
            if !path.exists() {
                missing.push(format!("{name}: {}", path.display()));
            }
        }
    }
    assert!(missing.is_empty(), "files named but missing: {missing:#?}");
}

/// docs/architecture.md names every module of each crate and of the root crate's modules
/// (`cluster/cache` or `cache`): the map stays true as modules are added.
#[test]
fn architecture_names_every_module() {
    let doc = read("docs/architecture.md");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![
        "src".to_string(),
        "crates/model/src".into(),
        "crates/engine/src".into(),
        "crates/sim/src".into(),
    ];
    for entry in std::fs::read_dir(root.join("src")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            dirs.push(format!(
                "src/{}",
                path.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    let mut missing = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(root.join(&dir)).unwrap() {
            let file = entry.unwrap().file_name().to_string_lossy().into_owned();
            let module = file.trim_end_matches(".rs");
            let helper = ["mod", "lib", "main", "tests"].contains(&module)
                || module.ends_with("_tests")
                || module.contains('.');
            let named = [module.to_string(), module.replace('_', "-")]
                .iter()
                .any(|m| doc.contains(&format!("`{m}`")) || doc.contains(&format!("`{m} ")));
            if !helper && !named {
                missing.push(format!("{dir}/{file}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules docs/architecture.md does not name: {missing:?}"
    );
}
