//! The loading thread's new AOF: the payload as an RDB preamble on the
//! file and memory paths, and the keyspace as commands when that path
//! fails (FaultyIo).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::{run, Job, PayloadSource};
use crate::core::sync_load::LoadCounters;
use crate::persist::aof::FILE_HEADER;
use crate::persist::io::{Fault, FaultyIo, Io};
use crate::rdb::writer::{encode_file, Encoder};
use crate::types::{Blob, Value};

/// A small RDB image: 100 strings in db 0, one with an expiry long past.
fn payload() -> Vec<u8> {
    let keys: Vec<(Blob, Value)> = (0..100)
        .map(|i| {
            (
                Blob::from(format!("k{i}").as_bytes()),
                Value::Str(Blob::from(format!("v{i}").as_bytes())),
            )
        })
        .collect();
    encode_file(
        &Encoder::default(),
        1_700_000_000_000,
        keys.iter()
            .enumerate()
            .map(|(i, (k, v))| (0, k, v, (i == 0).then_some(1))),
    )
}

fn job(io: &Arc<FaultyIo>, source: PayloadSource, temp: &Path) -> Job {
    let io: Arc<dyn Io> = io.clone();
    Job {
        source,
        io,
        options: crate::rdb::reader::Options {
            limits: Default::default(),
            databases: 16,
            skip_expired_before_ms: None,
            now_ms: 1_800_000_000_000,
        },
        databases: 16,
        aof_temp: Some(temp.to_path_buf()),
        counters: Arc::new(LoadCounters::default()),
        cancel: Arc::new(AtomicBool::new(false)),
        key_load_delay: 0,
        lfu: false,
    }
}

fn paths() -> (PathBuf, PathBuf) {
    (
        PathBuf::from("/data/temp-sync-1-0.rdb"),
        PathBuf::from("/data/temp-sync-aof-1-0.aof"),
    )
}

#[test]
fn the_payload_file_becomes_the_new_aof() {
    let io = Arc::new(FaultyIo::new());
    let (file, temp) = paths();
    let rdb = payload();
    io.set_contents(&file, rdb.clone());
    let loaded = run(job(&io, PayloadSource::File(file.clone()), &temp)).expect("loaded");
    assert_eq!(loaded.keyspace.total_keys(), 100, "expired keys kept");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.aof_temp.as_deref(), Some(temp.as_path()));
    assert_eq!(io.contents(&temp), Some([&rdb[..], FILE_HEADER].concat()));
    // Renamed, not copied.
    assert_eq!(io.contents(&file), None);
}

#[test]
fn a_payload_in_memory_is_written_as_the_new_aof() {
    let io = Arc::new(FaultyIo::new());
    let (_, temp) = paths();
    let rdb = payload();
    let loaded = run(job(&io, PayloadSource::Memory(rdb.clone()), &temp)).expect("loaded");
    assert_eq!(loaded.keyspace.total_keys(), 100);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(io.contents(&temp), Some([&rdb[..], FILE_HEADER].concat()));
}

#[test]
fn a_failed_preamble_falls_back_to_the_keyspace_as_commands() {
    for memory in [false, true] {
        let io = Arc::new(FaultyIo::new());
        let (file, temp) = paths();
        let rdb = payload();
        let source = if memory {
            PayloadSource::Memory(rdb.clone())
        } else {
            io.set_contents(&file, rdb.clone());
            PayloadSource::File(file.clone())
        };
        // The preamble's first fsync fails.
        io.inject(Fault::FailSync { nth: 1, errno: 5 });
        let loaded = run(job(&io, source, &temp)).expect("loaded");
        assert_eq!(loaded.keyspace.total_keys(), 100);
        assert_eq!(loaded.warnings.len(), 1, "memory {memory}");
        assert!(
            loaded.warnings[0].contains("could not become the new append only file's preamble"),
            "{:?}",
            loaded.warnings
        );
        let aof = io.contents(&temp).expect("the new AOF");
        assert!(aof.starts_with(FILE_HEADER), "memory {memory}");
        assert!(
            aof.windows(6).any(|w| w == b"$2\r\nk7"),
            "memory {memory}: the keys as commands"
        );
    }
}
