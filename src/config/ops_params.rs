//! The parameters of config/ops.rs (docs/operations.md) that need more
//! than a line of the table: the Unix socket, the pid file, syslog,
//! supervision, and the accepted-without-effect directives with their own
//! validation. `params::PARAMS` lists them.

use super::ops;
use super::params::{is_base_name, Kind, Param, IMMUTABLE, MULTI_ARG};
use super::AofPreamble;

/// `syslog-facility` values, in Redis's order.
const SYSLOG_FACILITY_WORDS: &[&str] = &[
    "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
];

/// `unixsocket`.
pub(super) const UNIXSOCKET: Param = Param {
    name: "unixsocket",
    alias: None,
    flags: IMMUTABLE,
    default: "",
    kind: Kind::Str {
        get: |c| c.ops.unixsocket.clone().into_bytes(),
        set: |c, v| {
            c.ops.unixsocket = String::from_utf8_lossy(v).into_owned();
            Ok(())
        },
    },
    unsupported: None,
};

/// `unixsocketperm`.
pub(super) const UNIXSOCKETPERM: Param = Param {
    name: "unixsocketperm",
    alias: None,
    flags: IMMUTABLE,
    default: "0",
    kind: Kind::Special {
        get: |c| format!("{:o}", c.ops.unixsocketperm).into_bytes(),
        set: |c, args, _| match args {
            [v] => {
                c.ops.unixsocketperm = parse_octal_perm(v)?;
                Ok(())
            }
            _ => Err("wrong number of arguments".into()),
        },
    },
    unsupported: None,
};

/// `pidfile`.
pub(super) const PIDFILE: Param = Param {
    name: "pidfile",
    alias: None,
    flags: IMMUTABLE,
    default: "",
    kind: Kind::Str {
        get: |c| c.ops.pidfile.clone().into_bytes(),
        set: |c, v| {
            c.ops.pidfile = String::from_utf8_lossy(v).into_owned();
            Ok(())
        },
    },
    unsupported: None,
};

/// `syslog-enabled`.
pub(super) const SYSLOG_ENABLED: Param = Param {
    name: "syslog-enabled",
    alias: None,
    flags: IMMUTABLE,
    default: "no",
    kind: Kind::Bool {
        get: |c| c.ops.syslog_enabled,
        set: |c, v| c.ops.syslog_enabled = v,
    },
    unsupported: None,
};

/// `syslog-ident`.
pub(super) const SYSLOG_IDENT: Param = Param {
    name: "syslog-ident",
    alias: None,
    flags: IMMUTABLE,
    default: "redis",
    kind: Kind::Str {
        get: |c| c.ops.syslog_ident.clone().into_bytes(),
        set: |c, v| {
            c.ops.syslog_ident = String::from_utf8_lossy(v).into_owned();
            Ok(())
        },
    },
    unsupported: None,
};

/// `syslog-facility`.
pub(super) const SYSLOG_FACILITY: Param = Param {
    name: "syslog-facility",
    alias: None,
    flags: IMMUTABLE,
    default: "local0",
    kind: Kind::Enum {
        values: SYSLOG_FACILITY_WORDS,
        get: |c| c.ops.syslog_facility,
        set: |c, i| c.ops.syslog_facility = i,
    },
    unsupported: None,
};

/// `supervised`.
pub(super) const SUPERVISED: Param = Param {
    name: "supervised",
    alias: None,
    flags: IMMUTABLE,
    default: "no",
    kind: Kind::Enum {
        values: ops::Supervised::WORDS,
        get: |c| c.ops.supervised.index(),
        set: |c, i| c.ops.supervised = ops::Supervised::from_index(i),
    },
    unsupported: None,
};

/// `disable-thp`.
pub(super) const DISABLE_THP: Param = Param {
    name: "disable-thp",
    alias: None,
    flags: IMMUTABLE,
    default: "yes",
    kind: Kind::Bool {
        get: |c| c.ops.disable_thp,
        set: |c, v| c.ops.disable_thp = v,
    },
    unsupported: None,
};

