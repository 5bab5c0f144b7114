//! The priority expander's configuration: `priority → [regex]` on node group ids, from the
//! `priorities` setting or upstream's `cluster-autoscaler-priority-expander` ConfigMap,
//! compiled once per change and bounded in number and size.

use std::collections::BTreeMap;
use std::sync::Arc;

use fleetscaler_model::{Warning, WarningCode};
use regex::{Regex, RegexBuilder};

use super::super::nodegroups::NodeGroupId;

/// A compiled priority expander configuration: `priority → [regex]` on node group ids. A
/// regex matches a group when it matches its id or upstream's unqualified form of it
/// (`MachineSet/ns/name`), so a ConfigMap written for upstream's autoscaler (or an earlier
/// fleetscaler) means the same here.
#[derive(Debug, Default)]
pub struct Priorities {
    tiers: Vec<(i32, Vec<Regex>)>,
}

/// The most regexes a priority configuration may have in all; more are left out, with a
/// warning (a node group rarely needs more than a few).
pub const MAX_PRIORITY_REGEXES: usize = 1000;
/// The longest regex accepted, in bytes.
pub const MAX_PRIORITY_REGEX_BYTES: usize = 1024;
/// The most memory one compiled regex may take.
const MAX_COMPILED_REGEX_BYTES: usize = 1 << 20;

impl Priorities {
    /// Compiles the map; bad regexes, regexes too long and those past the cap are reported
    /// and skipped.
    pub fn compile(map: &BTreeMap<i32, Vec<String>>, warnings: &mut Vec<Warning>) -> Self {
        let mut left = MAX_PRIORITY_REGEXES;
        let mut tiers: Vec<(i32, Vec<Regex>)> = map
            .iter()
            .map(|(p, patterns)| {
                let compiled = patterns
                    .iter()
                    .filter_map(|pat| compile_one(pat, &mut left, warnings))
                    .collect();
                (*p, compiled)
            })
            .collect();
        tiers.sort_by_key(|t| std::cmp::Reverse(t.0));
        Priorities { tiers }
    }

    /// Parses the `priorities` key of the `cluster-autoscaler-priority-expander` ConfigMap.
    pub fn parse_configmap(text: &str, warnings: &mut Vec<Warning>) -> Option<Self> {
        match serde_saphyr::from_str::<BTreeMap<i32, Vec<String>>>(text) {
            Ok(map) => Some(Priorities::compile(&map, warnings)),
            Err(e) => {
                warnings.push(Warning::about(
                    WarningCode::PriorityExpander,
                    "priority expander ConfigMap",
                    format!("`priorities` is not a map of integer priority to regex list: {e}"),
                ));
                None
            }
        }
    }

