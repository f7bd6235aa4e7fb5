//! CONFIG and its subcommands.

use super::help_reply;
use crate::command::{CmdResult, Ctx};
use crate::config::{self, LoadState};
use crate::reply::Reply;

const CONFIG_HELP: &[&str] = &[
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
];

pub(super) fn config_help(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(help_reply(argv, CONFIG_HELP))
}

/// The names of Redis's `replicaof` parameter (REPLICAOF changes it; CONFIG
/// SET cannot).
const REPLICAOF_NAMES: [&str; 2] = ["replicaof", "slaveof"];

fn is_replicaof(name: &[u8]) -> bool {
    REPLICAOF_NAMES
        .iter()
        .any(|n| n.as_bytes().eq_ignore_ascii_case(name))
}

pub(super) fn config_get(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    // Names are reported as asked for (an exact name keeps the client's
    // spelling and case, an alias stays an alias); each at most once.
    let mut found: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let seen = |found: &Vec<(Vec<u8>, Vec<u8>)>, name: &[u8]| {
        found.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    // `replicaof` (alias `slaveof`) is Redis's special, immutable
    // parameter: its value is the master followed now ("host port"), or
    // empty on a master.
    let master = match &ctx.core.replica.master {
        Some(m) => format!("{} {}", m.host, m.port).into_bytes(),
        None => Vec::new(),
    };
    for &pattern in &argv[2..] {
        if !pattern.iter().any(|b| matches!(b, b'[' | b'*' | b'?')) {
            if seen(&found, pattern) {
                continue;
            }
            if let Some(param) = config::lookup(pattern) {
                found.push((pattern.to_vec(), param.get(&ctx.core.config)));
            } else if is_replicaof(pattern) {
                found.push((pattern.to_vec(), master.clone()));
            }
            continue;
        }
        for param in config::PARAMS {
            if param.flags & config::HIDDEN != 0 {
                continue;
            }
            for name in param.names() {
                if !seen(&found, name.as_bytes())
                    && crate::glob::matches(pattern, name.as_bytes(), true)
                {
                    found.push((name.as_bytes().to_vec(), param.get(&ctx.core.config)));
                }
            }
        }
        for name in REPLICAOF_NAMES {
            if !seen(&found, name.as_bytes())
                && crate::glob::matches(pattern, name.as_bytes(), true)
            {
                found.push((name.as_bytes().to_vec(), master.clone()));
            }
        }
    }
    Ok(Reply::Map(
        found
            .into_iter()
            .map(|(n, v)| (Reply::Bulk(n), Reply::Bulk(v)))
            .collect(),
    ))
}

pub(super) fn config_set(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() % 2 == 1 {
        return crate::command::syntax_error();
    }
    // Redis checks every name first (so an unknown name wins over other
    // errors), then sets all values on a copy, then applies: a failure
    // anywhere leaves the configuration as it was.
    let mut unknown: Option<&[u8]> = None;
    let mut refused: Option<(&[u8], &str)> = None;
    let mut chosen: Vec<(&'static config::Param, &'static str, &[u8])> = Vec::new();
    for pair in argv[2..].chunks(2) {
        let (name, value) = (pair[0], pair[1]);
        if is_replicaof(name) {
            if unknown.is_none() && refused.is_none() {
                refused = Some((name, "can't set immutable config"));
            }
            continue;
        }
        let Some(param) = config::lookup(name) else {
            // Only the first error is reported, whichever kind it is.
            if unknown.is_none() && refused.is_none() {
                unknown = Some(name);
            }
            continue;
        };
        if unknown.is_some() || refused.is_some() {
            continue;
        }
        if param.flags & config::IMMUTABLE != 0 {
            refused = Some((name, "can't set immutable config"));
            continue;
        }
        if param.flags & config::PROTECTED != 0 {
            refused = Some((name, "can't set protected config"));
            continue;
        }
        if chosen.iter().any(|(p, _, _)| std::ptr::eq(*p, param)) {
            refused = Some((name, "duplicate parameter"));
            continue;
        }
        // The name errors report: the one the parameter was found under.
        let shown = param
            .names()
            .find(|n| n.as_bytes().eq_ignore_ascii_case(name))
            .unwrap_or(param.name);
        chosen.push((param, shown, value));
    }
    if let Some(name) = unknown {
        let mut msg = b"ERR Unknown option or number of arguments for CONFIG SET - '".to_vec();
        msg.extend_from_slice(name);
        msg.push(b'\'');
        return Err(Reply::error(crate::command::error_text(&msg)));
    }
    if let Some((name, why)) = refused {
        let mut msg = b"ERR CONFIG SET failed (possibly related to argument '".to_vec();
        msg.extend_from_slice(name);
        msg.extend_from_slice(b"') - ");
        msg.extend_from_slice(why.as_bytes());
        return Err(Reply::error(crate::command::error_text(&msg)));
    }
    let failed = |name: &str, why: &str| {
        Err(Reply::error(crate::command::error_text(
            format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
                .as_bytes(),
        )))
    };
    let old = ctx.core.config.clone();
    let mut new = old.clone();
    for (param, shown, value) in &chosen {
        // A multi-word value is split on single spaces, as Redis does.
        let words: Vec<&[u8]> = if param.is_multi_arg() {
            if value.is_empty() {
                Vec::new()
            } else {
                value.split(|&b| b == b' ').collect()
            }
        } else {
            vec![value]
        };
        if let Err(why) = param.set(&mut new, &words, &mut LoadState::default()) {
            return failed(shown, &why);
        }
    }
    let switch_aof = (new.appendonly != old.appendonly).then_some(new.appendonly);
    if switch_aof.is_some() && ctx.core.startup_load.is_some() {
        // The load decided from `appendonly` which files to read and
        // whether to open the AOF after: it changes once they are loaded.
        return failed(
            "appendonly",
            "can't switch the AOF while the dataset is loading",
        );
    }
    if let Some((name, why)) = new.first_unsupported() {
        let shown = chosen
            .iter()
            .find(|(p, _, _)| p.name == name)
            .map_or(name, |c| c.1);
        return failed(shown, why);
    }
    if let Err(why) = ctx.host.apply_config(&old, &new) {
        // Redis names the first argument whose apply step failed: a TLS
        // setting when the TLS configuration could not be built, else the
        // listening address or port.
        let tls_failed = why.starts_with("Unable to update TLS");
        let culprit = chosen.iter().find(|(p, _, _)| match tls_failed {
            true => p.name.starts_with("tls-"),
            false => matches!(p.name, "port" | "bind" | "tls-port"),
        });
        return failed(culprit.map_or("bind", |c| c.1), &why);
    }
    if let Some(aof) = ctx.core.aof.as_mut() {
        aof.set_policy(new.appendfsync);
    }
    let password_changed = new.requirepass != old.requirepass;
    ctx.core.config = new;
    if password_changed {
        ctx.core.sync_requirepass();
    }
    ctx.core.sync_acl_settings();
    if ctx.core.config.maxmemory_policy != old.maxmemory_policy {
        ctx.core.refresh_access_clock(ctx.now_ms);
    }
    if ctx.core.config.maxmemory != 0 && ctx.core.config.maxmemory != old.maxmemory {
        // Redis's updateMaxmemory evicts at once (docs/memory.md).
        let host = &mut *ctx.host;
        ctx.core
            .perform_evictions(&mut || host.used_memory().map(|m| m.used));
    }
    // appendonly last: turning it on writes the dataset out under the new
    // settings; on failure the old value stays in force.
    match switch_aof {
        Some(true) => {
            ctx.core.config.appendonly = false;
            if let Err(why) = ctx.core.start_aof(ctx.now_ms) {
                return failed("appendonly", &why);
            }
        }
        Some(false) => {
            if let Err(why) = ctx.core.stop_aof() {
                ctx.core.config.appendonly = true;
                return failed("appendonly", &why);
            }
        }
        None => {}
    }
    Ok(Reply::ok())
}

pub(super) fn config_resetstat(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    ctx.core.stats = crate::core::Stats::default();
    // Commandstats, errorstats, latencystats, the instantaneous metrics.
    ctx.core.observe.reset(ctx.now_ms);
    // Redis's resetServerStats resets the sync counters and the
    // replication traffic too.
    ctx.core.repl.stats = Default::default();
    Ok(Reply::ok())
}

/// CONFIG REWRITE: the configuration file the server was started with
/// holds the values in force (`config::rewrite_file`; Redis's errors).
pub(super) fn config_rewrite(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let Some(path) = ctx.core.config.config_file.clone() else {
        return Err(Reply::err(
            "ERR The server is running without a config file",
        ));
    };
    let master = ctx
        .core
        .replica
        .master
        .as_ref()
        .map(|m| (m.host.as_str(), m.port));
    let users: Vec<Vec<u8>> = ctx.core.acl.iter().map(crate::acl::file::line).collect();
    match crate::config::rewrite_file(&path, &ctx.core.config, master, &users) {
        Ok(()) => {
            ctx.core
                .repl_log(true, "CONFIG REWRITE executed with success.".into());
            Ok(Reply::ok())
        }
        Err(e) => {
            ctx.core
                .repl_log(true, format!("CONFIG REWRITE failed: {e}"));
            Err(Reply::error(format!("ERR Rewriting config file: {e}")))
        }
    }
}
