//! MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
//! [AUTH password] [AUTH2 username password] [KEYS key…]: keys moved to
//! another server with DUMP payloads and RESTORE, as Redis 7.0's
//! `migrateCommand` does.
//!
//! The command thread connects (or reuses the cached connection to
//! `host:port`, `core::migrate`), blocking with the timeout as Redis
//! does; sends AUTH/AUTH2, SELECT when the connection's database differs,
//! and one `RESTORE key ttl payload [REPLACE]` per key still alive, all
//! pipelined; then reads one line per command. Each key the target
//! accepted is deleted here (unless COPY) and the command is logged as
//! `DEL` of those keys. The first error line of the target becomes the
//! reply (`ERR Target instance replied with error: …`); a connection that
//! fails before the first RESTORE reply (a cached connection the target
//! closed) is reopened once, unless the failure was a timeout; otherwise
//! `IOERR error or timeout reading|writing to target instance`.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::{is, parse_int, CmdResult, CommandSpec, Ctx, SYNTAX_ERR};
use crate::core::migrate::CachedSocket;
use crate::core::notify;
use crate::rdb::writer;
use crate::reply::Reply;

/// The MIGRATE table (arity, flags and key positions from the generated
/// metadata).
pub static COMMANDS: &[CommandSpec] = &[CommandSpec::from_docs(
    "migrate", "migrate", "generic", migrate,
)];

/// The longest reply line Redis reads (`char buf[1024]`, NUL included).
const LINE_MAX: usize = 1023;

/// A failed read or write on the target's connection.
struct IoFailure {
    /// The operation timed out (Redis does not retry then).
    timed_out: bool,
}

fn io_failure(e: &std::io::Error) -> IoFailure {
    IoFailure {
        timed_out: matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    }
}

/// C's `atoi`: leading blanks, a sign, digits; 0 when there are none.
fn atoi(s: &[u8]) -> i64 {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let negative = s.get(i) == Some(&b'-');
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let mut n: i64 = 0;
    while let Some(d) = s.get(i).filter(|d| d.is_ascii_digit()) {
        n = n.wrapping_mul(10).wrapping_add(i64::from(d - b'0'));
        i += 1;
    }
    if negative {
        -n
    } else {
        n
    }
}

/// Why no connection was made.
enum ConnectFailure {
    /// The name did not resolve: Redis's "connecting" error.
    Resolve,
    /// Every address refused or timed out. Redis's non-blocking connect
    /// reports success for these, and its first write fails instead.
    Connect(IoFailure),
}

/// Connects to `host:port` within `timeout` (Redis's
/// `connBlockingConnect`: every address the name resolves to is tried).
fn connect(host: &[u8], port: &[u8], timeout: Duration) -> Result<TcpStream, ConnectFailure> {
    let host = std::str::from_utf8(host).map_err(|_| ConnectFailure::Resolve)?;
    // C's atoi, then the 16 bits a port has.
    let port = atoi(port) as u16;
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|_| ConnectFailure::Resolve)?
        .collect();
    if addrs.is_empty() {
        return Err(ConnectFailure::Resolve);
    }
    let mut failure = IoFailure { timed_out: false };
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => failure = io_failure(&e),
        }
    }
    Err(ConnectFailure::Connect(failure))
}

/// One reply line (Redis's `syncReadLine`: up to the newline, CR
/// dropped, at most [`LINE_MAX`] bytes); an empty line counts as a
/// failure, as there.
fn read_line(socket: &mut CachedSocket) -> Result<Vec<u8>, IoFailure> {
    loop {
        if let Some(end) = socket.unread.iter().position(|&b| b == b'\n') {
            let take = end.min(LINE_MAX);
            let mut line: Vec<u8> = socket.unread.drain(..take).collect();
            if take == end {
                socket.unread.remove(0);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
            }
            return if line.is_empty() {
                Err(IoFailure { timed_out: false })
            } else {
                Ok(line)
            };
        }
        if socket.unread.len() >= LINE_MAX {
            return Ok(socket.unread.drain(..LINE_MAX).collect());
        }
        let mut chunk = [0u8; 4096];
        match socket.stream.read(&mut chunk) {
            Ok(0) => return Err(IoFailure { timed_out: false }),
            Ok(n) => socket.unread.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(io_failure(&e)),
        }
    }
}

/// Appends one RESP command to `out`.
fn push_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// MIGRATE's options.
struct Options<'a> {
    copy: bool,
    replace: bool,
    username: Option<&'a [u8]>,
    password: Option<&'a [u8]>,
    /// Index of the first key argument and how many keys.
    keys: (usize, usize),
}

