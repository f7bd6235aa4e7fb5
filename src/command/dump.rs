//! DUMP and RESTORE: a value serialized in Redis's RDB format, with the
//! 2-byte RDB version and the CRC-64 behind it (Redis's
//! `createDumpPayload`), so that payloads move between hozon and Redis in
//! both directions.
//!
//! RESTORE checks what Redis 7.0 checks, in its order: options (syntax,
//! IDLETIME, FREQ), an existing key without REPLACE (BUSYKEY), the TTL,
//! then the payload's version and checksum, then its contents. Like
//! Redis, the value is decoded from the start of the whole argument, so a
//! value may run into the footer and trailing bytes are ignored.
//!
//! Logged effects (see [`Ctx::log`]): a relative TTL is logged as the
//! absolute time with `ABSTTL` appended (Redis's rewrite); a TTL already
//! in the past creates nothing and logs `DEL key` if REPLACE deleted a
//! key, nothing otherwise; everything else is logged as received.
//!
//! Known differences from Redis 7.0.15:
//! - payloads of RDB versions 11 and 12 (Redis 7.2 and 7.4) are accepted,
//!   with the value types those versions added; Redis 7.0 refuses every
//!   version above 10. A payload of version 10 or below may hold only the
//!   types Redis 7.0 knows.
//! - the contents are always checked in depth: duplicate fields or members
//!   in a listpack (or in a hash of type 4 small enough for one), and
//!   listpack scores that are not numbers, are refused with `Bad data
//!   format`; Redis 7.0 with its default `sanitize-dump-payload no` checks
//!   only the headers of the compact encodings and restores them as they
//!   are.

use super::{parse_int, syntax_error, CmdResult, CommandSpec, Ctx};
use crate::rdb::{kind, reader, writer};
use crate::reply::Reply;

/// The DUMP/RESTORE table (arity, flags and key positions from the
/// generated metadata, [`super::docs`]).
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("dump", "dump", "generic", dump),
    CommandSpec::from_docs("restore", "restore", "generic", restore),
    // RESTORE-ASKING is RESTORE with Redis's `asking` flag (a cluster's
    // MIGRATE sends it; without cluster mode the flag changes nothing).
    CommandSpec::from_docs("restore-asking", "restore-asking", "server", restore),
];

const BUSYKEY_ERR: &str = "BUSYKEY Target key name already exists.";
const BAD_PAYLOAD_ERR: &str = "ERR DUMP payload version or checksum are wrong";
const BAD_DATA_ERR: &str = "ERR Bad data format";

/// The footer after the value: RDB version (2 bytes) and CRC-64 (8 bytes).
const FOOTER_BYTES: usize = 10;

/// Redis's option comparison (`strcasecmp`: the argument up to its first
/// NUL byte).
fn is_opt(arg: &[u8], word: &str) -> bool {
    let end = arg.iter().position(|&b| b == 0).unwrap_or(arg.len());
    arg[..end].eq_ignore_ascii_case(word.as_bytes())
}

fn dump(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let encoder = ctx.core.rdb_encoder();
    match ctx.lookup_read(argv[1]) {
        None => Ok(Reply::Null),
        Some(value) => Ok(Reply::Bulk(writer::dump_payload(&encoder, value))),
    }
}

