//! One rule across the tools (issue 32): `info`, `keys`, `memory`,
//! `export`, `diff`, `hozon-repair check` and the server's loader agree
//! on whether a file is damaged and where.
//!
//! Inputs: every RDB fixture; damaged copies of each (cuts and flipped
//! bits at fixed positions, with the CRC left wrong and with it
//! recomputed, so that damage inside a value is not caught by the
//! checksum alone); the hand-made hostile and refused files the loader
//! tests use (`testkit/src/rdb_files.rs`); files with the damage of
//! Redis 7.0.15's own corrupt assets (`tests/assets/corrupt_ziplist.rdb`,
//! `corrupt_empty_keys.rdb`), generated here; damage inside values under
//! an intact CRC (duplicates, a bad intset, a bad LZF string, a stream
//! whose length lies); a key stored twice; a dump.hoz and damaged copies.
//!
//! The server's verdict comes from the engine's own startup (the code
//! hozon-server runs): `Engine::open` on a directory holding the file.
//! Each tool's offset is the first "offset N" its message names (`info`
//! and `memory`: the first problem's `offset`; `hozon-repair check`: the
//! first problem's detail, else its start). `hozon-repair check` reports
//! a dump.hoz's damage as byte ranges (a block, the frame): there the
//! loader's offset must lie in one of them.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use hozon::config::SavePoint;
use hozon::persist::io::RealIo;
use hozon::rdb::writer::put_len;
use hozon::rdb::{crc64, kind, listpack};
use hozon::{Config, Engine};

use testkit::rdb_files;

use crate::json;

const INSPECT: &str = env!("CARGO_BIN_EXE_hozon-inspect");
const REPAIR: &str = env!("CARGO_BIN_EXE_hozon-repair");

/// A tool's verdict: None = the file is fine; Some(offset) = damaged
/// there (None inside when the tool named no offset).
type Verdict = Option<Option<u64>>;

