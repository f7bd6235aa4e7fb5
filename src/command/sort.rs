//! SORT and SORT_RO, following Redis 7.0's `sort.c`: the elements of a
//! list, set or sorted set, sorted numerically (by their value or by the
//! keys a BY pattern names) or lexicographically (ALPHA), a LIMIT range,
//! GET patterns reading other keys or hash fields, STORE into a list.
//!
//! Redis's rules kept: `BY` without `*` does not sort (a list or sorted set
//! keeps its order, DESC and LIMIT still apply), except a set when storing
//! or inside a script, which is then sorted ALPHA so the result does not
//! depend on the set's internal order; a missing BY key sorts as 0 (or
//! first with ALPHA); equal numeric scores fall back to the elements'
//! bytes; ALPHA compares like C's `strcoll` in the C locale (up to a NUL
//! byte) unless storing, which compares whole binary strings.

use std::cmp::Ordering;

use super::c_str;
use super::{is, parse_int, syntax_error, CmdResult, CommandSpec, Ctx};
use crate::reply::Reply;
use crate::types::list::End;
use crate::types::{List, Value, WRONGTYPE};

/// The SORT family's table.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("sort", "sort", "generic", sort),
    CommandSpec::from_docs("sort_ro", "sort_ro", "generic", sort_ro),
];

fn sort(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    sort_generic(ctx, argv, false)
}

fn sort_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    sort_generic(ctx, argv, true)
}

/// SORT's options, as Redis parses them (left to right, the last wins).
struct Options<'a> {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    store: Option<&'a [u8]>,
    by: Option<&'a [u8]>,
    /// `BY` a pattern without `*`: nothing to sort by.
    dontsort: bool,
    gets: Vec<&'a [u8]>,
}