fn parse_options<'a>(argv: &[&'a [u8]]) -> Result<Options<'a>, Reply> {
    let mut o = Options {
        copy: false,
        replace: false,
        username: None,
        password: None,
        keys: (3, 1),
    };
    let mut j = 6;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if is(argv[j], "copy") {
            o.copy = true;
        } else if is(argv[j], "replace") {
            o.replace = true;
        } else if is(argv[j], "auth") {
            if more == 0 {
                return Err(Reply::err(SYNTAX_ERR));
            }
            j += 1;
            o.password = Some(argv[j]);
        } else if is(argv[j], "auth2") {
            if more < 2 {
                return Err(Reply::err(SYNTAX_ERR));
            }
            o.username = Some(argv[j + 1]);
            o.password = Some(argv[j + 2]);
            j += 2;
        } else if is(argv[j], "keys") {
            if !argv[3].is_empty() {
                return Err(Reply::err(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            o.keys = (j + 1, argv.len() - j - 1);
            break;
        } else {
            return Err(Reply::err(SYNTAX_ERR));
        }
        j += 1;
    }
    Ok(o)
}

fn migrate(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let opts = parse_options(argv)?;
    let mut timeout_ms = parse_int(argv[5])?;
    let dbid = parse_int(argv[4])?;
    if timeout_ms <= 0 {
        timeout_ms = 1000;
    }
    let timeout = Duration::from_millis(timeout_ms as u64);
    let (first, count) = opts.keys;
    let mut keys: Vec<&[u8]> = Vec::new();
    for key in &argv[first..first + count] {
        if ctx.lookup_read(key).is_some() {
            keys.push(key);
        }
    }
    if keys.is_empty() {
        return Ok(Reply::simple("NOKEY"));
    }
    let mut name = argv[1].to_vec();
    name.push(b':');
    name.extend_from_slice(argv[2]);
    let mut may_retry = true;
    loop {
        match attempt(ctx, argv, &opts, &keys, &name, dbid, timeout, may_retry) {
            Attempt::Done(reply) => return reply,
            Attempt::SocketError {
                write_error,
                timed_out,
                may_retry: retry,
            } => {
                ctx.core.migrate_sockets.close(&name);
                if !timed_out && retry && may_retry {
                    may_retry = false;
                    continue;
                }
                let what = if write_error { "writing" } else { "reading" };
                return Err(Reply::error(format!(
                    "IOERR error or timeout {what} to target instance"
                )));
            }
        }
    }
}

/// How one try ended: a final reply, or Redis's `socket_err` label.
enum Attempt {
    Done(CmdResult),
    SocketError {
        write_error: bool,
        timed_out: bool,
        may_retry: bool,
    },
}

/// One try of the transfer (Redis's code from `try_again`).
#[allow(clippy::too_many_arguments)]
fn attempt(
    ctx: &mut Ctx,
    argv: &[&[u8]],
    opts: &Options,
    keys: &[&[u8]],
    name: &[u8],
    dbid: i64,
    timeout: Duration,
    may_retry: bool,
) -> Attempt {
    let now_s = ctx.now_ms / 1000;
    if ctx.core.migrate_sockets.get(name, now_s).is_none() {
        let stream = match connect(argv[1], argv[2], timeout) {
            Ok(stream) => stream,
            Err(ConnectFailure::Resolve) => {
                return Attempt::Done(Err(Reply::error(
                    "IOERR error or timeout connecting to the client",
                )))
            }
            Err(ConnectFailure::Connect(f)) => {
                return Attempt::SocketError {
                    write_error: true,
                    timed_out: f.timed_out,
                    may_retry,
                }
            }
        };
        let socket = CachedSocket {
            stream,
            last_dbid: -1,
            last_use_s: now_s,
            unread: Vec::new(),
        };
        let pick = ctx.core.rng.index(usize::MAX);
        ctx.core.migrate_sockets.insert(name.to_vec(), socket, pick);
    }
    let last_dbid = ctx
        .core
        .migrate_sockets
        .get(name, now_s)
        .map_or(-1, |s| s.last_dbid);

    // The pipeline: AUTH, SELECT, then RESTORE per key still alive.
    let mut cmd = Vec::new();
    if let Some(password) = opts.password {
        match opts.username {
            Some(user) => push_command(&mut cmd, &[b"AUTH", user, password]),
            None => push_command(&mut cmd, &[b"AUTH", password]),
        }
    }
    let select = last_dbid != dbid;
    if select {
        push_command(&mut cmd, &[b"SELECT", dbid.to_string().as_bytes()]);
    }
    let encoder = ctx.core.rdb_encoder();
    let db = ctx.session.db;
    let now = crate::clock::now_ms();
    let mut alive: Vec<&[u8]> = Vec::with_capacity(keys.len());
    for &key in keys {
        let database = ctx.core.keyspace.db(db);
        let mut ttl = 0;
        if let Some(at) = database.expire_at(key) {
            ttl = at - now;
            if ttl < 0 {
                continue;
            }
            ttl = ttl.max(1);
        }
        let Some(value) = database.get(key) else {
            continue;
        };
        let payload = writer::dump_payload(&encoder, value);
        let ttl = ttl.to_string();
        let mut args: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), &payload];
        if opts.replace {
            args.push(b"REPLACE");
        }
        push_command(&mut cmd, &args);
        alive.push(key);
    }

    let socket = ctx
        .core
        .migrate_sockets
        .get(name, now_s)
        .expect("connection cached above");
    let written = socket
        .stream
        .set_write_timeout(Some(timeout))
        .and_then(|()| socket.stream.set_read_timeout(Some(timeout)))
        .and_then(|()| socket.stream.write_all(&cmd));
    if let Err(e) = written {
        return Attempt::SocketError {
            write_error: true,
            timed_out: io_failure(&e).timed_out,
            may_retry,
        };
    }
    let mut auth_reply = Vec::new();
    if opts.password.is_some() {
        match read_line(socket) {
            Ok(line) => auth_reply = line,
            Err(f) => return socket_error(f, may_retry),
        }
    }
    let mut select_reply = Vec::new();
    if select {
        match read_line(socket) {
            Ok(line) => select_reply = line,
            Err(f) => return socket_error(f, may_retry),
        }
    }

    let mut error: Option<Reply> = None;
    let mut failure: Option<IoFailure> = None;
    let mut deleted: Vec<&[u8]> = Vec::new();
    let mut read = 0;
    for &key in &alive {
        let socket = ctx
            .core
            .migrate_sockets
            .get(name, now_s)
            .expect("connection cached above");
        let line = match read_line(socket) {
            Ok(line) => line,
            Err(f) => {
                failure = Some(f);
                break;
            }
        };
        read += 1;
        let failed = |l: &[u8]| l.first() == Some(&b'-');
        if failed(&auth_reply) || failed(&select_reply) || failed(&line) {
            if error.is_none() {
                socket.last_dbid = -1;
                let from = if failed(&auth_reply) {
                    &auth_reply
                } else if failed(&select_reply) {
                    &select_reply
                } else {
                    &line
                };
                let mut msg = b"ERR Target instance replied with error: ".to_vec();
                msg.extend_from_slice(&from[1..]);
                error = Some(Reply::error(super::error_text(&msg)));
            }
        } else if !opts.copy {
            ctx.db().remove(key);
            ctx.signal_modified(key);
            ctx.notify(notify::GENERIC, "del", key);
            ctx.dirty(1);
            deleted.push(key);
        }
    }
    if let Some(f) = &failure {
        if error.is_none() && read == 0 && may_retry && !f.timed_out {
            return socket_error(IoFailure { timed_out: false }, true);
        }
        ctx.core.migrate_sockets.close(name);
    }
    if !deleted.is_empty() {
        // Propagated as DEL of the keys the target acknowledged.
        let mut del = vec![b"DEL".to_vec()];
        del.extend(deleted.iter().map(|k| k.to_vec()));
        ctx.log(del);
    }
    if let Some(reply) = error {
        return Attempt::Done(Err(reply));
    }
    if let Some(f) = failure {
        return Attempt::SocketError {
            write_error: false,
            timed_out: f.timed_out,
            may_retry: false,
        };
    }
    if let Some(socket) = ctx.core.migrate_sockets.get(name, now_s) {
        socket.last_dbid = dbid;
    }
    Attempt::Done(Ok(Reply::ok()))
}

fn socket_error(f: IoFailure, may_retry: bool) -> Attempt {
    Attempt::SocketError {
        write_error: false,
        timed_out: f.timed_out,
        may_retry,
    }
}

#[cfg(test)]
mod tests {
    use super::atoi;

    #[test]
    fn atoi_is_c_atoi() {
        assert_eq!(atoi(b"6379"), 6379);
        assert_eq!(atoi(b" +12x"), 12);
        assert_eq!(atoi(b"-3"), -3);
        assert_eq!(atoi(b"abc"), 0);
        assert_eq!(atoi(b""), 0);
    }
}
