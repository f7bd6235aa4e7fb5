//! The command layer: the table, argument parsing helpers, and the context
//! a command executes in.
//!
//! One file per command family. Each exports `COMMANDS: &[CommandSpec]`;
//! [`table`] gathers them. A handler parses its arguments with Redis's exact
//! errors, acts on the keyspace through [`Ctx`], and returns a [`Reply`]
//! (`Err(reply)` is an error reply, so `?` works on argument parsing).
//!
//! Every write decides its **logged effect** here (the command the AOF will
//! contain): by default a command that made the keyspace dirty is logged as
//! received; a handler that must log something else (absolute expiry times,
//! SPOP as SREM, …) calls [`Ctx::log`] instead.

pub(crate) mod acl;
pub mod bitops;
pub mod ctx;
pub(crate) mod debug;
pub mod docs;
mod docs_data;
pub mod dump;
pub mod functions;
pub mod geo;
pub mod getkeys;
pub mod hash;
pub mod hyperloglog;
pub mod keys;
pub mod list;
pub mod lolwut;
pub mod migrate;
pub mod monitor;
pub mod multi;
pub(crate) mod observe;
pub mod persistence;
pub mod pubsub;
mod replicaof;
mod replication;
pub mod scripting;
pub mod server;
pub mod set;
mod sort;
pub mod stream;
pub mod stream_group;
pub mod string;
pub mod zset;

#[cfg(test)]
mod random_tests;
#[cfg(test)]
mod test_support;

use std::collections::HashMap;
use std::sync::OnceLock;

pub use crate::core::clients;
pub use clients::{BlockKind, BlockRequest, BlockState};
pub use ctx::{Ctx, Effect, Host, NullHost, Session};
pub use getkeys::keys_of;
pub use server::ShutdownOptions;

use crate::reply::Reply;

/// What a handler returns: `Err` carries an error reply.
pub type CmdResult = Result<Reply, Reply>;

/// A command implementation. `argv[0]` is the command name as sent.
pub type Handler = fn(&mut Ctx, &[&[u8]]) -> CmdResult;

/// Command flags, as COMMAND INFO reports them.
pub mod flags {
    /// May modify the keyspace.
    pub const WRITE: u32 = 1 << 0;
    /// Never modifies the keyspace.
    pub const READONLY: u32 = 1 << 1;
    /// May grow memory (refused under OOM).
    pub const DENYOOM: u32 = 1 << 2;
    /// Administrative command.
    pub const ADMIN: u32 = 1 << 3;
    /// Pub/Sub related.
    pub const PUBSUB: u32 = 1 << 4;
    /// Not allowed from scripts.
    pub const NOSCRIPT: u32 = 1 << 5;
    /// May block the client.
    pub const BLOCKING: u32 = 1 << 6;
    /// Allowed while loading.
    pub const LOADING: u32 = 1 << 7;
    /// Allowed on a stale replica.
    pub const STALE: u32 = 1 << 8;
    /// Not shown in MONITOR.
    pub const SKIP_MONITOR: u32 = 1 << 9;
    /// Not counted in slowlog.
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    /// O(1) or O(log N).
    pub const FAST: u32 = 1 << 11;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 12;
    /// May replicate even if read-only.
    pub const MAY_REPLICATE: u32 = 1 << 13;
    /// Not allowed inside MULTI.
    pub const NO_MULTI: u32 = 1 << 14;
    /// Allowed while a script is busy.
    pub const ALLOW_BUSY: u32 = 1 << 15;
    /// Key arguments are not fixed (see COMMAND GETKEYS).
    pub const MOVABLE_KEYS: u32 = 1 << 16;
    /// May delete (lazily expire) keys it was not given: SCAN, RANDOMKEY.
    /// Their expiry DELs are propagated bare, never in MULTI/EXEC (Redis
    /// 7.0's `CMD_TOUCHES_ARBITRARY_KEYS`, which COMMAND INFO hides).
    pub const TOUCHES_ARBITRARY_KEYS: u32 = 1 << 17;
    /// Not marked with `write`/`readonly` in Redis's table.
    pub const NONE: u32 = 0;
}

