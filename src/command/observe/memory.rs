//! MEMORY USAGE/STATS/DOCTOR/MALLOC-STATS/PURGE/HELP (Redis's object.c).
//!
//! MEMORY USAGE estimates what Redis 7.0 would report for the same value
//! (its `objectComputeSize` over its encodings, with jemalloc's size
//! classes), not what hozon's own structures take: an operator comparing
//! keys or sizing a Redis migration gets Redis's figure. How close each
//! type comes is in docs/observability.md.

use crate::command::{is, parse_int, CmdResult, CommandSpec, Ctx, SYNTAX_ERR};
use crate::reply::Reply;
use crate::types::Value;

/// MEMORY's subcommands.
pub(super) static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("doctor", "memory|doctor", "server", memory_doctor),
    CommandSpec::from_docs("help", "memory|help", "server", memory_help),
    CommandSpec::from_docs(
        "malloc-stats",
        "memory|malloc-stats",
        "server",
        memory_malloc_stats,
    ),
    CommandSpec::from_docs("purge", "memory|purge", "server", memory_purge),
    CommandSpec::from_docs("stats", "memory|stats", "server", memory_stats),
    CommandSpec::from_docs("usage", "memory|usage", "server", memory_usage),
];

const HELP: &[&str] = &[
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
];

/// Redis's `OBJ_COMPUTE_SIZE_DEF_SAMPLES`.
const DEFAULT_SAMPLES: usize = 5;
/// `sizeof(robj)`.
const ROBJ: usize = 16;
/// `sizeof(dictEntry)`.
const DICT_ENTRY: usize = 24;
/// `sizeof(dict)` (7.0).
const DICT: usize = 56;
/// `sizeof(quicklist)`, `sizeof(quicklistNode)`.
const QUICKLIST: usize = 40;
const QUICKLIST_NODE: usize = 40;

/// jemalloc's size class for an allocation of `n` bytes (what
/// `zmalloc_size` returns for it).
fn size_class(n: usize) -> usize {
    crate::types::size_class::jemalloc(n)
}

/// `sdsZmallocSize` of a string of `len` bytes (sds header by length).
fn sds_size(len: usize) -> usize {
    let header = if len < 32 {
        1
    } else if len < 256 {
        3
    } else if len < 65_536 {
        5
    } else if len < (1 << 32) {
        9
    } else {
        17
    };
    size_class(header + len + 1)
}

/// True when Redis would keep `bytes` as an integer (`string2ll`).
fn is_int(bytes: &[u8]) -> Option<i64> {
    if bytes.len() > 20 || bytes.is_empty() {
        return None;
    }
    crate::types::num::parse_i64(bytes).filter(|v| {
        let mut out = Vec::with_capacity(20);
        crate::types::num::write_i64(&mut out, *v);
        out == bytes
    })
}

/// Bytes of one listpack entry for `bytes` (encoding + data + back-length).
fn listpack_entry(bytes: &[u8]) -> usize {
    let encoded = match is_int(bytes) {
        Some(v) if (0..=127).contains(&v) => 1,
        Some(v) if (-4096..4096).contains(&v) => 2,
        Some(v) if i16::try_from(v).is_ok() => 3,
        Some(v) if (-(1 << 23)..(1 << 23)).contains(&v) => 4,
        Some(v) if i32::try_from(v).is_ok() => 5,
        Some(_) => 9,
        None if bytes.len() < 64 => 1 + bytes.len(),
        None if bytes.len() < 4096 => 2 + bytes.len(),
        None => 5 + bytes.len(),
    };
    let back = match encoded {
        0..=127 => 1,
        128..=16_383 => 2,
        16_384..=2_097_151 => 3,
        2_097_152..=268_435_455 => 4,
        _ => 5,
    };
    encoded + back
}

/// The score as a listpack stores it (an integer when it is one).
fn score_entry(score: f64) -> usize {
    let text = crate::types::num::format_g17(score);
    listpack_entry(text.as_bytes())
}

/// A listpack holding `entries` bytes of entries (header 6, end 1).
fn listpack(entries: usize) -> usize {
    size_class(6 + entries + 1)
}

/// Average bytes per element over the first `samples` of `sizes`, times
/// `count` (Redis's sampling: `elesize/samples*size`).
fn sampled(sizes: impl Iterator<Item = usize>, samples: usize, count: usize) -> usize {
    let (mut total, mut seen) = (0usize, 0usize);
    for size in sizes.take(samples) {
        total += size;
        seen += 1;
    }
    if seen == 0 {
        0
    } else {
        (total as f64 / seen as f64 * count as f64) as usize
    }
}

/// `dictSlots` of a table holding `n` entries.
fn slots(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        n.next_power_of_two().max(4)
    }
}

