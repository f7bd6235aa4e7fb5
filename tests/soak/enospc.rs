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

#[test]
fn full_disk_holds_the_reply_refuses_writes_and_recovers() {
    let data = DataDir::new(4);
    if !data.tmpfs {
        eprintln!("full-disk test skipped: no tmpfs could be mounted");
        return;
    }
    let logs = tempfile::tempdir().expect("log dir");
    let log = logs.path().join("server.log");
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
