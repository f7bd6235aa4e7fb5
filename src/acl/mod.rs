//! Access control lists as Redis 7.0 has them (docs/security.md, "ACL"):
//! users, each with flags, password hashes and selectors; a selector
//! allows commands (a bitmap over [`table`]'s ids, plus allowed first
//! arguments), key patterns with read/write permissions and channel
//! patterns. A command runs when one of the user's selectors allows it
//! with every key and channel it names.

pub mod describe;
pub mod file;
pub mod rules;
pub mod table;

use std::collections::{BTreeMap, VecDeque};

use crate::glob;

/// A key pattern's permission: the key may be read.
pub const READ: u8 = 1;
/// A key pattern's permission: the key may be written.
pub const WRITE: u8 = 2;
/// Both permissions (`~pattern`).
pub const ALL: u8 = READ | WRITE;

/// A key pattern with its permissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    /// Glob pattern.
    pub pattern: Vec<u8>,
    /// [`READ`], [`WRITE`] or [`ALL`].
    pub perms: u8,
}

/// One set of permissions (the user's root selector, or one in
/// parentheses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// Any key (`allkeys`, `~*`).
    pub all_keys: bool,
    /// Any channel (`allchannels`, `&*`).
    pub all_channels: bool,
    /// Every command, without looking at the bitmap (cleared by any `-`).
    pub all_commands: bool,
    /// Redis's reserved bit: `+@all` was the last all-or-nothing rule, so
    /// the description starts from `+@all`.
    pub future_commands: bool,
    /// Allowed command ids.
    pub bits: Vec<u64>,
    /// Allowed first arguments of otherwise refused commands, by id.
    pub first_args: BTreeMap<usize, Vec<Vec<u8>>>,
    /// Key patterns, in the order added.
    pub patterns: Vec<KeyPattern>,
    /// Channel patterns, in the order added.
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    /// An empty selector: nothing allowed; channels as `acl-pubsub-default`
    /// says.
    pub fn new(all_channels: bool) -> Selector {
        Selector {
            all_keys: false,
            all_channels,
            all_commands: false,
            future_commands: false,
            bits: vec![0; table::table().len().div_ceil(64)],
            first_args: BTreeMap::new(),
            patterns: Vec::new(),
            channels: Vec::new(),
        }
    }

    /// Whether command `id`'s bit is set.
    pub fn allows(&self, id: usize) -> bool {
        self.bits[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.bits[id / 64] |= 1 << (id % 64);
        } else {
            self.bits[id / 64] &= !(1 << (id % 64));
            self.all_commands = false;
        }
    }

    /// Allows or refuses command `id` and its subcommands (Redis's
    /// `ACLChangeSelectorPerm`); its allowed first arguments are dropped.
    fn change(&mut self, id: usize, on: bool) {
        self.set_bit(id, on);
        self.first_args.remove(&id);
        for &child in &table::table().entries[id].children {
            self.set_bit(child, on);
        }
    }

    /// Applies `on` to every command in category `cat` (and to their
    /// subcommands).
    fn change_category(&mut self, cat: u32, on: bool) {
        let entries = &table::table().entries;
        for (id, entry) in entries.iter().enumerate() {
            if entry.categories & cat != 0 {
                self.change(id, on);
            }
        }
    }

    /// Whether `key` may be used with `perms` (Redis's
    /// `ACLSelectorCheckKey`).
    pub fn key_allowed(&self, key: &[u8], perms: u8) -> bool {
        self.all_keys
            || self
                .patterns
                .iter()
                .any(|p| p.perms & perms == perms && glob::matches(&p.pattern, key, false))
    }

    /// Whether `channel` (a pattern when `is_pattern`, matched literally)
    /// may be used.
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| {
                if is_pattern {
                    p == channel
                } else {
                    glob::matches(p, channel, false)
                }
            })
    }
}