/// `aof-use-rdb-preamble`.
pub(super) const AOF_USE_RDB_PREAMBLE: Param = Param {
    name: "aof-use-rdb-preamble",
    alias: None,
    flags: 0,
    default: "yes",
    // Redis's switch for the image a rewrite starts with: `no` is
    // `aof-preamble none`; `yes` keeps the image `aof-preamble` names.
    kind: Kind::Bool {
        get: |c| c.aof_preamble != AofPreamble::None,
        set: |c, v| match (v, c.aof_preamble) {
            (false, _) => c.aof_preamble = AofPreamble::None,
            (true, AofPreamble::None) => c.aof_preamble = AofPreamble::Native,
            (true, _) => {}
        },
    },
    unsupported: None,
};

/// `proc-title-template`.
pub(super) const PROC_TITLE_TEMPLATE: Param = Param {
    name: "proc-title-template",
    alias: None,
    flags: 0,
    default: "{title} {listen-addr} {server-mode}",
    kind: Kind::Str {
        get: |c| c.ops.inert_value("proc-title-template").to_vec(),
        set: |c, v| {
            if !ops::valid_proc_title_template(v) {
                return Err("template format is invalid or contains unknown variables".into());
            }
            c.ops.set_inert("proc-title-template", v);
            Ok(())
        },
    },
    unsupported: None,
};

/// `oom-score-adj`.
pub(super) const OOM_SCORE_ADJ: Param = Param {
    name: "oom-score-adj",
    alias: None,
    flags: 0,
    default: "no",
    kind: Kind::Str {
        get: |c| c.ops.oom_score_adj.clone().into_bytes(),
        set: |c, v| {
            // Redis's enum, where `relative` is another name of `yes`.
            let word = String::from_utf8_lossy(v).to_ascii_lowercase();
            c.ops.oom_score_adj = match word.as_str() {
                "no" | "yes" | "absolute" => word,
                "relative" => "yes".into(),
                _ => {
                    return Err(
                        "argument(s) must be one of the following: no, yes, relative, absolute"
                            .into(),
                    )
                }
            };
            Ok(())
        },
    },
    unsupported: None,
};

/// `oom-score-adj-values`.
pub(super) const OOM_SCORE_ADJ_VALUES: Param = Param {
    name: "oom-score-adj-values",
    alias: None,
    flags: MULTI_ARG,
    default: "0 200 800",
    kind: Kind::Special {
        get: |c| {
            let [a, b, d] = c.ops.oom_score_adj_values;
            format!("{a} {b} {d}").into_bytes()
        },
        set: |c, args, _| {
            c.ops.oom_score_adj_values = ops::parse_oom_values(args)?;
            Ok(())
        },
    },
    unsupported: None,
};

/// `appenddirname`.
pub(super) const APPENDDIRNAME: Param = Param {
    name: "appenddirname",
    alias: None,
    flags: IMMUTABLE,
    default: "appendonlydir",
    kind: Kind::Str {
        get: |c| c.ops.inert_value("appenddirname").to_vec(),
        set: |c, v| {
            if v.is_empty() {
                return Err("appenddirname can't be empty".into());
            }
            if !is_base_name(v) {
                return Err("appenddirname can't be a path, just a dirname".into());
            }
            c.ops.set_inert("appenddirname", v);
            Ok(())
        },
    },
    unsupported: None,
};

/// `unixsocketperm` (Redis's OCTAL_CONFIG: C's `strtoll(value, &end, 8)`
/// with nothing after the digits, then an unsigned bounds check, 0..0777).
fn parse_octal_perm(v: &[u8]) -> Result<u32, String> {
    let unparsable = || "argument couldn't be parsed as an octal number".to_string();
    if v.is_empty() {
        return Ok(0);
    }
    let mut i = v
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
        .ok_or_else(unparsable)?;
    let negative = v[i] == b'-';
    if v[i] == b'-' || v[i] == b'+' {
        i += 1;
    }
    let digits = &v[i..];
    if digits.is_empty() || !digits.iter().all(|b| (b'0'..=b'7').contains(b)) {
        return Err(unparsable());
    }
    let mut value: i128 = 0;
    for &d in digits {
        value = value * 8 + i128::from(d - b'0');
        if value > i128::from(i64::MAX) {
            return Err(unparsable());
        }
    }
    if negative && value != 0 || value > 0o777 {
        return Err("argument must be between 0 and 777 inclusive".into());
    }
    Ok(value as u32)
}
