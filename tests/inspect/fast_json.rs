//! `export --json` / `--format json` of RDB files: the fast path
//! (tools/inspect/export/rdb_json.rs, JSON written straight from the encodings)
//! against the value-model path (the hidden `--value-model`). Both must
//! give byte-identical stdout, identical stderr and the same exit code for
//! every input, damaged ones included: on every fixture, on hand-built
//! files of every value encoding the reader knows (and value-level damage
//! each decoder must reject), on random keyspaces and damaged copies of
//! them. Both paths are also pinned to exact expected text (a hand-built
//! file) and to a model of the generated data, so a comparison of two
//! equally wrong outputs fails too.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hozon::rdb::writer::{put_len, Encoder};
use hozon::rdb::{crc64, intset, kind, lzf, opcode};
use hozon::types::num::parse_i64;
use hozon::{Config, Engine, Reply};

use super::{fixtures, rdb_fixtures, BIN};

/// An expiry long past (2001-09-09), for `--skip-expired` and dropped
/// hash fields.
const PAST_MS: i64 = 1_000_000_000_000;
/// An expiry far ahead (2100-01-01).
const FUTURE_MS: i64 = 4_102_444_800_000;

// ---------------------------------------------------------------------------
// Running both paths.

/// What one run of the inspector gave.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Out {
    code: i32,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// How long one run may take before it counts as hung (the largest input
/// here takes well under a second).
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs the inspector with `args`, `stdin` (if any) on its standard input.
/// A run that does not end within [`RUN_TIMEOUT`] is killed (our own
/// child, by its handle) and fails the test.
fn run(args: &[&str], stdin: Option<&[u8]>) -> Out {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running hozon-inspect");
    // Threads feed stdin and drain the output pipes meanwhile.
    let writer = stdin.map(|data| {
        let mut pipe = child.stdin.take().expect("stdin pipe");
        let data = data.to_vec();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        })
    });
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout pipe")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr pipe")));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for hozon-inspect") {
            break status;
        }
        if started.elapsed() > RUN_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "hozon-inspect {} hung (killed after {RUN_TIMEOUT:?})",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    if let Some(w) = writer {
        w.join().expect("stdin writer");
    }
    let stdout = stdout.join().expect("stdout reader");
    let stderr = stderr.join().expect("stderr reader");
    let code = status.code().unwrap_or_else(|| {
        panic!(
            "hozon-inspect {} died by a signal: {status:?}\n{}",
            args.join(" "),
            String::from_utf8_lossy(&stderr)
        )
    });
    Out {
        code,
        stdout,
        stderr,
    }
}

/// The output format flags compared: JSON Lines (the `--json` default)
/// and the one-array document.
const FORMATS: [&[&str]; 2] = [&["--json"], &["--format", "json"]];

/// The args of one export run: format, filters, the input.
fn export_args<'a>(format: &[&'a str], filters: &[&'a str], input: &'a str) -> Vec<&'a str> {
    let mut args = vec!["export"];
    args.extend_from_slice(format);
    args.extend_from_slice(filters);
    args.push(input);
    args
}

/// Runs the fast path and `--value-model` with `args` (an export command
/// line); Err describes how they differ.
fn same_both_ways(args: &[&str], stdin: Option<&[u8]>) -> Result<Out, String> {
    let fast = run(args, stdin);
    let mut model_args = args.to_vec();
    model_args.insert(1, "--value-model");
    let model = run(&model_args, stdin);
    if fast == model {
        Ok(model)
    } else {
        Err(describe(args, &fast, &model))
    }
}

/// Both paths in both formats with `filters` on the file at `path`; Ok
/// gives the value-model JSON Lines run.
fn agree(path: &Path, filters: &[&str]) -> Result<Out, String> {
    let input = path.to_str().expect("test paths are UTF-8");
    let mut first = None;
    for format in FORMATS {
        let out = same_both_ways(&export_args(format, filters, input), None)?;
        first.get_or_insert(out);
    }
    Ok(first.expect("two formats"))
}

/// [`agree`], failing the test on a difference.
fn assert_agree(path: &Path, filters: &[&str]) -> Out {
    agree(path, filters).unwrap_or_else(|e| panic!("{e}"))
}

fn shorten(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if text.chars().count() > 600 {
        let head: String = text.chars().take(600).collect();
        format!("{head}... ({} bytes)", bytes.len())
    } else {
        text.into_owned()
    }
}

/// How two runs differ: exit codes, stderr, the first differing line.
fn describe(args: &[&str], fast: &Out, model: &Out) -> String {
    let mut text = format!(
        "hozon-inspect {}: the fast path and --value-model differ\n",
        args.join(" ")
    );
    text += &format!(
        "  exit code: fast {}, value model {}\n",
        fast.code, model.code
    );
    if fast.stderr != model.stderr {
        text += &format!(
            "  stderr, fast:        {}\n  stderr, value model: {}\n",
            shorten(&fast.stderr),
            shorten(&model.stderr)
        );
    }
    if fast.stdout != model.stdout {
        let a: Vec<&[u8]> = fast.stdout.split(|&b| b == b'\n').collect();
        let b: Vec<&[u8]> = model.stdout.split(|&b| b == b'\n').collect();
        let i = (0..a.len().max(b.len()))
            .find(|&i| a.get(i) != b.get(i))
            .unwrap_or(0);
        text += &format!(
            "  stdout: {} lines (fast) vs {} (value model); first difference at line {}:\n    fast:        {}\n    value model: {}\n",
            a.len(),
            b.len(),
            i + 1,
            a.get(i).map_or("(none)".into(), |l| shorten(l)),
            b.get(i).map_or("(none)".into(), |l| shorten(l)),
        );
    }
    text
}

/// Keeps a failing input where a person can look at it.
fn keep_failing_input(name: &str, data: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fast_json_failures");
    std::fs::create_dir_all(&dir).expect("failure directory");
    let path = dir.join(name);
    std::fs::write(&path, data).expect("writing the failing input");
    path
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("the inspector writes ASCII")
}

