//! A value written with its long lists cut: a list keeps a window of its entries, and the
//! struct holding it says how many it left out in a field of its own (`pendingPodsOmitted`
//! beside `pendingPods`), present only when some were. The value is written as its own
//! `Serialize` says, cut on the way: nothing is copied, so a plan of any size costs only what
//! is shown, and the fields the engine adds later appear as they are.

use std::cell::Cell;

use serde::ser::{Serialize, SerializeSeq, SerializeStruct, Serializer};

/// How much of a value to write.
pub(super) enum Cut {
    /// All of it.
    Whole,
    /// A list: `take` entries after the first `skip`, each cut by `each`.
    List {
        skip: usize,
        take: usize,
        each: Box<Cut>,
    },
    /// A struct: the fields named cut as said, the others whole.
    Fields(Vec<Field>),
}

/// A field of a struct and how it is cut.
pub(super) struct Field {
    /// As written (`pendingPods`).
    pub name: &'static str,
    /// The field that counts what the cut left out (`pendingPodsOmitted`).
    pub omitted: &'static str,
    pub cut: Cut,
}

static WHOLE: Cut = Cut::Whole;

/// `value`, cut as `cut` says when serialized.
pub(super) struct Trimmed<'a, T: ?Sized> {
    value: &'a T,
    cut: &'a Cut,
    /// Where a list writes how many of its entries it left out.
    left_out: Option<&'a Cell<usize>>,
}

impl<'a, T: ?Sized> Trimmed<'a, T> {
    pub(super) fn new(value: &'a T, cut: &'a Cut) -> Self {
        Trimmed {
            value,
            cut,
            left_out: None,
        }
    }
}

impl<T: Serialize + ?Sized> Serialize for Trimmed<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.cut {
            Cut::Whole => self.value.serialize(s),
            cut => self.value.serialize(Trimmer {
                inner: s,
                cut,
                left_out: self.left_out,
            }),
        }
    }
}

/// A serializer that passes everything to `inner`, cutting the lists and structs `cut` names.
struct Trimmer<'a, S> {
    inner: S,
    cut: &'a Cut,
    left_out: Option<&'a Cell<usize>>,
}

impl<'a, S> Trimmer<'a, S> {
    /// The same cut, one level down (through an `Option` or a newtype).
    fn nested<'b, T: ?Sized>(&self, value: &'b T) -> Trimmed<'b, T>
    where
        'a: 'b,
    {
        Trimmed {
            value,
            cut: self.cut,
            left_out: self.left_out,
        }
    }
}

macro_rules! pass {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {
        $(fn $method(self, $($arg: $ty),*) -> Result<S::Ok, S::Error> {
            self.inner.$method($($arg),*)
        })*
    };
}

impl<'a, S: Serializer> Serializer for Trimmer<'a, S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = TrimSeq<'a, S::SerializeSeq>;
    type SerializeTuple = S::SerializeTuple;
    type SerializeTupleStruct = S::SerializeTupleStruct;
    type SerializeTupleVariant = S::SerializeTupleVariant;
    type SerializeMap = S::SerializeMap;
    type SerializeStruct = TrimStruct<'a, S::SerializeStruct>;
    type SerializeStructVariant = S::SerializeStructVariant;

    pass!(
        serialize_bool(v: bool),
        serialize_i8(v: i8),
        serialize_i16(v: i16),
        serialize_i32(v: i32),
        serialize_i64(v: i64),
        serialize_i128(v: i128),
        serialize_u8(v: u8),
        serialize_u16(v: u16),
        serialize_u32(v: u32),
        serialize_u64(v: u64),
        serialize_u128(v: u128),
        serialize_f32(v: f32),
        serialize_f64(v: f64),
        serialize_char(v: char),
        serialize_str(v: &str),
        serialize_bytes(v: &[u8]),
        serialize_none(),
        serialize_unit(),
        serialize_unit_struct(name: &'static str),
        serialize_unit_variant(name: &'static str, index: u32, variant: &'static str),
    );

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<S::Ok, S::Error> {
        let nested = self.nested(value);
        self.inner.serialize_some(&nested)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        let nested = self.nested(value);
        self.inner.serialize_newtype_struct(name, &nested)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        self.inner
            .serialize_newtype_variant(name, index, variant, value)
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        let (skip, take, each) = match self.cut {
            Cut::List { skip, take, each } => (*skip, *take, &**each),
            _ => (0, usize::MAX, &WHOLE),
        };
        let shown = len.map(|n| n.saturating_sub(skip).min(take));
        Ok(TrimSeq {
            inner: self.inner.serialize_seq(shown)?,
            skip,
            take,
            each,
            seen: 0,
            left: 0,
            left_out: self.left_out,
        })
    }

    fn serialize_tuple(self, len: usize) -> Result<S::SerializeTuple, S::Error> {
        self.inner.serialize_tuple(len)
    }

    fn serialize_tuple_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<S::SerializeTupleStruct, S::Error> {
        self.inner.serialize_tuple_struct(name, len)
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<S::SerializeTupleVariant, S::Error> {
        self.inner
            .serialize_tuple_variant(name, index, variant, len)
    }

    fn serialize_map(self, len: Option<usize>) -> Result<S::SerializeMap, S::Error> {
        self.inner.serialize_map(len)
    }

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        let fields: &[Field] = match self.cut {
            Cut::Fields(fields) => fields,
            _ => &[],
        };
        Ok(TrimStruct {
            inner: self.inner.serialize_struct(name, len + fields.len())?,
            fields,
        })
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<S::SerializeStructVariant, S::Error> {
        self.inner
            .serialize_struct_variant(name, index, variant, len)
    }
}

/// A list written in part: the entries outside the window are counted, not written.
struct TrimSeq<'a, Q> {
    inner: Q,
    skip: usize,
    take: usize,
    each: &'a Cut,
    seen: usize,
    left: usize,
    left_out: Option<&'a Cell<usize>>,
}

