//! The full sync payload (docs/replication.md §2.4): the keyspace at the
//! capture instant as an RDB 10 file, the AUX fields recording the
//! replication position, produced a slice at a time on the command thread
//! by the same fork-free capture BGSAVE uses (`Keyspace::begin_capture`).
//!
//! The bytes come out as chunks; what the caller does with them (a
//! temporary file, or straight to the replicas' sockets) is not this
//! module's business. The last chunk ends with EOF and the CRC-64 of the
//! whole file (zero under `rdbchecksum no`).
//!
//! A replica may ask for a filtered payload (`REPLCONF rdb-filter-only`,
//! [`PayloadFilter`]): Redis 7.0's `redis-cli --replica` asks for none of
//! the data, `--functions-rdb` for the functions only. hozon has no
//! functions, so a filtered payload is the header and the trailer.

use std::time::{Duration, Instant};

use crate::keyspace::Keyspace;
use crate::rdb::writer::{put_trailer, Encoder, RecordEncoder};
use crate::rdb::Crc64;
use crate::repl::ids::Position;

/// Records captured between two clock checks within a slice.
const RECORDS_PER_CHECK: usize = 16;

/// What a replica asked its payload to leave out (Redis's
/// `SLAVE_REQ_RDB_EXCLUDE_*` bits). Replicas with different filters never
/// share a capture.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PayloadFilter {
    /// No keys (any `rdb-filter-only` value asks for this).
    pub exclude_data: bool,
    /// No functions (`rdb-filter-only` without `functions`).
    pub exclude_functions: bool,
}

impl PayloadFilter {
    /// The filter `REPLCONF rdb-filter-only <value>` asks for, as Redis's
    /// `replconfCommand`: the value is split like a config line; every
    /// word must be `functions` (case-insensitive), and an empty value
    /// leaves everything out. Err is Redis's error reply text.
    pub fn parse(value: &[u8]) -> Result<PayloadFilter, String> {
        let words = crate::resp::split_args(value)
            .ok_or_else(|| "ERR Missing rdb-filter-only values".to_string())?;
        let mut filter = PayloadFilter {
            exclude_data: true,
            exclude_functions: true,
        };
        for word in words {
            if word.eq_ignore_ascii_case(b"functions") {
                filter.exclude_functions = false;
            } else {
                return Err(format!(
                    "ERR Unsupported rdb-filter-only option: {}",
                    String::from_utf8_lossy(&word)
                ));
            }
        }
        Ok(filter)
    }

    /// True when something is left out: such a payload always goes to the
    /// replica's socket (`$EOF:` form), never through a file.
    pub fn is_filtered(&self) -> bool {
        self.exclude_data || self.exclude_functions
    }
}

/// A payload being captured.
pub struct PayloadCapture {
    records: RecordEncoder,
    /// Each database's (keys, keys with a TTL) at the instant: RESIZEDB.
    sizes: Vec<(u64, u64)>,
    crc: Crc64,
    checksum: bool,
    done: bool,
    /// The keyspace is being captured (the payload has data).
    with_data: bool,
    /// Bytes produced so far.
    pub bytes: u64,
}

impl PayloadCapture {
    /// Starts a capture of `keyspace` now: the payload will hold exactly
    /// the keyspace at this instant (keys already past their TTL left
    /// out), with `position` in its header.
    ///
    /// The caller makes sure no other capture (BGSAVE, a rewrite) runs.
    /// With `filter` excluding the data, the keyspace is not captured at
    /// all: the payload is the header and the trailer.
    pub fn start(
        keyspace: &mut Keyspace,
        encoder: Encoder,
        checksum: bool,
        position: &Position,
        functions: &[Vec<u8>],
        now_ms: i64,
        filter: PayloadFilter,
    ) -> PayloadCapture {
        let mut records =
            RecordEncoder::with_header_and_position(encoder, now_ms, 0, false, Some(position));
        if !filter.exclude_functions {
            records.put_functions(functions);
        }
        let with_data = !filter.exclude_data;
        let sizes = if with_data {
            keyspace
                .iter()
                .map(|db| (db.len() as u64, db.expires_len() as u64))
                .collect()
        } else {
            Vec::new()
        };
        if with_data {
            keyspace.begin_capture();
        }
        PayloadCapture {
            records,
            sizes,
            crc: Crc64::default(),
            checksum,
            done: false,
            with_data,
            bytes: 0,
        }
    }

