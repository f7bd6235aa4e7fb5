//! A function running past `busy-reply-threshold` (Redis's "test function
//! kill", "test script kill not working on function" and "test function
//! kill not working on eval"): other clients get -BUSY naming FUNCTION
//! KILL, FUNCTION STATS shows the running function, SCRIPT KILL is refused,
//! FUNCTION KILL stops it; and FUNCTION KILL is refused during a busy EVAL.

use std::time::{Duration, Instant};

use crate::harness::{encode_command, show, Conn, Pair};

/// What a client gets while a function is busy.
const BUSY_FUNCTION: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";

/// What a client gets while an EVAL script is busy.
const BUSY_EVAL: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

/// The endless loop of Redis's tests.
const LOOP: &str = "local a = 1 while true do a = a + 1 end";

/// Both servers with threshold 10 ms, as Redis's test sets it, and the
/// library `test` with the looping function `test`.
fn busy_pair() -> Pair {
    let args = ["--busy-reply-threshold", "10"];
    let mut p = Pair::with_args(&args, &args);
    let code = format!(
        "#!lua name=test\nredis.register_function('test', function(KEYS, ARGV)\n {LOOP} \nend)"
    );
    p.check(&["FUNCTION", "LOAD", &code]);
    p
}

/// One more connection to each server.
struct Side {
    r: Conn,
    h: Conn,
}

impl Side {
    fn new(p: &Pair) -> Side {
        let (r, h) = p.connect_more();
        Side { r, h }
    }

    /// Sends a command to both and asserts the replies are identical.
    #[track_caller]
    fn check(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let (r, h) = (self.r.call(&args), self.h.call(&args));
        assert_eq!(
            show(&r),
            show(&h),
            "replies differ for {:?}",
            args.iter().map(|a| show(a)).collect::<Vec<_>>()
        );
        r
    }

