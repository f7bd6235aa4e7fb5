//! ACL SETUSER's rule language (Redis's `ACLSetUser` and
//! `ACLSetSelector`): each rule changes a user or its root selector; a
//! rule in parentheses adds a selector.

use super::table::{self, table};
use super::{KeyPattern, Selector, User, ALL, READ, WRITE};

/// Why a rule was refused (Redis's errno values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    /// Unknown command or category (ENOENT).
    Unknown,
    /// Not understood, or a pattern with spaces (EINVAL).
    Syntax,
    /// A key pattern after `allkeys` (EEXIST).
    AfterAllKeys,
    /// A channel pattern after `allchannels` (EISDIR).
    AfterAllChannels,
    /// Removing a password the user does not have (ENODEV).
    NoSuchPassword,
    /// A `#`/`!` hash that is not 64 lower-case hex digits (EBADMSG).
    BadHash,
    /// `+cmd|sub|arg`: a first argument of a subcommand (ECHILD).
    FirstArgOfSubcommand,
}

impl RuleError {
    /// Redis's text (`ACLSetUserStringError`).
    pub fn message(self) -> &'static str {
        match self {
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::AfterAllKeys => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::AfterAllChannels => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// SHA-256 of `password`, lower-case hex (Redis's `ACLHashPassword`).
pub fn hash_password(password: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(password);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn valid_hash(hash: &[u8]) -> bool {
    hash.len() == 64 && hash.iter().all(|&c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether `s` has a space or a NUL (refused in names and patterns).
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&c| c.is_ascii_whitespace() || c == 0x0b || c == 0)
}

fn is(op: &[u8], word: &str) -> bool {
    op.eq_ignore_ascii_case(word.as_bytes())
}

/// Joins the arguments of a selector written over several arguments
/// (`(~x*`, `+get)`) into one (Redis's `ACLMergeSelectorArguments`).
pub fn merge_selector_args(ops: &[&[u8]]) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, &op) in ops.iter().enumerate() {
        if let Some((_, buf)) = open.as_mut() {
            buf.push(b' ');
            buf.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(open.take().expect("open selector").1);
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((i, op.to_vec()));
            continue;
        }
        out.push(op.to_vec());
    }
    if let Some((start, _)) = open {
        return Err(format!(
            "Unmatched parenthesis in acl selector starting at '{}'.",
            String::from_utf8_lossy(ops[start])
        ));
    }
    Ok(out)
}

/// Applies one rule to `user` (Redis's `ACLSetUser`). `pubsub_all` is
/// `acl-pubsub-default`: `reset` and new selectors start from it.
pub fn apply(user: &mut User, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
    if op.is_empty() {
        return Ok(());
    }
    if is(op, "on") {
        user.enabled = true;
    } else if is(op, "off") {
        user.enabled = false;
    } else if is(op, "skip-sanitize-payload") {
        user.sanitize_payload = Some(false);
    } else if is(op, "sanitize-payload") {
        user.sanitize_payload = Some(true);
    } else if is(op, "nopass") {
        user.nopass = true;
        user.passwords.clear();
    } else if is(op, "resetpass") {
        user.nopass = false;
        user.passwords.clear();
    } else if op[0] == b'>' || op[0] == b'#' {
        let hash = if op[0] == b'>' {
            hash_password(&op[1..])
        } else if valid_hash(&op[1..]) {
            String::from_utf8_lossy(&op[1..]).into_owned()
        } else {
            return Err(RuleError::BadHash);
        };
        if !user.passwords.contains(&hash) {
            user.passwords.push(hash);
        }
        user.nopass = false;
    } else if op[0] == b'<' || op[0] == b'!' {
        let hash = if op[0] == b'<' {
            hash_password(&op[1..])
        } else if valid_hash(&op[1..]) {
            String::from_utf8_lossy(&op[1..]).into_owned()
        } else {
            return Err(RuleError::BadHash);
        };
        let Some(at) = user.passwords.iter().position(|p| *p == hash) else {
            return Err(RuleError::NoSuchPassword);
        };
        user.passwords.remove(at);
    } else if op[0] == b'(' && op[op.len() - 1] == b')' {
        let inner = &op[1..op.len() - 1];
        let args = crate::resp::split_args(inner).ok_or(RuleError::Syntax)?;
        let mut selector = Selector::new(pubsub_all);
        for arg in &args {
            apply_selector(&mut selector, arg)?;
        }
        user.selectors.push(selector);
    } else if is(op, "clearselectors") {
        user.selectors.truncate(1);
    } else if is(op, "reset") {
        for step in ["resetpass", "resetkeys", "resetchannels"] {
            apply(user, step.as_bytes(), pubsub_all)?;
        }
        if pubsub_all {
            apply(user, b"allchannels", pubsub_all)?;
        }
        for step in ["off", "sanitize-payload", "clearselectors", "-@all"] {
            apply(user, step.as_bytes(), pubsub_all)?;
        }
    } else {
        apply_selector(&mut user.selectors[0], op)?;
    }
    Ok(())
}

/// Applies one selector rule (Redis's `ACLSetSelector`).
pub fn apply_selector(selector: &mut Selector, op: &[u8]) -> Result<(), RuleError> {
    if is(op, "allkeys") || op == b"~*" {
        selector.all_keys = true;
        selector.patterns.clear();
    } else if is(op, "resetkeys") {
        selector.all_keys = false;
        selector.patterns.clear();
    } else if is(op, "allchannels") || op == b"&*" {
        selector.all_channels = true;
        selector.channels.clear();
    } else if is(op, "resetchannels") {
        selector.all_channels = false;
        selector.channels.clear();
    } else if is(op, "allcommands") || is(op, "+@all") {
        selector.bits.iter_mut().for_each(|w| *w = u64::MAX);
        selector.all_commands = true;
        selector.future_commands = true;
        selector.first_args.clear();
    } else if is(op, "nocommands") || is(op, "-@all") {
        selector.bits.iter_mut().for_each(|w| *w = 0);
        selector.all_commands = false;
        selector.future_commands = false;
        selector.first_args.clear();
    } else if op[0] == b'~' || op[0] == b'%' {
        if selector.all_keys {
            return Err(RuleError::AfterAllKeys);
        }
        let (perms, pattern) = key_pattern(op)?;
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match selector.patterns.iter_mut().find(|p| p.pattern == pattern) {
            Some(existing) => existing.perms |= perms,
            None => selector.patterns.push(KeyPattern {
                pattern: pattern.to_vec(),
                perms,
            }),
        }
    } else if op[0] == b'&' {
        if selector.all_channels {
            return Err(RuleError::AfterAllChannels);
        }
        let pattern = &op[1..];
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        if !selector.channels.iter().any(|c| c == pattern) {
            selector.channels.push(pattern.to_vec());
        }
    } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
        allow_command(selector, &op[1..])?;
    } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
        let id = table().id(&op[1..]).ok_or(RuleError::Unknown)?;
        selector.change(id, false);
    } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
        let cat = table::category(&op[2..]).ok_or(RuleError::Unknown)?;
        selector.change_category(cat, op[0] == b'+');
    } else {
        return Err(RuleError::Syntax);
    }
    Ok(())
}

