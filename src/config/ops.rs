//! Running the server as operators do: the Unix socket, the pid file,
//! syslog, supervision (`supervised`, `daemonize` is [`Config::daemonize`]),
//! the listen backlog, and the Redis directives hozon accepts without
//! acting on them.
//!
//! A directive of a stock `redis.conf` is either applied or, when it has
//! no meaning for hozon, accepted (CONFIG GET shows and CONFIG SET
//! validates and stores its value as Redis does) with one warning line at
//! startup naming it and why ([`Config::inert_warnings`]). Each such
//! directive has a value hozon's behaviour already matches (`always-show-logo
//! no`, `lazyfree-lazy-expire no`, `activerehashing yes`): written with that
//! value it is applied and logs nothing. docs/operations.md lists them.

use super::Config;

/// `supervised`: how the server tells a supervisor it is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Supervised {
    /// `upstart`: stop itself (SIGSTOP) once ready.
    Upstart,
    /// `systemd`: `READY=1` and `STATUS=` to `$NOTIFY_SOCKET`.
    Systemd,
    /// `auto`: upstart when `$UPSTART_JOB` is set, systemd when
    /// `$NOTIFY_SOCKET` is.
    Auto,
    /// `no` (the default).
    No,
}

impl Supervised {
    /// The words, in Redis's order (its error message lists them so).
    pub const WORDS: &'static [&'static str] = &["upstart", "systemd", "auto", "no"];

    /// The index of the mode in [`Supervised::WORDS`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The mode at `index` of [`Supervised::WORDS`].
    pub fn from_index(index: usize) -> Supervised {
        match index {
            0 => Supervised::Upstart,
            1 => Supervised::Systemd,
            2 => Supervised::Auto,
            _ => Supervised::No,
        }
    }
}

/// `syslog-facility` values, in Redis's order, with their syslog codes.
pub const SYSLOG_FACILITIES: &[(&str, u8)] = &[
    ("user", 1),
    ("local0", 16),
    ("local1", 17),
    ("local2", 18),
    ("local3", 19),
    ("local4", 20),
    ("local5", 21),
    ("local6", 22),
    ("local7", 23),
];

