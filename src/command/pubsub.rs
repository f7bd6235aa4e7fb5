//! Pub/Sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH and
//! PUBSUB (Redis's `pubsub.c`), plus the sharded variants (SSUBSCRIBE,
//! SPUBLISH, …), which on a single node are a second channel namespace.
//!
//! Messages are fire and forget: never logged, never persisted. PUBLISH
//! queues one message per receiving session in the engine's outbox; the
//! host delivers them (the server appends them to each client's output and
//! disconnects subscribers that fall too far behind).

#[cfg(test)]
use super::clients::Message;
use super::flags::MAY_REPLICATE;
use super::{CmdResult, CommandSpec, Ctx, Session};
use crate::core::Core;
use crate::reply::Reply;
use crate::types::Blob;

const PUBSUB: &str = "pubsub";

/// The Pub/Sub commands (arity, flags and key positions from the
/// generated metadata, [`super::docs`]).
///
/// PUBLISH and SPUBLISH add `may_replicate`: Redis 7.0's own table sets it
/// on them, but COMMAND INFO never prints it, so the generated metadata
/// lacks it. Script calls check it ([`crate::script`]): a read-only script
/// (EVAL_RO, EVALSHA_RO) may not publish, as in Redis.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("subscribe", "subscribe", PUBSUB, subscribe),
    CommandSpec::from_docs("unsubscribe", "unsubscribe", PUBSUB, unsubscribe),
    CommandSpec::from_docs("psubscribe", "psubscribe", PUBSUB, psubscribe),
    CommandSpec::from_docs("punsubscribe", "punsubscribe", PUBSUB, punsubscribe),
    CommandSpec::from_docs("publish", "publish", PUBSUB, publish).with_extra_flags(MAY_REPLICATE),
    CommandSpec::from_docs("ssubscribe", "ssubscribe", PUBSUB, ssubscribe),
    CommandSpec::from_docs("sunsubscribe", "sunsubscribe", PUBSUB, sunsubscribe),
    CommandSpec::from_docs("spublish", "spublish", PUBSUB, spublish)
        .with_extra_flags(MAY_REPLICATE),
    CommandSpec::from_docs("pubsub", "pubsub", PUBSUB, super::container_handler)
        .with_subcommands(PUBSUB_SUBCOMMANDS),
];

static PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("channels", "pubsub|channels", PUBSUB, pubsub_channels),
    CommandSpec::from_docs("numsub", "pubsub|numsub", PUBSUB, pubsub_numsub),
    CommandSpec::from_docs("numpat", "pubsub|numpat", PUBSUB, pubsub_numpat),
    CommandSpec::from_docs(
        "shardchannels",
        "pubsub|shardchannels",
        PUBSUB,
        pubsub_shardchannels,
    ),
    CommandSpec::from_docs(
        "shardnumsub",
        "pubsub|shardnumsub",
        PUBSUB,
        pubsub_shardnumsub,
    ),
    CommandSpec::from_docs("help", "pubsub|help", PUBSUB, pubsub_help),
];

/// `[kind, name or null, count]` as a push message.
fn confirmation(kind: &'static [u8], name: Option<&[u8]>, count: usize) -> Reply {
    Reply::Push(vec![
        Reply::bulk(kind),
        name.map_or(Reply::Null, Reply::bulk),
        Reply::Int(count as i64),
    ])
}

/// Subscriptions that count for `subscribe`/`psubscribe` replies: channels
/// and patterns (Redis's clientSubscriptionsCount).
fn subscription_count(session: &Session) -> usize {
    session.channels.len() + session.patterns.len()
}

/// The count a (un)subscribe confirmation carries.
fn count_for(session: &Session, sharded: bool) -> usize {
    if sharded {
        session.shard_channels.len()
    } else {
        subscription_count(session)
    }
}

fn session_channels(session: &mut Session, sharded: bool) -> &mut Vec<Blob> {
    if sharded {
        &mut session.shard_channels
    } else {
        &mut session.channels
    }
}

