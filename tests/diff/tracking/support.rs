//! What the client-side caching tests share: a client on both servers,
//! frames compared with Redis's, PING fences, INFO and CLIENT LIST fields.

use std::time::{Duration, Instant};

use crate::harness::{encode_command, show, Conn, Pair};

/// How long a message may take to arrive before a test gives up on it.
pub(super) const ARRIVAL_TIMEOUT: Duration = Duration::from_secs(3);

/// One client connected to each server.
pub(super) struct Client {
    pub(super) r: Conn,
    pub(super) h: Conn,
}

impl Client {
    pub(super) fn new(p: &Pair) -> Client {
        let (r, h) = p.connect_more();
        Client { r, h }
    }

    /// The client's id on each server.
    pub(super) fn ids(&mut self) -> (String, String) {
        (
            int(&self.r.call(&[b"CLIENT", b"ID"])),
            int(&self.h.call(&[b"CLIENT", b"ID"])),
        )
    }

    /// Switches to RESP3 (HELLO's reply shows the id: not compared).
    pub(super) fn resp3(&mut self) {
        self.r.call(&[b"HELLO", b"3"]);
        self.h.call(&[b"HELLO", b"3"]);
    }

    pub(super) fn send(&mut self, args: &[&str]) {
        let bytes = encode(args);
        self.r.send_raw(&bytes);
        self.h.send_raw(&bytes);
    }

    /// Sends a command and compares its single reply.
    #[track_caller]
    pub(super) fn check(&mut self, args: &[&str]) -> Vec<u8> {
        self.check_n(args, 1).pop().expect("one reply")
    }

    /// Sends a command and compares the `n` frames that follow (its reply
    /// and the pushes written after it).
    #[track_caller]
    pub(super) fn check_n(&mut self, args: &[&str], n: usize) -> Vec<Vec<u8>> {
        self.send(args);
        let what = args.join(" ");
        let r = read_n(&mut self.r, n, "redis", &what);
        let h = read_n(&mut self.h, n, "hozon", &what);
        assert_frames_equal(&r, &h, &what);
        r
    }

    /// Sends a command naming a client id: `{}` in `args` becomes each
    /// side's id. Compares the replies.
    #[track_caller]
    pub(super) fn check_with_id(&mut self, args: &[&str], ids: &(String, String)) -> Vec<u8> {
        let side = |id: &str| -> Vec<u8> {
            let words: Vec<&str> = args
                .iter()
                .map(|a| if *a == "{}" { id } else { a })
                .collect();
            encode(&words)
        };
        self.r.send_raw(&side(&ids.0));
        self.h.send_raw(&side(&ids.1));
        let what = args.join(" ");
        let r = read_n(&mut self.r, 1, "redis", &what).pop().unwrap();
        let h = read_n(&mut self.h, 1, "hozon", &what).pop().unwrap();
        assert_frames_equal(std::slice::from_ref(&r), &[h], &what);
        r
    }

    /// Sends a command whose reply shows a client id, and compares the
    /// replies with each side's `ids` replaced by `{}`.
    #[track_caller]
    pub(super) fn check_showing_id(&mut self, args: &[&str], ids: &(String, String)) -> Vec<u8> {
        self.send(args);
        let what = args.join(" ");
        let r = read_n(&mut self.r, 1, "redis", &what).pop().unwrap();
        let h = read_n(&mut self.h, 1, "hozon", &what).pop().unwrap();
        let r = replace_id(&r, &ids.0);
        let h = replace_id(&h, &ids.1);
        assert_frames_equal(std::slice::from_ref(&r), &[h], &what);
        r
    }

    /// Compares the frames that arrive before the reply to a PING fence
    /// (the pending invalidations) and returns them.
    #[track_caller]
    pub(super) fn pending(&mut self, what: &str) -> Vec<Vec<u8>> {
        let r = fence(&mut self.r);
        let h = fence(&mut self.h);
        assert_frames_equal(&r, &h, what);
        r
    }

