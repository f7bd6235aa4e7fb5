//! The master's replication commands (docs/replication.md §2.1–§2.3):
//! REPLCONF, SYNC and PSYNC, with Redis 7.0's replies and log lines.
//!
//! A connection that SYNCs or PSYNCs becomes a replica: the engine records
//! it (`core::repl::Replica`, keyed by session id) and flags the session;
//! the host then writes it what the engine queues (`+FULLRESYNC`, the
//! payload, the stream) instead of replies.
//!
//! A replica whose link is up serves them too (chained replication,
//! §5.6): its ids, offset and backlog mirror its master's history, so the
//! same decision applies; while its link is down it answers
//! `-NOMASTERLINK` (`replicaof::sync_refusal`).

use super::{CmdResult, CommandSpec, Ctx};
use crate::config::LogLevel;
use crate::core::clients::{BlockKind, BlockRequest};
use crate::core::repl::{Replica, ReplicaState, Waiter};
use crate::repl::psync::{self, BacklogExtent, Decision, MasterIds};
use crate::reply::Reply;

const SERVER: &str = "server";

/// The replication commands (arity, flags and key positions from the
/// generated metadata, [`super::docs`]).
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("replconf", "replconf", SERVER, replconf),
    CommandSpec::from_docs("sync", "sync", SERVER, sync),
    CommandSpec::from_docs("psync", "psync", SERVER, sync),
    CommandSpec::from_docs("wait", "wait", "generic", wait),
    CommandSpec::from_docs("waitaof", "waitaof", "generic", waitaof),
];

/// No reply at all (REPLCONF ACK, and SYNC/PSYNC, whose answer the
/// replication machinery writes).
fn no_reply() -> Reply {
    Reply::Frames(Vec::new())
}

/// Redis's `replconfCommand`.
fn replconf(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(Reply::err("ERR syntax error"));
    }
    let mut conf = ctx
        .session
        .repl_conf
        .as_deref()
        .cloned()
        .unwrap_or_default();
    for pair in argv[1..].chunks(2) {
        let (option, value) = (pair[0], pair[1]);
        if option.eq_ignore_ascii_case(b"listening-port") {
            let port = crate::types::num::parse_i64(value)
                .ok_or_else(|| Reply::err("ERR value is not an integer or out of range"))?;
            conf.listening_port = port;
        } else if option.eq_ignore_ascii_case(b"ip-address") {
            if value.len() >= 256 {
                return Err(Reply::error(format!(
                    "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    value.len()
                )));
            }
            conf.ip_address = Some(String::from_utf8_lossy(value).into_owned());
        } else if option.eq_ignore_ascii_case(b"capa") {
            if value.eq_ignore_ascii_case(b"eof") {
                conf.capa_eof = true;
            } else if value.eq_ignore_ascii_case(b"psync2") {
                conf.capa_psync2 = true;
            }
        } else if option.eq_ignore_ascii_case(b"ack") {
            ack(ctx, argv);
            return Ok(no_reply());
        } else if option.eq_ignore_ascii_case(b"getack") {
            // Only a replica acts on it (it is one of our master's).
            return Ok(no_reply());
        } else if option.eq_ignore_ascii_case(b"rdb-only") {
            match crate::types::num::parse_i64(value) {
                Some(n @ 0..=1) => conf.rdb_only = n == 1,
                Some(_) => {
                    return Err(Reply::err(
                        "ERR value is out of range, value must between 0 and 1",
                    ))
                }
                None => return Err(Reply::err("ERR value is not an integer or out of range")),
            }
        } else if option.eq_ignore_ascii_case(b"rdb-filter-only") {
            conf.filter =
                crate::repl::capture::PayloadFilter::parse(value).map_err(Reply::error)?;
        } else {
            return Err(Reply::error(format!(
                "ERR Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(option)
            )));
        }
    }
    ctx.session.repl_conf = Some(Box::new(conf));
    Ok(Reply::ok())
}

/// `REPLCONF ACK <offset> [FACK <aofoffset>]` from a replica: never a
/// reply. An offset the replica cannot have received is ignored and
/// logged once (D12).
fn ack(ctx: &mut Ctx, argv: &[&[u8]]) {
    let id = ctx.session.id;
    let now = ctx.now_ms;
    let repl = &mut ctx.core.repl;
    let buffer = repl.buffer.as_ref();
    let Some(replica) = repl.replicas.get_mut(&id) else {
        return;
    };
    let Some(offset) = argv.get(2).and_then(|v| crate::types::num::parse_i64(v)) else {
        return;
    };
    let fack = match (argv.get(3), argv.get(4)) {
        (Some(name), Some(value)) if name.eq_ignore_ascii_case(b"fack") => {
            crate::types::num::parse_i64(value)
        }
        _ => None,
    };
    let sent = match (&replica.cursor, buffer) {
        (Some(cursor), Some(buffer)) => buffer.cursor_offset(cursor) - 1,
        _ => replica.sent_off,
    };
    if offset > sent || fack.is_some_and(|f| f > sent) {
        if !replica.lie_logged {
            replica.lie_logged = true;
            let line = format!(
                "Replica {} acknowledged offset {} beyond what was sent ({sent}): ignored",
                replica.name,
                offset.max(fack.unwrap_or(0))
            );
            repl.log.push((true, line));
        }
        return;
    }
    replica.ack_off = replica.ack_off.max(offset);
    if let Some(fack) = fack {
        replica.aof_off = replica.aof_off.max(fack);
    }
    replica.ack_time_ms = now;
    if replica.waiting_first_ack && replica.state == ReplicaState::Online {
        replica.waiting_first_ack = false;
    }
}