/// The RDB version of a payload whose version and checksum are good
/// (Redis's `verifyDumpPayload`, but accepting up to
/// [`crate::rdb::MAX_READ_VERSION`]). `skip_crc`: DEBUG
/// SET-SKIP-CHECKSUM-VALIDATION is on (the version is still checked).
pub(crate) fn verify_payload(payload: &[u8], skip_crc: bool) -> Option<u16> {
    if payload.len() < FOOTER_BYTES {
        return None;
    }
    let footer = &payload[payload.len() - FOOTER_BYTES..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > crate::rdb::MAX_READ_VERSION {
        return None;
    }
    if skip_crc {
        return Some(version);
    }
    let stored: [u8; 8] = footer[2..]
        .try_into()
        .expect("the footer is 10 bytes: version (2) and CRC-64 (8)");
    let computed = crate::rdb::crc64(&payload[..payload.len() - 8]);
    (u64::from_le_bytes(stored) == computed).then_some(version)
}

/// True when a payload of RDB `version` may hold a value of type `t`: the
/// types of the Redis release that writes that version (7.0 for 10 and
/// below, as Redis 7.0's `rdbIsObjectType`; 7.2 for 11; 7.4 for 12). A
/// release never writes a type newer than its version.
fn type_allowed(t: u8, version: u16) -> bool {
    let newest = match version {
        0..=10 => kind::STREAM_LISTPACKS_2,
        11 => kind::STREAM_LISTPACKS_3,
        _ => kind::HASH_LISTPACK_EX,
    };
    t != 8 && t <= newest
}

/// `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds]
/// [FREQ frequency]`.
fn restore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut replace = false;
    let mut absttl = false;
    // Redis refuses IDLETIME together with FREQ (a syntax error): one is
    // for LRU, the other for LFU eviction.
    let mut idle_given = false;
    let mut freq_given = false;
    let mut idle = 0i64;
    let mut freq = 0i64;
    let mut j = 4;
    while j < argv.len() {
        let has_value = j + 1 < argv.len();
        if is_opt(argv[j], "replace") {
            replace = true;
        } else if is_opt(argv[j], "absttl") {
            absttl = true;
        } else if is_opt(argv[j], "idletime") && has_value && !freq_given {
            idle = parse_int(argv[j + 1])?;
            if idle < 0 {
                return Err(Reply::err("ERR Invalid IDLETIME value, must be >= 0"));
            }
            idle_given = true;
            j += 1;
        } else if is_opt(argv[j], "freq") && has_value && !idle_given {
            freq = parse_int(argv[j + 1])?;
            if !(0..=255).contains(&freq) {
                return Err(Reply::err(
                    "ERR Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            freq_given = true;
            j += 1;
        } else {
            return syntax_error();
        }
        j += 1;
    }

    let key = argv[1];
    if !replace && ctx.lookup_write(key).is_some() {
        return Err(Reply::err(BUSYKEY_ERR));
    }
    let ttl_arg = parse_int(argv[2])?;
    if ttl_arg < 0 {
        return Err(Reply::err("ERR Invalid TTL value, must be >= 0"));
    }
    let payload = argv[3];
    let Some(version) = verify_payload(payload, ctx.core.debug.skip_checksum_validation) else {
        return Err(Reply::err(BAD_PAYLOAD_ERR));
    };
    let value_type = payload[0];
    if !type_allowed(value_type, version) {
        return Err(Reply::err(BAD_DATA_ERR));
    }
    let options = reader::Options {
        limits: ctx.limits(),
        databases: ctx.core.keyspace.db_count(),
        skip_expired_before_ms: None,
        now_ms: ctx.now_ms,
    };
    // Redis reads the value from the whole argument, footer included.
    let Ok((Some(value), _)) = reader::decode_value(&payload[1..], value_type, &options) else {
        // Malformed, or an empty collection (Redis never creates one).
        return Err(Reply::err(BAD_DATA_ERR));
    };

    // Redis deletes with `dbDelete`, which removes even a key whose TTL
    // has passed but which is still stored.
    let deleted = replace && ctx.db().remove(key).is_some();
    // Redis adds in C; a TTL near i64::MAX wraps to the past.
    let expire_ms = if ttl_arg != 0 && !absttl {
        ttl_arg.wrapping_add(ctx.now_ms)
    } else {
        ttl_arg
    };
    // While replaying the log a past TTL still creates the key (Redis's
    // `checkAlreadyExpired`): the log says when it was deleted.
    if expire_ms != 0 && ctx.already_expired(expire_ms) && !ctx.core.loading {
        if deleted {
            ctx.log(vec![b"DEL".to_vec(), key.to_vec()]);
            ctx.signal_modified(key);
            ctx.notify(crate::core::notify::GENERIC, "del", key);
            ctx.dirty(1);
        }
        return Ok(Reply::ok());
    }

    ctx.db().insert_new(key, value);
    // Redis's objectSetLRUOrLFU: FREQ under an LFU policy, IDLETIME under
    // any other; the option of the other kind is ignored.
    let lfu = ctx.core.policy().is_lfu();
    if lfu && freq_given {
        let stored = crate::keyspace::access::lfu_with_freq(freq as u8, ctx.now_ms);
        ctx.db().set_access(key, stored);
    } else if !lfu && idle_given {
        let stored = crate::keyspace::access::lru_with_idle(idle as u64, ctx.now_ms);
        ctx.db().set_access(key, stored);
    }
    ctx.notify_new(key);
    if expire_ms != 0 {
        ctx.set_expire(key, expire_ms);
        if !absttl {
            let mut logged: Vec<Vec<u8>> = argv.iter().map(|a| a.to_vec()).collect();
            logged[2] = expire_ms.to_string().into_bytes();
            logged.push(b"ABSTTL".to_vec());
            ctx.log(logged);
        }
    }
    ctx.signal_modified(key);
    ctx.notify(crate::core::notify::GENERIC, "restore", key);
    ctx.dirty(1);
    Ok(Reply::ok())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::Fixture;
    use crate::command::Effect;
    use crate::engine::now_ms;
    use crate::reply::Reply;

    fn exec(f: &mut Fixture, argv: &[&[u8]]) -> Reply {
        f.engine.execute(&mut f.session, argv)
    }

    /// The DUMP payload of `key`, and nothing logged for it.
    fn dump(f: &mut Fixture, key: &str) -> Vec<u8> {
        let reply = exec(f, &[b"DUMP", key.as_bytes()]);
        assert!(f.engine.take_effects().is_empty(), "DUMP logs nothing");
        match reply {
            Reply::Bulk(payload) => payload,
            other => panic!("DUMP {key}: {other:?}"),
        }
    }

    fn restore(f: &mut Fixture, key: &str, ttl: &str, payload: &[u8], extra: &[&str]) -> Reply {
        let mut argv: Vec<&[u8]> = vec![b"RESTORE", key.as_bytes(), ttl.as_bytes(), payload];
        argv.extend(extra.iter().map(|a| a.as_bytes()));
        exec(f, &argv)
    }

    fn argv(words: &[&[u8]]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.to_vec()).collect()
    }

    fn fixture_with_payload() -> (Fixture, Vec<u8>) {
        let mut f = Fixture::new();
        f.run("RPUSH src a b 3");
        f.effects();
        let payload = dump(&mut f, "src");
        (f, payload)
    }

    #[test]
    fn dump_of_a_missing_key_is_null_and_logs_nothing() {
        let mut f = Fixture::new();
        assert_eq!(f.run("DUMP missing"), Reply::Null);
        assert!(f.effects().is_empty());
    }

    #[test]
    fn restore_round_trips_the_value() {
        let (mut f, payload) = fixture_with_payload();
        assert_eq!(restore(&mut f, "copy", "0", &payload, &[]), Reply::ok());
        assert_eq!(f.engine.take_effects().len(), 1);
        assert_eq!(dump(&mut f, "copy"), payload);
        assert_eq!(f.encoding("copy"), Some("quicklist"));
        assert_eq!(f.run("PTTL copy"), Reply::Int(-1));
    }

    #[test]
    fn relative_ttl_is_logged_as_an_absolute_one_with_absttl() {
        let (mut f, payload) = fixture_with_payload();
        let before = now_ms();
        let reply = restore(&mut f, "k", "5000", &payload, &["REPLACE", "IDLETIME", "3"]);
        let after = now_ms();
        assert_eq!(reply, Reply::ok());
        let effects = f.engine.take_effects();
        assert_eq!(effects.len(), 1, "{effects:?}");
        let Effect { db, argv: logged } = &effects[0];
        assert_eq!(*db, 0);
        let at_ms: i64 = std::str::from_utf8(&logged[2])
            .expect("ASCII")
            .parse()
            .expect("an integer time");
        assert!((before + 5000..=after + 5000).contains(&at_ms), "{at_ms}");
        assert_eq!(
            logged,
            &argv(&[
                b"RESTORE",
                b"k",
                at_ms.to_string().as_bytes(),
                &payload,
                b"REPLACE",
                b"IDLETIME",
                b"3",
                b"ABSTTL",
            ])
        );
        assert_eq!(f.engine.core().keyspace.db(0).expire_at(b"k"), Some(at_ms));
    }

    #[test]
    fn restore_without_ttl_or_with_absttl_is_logged_as_received() {
        let (mut f, payload) = fixture_with_payload();
        assert_eq!(
            restore(&mut f, "a", "0", &payload, &["FREQ", "9"]),
            Reply::ok()
        );
        let at = (now_ms() + 60_000).to_string();
        assert_eq!(
            restore(&mut f, "b", &at, &payload, &["absttl"]),
            Reply::ok()
        );
        let effects: Vec<Vec<Vec<u8>>> = f
            .engine
            .take_effects()
            .into_iter()
            .map(|e| e.argv)
            .collect();
        assert_eq!(
            effects,
            [
                argv(&[b"RESTORE", b"a", b"0", &payload, b"FREQ", b"9"]),
                argv(&[b"RESTORE", b"b", at.as_bytes(), &payload, b"absttl"]),
            ]
        );
    }

    #[test]
    fn past_ttl_deletes_a_replaced_key_and_logs_del() {
        let (mut f, payload) = fixture_with_payload();
        f.run("SET k v");
        f.effects();
        assert_eq!(
            restore(&mut f, "k", "1", &payload, &["ABSTTL", "REPLACE"]),
            Reply::ok()
        );
        assert_eq!(f.db0_effects(), ["DEL k"]);
        assert_eq!(f.run("EXISTS k"), Reply::Int(0));
    }

    #[test]
    fn past_ttl_without_a_key_to_delete_changes_and_logs_nothing() {
        let (mut f, payload) = fixture_with_payload();
        assert_eq!(
            restore(&mut f, "k", "1", &payload, &["ABSTTL"]),
            Reply::ok()
        );
        assert_eq!(
            restore(&mut f, "k", "1", &payload, &["ABSTTL", "REPLACE"]),
            Reply::ok()
        );
        // A relative TTL that overflows wraps into the past, as in Redis.
        assert_eq!(
            restore(&mut f, "k", &i64::MAX.to_string(), &payload, &[]),
            Reply::ok()
        );
        assert!(f.effects().is_empty());
        assert_eq!(f.run("EXISTS k"), Reply::Int(0));
    }

    #[test]
    fn past_ttl_still_creates_the_key_while_replaying_the_log() {
        let (mut f, payload) = fixture_with_payload();
        f.engine.core().loading = true;
        assert_eq!(
            restore(&mut f, "k", "1", &payload, &["ABSTTL"]),
            Reply::ok()
        );
        f.engine.core().loading = false;
        assert_eq!(f.engine.core().keyspace.db(0).expire_at(b"k"), Some(1));
    }

    #[test]
    fn refused_restores_change_and_log_nothing() {
        let (mut f, mut payload) = fixture_with_payload();
        let busy = restore(&mut f, "src", "0", &payload, &[]);
        assert_eq!(busy, Reply::err("BUSYKEY Target key name already exists."));
        let bad_ttl = restore(&mut f, "k", "-1", &payload, &[]);
        assert_eq!(bad_ttl, Reply::err("ERR Invalid TTL value, must be >= 0"));
        let bad_freq = restore(&mut f, "k", "0", &payload, &["FREQ", "256"]);
        assert_eq!(
            bad_freq,
            Reply::err("ERR Invalid FREQ value, must be >= 0 and <= 255")
        );
        let both = restore(&mut f, "k", "0", &payload, &["IDLETIME", "1", "FREQ", "1"]);
        assert_eq!(both, Reply::err("ERR syntax error"));
        let last = payload.len() - 1;
        payload[last] ^= 0xff;
        let bad_crc = restore(&mut f, "k", "0", &payload, &[]);
        assert_eq!(
            bad_crc,
            Reply::err("ERR DUMP payload version or checksum are wrong")
        );
        assert!(f.effects().is_empty());
        assert_eq!(f.run("EXISTS k"), Reply::Int(0));
    }

    #[test]
    fn payload_checks_follow_redis() {
        let mut f = Fixture::new();
        let with_footer = |body: &[u8], version: u16| {
            let mut out = body.to_vec();
            out.extend_from_slice(&version.to_le_bytes());
            let crc = crate::rdb::crc64(&out);
            out.extend_from_slice(&crc.to_le_bytes());
            out
        };
        let bad_data = Reply::err("ERR Bad data format");
        // Versions up to 12 are read; 13 is refused.
        for version in [1, 10, 11, 12] {
            let key = format!("v{version}");
            let reply = restore(&mut f, &key, "0", &with_footer(b"\x00\x01a", version), &[]);
            assert_eq!(reply, Reply::ok(), "version {version}");
        }
        let v13 = restore(&mut f, "v13", "0", &with_footer(b"\x00\x01a", 13), &[]);
        assert_eq!(
            v13,
            Reply::err("ERR DUMP payload version or checksum are wrong")
        );
        // A type newer than the payload's version; an empty collection.
        let set_lp = b"\x14\x0c\x0c\x00\x00\x00\x02\x00\x81a\x02\x07\x01\xff";
        assert_eq!(
            restore(&mut f, "s", "0", &with_footer(set_lp, 10), &[]),
            bad_data
        );
        assert_eq!(
            restore(&mut f, "s", "0", &with_footer(set_lp, 11), &[]),
            Reply::ok()
        );
        assert_eq!(
            restore(&mut f, "e", "0", &with_footer(b"\x02\x00", 10), &[]),
            bad_data
        );
        // Trailing bytes are ignored, as Redis does.
        assert_eq!(
            restore(&mut f, "t", "0", &with_footer(b"\x00\x01ax", 10), &[]),
            Reply::ok()
        );
        assert_eq!(f.run("GET t"), Reply::bulk(b"a"));
    }
}
