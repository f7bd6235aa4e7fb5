//! The commands and keys inside a byte range of an AOF (what a dropped
//! region held), keys found by [`crate::command::keys_of`].

use std::ops::Range;

use super::*;
use crate::tools::repair::model::Keys;

/// Complete commands readable in `range` (after damage, at the next line
/// start where one parses) and the keys they touch.
pub(super) fn commands_and_keys(data: &[u8], range: Range<usize>) -> (u64, Keys) {
    let mut count = 0;
    let mut keys = Keys::default();
    each_command(data, range, &mut |argv| {
        let name = argv[0];
        if !["select", "multi", "exec"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
        {
            count += 1;
        }
        for_each_key(argv, &mut |k| keys.add(k));
    });
    (count, keys)
}

pub(super) fn last_select_in(data: &[u8], range: Range<usize>) -> Option<usize> {
    let mut db = None;
    each_command(data, range, &mut |argv| {
        if argv[0].eq_ignore_ascii_case(b"select") && argv.len() == 2 {
            if let Some(n) = std::str::from_utf8(argv[1])
                .ok()
                .and_then(|t| t.parse().ok())
            {
                db = Some(n);
            }
        }
    });
    db
}

/// Calls `f` with every complete command readable inside `range`.
fn each_command(data: &[u8], range: Range<usize>, f: &mut dyn FnMut(&[&[u8]])) {
    let region = &data[..range.end];
    let mut pos = range.start;
    while pos < range.end {
        if region[pos] == b'#' {
            if let Some(Ok((_, next))) = read_line(region, pos) {
                pos = next;
                continue;
            }
        }
        match aof::command_at(region, pos) {
            CommandAt::Complete { args, end } => {
                let argv: Vec<&[u8]> = args.iter().map(|r| &region[r.clone()]).collect();
                f(&argv);
                pos = end;
            }
            _ => {
                // Skip to the next line start that begins a command.
                let mut next = None;
                let mut from = pos + 1;
                while from < range.end {
                    let Some(nl) = region[from..].iter().position(|&b| b == b'\n') else {
                        break;
                    };
                    let at = from + nl + 1;
                    if at < range.end && (region[at] == b'*' || region[at] == b'#') {
                        next = Some(at);
                        break;
                    }
                    from = at;
                }
                match next {
                    Some(n) => pos = n,
                    None => break,
                }
            }
        }
    }
}

/// Calls `f` with each key argument of `argv`, as COMMAND GETKEYS finds
/// them ([`crate::command::keys_of`]; nothing for a command GETKEYS would
/// refuse).
fn for_each_key(argv: &[&[u8]], f: &mut dyn FnMut(&[u8])) {
    for pos in crate::command::keys_of(argv) {
        f(argv[pos]);
    }
}