mod pieces;
use pieces::*;

// ---------------------------------------------------------------------------
// The fixtures.

/// Filters tried on each file (with both formats).
const FILTER_SETS: &[&[&str]] = &[
    &[],
    &["--db", "0"],
    &["--db", "1"],
    &["--type", "hash"],
    &["--type", "zset"],
    &["--type", "set"],
    &["--type", "list"],
    &["--type", "string"],
    &["--type", "stream"],
    &["--match", "*a*"],
    &["--match", "[h-z]*"],
    &["--skip-expired"],
    &["--skip-expired", "--type", "string", "--match", "*"],
];

#[test]
fn every_rdb_fixture_gives_the_same_output_both_ways_with_every_filter() {
    let names = rdb_fixtures();
    assert!(names.len() >= 20, "fixtures found: {names:?}");
    for path in &names {
        for filters in FILTER_SETS {
            assert_agree(path, filters);
        }
        // `--format jsonl` names the `--json` default; stdin is read, not
        // mapped.
        let input = path.to_str().expect("UTF-8 path");
        same_both_ways(&["export", "--format", "jsonl", input], None)
            .unwrap_or_else(|e| panic!("{e}"));
        let data = std::fs::read(path).expect("fixture");
        for format in FORMATS {
            same_both_ways(&export_args(format, &[], "-"), Some(&data))
                .unwrap_or_else(|e| panic!("stdin: {e}"));
        }
    }
    // The comparison sees real keys: the fixtures are not all empty.
    let out = assert_agree(&fixtures().join("hashes.rdb"), &[]);
    assert_eq!(out.code, 0);
    assert!(text(&out.stdout).lines().count() > 3);
}

#[test]
fn damaged_copies_of_the_fixtures_give_the_same_output_both_ways() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng::seeded(0xF1_C7_0E);
    for path in rdb_fixtures() {
        let data = std::fs::read(&path).expect("fixture");
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("x");
        for i in 0..4 {
            let mut copy = data.clone();
            let at = rng.below(copy.len() as u64) as usize;
            match i {
                0 => copy.truncate(at.max(9)),
                1 => copy[at] ^= 1 << rng.below(8),
                _ => {
                    copy[at] = rng.next() as u8;
                    fix_crc(&mut copy);
                }
            }
            let p = write(dir.path(), &format!("{name}.{i}"), &copy);
            if let Err(e) = agree(&p, &[]) {
                let kept = keep_failing_input(&format!("{name}.{i}.rdb"), &copy);
                panic!("{e}input kept at {}", kept.display());
            }
        }
    }
}

mod encodings;

// ---------------------------------------------------------------------------
// Differences found (reported; ignored until fixed): the fast path
// disagrees with the value model, or both print the wrong text.

#[test]
fn function_library_with_undecodable_lzf_agrees() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut f = Rdb::new(10);
    f.key(kind::STRING, b"before", &raw(b"v1"));
    f.raw(&[opcode::FUNCTION2, 0xC3, 3, 30, 0xFF, 0xFF, 0xFF]);
    f.key(kind::STRING, b"after", &raw(b"v2"));
    let path = write(dir.path(), "func_lzf.rdb", &f.finish());
    let out = assert_agree(&path, &[]);
    assert_eq!(out.code, 1);
}

#[test]
fn selectdb_of_the_largest_number_agrees() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut f = Rdb::new(10);
    f.key(kind::STRING, b"before", &raw(b"v1"));
    f.raw(&[opcode::SELECTDB, 0x81])
        .raw(&u64::MAX.to_be_bytes());
    f.key(kind::STRING, b"after", &raw(b"v2"));
    let path = write(dir.path(), "db_max.rdb", &f.finish());
    let out = assert_agree(&path, &[]);
    assert_eq!(out.code, 1);
}

#[test]
fn database_numbers_beyond_every_configuration_are_damage() {
    // No server has 2^63 databases (nor more than 2^31 - 1): both paths
    // refuse the file, as the loader does, at the SELECTDB.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut f = Rdb::new(10);
    f.raw(&[opcode::SELECTDB, 0x81])
        .raw(&(1u64 << 63).to_be_bytes());
    f.key(kind::STRING, b"k", &raw(b"v"));
    let path = write(dir.path(), "db_big.rdb", &f.finish());
    let out = assert_agree(&path, &[]);
    assert_eq!(out.code, 1);
    assert!(text(&out.stdout).is_empty());
    let err = text(&out.stderr);
    assert!(err.contains("offset 9"), "{err}");
}

// ---------------------------------------------------------------------------
// Both paths pinned to exact text.