/// `~pattern` (read and write) or `%R~`/`%W~`/`%RW~pattern`.
fn key_pattern(op: &[u8]) -> Result<(u8, &[u8]), RuleError> {
    if op[0] == b'~' {
        return Ok((ALL, &op[1..]));
    }
    let mut perms = 0;
    let mut at = 1;
    while at < op.len() {
        match op[at].to_ascii_uppercase() {
            b'R' if perms & READ == 0 => perms |= READ,
            b'W' if perms & WRITE == 0 => perms |= WRITE,
            b'~' => {
                at += 1;
                break;
            }
            _ => return Err(RuleError::Syntax),
        }
        at += 1;
    }
    if perms == 0 {
        // `%~x`: a pattern that allows nothing.
        return Err(RuleError::Syntax);
    }
    // Redis accepts `%R` with no `~` as an empty pattern.
    Ok((perms, &op[at.min(op.len())..]))
}

/// `+cmd`, `+container|sub` or `+cmd|first-arg`.
fn allow_command(selector: &mut Selector, name: &[u8]) -> Result<(), RuleError> {
    let t = table();
    let Some(bar) = name.iter().rposition(|&c| c == b'|') else {
        let id = t.id(name).ok_or(RuleError::Unknown)?;
        selector.change(id, true);
        return Ok(());
    };
    let (command, sub) = (&name[..bar], &name[bar + 1..]);
    let id = t.id(command).ok_or(RuleError::Unknown)?;
    if t.entries[id].parent.is_some() {
        return Err(RuleError::FirstArgOfSubcommand);
    }
    if sub.is_empty() {
        return Err(RuleError::Syntax);
    }
    if !t.entries[id].children.is_empty() {
        let sub_id = t.id(name).ok_or(RuleError::Unknown)?;
        selector.change(sub_id, true);
    } else {
        let list = selector.first_args.entry(id).or_default();
        if !list.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
            list.push(sub.to_vec());
        }
    }
    Ok(())
}