/// The settings of this module (a field of [`Config`]).
#[derive(Debug, Clone)]
pub struct OpsSettings {
    /// `unixsocket`: path of the Unix-domain listener (empty: none).
    pub unixsocket: String,
    /// `unixsocketperm`: the socket file's permissions (0: as the umask
    /// leaves them).
    pub unixsocketperm: u32,
    /// `pidfile`: where the process id is written (empty: nowhere,
    /// unless daemonized, then `/var/run/redis.pid` as in Redis).
    pub pidfile: String,
    /// `syslog-enabled`: log lines also go to syslog (`/dev/log`).
    pub syslog_enabled: bool,
    /// `syslog-ident` (`redis`).
    pub syslog_ident: String,
    /// `syslog-facility`: index into [`SYSLOG_FACILITIES`] (`local0`).
    pub syslog_facility: usize,
    /// `supervised` (`no`).
    pub supervised: Supervised,
    /// `tcp-backlog`: the listen(2) backlog of every listener (511).
    pub tcp_backlog: u32,
    /// `disable-thp`: turn transparent huge pages off for the process
    /// (`yes`).
    pub disable_thp: bool,
    /// `oom-score-adj` and `oom-score-adj-values`, kept as CONFIG GET
    /// shows them.
    pub(super) oom_score_adj: String,
    pub(super) oom_score_adj_values: [i32; 3],
    /// Values of the accepted-without-effect directives, by name.
    inert: Vec<(&'static str, Vec<u8>)>,
    /// Accepted-without-effect directives the configuration file or the
    /// command line set, in order.
    written: Vec<&'static str>,
}

impl Default for OpsSettings {
    fn default() -> Self {
        OpsSettings {
            unixsocket: String::new(),
            unixsocketperm: 0,
            pidfile: String::new(),
            syslog_enabled: false,
            syslog_ident: String::new(),
            syslog_facility: 1,
            supervised: Supervised::No,
            tcp_backlog: 511,
            disable_thp: true,
            oom_score_adj: "no".into(),
            oom_score_adj_values: [0, 200, 800],
            inert: Vec::new(),
            written: Vec::new(),
        }
    }
}

/// A directive hozon accepts without acting on it.
pub struct Inert {
    /// Redis's name.
    pub name: &'static str,
    /// The value (as CONFIG GET shows it) hozon's behaviour matches, if
    /// any: written with it, the directive is applied and logs nothing.
    pub honored: Option<&'static str>,
    /// Why the directive has no effect in hozon (the warning's end).
    pub reason: &'static str,
}

const NO_PROC_TITLE: &str = "hozon does not rewrite its process title";
const NO_LAZYFREE: &str = "hozon frees values on the command thread";
const NO_OOM_ADJ: &str = "hozon does not adjust its OOM score";

/// Every accepted-without-effect directive (each is also a parameter of
/// the table, so CONFIG GET/SET/REWRITE treat it like any other).
#[rustfmt::skip]
pub const INERT: &[Inert] = &[
    Inert { name: "always-show-logo", honored: Some("no"), reason: "hozon prints no ASCII-art logo" },
    Inert { name: "set-proc-title", honored: Some("no"), reason: NO_PROC_TITLE },
    Inert { name: "proc-title-template", honored: None, reason: NO_PROC_TITLE },
    Inert { name: "rdb-del-sync-files", honored: None, reason: "hozon manages the files of a disk-based full sync itself" },
    Inert { name: "lazyfree-lazy-eviction", honored: Some("no"), reason: NO_LAZYFREE },
    Inert { name: "lazyfree-lazy-expire", honored: Some("no"), reason: NO_LAZYFREE },
    Inert { name: "lazyfree-lazy-server-del", honored: Some("no"), reason: NO_LAZYFREE },
    Inert { name: "lazyfree-lazy-user-del", honored: Some("no"), reason: NO_LAZYFREE },
    Inert { name: "lazyfree-lazy-user-flush", honored: Some("no"), reason: NO_LAZYFREE },
    Inert { name: "replica-lazy-flush", honored: Some("no"), reason: NO_LAZYFREE },
    Inert { name: "oom-score-adj", honored: Some("no"), reason: NO_OOM_ADJ },
    Inert { name: "oom-score-adj-values", honored: None, reason: NO_OOM_ADJ },
    Inert { name: "appenddirname", honored: Some("appendonlydir"), reason: "hozon writes one append-only file (appendfilename) and imports Redis's AOF directory only from appendonlydir/" },
    Inert { name: "aof-timestamp-enabled", honored: Some("no"), reason: "hozon's AOF batches carry their own annotations, not #TS lines" },
    Inert { name: "list-compress-depth", honored: Some("0"), reason: "hozon does not compress list nodes" },
    Inert { name: "activerehashing", honored: Some("yes"), reason: "hozon always finishes table resizes in the background" },
    Inert { name: "dynamic-hz", honored: Some("no"), reason: "hozon runs its background tasks at the configured hz" },
    Inert { name: "rdb-save-incremental-fsync", honored: Some("yes"), reason: "hozon fsyncs every file it writes every 32 MiB" },
    Inert { name: "jemalloc-bg-thread", honored: None, reason: "hozon does not use jemalloc" },
];

/// The entry of [`INERT`] named `name`.
pub fn inert(name: &str) -> Option<&'static Inert> {
    INERT.iter().find(|i| i.name == name)
}

impl OpsSettings {
    /// The value of the accepted-without-effect directive `name`.
    pub(super) fn inert_value(&self, name: &str) -> &[u8] {
        self.inert
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(&[][..], |(_, v)| v.as_slice())
    }

    /// Stores the value of the accepted-without-effect directive `name`.
    pub(super) fn set_inert(&mut self, name: &'static str, value: &[u8]) {
        match self.inert.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = value.to_vec(),
            None => self.inert.push((name, value.to_vec())),
        }
    }

    /// Records that the configuration set `name` (a no-op unless it is
    /// an accepted-without-effect directive).
    pub(super) fn note_written(&mut self, name: &'static str) {
        if inert(name).is_some() && !self.written.contains(&name) {
            self.written.push(name);
        }
    }
}

