//! MONITOR: the clients that asked to see every command the server runs,
//! and the line each of them receives per command (Redis's
//! `replicationFeedMonitors`).
//!
//! A line is `+<sec>.<usec> [<db> <addr>] "arg" "arg"…` (`[<db> lua]` for
//! a command a script or function ran), each argument quoted and escaped
//! as Redis's `sdscatrepr` does, sent as a status reply in either
//! protocol. What is fed, and when, follows Redis's `call()`: after the
//! command ran (so SELECT shows the new database), never for commands
//! flagged `admin` or `skip_monitor`, nor for commands refused before they
//! ran; EVAL/EVALSHA/FCALL feed themselves before their script's
//! commands; each command of an EXEC is fed as it runs, then EXEC. AUTH,
//! HELLO AUTH and MIGRATE AUTH/AUTH2 show their secrets as `(redacted)`.
//!
//! The registry is a list of session ids: with no monitor the dispatch
//! tests one length and does nothing else.

use super::clients::Message;
use super::Core;
use crate::config::cat_repr;

/// Where a fed command came from, for the bracket of its line.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Origin<'a> {
    /// A client (its `ip:port`).
    Client(&'a str),
    /// A script or function (`lua`).
    Script,
}

/// The sessions in MONITOR mode, in the order they entered it.
#[derive(Debug, Default)]
pub(crate) struct Monitors {
    ids: Vec<u64>,
}

impl Monitors {
    /// True when at least one client monitors (the dispatch's only test).
    #[inline]
    pub(crate) fn active(&self) -> bool {
        !self.ids.is_empty()
    }

    /// Adds `session` (once).
    pub(crate) fn add(&mut self, session: u64) {
        if !self.ids.contains(&session) {
            self.ids.push(session);
        }
    }

    /// Removes `session` (a monitor that closed or sent RESET).
    pub(crate) fn remove(&mut self, session: u64) {
        self.ids.retain(|&id| id != session);
    }
}

impl Core {
    /// Sends every monitor the line for `argv`, run in `db` from `origin`
    /// (nothing while loading, as Redis). The caller has checked the
    /// command's flags. The line for `current` (the client that ran the
    /// command), when it is a monitor itself, is returned instead of
    /// queued: it goes after the command's reply, where Redis puts it.
    pub(crate) fn feed_monitors(
        &mut self,
        db: usize,
        origin: Origin,
        argv: &[&[u8]],
        current: Option<u64>,
    ) -> Option<Message> {
        if self.loading || !self.monitors.active() {
            return None;
        }
        let line = monitor_line(now_us(), db, origin, argv);
        let message = Message::status_line(line);
        let mut own = None;
        for &id in &self.monitors.ids {
            if Some(id) == current {
                own = Some(message.clone());
            } else {
                self.clients.send(id, message.clone());
            }
        }
        own
    }
}

/// Microseconds since the Unix epoch (Redis's `gettimeofday`).
fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// The line for `argv` (without `+` and CRLF), secrets redacted.
fn monitor_line(now_us: i64, db: usize, origin: Origin, argv: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + argv.iter().map(|a| a.len() + 3).sum::<usize>());
    out.extend_from_slice(format!("{}.{:06} ", now_us / 1_000_000, now_us % 1_000_000).as_bytes());
    match origin {
        Origin::Client(addr) => out.extend_from_slice(format!("[{db} {addr}] ").as_bytes()),
        Origin::Script => out.extend_from_slice(format!("[{db} lua] ").as_bytes()),
    }
    let redacted = redacted_args(argv);
    for (j, arg) in argv.iter().enumerate() {
        if j > 0 {
            out.push(b' ');
        }
        if redacted.contains(&j) {
            cat_repr(&mut out, b"(redacted)");
        } else {
            cat_repr(&mut out, arg);
        }
    }
    out
}

