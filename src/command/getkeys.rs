//! Which arguments of a command are keys: COMMAND GETKEYS's rules, shared
//! with the tools (`hozon-inspect`, `hozon-repair`) through [`keys_of`].
//!
//! Keys are found through the command's key specs from the generated
//! metadata ([`super::docs`]), as Redis's `getKeysUsingKeySpecs` does, with
//! the key flags of the `variable_flags` commands (SET, BITFIELD) computed
//! from the arguments as Redis's own key finders do. A command that fails
//! its arity, or whose arguments do not fit a key spec (a count past the
//! end, a keyword missing where a key must follow), has no keys: COMMAND
//! GETKEYS reports why ([`KeysError`]).

use super::docs::{self, BeginSearch, Doc, FindKeys};
use super::{is, lookup, CommandSpec};
use crate::reply::Reply;

/// Why COMMAND GETKEYS finds no keys for a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeysError {
    /// No such command or subcommand.
    UnknownCommand,
    /// The command takes no key arguments.
    NoKeyArguments,
    /// The arguments do not satisfy the command's arity.
    WrongArity,
    /// The arguments do not name the keys the command's key specs ask for.
    InvalidArguments,
}

impl KeysError {
    /// COMMAND GETKEYS's error reply, in Redis's words.
    pub fn reply(self) -> Reply {
        Reply::err(match self {
            KeysError::UnknownCommand => "ERR Invalid command specified",
            KeysError::NoKeyArguments => "ERR The command has no key arguments",
            KeysError::WrongArity => "ERR Invalid number of arguments specified for command",
            KeysError::InvalidArguments => "ERR Invalid arguments specified for command",
        })
    }
}

/// The key arguments of `argv` as COMMAND GETKEYS reports them: the
/// indexes into `argv` (`argv[0]` is the command name), in the order the
/// key specs list them; empty where GETKEYS answers with an error (unknown
/// command or subcommand, no key arguments, wrong arity, arguments that do
/// not fit the key specs). The command is looked up by its real name
/// (rename-command is not applied), and a container command by its
/// subcommand (`XGROUP CREATE key …`).
pub fn keys_of(argv: &[&[u8]]) -> Vec<usize> {
    let Some(&name) = argv.first() else {
        return Vec::new();
    };
    let Some(base) = lookup(name) else {
        return Vec::new();
    };
    let found = if base.subcommands.is_empty() || argv.len() < 2 {
        keys_of_spec(base, base.name, argv)
    } else {
        match base.subcommand(argv[1]) {
            Some(sub) => keys_of_spec(sub, &format!("{}|{}", base.name, sub.name), argv),
            None => Err(KeysError::UnknownCommand),
        }
    };
    found
        .map(|keys| keys.into_iter().map(|(pos, _)| pos).collect())
        .unwrap_or_default()
}

/// The keys of `argv` for the resolved command `spec`, whose full name
/// (`get`, `xgroup|create`) is `full_name`: (argument index, key-spec flag
/// bits, see [`docs::KEY_FLAG_NAMES`]) pairs, or GETKEYS's error.
pub fn keys_of_spec(
    spec: &CommandSpec,
    full_name: &str,
    argv: &[&[u8]],
) -> Result<Vec<(usize, u16)>, KeysError> {
    let doc = docs::lookup(full_name);
    let has_keys = doc.is_some_and(|d| {
        d.getkeys_proc || d.key_specs.iter().any(|k| k.flags & docs::KEY_NOT_KEY == 0)
    });
    let Some(doc) = doc.filter(|_| has_keys) else {
        return Err(KeysError::NoKeyArguments);
    };
    if !spec.arity_ok(argv.len()) {
        return Err(KeysError::WrongArity);
    }
    let mut keys = if doc.name == "sort" {
        // Its STORE key can be anywhere: Redis asks `sortGetKeys`.
        sort_keys(doc, argv)
    } else if doc.name == "migrate" {
        // Its KEYS spec is incomplete: Redis asks `migrateGetKeys`.
        migrate_keys(doc, argv)
    } else if doc.name == "sort_ro" {
        // Its BY/GET spec names no key: the sorted key alone.
        vec![(1, doc.key_specs[0].flags)]
    } else {
        keys_from_specs(doc, argv).unwrap_or_default()
    };
    if doc
        .key_specs
        .iter()
        .any(|k| k.flags & docs::KEY_VARIABLE_FLAGS != 0)
    {
        // Redis asks the command's own key finder, whose flags depend on
        // the arguments.
        if let (Some(flags), Some(first)) = (variable_key_flags(doc.name, argv), keys.first_mut()) {
            first.1 = flags;
        }
    }
    if keys.is_empty() && doc.extra_flags & docs::EXTRA_NO_MANDATORY_KEYS == 0 {
        return Err(KeysError::InvalidArguments);
    }
    Ok(keys)
}

