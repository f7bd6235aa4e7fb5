//! Writing a whole keyspace as an AOF: the commands that recreate every key
//! (with its absolute expiry), in checksummed batches.
//!
//! Used when the append-only file is switched on at runtime (the file must
//! start with the current dataset) and, later, by the background rewrite.

use std::io;

use super::aof::{BatchBuilder, FILE_HEADER};
use crate::keyspace::Keyspace;
use crate::persist::aof::Effect;
use crate::types::{num, Value};

/// Most elements per command (Redis's `AOF_REWRITE_ITEMS_PER_CMD`).
const ITEMS_PER_COMMAND: usize = 64;
/// A batch is closed once it holds this many bytes.
const BATCH_BYTES: usize = 1 << 20;

/// Writes `keyspace` as a complete AOF at `path` and returns when it is
/// durable there: `temp` is written and fsynced, then renamed over `path`
/// and the directory fsynced (`snapshot::commit`). A failed write removes
/// `temp`; the error is the cause, for the caller to say what it was doing.
pub fn write_aof_file(
    io: &dyn super::io::Io,
    keyspace: &Keyspace,
    functions: &[Vec<u8>],
    now_ms: i64,
    temp: &std::path::Path,
    path: &std::path::Path,
) -> Result<(), String> {
    let written = (|| -> io::Result<()> {
        let mut file = io.open_append(temp)?;
        file.set_len(0)?;
        write_keyspace(keyspace, functions, now_ms, &mut |chunk| {
            let mut done = 0;
            while done < chunk.len() {
                match file.write(&chunk[done..])? {
                    0 => return Err(io::ErrorKind::WriteZero.into()),
                    n => done += n,
                }
            }
            Ok(())
        })?;
        file.syncer()?.sync_data()
    })();
    if let Err(e) = written {
        let _ = io.remove(temp);
        return Err(super::writer::error_text(&e));
    }
    super::snapshot::commit(io, temp, path).map_err(|e| e.to_string())
}

/// Writes `keyspace` as an AOF image through `sink` (called with the header
/// and then one chunk per batch): the function libraries first (FUNCTION
/// LOAD each, as Redis's rewrite writes them), then the keys. Keys already
/// expired at `now_ms` are skipped. Returns the number of keys written.
pub fn write_keyspace(
    keyspace: &Keyspace,
    functions: &[Vec<u8>],
    now_ms: i64,
    sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<u64> {
    sink(FILE_HEADER)?;
    let mut builder = BatchBuilder::new();
    let mut selected = None;
    for code in functions {
        builder.push_command(0, &[b"FUNCTION", b"LOAD", code], &mut selected);
    }
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
        Value::Stream(s) => stream_commands(key, s),
    }
}

