//! Transactions: MULTI, EXEC, DISCARD, WATCH and UNWATCH (Redis's
//! `multi.c`).
//!
//! Queueing happens in the engine's dispatch (after the same checks Redis's
//! processCommand makes, any of which failing aborts the transaction); this
//! module holds the commands and the nested execution EXEC uses. The
//! effects of one EXEC reach the AOF as one unit (wrapped in MULTI/EXEC
//! inside one checksummed batch), so a crash never leaves half of it.

use super::{CmdResult, CommandSpec, Ctx, Effect, Session};
use crate::core::Core;
use crate::reply::Reply;

const TRANSACTIONS: &str = "transactions";

/// The transaction commands (arity, flags and key positions from the
/// generated metadata, [`super::docs`]).
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("multi", "multi", TRANSACTIONS, multi),
    CommandSpec::from_docs("exec", "exec", TRANSACTIONS, exec),
    CommandSpec::from_docs("discard", "discard", TRANSACTIONS, discard),
    CommandSpec::from_docs("watch", "watch", TRANSACTIONS, watch),
    CommandSpec::from_docs("unwatch", "unwatch", TRANSACTIONS, unwatch),
];

fn multi(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if ctx.session.multi.is_some() {
        return Err(Reply::err("ERR MULTI calls can not be nested"));
    }
    ctx.session.multi = Some(Box::default());
    Ok(Reply::ok())
}

fn discard(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if ctx.session.multi.is_none() {
        return Err(Reply::err("ERR DISCARD without MULTI"));
    }
    discard_transaction(ctx.core, ctx.session);
    Ok(Reply::ok())
}

/// Leaves MULTI state and forgets every WATCH (Redis's
/// `discardTransaction`).
pub fn discard_transaction(core: &mut Core, session: &mut Session) {
    session.multi = None;
    unwatch_all(core, session);
}

fn unwatch_all(core: &mut Core, session: &mut Session) {
    let watched = std::mem::take(&mut session.watched);
    core.clients.unwatch_all(session.id, &watched);
}

/// True when a watched key has expired since WATCH (Redis 7.0's
/// `isWatchedKeyExpired`: keys already expired when watched are ignored).
fn watched_key_expired(ctx: &Ctx) -> bool {
    ctx.session.watched.iter().any(|(db, key)| {
        !ctx.core.clients.watched_expired(ctx.session.id, *db, key)
            && ctx.core.keyspace.db(*db).is_expired(key, ctx.now_ms)
    })
}

fn exec(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let Some(multi) = ctx.session.multi.as_ref() else {
        return Err(Reply::err("ERR EXEC without MULTI"));
    };
    let failed = multi.failed;
    let count = multi.commands.len();
    let cas_failed = ctx.core.clients.is_dirty(ctx.session.id) || watched_key_expired(ctx);
    unwatch_all(ctx.core, ctx.session);
    if failed || cas_failed {
        discard_transaction(ctx.core, ctx.session);
        return if failed {
            Err(Reply::err(
                "EXECABORT Transaction discarded because of previous errors.",
            ))
        } else {
            Ok(Reply::NullArray)
        };
    }
    // The queued commands' effects are collected by the engine and logged
    // as one unit after EXEC returns.
    ctx.log_nothing();
    // The session stays in MULTI state while EXEC runs (CLIENT INFO inside
    // the transaction reports it, as in Redis).
    let mut replies = Vec::with_capacity(count);
    // The protocol each reply was produced under (HELLO may switch it
    // mid-transaction; Redis writes each reply as it goes).
    let mut protocols = Vec::with_capacity(count);
    for index in 0..count {
        let argv = match ctx.session.multi.as_ref() {
            Some(m) => m.commands[index].clone(),
            None => break,
        };
        let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        let allowed = match super::resolve(&args) {
            Ok((top, spec)) => {
                super::acl::check_at_exec(ctx.core, ctx.session, &*ctx.host, top, spec, &args)
            }
            Err(_) => Ok(()),
        };
        let reply = match allowed {
            Ok(()) => call_nested(ctx, &args),
            Err(refusal) => {
                ctx.core.observe.count_error(match &refusal {
                    Reply::Error(text) => text,
                    _ => "",
                });
                refusal
            }
        };
        protocols.push(ctx.session.resp);
        // Messages a queued PUBLISH sends to this very client come before
        // that command's reply, inside EXEC's array (as Redis writes them).
        let resp = ctx.session.resp;
        let mut own: Vec<Reply> = ctx
            .core
            .clients
            .take_messages_for(ctx.session.id)
            .iter()
            .map(|m| m.to_reply(resp))
            .collect();
        if own.is_empty() {
            replies.push(reply);
        } else {
            own.push(reply);
            replies.push(Reply::Frames(own));
        }
    }
    discard_transaction(ctx.core, ctx.session);
    let final_resp = ctx.session.resp;
    if protocols.iter().any(|r| *r != final_resp) {
        for (reply, resp) in replies.iter_mut().zip(protocols) {
            if resp != final_resp {
                *reply = Reply::Raw(reply.to_resp(resp));
            }
        }
    }
    Ok(Reply::Array(replies))
}