#[test]
fn both_paths_print_exactly_the_expected_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut f = Rdb::new(10);
    f.aux("redis-ver", b"7.0.15");
    f.select(0);
    f.key(kind::STRING, b"s", &raw(b"v\"\\\x01\xff"));
    f.expire_ms(FUTURE_MS)
        .key(kind::STRING, b"n", &int_encoded(-300));
    f.key(
        kind::LIST_ZIPLIST,
        b"l",
        &v_blob(&ziplist(&[s("a"), It::I(1), It::I(-70000)])),
    );
    f.key(
        kind::LIST_QUICKLIST_2,
        b"q",
        &v_quicklist2(&[
            Node::Packed(vec![s("x"), It::I(2)]),
            Node::Plain(b"big".to_vec()),
        ]),
    );
    f.key(
        kind::SET_INTSET,
        b"i",
        &v_blob(&intset::encode(&[-1, 9, 10])),
    );
    f.key(
        kind::SET_LISTPACK,
        b"sl",
        &v_blob(&listpack(&[s("b"), It::I(100), s("a")])),
    );
    f.key(
        kind::HASH_LISTPACK,
        b"h",
        &v_blob(&listpack(&[s("b"), It::I(2), s("a"), s("x\ty")])),
    );
    f.key(
        kind::HASH_ZIPMAP,
        b"zm",
        &v_blob(&zipmap(&[(b"k".to_vec(), b"v".to_vec())], 0)),
    );
    f.key(
        kind::ZSET_LISTPACK,
        b"z",
        &v_blob(&listpack(&[
            s("m"),
            s("1.5"),
            s("n"),
            s("inf"),
            s("o"),
            It::I(-2),
            s("a"),
            s("1.5"),
        ])),
    );
    f.key(
        kind::ZSET_2,
        b"z2",
        &v_zset5(&[(b"t", 5e-324), (b"u", 1e17), (b"v", 1e-5)]),
    );
    f.key(kind::MODULE_2, b"mod", &v_module());
    f.key(kind::LIST, b"empty", &len(0));
    f.select(2);
    f.expire_ms(PAST_MS).key(kind::STRING, b"old", &raw(b"x"));
    let path = write(dir.path(), "golden.rdb", &f.finish());
    let objects = [
        r#"{"db":0,"key":"s","type":"string","expire_ms":null,"value":"v\"\\\\\\x01\\xff"}"#,
        r#"{"db":0,"key":"n","type":"string","expire_ms":4102444800000,"value":"-300"}"#,
        r#"{"db":0,"key":"l","type":"list","expire_ms":null,"value":["a","1","-70000"]}"#,
        r#"{"db":0,"key":"q","type":"list","expire_ms":null,"value":["x","2","big"]}"#,
        r#"{"db":0,"key":"i","type":"set","expire_ms":null,"value":["-1","10","9"]}"#,
        r#"{"db":0,"key":"sl","type":"set","expire_ms":null,"value":["100","a","b"]}"#,
        r#"{"db":0,"key":"h","type":"hash","expire_ms":null,"value":[["a","x\\x09y"],["b","2"]]}"#,
        r#"{"db":0,"key":"zm","type":"hash","expire_ms":null,"value":[["k","v"]]}"#,
        r#"{"db":0,"key":"z","type":"zset","expire_ms":null,"value":[["o",-2],["a",1.5],["m",1.5],["n","inf"]]}"#,
        r#"{"db":0,"key":"z2","type":"zset","expire_ms":null,"value":[["t",5e-324],["v",0.00001],["u",1e17]]}"#,
        r#"{"db":2,"key":"old","type":"string","expire_ms":1000000000000,"value":"x"}"#,
    ];
    let input = path.to_str().expect("UTF-8");
    let jsonl: String = objects.iter().map(|o| format!("{o}\n")).collect();
    let array = format!("[\n{}\n]\n", objects.join(",\n"));
    for value_model in [false, true] {
        for (args, want) in [
            (vec!["export", "--json", input], &jsonl),
            (vec!["export", "--format", "jsonl", input], &jsonl),
            (vec!["export", "--format", "json", input], &array),
            (vec!["export", "--json", "--format", "json", input], &array),
        ] {
            let mut args = args;
            if value_model {
                args.insert(1, "--value-model");
            }
            let out = run(&args, None);
            assert_eq!(
                (out.code, text(&out.stdout), text(&out.stderr)),
                (0, want.as_str(), ""),
                "{args:?}"
            );
        }
    }
    // Filters pick from the same objects.
    let pick =
        |idx: &[usize]| -> String { idx.iter().map(|&i| format!("{}\n", objects[i])).collect() };
    for (filters, want) in [
        (&["--db", "2"][..], pick(&[10])),
        (&["--type", "set"], pick(&[4, 5])),
        (&["--match", "z*"], pick(&[7, 8, 9])),
        (&["--skip-expired"], pick(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9])),
        (&["--type", "stream"], String::new()),
    ] {
        for value_model in [false, true] {
            let mut args = vec!["export", "--json"];
            if value_model {
                args.push("--value-model");
            }
            args.extend_from_slice(filters);
            args.push(input);
            let out = run(&args, None);
            assert_eq!(
                (out.code, text(&out.stdout)),
                (0, want.as_str()),
                "{args:?}"
            );
        }
    }
    // An empty result is an empty array.
    for value_model in [false, true] {
        let mut args = vec!["export", "--format", "json", "--db", "7"];
        if value_model {
            args.push("--value-model");
        }
        args.push(input);
        assert_eq!(text(&run(&args, None).stdout), "[\n]\n");
    }
    // Damage after some keys: both print the keys before it, then fail.
    let mut data = f.finish();
    let (start, _) = f.values[5]; // the set listpack "sl"
    data[start + 5] ^= 0x40; // its listpack's header count
    fix_crc(&mut data);
    let damaged = write(dir.path(), "golden_damaged.rdb", &data);
    let want_lines = pick(&[0, 1, 2, 3, 4]);
    for value_model in [false, true] {
        let mut args = vec!["export", "--json"];
        if value_model {
            args.push("--value-model");
        }
        args.push(damaged.to_str().expect("UTF-8"));
        let out = run(&args, None);
        assert_eq!(
            (out.code, text(&out.stdout)),
            (1, want_lines.as_str()),
            "{args:?}"
        );
        assert!(
            text(&out.stderr).contains("key 'sl'"),
            "{}",
            text(&out.stderr)
        );
    }
}

// ---------------------------------------------------------------------------
// Random keyspaces and damaged copies.

/// The library's generator, with the helpers these tests draw with.
struct Rng(hozon::rand::Rng);