/// Redis's `syncCommand`, for SYNC and PSYNC.
fn sync(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if ctx.session.is_replica {
        return Ok(no_reply());
    }
    let psync = argv[0].eq_ignore_ascii_case(b"psync");
    // A master failing over to us: we take over when its id is ours
    // (Redis's syncCommand), then the PSYNC goes on as any other.
    if psync && argv.len() > 3 && argv[3].eq_ignore_ascii_case(b"failover") {
        let replid = String::from_utf8_lossy(argv[1]).into_owned();
        ctx.host.log(
            LogLevel::Warning,
            &format!("Failover request received for replid {replid}."),
        );
        if ctx.core.replica.master.is_none() {
            return Err(Reply::err("ERR PSYNC FAILOVER can't be sent to a master."));
        }
        if replid != ctx.core.repl.replid.to_string() {
            return Err(Reply::err(
                "ERR PSYNC FAILOVER replid must match my replid.",
            ));
        }
        if let Some(ids) = ctx.core.become_master() {
            ctx.host.log(LogLevel::Notice, &ids);
        }
        let info = super::server::client::current_line(ctx, argv, "psync");
        ctx.host.log(
            LogLevel::Notice,
            &format!("MASTER MODE enabled (failover request from '{info}')"),
        );
    }
    if ctx.core.failover.is_some() {
        return Err(Reply::err("NOMASTERLINK Can't SYNC while failing over"));
    }
    if let Some(refusal) = crate::command::replicaof::sync_refusal(ctx) {
        return Err(refusal);
    }
    if ctx.host.connection().is_some_and(|c| c.output_bytes > 0) {
        return Err(Reply::err(
            "ERR SYNC and PSYNC are invalid with pending output",
        ));
    }
    if ctx.core.replica.link_down() {
        return Err(Reply::err(
            "NOMASTERLINK Can't SYNC while not connected with my master",
        ));
    }
    // A filtered payload only goes to the socket (`repl_sync`).
    if let Some(conf) = ctx.session.repl_conf.as_deref() {
        if conf.filter.is_filtered() && !conf.capa_eof {
            return Err(Reply::err("ERR Filtered replica requires EOF capability"));
        }
    }
    if let Some(cause) = &ctx.core.repl.broken {
        return Err(Reply::error(format!(
            "MISCONF Errors writing to the AOF file: {cause}"
        )));
    }
    let conf = ctx
        .session
        .repl_conf
        .as_deref()
        .cloned()
        .unwrap_or_default();
    let peer_ip = ctx.host.connection().map_or_else(
        || "?".to_string(),
        |c| match c.addr.rsplit_once(':') {
            Some((ip, _)) => ip.trim_start_matches('[').trim_end_matches(']').to_string(),
            None => c.addr,
        },
    );
    let ip = conf.ip_address.clone().unwrap_or(peer_ip);
    let name = format!("{ip}:{}", conf.listening_port);
    ctx.host.log(
        LogLevel::Notice,
        &format!("Replica {name} asks for synchronization"),
    );
    let now = ctx.now_ms;
    if psync {
        let Some(offset) = crate::types::num::parse_i64(argv[2]) else {
            ctx.host.log(
                LogLevel::Warning,
                &format!("Replica {name} asks for synchronization but with a wrong offset"),
            );
            return Err(Reply::err("ERR value is not an integer or out of range"));
        };
        let repl = &ctx.core.repl;
        let master = MasterIds {
            replid: repl.replid,
            replid2: repl.replid2,
            second_replid_offset: repl.second_replid_offset,
            backlog: repl.buffer.as_ref().map(|b| BacklogExtent {
                first_byte_offset: b.backlog_first_byte_offset(),
                histlen: b.backlog_histlen() as i64,
            }),
            master_repl_offset: repl.master_repl_offset(),
        };
        let request = psync::Request {
            id: argv[1],
            offset,
            name: &name,
        };
        match psync::decide(&master, &request) {
            Decision::Continue {
                from_offset, log, ..
            } => {
                let repl = &mut ctx.core.repl;
                let buffer = repl.buffer.as_mut().expect("continue implies a backlog");
                let Some(cursor) = buffer.attach(from_offset) else {
                    unreachable!("the decision checked the backlog's extent");
                };
                let mut replica = Replica::new(name, ip, conf, false, now);
                psync::encode_continue(&repl.replid, replica.conf.capa_psync2, &mut replica.outbox);
                replica.cursor = Some(cursor);
                replica.sent_off = from_offset - 1;
                replica.ack_off = from_offset - 1;
                replica.payload_done(false, now);
                repl.replicas.insert(ctx.session.id, replica);
                repl.stats.sync_partial_ok += 1;
                ctx.session.is_replica = true;
                ctx.host.log(log.level, &log.text);
                return Ok(no_reply());
            }
            Decision::FullSync {
                log,
                counts_partial_err,
                ..
            } => {
                for line in log {
                    ctx.host.log(line.level, &line.text);
                }
                if counts_partial_err {
                    ctx.core.repl.stats.sync_partial_err += 1;
                }
            }
        }
    }
    let backlog_size = ctx.core.config.repl.backlog_size as usize;
    let repl = &mut ctx.core.repl;
    repl.stats.sync_full += 1;
    repl.replicas
        .insert(ctx.session.id, Replica::new(name, ip, conf, !psync, now));
    ctx.session.is_replica = true;
    if repl.buffer.is_none() {
        let line = repl.create_backlog(backlog_size);
        ctx.host.log(LogLevel::Notice, &line);
    }
    // Why the sync waits, as Redis logs it; cron starts the capture.
    let waiting = if ctx.core.repl_sync_running() {
        "Current BGSAVE has socket target. Waiting for next BGSAVE for SYNC"
    } else if ctx.core.background_busy() {
        "No BGSAVE in progress, but another BG operation is active. BGSAVE for replication delayed"
    } else if ctx.core.config.repl_diskless_sync && ctx.core.config.repl.diskless_sync_delay_s > 0 {
        "Delay next BGSAVE for diskless SYNC"
    } else {
        ""
    };
    if !waiting.is_empty() {
        ctx.host.log(LogLevel::Notice, waiting);
    }
    Ok(no_reply())
}

