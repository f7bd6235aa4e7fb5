//! The full-disk contract of docs/persistence.md on a real file system: a
//! small tmpfs data directory is filled until the AOF's write(2) fails.
//! The write in that batch gets no reply until there is room again, other
//! writes are refused with Redis's MISCONF text (in MULTI too), reads go
//! on, and once space is freed the held reply arrives and writes are
//! accepted; after SIGKILL every acknowledged write is there and no refused
//! one. The server also restarts on a full disk.

use std::time::Duration;

use crate::resp::{Client, V};
use crate::{DataDir, Server};

const AOF_FULL: &str = "MISCONF Errors writing to the AOF file: No space left on device";

fn ok() -> V {
    V::Simple("OK".into())
}

fn value(i: u64) -> Vec<u8> {
    format!("{i}:{}", "x".repeat(100)).into_bytes()
}

fn args() -> Vec<String> {
    [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
    ]
    .map(String::from)
    .to_vec()
}

/// Every acknowledged key is there with its value, `c` is not, and
/// nothing else is.
fn check(conn: &mut Client, acked: &[u64], extra: &[(&[u8], &[u8])]) {
    for &i in acked {
        let key = format!("w{i}");
        assert_eq!(
            conn.must(&[b"GET", key.as_bytes()]),
            V::Bulk(value(i)),
            "acknowledged {key}"
        );
    }
    for (k, v) in extra {
        assert_eq!(conn.must(&[b"GET", k]), V::Bulk(v.to_vec()), "key {k:?}");
    }
    assert_eq!(conn.must(&[b"EXISTS", b"c"]), V::Int(0), "a refused write");
    assert_eq!(
        conn.must(&[b"DBSIZE"]),
        V::Int((acked.len() + extra.len()) as i64)
    );
}

/// A 4 MiB tmpfs data directory and a temporary directory (kept alive by
/// the caller) with the server log's path. Where no tmpfs can be mounted
/// the test fails (DataDir::new), unless HOZON_SOAK_TMPFS=0 says to skip
/// the full-disk tests on purpose: then None, with a note.
fn full_disk_dir() -> Option<(DataDir, tempfile::TempDir, std::path::PathBuf)> {
    let data = DataDir::new(4);
    if !data.tmpfs {
        eprintln!("full-disk test not run: HOZON_SOAK_TMPFS=0 asks for no tmpfs");
        return None;
    }
    let logs = tempfile::tempdir().expect("log dir");
    let log = logs.path().join("server.log");
    Some((data, logs, log))
}

