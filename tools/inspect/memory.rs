//! `memory`: where the bytes of a file go — the biggest keys, bytes per
//! key prefix and the size distribution per type — in one streaming pass
//! with memory bounded by the options, not by the file (an AOF is
//! replayed in memory first: see `source`).
//!
//! Memory bound: the top-N heap holds N keys; the prefix table holds at
//! most `prefix_cap` prefixes (then the half with the fewest bytes is
//! folded into an "other" total); the size distribution is a fixed
//! 65-bucket array per type.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::ops::ControlFlow;
use std::path::Path;

use crate::estimate;
use crate::report::Node;
use crate::source::{self, FactsError, KeyFacts};
use hozon::tools::report::escape_key;

/// Options of `memory`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only this database.
    pub db: Option<usize>,
    /// Only this logical type.
    pub kind: Option<String>,
    /// How many of the biggest keys to list.
    pub top: usize,
    /// Prefixes end at this byte string.
    pub separator: Vec<u8>,
    /// A prefix runs up to (and includes) the `depth`-th separator.
    pub depth: usize,
    /// How many prefixes to list.
    pub prefixes: usize,
    /// Most prefixes the table holds before folding the smallest half.
    pub prefix_cap: usize,
}

/// Default of `--prefix-cap`.
pub const DEFAULT_PREFIX_CAP: u32 = 100_000;

/// A key kept in the top-N heap. Ranking: more bytes first; equal bytes,
/// the smaller offset (earlier in the file) first.
struct Big {
    bytes: u64,
    /// Position in the walk (file order), which breaks ties.
    seq: u64,
    offset: Option<u64>,
    db: usize,
    key: Vec<u8>,
    kind: &'static str,
    encoding: String,
    elements: Option<u64>,
    /// Estimated server memory (estimate.rs).
    memory: u64,
}

impl Big {
    fn rank(&self) -> (u64, Reverse<u64>) {
        (self.bytes, Reverse(self.seq))
    }
}

impl PartialEq for Big {
    fn eq(&self, other: &Big) -> bool {
        self.rank() == other.rank()
    }
}

impl Eq for Big {}

impl PartialOrd for Big {
    fn partial_cmp(&self, other: &Big) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Big {
    fn cmp(&self, other: &Big) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

/// The N best-ranked keys seen so far: a min-heap whose top is the one
/// to drop next.
struct TopKeys {
    limit: usize,
    heap: BinaryHeap<Reverse<Big>>,
}

impl TopKeys {
    fn offer(&mut self, k: &KeyFacts<'_>, seq: u64, memory: u64) {
        if self.limit == 0 {
            return;
        }
        let rank = (k.bytes, Reverse(seq));
        if self.heap.len() == self.limit {
            // Only a better key displaces the worst; the key is copied
            // only then, so most keys cost no allocation.
            match self.heap.peek() {
                Some(Reverse(worst)) if worst.rank() >= rank => return,
                _ => {}
            }
            self.heap.pop();
        }
        self.heap.push(Reverse(Big {
            bytes: k.bytes,
            seq,
            offset: k.offset,
            db: k.db,
            key: k.key.to_vec(),
            kind: k.logical_type,
            encoding: k.encoding.to_string(),
            elements: k.elements,
            memory,
        }));
    }

    /// Best first.
    fn into_sorted(self) -> Vec<Big> {
        let mut v: Vec<Big> = self.heap.into_iter().map(|Reverse(b)| b).collect();
        v.sort_by(|a, b| b.cmp(a));
        v
    }
}

/// Keys and bytes of one prefix.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    keys: u64,
    bytes: u64,
}

/// Bytes per prefix with at most `cap` prefixes. When a new prefix
/// arrives at a full table, the half of the table with the fewest bytes
/// (ties: the greater prefix) is folded into `folded`. A prefix folded
/// and seen again starts over, so once the cap is hit the listed numbers
/// are lower bounds; the totals (listed + folded) stay exact. Folding
/// half at a time keeps the cost amortised O(1) per key.
struct Prefixes {
    separator: Vec<u8>,
    depth: usize,
    cap: usize,
    /// foldhash: SipHash was a tenth of the walk; its seed is random, so
    /// crafted keys cannot aim at it.
    table: HashMap<Vec<u8>, Tally, foldhash::fast::RandomState>,
    folded: Tally,
    /// How many times the table was full and folded.
    folds: u64,
    /// Distinct prefixes evicted (counting repeats).
    folded_prefixes: u64,
}

impl Prefixes {
    /// The key up to and including its `depth`-th separator; the whole
    /// key when it has fewer.
    fn prefix_of<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        let sep = &self.separator;
        if let [byte] = sep[..] {
            // The common case, one byte: find each with a fast scan.
            let mut end = 0;
            for _ in 0..self.depth {
                match key[end..].iter().position(|&b| b == byte) {
                    Some(at) => end += at + 1,
                    None => return key,
                }
            }
            return &key[..end];
        }
        let mut seen = 0;
        let mut i = 0;
        while i + sep.len() <= key.len() {
            if key[i..].starts_with(sep) {
                seen += 1;
                i += sep.len();
                if seen == self.depth {
                    return &key[..i];
                }
            } else {
                i += 1;
            }
        }
        key
    }

