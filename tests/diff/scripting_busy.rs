//! A script running past `busy-reply-threshold`: other clients get -BUSY,
//! SCRIPT KILL stops a script that has not written, SHUTDOWN NOSAVE stops
//! the server; both servers run the same long scripts side by side.

use std::time::{Duration, Instant};

use crate::harness::{encode_command, show, Conn, Pair};

/// What a client gets for an ordinary command while a script is busy.
const BUSY: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

/// Both servers with a short threshold, so the busy state starts quickly.
fn busy_pair() -> Pair {
    let args = ["--busy-reply-threshold", "200"];
    Pair::with_args(&args, &args)
}

/// One connection to each server, used side by side.
struct Side {
    r: Conn,
    h: Conn,
}

impl Side {
    fn new(p: &Pair) -> Side {
        let (r, h) = p.connect_more();
        Side { r, h }
    }

    /// Sends a command to both without waiting for the replies.
    fn send(&mut self, args: &[&str]) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let request = encode_command(&args);
        self.r.send_raw(&request);
        self.h.send_raw(&request);
    }

    /// Reads one reply from each and asserts they are identical.
    #[track_caller]
    fn read_same(&mut self, what: &str) -> Vec<u8> {
        let (r, h) = (self.r.read_reply(), self.h.read_reply());
        assert_eq!(
            r,
            h,
            "replies differ for {what}\n  redis: {}\n  hozon: {}",
            show(&r),
            show(&h)
        );
        r
    }

    /// Sends a command to both and asserts the replies are identical.
    #[track_caller]
    fn check(&mut self, args: &[&str]) -> Vec<u8> {
        self.send(args);
        self.read_same(&args.join(" "))
    }

    /// Polls with PING until both servers answer -BUSY. A PING sent before
    /// the threshold passes is simply answered once the busy state starts.
    #[track_caller]
    fn wait_busy(&mut self) {
        for conn in [&mut self.r, &mut self.h] {
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                let reply = conn.call(&[b"PING"]);
                if reply == BUSY {
                    break;
                }
                assert_eq!(reply, b"+PONG\r\n", "before the busy state");
                assert!(Instant::now() < deadline, "the script never got busy");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Starts `script` with EVAL (no keys) on the pair's own connections,
/// without reading the reply.
fn start_eval(p: &mut Pair, script: &str) {
    let request = encode_command(&[b"EVAL", script.as_bytes(), b"0"]);
    p.r.send_raw(&request);
    p.h.send_raw(&request);
}

/// Lua that spins until `ms` milliseconds have passed by the clock (TIME
/// is real time inside a script too), so a script outlasts the threshold
/// by the same margin on both servers however fast they run.
fn clock_loop_ms(ms: u64) -> String {
    let us = ms * 1000;
    format!(
        "local t = redis.call('TIME') local start = t[1] * 1000000 + t[2] \
         local now = start while now - start < {us} do \
         t = redis.call('TIME') now = t[1] * 1000000 + t[2] end"
    )
}

/// The script's SHA1 as both servers report it (SCRIPT LOAD).
fn sha_of(p: &mut Pair, script: &str) -> String {
    let reply = p.check(&["SCRIPT", "LOAD", script]);
    let text = String::from_utf8(reply).expect("a sha is ASCII");
    let sha = text
        .strip_prefix("$40\r\n")
        .and_then(|t| t.strip_suffix("\r\n"))
        .unwrap_or_else(|| panic!("SCRIPT LOAD reply: {text}"));
    sha.to_string()
}

/// The error the caller of a killed script gets (scripts are one line).
fn killed_error(sha: &str) -> Vec<u8> {
    format!("-ERR Script killed by user with SCRIPT KILL... script: {sha}, on @user_script:1.\r\n")
        .into_bytes()
}

/// Reads the killed script's error from the caller on both servers.
#[track_caller]
fn expect_killed(p: &mut Pair, sha: &str) {
    let (r, h) = (p.r.read_reply(), p.h.read_reply());
    assert_eq!(r, killed_error(sha), "redis: {}", show(&r));
    assert_eq!(h, killed_error(sha), "hozon: {}", show(&h));
}

/// True once process `pid` has exited (gone or a zombie nobody reaped).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// Waits until both server processes have exited.
#[track_caller]
fn wait_exited(p: &Pair) {
    let deadline = Instant::now() + Duration::from_secs(15);
    for (name, pid) in [
        ("redis-server", p.redis_server.pid()),
        ("hozon-server", p.hozon_server.pid()),
    ] {
        while !exited(pid) {
            assert!(Instant::now() < deadline, "{name} did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn script_kill_when_nothing_runs_is_notbusy() {
    let mut p = busy_pair();
    p.script(
        "SCRIPT KILL
         SCRIPT KILL now
         EVAL \"return 1\" 0
         SCRIPT KILL",
    );
    assert_eq!(
        p.check(&["SCRIPT", "KILL"]),
        b"-NOTBUSY No scripts in execution right now.\r\n"
    );
}

#[test]
fn busy_script_refuses_commands_and_script_kill_stops_it() {
    let mut p = busy_pair();
    p.check(&["SET", "k", "v"]);
    let script = "local i = 0 while true do i = i + 1 end";
    let sha = sha_of(&mut p, script);
    let mut other = Side::new(&p);
    // A RESP3 client gets the same errors (the HELLO reply holds the
    // client id, which need not match).
    let mut resp3 = Side::new(&p);
    resp3.send(&["HELLO", "3"]);
    resp3.r.read_reply();
    resp3.h.read_reply();
    start_eval(&mut p, script);
    other.wait_busy();

    // Ordinary commands, reads and writes alike.
    for cmd in [
        &["GET", "k"][..],
        &["PING"],
        &["SET", "k", "x"],
        &["INCR", "n"],
        &["SCRIPT", "FLUSH"],
        &["EVAL", "return 1", "0"],
        &["SHUTDOWN"],
        &["SHUTDOWN", "SAVE"],
    ] {
        assert_eq!(other.check(cmd), BUSY, "{cmd:?}");
    }
    // Lookup and arity errors come before the busy check.
    other.check(&["NOSUCHCOMMAND", "a", "b"]);
    other.check(&["GET"]);
    other.check(&["SET", "k"]);
    other.check(&["SCRIPT", "NOSUCH"]);
    other.check(&["SCRIPT", "KILL", "extra"]);
    // Pipelined commands each get their answer.
    let pipeline = [
        encode_command(&[b"GET", b"k"]),
        encode_command(&[b"GET"]),
        encode_command(&[b"PING"]),
    ]
    .concat();
    other.r.send_raw(&pipeline);
    other.h.send_raw(&pipeline);
    assert_eq!(other.read_same("pipelined GET k"), BUSY);
    other.read_same("pipelined GET");
    assert_eq!(other.read_same("pipelined PING"), BUSY);

    assert_eq!(resp3.check(&["GET", "k"]), BUSY);
    resp3.check(&["NOSUCHCOMMAND"]);
    resp3.check(&["GET"]);

    // A connection opened while the script is busy is served too.
    let mut late = Side::new(&p);
    assert_eq!(late.check(&["GET", "k"]), BUSY);
    late.check(&["GETX"]);

    assert_eq!(other.check(&["SCRIPT", "KILL"]), b"+OK\r\n");
    expect_killed(&mut p, &sha);

    // The server is back to normal for every client.
    p.check(&["GET", "k"]);
    other.check(&["GET", "k"]);
    late.check(&["PING"]);
    other.check(&["SCRIPT", "KILL"]);
    // The same script can run (and be killed) again, through EVALSHA.
    let request = encode_command(&[b"EVALSHA", sha.as_bytes(), b"0"]);
    p.r.send_raw(&request);
    p.h.send_raw(&request);
    other.wait_busy();
    assert_eq!(late.check(&["SCRIPT", "KILL"]), b"+OK\r\n");
    expect_killed(&mut p, &sha);
    p.check(&["PING"]);
}

#[test]
fn pcall_cannot_catch_a_kill() {
    let mut p = busy_pair();
    let script = "while true do pcall(function() while true do end end) end";
    let sha = sha_of(&mut p, script);
    let mut other = Side::new(&p);
    start_eval(&mut p, script);
    other.wait_busy();
    assert_eq!(other.check(&["SCRIPT", "KILL"]), b"+OK\r\n");
    expect_killed(&mut p, &sha);

    // Nor can a loop that keeps catching errors with pcall.
    let script = "while true do local ok = pcall(error, 'x') end";
    let sha = sha_of(&mut p, script);
    start_eval(&mut p, script);
    other.wait_busy();
    assert_eq!(other.check(&["SCRIPT", "KILL"]), b"+OK\r\n");
    expect_killed(&mut p, &sha);
    p.check(&["PING"]);
}

#[test]
fn a_write_makes_the_script_unkillable_until_shutdown_nosave() {
    let mut p = busy_pair();
    let mut other = Side::new(&p);
    start_eval(&mut p, "redis.call('SET', 'x', '1') while true do end");
    other.wait_busy();
    let unkillable = other.check(&["SCRIPT", "KILL"]);
    assert_eq!(
        unkillable,
        b"-UNKILLABLE Sorry the script already executed write commands against the dataset. \
          You can either wait the script termination or kill the server in a hard way using \
          the SHUTDOWN NOSAVE command.\r\n"
    );
    assert_eq!(other.check(&["GET", "x"]), BUSY);
    assert_eq!(other.check(&["SHUTDOWN"]), BUSY);
    assert_eq!(other.check(&["SHUTDOWN", "SAVE"]), BUSY);
    // Still unkillable when asked again.
    assert_eq!(other.check(&["SCRIPT", "KILL"]), unkillable);

    // SHUTDOWN NOSAVE ends the server: no reply, the connections close.
    other.send(&["SHUTDOWN", "NOSAVE"]);
    let (r, h) = (other.r.read_until_close(), other.h.read_until_close());
    assert_eq!(r, b"", "no reply to SHUTDOWN: redis {}", show(&r));
    assert_eq!(h, r, "no reply to SHUTDOWN: hozon {}", show(&h));
    let (r, h) = (p.r.read_until_close(), p.h.read_until_close());
    assert_eq!(r, b"", "the caller gets no reply: redis {}", show(&r));
    assert_eq!(h, r, "the caller gets no reply: hozon {}", show(&h));
    wait_exited(&p);
}

#[test]
fn a_failed_write_command_also_makes_the_script_unkillable() {
    let mut p = busy_pair();
    let mut other = Side::new(&p);
    // A write with the wrong number of arguments is refused before it
    // counts as a write: the script stays killable.
    let script = "redis.pcall('SET', 'x') while true do end";
    let sha = sha_of(&mut p, script);
    start_eval(&mut p, script);
    other.wait_busy();
    assert_eq!(other.check(&["SCRIPT", "KILL"]), b"+OK\r\n");
    expect_killed(&mut p, &sha);
    // A write that fails on the wrong type, or changes nothing, counts:
    // only SHUTDOWN NOSAVE ends those (fresh servers for each).
    for script in [
        "redis.pcall('LPUSH', 's', 'x') while true do end",
        "redis.call('DEL', 'nokey') while true do end",
    ] {
        let mut p = busy_pair();
        p.check(&["SET", "s", "string"]);
        let mut other = Side::new(&p);
        start_eval(&mut p, script);
        other.wait_busy();
        let reply = other.check(&["SCRIPT", "KILL"]);
        assert!(
            reply.starts_with(b"-UNKILLABLE "),
            "{script}: {}",
            show(&reply)
        );
        other.send(&["SHUTDOWN", "NOSAVE"]);
        let (r, h) = (p.r.read_until_close(), p.h.read_until_close());
        assert_eq!(r, b"", "the caller gets no reply: redis {}", show(&r));
        assert_eq!(h, r, "the caller gets no reply: hozon {}", show(&h));
        wait_exited(&p);
    }
}

#[test]
fn shutdown_arguments_are_checked_while_busy() {
    let mut p = busy_pair();
    let script = "while true do end";
    let sha = sha_of(&mut p, script);
    let mut other = Side::new(&p);
    start_eval(&mut p, script);
    other.wait_busy();
    // SHUTDOWN is allowed while busy: it parses its arguments as usual,
    // ABORT has nothing to abort, and only a valid NOSAVE stops the server.
    for (cmd, expected) in [
        (
            &["SHUTDOWN", "ABORT"][..],
            &b"-ERR No shutdown in progress.\r\n"[..],
        ),
        (&["SHUTDOWN", "BOGUS"], b"-ERR syntax error\r\n"),
        (&["SHUTDOWN", "NOSAVE", "ABORT"], b"-ERR syntax error\r\n"),
        (&["SHUTDOWN", "NOSAVE", "BOGUS"], b"-ERR syntax error\r\n"),
        (&["SHUTDOWN", "NOSAVE", "SAVE"], b"-ERR syntax error\r\n"),
        (&["SHUTDOWN", "SAVE", "NOW"], BUSY),
        (&["SHUTDOWN", "NOW"], BUSY),
        (&["SHUTDOWN", "FORCE"], BUSY),
    ] {
        assert_eq!(other.check(cmd), expected, "{cmd:?}");
    }
    assert_eq!(other.check(&["SCRIPT", "KILL"]), b"+OK\r\n");
    expect_killed(&mut p, &sha);
    p.check(&["PING"]);
}

#[test]
fn exec_while_busy_discards_the_transaction() {
    let mut p = busy_pair();
    let script = "while true do end";
    let sha = sha_of(&mut p, script);
    let mut tx = Side::new(&p);
    let mut other = Side::new(&p);
    tx.check(&["MULTI"]);
    tx.check(&["SET", "a", "1"]);
    start_eval(&mut p, script);
    other.wait_busy();
    // EXEC is refused like any command, but as EXEC it also ends the
    // transaction, with the reason in the error.
    let abort =
        b"-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. \
                  You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
    assert_eq!(tx.check(&["EXEC"]), abort);
    // Even outside a transaction.
    assert_eq!(other.check(&["EXEC"]), abort);
    assert_eq!(other.check(&["SCRIPT", "KILL"]), b"+OK\r\n");
    expect_killed(&mut p, &sha);
    // Not in a transaction any more: commands run at once.
    tx.check(&["GET", "a"]);
    tx.check(&["EXEC"]);
}

#[test]
fn multi_opened_while_busy_is_aborted_by_a_busy_command() {
    let mut p = busy_pair();
    let script = "while true do end";
    let sha = sha_of(&mut p, script);
    let mut tx = Side::new(&p);
    let mut other = Side::new(&p);
    start_eval(&mut p, script);
    other.wait_busy();
    // MULTI is allowed while busy, SET is not: the transaction fails.
    let request = [
        encode_command(&[b"MULTI"]),
        encode_command(&[b"SET", b"a", b"1"]),
    ]
    .concat();
    let mut replies = Vec::new();
    for conn in [&mut tx.r, &mut tx.h] {
        conn.send_raw(&request);
        let got: Vec<Option<Vec<u8>>> = (0..2)
            .map(|_| conn.try_read_reply(Duration::from_secs(3)))
            .collect();
        replies.push(got);
    }
    assert_eq!(other.check(&["SCRIPT", "KILL"]), b"+OK\r\n");
    expect_killed(&mut p, &sha);
    // Replies held back until the script ended are read now.
    let mut all = Vec::new();
    for (conn, got) in [&mut tx.r, &mut tx.h].into_iter().zip(replies) {
        let whole: Vec<Vec<u8>> = got
            .into_iter()
            .map(|reply| reply.unwrap_or_else(|| conn.read_reply()))
            .collect();
        all.push(whole.concat());
    }
    assert_eq!(
        all[0],
        [&b"+OK\r\n"[..], BUSY].concat(),
        "redis: {}",
        show(&all[0])
    );
    assert_eq!(all[1], all[0], "hozon: {}", show(&all[1]));
    assert_eq!(
        tx.check(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    tx.check(&["GET", "a"]);
}

#[test]
fn watch_while_busy_sees_the_scripts_later_write() {
    let mut p = busy_pair();
    let mut watcher = Side::new(&p);
    let mut other = Side::new(&p);
    // Writes `a` after 1.5 s by the clock: after WATCH ran in Redis.
    let script = format!(
        "{} return redis.call('SET', 'a', 'script')",
        clock_loop_ms(1500)
    );
    start_eval(&mut p, &script);
    other.wait_busy();
    watcher.send(&["WATCH", "a"]);
    let (r, h) = (p.r.read_reply(), p.h.read_reply());
    assert_eq!(r, b"+OK\r\n", "redis: {}", show(&r));
    assert_eq!(h, r, "hozon: {}", show(&h));
    watcher.read_same("WATCH a");
    watcher.check(&["MULTI"]);
    watcher.check(&["SET", "b", "1"]);
    assert_eq!(watcher.check(&["EXEC"]), b"*-1\r\n");
    watcher.check(&["GET", "b"]);
}

#[test]
fn a_slow_script_that_ends_by_itself_replies_normally() {
    // The threshold set at run time, through the old name.
    let mut p = Pair::new();
    p.check(&["CONFIG", "SET", "lua-time-limit", "200"]);
    p.check(&["CONFIG", "GET", "busy-reply-threshold"]);
    p.check(&["SET", "k", "v"]);
    let mut other = Side::new(&p);
    // Runs 1.5 s by the clock.
    let script = format!(
        "redis.call('SET', 'w', 'written') {} return {{redis.call('GET', 'k'), 'done'}}",
        clock_loop_ms(1500)
    );
    start_eval(&mut p, &script);
    // A command pipelined by the caller runs after the script.
    p.r.send_raw(&encode_command(&[b"GET", b"w"]));
    p.h.send_raw(&encode_command(&[b"GET", b"w"]));
    other.wait_busy();
    assert_eq!(other.check(&["GET", "k"]), BUSY);
    assert_eq!(other.check(&["SET", "k", "other"]), BUSY);
    let (r, h) = (p.r.read_reply(), p.h.read_reply());
    assert_eq!(r, b"*2\r\n$1\r\nv\r\n$4\r\ndone\r\n", "redis: {}", show(&r));
    assert_eq!(h, r, "hozon: {}", show(&h));
    let (r, h) = (p.r.read_reply(), p.h.read_reply());
    assert_eq!(r, b"$7\r\nwritten\r\n", "redis: {}", show(&r));
    assert_eq!(h, r, "hozon: {}", show(&h));
    other.check(&["PING"]);
    other.check(&["GET", "k"]);
    other.check(&["GET", "w"]);
    other.check(&["SCRIPT", "KILL"]);
}

#[test]
fn a_command_refused_as_busy_aborts_the_transaction() {
    let mut p = busy_pair();
    let script = "while true do end";
    let sha = sha_of(&mut p, script);
    let mut tx = Side::new(&p);
    let mut other = Side::new(&p);
    tx.check(&["MULTI"]);
    tx.check(&["SET", "a", "1"]);
    start_eval(&mut p, script);
    other.wait_busy();
    assert_eq!(tx.check(&["SET", "b", "2"]), BUSY);
    assert_eq!(other.check(&["SCRIPT", "KILL"]), b"+OK\r\n");
    expect_killed(&mut p, &sha);
    tx.check(&["EXEC"]);
    tx.check(&["MGET", "a", "b"]);
}

#[test]
fn a_zero_threshold_never_answers_busy() {
    let mut p = busy_pair();
    p.check(&["CONFIG", "SET", "busy-reply-threshold", "0"]);
    let mut other = Side::new(&p);
    let script = format!("{} return 'done'", clock_loop_ms(500));
    start_eval(&mut p, &script);
    // Other clients just wait for the script.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(other.check(&["PING"]), b"+PONG\r\n");
    let (r, h) = (p.r.read_reply(), p.h.read_reply());
    assert_eq!(r, b"$4\r\ndone\r\n", "redis: {}", show(&r));
    assert_eq!(h, r, "hozon: {}", show(&h));
}
