use super::*;

// -- Writing and faults -------------------------------------------------

#[test]
fn failed_writes_fsyncs_and_renames_keep_the_previous_snapshot() {
    let dir = Path::new("/d");
    let final_path = dir.join("dump.hoz");
    let old = random_keyspace(1, 30);
    let new = random_keyspace(2, 30);
    let io = FaultyIo::new();
    save_keyspace_with_block_size(&old, NOW_MS, Arc::new(io.clone()), dir, "dump.hoz", 500)
        .expect("first save");
    let previous = io.contents(&final_path).expect("saved");
    let (w0, s0) = io.counts();
    save_keyspace_with_block_size(&new, NOW_MS, Arc::new(io.clone()), dir, "dump.hoz", 500)
        .expect("second save");
    let (w1, s1) = io.counts();
    let (writes, syncs) = (w1 - w0, s1 - s0);
    assert!(writes > 5 && syncs >= 1);
    let check_intact = |io: &FaultyIo, what: &str| {
        assert_eq!(io.contents(&final_path).as_ref(), Some(&previous), "{what}");
        assert_eq!(
            io.list_dir(dir).expect("list"),
            vec!["dump.hoz".to_string()],
            "{what}: temp file left"
        );
    };
    let fresh = || {
        let io = FaultyIo::new();
        io.set_contents(&final_path, previous.clone());
        io
    };
    for nth in 1..=writes {
        for errno in [5, 28] {
            let io = fresh();
            io.inject(Fault::FailWrite {
                nth,
                errno,
                sticky: errno == 28,
            });
            let err = save_keyspace_with_block_size(
                &new,
                NOW_MS,
                Arc::new(io.clone()),
                dir,
                "dump.hoz",
                500,
            )
            .expect_err("write fault");
            assert!(matches!(err, SnapshotError::Io { .. }), "{err}");
            check_intact(&io, &format!("write {nth} errno {errno}"));
        }
        // A short write is retried, not an error.
        let io = fresh();
        io.inject(Fault::ShortWrite { nth, bytes: 3 });
        save_keyspace_with_block_size(&new, NOW_MS, Arc::new(io.clone()), dir, "dump.hoz", 500)
            .expect("short write retried");
        let data = io.contents(&final_path).expect("saved");
        assert_loads_as(
            &dump(&new, NOW_MS),
            &dump_loaded(&load(&data, &read(0, limits(), NOW_MS)).expect("load")),
            &limits(),
            "short write",
        );
    }
    for nth in 1..=syncs {
        let io = fresh();
        io.inject(Fault::FailSync { nth, errno: 5 });
        save_keyspace_with_block_size(&new, NOW_MS, Arc::new(io.clone()), dir, "dump.hoz", 500)
            .expect_err("fsync fault");
        check_intact(&io, &format!("fsync {nth}"));
    }
    let io = fresh();
    io.inject(Fault::FailRename { nth: 1, errno: 5 });
    let err = save_keyspace(&new, NOW_MS, Arc::new(io.clone()), dir, "dump.hoz").unwrap_err();
    assert!(err.to_string().contains("renaming"), "{err}");
    check_intact(&io, "rename");
    // A failed directory fsync is reported as such: the new file is
    // complete under the name, and a power loss may give the name back
    // to the previous one (both are complete snapshots).
    let io = fresh();
    io.inject(Fault::FailDirSync { nth: 1, errno: 5 });
    let err = save_keyspace(&new, NOW_MS, Arc::new(io.clone()), dir, "dump.hoz").unwrap_err();
    assert!(matches!(err, SnapshotError::DirNotSynced { .. }), "{err}");
    assert!(
        err.to_string().contains("may not survive a power loss"),
        "{err}"
    );
    let data = io.contents(&final_path).expect("renamed");
    assert_loads_as(
        &dump(&new, NOW_MS),
        &dump_loaded(&load(&data, &read(0, limits(), NOW_MS)).expect("load")),
        &limits(),
        "renamed, directory not synced",
    );
    io.power_loss(crate::persist::io::PowerLoss::DropUnsynced);
    check_intact(&io, "power loss after a failed directory fsync");
}

#[test]
fn power_loss_after_save_keeps_a_complete_snapshot() {
    let dir = Path::new("/d");
    let io = FaultyIo::new();
    let ks = random_keyspace(8, 50);
    save_keyspace(&ks, NOW_MS, Arc::new(io.clone()), dir, "dump.hoz").expect("save");
    io.power_loss(crate::persist::io::PowerLoss::DropUnsynced);
    let data = io.contents(&dir.join("dump.hoz")).expect("durable");
    assert_loads_as(
        &dump(&ks, NOW_MS),
        &dump_loaded(&load(&data, &read(2, limits(), NOW_MS)).expect("load")),
        &limits(),
        "after power loss",
    );
}