/// One command (or subcommand) of the table.
#[derive(Debug)]
pub struct CommandSpec {
    /// Lower-case name (`get`, or the subcommand name such as `getname`).
    pub name: &'static str,
    /// Redis arity: exact count when positive, minimum count when negative
    /// (counting the command name, and the subcommand name for
    /// subcommands).
    pub arity: i32,
    /// Bit set of [`flags`].
    pub flags: u32,
    /// Index of the first key argument (0 when none).
    pub first_key: i32,
    /// Index of the last key argument (-1 = last argument).
    pub last_key: i32,
    /// Step between key arguments.
    pub key_step: i32,
    /// Command group as COMMAND DOCS reports it (`string`, `generic`, …).
    pub group: &'static str,
    /// The implementation (unused for a container of subcommands).
    pub handler: Handler,
    /// Subcommands (CONFIG GET, CLIENT LIST, …); empty for plain commands.
    pub subcommands: &'static [CommandSpec],
    /// The id in ACL's command table (`acl::table`: the metadata's order),
    /// fixed at compile time so the per-command ACL check looks up no name.
    pub acl_id: u16,
}

impl CommandSpec {
    /// A plain command (no subcommands) of `group` whose arity, flags and
    /// key positions are the reference server's, taken at compile time
    /// from the generated metadata ([`docs`]) under its full name
    /// (`get`, `client|list`); a name the metadata lacks fails the build.
    /// Every family table builds its specs this way, so none restates
    /// Redis's metadata by hand.
    pub const fn from_docs(
        name: &'static str,
        full_name: &'static str,
        group: &'static str,
        handler: Handler,
    ) -> CommandSpec {
        let acl_id = docs::index_of(full_name);
        let doc = docs::find(full_name);
        let (first_key, last_key, key_step) = doc.keys;
        CommandSpec {
            name,
            arity: doc.arity,
            flags: doc.flags,
            first_key,
            last_key,
            key_step,
            group,
            handler,
            subcommands: &[],
            acl_id: acl_id as u16,
        }
    }

    /// The same spec as a container of `subcommands` (CONFIG, OBJECT, …).
    pub const fn with_subcommands(self, subcommands: &'static [CommandSpec]) -> CommandSpec {
        CommandSpec {
            subcommands,
            ..self
        }
    }

    /// The same spec with [`flags`] bits that hozon's own checks rely on
    /// but the generated metadata cannot carry, because COMMAND INFO (which
    /// it is captured from) does not print them: `may_replicate`,
    /// `touches_arbitrary_keys`. Each use
    /// says why, and the docs test `the_table_agrees_with_the_generated_metadata`
    /// lists them all. A bit COMMAND INFO prints does not belong here: it
    /// would make the reply differ from Redis's.
    pub const fn with_extra_flags(self, extra: u32) -> CommandSpec {
        CommandSpec {
            flags: self.flags | extra,
            ..self
        }
    }

    /// True when `flag` is set.
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// True when the command may modify the keyspace.
    pub fn is_write(&self) -> bool {
        self.has(flags::WRITE)
    }

    /// True when `argc` arguments satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// The subcommand named `name` (case-insensitive).
    pub fn subcommand(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        self.subcommands
            .iter()
            .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
    }
}

/// A handler for container commands reached without a subcommand; never
/// called because dispatch resolves subcommands first.
pub fn container_handler(_: &mut Ctx, _: &[&[u8]]) -> CmdResult {
    Err(Reply::err(
        "ERR container command called without a subcommand",
    ))
}

/// Every command family's table.
fn families() -> [&'static [CommandSpec]; 27] {
    [
        acl::COMMANDS,
        debug::COMMANDS,
        monitor::COMMANDS,
        lolwut::COMMANDS,
        migrate::COMMANDS,
        bitops::COMMANDS,
        geo::COMMANDS,
        dump::COMMANDS,
        persistence::COMMANDS,
        stream::COMMANDS,
        stream_group::COMMANDS,
        multi::COMMANDS,
        pubsub::COMMANDS,
        keys::COMMANDS,
        string::COMMANDS,
        hyperloglog::COMMANDS,
        list::COMMANDS,
        hash::COMMANDS,
        set::COMMANDS,
        zset::COMMANDS,
        server::COMMANDS,
        scripting::COMMANDS,
        functions::COMMANDS,
        replication::COMMANDS,
        replicaof::COMMANDS,
        sort::COMMANDS,
        observe::COMMANDS,
    ]
}

/// The command table type: lower-case name to spec.
pub type CommandTable = HashMap<&'static str, &'static CommandSpec, foldhash::fast::FixedState>;

/// The command table, keyed by lower-case name.
///
/// Looked up once per command: hashed with foldhash rather than SipHash (the
/// keys are fixed names, so flooding resistance buys nothing here).
pub fn table() -> &'static CommandTable {
    static TABLE: OnceLock<CommandTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut map = CommandTable::default();
        for family in families() {
            for spec in family {
                let previous = map.insert(spec.name, spec);
                assert!(previous.is_none(), "command {} registered twice", spec.name);
            }
        }
        map
    })
}

