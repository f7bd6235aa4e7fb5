//! Two rate limiters on one embedded engine shared by several threads:
//!
//! - fixed window: `INCR` + `EXPIRE … NX` in one MULTI/EXEC on the
//!   counter `ratelimit:fixed:<user>` (the window starts at the user's
//!   first request; NX keeps later requests from extending it);
//! - sliding window: a sorted set of request times per user, trimmed,
//!   counted and added to by one Lua script (ZREMRANGEBYSCORE, ZCARD,
//!   ZADD), called with `EVALSHA` and reloaded on `NOSCRIPT`, so that
//!   check-and-add is one atomic step even with many callers.
//!
//! Four threads send 10 requests each for the same user at once: exactly
//! as many pass as the limits allow. Then the sliding window is driven
//! by a client-supplied clock to show it admitting again once old
//! requests leave the window.
//!
//! Run: `cargo run --example rate_limiter` (it asserts what it shows and
//! exits non-zero otherwise).

use std::sync::{Arc, Barrier};

use hozon::embed::{Conn, Db, DbError};
use hozon::Reply;

/// KEYS[1] the user's set; ARGV: now (ms), window (ms), limit, request id.
/// Returns {1 if admitted else 0, requests in the window}.
const SLIDING_WINDOW: &str = r#"
local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then return {0, count} end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], window)
return {1, count + 1}
"#;

/// A fixed window: at most `limit` requests per `secs`-second window.
struct FixedWindow {
    limit: i64,
    secs: u32,
}

impl FixedWindow {
    /// (admitted, requests counted in the user's window).
    fn allow(&self, conn: &mut Conn, user: &str) -> Result<(bool, i64), DbError> {
        let key = format!("ratelimit:fixed:{user}");
        let secs = self.secs.to_string();
        conn.execute(&[b"MULTI"])?;
        conn.execute(&[b"INCR", key.as_bytes()])?;
        conn.execute(&[b"EXPIRE", key.as_bytes(), secs.as_bytes(), b"NX"])?;
        match conn.execute(&[b"EXEC"])? {
            Reply::Array(results) => match results[0] {
                Reply::Int(count) => Ok((count <= self.limit, count)),
                ref other => panic!("INCR: {other:?}"),
            },
            other => panic!("EXEC: {other:?}"),
        }
    }
}

/// A sliding window: at most `limit` requests in any `window_ms`.
#[derive(Clone)]
struct SlidingWindow {
    /// The script's digest, for EVALSHA.
    sha: String,
    window_ms: u64,
    limit: u32,
}

impl SlidingWindow {
    fn new(conn: &mut Conn, window_ms: u64, limit: u32) -> Result<SlidingWindow, DbError> {
        let sha = load(conn)?;
        Ok(SlidingWindow {
            sha,
            window_ms,
            limit,
        })
    }

    /// (admitted, requests in the user's window) for request `id` at `now_ms`.
    fn allow(
        &mut self,
        conn: &mut Conn,
        user: &str,
        now_ms: u64,
        id: &str,
    ) -> Result<(bool, i64), DbError> {
        let key = format!("ratelimit:sliding:{user}");
        let (now, window, limit) = (
            now_ms.to_string(),
            self.window_ms.to_string(),
            self.limit.to_string(),
        );
        let run = |conn: &mut Conn, sha: &str| {
            let argv: [&[u8]; 8] = [
                b"EVALSHA",
                sha.as_bytes(),
                b"1",
                key.as_bytes(),
                now.as_bytes(),
                window.as_bytes(),
                limit.as_bytes(),
                id.as_bytes(),
            ];
            conn.execute(&argv)
        };
        let reply = match run(conn, &self.sha) {
            // The engine forgot the script (restart, SCRIPT FLUSH): load it again.
            Err(DbError::Command(e)) if e.code() == "NOSCRIPT" => {
                println!("  NOSCRIPT: loading the script again");
                self.sha = load(conn)?;
                run(conn, &self.sha)?
            }
            other => other?,
        };
        match reply {
            Reply::Array(r) => match (&r[0], &r[1]) {
                (Reply::Int(admitted), Reply::Int(count)) => Ok((*admitted == 1, *count)),
                other => panic!("script reply: {other:?}"),
            },
            other => panic!("script reply: {other:?}"),
        }
    }
}

