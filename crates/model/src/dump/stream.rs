//! Reading a dump's text one object at a time, as the hub's cache reads a watch: each object
//! is decoded, handed over and dropped before the next is read, so what `plan` holds is the
//! text and the lean snapshot, never the whole dump as a tree (for pods with many containers
//! that tree was about 26 times the text).
//!
//! A `List` (what `kubectl get -o yaml` prints, its `items` before its `kind`) is read by
//! its `items` one by one; a top-level sequence (a JSON array) likewise. YAML documents are
//! found by their markers, as the YAML specification places them (a `---` or `...` at the
//! start of a line can be nothing else), and each is read alone.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::DumpError;

/// What reading stopped on: the text itself, or an object the caller refused.
pub(super) enum Stop {
    Syntax(String),
    Object(DumpError),
}

/// Hands every object of `text` to `add`, with where it is (`document 2, items[5]`), in order.
pub(super) fn for_each_object(text: &str, add: &mut Add<'_>) -> Result<(), Stop> {
    let mut reader = Reader { add, refused: None };
    let read = match json_documents(text) {
        Some(documents) => read_json(text, documents, &mut reader),
        None => read_yaml(text, &mut reader),
    };
    match (read, reader.refused) {
        (_, Some(refused)) => Err(Stop::Object(refused)),
        (Err(syntax), None) => Err(Stop::Syntax(syntax)),
        (Ok(()), None) => Ok(()),
    }
}

/// The caller's handling of one object: the object and where it is in the text.
pub(super) type Add<'a> = dyn FnMut(Value, &str) -> Result<(), DumpError> + 'a;

struct Reader<'r, 'a> {
    add: &'r mut Add<'a>,
    /// Why the caller refused an object: reading stops, and this, not the parser's
    /// message, is the error.
    refused: Option<DumpError>,
}

impl Reader<'_, '_> {
    fn object<E: de::Error>(&mut self, value: Value, item: &str) -> Result<(), E> {
        (self.add)(value, item).map_err(|refused| {
            self.refused = Some(refused);
            E::custom("an object was refused")
        })
    }
}

/// JSON: one value or several concatenated. Flow-style YAML (`{kind: List, items: []}`)
/// starts like JSON and is not: the text is checked whole first (without building anything),
/// so that YAML is read as YAML, not half as JSON. How many values it holds, when JSON.
fn json_documents(text: &str) -> Option<usize> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with('{') && !trimmed.starts_with('[') {
        return None;
    }
    let mut count = 0;
    for value in serde_json::Deserializer::from_str(text).into_iter::<IgnoredAny>() {
        value.ok()?;
        count += 1;
    }
    Some(count)
}

fn read_json(text: &str, documents: usize, reader: &mut Reader<'_, '_>) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_str(text);
    for d in 0..documents {
        let item = document_name(d, documents);
        Document {
            reader,
            item: &item,
        }
        .deserialize(&mut de)
        .map_err(|e| e.to_string())?;
    }
    de.end().map_err(|e| e.to_string())
}

fn read_yaml(text: &str, reader: &mut Reader<'_, '_>) -> Result<(), String> {
    let documents: Vec<&str> = yaml_documents(text)
        .into_iter()
        .filter(|d| !is_empty_document(d))
        .collect();
    for (d, document) in documents.iter().enumerate() {
        let item = document_name(d, documents.len());
        let read = serde_saphyr::with_deserializer_from_str_with_options(
            document,
            super::yaml_options(document.len()),
            |de| {
                Document {
                    reader,
                    item: &item,
                }
                .deserialize(de)
            },
        );
        if let Err(e) = read {
            return Err(whole_text_error(text).unwrap_or_else(|| format!("{item}: {e}")));
        }
    }
    Ok(())
}

/// The parser's own message for the whole text, so that lines and columns count from the
/// start of the file, not of the document.
fn whole_text_error(text: &str) -> Option<String> {
    serde_saphyr::from_multiple_with_options::<IgnoredAny>(text, super::yaml_options(text.len()))
        .err()
        .map(|e| e.to_string())
}

fn document_name(index: usize, count: usize) -> String {
    if count > 1 {
        format!("document {}", index + 1)
    } else {
        "document".to_string()
    }
}

