//! What INFO `commandstats`, `errorstats`, `latencystats` and the
//! `instantaneous_*` fields of INFO `stats` report, collected as Redis's
//! `call()` collects them (docs/observability.md).
//!
//! The dispatch takes one monotonic clock reading before a command and one
//! after, then calls [`Observe::after_call`]: a hash lookup by the spec's
//! address, three additions, one histogram slot, and (only when the
//! thresholds say so) a slowlog entry or a latency event.

use std::collections::BTreeMap;
use std::collections::HashMap;

use super::stats_hist::Histogram;
use super::stats_latency::LatencyMonitor;
use super::stats_slowlog::Slowlog;
use crate::reply::Reply;

/// One command's counters (Redis's `redisCommand` statistics).
#[derive(Debug, Default, Clone)]
pub struct CommandStat {
    /// Executions (EXEC's and scripts' nested commands included).
    pub calls: u64,
    /// Microseconds spent in them.
    pub usec: u64,
    /// Refused before they ran (arity, NOAUTH, MISCONF, …).
    pub rejected_calls: u64,
    /// Ran and replied an error.
    pub failed_calls: u64,
    /// Latency histogram (`latency-tracking`), allocated on first use.
    pub histogram: Option<Box<Histogram>>,
}

/// Redis's `STATS_METRIC_SAMPLES`: the instantaneous metrics average the
/// last 16 samples.
const METRIC_SAMPLES: usize = 16;

/// One instantaneous metric (Redis's `inst_metric`): a rate sampled every
/// 100 ms by the cron.
#[derive(Debug, Default, Clone)]
struct Metric {
    samples: [u64; METRIC_SAMPLES],
    idx: usize,
    last_sample_ms: i64,
    last_count: u64,
}

impl Metric {
    fn track(&mut self, now_ms: i64, reading: u64) {
        let t = now_ms - self.last_sample_ms;
        let ops = reading.saturating_sub(self.last_count);
        let per_sec = if t > 0 { ops * 1000 / t as u64 } else { 0 };
        self.samples[self.idx] = per_sec;
        self.idx = (self.idx + 1) % METRIC_SAMPLES;
        self.last_sample_ms = now_ms;
        self.last_count = reading;
    }

    fn value(&self) -> u64 {
        self.samples.iter().sum::<u64>() / METRIC_SAMPLES as u64
    }
}

/// The instantaneous metrics Redis tracks.
#[derive(Debug, Clone, Copy)]
pub enum MetricKind {
    /// Commands per second.
    Commands = 0,
    /// Network input bytes per second (clients and replication).
    NetInput = 1,
    /// Network output bytes per second (clients and replication).
    NetOutput = 2,
    /// Replication input bytes per second.
    ReplInput = 3,
    /// Replication output bytes per second.
    ReplOutput = 4,
    /// AOF bytes written per second (hozon's own).
    AofWritten = 5,
}

/// The readings the cron samples, each a running total.
#[derive(Debug, Clone, Copy, Default)]
pub struct Readings {
    /// `total_commands_processed`.
    pub commands: u64,
    /// Client input bytes.
    pub net_input: u64,
    /// Client output bytes.
    pub net_output: u64,
    /// Replication input bytes.
    pub repl_input: u64,
    /// Replication output bytes.
    pub repl_output: u64,
    /// AOF bytes written.
    pub aof_written: u64,
}

/// Everything observed about commands: the counters, the error table,
/// the slowlog, the latency monitor, the instantaneous rates.
#[derive(Debug, Default)]
pub struct Observe {
    /// Per command, keyed by the address of its `CommandSpec` (each
    /// subcommand its own entry), with its full name.
    commands: HashMap<usize, (&'static str, &'static str, CommandStat), foldhash::fast::FixedState>,
    /// `errorstat_<PREFIX>:count=` (Redis 7.0.15 keeps every prefix; the
    /// 128-kinds limit came with 7.2).
    errors: BTreeMap<String, u64>,
    /// `total_error_replies`.
    pub total_error_replies: u64,
    /// The last error a script's `redis.call` produced: when the script
    /// raises it again the caller's reply is not counted twice (Redis's
    /// `ignore_error_stats_update`).
    last_script_error: Option<String>,
    /// `total_error_replies` when the last call began or ended (Redis's
    /// `prev_err_count`): a call during which errors were counted failed,
    /// whoever received them (CLIENT UNBLOCK … ERROR fails too).
    prev_err_count: u64,
    /// The slowlog.
    pub slowlog: Slowlog,
    /// The latency monitor's events.
    pub latency: LatencyMonitor,
    metrics: [Metric; 6],
    /// Cron time of the last sampling.
    last_track_ms: i64,
}

/// The prefix errorstats files an error under: its first word (up to a
/// space within 32 bytes), `ERR` when it has none (Redis's
/// `afterErrorReply`).
pub fn error_prefix(text: &str) -> &str {
    // Redis looks within 32 bytes of the reply line, its '-' included.
    let head = &text.as_bytes()[..text.len().min(31)];
    match head.iter().position(|&b| b == b' ') {
        Some(0) | None => "ERR",
        Some(end) => &text[..end],
    }
}

