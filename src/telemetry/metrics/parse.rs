//! The exposition read back: what [`super::Exposition`] writes, as families of samples, so
//! that the OTLP export carries exactly what `/metrics` serves (`otel_metrics`).

use super::Type;

/// One metric family: its header and its samples, in the order written.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: String,
    pub kind: Type,
    pub help: String,
    pub samples: Vec<Sample>,
}

/// One sample line: for histograms, `name` is the family's with `_bucket`, `_sum` or `_count`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// One histogram series (the samples sharing labels but `le`), buckets cumulative.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSeries {
    pub labels: Vec<(String, String)>,
    /// The finite upper bounds, increasing.
    pub bounds: Vec<f64>,
    /// Observations at or under each bound.
    pub cumulative: Vec<u64>,
    pub count: u64,
    pub sum: f64,
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("line {line} of the exposition: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// Reads an exposition in the text format [`super::Exposition`] writes.
pub fn parse(text: &str) -> Result<Vec<Family>, ParseError> {
    let mut families: Vec<Family> = Vec::new();
    let mut help = String::new();
    for (i, line) in text.lines().enumerate() {
        let bad = |message: String| ParseError {
            line: i + 1,
            message,
        };
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = unescape(rest.split_once(' ').map_or("", |(_, h)| h));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').ok_or_else(|| bad("no type".into()))?;
            families.push(Family {
                name: name.to_string(),
                kind: kind_of(kind).ok_or_else(|| bad(format!("unknown type {kind:?}")))?,
                help: std::mem::take(&mut help),
                samples: Vec::new(),
            });
        } else if !line.is_empty() && !line.starts_with('#') {
            let sample = sample(line).map_err(bad)?;
            let family = families
                .last_mut()
                .filter(|f| belongs(&sample.name, f))
                .ok_or_else(|| bad(format!("{} is not of the family above it", sample.name)))?;
            family.samples.push(sample);
        }
    }
    Ok(families)
}

fn kind_of(text: &str) -> Option<Type> {
    match text {
        "counter" => Some(Type::Counter),
        "gauge" => Some(Type::Gauge),
        "histogram" => Some(Type::Histogram),
        _ => None,
    }
}

fn belongs(sample: &str, family: &Family) -> bool {
    match family.kind {
        Type::Histogram => sample
            .strip_prefix(family.name.as_str())
            .is_some_and(|s| matches!(s, "_bucket" | "_sum" | "_count")),
        _ => sample == family.name,
    }
}

/// `name{k="v",...} value` or `name value`.
fn sample(line: &str) -> Result<Sample, String> {
    let (series, value) = line
        .rsplit_once(' ')
        .ok_or_else(|| format!("{line:?} has no value"))?;
    let value = number(value).ok_or_else(|| format!("{value:?} is not a number"))?;
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => {
            let inner = rest
                .strip_suffix('}')
                .ok_or_else(|| format!("{series:?} has unclosed labels"))?;
            (name, labels(inner)?)
        }
        None => (series, Vec::new()),
    };
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

fn number(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => text.parse().ok(),
    }
}

/// `k="v",k2="v2"` with `\\`, `\"` and `\n` escaped in values.
fn labels(mut text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    while !text.is_empty() {
        let (key, rest) = text
            .split_once("=\"")
            .ok_or_else(|| format!("{text:?} is not key=\"value\""))?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err(format!("{rest:?} ends in an escape")),
                },
                Some((_, c)) => value.push(c),
                None => return Err(format!("{rest:?} has an unclosed value")),
            }
        };
        pairs.push((key.to_string(), value));
        text = rest[end + 1..]
            .strip_prefix(',')
            .unwrap_or(&rest[end + 1..]);
    }
    Ok(pairs)
}

