//! `command_args`: command argument parsing, through the engine.
//!
//! Input: the bytes a client sends. They are parsed with the request
//! parser and each request (up to [`REQUESTS_MAX`]) is executed on an
//! in-memory engine (`Config::in_memory()`: no files) by one session,
//! so every command's option and number parsing sees arbitrary
//! arguments, including HELLO 3 (RESP3 replies), MULTI/EXEC and WATCH.
//! Commands that would touch files, the network or the process, wait,
//! or run Lua (which can loop for ever) are skipped, as are numeric
//! arguments that make Redis itself allocate in proportion to the
//! number (SETRANGE/SETBIT offsets, negative SRANDMEMBER counts), and
//! BITFIELD with OVERFLOW FAIL (a refused write pads the string unlogged).
//! A command that blocks is ended at once with its timeout reply.
//! Properties:
//! - no command panics;
//! - every reply, encoded as RESP2 and as RESP3, is exactly one frame
//!   for `frame_len` (the framer and the encoder agree);
//! - the logged effects of the whole run, written as an AOF and loaded
//!   into a second engine (`Engine::load_aof_image`), load cleanly and
//!   give the same keyspace (replaying effects is deterministic), but
//!   for stream consumers' seen times (a replayed XCLAIM sets the time it
//!   runs, as on a Redis replica).

use std::path::Path;

use hozon::persist::aof::{BatchBuilder, FILE_HEADER};
use hozon::resp::reply_frame::frame_len;
use hozon::resp::{Limits, Parser};
use hozon::{Config, Engine, Reply};

use super::canon;

/// Requests executed per input.
pub const REQUESTS_MAX: usize = 64;

/// Commands never executed (lower case).
const SKIPPED: &[&str] = &[
    "debug",
    "shutdown",
    "save",
    "bgsave",
    "bgrewriteaof",
    "sync",
    "psync",
    "replicaof",
    "slaveof",
    "failover",
    "monitor",
    "migrate",
    "module",
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "function",
    "script",
];

/// Commands whose numeric arguments are capped at [`NUMBER_MAX`].
const CAPPED: &[&str] = &[
    "setrange",
    "setbit",
    "bitfield",
    "bitfield_ro",
    "srandmember",
    "zrandmember",
    "hrandfield",
];

const NUMBER_MAX: i64 = 1 << 16;

fn skipped(argv: &[&[u8]]) -> bool {
    let name = String::from_utf8_lossy(argv[0]).to_ascii_lowercase();
    if SKIPPED.contains(&name.as_str()) {
        return true;
    }
    let sub = argv
        .get(1)
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
    match (name.as_str(), sub.as_deref()) {
        // CONFIG SET can turn the AOF on or move the data directory.
        ("config", Some(s)) if s != "get" && s != "help" => return true,
        ("acl", Some("save" | "load")) => return true,
        ("client", Some("pause" | "kill")) => return true,
        _ => {}
    }
    // A BITFIELD write refused by OVERFLOW FAIL still creates or pads the
    // string without logging anything (as in Redis), so the replayed
    // keyspace would differ.
    if name == "bitfield" && argv.iter().any(|a| a.eq_ignore_ascii_case(b"fail")) {
        return true;
    }
    if CAPPED.contains(&name.as_str()) {
        return argv.iter().skip(1).any(|a| {
            std::str::from_utf8(a)
                .ok()
                .and_then(|s| s.trim_start_matches('#').parse::<i64>().ok())
                .is_some_and(|n| !(-NUMBER_MAX..=NUMBER_MAX).contains(&n))
        });
    }
    false
}

fn assert_one_frame(reply: &Reply, argv: &[&[u8]]) {
    for resp in [2u8, 3] {
        let bytes = reply.to_resp(resp);
        assert_eq!(
            frame_len(&bytes),
            Ok(Some(bytes.len())),
            "the RESP{resp} reply to {:?} is not one frame: {:?}",
            argv.iter().map(|a| canon::show(a)).collect::<Vec<_>>(),
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
        );
    }
}

/// The check (see the module documentation).
pub fn check(data: &[u8]) {
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory engine opens");
    engine.set_capture_effects(true);
    let mut session = engine.new_session();
    let mut parser = Parser::new(Limits::default());
    let mut log = BatchBuilder::new();
    let mut selected_db = None;
    for _ in 0..REQUESTS_MAX {
        let req = match parser.next(data, true) {
            Ok(Some(req)) => req,
            Ok(None) | Err(_) => break,
        };
        let argv = req.argv(data);
        if skipped(&argv) {
            continue;
        }
        let mut reply = engine.execute(&mut session, &argv);
        if session.blocked.is_some() {
            reply = engine
                .unblock(&mut session, false)
                .expect("a blocked session has a timeout reply");
        }
        assert_one_frame(&reply, &argv);
        let _ = engine.take_messages();
        log.push_unit(&engine.take_effects(), &mut selected_db);
    }
    let mut aof = FILE_HEADER.to_vec();
    if !log.is_empty() {
        aof.extend_from_slice(&log.finish(super::NOW_MS));
    }
    let mut replayed = Engine::open(Config::in_memory()).expect("an in-memory engine opens");
    if let Err(e) = replayed.load_aof_image(&aof, Path::new("effects.aof"), true) {
        panic!(
            "the logged effects do not load: {e}\n{}",
            String::from_utf8_lossy(&aof)
        );
    }
    canon::assert_same(
        "the engine vs its replayed effects",
        &canon::of_keyspace_with(engine.keyspace(), canon::Clock::SeenMasked),
        &canon::of_keyspace_with(replayed.keyspace(), canon::Clock::SeenMasked),
    );
}