impl Config {
    /// One warning line per directive the configuration set that hozon
    /// accepts without acting on (naming it, its value and why), in the
    /// order they were written. Logged at startup.
    pub fn inert_warnings(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for &name in &self.ops.written {
            if let Some(entry) = inert(name) {
                let value = super::lookup(name.as_bytes())
                    .map(|p| p.get(self))
                    .unwrap_or_default();
                if entry
                    .honored
                    .is_some_and(|h| h.as_bytes() == value.as_slice())
                {
                    continue;
                }
                lines.push(format!(
                    "Warning: '{name} {}' is accepted and has no effect: {}.",
                    super::load::show_value(&value),
                    entry.reason
                ));
            } else {
                lines.push(format!(
                    "Warning: '{name}' is accepted and has no effect yet: hozon does not implement it in this version."
                ));
            }
        }
        lines
    }

    /// The pid file to write, if any: `pidfile`, or Redis's default path
    /// when daemonized without one.
    pub fn pidfile_path(&self) -> Option<&str> {
        if !self.ops.pidfile.is_empty() {
            Some(&self.ops.pidfile)
        } else if self.daemonize {
            Some("/var/run/redis.pid")
        } else {
            None
        }
    }

    /// The syslog facility code of `syslog-facility`.
    pub fn syslog_facility_code(&self) -> u8 {
        SYSLOG_FACILITIES[self.ops.syslog_facility.min(SYSLOG_FACILITIES.len() - 1)].1
    }
}

/// Redis's `validateProcTitleTemplate`: only known `{variables}`,
/// balanced braces, and something left once expanded with an empty title.
pub(super) fn valid_proc_title_template(template: &[u8]) -> bool {
    const VARIABLES: &[&[u8]] = &[
        b"title",
        b"listen-addr",
        b"server-mode",
        b"port",
        b"tls-port",
        b"unixsocket",
        b"config-file",
    ];
    let mut rest = template;
    let mut literal = false;
    while let Some((&b, tail)) = rest.split_first() {
        match b {
            b'{' if tail.first() == Some(&b'{') => {
                literal = true;
                rest = &tail[1..];
            }
            b'}' if tail.first() == Some(&b'}') => {
                literal = true;
                rest = &tail[1..];
            }
            b'{' => {
                let Some(end) = tail.iter().position(|&c| c == b'}') else {
                    return false;
                };
                let name = &tail[..end];
                if !VARIABLES.contains(&name) {
                    return false;
                }
                // Every variable but the title expands to something.
                literal |= name != b"title" && name != b"server-mode";
                rest = &tail[end + 1..];
            }
            b'}' => return false,
            b' ' => rest = tail,
            _ => {
                literal = true;
                rest = tail;
            }
        }
    }
    literal
}