fn unescape(help: &str) -> String {
    let mut out = String::with_capacity(help.len());
    let mut chars = help.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

impl Family {
    /// A histogram family's series, each with its finite buckets, sum and count.
    pub fn histograms(&self) -> Vec<HistogramSeries> {
        let mut series: Vec<HistogramSeries> = Vec::new();
        for s in &self.samples {
            let le = s.labels.iter().find(|(k, _)| k == "le").map(|(_, v)| v);
            let labels: Vec<(String, String)> = s
                .labels
                .iter()
                .filter(|(k, _)| k != "le")
                .cloned()
                .collect();
            let at = match series.iter().position(|h| h.labels == labels) {
                Some(at) => at,
                None => {
                    series.push(HistogramSeries {
                        labels,
                        bounds: Vec::new(),
                        cumulative: Vec::new(),
                        count: 0,
                        sum: 0.0,
                    });
                    series.len() - 1
                }
            };
            let h = &mut series[at];
            let bound = le.and_then(|l| number(l.as_str()));
            match (s.name.strip_prefix(self.name.as_str()), bound) {
                (Some("_bucket"), Some(bound)) if bound.is_finite() => {
                    h.bounds.push(bound);
                    h.cumulative.push(s.value as u64);
                }
                (Some("_sum"), _) => h.sum = s.value,
                (Some("_count"), _) => h.count = s.value as u64,
                _ => {}
            }
        }
        series
    }
}

#[cfg(test)]
mod tests {
    use super::super::Exposition;
    use super::*;

    #[test]
    fn what_the_encoder_writes_reads_back_the_same() {
        let mut e = Exposition::new();
        e.family("x_total", Type::Counter, "Things.\nDone \\ here.")
            .sample(&[("cluster", "a\"b\\c\nd,e=\"f\"")], 3.0)
            .sample(&[("cluster", "b")], 0.25);
        e.family("g", Type::Gauge, "G.")
            .sample(&[], f64::INFINITY)
            .sample(&[("state", "ready")], 1e-7);
        e.family("d_seconds", Type::Histogram, "Durations.")
            .histogram(
                &[("cluster", "a")],
                [(0.5, 1), (1.0, 2)].into_iter(),
                1.25,
                3,
            )
            .histogram(
                &[("cluster", "b")],
                [(0.5, 0), (1.0, 0)].into_iter(),
                0.0,
                0,
            );
        e.family("empty", Type::Gauge, "No samples.");
        let families = parse(&e.finish()).expect("parses");
        let names: Vec<&str> = families.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["x_total", "g", "d_seconds", "empty"]);
        let counter = &families[0];
        assert_eq!(counter.kind, Type::Counter);
        assert_eq!(counter.help, "Things.\nDone \\ here.");
        assert_eq!(
            counter.samples[0].labels,
            [("cluster".to_string(), "a\"b\\c\nd,e=\"f\"".to_string())]
        );
        assert_eq!(counter.samples[1].value, 0.25);
        assert_eq!(families[1].samples[0].value, f64::INFINITY);
        assert_eq!(families[1].samples[1].value, 1e-7);
        let histograms = families[2].histograms();
        assert_eq!(
            histograms[0],
            HistogramSeries {
                labels: vec![("cluster".into(), "a".into())],
                bounds: vec![0.5, 1.0],
                cumulative: vec![1, 2],
                count: 3,
                sum: 1.25,
            }
        );
        assert_eq!(histograms[1].count, 0);
        assert!(families[3].samples.is_empty());
    }

    #[test]
    fn text_that_is_not_an_exposition_is_an_error_with_its_line() {
        let stray = "# HELP a A.\n# TYPE a gauge\nb 1\n";
        assert_eq!(parse(stray).map_err(|e| e.line), Err(3));
        let unclosed = "# TYPE a gauge\na{x=\"1} 2\n";
        assert!(parse(unclosed).is_err());
        assert!(parse("# TYPE a summary\n").is_err());
        assert!(parse("# TYPE a gauge\na one\n").is_err());
    }
}