/// The error text of a reply, when it is one.
fn error_of(reply: &Reply) -> Option<&str> {
    match reply {
        Reply::Error(text) => Some(text),
        Reply::Frames(frames) => frames.iter().find_map(error_of),
        _ => None,
    }
}

impl Observe {
    fn entry(&mut self, top: &'static str, name: &'static str, key: usize) -> &mut CommandStat {
        &mut self
            .commands
            .entry(key)
            .or_insert_with(|| (top, name, CommandStat::default()))
            .2
    }

    /// Counts one error reply (`total_error_replies`, errorstats).
    pub fn count_error(&mut self, text: &str) {
        self.total_error_replies += 1;
        let prefix = error_prefix(text);
        if let Some(count) = self.errors.get_mut(prefix) {
            *count += 1;
        } else {
            self.errors.insert(prefix.to_string(), 1);
        }
    }

    /// Marks the start of a top-level command: no script error seen yet.
    pub fn call_started(&mut self) {
        self.last_script_error = None;
        self.prev_err_count = self.total_error_replies;
    }

    /// A command refused before it ran (`rejected_calls`); `spec` is
    /// None for an unknown command. The error is counted.
    pub fn rejected(&mut self, spec: Option<(&'static str, &'static str, usize)>, error: &str) {
        self.count_error(error);
        self.prev_err_count = self.total_error_replies;
        if let Some((top, name, key)) = spec {
            self.entry(top, name, key).rejected_calls += 1;
        }
    }

    /// A command that ran: its time, its error if it replied one. The
    /// histogram gets `nanos` when `track` (`latency-tracking`) and the
    /// command did not block (its time is added when it is served).
    /// `script` marks EVAL/FCALL-like callers whose re-raised nested error
    /// was counted already.
    #[allow(clippy::too_many_arguments)]
    pub fn after_call(
        &mut self,
        top: &'static str,
        name: &'static str,
        key: usize,
        nanos: u64,
        reply: &Reply,
        track: bool,
        blocked: bool,
    ) {
        let error = error_of(reply);
        let mut reraised = false;
        if let Some(text) = error {
            reraised = self
                .last_script_error
                .as_deref()
                .is_some_and(|nested| text.contains(nested));
            if !reraised {
                self.count_error(text);
            }
        }
        let failed = reraised || self.total_error_replies != self.prev_err_count;
        self.prev_err_count = self.total_error_replies;
        let stat = self.entry(top, name, key);
        stat.calls += 1;
        stat.usec += nanos / 1000;
        if failed {
            stat.failed_calls += 1;
        }
        if track && !blocked {
            stat.histogram
                .get_or_insert_with(Default::default)
                .record(nanos as i64);
        }
    }

    /// A command run inside EXEC or a script (Redis's nested `call()`):
    /// counted like a top-level one. An error a command inside a script
    /// replies is remembered, so the script raising it again is not
    /// counted twice; a command EXEC runs (a script itself, maybe) is
    /// checked against that and then forgets it.
    #[allow(clippy::too_many_arguments)]
    pub fn nested_call(
        &mut self,
        top: &'static str,
        name: &'static str,
        key: usize,
        nanos: u64,
        reply: &Reply,
        track: bool,
        in_script: bool,
    ) {
        if in_script {
            let saved = self.last_script_error.take();
            self.after_call(top, name, key, nanos, reply, track, false);
            self.last_script_error = error_of(reply).map(str::to_string).or(saved);
        } else {
            self.after_call(top, name, key, nanos, reply, track, false);
            self.last_script_error = None;
        }
    }

    /// A command refused inside a script (unknown, wrong arity, not
    /// allowed, a write refusal): counted once, and the script
    /// re-raising it is not counted again.
    pub fn script_refusal(
        &mut self,
        spec: Option<(&'static str, &'static str, usize)>,
        error: &str,
    ) {
        self.rejected(spec, error);
        self.last_script_error = Some(error.to_string());
    }

    /// A blocked command served or ended: its serving time, its error if
    /// it replied one, its histogram sample (Redis's
    /// `updateStatsOnUnblock`). `error` is counted unless `counted`
    /// (CLIENT UNBLOCK … ERROR counts the UNBLOCKED error itself).
    #[allow(clippy::too_many_arguments)]
    pub fn after_unblock(
        &mut self,
        top: &'static str,
        name: &'static str,
        key: usize,
        nanos: u64,
        error: Option<&str>,
        counted: bool,
        track: bool,
    ) {
        if let (Some(text), false) = (error, counted) {
            self.count_error(text);
        }
        let stat = self.entry(top, name, key);
        stat.usec += nanos / 1000;
        if error.is_some() {
            stat.failed_calls += 1;
        }
        if track {
            stat.histogram
                .get_or_insert_with(Default::default)
                .record(nanos as i64);
        }
    }

