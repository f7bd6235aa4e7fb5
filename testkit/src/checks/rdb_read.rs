//! `rdb_read`: the RDB reader (`rdb::reader`: `load`, `scan`,
//! `scan_keys`; every version 1–12 and Valkey's).
//!
//! Input: one control byte, then an RDB file. With bit 0 of the control
//! byte clear the file's last 8 bytes are replaced by the CRC-64 of the
//! bytes before them (the checksum a file of version 5 or later ends
//! with), so mutations get past the checksum; with it set the file is
//! read as it is. The corpus is seeded with every fixture of
//! `fixtures/rdb/`. Properties:
//! - no reader panics, and `load`'s heap stays within a bound
//!   proportional to the file (LZF strings expand at most ~100 times);
//! - a file `load` accepts, `scan` and `scan_keys` accept too, and agree
//!   on the keys (`scan_keys` visits as many as `scan` counts, at least
//!   as many as `load` delivers);
//! - the keys `load` delivers, written again with the RDB writer
//!   (`writer::encode_file`), load again to the same keys, values and
//!   expiry times.

use std::collections::HashSet;
use std::ops::ControlFlow;

use hozon::persist::snapshot::LoadedKey;
use hozon::rdb::reader::{self, Options};
use hozon::rdb::writer::{encode_file, Encoder};
use hozon::types::EncodingLimits;

use super::{alloc, canon};

/// The file the input stands for.
pub fn file_of(data: &[u8]) -> Vec<u8> {
    let Some((&ctl, rest)) = data.split_first() else {
        return Vec::new();
    };
    let mut file = rest.to_vec();
    if ctl & 1 == 0 && file.len() >= 9 + 8 {
        let body = file.len() - 8;
        let crc = hozon::rdb::crc64(&file[..body]);
        file[body..].copy_from_slice(&crc.to_le_bytes());
    }
    file
}

/// The options every check reads with: all keys kept, Redis's 16
/// databases, a fixed clock.
pub fn options() -> Options {
    Options {
        limits: EncodingLimits::default(),
        databases: 16,
        skip_expired_before_ms: None,
        now_ms: super::NOW_MS,
    }
}

/// `load` into a list, refusing a key seen twice as the engine does.
pub fn load_all(file: &[u8]) -> Result<(reader::Summary, Vec<LoadedKey>), reader::RdbError> {
    load_all_with(file, &options())
}

/// [`load_all`] with other options.
pub fn load_all_with(
    file: &[u8],
    options: &Options,
) -> Result<(reader::Summary, Vec<LoadedKey>), reader::RdbError> {
    let mut keys = Vec::new();
    let mut seen = HashSet::new();
    let summary = reader::load(file, options, &mut |k| {
        if !seen.insert((k.db, k.key.to_vec())) {
            return Err("duplicate key".to_string());
        }
        keys.push(k);
        Ok(())
    })?;
    Ok((summary, keys))
}

/// The keys written as an RDB file by the library's writer.
pub fn encode(keys: &[LoadedKey]) -> Vec<u8> {
    let mut sorted: Vec<&LoadedKey> = keys.iter().collect();
    sorted.sort_by_key(|k| k.db);
    encode_file(
        &Encoder::default(),
        super::NOW_MS,
        sorted.iter().map(|k| (k.db, &k.key, &k.value, k.expire_ms)),
    )
}

/// The check (see the module documentation).
pub fn check(data: &[u8]) {
    let file = file_of(data);
    let (loaded, peak) = alloc::peak_of(|| load_all(&file));
    alloc::assert_bounded("RDB load", peak, file.len(), 512);
    let (scanned, peak) = alloc::peak_of(|| reader::scan(&file));
    alloc::assert_bounded("RDB scan", peak, file.len(), 64);
    let mut visited = 0u64;
    let walked = reader::scan_keys(&file, &mut |_| {
        visited += 1;
        ControlFlow::Continue(())
    });
    let Ok((summary, keys)) = loaded else {
        return;
    };
    let scanned = scanned.unwrap_or_else(|e| panic!("load accepts, scan refuses: {e}"));
    let walked = walked.unwrap_or_else(|e| panic!("load accepts, scan_keys refuses: {e}"));
    let counted: u64 = scanned.keys_per_db.values().sum();
    assert_eq!(visited, counted, "scan_keys visits, scan counts");
    assert_eq!(
        walked.len, scanned.len,
        "scan_keys and scan end at other offsets"
    );
    assert_eq!(
        summary.len, scanned.len,
        "load and scan end at other offsets"
    );
    assert!(
        summary.keys <= counted,
        "load delivers {} keys, scan counts {counted}",
        summary.keys
    );
    let before = canon::of_keys(&keys);
    let written = encode(&keys);
    let (_, again) =
        load_all(&written).unwrap_or_else(|e| panic!("the rewritten file does not load: {e}"));
    canon::assert_same(
        "loaded vs written and loaded",
        &before,
        &canon::of_keys(&again),
    );
}