/// SORT's keys as Redis's `sortGetKeys` finds them: the sorted key, and
/// the argument after the last STORE (LIMIT's two arguments and BY's and
/// GET's one are skipped), with the flags of SORT's first and third key
/// specs.
fn sort_keys(doc: &Doc, argv: &[&[u8]]) -> Vec<(usize, u16)> {
    let flags = |i: usize| doc.key_specs.get(i).map_or(0, |k| k.flags);
    let mut keys = vec![(1, flags(0))];
    let mut store = None;
    let mut i = 2;
    while i < argv.len() {
        if is(argv[i], "limit") {
            i += 2;
        } else if is(argv[i], "get") || is(argv[i], "by") {
            i += 1;
        } else if is(argv[i], "store") && i + 1 < argv.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    keys.extend(store.map(|at| (at, flags(2))));
    keys
}

/// MIGRATE's keys as Redis's `migrateGetKeys` finds them: the key
/// argument, or what follows KEYS (none when the key argument is not
/// empty then), the options' values skipped on the way.
fn migrate_keys(doc: &Doc, argv: &[&[u8]]) -> Vec<(usize, u16)> {
    let flags = doc.key_specs.first().map_or(0, |k| k.flags);
    let (mut first, mut num) = (3, 1);
    let mut i = 6;
    while i < argv.len() {
        if is(argv[i], "keys") {
            if argv[3].is_empty() {
                (first, num) = (i + 1, argv.len() - i - 1);
            } else {
                num = 0;
            }
            break;
        }
        if is(argv[i], "auth") {
            i += 1;
        } else if is(argv[i], "auth2") {
            i += 2;
        }
        i += 1;
    }
    (first..first + num).map(|pos| (pos, flags)).collect()
}

/// Finds the keys of a full command through its key specs (Redis's
/// `getKeysUsingKeySpecs`). Returns (argument index, key flags) pairs, or
/// `None` when a spec does not fit the arguments.
fn keys_from_specs(doc: &Doc, argv: &[&[u8]]) -> Option<Vec<(usize, u16)>> {
    let argc = argv.len() as i64;
    let mut keys = Vec::new();
    for spec in doc.key_specs {
        if spec.flags & docs::KEY_NOT_KEY != 0 {
            continue;
        }
        let mut first: i64 = match spec.begin {
            BeginSearch::Index(pos) => i64::from(pos),
            BeginSearch::Keyword(word, startfrom) => {
                let startfrom = i64::from(startfrom);
                let start = if startfrom > 0 {
                    startfrom
                } else {
                    argc + startfrom
                };
                let end = if startfrom > 0 { argc - 1 } else { 1 };
                let mut found = 0;
                let mut i = start;
                while i != end {
                    if i >= argc || i < 1 {
                        break;
                    }
                    if is(argv[i as usize], word) {
                        found = i + 1;
                        break;
                    }
                    i = if start <= end { i + 1 } else { i - 1 };
                }
                if found == 0 {
                    continue;
                }
                found
            }
            BeginSearch::Unknown => return None,
        };
        let (last, step) = match spec.find {
            FindKeys::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let lastkey = i64::from(lastkey);
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / i64::from(limit) + lastkey)
                };
                (last, i64::from(keystep))
            }
            FindKeys::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                let idx = first + i64::from(keynumidx);
                if i64::from(keynumidx) >= argc || idx >= argc {
                    return None;
                }
                let numkeys =
                    crate::types::num::parse_i64(argv[idx as usize]).filter(|&n| n >= 0)?;
                let first_key = first + i64::from(firstkey);
                // Keys are counted from `first_key`; the bounds checks
                // below use it as the start.
                first = first_key;
                (first_key + numkeys - 1, i64::from(keystep))
            }
            FindKeys::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        keys_range(&mut keys, first, last, step, argc, spec.flags);
        if spec.flags & docs::KEY_INCOMPLETE != 0 {
            return None;
        }
    }
    Some(keys)
}

