//! PromQL as the chart's Grafana dashboard and alerting rules use it, for
//! tests/fleet/chart_observability.rs: the expressions of a dashboard (with Grafana's variables
//! given values) and of a rules file, `promtool check rules` on them, the metric names an
//! expression reads, and the names a `/metrics` exposition serves.

use std::collections::BTreeSet;
use std::process::Command;

use regex::Regex;
use serde_json::{Value, json};

use crate::e2e_support::TempDir;

/// One PromQL expression and where it comes from (a panel, a variable, a rule).
#[derive(Clone, Debug)]
pub struct Query {
    pub at: String,
    pub expr: String,
}

/// Grafana's built-in variables, as concrete values PromQL accepts where Grafana puts them.
const BUILT_INS: [(&str, &str); 6] = [
    ("__rate_interval", "1m"),
    ("__interval", "1m"),
    ("__range", "1h"),
    ("__interval_ms", "60000"),
    ("__range_s", "3600"),
    ("__range_ms", "3600000"),
];

/// Every PromQL expression of a Grafana dashboard: each panel target's `expr` (panels of
/// rows too) and the selector of each `label_values(...)` / `query_result(...)` variable.
/// Grafana's variables are replaced: the dashboard's own by `values`, the built-in ones by
/// the intervals above. The second list says what could not be: a variable the dashboard
/// does not define, or one `values` gives no value for.
pub fn dashboard_queries(dashboard: &Value, values: &[(&str, &str)]) -> (Vec<Query>, Vec<String>) {
    let defined: BTreeSet<&str> = dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    let mut raw = Vec::new();
    let mut problems = Vec::new();
    collect_targets(&dashboard["panels"], &mut raw);
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if v["type"] != "query" {
            continue;
        }
        let at = format!("variable {}", v["name"]);
        let query = v["query"]
            .as_str()
            .or(v["query"]["query"].as_str())
            .unwrap_or("");
        match variable_selector(query) {
            Some(expr) => raw.push(Query { at, expr }),
            None => problems.push(format!("{at}: no PromQL selector in {query:?}")),
        }
    }
    let reference = Regex::new(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]").unwrap();
    let mut queries = Vec::new();
    for q in raw {
        let mut missing = Vec::new();
        let expr = reference.replace_all(&q.expr, |c: &regex::Captures| {
            let name = (1..=3).find_map(|i| c.get(i)).unwrap().as_str();
            let given = values
                .iter()
                .chain(BUILT_INS.iter())
                .find(|(n, _)| *n == name);
            match given {
                Some((_, value)) if defined.contains(name) || name.starts_with("__") => {
                    value.to_string()
                }
                _ => {
                    missing.push(name.to_string());
                    c[0].to_string()
                }
            }
        });
        for name in missing {
            let why = if defined.contains(name.as_str()) {
                "has no test value"
            } else {
                "is not a variable of the dashboard"
            };
            problems.push(format!("{}: ${name} {why}", q.at));
        }
        queries.push(Query {
            at: q.at,
            expr: expr.into_owned(),
        });
    }
    (queries, problems)
}

fn collect_targets(panels: &Value, out: &mut Vec<Query>) {
    for p in panels.as_array().into_iter().flatten() {
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = t["expr"].as_str() {
                out.push(Query {
                    at: format!("panel {} ({}) target {}", p["id"], p["title"], t["refId"]),
                    expr: expr.to_string(),
                });
            }
        }
        collect_targets(&p["panels"], out);
    }
}

/// The PromQL inside a Prometheus variable query: `label_values(SELECTOR, label)` or
/// `query_result(EXPR)`. `label_values(label)` selects no metric of the hub's: none.
fn variable_selector(query: &str) -> Option<String> {
    let query = query.trim();
    if let Some(args) = query
        .strip_prefix("label_values(")
        .and_then(|a| a.strip_suffix(')'))
    {
        let (selector, _label) = args.rsplit_once(',')?;
        return Some(selector.trim().to_string());
    }
    let inner = query.strip_prefix("query_result(")?.strip_suffix(')')?;
    Some(inner.trim().to_string())
}

/// The expressions of a Prometheus rules file (`groups: [{rules: [...]}]`), as parsed.
pub fn rule_queries(rules: &Value) -> Vec<Query> {
    let mut out = Vec::new();
    for g in rules["groups"].as_array().into_iter().flatten() {
        for r in g["rules"].as_array().into_iter().flatten() {
            let name = r["alert"].as_str().or(r["record"].as_str()).unwrap_or("?");
            out.push(Query {
                at: format!("rule {name}"),
                expr: r["expr"].as_str().unwrap_or("").to_string(),
            });
        }
    }
    out
}

