//! Payloads larger than the sockets hold: a 32 MB incompressible dataset
//! synced while writes go on (every write after the capture instant must
//! follow the payload), and a replica that stops reading mid-transfer and
//! goes away (the master cleans up and serves the next one).

use crate::dataset::assert_same;
use crate::fake_replica::FakeReplica;
use crate::harness::{
    info, info_int, ok, pipeline, start_replica, wait_synced, wait_until, Conn, Master, SyncMode,
    PATIENCE,
};

/// 32 MB of values LZF cannot shrink, in 10 KiB strings.
fn fill_incompressible(conn: &mut Conn) {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut commands = Vec::new();
    for i in 0..3200 {
        let value: Vec<u8> = (0..10 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        commands.push(vec![
            b"SET".to_vec(),
            format!("blob:{i}").into_bytes(),
            value,
        ]);
    }
    pipeline(conn, &commands);
}

/// A big payload, with writes on the master from the replica's PSYNC until
/// after it is online.
fn large_payload_with_writes(master: Master, mode: SyncMode) {
    let m = master.start(&mode.args());
    let mut c = m.conn();
    fill_incompressible(&mut c);
    let r = start_replica(&m, &[]);
    let mut rc = r.conn();
    // Write until the replica's link is up, and some more.
    let mut writes = 0;
    let mut after_up = 0;
    let deadline = std::time::Instant::now() + PATIENCE;
    while after_up < 200 {
        ok(&mut c, &["INCR", "counter"]);
        ok(&mut c, &["SET", &format!("during:{writes}"), "x"]);
        ok(&mut c, &["DEL", &format!("blob:{}", writes % 3200)]);
        writes += 1;
        if info(&mut rc, "replication")["master_link_status"] == "up" {
            after_up += 1;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the replica's link was not up after {PATIENCE:?}"
        );
    }
    wait_synced(&m, &[&r]);
    assert_same(&m, &r);
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 1);
}

#[test]
fn large_payload_disk_redis_master() {
    large_payload_with_writes(Master::Redis, SyncMode::Disk);
}

#[test]
fn large_payload_disk_hozon_master() {
    large_payload_with_writes(Master::Hozon, SyncMode::Disk);
}

#[test]
fn large_payload_diskless_redis_master() {
    large_payload_with_writes(Master::Redis, SyncMode::Diskless);
}

#[test]
fn large_payload_diskless_hozon_master() {
    large_payload_with_writes(Master::Hozon, SyncMode::Diskless);
}

/// A fake replica reads the `$` line, stops reading, then closes: the
/// master drops it, ends the capture (no BGSAVE left running), keeps
/// serving, and fully syncs the next replica.
fn replica_gone_mid_transfer(master: Master, mode: SyncMode) {
    let m = master.start(&mode.args());
    let mut c = m.conn();
    fill_incompressible(&mut c);
    let mut f = FakeReplica::connect(m.port());
    f.handshake(4242);
    f.send(&["PSYNC", "?", "-1"]);
    assert!(f.line().starts_with("+FULLRESYNC "));
    let dollar = f.line();
    assert!(dollar.starts_with('$'), "{dollar:?}");
    assert_eq!(info_int(&mut c, "replication", "connected_slaves"), 1);
    drop(f);
    wait_until(
        PATIENCE,
        "the master to drop the replica and its capture",
        || {
            let repl = info(&mut c, "replication");
            let persistence = info(&mut c, "persistence");
            let state = (
                repl["connected_slaves"].clone(),
                persistence["rdb_bgsave_in_progress"].clone(),
            );
            match (state.0.as_str(), state.1.as_str()) {
                ("0", "0") => Ok(()),
                _ => Err(format!(
                    "connected_slaves:{} rdb_bgsave_in_progress:{}",
                    state.0, state.1
                )),
            }
        },
    );
    ok(&mut c, &["SET", "after", "1"]);
    let r = start_replica(&m, &[]);
    wait_synced(&m, &[&r]);
    assert_same(&m, &r);
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 2);
}

#[test]
fn replica_gone_mid_transfer_disk_redis_master() {
    replica_gone_mid_transfer(Master::Redis, SyncMode::Disk);
}

#[test]
fn replica_gone_mid_transfer_disk_hozon_master() {
    replica_gone_mid_transfer(Master::Hozon, SyncMode::Disk);
}

#[test]
fn replica_gone_mid_transfer_diskless_redis_master() {
    replica_gone_mid_transfer(Master::Redis, SyncMode::Diskless);
}

#[test]
fn replica_gone_mid_transfer_diskless_hozon_master() {
    replica_gone_mid_transfer(Master::Hozon, SyncMode::Diskless);
}