/// A user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Its name.
    pub name: Vec<u8>,
    /// `on` (may authenticate) or `off`.
    pub enabled: bool,
    /// Any password authenticates.
    pub nopass: bool,
    /// `sanitize-payload` (Some(true)), `skip-sanitize-payload`
    /// (Some(false)) or neither.
    pub sanitize_payload: Option<bool>,
    /// SHA-256 hashes of the passwords, lower-case hex, in the order added.
    pub passwords: Vec<String>,
    /// The root selector first, then the others.
    pub selectors: Vec<Selector>,
}

impl User {
    /// A new user as Redis creates one: off, no password, nothing allowed.
    pub fn new(name: &[u8], pubsub_all: bool) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize_payload: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(pubsub_all)],
        }
    }

    /// Whether the user may run anything on any key and channel (the
    /// check can be skipped).
    pub fn unrestricted(&self) -> bool {
        let root = &self.selectors[0];
        root.all_commands && root.all_keys && root.all_channels
    }

    /// Whether `password` is one of the user's (constant time in the
    /// password's content).
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let hashed = rules::hash_password(password);
        let mut found = false;
        for p in &self.passwords {
            found |= constant_time_eq(p.as_bytes(), hashed.as_bytes());
        }
        found
    }
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let len = a.len().max(b.len());
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..len {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

/// Why a command was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    /// The command (Redis's `ACL_DENIED_CMD`).
    Command,
    /// A key, at this argument index.
    Key(usize),
    /// A channel, at this argument index.
    Channel(usize),
}

impl Denied {
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(i) => (2, i),
            Denied::Channel(i) => (3, i),
        }
    }
}

/// What a command names that ACLs check: its id, the keys with the
/// permissions they need, the channels.
#[derive(Debug, Default)]
pub struct Request<'a> {
    /// The command's id in [`table`].
    pub id: usize,
    /// The index of the argument a first-argument rule matches (1, or 2
    /// for a subcommand).
    pub first_arg: Option<&'a [u8]>,
    /// (argument index, key, [`READ`]/[`WRITE`] bits needed).
    pub keys: Vec<(usize, &'a [u8], u8)>,
    /// (argument index, channel, is a pattern).
    pub channels: Vec<(usize, &'a [u8], bool)>,
}

impl Selector {
    /// Whether this selector alone allows `request`.
    pub fn check(&self, request: &Request) -> Result<(), Denied> {
        let entry = &table::table().entries[request.id];
        if !self.all_commands && !entry.no_auth && !self.allows(request.id) {
            let allowed = request.first_arg.is_some_and(|arg| {
                self.first_args
                    .get(&request.id)
                    .is_some_and(|list| list.iter().any(|a| a.eq_ignore_ascii_case(arg)))
            });
            if !allowed {
                return Err(Denied::Command);
            }
        }
        if !self.all_keys {
            for &(index, key, perms) in &request.keys {
                if !self.key_allowed(key, perms) {
                    return Err(Denied::Key(index));
                }
            }
        }
        if !self.all_channels {
            for &(index, channel, is_pattern) in &request.channels {
                if !self.channel_allowed(channel, is_pattern) {
                    return Err(Denied::Channel(index));
                }
            }
        }
        Ok(())
    }
}

impl User {
    /// Whether one of the user's selectors allows `request`; otherwise the
    /// most relevant refusal (Redis's `ACLCheckAllUserCommandPerm`: a
    /// channel before a key before the command, the later argument first).
    pub fn check(&self, request: &Request) -> Result<(), Denied> {
        let mut worst = Denied::Command;
        for selector in &self.selectors {
            match selector.check(request) {
                Ok(()) => return Ok(()),
                Err(denied) if denied.rank() > worst.rank() => worst = denied,
                Err(_) => {}
            }
        }
        Err(worst)
    }
}

/// Why an ACL LOG entry was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A command the user may not run.
    Command,
    /// A key it may not use.
    Key,
    /// A channel it may not use.
    Channel,
    /// A failed AUTH or HELLO AUTH.
    Auth,
}

