//! A damaged file refuses the start with a typed error: `Error::Corrupt`
//! names the file, the offset of the damage and the decoder's own error.

use std::path::{Path, PathBuf};

use hozon::config::SnapshotFormat;
use hozon::error::{CorruptCause, CorruptFile};
use hozon::{Config, Engine, Error};

use crate::common::run;

/// A cache-mode configuration in `dir` (the snapshot is loaded at start).
fn cache_config(dir: &Path, format: SnapshotFormat, file: &str) -> Config {
    let mut config = Config::in_memory();
    config.dir = dir.to_path_buf();
    config.snapshot_format = format;
    config.dbfilename = file.to_string();
    config
}

/// Saves a few keys with `format` and returns the file's path.
fn saved(dir: &Path, format: SnapshotFormat, file: &str) -> PathBuf {
    let mut engine = Engine::open(cache_config(dir, format, file)).unwrap();
    let mut session = engine.new_session();
    for i in 0..200 {
        let key = format!("key:{i}");
        let value = format!("value {i} {}", "x".repeat(i % 50));
        run(&mut engine, &mut session, &["SET", &key, &value]);
        run(
            &mut engine,
            &mut session,
            &["RPUSH", &format!("list:{i}"), "a", "b", "c"],
        );
    }
    assert_eq!(
        run(&mut engine, &mut session, &["SAVE"]),
        hozon::Reply::ok()
    );
    drop(engine);
    dir.join(file)
}

fn refused(config: Config) -> CorruptFile {
    match Engine::open(config) {
        Ok(_) => panic!("a damaged file was loaded"),
        Err(Error::Corrupt(file)) => *file,
        Err(other) => panic!("expected Error::Corrupt, got {other:?}"),
    }
}

#[test]
fn a_damaged_dump_hoz_names_its_path_offset_and_snapshot_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = saved(dir.path(), SnapshotFormat::Native, "dump.hoz");
    let mut data = std::fs::read(&path).unwrap();
    let at = data.len() / 2;
    data[at] ^= 0x5a;
    std::fs::write(&path, &data).unwrap();
    let file = refused(cache_config(dir.path(), SnapshotFormat::Native, "dump.hoz"));
    assert_eq!(file.path, path);
    let CorruptCause::Snapshot(e) = &file.cause else {
        panic!("cause {:?}", file.cause)
    };
    assert_eq!(file.offset, e.offset());
    let offset = file.offset.expect("a flipped block byte has an offset");
    assert!(
        offset <= at as u64,
        "damage reported at {offset}, flipped at {at}"
    );
    assert!(std::error::Error::source(&file).is_some());
    assert!(
        file.to_string()
            .contains(&format!("damage at offset {offset}")),
        "{file}"
    );
}

#[test]
fn a_damaged_dump_rdb_carries_the_rdb_readers_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = saved(dir.path(), SnapshotFormat::Rdb, "dump.rdb");
    let mut data = std::fs::read(&path).unwrap();
    let at = data.len() / 2;
    data[at] ^= 0x5a;
    std::fs::write(&path, &data).unwrap();
    let file = refused(cache_config(dir.path(), SnapshotFormat::Rdb, "dump.rdb"));
    assert_eq!(file.path, path);
    let CorruptCause::Rdb(e) = &file.cause else {
        panic!("cause {:?}", file.cause)
    };
    assert_eq!(file.offset, Some(e.offset));
    assert!(file.to_string().contains("hozon-repair check"), "{file}");
}

#[test]
fn bytes_after_an_rdb_checksum_are_counted_and_located() {
    let dir = tempfile::tempdir().unwrap();
    let path = saved(dir.path(), SnapshotFormat::Rdb, "dump.rdb");
    let mut data = std::fs::read(&path).unwrap();
    let len = data.len() as u64;
    data.extend_from_slice(b"extra");
    std::fs::write(&path, &data).unwrap();
    let file = refused(cache_config(dir.path(), SnapshotFormat::Rdb, "dump.rdb"));
    assert_eq!(file.path, path);
    assert_eq!(file.offset, Some(len));
    assert!(
        matches!(file.cause, CorruptCause::TrailingBytes { count: 5 }),
        "{:?}",
        file.cause
    );
}

#[test]
fn a_torn_aof_refused_by_aof_load_truncated_no_gives_where_it_tears() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = crate::common::durable_config(dir.path(), hozon::config::AppendFsync::Always);
    {
        let mut engine = Engine::open(config.clone()).unwrap();
        let mut session = engine.new_session();
        for i in 0..20 {
            run(&mut engine, &mut session, &["SET", &format!("k{i}"), "v"]);
        }
    }
    let path = dir.path().join("appendonly.aof");
    let data = std::fs::read(&path).unwrap();
    std::fs::write(&path, &data[..data.len() - 3]).unwrap();
    config.aof_load_truncated = false;
    let file = refused(config);
    assert_eq!(file.path, path);
    let CorruptCause::TornTail(torn) = &file.cause else {
        panic!("cause {:?}", file.cause)
    };
    assert_eq!(file.offset, Some(torn.valid_len));
    assert!(torn.valid_len < data.len() as u64 - 3);
}