fn subscribe_channels(ctx: &mut Ctx, argv: &[&[u8]], sharded: bool) -> CmdResult {
    let name = if sharded { "SSUBSCRIBE" } else { "SUBSCRIBE" };
    // Inside EXEC subscribing is allowed (Redis keeps this for backward
    // compatibility, except for SSUBSCRIBE); scripts may not.
    if ctx.deny_blocking && (sharded || !ctx.in_exec) {
        return Err(Reply::error(format!(
            "ERR {name} isn't allowed for a DENY BLOCKING client"
        )));
    }
    let kind: &'static [u8] = if sharded { b"ssubscribe" } else { b"subscribe" };
    let mut frames = Vec::with_capacity(argv.len() - 1);
    for channel in &argv[1..] {
        if ctx.core.clients.subscribe(ctx.session.id, channel, sharded) {
            session_channels(ctx.session, sharded).push(Blob::new(channel));
        }
        frames.push(confirmation(
            kind,
            Some(channel),
            count_for(ctx.session, sharded),
        ));
    }
    Ok(Reply::Frames(frames))
}

fn subscribe(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    subscribe_channels(ctx, argv, false)
}

fn ssubscribe(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    subscribe_channels(ctx, argv, true)
}

fn unsubscribe_channels(ctx: &mut Ctx, argv: &[&[u8]], sharded: bool) -> CmdResult {
    let kind: &'static [u8] = if sharded {
        b"sunsubscribe"
    } else {
        b"unsubscribe"
    };
    let channels: Vec<Vec<u8>> = if argv.len() > 1 {
        argv[1..].iter().map(|c| c.to_vec()).collect()
    } else {
        session_channels(ctx.session, sharded)
            .iter()
            .map(|c| c.to_vec())
            .collect()
    };
    if channels.is_empty() {
        return Ok(confirmation(kind, None, count_for(ctx.session, sharded)));
    }
    let mut frames = Vec::with_capacity(channels.len());
    for channel in &channels {
        if ctx
            .core
            .clients
            .unsubscribe(ctx.session.id, channel, sharded)
        {
            session_channels(ctx.session, sharded).retain(|c| c.as_bytes() != &channel[..]);
        }
        frames.push(confirmation(
            kind,
            Some(channel),
            count_for(ctx.session, sharded),
        ));
    }
    Ok(Reply::Frames(frames))
}

fn unsubscribe(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    unsubscribe_channels(ctx, argv, false)
}

fn sunsubscribe(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    unsubscribe_channels(ctx, argv, true)
}

fn psubscribe(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if ctx.deny_blocking && !ctx.in_exec {
        return Err(Reply::err(
            "ERR PSUBSCRIBE isn't allowed for a DENY BLOCKING client",
        ));
    }
    let mut frames = Vec::with_capacity(argv.len() - 1);
    for pattern in &argv[1..] {
        if ctx.core.clients.psubscribe(ctx.session.id, pattern) {
            ctx.session.patterns.push(Blob::new(pattern));
        }
        let count = subscription_count(ctx.session);
        frames.push(confirmation(b"psubscribe", Some(pattern), count));
    }
    Ok(Reply::Frames(frames))
}

fn punsubscribe(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let patterns: Vec<Vec<u8>> = if argv.len() > 1 {
        argv[1..].iter().map(|p| p.to_vec()).collect()
    } else {
        ctx.session.patterns.iter().map(|p| p.to_vec()).collect()
    };
    if patterns.is_empty() {
        let count = subscription_count(ctx.session);
        return Ok(confirmation(b"punsubscribe", None, count));
    }
    let mut frames = Vec::with_capacity(patterns.len());
    for pattern in &patterns {
        if ctx.core.clients.punsubscribe(ctx.session.id, pattern) {
            ctx.session
                .patterns
                .retain(|p| p.as_bytes() != &pattern[..]);
        }
        let count = subscription_count(ctx.session);
        frames.push(confirmation(b"punsubscribe", Some(pattern), count));
    }
    Ok(Reply::Frames(frames))
}

/// Removes every subscription of `session` (RESET, disconnection).
pub fn unsubscribe_everything(core: &mut Core, session: &mut Session) {
    for channel in std::mem::take(&mut session.channels) {
        core.clients.unsubscribe(session.id, &channel, false);
    }
    for channel in std::mem::take(&mut session.shard_channels) {
        core.clients.unsubscribe(session.id, &channel, true);
    }
    for pattern in std::mem::take(&mut session.patterns) {
        core.clients.punsubscribe(session.id, &pattern);
    }
}

