//! The server's side of I/O errors: a client whose write is in a batch that
//! could not be written gets no reply until the batch is written (and, under
//! `always`, fsynced); other clients keep reading; writes are refused with
//! MISCONF meanwhile; when the disk has room again the held reply is
//! released by itself and nothing acknowledged is lost.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hozon::config::AppendFsync;
use hozon::persist::io::{Fault, FaultyIo, PowerLoss};
use hozon::server::Server;
use hozon::Reply;

use crate::common::{durable_config, open, run};
use crate::harness::Conn;

const ENOSPC: i32 = 28;

type ServerThread = std::thread::JoinHandle<Result<(), hozon::Error>>;

/// A server running in this process on a fault-injecting file system
/// (appendfsync always, a free port): the I/O, its configuration, the port,
/// the shutdown flag and the thread running the event loop.
fn start_in_process() -> (
    Arc<FaultyIo>,
    hozon::Config,
    u16,
    Arc<AtomicBool>,
    ServerThread,
) {
    let io = Arc::new(FaultyIo::new());
    let mut config = durable_config(Path::new("/data"), AppendFsync::Always);
    config.port = 0;
    config.bind = vec!["127.0.0.1".into()];
    let engine = open(config.clone(), io.clone());
    let shutdown = Arc::new(AtomicBool::new(false));
    let mut server = Server::bind(engine, Arc::clone(&shutdown)).expect("bind");
    let port = server.local_addrs()[0].port();
    let thread = std::thread::spawn(move || server.run());
    (io, config, port, shutdown, thread)
}

#[test]
fn enospc_holds_the_reply_until_the_write_succeeds() {
    let (io, config, port, shutdown, thread) = start_in_process();

    let mut writer = Conn::connect(port);
    let mut reader = Conn::connect(port);
    assert_eq!(writer.call(&[b"SET", b"a", b"1"]), b"+OK\r\n");

    io.inject(Fault::FailWrite {
        nth: 1,
        errno: ENOSPC,
        sticky: true,
    });
    writer.send_raw(&crate::harness::encode_command(&[b"SET", b"b", b"2"]));
    // Wait (with reads, which keep being served) until the failed write is
    // reported; then writes are refused.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !String::from_utf8_lossy(&reader.call(&[b"INFO", b"persistence"]))
        .contains("aof_last_write_status:err")
    {
        assert!(
            Instant::now() < deadline,
            "the failed AOF write never showed in INFO"
        );
    }
    let reply = reader.call(&[b"SET", b"c", b"3"]);
    assert!(
        reply.starts_with(b"-MISCONF Errors writing to the AOF file: No space left on device"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    assert_eq!(reader.call(&[b"GET", b"a"]), b"$1\r\n1\r\n");
    assert!(
        writer.try_read_reply(Duration::from_millis(300)).is_none(),
        "a write was acknowledged during ENOSPC"
    );

    // Room again: the retry writes and fsyncs the batch and releases `+OK`.
    io.clear_faults();
    assert_eq!(writer.read_reply(), b"+OK\r\n");
    assert_eq!(reader.call(&[b"SET", b"d", b"4"]), b"+OK\r\n");

    shutdown.store(true, Ordering::SeqCst);
    thread.join().expect("server thread").expect("server run");
    // Power loss after the stop: every acknowledged write is durable.
    io.power_loss(PowerLoss::DropUnsynced);
    let mut engine = open(config, io);
    let mut s = engine.new_session();
    for (k, v) in [("a", "1"), ("b", "2"), ("d", "4")] {
        assert_eq!(
            run(&mut engine, &mut s, &["GET", k]),
            Reply::Bulk(v.as_bytes().to_vec()),
            "key {k}"
        );
    }
    assert_eq!(run(&mut engine, &mut s, &["GET", "c"]), Reply::Null);
}

#[test]
fn failed_fsync_disconnects_the_writer_and_refuses_writes_until_restart() {
    let (io, _config, port, shutdown, thread) = start_in_process();

    let mut writer = Conn::connect(port);
    let mut reader = Conn::connect(port);
    assert_eq!(writer.call(&[b"SET", b"a", b"1"]), b"+OK\r\n");
    io.inject(Fault::FailSync { nth: 1, errno: 5 });
    writer.send_raw(&crate::harness::encode_command(&[b"SET", b"b", b"2"]));
    // The write's durability cannot be confirmed: no reply, the connection
    // is closed instead of answering +OK.
    assert_eq!(
        writer.read_until_close(),
        b"",
        "a write was acknowledged after its fsync failed"
    );
    let refused = reader.call(&[b"SET", b"c", b"3"]);
    assert!(
        refused.starts_with(b"-MISCONF Errors writing to the AOF file: fsync failed"),
        "{}",
        String::from_utf8_lossy(&refused)
    );
    assert_eq!(reader.call(&[b"GET", b"a"]), b"$1\r\n1\r\n");
    shutdown.store(true, Ordering::SeqCst);
    thread.join().expect("server thread").expect("server run");
}

/// Issue 23, item 3: a batch whose write(2) failed is retried by cron;
/// when the retried write succeeds but its fsync fails, the held reply
/// must never go out as `+OK` (the client is disconnected instead).
#[test]
fn a_retried_write_whose_fsync_fails_is_never_acknowledged() {
    let (io, config, port, shutdown, thread) = start_in_process();
    let mut writer = Conn::connect(port);
    let mut reader = Conn::connect(port);
    assert_eq!(writer.call(&[b"SET", b"a", b"1"]), b"+OK\r\n");
    // The next write(2) fails once; the fsync after the retry fails too.
    io.inject(Fault::FailWrite {
        nth: 1,
        errno: ENOSPC,
        sticky: false,
    });
    io.inject(Fault::FailSync { nth: 1, errno: 5 });
    writer.send_raw(&crate::harness::encode_command(&[b"SET", b"b", b"2"]));
    let got = writer.read_until_close();
    assert!(
        !got.starts_with(b"+OK"),
        "+OK for a write whose fsync failed: {}",
        String::from_utf8_lossy(&got)
    );
    let refused = reader.call(&[b"SET", b"c", b"3"]);
    assert!(
        refused.starts_with(b"-MISCONF Errors writing to the AOF file: fsync failed"),
        "{}",
        String::from_utf8_lossy(&refused)
    );
    shutdown.store(true, Ordering::SeqCst);
    thread.join().expect("server thread").expect("server run");
    io.power_loss(PowerLoss::DropUnsynced);
    let mut engine = open(config, io);
    let mut s = engine.new_session();
    assert_eq!(
        run(&mut engine, &mut s, &["GET", "a"]),
        Reply::Bulk(b"1".to_vec())
    );
}