/// Redis's `waitCommand`: how many replicas acknowledged this client's
/// writes, waiting up to `timeout` ms (0: forever) for `numreplicas`.
fn wait(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if ctx.core.replica.is_replica() {
        return Err(Reply::err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    let numreplicas = crate::types::num::parse_i64(argv[1])
        .ok_or_else(|| Reply::err("ERR value is not an integer or out of range"))?;
    let deadline = ctx.parse_block_timeout(argv[2], false)?;
    let woff = ctx.session.woff;
    let acked = ctx.core.repl.count_acks(woff);
    if acked >= numreplicas || ctx.in_exec {
        return Ok(Reply::Int(acked));
    }
    ctx.core.repl.waiters.insert(
        ctx.session.id,
        Waiter {
            woff,
            replicas: numreplicas,
            aof: None,
        },
    );
    ctx.core.repl.get_ack = true;
    ctx.block(BlockRequest {
        keys: Vec::new(),
        deadline_ms: deadline,
        kind: BlockKind::Replicas,
        timeout_reply: Reply::Int(acked),
        argv: None,
        wake_on_delete: false,
    })
}

/// Redis 7.2's `waitaofCommand`: `[local, replicas]`, whether this
/// client's writes are fsynced in the local AOF and in how many replicas'
/// AOFs (`REPLCONF ACK … FACK`), waiting up to `timeout` ms (0: forever)
/// for `numlocal` (0 or 1) and `numreplicas`.
fn waitaof(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let numlocal = match crate::types::num::parse_i64(argv[1]) {
        Some(n @ 0..=1) => n,
        Some(_) => {
            return Err(Reply::err(
                "ERR value is out of range, value must between 0 and 1",
            ))
        }
        None => return Err(Reply::err("ERR value is not an integer or out of range")),
    };
    let numreplicas = match crate::types::num::parse_i64(argv[2]) {
        Some(n) if n >= 0 => n,
        Some(_) => return Err(Reply::err("ERR value is out of range, must be positive")),
        None => return Err(Reply::err("ERR value is not an integer or out of range")),
    };
    let deadline = ctx.parse_block_timeout(argv[3], false)?;
    if ctx.core.replica.is_replica() {
        return Err(Reply::err("ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated."));
    }
    if numlocal == 1 && ctx.core.aof.is_none() {
        return Err(Reply::err(
            "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
        ));
    }
    let waiter = Waiter {
        woff: ctx.session.woff,
        replicas: numreplicas,
        aof: Some((numlocal == 1, ctx.session.aof_woff)),
    };
    if ctx.core.wait_satisfied(&waiter) || ctx.in_exec {
        return Ok(ctx.core.wait_reply(&waiter));
    }
    let timeout_reply = ctx.core.wait_reply(&waiter);
    ctx.core.repl.waiters.insert(ctx.session.id, waiter);
    ctx.core.repl.get_ack = true;
    ctx.block(BlockRequest {
        keys: Vec::new(),
        deadline_ms: deadline,
        kind: BlockKind::Replicas,
        timeout_reply,
        argv: None,
        wake_on_delete: false,
    })
}
