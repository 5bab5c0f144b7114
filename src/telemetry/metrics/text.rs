//! The Prometheus text exposition format (version 0.0.4) of a [`MetricsSnapshot`]: what
//! `GET /metrics` serves.

use std::fmt::Write;

use super::{Histogram, MetricsSnapshot, Value};

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Every family's `HELP` and `TYPE`, then its series; a histogram's as `_bucket` lines
/// (`+Inf` last), `_sum` and `_count`.
pub fn text(snapshot: &MetricsSnapshot) -> String {
    let mut out = String::new();
    for family in &snapshot.families {
        let name = &family.name;
        let _ = writeln!(out, "# HELP {name} {}", escape_help(&family.help));
        let _ = writeln!(out, "# TYPE {name} {}", family.kind.as_str());
        for series in &family.series {
            match &series.value {
                Value::Number(v) => line(&mut out, name, "", &series.labels, None, *v),
                Value::Histogram(h) => histogram(&mut out, name, &series.labels, h),
            }
        }
    }
    out
}

fn histogram(out: &mut String, name: &str, labels: &[(String, String)], h: &Histogram) {
    for (bound, n) in &h.buckets {
        let le = format_value(*bound);
        line(out, name, "_bucket", labels, Some(&le), *n as f64);
    }
    line(out, name, "_bucket", labels, Some("+Inf"), h.count as f64);
    line(out, name, "_sum", labels, None, h.sum);
    line(out, name, "_count", labels, None, h.count as f64);
}

fn line(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[(String, String)],
    le: Option<&str>,
    value: f64,
) {
    out.push_str(name);
    out.push_str(suffix);
    let pairs = labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain(le.map(|le| ("le", le)));
    let mut first = true;
    for (k, v) in pairs {
        out.push(if first { '{' } else { ',' });
        first = false;
        let _ = write!(out, "{k}=\"{}\"", escape_label(v));
    }
    if !first {
        out.push('}');
    }
    let _ = writeln!(out, " {}", format_value(value));
}

/// Label values may hold anything a cluster or node group is called: escape `\`, `"`, newline.
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::metrics::Type;

    #[test]
    fn writes_headers_samples_and_escaped_labels() {
        let mut e = MetricsSnapshot::builder();
        e.family("x_total", Type::Counter, "Things.\nDone.")
            .sample(&[("cluster", "a\"b\\c\nd")], 3.0);
        assert_eq!(
            text(&e.finish()),
            "# HELP x_total Things.\\nDone.\n# TYPE x_total counter\n\
             x_total{cluster=\"a\\\"b\\\\c\\nd\"} 3\n"
        );
    }

    #[test]
    fn histograms_end_with_inf_sum_and_count() {
        let mut e = MetricsSnapshot::builder();
        e.family("d_seconds", Type::Histogram, "Durations.")
            .histogram(
                &[("cluster", "a")],
                [(0.5, 1), (1.0, 2)].into_iter(),
                1.25,
                3,
            );
        let text = text(&e.finish());
        assert!(text.contains("d_seconds_bucket{cluster=\"a\",le=\"0.5\"} 1\n"));
        assert!(text.contains("d_seconds_bucket{cluster=\"a\",le=\"+Inf\"} 3\n"));
        assert!(text.contains("d_seconds_sum{cluster=\"a\"} 1.25\n"));
        assert!(text.contains("d_seconds_count{cluster=\"a\"} 3\n"));
    }

    #[test]
    fn values_without_labels_and_special_floats() {
        let mut e = MetricsSnapshot::builder();
        e.family("g", Type::Gauge, "G.")
            .sample(&[], f64::NAN)
            .sample(&[], f64::INFINITY);
        assert_eq!(
            text(&e.finish()),
            "# HELP g G.\n# TYPE g gauge\ng NaN\ng +Inf\n"
        );
    }

    #[test]
    fn a_counter_a_gauge_and_a_histogram_in_one_snapshot() {
        let mut e = MetricsSnapshot::builder();
        e.family("c_total", Type::Counter, "C.")
            .sample(&[("cluster", "a"), ("reason", "x\"y")], 2.0);
        e.family("g", Type::Gauge, "G \\ g.").sample(&[], 0.5);
        e.family("h_seconds", Type::Histogram, "H.").histogram(
            &[("cluster", "b\\c")],
            [(0.1, 0), (1.0, 2)].into_iter(),
            0.75,
            3,
        );
        e.family("empty", Type::Gauge, "No series.");
        let want = "\
# HELP c_total C.
# TYPE c_total counter
c_total{cluster=\"a\",reason=\"x\\\"y\"} 2
# HELP g G \\\\ g.
# TYPE g gauge
g 0.5
# HELP h_seconds H.
# TYPE h_seconds histogram
h_seconds_bucket{cluster=\"b\\\\c\",le=\"0.1\"} 0
h_seconds_bucket{cluster=\"b\\\\c\",le=\"1\"} 2
h_seconds_bucket{cluster=\"b\\\\c\",le=\"+Inf\"} 3
h_seconds_sum{cluster=\"b\\\\c\"} 0.75
h_seconds_count{cluster=\"b\\\\c\"} 3
# HELP empty No series.
# TYPE empty gauge
";
        assert_eq!(text(&e.finish()), want);
    }
}