/// `full_key_access`: the user may read every key (Redis refuses BY with
/// a pattern and GET otherwise, as they read keys no key spec names).
fn parse_options<'a>(
    argv: &[&'a [u8]],
    readonly: bool,
    full_key_access: bool,
) -> Result<Options<'a>, Reply> {
    let mut o = Options {
        desc: false,
        alpha: false,
        limit_start: 0,
        limit_count: -1,
        store: None,
        by: None,
        dontsort: false,
        gets: Vec::new(),
    };
    let mut j = 2;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        let word = argv[j];
        if is(word, "asc") {
            o.desc = false;
        } else if is(word, "desc") {
            o.desc = true;
        } else if is(word, "alpha") {
            o.alpha = true;
        } else if is(word, "limit") && left >= 2 {
            o.limit_start = parse_int(argv[j + 1])?;
            o.limit_count = parse_int(argv[j + 2])?;
            j += 2;
        } else if !readonly && is(word, "store") && left >= 1 {
            o.store = Some(argv[j + 1]);
            j += 1;
        } else if is(word, "by") && left >= 1 {
            o.by = Some(argv[j + 1]);
            o.dontsort = !argv[j + 1].contains(&b'*');
            if !o.dontsort && !full_key_access {
                return Err(Reply::err(
                    "ERR BY option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            j += 1;
        } else if is(word, "get") && left >= 1 {
            if !full_key_access {
                return Err(Reply::err(
                    "ERR GET option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            o.gets.push(argv[j + 1]);
            j += 1;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    Ok(o)
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the
/// first `*` is replaced by the element and the key read (a string), or
/// with `->field` after the `*`, that field of the hash. None when the
/// pattern has no `*`, the key is missing or of another type.
fn lookup_by_pattern(ctx: &mut Ctx, pattern: &[u8], element: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(element.to_vec());
    }
    let star = pattern.iter().position(|&b| b == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&at| at + 2 < after.len());
    let (postfix, field) = match arrow {
        Some(at) => (&after[..at], Some(&after[at + 2..])),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(star + element.len() + postfix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(postfix);
    match (ctx.lookup_read(&key)?, field) {
        (Value::Str(s), None) => Some(s.as_bytes().to_vec()),
        (Value::Hash(h), Some(field)) => h.get(field).map(<[u8]>::to_vec),
        _ => None,
    }
}

/// One element to sort, with what it sorts by.
struct Item {
    element: Vec<u8>,
    score: f64,
    /// ALPHA with BY: the value the pattern found (None: missing).
    by: Option<Vec<u8>>,
}

fn sort_generic(ctx: &mut Ctx, argv: &[&[u8]], readonly: bool) -> CmdResult {
    let full_key_access = super::acl::full_key_read_access(ctx.core, ctx.session, argv);
    let mut o = parse_options(argv, readonly, full_key_access)?;
    let key = argv[1];
    // The elements, in the value's own order (a set's as it iterates).
    let (is_set, len) = match ctx.lookup_read(key) {
        None => (false, 0),
        Some(Value::List(l)) => (false, l.len()),
        Some(Value::Set(s)) => (true, s.len()),
        Some(Value::ZSet(z)) => (false, z.len()),
        Some(_) => return Err(Reply::err(WRONGTYPE)),
    };
    if o.dontsort && is_set && (o.store.is_some() || ctx.in_script) {
        // A set's order is its table's: sorted, so that what is stored
        // or returned to a script does not depend on it.
        o.dontsort = false;
        o.alpha = true;
        o.by = None;
    }
    let n = len as i64;
    let mut start = o.limit_start.clamp(0, n);
    let count = o.limit_count.clamp(-1, n);
    let mut end = if count < 0 { n - 1 } else { start + count - 1 };
    if start >= n {
        start = n - 1;
        end = n - 2;
    }
    if end >= n {
        end = n - 1;
    }
    let elements = collect_elements(ctx, key, &o, start, end);
    if o.dontsort && !is_set {
        // Already the range asked for, in order.
        end -= start;
        start = 0;
    }
    let mut items: Vec<Item> = elements
        .into_iter()
        .map(|element| Item {
            element,
            score: 0.0,
            by: None,
        })
        .collect();
    if !o.dontsort {
        let mut conversion_error = false;
        for item in &mut items {
            let value = match o.by {
                Some(pattern) => match lookup_by_pattern(ctx, pattern, &item.element) {
                    Some(v) => v,
                    None => continue,
                },
                None => item.element.clone(),
            };
            if o.alpha {
                if o.by.is_some() {
                    item.by = Some(value);
                }
            } else {
                match strtod_whole(&value) {
                    Some(score) => item.score = score,
                    None => conversion_error = true,
                }
            }
        }
        let (alpha, by, store) = (o.alpha, o.by.is_some(), o.store.is_some());
        items.sort_by(|a, b| {
            let cmp = compare(a, b, alpha, by, store);
            if o.desc {
                cmp.reverse()
            } else {
                cmp
            }
        });
        if conversion_error {
            return Err(Reply::err(
                "ERR One or more scores can't be converted into double",
            ));
        }
    }
    let range = if end >= start && start >= 0 {
        &items[start as usize..=end as usize]
    } else {
        &items[..0]
    };
    let output_len = range.len() * o.gets.len().max(1);
    let Some(store) = o.store else {
        let mut out = Vec::with_capacity(output_len);
        for item in range {
            if o.gets.is_empty() {
                out.push(Reply::Bulk(item.element.clone()));
            }
            for pattern in &o.gets {
                out.push(match lookup_by_pattern(ctx, pattern, &item.element) {
                    Some(v) => Reply::Bulk(v),
                    None => Reply::Null,
                });
            }
        }
        return Ok(Reply::Array(out));
    };
    let mut list = List::new();
    for item in range {
        if o.gets.is_empty() {
            list.push(End::Tail, &item.element);
        }
        for pattern in &o.gets {
            let value = lookup_by_pattern(ctx, pattern, &item.element).unwrap_or_default();
            list.push(End::Tail, &value);
        }
    }
    if output_len > 0 {
        ctx.set_key(store, Value::List(Box::new(list)), false);
        ctx.notify(crate::core::notify::LIST, "sortstore", store);
        ctx.dirty(output_len as u64);
    } else if ctx.delete_key(store) {
        ctx.dirty(1);
    }
    Ok(Reply::Int(output_len as i64))
}

/// The elements to sort: all of them, or with `dontsort` on a list or a
/// sorted set, just those of `start..=end` in their order (reversed with
/// DESC), as Redis loads them.
fn collect_elements(ctx: &mut Ctx, key: &[u8], o: &Options, start: i64, end: i64) -> Vec<Vec<u8>> {
    // The key was looked up (its hit or miss counted, a miss reported)
    // by `sort_generic`: Redis looks it up once.
    let found = ctx.lookup_read_quiet(key).is_some();
    let stats = &mut ctx.core.stats;
    if found {
        stats.keyspace_hits -= 1;
    } else {
        stats.keyspace_misses -= 1;
    }
    let Some(value) = ctx.core.keyspace.db(ctx.session.db).get(key) else {
        return Vec::new();
    };
    let wanted = if end >= start {
        (end - start + 1) as usize
    } else {
        0
    };
    match value {
        Value::List(l) if o.dontsort => {
            if wanted == 0 {
                return Vec::new();
            }
            let start = start as usize;
            if o.desc {
                let first = l.len() - start - 1;
                (0..wanted)
                    .filter_map(|i| l.get(first - i).map(<[u8]>::to_vec))
                    .collect()
            } else {
                l.range(start, start + wanted - 1)
                    .map(<[u8]>::to_vec)
                    .collect()
            }
        }
        Value::List(l) => l.iter().map(<[u8]>::to_vec).collect(),
        Value::Set(s) => s.iter().map(|m| m.to_vec()).collect(),
        Value::ZSet(z) if o.dontsort => {
            if wanted == 0 {
                return Vec::new();
            }
            let start = start as usize;
            let from = if o.desc { z.len() - 1 - start } else { start };
            z.iter_from(from, o.desc)
                .take(wanted)
                .map(|(m, _)| m.to_vec())
                .collect()
        }
        Value::ZSet(z) => z.iter().map(|(m, _)| m.to_vec()).collect(),
        _ => Vec::new(),
    }
}

/// Redis's `sortCompare` (before DESC reverses it).
fn compare(a: &Item, b: &Item, alpha: bool, by: bool, store: bool) -> Ordering {
    if !alpha {
        return a
            .score
            .partial_cmp(&b.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.element.cmp(&b.element));
    }
    let text = |x: &[u8], y: &[u8]| {
        if store {
            x.cmp(y)
        } else {
            c_str(x).cmp(c_str(y))
        }
    };
    if by {
        match (&a.by, &b.by) {
            (Some(x), Some(y)) => text(x, y),
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
        }
    } else {
        text(&a.element, &b.element)
    }
}

/// C's `strtod` over the whole string as SORT checks it: leading white
/// space skipped, the rest a decimal number (or inf/infinity), nothing
/// after it, no overflow or underflow (ERANGE), not NaN. The empty string
/// converts nothing and is 0, as in Redis.
fn strtod_whole(s: &[u8]) -> Option<f64> {
    if s.is_empty() {
        return Some(0.0);
    }
    let skip = s
        .iter()
        .position(|&b| !matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    let text = std::str::from_utf8(&s[skip..]).ok()?;
    let unsigned = text.trim_start_matches(['+', '-']);
    if unsigned.len() + 1 < text.len() {
        return None; // more than one sign
    }
    let lower = unsigned.to_ascii_lowercase();
    let named = lower == "inf" || lower == "infinity";
    let decimal = !unsigned.is_empty()
        && unsigned
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && unsigned
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_digit() || b == b'.');
    if !named && !decimal {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    if value.is_nan() {
        return None;
    }
    if !named && value.is_infinite() {
        return None; // overflow: ERANGE
    }
    if !named && (value == 0.0 || value.is_subnormal()) {
        // Underflow (ERANGE) unless every digit of the mantissa is 0.
        let mantissa = unsigned.split(['e', 'E']).next().unwrap_or("");
        if mantissa.bytes().any(|b| matches!(b, b'1'..=b'9')) {
            return None;
        }
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::strtod_whole;

    #[test]
    fn strtod_whole_follows_c_strtod_as_sort_checks_it() {
        assert_eq!(strtod_whole(b""), Some(0.0));
        assert_eq!(strtod_whole(b"  12"), Some(12.0));
        assert_eq!(strtod_whole(b"12 "), None);
        assert_eq!(strtod_whole(b"   "), None);
        assert_eq!(strtod_whole(b"-1.5e3"), Some(-1500.0));
        assert_eq!(strtod_whole(b".5"), Some(0.5));
        assert_eq!(strtod_whole(b"inf"), Some(f64::INFINITY));
        assert_eq!(strtod_whole(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(strtod_whole(b"nan"), None);
        assert_eq!(strtod_whole(b"1e400"), None);
        assert_eq!(strtod_whole(b"1e-400"), None);
        assert_eq!(strtod_whole(b"0e-400"), Some(0.0));
        assert_eq!(strtod_whole(b"abc"), None);
        assert_eq!(strtod_whole(b"1e"), None);
        assert_eq!(strtod_whole(b"--1"), None);
    }
}
