//! The hash type.

use super::Blob;
use crate::keyspace::dict::Dict;

/// A hash: a listpack-like vector of pairs while small (insertion order, as
/// Redis replies), a [`Dict`] once it passes `hash-max-listpack-*`.
#[derive(Debug, Clone)]
pub enum Hash {
    /// Compact encoding: pairs in insertion order.
    Listpack(Vec<(Blob, Blob)>),
    /// General encoding.
    Table(Dict<Blob, Blob>),
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Listpack(Vec::new())
    }
}

impl Hash {
    /// Number of fields.
    pub fn len(&self) -> usize {
        match self {
            Hash::Listpack(v) => v.len(),
            Hash::Table(d) => d.len(),
        }
    }

    /// True when there are no fields.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING.
    pub fn encoding(&self) -> &'static str {
        match self {
            Hash::Listpack(_) => "listpack",
            Hash::Table(_) => "hashtable",
        }
    }
}
