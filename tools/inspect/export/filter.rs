//! Which keys `export` hands on (`--db`, `--type`, `--match`,
//! `--skip-expired`), for the value-model path and the RDB JSON fast path
//! alike.

use crate::source::KeyValue;

/// Which keys `export` hands on.
pub(super) struct Filter<'a> {
    pub(super) db: Option<usize>,
    pub(super) kind: Option<&'a str>,
    pub(super) pattern: Option<&'a [u8]>,
    pub(super) skip_expired: bool,
    pub(super) now_ms: i64,
}

impl Filter<'_> {
    pub(super) fn accepts(&self, kv: &KeyValue<'_>) -> bool {
        self.accepts_parts(kv.db, kv.key, kv.value.type_name(), kv.expire_ms)
    }

    /// [`Filter::accepts`] from what a key record says before its value is
    /// read (`type_name` as TYPE reports it).
    pub(super) fn accepts_parts(
        &self,
        db: usize,
        key: &[u8],
        type_name: &str,
        expire_ms: Option<i64>,
    ) -> bool {
        self.db.is_none_or(|d| d == db)
            && self.kind.is_none_or(|t| t == type_name)
            && !(self.skip_expired && expire_ms.is_some_and(|at| at <= self.now_ms))
            && self
                .pattern
                // KEYS treats a lone `*` as "all keys", the empty key too.
                .is_none_or(|p| p == b"*" || hozon::tools::glob_matches(p, key, false))
    }
}