/// The text of each YAML document, markers included. A new document starts at a `---` line
/// once the current one has a marker or content (directives and comments before a `---`
/// belong to its document), and after a `...` line.
fn yaml_documents(text: &str) -> Vec<&str> {
    let mut documents = Vec::new();
    let (mut start, mut begun, mut at) = (0, false, 0);
    for line in text.split_inclusive('\n') {
        if is_marker(line, "---") {
            if begun {
                documents.push(&text[start..at]);
                start = at;
            }
            begun = true;
        } else if is_marker(line, "...") {
            documents.push(&text[start..at + line.len()]);
            (start, begun) = (at + line.len(), false);
        } else if !is_blank_or_comment(line) && !line.starts_with('%') {
            begun = true;
        }
        at += line.len();
    }
    documents.push(&text[start..]);
    documents
}

fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim_start();
    t.is_empty() || t.starts_with('#')
}

/// A document with nothing but markers, directives and comments: a trailing `---` holds no
/// object, as kubectl reads it too.
fn is_empty_document(document: &str) -> bool {
    document.split_inclusive('\n').all(|line| {
        is_blank_or_comment(line)
            || line.starts_with('%')
            || is_marker(line, "...")
            || line
                .strip_prefix("---")
                .is_some_and(|rest| is_blank_or_comment(rest) || rest.is_empty())
    })
}

/// One document: an object, a `List` (its items read one by one) or a sequence of either.
struct Document<'s, 'r, 'a> {
    reader: &'s mut Reader<'r, 'a>,
    item: &'s str,
}

impl<'de> DeserializeSeed<'de> for Document<'_, '_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Document<'_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes object, a List or a sequence of them")
    }

    /// Every field is kept but `items`, which is read object by object as it comes; what
    /// remains (kind, apiVersion, metadata) is handed over with `items` empty, so a `List`
    /// still says which kind it listed. No Kubernetes object has a top-level `items` list of
    /// its own, so one is a list's items whatever the kind says.
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        let mut fields = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = if key == "items" {
                map.next_value_seed(Items {
                    reader: &mut *self.reader,
                    item: self.item,
                })?
            } else {
                map.next_value::<Value>()?
            };
            fields.insert(key, value);
        }
        self.reader.object(Value::Object(fields), self.item)
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<(), S::Error> {
        let mut i = 0;
        loop {
            let item = format!("{}, [{i}]", self.item);
            let element = Document {
                reader: &mut *self.reader,
                item: &item,
            };
            if seq.next_element_seed(element)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.reader.object(Value::Bool(v), self.item)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.reader.object(Value::from(v), self.item)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.reader.object(Value::from(v), self.item)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.reader.object(Value::from(v), self.item)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.reader.object(Value::from(v), self.item)
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.reader.object(Value::Null, self.item)
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.reader.object(Value::Null, self.item)
    }
}

/// A top-level `items`: when a sequence, each element is handed over as it is read and an
/// empty list is kept in its place; anything else is kept, for the caller to refuse.
struct Items<'s, 'r, 'a> {
    reader: &'s mut Reader<'r, 'a>,
    item: &'s str,
}

impl<'de> DeserializeSeed<'de> for Items<'_, '_, '_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Items<'_, '_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list's items")
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Value, S::Error> {
        let mut i = 0;
        while let Some(object) = seq.next_element::<Value>()? {
            self.reader
                .object(object, &format!("{}, items[{i}]", self.item))?;
            i += 1;
        }
        Ok(Value::Array(Vec::new()))
    }

    fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<Value, M::Error> {
        Value::deserialize(de::value::MapAccessDeserializer::new(map))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_split_where_the_yaml_specification_puts_markers() {
        let text =
            "%YAML 1.2\n---\na: 1\n---\nb: |\n  --- not a marker\n...\n# c\n--- {c: 3}\n----\n";
        assert_eq!(
            yaml_documents(text),
            vec![
                "%YAML 1.2\n---\na: 1\n",
                "---\nb: |\n  --- not a marker\n...\n",
                "# c\n--- {c: 3}\n----\n",
            ]
        );
        assert!(is_empty_document("---\n# nothing\n...\n"));
        assert!(!is_empty_document("--- {c: 3}\n"));
    }
}
