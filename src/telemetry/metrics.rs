//! The hub's metrics as one typed snapshot, and its encoders. A [`MetricsSnapshot`] is a
//! list of families (name, help, type), each with its series (labels, and a number or a
//! histogram's cumulative buckets, sum and count); the hub fills one from its fleet view
//! when asked ([`MetricsBuilder`]), so there is no registry: the counters live in each
//! cluster's report. `text` writes it as the Prometheus exposition `/metrics` serves; the
//! OTLP export encodes the same snapshot into protobuf (`telemetry::otel_metrics`).

mod text;

pub use text::{CONTENT_TYPE, text};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Counter,
    Gauge,
    Histogram,
}

impl Type {
    pub fn as_str(self) -> &'static str {
        match self {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
        }
    }
}

/// Label pairs of one series, as the builder takes them.
pub type Labels<'a> = &'a [(&'a str, &'a str)];

/// Every family, in the order they were written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricsSnapshot {
    pub families: Vec<Family>,
}

impl MetricsSnapshot {
    pub fn builder() -> MetricsBuilder {
        MetricsBuilder::default()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: String,
    pub help: String,
    pub kind: Type,
    pub series: Vec<Series>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub labels: Vec<(String, String)>,
    pub value: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A counter's or a gauge's.
    Number(f64),
    Histogram(Histogram),
}

/// A histogram as Prometheus has it: per upper bound, the observations at or below it
/// (cumulative; `+Inf` is `count`), their sum and their count.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    pub buckets: Vec<(f64, u64)>,
    pub sum: f64,
    pub count: u64,
}

/// Fills a snapshot family by family; each family's series follow it.
#[derive(Debug, Default)]
pub struct MetricsBuilder {
    families: Vec<Family>,
}

impl MetricsBuilder {
    /// Starts a family. Every name is written once: call it once per family.
    pub fn family(&mut self, name: &str, kind: Type, help: &str) -> &mut Self {
        self.families.push(Family {
            name: name.to_string(),
            help: help.to_string(),
            kind,
            series: Vec::new(),
        });
        self
    }

    /// A series of the current family (counters and gauges).
    pub fn sample(&mut self, labels: Labels<'_>, value: f64) -> &mut Self {
        self.push(labels, Value::Number(value))
    }

    /// A histogram series of the current family: cumulative buckets without `+Inf`.
    pub fn histogram(
        &mut self,
        labels: Labels<'_>,
        buckets: impl Iterator<Item = (f64, u64)>,
        sum: f64,
        count: u64,
    ) -> &mut Self {
        let h = Histogram {
            buckets: buckets.collect(),
            sum,
            count,
        };
        self.push(labels, Value::Histogram(h))
    }

    pub fn finish(self) -> MetricsSnapshot {
        MetricsSnapshot {
            families: self.families,
        }
    }

    /// A series before any family has nowhere to go, and is dropped.
    fn push(&mut self, labels: Labels<'_>, value: Value) -> &mut Self {
        if let Some(family) = self.families.last_mut() {
            let labels = labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            family.series.push(Series { labels, value });
        }
        self
    }
}
