//! Users described as rules that recreate them (ACL LIST, ACL GETUSER,
//! the ACL file), as Redis's `ACLDescribeUser` writes them: the command
//! rules start from `+@all` or `-@all`, then the categories that fit best,
//! then single commands for what remains.

use super::table::{table, Table};
use super::{KeyPattern, Selector, User, ALL, READ};

/// A key pattern as a rule: `~p`, `%R~p` or `%W~p`.
pub fn key_pattern(p: &KeyPattern) -> Vec<u8> {
    let mut out = match p.perms {
        ALL => b"~".to_vec(),
        READ => b"%R~".to_vec(),
        _ => b"%W~".to_vec(),
    };
    out.extend_from_slice(&p.pattern);
    out
}

/// The command rules of `selector` (ACL GETUSER's `commands`).
pub fn command_rules(selector: &Selector) -> String {
    let t = table();
    let additive = !selector.future_commands;
    let mut rules: Vec<String> = Vec::new();
    let mut fake = Selector::new(false);
    if additive {
        rules.push("-@all".into());
        super::rules::apply_selector(&mut fake, b"-@all").expect("-@all");
    } else {
        rules.push("+@all".into());
        super::rules::apply_selector(&mut fake, b"+@all").expect("+@all");
    }
    let mut temp = Selector::new(false);
    temp.bits.clone_from(&selector.bits);
    let names = t.categories;
    let mut applied = vec![false; names.len()];
    loop {
        let mut best = None;
        let (mut min_diff, mut max_same) = (usize::MAX, 0usize);
        for (j, &done) in applied.iter().enumerate() {
            if done {
                continue;
            }
            let (on, off) = count(t, &temp, 1 << j);
            let (diff, same) = if additive { (off, on) } else { (on, off) };
            if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                best = Some(j);
                min_diff = diff;
                max_same = same;
            }
        }
        let Some(j) = best else { break };
        fake.change_category(1 << j, additive);
        temp.change_category(1 << j, !additive);
        rules.push(format!("{}@{}", if additive { '+' } else { '-' }, names[j]));
        applied[j] = true;
    }
    for (id, entry) in t.entries.iter().enumerate() {
        let user_bit = selector.allows(id);
        if user_bit != fake.allows(id) {
            rules.push(format!(
                "{}{}",
                if user_bit { '+' } else { '-' },
                entry.name
            ));
            fake.change(id, user_bit);
        }
        if !user_bit {
            for arg in selector.first_args.get(&id).into_iter().flatten() {
                rules.push(format!("+{}|{}", entry.name, String::from_utf8_lossy(arg)));
            }
        }
    }
    debug_assert_eq!(fake.bits, selector.bits, "the rules recreate the bitmap");
    rules.join(" ")
}

/// (commands in category `cat` whose bit is set, those whose bit is not).
fn count(t: &Table, selector: &Selector, cat: u32) -> (usize, usize) {
    let mut on = 0;
    let mut off = 0;
    for (id, entry) in t.entries.iter().enumerate() {
        if entry.categories & cat != 0 {
            if selector.allows(id) {
                on += 1;
            } else {
                off += 1;
            }
        }
    }
    (on, off)
}

/// A selector as rules: keys, channels, commands.
pub fn selector(selector: &Selector) -> Vec<u8> {
    let mut out = Vec::new();
    if selector.all_keys {
        out.extend_from_slice(b"~* ");
    } else {
        for p in &selector.patterns {
            out.extend_from_slice(&key_pattern(p));
            out.push(b' ');
        }
    }
    if selector.all_channels {
        out.extend_from_slice(b"&* ");
    } else {
        out.extend_from_slice(b"resetchannels ");
        for c in &selector.channels {
            out.push(b'&');
            out.extend_from_slice(c);
            out.push(b' ');
        }
    }
    out.extend_from_slice(command_rules(selector).as_bytes());
    out
}

/// The flags ACL GETUSER lists, in Redis's order.
pub fn flags(user: &User) -> Vec<&'static str> {
    let mut out = vec![if user.enabled { "on" } else { "off" }];
    if user.nopass {
        out.push("nopass");
    }
    match user.sanitize_payload {
        Some(false) => out.push("skip-sanitize-payload"),
        Some(true) => out.push("sanitize-payload"),
        None => {}
    }
    out
}

/// A user as ACL LIST shows it, after `user <name> `.
pub fn user(user: &User) -> Vec<u8> {
    let mut out = Vec::new();
    for flag in flags(user) {
        out.extend_from_slice(flag.as_bytes());
        out.push(b' ');
    }
    for p in &user.passwords {
        out.push(b'#');
        out.extend_from_slice(p.as_bytes());
        out.push(b' ');
    }
    for (i, s) in user.selectors.iter().enumerate() {
        if i == 0 {
            out.extend_from_slice(&selector(s));
        } else {
            out.extend_from_slice(b" (");
            out.extend_from_slice(&selector(s));
            out.push(b')');
        }
    }
    out
}
