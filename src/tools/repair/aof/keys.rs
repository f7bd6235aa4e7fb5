//! The commands and keys inside a byte range of an AOF (what a dropped
//! region held). Moved unchanged from tools/repair/aof.rs, where
//! `for_each_key` was the repair tool's key-argument extractor.

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

/// Calls `f` with each key argument of `argv`: the command table's key
/// positions (a container command's subcommand's), and the key counts of
/// EVAL/FCALL and the Z*STORE family read from the arguments.
fn for_each_key(argv: &[&[u8]], f: &mut dyn FnMut(&[u8])) {
    let name = argv[0];
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    let numkeys = |at: usize| -> usize {
        argv.get(at - 1)
            .and_then(|a| std::str::from_utf8(a).ok())
            .and_then(|t| t.parse::<usize>().ok())
            .unwrap_or(0)
            .min(argv.len().saturating_sub(at))
    };
    if [
        "eval",
        "evalsha",
        "eval_ro",
        "evalsha_ro",
        "fcall",
        "fcall_ro",
    ]
    .iter()
    .any(|n| is(n))
    {
        argv[3.min(argv.len())..3.min(argv.len()) + numkeys(3)]
            .iter()
            .for_each(|k| f(k));
        return;
    }
    if ["zunionstore", "zinterstore", "zdiffstore"]
        .iter()
        .any(|n| is(n))
    {
        if let Some(dest) = argv.get(1) {
            f(dest);
        }
        argv[3.min(argv.len())..3.min(argv.len()) + numkeys(3)]
            .iter()
            .for_each(|k| f(k));
        return;
    }
    let Some(mut spec) = crate::command::lookup(name) else {
        return;
    };
    if !spec.subcommands.is_empty() {
        let Some(sub) = argv.get(1).and_then(|s| {
            spec.subcommands
                .iter()
                .find(|c| c.name.as_bytes().eq_ignore_ascii_case(s))
        }) else {
            return;
        };
        spec = sub;
    }
    if spec.first_key <= 0 {
        return;
    }
    let argc = argv.len() as i64;
    let last = if spec.last_key < 0 {
        argc + i64::from(spec.last_key)
    } else {
        i64::from(spec.last_key)
    };
    let step = i64::from(spec.key_step.max(1));
    let mut i = i64::from(spec.first_key);
    while i <= last && i < argc {
        f(argv[i as usize]);
        i += step;
    }
}
