//! Writing a whole keyspace as an AOF: the commands that recreate every key
//! (with its absolute expiry), in checksummed batches.
//!
//! Used when the append-only file is switched on at runtime (the file must
//! start with the current dataset) and, later, by the background rewrite.

use std::io;

use super::aof::{BatchBuilder, FILE_HEADER};
use crate::command::Effect;
use crate::keyspace::Keyspace;
use crate::types::{num, Value};

/// Most elements per command (Redis's `AOF_REWRITE_ITEMS_PER_CMD`).
const ITEMS_PER_COMMAND: usize = 64;
/// A batch is closed once it holds this many bytes.
const BATCH_BYTES: usize = 1 << 20;

/// Writes `keyspace` as an AOF image through `sink` (called with the header
/// and then one chunk per batch). Keys already expired at `now_ms` are
/// skipped. Returns the number of keys written.
pub fn write_keyspace(
    keyspace: &Keyspace,
    now_ms: i64,
    sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<u64> {
    sink(FILE_HEADER)?;
    let mut builder = BatchBuilder::new();
    let mut selected = None;
    let mut keys = 0u64;
    for db_index in 0..keyspace.db_count() {
        let db = keyspace.db(db_index);
        for (key, value) in db.iter() {
            let expire = db.expire_at(key);
            if matches!(expire, Some(at) if at < now_ms) {
                continue;
            }
            for argv in commands_for(key, value) {
                builder.push_unit(&[Effect { db: db_index, argv }], &mut selected);
            }
            if let Some(at) = expire {
                let argv = vec![
                    b"PEXPIREAT".to_vec(),
                    key.to_vec(),
                    at.to_string().into_bytes(),
                ];
                builder.push_unit(&[Effect { db: db_index, argv }], &mut selected);
            }
            keys += 1;
            if builder.len() >= BATCH_BYTES {
                sink(&builder.finish(now_ms))?;
            }
        }
    }
    if !builder.is_empty() {
        sink(&builder.finish(now_ms))?;
    }
    Ok(keys)
}

/// The commands that recreate `key` holding `value` (no expiry).
pub fn commands_for(key: &[u8], value: &Value) -> Vec<Vec<Vec<u8>>> {
    let chunked = |name: &[u8], items: Vec<Vec<u8>>, per_item: usize| -> Vec<Vec<Vec<u8>>> {
        items
            .chunks(ITEMS_PER_COMMAND * per_item)
            .map(|chunk| {
                let mut argv = Vec::with_capacity(chunk.len() + 2);
                argv.push(name.to_vec());
                argv.push(key.to_vec());
                argv.extend(chunk.iter().cloned());
                argv
            })
            .collect()
    };
    match value {
        Value::Str(s) => vec![vec![b"SET".to_vec(), key.to_vec(), s.to_vec()]],
        Value::List(l) => chunked(b"RPUSH", l.iter().map(<[u8]>::to_vec).collect(), 1),
        Value::Hash(h) => chunked(
            b"HSET",
            h.iter()
                .flat_map(|(f, v)| [f.to_vec(), v.to_vec()])
                .collect(),
            2,
        ),
        Value::Set(s) => chunked(b"SADD", s.iter().map(|m| m.to_vec()).collect(), 1),
        Value::ZSet(z) => chunked(
            b"ZADD",
            z.iter()
                .flat_map(|(m, score)| [num::format_g17(score).into_bytes(), m.to_vec()])
                .collect(),
            2,
        ),
    }
}
