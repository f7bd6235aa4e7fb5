//! `notify-keyspace-events`: the classes of keyspace notifications
//! (Redis's `notify.c` flags), their parsing from the configuration's
//! letters and their rendering as CONFIG GET shows them.

/// `K`: publish on `__keyspace@<db>__:<key>` (message: the event).
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>` (message: the key).
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME, …).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: a key expired.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: a key was evicted (`maxmemory`).
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: a read found no key (left out of `A`, as in Redis).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events (accepted and shown; hozon has no modules).
pub const MODULE: u32 = 1 << 13;
/// `n`: a key was created.
pub const NEW: u32 = 1 << 14;
/// `A`: every class but `m` and `n`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The classes named by `letters` (Redis's `keyspaceEventsStringToFlags`);
/// None on a letter that names none.
pub fn parse_classes(letters: &[u8]) -> Option<u32> {
    let mut flags = 0;
    for letter in letters {
        flags |= match letter {
            b'A' => ALL,
            b'g' => GENERIC,
            b'$' => STRING,
            b'l' => LIST,
            b's' => SET,
            b'h' => HASH,
            b'z' => ZSET,
            b'x' => EXPIRED,
            b'e' => EVICTED,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b't' => STREAM,
            b'm' => KEY_MISS,
            b'd' => MODULE,
            b'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The letters CONFIG GET shows for `flags` (Redis's
/// `keyspaceEventsFlagsToString`: `A` when all of it is set, otherwise the
/// classes in a fixed order, then `K`, `E` and `m`).
pub fn render_classes(flags: u32) -> Vec<u8> {
    let mut out = Vec::new();
    if flags & ALL == ALL {
        out.push(b'A');
    } else {
        for (class, letter) in [
            (GENERIC, b'g'),
            (STRING, b'$'),
            (LIST, b'l'),
            (SET, b's'),
            (HASH, b'h'),
            (ZSET, b'z'),
            (EXPIRED, b'x'),
            (EVICTED, b'e'),
            (STREAM, b't'),
            (MODULE, b'd'),
            (NEW, b'n'),
        ] {
            if flags & class != 0 {
                out.push(letter);
            }
        }
    }
    for (class, letter) in [(KEYSPACE, b'K'), (KEYEVENT, b'E'), (KEY_MISS, b'm')] {
        if flags & class != 0 {
            out.push(letter);
        }
    }
    out
}

/// Redis's error for a letter that names no class.
pub const INVALID_CLASS: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_read_back_as_redis_prints_them() {
        for (set, shown) in [
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("KA", "AK"),
            ("EA", "AE"),
            ("AKE", "AKE"),
            ("KEA", "AKE"),
            ("", ""),
            ("En", "nE"),
            ("mK", "Km"),
            ("Am", "Am"),
            ("ggxg", "gx"),
            ("dn", "dn"),
        ] {
            let flags = parse_classes(set.as_bytes()).unwrap();
            assert_eq!(render_classes(flags), shown.as_bytes(), "{set}");
        }
        assert_eq!(parse_classes(b"KEw"), None);
        assert_eq!(parse_classes(b"a"), None);
    }

    #[test]
    fn config_file_and_rewrite() {
        use crate::config::Config;
        let cwd = std::path::Path::new("/srv");
        let mut config = Config::default();
        config
            .apply_text(b"notify-keyspace-events KEA\n")
            .expect("a valid line");
        let refused = Config::default()
            .apply_text(b"notify-keyspace-events KEw\n")
            .unwrap_err();
        assert!(refused.to_string().contains(INVALID_CLASS), "{refused}");
        assert_eq!(config.notify_keyspace_events, ALL | KEYSPACE | KEYEVENT);
        // Redis writes the value quoted (sdscatrepr), and only when set.
        let text = crate::config::rewrite_content(b"", &config, None, &[], cwd);
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("\nnotify-keyspace-events \"AKE\"\n"),
            "{text}"
        );
        let old = b"notify-keyspace-events Ex\n";
        config.notify_keyspace_events = 0;
        let text = crate::config::rewrite_content(old, &config, None, &[], cwd);
        let text = String::from_utf8(text).unwrap();
        assert!(text.starts_with("notify-keyspace-events \"\"\n"), "{text}");
    }
}
