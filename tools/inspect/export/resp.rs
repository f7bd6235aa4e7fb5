//! The RESP rendering: the commands that recreate a key
//! (`redis-cli --pipe`).

use std::io::{self, Write};

use hozon::persist::rewrite::commands_for;

use super::json::spill;
use crate::source::KeyValue;

/// How RESP output states expiries and existing keys.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RespOptions {
    /// PEXPIRE with the time left instead of PEXPIREAT.
    pub(super) relative: bool,
    /// DEL the key first.
    pub(super) replace: bool,
}

pub(super) fn put_command(buf: &mut Vec<u8>, argv: &[&[u8]]) {
    buf.extend_from_slice(format!("*{}\r\n", argv.len()).as_bytes());
    for arg in argv {
        buf.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        buf.extend_from_slice(arg);
        buf.extend_from_slice(b"\r\n");
    }
}

/// Writes the commands that recreate one key (SELECT first when its
/// database is not `selected`). Returns false when the key was left out
/// (relative expiry of a key already expired).
pub(super) fn write_resp(
    out: &mut impl Write,
    kv: &KeyValue<'_>,
    selected: &mut Option<usize>,
    options: RespOptions,
    now_ms: i64,
) -> io::Result<bool> {
    let expire = match (kv.expire_ms, options.relative) {
        (Some(at), true) if at <= now_ms => return Ok(false),
        (Some(at), true) => Some((b"PEXPIRE".as_slice(), (at - now_ms).to_string())),
        (Some(at), false) => Some((b"PEXPIREAT".as_slice(), at.to_string())),
        (None, _) => None,
    };
    let mut buf = Vec::with_capacity(256);
    if *selected != Some(kv.db) {
        put_command(&mut buf, &[b"SELECT", kv.db.to_string().as_bytes()]);
        *selected = Some(kv.db);
    }
    if options.replace {
        put_command(&mut buf, &[b"DEL", kv.key]);
    }
    for argv in commands_for(kv.key, kv.value) {
        let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        put_command(&mut buf, &args);
        spill(out, &mut buf)?;
    }
    if let Some((name, when)) = expire {
        put_command(&mut buf, &[name, kv.key, when.as_bytes()]);
    }
    out.write_all(&buf)?;
    Ok(true)
}
