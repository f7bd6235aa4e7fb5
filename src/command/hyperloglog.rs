//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST.
//!
//! The values are plain strings in Redis's exact representation
//! ([`crate::types::hll`]); behaviour, replies, errors and what is logged
//! follow Redis 7.0.15's `hyperloglog.c`:
//!
//! - PFADD and PFMERGE are logged as received when they change anything.
//! - PFCOUNT of one key whose cached cardinality is stale writes the new
//!   one into the string: Redis counts that as a change (`server.dirty`),
//!   so the key is signalled (WATCH) and the PFCOUNT itself is logged and
//!   replicated as received.
//! - PFDEBUG GETREG and TODENSE convert a sparse string to dense and are
//!   logged as received then, without signalling the key (as Redis).

use super::flags::MAY_REPLICATE;
use super::{error_text, CmdResult, CommandSpec, Ctx};
use crate::reply::Reply;
use crate::types::hll::{self, INVALID_ERR, NOT_HLL_ERR, REGISTERS};
use crate::types::{Blob, Value, WRONGTYPE};

const GROUP: &str = "hyperloglog";

/// A HyperLogLog command: arity, flags and key positions from the
/// generated metadata ([`super::docs`]).
const fn spec(name: &'static str, handler: super::Handler) -> CommandSpec {
    CommandSpec::from_docs(name, name, GROUP, handler)
}

/// The HyperLogLog family's table.
pub static COMMANDS: &[CommandSpec] = &[
    spec("pfadd", pfadd),
    // Redis's table marks PFCOUNT `may_replicate` (it may write the
    // cached cardinality and propagate); COMMAND INFO does not show it.
    spec("pfcount", pfcount).with_extra_flags(MAY_REPLICATE),
    spec("pfmerge", pfmerge),
    spec("pfdebug", pfdebug),
    spec("pfselftest", pfselftest),
];

/// Redis's `isHLLObjectOrReply`: WRONGTYPE for another type, the
/// HyperLogLog WRONGTYPE for a string that is not one.
fn check_hll(value: &Value) -> Result<&Blob, Reply> {
    match value {
        Value::Str(s) if hll::is_hll(s) => Ok(s),
        Value::Str(_) => Err(Reply::err(NOT_HLL_ERR)),
        _ => Err(Reply::err(WRONGTYPE)),
    }
}

/// The string under `key` for writing, after the HyperLogLog check; None
/// when the key does not exist.
fn write_hll<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c mut Blob>, Reply> {
    match ctx.lookup_write(key) {
        None => Ok(None),
        Some(value) => {
            check_hll(value)?;
            match value {
                Value::Str(s) => Ok(Some(s)),
                _ => unreachable!("checked above"),
            }
        }
    }
}

/// Runs `f` on the bytes of `blob` and stores them back, whatever `f`
/// returns (Redis changes the string in place, so work done before an
/// error stays). The string becomes raw: Redis first makes it its own
/// (`dbUnshareStringValue`, in every PF command that looks at one key).
fn edit<T>(blob: &mut Blob, f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    let mut bytes = std::mem::take(blob).into_vec();
    let out = f(&mut bytes);
    *blob = Blob::raw_from_vec(bytes);
    out
}

/// Marks `blob` raw, as Redis's `dbUnshareStringValue` leaves it.
fn make_raw(blob: &mut Blob) {
    if !blob.is_raw() {
        edit(blob, |_| ());
    }
}

fn pfadd(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let max_bytes = ctx.core.config.hll_sparse_max_bytes;
    let mut updated = 0u64;
    if write_hll(ctx, key)?.is_none() {
        ctx.db()
            .insert_new(key, Value::Str(Blob::raw_from_vec(hll::new_sparse())));
        ctx.notify_new(key);
        updated += 1;
    }
    let blob = write_hll(ctx, key)?.expect("present");
    let result = edit(blob, |bytes| {
        let mut changed = 0u64;
        for element in &argv[2..] {
            match hll::add(bytes, element, max_bytes) {
                Ok(true) => changed += 1,
                Ok(false) => {}
                Err(hll::Corrupt) => return Err(Reply::err(INVALID_ERR)),
            }
        }
        if changed + updated > 0 {
            hll::invalidate_cache(bytes);
        }
        Ok(changed)
    });
    updated += result?;
    if updated > 0 {
        ctx.signal_modified(key);
        ctx.notify(crate::core::notify::STRING, "pfadd", key);
        ctx.dirty(updated);
    }
    Ok(Reply::Int(i64::from(updated > 0)))
}

