//! Observability commands and the dispatch's statistics hooks: SLOWLOG
//! (`slowlog.rs`), LATENCY (`latency.rs`), MEMORY (`memory.rs`), and the
//! functions the dispatch, EXEC and the script bridge call around each
//! command (Redis's `call()` bookkeeping). The counters themselves live in
//! `core::stats_calls` (docs/observability.md).

mod latency;
mod memory;
mod slowlog;

use super::{flags, CommandSpec, Ctx, Host, Session};
use crate::core::stats_clock::{self, Stamp};
use crate::core::Core;
use crate::reply::Reply;

/// The family's table: SLOWLOG, LATENCY, MEMORY.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("slowlog", "slowlog", "server", super::container_handler)
        .with_subcommands(slowlog::SUBCOMMANDS),
    CommandSpec::from_docs("latency", "latency", "server", super::container_handler)
        .with_subcommands(latency::SUBCOMMANDS),
    CommandSpec::from_docs("memory", "memory", "server", super::container_handler)
        .with_subcommands(memory::SUBCOMMANDS),
];

/// The key a spec's counters are filed under: its address (each spec is
/// a static of the command table).
fn key_of(spec: &'static CommandSpec) -> usize {
    spec as *const CommandSpec as usize
}

/// The spec Redis's `processCommand` charges a refused command to
/// (`lookupCommand`): the command, or its subcommand; none when unknown
/// (or an unknown subcommand).
fn refused_spec(argv: &[&[u8]]) -> Option<(&'static str, &'static str, usize)> {
    let top = super::lookup(argv.first()?)?;
    if top.subcommands.is_empty() || argv.len() == 1 {
        return Some((top.name, top.name, key_of(top)));
    }
    let sub = top.subcommand(argv[1])?;
    Some((top.name, sub.name, key_of(sub)))
}

/// A command refused before it ran (arity, NOAUTH, MISCONF, LOADING, …):
/// its error counted, `rejected_calls` of the command if it exists.
pub(crate) fn rejected(core: &mut Core, argv: &[&[u8]], reply: &Reply) {
    if core.loading {
        // Replaying the AOF: nothing is counted (Redis runs loaded
        // commands outside `call()`).
        return;
    }
    if let Reply::Error(text) = reply {
        core.observe.rejected(refused_spec(argv), text);
    }
}

/// Marks the start of a top-level command.
pub(crate) fn call_started(core: &mut Core) {
    core.observe.call_started();
}

/// After a command ran (Redis's `call()`): commandstats, errorstats, the
/// latency histogram, the latency monitor's `command`/`fast-command`
/// events and the slowlog. A command that blocked gets its time, its
/// histogram sample and its slowlog entry when it is served
/// ([`after_unblock`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn after_call(
    core: &mut Core,
    session: &Session,
    host: &dyn Host,
    top: &'static CommandSpec,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    started: Stamp,
    reply: &Reply,
) {
    if core.loading {
        return;
    }
    let nanos = stats_clock::nanos_since(started);
    let blocked = session.blocked.is_some();
    let track = core.config.latency_tracking;
    core.observe.after_call(
        top.name,
        spec.name,
        key_of(spec),
        nanos,
        reply,
        track,
        blocked,
    );
    monitor_and_log(core, session, host, spec, argv, nanos, blocked);
}

/// A command run by EXEC or a script (Redis's nested `call()`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn nested_call(
    core: &mut Core,
    session: &Session,
    host: &dyn Host,
    (top, spec): (&'static CommandSpec, &'static CommandSpec),
    argv: &[&[u8]],
    started: Stamp,
    reply: &Reply,
    in_script: bool,
) {
    if core.loading {
        return;
    }
    let nanos = stats_clock::nanos_since(started);
    let track = core.config.latency_tracking;
    core.observe.nested_call(
        top.name,
        spec.name,
        key_of(spec),
        nanos,
        reply,
        track,
        in_script,
    );
    monitor_and_log(core, session, host, spec, argv, nanos, false);
}

/// A command a script's `redis.call` refused (unknown, arity, not allowed
/// from scripts, a write refusal): counted once (Redis's `scriptCall`).
pub(crate) fn script_refusal(ctx: &mut Ctx, argv: &[&[u8]], error: &str) {
    if ctx.core.loading {
        return;
    }
    ctx.core.observe.script_refusal(refused_spec(argv), error);
}

