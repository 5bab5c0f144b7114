//! Structure-aware mutations of real inputs (the scenario dumps, fleet.toml.example): edits
//! of lines and values rather than of random bytes alone, so that most mutants still parse
//! and reach the code behind the parser. Positions are `Index`es, so a failing case shrinks
//! to fewer and simpler edits whatever the input's length.

use proptest::prelude::*;
use proptest::sample::Index;

/// One edit. Applied in order; each picks its lines in the text as it is then.
#[derive(Clone, Debug)]
pub enum Edit {
    /// One byte replaced by one that means something to YAML or TOML.
    Byte {
        at: Index,
        to: u8,
    },
    DeleteLine(Index),
    DuplicateLine(Index),
    SwapLines(Index, Index),
    /// A value (after `: `, ` = ` or `- `) replaced by one of the same shape at the edge of
    /// its range (a number by a larger one, a time by the epoch): the object still reads,
    /// and the edge reaches the code behind the parser.
    Tweak {
        line: Index,
        pick: Index,
    },
    /// A value replaced by a hostile one, of any shape.
    Value {
        line: Index,
        value: usize,
    },
    /// One line's value put in another line: a value of the wrong type or meaning.
    CopyValue {
        from: Index,
        to: Index,
    },
    /// A line indented two spaces more or less: it moves into or out of a mapping.
    Indent {
        line: Index,
        deeper: bool,
    },
    /// A commented-out line (`# key = value`) turned on.
    Uncomment(Index),
    /// A hostile line inserted as it is (a whole key with its value, a bomb, a header).
    InsertLine {
        at: Index,
        line: usize,
    },
    Truncate(Index),
}

/// Bytes that change a YAML or TOML document's structure when they land in it.
const SPECIAL_BYTES: &[u8] = b":-#{}[],&*!|>'\"%@`=. \t\n\r\\0129eEaz\x00\x7f";

/// Edits drawing from `values` hostile values and `lines` hostile lines; `comments`: the
/// input's comments are commented-out settings (fleet.toml.example), not prose.
pub fn edit(values: usize, lines: usize, comments: bool) -> impl Strategy<Value = Edit> {
    let byte = prop::sample::select(SPECIAL_BYTES.to_vec());
    // Weighted towards edits after which the input still reads, so that most cases reach
    // the code behind the parser; the others check the parser's errors.
    prop_oneof![
        1 => (any::<Index>(), byte).prop_map(|(at, to)| Edit::Byte { at, to }),
        2 => any::<Index>().prop_map(Edit::DeleteLine),
        2 => any::<Index>().prop_map(Edit::DuplicateLine),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        10 => (any::<Index>(), any::<Index>()).prop_map(|(line, pick)| Edit::Tweak { line, pick }),
        2 => (any::<Index>(), 0..values).prop_map(|(line, value)| Edit::Value { line, value }),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(from, to)| Edit::CopyValue { from, to }),
        1 => (any::<Index>(), any::<bool>()).prop_map(|(line, deeper)| Edit::Indent { line, deeper }),
        // Prose comments (the dumps') would only break the input: a line goes instead.
        2 => any::<Index>().prop_map(move |i| if comments { Edit::Uncomment(i) } else { Edit::DeleteLine(i) }),
        1 => (any::<Index>(), 0..lines).prop_map(|(at, line)| Edit::InsertLine { at, line }),
        1 => any::<Index>().prop_map(Edit::Truncate),
    ]
}