fn pfcount(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() > 2 {
        let mut max = Box::new([0u8; REGISTERS]);
        for key in &argv[1..] {
            let Some(value) = ctx.lookup_read(key) else {
                continue;
            };
            let s = check_hll(value)?;
            hll::merge_into(&mut max, s).map_err(|_| Reply::err(INVALID_ERR))?;
        }
        return Ok(Reply::Int(hll::count_raw(&max) as i64));
    }
    let key = argv[1];
    let Some(value) = ctx.lookup_read(key) else {
        return Ok(Reply::Int(0));
    };
    let s = check_hll(value)?;
    if let Some(cached) = hll::cached_count(s) {
        if let Some(Value::Str(blob)) = ctx.db().get_mut(key) {
            make_raw(blob);
        }
        return Ok(Reply::Int(cached as i64));
    }
    let count = hll::count(s).map_err(|_| Reply::err(INVALID_ERR))?;
    if let Some(Value::Str(blob)) = ctx.db().get_mut(key) {
        edit(blob, |bytes| hll::set_cached_count(bytes, count));
    }
    ctx.signal_modified(key);
    ctx.dirty(1);
    Ok(Reply::Int(count as i64))
}

fn pfmerge(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut max = Box::new([0u8; REGISTERS]);
    let mut use_dense = false;
    for key in &argv[1..] {
        let Some(value) = ctx.lookup_read(key) else {
            continue;
        };
        let s = check_hll(value)?;
        use_dense |= hll::encoding(s) == hll::DENSE;
        hll::merge_into(&mut max, s).map_err(|_| Reply::err(INVALID_ERR))?;
    }
    let dest = argv[1];
    let max_bytes = ctx.core.config.hll_sparse_max_bytes;
    if ctx.lookup_write(dest).is_none() {
        // Every source was checked, the destination with them: a key that
        // exists here is a HyperLogLog.
        ctx.db()
            .insert_new(dest, Value::Str(Blob::raw_from_vec(hll::new_sparse())));
        ctx.notify_new(dest);
    }
    let Some(Value::Str(blob)) = ctx.db().get_mut(dest) else {
        unreachable!("the destination was checked or created")
    };
    edit(blob, |bytes| {
        if use_dense && hll::to_dense(bytes).is_err() {
            return Err(Reply::err(INVALID_ERR));
        }
        for (i, &m) in max.iter().enumerate() {
            if m == 0 {
                continue;
            }
            if hll::encoding(bytes) == hll::DENSE {
                hll::dense_set_max(bytes, i, m);
            } else {
                // Redis ignores a damaged string here.
                let _ = hll::sparse_set(bytes, i, m, max_bytes);
            }
        }
        hll::invalidate_cache(bytes);
        Ok(())
    })?;
    ctx.signal_modified(dest);
    // Redis reports PFMERGE as "pfadd" (a mass add of elements).
    ctx.notify(crate::core::notify::STRING, "pfadd", dest);
    ctx.dirty(1);
    Ok(Reply::ok())
}

fn pfdebug(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    // Redis compares the subcommand as a C string.
    let cmd = argv[1]
        .split(|&b| b == 0)
        .next()
        .expect("split yields one part");
    let blob = write_hll(ctx, argv[2])?
        .ok_or_else(|| Reply::err("ERR The specified key does not exist"))?;
    make_raw(blob);
    if cmd.eq_ignore_ascii_case(b"getreg") {
        let converted = edit(blob, hll::to_dense).map_err(|_| Reply::err(INVALID_ERR))?;
        let registers = &blob[hll::HDR_SIZE..];
        let reply = (0..REGISTERS)
            .map(|i| Reply::Int(i64::from(hll::dense_get(registers, i))))
            .collect();
        if converted {
            ctx.dirty(1);
        }
        Ok(Reply::Array(reply))
    } else if cmd.eq_ignore_ascii_case(b"decode") {
        if hll::encoding(blob) != hll::SPARSE {
            return Err(Reply::err("ERR HLL encoding is not sparse"));
        }
        Ok(Reply::Bulk(hll::decode_sparse(blob).into_bytes()))
    } else if cmd.eq_ignore_ascii_case(b"encoding") {
        Ok(Reply::simple(if hll::encoding(blob) == hll::DENSE {
            "dense"
        } else {
            "sparse"
        }))
    } else if cmd.eq_ignore_ascii_case(b"todense") {
        let converted = edit(blob, hll::to_dense).map_err(|_| Reply::err(INVALID_ERR))?;
        if converted {
            ctx.dirty(1);
        }
        Ok(Reply::Int(i64::from(converted)))
    } else {
        let mut msg = b"ERR Unknown PFDEBUG subcommand '".to_vec();
        msg.extend_from_slice(cmd);
        msg.push(b'\'');
        Err(Reply::error(error_text(&msg)))
    }
}

fn pfselftest(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let seed = ctx.rng().next_u64();
    let max_bytes = ctx.core.config.hll_sparse_max_bytes;
    match hll::self_test(seed, max_bytes) {
        Ok(()) => Ok(Reply::ok()),
        Err(text) => Err(Reply::error(format!("ERR {text}"))),
    }
}
