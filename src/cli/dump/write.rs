//! The dump's text: one `List` written object by object as the pages of each kind arrive, so
//! that a dump of a large cluster is never held whole, in YAML (block style, as kubectl
//! prints it) or JSON. Its `kind: List` is written last, as kubectl writes it: a dump cut
//! short (a full disk, a killed process) has none, and `plan` refuses it rather than read
//! part of a cluster as the whole.

use std::io::{self, Write};

use serde_json::Value;

/// How the dump is written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
}

/// A `List` being written.
pub(super) struct ListWriter<W: Write> {
    out: W,
    format: Format,
    items: usize,
}

impl<W: Write> ListWriter<W> {
    /// Starts the list; `header` lines are comments at the top of a YAML dump (JSON has none).
    pub(super) fn start(mut out: W, format: Format, header: &[String]) -> io::Result<Self> {
        match format {
            Format::Yaml => {
                for line in header {
                    writeln!(out, "# {line}")?;
                }
                out.write_all(b"apiVersion: v1\n")?;
            }
            Format::Json => out.write_all(b"{\"apiVersion\": \"v1\",\n\"items\": [")?,
        }
        Ok(ListWriter {
            out,
            format,
            items: 0,
        })
    }

    /// One item of the list: an object, or a typed list of a kind listed empty.
    pub(super) fn item(&mut self, value: &Value) -> io::Result<()> {
        match self.format {
            Format::Yaml => {
                if self.items == 0 {
                    self.out.write_all(b"items:\n")?;
                }
                // A one-element sequence is the item with its `- `, at the list's indentation.
                serde_saphyr::to_io_writer(&mut self.out, &[value]).map_err(io::Error::other)?;
            }
            Format::Json => {
                self.out
                    .write_all(if self.items == 0 { b"\n" } else { b",\n" })?;
                serde_json::to_writer(&mut self.out, value)?;
            }
        }
        self.items += 1;
        Ok(())
    }

    /// Ends the list (`footer` lines are comments at the end of a YAML dump), flushed.
    pub(super) fn finish(mut self, footer: &[String]) -> io::Result<W> {
        match self.format {
            Format::Yaml => {
                if self.items == 0 {
                    self.out.write_all(b"items: []\n")?;
                }
                for line in footer {
                    writeln!(self.out, "# {line}")?;
                }
                self.out.write_all(b"kind: List\nmetadata: {}\n")?;
            }
            Format::Json => self
                .out
                .write_all(b"\n],\n\"kind\": \"List\",\n\"metadata\": {}}\n")?,
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A kind the dump was not allowed to list: its typed empty list, marked with why, so that
/// `plan` treats it as the hub treats a kind it may not read (unread, not empty).
pub(super) fn refused_list(api_version: &str, kind: &str, why: &str) -> Value {
    let mut list = empty_list(api_version, kind);
    list["metadata"]["annotations"] =
        serde_json::json!({ crate::model::dump::UNREADABLE_ANNOTATION: why });
    list
}

/// A kind listed empty, as the dump records it: a typed empty list (`JobList`), which the
/// dump reader counts as the kind listed, so that none of it means none in the cluster.
pub(super) fn empty_list(api_version: &str, kind: &str) -> Value {
    serde_json::json!({
        "apiVersion": api_version,
        "kind": format!("{kind}List"),
        "metadata": {},
        "items": [],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::dump::SnapshotBuilder;
    use serde_json::json;

    /// Label values YAML would read as something else than a string if left unquoted.
    const TRICKY: [&str; 20] = [
        "yes",
        "no",
        "on",
        "off",
        "y",
        "n",
        "true",
        "null",
        "~",
        "",
        "1",
        "1.5",
        "0x1F",
        "0o17",
        "1e5",
        ".inf",
        "12:30",
        "- x",
        "a: b",
        "two\nlines",
    ];

    fn write(format: Format, items: &[Value]) -> String {
        let mut w = ListWriter::start(Vec::new(), format, &["made by a test".into()]).unwrap();
        for item in items {
            w.item(item).unwrap();
        }
        String::from_utf8(w.finish(&["the end".into()]).unwrap()).unwrap()
    }

    fn node() -> Value {
        let labels: serde_json::Map<String, Value> = TRICKY
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("l{i}"), json!(v)))
            .collect();
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": labels},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}}})
    }

    #[test]
    fn both_formats_read_back_as_written() {
        let items = [node(), empty_list("batch/v1", "Job")];
        for format in [Format::Yaml, Format::Json] {
            let text = write(format, &items);
            let mut b = SnapshotBuilder::default();
            b.add_text(&text, "dump")
                .unwrap_or_else(|e| panic!("{format:?}: {e}\n{text}"));
            let (s, report) = b.finish();
            assert_eq!(report.objects, 1, "{text}");
            let labels = &s.nodes[0].labels;
            for (i, v) in TRICKY.iter().enumerate() {
                assert_eq!(labels.get(&format!("l{i}")), Some(*v), "{format:?}: {text}");
            }
            let jobs = crate::model::controller::ControllerKind::Job;
            assert_eq!(
                s.controllers.listing(jobs),
                &crate::model::controller::Listing::Complete
            );
        }
    }

    #[test]
    fn yaml_says_what_it_is_and_ends_with_its_kind() {
        let text = write(Format::Yaml, &[node()]);
        assert!(
            text.starts_with("# made by a test\napiVersion: v1\nitems:\n- "),
            "{text}"
        );
        assert!(
            text.ends_with("# the end\nkind: List\nmetadata: {}\n"),
            "{text}"
        );
        assert!(write(Format::Yaml, &[]).contains("items: []\n"));
        let json: Value = serde_json::from_str(&write(Format::Json, &[])).unwrap();
        assert_eq!(
            json,
            json!({"apiVersion": "v1", "items": [], "kind": "List", "metadata": {}})
        );
    }

    /// A dump cut short is refused, not read as a smaller cluster.
    #[test]
    fn a_dump_cut_short_does_not_read() {
        for format in [Format::Yaml, Format::Json] {
            let text = write(format, &[node(), node()]);
            let cut = &text[..text.rfind("kind: List").unwrap_or(text.len() - 30)];
            let mut b = SnapshotBuilder::default();
            assert!(b.add_text(cut, "dump").is_err(), "{format:?}: {cut}");
        }
    }
}
