//! Shutting down with a lagging replica (Redis 7.0's prepareForShutdown /
//! finishShutdown / SHUTDOWN ABORT; docs/replication.md §3.8): the master
//! waits up to `shutdown-timeout`, serving reads and postponing writes;
//! NOW does not wait; ABORT and a failed save cancel, answering the waiting
//! SHUTDOWN callers with an error. Every scenario runs against redis-server
//! (which checks the scenario) and hozon-server.

use std::time::Duration;

use testkit::harness::{encode_command, signal};

use crate::harness::*;

/// A master with `shutdown-timeout` `timeout_s`, a redis-server replica in
/// sync with it and then stopped (SIGSTOP), and `INCR k` it has not
/// acknowledged.
fn lagging_pair(master: Master, timeout_s: &str) -> (Node, Node, Conn) {
    let m = master.start(&["--shutdown-timeout", timeout_s]);
    let r = start_replica(&m, &[]);
    wait_synced(&m, &[&r]);
    signal(r.process.pid(), "-STOP");
    let mut c = m.conn();
    assert_eq!(ok(&mut c, &["INCR", "k"]), Value::Int(1));
    (m, r, c)
}

/// Sends `words` without reading the reply.
fn send(conn: &mut Conn, words: &[&str]) {
    let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    conn.send_raw(&encode_command(&args));
}

/// Waits until the master's port refuses connections.
fn wait_exited(m: &Node) {
    let port = m.port();
    wait_until(
        PATIENCE,
        "the master to exit",
        || match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Err(_) => Ok(()),
            Ok(_) => Err("still listening".to_string()),
        },
    );
}

/// Waits until INFO says a shutdown waits and `blocked` clients are held.
fn wait_waiting(c: &mut Conn, blocked: i64) {
    wait_until(PATIENCE, "the shutdown to wait for the replica", || {
        let server = info(c, "server");
        let clients = info_int(c, "clients", "blocked_clients");
        let left = server.get("shutdown_in_milliseconds").cloned();
        match left.as_deref().map(str::parse::<i64>) {
            Some(Ok(ms)) if ms > 0 && clients == blocked => Ok(()),
            _ => Err(format!(
                "shutdown_in_milliseconds {left:?}, blocked_clients {clients}"
            )),
        }
    });
}

fn waits_for_the_replica_serving_reads_and_postponing_writes(master: Master) {
    let (m, r, mut c) = lagging_pair(master, "300");
    let mut caller = m.conn();
    send(&mut caller, &["SHUTDOWN"]);
    wait_waiting(&mut c, 1);
    // Reads are served while it waits; a write waits for the outcome.
    assert_eq!(ok(&mut c, &["GET", "k"]), Value::Bulk(b"1".to_vec()));
    let mut writer = m.conn();
    send(&mut writer, &["SET", "w", "1"]);
    wait_waiting(&mut c, 2);
    assert_eq!(writer.try_read_reply(Duration::from_millis(200)), None);

    signal(r.process.pid(), "-CONT");
    wait_exited(&m);
    // Neither the caller nor the postponed write got an answer.
    assert_eq!(show(&caller.read_until_close()), "");
    assert_eq!(show(&writer.read_until_close()), "");
    let mut rc = r.conn();
    assert_eq!(ok(&mut rc, &["GET", "k"]), Value::Bulk(b"1".to_vec()));
    assert_eq!(ok(&mut rc, &["EXISTS", "w"]), Value::Int(0));
    let log = m.log();
    assert!(
        log.contains("1 of 1 replicas are in sync when shutting down."),
        "{log}"
    );
    assert!(!log.contains("Lagging replica"), "{log}");
}

fn abort_answers_the_callers_and_runs_the_postponed_writes(master: Master) {
    let (m, r, mut c) = lagging_pair(master, "300");
    let mut callers = [m.conn(), m.conn()];
    for caller in &mut callers {
        send(caller, &["SHUTDOWN"]);
    }
    wait_waiting(&mut c, 2);
    let mut writer = m.conn();
    send(&mut writer, &["SET", "w", "1"]);
    wait_waiting(&mut c, 3);

    assert_eq!(
        ok(&mut c, &["SHUTDOWN", "ABORT"]),
        Value::Simple("OK".into())
    );
    for caller in &mut callers {
        assert_eq!(
            show(&caller.read_reply()),
            "-ERR Errors trying to SHUTDOWN. Check logs.\\r\\n"
        );
        if master == Master::Hozon {
            // The caller is served again. (redis-server 7.0.15 crashes on
            // the next command of a client whose SHUTDOWN was cancelled: an
            // assertion in processMultibulkBuffer, as the unblocked client
            // keeps its argv; so the Redis run does not send one.)
            assert_eq!(ok(caller, &["PING"]), Value::Simple("PONG".into()));
        }
    }
    assert_eq!(show(&writer.read_reply()), "+OK\\r\\n");
    assert_eq!(
        info_field(&mut c, "server", "shutdown_in_milliseconds"),
        None
    );
    assert_eq!(info_int(&mut c, "clients", "blocked_clients"), 0);
    assert_eq!(
        cmd(&mut c, &["SHUTDOWN", "ABORT"]),
        Value::Error("ERR No shutdown in progress.".into())
    );
    assert!(
        m.log().contains("Shutdown manually aborted."),
        "{}",
        m.log()
    );

    signal(r.process.pid(), "-CONT");
    wait_synced(&m, &[&r]);
    let mut rc = r.conn();
    assert_eq!(ok(&mut rc, &["GET", "w"]), Value::Bulk(b"1".to_vec()));
}

