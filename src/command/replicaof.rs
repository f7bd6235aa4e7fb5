//! REPLICAOF and SLAVEOF (docs/replication.md §5.1), with Redis 7.0's
//! replies and log lines, and what INFO replication and ROLE say on a
//! replica (§6). The link itself is the server's (`server::master_link`):
//! these commands change whom the engine follows, and the server follows.

use super::{CmdResult, CommandSpec, Ctx};
use crate::config::LogLevel;
use crate::reply::Reply;

const SERVER: &str = "server";

/// The commands (arity, flags and key positions from the generated
/// metadata).
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("replicaof", "replicaof", SERVER, replicaof),
    CommandSpec::from_docs("slaveof", "slaveof", SERVER, replicaof),
    CommandSpec::from_docs("failover", "failover", SERVER, failover),
];

/// Redis's `failoverCommand`: FAILOVER [TO host port [FORCE]] [ABORT]
/// [TIMEOUT ms], its checks and errors in Redis's order
/// (`core::failover` does the rest).
fn failover(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    use crate::command::is;
    if argv.len() == 2 && is(argv[1], "abort") {
        if ctx.core.failover.is_none() {
            return Err(Reply::err("ERR No failover in progress."));
        }
        ctx.core.abort_failover("Failover manually aborted");
        return Ok(Reply::ok());
    }
    let long = |arg: &[u8]| {
        crate::command::parse_int(arg)
            .map_err(|_| Reply::err("ERR value is not an integer or out of range"))
    };
    let mut timeout_ms = 0i64;
    let mut force = false;
    let mut target: Option<(String, i64)> = None;
    let mut j = 1;
    while j < argv.len() {
        if is(argv[j], "timeout") && j + 1 < argv.len() && timeout_ms == 0 {
            timeout_ms = long(argv[j + 1])?;
            if timeout_ms <= 0 {
                return Err(Reply::err("ERR FAILOVER timeout must be greater than 0"));
            }
            j += 2;
        } else if is(argv[j], "to") && j + 2 < argv.len() && target.is_none() {
            let port = long(argv[j + 2])?;
            target = Some((String::from_utf8_lossy(argv[j + 1]).into_owned(), port));
            j += 3;
        } else if is(argv[j], "force") && !force {
            force = true;
            j += 1;
        } else {
            return Err(Reply::err("ERR syntax error"));
        }
    }
    if ctx.core.failover.is_some() {
        return Err(Reply::err("ERR FAILOVER already in progress."));
    }
    if ctx.core.replica.master.is_some() {
        return Err(Reply::err(
            "ERR FAILOVER is not valid when server is a replica.",
        ));
    }
    if ctx.core.repl.replicas.is_empty() {
        return Err(Reply::err("ERR FAILOVER requires connected replicas."));
    }
    if force && (timeout_ms == 0 || target.is_none()) {
        return Err(Reply::err(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        ));
    }
    let target = match target {
        Some((host, port)) => {
            let found = u16::try_from(port)
                .ok()
                .and_then(|p| ctx.core.find_replica(&host, p).map(|id| (id, p)));
            let Some((id, port)) = found else {
                return Err(Reply::err(
                    "ERR FAILOVER target HOST and PORT is not a replica.",
                ));
            };
            let online = ctx
                .core
                .repl
                .replicas
                .get(&id)
                .is_some_and(|r| r.state == crate::core::repl::ReplicaState::Online);
            if !online {
                return Err(Reply::err("ERR FAILOVER target replica is not online."));
            }
            ctx.host.log(
                LogLevel::Notice,
                &format!("FAILOVER requested to {host}:{port}."),
            );
            Some((host, port))
        }
        None => {
            ctx.host
                .log(LogLevel::Notice, "FAILOVER requested to any replica.");
            None
        }
    };
    let end_ms = (timeout_ms > 0).then(|| ctx.now_ms.saturating_add(timeout_ms));
    ctx.core.start_failover(crate::core::failover::Failover {
        stage: crate::core::failover::Stage::WaitForSync,
        target,
        end_ms,
        force,
    });
    Ok(Reply::ok())
}

