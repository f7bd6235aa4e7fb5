//! The elements of one RDB value, handed over as the encoding stores them
//! without building a hozon [`Value`](crate::types::Value): the fast path
//! of `hozon-inspect export --json`.
//!
//! [`visit_elements`] reads exactly what [`read_value`](super::read_value)
//! reads for the value types it covers, with the same cursor checks and
//! the same compact-encoding decoders (so it fails where `read_value`
//! fails), but leaves the value-level rules to its caller: an empty
//! collection (not loaded), duplicate set members, hash fields or sorted
//! set members, and NaN scores (all damage). A caller that finds one of
//! those, or gets [`Declined`], decodes the value with
//! [`decode_value`](super::decode_value) instead, which reports it exactly.

use super::{kind, listpack, parse_double, ziplist, zipmap, Cursor, Item};
use crate::rdb::intset;

/// One element of a value, in file order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Element<'a> {
    /// A string: a string value, a list item, a set member, a hash field
    /// or value, a sorted set member.
    Bytes(&'a [u8]),
    /// An integer the encoding stores in binary (a listpack, ziplist or
    /// intset entry): its decimal text is the element.
    Int(i64),
    /// A sorted set member's score (after the member).
    Score(f64),
}

/// [`visit_elements`] does not cover this value, or the value is damaged:
/// decode it with [`decode_value`](super::decode_value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declined;

/// Hands the elements of the value of type `value_type` at the start of
/// `data` to `f` in file order, and returns the bytes the value took.
///
/// What `f` receives, by type: a string value, one [`Element::Bytes`]; a
/// list or set, one element per item or member; a hash, field and value
/// alternately; a sorted set, each member followed by its
/// [`Element::Score`]. Covered: every string, list, set, sorted set and
/// hash encoding except hashes with field TTLs; streams and modules are
/// [`Declined`]. `f` may have received elements before an error is found:
/// on [`Declined`] the caller drops what it got.
pub fn visit_elements<F: FnMut(Element<'_>)>(
    data: &[u8],
    value_type: u8,
    f: &mut F,
) -> Result<usize, Declined> {
    let mut c = Cursor::new(data, 0);
    walk(&mut c, value_type, f).ok_or(Declined)?;
    Ok(c.pos)
}

#[inline(always)]
fn item<F: FnMut(Element<'_>)>(f: &mut F, item: Item<'_>) {
    match item {
        Item::Str(s) => f(Element::Bytes(s)),
        Item::Int(n) => f(Element::Int(n)),
    }
}

/// Every item of a listpack (`is_listpack`) or ziplist.
fn compact<F: FnMut(Element<'_>)>(raw: &[u8], is_listpack: bool, f: &mut F) -> Option<usize> {
    let mut n = 0usize;
    if is_listpack {
        for i in listpack::entries(raw).ok()? {
            item(f, i.ok()?);
            n += 1;
        }
    } else {
        for i in ziplist::entries(raw).ok()? {
            item(f, i.ok()?);
            n += 1;
        }
    }
    Some(n)
}

/// The items of a listpack or ziplist as (member, score) pairs.
fn compact_zset<F: FnMut(Element<'_>)>(raw: &[u8], is_listpack: bool, f: &mut F) -> Option<()> {
    let mut member_next = true;
    let mut pair = |i: Item<'_>| -> Option<()> {
        if member_next {
            item(f, i);
        } else {
            let score = match i {
                Item::Int(n) => n as f64,
                Item::Str(s) => parse_double(s)?,
            };
            f(Element::Score(score));
        }
        member_next = !member_next;
        Some(())
    };
    if is_listpack {
        for i in listpack::entries(raw).ok()? {
            pair(i.ok()?)?;
        }
    } else {
        for i in ziplist::entries(raw).ok()? {
            pair(i.ok()?)?;
        }
    }
    // An odd number of items is damage.
    member_next.then_some(())
}

fn walk<F: FnMut(Element<'_>)>(c: &mut Cursor<'_>, t: u8, f: &mut F) -> Option<()> {
    match t {
        kind::STRING => f(Element::Bytes(&c.string("").ok()?)),
        kind::LIST | kind::SET => {
            let n = c.count("", 1).ok()?;
            for _ in 0..n {
                f(Element::Bytes(&c.string("").ok()?));
            }
        }
        kind::ZSET | kind::ZSET_2 => {
            let n = c.count("", 2).ok()?;
            for _ in 0..n {
                f(Element::Bytes(&c.string("").ok()?));
                let score = if t == kind::ZSET {
                    c.string_double("").ok()?
                } else {
                    c.binary_double("").ok()?
                };
                f(Element::Score(score));
            }
        }
        kind::HASH => {
            let n = c.count("", 2).ok()?;
            for _ in 0..n {
                f(Element::Bytes(&c.string("").ok()?));
                f(Element::Bytes(&c.string("").ok()?));
            }
        }
        kind::HASH_ZIPMAP => {
            let raw = c.string("").ok()?;
            for (field, value) in zipmap::entries(&raw).ok()? {
                f(Element::Bytes(field));
                f(Element::Bytes(value));
            }
        }
        kind::LIST_ZIPLIST => {
            compact(&c.string("").ok()?, false, f)?;
        }
        kind::SET_INTSET => {
            for n in intset::decode(&c.string("").ok()?).ok()? {
                f(Element::Int(n));
            }
        }
        kind::SET_LISTPACK => {
            compact(&c.string("").ok()?, true, f)?;
        }
        kind::ZSET_ZIPLIST | kind::ZSET_LISTPACK => {
            compact_zset(&c.string("").ok()?, t == kind::ZSET_LISTPACK, f)?;
        }
        kind::HASH_ZIPLIST | kind::HASH_LISTPACK => {
            let n = compact(&c.string("").ok()?, t == kind::HASH_LISTPACK, f)?;
            if n % 2 != 0 {
                return None;
            }
        }
        kind::LIST_QUICKLIST | kind::LIST_QUICKLIST_2 => {
            let nodes = c.count("", 1).ok()?;
            for _ in 0..nodes {
                let container = if t == kind::LIST_QUICKLIST_2 {
                    c.len("").ok()?
                } else {
                    2
                };
                let raw = c.string("").ok()?;
                match container {
                    1 => f(Element::Bytes(&raw)),
                    2 => {
                        compact(&raw, t == kind::LIST_QUICKLIST_2, f)?;
                    }
                    _ => return None,
                }
            }
        }
        _ => return None,
    }
    Some(())
}