/// The master exited with the stopped replica behind, as its log says;
/// the replica is woken.
fn exited_without_the_replica(m: &Node, r: &Node) {
    wait_exited(m);
    let log = m.log();
    assert!(log.contains("Lagging replica"), "{log}");
    assert!(
        log.contains("0 of 1 replicas are in sync when shutting down."),
        "{log}"
    );
    signal(r.process.pid(), "-CONT");
}

fn now_does_not_wait(master: Master) {
    let (m, r, _c) = lagging_pair(master, "300");
    let mut caller = m.conn();
    send(&mut caller, &["SHUTDOWN", "NOW"]);
    exited_without_the_replica(&m, &r);
}

fn a_signal_waits_until_the_timeout(master: Master) {
    let (m, r, mut c) = lagging_pair(master, "1");
    signal(m.process.pid(), "-TERM");
    wait_until(PATIENCE, "the shutdown to start", || {
        match info_field(&mut c, "server", "shutdown_in_milliseconds") {
            Some(_) => Ok(()),
            None => Err("no shutdown_in_milliseconds".to_string()),
        }
    });
    exited_without_the_replica(&m, &r);
}

fn a_failed_save_after_the_wait_cancels(master: Master) {
    let (m, r, mut c) = lagging_pair(master, "300");
    // A directory where the snapshot goes: the final save fails.
    let dir = ok(&mut c, &["CONFIG", "GET", "dir"]).items()[1].text();
    let name = ok(&mut c, &["CONFIG", "GET", "dbfilename"]).items()[1].text();
    let blocker = std::path::Path::new(&dir).join(&name);
    let _ = std::fs::remove_file(&blocker);
    std::fs::create_dir_all(&blocker).expect("a directory at the snapshot's path");
    let mut caller = m.conn();
    send(&mut caller, &["SHUTDOWN", "SAVE"]);
    wait_waiting(&mut c, 1);
    signal(r.process.pid(), "-CONT");
    assert_eq!(
        show(&caller.read_reply()),
        "-ERR Errors trying to SHUTDOWN. Check logs.\\r\\n"
    );
    assert_eq!(ok(&mut c, &["PING"]), Value::Simple("PONG".into()));
    assert_eq!(ok(&mut c, &["INCR", "k"]), Value::Int(2));
    let log = m.log();
    assert!(log.contains("Error trying to save the DB"), "{log}");
    assert!(
        log.contains("Errors trying to shut down the server. Check the logs for more information."),
        "{log}"
    );
    std::fs::remove_dir(&blocker).expect("remove the directory");
}

#[test]
fn shutdown_waits_for_the_replica_serving_reads_and_postponing_writes_redis_master() {
    waits_for_the_replica_serving_reads_and_postponing_writes(Master::Redis);
}

#[test]
fn shutdown_waits_for_the_replica_serving_reads_and_postponing_writes_hozon_master() {
    waits_for_the_replica_serving_reads_and_postponing_writes(Master::Hozon);
}

#[test]
fn shutdown_abort_answers_the_callers_and_runs_the_postponed_writes_redis_master() {
    abort_answers_the_callers_and_runs_the_postponed_writes(Master::Redis);
}

#[test]
fn shutdown_abort_answers_the_callers_and_runs_the_postponed_writes_hozon_master() {
    abort_answers_the_callers_and_runs_the_postponed_writes(Master::Hozon);
}

#[test]
fn shutdown_now_does_not_wait_redis_master() {
    now_does_not_wait(Master::Redis);
}

#[test]
fn shutdown_now_does_not_wait_hozon_master() {
    now_does_not_wait(Master::Hozon);
}

#[test]
fn shutdown_on_a_signal_waits_until_the_timeout_redis_master() {
    a_signal_waits_until_the_timeout(Master::Redis);
}

#[test]
fn shutdown_on_a_signal_waits_until_the_timeout_hozon_master() {
    a_signal_waits_until_the_timeout(Master::Hozon);
}

#[test]
fn shutdown_whose_save_fails_after_the_wait_is_cancelled_redis_master() {
    a_failed_save_after_the_wait_cancels(Master::Redis);
}

#[test]
fn shutdown_whose_save_fails_after_the_wait_is_cancelled_hozon_master() {
    a_failed_save_after_the_wait_cancels(Master::Hozon);
}
