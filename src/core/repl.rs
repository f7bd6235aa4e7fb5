//! The engine's replication state (docs/replication.md, "Terms"): the
//! ids and offsets INFO replication and ROLE report. Until replication
//! runs (issue 25), an engine is a master without a backlog: its offset
//! does not move and it has no secondary id.

use crate::repl::ids::ReplId;

/// Replication ids and offsets.
#[derive(Debug, Clone)]
pub(crate) struct ReplState {
    /// This history's id (random at start, as Redis's).
    pub(crate) replid: ReplId,
    /// The previous history's id, 40 `0`s when none.
    pub(crate) replid2: ReplId,
    /// The first offset `replid2` does not cover; -1 when none.
    pub(crate) second_replid_offset: i64,
    /// The offset of the last stream byte produced.
    pub(crate) master_repl_offset: i64,
}

impl ReplState {
    /// A master that never had a replica: a new id, no secondary one.
    pub(crate) fn new() -> ReplState {
        ReplState {
            replid: ReplId::random(),
            replid2: ReplId::NONE,
            second_replid_offset: -1,
            master_repl_offset: 0,
        }
    }
}
