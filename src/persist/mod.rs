//! Persistence: the append-only file and its background rewrite, the native
//! snapshot, the data-directory lock, and the I/O layer they share. See
//! docs/persistence.md and docs/snapshot-format.md.

pub mod aof;
pub(crate) mod aof_stats;
pub mod io;
pub(crate) mod lock;
pub mod rdb_file;
pub mod rewrite;
pub(crate) mod rewriter;
pub(crate) mod saver;
pub mod snapshot;
pub(crate) mod writer;

use crate::keyspace::{Db, Keyspace};
use crate::types::{Blob, Value};

/// Every key of `keyspace`, database by database, as SAVE writes them:
/// (database index, the database, key, value, absolute expiry). Keys past
/// their TTL but not yet deleted are included, as Redis 7.0 saves them:
/// a replica may hold them until the master's DEL, and a master restarted
/// from the file deletes them and sends those DELs (`Engine::finish_open`).
pub(crate) fn saved_keys(
    keyspace: &Keyspace,
) -> impl Iterator<Item = (usize, &Db, &Blob, &Value, Option<i64>)> {
    keyspace.iter().enumerate().flat_map(move |(index, db)| {
        let has_expires = db.expires_len() > 0;
        db.iter().map(move |(key, value)| {
            let expire = if has_expires { db.expire_at(key) } else { None };
            (index, db, key, value, expire)
        })
    })
}