/// Redis 7.0's `objectComputeSize` for `value`, estimated from hozon's
/// value with Redis's encodings (`samples`: elements sampled in big
/// collections, 0 for all).
pub fn value_usage(value: &Value, samples: usize) -> usize {
    let samples = if samples == 0 { usize::MAX } else { samples };
    match value {
        Value::Str(s) => {
            let bytes = s.as_bytes();
            if is_int(bytes).is_some() {
                ROBJ
            } else if bytes.len() <= 44 {
                size_class(ROBJ + 3 + bytes.len() + 1)
            } else {
                ROBJ + sds_size(bytes.len())
            }
        }
        Value::List(list) => {
            // A quicklist of listpacks of at most 8 KiB (`-2`): the first
            // `samples` nodes laid out as Redis fills them, the rest
            // extrapolated from their average (Redis's sampling).
            let mut nodes: Vec<(usize, usize)> = Vec::new(); // (bytes, count)
            let mut current = (0usize, 0usize);
            for element in list.iter() {
                let entry = listpack_entry(element);
                if current.1 > 0 && 6 + current.0 + entry + 1 > 8192 {
                    nodes.push(current);
                    if nodes.len() >= samples {
                        current = (0, 0);
                        break;
                    }
                    current = (0, 0);
                }
                current.0 += entry;
                current.1 += 1;
            }
            if current.1 > 0 {
                nodes.push(current);
            }
            let sampled_elements: usize = nodes.iter().map(|n| n.1).sum();
            let sampled_bytes: usize = nodes.iter().map(|n| QUICKLIST_NODE + listpack(n.0)).sum();
            let total_nodes = if sampled_elements >= list.len() || nodes.is_empty() {
                nodes.len().max(1)
            } else {
                let per_node = sampled_elements as f64 / nodes.len() as f64;
                (list.len() as f64 / per_node).ceil() as usize
            };
            let per_node = sampled_bytes as f64 / nodes.len().max(1) as f64;
            ROBJ + QUICKLIST + (per_node * total_nodes as f64) as usize
        }
        Value::Hash(hash) => {
            if hash.encoding() == "listpack" {
                let entries: usize = hash
                    .iter()
                    .map(|(f, v)| listpack_entry(f) + listpack_entry(v))
                    .sum();
                ROBJ + listpack(entries)
            } else {
                let per = hash
                    .iter()
                    .map(|(f, v)| DICT_ENTRY + sds_size(f.len()) + sds_size(v.len()));
                ROBJ + DICT + 8 * slots(hash.len()) + sampled(per, samples, hash.len())
            }
        }
        Value::Set(set) => {
            if set.encoding() == "intset" {
                let width = set
                    .iter()
                    .map(|m| match m {
                        crate::types::set::Member::Int(v) if i16::try_from(v).is_ok() => 2,
                        crate::types::set::Member::Int(v) if i32::try_from(v).is_ok() => 4,
                        _ => 8,
                    })
                    .max()
                    .unwrap_or(2);
                ROBJ + size_class(8 + width * set.len())
            } else {
                let per = set
                    .iter()
                    .map(|m| DICT_ENTRY + m.with_bytes(|b| sds_size(b.len())));
                ROBJ + DICT + 8 * slots(set.len()) + sampled(per, samples, set.len())
            }
        }
        Value::ZSet(zset) => {
            if zset.encoding() == "listpack" {
                let entries: usize = zset
                    .iter()
                    .map(|(m, score)| listpack_entry(m) + score_entry(score))
                    .sum();
                ROBJ + listpack(entries)
            } else {
                // zset + zskiplist + dict + slots + the skiplist header
                // (32 levels); per element the sds, a dictEntry and a
                // node of 1.33 levels on average (Redis's random levels).
                let header = size_class(8 + 8 + 8 + 32 * 16);
                let per = zset
                    .iter()
                    // A node has 1 level with p 3/4, 2 with 3/16, …:
                    // 53 bytes on average with jemalloc's classes.
                    .map(|(m, _)| sds_size(m.len()) + DICT_ENTRY + 53);
                ROBJ + 16
                    + 32
                    + DICT
                    + 8 * slots(zset.len())
                    + header
                    + sampled(per, samples, zset.len())
            }
        }
        Value::Stream(stream) => {
            // Redis's estimate: the stream struct, the radix tree (30
            // words per node), the listpacks (each preallocated to 4 KiB,
            // 100 entries by default), the groups' and consumers' PELs.
            let rax = |elements: usize| elements * 16 + (elements + 1) * (4 + 8 * 30);
            let nodes = stream.node_count().max(1);
            let mut bytes = 0usize;
            let mut fields_seen = false;
            for (_, fields) in stream.range(
                crate::types::stream::StreamId::MIN,
                crate::types::stream::StreamId::MAX,
                false,
            ) {
                // flags, ms and seq deltas, the back count, the values
                bytes += 8;
                for (field, value) in fields.iter() {
                    bytes += listpack_entry(value.as_bytes());
                    if !fields_seen {
                        bytes += listpack_entry(field.as_bytes());
                    }
                }
                fields_seen = true;
            }
            let per_node = listpack((bytes / nodes).max(4096 - 7));
            let mut usage = ROBJ + 80 + rax(stream.node_count()) + per_node * nodes;
            for group in stream.groups.values() {
                usage += 40 + rax(group.pel.len()) + 24 * group.pel.len();
                for (name, consumer) in &group.consumers {
                    usage += 24 + name.as_bytes().len() + rax(consumer.pel.len());
                }
            }
            usage
        }
    }
}

