//! The list type.

use std::collections::VecDeque;

use super::Blob;

/// A list of byte strings. Redis 7.0 always reports `quicklist`.
#[derive(Debug, Clone, Default)]
pub struct List {
    /// The elements, head first.
    pub items: VecDeque<Blob>,
}

impl List {
    /// An empty list.
    pub fn new() -> List {
        List::default()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when empty (an empty list is never stored under a key).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// OBJECT ENCODING.
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }
}
