//! Helpers shared by the persistence tests.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use hozon::config::AppendFsync;
use hozon::persist::io::Io;
use hozon::{Config, Engine, Reply, Session};

/// A durable configuration in `dir` with `policy`.
pub fn durable_config(dir: &Path, policy: AppendFsync) -> Config {
    let mut config = Config::in_memory();
    config.appendonly = true;
    config.appendfsync = policy;
    config.dir = dir.to_path_buf();
    config
}

/// Opens an engine on `io` or panics with the error.
pub fn open(config: Config, io: Arc<dyn Io>) -> Engine {
    Engine::open_with_io(config, io).unwrap_or_else(|e| panic!("open failed: {e}"))
}

/// Runs a command given as words.
pub fn run(engine: &mut Engine, session: &mut Session, words: &[&str]) -> Reply {
    let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    engine.execute(session, &args)
}

fn flatten(reply: Reply) -> Vec<String> {
    match reply {
        Reply::Array(items) | Reply::Set(items) => items.into_iter().flat_map(flatten).collect(),
        Reply::Map(pairs) => pairs
            .into_iter()
            .flat_map(|(k, v)| flatten(k).into_iter().chain(flatten(v)))
            .collect(),
        Reply::Bulk(b) => vec![String::from_utf8_lossy(&b).into_owned()],
        Reply::Int(n) => vec![n.to_string()],
        Reply::Double(d) => vec![hozon::types::num::format_g17(d)],
        Reply::Simple(s) => vec![s.into_owned()],
        Reply::Null | Reply::NullArray => vec!["(nil)".into()],
        other => vec![format!("{other:?}")],
    }
}

/// Every key of every database with its type, canonical value and expiry,
/// read through commands (independent of internal encodings).
pub fn dump(engine: &mut Engine) -> BTreeMap<(usize, String), (String, Vec<String>, String)> {
    let mut session = engine.new_session();
    session.authenticated = true;
    let mut out = BTreeMap::new();
    for db in 0..16 {
        run(engine, &mut session, &["SELECT", &db.to_string()]);
        let keys = flatten(run(engine, &mut session, &["KEYS", "*"]));
        for key in keys {
            let kind = flatten(run(engine, &mut session, &["TYPE", &key])).join("");
            let mut value = match kind.as_str() {
                "string" => flatten(run(engine, &mut session, &["GET", &key])),
                "list" => flatten(run(engine, &mut session, &["LRANGE", &key, "0", "-1"])),
                "hash" => {
                    let flat = flatten(run(engine, &mut session, &["HGETALL", &key]));
                    let mut pairs: Vec<String> = flat.chunks(2).map(|c| c.join("=")).collect();
                    pairs.sort();
                    pairs
                }
                "set" => flatten(run(engine, &mut session, &["SMEMBERS", &key])),
                "zset" => flatten(run(
                    engine,
                    &mut session,
                    &["ZRANGE", &key, "0", "-1", "WITHSCORES"],
                )),
                other => vec![format!("unknown type {other}")],
            };
            if kind == "set" {
                value.sort();
            }
            let expire = flatten(run(engine, &mut session, &["PEXPIRETIME", &key])).join("");
            out.insert((db, key), (kind, value, expire));
        }
    }
    out
}

/// The seed of a randomised test: `HOZON_SEED` when set (to reproduce a
/// failure), else `default`; printed, so a failing test's output names it.
pub fn seed(default: u64) -> u64 {
    crate::harness::seed_or(default)
}