    /// Polls with PING until both servers answer `busy`.
    #[track_caller]
    fn wait_busy(&mut self, busy: &[u8]) {
        for conn in [&mut self.r, &mut self.h] {
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                let reply = conn.call(&[b"PING"]);
                if reply == busy {
                    break;
                }
                assert_eq!(show(&reply), "+PONG\\r\\n", "before the busy state");
                assert!(Instant::now() < deadline, "never got busy");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Sends `args` on the pair's own connections without reading the reply.
fn start(p: &mut Pair, args: &[&str]) {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let request = encode_command(&args);
    p.r.send_raw(&request);
    p.h.send_raw(&request);
}

/// Reads the caller's reply on both servers; they must be identical and
/// Redis's must be `expected`.
#[track_caller]
fn caller_gets(p: &mut Pair, expected: &str) {
    let (r, h) = (p.r.read_reply(), p.h.read_reply());
    assert_eq!(show(&r), show(expected.as_bytes()), "redis");
    assert_eq!(show(&h), show(&r), "hozon");
}

/// `reply` with the number after `duration_ms` replaced by 0.
fn mask_duration(reply: &[u8]) -> String {
    let text = show(reply);
    let key = "duration_ms\\r\\n:";
    let Some(at) = text.find(key) else {
        panic!("no duration_ms in {text}");
    };
    let start = at + key.len();
    let digits = text[start..]
        .find(|c: char| !c.is_ascii_digit())
        .expect("the end of the number");
    assert!(digits > 0, "duration_ms is not a number: {text}");
    format!("{}0{}", &text[..start], &text[start + digits..])
}

/// The error the caller of a killed function gets (function `test` of the
/// library above, killed inside its loop: line 3, the `#!lua` line counts).
const KILLED: &str =
    "-ERR Script killed by user with SCRIPT KILL... script: test, on @user_function:3.\r\n";

#[test]
fn a_busy_function_refuses_commands_and_function_kill_stops_it() {
    let mut p = busy_pair();
    let mut other = Side::new(&p);
    let mut resp3 = Side::new(&p);
    resp3.r.call(&[b"HELLO", b"3"]);
    resp3.h.call(&[b"HELLO", b"3"]);
    start(&mut p, &["FCALL", "test", "0"]);
    other.wait_busy(BUSY_FUNCTION);
    for cmd in [
        &["GET", "k"][..],
        &["SET", "k", "v"],
        &["FCALL", "test", "0"],
        &["EVAL", "return 1", "0"],
        &["FUNCTION", "LIST"],
        &["FUNCTION", "LOAD", "x"],
        &["FUNCTION", "FLUSH"],
        &["FUNCTION", "DELETE", "test"],
        &["SCRIPT", "FLUSH"],
    ] {
        assert_eq!(show(&other.check(cmd)), show(BUSY_FUNCTION), "{cmd:?}");
    }
    assert_eq!(show(&resp3.check(&["GET", "k"])), show(BUSY_FUNCTION));
    // SCRIPT KILL does not stop a function.
    assert_eq!(show(&other.check(&["SCRIPT", "KILL"])), show(BUSY_FUNCTION));
    // FUNCTION STATS names it (the duration differs, of course).
    for side in [&mut other, &mut resp3] {
        let r = side.r.call(&[b"FUNCTION", b"STATS"]);
        let h = side.h.call(&[b"FUNCTION", b"STATS"]);
        let (r, h) = (mask_duration(&r), mask_duration(&h));
        assert_eq!(r, h, "FUNCTION STATS while busy");
        assert!(
            r.contains("running_script") && r.contains("$5\\r\\nFCALL\\r\\n$4\\r\\ntest"),
            "{r}"
        );
    }
    other.check(&["FUNCTION", "KILL", "extra"]);
    assert_eq!(show(&other.check(&["FUNCTION", "KILL"])), "+OK\\r\\n");
    caller_gets(&mut p, KILLED);
    other.check(&["PING"]);
    other.check(&["FUNCTION", "STATS"]);
    other.check(&["FUNCTION", "KILL"]);
    // Again through FCALL_RO of a no-writes function, killed from the
    // RESP3 client.
    p.check(&[
        "FUNCTION",
        "LOAD",
        &format!(
            "#!lua name=ro\nredis.register_function{{function_name='ro', callback=function()\n \
             {LOOP} \nend, flags={{'no-writes'}}}}"
        ),
    ]);
    start(&mut p, &["FCALL_RO", "ro", "0"]);
    other.wait_busy(BUSY_FUNCTION);
    let r = other.r.call(&[b"FUNCTION", b"STATS"]);
    let h = other.h.call(&[b"FUNCTION", b"STATS"]);
    assert_eq!(mask_duration(&r), mask_duration(&h));
    assert_eq!(show(&resp3.check(&["FUNCTION", "KILL"])), "+OK\\r\\n");
    caller_gets(&mut p, &KILLED.replace("script: test", "script: ro"));
    p.check(&["PING"]);
}

#[test]
fn function_kill_is_refused_during_a_busy_eval() {
    let mut p = busy_pair();
    let mut other = Side::new(&p);
    start(&mut p, &["EVAL", LOOP, "0"]);
    other.wait_busy(BUSY_EVAL);
    assert_eq!(show(&other.check(&["FUNCTION", "KILL"])), show(BUSY_EVAL));
    // FUNCTION STATS is allowed and shows no function... as Redis shows it.
    let r = other.r.call(&[b"FUNCTION", b"STATS"]);
    let h = other.h.call(&[b"FUNCTION", b"STATS"]);
    if show(&r).contains("duration_ms") {
        assert_eq!(mask_duration(&r), mask_duration(&h));
    } else {
        assert_eq!(show(&r), show(&h));
    }
    assert_eq!(show(&other.check(&["SCRIPT", "KILL"])), "+OK\\r\\n");
    let sha = sha1_smol::Sha1::from(LOOP).digest().to_string();
    caller_gets(
        &mut p,
        &format!(
            "-ERR Script killed by user with SCRIPT KILL... script: {sha}, on @user_script:1.\r\n"
        ),
    );
    other.check(&["PING"]);
}

#[test]
fn a_function_that_wrote_is_unkillable() {
    let args = ["--busy-reply-threshold", "10"];
    let mut p = Pair::with_args(&args, &args);
    p.check(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=w\nredis.register_function('w', function() redis.call('set', 'x', '1') \
         while true do end end)",
    ]);
    let mut other = Side::new(&p);
    start(&mut p, &["FCALL", "w", "0"]);
    other.wait_busy(BUSY_FUNCTION);
    let reply = other.check(&["FUNCTION", "KILL"]);
    assert!(reply.starts_with(b"-UNKILLABLE "), "{}", show(&reply));
    assert_eq!(show(&other.check(&["SCRIPT", "KILL"])), show(&reply));
    other.r.send_raw(&encode_command(&[b"SHUTDOWN", b"NOSAVE"]));
    other.h.send_raw(&encode_command(&[b"SHUTDOWN", b"NOSAVE"]));
    let (r, h) = (p.r.read_until_close(), p.h.read_until_close());
    assert_eq!(show(&h), show(&r), "the caller gets no reply");
}

#[test]
fn a_long_function_load_is_stopped_by_its_timeout() {
    let args = ["--busy-reply-threshold", "10"];
    let mut p = Pair::with_args(&args, &args);
    let reply = p.check(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib\nlocal a = 1\nwhile 1 do a = a + 1 end",
    ]);
    assert!(
        show(&reply).contains("FUNCTION LOAD timeout"),
        "{}",
        show(&reply)
    );
    p.check(&["FUNCTION", "LIST"]);
    p.check(&["FUNCTION", "KILL"]);
}