    /// Like [`Client::pending`], but waits until at least `n` frames came
    /// (invalidations sent by the servers' cron: expiry, table limit).
    #[track_caller]
    pub(super) fn pending_at_least(
        &mut self,
        n: usize,
        what: &str,
    ) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let collect = |conn: &mut Conn, side: &str| {
            let deadline = Instant::now() + ARRIVAL_TIMEOUT;
            let mut got = Vec::new();
            while got.len() < n {
                let left = deadline.saturating_duration_since(Instant::now());
                match conn.try_read_reply(left) {
                    Some(frame) => got.push(frame),
                    None => panic!("{side}: {} of {n} frames after {what}: {got:?}", got.len()),
                }
            }
            got.extend(fence(conn));
            got
        };
        (collect(&mut self.r, "redis"), collect(&mut self.h, "hozon"))
    }
}

pub(super) fn encode(args: &[&str]) -> Vec<u8> {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    encode_command(&bytes)
}

/// The number of an integer reply.
pub(super) fn int(frame: &[u8]) -> String {
    let text = String::from_utf8_lossy(frame);
    text.trim_start_matches(':').trim_end().to_string()
}

/// `frame` with the decimal `id` replaced by `{}` wherever it stands alone
/// (`:id`, `redir=id`, a bulk holding it).
pub(super) fn replace_id(frame: &[u8], id: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(frame).into_owned();
    text.replace(&format!(":{id}\r\n"), ":{}\r\n")
        .replace(&format!("redir={id} "), "redir={} ")
        .replace(&format!("redir={id}\n"), "redir={}\n")
        .into_bytes()
}

#[track_caller]
pub(super) fn read_n(conn: &mut Conn, n: usize, side: &str, what: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match conn.try_read_reply(ARRIVAL_TIMEOUT) {
            Some(frame) => out.push(frame),
            None => panic!(
                "{side}: expected {n} frames after {what:?}, got {}: {:?}",
                out.len(),
                out.iter().map(|f| show(f)).collect::<Vec<_>>()
            ),
        }
    }
    out
}

pub(super) const FENCE: &str = "fence-tr";

/// Sends `PING <FENCE>` and returns the frames that arrive before its
/// reply (a bulk, or ["pong", FENCE] in RESP2 subscribed mode).
pub(super) fn fence(conn: &mut Conn) -> Vec<Vec<u8>> {
    crate::harness::frames_before_fence(conn, FENCE, ARRIVAL_TIMEOUT)
}

#[track_caller]
pub(super) fn assert_frames_equal(r: &[Vec<u8>], h: &[Vec<u8>], what: &str) {
    if r != h {
        panic!(
            "frames differ after {what:?}\n  redis: {:?}\n  hozon: {:?}",
            r.iter().map(|f| show(f)).collect::<Vec<_>>(),
            h.iter().map(|f| show(f)).collect::<Vec<_>>()
        );
    }
}

/// A RESP3 invalidation push of `keys`.
pub(super) fn push_of(keys: &[&str]) -> Vec<u8> {
    let mut out = b">2\r\n$10\r\ninvalidate\r\n".to_vec();
    out.extend_from_slice(format!("*{}\r\n", keys.len()).as_bytes());
    for k in keys {
        out.extend_from_slice(format!("${}\r\n{k}\r\n", k.len()).as_bytes());
    }
    out
}

/// The value of `field:` in an INFO reply.
pub(super) fn info_field(info: &[u8], field: &str) -> String {
    let text = String::from_utf8_lossy(info);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO"))
        .trim()
        .to_string()
}

pub(super) fn tracking_info_fields(c: &mut Client) -> [(String, String); 4] {
    let r = c.r.call(&[b"INFO", b"all"]);
    let h = c.h.call(&[b"INFO", b"all"]);
    [
        "tracking_clients",
        "tracking_total_keys",
        "tracking_total_items",
        "tracking_total_prefixes",
    ]
    .map(|f| (info_field(&r, f), info_field(&h, f)))
}

#[track_caller]
pub(super) fn assert_info_agrees(c: &mut Client, expected: [&str; 4]) {
    let fields = tracking_info_fields(c);
    for ((r, h), want) in fields.iter().zip(expected) {
        assert_eq!(r, want, "redis INFO tracking fields {fields:?}");
        assert_eq!(h, want, "hozon INFO tracking fields {fields:?}");
    }
}

/// The `flags=` and `redir=` fields of a CLIENT INFO line.
pub(super) fn flags_and_redir(line: &[u8]) -> (String, String) {
    let text = String::from_utf8_lossy(line);
    let field = |name: &str| {
        text.split([' ', '\n'])
            .find_map(|w| w.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .to_string()
    };
    (field("flags="), field("redir="))
}