impl Reason {
    /// ACL LOG's `reason`.
    pub fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where a refused command came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// A client's command.
    Toplevel,
    /// A command queued in MULTI, or run by EXEC.
    Multi,
    /// A script's `redis.call`.
    Lua,
}

impl Context {
    /// ACL LOG's `context`.
    pub fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One ACL LOG entry (Redis's `ACLLogEntry`).
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// How many times it happened (alike refusals within a minute merge).
    pub count: u64,
    /// Why.
    pub reason: Reason,
    /// Where.
    pub context: Context,
    /// The command's full name, the key, the channel, or AUTH's name.
    pub object: Vec<u8>,
    /// The user (for AUTH, the name tried).
    pub username: Vec<u8>,
    /// Unix ms of the last occurrence.
    pub updated_ms: i64,
    /// The client's CLIENT LIST line at the last occurrence.
    pub client_info: String,
}

/// Refusals this close in time (ms) merge into one entry.
const LOG_GROUPING_MS: i64 = 60_000;

/// Every user, by name (ACL LIST's order), the `default` user always
/// among them.
#[derive(Debug, Clone)]
pub struct Users {
    users: BTreeMap<Vec<u8>, User>,
    /// New selectors start with every channel (`acl-pubsub-default
    /// allchannels`).
    pub pubsub_all: bool,
    /// A change number, bumped on every change.
    pub version: u64,
    default_unrestricted: bool,
    /// ACL LOG, newest first.
    log: VecDeque<LogEntry>,
}

impl Default for Users {
    fn default() -> Users {
        Users::new()
    }
}

impl Users {
    /// The `default` user alone, allowed everything without a password.
    pub fn new() -> Users {
        let mut users = Users {
            users: BTreeMap::new(),
            pubsub_all: false,
            version: 0,
            default_unrestricted: true,
            log: VecDeque::new(),
        };
        let mut default = User::new(b"default", false);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            rules::apply(&mut default, op.as_bytes(), false).expect("default user's rules");
        }
        users.users.insert(b"default".to_vec(), default);
        users
    }

    /// The user called `name`.
    pub fn get(&self, name: &[u8]) -> Option<&User> {
        self.users.get(name)
    }

    /// Whether user `name` may run anything (the check is skipped): the
    /// default user's answer is kept, so the common case costs a compare.
    /// Whether `name` is the default user and it may run everything (one
    /// comparison: the check every command makes first).
    pub fn unrestricted_default(&self, name: &[u8]) -> bool {
        name == b"default" && self.default_unrestricted
    }

    pub fn unrestricted(&self, name: &[u8]) -> bool {
        if name == b"default" {
            return self.default_unrestricted;
        }
        self.users.get(name).is_some_and(User::unrestricted)
    }

    /// Whether a new connection is authenticated at once: the default
    /// user is on and `nopass` (Redis's `authRequired`).
    pub fn default_needs_no_auth(&self) -> bool {
        let default = self.default_user();
        default.nopass && default.enabled
    }

    /// The default user.
    pub fn default_user(&self) -> &User {
        self.users
            .get(&b"default"[..])
            .expect("the default user exists")
    }