/// The latency monitor and the slowlog after a command.
fn monitor_and_log(
    core: &mut Core,
    session: &Session,
    host: &dyn Host,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    nanos: u64,
    blocked: bool,
) {
    let ms = nanos / 1_000_000;
    let threshold = core.config.latency_monitor_threshold;
    if threshold != 0 && ms >= threshold {
        let event = if spec.has(flags::FAST) {
            "fast-command"
        } else {
            "command"
        };
        core.observe
            .latency
            .add(event, ms, crate::clock::now_ms() / 1000);
    }
    if blocked {
        // Its entry comes when the wait ends, outside this connection.
        if let Some(c) = host.connection() {
            core.observe.slowlog.note_blocked(session.id, c.addr);
        }
    } else if !spec.has(flags::SKIP_SLOWLOG) {
        push_slowlog(core, session, host, argv, nanos / 1000);
    }
}

fn push_slowlog(core: &mut Core, session: &Session, host: &dyn Host, argv: &[&[u8]], usec: u64) {
    let peer = || host.connection().map_or_else(String::new, |c| c.addr);
    push_slowlog_from(core, session, peer, argv, usec);
}

/// [`push_slowlog`] with the client's address from `peer`.
fn push_slowlog_from(
    core: &mut Core,
    session: &Session,
    peer: impl FnOnce() -> String,
    argv: &[&[u8]],
    usec: u64,
) {
    let slower_than = core.config.slowlog_log_slower_than;
    if slower_than < 0 || (usec as i64) < slower_than {
        return;
    }
    let max_len = core.config.slowlog_max_len;
    let argv = redacted(argv);
    let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_ref()).collect();
    core.observe.slowlog.push_if_needed(
        slower_than,
        max_len,
        usec,
        &refs,
        crate::clock::now_ms() / 1000,
        || (peer(), session.name.clone().unwrap_or_default()),
    );
}

/// The arguments with the secrets Redis redacts from the slowlog
/// replaced by `(redacted)`: AUTH's, HELLO AUTH's, ACL SETUSER's, CONFIG
/// SET `masterauth`/`masteruser`/`requirepass` values, MIGRATE's
/// AUTH/AUTH2 (Redis's `redactClientCommandArgument` callers).
fn redacted<'a>(argv: &[&'a [u8]]) -> Vec<std::borrow::Cow<'a, [u8]>> {
    use std::borrow::Cow;
    let mut out: Vec<Cow<'a, [u8]>> = argv.iter().map(|a| Cow::Borrowed(*a)).collect();
    let is = |a: &[u8], w: &str| a.eq_ignore_ascii_case(w.as_bytes());
    let secret: &'static [u8] = b"(redacted)";
    let first = argv.first().copied().unwrap_or_default();
    if argv.len() >= 4 && is(first, "config") && is(argv[1], "set") {
        let mut j = 2;
        while j + 1 < argv.len() {
            if ["masterauth", "masteruser", "requirepass"]
                .iter()
                .any(|name| is(argv[j], name))
            {
                out[j + 1] = Cow::Borrowed(secret);
            }
            j += 2;
        }
    }
    if is(first, "auth") && (2..=3).contains(&argv.len()) {
        for arg in out.iter_mut().skip(1) {
            *arg = Cow::Borrowed(secret);
        }
    }
    if is(first, "hello") {
        let mut j = 2;
        while j < argv.len() {
            if is(argv[j], "auth") && j + 2 < argv.len() {
                out[j + 1] = Cow::Borrowed(secret);
                out[j + 2] = Cow::Borrowed(secret);
                j += 2;
            } else if is(argv[j], "setname") {
                j += 1;
            }
            j += 1;
        }
    }
    if argv.len() >= 3 && is(first, "acl") && is(argv[1], "setuser") {
        for arg in out.iter_mut().skip(2) {
            *arg = Cow::Borrowed(secret);
        }
    }
    if is(first, "migrate") {
        let mut j = 6;
        while j < argv.len() {
            if is(argv[j], "auth") && j + 1 < argv.len() {
                out[j + 1] = Cow::Borrowed(b"(redacted)");
                j += 1;
            } else if is(argv[j], "auth2") && j + 2 < argv.len() {
                out[j + 1] = Cow::Borrowed(b"(redacted)");
                out[j + 2] = Cow::Borrowed(b"(redacted)");
                j += 2;
            } else if is(argv[j], "keys") {
                break;
            }
            j += 1;
        }
    }
    out
}