fn keys_range(
    keys: &mut Vec<(usize, u16)>,
    first: i64,
    last: i64,
    step: i64,
    argc: i64,
    flags: u16,
) {
    let mut i = first;
    while i <= last && step > 0 {
        if i >= 0 && i < argc {
            keys.push((i as usize, flags));
        }
        i += step;
    }
}

/// The key flags of commands whose key spec says `variable_flags`, as
/// Redis's `setGetKeys` and `bitfieldGetKeys` compute them.
fn variable_key_flags(name: &str, argv: &[&[u8]]) -> Option<u16> {
    let bit = |n: &str| {
        1u16 << docs::KEY_FLAG_NAMES
            .iter()
            .position(|f| *f == n)
            .expect("known key flag")
    };
    match name {
        "set" => Some(if argv.iter().skip(3).any(|a| is(a, "get")) {
            bit("RW") | bit("access") | bit("update")
        } else {
            bit("OW") | bit("update")
        }),
        "bitfield" => {
            let mut readonly = true;
            let mut i = 2;
            while i < argv.len() {
                let remaining = argv.len() - i - 1;
                if is(argv[i], "get") && remaining >= 2 {
                    i += 3;
                } else if (is(argv[i], "set") || is(argv[i], "incrby")) && remaining >= 3 {
                    readonly = false;
                    break;
                } else if is(argv[i], "overflow") && remaining >= 1 {
                    i += 2;
                } else {
                    readonly = false;
                    break;
                }
            }
            Some(if readonly {
                bit("RO") | bit("access")
            } else {
                bit("RW") | bit("access") | bit("update")
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::keys_of;

    fn keys(words: &[&str]) -> Vec<usize> {
        let argv: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        keys_of(&argv)
    }

    #[test]
    fn keys_follow_the_key_specs() {
        assert_eq!(keys(&["SET", "k", "v"]), [1]);
        assert_eq!(keys(&["mset", "a", "1", "b", "2"]), [1, 3]);
        assert_eq!(keys(&["DEL", "a", "b", "c"]), [1, 2, 3]);
        assert_eq!(keys(&["EVAL", "s", "2", "x", "y", "arg"]), [3, 4]);
        assert_eq!(keys(&["EVAL", "s", "0"]), Vec::<usize>::new());
        assert_eq!(
            keys(&["ZUNIONSTORE", "d", "2", "s1", "s2", "WEIGHTS", "1", "2"]),
            [1, 3, 4]
        );
        assert_eq!(keys(&["XGROUP", "CREATE", "st", "g", "$"]), [2]);
        assert_eq!(
            keys(&["XREAD", "COUNT", "1", "STREAMS", "a", "b", "0", "0"]),
            [4, 5]
        );
        assert_eq!(keys(&["LMPOP", "2", "a", "b", "LEFT"]), [2, 3]);
        // What COMMAND GETKEYS refuses has no keys.
        for bad in [
            &["SELECT", "1"][..],
            &["NOSUCHCOMMAND", "x"],
            &["EVAL"],
            &["EVAL", "s", "99", "k"],
            &["ZUNIONSTORE", "d"],
            &["GET"],
            &["XGROUP", "NOSUCH", "st"],
            &[],
        ] {
            assert!(keys(bad).is_empty(), "{bad:?}");
        }
    }
}
