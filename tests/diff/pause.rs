//! CLIENT PAUSE and CLIENT UNPAUSE against Redis 7.0 (its
//! tests/unit/pause.tcl, differentially): argument errors; WRITE mode
//! holding back writes, may-replicate commands, scripts and EXEC of a
//! writing transaction while reads, read-only transactions and no-writes
//! scripts go on; ALL mode holding back everything until its timeout;
//! no key expiring meanwhile; a pause set inside a transaction starting
//! after it. Every waiting client is a pair of connections whose replies
//! must match byte for byte; timing assertions are loose (a held client
//! must not answer within 150 ms, and must answer once unpaused).

use super::blocking::{wait_blocked, Client};
use super::harness::{check_both_protocols, Pair};

#[test]
fn client_pause_argument_errors_match_redis() {
    check_both_protocols(
        r#"
CLIENT PAUSE
CLIENT PAUSE abc
CLIENT PAUSE 1.5
CLIENT PAUSE -1
CLIENT PAUSE 10 foo
CLIENT PAUSE abc foo
CLIENT PAUSE 10 WRITE extra
CLIENT UNPAUSE now
CLIENT PAUSE 0
SET k v
CLIENT PAUSE 0 ALL
GET k
CLIENT UNPAUSE
CLIENT UNPAUSE
"#,
    );
}

/// The `name:` field of INFO stats as a number.
fn stat(c: &mut super::harness::Conn, name: &str) -> i64 {
    let info = c.call(&[b"INFO", b"stats"]);
    let text = String::from_utf8_lossy(&info).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO stats"))
}

#[test]
fn write_pause_holds_writes_and_lets_reads_through() {
    let mut p = Pair::new();
    let mut admin = Client::new(&p, false);
    admin.call("SET FOO BAR");
    admin.call("SCRIPT LOAD return\u{20}1");
    let mut queued = Client::new(&p, false);
    queued.call("MULTI");
    queued.call("INCR counter");
    let mut queuing = Client::new(&p, false);
    queuing.call("MULTI");
    admin.call("CLIENT PAUSE 100000 WRITE");
    // Reads, admin commands, read-only transactions and scripts that
    // declare no writes are served at once.
    let mut reader = Client::new(&p, false);
    reader.call("GET FOO");
    reader.call("PING");
    reader.call("EXISTS FOO");
    reader.call("MULTI");
    reader.call("GET FOO");
    reader.call("PING");
    reader.call("EXEC");
    reader.call("EVAL_RO return\u{20}redis.call('get','FOO') 1 FOO");
    // Argument errors come at once.
    reader.call("SET FOO");
    reader.call("NOSUCHCOMMAND");
    // Writes, may-replicate commands, scripts, a write to be queued in a
    // transaction, a writing EXEC wait.
    queuing.send("SET FOO QUEUED");
    queuing.assert_waiting();
    wait_blocked(&mut p, 1);
    let lines = [
        "SET FOO BAZ",
        "PUBLISH ch hello",
        "EVAL return\u{20}1 0",
        "INCR counter",
    ];
    let mut held = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let mut c = Client::new(&p, false);
        c.send(line);
        c.assert_waiting();
        wait_blocked(&mut p, i + 2);
        held.push(c);
    }
    queued.send("EXEC");
    queued.assert_waiting();
    wait_blocked(&mut p, lines.len() + 2);
    // Still the old value, for everyone.
    reader.call("GET FOO");
    admin.call("CLIENT UNPAUSE");
    queuing.reply();
    for c in &mut held {
        c.reply();
    }
    queued.reply();
    queuing.call("EXEC");
    wait_blocked(&mut p, 0);
    admin.call("GET FOO");
    admin.call("GET counter");
}

/// A transaction of scripts and functions that declare `no-writes` is not
/// a writing transaction (Redis counts their declared flags when they are
/// queued): its EXEC runs under a WRITE pause; a writing script waits.
#[test]
fn no_writes_scripts_in_a_transaction_are_not_held_by_a_write_pause() {
    let mut p = Pair::new();
    let mut admin = Client::new(&p, false);
    admin.call_args(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib\nredis.register_function{function_name='ro', callback=function() return 7 end, flags={'no-writes'}}",
    ]);
    admin.call("CLIENT PAUSE 100000 WRITE");
    let ro = "#!lua flags=no-writes\nreturn 12";
    let mut reader = Client::new(&p, false);
    reader.call("MULTI");
    reader.call_args(&["EVAL", ro, "0"]);
    reader.call_args(&["EVAL", ro, "0"]);
    reader.call("FCALL ro 0");
    reader.call("EXEC");
    let mut writer = Client::new(&p, false);
    writer.call("MULTI");
    writer.call_args(&["EVAL", ro, "0"]);
    // A writing script waits already when it is queued.
    writer.send_args(&["EVAL", "#!lua\nreturn redis.call('set','k','v')", "0"]);
    writer.assert_waiting();
    wait_blocked(&mut p, 1);
    admin.call("CLIENT UNPAUSE");
    writer.reply();
    writer.call("EXEC");
}

#[test]
fn all_pause_holds_every_command_until_its_timeout() {
    let p = Pair::new();
    let mut admin = Client::new(&p, false);
    admin.call("SET k v");
    admin.call("CLIENT PAUSE 2000 ALL");
    let mut reader = Client::new(&p, false);
    reader.send("GET k");
    reader.assert_waiting();
    let mut other = Client::new(&p, false);
    other.send("CLIENT UNPAUSE");
    other.assert_waiting();
    // The timeout ends the pause: both answer.
    reader.reply();
    other.reply();
    admin.call("GET k");
}

#[test]
fn no_key_expires_while_writes_are_paused() {
    let mut p = Pair::new();
    let mut c = Client::new(&p, false);
    let before = (
        stat(&mut p.r, "expired_keys"),
        stat(&mut p.h, "expired_keys"),
    );
    c.call("MULTI");
    c.call("SET foo bar PX 10");
    c.call("SET bar foo PX 10");
    c.call("CLIENT PAUSE 50000 WRITE");
    c.call("EXEC");
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Logically expired: read as absent, but not deleted.
    c.call("GET foo");
    c.call("GET bar");
    assert_eq!(
        (
            stat(&mut p.r, "expired_keys"),
            stat(&mut p.h, "expired_keys")
        ),
        before
    );
    c.call("CLIENT UNPAUSE");
    c.call("GET foo");
    c.call("GET bar");
    assert_eq!(
        (
            stat(&mut p.r, "expired_keys"),
            stat(&mut p.h, "expired_keys")
        ),
        (before.0 + 2, before.1 + 2)
    );
}

#[test]
fn a_pause_set_inside_a_transaction_starts_after_it() {
    let mut p = Pair::new();
    let mut c = Client::new(&p, false);
    c.call("MULTI");
    c.call("SET FOO1 BAR");
    c.call("CLIENT PAUSE 60000 WRITE");
    c.call("SET FOO2 BAR");
    c.call("EXEC");
    let mut writer = Client::new(&p, false);
    writer.send("SET FOO3 BAR");
    writer.assert_waiting();
    wait_blocked(&mut p, 1);
    c.call("GET FOO1");
    c.call("GET FOO2");
    c.call("GET FOO3");
    c.call("CLIENT UNPAUSE");
    writer.reply();
    c.call("GET FOO3");
}
