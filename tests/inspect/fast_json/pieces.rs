//! RDB pieces for the fast-path tests, byte by byte (docs/rdb.md).

use super::*;

/// An RDB length.
pub(super) fn len(n: u64) -> Vec<u8> {
    let mut v = Vec::new();
    put_len(&mut v, n);
    v
}

/// A string stored as its length and bytes.
pub(super) fn raw(s: &[u8]) -> Vec<u8> {
    let mut v = len(s.len() as u64);
    v.extend_from_slice(s);
    v
}

/// An integer-encoded string in the smallest of the 8, 16 and 32-bit forms.
pub(super) fn int_encoded(v: i64) -> Vec<u8> {
    if let Ok(v) = i8::try_from(v) {
        vec![0xC0, v as u8]
    } else if let Ok(v) = i16::try_from(v) {
        let mut out = vec![0xC1];
        out.extend_from_slice(&v.to_le_bytes());
        out
    } else {
        let v = i32::try_from(v).expect("integer encodings hold 32 bits");
        let mut out = vec![0xC2];
        out.extend_from_slice(&v.to_le_bytes());
        out
    }
}

/// An LZF-compressed string, when LZF makes it shorter.
pub(super) fn lzf_string(s: &[u8]) -> Option<Vec<u8>> {
    let mut compressed = Vec::new();
    if s.len() < 2 || !lzf::compress(s, &mut compressed, s.len() - 1) {
        return None;
    }
    let mut out = vec![0xC3];
    out.extend(len(compressed.len() as u64));
    out.extend(len(s.len() as u64));
    out.extend(compressed);
    Some(out)
}

/// A string as Redis writes it (integer, LZF or raw: hozon's writer).
pub(super) fn auto(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Encoder::default().put_string(&mut out, s);
    out
}

/// An element of a listpack or ziplist: a string, or an integer stored
/// in binary.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum It {
    S(Vec<u8>),
    I(i64),
}

/// The element Redis would store for `s`: an integer when it is one.
pub(super) fn it(s: &[u8]) -> It {
    match parse_i64(s) {
        Some(n) => It::I(n),
        None => It::S(s.to_vec()),
    }
}

pub(super) fn s(text: &str) -> It {
    It::S(text.as_bytes().to_vec())
}

pub(super) fn lp_backlen(n: usize) -> Vec<u8> {
    if n <= 127 {
        vec![n as u8]
    } else if n < 16383 {
        vec![(n >> 7) as u8, (n & 127) as u8 | 128]
    } else {
        assert!(n < 2_097_151, "listpack entry too large for these tests");
        vec![
            (n >> 14) as u8,
            ((n >> 7) & 127) as u8 | 128,
            (n & 127) as u8 | 128,
        ]
    }
}

pub(super) fn lp_entry(e: &It) -> Vec<u8> {
    let mut enc = Vec::new();
    match e {
        It::I(v) => {
            let v = *v;
            if (0..=127).contains(&v) {
                enc.push(v as u8);
            } else if (-4096..=4095).contains(&v) {
                let u = (v & 0x1FFF) as u16;
                enc.push(0xC0 | (u >> 8) as u8);
                enc.push(u as u8);
            } else if let Ok(x) = i16::try_from(v) {
                enc.push(0xF1);
                enc.extend_from_slice(&x.to_le_bytes());
            } else if (-8_388_608..=8_388_607).contains(&v) {
                enc.push(0xF2);
                enc.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            } else if let Ok(x) = i32::try_from(v) {
                enc.push(0xF3);
                enc.extend_from_slice(&x.to_le_bytes());
            } else {
                enc.push(0xF4);
                enc.extend_from_slice(&v.to_le_bytes());
            }
        }
        It::S(s) => {
            let n = s.len();
            if n < 64 {
                enc.push(0x80 | n as u8);
            } else if n < 4096 {
                enc.push(0xE0 | (n >> 8) as u8);
                enc.push(n as u8);
            } else {
                enc.push(0xF0);
                enc.extend_from_slice(&(n as u32).to_le_bytes());
            }
            enc.extend_from_slice(s);
        }
    }
    let back = lp_backlen(enc.len());
    enc.extend(back);
    enc
}

