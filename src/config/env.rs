//! Environment overrides: `FLEETSCALER_<TABLE>__<KEY>=<value>` sets `<table>.<key>` (`__`
//! between nested tables too). The value is read as a TOML value when it is one (`100`,
//! `true`, `["/a", "/b"]`, `{ min = 1, max = 4 }`), else as a string (`0.0.0.0:9090`,
//! `10m`), so that list and table keys can be set like any other.

use std::collections::BTreeMap;

/// The overrides to apply over the file, as (dotted key, value).
pub(super) fn overrides(
    vars: impl Iterator<Item = (String, String)>,
) -> Vec<(String, config::Value)> {
    let mut out: Vec<(String, config::Value)> = override_variables(vars)
        .into_iter()
        .filter_map(|(name, text)| {
            let rest = name.strip_prefix("FLEETSCALER_")?;
            let key = rest
                .split("__")
                .map(str::to_ascii_lowercase)
                .collect::<Vec<_>>()
                .join(".");
            Some((key, convert(parse_value(&text))))
        })
        .collect();
    // The same order whatever the environment's: a variable that sets a table and one that
    // sets a key inside it apply table first.
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The environment variables that override fleet.toml. Every key lives in a table, so a
/// variable without `__` (say `FLEETSCALER_LOG`) is not meant for fleet.toml and is left
/// alone rather than refused as an unknown key.
pub(super) fn override_variables(
    vars: impl Iterator<Item = (String, String)>,
) -> BTreeMap<String, String> {
    vars.filter(|(k, _)| {
        k.strip_prefix("FLEETSCALER_")
            .is_some_and(|rest| rest.contains("__"))
    })
    .collect()
}

/// The environment variable that overrides `key` (a dotted fleet.toml key).
pub(super) fn variable_of(key: &str) -> String {
    let parts: Vec<String> = key.split('.').map(str::to_ascii_uppercase).collect();
    format!("FLEETSCALER_{}", parts.join("__"))
}

fn parse_value(text: &str) -> toml::Value {
    format!("v = {text}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(text.to_string()))
}

fn convert(v: toml::Value) -> config::Value {
    let kind = match v {
        toml::Value::String(s) => config::ValueKind::String(s),
        toml::Value::Integer(i) => config::ValueKind::I64(i),
        toml::Value::Float(f) => config::ValueKind::Float(f),
        toml::Value::Boolean(b) => config::ValueKind::Boolean(b),
        toml::Value::Datetime(d) => config::ValueKind::String(d.to_string()),
        toml::Value::Array(a) => config::ValueKind::Array(a.into_iter().map(convert).collect()),
        toml::Value::Table(t) => {
            config::ValueKind::Table(t.into_iter().map(|(k, v)| (k, convert(v))).collect())
        }
    };
    config::Value::new(None, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_names_its_variable_back() {
        assert_eq!(
            variable_of("hub.scan_interval"),
            "FLEETSCALER_HUB__SCAN_INTERVAL"
        );
        // `FLEETSCALER___` reads as the key "." (two empty parts): named as it was written.
        let o = overrides([("FLEETSCALER___".to_string(), "1".to_string())].into_iter());
        assert_eq!(o[0].0, ".");
        assert_eq!(variable_of(&o[0].0), "FLEETSCALER___");
    }

    #[test]
    fn only_table_variables_override_the_file() {
        let vars = [
            ("FLEETSCALER_HUB__LISTEN", "x"),
            ("FLEETSCALER_LOG", "debug"),
            ("OTHER__THING", "y"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let kept = override_variables(vars.into_iter());
        assert_eq!(kept.len(), 1);
        assert!(kept.contains_key("FLEETSCALER_HUB__LISTEN"));
    }

    #[test]
    fn values_are_toml_when_they_read_as_toml_else_strings() {
        let vars = [
            ("FLEETSCALER_HUB__LISTEN", "0.0.0.0:9090"),
            ("FLEETSCALER_HUB__KUBECONFIGS", r#"["/a", "/b"]"#),
            ("FLEETSCALER_DEFAULTS__CORES", "{ min = 1, max = 4 }"),
            ("FLEETSCALER_DEFAULTS__MAX_NODES_TOTAL", "100"),
            ("FLEETSCALER_HUB__LEADER_ELECTION__ENABLED", "true"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let o = overrides(vars.into_iter());
        let keys: Vec<&str> = o.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "defaults.cores",
                "defaults.max_nodes_total",
                "hub.kubeconfigs",
                "hub.leader_election.enabled",
                "hub.listen"
            ]
        );
        assert_eq!(o[2].1.clone().into_array().unwrap().len(), 2);
        assert_eq!(o[1].1.clone().into_int().unwrap(), 100);
        assert_eq!(o[4].1.clone().into_string().unwrap(), "0.0.0.0:9090");
    }
}