    fn add(&mut self, key: &[u8], bytes: u64) {
        let prefix = self.prefix_of(key);
        if let Some(t) = self.table.get_mut(prefix) {
            t.keys += 1;
            t.bytes += bytes;
            return;
        }
        if self.table.len() >= self.cap {
            self.fold();
        }
        self.table.insert(prefix.to_vec(), Tally { keys: 1, bytes });
    }

    fn fold(&mut self) {
        let mut all: Vec<(Vec<u8>, Tally)> = self.table.drain().collect();
        let keep = self.cap / 2;
        if keep < all.len() {
            // Best first: more bytes, then the smaller prefix.
            all.select_nth_unstable_by(keep, |a, b| {
                b.1.bytes.cmp(&a.1.bytes).then_with(|| a.0.cmp(&b.0))
            });
            for (_, t) in all.drain(keep..) {
                self.folded.keys += t.keys;
                self.folded.bytes += t.bytes;
                self.folded_prefixes += 1;
            }
        }
        self.table.extend(all);
        self.folds += 1;
    }
}

/// Per-type totals and a power-of-two size histogram: bucket `b` counts
/// records of `2^(b-1)` to `2^b - 1` bytes; buckets below 6 are merged
/// into the first one (`< 64`).
#[derive(Clone)]
struct TypeSizes {
    keys: u64,
    bytes: u64,
    /// Estimated server memory (estimate.rs).
    memory: u64,
    buckets: [Tally; 65],
}

const FIRST_BUCKET: u32 = 6;

/// The histogram bucket of a record of `bytes` bytes: records are below
/// `2^bucket` bytes.
fn bucket_of(bytes: u64) -> usize {
    (u64::BITS - bytes.leading_zeros()).max(FIRST_BUCKET) as usize
}

const TYPE_ORDER: [&str; 7] = ["string", "list", "hash", "set", "zset", "stream", "module"];

/// The `memory` report for `path`. Err is an I/O or usage problem (exit
/// 2); damage is listed under `problems`, with what was read before it.
pub fn memory(path: &Path, options: &Options) -> Result<Node, String> {
    let input = match source::open(path) {
        Ok(i) => i,
        Err(source::Failure::Io(m)) => return Err(m),
        Err(source::Failure::Damaged(m)) => {
            let report = Node::object()
                .with("path", path.display().to_string())
                .with("status", "damaged")
                .with("problems", vec![problem(0, m)]);
            return Ok(report);
        }
    };
    let mut top = TopKeys {
        limit: options.top,
        heap: BinaryHeap::with_capacity(options.top.min(1 << 16) + 1),
    };
    let mut prefixes = Prefixes {
        separator: options.separator.clone(),
        depth: options.depth,
        cap: options.prefix_cap.max(2),
        table: HashMap::default(),
        folded: Tally::default(),
        folds: 0,
        folded_prefixes: 0,
    };
    let empty = TypeSizes {
        keys: 0,
        bytes: 0,
        memory: 0,
        buckets: [Tally::default(); 65],
    };
    // Indexed like TYPE_ORDER; anything else goes last.
    let mut types = vec![empty; TYPE_ORDER.len() + 1];
    let mut total = Tally::default();
    let mut seq = 0u64;
    let mut total_memory = 0u64;
    let scanned = input.for_each_facts(&mut |k| {
        if options.db.is_some_and(|db| db != k.db)
            || options.kind.as_deref().is_some_and(|t| t != k.logical_type)
        {
            return ControlFlow::Continue(());
        }
        let memory = estimate::memory_usage(
            k.key.len() as u64,
            k.logical_type,
            &k.encoding,
            k.elements,
            k.bytes,
        );
        total_memory += memory;
        total.keys += 1;
        total.bytes += k.bytes;
        top.offer(k, seq, memory);
        seq += 1;
        prefixes.add(k.key, k.bytes);
        let t = TYPE_ORDER
            .iter()
            .position(|&n| n == k.logical_type)
            .unwrap_or(TYPE_ORDER.len());
        let sizes = &mut types[t];
        sizes.keys += 1;
        sizes.bytes += k.bytes;
        sizes.memory += memory;
        let b = &mut sizes.buckets[bucket_of(k.bytes)];
        b.keys += 1;
        b.bytes += k.bytes;
        ControlFlow::Continue(())
    });
    let mut problems = Vec::new();
    match scanned {
        Err(FactsError::Io(m)) => return Err(m),
        Err(FactsError::Damaged(offset, m)) => problems.push(problem(offset.unwrap_or(0), m)),
        Ok(()) => {}
    }
    let mut report = Node::object()
        .with("path", path.display().to_string())
        .with("status", if problems.is_empty() { "ok" } else { "damaged" })
        .with("format", input.format().name())
        .with("keys", total.keys)
        .with("bytes", total.bytes)
        .with("estimated_memory_bytes", total_memory);
    report.set("top_keys", top_rows(top.into_sorted()));
    report.set("prefixes", prefix_report(prefixes, options));
    let (type_rows, distribution) = type_rows(&types);
    report.set("types", type_rows);
    report.set("size_distribution", distribution);
    report.set("problems", problems);
    Ok(report)
}

