//! `dump_restore`: DUMP payloads (`rdb::reader::decode_value`, and
//! RESTORE and DUMP through an in-memory engine).
//!
//! Input: one control byte, then a payload. With bit 0 of the control
//! byte clear the payload gets a valid footer (an RDB version chosen by
//! bits 1–3 from 7, 9, 10, 11, 12, and the CRC-64), so mutations reach the
//! value decoders; with it set the payload is used as it is (the footer's
//! checks). Properties:
//! - neither `decode_value` nor RESTORE panics, and decoding's heap
//!   stays within a bound proportional to the payload;
//! - a payload RESTORE accepts gives a key whose DUMP restores to a key
//!   with the same value (same elements, order of lists and streams,
//!   stream groups and times).

use hozon::rdb::reader;
use hozon::{Config, Engine, Reply};

use super::{alloc, canon, rdb_read};

/// The payload the input stands for.
pub fn payload_of(data: &[u8]) -> Vec<u8> {
    let Some((&ctl, rest)) = data.split_first() else {
        return Vec::new();
    };
    let mut payload = rest.to_vec();
    if ctl & 1 == 0 {
        let versions: [u16; 5] = [10, 9, 7, 11, 12];
        let version = versions[usize::from(ctl >> 1 & 7) % versions.len()];
        payload.extend_from_slice(&version.to_le_bytes());
        let crc = hozon::rdb::crc64(&payload);
        payload.extend_from_slice(&crc.to_le_bytes());
    }
    payload
}

fn dump(engine: &mut Engine, session: &mut hozon::Session, key: &[u8]) -> Vec<u8> {
    match engine.execute(session, &[b"DUMP", key]) {
        Reply::Bulk(p) => p,
        other => panic!("DUMP of a restored key: {other:?}"),
    }
}

fn value_of(engine: &mut Engine, key: &[u8]) -> Vec<u8> {
    let db = engine.keyspace().db(0);
    let value = db
        .iter()
        .find(|(k, _)| k.as_bytes() == key)
        .map(|(_, v)| v)
        .expect("a restored key is in the keyspace");
    canon::value(value)
}

/// The check (see the module documentation).
pub fn check(data: &[u8]) {
    let payload = payload_of(data);
    if let Some((&value_type, body)) = payload.split_first() {
        let (_, peak) =
            alloc::peak_of(|| reader::decode_value(body, value_type, &rdb_read::options()));
        alloc::assert_bounded("decode_value", peak, payload.len(), 512);
    }
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory engine opens");
    let mut session = engine.new_session();
    let reply = engine.execute(&mut session, &[b"RESTORE", b"a", b"0", &payload]);
    if reply != Reply::ok() {
        assert!(
            reply.is_error(),
            "RESTORE answers neither OK nor an error: {reply:?}"
        );
        return;
    }
    let first = dump(&mut engine, &mut session, b"a");
    let reply = engine.execute(&mut session, &[b"RESTORE", b"b", b"0", &first]);
    assert_eq!(
        reply,
        Reply::ok(),
        "the DUMP of a restored key does not restore"
    );
    // The DUMP bytes themselves may differ: a hash table's iteration
    // order depends on its per-table random seed, as in Redis.
    assert_eq!(
        value_of(&mut engine, b"a"),
        value_of(&mut engine, b"b"),
        "the value restored from DUMP differs"
    );
}