/// A listpack whose header counts `count` elements.
pub(super) fn listpack_counting(items: &[It], count: u16) -> Vec<u8> {
    let body: Vec<u8> = items.iter().flat_map(lp_entry).collect();
    let mut out = Vec::with_capacity(body.len() + 7);
    out.extend_from_slice(&((6 + body.len() + 1) as u32).to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend(body);
    out.push(0xFF);
    out
}

pub(super) fn listpack(items: &[It]) -> Vec<u8> {
    listpack_counting(items, items.len().min(65535) as u16)
}

pub(super) fn zl_entry(prevlen: usize, e: &It) -> Vec<u8> {
    let mut out = if prevlen < 254 {
        vec![prevlen as u8]
    } else {
        let mut v = vec![0xFE];
        v.extend_from_slice(&(prevlen as u32).to_le_bytes());
        v
    };
    match e {
        It::I(v) => {
            let v = *v;
            if (0..=12).contains(&v) {
                out.push(0xF1 + v as u8);
            } else if let Ok(x) = i8::try_from(v) {
                out.push(0xFE);
                out.push(x as u8);
            } else if let Ok(x) = i16::try_from(v) {
                out.push(0xC0);
                out.extend_from_slice(&x.to_le_bytes());
            } else if (-8_388_608..=8_388_607).contains(&v) {
                out.push(0xF0);
                out.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            } else if let Ok(x) = i32::try_from(v) {
                out.push(0xD0);
                out.extend_from_slice(&x.to_le_bytes());
            } else {
                out.push(0xE0);
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        It::S(s) => {
            let n = s.len();
            if n <= 63 {
                out.push(n as u8);
            } else if n <= 16383 {
                out.push(0x40 | (n >> 8) as u8);
                out.push(n as u8);
            } else {
                out.push(0x80);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            out.extend_from_slice(s);
        }
    }
    out
}

/// A ziplist (the encoding of Redis up to 6.2).
pub(super) fn ziplist(items: &[It]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut prev = 0usize;
    let mut tail = 10usize;
    for e in items {
        let entry = zl_entry(prev, e);
        tail = 10 + body.len();
        prev = entry.len();
        body.extend(entry);
    }
    let mut out = Vec::with_capacity(body.len() + 11);
    out.extend_from_slice(&((10 + body.len() + 1) as u32).to_le_bytes());
    out.extend_from_slice(&(tail as u32).to_le_bytes());
    out.extend_from_slice(&(items.len().min(65535) as u16).to_le_bytes());
    out.extend(body);
    out.push(0xFF);
    out
}

pub(super) fn zm_len(out: &mut Vec<u8>, n: usize) {
    if n < 254 {
        out.push(n as u8);
    } else {
        out.push(254);
        out.extend_from_slice(&(n as u32).to_le_bytes());
    }
}

/// A zipmap (hashes before Redis 2.6); `free` unused bytes after each value.
pub(super) fn zipmap(pairs: &[(Vec<u8>, Vec<u8>)], free: u8) -> Vec<u8> {
    let mut out = vec![pairs.len().min(254) as u8];
    for (f, v) in pairs {
        zm_len(&mut out, f.len());
        out.extend_from_slice(f);
        zm_len(&mut out, v.len());
        out.push(free);
        out.extend_from_slice(v);
        out.extend(std::iter::repeat_n(0u8, usize::from(free)));
    }
    out.push(0xFF);
    out
}

/// An intset of `width` bytes per value, values as given (in any order).
pub(super) fn intset_raw(width: u32, values: &[i64]) -> Vec<u8> {
    let mut out = width.to_le_bytes().to_vec();
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width as usize]);
    }
    out
}

/// A double in the old string form (type 3 scores).
pub(super) fn text_score(score: f64) -> Vec<u8> {
    if score == f64::INFINITY {
        return vec![254];
    }
    if score == f64::NEG_INFINITY {
        return vec![255];
    }
    if score.is_nan() {
        return vec![253];
    }
    let t = format!("{score:e}");
    let mut out = vec![t.len() as u8];
    out.extend_from_slice(t.as_bytes());
    out
}

/// A score as a listpack or ziplist element: an integer when it is one.
pub(super) fn score_item(score: f64, as_text: bool) -> It {
    if !as_text && score.fract() == 0.0 && score.abs() < 1e15 && score != 0.0 {
        return It::I(score as i64);
    }
    if score.is_infinite() {
        return s(if score > 0.0 { "inf" } else { "-inf" });
    }
    It::S(format!("{score:e}").into_bytes())
}

// Values by encoding (the bytes after the type byte and key).

pub(super) fn v_list(items: &[&[u8]]) -> Vec<u8> {
    let mut out = len(items.len() as u64);
    for i in items {
        out.extend(auto(i));
    }
    out
}

pub(super) fn v_zset3(pairs: &[(&[u8], f64)]) -> Vec<u8> {
    let mut out = len(pairs.len() as u64);
    for (m, score) in pairs {
        out.extend(auto(m));
        out.extend(text_score(*score));
    }
    out
}

pub(super) fn v_zset5(pairs: &[(&[u8], f64)]) -> Vec<u8> {
    let mut out = len(pairs.len() as u64);
    for (m, score) in pairs {
        out.extend(auto(m));
        out.extend_from_slice(&score.to_le_bytes());
    }
    out
}

pub(super) fn v_hash4(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = len(pairs.len() as u64);
    for (f, v) in pairs {
        out.extend(auto(f));
        out.extend(auto(v));
    }
    out
}

/// A compact encoding stored as one string.
pub(super) fn v_blob(b: &[u8]) -> Vec<u8> {
    auto(b)
}

pub(super) fn pairs_items(pairs: &[(&[u8], &[u8])]) -> Vec<It> {
    pairs.iter().flat_map(|(f, v)| [it(f), it(v)]).collect()
}

pub(super) fn scored_items(pairs: &[(&[u8], f64)], as_text: bool) -> Vec<It> {
    pairs
        .iter()
        .flat_map(|(m, sc)| [it(m), score_item(*sc, as_text)])
        .collect()
}

/// Type 14: a quicklist of ziplist nodes.
pub(super) fn v_quicklist(nodes: &[Vec<It>]) -> Vec<u8> {
    let mut out = len(nodes.len() as u64);
    for n in nodes {
        out.extend(auto(&ziplist(n)));
    }
    out
}

/// A node of a type-18 quicklist.
pub(super) enum Node {
    Packed(Vec<It>),
    Plain(Vec<u8>),
}

/// Type 18: listpack (container 2) and plain (container 1) nodes.
pub(super) fn v_quicklist2(nodes: &[Node]) -> Vec<u8> {
    let mut out = len(nodes.len() as u64);
    for n in nodes {
        match n {
            Node::Packed(items) => {
                out.extend(len(2));
                out.extend(auto(&listpack(items)));
            }
            Node::Plain(b) => {
                out.extend(len(1));
                out.extend(auto(b));
            }
        }
    }
    out
}

/// Type 22 (Redis 7.4 release candidates' hash with field TTLs): per
/// field its absolute TTL (0 none), field, value.
pub(super) fn v_hash22(fields: &[(&[u8], &[u8], u64)]) -> Vec<u8> {
    let mut out = len(fields.len() as u64);
    for (f, v, ttl) in fields {
        out.extend(len(*ttl));
        out.extend(auto(f));
        out.extend(auto(v));
    }
    out
}

/// Type 24 (Redis 7.4 hash with field TTLs): the minimum expiry, then
/// per field its TTL relative to it (+1; 0 none), field, value.
pub(super) fn v_hash24(fields: &[(&[u8], &[u8], u64)]) -> Vec<u8> {
    let min = fields
        .iter()
        .map(|f| f.2)
        .filter(|&t| t != 0)
        .min()
        .unwrap_or(0);
    let mut out = (min as i64).to_le_bytes().to_vec();
    out.extend(len(fields.len() as u64));
    for (f, v, ttl) in fields {
        out.extend(len(if *ttl == 0 { 0 } else { ttl - min + 1 }));
        out.extend(auto(f));
        out.extend(auto(v));
    }
    out
}

pub(super) fn ttl_triples(fields: &[(&[u8], &[u8], u64)]) -> Vec<It> {
    fields
        .iter()
        .flat_map(|(f, v, t)| [it(f), it(v), It::I(*t as i64)])
        .collect()
}

/// Type 23 (7.4 release candidates): a listpack of (field, value, TTL).
pub(super) fn v_hash23(fields: &[(&[u8], &[u8], u64)]) -> Vec<u8> {
    auto(&listpack(&ttl_triples(fields)))
}

/// Type 25 (7.4): the minimum expiry, then the listpack of triples.
pub(super) fn v_hash25(fields: &[(&[u8], &[u8], u64)]) -> Vec<u8> {
    let min = fields.iter().map(|f| f.2).filter(|&t| t != 0).min();
    let mut out = min.map_or(-1i64, |m| m as i64).to_le_bytes().to_vec();
    out.extend(auto(&listpack(&ttl_triples(fields))));
    out
}

/// A module value (type 7): the module id and module opcodes up to EOF.
pub(super) fn v_module() -> Vec<u8> {
    let mut out = len(0x1234_5678_9ABC_0001);
    out.extend(len(2)); // unsigned integer
    out.extend(len(77));
    out.extend(len(5)); // string
    out.extend(raw(b"module payload"));
    out.extend(len(4)); // double
    out.extend_from_slice(&1.5f64.to_le_bytes());
    out.extend(len(0)); // EOF
    out
}

/// A stream ID: (ms, seq).
pub(super) type Id = (u64, u64);
/// Field-value pairs.
pub(super) type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
/// A consumer group: name, last ID, pending (entry index, consumer index).
pub(super) type Group = (Vec<u8>, Id, Vec<(usize, usize)>);

/// A stream's content, written as type 15, 19 or 21.
pub(super) struct StreamData {
    /// ID and fields; all in one node with master fields of the first.
    pub(super) entries: Vec<(Id, Pairs)>,
    /// Entries of the node marked deleted (by index).
    pub(super) deleted: BTreeSet<usize>,
    pub(super) groups: Vec<Group>,
    pub(super) consumers: Vec<Vec<u8>>,
}

pub(super) fn stream_id_be(id: (u64, u64)) -> Vec<u8> {
    let mut v = id.0.to_be_bytes().to_vec();
    v.extend_from_slice(&id.1.to_be_bytes());
    v
}

pub(super) fn v_stream(st: &StreamData, t: u8) -> Vec<u8> {
    let master = st.entries[0].0;
    let master_fields: Vec<Vec<u8>> = st.entries[0].1.iter().map(|(f, _)| f.clone()).collect();
    let live = st.entries.len() - st.deleted.len();
    let mut items = vec![
        It::I(live as i64),
        It::I(st.deleted.len() as i64),
        It::I(master_fields.len() as i64),
    ];
    items.extend(master_fields.iter().map(|f| it(f)));
    items.push(It::I(0));
    for (i, (id, fields)) in st.entries.iter().enumerate() {
        let same = fields.len() == master_fields.len()
            && fields.iter().zip(&master_fields).all(|((f, _), m)| f == m);
        let flags = i64::from(st.deleted.contains(&i)) | if same { 2 } else { 0 };
        items.push(It::I(flags));
        items.push(It::I((id.0 - master.0) as i64));
        items.push(It::I(id.1.wrapping_sub(master.1) as i64));
        if same {
            items.extend(fields.iter().map(|(_, v)| it(v)));
            items.push(It::I(fields.len() as i64 + 3));
        } else {
            items.push(It::I(fields.len() as i64));
            for (f, v) in fields {
                items.push(it(f));
                items.push(it(v));
            }
            items.push(It::I(2 * fields.len() as i64 + 4));
        }
    }
    let mut out = len(1);
    out.extend(auto(&stream_id_be(master)));
    out.extend(auto(&listpack(&items)));
    let last = st.entries.last().expect("entries").0;
    out.extend(len(live as u64));
    out.extend(len(last.0));
    out.extend(len(last.1));
    if t >= kind::STREAM_LISTPACKS_2 {
        let first = (0..st.entries.len())
            .find(|i| !st.deleted.contains(i))
            .map_or((0, 0), |i| st.entries[i].0);
        out.extend(len(first.0));
        out.extend(len(first.1));
        let max_deleted = st
            .deleted
            .iter()
            .last()
            .map_or((0, 0), |&i| st.entries[i].0);
        out.extend(len(max_deleted.0));
        out.extend(len(max_deleted.1));
        out.extend(len(st.entries.len() as u64));
    }
    out.extend(len(st.groups.len() as u64));
    for (name, last_id, pending) in &st.groups {
        out.extend(auto(name));
        out.extend(len(last_id.0));
        out.extend(len(last_id.1));
        if t >= kind::STREAM_LISTPACKS_2 {
            out.extend(len(2));
        }
        out.extend(len(pending.len() as u64));
        for (i, (entry, _)) in pending.iter().enumerate() {
            out.extend(stream_id_be(st.entries[*entry].0));
            out.extend_from_slice(&(FUTURE_MS - 5 + i as i64).to_le_bytes());
            out.extend(len(1 + i as u64));
        }
        let owners: BTreeSet<usize> = pending.iter().map(|p| p.1).collect();
        out.extend(len(owners.len() as u64));
        for c in owners {
            out.extend(auto(&st.consumers[c]));
            out.extend_from_slice(&(FUTURE_MS - 100).to_le_bytes());
            if t >= kind::STREAM_LISTPACKS_3 {
                out.extend_from_slice(&(FUTURE_MS - 50).to_le_bytes());
            }
            let mine: Vec<usize> = pending.iter().filter(|p| p.1 == c).map(|p| p.0).collect();
            out.extend(len(mine.len() as u64));
            for e in mine {
                out.extend(stream_id_be(st.entries[e].0));
            }
        }
    }
    out
}

/// The CRC a file is finished with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Crc {
    Right,
    Zero,
    Wrong,
}

