//! LATENCY LATEST/HISTORY/RESET/GRAPH/DOCTOR/HISTOGRAM/HELP (Redis's
//! latency.c). The events are `core::stats_latency`'s; the histograms are
//! the per-command ones of `latency-tracking`.

use crate::command::{CmdResult, CommandSpec, Ctx};
use crate::core::stats_hist::Histogram;
use crate::core::stats_latency::{self, DoctorContext};
use crate::reply::Reply;

/// LATENCY's subcommands.
pub(super) static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("doctor", "latency|doctor", "server", latency_doctor),
    CommandSpec::from_docs("graph", "latency|graph", "server", latency_graph),
    CommandSpec::from_docs("help", "latency|help", "server", latency_help),
    CommandSpec::from_docs(
        "histogram",
        "latency|histogram",
        "server",
        latency_histogram,
    ),
    CommandSpec::from_docs("history", "latency|history", "server", latency_history),
    CommandSpec::from_docs("latest", "latency|latest", "server", latency_latest),
    CommandSpec::from_docs("reset", "latency|reset", "server", latency_reset),
];

const HELP: &[&str] = &[
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
];

fn latency_help(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(crate::command::server::help_reply(argv, HELP))
}

fn latency_latest(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let events = ctx.core.observe.latency.events();
    Ok(Reply::Array(
        events
            .iter()
            .map(|(name, series)| {
                let last = series.last();
                Reply::Array(vec![
                    Reply::bulk(name.as_bytes()),
                    Reply::Int(last.time),
                    Reply::Int(last.latency as i64),
                    Reply::Int(series.max as i64),
                ])
            })
            .collect(),
    ))
}

fn latency_history(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let samples = ctx
        .core
        .observe
        .latency
        .series(argv[2])
        .map(|(_, series)| {
            series
                .samples()
                .map(|s| Reply::Array(vec![Reply::Int(s.time), Reply::Int(s.latency as i64)]))
                .collect()
        })
        .unwrap_or_default();
    Ok(Reply::Array(samples))
}

fn latency_reset(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let monitor = &mut ctx.core.observe.latency;
    let resets = if argv.len() == 2 {
        monitor.reset(None)
    } else {
        argv[2..].iter().map(|e| monitor.reset(Some(e))).sum()
    };
    Ok(Reply::Int(resets as i64))
}

fn latency_graph(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let Some((name, series)) = ctx.core.observe.latency.series(argv[2]) else {
        return Err(Reply::error(format!(
            "ERR No samples available for event '{}'",
            crate::command::error_text(crate::command::c_str(argv[2]))
        )));
    };
    let text = stats_latency::graph(name, series, ctx.now_ms / 1000);
    Ok(Reply::Verbatim(*b"txt", text.into_bytes()))
}

fn latency_doctor(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let config = &ctx.core.config;
    let context = DoctorContext {
        threshold_ms: config.latency_monitor_threshold,
        slowlog_slower_than: config.slowlog_log_slower_than,
        fsync_always: config.appendfsync == crate::config::AppendFsync::Always,
        hz: u64::from(config.hz),
    };
    let text = stats_latency::doctor(&ctx.core.observe.latency, context, ctx.now_ms / 1000);
    Ok(Reply::Verbatim(*b"txt", text.into_bytes()))
}

/// One command's entry of LATENCY HISTOGRAM (Redis's `fillCommandCDF`).
fn cdf_reply(name: String, histogram: &Histogram) -> (Reply, Reply) {
    let buckets = histogram
        .cdf()
        .into_iter()
        .map(|(usec, count)| (Reply::Int(usec), Reply::Int(count as i64)))
        .collect();
    (
        Reply::bulk(name.as_bytes()),
        Reply::Map(vec![
            (Reply::bulk(b"calls"), Reply::Int(histogram.total() as i64)),
            (Reply::bulk(b"histogram_usec"), Reply::Map(buckets)),
        ]),
    )
}

fn latency_histogram(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let observe = &ctx.core.observe;
    let mut out = Vec::new();
    if argv.len() == 2 {
        for (name, stat) in observe.command_stats() {
            if let Some(h) = stat.histogram.as_deref() {
                out.push(cdf_reply(name, h));
            }
        }
        return Ok(Reply::Map(out));
    }
    for arg in &argv[2..] {
        // Redis's lookupCommandBySds: `name` or `container|sub`.
        let text = String::from_utf8_lossy(arg).to_ascii_lowercase();
        let (top_name, sub_name) = match text.split_once('|') {
            Some((t, s)) => (t.to_string(), Some(s.to_string())),
            None => (text.clone(), None),
        };
        let Some(top) = crate::command::lookup(top_name.as_bytes()) else {
            continue;
        };
        match sub_name {
            Some(sub) => {
                let Some(spec) = top.subcommand(sub.as_bytes()) else {
                    continue;
                };
                let full = format!("{}|{}", top.name, spec.name);
                if let Some(h) = observe.histogram_of(&full) {
                    out.push(cdf_reply(full, h));
                }
            }
            None => {
                if let Some(h) = observe.histogram_of(top.name) {
                    out.push(cdf_reply(top.name.to_string(), h));
                }
                for spec in top.subcommands {
                    let full = format!("{}|{}", top.name, spec.name);
                    if let Some(h) = observe.histogram_of(&full) {
                        out.push(cdf_reply(full, h));
                    }
                }
            }
        }
    }
    Ok(Reply::Map(out))
}