#[test]
fn incremental_fsync_every_32_mib() {
    let io = FaultyIo::new();
    let path = Path::new("/d/t");
    let mut w =
        FileWriter::create(Arc::new(io.clone()), path, HeaderInfo::new(NOW_MS, 1)).expect("create");
    let mut rng = Rng::with_seed(1);
    let (_, s0) = io.counts();
    for _ in 0..40 {
        // Incompressible 1 MiB blocks.
        let data: Vec<u8> = (0..1 << 20).map(|_| rng.next_u64() as u8).collect();
        w.write_block(RawBlock { data, records: 0 }).expect("write");
    }
    assert_eq!(io.counts().1 - s0, 1, "one fsync after 32 MiB");
    w.finish(&Stats::default()).expect("finish");
    assert_eq!(io.counts().1 - s0, 2);
}

// -- Performance (release mode, by hand) --------------------------------

/// Load timings of an existing file:
/// `HOZON_BENCH_FILE=dump.hoz cargo test --release --lib persist::snapshot::tests::bench_load_file -- --ignored --nocapture`
#[test]
#[ignore = "benchmark: run by hand in release mode"]
fn bench_load_file() {
    let Some(path) = std::env::var_os("HOZON_BENCH_FILE") else {
        return;
    };
    let data = RealIo.map(Path::new(&path)).expect("map");
    let l = EncodingLimits::default();
    for workers in [0, 1, 2] {
        let t = std::time::Instant::now();
        let loaded = load(&data, &read(workers, l, NOW_MS)).expect("load");
        let decoded = t.elapsed();
        let mut ks = Keyspace::new(16);
        loaded.into_keyspace(&mut ks).expect("insert");
        let total = t.elapsed();
        let t = std::time::Instant::now();
        drop(ks);
        println!(
            "{workers} worker(s): decode {decoded:?}, insert {:?}, (drop {:?})",
            total - decoded,
            t.elapsed()
        );
        let t = std::time::Instant::now();
        let mut ks = Keyspace::new(16);
        load_into(&data, &mut ks, &read(workers, l, NOW_MS)).expect("load_into");
        println!("{workers} worker(s): load_into {:?}", t.elapsed());
        // Freeing is not loading: keep it out of profiles.
        std::mem::forget(ks);
    }
}

/// `cargo test --release --lib persist::snapshot::tests::bench -- --ignored --nocapture`
#[test]
#[ignore = "benchmark: run by hand in release mode"]
fn bench_save_and_load() {
    let n: usize = std::env::var("HOZON_BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let l = limits();
    let mut ks = Keyspace::new(16);
    for i in 0..n {
        ks.db_mut(0).insert_new(
            format!("key:{i}").as_bytes(),
            Value::Str(Blob::from(format!("value:{i}").into_bytes())),
        );
    }
    for i in 0..1000 {
        let mut h = Hash::new();
        let mut z = ZSet::new();
        let mut s = Set::default();
        let mut list = List::new();
        for j in 0..100 {
            h.set(
                format!("field:{j}").as_bytes(),
                Blob::from(format!("v{}", i * j).into_bytes()),
                &l,
            );
            z.add(
                format!("member:{j}").as_bytes(),
                (i * j) as f64,
                AddFlags::default(),
                &l,
            )
            .expect("score");
            s.insert(format!("{}", i * 1000 + j).as_bytes(), 512);
            list.push(End::Tail, format!("element:{j}").as_bytes());
        }
        ks.db_mut(0)
            .insert_new(format!("hash:{i}").as_bytes(), Value::Hash(Box::new(h)));
        ks.db_mut(0)
            .insert_new(format!("zset:{i}").as_bytes(), Value::ZSet(Box::new(z)));
        ks.db_mut(0)
            .insert_new(format!("set:{i}").as_bytes(), Value::Set(Box::new(s)));
        ks.db_mut(0)
            .insert_new(format!("list:{i}").as_bytes(), Value::List(Box::new(list)));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let t = std::time::Instant::now();
    let summary =
        save_keyspace(&ks, NOW_MS, Arc::new(RealIo), dir.path(), "dump.hoz").expect("save");
    let save = t.elapsed();
    println!(
        "save: {save:?}, file {} bytes ({} raw), {} blocks",
        summary.file_len,
        summary.raw_bytes,
        summary.blocks.len()
    );
    let data = RealIo.map(&dir.path().join("dump.hoz")).expect("map");
    for workers in [0, 1] {
        let t = std::time::Instant::now();
        let mut ks2 = Keyspace::new(16);
        load_into(&data, &mut ks2, &read(workers, l, NOW_MS)).expect("load");
        println!("load_into, {workers} worker(s): {:?}", t.elapsed());
        let t = std::time::Instant::now();
        let loaded = load(&data, &read(workers, l, NOW_MS)).expect("load");
        let decoded = t.elapsed();
        let mut ks3 = Keyspace::new(16);
        loaded.into_keyspace(&mut ks3).expect("insert");
        println!(
            "load (decode {decoded:?}) + into_keyspace, {workers} worker(s): {:?}",
            t.elapsed()
        );
        assert_eq!(ks2.total_keys(), ks.total_keys());
    }
}