/// Queues `message` on `channel` for every subscriber (channel subscribers
/// first, then pattern subscribers), returning the number of deliveries.
pub fn publish_message(core: &mut Core, channel: &[u8], message: &[u8], sharded: bool) -> usize {
    core.publish(channel, message, sharded)
}

fn publish(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let receivers = publish_message(ctx.core, argv[1], argv[2], false);
    propagate(ctx, argv);
    Ok(Reply::Int(receivers as i64))
}

fn spublish(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let receivers = publish_message(ctx.core, argv[1], argv[2], true);
    propagate(ctx, argv);
    Ok(Reply::Int(receivers as i64))
}

/// Redis propagates PUBLISH and SPUBLISH to replicas (not to the AOF), so
/// that subscribers of a replica get the messages too.
fn propagate(ctx: &mut Ctx, argv: &[&[u8]]) {
    if ctx.core.repl.streaming() {
        ctx.log_in(
            crate::persist::aof::STREAM_ONLY_DB | ctx.session.db,
            argv.iter().map(|a| a.to_vec()).collect(),
        );
    }
}

fn channel_list(ctx: &Ctx, argv: &[&[u8]], sharded: bool) -> CmdResult {
    if argv.len() > 3 {
        return Err(super::subcommand_syntax_error(argv));
    }
    let pattern = argv.get(2).copied();
    let out = ctx
        .core
        .clients
        .channels(sharded)
        .filter(|name| pattern.is_none_or(|p| crate::glob::matches(p, name, false)))
        .map(|name| Reply::bulk(name))
        .collect();
    Ok(Reply::Array(out))
}

fn pubsub_channels(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    channel_list(ctx, argv, false)
}

fn pubsub_shardchannels(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    channel_list(ctx, argv, true)
}

fn numsub(ctx: &Ctx, argv: &[&[u8]], sharded: bool) -> CmdResult {
    let mut out = Vec::with_capacity((argv.len() - 2) * 2);
    for channel in &argv[2..] {
        let count = ctx.core.clients.channel_subscribers(channel, sharded).len();
        out.push(Reply::bulk(channel));
        out.push(Reply::Int(count as i64));
    }
    Ok(Reply::Array(out))
}

fn pubsub_numsub(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    numsub(ctx, argv, false)
}

fn pubsub_shardnumsub(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    numsub(ctx, argv, true)
}

fn pubsub_numpat(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(ctx.core.clients.pattern_count() as i64))
}

const PUBSUB_HELP: &[&str] = &[
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
];

fn pubsub_help(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(super::server::help_reply(argv, PUBSUB_HELP))
}

#[cfg(test)]
mod tests {
    use crate::command::test_support::{engine, run};
    use crate::reply::Reply;

    #[test]
    fn publish_reaches_channel_then_pattern_subscribers() {
        let (mut e, mut publisher) = engine();
        let mut sub = e.new_session();
        run(&mut e, &mut sub, "SUBSCRIBE news");
        run(&mut e, &mut sub, "PSUBSCRIBE n*");
        assert_eq!(
            run(&mut e, &mut publisher, "PUBLISH news hi"),
            Reply::Int(2)
        );
        let messages = e.take_messages();
        assert_eq!(messages.len(), 2);
        assert!(messages.iter().all(|(to, _)| *to == sub.id));
        assert!(messages[0].1 == super::Message::new(&[b"message", b"news", b"hi"]));
        assert!(messages[1].1 == super::Message::new(&[b"pmessage", b"n*", b"news", b"hi"]));
        assert_eq!(
            run(&mut e, &mut publisher, "PUBLISH other x"),
            Reply::Int(0)
        );
        e.end_session(&mut sub);
        assert_eq!(run(&mut e, &mut publisher, "PUBLISH news x"), Reply::Int(0));
        assert_eq!(run(&mut e, &mut publisher, "PUBSUB NUMPAT"), Reply::Int(0));
    }
}