/// An RDB file being written; remembers where each value is.
pub(super) struct Rdb {
    pub(super) buf: Vec<u8>,
    pub(super) version: u16,
    /// (start, end) of each key's value bytes.
    pub(super) values: Vec<(usize, usize)>,
}

impl Rdb {
    pub(super) fn new(version: u16) -> Rdb {
        Rdb {
            buf: format!("REDIS{version:04}").into_bytes(),
            version,
            values: Vec::new(),
        }
    }

    pub(super) fn raw(&mut self, b: &[u8]) -> &mut Rdb {
        self.buf.extend_from_slice(b);
        self
    }

    pub(super) fn aux(&mut self, name: &str, value: &[u8]) -> &mut Rdb {
        self.buf.push(opcode::AUX);
        self.buf.extend(auto(name.as_bytes()));
        self.buf.extend(auto(value));
        self
    }

    pub(super) fn select(&mut self, db: u64) -> &mut Rdb {
        self.buf.push(opcode::SELECTDB);
        self.buf.extend(len(db));
        self
    }

    pub(super) fn resize(&mut self, keys: u64, expiring: u64) -> &mut Rdb {
        self.buf.push(opcode::RESIZEDB);
        self.buf.extend(len(keys));
        self.buf.extend(len(expiring));
        self
    }