fn memory_usage(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut samples = DEFAULT_SAMPLES;
    let mut j = 3;
    while j < argv.len() {
        if is(argv[j], "samples") && j + 1 < argv.len() {
            let n = parse_int(argv[j + 1])?;
            if n < 0 {
                return Err(Reply::err(SYNTAX_ERR));
            }
            samples = if n == 0 { 0 } else { n as usize };
            j += 2;
        } else {
            return Err(Reply::err(SYNTAX_ERR));
        }
    }
    // Redis looks the key up in the dictionary directly: a key past its
    // TTL that is still held is measured.
    let db = ctx.core.keyspace.db(ctx.session.db);
    let Some(value) = db.get(argv[2]) else {
        return Ok(Reply::Null);
    };
    let usage = value_usage(value, samples) + sds_size(argv[2].len()) + DICT_ENTRY;
    Ok(Reply::Int(usage as i64))
}

/// The figures MEMORY STATS and MEMORY DOCTOR share (Redis's
/// `getMemoryOverheadData`).
struct Overhead {
    peak: u64,
    total: u64,
    startup: u64,
    backlog: u64,
    clients_normal: u64,
    clients: u64,
    lua: u64,
    functions: u64,
    dbs: Vec<(usize, u64, u64)>,
    overhead_total: u64,
    keys: u64,
    rss: u64,
    scripts: usize,
}

fn overhead(ctx: &Ctx) -> Overhead {
    let rss = process_rss();
    let (total, peak, startup) = match ctx.host.used_memory() {
        Some(m) => (m.used, m.peak.max(m.used), m.startup.min(m.used)),
        None => (rss, rss, 0),
    };
    let backlog = ctx
        .core
        .repl
        .buffer
        .as_ref()
        .map_or(0, |b| b.memory() as u64);
    let mut clients_normal = ctx.host.connection().map_or(0, |c| c.total_bytes as u64);
    let mut clients = u64::from(ctx.host.connection().is_some());
    ctx.host.for_each_client(&mut |_, conn| {
        clients_normal += conn.total_bytes as u64;
        clients += 1;
    });
    let (lua, scripts) = crate::command::scripting::state(ctx.core)
        .map_or((0, 0), |s| (s.scripts_bytes() as u64, s.cached()));
    let functions = ctx.core.functions.code_bytes() as u64;
    let mut dbs = Vec::new();
    let mut keys = 0u64;
    let mut tables = 0u64;
    for id in 0..ctx.core.keyspace.db_count() {
        let db = ctx.core.keyspace.db(id);
        if db.is_empty() {
            continue;
        }
        keys += db.len() as u64;
        let main = (db.len() * DICT_ENTRY + slots(db.len()) * 8) as u64;
        let expires = (db.expires_len() * DICT_ENTRY + slots(db.expires_len()) * 8) as u64;
        tables += main + expires;
        dbs.push((id, main, expires));
    }
    let overhead_total = startup + backlog + clients_normal + lua + functions + tables;
    Overhead {
        peak,
        total,
        startup,
        backlog,
        clients_normal,
        clients,
        lua,
        functions,
        dbs,
        overhead_total,
        keys,
        rss,
        scripts,
    }
}

