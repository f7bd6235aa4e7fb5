//! The sorted-set type.

use super::Blob;

/// A sorted set: a vector of (member, score) pairs ordered by (score,
/// member) while small (Redis's listpack), a member→score map plus an
/// order-statistic structure once it passes `zset-max-listpack-*`.
#[derive(Debug, Clone)]
pub enum ZSet {
    /// Compact encoding, ordered by (score, member).
    Listpack(Vec<(Blob, f64)>),
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet::Listpack(Vec::new())
    }
}

impl ZSet {
    /// Number of members.
    pub fn len(&self) -> usize {
        match self {
            ZSet::Listpack(v) => v.len(),
        }
    }

    /// True when there are no members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING.
    pub fn encoding(&self) -> &'static str {
        match self {
            ZSet::Listpack(_) => "listpack",
        }
    }
}
