//! Writes the data files of `scripts/bench --only-inspect` (issue 7's
//! `hozon-inspect` targets) with hozon's own writers, deterministically
//! (a fixed seed: the same size gives the same bytes).
//!
//! - `inspect_bench rdb <out.rdb> <out.hoz> <bytes>`: a Redis RDB version
//!   10 (Redis 7.0's encodings: listpacks, intsets, quicklist-2 lists,
//!   LZF-compressed strings, as `rdbcompression yes` writes them) of at
//!   least `bytes` bytes, and a `dump.hoz` of the same keys. A mix of
//!   many small strings under `:`-separated prefixes (some with TTLs,
//!   some integers, 0.5% of 1-10 KB), hashes, lists, sets and sorted sets,
//!   mostly small (compact encodings), 2% large, plus one big value
//!   of each type every million keys.
//! - `inspect_bench rdb9 <out.rdb> <bytes>`: an RDB version 9 that
//!   `rdbtools` 0.1.15 can read: the same kind of mix, written only with
//!   the types a version-9 file has that need no ziplist (strings, plain
//!   lists (type 1), hash tables (4), sets (2), intsets (11), sorted sets
//!   with binary scores (5)), strings uncompressed.
//!
//! Prints one JSON object: the files' sizes and the key counts per type.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use hozon::persist::io::{Io, RealIo};
use hozon::persist::rdb_file::RdbFile;
use hozon::persist::snapshot::{self, BlockBuilder, FileWriter, HeaderInfo};
use hozon::rdb::writer::RecordEncoder;
use hozon::rdb::writer::{put_len, Encoder};
use hozon::rdb::Crc64;
use hozon::types::list::{End, List};
use hozon::types::zset::AddFlags;
use hozon::types::{Blob, EncodingLimits, Hash, Set, Value, ZSet};

/// The files' creation time (fixed so the output is reproducible):
/// 2026-01-01 00:00:00 UTC.
const CREATED_MS: i64 = 1_767_225_600_000;
/// Expiries are drawn after this instant (2100-01-01 UTC), so no key of
/// the files has expired when they are read.
const EXPIRE_BASE_MS: i64 = 4_102_444_800_000;
/// One big value of each type is written every this many keys.
const BIG_EVERY_KEYS: u64 = 1_000_000;

/// Words the text values are made of: text compresses (as real values
/// do) where random bytes would not.
const WORDS: &[&str] = &[
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "red", "green", "blue", "amber",
    "user", "order", "cart", "item", "price", "status", "active", "pending", "shipped", "paris",
    "london", "tokyo", "berlin", "madrid", "rome", "oslo", "vienna", "dublin", "lisbon", "prague",
    "2024", "2025", "2026", "true", "false", "null", "ok", "error", "retry", "done", "new", "old",
    "fast", "slow",
];

/// splitmix64: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// True with probability `per_mille / 1000`.
    fn chance(&mut self, per_mille: u64) -> bool {
        self.next() % 1000 < per_mille
    }

    /// Text of about `len` bytes made of words.
    fn text(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 10);
        while out.len() < len {
            if !out.is_empty() {
                out.push(b' ');
            }
            let word = WORDS[(self.next() % WORDS.len() as u64) as usize];
            out.extend_from_slice(word.as_bytes());
        }
        out.truncate(len);
        out
    }
}

/// One generated key's value, before it is given an encoding.
enum Data {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(Vec<u8>, f64)>),
}

impl Data {
    fn type_name(&self) -> &'static str {
        match self {
            Data::Str(_) => "string",
            Data::List(_) => "list",
            Data::Hash(_) => "hash",
            Data::Set(_) => "set",
            Data::ZSet(_) => "zset",
        }
    }
}

struct Key {
    key: Vec<u8>,
    data: Data,
    expire_ms: Option<i64>,
}

/// The key generator: key `n` of the data set (keys are unique: every
/// name ends with the key's number or is made unique by it).
struct Generator {
    rng: Rng,
    n: u64,
}

impl Generator {
    fn new() -> Generator {
        Generator {
            rng: Rng(0x686F_7A6F_6E37),
            n: 0,
        }
    }