/// `text` with `edits` applied; `values` and `lines` are the hostile values and lines the
/// edits draw from. Returns bytes: a flipped byte may leave invalid UTF-8.
pub fn apply(text: &str, edits: &[Edit], values: &[String], lines: &[String]) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    for edit in edits {
        if let Edit::Byte { at, to } = edit {
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] = *to;
            }
            continue;
        }
        if let Edit::Truncate(at) = edit {
            bytes.truncate(at.index(bytes.len() + 1));
            continue;
        }
        let mut doc: Vec<String> = String::from_utf8_lossy(&bytes)
            .split('\n')
            .map(str::to_string)
            .collect();
        let n = doc.len();
        match edit {
            Edit::DeleteLine(i) => {
                doc.remove(i.index(n));
            }
            Edit::DuplicateLine(i) => {
                let i = i.index(n);
                doc.insert(i, doc[i].clone());
            }
            Edit::SwapLines(a, b) => doc.swap(a.index(n), b.index(n)),
            Edit::Tweak { line, pick } => {
                if let Some(i) = nth(&doc, *line, |l| split_value(l).is_some()) {
                    let (_, old) = split_value(&doc[i]).unwrap_or_default();
                    let new = tweak(old, *pick);
                    doc[i] = with_value(&doc[i], &new);
                }
            }
            Edit::Value { line, value } => {
                if let Some(i) = nth(&doc, *line, |l| split_value(l).is_some()) {
                    doc[i] = with_value(&doc[i], &values[*value]);
                }
            }
            Edit::CopyValue { from, to } => {
                if let Some((_, v)) = split_value(&doc[from.index(n)]) {
                    let v = v.to_string();
                    let i = to.index(n);
                    doc[i] = with_value(&doc[i], &v);
                }
            }
            Edit::Indent { line, deeper } => {
                let i = line.index(n);
                if *deeper {
                    doc[i].insert_str(0, "  ");
                } else if let Some(rest) = doc[i].strip_prefix("  ") {
                    doc[i] = rest.to_string();
                }
            }
            Edit::Uncomment(i) => {
                if let Some(j) = nth(&doc, *i, |l| l.trim_start().starts_with('#')) {
                    let line = doc[j].trim_start().trim_start_matches('#').trim_start();
                    doc[j] = line.to_string();
                }
            }
            Edit::InsertLine { at, line } => {
                doc.insert(at.index(n + 1), lines[*line].clone());
            }
            Edit::Byte { .. } | Edit::Truncate(_) => {}
        }
        bytes = doc.join("\n").into_bytes();
    }
    bytes
}

/// The line `at` points to among those that `matches`: an edit finds a line of its kind
/// wherever it points.
fn nth(doc: &[String], at: Index, matches: impl Fn(&str) -> bool) -> Option<usize> {
    let found: Vec<usize> = (0..doc.len()).filter(|&j| matches(&doc[j])).collect();
    (!found.is_empty()).then(|| found[at.index(found.len())])
}

/// A value of the same shape as `old` (and quoted as it is), at the edges of that shape.
fn tweak(old: &str, pick: Index) -> String {
    let old = old.trim_end();
    let mut quote = old.chars().next().filter(|c| matches!(c, '\'' | '"'));
    let bare = old.trim_matches(|c| c == '\'' || c == '"');
    let starts_with_digit = bare.starts_with(|c: char| c.is_ascii_digit());
    let choices = if !bare.is_empty() && bare.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        "0 1 -1 2 2147483647 -2147483648 9223372036854775807 1000000"
    } else if bare.parse::<f64>().is_ok() {
        "0.0 1.0 0.5 100.0 1e-300 -0.0 0.9999999999999999"
    } else if starts_with_digit && bare.ends_with('Z') {
        "1970-01-01T00:00:00Z 9999-12-30T00:00:00Z 2026-11-22T10:00:00Z 2026-11-22T09:59:59Z \
         2100-01-01T00:00:00Z 2026-11-22T10:00:00.999999999Z"
    } else if starts_with_digit {
        // Quantities and durations: `7500m`, `32Gi`, `10m`, `1.5h`.
        "0 1n 1 7Ei 1e18 9223372036854775807 100Gi 0.001m 0s 1ns 2562047h 1h"
    } else if matches!(bare, "true" | "false" | "True" | "False") {
        "true false True False"
    } else {
        // Quoted (YAML and TOML both read '...'), so that `-` or nothing stay strings.
        quote = quote.or(Some('\''));
        "_ x - a/b kubernetes.io/hostname openshift-machine-api NoSchedule Exists .*"
    };
    let choices: Vec<&str> = choices.split_whitespace().collect();
    let new = choices[pick.index(choices.len())].replace('_', "");
    match quote {
        Some(q) => format!("{q}{new}{q}"),
        None => new,
    }
}

/// (key part with its separator, value) of `key: value`, `key = value` or `- value`.
fn split_value(line: &str) -> Option<(&str, &str)> {
    for sep in [": ", " = ", "- "] {
        if let Some(at) = line.find(sep) {
            let (head, rest) = line.split_at(at + sep.len());
            return Some((head, rest));
        }
    }
    None
}

fn with_value(line: &str, value: &str) -> String {
    match split_value(line) {
        Some((head, _)) => format!("{head}{value}"),
        // A line with no value (`spec:`, `[hub]`) gets one after a separator.
        None if line.trim_end().ends_with(':') => format!("{line} {value}"),
        None => format!("{line}{value}"),
    }
}