    /// The commands with counters, by full name (`get`, `config|get`).
    pub fn command_stats(&self) -> Vec<(String, &CommandStat)> {
        let mut out: Vec<(String, &CommandStat)> = self
            .commands
            .values()
            .map(|(top, name, stat)| {
                let full = if top == name {
                    (*top).to_string()
                } else {
                    format!("{top}|{name}")
                };
                (full, stat)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The histogram of the command `full` (`get`, `config|get`), if any.
    pub fn histogram_of(&self, full: &str) -> Option<&Histogram> {
        self.commands
            .values()
            .find(|(top, name, _)| {
                if top == name {
                    *top == full
                } else {
                    full.split_once('|') == Some((top, name))
                }
            })
            .and_then(|(_, _, stat)| stat.histogram.as_deref())
    }

    /// The error table, by prefix.
    pub fn error_stats(&self) -> &BTreeMap<String, u64> {
        &self.errors
    }

    /// Samples the instantaneous metrics every 100 ms (Redis's
    /// `run_with_period(100)` in serverCron).
    /// Returns false when it was not due.
    pub fn track(&mut self, now_ms: i64, readings: Readings) -> bool {
        if now_ms - self.last_track_ms < 100 {
            return false;
        }
        self.last_track_ms = now_ms;
        let values = [
            readings.commands,
            readings.net_input + readings.repl_input,
            readings.net_output + readings.repl_output,
            readings.repl_input,
            readings.repl_output,
            readings.aof_written,
        ];
        for (metric, value) in self.metrics.iter_mut().zip(values) {
            metric.track(now_ms, value);
        }
        true
    }

    /// An instantaneous metric: the average of its last 16 samples, per
    /// second.
    pub fn instantaneous(&self, kind: MetricKind) -> u64 {
        self.metrics[kind as usize].value()
    }

    /// CONFIG RESETSTAT: the command and error tables, the instantaneous
    /// metrics (the slowlog and the latency monitor are kept, as Redis).
    pub fn reset(&mut self, now_ms: i64) {
        self.commands.clear();
        self.errors.clear();
        self.total_error_replies = 0;
        self.prev_err_count = 0;
        for metric in &mut self.metrics {
            *metric = Metric {
                last_sample_ms: now_ms,
                ..Metric::default()
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::error_prefix;

    #[test]
    fn error_prefixes_as_redis_files_them() {
        assert_eq!(error_prefix("ERR unknown command"), "ERR");
        assert_eq!(error_prefix("WRONGTYPE Operation"), "WRONGTYPE");
        assert_eq!(error_prefix("NOGROUP No such key"), "NOGROUP");
        assert_eq!(error_prefix("NOSPACEHEREATALL"), "ERR");
        assert_eq!(error_prefix(&format!("{} x", "A".repeat(40))), "ERR");
    }
}

#[cfg(test)]
mod cost {
    use super::Observe;
    use crate::reply::Reply;

    /// What the dispatch adds per command: two clock reads and
    /// `after_call`, with the latency histogram (`latency-tracking yes`)
    /// and without it. Prints ns per command for both
    /// (`cargo test --release --lib stats_calls::cost -- --ignored --nocapture`).
    #[test]
    #[ignore = "timing report (ns per command), run by hand in release"]
    fn per_command_cost() {
        let rounds = 2_000_000u64;
        let run = |track: bool| {
            let mut observe = Observe::default();
            let reply = Reply::ok();
            let names = [
                "get", "set", "incr", "lpush", "rpop", "sadd", "hset", "zadd",
            ];
            let started = std::time::Instant::now();
            for i in 0..rounds {
                let t = crate::core::stats_clock::now();
                let name = names[(i % 8) as usize];
                let nanos = crate::core::stats_clock::nanos_since(t);
                observe.call_started();
                observe.after_call(
                    name,
                    name,
                    0x1000 + (i % 8) as usize,
                    nanos,
                    &reply,
                    track,
                    false,
                );
            }
            started.elapsed().as_nanos() as f64 / rounds as f64
        };
        // Alternate, keep the best of five of each: the machine is shared.
        let (mut on, mut off) = (f64::MAX, f64::MAX);
        for _ in 0..5 {
            on = on.min(run(true));
            off = off.min(run(false));
        }
        let per = on;
        let clock_started = std::time::Instant::now();
        let mut sink = 0u64;
        for _ in 0..rounds {
            let t = std::time::Instant::now();
            sink = sink.wrapping_add(t.elapsed().as_nanos() as u64);
        }
        let clock = clock_started.elapsed().as_nanos() as f64 / rounds as f64;
        eprintln!("observability cost: {on:.1} ns per command with latency-tracking, {off:.1} without (two Instant::now() reads alone: {clock:.1} ns, {sink})");
        assert!(per > 0.0);
    }
}