/// A blocked command served, timed out or unblocked (Redis's
/// `updateStatsOnUnblock`): the serving time added, UNBLOCKED counted as
/// its failure, the histogram sample, the slowlog entry, and the
/// `command-unblocking` latency event.
///
/// `counted`: the reply's error was counted already (CLIENT UNBLOCK …
/// ERROR counts it when it runs, as Redis replies it then).
pub(crate) fn after_unblock(
    core: &mut Core,
    session: &Session,
    argv: &[&[u8]],
    started: Stamp,
    reply: Option<&Reply>,
    counted: bool,
) {
    let Ok((top, spec)) = super::resolve(argv) else {
        return;
    };
    let nanos = stats_clock::nanos_since(started);
    let error = match reply {
        Some(Reply::Error(text)) => Some(text.as_ref()),
        _ => None,
    };
    let track = core.config.latency_tracking;
    core.observe.after_unblock(
        top.name,
        spec.name,
        key_of(spec),
        nanos,
        error,
        counted,
        track,
    );
    let threshold = core.config.latency_monitor_threshold;
    let ms = nanos / 1_000_000;
    if threshold != 0 && ms >= threshold {
        core.observe
            .latency
            .add("command-unblocking", ms, crate::clock::now_ms() / 1000);
    }
    // The address noted when the command blocked (Redis logs the
    // blocked client's own).
    let peer = core.observe.slowlog.take_blocked(session.id);
    if !spec.has(flags::SKIP_SLOWLOG) {
        push_slowlog_from(
            core,
            session,
            || peer.unwrap_or_default(),
            argv,
            nanos / 1000,
        );
    }
}

/// The cron's part (every 100 ms at most): the instantaneous metrics
/// sampled (Redis's `trackInstantaneousMetric`), the AOF's worst write
/// and fsync durations given to the latency monitor.
pub(crate) fn cron(core: &mut Core, now_ms: i64) {
    let aof_written = core
        .aof
        .as_ref()
        .map_or(0, |aof| aof.writer_stats().bytes_written);
    let readings = crate::core::stats_calls::Readings {
        commands: core.stats.commands_processed,
        net_input: core.stats.net_input_bytes,
        net_output: core.stats.net_output_bytes,
        repl_input: core.repl.stats.net_repl_input_bytes,
        repl_output: core.repl.stats.net_repl_output_bytes,
        aof_written,
    };
    if !core.observe.track(now_ms, readings) {
        return;
    }
    let threshold = core.config.latency_monitor_threshold;
    if let Some(aof) = core.aof.as_mut() {
        for (event, ms) in aof.take_latency_samples() {
            core.observe
                .latency
                .add_if_needed(threshold, event, ms, now_ms / 1000);
        }
    }
}

/// Redis's `getSafeInfoString`: `#`, `:`, CR and LF become `_`.
fn safe_info(name: &str) -> String {
    name.replace(['#', ':', '\r', '\n'], "_")
}

/// INFO commandstats (Redis's `genRedisInfoStringCommandStats`; ordered
/// by name, Redis's follows its hash table).
pub(crate) fn commandstats_lines(core: &Core) -> Vec<String> {
    core.observe
        .command_stats()
        .into_iter()
        .filter(|(_, s)| s.calls > 0 || s.failed_calls > 0 || s.rejected_calls > 0)
        .map(|(name, s)| {
            let per_call = if s.calls == 0 {
                0.0
            } else {
                s.usec as f32 / s.calls as f32
            };
            format!(
                "cmdstat_{}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}",
                safe_info(&name),
                s.calls,
                s.usec,
                s.rejected_calls,
                s.failed_calls
            )
        })
        .collect()
}

/// INFO errorstats.
pub(crate) fn errorstats_lines(core: &Core) -> Vec<String> {
    core.observe
        .error_stats()
        .iter()
        .map(|(prefix, count)| format!("errorstat_{}:count={count}", safe_info(prefix)))
        .collect()
}

