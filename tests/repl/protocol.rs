//! The wire protocol as a fake replica sees it: the exact `+FULLRESYNC` /
//! `$<len>` / `$EOF:<mark>` framing after `PSYNC ? -1` or `SYNC`, a payload
//! redis-check-rdb accepts with the right AUX position, the stream's bytes
//! counted against the master's offset, and SELECT after each capture.

use std::time::Duration;

use crate::fake_replica::{aux, check_rdb, parse_commands, FakeReplica};
use crate::harness::{info_int, ok, script, show, wait_until, Conn, Master, SyncMode, PATIENCE};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ask {
    Psync,
    Sync,
}

/// `PSYNC ? -1` (or `SYNC`) from a fake replica: the exact framing, a
/// payload redis-check-rdb accepts with the right AUX position, then a
/// stream whose byte count is the master's offset moved since the capture.
fn fake_replica_sync(master: Master, mode: SyncMode, ask: Ask) {
    let m = master.start(&mode.args());
    let mut c = m.conn();
    script(&mut c, "SET a 1\nSELECT 3\nSET b 2\nSELECT 0");
    let mut f = FakeReplica::connect(m.port());
    f.handshake(4242);
    let announced = match ask {
        Ask::Psync => {
            f.send(&["PSYNC", "?", "-1"]);
            let line = f.line();
            let parts: Vec<&str> = line.split(' ').collect();
            assert!(
                parts.len() == 3 && parts[0] == "+FULLRESYNC" && parts[1].len() == 40,
                "{line:?}"
            );
            Some((
                parts[1].to_string(),
                parts[2].parse::<i64>().expect("offset"),
            ))
        }
        Ask::Sync => {
            f.send(&["SYNC"]);
            None
        }
    };
    let (payload, eof_form) = f.payload();
    assert_eq!(eof_form, mode == SyncMode::Diskless, "payload form");
    assert!(
        payload.starts_with(b"REDIS0010"),
        "{}",
        show(&payload[..16])
    );
    let checked = check_rdb(&payload);
    assert!(checked.contains("[info] 2 keys read"), "{checked}");
    let replid = ok(&mut c, &["INFO", "replication"]).text();
    let replid = replid
        .lines()
        .find_map(|l| l.strip_prefix("master_replid:"))
        .expect("master_replid")
        .trim()
        .to_string();
    assert_eq!(aux(&checked, "repl-id"), replid);
    let start: i64 = aux(&checked, "repl-offset").parse().expect("repl-offset");
    if let Some((id, offset)) = announced {
        assert_eq!(id, replid, "+FULLRESYNC id");
        assert_eq!(
            offset, start,
            "+FULLRESYNC offset vs the payload's repl-offset"
        );
    }
    script(&mut c, "SET after 1\nSELECT 3\nDEL b\nSELECT 0\nINCR after");
    let (units, _) = stream_until_offset(&mut f, &mut c, start);
    assert_eq!(
        units,
        words(&[
            "SELECT 0",
            "SET after 1",
            "SELECT 3",
            "DEL b",
            "SELECT 0",
            "INCR after"
        ])
    );
}

/// Command lines as word lists.
fn words(lines: &[&str]) -> Vec<Vec<String>> {
    lines
        .iter()
        .map(|l| l.split(' ').map(String::from).collect())
        .collect()
}

/// Reads `f`'s stream from offset `from` until it reaches the master's
/// offset; returns its units less PINGs, and the offset reached.
///
/// After a diskless payload the master streams only from an ACK that
/// arrives once it has seen the transfer end (Redis 7.0.15 ignores one that
/// comes earlier), to a SYNC replica too: so this ACKs again and again, as
/// a replica does (once a second).
pub fn stream_until_offset(
    f: &mut FakeReplica,
    c: &mut Conn,
    from: i64,
) -> (Vec<Vec<String>>, i64) {
    let mut stream = Vec::new();
    let reached = wait_until(PATIENCE, "the stream to reach the master's offset", || {
        let acked = from + stream.len() as i64;
        f.send(&["REPLCONF", "ACK", &acked.to_string()]);
        stream.extend(f.take_available(Duration::from_millis(50)));
        let offset = info_int(c, "replication", "master_repl_offset");
        let got = from + stream.len() as i64;
        if got == offset {
            Ok(got)
        } else {
            Err(format!(
                "offset {offset}, received up to {got}: {}",
                show(&stream)
            ))
        }
    });
    let units = parse_commands(&stream)
        .into_iter()
        // Keepalives (Redis 7.0.15 sends `*1\r\n$4\r\nping\r\n`, lower case).
        .filter(|u| !(u.len() == 1 && u[0].eq_ignore_ascii_case("ping")))
        .collect();
    (units, reached)
}

#[test]
fn fake_psync_disk_redis_master() {
    fake_replica_sync(Master::Redis, SyncMode::Disk, Ask::Psync);
}

#[test]
fn fake_psync_disk_hozon_master() {
    fake_replica_sync(Master::Hozon, SyncMode::Disk, Ask::Psync);
}

#[test]
fn fake_psync_diskless_redis_master() {
    fake_replica_sync(Master::Redis, SyncMode::Diskless, Ask::Psync);
}