/// The argument positions Redis 7.0 redacts (`redactClientCommandArgument`)
/// by the time the command returns: AUTH's password (and user), HELLO's
/// AUTH pair up to the first bad option, MIGRATE's AUTH/AUTH2 secrets up
/// to the first bad option.
fn redacted_args(argv: &[&[u8]]) -> Vec<usize> {
    let Some(name) = argv.first() else {
        return Vec::new();
    };
    let is = |arg: &[u8], word: &str| arg.eq_ignore_ascii_case(word.as_bytes());
    let mut out = Vec::new();
    if is(name, "auth") {
        if argv.len() <= 3 {
            out.extend(1..argv.len());
        }
    } else if is(name, "hello") {
        if argv.len() >= 2 {
            match crate::types::num::parse_i64(argv[1]) {
                Some(2 | 3) => {}
                _ => return out,
            }
        }
        let mut j = 2;
        while j < argv.len() {
            let more = argv.len() - 1 - j;
            if is(argv[j], "auth") && more >= 2 {
                out.extend([j + 1, j + 2]);
                j += 3;
            } else if is(argv[j], "setname") && more >= 1 {
                j += 2;
            } else {
                break;
            }
        }
    } else if is(name, "migrate") {
        let mut j = 6;
        while j < argv.len() {
            let more = argv.len() - 1 - j;
            if is(argv[j], "copy") || is(argv[j], "replace") {
                j += 1;
            } else if is(argv[j], "auth") && more >= 1 {
                out.push(j + 1);
                j += 2;
            } else if is(argv[j], "auth2") && more >= 2 {
                out.extend([j + 1, j + 2]);
                j += 3;
            } else {
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{monitor_line, Origin};

    fn line(origin: Origin, argv: &[&str]) -> String {
        let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        String::from_utf8(monitor_line(1_700_000_000_000_042, 3, origin, &argv)).unwrap()
    }

    #[test]
    fn lines_quote_and_escape_like_sdscatrepr() {
        assert_eq!(
            line(Origin::Client("127.0.0.1:5000"), &["set", "k\"\\", "a\r\n\t\x07\x08\x01\x7f é"]),
            "1700000000.000042 [3 127.0.0.1:5000] \"set\" \"k\\\"\\\\\" \"a\\r\\n\\t\\a\\b\\x01\\x7f \\xc3\\xa9\""
        );
        assert_eq!(
            line(Origin::Script, &["get", "k"]),
            "1700000000.000042 [3 lua] \"get\" \"k\""
        );
    }

    #[test]
    fn secrets_are_redacted_as_redis_7_0_does() {
        let c = Origin::Client("a:1");
        let r = |argv: &[&str]| line(c, argv).split_once("] ").unwrap().1.to_string();
        assert_eq!(r(&["AUTH", "p"]), "\"AUTH\" \"(redacted)\"");
        assert_eq!(
            r(&["auth", "u", "p"]),
            "\"auth\" \"(redacted)\" \"(redacted)\""
        );
        assert_eq!(r(&["auth", "u", "p", "x"]), "\"auth\" \"u\" \"p\" \"x\"");
        assert_eq!(
            r(&["hello", "3", "setname", "n", "AUTH", "u", "p", "bad"]),
            "\"hello\" \"3\" \"setname\" \"n\" \"AUTH\" \"(redacted)\" \"(redacted)\" \"bad\""
        );
        assert_eq!(
            r(&["hello", "4", "AUTH", "u", "p"]),
            "\"hello\" \"4\" \"AUTH\" \"u\" \"p\""
        );
        assert_eq!(
            r(&["migrate", "h", "1", "", "0", "5", "COPY", "AUTH", "p", "AUTH2", "u", "q", "KEYS", "k"]),
            "\"migrate\" \"h\" \"1\" \"\" \"0\" \"5\" \"COPY\" \"AUTH\" \"(redacted)\" \"AUTH2\" \"(redacted)\" \"(redacted)\" \"KEYS\" \"k\""
        );
        assert_eq!(
            r(&["migrate", "h", "1", "k", "0", "5", "x", "AUTH", "p"]),
            "\"migrate\" \"h\" \"1\" \"k\" \"0\" \"5\" \"x\" \"AUTH\" \"p\""
        );
    }
}