impl<Q: SerializeSeq> SerializeSeq for TrimSeq<'_, Q> {
    type Ok = Q::Ok;
    type Error = Q::Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Q::Error> {
        let index = self.seen;
        self.seen += 1;
        if index < self.skip || index - self.skip >= self.take {
            self.left += 1;
            return Ok(());
        }
        self.inner
            .serialize_element(&Trimmed::new(value, self.each))
    }

    fn end(self) -> Result<Q::Ok, Q::Error> {
        if let Some(cell) = self.left_out {
            cell.set(self.left);
        }
        self.inner.end()
    }
}

/// A struct whose named fields are cut, each followed by its count of what was left out.
struct TrimStruct<'a, Q> {
    inner: Q,
    fields: &'a [Field],
}

impl<Q: SerializeStruct> SerializeStruct for TrimStruct<'_, Q> {
    type Ok = Q::Ok;
    type Error = Q::Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Q::Error> {
        let Some(field) = self.fields.iter().find(|f| f.name == key) else {
            return self.inner.serialize_field(key, value);
        };
        let left = Cell::new(0);
        let cut = Trimmed {
            value,
            cut: &field.cut,
            left_out: Some(&left),
        };
        self.inner.serialize_field(key, &cut)?;
        match left.get() {
            0 => Ok(()),
            n => self.inner.serialize_field(field.omitted, &n),
        }
    }

    fn skip_field(&mut self, key: &'static str) -> Result<(), Q::Error> {
        self.inner.skip_field(key)
    }

    fn end(self) -> Result<Q::Ok, Q::Error> {
        self.inner.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use serde_json::json;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Outer {
        name: &'static str,
        items: Vec<Inner>,
        maybe: Option<Vec<u32>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        empty: Vec<u32>,
    }

    #[derive(Serialize)]
    struct Inner {
        id: u32,
        tags: Vec<&'static str>,
    }

    fn outer() -> Outer {
        Outer {
            name: "o",
            items: (0..5)
                .map(|id| Inner {
                    id,
                    tags: vec!["a", "b", "c"],
                })
                .collect(),
            maybe: Some((0..10).collect()),
            empty: Vec::new(),
        }
    }

    fn list(skip: usize, take: usize, each: Cut) -> Cut {
        Cut::List {
            skip,
            take,
            each: Box::new(each),
        }
    }

    fn written<T: Serialize>(value: &T, cut: &Cut) -> serde_json::Value {
        let text = serde_json::to_string(&Trimmed::new(value, cut)).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn lists_keep_their_window_and_say_how_many_they_left_out() {
        let tags = Cut::Fields(vec![Field {
            name: "tags",
            omitted: "tagsOmitted",
            cut: list(0, 1, Cut::Whole),
        }]);
        let cut = Cut::Fields(vec![
            Field {
                name: "items",
                omitted: "itemsOmitted",
                cut: list(1, 2, tags),
            },
            Field {
                name: "maybe",
                omitted: "maybeOmitted",
                cut: list(8, 5, Cut::Whole),
            },
        ]);
        let expected = json!({
            "name": "o",
            "items": [{"id": 1, "tags": ["a"], "tagsOmitted": 2},
                      {"id": 2, "tags": ["a"], "tagsOmitted": 2}],
            "itemsOmitted": 3,
            "maybe": [8, 9],
            "maybeOmitted": 8,
        });
        assert_eq!(written(&outer(), &cut), expected);
    }

    #[test]
    fn nothing_left_out_writes_the_value_as_it_is() {
        let cut = Cut::Fields(vec![Field {
            name: "items",
            omitted: "itemsOmitted",
            cut: list(0, 100, Cut::Whole),
        }]);
        let whole = serde_json::to_value(outer()).unwrap();
        assert_eq!(written(&outer(), &cut), whole);
        assert_eq!(written(&outer(), &Cut::Whole), whole);
        // A window past the end: an empty list, all of it counted.
        let past = Cut::Fields(vec![Field {
            name: "items",
            omitted: "itemsOmitted",
            cut: list(7, 3, Cut::Whole),
        }]);
        let v = written(&outer(), &past);
        assert_eq!(v["items"], json!([]));
        assert_eq!(v["itemsOmitted"], 5);
    }
}