/// INFO latencystats (only with `latency-tracking yes`): Redis's
/// `fillPercentileDistributionLatencies`.
pub(crate) fn latencystats_lines(core: &Core) -> Vec<String> {
    if !core.config.latency_tracking {
        return Vec::new();
    }
    let percentiles = &core.config.latency_tracking_info_percentiles;
    core.observe
        .command_stats()
        .into_iter()
        .filter_map(|(name, s)| {
            let h = s.histogram.as_deref()?;
            let values: Vec<String> = percentiles
                .iter()
                .map(|&p| {
                    format!(
                        "p{}={:.3}",
                        crate::config::trim_double(&format!("{p:.6}")),
                        h.value_at_percentile(p) as f64 / 1000.0
                    )
                })
                .collect();
            Some(format!(
                "latency_percentiles_usec_{}:{}",
                safe_info(&name),
                values.join(",")
            ))
        })
        .collect()
}

/// hozon's own INFO persistence fields (with the AOF on): fsync count
/// and latency, time since the last successful fsync, bytes written and
/// their rate, the longest wait under `appendfsync always`.
pub(crate) fn persistence_lines(core: &Core, now_ms: i64) -> Vec<String> {
    use crate::core::stats_calls::MetricKind;
    let Some(aof) = core.aof.as_ref() else {
        return Vec::new();
    };
    let fsync = aof.fsync_stats();
    let writer = aof.writer_stats();
    let since = if fsync.last_ok_ms == 0 {
        -1
    } else {
        ((now_ms - fsync.last_ok_ms) / 1000).max(0)
    };
    let histogram: Vec<String> = fsync
        .buckets
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(i, n)| format!("le{}={n}", 1u64 << (i + 1)))
        .collect();
    vec![
        format!("hozon_aof_fsyncs:{}", fsync.count),
        format!(
            "hozon_aof_fsync_latency_usec:p50={},p99={},p99.9={},max={}",
            fsync.percentile_us(50.0),
            fsync.percentile_us(99.0),
            fsync.percentile_us(99.9),
            fsync.max_us
        ),
        format!("hozon_aof_fsync_histogram_usec:{}", histogram.join(",")),
        format!("hozon_aof_last_fsync_seconds_ago:{since}"),
        format!("hozon_aof_unsynced_bytes:{}", aof.unsynced_bytes()),
        format!("hozon_aof_written_bytes:{}", writer.bytes_written),
        format!(
            "hozon_aof_written_bytes_per_sec:{}",
            core.observe.instantaneous(MetricKind::AofWritten)
        ),
        format!(
            "hozon_aof_fsync_always_max_wait_usec:{}",
            writer.always_wait_max_us
        ),
    ]
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::engine::Engine;

    fn run(engine: &mut Engine, session: &mut crate::command::Session, line: &str) {
        let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        engine.execute(session, &argv);
    }

    fn stat(engine: &mut Engine, name: &str) -> Option<(u64, u64, u64)> {
        engine
            .core()
            .observe
            .command_stats()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| (s.calls, s.rejected_calls, s.failed_calls))
    }

    /// Calls, rejections and failures are counted; commands replayed from
    /// the AOF at startup are not (Redis runs them outside `call()`).
    #[test]
    fn counted_when_served_not_when_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::in_memory();
        config.appendonly = true;
        config.dir = dir.path().to_path_buf();
        {
            let mut engine = Engine::open(config.clone()).unwrap();
            let mut s = engine.new_session();
            run(&mut engine, &mut s, "SET k v");
            run(&mut engine, &mut s, "SET k");
            run(&mut engine, &mut s, "INCR k");
            run(&mut engine, &mut s, "NOSUCH");
            assert_eq!(stat(&mut engine, "set"), Some((1, 1, 0)));
            assert_eq!(stat(&mut engine, "incr"), Some((1, 0, 1)));
            assert_eq!(engine.core().observe.total_error_replies, 3);
        }
        let mut engine = Engine::open(config).unwrap();
        assert_eq!(stat(&mut engine, "set"), None);
        assert_eq!(engine.core().observe.total_error_replies, 0);
    }
}