/// Parses `oom-score-adj-values` (three integers within ±2000).
pub(super) fn parse_oom_values(args: &[&[u8]]) -> Result<[i32; 3], String> {
    if args.len() != 3 {
        return Err("wrong number of arguments".into());
    }
    let mut values = [0i32; 3];
    for (slot, arg) in values.iter_mut().zip(args) {
        match super::params::strtoll_whole(arg) {
            Some(v) if (-2000..=2000).contains(&v) => *slot = v as i32,
            _ => {
                return Err(
                    "Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into(),
                )
            }
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{lookup, Invocation, LoadState};

    fn load(text: &str) -> Result<Config, crate::config::ConfigError> {
        let mut c = Config::default();
        c.apply_text(text.as_bytes())?;
        Ok(c)
    }

    #[test]
    fn every_inert_directive_is_a_parameter_with_its_default() {
        let c = Config::default();
        for entry in INERT {
            let p = lookup(entry.name.as_bytes()).unwrap_or_else(|| panic!("{}", entry.name));
            assert_eq!(p.get(&c), p.default.as_bytes(), "{}", entry.name);
            if let Some(h) = entry.honored {
                // The honored value is one the parameter accepts.
                let mut c = Config::default();
                p.set(&mut c, &[h.as_bytes()], &mut LoadState::default())
                    .unwrap();
            }
        }
    }

    #[test]
    fn warnings_name_each_directive_once_unless_honored() {
        let c = load(
            "always-show-logo no\nset-proc-title yes\nset-proc-title yes\n\
             lazyfree-lazy-expire yes\nactiverehashing yes\n\
             jemalloc-bg-thread no\n",
        )
        .unwrap();
        let warnings = c.inert_warnings();
        let named: Vec<&str> = warnings
            .iter()
            .map(|w| w.split('\'').nth(1).unwrap().split(' ').next().unwrap())
            .collect();
        assert_eq!(
            named,
            [
                "set-proc-title",
                "lazyfree-lazy-expire",
                "jemalloc-bg-thread"
            ]
        );
        assert!(warnings[1].contains("'lazyfree-lazy-expire yes'"));
        assert!(warnings[1].ends_with("hozon frees values on the command thread."));
        // Nothing written: nothing to warn about.
        assert!(Config::default().inert_warnings().is_empty());
    }

    #[test]
    fn slowlog_and_latency_directives_validate_as_redis() {
        assert!(load("stream-node-max-bytes 4kb\nlatency-monitor-threshold 0\n").is_ok());
        let e = load("slowlog-log-slower-than -2\n").unwrap_err();
        assert_eq!(
            e.message,
            "argument must be between -1 and 9223372036854775807 inclusive"
        );
        let e = load("slowlog-max-len 1 2\n").unwrap_err();
        assert_eq!(e.message, "wrong number of arguments");
    }

    #[test]
    fn octal_socket_permissions() {
        let c = load("unixsocketperm 0770\n").unwrap();
        assert_eq!(c.ops.unixsocketperm, 0o770);
        assert_eq!(lookup(b"unixsocketperm").unwrap().get(&c), b"770");
        assert_eq!(load("unixsocketperm \"\"\n").unwrap().ops.unixsocketperm, 0);
        for (bad, why) in [
            ("8", "argument couldn't be parsed as an octal number"),
            ("7a", "argument couldn't be parsed as an octal number"),
            ("1000", "argument must be between 0 and 777 inclusive"),
            ("-1", "argument must be between 0 and 777 inclusive"),
        ] {
            let e = load(&format!("unixsocketperm {bad}\n")).unwrap_err();
            assert_eq!(e.message, why, "{bad}");
        }
    }

    #[test]
    fn aof_use_rdb_preamble_is_the_preamble_switch() {
        use crate::config::AofPreamble;
        let c = load("aof-preamble rdb\naof-use-rdb-preamble yes\n").unwrap();
        assert_eq!(c.aof_preamble, AofPreamble::Rdb);
        let c = load("aof-use-rdb-preamble no\n").unwrap();
        assert_eq!(c.aof_preamble, AofPreamble::None);
        let c = load("aof-use-rdb-preamble no\naof-use-rdb-preamble yes\n").unwrap();
        assert_eq!(c.aof_preamble, AofPreamble::Native);
    }

    #[test]
    fn pidfile_defaults_to_redis_path_when_daemonized() {
        assert_eq!(Config::default().pidfile_path(), None);
        assert_eq!(
            load("daemonize yes\n").unwrap().pidfile_path(),
            Some("/var/run/redis.pid")
        );
        assert_eq!(
            load("pidfile /tmp/p\n").unwrap().pidfile_path(),
            Some("/tmp/p")
        );
        let c = load("supervised auto\nsyslog-facility local7\n").unwrap();
        assert_eq!(c.ops.supervised, Supervised::Auto);
        assert_eq!(c.syslog_facility_code(), 23);
        let _ = Invocation::Version;
    }

    #[test]
    fn proc_title_templates() {
        assert!(valid_proc_title_template(
            b"{title} {listen-addr} {server-mode}"
        ));
        assert!(valid_proc_title_template(b"redis {port}"));
        assert!(!valid_proc_title_template(b"{unknown}"));
        assert!(!valid_proc_title_template(b"{title"));
        assert!(!valid_proc_title_template(b""));
        assert!(!valid_proc_title_template(b"{title} {server-mode}"));
    }
}