fn memory_stats(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let m = overhead(ctx);
    let int = |v: u64| Reply::Int(v as i64);
    let name = |s: &str| Reply::bulk(s.as_bytes());
    let dataset = m.total.saturating_sub(m.overhead_total);
    let net = m.total.saturating_sub(m.startup);
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let mut out = vec![
        (name("peak.allocated"), int(m.peak)),
        (name("total.allocated"), int(m.total)),
        (name("startup.allocated"), int(m.startup)),
        (name("replication.backlog"), int(m.backlog)),
        (name("clients.slaves"), int(0)),
        (name("clients.normal"), int(m.clients_normal)),
        (name("cluster.links"), int(0)),
        (name("aof.buffer"), int(0)),
        (name("lua.caches"), int(m.lua)),
        (name("functions.caches"), int(m.functions)),
    ];
    for &(id, main, expires) in &m.dbs {
        out.push((
            name(&format!("db.{id}")),
            Reply::Map(vec![
                (name("overhead.hashtable.main"), int(main)),
                (name("overhead.hashtable.expires"), int(expires)),
                (name("overhead.hashtable.slot-to-keys"), int(0)),
            ]),
        ));
    }
    out.extend([
        (name("overhead.total"), int(m.overhead_total)),
        (name("keys.count"), int(m.keys)),
        (
            name("keys.bytes-per-key"),
            int(net.checked_div(m.keys).unwrap_or(0)),
        ),
        (name("dataset.bytes"), int(dataset)),
        (
            name("dataset.percentage"),
            Reply::Double(ratio(dataset * 100, net)),
        ),
        (
            name("peak.percentage"),
            Reply::Double(ratio(m.total * 100, m.peak)),
        ),
        (name("allocator.allocated"), int(m.total)),
        (name("allocator.active"), int(m.total)),
        (name("allocator.resident"), int(m.rss)),
        (name("allocator-fragmentation.ratio"), Reply::Double(1.0)),
        (name("allocator-fragmentation.bytes"), int(0)),
        (
            name("allocator-rss.ratio"),
            Reply::Double(ratio(m.rss, m.total)),
        ),
        (
            name("allocator-rss.bytes"),
            Reply::Int(m.rss as i64 - m.total as i64),
        ),
        (name("rss-overhead.ratio"), Reply::Double(1.0)),
        (name("rss-overhead.bytes"), int(0)),
        (name("fragmentation"), Reply::Double(ratio(m.rss, m.total))),
        (
            name("fragmentation.bytes"),
            Reply::Int(m.rss as i64 - m.total as i64),
        ),
    ]);
    Ok(Reply::Map(out))
}

fn memory_doctor(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let m = overhead(ctx);
    let mut reports: Vec<&str> = Vec::new();
    let empty = m.total < 5 * 1024 * 1024;
    if !empty {
        if m.peak as f64 / m.total as f64 > 1.5 {
            reports.push(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
        }
        let frag = m.rss as f64 / m.total.max(1) as f64;
        if frag > 1.4 && m.rss.saturating_sub(m.total) > 10 << 20 {
            reports.push(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"libc\".\n\n");
        }
        if m.clients > 0 && m.clients_normal / m.clients > 1024 * 200 {
            reports.push(" * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n");
        }
        if m.scripts > 1000 {
            reports.push(" * Many scripts: There seem to be many cached scripts in this instance (more than 1000). This may be because scripts are generated and `EVAL`ed, instead of being parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming most of your memory.\n\n");
        }
    }
    let text = if empty {
        "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".to_string()
    } else if reports.is_empty() {
        "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".to_string()
    } else {
        let mut s =
            "Sam, I detected a few issues in this Redis instance memory implants:\n\n".to_string();
        for r in reports {
            s.push_str(r);
        }
        s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
        s
    };
    Ok(Reply::Verbatim(*b"txt", text.into_bytes()))
}

/// Resident set size of the process, from `/proc/self/status` (0 where
/// there is none).
fn process_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// MALLOC-STATS: hozon counts its allocations itself (Redis answers
/// "Stats not supported for the current allocator" under libc malloc,
/// jemalloc's report under jemalloc); the counting allocator's figures.
fn memory_malloc_stats(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let text = match ctx.host.used_memory() {
        Some(m) => format!(
            "hozon counting allocator (system malloc underneath)\nallocated: {}\npeak: {}\nstartup: {}\nresident: {}\n",
            m.used,
            m.peak,
            m.startup,
            process_rss()
        ),
        None => "Stats not supported for the current allocator\n".to_string(),
    };
    Ok(Reply::Verbatim(*b"txt", text.into_bytes()))
}

/// PURGE: Redis asks jemalloc to release dirty pages; hozon's allocator
/// (the system malloc) returns freed memory by itself. OK, as Redis under
/// libc.
fn memory_purge(_ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::ok())
}

fn memory_help(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(crate::command::server::help_reply(argv, HELP))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jemalloc_classes() {
        let classes: Vec<usize> = [1, 8, 9, 17, 33, 100, 129, 257, 1025]
            .iter()
            .map(|&n| size_class(n))
            .collect();
        assert_eq!(classes, vec![8, 8, 16, 32, 48, 112, 160, 320, 1280]);
    }

    use crate::types::Blob;

    #[test]
    fn small_string_key_is_redis_64() {
        // What redis-server 7.0.15 (jemalloc) answers for SET foo bar.
        let v = Value::Str(Blob::new(b"bar"));
        assert_eq!(value_usage(&v, 5) + sds_size(3) + DICT_ENTRY, 64);
    }
}