impl Rng {
    fn seeded(seed: u64) -> Rng {
        Rng(hozon::rand::Rng::with_seed(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// A random string element: integers of every width (canonical or not),
/// binary bytes, text, long compressible text, the empty string.
fn element(rng: &mut Rng, allow_long: bool) -> Vec<u8> {
    match rng.below(20) {
        0..=4 => {
            let v: i64 = match rng.below(7) {
                0 => rng.range(0, 12) as i64,
                1 => rng.range(0, 255) as i64 - 128,
                2 => rng.range(0, 65535) as i64 - 32768,
                3 => rng.range(0, 1 << 24) as i64 - (1 << 23),
                4 => rng.next() as i32 as i64,
                5 => *rng.pick(&[i64::MIN, i64::MAX, i64::MIN + 1, -1, 0]),
                _ => rng.next() as i64,
            };
            v.to_string().into_bytes()
        }
        5 => rng
            .pick(&[
                "007",
                "-0",
                "+1",
                " 1",
                "1 ",
                "00",
                "-",
                "9223372036854775808",
                "1e3",
                "0x10",
                "1.0",
            ])
            .as_bytes()
            .to_vec(),
        6..=7 => {
            let n = rng.below(24) as usize;
            (0..n)
                .map(|_| match rng.below(4) {
                    0 => *rng.pick(b"\"\\\x00\x01\x7f\xff"),
                    _ => rng.next() as u8,
                })
                .collect()
        }
        8 => Vec::new(),
        9 if allow_long => {
            let n = if rng.chance(10) {
                rng.range(16_400, 20_000)
            } else {
                rng.range(64, 5000)
            };
            let word = rng
                .pick(&["alpha ", "beta ", "gamma-", "delta:"])
                .as_bytes();
            word.iter().copied().cycle().take(n as usize).collect()
        }
        _ => format!(
            "{}{}",
            rng.pick(&["user", "item", "a", "zz", "k"]),
            rng.below(1000)
        )
        .into_bytes(),
    }
}

/// Distinct random elements.
fn distinct(rng: &mut Rng, n: usize, allow_long: bool, ints_only: bool) -> Vec<Vec<u8>> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(n);
    let mut tries = 0;
    while out.len() < n && tries < n * 20 + 50 {
        tries += 1;
        let e = if ints_only {
            let v = match rng.below(3) {
                0 => rng.below(200) as i64 - 100,
                1 => rng.next() as i32 as i64,
                _ => rng.next() as i64,
            };
            v.to_string().into_bytes()
        } else {
            element(rng, allow_long)
        };
        if seen.insert(e.clone()) {
            out.push(e);
        }
    }
    out
}

/// A collection size: mostly small (compact encodings), some across the
/// listpack and intset limits (128, 512), a few large.
fn size(rng: &mut Rng, large: bool) -> usize {
    match rng.below(100) {
        0..=69 => rng.range(1, 10) as usize,
        70..=86 => rng.range(11, 140) as usize,
        87..=97 => rng.range(120, 700) as usize,
        _ if large => rng.range(1000, 4000) as usize,
        _ => rng.range(200, 600) as usize,
    }
}

fn score(rng: &mut Rng) -> f64 {
    loop {
        let sc = match rng.below(12) {
            0 => f64::INFINITY,
            1 => f64::NEG_INFINITY,
            2 => *rng.pick(&[
                1e17,
                1e-5,
                5e-324,
                f64::MAX,
                -f64::MAX,
                1e16,
                9.999_999_999_999_999e-6,
                0.1,
            ]),
            3 => f64::from_bits(rng.next()),
            4..=6 => rng.below(20) as f64 - 10.0,
            7 => -0.0,
            8 => 0.0,
            9 => (rng.next() as i64) as f64,
            _ => (rng.below(2000) as f64 - 1000.0) / 8.0,
        };
        if sc.is_nan() {
            continue;
        }
        return sc;
    }
}

/// A random value.
enum Data {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(Vec<u8>, f64)>),
    /// (field, value, field TTL (0 none)).
    Hash(Vec<(Vec<u8>, Vec<u8>, u64)>),
    Stream(StreamData),
    Module,
    /// A collection no loader creates (empty, or of expired hash fields).
    Empty,
}

fn random_data(rng: &mut Rng, large: bool) -> Data {
    match rng.below(14) {
        0..=2 => Data::Str(element(rng, true)),
        3..=4 => {
            let n = size(rng, large);
            Data::List(
                (0..n)
                    .map(|_| {
                        let long = rng.chance(10);
                        element(rng, long)
                    })
                    .collect(),
            )
        }
        5..=6 => {
            let n = size(rng, large);
            let ints = rng.chance(40);
            {
                let long = rng.chance(10);
                Data::Set(distinct(rng, n, long, ints))
            }
        }
        7..=8 => {
            let n = size(rng, large);
            let long = rng.chance(5);
            let members = distinct(rng, n, long, false);
            Data::ZSet(members.into_iter().map(|m| (m, score(rng))).collect())
        }
        9..=10 => {
            let n = size(rng, large);
            let long = rng.chance(5);
            let fields = distinct(rng, n, long, false);
            let with_ttl = rng.chance(25);
            Data::Hash(
                fields
                    .into_iter()
                    .map(|f| {
                        let ttl = match rng.below(6) {
                            _ if !with_ttl => 0,
                            0 => PAST_MS as u64 + rng.below(1000),
                            1..=2 => FUTURE_MS as u64 + rng.below(1000),
                            _ => 0,
                        };
                        {
                            let long = rng.chance(10);
                            (f, element(rng, long), ttl)
                        }
                    })
                    .collect(),
            )
        }
        11 => {
            let n = rng.range(1, 12) as usize;
            let mut id = (1_700_000_000_000 + rng.below(1000), rng.below(3));
            let mut entries = Vec::new();
            for _ in 0..n {
                let fields = if rng.chance(70) {
                    vec![
                        (b"f".to_vec(), element(rng, false)),
                        (b"g".to_vec(), element(rng, false)),
                    ]
                } else {
                    (0..rng.range(0, 3))
                        .map(|i| (format!("x{i}").into_bytes(), element(rng, false)))
                        .collect()
                };
                entries.push((id, fields));
                id = if rng.chance(50) {
                    (id.0, id.1 + 1)
                } else {
                    (id.0 + rng.range(1, 50), 0)
                };
            }
            let deleted: BTreeSet<usize> = (1..n).filter(|_| rng.chance(15)).collect();
            let live: Vec<usize> = (0..n).filter(|i| !deleted.contains(i)).collect();
            let mut groups = Vec::new();
            if rng.chance(50) && !live.is_empty() {
                let mut pending = Vec::new();
                for &e in &live {
                    if rng.chance(50) {
                        pending.push((e, rng.below(2) as usize));
                    }
                }
                groups.push((b"g1".to_vec(), entries[live[live.len() - 1]].0, pending));
            }
            Data::Stream(StreamData {
                entries,
                deleted,
                groups,
                consumers: vec![b"c1".to_vec(), b"c2".to_vec()],
            })
        }
        12 => Data::Module,
        _ => Data::Empty,
    }
}

/// Elements as a listpack or ziplist stores them: integers mostly as
/// integers, sometimes as their text.
fn items_of(rng: &mut Rng, elements: &[&[u8]]) -> Vec<It> {
    elements
        .iter()
        .map(|e| {
            if rng.chance(85) {
                it(e)
            } else {
                It::S(e.to_vec())
            }
        })
        .collect()
}

/// A string in one of the RDB string forms that can hold it.
fn string_form(rng: &mut Rng, e: &[u8]) -> Vec<u8> {
    match rng.below(4) {
        0 => raw(e),
        1 => match parse_i64(e) {
            Some(v) if i32::try_from(v).is_ok() => int_encoded(v),
            _ => auto(e),
        },
        2 => lzf_string(e).unwrap_or_else(|| raw(e)),
        _ => auto(e),
    }
}

fn strings_form(rng: &mut Rng, elements: &[&[u8]]) -> Vec<u8> {
    let mut out = len(elements.len() as u64);
    for e in elements {
        out.extend(string_form(rng, e));
    }
    out
}

/// Splits `items` into 1..=k nodes.
fn split_nodes<T: Clone>(rng: &mut Rng, items: &[T]) -> Vec<Vec<T>> {
    let mut nodes = Vec::new();
    let mut rest = items;
    while !rest.is_empty() {
        let n = (rng.range(1, 40) as usize).min(rest.len());
        nodes.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    nodes
}

/// The type byte and value bytes of `data` in a random encoding that can
/// hold it.
fn encode_random(rng: &mut Rng, data: &Data) -> (u8, Vec<u8>) {
    match data {
        Data::Str(v) => (kind::STRING, string_form(rng, v)),
        Data::List(items) => {
            let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            match rng.below(4) {
                0 => (kind::LIST, strings_form(rng, &refs)),
                1 => (kind::LIST_ZIPLIST, {
                    let zl = ziplist(&items_of(rng, &refs));
                    string_form(rng, &zl)
                }),
                2 => {
                    let its = items_of(rng, &refs);
                    let nodes = split_nodes(rng, &its);
                    let mut out = len(nodes.len() as u64);
                    for n in nodes {
                        out.extend(string_form(rng, &ziplist(&n)));
                    }
                    (kind::LIST_QUICKLIST, out)
                }
                _ => {
                    let nodes = split_nodes(rng, &refs);
                    let mut out = len(nodes.len() as u64);
                    for n in nodes {
                        if n.len() == 1 && rng.chance(40) {
                            out.extend(len(1));
                            out.extend(string_form(rng, n[0]));
                        } else {
                            out.extend(len(2));
                            let lp = listpack(&items_of(rng, &n));
                            out.extend(string_form(rng, &lp));
                        }
                    }
                    (kind::LIST_QUICKLIST_2, out)
                }
            }
        }
        Data::Set(members) => {
            let refs: Vec<&[u8]> = members.iter().map(Vec::as_slice).collect();
            let ints: Option<Vec<i64>> = refs.iter().map(|m| parse_i64(m)).collect();
            match (rng.below(3), ints) {
                (0, Some(mut ints)) => {
                    ints.sort_unstable();
                    (kind::SET_INTSET, string_form(rng, &intset::encode(&ints)))
                }
                (1, _) => (kind::SET_LISTPACK, {
                    let lp = listpack(&items_of(rng, &refs));
                    string_form(rng, &lp)
                }),
                _ => (kind::SET, strings_form(rng, &refs)),
            }
        }
        Data::ZSet(pairs) => {
            let refs: Vec<(&[u8], f64)> = pairs.iter().map(|(m, sc)| (&m[..], *sc)).collect();
            match rng.below(4) {
                0 => (kind::ZSET, v_zset3(&refs)),
                1 => (kind::ZSET_2, v_zset5(&refs)),
                2 => {
                    let text_scores = rng.chance(30);
                    (
                        kind::ZSET_ZIPLIST,
                        string_form(rng, &ziplist(&scored_items(&refs, text_scores))),
                    )
                }
                _ => {
                    let text_scores = rng.chance(30);
                    (
                        kind::ZSET_LISTPACK,
                        string_form(rng, &listpack(&scored_items(&refs, text_scores))),
                    )
                }
            }
        }
        Data::Hash(fields) => {
            let with_ttl = fields.iter().any(|f| f.2 != 0);
            let refs: Vec<(&[u8], &[u8], u64)> = fields
                .iter()
                .map(|(f, v, t)| (&f[..], &v[..], *t))
                .collect();
            let pairs: Vec<(&[u8], &[u8])> =
                fields.iter().map(|(f, v, _)| (&f[..], &v[..])).collect();
            // Without field TTLs every hash encoding can hold it (the TTL
            // types with none set); with them only the TTL types.
            let choice = if with_ttl {
                4 + rng.below(4)
            } else {
                rng.below(8)
            };
            match choice {
                0 => (kind::HASH, v_hash4(&pairs)),
                1 => {
                    let owned: Vec<(Vec<u8>, Vec<u8>)> = fields
                        .iter()
                        .map(|(f, v, _)| (f.clone(), v.clone()))
                        .collect();
                    let zm = zipmap(&owned, rng.below(3) as u8);
                    (kind::HASH_ZIPMAP, string_form(rng, &zm))
                }
                2 => (
                    kind::HASH_ZIPLIST,
                    string_form(rng, &ziplist(&pairs_items(&pairs))),
                ),
                3 => (
                    kind::HASH_LISTPACK,
                    string_form(rng, &listpack(&pairs_items(&pairs))),
                ),
                4 => (kind::HASH_METADATA_PRE_GA, v_hash22(&refs)),
                5 => (kind::HASH_LISTPACK_EX_PRE_GA, v_hash23(&refs)),
                6 => (kind::HASH_METADATA, v_hash24(&refs)),
                _ => (kind::HASH_LISTPACK_EX, v_hash25(&refs)),
            }
        }
        Data::Stream(st) => {
            let t = *rng.pick(&[
                kind::STREAM_LISTPACKS,
                kind::STREAM_LISTPACKS_2,
                kind::STREAM_LISTPACKS_3,
            ]);
            (t, v_stream(st, t))
        }
        Data::Module => (kind::MODULE_2, v_module()),
        Data::Empty => match rng.below(9) {
            0 => (kind::LIST, len(0)),
            1 => (kind::SET, len(0)),
            2 => (kind::ZSET_2, len(0)),
            3 => (kind::HASH, len(0)),
            4 => (kind::LIST_ZIPLIST, auto(&ziplist(&[]))),
            5 => (kind::SET_LISTPACK, auto(&listpack(&[]))),
            6 => (kind::ZSET_LISTPACK, auto(&listpack(&[]))),
            7 => (kind::LIST_QUICKLIST_2, len(0)),
            _ => (
                kind::HASH_METADATA,
                v_hash24(&[
                    (b"gone", b"1", PAST_MS as u64),
                    (b"old", b"2", PAST_MS as u64 + 1),
                ]),
            ),
        },
    }
}

/// Appends `bytes` JSON-escaped the way the export documents it.
fn model_bytes(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for &b in bytes {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\\\x{b:02x}")),
        }
    }
    out.push('"');
}

/// A score as the export documents it: an integer when whole, else the
/// shortest text that reads back (exponent form outside 1e-5..1e17),
/// infinities as strings.
fn model_score(sc: f64) -> String {
    if sc.is_infinite() {
        return if sc > 0.0 {
            "\"inf\"".into()
        } else {
            "\"-inf\"".into()
        };
    }
    if sc.fract() == 0.0 && sc != 0.0 && sc.abs() < 9_007_199_254_740_992.0 {
        return format!("{}", sc as i64);
    }
    if sc == 0.0 || (1e-5..1e17).contains(&sc.abs()) {
        format!("{sc}")
    } else {
        format!("{sc:e}")
    }
}

/// The JSON object of a key as the export must print it (streams: only
/// up to the value, None when the key is not printed).
fn model_line(db: u64, key: &[u8], data: &Data, expire_ms: Option<i64>, t: u8) -> Option<String> {
    let type_name = match data {
        Data::Str(_) => "string",
        Data::List(_) => "list",
        Data::Set(_) => "set",
        Data::ZSet(_) => "zset",
        Data::Hash(_) => "hash",
        Data::Stream(_) => "stream",
        Data::Module | Data::Empty => return None,
    };
    let mut o = format!("{{\"db\":{db},\"key\":");
    model_bytes(&mut o, key);
    o += &format!(",\"type\":\"{type_name}\",\"expire_ms\":");
    o += &expire_ms.map_or("null".to_string(), |e| e.to_string());
    o += ",\"value\":";
    let list = |o: &mut String, items: &mut dyn Iterator<Item = &[u8]>| {
        o.push('[');
        for (i, x) in items.enumerate() {
            if i > 0 {
                o.push(',');
            }
            model_bytes(o, x);
        }
        o.push(']');
    };
    match data {
        Data::Str(v) => model_bytes(&mut o, v),
        Data::List(items) => list(&mut o, &mut items.iter().map(Vec::as_slice)),
        Data::Set(m) => {
            let mut m: Vec<&[u8]> = m.iter().map(Vec::as_slice).collect();
            m.sort_unstable();
            list(&mut o, &mut m.into_iter());
        }
        Data::Hash(fields) => {
            let mut kept: Vec<(&[u8], &[u8])> = fields
                .iter()
                .filter(|f| f.2 == 0 || f.2 >= FUTURE_MS as u64)
                .map(|(f, v, _)| (&f[..], &v[..]))
                .collect();
            if kept.is_empty() {
                return None;
            }
            kept.sort_unstable();
            o.push('[');
            for (i, (f, v)) in kept.iter().enumerate() {
                if i > 0 {
                    o.push(',');
                }
                o.push('[');
                model_bytes(&mut o, f);
                o.push(',');
                model_bytes(&mut o, v);
                o.push(']');
            }
            o.push(']');
        }
        Data::ZSet(pairs) => {
            let mut p: Vec<(&[u8], f64)> = pairs.iter().map(|(m, sc)| (&m[..], *sc)).collect();
            // Loaded as a listpack (see
            // negative_zero_scores_print_as_the_loaded_encoding_holds_them),
            // -0 becomes 0.
            let compact = matches!(t, kind::ZSET_ZIPLIST | kind::ZSET_LISTPACK);
            if p.len() <= 128 && (compact || p.iter().all(|(m, _)| m.len() <= 64)) {
                for (_, sc) in &mut p {
                    if *sc == 0.0 {
                        *sc = 0.0;
                    }
                }
            }
            p.sort_by(|a, b| a.1.partial_cmp(&b.1).expect("no NaN").then(a.0.cmp(b.0)));
            o.push('[');
            for (i, (m, sc)) in p.iter().enumerate() {
                if i > 0 {
                    o.push(',');
                }
                o.push('[');
                model_bytes(&mut o, m);
                o.push(',');
                o += &model_score(*sc);
                o.push(']');
            }
            o.push(']');
        }
        Data::Stream(_) | Data::Module | Data::Empty => {}
    }
    if !matches!(data, Data::Stream(_)) {
        o.push('}');
    }
    Some(o)
}

/// A random file: keys of every type in random encodings over a few
/// databases, with expiries and the opcodes between keys; and the lines
/// the export must print for it.
fn random_file(rng: &mut Rng, keys: usize, large: bool) -> (Rdb, Vec<String>) {
    let mut f = Rdb::new(*rng.pick(&[9, 10, 11, 12]));
    f.aux("redis-ver", b"7.2.0").aux("ctime", b"1700000000");
    let mut want = Vec::new();
    let mut db = 0u64;
    f.select(0);
    for n in 0..keys {
        if rng.chance(3) {
            db += rng.range(1, 3);
            f.select(db);
            if rng.chance(50) {
                f.resize(rng.below(100), rng.below(10));
            }
        }
        let key = match rng.below(10) {
            0 => element(rng, false),
            _ => format!("{}:{n}", rng.pick(&["user", "order", "cache", "q", "h"])).into_bytes(),
        };
        let key = if rng.chance(90) {
            [key, format!("#{n}").into_bytes()].concat()
        } else {
            key
        };
        let expire = match rng.below(10) {
            0 => Some(PAST_MS + rng.below(1_000_000) as i64),
            1 => Some(FUTURE_MS + rng.below(1_000_000) as i64),
            // Whole seconds, long past or far ahead (never near now: the
            // two runs' `--skip-expired` clocks differ).
            2 => Some(rng.range(1_000_000_000, 1_500_000_000) as i64 * 1000),
            3 => Some(rng.range(2_050_000_000, 2_100_000_000) as i64 * 1000),
            _ => None,
        };
        match expire {
            Some(at) if at % 1000 == 0 && i32::try_from(at / 1000).is_ok() && rng.chance(50) => {
                f.expire_s((at / 1000) as i32);
            }
            Some(at) => {
                f.expire_ms(at);
            }
            None => {}
        }
        if rng.chance(5) {
            f.raw(&[opcode::IDLE]).raw(&len(rng.below(100_000)));
        } else if rng.chance(5) {
            f.raw(&[opcode::FREQ, rng.next() as u8]);
        }
        let data = random_data(rng, large);
        let (t, value) = encode_random(rng, &data);
        let key_form = string_form(rng, &key);
        f.record(t, &key_form, &value);
        want.extend(model_line(db, &key, &data, expire, t));
    }
    // Engine-written keys (hozon's writer) in a database of their own.
    db += 1;
    f.select(db);
    let mut engine = Engine::open(Config::in_memory()).expect("engine");
    let mut session = engine.new_session();
    session.authenticated = true;
    let mut written = Vec::new();
    for n in 0..keys / 8 + 1 {
        let key = format!("engine:{n}").into_bytes();
        // ZADD of -0 stores 0 while the set is a listpack (and -0 once it
        // is a skiplist): give the engine no -0. HSET sets no field TTLs.
        let data = match random_data(rng, large) {
            Data::ZSet(p) => Data::ZSet(
                p.into_iter()
                    .map(|(m, sc)| (m, if sc == 0.0 { 0.0 } else { sc }))
                    .collect(),
            ),
            Data::Hash(fields) => {
                Data::Hash(fields.into_iter().map(|(f, v, _)| (f, v, 0)).collect())
            }
            other => other,
        };
        let mut argv: Vec<Vec<u8>> = Vec::new();
        match &data {
            Data::Str(v) => argv.extend([b"SET".to_vec(), key.clone(), v.clone()]),
            Data::List(items) => {
                argv.extend([b"RPUSH".to_vec(), key.clone()]);
                argv.extend(items.iter().cloned());
            }
            Data::Set(m) => {
                argv.extend([b"SADD".to_vec(), key.clone()]);
                argv.extend(m.iter().cloned());
            }
            Data::ZSet(p) => {
                argv.extend([b"ZADD".to_vec(), key.clone()]);
                for (m, sc) in p {
                    let t = if sc.is_infinite() {
                        if *sc > 0.0 {
                            "inf".to_string()
                        } else {
                            "-inf".to_string()
                        }
                    } else {
                        format!("{sc:e}")
                    };
                    argv.push(t.into_bytes());
                    argv.push(m.clone());
                }
            }
            Data::Hash(fields) => {
                argv.extend([b"HSET".to_vec(), key.clone()]);
                for (f, v, _) in fields {
                    argv.push(f.clone());
                    argv.push(v.clone());
                }
            }
            Data::Stream(_) | Data::Module | Data::Empty => continue,
        }
        let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        let reply = engine.execute(&mut session, &args);
        assert!(!matches!(reply, Reply::Error(_)), "{reply:?}");
        let expire = rng.chance(20).then(|| FUTURE_MS + n as i64);
        written.push((key, data, expire));
    }
    let encoder = Encoder {
        compress: rng.chance(70),
        list_max_listpack_size: *rng.pick(&[-2, 3, 128]),
        ..Encoder::default()
    };
    let ks = engine.keyspace();
    for (key, data, expire) in &written {
        let value = ks.db(0).get(key).expect("written key");
        let mut record = Vec::new();
        encoder.put_key(&mut record, key, value, *expire);
        let start = f.buf.len() + record.len() - {
            let mut v = Vec::new();
            encoder.put_value(&mut v, value);
            v.len()
        };
        f.raw(&record);
        f.values.push((start, f.buf.len()));
        want.extend(model_line(db, key, data, *expire, kind::ZSET_2));
    }
    (f, want)
}

/// Checks the lines of a sound file's export against the model.
fn check_model(name: &str, out: &Out, want: &[String]) {
    assert_eq!(out.code, 0, "{name}: {}", shorten(&out.stderr));
    let got: Vec<&str> = text(&out.stdout).lines().collect();
    assert_eq!(got.len(), want.len(), "{name}: key count");
    for (g, w) in got.iter().zip(want) {
        let (g, w) = if w.contains(",\"type\":\"stream\",") {
            (&g[..w.len().min(g.len())], w.as_str())
        } else {
            (*g, w.as_str())
        };
        if g != w {
            let at = g.bytes().zip(w.bytes()).take_while(|(a, b)| a == b).count();
            let from = at.saturating_sub(150);
            panic!(
                "{name}: the export differs from the model at byte {at}:\n  export: ...{}\n  model:  ...{}",
                &g[from..(at + 150).min(g.len())],
                &w[from..(at + 150).min(w.len())]
            );
        }
    }
}

/// Damaged copies of a file: bit flips anywhere, cuts, bytes overwritten
/// inside values (the checksum then recomputed, so the value decoders, not
/// the checksum, meet the damage).
fn damaged_copies(rng: &mut Rng, f: &Rdb, data: &[u8], n: usize) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut d = data.to_vec();
        let (vs, ve) = *rng.pick(&f.values);
        let in_value = |rng: &mut Rng| vs + rng.below((ve - vs).max(1) as u64) as usize;
        let what = match i % 6 {
            0 => {
                let at = rng.below(d.len() as u64) as usize;
                let bit = rng.below(8);
                d[at] ^= 1 << bit;
                format!("bit {bit} flipped at {at}")
            }
            1 => {
                let at = rng.range(9, d.len() as u64 - 1) as usize;
                d.truncate(at);
                format!("cut at {at}")
            }
            2 => {
                let at = in_value(rng);
                let any = rng.next() as u8;
                let b = *rng.pick(&[0x00, 0xFF, 0x7F, 0x80, 0xC3, 0xFE, any]);
                d[at] = b;
                fix_crc(&mut d);
                format!("byte at {at} set to {b:#04x}, CRC fixed")
            }
            3 => {
                let at = in_value(rng);
                let k = rng.range(1, 8) as usize;
                for b in &mut d[at..(at + k).min(ve)] {
                    *b = rng.next() as u8;
                }
                fix_crc(&mut d);
                format!("{k} bytes overwritten at {at}, CRC fixed")
            }
            4 => {
                let mut flips = Vec::new();
                for _ in 0..rng.range(1, 3) {
                    let at = in_value(rng);
                    let bit = rng.below(8);
                    d[at] ^= 1 << bit;
                    flips.push((at, bit));
                }
                fix_crc(&mut d);
                format!("bits flipped (offset, bit) {flips:?}, CRC fixed")
            }
            _ => {
                let at = rng.below(d.len() as u64) as usize;
                d[at] = rng.next() as u8;
                fix_crc(&mut d);
                format!("byte at {at} overwritten anywhere, CRC fixed")
            }
        };
        out.push((what, d));
    }
    out
}

