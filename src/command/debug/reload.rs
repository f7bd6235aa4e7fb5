//! DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: saves the snapshot, empties
//! the dataset and loads the snapshot back (Redis's test of "the server
//! can persist, flush and reload its data").
//!
//! hozon's snapshot is `dump.hoz` or `dump.rdb` per `snapshot-format`;
//! either is read back. The file is decoded into a new keyspace first, so
//! a file that does not load (or, without MERGE, a key or a library that
//! is both in memory and in the file under NOFLUSH, where Redis stops the
//! server) is an error that leaves the dataset as it was.
//!
//! Durability: the plain form gives back the data the AOF already holds.
//! NOSAVE or NOFLUSH can change the dataset without logging the change
//! (as in Redis): with the AOF on, a rewrite is scheduled so the log holds
//! the new dataset once it completes; a crash before then replays the old
//! log.

use crate::command::{is, CmdResult, Ctx};
use crate::keyspace::Keyspace;
use crate::reply::Reply;
use crate::script::functions::RestorePolicy;

const OPTIONS_ERR: &str = "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.";

/// DEBUG RELOAD.
pub(super) fn reload(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (mut merge, mut flush, mut save) = (false, true, true);
    for opt in &argv[2..] {
        if is(opt, "merge") {
            merge = true;
        } else if is(opt, "noflush") {
            flush = false;
        } else if is(opt, "nosave") {
            save = false;
        } else {
            return Err(Reply::err(OPTIONS_ERR));
        }
    }
    if save {
        ctx.core
            .save_now(ctx.now_ms)
            .map_err(|e| Reply::error(format!("ERR {e}")))?;
    }
    let (loaded, codes) = read_snapshot(ctx)
        .map_err(|e| Reply::error(format!("ERR Error trying to load the RDB dump: {e}")))?;
    let policy = match (flush, merge) {
        (true, _) => RestorePolicy::Flush,
        (false, true) => RestorePolicy::Replace,
        (false, false) => RestorePolicy::Append,
    };
    let libraries = super::super::functions::with_engine(ctx, |engine, ctx| {
        crate::script::functions::restore(&ctx.core.functions, engine, &codes, policy)
            .map_err(|e| Reply::error(format!("ERR Error trying to load the RDB dump: {e}")))
    })?;
    if !flush && !merge {
        for (db, key) in loaded
            .iter()
            .enumerate()
            .flat_map(|(i, d)| d.iter().map(move |(k, _)| (i, k)))
        {
            if ctx.core.keyspace.db(db).contains(key) {
                return Err(Reply::error(format!(
                    "ERR Error trying to load the RDB dump: the key '{}' of db {db} exists \
                     (NOFLUSH without MERGE)",
                    String::from_utf8_lossy(key)
                )));
            }
        }
    }
    let core = &mut *ctx.core;
    let now = ctx.now_ms;
    if flush {
        core.replace_keyspace(loaded, now);
    } else {
        // A capture in progress is of the old data.
        core.save.abort(&mut core.keyspace);
        core.abort_repl_sync();
        for (index, db) in loaded.iter().enumerate() {
            for (key, value) in db.iter() {
                let target = core.keyspace.db_mut(index);
                target.set(key, value.clone(), false);
                match db.expire_at(key) {
                    Some(at) => {
                        target.set_expire(key, at);
                    }
                    None => {
                        target.remove_expire(key);
                    }
                }
                core.signal_modified(index, key);
            }
        }
        core.tracking_flush();
    }
    core.functions.replace_all(libraries);
    crate::script::functions::FunctionEngine::sync(&mut core.function_engine, &mut core.functions)
        .map_err(|e| Reply::error(format!("ERR {e}")))?;
    if (!save || !flush) && core.aof.is_some() {
        core.rewrite.scheduled = true;
    }
    ctx.host.log(
        crate::config::LogLevel::Warning,
        "DB reloaded by DEBUG RELOAD",
    );
    ctx.log_nothing();
    Ok(Reply::ok())
}

/// The snapshot file decoded into a new keyspace, and its libraries.
fn read_snapshot(ctx: &mut Ctx) -> Result<(Keyspace, Vec<Vec<u8>>), String> {
    let core = &mut *ctx.core;
    let path = core.data_dir()?.join(core.snapshot_file_name());
    let data = core
        .io
        .read_all(&path)
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut keyspace = Keyspace::new(core.keyspace.db_count())
        .with_access_mode(core.policy().is_lfu(), ctx.now_ms);
    if crate::rdb::reader::is_rdb(&data) {
        let options = crate::rdb::reader::Options {
            limits: core.config.limits,
            databases: keyspace.db_count(),
            skip_expired_before_ms: Some(ctx.now_ms),
            now_ms: ctx.now_ms,
        };
        let lfu = core.policy().is_lfu();
        let now = ctx.now_ms;
        let summary = crate::rdb::reader::load(&data, &options, &mut |k| {
            keyspace
                .db_mut(k.db)
                .insert_loaded(
                    k.key,
                    k.value,
                    k.expire_ms,
                    k.access.and_then(|a| a.field(lfu, now)),
                )
                .map_err(|_| "the key appears twice in the file".to_string())
        })
        .map_err(|e| e.to_string())?;
        let codes = summary.functions.iter().map(|c| c.to_vec()).collect();
        return Ok((keyspace, codes));
    }
    let options = crate::persist::snapshot::ReadOptions {
        workers: 0,
        limits: core.config.limits,
        now_ms: ctx.now_ms,
    };
    let (summary, _expired) = crate::persist::snapshot::load_into(&data, &mut keyspace, &options)
        .map_err(|e| e.to_string())?;
    Ok((keyspace, summary.functions.clone()))
}
