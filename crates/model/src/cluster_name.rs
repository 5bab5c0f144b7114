//! A cluster's name: what fleet.toml's `[[clusters]] name` (or the membership source that
//! found it) calls it, and what every report, metric label, event and shared failure names
//! it by.

use std::fmt;
use std::sync::Arc;

/// A cluster's name, as in fleet.toml (`[[clusters]] name`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterName(Arc<str>);

impl ClusterName {
    pub fn new(name: &str) -> Self {
        ClusterName(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for ClusterName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for ClusterName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(ClusterName::new(&name))
    }
}

impl PartialEq<str> for ClusterName {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for ClusterName {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl From<&str> for ClusterName {
    fn from(name: &str) -> Self {
        ClusterName::new(name)
    }
}

/// A name is read as the text it is (comparisons, lookups in maps keyed by text, formatting).
impl std::ops::Deref for ClusterName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// Maps keyed by name are looked up by its text (names order as their text does).
impl std::borrow::Borrow<str> for ClusterName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ClusterName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<String> for ClusterName {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}