/// Lines that differ between `before` and `after`, for a failure message: the edits as text.
pub fn changed_lines(before: &str, after: &str, max: usize) -> String {
    let old: std::collections::HashSet<&str> = before.lines().collect();
    let mut out: Vec<String> = after
        .lines()
        .enumerate()
        .filter(|(_, l)| !old.contains(l))
        .take(max)
        .map(|(i, l)| format!("  line {}: {}", i + 1, super::excerpt(l, 200)))
        .collect();
    if out.is_empty() {
        out.push("  (only lines removed or moved)".into());
    }
    out.join("\n")
}

/// A billion-laughs document on one line, as a flow sequence: `depth` levels of anchors,
/// each referring `width` times to the one before (width^depth leaves when expanded).
pub fn laughs(depth: usize, width: usize) -> String {
    let mut out = String::from("[&l0 lol");
    for level in 1..=depth {
        let refs = vec![format!("*l{}", level - 1); width].join(", ");
        out.push_str(&format!(", &l{level} [{refs}]"));
    }
    out.push(']');
    out
}

/// Numbers, quantities, durations, times, YAML forms, regexes, long and deep values that
/// each have broken a parser somewhere. YAML spellings: a dump's fields and annotations.
pub fn hostile_yaml_values() -> Vec<String> {
    #[rustfmt::skip]
    let mut v: Vec<String> = [
        // Integers at and past every width a field may have.
        "9223372036854775807", "9223372036854775808", "-9223372036854775808",
        "-9223372036854775809", "18446744073709551615", "99999999999999999999", "2147483647",
        "2147483648", "-2147483649", "-1", "0", "1e308", "-1e308", "1e-320", ".inf", "-.inf",
        ".nan", "0x7FFFFFFFFFFFFFFF", "0o777", "1_000", "+12",
        // The same as strings (annotations, quantities and durations are strings).
        "'9223372036854775807'", "'-9223372036854775808'", "'99999999999999999999'", "'-1'",
        "'0'", "'99999999999999999999Ei'", "'1e308'", "'8Ei'", "'7Ei'", "'-7Ei'", "'1e-300'",
        "'0.1n'", "'0e99'", "'1.0000000000000000000000000000001'", "'1Ki1'", "'-0'", "'NaN'",
        "'1,5'", "'2562047h'", "'2562048h'", "'-1s'", "'99999999999999999999h'", "'0s'",
        "'1.5h'", "'1d'", "'9999-12-31T23:59:59Z'", "'0001-01-01T00:00:00Z'",
        "'1970-01-01T00:00:00Z'", "'2026-13-45T99:99:99Z'", "'not a time'",
        "2026-11-22T10:00:00Z",
        // YAML's own forms: nulls, 1.1 booleans, empty collections, tags, anchors, aliases.
        "~", "null", "yes", "no", "on", "off", "[]", "{}", "''", "'\u{0}'", "\"\\u0000\"",
        "\"\\uD800\"", "!!binary aGVsbG8=", "!!str 5", "!!int x", "!!float .nan", "!custom 3",
        "!!map {}", "*undefined", "&a 5", "&a [*a]", "<<: {a: 1}", "? complex", "|", ">-", "'",
        "\"", "[", "{", "- - - -", ": :", "# only a comment", "%YAML 1.2",
        // Strings a selector, regex, label or taint reads.
        "'('", "'.*'", "'a{99999}{99999}'", "'(a*)*$'", "'\\\\'", "'in (a, b'", "'!'",
        "'key=value,other!=x'", "'10:\n- (\n'", "'-1:\n- .*'", "'99999999999999999999:\n- .*'",
        "'NoSchedule'", "'NoExecute'", "'Exists'", "'DoesNotExist'", "'Gt'", "'Lt'", "'In'",
        "'kubernetes.io/hostname'", "'topology.kubernetes.io/zone'", "'a/b/c'", "'/'",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(format!("'{}'", "a".repeat(100_000)));
    v.push(format!(
        "'{}.example.com/{}'",
        "x".repeat(300),
        "y".repeat(300)
    ));
    v.push(format!("{}{}", "[".repeat(300), "]".repeat(300)));
    v.push(format!("{}1{}", "{a: ".repeat(300), "}".repeat(300)));
    v.push(format!("{}x", "- ".repeat(300)));
    // Within the parser's budget (9^5 leaves): it expands, and then meets the object's types.
    v.push(laughs(5, 9));
    v
}

/// Whole lines to insert in a dump: structure rather than values.
pub fn hostile_yaml_lines() -> Vec<String> {
    #[rustfmt::skip]
    let mut v: Vec<String> = [
        "---", "...", "--- !!map", "- ", "-", "items:", "items: []", "items: {}", "kind: List",
        "kind: Pod", "kind: Node", "kind: MachineSet", "apiVersion: v1", "apiVersion: v2",
        "apiVersion: machine.openshift.io/v1beta1", "apiVersion: cluster.x-k8s.io/v1alpha4",
        "metadata: {name: dup, namespace: dup}", "replicas: 9223372036854775807",
        "- {apiVersion: v1, kind: Pod}", "- {apiVersion: v1, kind: Node, metadata: {name: x}}",
        "- {apiVersion: v1, kind: List, items: [{apiVersion: v1, kind: List, items: []}]}",
        "<<: *undefined", "anchor: &a {x: *a}", "\t", "\u{feff}", "\r", "%TAG ! tag:x,2026:",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(format!("bomb: {}", laughs(5, 9)));
    v.push(format!(
        "deep: {}{}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    ));
    v.push(format!("long: '{}'", "z".repeat(1 << 20)));
    v.push("---\n".repeat(2_000));
    v
}

/// TOML spellings of the same kinds of values, for fleet.toml.
pub fn hostile_toml_values() -> Vec<String> {
    #[rustfmt::skip]
    let mut v: Vec<String> = [
        "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-1", "0", "1",
        "4294967296", "1e308", "-1e308", "5e-324", "inf", "-inf", "nan", "-0.0", "0.5", "1.9",
        "true", "false", "1979-05-27T07:32:00Z", "07:32:00", "1979-05-27", "0x7fffffff", "0b1",
        "\"\"", "\"x\"", "\"-1s\"", "\"0s\"", "\"2562047h\"", "\"2562048h\"",
        "\"99999999999999999999h\"", "\"1.5h\"", "\"15 minutes\"", "\"0.0.0.0:99999\"",
        "\"[::1]:8080\"", "\"127.0.0.1:0\"", "\"http://\"", "\"grpc\"", "\"Bearer x\"",
        "\"\\u0000\"", "'''multi\nline'''", "[]", "[1, \"a\"]", "[\"random\", \"random\"]",
        "[\"priority\"]", "[\"nope\"]", "{}", "{ min = 9223372036854775807, max = -1 }",
        "{ min = 9, max = 3 }", "{ max = 0 }", "{ \"50\" = [\"(\"] }",
        "{ \"-9223372036854775809\" = [\".*\"] }", "{ \"x\" = [\".*\"] }",
        "{ \"10\" = [\"a{99999}{99999}\"] }", "[{ type = \"\", min = 5, max = 1 }]",
        "[{ kind = \"MachineSet\", namespace = \"\", name = \"\", max = 9223372036854775807 }]",
        "{ a = { b = { c = 1 } } }", "\"", "[", "{", "= 1", "\"unterminated",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(format!("\"{}\"", "a".repeat(100_000)));
    v.push(format!("{}{}", "[".repeat(5_000), "]".repeat(5_000)));
    v.push(format!("{}1{}", "{a = ".repeat(2_000), "}".repeat(2_000)));
    v
}

/// Whole lines to insert in fleet.toml.
pub fn hostile_toml_lines() -> Vec<String> {
    #[rustfmt::skip]
    let mut v: Vec<String> = [
        "[hub]", "[fleet]", "[defaults]", "[[clusters]]", "[clusters]",
        "[[clusters.node_groups]]", "[clusters.overrides]", "[hub.leader_election]",
        "[hub.tracing]", "[hub.serving]", "[[hub]]", "[unknown]", "name = \"dup\"",
        "name = \"\"", "enabled = \"yes\"", "unknown_key = 1", "hub.listen = \"x\"",
        "defaults = 5", "clusters = []", "clusters = [{ name = \"a\" }, { name = \"a\" }]",
        "\"quoted key\" = 1", "a.b.c.d = 1", "= =", "[", "]]", "\t", "\u{feff}", "\r",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(format!("key = \"{}\"", "k".repeat(1 << 20)));
    v.push(format!("[{}]", "a.".repeat(5_000) + "a"));
    v
}