#[test]
fn full_disk_holds_the_reply_refuses_writes_and_recovers() {
    let Some((data, _logs, log)) = full_disk_dir() else {
        return;
    };
    let server = Server::start(data.path(), &log, &args());
    let mut writer = Client::connect(server.port, Duration::from_secs(2)).expect("connect");
    let mut reader = Client::connect(server.port, Duration::from_secs(20)).expect("connect");
    assert_eq!(writer.must(&[b"SET", b"a", b"1"]), ok());

    let filled = data.fill();
    assert!(filled > 0, "the filler wrote nothing");
    // Writes succeed while the AOF's last page has room; the first one
    // whose batch cannot be written gets no reply.
    let mut acked = Vec::new();
    let mut held = None;
    for i in 0..100_000u64 {
        let key = format!("w{i}");
        writer
            .send(&[crate::resp::cmd(&[b"SET", key.as_bytes(), &value(i)])])
            .expect("send");
        match writer.read() {
            Ok(r) => {
                assert_eq!(r, ok(), "SET {key} on an almost full disk");
                acked.push(i);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                held = Some(i);
                break;
            }
            Err(e) => panic!("SET {key}: {e}"),
        }
    }
    let held = held.expect("the disk never filled up");
    let info = reader.must(&[b"INFO", b"persistence"]).bytes();
    assert!(
        String::from_utf8_lossy(&info).contains("aof_last_write_status:err"),
        "a held write without a failed AOF write"
    );
    // Other writes are refused with Redis's text, in MULTI too.
    assert_eq!(reader.must(&[b"SET", b"c", b"3"]), V::Err(AOF_FULL.into()));
    assert_eq!(reader.must(&[b"MULTI"]), ok());
    assert_eq!(reader.must(&[b"SET", b"c", b"3"]), V::Err(AOF_FULL.into()));
    assert_eq!(
        reader.must(&[b"EXEC"]),
        V::Err("EXECABORT Transaction discarded because of previous errors.".into())
    );
    // Reads go on.
    assert_eq!(reader.must(&[b"GET", b"a"]), V::Bulk(b"1".to_vec()));
    if let Some(&last) = acked.last() {
        let key = format!("w{last}");
        assert_eq!(reader.must(&[b"GET", key.as_bytes()]), V::Bulk(value(last)));
    }

    // Room again: the held reply arrives by itself, writes are accepted.
    data.unfill();
    writer.set_timeout(Duration::from_secs(20));
    assert_eq!(writer.read().expect("the held reply"), ok());
    acked.push(held);
    assert_eq!(reader.must(&[b"SET", b"d", b"4"]), ok());
    let info = reader.must(&[b"INFO", b"persistence"]).bytes();
    assert!(String::from_utf8_lossy(&info).contains("aof_last_write_status:ok"));
    server.kill();

    // SIGKILL, restart: every acknowledged write, no refused one.
    let server = Server::start(data.path(), &log, &args());
    let mut conn = Client::connect(server.port, Duration::from_secs(20)).expect("connect");
    let extra: [(&[u8], &[u8]); 2] = [(b"a", b"1"), (b"d", b"4")];
    check(&mut conn, &acked, &extra);

    // A restart on a full disk loads the data and serves it; when space is
    // freed, writes work.
    data.fill();
    server.kill();
    let server = Server::start(data.path(), &log, &args());
    let mut conn = Client::connect(server.port, Duration::from_secs(20)).expect("connect");
    check(&mut conn, &acked, &extra);
    data.unfill();
    assert_eq!(conn.must(&[b"SET", b"e", b"5"]), ok());
    server.kill();
    let server = Server::start(data.path(), &log, &args());
    let mut conn = Client::connect(server.port, Duration::from_secs(20)).expect("connect");
    check(
        &mut conn,
        &acked,
        &[(b"a", b"1"), (b"d", b"4"), (b"e", b"5")],
    );
    server.kill();
}

/// Polls INFO persistence until `field` is 0; returns the INFO text.
fn wait_idle(conn: &mut Client, field: &str) -> String {
    for _ in 0..2000 {
        let info =
            String::from_utf8_lossy(&conn.must(&[b"INFO", b"persistence"]).bytes()).into_owned();
        if info.contains(&format!("{field}:0")) {
            return info;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{field} never went back to 0");
}

/// The names of the files in `dir` that start with `temp`.
fn temp_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read the data dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("temp"))
        .collect()
}