#[test]
fn fake_psync_diskless_hozon_master() {
    fake_replica_sync(Master::Hozon, SyncMode::Diskless, Ask::Psync);
}

#[test]
fn fake_sync_disk_redis_master() {
    fake_replica_sync(Master::Redis, SyncMode::Disk, Ask::Sync);
}

#[test]
fn fake_sync_disk_hozon_master() {
    fake_replica_sync(Master::Hozon, SyncMode::Disk, Ask::Sync);
}

#[test]
fn fake_sync_diskless_redis_master() {
    fake_replica_sync(Master::Redis, SyncMode::Diskless, Ask::Sync);
}

#[test]
fn fake_sync_diskless_hozon_master() {
    fake_replica_sync(Master::Hozon, SyncMode::Diskless, Ask::Sync);
}

/// A second capture makes the stream forget its database: the next unit
/// starts with SELECT, for the new replica and for the one already online.
fn second_capture_restarts_select(master: Master) {
    let m = master.start(&SyncMode::Disk.args());
    let mut c = m.conn();
    let mut f = FakeReplica::connect(m.port());
    let start = f.attach(4242);
    ok(&mut c, &["SET", "x", "1"]);
    let (units, f_at) = stream_until_offset(&mut f, &mut c, start);
    assert_eq!(units, words(&["SELECT 0", "SET x 1"]));
    let mut g = FakeReplica::connect(m.port());
    let g_start = g.attach(4243);
    assert_eq!(g_start, f_at, "the second capture's offset");
    ok(&mut c, &["SET", "y", "1"]);
    let (units, _) = stream_until_offset(&mut g, &mut c, g_start);
    assert_eq!(units, words(&["SELECT 0", "SET y 1"]), "new replica");
    let (units, _) = stream_until_offset(&mut f, &mut c, f_at);
    assert_eq!(units, words(&["SELECT 0", "SET y 1"]), "online replica");
    assert_eq!(info_int(&mut c, "stats", "sync_full"), 2);
}

#[test]
fn second_capture_restarts_select_redis_master() {
    second_capture_restarts_select(Master::Redis);
}

#[test]
fn second_capture_restarts_select_hozon_master() {
    second_capture_restarts_select(Master::Hozon);
}

/// `PSYNC <an id the master never had> <offset>`: a full sync that counts
/// in `sync_partial_err` (a `?` id does not).
fn psync_with_unknown_id(master: Master) {
    let m = master.start(&SyncMode::Disk.args());
    let mut c = m.conn();
    ok(&mut c, &["SET", "k", "v"]);
    let mut f = FakeReplica::connect(m.port());
    f.handshake(4242);
    f.send(&["PSYNC", &"f".repeat(40), "100"]);
    let line = f.line();
    assert!(line.starts_with("+FULLRESYNC "), "{line:?}");
    f.payload();
    let stats = crate::harness::info(&mut c, "stats");
    assert_eq!(
        (
            &stats["sync_full"][..],
            &stats["sync_partial_ok"][..],
            &stats["sync_partial_err"][..]
        ),
        ("1", "0", "1")
    );
}

#[test]
fn psync_with_unknown_id_redis_master() {
    psync_with_unknown_id(Master::Redis);
}

#[test]
fn psync_with_unknown_id_hozon_master() {
    psync_with_unknown_id(Master::Hozon);
}

/// A replica that comes back with the master's id and the next offset it
/// lacks continues: `+CONTINUE <replid>` (it said capa psync2), then exactly
/// the units it missed, no SELECT (it kept its database). An offset past
/// the master's gets a full sync instead.
fn psync_continue(master: Master) {
    let m = master.start(&SyncMode::Disk.args());
    let mut c = m.conn();
    let mut f = FakeReplica::connect(m.port());
    let start = f.attach(4242);
    ok(&mut c, &["SET", "a", "1"]);
    let (_, reached) = stream_until_offset(&mut f, &mut c, start);
    drop(f);
    ok(&mut c, &["SET", "b", "2"]);
    let replid = crate::harness::info(&mut c, "replication")["master_replid"].clone();

    let mut g = FakeReplica::connect(m.port());
    g.handshake(4242);
    g.send(&["PSYNC", &replid, &(reached + 1).to_string()]);
    assert_eq!(g.line(), format!("+CONTINUE {replid}"));
    let (units, _) = stream_until_offset(&mut g, &mut c, reached);
    assert_eq!(units, words(&["SET b 2"]));

    let offset = info_int(&mut c, "replication", "master_repl_offset");
    let mut h = FakeReplica::connect(m.port());
    h.handshake(4243);
    h.send(&["PSYNC", &replid, &(offset + 2).to_string()]);
    let line = h.line();
    assert!(line.starts_with("+FULLRESYNC "), "{line:?}");
    let stats = crate::harness::info(&mut c, "stats");
    assert_eq!(
        (&stats["sync_full"][..], &stats["sync_partial_ok"][..]),
        ("2", "1")
    );
}

#[test]
fn psync_continue_redis_master() {
    psync_continue(Master::Redis);
}

#[test]
fn psync_continue_hozon_master() {
    psync_continue(Master::Hozon);
}
