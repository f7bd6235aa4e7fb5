//! `snapshot_read`: the dump.hoz reader (`persist::snapshot`:
//! `read_summary`, `load`, `load_into`, `scan_keys`).
//!
//! Input: a dump.hoz file. Properties:
//! - no reader panics, and `load`'s heap stays within a bound
//!   proportional to the file;
//! - a file `load` accepts, `scan_keys` accepts too, visiting as many
//!   keys as the load delivers and as the footer's statistics count;
//! - what `load` accepts loads into a keyspace of the databases the file
//!   declares (`load_into`), with the same keys;
//! - that keyspace, saved again (`save_keyspace`, to the in-memory file
//!   system) and loaded, gives the same keys, values and expiry times.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

use hozon::keyspace::Keyspace;
use hozon::persist::io::FaultyIo;
use hozon::persist::snapshot;
use hozon::types::EncodingLimits;

use super::{alloc, canon};

/// Databases beyond which the round trip is not tried (the keyspace
/// would be built for all of them).
const DATABASES_MAX: usize = 1 << 12;

/// The check (see the module documentation).
pub fn check(data: &[u8]) {
    let _ = snapshot::read_summary(data);
    let limits = EncodingLimits::default();
    let (loaded, peak) = alloc::peak_of(|| snapshot::load(data, limits, 1, i64::MIN));
    alloc::assert_bounded("dump.hoz load", peak, data.len(), 256);
    let mut visited = 0u64;
    let scanned = snapshot::scan_keys(data, 0, &mut |_| {
        visited += 1;
        ControlFlow::Continue(())
    });
    let Ok(loaded) = loaded else {
        return;
    };
    let summary = loaded
        .summary
        .clone()
        .expect("a load that succeeded has a summary");
    let scanned = scanned.unwrap_or_else(|e| panic!("load accepts, scan_keys refuses: {e}"));
    assert_eq!(scanned, summary, "scan_keys and load read other summaries");
    assert_eq!(
        visited,
        loaded.len() as u64,
        "scan_keys visits, load delivers"
    );
    assert_eq!(summary.stats.keys, visited, "the footer's key count");
    let before = canon::of_keys(loaded.keys());
    let databases = summary.databases as usize;
    if databases > DATABASES_MAX {
        return;
    }
    let mut keyspace = Keyspace::new(databases.max(1));
    if let Err(e) = snapshot::load_into(data, &mut keyspace, limits, 1, i64::MIN) {
        panic!("load accepts, load_into refuses: {e}");
    }
    canon::assert_same("load vs load_into", &before, &canon::of_keyspace(&keyspace));
    let io = Arc::new(FaultyIo::new());
    let dir = Path::new("/fuzz");
    snapshot::save_keyspace(&keyspace, i64::MIN, io.clone(), dir, "dump.hoz")
        .unwrap_or_else(|e| panic!("saving what was loaded fails: {e}"));
    let saved = io
        .contents(&dir.join("dump.hoz"))
        .expect("the saved file exists");
    let again = snapshot::load(&saved, limits, 1, i64::MIN)
        .unwrap_or_else(|e| panic!("what was saved does not load: {e}"));
    canon::assert_same(
        "loaded vs saved and loaded",
        &before,
        &canon::of_keys(again.keys()),
    );
}