/// Redis's `replicaofCommand`.
fn replicaof(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (host, port) = (argv[1], argv[2]);
    if ctx.core.failover.is_some() {
        return Err(Reply::err("ERR REPLICAOF not allowed while failing over."));
    }
    if host.eq_ignore_ascii_case(b"no") && port.eq_ignore_ascii_case(b"one") {
        if let Some(ids) = ctx.core.become_master() {
            ctx.host.log(LogLevel::Notice, &ids);
            let info = super::server::client::current_line(ctx, argv, "replicaof");
            ctx.host.log(
                LogLevel::Notice,
                &format!("MASTER MODE enabled (user request from '{info}')"),
            );
        }
        return Ok(Reply::ok());
    }
    if ctx.session.is_replica {
        return Err(Reply::err(
            "ERR Command is not valid when client is a replica.",
        ));
    }

    let port = std::str::from_utf8(port)
        .ok()
        .and_then(|p| p.parse::<i64>().ok())
        .filter(|p| (0..=65535).contains(p))
        .ok_or_else(|| Reply::err("ERR Invalid master port"))? as u16;
    let host = String::from_utf8_lossy(host).into_owned();
    if let Some(master) = &ctx.core.replica.master {
        if master.host.eq_ignore_ascii_case(&host) && master.port == port {
            ctx.host.log(
                LogLevel::Notice,
                "REPLICAOF would result into synchronization with the master we are already \
                 connected with. No operation performed.",
            );
            return Ok(Reply::simple("OK Already connected to specified master"));
        }
    }
    ctx.core.become_replica(host.clone(), port);
    let info = super::server::client::current_line(ctx, argv, "replicaof");
    ctx.host.log(
        LogLevel::Notice,
        &format!("REPLICAOF {host}:{port} enabled (user request from '{info}')"),
    );
    Ok(Reply::ok())
}

/// INFO replication's lines up to `connected_slaves` on a replica (None
/// on a master), Redis 7.0's fields in its order.
pub(crate) fn info_lines(ctx: &Ctx) -> Option<Vec<String>> {
    let master = ctx.core.replica.master.as_ref()?;
    let now = ctx.now_ms;
    let up = master.link_up();
    let mut lines = vec![
        "role:slave".to_string(),
        format!("master_host:{}", master.host),
        format!("master_port:{}", master.port),
        format!("master_link_status:{}", if up { "up" } else { "down" }),
        format!(
            "master_last_io_seconds_ago:{}",
            if up {
                (now - master.last_io_ms) / 1000
            } else {
                -1
            }
        ),
        format!(
            "master_sync_in_progress:{}",
            u8::from(master.state == "sync")
        ),
        format!("slave_read_repl_offset:{}", master.read_reploff),
        format!("slave_repl_offset:{}", master.reploff),
    ];
    if let (Some((total, read, last_ms)), "sync") = (master.transfer, master.state) {
        let perc = if total > 0 {
            read as f64 * 100.0 / total as f64
        } else {
            0.0
        };
        lines.extend([
            format!("master_sync_total_bytes:{total}"),
            format!("master_sync_read_bytes:{read}"),
            format!("master_sync_left_bytes:{}", total as i64 - read as i64),
            format!("master_sync_perc:{perc:.2}"),
            format!("master_sync_last_io_seconds_ago:{}", (now - last_ms) / 1000),
        ]);
    }
    if !up {
        lines.push(format!(
            "master_link_down_since_seconds:{}",
            master.down_since_ms.map_or(-1, |t| (now - t) / 1000)
        ));
    }
    let settings = &ctx.core.config.replica;
    lines.extend([
        format!("slave_priority:{}", settings.priority),
        format!("slave_read_only:{}", u8::from(settings.read_only)),
        format!("replica_announced:{}", u8::from(settings.announced)),
    ]);
    Some(lines)
}

/// ROLE on a replica: `["slave", <host>, <port>, <state>, <offset or -1>]`.
pub(crate) fn role_reply(ctx: &Ctx) -> Option<Reply> {
    let master = ctx.core.replica.master.as_ref()?;
    let offset = if master.state == "connected" {
        master.reploff
    } else {
        -1
    };
    Some(Reply::Array(vec![
        Reply::Bulk(b"slave".to_vec()),
        Reply::Bulk(master.host.clone().into_bytes()),
        Reply::Int(i64::from(master.port)),
        Reply::Bulk(master.state.as_bytes().to_vec()),
        Reply::Int(offset),
    ]))
}

/// SYNC and PSYNC on a replica: `-NOMASTERLINK` while the link is down
/// (Redis's reply); while it is up the replica serves them from its
/// mirror of the master's history (chained replication, §5.6).
pub(crate) fn sync_refusal(ctx: &Ctx) -> Option<Reply> {
    ctx.core
        .replica
        .link_down()
        .then(|| Reply::err("NOMASTERLINK Can't SYNC while not connected with my master"))
}