/// A tool's name and its verdict.
type Named = (&'static str, Verdict);

/// The first "offset N" in `text`.
fn first_offset(text: &str) -> Option<u64> {
    let at = text.find("offset ")?;
    let digits: String = text[at + 7..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// What hozon-server's startup does with `data` as its snapshot.
fn server_verdict(dir: &Path, name: &str, data: &[u8]) -> Verdict {
    let sub = dir.join("server");
    let _ = std::fs::remove_dir_all(&sub);
    std::fs::create_dir_all(&sub).expect("mkdir");
    std::fs::write(sub.join(name), data).expect("write");
    let mut config = Config::in_memory();
    config.dir = sub.clone();
    config.appendonly = false;
    // Many databases: the default 16 is a setting, and the tools take
    // only a SELECTDB beyond every configuration (2^31 - 1) for damage.
    // (No file here selects a database between 2^16 and that.)
    config.databases = 1 << 16;
    config.save = vec![SavePoint {
        seconds: 3600,
        changes: 1,
    }];
    let verdict = match Engine::open_with_io(config, Arc::new(RealIo)) {
        Ok(_) => None,
        // Intact bytes holding a function library that does not compile
        // (a flipped bit in its code under a recomputed CRC is such a
        // library): the loader refuses it as Redis does, but the file is
        // not damaged, which is what the tools judge. That refusal is
        // tested in tests/persistence/functions.rs.
        Err(hozon::Error::Unloadable(_)) => None,
        Err(e) => Some(first_offset(&e.to_string())),
    };
    let _ = std::fs::remove_dir_all(&sub);
    verdict
}

fn run(exe: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(exe).args(args).output().expect("run a tool");
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("{exe} {args:?} died by a signal"));
    (
        code,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A report document's verdict: its status and first problem.
fn doc_verdict(tool: &str, code: i32, out: &str, err: &str) -> Verdict {
    let doc = json::parse(out).unwrap_or_else(|e| panic!("{tool}: {e}\n{out}\n{err}"));
    let problems = doc.at("problems").arr();
    match (code, problems.first()) {
        (0, None) => None,
        (1, Some(p)) => Some(Some(p.at("offset").u64())),
        _ => panic!(
            "{tool}: exit {code} with {} problems\n{out}\n{err}",
            problems.len()
        ),
    }
}

/// An exit code and stderr's verdict (exit 1 = damaged).
fn exit_verdict(tool: &str, code: i32, err: &str) -> Verdict {
    match code {
        0 => None,
        1 => Some(first_offset(err)),
        _ => panic!("{tool}: exit {code}: {err}"),
    }
}

/// Every tool's verdict on the file at `path`, and the byte ranges of
/// `hozon-repair check`'s problems.
fn tool_verdicts(path: &Path) -> (Vec<Named>, Vec<(u64, u64)>) {
    let p = path.to_str().expect("UTF-8 path");
    let mut out = Vec::new();
    let (code, stdout, err) = run(INSPECT, &["info", "--json", p]);
    out.push(("info", doc_verdict("info", code, &stdout, &err)));
    let (code, _, err) = run(INSPECT, &["keys", "--json", p]);
    out.push(("keys", exit_verdict("keys", code, &err)));
    let (code, stdout, err) = run(INSPECT, &["memory", "--json", p]);
    out.push(("memory", doc_verdict("memory", code, &stdout, &err)));
    let (code, _, err) = run(INSPECT, &["export", "--format", "jsonl", p]);
    out.push(("export", exit_verdict("export", code, &err)));
    let (code, _, err) = run(INSPECT, &["diff", p, p]);
    out.push(("diff", exit_verdict("diff", code, &err)));
    let (code, stdout, err) = run(REPAIR, &["check", "--json", p]);
    let doc = json::parse(&stdout).unwrap_or_else(|e| panic!("repair: {e}\n{stdout}\n{err}"));
    let problems = doc.at("problems").arr();
    let detail = problems.first().map(|f| f.at("detail").str().to_string());
    let repair = match (code, problems.first()) {
        (0, None) => None,
        (1, Some(first)) => {
            Some(first_offset(first.at("detail").str()).or(Some(first.at("start").u64())))
        }
        _ => panic!("repair check: exit {code}\n{stdout}\n{err}"),
    };
    out.push(("hozon-repair check", repair));
    if std::env::var_os("AGREEMENT_VERBOSE").is_some() {
        eprintln!("{p}: hozon-repair check: {detail:?}");
    }
    let ranges = problems
        .iter()
        .map(|p| (p.at("start").u64(), p.at("end").u64()))
        .collect();
    (out, ranges)
}

/// Runs every tool on every case; returns the disagreements.
fn disagreements(cases: &[(String, &'static str, Vec<u8>)]) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut found = Vec::new();
    for (what, name, data) in cases {
        let server = server_verdict(dir.path(), name, data);
        let path = dir.path().join(name);
        std::fs::write(&path, data).expect("write");
        let (verdicts, ranges) = tool_verdicts(&path);
        for (tool, verdict) in verdicts {
            // hozon-repair reports a dump.hoz's damage as regions (a
            // block, the frame): the loader's offset must lie in one.
            if tool == "hozon-repair check" && name.ends_with(".hoz") {
                let inside = match server {
                    Some(Some(at)) => ranges.iter().any(|&(s, e)| s <= at && at <= e),
                    _ => true,
                };
                if verdict.is_some() == server.is_some() && inside {
                    continue;
                }
            }
            if verdict != server {
                found.push(format!(
                    "{what}: {tool} says {verdict:?}, the server's loader {server:?}"
                ));
            }
        }
    }
    found
}

fn assert_agree(cases: &[(String, &'static str, Vec<u8>)]) {
    let found = disagreements(cases);
    assert!(
        found.is_empty(),
        "{} disagreements over {} files:\n{}",
        found.len(),
        cases.len(),
        found.join("\n")
    );
}

// ---------------------------------------------------------------------------
// Files.

fn string(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_len(&mut out, s.len() as u64);
    out.extend_from_slice(s);
    out
}

/// A key record.
fn record(value_type: u8, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![value_type];
    out.extend(string(key));
    out.extend_from_slice(value);
    out
}

/// `REDIS00vv`, the body, EOF, then the CRC (or zero: not computed).
fn rdb(version: u16, body: &[u8], crc: bool) -> Vec<u8> {
    let mut out = format!("REDIS{version:04}").into_bytes();
    out.extend_from_slice(body);
    out.push(0xFF);
    let sum = if crc { crc64(&out) } else { 0 };
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// A file's CRC recomputed (versions 5 and later), so that damage inside
/// it is not caught by the checksum alone.
fn with_fixed_crc(mut data: Vec<u8>) -> Option<Vec<u8>> {
    let version: u16 = std::str::from_utf8(data.get(5..9)?).ok()?.parse().ok()?;
    if version < 5 || data.len() < 18 || data[data.len() - 9] != 0xFF {
        return None;
    }
    let body = data.len() - 8;
    let sum = crc64(&data[..body]);
    data[body..].copy_from_slice(&sum.to_le_bytes());
    Some(data)
}

fn listpack_of(items: &[&[u8]]) -> Vec<u8> {
    let mut lp = listpack::Builder::new();
    for item in items {
        lp.push_str(item);
    }
    lp.finish()
}

/// An empty ziplist (11 bytes: sizes, no entries, the end byte).
fn empty_ziplist() -> Vec<u8> {
    let mut z = Vec::new();
    z.extend_from_slice(&11u32.to_le_bytes());
    z.extend_from_slice(&10u32.to_le_bytes());
    z.extend_from_slice(&0u16.to_le_bytes());
    z.push(0xFF);
    z
}

/// A ziplist of short strings.
fn ziplist_of(items: &[&[u8]]) -> Vec<u8> {
    let mut entries = Vec::new();
    let mut prev = 0usize;
    let mut last = 0usize;
    for item in items {
        assert!(item.len() < 64 && prev < 254);
        last = entries.len();
        let start = entries.len();
        entries.push(prev as u8);
        entries.push(item.len() as u8);
        entries.extend_from_slice(item);
        prev = entries.len() - start;
    }
    let total = 10 + entries.len() + 1;
    let mut z = Vec::new();
    z.extend_from_slice(&(total as u32).to_le_bytes());
    z.extend_from_slice(&((10 + last) as u32).to_le_bytes());
    z.extend_from_slice(&(items.len() as u16).to_le_bytes());
    z.extend_from_slice(&entries);
    z.push(0xFF);
    z
}

/// The damage of Redis 7.0.15's `tests/assets/corrupt_ziplist.rdb`: an
/// RDB 7 file without a checksum whose strings are intact, but one
/// record's type byte says HASH_ZIPLIST over a 5-byte string (a ziplist
/// shorter than its 11-byte minimum).
fn like_corrupt_ziplist() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend([0xFE, 0x00]);
    for i in 0..20 {
        body.extend(record(
            kind::STRING,
            format!("key:{i:012}").as_bytes(),
            &string(b"xxxxx"),
        ));
    }
    let mut quicklist = vec![1u8];
    quicklist.extend(string(&ziplist_of(&[&b"xxxxx"[..]; 5])));
    body.extend(record(kind::LIST_QUICKLIST, b"mylist", &quicklist));
    body.extend(record(
        kind::HASH_ZIPLIST,
        b"key:000000000091",
        &string(b"xxxxx"),
    ));
    for i in 100..110 {
        body.extend(record(
            kind::STRING,
            format!("key:{i:012}").as_bytes(),
            &string(b"xxxxx"),
        ));
    }
    rdb(7, &body, false)
}

/// The content of Redis 7.0.15's `tests/assets/corrupt_empty_keys.rdb`:
/// an RDB 10 file with an intact checksum holding only empty collections
/// of every kind (plain, ziplist, listpack, quicklist without nodes and
/// with one empty node).
fn like_corrupt_empty_keys(with_a_key: bool) -> Vec<u8> {
    let mut body = vec![0xFE, 0x00];
    body.extend(record(kind::SET, b"set", &[0]));
    body.extend(record(kind::HASH, b"hash", &[0]));
    body.extend(record(
        kind::LIST_ZIPLIST,
        b"list_ziplist",
        &string(&empty_ziplist()),
    ));
    body.extend(record(kind::ZSET, b"zset", &[0]));
    body.extend(record(
        kind::ZSET_LISTPACK,
        b"zset_listpack",
        &string(&listpack_of(&[])),
    ));
    body.extend(record(
        kind::HASH_LISTPACK,
        b"hash_ziplist",
        &string(&listpack_of(&[])),
    ));
    body.extend(record(kind::LIST_QUICKLIST, b"list_quicklist", &[0]));
    body.extend(record(
        kind::ZSET_ZIPLIST,
        b"zset_ziplist",
        &string(&empty_ziplist()),
    ));
    let mut one_empty_node = vec![1u8];
    one_empty_node.extend(string(&empty_ziplist()));
    body.extend(record(
        kind::LIST_QUICKLIST,
        b"list_quicklist_empty_ziplist",
        &one_empty_node,
    ));
    if with_a_key {
        body.extend(record(kind::STRING, b"kept", &string(b"v")));
    }
    rdb(10, &body, true)
}

/// Damage inside values under an intact CRC.
fn value_damage() -> Vec<(String, Vec<u8>)> {
    let lzf_bad = {
        // An LZF string whose back reference points before the output.
        let mut v = vec![0xC3];
        put_len(&mut v, 4);
        put_len(&mut v, 30);
        v.extend_from_slice(&[0x20, 0x10, b'a', b'b']);
        v
    };
    let intset_unsorted = {
        let mut s = Vec::new();
        s.extend_from_slice(&2u32.to_le_bytes());
        s.extend_from_slice(&3u32.to_le_bytes());
        for v in [5i16, 3, 9] {
            s.extend_from_slice(&v.to_le_bytes());
        }
        string(&s)
    };
    let good = record(kind::STRING, b"before", &string(b"v"));
    let after = record(kind::STRING, b"after", &string(b"w"));
    let mut cases = vec![
        (
            "hash listpack with a duplicate field".to_string(),
            record(
                kind::HASH_LISTPACK,
                b"h",
                &string(&listpack_of(&[b"f", b"1", b"f", b"2"])),
            ),
        ),
        (
            "set listpack with a duplicate member".to_string(),
            record(
                kind::SET_LISTPACK,
                b"s",
                &string(&listpack_of(&[b"a", b"a"])),
            ),
        ),
        (
            "zset listpack with an odd element count".to_string(),
            record(
                kind::ZSET_LISTPACK,
                b"z",
                &string(&listpack_of(&[b"a", b"1", b"b"])),
            ),
        ),
        (
            "zset listpack with a score that is not a number".to_string(),
            record(
                kind::ZSET_LISTPACK,
                b"z",
                &string(&listpack_of(&[b"a", b"x"])),
            ),
        ),
        (
            "plain hash with a duplicate field".to_string(),
            record(
                kind::HASH,
                b"h",
                &[
                    &[2u8][..],
                    &string(b"f"),
                    &string(b"1"),
                    &string(b"f"),
                    &string(b"2"),
                ]
                .concat(),
            ),
        ),
        (
            "plain set with a duplicate member".to_string(),
            record(
                kind::SET,
                b"s",
                &[&[2u8][..], &string(b"m"), &string(b"m")].concat(),
            ),
        ),
        (
            "string with damaged LZF data".to_string(),
            record(kind::STRING, b"lzf", &lzf_bad),
        ),
        (
            "intset not in order".to_string(),
            record(kind::SET_INTSET, b"i", &intset_unsorted),
        ),
        (
            "ziplist list shorter than a ziplist".to_string(),
            record(kind::LIST_ZIPLIST, b"l", &string(b"xxxxx")),
        ),
        (
            "quicklist node with an unknown container".to_string(),
            record(
                kind::LIST_QUICKLIST_2,
                b"q",
                &[&[1u8, 7][..], &string(&listpack_of(&[b"a"]))].concat(),
            ),
        ),
    ];
    // A stream whose length says 2 while its one node holds 1 entry.
    let mut lp = listpack::Builder::new();
    for n in [1i64, 0, 1] {
        lp.push_int(n);
    }
    lp.push_str(b"f");
    lp.push_int(0);
    for n in [2i64, 0, 0] {
        lp.push_int(n);
    }
    lp.push_str(b"v");
    lp.push_int(4);
    let mut master_id = [0u8; 16];
    master_id[7] = 1;
    let mut stream = vec![1u8];
    stream.extend(string(&master_id));
    stream.extend(string(&lp.finish()));
    // length 2, last ID 1-0, first ID 1-0, max deleted 0-0, added 1, no groups
    stream.extend([2, 1, 0, 1, 0, 0, 0, 1, 0]);
    cases.push((
        "stream whose length disagrees with its entries".to_string(),
        record(kind::STREAM_LISTPACKS_2, b"st", &stream),
    ));
    cases
        .into_iter()
        .map(|(what, rec)| {
            let body = [&[0xFE, 0][..], &good, &rec, &after].concat();
            (what, rdb(10, &body, true))
        })
        .collect()
}

fn fixture_files() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/rdb");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("fixtures/rdb")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "rdb"))
        .map(|p| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, std::fs::read(&p).expect("fixture"))
        })
        .collect();
    files.sort();
    files
}

/// Damaged copies of `data`: cuts and flipped bits at fixed positions,
/// each flip also with its CRC recomputed.
fn damaged_copies(name: &str, data: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let len = data.len();
    for cut in [len / 3, len / 2, len - 9, len - 3] {
        if cut > 9 {
            out.push((format!("{name} cut at {cut}"), data[..cut].to_vec()));
        }
    }
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d ^ len as u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..4 {
        let at = 9 + (next() % (len.saturating_sub(18).max(1)) as u64) as usize;
        let mut bad = data.to_vec();
        bad[at] ^= 1 << (next() % 8);
        if let Some(fixed) = with_fixed_crc(bad.clone()) {
            out.push((format!("{name} bit flipped at {at}, CRC recomputed"), fixed));
        }
        out.push((format!("{name} bit flipped at {at}"), bad));
    }
    out
}

fn rdb_cases() -> Vec<(String, &'static str, Vec<u8>)> {
    let mut cases = Vec::new();
    let mut push = |what: String, data: Vec<u8>| cases.push((what, "dump.rdb", data));
    for (name, data) in fixture_files() {
        for (what, bad) in damaged_copies(&name, &data) {
            push(what, bad);
        }
        push(name, data);
    }
    push("like corrupt_ziplist.rdb".into(), like_corrupt_ziplist());
    push(
        "like corrupt_empty_keys.rdb".into(),
        like_corrupt_empty_keys(false),
    );
    push(
        "like corrupt_empty_keys.rdb, and a key".into(),
        like_corrupt_empty_keys(true),
    );
    for (what, data) in value_damage() {
        push(what, data);
    }
    let twice = [
        &[0xFE, 0][..],
        &record(kind::STRING, b"k", &string(b"1")),
        &record(kind::STRING, b"other", &string(b"2")),
        &record(kind::STRING, b"k", &string(b"3")),
    ]
    .concat();
    push("a key stored twice".into(), rdb(10, &twice, true));
    for (what, data, _) in rdb_files::hostile_files() {
        push(format!("hostile: {what}"), data);
    }
    for (what, data, _) in rdb_files::refused_files() {
        push(format!("refused: {what}"), data);
    }
    let mut trailing = rdb(10, &record(kind::STRING, b"k", &string(b"v")), true);
    trailing.extend_from_slice(b"junk");
    push("bytes after the CRC".into(), trailing);
    cases
}

#[test]
fn every_tool_agrees_with_the_loader_on_rdb_files() {
    let cases = rdb_cases();
    assert!(cases.len() > 200, "{} cases", cases.len());
    assert_agree(&cases);
}

#[test]
fn every_tool_agrees_with_the_loader_on_dump_hoz_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dump = std::fs::read(crate::saved_dump(dir.path())).expect("dump");
    let mut cases = vec![("a saved dump.hoz".to_string(), "dump.hoz", dump.clone())];
    for (what, bad) in damaged_copies("dump.hoz", &dump) {
        if !what.contains("CRC recomputed") {
            cases.push((what, "dump.hoz", bad));
        }
    }
    assert_agree(&cases);
}

/// `info` against the loader with one bit flipped in every byte of a
/// saved dump.hoz (the bit varies with the offset), so no region of the
/// format (header, block headers, payloads, footer, trailer) is left to
/// chance: a flip in the trailer once made `info` report the missing end
/// first, where the loader reports the damaged trailer.
#[test]
fn info_agrees_with_the_loader_at_every_byte_of_a_dump_hoz() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dump = std::fs::read(crate::saved_dump(dir.path())).expect("dump");
    let work = tempfile::tempdir().expect("tempdir");
    let path = work.path().join("dump.hoz");
    let p = path.to_str().expect("UTF-8 path");
    let mut found = Vec::new();
    for at in 0..dump.len() {
        let mut bad = dump.clone();
        bad[at] ^= 1 << (at % 8);
        let server = server_verdict(work.path(), "dump.hoz", &bad);
        std::fs::write(&path, &bad).expect("write");
        let (code, stdout, err) = run(INSPECT, &["info", "--json", p]);
        let info = doc_verdict("info", code, &stdout, &err);
        if info != server {
            found.push(format!(
                "bit flipped at {at}: info says {info:?}, the loader {server:?}"
            ));
        }
    }
    assert!(
        found.is_empty(),
        "{} of {} flips disagree:\n{}",
        found.len(),
        dump.len(),
        found.join("\n")
    );
}