    /// True once the last chunk was produced (the keyspace capture ended).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Captures for about `budget`, appending finished chunks to `out`.
    /// Returns true when the payload is complete: the last chunk, with
    /// the trailer, is in `out` and the keyspace capture has ended.
    pub fn step(
        &mut self,
        keyspace: &mut Keyspace,
        budget: Duration,
        out: &mut Vec<Vec<u8>>,
    ) -> bool {
        if self.done {
            return true;
        }
        if !self.with_data {
            self.finish(out);
            return true;
        }
        let started = Instant::now();
        loop {
            let records = &mut self.records;
            let sizes = &self.sizes;
            let mut full = Vec::new();
            let finished =
                keyspace.capture_step(RECORDS_PER_CHECK, &mut |db, key, value, expire| {
                    records.push_key(db, key, value, expire, |db| {
                        sizes.get(db).copied().unwrap_or((0, 0))
                    });
                    if let Some(chunk) = records.take_full() {
                        full.push(chunk);
                    }
                });
            for chunk in full {
                self.emit(chunk, out);
            }
            if finished {
                self.finish(out);
                keyspace.end_capture();
                return true;
            }
            // A paced capture (rdb-key-save-delay) waits for its next key.
            if started.elapsed() >= budget || keyspace.capture_wait().is_some() {
                return false;
            }
        }
    }

    /// The last chunk: what is left of the records, EOF and the CRC.
    fn finish(&mut self, out: &mut Vec<Vec<u8>>) {
        let mut last = self.records.take();
        self.crc.update(&last);
        let mut tail = Vec::with_capacity(9);
        put_trailer(&mut tail, &mut self.crc, self.checksum);
        last.extend_from_slice(&tail);
        self.bytes += last.len() as u64;
        out.push(last);
        self.done = true;
    }

    fn emit(&mut self, chunk: Vec<u8>, out: &mut Vec<Vec<u8>>) {
        self.crc.update(&chunk);
        self.bytes += chunk.len() as u64;
        out.push(chunk);
    }