/// `promtool check rules` on a rules file: Ok with its report when it finds exactly
/// `expected` rules and nothing wrong.
pub fn promtool_check_rules(file: &std::path::Path, expected: usize) -> Result<String, String> {
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(file)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run promtool ({e}): install it with `apt-get install prometheus` \
                 (scripts/test.sh does so under CI)"
            )
        });
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let found = format!("SUCCESS: {expected} rules found");
    if out.status.success() && said.contains(&found) {
        Ok(said)
    } else {
        Err(said)
    }
}

/// Each query as a recording rule of one group, in a rules file promtool can check:
/// promtool has no command that parses a bare expression, and a rule's expression is parsed
/// as Prometheus itself parses it.
pub fn promtool_check_queries(queries: &[Query]) -> Result<String, String> {
    let dir = TempDir::new("promql");
    let file = dir.path().join("queries.rules.yaml");
    let rules: Vec<Value> = queries
        .iter()
        .enumerate()
        .map(|(i, q)| json!({"record": format!("check:query_{i}:value"), "expr": q.expr}))
        .collect();
    let doc = json!({"groups": [{"name": "queries", "rules": rules}]});
    // JSON is YAML: promtool reads it as written.
    std::fs::write(&file, doc.to_string()).unwrap();
    promtool_check_rules(&file, queries.len()).map_err(|said| {
        let listed: Vec<String> = queries
            .iter()
            .enumerate()
            .map(|(i, q)| format!("  query_{i}: {}: {}", q.at, q.expr))
            .collect();
        format!("{said}\n{}", listed.join("\n"))
    })
}

/// The names a Prometheus text exposition serves: each family of a `# TYPE` line, and for
/// a histogram its `_bucket`, `_sum` and `_count` series.
/// The metric names that have at least one sample in `exposition` (a histogram's by its
/// `_bucket`, `_sum` and `_count` series): what a query finds data for.
pub fn sampled_names(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .collect()
}

pub fn served_names(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(name), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        if matches!(kind, "histogram" | "summary") {
            for suffix in ["_bucket", "_sum", "_count"] {
                if kind == "histogram" || suffix != "_bucket" {
                    names.insert(format!("{name}{suffix}"));
                }
            }
        } else {
            names.insert(name.to_string());
        }
    }
    names
}

/// Words that are PromQL's own, never metric names (compared in lowercase): operators,
/// literals, and the aggregations, which `by (...)` may separate from their `(`.
const KEYWORDS: [&str; 22] = [
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
    "atan2",
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
/// Keywords followed by a list of label names in parentheses.
const LABEL_LISTS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names an expression selects. A word is a metric name unless it calls a
/// function or aggregation (a `(` follows), is a keyword, or names labels (matchers in `{}`,
/// `by (...)` and the like); strings, ranges and numbers are skipped. A selector that names
/// its metric with `__name__` is returned as is, so that no check takes it for served.
pub fn metric_names(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, '"' | '\'' | '`') {
            i = skip_string(&chars, i);
        } else if c == '{' || c == '[' {
            let close = if c == '{' { '}' } else { ']' };
            let start = i;
            i = skip_to(&chars, i, close);
            let inside: String = chars[start..i].iter().collect();
            if inside.contains("__name__") {
                names.push(inside);
            }
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | ':'))
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut next = i;
            while next < chars.len() && chars[next].is_whitespace() {
                next += 1;
            }
            let paren = chars.get(next) == Some(&'(');
            let lower = word.to_ascii_lowercase();
            if LABEL_LISTS.contains(&lower.as_str()) {
                if paren {
                    i = skip_to(&chars, next, ')');
                }
            } else if !paren && !KEYWORDS.contains(&lower.as_str()) {
                names.push(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

/// The index after the string that starts at `i` (escapes honoured, raw strings too).
fn skip_string(chars: &[char], mut i: usize) -> usize {
    let quote = chars[i];
    i += 1;
    while i < chars.len() && chars[i] != quote {
        if chars[i] == '\\' && quote != '`' {
            i += 1;
        }
        i += 1;
    }
    i + 1
}

/// The index after the `close` that ends what starts at `i`, strings inside skipped.
fn skip_to(chars: &[char], mut i: usize, close: char) -> usize {
    i += 1;
    while i < chars.len() && chars[i] != close {
        if matches!(chars[i], '"' | '\'' | '`') {
            i = skip_string(chars, i);
        } else {
            i += 1;
        }
    }
    i + 1
}