/// The command of `argv` and the spec that runs it (the same, or the
/// subcommand for a container); the unknown-command, unknown-subcommand
/// or arity error otherwise (Redis's checks, in its order).
pub fn resolve(argv: &[&[u8]]) -> Result<(&'static CommandSpec, &'static CommandSpec), Reply> {
    let Some(name) = argv.first() else {
        return Err(Reply::err("ERR empty command"));
    };
    let Some(spec) = lookup(name) else {
        return Err(unknown_command_error(argv));
    };
    if spec.subcommands.is_empty() {
        return if spec.arity_ok(argv.len()) {
            Ok((spec, spec))
        } else {
            Err(arity_error(spec.name))
        };
    }
    if argv.len() < 2 {
        return Err(arity_error(spec.name));
    }
    match spec.subcommand(argv[1]) {
        Some(sub) if sub.arity_ok(argv.len()) => Ok((spec, sub)),
        Some(sub) => Err(arity_error(&format!("{}|{}", spec.name, sub.name))),
        None => Err(unknown_subcommand_error(spec.name, argv[1])),
    }
}

/// The name Redis reports for a resolved command: `get`, or
/// `client|list` for a subcommand.
pub fn full_name(top: &CommandSpec, spec: &CommandSpec) -> String {
    if std::ptr::eq(top, spec) {
        top.name.to_string()
    } else {
        format!("{}|{}", top.name, spec.name)
    }
}

/// An open-addressing index over the command names, hashed
/// case-insensitively straight from the request's bytes: a lookup makes no
/// lower-cased copy and no UTF-8 check (it runs once per command served,
/// replayed or checked, millions of times a second in a file walk).
struct NameIndex {
    slots: Box<[Option<&'static CommandSpec>]>,
    mask: usize,
}

/// A hash of the name with the ASCII case bit set in every byte, so `GET`,
/// `get` and `GeT` hash alike (other bytes that alias are told apart by the
/// final comparison). It reads the name a word at a time: its first and
/// last eight bytes (overlapping when shorter; bytes in the middle of a name
/// over 16 bytes only reach the comparison), mixed with its length.
fn name_hash(name: &[u8]) -> usize {
    const CASE: u64 = 0x2020_2020_2020_2020;
    let n = name.len();
    let word = |at: usize| u64::from_le_bytes(name[at..at + 8].try_into().expect("8 bytes"));
    let half = |at: usize| {
        u64::from(u32::from_le_bytes(
            name[at..at + 4].try_into().expect("4 bytes"),
        ))
    };
    let (first, last) = match n {
        8.. => (word(0), word(n - 8)),
        4..=7 => (half(0), half(n - 4)),
        1..=3 => (
            u64::from(name[0]) | u64::from(name[n / 2]) << 8 | u64::from(name[n - 1]) << 16,
            0,
        ),
        0 => (0, 0),
    };
    let h = ((first | CASE) ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (last | CASE).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    (h ^ (h >> 31)) as usize
}

fn name_index() -> &'static NameIndex {
    static INDEX: OnceLock<NameIndex> = OnceLock::new();
    INDEX.get_or_init(|| {
        let specs = table();
        let size = (specs.len() * 4).next_power_of_two();
        let mut slots = vec![None; size].into_boxed_slice();
        let mask = size - 1;
        for spec in specs.values() {
            let mut i = name_hash(spec.name.as_bytes()) & mask;
            while slots[i].is_some() {
                i = (i + 1) & mask;
            }
            slots[i] = Some(*spec);
        }
        NameIndex { slots, mask }
    })
}

/// Finds a command by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.len() > 32 {
        return None;
    }
    let index = name_index();
    let mut i = name_hash(name) & index.mask;
    loop {
        match index.slots[i] {
            None => return None,
            Some(spec) if spec.name.as_bytes().eq_ignore_ascii_case(name) => return Some(spec),
            Some(_) => i = (i + 1) & index.mask,
        }
    }
}

// ---------------------------------------------------------------------------
// Argument parsing helpers with Redis's exact error strings.

/// `ERR syntax error`.
pub const SYNTAX_ERR: &str = "ERR syntax error";
/// `ERR value is not an integer or out of range`.
pub const NOT_INT_ERR: &str = "ERR value is not an integer or out of range";
/// `ERR value is not a valid float`.
pub const NOT_FLOAT_ERR: &str = "ERR value is not a valid float";
/// `ERR no such key`.
pub const NO_SUCH_KEY_ERR: &str = "ERR no such key";

/// Parses an integer argument (`ERR value is not an integer or out of range`).
pub fn parse_int(arg: &[u8]) -> Result<i64, Reply> {
    crate::types::num::parse_i64(arg).ok_or(Reply::err(NOT_INT_ERR))
}

