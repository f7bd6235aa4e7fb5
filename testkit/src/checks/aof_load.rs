//! `aof_load`: the AOF loader (`Engine::load_aof_image`: hozon's
//! checksummed batches, Redis's plain RESP with `#TS:` lines, after a
//! dump.hoz or RDB preamble) and its walk (`persist::aof::walk`).
//!
//! Input: one control byte, then the file. With bit 0 of the control byte
//! set the rest is split at each `\n--\n` into batch bodies and written
//! as hozon's format (the file header, then each body with its correct
//! `#hz1` annotation), so mutations reach the commands inside verified
//! batches; otherwise the rest is the file as it is. Properties:
//! - loading never panics and its heap stays within a bound
//!   proportional to the file;
//! - a load that succeeds accounts for the file: its valid length plus
//!   the torn tail it reports is the whole file;
//! - loading the valid prefix alone succeeds with no torn tail and gives
//!   the same keyspace (what `hozon-repair fix` relies on; expiry times
//!   compared as present or absent only, since a relative TTL in the log
//!   is resolved against the clock of each load);
//! - for a file without a preamble, `walk` agrees with the load (both
//!   succeed, with the same valid length and command count).

use std::path::Path;

use hozon::persist::aof::{self, annotation_line, FILE_HEADER};
use hozon::{Config, Engine};

use super::{alloc, canon};

/// The batch separator of the batched input mode.
pub const SEPARATOR: &[u8] = b"\n--\n";

/// The file the input stands for.
pub fn file_of(data: &[u8]) -> Vec<u8> {
    let Some((&ctl, rest)) = data.split_first() else {
        return Vec::new();
    };
    if ctl & 1 == 0 {
        return rest.to_vec();
    }
    let mut out = FILE_HEADER.to_vec();
    let mut pos = 0;
    let mut ts = super::NOW_MS;
    while pos <= rest.len() {
        let end = rest[pos..]
            .windows(SEPARATOR.len())
            .position(|w| w == SEPARATOR)
            .map_or(rest.len(), |i| pos + i);
        let body = &rest[pos..end];
        if !body.is_empty() {
            out.extend_from_slice(body);
            out.extend_from_slice(&annotation_line(body, ts));
            ts += 1;
        }
        pos = end + SEPARATOR.len();
    }
    out
}

fn load(file: &[u8]) -> (Result<aof::LoadReport, hozon::Error>, Engine) {
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory engine opens");
    let result = engine.load_aof_image(file, Path::new("fuzz.aof"), true);
    (result, engine)
}

/// The check (see the module documentation).
pub fn check(data: &[u8]) {
    let file = file_of(data);
    let ((result, engine), peak) = alloc::peak_of(|| load(&file));
    // Values are built from the file's bytes; small elements cost their
    // containers' per-element overhead.
    alloc::assert_bounded("AOF load", peak, file.len(), 256);
    let Ok(report) = result else {
        return;
    };
    let dropped = report.torn.as_ref().map_or(0, |t| t.dropped_bytes);
    assert_eq!(
        report.valid_len + dropped,
        file.len() as u64,
        "valid length and torn tail do not cover the file: {report:?}"
    );
    if let Some(torn) = &report.torn {
        assert_eq!(
            torn.valid_len, report.valid_len,
            "two valid lengths: {report:?}"
        );
        let prefix = &file[..report.valid_len as usize];
        let (again, engine_again) = load(prefix);
        let again = again.unwrap_or_else(|e| panic!("the valid prefix does not load: {e}"));
        assert!(
            again.torn.is_none(),
            "the valid prefix has a torn tail: {again:?}"
        );
        canon::assert_same(
            "the file vs its valid prefix",
            &canon::expiry_times_masked(&canon::of_keyspace_with(
                engine.keyspace(),
                canon::Clock::Masked,
            )),
            &canon::expiry_times_masked(&canon::of_keyspace_with(
                engine_again.keyspace(),
                canon::Clock::Masked,
            )),
        );
    }
    let preamble =
        file.starts_with(&hozon::persist::snapshot::MAGIC) || hozon::rdb::reader::is_rdb(&file);
    if !preamble {
        let mut commands = 0u64;
        let walked = aof::walk(&file, &mut |event| {
            if let aof::WalkEvent::Command(c) = event {
                let name = c.argv[0];
                if !name.eq_ignore_ascii_case(b"SELECT")
                    && !name.eq_ignore_ascii_case(b"MULTI")
                    && !name.eq_ignore_ascii_case(b"EXEC")
                {
                    commands += 1;
                }
            }
            std::ops::ControlFlow::Continue(())
        });
        let walked = walked.unwrap_or_else(|e| panic!("the load succeeded, the walk fails: {e:?}"));
        assert_eq!(
            walked.valid_len, report.valid_len,
            "walk vs load valid length"
        );
        assert_eq!(commands, report.commands, "walk vs load command count");
    }
}
