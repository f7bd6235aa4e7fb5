//! The ACL file (`aclfile`, docs/security.md "Where users are kept"): one
//! `user <name> <rules>…` line per user. [`parse`] reads a whole file into
//! new users or collects every error, so ACL LOAD changes all or nothing;
//! [`text`] writes the users back as ACL LIST describes them.

use super::{describe, rules, User, Users};

/// The users an ACL file's `content` defines, in file order, or Redis's
/// error text (`ACLLoadFromFile`): every problem found, each naming
/// `filename` and the line, then the "no change" warning. New users and
/// selectors start with the channels `pubsub_all` says.
pub fn parse(content: &[u8], filename: &str, pubsub_all: bool) -> Result<Vec<User>, String> {
    let mut users: Vec<User> = Vec::new();
    let mut errors = String::new();
    for (index, raw) in content.split(|&b| b == b'\n').enumerate() {
        let number = index + 1;
        let line = trim(raw, b" \t\r\n");
        if line.is_empty() {
            continue;
        }
        let words: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        if words[0] != b"user" || words.len() < 2 {
            errors.push_str(&format!(
                "{filename}:{number} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = words[1];
        let shown = String::from_utf8_lossy(name);
        if rules::has_spaces(name) {
            errors.push_str(&format!(
                "'{filename}:{number}: username '{shown}' contains invalid characters. "
            ));
            continue;
        }
        if users.iter().any(|u| u.name == name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{shown}' found on line {number}. "
            ));
            continue;
        }
        let ops = match rules::merge_selector_args(&words[2..]) {
            Ok(ops) => ops,
            Err(_) => {
                errors.push_str(&format!(
                    "{filename}:{number}: Unmatched parenthesis in selector definition."
                ));
                continue;
            }
        };
        let mut user = User::new(name, pubsub_all);
        let mut syntax_error = false;
        for op in &ops {
            let op = trim(op, b"\t\r\n");
            match rules::apply(&mut user, op, pubsub_all) {
                Ok(()) => {}
                Err(e @ rules::RuleError::Unknown) => errors.push_str(&format!(
                    "{filename}:{number}: Error in applying operation '{}': {}. ",
                    String::from_utf8_lossy(op),
                    e.message()
                )),
                // Only the first other error: it may explain the rest.
                Err(e) if !syntax_error => {
                    errors.push_str(&format!("{filename}:{number}: {}. ", e.message()));
                    syntax_error = true;
                }
                Err(_) => {}
            }
        }
        users.push(user);
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        Err(errors)
    }
}

/// The ACL file holding `users`: `user <name> <description>` per user, in
/// ACL LIST's order (Redis's `ACLSaveToFile`).
pub fn text(users: &Users) -> Vec<u8> {
    let mut out = Vec::new();
    for user in users.iter() {
        out.extend_from_slice(&line(user));
        out.push(b'\n');
    }
    out
}

/// `user <name> <description>`: how ACL LIST, the ACL file and CONFIG
/// REWRITE write a user.
pub fn line(user: &User) -> Vec<u8> {
    let mut out = b"user ".to_vec();
    out.extend_from_slice(&user.name);
    out.push(b' ');
    out.extend_from_slice(&describe::user(user));
    out
}

fn trim<'a>(s: &'a [u8], set: &[u8]) -> &'a [u8] {
    let start = s.iter().position(|b| !set.contains(b)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !set.contains(b))
        .map_or(start, |i| i + 1);
    &s[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() {
        crate::command::acl::install_table();
    }

    #[test]
    fn a_saved_file_loads_back_the_same_users() {
        setup();
        let mut users = Users::new();
        users
            .set_user(
                b"app",
                &[
                    b"on",
                    b">pw",
                    b"~app:*",
                    b"&app:*",
                    b"+@all",
                    b"-@dangerous",
                ],
            )
            .expect("rules");
        users
            .set_user(b"ro", &[b"on", b"nopass", b"(%R~x* +get)", b"+info"])
            .expect("rules");
        let saved = text(&users);
        let loaded = parse(&saved, "users.acl", false).expect("parses");
        assert_eq!(loaded.len(), 3);
        for user in &loaded {
            let original = users.get(&user.name).expect("same names");
            assert_eq!(line(user), line(original));
        }
    }

    #[test]
    fn every_bad_line_is_reported_and_nothing_is_returned() {
        setup();
        let content = b"user a on +get\n\n# comment\nuser a on\nuser b +nosuchcommand >x\nuser c ~* allkeys ~y\nfoo\n";
        let err = parse(content, "u.acl", false).expect_err("bad file");
        assert_eq!(
            err,
            "u.acl:3 should start with user keyword followed by the username. \
             WARNING: Duplicate user 'a' found on line 4. \
             u.acl:5: Error in applying operation '+nosuchcommand': Unknown command or category name in ACL. \
             u.acl:6: Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns. \
             u.acl:7 should start with user keyword followed by the username. \
             WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
        );
    }

    #[test]
    fn blank_lines_crlf_and_double_spaces_are_accepted() {
        setup();
        let loaded = parse(b"\r\n  user x  on >p ~k*\r\n\n", "f", true).expect("parses");
        assert_eq!(loaded.len(), 1);
        assert!(loaded[0].enabled);
        assert!(loaded[0].password_ok(b"p"));
        assert!(
            loaded[0].selectors[0].all_channels,
            "acl-pubsub-default allchannels"
        );
    }
}