/// Runs one command inside another (EXEC's queued commands): no blocking,
/// its keyspace changes counted and its effects collected for the caller's
/// unit.
pub(crate) fn call_nested(ctx: &mut Ctx, argv: &[&[u8]]) -> Reply {
    let (top, spec) = match super::resolve(argv) {
        Ok(specs) => specs,
        Err(reply) => return reply,
    };
    ctx.core.stats.commands_processed += 1;
    // The client's last command stays the enclosing one (CLIENT LIST).
    let last_command = ctx.session.last_command;
    let now = ctx.now_ms;
    let mut inner = Ctx::new(&mut *ctx.core, &mut *ctx.session, &mut *ctx.host, now);
    inner.deny_blocking = true;
    inner.in_exec = true;
    let started = crate::core::stats_clock::now();
    let reply = match (spec.handler)(&mut inner, argv) {
        Ok(r) | Err(r) => r,
    };
    let dirty = inner.dirty;
    let logged_custom = inner.logged_custom;
    if ctx.core.monitors.active() {
        let host = (!ctx.in_script).then_some(&*ctx.host);
        super::monitor::feed_call(ctx.core, spec, argv, ctx.session.db, host);
    }
    super::observe::nested_call(
        ctx.core,
        ctx.session,
        &*ctx.host,
        (top, spec),
        argv,
        started,
        &reply,
        false,
    );
    super::server::tracking::remember_read_keys(ctx.core, ctx.session.id, spec, argv);
    ctx.session.last_command = last_command;
    let db = ctx.session.db;
    ctx.core.dirty += dirty;
    if dirty > 0 && !logged_custom {
        ctx.core.effects.push(Effect {
            db,
            argv: argv.iter().map(|a| a.to_vec()).collect(),
        });
    }
    reply
}

fn watch(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if ctx.session.multi.is_some() {
        return Err(Reply::err("ERR WATCH inside MULTI is not allowed"));
    }
    // No point in watching once a watched key already changed.
    if ctx.core.clients.is_dirty(ctx.session.id) {
        return Ok(Reply::ok());
    }
    let db = ctx.session.db;
    for key in &argv[1..] {
        if ctx
            .session
            .watched
            .iter()
            .any(|(d, k)| *d == db && k.as_bytes() == *key)
        {
            continue;
        }
        let expired = ctx.core.keyspace.db(db).is_expired(key, ctx.now_ms);
        ctx.core.clients.watch(ctx.session.id, db, key, expired);
        ctx.session.watched.push((db, (*key).into()));
    }
    Ok(Reply::ok())
}

fn unwatch(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    unwatch_all(ctx.core, ctx.session);
    Ok(Reply::ok())
}

#[cfg(test)]
mod tests {
    use crate::command::test_support::{engine, run};
    use crate::reply::Reply;

    #[test]
    fn exec_runs_the_queue_and_logs_one_unit() {
        let (mut e, mut s) = engine();
        assert_eq!(run(&mut e, &mut s, "MULTI"), Reply::ok());
        assert_eq!(run(&mut e, &mut s, "SET a 1"), Reply::simple("QUEUED"));
        assert_eq!(run(&mut e, &mut s, "INCR a"), Reply::simple("QUEUED"));
        assert_eq!(run(&mut e, &mut s, "GET a"), Reply::simple("QUEUED"));
        assert_eq!(
            run(&mut e, &mut s, "EXEC"),
            Reply::Array(vec![Reply::ok(), Reply::Int(2), Reply::bulk(b"2")])
        );
        let logged: Vec<Vec<Vec<u8>>> = e.take_effects().into_iter().map(|e| e.argv).collect();
        assert_eq!(
            logged,
            vec![
                vec![b"SET".to_vec(), b"a".to_vec(), b"1".to_vec()],
                vec![b"INCR".to_vec(), b"a".to_vec()],
            ]
        );
    }

    #[test]
    fn queueing_errors_abort_and_watch_failures_return_null() {
        let (mut e, mut s) = engine();
        run(&mut e, &mut s, "MULTI");
        assert!(matches!(run(&mut e, &mut s, "NOPE"), Reply::Error(_)));
        run(&mut e, &mut s, "SET a 1");
        assert_eq!(
            run(&mut e, &mut s, "EXEC"),
            Reply::err("EXECABORT Transaction discarded because of previous errors.")
        );
        assert_eq!(run(&mut e, &mut s, "GET a"), Reply::Null);

        let mut other = e.new_session();
        run(&mut e, &mut s, "WATCH w");
        run(&mut e, &mut other, "SET w changed");
        run(&mut e, &mut s, "MULTI");
        run(&mut e, &mut s, "SET a 1");
        assert_eq!(run(&mut e, &mut s, "EXEC"), Reply::NullArray);
        assert_eq!(run(&mut e, &mut s, "GET a"), Reply::Null);
        // The failed EXEC also cleared the watch.
        run(&mut e, &mut other, "SET w again");
        run(&mut e, &mut s, "MULTI");
        run(&mut e, &mut s, "SET a 1");
        assert_eq!(run(&mut e, &mut s, "EXEC"), Reply::Array(vec![Reply::ok()]));
    }
}