    /// The number of regexes kept.
    pub fn len(&self) -> usize {
        self.tiers.iter().map(|(_, r)| r.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn priority_of(&self, id: &NodeGroupId) -> Option<i32> {
        let unqualified = id.unqualified();
        self.tiers
            .iter()
            .find(|(_, res)| {
                res.iter()
                    .any(|r| r.is_match(id.as_str()) || r.is_match(&unqualified))
            })
            .map(|(p, _)| *p)
    }
}

fn compile_one(pat: &str, left: &mut usize, warnings: &mut Vec<Warning>) -> Option<Regex> {
    let mut warn = |message: String| {
        warnings.push(Warning::about(
            WarningCode::PriorityExpander,
            "priority expander",
            message,
        ))
    };
    if *left == 0 {
        warn(format!(
            "regex {} is left out: only the first {MAX_PRIORITY_REGEXES} regexes are used",
            fleetscaler_model::quote(pat)
        ));
        return None;
    }
    if pat.len() > MAX_PRIORITY_REGEX_BYTES {
        warn(format!(
            "regex {} is longer than {MAX_PRIORITY_REGEX_BYTES} bytes: left out",
            fleetscaler_model::quote(pat)
        ));
        return None;
    }
    *left -= 1;
    RegexBuilder::new(pat)
        .size_limit(MAX_COMPILED_REGEX_BYTES)
        .build()
        .map_err(|e| {
            warn(format!(
                "regex {} is invalid: {e}",
                fleetscaler_model::quote(pat)
            ))
        })
        .ok()
}

/// Where a priority configuration came from, to tell whether it changed.
#[derive(Clone, Debug, PartialEq)]
enum PrioritySource {
    Settings(BTreeMap<i32, Vec<String>>),
    ConfigMap(String),
}

/// The priority configuration compiled once per change of its source (the `priorities`
/// setting or the ConfigMap's text), with the warnings compiling it gave: each pass
/// compares the source with the last one's instead of compiling again. Not state: it is
/// never saved, and two caches are always equal.
#[derive(Clone, Debug, Default)]
pub struct PriorityCache(Option<Arc<Compiled>>);

/// A source, what compiling it gave, and the warnings it gave.
#[derive(Debug)]
struct Compiled {
    source: PrioritySource,
    priorities: Option<Arc<Priorities>>,
    warnings: Vec<Warning>,
}

impl PartialEq for PriorityCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl PriorityCache {
    /// The compiled `priorities` setting, from the cache when unchanged.
    pub fn from_settings(
        &mut self,
        map: &BTreeMap<i32, Vec<String>>,
        warnings: &mut Vec<Warning>,
    ) -> Option<Arc<Priorities>> {
        self.get(
            |s| matches!(s, PrioritySource::Settings(m) if m == map),
            || PrioritySource::Settings(map.clone()),
            |w| Some(Priorities::compile(map, w)),
            warnings,
        )
    }

    /// The compiled ConfigMap text, from the cache when unchanged.
    pub fn from_configmap(
        &mut self,
        text: &str,
        warnings: &mut Vec<Warning>,
    ) -> Option<Arc<Priorities>> {
        self.get(
            |s| matches!(s, PrioritySource::ConfigMap(t) if t == text),
            || PrioritySource::ConfigMap(text.to_string()),
            |w| Priorities::parse_configmap(text, w),
            warnings,
        )
    }

    fn get(
        &mut self,
        same: impl Fn(&PrioritySource) -> bool,
        source: impl FnOnce() -> PrioritySource,
        compile: impl FnOnce(&mut Vec<Warning>) -> Option<Priorities>,
        warnings: &mut Vec<Warning>,
    ) -> Option<Arc<Priorities>> {
        if let Some(cached) = self.0.as_ref().filter(|c| same(&c.source)) {
            warnings.extend(cached.warnings.iter().cloned());
            return cached.priorities.clone();
        }
        let mut found = Vec::new();
        let priorities = compile(&mut found).map(Arc::new);
        warnings.extend(found.iter().cloned());
        self.0 = Some(Arc::new(Compiled {
            source: source(),
            priorities: priorities.clone(),
            warnings: found,
        }));
        priorities
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(patterns: Vec<String>) -> BTreeMap<i32, Vec<String>> {
        BTreeMap::from([(10, patterns)])
    }

    #[test]
    fn an_unchanged_configuration_is_compiled_once_and_a_changed_one_again() {
        let mut cache = PriorityCache::default();
        let mut warnings = Vec::new();
        let a = map(vec!["spot-.*".into(), "(".into()]);
        let first = cache.from_settings(&a, &mut warnings).unwrap();
        assert_eq!(warnings.len(), 1, "the bad regex, {warnings:?}");
        let mut again = Vec::new();
        let second = cache.from_settings(&a, &mut again).unwrap();
        assert!(Arc::ptr_eq(&first, &second), "compiled again");
        assert_eq!(again, warnings, "each pass still says what is wrong");
        let b = map(vec!["on-demand".into()]);
        let third = cache.from_settings(&b, &mut Vec::new()).unwrap();
        assert!(!Arc::ptr_eq(&first, &third));
        let text = "10:\n  - spot-.*\n";
        let cm = cache.from_configmap(text, &mut Vec::new()).unwrap();
        assert!(Arc::ptr_eq(
            &cm,
            &cache.from_configmap(text, &mut Vec::new()).unwrap()
        ));
    }

    #[test]
    fn regexes_past_the_cap_or_too_long_are_left_out_with_a_warning() {
        let mut warnings = Vec::new();
        let many: Vec<String> = (0..MAX_PRIORITY_REGEXES + 2)
            .map(|i| format!("g-{i}"))
            .collect();
        let p = Priorities::compile(&map(many), &mut warnings);
        assert_eq!(p.len(), MAX_PRIORITY_REGEXES);
        assert_eq!(warnings.len(), 2);
        assert!(
            warnings[0].message.contains("only the first 1000"),
            "{warnings:?}"
        );
        let mut warnings = Vec::new();
        let long = "a".repeat(MAX_PRIORITY_REGEX_BYTES + 1);
        let p = Priorities::compile(&map(vec![long]), &mut warnings);
        assert!(p.is_empty());
        let said = &warnings[0].message;
        assert!(
            said.contains("longer than 1024 bytes") && said.contains("(1025 bytes)"),
            "{said}"
        );
        // A regex whose compiled form would be huge is refused, not built.
        let mut warnings = Vec::new();
        let huge = Priorities::compile(&map(vec!["\\w{1000}\\w{1000}".into()]), &mut warnings);
        assert!(huge.is_empty(), "{warnings:?}");
    }
}