#[test]
fn full_disk_fails_rewrite_and_save_cleanly_and_save_errors_stop_writes() {
    let Some((data, _logs, log)) = full_disk_dir() else {
        return;
    };
    // A save point, so a failed BGSAVE stops writes (Redis's
    // stop-writes-on-bgsave-error applies only with save points).
    let mut a = args();
    a[5] = "3600 1".into();
    let server = Server::start(data.path(), &log, &a);
    let mut conn = Client::connect(server.port, Duration::from_secs(20)).expect("connect");
    // Enough data that neither image fits in the last free page.
    for i in 0..2000u64 {
        let key = format!("w{i}");
        assert_eq!(conn.must(&[b"SET", key.as_bytes(), &value(i)]), ok());
    }
    let acked: Vec<u64> = (0..2000).collect();
    data.fill();

    // The rewrite fails, leaves no temporary file, and the old AOF goes on.
    assert_eq!(
        conn.must(&[b"BGREWRITEAOF"]),
        V::Simple("Background append only file rewriting started".into())
    );
    let info = wait_idle(&mut conn, "aof_rewrite_in_progress");
    assert!(info.contains("aof_last_bgrewrite_status:err"), "{info}");
    assert_eq!(temp_files(data.path()), Vec::<String>::new());

    // The save fails, leaves no temporary file, and stops writes with
    // Redis's text; reads go on.
    assert_eq!(
        conn.must(&[b"BGSAVE"]),
        V::Simple("Background saving started".into())
    );
    let info = wait_idle(&mut conn, "rdb_bgsave_in_progress");
    assert!(info.contains("rdb_last_bgsave_status:err"), "{info}");
    assert_eq!(temp_files(data.path()), Vec::<String>::new());
    let refused = conn.must(&[b"SET", b"c", b"3"]);
    assert!(
        matches!(&refused, V::Err(e) if e.starts_with(
            "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to \
             persist to disk. Commands that may modify the data set are disabled")),
        "{refused:?}"
    );
    assert_eq!(conn.must(&[b"GET", b"w7"]), V::Bulk(value(7)));

    // Room again: a save succeeds and writes resume; so does a rewrite.
    data.unfill();
    assert_eq!(
        conn.must(&[b"BGSAVE"]),
        V::Simple("Background saving started".into())
    );
    let info = wait_idle(&mut conn, "rdb_bgsave_in_progress");
    assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
    assert_eq!(conn.must(&[b"SET", b"d", b"4"]), ok());
    assert_eq!(
        conn.must(&[b"BGREWRITEAOF"]),
        V::Simple("Background append only file rewriting started".into())
    );
    let info = wait_idle(&mut conn, "aof_rewrite_in_progress");
    assert!(info.contains("aof_last_bgrewrite_status:ok"), "{info}");
    server.kill();

    let server = Server::start(data.path(), &log, &args());
    let mut conn = Client::connect(server.port, Duration::from_secs(20)).expect("connect");
    check(&mut conn, &acked, &[(b"d", b"4")]);
    server.kill();
}

/// BGREWRITEAOF writes the pending batch first; when that write fails on
/// the full disk, the batch's clients wait, but BGREWRITEAOF itself logs
/// nothing and must answer at once (it was held until the disk had room:
/// a client that had to free the disk, like this test, waited forever).
/// Whether another client's write shares its event-loop turn is up to
/// timing, so this tries several times.
#[test]
fn full_disk_does_not_hold_the_reply_of_bgrewriteaof() {
    let Some((data, _logs, log)) = full_disk_dir() else {
        return;
    };
    let server = Server::start(data.path(), &log, &args());
    let mut writer = Client::connect(server.port, Duration::from_secs(20)).expect("connect");
    let mut admin = Client::connect(server.port, Duration::from_secs(5)).expect("connect");
    // Larger than the free space left in the AOF's last page.
    let big = vec![b'v'; 1 << 16];
    for i in 0..20u64 {
        let key = format!("big{i}");
        data.fill();
        let set = crate::resp::cmd(&[b"SET", key.as_bytes(), &big]);
        writer.send(&[set]).expect("send");
        admin
            .send(&[crate::resp::cmd(&[b"BGREWRITEAOF"])])
            .expect("send");
        let reply = admin.read().unwrap_or_else(|e| {
            panic!("attempt {i}: no reply to BGREWRITEAOF on a full disk: {e}")
        });
        assert!(
            matches!(&reply, V::Simple(_) | V::Err(_)),
            "attempt {i}: {reply:?}"
        );
        // Room again: the held SET is answered; wait for a running rewrite.
        data.unfill();
        assert_eq!(writer.read().expect("the held SET"), ok(), "attempt {i}");
        wait_idle(&mut admin, "aof_rewrite_in_progress");
    }
    server.kill();
}