/// The commands that recreate a stream, as Redis 7.0's
/// `rewriteStreamObject`: its entries (XADD, or `XADD … MAXLEN 0` for an
/// empty stream), its counters (XSETID … ENTRIESADDED … MAXDELETEDID), then
/// every group (XGROUP CREATE … ENTRIESREAD), its consumers without pending
/// entries (XGROUP CREATECONSUMER) and every pending entry (XCLAIM … TIME
/// … RETRYCOUNT … JUSTID FORCE).
///
/// One addition: a pending entry whose stream entry was deleted cannot be
/// recreated by XCLAIM (Redis's rewrite loses it). Such an entry is added
/// with a placeholder before the XCLAIMs and deleted after them, and the
/// counters are set last, so the PEL survives the rewrite exactly.
fn stream_commands(key: &[u8], s: &crate::types::Stream) -> Vec<Vec<Vec<u8>>> {
    use crate::types::stream::StreamId;
    let id_arg = |id: StreamId| id.to_bytes();
    let dangling: std::collections::BTreeSet<StreamId> = s
        .groups
        .values()
        .flat_map(|g| g.pel.keys())
        .filter(|id| s.get(**id).is_none())
        .copied()
        .collect();
    let mut out = Vec::new();
    let mut placeholders = dangling.iter().copied().peekable();
    let push_placeholder = |out: &mut Vec<Vec<Vec<u8>>>, id: StreamId| {
        out.push(vec![
            b"XADD".to_vec(),
            key.to_vec(),
            id_arg(id),
            b"x".to_vec(),
            b"y".to_vec(),
        ]);
    };
    for (id, fields) in s.range(StreamId::MIN, StreamId::MAX, false) {
        while let Some(p) = placeholders.next_if(|p| *p < id) {
            push_placeholder(&mut out, p);
        }
        let mut argv = Vec::with_capacity(3 + fields.len() * 2);
        argv.push(b"XADD".to_vec());
        argv.push(key.to_vec());
        argv.push(id_arg(id));
        for (f, v) in fields.iter() {
            argv.push(f.to_vec());
            argv.push(v.to_vec());
        }
        out.push(argv);
    }
    for p in placeholders {
        push_placeholder(&mut out, p);
    }
    if s.is_empty() && dangling.is_empty() {
        // The only way to create an empty stream with XADD.
        out.push(vec![
            b"XADD".to_vec(),
            key.to_vec(),
            b"MAXLEN".to_vec(),
            b"0".to_vec(),
            id_arg(StreamId::new(0, 1)),
            b"x".to_vec(),
            b"y".to_vec(),
        ]);
    }
    let setid = vec![
        b"XSETID".to_vec(),
        key.to_vec(),
        id_arg(s.last_id),
        b"ENTRIESADDED".to_vec(),
        s.entries_added.to_string().into_bytes(),
        b"MAXDELETEDID".to_vec(),
        id_arg(s.max_deleted_entry_id),
    ];
    if dangling.is_empty() {
        out.push(setid.clone());
    }
    for (name, group) in &s.groups {
        out.push(vec![
            b"XGROUP".to_vec(),
            b"CREATE".to_vec(),
            key.to_vec(),
            name.to_vec(),
            id_arg(group.last_id),
            b"ENTRIESREAD".to_vec(),
            group.entries_read.to_string().into_bytes(),
        ]);
        for (consumer_name, consumer) in &group.consumers {
            if consumer.pel.is_empty() {
                out.push(vec![
                    b"XGROUP".to_vec(),
                    b"CREATECONSUMER".to_vec(),
                    key.to_vec(),
                    name.to_vec(),
                    consumer_name.to_vec(),
                ]);
                continue;
            }
            for id in &consumer.pel {
                let nack = &group.pel[id];
                out.push(vec![
                    b"XCLAIM".to_vec(),
                    key.to_vec(),
                    name.to_vec(),
                    consumer_name.to_vec(),
                    b"0".to_vec(),
                    id_arg(*id),
                    b"TIME".to_vec(),
                    nack.delivery_time_ms.to_string().into_bytes(),
                    b"RETRYCOUNT".to_vec(),
                    nack.delivery_count.to_string().into_bytes(),
                    b"JUSTID".to_vec(),
                    b"FORCE".to_vec(),
                ]);
            }
        }
    }
    if !dangling.is_empty() {
        // Remove the placeholders again without changing the stream's
        // deletion record: those before the first live entry were trimmed
        // (trimming is no deletion: XTRIM), those between live entries
        // were deleted with XDEL (so max-deleted-entry-id already covers
        // them). XSETID then restores the counters.
        let first_live = s.first().map(|(id, _)| id);
        let (head, middle): (Vec<StreamId>, Vec<StreamId>) = dangling
            .into_iter()
            .partition(|id| first_live.is_none_or(|first| *id < first));
        let trim_bound = first_live.or_else(|| head.last().and_then(|id| id.next()));
        let mut to_delete = middle;
        match trim_bound {
            Some(bound) if !head.is_empty() => out.push(vec![
                b"XTRIM".to_vec(),
                key.to_vec(),
                b"MINID".to_vec(),
                b"=".to_vec(),
                id_arg(bound),
            ]),
            // Only for a placeholder at the largest possible ID.
            _ => to_delete.extend(head),
        }
        for chunk in to_delete.chunks(ITEMS_PER_COMMAND) {
            let mut argv = vec![b"XDEL".to_vec(), key.to_vec()];
            argv.extend(chunk.iter().map(|id| id_arg(*id)));
            out.push(argv);
        }
        out.push(setid);
    }
    out
}