/// The argument as C's string functions see it: up to its first NUL.
pub(crate) fn c_str(arg: &[u8]) -> &[u8] {
    arg.iter()
        .position(|&b| b == 0)
        .map_or(arg, |end| &arg[..end])
}

/// True when `arg` equals `word`, ignoring ASCII case.
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// `ERR syntax error` as an `Err`.
pub fn syntax_error<T>() -> Result<T, Reply> {
    Err(Reply::err(SYNTAX_ERR))
}

/// The arity error for `name` (`ERR wrong number of arguments for 'get' command`).
pub fn arity_error(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// The unknown-command error, exactly as Redis 7.0 words it: the name cut
/// at 128 bytes, then arguments quoted while the list is under 128 bytes.
pub fn unknown_command_error(argv: &[&[u8]]) -> Reply {
    let mut args: Vec<u8> = Vec::new();
    for arg in argv.iter().skip(1) {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        args.push(b'\'');
        args.extend_from_slice(&arg[..arg.len().min(room)]);
        args.extend_from_slice(b"' ");
    }
    let mut msg = Vec::from(&b"ERR unknown command '"[..]);
    msg.extend_from_slice(&argv[0][..argv[0].len().min(128)]);
    msg.extend_from_slice(b"', with args beginning with: ");
    msg.extend_from_slice(&args);
    Reply::error(error_text(&msg))
}

/// Turns bytes into error text: `\r` and `\n` become spaces (they would
/// break the RESP line), other bytes are kept (invalid UTF-8 lossily).
pub fn error_text(bytes: &[u8]) -> String {
    let cleaned: Vec<u8> = bytes
        .iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect();
    String::from_utf8_lossy(&cleaned).into_owned()
}

/// Redis's addReplySubcommandSyntaxError: a known subcommand with a
/// wrong number of arguments where the command checks it itself.
pub fn subcommand_syntax_error(argv: &[&[u8]]) -> Reply {
    let sub = error_text(argv.get(1).copied().unwrap_or_default());
    Reply::error(format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {} HELP.",
        String::from_utf8_lossy(argv[0]).to_ascii_uppercase()
    ))
}

/// The unknown-subcommand error (`ERR unknown subcommand 'x'. Try CONFIG HELP.`).
pub fn unknown_subcommand_error(command: &str, sub: &[u8]) -> Reply {
    let mut msg = Vec::from(&b"ERR unknown subcommand '"[..]);
    msg.extend_from_slice(&sub[..sub.len().min(128)]);
    msg.extend_from_slice(b"'. Try ");
    msg.extend_from_slice(command.to_ascii_uppercase().as_bytes());
    msg.extend_from_slice(b" HELP.");
    Reply::error(error_text(&msg))
}

#[cfg(test)]
mod lookup_tests {
    use super::{lookup, name_hash, name_index, table};

    #[test]
    fn the_name_hash_spreads_the_commands() {
        // Every name is found within a few probes of its home slot (the
        // index is at most a quarter full).
        let index = name_index();
        for name in table().keys() {
            let home = name_hash(name.as_bytes()) & index.mask;
            let probes = (0..index.slots.len())
                .position(|k| index.slots[(home + k) & index.mask].is_some_and(|s| s.name == *name))
                .expect("in the index");
            assert!(probes <= 4, "{name}: {probes} probes");
        }
    }

    #[test]
    fn every_command_is_found_in_any_case_and_nothing_else_is() {
        for (name, spec) in table() {
            let upper = name.to_ascii_uppercase();
            let mixed: String = name
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if i % 2 == 0 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect();
            for form in [name.to_string(), upper, mixed] {
                let found = lookup(form.as_bytes()).map(|s| s.name);
                assert_eq!(found, Some(spec.name), "{form}");
            }
            // One byte more, one byte less, and a byte whose case bit
            // aliases ('_' and DEL, '@' and '`') find nothing.
            let longer = format!("{name}x");
            assert!(
                lookup(longer.as_bytes()).is_none_or(|s| s.name == longer),
                "{longer}"
            );
            let shorter = &name[..name.len() - 1];
            assert!(
                lookup(shorter.as_bytes()).is_none_or(|s| s.name == shorter),
                "{shorter}"
            );
            let aliased: Vec<u8> = name
                .bytes()
                .map(|b| if b == b'_' { 0x7f } else { b })
                .collect();
            if aliased != name.as_bytes() {
                assert!(lookup(&aliased).is_none(), "{name} with DEL for '_'");
            }
        }
        assert!(lookup(b"").is_none());
        assert!(lookup(&[b'a'; 33]).is_none());
        assert!(lookup(b"g\xffet").is_none());
    }
}
