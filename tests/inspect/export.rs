//! Tests of `get` and `export`. The reference for every RDB fixture Redis
//! 7.0 loads is Redis itself: the fixture loaded into a redis-server, its
//! keyspace read back value by value (GET, LRANGE, SMEMBERS, HGETALL,
//! ZRANGE WITHSCORES, XRANGE and the stream's groups, PEL and consumers).
//! Each export path must reproduce that keyspace: RESP piped into a fresh
//! redis-server, `--to rdb` loaded by redis-server (after
//! `redis-check-rdb`), `--to hoz` read back and piped again, and the JSON
//! decoded.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use hozon::persist::io::RealIo;
use hozon::Engine;

use super::json::{self, Json};
use super::{
    engine_config, fixtures, inspect, now_ms, rdb_fixtures, run, saved_dump, unescape_key,
    written_aof, Redis, BIN,
};

/// One key's content as compared: TYPE, PEXPIRETIME (-1 without), and
/// lines describing the value (see `MODEL_SCRIPT`).
#[derive(Debug, Clone, PartialEq)]
struct KeyModel {
    kind: String,
    expire_ms: i64,
    lines: Vec<String>,
}

type Model = BTreeMap<(u64, Vec<u8>), KeyModel>;

/// Reads a database's keyspace: a `K hexkey type pexpiretime` line per
/// key, then its value as `V` (string, list item, set member, hash
/// `field value`), `Z member score`, and for streams `E id f v ...`, `M`
/// counters, `G group last-id entries-read`, `P group id consumer count`,
/// `C group consumer pending`. Binary data as hex.
const MODEL_SCRIPT: &str = r#"
local out = {}
local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end
for _, k in ipairs(redis.call('KEYS', '*')) do
  local t = redis.call('TYPE', k)['ok']
  out[#out+1] = 'K ' .. hex(k) .. ' ' .. t .. ' ' .. string.format('%.0f', redis.call('PEXPIRETIME', k))
  if t == 'string' then
    out[#out+1] = 'V ' .. hex(redis.call('GET', k))
  elseif t == 'list' then
    for _, v in ipairs(redis.call('LRANGE', k, 0, -1)) do out[#out+1] = 'V ' .. hex(v) end
  elseif t == 'set' then
    for _, v in ipairs(redis.call('SMEMBERS', k)) do out[#out+1] = 'V ' .. hex(v) end
  elseif t == 'hash' then
    local h = redis.call('HGETALL', k)
    for i = 1, #h, 2 do out[#out+1] = 'V ' .. hex(h[i]) .. ' ' .. hex(h[i+1]) end
  elseif t == 'zset' then
    local z = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
    for i = 1, #z, 2 do out[#out+1] = 'Z ' .. hex(z[i]) .. ' ' .. z[i+1] end
  elseif t == 'stream' then
    for _, e in ipairs(redis.call('XRANGE', k, '-', '+')) do
      local line = 'E ' .. e[1]
      for _, f in ipairs(e[2]) do line = line .. ' ' .. hex(f) end
      out[#out+1] = line
    end
    local info = redis.call('XINFO', 'STREAM', k)
    for i = 1, #info, 2 do
      local n = info[i]
      if n == 'last-generated-id' or n == 'max-deleted-entry-id' or n == 'entries-added' then
        out[#out+1] = 'M ' .. n .. ' ' .. tostring(info[i+1])
      end
    end
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', k)) do
      local name, last, read
      for i = 1, #g, 2 do
        if g[i] == 'name' then name = g[i+1]
        elseif g[i] == 'last-delivered-id' then last = g[i+1]
        elseif g[i] == 'entries-read' then read = g[i+1] end
      end
      out[#out+1] = 'G ' .. hex(name) .. ' ' .. last .. ' ' .. tostring(read)
      for _, p in ipairs(redis.call('XPENDING', k, name, '-', '+', 1000000)) do
        out[#out+1] = 'P ' .. hex(name) .. ' ' .. p[1] .. ' ' .. hex(p[2]) .. ' ' .. tostring(p[4])
      end
      for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', k, name)) do
        out[#out+1] = 'C ' .. hex(name) .. ' ' .. hex(c[2]) .. ' ' .. tostring(c[4])
      end
    end
  end
end
return out
"#;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A score in one spelling, whatever printed it (`%.17g`, shortest,
/// `inf`).
fn canonical_score(text: &str) -> String {
    let v: f64 = text.parse().unwrap_or_else(|_| panic!("score {text:?}"));
    format!("{v:?}")
}

/// Puts a key's lines in a canonical order: unordered collections sorted.
fn normalise(m: &mut KeyModel) {
    if matches!(m.kind.as_str(), "set" | "hash" | "stream") {
        m.lines.sort();
    }
}

/// Every key of databases 0-15 of a running Redis.
fn redis_model(redis: &Redis) -> Model {
    let mut model = Model::new();
    for db in 0..16u64 {
        let out = redis.cli(&["-n", &db.to_string(), "EVAL", MODEL_SCRIPT, "0"]);
        let mut current: Option<(Vec<u8>, KeyModel)> = None;
        for line in out.lines().filter(|l| !l.is_empty()) {
            if let Some(rest) = line.strip_prefix("K ") {
                if let Some((k, mut m)) = current.take() {
                    normalise(&mut m);
                    model.insert((db, k), m);
                }
                let w: Vec<&str> = rest.split(' ').collect();
                current = Some((
                    unhex(w[0]),
                    KeyModel {
                        kind: w[1].to_string(),
                        expire_ms: w[2].parse().expect("pexpiretime"),
                        lines: Vec::new(),
                    },
                ));
                continue;
            }
            let (_, m) = current.as_mut().expect("a K line first");
            let line = match line.strip_prefix("Z ") {
                Some(rest) => {
                    let (member, score) = rest.split_once(' ').expect("member score");
                    format!("Z {member} {}", canonical_score(score))
                }
                None => line.to_string(),
            };
            m.lines.push(line);
        }
        if let Some((k, mut m)) = current.take() {
            normalise(&mut m);
            model.insert((db, k), m);
        }
    }
    model
}

/// The same model from `export --json` lines (`"x"` strings decoded and
/// unescaped). Keys whose expiry has passed are left out: a loading
/// Redis drops them.
fn json_model(lines: &[Json]) -> Model {
    let now = now_ms();
    let b = |j: &Json| hex(&unescape_key(j.str()));
    let mut model = Model::new();
    for l in lines {
        let expire_ms = match l.at("expire_ms") {
            Json::Null => -1,
            Json::Num(n) => *n as i64,
            other => panic!("expire_ms {other:?}"),
        };
        if expire_ms != -1 && expire_ms <= now {
            continue;
        }
        let kind = l.at("type").str().to_string();
        let v = l.at("value");
        let mut lines = Vec::new();
        match kind.as_str() {
            "string" => lines.push(format!("V {}", b(v))),
            "list" | "set" => lines.extend(v.arr().iter().map(|i| format!("V {}", b(i)))),
            "hash" => lines.extend(
                v.arr()
                    .iter()
                    .map(|p| format!("V {} {}", b(&p.arr()[0]), b(&p.arr()[1]))),
            ),
            "zset" => lines.extend(v.arr().iter().map(|p| {
                let score = match &p.arr()[1] {
                    Json::Num(n) => format!("{n:?}"),
                    Json::Str(s) => canonical_score(s),
                    other => panic!("score {other:?}"),
                };
                format!("Z {} {score}", b(&p.arr()[0]))
            })),
            "stream" => {
                for e in v.at("entries").arr() {
                    let mut line = format!("E {}", e.arr()[0].str());
                    for f in e.arr()[1].arr() {
                        line.push(' ');
                        line.push_str(&b(f));
                    }
                    lines.push(line);
                }
                lines.push(format!("M last-generated-id {}", v.at("last_id").str()));
                lines.push(format!(
                    "M max-deleted-entry-id {}",
                    v.at("max_deleted_id").str()
                ));
                lines.push(format!("M entries-added {}", v.at("entries_added").u64()));
                for g in v.at("groups").arr() {
                    let name = b(g.at("name"));
                    let read = match g.at("entries_read") {
                        Json::Null => "false".to_string(),
                        n => n.u64().to_string(),
                    };
                    lines.push(format!("G {name} {} {read}", g.at("last_id").str()));
                    for p in g.at("pending").arr() {
                        lines.push(format!(
                            "P {name} {} {} {}",
                            p.at("id").str(),
                            b(p.at("consumer")),
                            p.at("delivery_count").u64()
                        ));
                    }
                    for c in g.at("consumers").arr() {
                        lines.push(format!(
                            "C {name} {} {}",
                            b(c.at("name")),
                            c.at("pending").arr().len()
                        ));
                    }
                }
            }
            other => panic!("type {other}"),
        }
        let mut m = KeyModel {
            kind,
            expire_ms,
            lines,
        };
        normalise(&mut m);
        model.insert((l.at("db").u64(), unescape_key(l.at("key").str())), m);
    }
    model
}

/// Asserts two models are equal, expiries within `ttl_slack_ms`.
fn assert_same(what: &str, got: &Model, want: &Model, ttl_slack_ms: i64) {
    let got_keys: Vec<_> = got.keys().collect();
    let want_keys: Vec<_> = want.keys().collect();
    assert_eq!(got_keys, want_keys, "{what}: key sets differ");
    for (k, w) in want {
        let g = &got[k];
        assert_eq!(g.kind, w.kind, "{what}: {k:?}");
        assert_eq!(g.lines, w.lines, "{what}: {k:?}");
        assert_eq!(g.expire_ms == -1, w.expire_ms == -1, "{what}: {k:?}");
        assert!(
            (g.expire_ms - w.expire_ms).abs() <= ttl_slack_ms,
            "{what}: {k:?}: expiry {} vs {}",
            g.expire_ms,
            w.expire_ms
        );
    }
}

/// A fresh Redis with `rdb` (if any) as its dump file.
fn redis_with(dir: &Path, rdb: Option<&Path>) -> Redis {
    match rdb {
        Some(path) => {
            std::fs::copy(path, dir.join("x.rdb")).expect("copy the RDB file");
            Redis::start(dir, &["--dbfilename", "x.rdb", "--appendonly", "no"])
        }
        None => Redis::start(dir, &["--dbfilename", "none.rdb", "--appendonly", "no"]),
    }
}

/// Pipes RESP into `redis` with `redis-cli --pipe`; asserts no errors.
fn pipe_into(redis: &Redis, resp: &[u8]) {
    let mut child = Command::new("redis-cli")
        .arg("-s")
        .arg(&redis.sock)
        .arg("--pipe")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli --pipe");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(resp)
        .expect("feeding redis-cli");
    let out = child.wait_with_output().expect("redis-cli --pipe");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("errors: 0"),
        "redis-cli --pipe: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Raw stdout of the inspector.
fn inspect_bytes(args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .expect("running hozon-inspect");
    (
        out.status.code().expect("exit code"),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn jsonl(text: &str) -> Vec<Json> {
    text.lines()
        .map(|l| json::parse(l).unwrap_or_else(|e| panic!("line {l:?}: {e}")))
        .collect()
}

fn p(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

/// The fixtures Redis 7.0 loads: those without an `.expect` (written by
/// Redis) and those whose `.expect` says so.
fn redis_loadable_fixtures() -> Vec<PathBuf> {
    rdb_fixtures()
        .into_iter()
        .filter(|f| {
            let expect = f.with_extension("expect");
            !expect.exists()
                || std::fs::read_to_string(&expect)
                    .expect("reading .expect")
                    .contains("# redis-7.0: loads")
        })
        .collect()
}

fn check_fixture(path: &Path) {
    let name = path.display().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let reference = {
        let d = dir.path().join("ref");
        std::fs::create_dir(&d).expect("mkdir");
        let redis = redis_with(&d, Some(path));
        let m = redis_model(&redis);
        redis.stop();
        m
    };

    // RESP piped into a fresh Redis.
    let (code, resp, err) = inspect_bytes(&["export", "--format", "resp", p(path)]);
    assert_eq!(code, 0, "{name}: {err}");
    let d = dir.path().join("resp");
    std::fs::create_dir(&d).expect("mkdir");
    let redis = redis_with(&d, None);
    pipe_into(&redis, &resp);
    assert_same(&format!("{name} resp"), &redis_model(&redis), &reference, 0);
    redis.stop();

    // --to rdb: redis-check-rdb accepts it, Redis loads the same keyspace.
    let rdb = dir.path().join("out.rdb");
    let (code, _, err) = inspect(&["export", p(path), "--to", "rdb", "-o", p(&rdb)]);
    assert_eq!(code, 0, "{name}: {err}");
    let check = Command::new("redis-check-rdb")
        .arg(&rdb)
        .output()
        .expect("redis-check-rdb");
    assert!(
        check.status.success(),
        "{name}: redis-check-rdb: {}",
        String::from_utf8_lossy(&check.stdout)
    );
    let d = dir.path().join("rdb");
    std::fs::create_dir(&d).expect("mkdir");
    let redis = redis_with(&d, Some(&rdb));
    assert_same(
        &format!("{name} --to rdb"),
        &redis_model(&redis),
        &reference,
        0,
    );
    redis.stop();

    // --to hoz, then that dump.hoz exported as RESP into Redis.
    let hoz = dir.path().join("out.hoz");
    let (code, _, err) = inspect(&["export", p(path), "--to", "hoz", "-o", p(&hoz)]);
    assert_eq!(code, 0, "{name}: {err}");
    let (code, resp, err) = inspect_bytes(&["export", "--format", "resp", p(&hoz)]);
    assert_eq!(code, 0, "{name}: {err}");
    let d = dir.path().join("hoz");
    std::fs::create_dir(&d).expect("mkdir");
    let redis = redis_with(&d, None);
    pipe_into(&redis, &resp);
    assert_same(
        &format!("{name} --to hoz"),
        &redis_model(&redis),
        &reference,
        0,
    );
    redis.stop();

    // JSON Lines, and the single document, decoded.
    let (code, out, err) = inspect(&["export", "--json", p(path)]);
    assert_eq!(code, 0, "{name}: {err}");
    let lines = jsonl(&out);
    assert_same(&format!("{name} jsonl"), &json_model(&lines), &reference, 0);
    let (code, out, err) = inspect(&["export", "--format", "json", p(path)]);
    assert_eq!(code, 0, "{name}: {err}");
    let doc = json::parse(&out).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(doc.arr(), lines.as_slice(), "{name}");
}

#[test]
fn export_of_every_redis_loadable_fixture_reproduces_the_keyspace_redis_loads() {
    let names = redis_loadable_fixtures();
    assert!(names.len() >= 15, "{names:?}");
    // Each fixture has its own servers and directories: run them side by side.
    std::thread::scope(|s| {
        for chunk in names.chunks(names.len().div_ceil(6)) {
            s.spawn(move || chunk.iter().for_each(|f| check_fixture(f)));
        }
    });
}

#[test]
fn export_of_fixtures_redis_rejects_lists_the_keys_keys_lists() {
    // Valkey, Redis 7.2/7.4 files: no Redis 7.0 to compare with; the keys,
    // types and expiries are those `keys` reports (modules excepted: a
    // module value cannot be built, so it is not exported).
    for path in rdb_fixtures() {
        let (code, out, err) = inspect(&["export", "--json", p(&path)]);
        assert_eq!(code, 0, "{}: {err}", path.display());
        let got: Vec<(u64, Vec<u8>, String)> = {
            let mut v: Vec<_> = jsonl(&out)
                .iter()
                .map(|l| {
                    (
                        l.at("db").u64(),
                        unescape_key(l.at("key").str()),
                        l.at("type").str().to_string(),
                    )
                })
                .collect();
            v.sort();
            v
        };
        let (_, keys, _) = super::keys_json(&path, &[]);
        let mut want: Vec<_> = keys
            .iter()
            .filter(|l| l.at("type").str() != "module")
            .map(|l| {
                (
                    l.at("db").u64(),
                    unescape_key(l.at("key").str()),
                    l.at("type").str().to_string(),
                )
            })
            .collect();
        want.sort();
        assert_eq!(got, want, "{}", path.display());
    }
    // The Valkey hash whose field expired in 1970 has the live fields.
    let path = fixtures().join("valkey9.rdb");
    let (code, out, _) = inspect(&["get", "--json", p(&path), "hash:hfe"]);
    assert_eq!(code, 0);
    assert_eq!(
        out.trim_end(),
        r#"{"db":0,"key":"hash:hfe","type":"hash","expire_ms":null,"value":[["a","1"],["b","2"]]}"#
    );
}

#[test]
fn json_golden_values_of_binary_keys_scores_and_streams() {
    let strings = fixtures().join("strings.rdb");
    let (code, out, err) = inspect(&[
        "get",
        "--json",
        p(&strings),
        "--escaped",
        r"key\x00with\xffbinary",
    ]);
    assert_eq!(code, 0, "{err}");
    let doc = json::parse(&out).expect("one document");
    assert_eq!(doc.at("key").str(), r"key\x00with\xffbinary");
    let (_, out, _) = inspect(&["get", "--json", p(&strings), r#"k with spaces "quoted""#]);
    let doc = json::parse(&out).expect("one document");
    assert_eq!(doc.at("key").str(), r#"k with spaces "quoted""#);
    // The escaping in the JSON text itself: `\` doubled, then JSON-escaped.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bin.rdb");
    {
        use hozon::rdb::writer::{encode_file, Encoder};
        use hozon::types::{Blob, Value};
        let keys = [
            (
                Blob::from(b"a\\b".to_vec()),
                Value::Str(Blob::from(b"\"\n\xe2\x82\xac".to_vec())),
            ),
            (Blob::from("plain"), Value::Str(Blob::from(""))),
        ];
        let data = encode_file(
            &Encoder::default(),
            1_700_000_000_000,
            keys.iter()
                .map(|(k, v)| (0usize, k, v, Some(4_102_444_800_000))),
        );
        std::fs::write(&path, data).expect("write");
    }
    let (code, out, _) = inspect(&["export", "--json", p(&path)]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        concat!(
            r#"{"db":0,"key":"a\\\\b","type":"string","expire_ms":4102444800000,"value":"\"\\x0a\\xe2\\x82\\xac"}"#,
            "\n",
            r#"{"db":0,"key":"plain","type":"string","expire_ms":4102444800000,"value":""}"#,
            "\n"
        )
    );
    // Scores: numbers when finite (shortest form that reads back), else
    // strings.
    let zsets = fixtures().join("zsets.rdb");
    let (_, out, _) = inspect(&["get", "--json", p(&zsets), "zset:lp"]);
    let doc = json::parse(&out).expect("one document");
    let scores: Vec<String> = doc
        .at("value")
        .arr()
        .iter()
        .map(|p| match &p.arr()[1] {
            Json::Num(n) => format!("{n:?}"),
            Json::Str(s) => s.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(scores.first().map(String::as_str), Some("-inf"));
    assert_eq!(scores.last().map(String::as_str), Some("inf"));
    assert!(out.contains(r#"["tiny",5e-324]"#), "{out}");
    assert!(out.contains(r#"["tenth",0.1]"#), "{out}");
}

#[test]
fn get_prints_one_key_for_people_json_and_resp_and_nil_when_missing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dump = saved_dump(dir.path());
    let (code, out, _) = inspect(&["get", "--json", p(&dump), "h"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "{\"db\":0,\"key\":\"h\",\"type\":\"hash\",\"expire_ms\":null,\"value\":[[\"f1\",\"1\"],[\"f2\",\"2\"]]}\n"
    );
    let (code, out, _) = inspect(&["get", "--json", p(&dump), "b", "--db", "3"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "{\"db\":3,\"key\":\"b\",\"type\":\"string\",\"expire_ms\":99999999999999,\"value\":\"2\"}\n"
    );
    let (code, out, _) = inspect(&["get", "--json", p(&dump), "st"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "{\"db\":0,\"key\":\"st\",\"type\":\"stream\",\"expire_ms\":null,\"value\":{\"entries\":[[\"1-1\",[\"f\",\"v\"]]],\"last_id\":\"1-1\",\"max_deleted_id\":\"0-0\",\"entries_added\":1,\"groups\":[]}}\n"
    );
    // Text.
    let (code, out, _) = inspect(&["get", p(&dump), "l"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "key      \"l\"  (db 0)\ntype     list\nexpires  never\nvalue    3 items\n  1) \"a\"\n  2) \"b\"\n  3) \"c\"\n"
    );
    let (_, out, _) = inspect(&["get", p(&dump), "s3"]);
    assert!(
        out.contains("expires  5138-11-16 09:46:39 UTC (99999999999999 ms; in "),
        "{out}"
    );
    let (_, out, _) = inspect(&["get", p(&dump), "z"]);
    assert!(out.ends_with("  1) \"m1\" 1\n  2) \"m2\" 2\n"), "{out}");
    // export's text is the same blocks, a blank line between keys.
    let (code, out, _) = inspect(&["export", p(&dump), "--type", "list"]);
    assert_eq!(code, 0);
    assert_eq!(out, inspect(&["get", p(&dump), "l"]).1);
    let (_, out, _) = inspect(&["export", p(&dump), "--db", "3"]);
    let blocks: Vec<&str> = out.split("\n\n").collect();
    assert_eq!(blocks.len(), 2, "{out}");
    assert!(blocks.iter().all(|b| b.starts_with("key      ")), "{out}");
    // RESP.
    let (code, out, _) = inspect(&["get", "--resp", p(&dump), "b", "--db", "3"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n*3\r\n$9\r\nPEXPIREAT\r\n$1\r\nb\r\n$14\r\n99999999999999\r\n"
    );
    // Missing: (nil) / null / nothing, exit 0. Another db is another key.
    assert_eq!(
        inspect(&["get", p(&dump), "nope"]),
        (0, "(nil)\n".into(), String::new())
    );
    assert_eq!(
        inspect(&["get", "--json", p(&dump), "h", "--db", "1"]).1,
        "null\n"
    );
    assert_eq!(inspect(&["get", "--resp", p(&dump), "nope"]).1, "");
    // A bad escape is a usage error.
    assert_eq!(inspect(&["get", p(&dump), "--escaped", r"\x4"]).0, 2);
    assert_eq!(inspect(&["get", "/nonexistent/dump.rdb", "k"]).0, 2);
}

#[test]
fn dump_hoz_aof_and_stdin_inputs_export_the_same_keyspace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dump = saved_dump(dir.path());
    let log_dir = tempfile::tempdir().expect("tempdir");
    written_aof(log_dir.path());
    let aof = log_dir.path().join("appendonly.aof");
    let sorted = |text: String| {
        let mut v: Vec<String> = text.lines().map(str::to_string).collect();
        v.sort();
        v
    };
    let (code, from_dump, err) = inspect(&["export", "--json", p(&dump)]);
    assert_eq!(code, 0, "{err}");
    let from_dump = sorted(from_dump);
    assert_eq!(from_dump.len(), 10);
    let (code, from_aof, err) = inspect(&["export", "--json", p(&aof)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(sorted(from_aof), from_dump);
    let stdin = std::fs::File::open(&dump).expect("open");
    let out = Command::new(BIN)
        .args(["export", "--json", "-"])
        .stdin(stdin)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        sorted(String::from_utf8_lossy(&out.stdout).into_owned()),
        from_dump
    );

    // A conversion of the AOF loads into the engine with the same keys.
    let conv = tempfile::tempdir().expect("tempdir");
    let (code, out, err) = inspect(&[
        "export",
        "--json",
        p(&aof),
        "--to",
        "hoz",
        "-o",
        p(&conv.path().join("dump.hoz")),
    ]);
    assert_eq!(code, 0, "{err}");
    let summary = json::parse(&out).expect("summary");
    assert_eq!(summary.at("keys").u64(), 10);
    assert_eq!(summary.at("format").str(), "dump.hoz");
    // Save points make the engine load its snapshot at startup.
    let config = hozon::Config {
        save: hozon::Config::default().save,
        ..engine_config(conv.path())
    };
    assert!(!config.save.is_empty());
    let mut engine = Engine::open_with_io(config, Arc::new(RealIo)).expect("open");
    let mut s = engine.new_session();
    s.authenticated = true;
    let reply = engine.execute(&mut s, &[b"DBSIZE"]);
    assert!(matches!(reply, hozon::Reply::Int(8)), "{reply:?}");
    run(&mut engine, &mut s, &["SELECT", "3"]);
    let reply = engine.execute(&mut s, &[b"PEXPIRETIME", b"b"]);
    assert!(
        matches!(reply, hozon::Reply::Int(99_999_999_999_999)),
        "{reply:?}"
    );
    drop(engine);
    let (_, again, _) = inspect(&["export", "--json", p(&conv.path().join("dump.hoz"))]);
    assert_eq!(sorted(again), from_dump);
}

#[test]
fn filters_limit_and_relative_expiry() {
    let path = fixtures().join("mixed_db_ttl.rdb");
    let (_, all, _) = inspect(&["export", "--json", p(&path)]);
    let all = jsonl(&all);
    for (args, keep) in [
        (
            vec!["--db", "1"],
            &(|l: &Json| l.at("db").u64() == 1) as &dyn Fn(&Json) -> bool,
        ),
        (vec!["--type", "hash"], &|l: &Json| {
            l.at("type").str() == "hash"
        }),
        (vec!["--match", "s*"], &|l: &Json| {
            l.at("key").str().starts_with('s')
        }),
    ] {
        let mut a = vec!["export", "--json", p(&path)];
        a.extend(args.iter().copied());
        let (code, out, _) = inspect(&a);
        assert_eq!(code, 0);
        let want: Vec<Json> = all.iter().filter(|l| keep(l)).cloned().collect();
        assert!(!want.is_empty(), "{args:?}");
        assert_eq!(jsonl(&out), want, "{args:?}");
    }
    let (_, out, _) = inspect(&["export", "--json", p(&path), "--limit", "2"]);
    assert_eq!(jsonl(&out), all[..2].to_vec());

    // Relative expiries: PEXPIRE with the time left; expired keys left out.
    use hozon::rdb::writer::{encode_file, Encoder};
    use hozon::types::{Blob, Value};
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("ttl.rdb");
    let later = now_ms() + 3_600_000;
    let keys = [
        (Blob::from("gone"), Some(1_000i64)),
        (Blob::from("later"), Some(later)),
        (Blob::from("plain"), None),
    ];
    let v = Value::Str(Blob::from("v"));
    let data = encode_file(
        &Encoder::default(),
        1_700_000_000_000,
        keys.iter().map(|(k, e)| (0usize, k, &v, *e)),
    );
    std::fs::write(&file, data).expect("write");
    let (code, resp, err) = inspect_bytes(&[
        "export",
        "--format",
        "resp",
        "--relative-expiry",
        "--replace",
        p(&file),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("1 keys already expired were left out"),
        "{err}"
    );
    let text = String::from_utf8_lossy(&resp);
    assert!(
        !text.contains("gone") && !text.contains("PEXPIREAT"),
        "{text}"
    );
    assert!(text.contains("$3\r\nDEL\r\n$5\r\nlater\r\n"), "{text}");
    let redis_dir = dir.path().join("r");
    std::fs::create_dir(&redis_dir).expect("mkdir");
    let redis = redis_with(&redis_dir, None);
    redis.cli(&["SET", "later", "old", "GET"]);
    pipe_into(&redis, &resp);
    let model = redis_model(&redis);
    redis.stop();
    assert_eq!(model.len(), 2);
    let got = &model[&(0, b"later".to_vec())];
    assert_eq!(got.lines, vec![format!("V {}", hex(b"v"))]);
    assert!((got.expire_ms - later).abs() < 5_000, "{got:?} vs {later}");
    // --skip-expired drops it from the other formats too.
    let (_, out, _) = inspect(&["export", "--json", "--skip-expired", p(&file)]);
    assert_eq!(jsonl(&out).len(), 2);
    // Options that need RESP.
    assert_eq!(inspect(&["export", "--relative-expiry", p(&file)]).0, 2);
}

#[test]
fn conversion_refuses_the_input_and_existing_files_and_keeps_damage_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("in.rdb");
    std::fs::copy(fixtures().join("hashes.rdb"), &src).expect("copy");
    let out = dir.path().join("out.rdb");
    assert_eq!(
        inspect(&["export", p(&src), "--to", "rdb"]).0,
        2,
        "needs --output"
    );
    let (code, _, err) = inspect(&["export", p(&src), "--to", "rdb", "-o", p(&src), "--force"]);
    assert_eq!(code, 2);
    assert!(err.contains("is the input"), "{err}");
    std::fs::write(&out, b"keep me").expect("write");
    let (code, _, err) = inspect(&["export", p(&src), "--to", "rdb", "-o", p(&out)]);
    assert_eq!(code, 2);
    assert!(err.contains("--force"), "{err}");
    assert_eq!(std::fs::read(&out).expect("read"), b"keep me");
    let (code, text, err) = inspect(&["export", p(&src), "--to", "rdb", "-o", p(&out), "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(text.starts_with("wrote "), "{text}");
    assert!(std::fs::read(&out).expect("read").starts_with(b"REDIS0010"));

    // A damaged input: the keys before the damage are exported, exit 1;
    // a conversion leaves no file behind.
    let data = std::fs::read(&src).expect("read");
    let (_, full, _) = super::keys_json(&src, &[]);
    let cut_at = full[full.len() / 2].at("offset").u64() as usize + 2;
    let cut = dir.path().join("cut.rdb");
    std::fs::write(&cut, &data[..cut_at]).expect("write");
    let (code, out_text, err) = inspect(&["export", "--json", p(&cut)]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("damaged") && err.contains("offset"), "{err}");
    assert_eq!(jsonl(&out_text).len(), full.len() / 2);
    let (code, out_text, _) = inspect(&["export", "--format", "json", p(&cut)]);
    assert_eq!(code, 1);
    assert_eq!(
        json::parse(&out_text)
            .expect("still a document")
            .arr()
            .len(),
        full.len() / 2
    );
    let target = dir.path().join("conv.hoz");
    let (code, _, err) = inspect(&["export", p(&cut), "--to", "hoz", "-o", p(&target)]);
    assert_eq!(code, 1, "{err}");
    assert!(!target.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("readdir")
        .map(|e| e.expect("entry").file_name())
        .filter(|n| n.to_string_lossy().starts_with("temp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_closed_pipe_ends_export_quietly() {
    let path = fixtures().join("strings.rdb");
    for format in ["text", "jsonl", "json", "resp"] {
        let p = path.to_str().expect("UTF-8");
        super::assert_quiet_on_a_closed_pipe(&["export", "--format", format, p]);
    }
}

#[test]
fn get_finds_every_key_of_every_rdb_fixture_as_export_shows_it() {
    // `get` on an RDB file decodes only the named record (its own path
    // through the file): it must agree with the full walk of `export`.
    let mut checked = 0;
    for path in rdb_fixtures() {
        let (code, out, err) = inspect(&["export", "--json", p(&path)]);
        assert_eq!(code, 0, "{}: {err}", path.display());
        for line in out.lines() {
            let doc = json::parse(line).expect("a JSON line");
            let key = doc.at("key").str();
            let db = doc.at("db").u64().to_string();
            let (code, got, err) =
                inspect(&["get", "--json", p(&path), "--escaped", key, "--db", &db]);
            assert_eq!(code, 0, "{} {key}: {err}", path.display());
            assert_eq!(got.trim_end(), line, "{} {key}", path.display());
            checked += 1;
        }
    }
    assert!(checked > 100, "{checked}");
    // A module value cannot be decoded: said so, exit 2.
    let path = fixtures().join("legacy_v9_module.rdb");
    let (_, keys, _) = super::keys_json(&path, &["--type", "module"]);
    let key = keys[0].at("key").str();
    let (code, out, err) = inspect(&["get", p(&path), "--escaped", key]);
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("module"), "{err}");
    // Damage before the key: exit 1; a key before the damage is found.
    let dir = tempfile::tempdir().expect("tempdir");
    let full = fixtures().join("mixed_db_ttl.rdb");
    let data = std::fs::read(&full).expect("read");
    let (_, lines, _) = super::keys_json(&full, &[]);
    let cut_at = lines[3].at("offset").u64() as usize + 2;
    let cut = dir.path().join("cut.rdb");
    std::fs::write(&cut, &data[..cut_at]).expect("write");
    let first = lines[0].at("key").str();
    let first_db = lines[0].at("db").u64().to_string();
    let (code, _, err) = inspect(&["get", p(&cut), "--escaped", first, "--db", &first_db]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = inspect(&["get", p(&cut), "no-such-key"]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("damaged"), "{err}");
}