fn problem(offset: u64, message: String) -> Node {
    Node::object()
        .with("offset", offset)
        .with("message", message)
}

fn top_rows(keys: Vec<Big>) -> Vec<Node> {
    keys.into_iter()
        .enumerate()
        .map(|(i, b)| {
            Node::object()
                .with("rank", i + 1)
                .with("db", b.db)
                .with("key", escape_key(&b.key))
                .with("type", b.kind)
                .with("encoding", b.encoding)
                .with("bytes", b.bytes)
                .with("elements", b.elements)
                .with("estimated_memory_bytes", b.memory)
                .with("offset", b.offset)
        })
        .collect()
}

fn prefix_report(p: Prefixes, options: &Options) -> Node {
    let distinct = p.table.len();
    let mut rows: Vec<(Vec<u8>, Tally)> = p.table.into_iter().collect();
    // More bytes first; equal bytes, the smaller prefix first.
    let by_bytes =
        |a: &(Vec<u8>, Tally), b: &(Vec<u8>, Tally)| b.1.bytes.cmp(&a.1.bytes).then(a.0.cmp(&b.0));
    if options.prefixes < rows.len() {
        rows.select_nth_unstable_by(options.prefixes, by_bytes);
        rows.truncate(options.prefixes);
    }
    rows.sort_unstable_by(by_bytes);
    let listed: Vec<Node> = rows
        .into_iter()
        .map(|(prefix, t)| {
            Node::object()
                .with("prefix", escape_key(&prefix))
                .with("keys", t.keys)
                .with("bytes", t.bytes)
        })
        .collect();
    Node::object()
        .with("separator", escape_key(&options.separator))
        .with("depth", options.depth)
        .with("distinct", distinct)
        .with("cap", p.cap)
        .with("cap_hit", p.folds > 0)
        .with("folded_prefixes", p.folded_prefixes)
        .with("folded_keys", p.folded.keys)
        .with("folded_bytes", p.folded.bytes)
        .with("listed", listed)
}

fn type_rows(types: &[TypeSizes]) -> (Vec<Node>, Vec<Node>) {
    let mut totals = Vec::new();
    let mut distribution = Vec::new();
    for (i, t) in types.iter().enumerate() {
        if t.keys == 0 {
            continue;
        }
        let name = TYPE_ORDER.get(i).copied().unwrap_or("other");
        totals.push(
            Node::object()
                .with("type", name)
                .with("keys", t.keys)
                .with("bytes", t.bytes)
                .with("estimated_memory_bytes", t.memory),
        );
        for (b, tally) in t.buckets.iter().enumerate() {
            if tally.keys == 0 {
                continue;
            }
            // 2^64 does not fit a u64; a record that large cannot exist
            // in a mapped file, but the last bucket is shown as "max".
            let below: Node = if b < 64 {
                Node::UInt(1u64 << b)
            } else {
                Node::UInt(u64::MAX)
            };
            distribution.push(
                Node::object()
                    .with("type", name)
                    .with("size_below", below)
                    .with("keys", tally.keys)
                    .with("bytes", tally.bytes),
            );
        }
    }
    (totals, distribution)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefixes(sep: &str, depth: usize, cap: usize) -> Prefixes {
        Prefixes {
            separator: sep.as_bytes().to_vec(),
            depth,
            cap,
            table: HashMap::default(),
            folded: Tally::default(),
            folds: 0,
            folded_prefixes: 0,
        }
    }

    #[test]
    fn prefix_runs_to_the_depth_th_separator() {
        let p = prefixes(":", 1, 10);
        assert_eq!(p.prefix_of(b"user:1:name"), b"user:");
        assert_eq!(p.prefix_of(b"plain"), b"plain");
        let p = prefixes("::", 2, 10);
        assert_eq!(p.prefix_of(b"a::b::c"), b"a::b::");
        assert_eq!(p.prefix_of(b"a::b"), b"a::b");
    }

    #[test]
    fn buckets_are_powers_of_two_from_64() {
        assert_eq!(bucket_of(0), 6);
        assert_eq!(bucket_of(63), 6);
        assert_eq!(bucket_of(64), 7);
        assert_eq!(bucket_of(127), 7);
        assert_eq!(bucket_of(128), 8);
    }

    #[test]
    fn a_full_table_folds_its_smaller_half_and_keeps_totals() {
        let mut p = prefixes(":", 1, 4);
        for (i, key) in ["a:1", "b:1", "c:1", "d:1", "e:1", "a:2"]
            .iter()
            .enumerate()
        {
            p.add(key.as_bytes(), 10 * (i as u64 + 1));
        }
        assert_eq!(p.folds, 1);
        assert!(p.table.len() <= 4);
        let kept: u64 = p.table.values().map(|t| t.bytes).sum();
        assert_eq!(kept + p.folded.bytes, 10 + 20 + 30 + 40 + 50 + 60);
        assert_eq!(p.table[b"d:".as_slice()].bytes, 40);
    }
}