    /// Every user, by name.
    pub fn iter(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    /// Applies ACL SETUSER's rules to user `name` (created if new); on an
    /// error nothing changes. Returns the old user, if any.
    pub fn set_user(&mut self, name: &[u8], ops: &[&[u8]]) -> Result<Option<User>, String> {
        let merged = rules::merge_selector_args(ops)?;
        let old = self.users.get(name).cloned();
        let mut user = old
            .clone()
            .unwrap_or_else(|| User::new(name, self.pubsub_all));
        for op in &merged {
            rules::apply(&mut user, op, self.pubsub_all).map_err(|e| {
                format!(
                    "Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(op),
                    e.message()
                )
            })?;
        }
        self.users.insert(name.to_vec(), user);
        self.changed();
        Ok(old)
    }

    /// Replaces every user by `users` (ACL LOAD; Redis's
    /// `ACLLoadFromFile` on success): without a `default` among them, the
    /// stock default user. ACL LOG is kept. Returns the names of the
    /// users replaced other than `default`, whose connections Redis
    /// closes.
    pub fn replace_all(&mut self, users: Vec<User>) -> Vec<Vec<u8>> {
        let old: Vec<Vec<u8>> = self
            .users
            .keys()
            .filter(|n| n.as_slice() != b"default")
            .cloned()
            .collect();
        let stock = Users::new().users;
        self.users = users.into_iter().map(|u| (u.name.clone(), u)).collect();
        if !self.users.contains_key(&b"default"[..]) {
            self.users.extend(stock);
        }
        self.changed();
        old
    }

    /// A `user` line of the configuration file (Redis's
    /// `ACLLoadConfiguredUsers`): a new user, or for `default` the
    /// default user reset first, given `rules` in order.
    pub fn define(&mut self, name: &[u8], rules: &[Vec<u8>]) -> Result<(), String> {
        let mut user = User::new(name, self.pubsub_all);
        if name == b"default" {
            user = self.default_user().clone();
            rules::apply(&mut user, b"reset", self.pubsub_all).expect("reset");
        }
        for op in rules {
            rules::apply(&mut user, op, self.pubsub_all).map_err(|e| {
                format!(
                    "Error loading ACL rule '{}' for the user named '{}': {}",
                    String::from_utf8_lossy(op),
                    String::from_utf8_lossy(name),
                    e.message()
                )
            })?;
        }
        self.users.insert(name.to_vec(), user);
        self.changed();
        Ok(())
    }

    /// Removes user `name`; true when it existed.
    pub fn remove(&mut self, name: &[u8]) -> bool {
        let removed = self.users.remove(name).is_some();
        if removed {
            self.changed();
        }
        removed
    }

    /// `requirepass`: the default user's only password, or `nopass`
    /// (Redis's `ACLUpdateDefaultUserPassword`).
    pub fn set_default_password(&mut self, password: Option<&[u8]>) {
        let default = self
            .users
            .get_mut(&b"default"[..])
            .expect("the default user exists");
        rules::apply(default, b"resetpass", false).expect("resetpass");
        match password {
            Some(p) => {
                let mut op = b">".to_vec();
                op.extend_from_slice(p);
                rules::apply(default, &op, false).expect("a password");
            }
            None => rules::apply(default, b"nopass", false).expect("nopass"),
        }
        self.changed();
    }

    /// Adds a refusal to ACL LOG (Redis's `addACLLogEntry`): an entry of
    /// the same reason, context, object and user updated within the last
    /// minute, among the 10 newest, counts it and moves to the front;
    /// otherwise a new entry, the oldest dropped beyond `max_len`.
    pub fn log(&mut self, entry: LogEntry, max_len: usize) {
        let alike = |e: &LogEntry| {
            e.reason == entry.reason
                && e.context == entry.context
                && (e.updated_ms - entry.updated_ms).abs() <= LOG_GROUPING_MS
                && e.object == entry.object
                && e.username == entry.username
        };
        if let Some(at) = self.log.iter().take(10).position(alike) {
            let mut found = self.log.remove(at).expect("found");
            found.count += 1;
            found.updated_ms = entry.updated_ms;
            found.client_info = entry.client_info;
            self.log.push_front(found);
            return;
        }
        self.log.push_front(entry);
        self.log.truncate(max_len);
    }

    /// ACL LOG's entries, newest first.
    pub fn log_entries(&self) -> impl Iterator<Item = &LogEntry> {
        self.log.iter()
    }

    /// ACL LOG RESET.
    pub fn reset_log(&mut self) {
        self.log.clear();
    }

    fn changed(&mut self) {
        self.version += 1;
        self.default_unrestricted = self.default_user().unrestricted();
    }

    /// Whether `name`/`password` authenticate (Redis's
    /// `ACLCheckUserCredentials`): the user exists, is on, and the
    /// password is one of its own or it is `nopass`.
    pub fn credentials_ok(&self, name: &[u8], password: &[u8]) -> bool {
        self.users
            .get(name)
            .is_some_and(|u| u.enabled && u.password_ok(password))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_with_table() {
        crate::command::acl::install_table();
    }

    fn user_with(rules: &[&str]) -> User {
        user_with_table();
        let mut user = User::new(b"u", false);
        for r in rules {
            rules::apply(&mut user, r.as_bytes(), false).expect(r);
        }
        user
    }

    /// A user rebuilt from its own description is the same user: what
    /// ACL LIST shows (and the ACL file will store) loses nothing.
    #[test]
    fn descriptions_recreate_the_user() {
        let cases: &[&[&str]] = &[
            &["+@all"],
            &["+@read", "-@hash", "+@write", "-del"],
            &["+@all", "-@dangerous", "+config|get", "-client|kill"],
            &[
                "-@all",
                "+select|0",
                "+select|1",
                "+get",
                "~a*",
                "%R~b*",
                "%W~c*",
            ],
            &["on", ">pw", "&ch*", "(~x* +set)", "(%R~y +@read -@list)"],
            &[
                "+client",
                "-client|list",
                "+@geo",
                "-@slow",
                "nopass",
                "skip-sanitize-payload",
            ],
        ];
        for rules in cases {
            let user = user_with(rules);
            let text = String::from_utf8(describe::user(&user)).expect("utf-8");
            let ops: Vec<Vec<u8>> = text.split(' ').map(|w| w.as_bytes().to_vec()).collect();
            let refs: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
            let mut users = Users::new();
            users.set_user(b"u", &refs).expect("the description parses");
            let rebuilt = users.get(b"u").expect("created");
            assert_eq!(rebuilt.selectors.len(), user.selectors.len(), "{text}");
            for (a, b) in rebuilt.selectors.iter().zip(&user.selectors) {
                assert_eq!(a.bits, b.bits, "{rules:?} → {text}");
                assert_eq!(a.patterns, b.patterns, "{text}");
                assert_eq!(a.channels, b.channels, "{text}");
                assert_eq!(a.first_args, b.first_args, "{text}");
            }
            assert_eq!(rebuilt.passwords, user.passwords);
            assert_eq!(describe::user(rebuilt), describe::user(&user));
        }
    }

    #[test]
    fn checks_follow_the_selectors() {
        user_with_table();
        let t = table::table();
        let get = t.id_of("get").expect("get");
        let set = t.id_of("set").expect("set");
        let user = user_with(&["+get", "%R~r*", "(+set ~w*)"]);
        let req = |id, key: &'static [u8], perms| Request {
            id,
            first_arg: Some(key),
            keys: vec![(1, key, perms)],
            channels: Vec::new(),
        };
        assert_eq!(user.check(&req(get, b"r1", READ)), Ok(()));
        assert_eq!(user.check(&req(get, b"w1", READ)), Err(Denied::Key(1)));
        assert_eq!(user.check(&req(set, b"w1", WRITE)), Ok(()));
        assert_eq!(user.check(&req(set, b"r1", WRITE)), Err(Denied::Key(1)));
        let del = t.id_of("del").expect("del");
        assert_eq!(user.check(&req(del, b"w1", WRITE)), Err(Denied::Command));
        assert!(user_with(&["+@all", "~*", "&*"]).unrestricted());
        assert!(!user_with(&["+@all", "-get", "~*", "&*"]).unrestricted());
    }

    #[test]
    fn passwords_are_sha256_hex() {
        assert_eq!(
            rules::hash_password(b"pw"),
            "30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4"
        );
        let user = user_with(&[">pw"]);
        assert!(user.password_ok(b"pw"));
        assert!(!user.password_ok(b"pW"));
    }
}