    /// Elements of a collection: mostly small, 2% large.
    fn elements(&mut self, small_max: u64, large: (u64, u64)) -> u64 {
        if self.rng.chance(20) {
            self.rng.range(large.0, large.1)
        } else {
            self.rng.range(2, small_max)
        }
    }

    fn next_key(&mut self) -> Key {
        let n = self.n;
        self.n += 1;
        let rng = &mut self.rng;
        if n % BIG_EVERY_KEYS == BIG_EVERY_KEYS / 2 {
            return self.big(n);
        }
        let roll = rng.next() % 100;
        let mut expire_ms = None;
        let (key, data) = if roll < 70 {
            // Strings: the bulk of the keys.
            match rng.next() % 10 {
                0..=2 => {
                    let len = rng.range(8, 40) as usize;
                    (format!("user:{n}:name"), Data::Str(rng.text(len)))
                }
                3 | 4 => {
                    expire_ms = Some(EXPIRE_BASE_MS + rng.range(0, 30 * 86_400_000) as i64);
                    let len = rng.range(32, 120) as usize;
                    (
                        format!("session:{:016x}", rng.next() ^ n),
                        Data::Str(rng.text(len)),
                    )
                }
                5 | 6 => (
                    format!("counter:{}:{n}", rng.next() % 1000),
                    Data::Str(rng.range(0, 10_000_000).to_string().into_bytes()),
                ),
                7 => {
                    expire_ms = Some(EXPIRE_BASE_MS + rng.range(0, 86_400_000) as i64);
                    let len = if rng.chance(25) {
                        rng.range(1024, 10 * 1024)
                    } else {
                        rng.range(100, 600)
                    } as usize;
                    (
                        format!("cache:page:{}:{n}", rng.next() % 50),
                        Data::Str(rng.text(len)),
                    )
                }
                _ => {
                    let len = rng.range(10, 60) as usize;
                    (
                        format!("config:{}:{n}", WORDS[n as usize % WORDS.len()]),
                        Data::Str(rng.text(len)),
                    )
                }
            }
        } else if roll < 80 {
            let count = self.elements(20, (200, 1000));
            let rng = &mut self.rng;
            let pairs = (0..count)
                .map(|i| {
                    let field = format!("{}{i}", WORDS[(rng.next() % 30) as usize]).into_bytes();
                    let len = rng.range(4, 40) as usize;
                    (field, rng.text(len))
                })
                .collect();
            (format!("user:{n}:profile"), Data::Hash(pairs))
        } else if roll < 87 {
            let count = self.elements(30, (200, 2000));
            let rng = &mut self.rng;
            let items = (0..count)
                .map(|_| {
                    let len = rng.range(8, 48) as usize;
                    rng.text(len)
                })
                .collect();
            (
                format!("queue:{}:{n}", WORDS[(rng.next() % 20) as usize]),
                Data::List(items),
            )
        } else if roll < 94 {
            let count = self.elements(40, (200, 2000));
            let rng = &mut self.rng;
            if rng.chance(500) {
                // Integer members: an intset while small enough.
                let mut id = rng.range(0, 1 << 40);
                let members = (0..count)
                    .map(|_| {
                        // Increasing: no duplicate members.
                        id += rng.range(1, 9);
                        id.to_string().into_bytes()
                    })
                    .collect();
                (format!("ids:{n}"), Data::Set(members))
            } else {
                let members = (0..count)
                    .map(|i| format!("{}-{i}", WORDS[(rng.next() % 64) as usize]).into_bytes())
                    .collect();
                (format!("tags:{n}"), Data::Set(members))
            }
        } else {
            let count = self.elements(60, (200, 2000));
            let rng = &mut self.rng;
            let members = (0..count)
                .map(|i| {
                    let member = format!("player:{}", rng.next() % 1_000_000 * 10_000 + i);
                    (member.into_bytes(), (rng.next() % 1_000_000) as f64 / 4.0)
                })
                .collect();
            (format!("leaderboard:{n}"), Data::ZSet(members))
        };
        Key {
            key: key.into_bytes(),
            data,
            expire_ms,
        }
    }