/// A random filter set for one more comparison.
fn random_filters(rng: &mut Rng) -> Vec<String> {
    let mut f = Vec::new();
    if rng.chance(40) {
        f.extend(["--db".to_string(), rng.below(4).to_string()]);
    }
    if rng.chance(40) {
        let t = rng.pick(&["string", "list", "set", "zset", "hash", "stream"]);
        f.extend(["--type".to_string(), t.to_string()]);
    }
    if rng.chance(30) {
        f.extend([
            "--match".to_string(),
            rng.pick(&["user:*", "*1*", "[a-h]*", "?:*"]).to_string(),
        ]);
    }
    if rng.chance(40) {
        f.push("--skip-expired".to_string());
    }
    f
}

#[test]
fn random_keyspaces_and_damaged_copies_give_the_same_output_both_ways() {
    let dir = tempfile::tempdir().expect("tempdir");
    // (seed, keys, large collections, damaged copies)
    let plan: &[(u64, usize, bool, usize)] = &[
        (1, 40, false, 30),
        (2, 80, false, 30),
        (3, 120, false, 30),
        (4, 60, false, 30),
        (5, 200, false, 30),
        (6, 150, true, 30),
        // Larger than a fast-path batch (2048 keys, 1 MiB) and than the
        // value model's parallel-load threshold (1 MiB).
        (7, 3000, true, 12),
    ];
    let mut failures = Vec::new();
    let mut compared = 0usize;
    // Damaged copies by the exit code both paths gave.
    let mut exits = [0usize; 3];
    for &(seed, keys, large, copies) in plan {
        let mut rng = Rng::seeded(0x5EED_0000 + seed);
        let (f, want) = random_file(&mut rng, keys, large);
        let data = f.finish();
        let name = format!("random{seed}.rdb");
        let path = write(dir.path(), &name, &data);
        match agree(&path, &[]) {
            Ok(out) => check_model(&name, &out, &want),
            Err(e) => {
                let kept = keep_failing_input(&name, &data);
                failures.push(format!("{name} (kept at {}): {e}", kept.display()));
            }
        }
        let mut variants = vec![("sound".to_string(), data.clone())];
        variants.extend(damaged_copies(&mut rng, &f, &data, copies));
        for (i, (what, d)) in variants.iter().enumerate() {
            let p = write(dir.path(), &format!("random{seed}.{i}.rdb"), d);
            let filters = random_filters(&mut rng);
            let filters: Vec<&str> = filters.iter().map(String::as_str).collect();
            let result = if i == 0 {
                agree(&p, &filters).map(drop)
            } else {
                agree(&p, &[]).and_then(|out| {
                    exits[out.code.clamp(0, 2) as usize] += 1;
                    let input = p.to_str().expect("UTF-8");
                    same_both_ways(&export_args(&["--json"], &filters, input), None).map(drop)
                })
            };
            compared += 1;
            if let Err(e) = result {
                let kept = keep_failing_input(&format!("random{seed}.{i}.rdb"), d);
                failures.push(format!(
                    "random{seed} copy {i} ({what}; kept at {}): {e}",
                    kept.display()
                ));
                if failures.len() >= 8 {
                    break;
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {compared} inputs differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The damage reaches the decoders: many copies are rejected, and some
    // (a flipped byte inside a string, the CRC fixed) stay sound.
    let damaged: usize = exits.iter().sum();
    eprintln!("{compared} inputs compared; damaged copies by exit code 0/1/2: {exits:?}");
    assert!(
        exits[1] * 2 >= damaged,
        "exit codes 0/1/2 of the damaged copies: {exits:?}"
    );
    assert!(
        exits[0] * 20 >= damaged,
        "exit codes 0/1/2 of the damaged copies: {exits:?}"
    );
}
