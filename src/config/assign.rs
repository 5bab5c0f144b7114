//! `KEY=VALUE` assignments of settings, as `plan --set`, `what-if --set` and the hub's
//! `/api/v1/what-if?set=` take them: each value is read as TOML when it is TOML (`30`,
//! `{max=64}`, `["priority"]`), else as a string, and the whole is read as one layer of
//! settings (fleet.toml keys), naming the assignment that is wrong.

use crate::engine::settings::SettingsPatch;

/// One assignment that cannot be read: which one, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{assignment}: {message}")]
pub struct AssignError {
    /// The assignment as written (or `--set` when none can be named).
    pub assignment: String,
    pub message: String,
}

/// Reads `assignments` (`KEY=VALUE` each) into one layer of settings.
pub fn parse_assignments(assignments: &[String]) -> Result<SettingsPatch, AssignError> {
    let mut toml_text = String::new();
    for kv in assignments {
        let (key, value) = kv.split_once('=').ok_or_else(|| AssignError {
            assignment: kv.clone(),
            message: "expected KEY=VALUE".into(),
        })?;
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() || key.contains(['\n', '\r', '[', ']', '=', '#']) {
            return Err(AssignError {
                assignment: kv.clone(),
                message: format!("{key:?} is not a setting's key"),
            });
        }
        toml_text.push_str(&line_of(key, value));
    }
    toml::from_str(&toml_text).map_err(|e| {
        // One line per assignment: the error's place says which one it was.
        let line = e.span().map(|s| {
            toml_text[..s.start.min(toml_text.len())]
                .matches('\n')
                .count()
        });
        let which = line.and_then(|l| assignments.get(l));
        let message = e.message();
        AssignError {
            assignment: which.cloned().unwrap_or_else(|| "--set".into()),
            message: super::suggest::unknown_key(message, "setting")
                .unwrap_or_else(|| message.to_string()),
        }
    })
}

/// `key = value` on one line: the value as TOML when it reads as such, else quoted (a bare
/// word is a string, without TOML's quotes). A value spanning lines is quoted whole, so it
/// cannot add keys of its own.
fn line_of(key: &str, value: &str) -> String {
    let one_line = !value.contains(['\n', '\r']);
    if one_line && toml::from_str::<toml::Table>(&format!("v = {value}")).is_ok() {
        format!("{key} = {value}\n")
    } else {
        let escaped: String = value
            .chars()
            .flat_map(|c| match c {
                '\\' => vec!['\\', '\\'],
                '"' => vec!['\\', '"'],
                '\n' => vec!['\\', 'n'],
                '\r' => vec!['\\', 'r'],
                c => vec![c],
            })
            .collect();
        format!("{key} = \"{escaped}\"\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::settings::Range;

    fn parse(items: &[&str]) -> Result<SettingsPatch, AssignError> {
        let owned: Vec<String> = items.iter().map(|s| s.to_string()).collect();
        parse_assignments(&owned)
    }

    #[test]
    fn values_are_toml_or_strings() {
        let p = parse(&[
            "max_nodes_total=30",
            "cores={max=64}",
            "expanders=[\"random\"]",
        ])
        .unwrap();
        assert_eq!(p.max_nodes_total, Some(30));
        assert_eq!(
            p.cores,
            Some(Range {
                min: 0,
                max: Some(64)
            })
        );
        assert!(p.expanders.is_some());
        assert_eq!(parse(&[]).unwrap(), SettingsPatch::default());
    }

    #[test]
    fn the_wrong_assignment_is_named() {
        let e = parse(&["max_nodes_total=30", "max_nodes_totl=3"]).unwrap_err();
        assert_eq!(e.assignment, "max_nodes_totl=3");
        assert_eq!(
            e.message,
            "unknown setting `max_nodes_totl`; did you mean `max_nodes_total`?"
        );
        // A dotted key names its setting first.
        let e = parse(&["cors.max=3"]).unwrap_err();
        assert_eq!(e.message, "unknown setting `cors`; did you mean `cores`?");
        let e = parse(&["max_nodes_total=-1"]).unwrap_err();
        assert_eq!(e.assignment, "max_nodes_total=-1");
        assert_eq!(
            parse(&["nothing"]).unwrap_err().message,
            "expected KEY=VALUE"
        );
    }

    #[test]
    fn a_value_cannot_smuggle_other_keys() {
        let e = parse(&["seed=1\nmax_nodes_total = 1"]).unwrap_err();
        assert_eq!(e.assignment, "seed=1\nmax_nodes_total = 1");
        let e = parse(&["[defaults]\nseed=1"]).unwrap_err();
        assert!(e.message.contains("not a setting's key"), "{e}");
    }
}
