//! The Prometheus text exposition format (version 0.0.4), written by hand: the hub's
//! metrics are read off its reports at scrape time, so it needs an encoder, not a registry.
//! `parse` reads it back, for the OTLP export of the same metrics.

mod parse;

use std::fmt::Write;

pub use parse::{Family, HistogramSeries, ParseError, Sample, parse};

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Counter,
    Gauge,
    Histogram,
}

impl Type {
    fn as_str(self) -> &'static str {
        match self {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
        }
    }
}

/// Label pairs of one sample.
pub type Labels<'a> = &'a [(&'a str, &'a str)];

/// Writes metric families one after another; each family's samples follow its header.
#[derive(Default)]
pub struct Exposition {
    out: String,
    /// The family being written: a sample's name must belong to it.
    current: String,
}

impl Exposition {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a family. Every name is written once: call it once per family.
    pub fn family(&mut self, name: &str, kind: Type, help: &str) -> &mut Self {
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.as_str());
        self.current = name.to_string();
        self
    }

    /// A sample of the current family (counters and gauges).
    pub fn sample(&mut self, labels: Labels<'_>, value: f64) -> &mut Self {
        let name = self.current.clone();
        self.line(&name, labels, None, value);
        self
    }

    /// A histogram of the current family: cumulative buckets, `+Inf`, sum and count.
    pub fn histogram(
        &mut self,
        labels: Labels<'_>,
        buckets: impl Iterator<Item = (f64, u64)>,
        sum: f64,
        count: u64,
    ) -> &mut Self {
        let name = self.current.clone();
        let bucket = format!("{name}_bucket");
        for (bound, n) in buckets {
            self.line(&bucket, labels, Some(&format_value(bound)), n as f64);
        }
        self.line(&bucket, labels, Some("+Inf"), count as f64);
        self.line(&format!("{name}_sum"), labels, None, sum);
        self.line(&format!("{name}_count"), labels, None, count as f64);
        self
    }

    pub fn finish(self) -> String {
        self.out
    }

    fn line(&mut self, name: &str, labels: Labels<'_>, le: Option<&str>, value: f64) {
        self.out.push_str(name);
        let mut pairs = labels.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>();
        if let Some(le) = le {
            pairs.push(("le", le));
        }
        if !pairs.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in pairs.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", format_value(value));
    }
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

    #[test]
    fn writes_headers_samples_and_escaped_labels() {
        let mut e = Exposition::new();
        e.family("x_total", Type::Counter, "Things.\nDone.")
            .sample(&[("cluster", "a\"b\\c\nd")], 3.0);
        let text = e.finish();
        assert_eq!(
            text,
            "# HELP x_total Things.\\nDone.\n# TYPE x_total counter\n\
             x_total{cluster=\"a\\\"b\\\\c\\nd\"} 3\n"
        );
    }

    #[test]
    fn histograms_end_with_inf_sum_and_count() {
        let mut e = Exposition::new();
        e.family("d_seconds", Type::Histogram, "Durations.")
            .histogram(
                &[("cluster", "a")],
                [(0.5, 1), (1.0, 2)].into_iter(),
                1.25,
                3,
            );
        let text = e.finish();
        assert!(text.contains("d_seconds_bucket{cluster=\"a\",le=\"0.5\"} 1\n"));
        assert!(text.contains("d_seconds_bucket{cluster=\"a\",le=\"+Inf\"} 3\n"));
        assert!(text.contains("d_seconds_sum{cluster=\"a\"} 1.25\n"));
        assert!(text.contains("d_seconds_count{cluster=\"a\"} 3\n"));
    }

    #[test]
    fn values_without_labels_and_special_floats() {
        let mut e = Exposition::new();
        e.family("g", Type::Gauge, "G.")
            .sample(&[], f64::NAN)
            .sample(&[], f64::INFINITY);
        assert_eq!(e.finish(), "# HELP g G.\n# TYPE g gauge\ng NaN\ng +Inf\n");
    }
}