    pub(super) fn expire_ms(&mut self, at: i64) -> &mut Rdb {
        self.buf.push(opcode::EXPIRETIME_MS);
        self.buf.extend_from_slice(&at.to_le_bytes());
        self
    }

    pub(super) fn expire_s(&mut self, at: i32) -> &mut Rdb {
        self.buf.push(opcode::EXPIRETIME);
        self.buf.extend_from_slice(&at.to_le_bytes());
        self
    }

    /// A key record with the key stored as written by `key` (raw bytes,
    /// an integer or LZF form).
    pub(super) fn record(&mut self, t: u8, key: &[u8], value: &[u8]) -> &mut Rdb {
        self.buf.push(t);
        self.buf.extend_from_slice(key);
        let start = self.buf.len();
        self.buf.extend_from_slice(value);
        self.values.push((start, self.buf.len()));
        self
    }

    /// A key record, the key as Redis writes it.
    pub(super) fn key(&mut self, t: u8, key: &[u8], value: &[u8]) -> &mut Rdb {
        self.record(t, &auto(key), value)
    }

    pub(super) fn finish_with(&self, crc: Crc) -> Vec<u8> {
        let mut out = self.buf.clone();
        out.push(opcode::EOF);
        if self.version >= 5 {
            let sum = match crc {
                Crc::Right => crc64(&out),
                Crc::Zero => 0,
                Crc::Wrong => crc64(&out) ^ 0x10,
            };
            out.extend_from_slice(&sum.to_le_bytes());
        }
        out
    }

    pub(super) fn finish(&self) -> Vec<u8> {
        self.finish_with(Crc::Right)
    }
}

/// Recomputes the CRC of a whole file (after EOF), when it has one.
pub(super) fn fix_crc(data: &mut [u8]) {
    let n = data.len();
    if n >= 18 && data[n - 9] == opcode::EOF {
        let sum = crc64(&data[..n - 8]);
        data[n - 8..].copy_from_slice(&sum.to_le_bytes());
    }
}

pub(super) fn write(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, data).expect("writing a test file");
    path
}