    /// A big value: which type rotates with each one.
    fn big(&mut self, n: u64) -> Key {
        let rng = &mut self.rng;
        let (key, data) = match (n / BIG_EVERY_KEYS) % 5 {
            0 => (format!("big:string:{n}"), Data::Str(rng.text(8 << 20))),
            1 => (
                format!("big:hash:{n}"),
                Data::Hash(
                    (0..100_000u64)
                        .map(|i| (format!("field:{i}").into_bytes(), rng.text(30)))
                        .collect(),
                ),
            ),
            2 => (
                format!("big:list:{n}"),
                Data::List((0..200_000).map(|_| rng.text(40)).collect()),
            ),
            3 => (
                format!("big:set:{n}"),
                Data::Set(
                    (0..100_000u64)
                        .map(|i| format!("member:{i}:{}", rng.next() % 1000).into_bytes())
                        .collect(),
                ),
            ),
            _ => (
                format!("big:zset:{n}"),
                Data::ZSet(
                    (0..100_000u64)
                        .map(|i| (format!("m:{i}").into_bytes(), (rng.next() % 100_000) as f64))
                        .collect(),
                ),
            ),
        };
        Key {
            key: key.into_bytes(),
            data,
            expire_ms: None,
        }
    }
}

/// The value as hozon holds it (and so the encoding Redis 7.0 would give
/// it: listpacks and intsets while small).
fn to_value(data: &Data, limits: &EncodingLimits) -> Value {
    match data {
        Data::Str(s) => Value::Str(Blob::new(s)),
        Data::List(items) => {
            let mut list = List::new();
            for item in items {
                list.push(End::Tail, item);
            }
            Value::List(Box::new(list))
        }
        Data::Hash(pairs) => {
            let mut hash = Hash::new();
            for (f, v) in pairs {
                hash.set(f, Blob::new(v), limits);
            }
            Value::Hash(Box::new(hash))
        }
        Data::Set(members) => {
            let mut set = Set::for_member(&members[0]);
            for m in members {
                set.insert(m, limits.set_max_intset_entries);
            }
            Value::Set(Box::new(set))
        }
        Data::ZSet(members) => {
            let mut zset = ZSet::for_first_member(members[0].0.len(), limits);
            for (m, score) in members {
                // Scores are finite by construction: never NaN.
                let _ = zset.add(m, *score, AddFlags::default(), limits);
            }
            Value::ZSet(Box::new(zset))
        }
    }
}

fn die(message: &str) -> ! {
    eprintln!("inspect_bench: {message}");
    std::process::exit(2);
}

fn parse_bytes(text: &str) -> u64 {
    text.parse()
        .unwrap_or_else(|_| die(&format!("not a byte count: {text}")))
}

#[derive(Default)]
struct Counts {
    keys: u64,
    expiring: u64,
    per_type: BTreeMap<&'static str, u64>,
}

impl Counts {
    fn note(&mut self, key: &Key) {
        self.keys += 1;
        self.expiring += u64::from(key.expire_ms.is_some());
        *self.per_type.entry(key.data.type_name()).or_default() += 1;
    }

    fn json(&self) -> String {
        let types: Vec<String> = self
            .per_type
            .iter()
            .map(|(t, n)| format!("\"{t}\": {n}"))
            .collect();
        format!(
            "\"keys\": {}, \"expiring\": {}, \"types\": {{{}}}",
            self.keys,
            self.expiring,
            types.join(", ")
        )
    }
}