fn load(conn: &mut Conn) -> Result<String, DbError> {
    match conn.execute(&[b"SCRIPT", b"LOAD", SLIDING_WINDOW.as_bytes()])? {
        Reply::Bulk(sha) => Ok(String::from_utf8(sha).expect("a hex digest")),
        other => panic!("SCRIPT LOAD: {other:?}"),
    }
}

fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.expect("a clock after 1970").as_millis() as u64
}

fn main() -> Result<(), DbError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path())?;
    let fixed_limit = FixedWindow {
        limit: 10,
        secs: 60,
    };
    let sliding_limit = SlidingWindow::new(&mut db.connect(), 60_000, 15)?;

    // 4 threads × 10 requests for user42 at once, all within a minute:
    // 10 pass the fixed window, 15 the sliding one.
    const THREADS: usize = 4;
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (db, start) = (db.clone(), Arc::clone(&start));
            let (fixed_limit, mut sliding_limit) =
                (FixedWindow { ..fixed_limit }, sliding_limit.clone());
            std::thread::spawn(move || -> Result<(usize, usize), DbError> {
                let mut conn = db.connect();
                start.wait();
                let (mut fixed, mut sliding) = (0, 0);
                for i in 0..10 {
                    fixed += fixed_limit.allow(&mut conn, "user42")?.0 as usize;
                    let id = format!("t{t}-r{i}");
                    sliding += sliding_limit.allow(&mut conn, "user42", now_ms(), &id)?.0 as usize;
                }
                Ok((fixed, sliding))
            })
        })
        .collect();
    let (mut fixed, mut sliding) = (0, 0);
    for (t, worker) in workers.into_iter().enumerate() {
        let (f, s) = worker.join().expect("no panic")?;
        println!("thread {t}: {f}/10 passed the fixed window, {s}/10 the sliding one");
        fixed += f;
        sliding += s;
    }
    println!("in all: fixed window {fixed}/40 (limit 10), sliding window {sliding}/40 (limit 15)");
    assert_eq!(fixed, 10, "the fixed window admits exactly its limit");
    assert_eq!(sliding, 15, "the sliding window admits exactly its limit");
    let mut conn = db.connect();
    let card = conn.execute(&[b"ZCARD", b"ratelimit:sliding:user42"])?;
    assert_eq!(card, Reply::Int(15), "refused requests leave no entry");
    let ttl = conn.execute(&[b"TTL", b"ratelimit:fixed:user42"])?;
    assert!(
        matches!(ttl, Reply::Int(1..=60)),
        "the counter expires with its window: {ttl:?}"
    );
    assert_eq!(
        fixed_limit.allow(&mut conn, "user7")?,
        (true, 1),
        "users are independent"
    );

    // The sliding window slides: 3 per 1000 ms, on a client-supplied
    // clock. SCRIPT FLUSH first: the limiter reloads its script.
    conn.execute(&[b"SCRIPT", b"FLUSH"])?;
    let mut limit = SlidingWindow {
        window_ms: 1000,
        limit: 3,
        ..sliding_limit
    };
    let t0 = now_ms();
    let expected = [
        (0, true),
        (100, true),
        (200, true),
        (300, false),
        (999, false),
        (1000, true),
        (1050, false),
        (1100, true),
    ];
    for (i, (offset, admitted)) in expected.into_iter().enumerate() {
        let (got, count) = limit.allow(&mut conn, "user9", t0 + offset, &format!("req-{i}"))?;
        let verdict = if got { "admitted" } else { "refused" };
        println!("  t = {offset:>4} ms: {verdict} ({count} in the window)");
        assert_eq!(got, admitted, "request at +{offset} ms");
    }
    db.close()?;
    println!("ok");
    Ok(())
}
