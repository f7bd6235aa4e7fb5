//! The slowlog (Redis's slowlog.c): the latest commands that took at
//! least `slowlog-log-slower-than` microseconds, newest first, at most
//! `slowlog-max-len` of them.

use std::collections::VecDeque;

/// Arguments kept per entry; the last one kept says how many more there
/// were (Redis's `SLOWLOG_ENTRY_MAX_ARGC`).
pub const MAX_ARGC: usize = 32;
/// Bytes kept per argument (Redis's `SLOWLOG_ENTRY_MAX_STRING`).
pub const MAX_STRING: usize = 128;

/// One slowlog entry, as SLOWLOG GET replies it.
#[derive(Debug, Clone)]
pub struct SlowlogEntry {
    /// Unique, increasing id (not reset by SLOWLOG RESET).
    pub id: u64,
    /// Unix time (seconds) the command was logged.
    pub time: i64,
    /// Execution time in microseconds.
    pub duration_us: u64,
    /// The command's arguments, trimmed.
    pub argv: Vec<Vec<u8>>,
    /// The client's address (`127.0.0.1:50312`).
    pub peer: String,
    /// The client's name ("" when it has none).
    pub name: Vec<u8>,
}

/// The slowlog.
#[derive(Debug, Default)]
pub struct Slowlog {
    entries: VecDeque<SlowlogEntry>,
    next_id: u64,
    /// The address of each blocked client, noted when its command blocked
    /// (with the host's connection at hand), for the entry of the command
    /// when it is served, times out or is unblocked later, outside any
    /// connection (Redis logs the blocked client's own address).
    blocked_peers: std::collections::HashMap<u64, String>,
}

/// The arguments as the slowlog keeps them: at most [`MAX_ARGC`] (the
/// last then reads `... (N more arguments)`), each at most
/// [`MAX_STRING`] bytes followed by `... (N more bytes)`.
pub fn trimmed_argv(argv: &[&[u8]]) -> Vec<Vec<u8>> {
    let kept = argv.len().min(MAX_ARGC);
    (0..kept)
        .map(|j| {
            if kept != argv.len() && j == kept - 1 {
                format!("... ({} more arguments)", argv.len() - kept + 1).into_bytes()
            } else if argv[j].len() > MAX_STRING {
                let mut arg = argv[j][..MAX_STRING].to_vec();
                arg.extend_from_slice(
                    format!("... ({} more bytes)", argv[j].len() - MAX_STRING).as_bytes(),
                );
                arg
            } else {
                argv[j].to_vec()
            }
        })
        .collect()
}

impl Slowlog {
    /// Notes the address of `session`, whose command just blocked.
    pub fn note_blocked(&mut self, session: u64, peer: String) {
        self.blocked_peers.insert(session, peer);
    }

    /// The address noted for `session` when its command blocked (the
    /// note is consumed: the wait ended, or the client went away).
    pub fn take_blocked(&mut self, session: u64) -> Option<String> {
        self.blocked_peers.remove(&session)
    }

    /// Adds an entry when `duration_us` reaches `slower_than` (negative:
    /// the slowlog is off), then trims to `max_len` (Redis's
    /// `slowlogPushEntryIfNeeded`). `who` gives the client's address and
    /// name, asked only when an entry is made.
    pub fn push_if_needed(
        &mut self,
        slower_than: i64,
        max_len: u64,
        duration_us: u64,
        argv: &[&[u8]],
        now_s: i64,
        who: impl FnOnce() -> (String, Vec<u8>),
    ) {
        if slower_than < 0 || (duration_us as i64) < slower_than {
            return;
        }
        let (peer, name) = who();
        self.entries.push_front(SlowlogEntry {
            id: self.next_id,
            time: now_s,
            duration_us,
            argv: trimmed_argv(argv),
            peer,
            name,
        });
        self.next_id += 1;
        self.trim(max_len);
    }

    /// Drops the oldest entries past `max_len`.
    pub fn trim(&mut self, max_len: u64) {
        while self.entries.len() as u64 > max_len {
            self.entries.pop_back();
        }
    }

    /// The entries, newest first.
    pub fn entries(&self) -> impl Iterator<Item = &SlowlogEntry> {
        self.entries.iter()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no entry is held.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// SLOWLOG RESET (ids keep increasing).
    pub fn reset(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_trimmed_as_redis_does() {
        let args: Vec<Vec<u8>> = (0..40).map(|i| i.to_string().into_bytes()).collect();
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let kept = trimmed_argv(&refs);
        assert_eq!(kept.len(), 32);
        assert_eq!(kept[31], b"... (9 more arguments)");
        let long = vec![b'a'; 200];
        let kept = trimmed_argv(&[b"set", &long]);
        assert_eq!(kept[1].len(), 128 + "... (72 more bytes)".len());
    }

    #[test]
    fn threshold_and_length() {
        let mut log = Slowlog::default();
        let who = || ("1.2.3.4:5".to_string(), Vec::new());
        log.push_if_needed(-1, 10, 1_000_000, &[b"get"], 1, who);
        assert!(log.is_empty());
        log.push_if_needed(10, 2, 9, &[b"get"], 1, who);
        assert!(log.is_empty());
        for _ in 0..3 {
            log.push_if_needed(10, 2, 10, &[b"get"], 1, who);
        }
        assert_eq!(log.len(), 2);
        assert_eq!(log.entries().next().map(|e| e.id), Some(2));
    }
}