/// Version 10 RDB and dump.hoz of the same keys, until the RDB reaches
/// `target_bytes`.
fn write_v10(rdb_path: &Path, hoz_path: &Path, target_bytes: u64) {
    let io: Arc<dyn Io> = Arc::new(RealIo);
    let dir = |p: &Path| {
        p.parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf()
    };
    let name = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_else(|| die(&format!("{}: not a file name", p.display())))
            .to_string()
    };
    let rdb_temp = snapshot::temp_path(&dir(rdb_path), &name(rdb_path));
    let hoz_temp = snapshot::temp_path(&dir(hoz_path), &name(hoz_path));
    let mut rdb = RdbFile::create(Arc::clone(&io), &rdb_temp).unwrap_or_else(|e| die(&e));
    let mut records = RecordEncoder::with_header(Encoder::default(), CREATED_MS, 0, false);
    let mut hoz = FileWriter::create(Arc::clone(&io), &hoz_temp, HeaderInfo::new(CREATED_MS, 16))
        .unwrap_or_else(|e| die(&e.to_string()));
    let mut blocks = BlockBuilder::new();
    let limits = EncodingLimits::default();
    let mut generator = Generator::new();
    let mut counts = Counts::default();
    let mut pending = 0u64;
    while rdb.len() + pending < target_bytes {
        let key = generator.next_key();
        counts.note(&key);
        let value = to_value(&key.data, &limits);
        // The counts are not known while streaming: RESIZEDB 0 0 (loaders
        // size as they go), as `hozon-inspect export --to rdb` writes.
        records.push(0, &key.key, &value, key.expire_ms, |_| (0, 0));
        if let Some(chunk) = records.take_full() {
            rdb.write(&chunk).unwrap_or_else(|e| die(&e));
            pending = 0;
        } else {
            // An estimate of what the encoder holds (an exact count would
            // need its buffer): the value's logical size.
            pending += key.key.len() as u64 + data_bytes(&key.data);
        }
        for block in blocks.push(0, &key.key, &value, key.expire_ms) {
            let buf = hoz
                .write_block(block)
                .unwrap_or_else(|e| die(&e.to_string()));
            blocks.recycle(buf);
        }
    }
    rdb.write(&records.take()).unwrap_or_else(|e| die(&e));
    let rdb_bytes = rdb.finish(true).unwrap_or_else(|e| die(&e));
    if let Some(block) = blocks.finish() {
        hoz.write_block(block)
            .unwrap_or_else(|e| die(&e.to_string()));
    }
    let summary = hoz
        .finish(blocks.stats())
        .unwrap_or_else(|e| die(&e.to_string()));
    snapshot::commit(io.as_ref(), &rdb_temp, rdb_path).unwrap_or_else(|e| die(&e.to_string()));
    snapshot::commit(io.as_ref(), &hoz_temp, hoz_path).unwrap_or_else(|e| die(&e.to_string()));
    println!(
        "{{\"rdb_bytes\": {rdb_bytes}, \"hoz_bytes\": {}, {}}}",
        summary.file_len,
        counts.json()
    );
}

fn data_bytes(data: &Data) -> u64 {
    let sum = |it: &mut dyn Iterator<Item = usize>| it.map(|n| n as u64 + 1).sum::<u64>();
    match data {
        Data::Str(s) => s.len() as u64,
        Data::List(items) | Data::Set(items) => sum(&mut items.iter().map(Vec::len)),
        Data::Hash(pairs) => sum(&mut pairs.iter().map(|(f, v)| f.len() + v.len() + 1)),
        Data::ZSet(members) => sum(&mut members.iter().map(|(m, _)| m.len() + 8)),
    }
}