    /// Stops the capture (the keyspace is released); no more chunks.
    pub fn abort(&mut self, keyspace: &mut Keyspace) {
        if !self.done {
            if self.with_data {
                keyspace.end_capture();
            }
            self.done = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repl::ids::ReplId;
    use crate::types::Value;

    fn position() -> Position {
        Position {
            replid: ReplId::parse(&[b'a'; 40]).unwrap(),
            offset: 1234,
            stream_db: 3,
        }
    }

    fn capture_all(keyspace: &mut Keyspace, checksum: bool) -> Vec<u8> {
        capture_filtered(keyspace, checksum, PayloadFilter::default())
    }

    fn capture_filtered(keyspace: &mut Keyspace, checksum: bool, filter: PayloadFilter) -> Vec<u8> {
        let mut capture = PayloadCapture::start(
            keyspace,
            Encoder::default(),
            checksum,
            &position(),
            &[],
            1_000,
            filter,
        );
        let mut chunks = Vec::new();
        while !capture.step(keyspace, Duration::from_micros(50), &mut chunks) {}
        assert!(capture.is_done());
        let bytes: Vec<u8> = chunks.concat();
        assert_eq!(capture.bytes, bytes.len() as u64);
        bytes
    }

    fn string(s: &str) -> Value {
        Value::Str(crate::types::Blob::new(s.as_bytes()))
    }

    #[test]
    fn the_payload_is_an_rdb_file_with_the_position_that_loads_back() {
        let mut keyspace = Keyspace::new(16);
        for i in 0..5_000u32 {
            let key = format!("k{i}");
            keyspace
                .db_mut((i % 3) as usize)
                .set(key.as_bytes(), string(&i.to_string()), false);
        }
        // Past its TTL at the instant: sent, as Redis 7.0 sends it (a
        // replica keeps it until its master's DEL).
        keyspace.db_mut(0).set(b"gone", string("x"), false);
        keyspace.db_mut(0).set_expire(b"gone", 10);
        let bytes = capture_all(&mut keyspace, true);
        assert!(bytes.starts_with(b"REDIS0010"));
        let options = crate::rdb::reader::Options {
            limits: crate::types::EncodingLimits::default(),
            databases: 16,
            skip_expired_before_ms: None,
            now_ms: 1_000,
        };
        let mut per_db = [0usize; 16];
        let summary = crate::rdb::reader::load(&bytes, &options, &mut |key| {
            per_db[key.db] += 1;
            Ok(())
        })
        .expect("the payload loads");
        assert_eq!(summary.len, bytes.len());
        assert_eq!(
            summary.checksum,
            Some(crate::rdb::reader::Checksum::Verified)
        );
        assert_eq!(summary.keys, 5_001);
        for (db, &n) in per_db.iter().enumerate().take(3) {
            assert_eq!(n, keyspace.db(db).len(), "db {db}");
        }
        assert_eq!(summary.position, Some(position()));
        // The keyspace is free for another capture.
        keyspace.begin_capture();
        keyspace.end_capture();
    }

    #[test]
    fn without_checksum_the_crc_is_zero() {
        let mut keyspace = Keyspace::new(16);
        keyspace.db_mut(0).set(b"a", string("1"), false);
        let bytes = capture_all(&mut keyspace, false);
        assert_eq!(&bytes[bytes.len() - 8..], &[0u8; 8]);
        let bytes = capture_all(&mut keyspace, true);
        assert_ne!(&bytes[bytes.len() - 8..], &[0u8; 8]);
    }

    #[test]
    fn a_filter_parses_as_redis_replconf_does() {
        let none = PayloadFilter {
            exclude_data: true,
            exclude_functions: true,
        };
        let functions = PayloadFilter {
            exclude_data: true,
            exclude_functions: false,
        };
        assert_eq!(PayloadFilter::parse(b""), Ok(none));
        assert_eq!(PayloadFilter::parse(b"  "), Ok(none));
        assert_eq!(PayloadFilter::parse(b"functions"), Ok(functions));
        assert_eq!(PayloadFilter::parse(b"FUNCTIONS functions"), Ok(functions));
        assert_eq!(PayloadFilter::parse(b"\"functions\""), Ok(functions));
        assert_eq!(
            PayloadFilter::parse(b"functions keys"),
            Err("ERR Unsupported rdb-filter-only option: keys".into())
        );
        assert_eq!(
            PayloadFilter::parse(b"\"functions"),
            Err("ERR Missing rdb-filter-only values".into())
        );
        assert!(none.is_filtered() && functions.is_filtered());
        assert!(!PayloadFilter::default().is_filtered());
    }

    #[test]
    fn a_filtered_payload_has_no_keys_and_leaves_the_keyspace_free() {
        let mut keyspace = Keyspace::new(16);
        keyspace.db_mut(0).set(b"a", string("1"), false);
        let filter = PayloadFilter::parse(b"functions").unwrap();
        let bytes = capture_filtered(&mut keyspace, true, filter);
        let options = crate::rdb::reader::Options {
            limits: crate::types::EncodingLimits::default(),
            databases: 16,
            skip_expired_before_ms: None,
            now_ms: 1_000,
        };
        let summary =
            crate::rdb::reader::load(&bytes, &options, &mut |_| Ok(())).expect("the payload loads");
        assert_eq!(summary.keys, 0);
        assert_eq!(summary.position, Some(position()));
        // No keyspace capture was begun (another may start).
        keyspace.begin_capture();
        keyspace.end_capture();
    }
}
