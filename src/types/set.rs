//! The set type.

use super::Blob;
use crate::keyspace::dict::Dict;

/// A set: a sorted vector of integers while every member is an integer and
/// there are at most `set-max-intset-entries` (Redis's intset), a [`Dict`]
/// otherwise.
#[derive(Debug, Clone)]
pub enum Set {
    /// Sorted, deduplicated integers.
    Intset(Vec<i64>),
    /// General encoding.
    Table(Dict<Blob, ()>),
}

impl Default for Set {
    fn default() -> Self {
        Set::Intset(Vec::new())
    }
}

impl Set {
    /// Number of members.
    pub fn len(&self) -> usize {
        match self {
            Set::Intset(v) => v.len(),
            Set::Table(d) => d.len(),
        }
    }

    /// True when there are no members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Intset(_) => "intset",
            Set::Table(_) => "hashtable",
        }
    }
}