/// Redis's intset blob: encoding width, count, sorted little-endian
/// integers; `None` when a member is not an integer or there are more
/// than `set-max-intset-entries` (512).
fn intset_blob(members: &[Vec<u8>]) -> Option<Vec<u8>> {
    if members.len() > 512 {
        return None;
    }
    let mut ints = members
        .iter()
        .map(|m| std::str::from_utf8(m).ok()?.parse::<i64>().ok())
        .collect::<Option<Vec<i64>>>()?;
    ints.sort_unstable();
    ints.dedup();
    let width: u32 = if ints.iter().all(|v| i16::try_from(*v).is_ok()) {
        2
    } else if ints.iter().all(|v| i32::try_from(*v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + ints.len() * width as usize);
    out.extend_from_slice(&width.to_le_bytes());
    out.extend_from_slice(&(ints.len() as u32).to_le_bytes());
    for v in ints {
        out.extend_from_slice(&v.to_le_bytes()[..width as usize]);
    }
    Some(out)
}

/// Appends one key record in the version-9 types rdbtools reads.
fn put_v9_record(out: &mut Vec<u8>, strings: &Encoder, key: &Key) {
    if let Some(at) = key.expire_ms {
        out.push(0xFC); // EXPIRETIME_MS
        out.extend_from_slice(&at.to_le_bytes());
    }
    let body_start = out.len();
    out.push(0);
    strings.put_string(out, &key.key);
    let kind = match &key.data {
        Data::Str(s) => {
            strings.put_string(out, s);
            0
        }
        Data::List(items) => {
            put_len(out, items.len() as u64);
            for item in items {
                strings.put_string(out, item);
            }
            1
        }
        Data::Set(members) => match intset_blob(members) {
            Some(blob) => {
                strings.put_string(out, &blob);
                11
            }
            None => {
                put_len(out, members.len() as u64);
                for m in members {
                    strings.put_string(out, m);
                }
                2
            }
        },
        Data::Hash(pairs) => {
            put_len(out, pairs.len() as u64);
            for (f, v) in pairs {
                strings.put_string(out, f);
                strings.put_string(out, v);
            }
            4
        }
        Data::ZSet(members) => {
            put_len(out, members.len() as u64);
            for (m, score) in members {
                strings.put_string(out, m);
                out.extend_from_slice(&score.to_le_bytes());
            }
            5
        }
    };
    out[body_start] = kind;
}

/// Version 9 RDB for rdbtools, until it reaches `target_bytes`.
fn write_v9(path: &Path, target_bytes: u64) {
    let file = std::fs::File::create(path)
        .unwrap_or_else(|e| die(&format!("creating {}: {e}", path.display())));
    let mut file = std::io::BufWriter::with_capacity(1 << 20, file);
    // rdbcompression off: rdbtools without python-lzf decompresses in
    // pure Python, which would dominate its time.
    let strings = Encoder {
        compress: false,
        ..Encoder::default()
    };
    let mut crc = Crc64::default();
    let mut buf = Vec::with_capacity(2 << 20);
    buf.extend_from_slice(b"REDIS0009");
    for (name, value) in [
        ("redis-ver", "5.0.14"),
        ("redis-bits", "64"),
        ("ctime", &(CREATED_MS / 1000).to_string()),
        ("used-mem", "0"),
        ("aof-preamble", "0"),
    ] {
        buf.push(0xFA); // AUX
        strings.put_string(&mut buf, name.as_bytes());
        strings.put_string(&mut buf, value.as_bytes());
    }
    buf.push(0xFE); // SELECTDB 0
    put_len(&mut buf, 0);
    let mut generator = Generator::new();
    let mut counts = Counts::default();
    let mut written = 0u64;
    let mut flush = |buf: &mut Vec<u8>, written: &mut u64| {
        crc.update(buf);
        file.write_all(buf)
            .unwrap_or_else(|e| die(&format!("writing {}: {e}", path.display())));
        *written += buf.len() as u64;
        buf.clear();
    };
    while written + (buf.len() as u64) < target_bytes {
        let key = generator.next_key();
        counts.note(&key);
        put_v9_record(&mut buf, &strings, &key);
        if buf.len() >= 1 << 20 {
            flush(&mut buf, &mut written);
        }
    }
    buf.push(0xFF); // EOF
    flush(&mut buf, &mut written);
    let checksum = crc.value().to_le_bytes();
    file.write_all(&checksum)
        .and_then(|()| file.flush())
        .unwrap_or_else(|e| die(&format!("writing {}: {e}", path.display())));
    println!(
        "{{\"rdb_bytes\": {}, {}}}",
        written + checksum.len() as u64,
        counts.json()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Absolute paths: committing a file fsyncs its directory, which a
    // bare file name does not name.
    let path = |p: &str| std::path::absolute(p).unwrap_or_else(|e| die(&format!("{p}: {e}")));
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["rdb", rdb, hoz, bytes] => write_v10(&path(rdb), &path(hoz), parse_bytes(bytes)),
        ["rdb9", rdb, bytes] => write_v9(&path(rdb), parse_bytes(bytes)),
        _ => die("usage: inspect_bench rdb <out.rdb> <out.hoz> <bytes> | rdb9 <out.rdb> <bytes>"),
    }
}
