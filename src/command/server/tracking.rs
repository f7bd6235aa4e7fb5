//! CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO (client-side
//! caching; the tables are `core::tracking`), and the key recording after
//! a tracking client's read-only command.

use crate::command::{flags, is, CmdResult, CommandSpec, Ctx};
use crate::core::tracking::{Options, Peer};
use crate::core::Core;
use crate::reply::Reply;

/// Redis's call(): after a read-only command of a client tracking in the
/// default mode, its keys go into the invalidation table (EVAL_RO,
/// EVALSHA_RO and FCALL_RO excepted, whose reads inside record the
/// script's keys, as EVAL's do; Pub/Sub commands' shard channels are no
/// keys).
pub(crate) fn remember_read_keys(core: &mut Core, id: u64, spec: &CommandSpec, argv: &[&[u8]]) {
    if !core.tracking.active() || !spec.has(flags::READONLY) || spec.has(flags::PUBSUB) {
        return;
    }
    if matches!(spec.name, "eval_ro" | "evalsha_ro" | "fcall_ro") {
        return;
    }
    if core.tracking.state(id).is_none_or(|s| s.bcast) {
        return;
    }
    let keys = crate::command::keys_of(argv);
    if keys.is_empty() {
        return;
    }
    core.tracking
        .remember(id, keys.into_iter().filter_map(|i| argv.get(i).copied()));
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p …] [OPTIN]
/// [OPTOUT] [NOLOOP], with Redis's checks in its order.
pub(super) fn client_tracking(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut redirect: i64 = 0;
    let mut options = Options::default();
    let mut prefixes: Vec<&[u8]> = Vec::new();
    let mut redirect_peer: Option<Peer> = None;
    let mut j = 3;
    while j < argv.len() {
        let more = j + 1 < argv.len();
        let opt = argv[j];
        if is(opt, "redirect") && more {
            j += 1;
            if redirect != 0 {
                return Err(Reply::err(
                    "ERR A client can only redirect to a single other client",
                ));
            }
            redirect = crate::command::parse_int(argv[j])?;
            redirect_peer = find_client(ctx, redirect);
            if redirect_peer.is_none() {
                return Err(Reply::err(
                    "ERR The client ID you want redirect to does not exist",
                ));
            }
        } else if is(opt, "bcast") {
            options.bcast = true;
        } else if is(opt, "optin") {
            options.optin = true;
        } else if is(opt, "optout") {
            options.optout = true;
        } else if is(opt, "noloop") {
            options.noloop = true;
        } else if is(opt, "prefix") && more {
            j += 1;
            prefixes.push(argv[j]);
        } else {
            return crate::command::syntax_error();
        }
        j += 1;
    }
    let id = ctx.session.id;
    if is(argv[2], "on") {
        if !options.bcast && !prefixes.is_empty() {
            return Err(Reply::err(
                "ERR PREFIX option requires BCAST mode to be enabled",
            ));
        }
        let current = ctx.core.tracking.state(id);
        if current.is_some_and(|s| s.bcast != options.bcast) {
            return Err(Reply::err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."));
        }
        if options.bcast && (options.optin || options.optout) {
            return Err(Reply::err(
                "ERR OPTIN and OPTOUT are not compatible with BCAST",
            ));
        }
        if options.optin && options.optout {
            return Err(Reply::err(
                "ERR You can't specify both OPTIN mode and OPTOUT mode",
            ));
        }
        if current.is_some_and(|s| (options.optin && s.optout) || (options.optout && s.optin)) {
            return Err(Reply::err("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."));
        }
        // Redis's checkPrefixCollisionsOrReply. Its overlap between two
        // given prefixes reports the error but, past the first prefix,
        // still counts as success: tracking is enabled and +OK follows.
        let mut error_then_ok: Option<Reply> = None;
        if options.bcast {
            'check: for (i, prefix) in prefixes.iter().enumerate() {
                if let Some(existing) = ctx.core.tracking.overlapping_prefix(id, prefix) {
                    return Err(overlap_error("an existing prefix", prefix, &existing));
                }
                for other in &prefixes[i + 1..] {
                    if crate::core::tracking::prefixes_overlap(prefix, other) {
                        let error = overlap_error("another provided prefix", prefix, other);
                        if i == 0 {
                            return Err(error);
                        }
                        error_then_ok = Some(error);
                        break 'check;
                    }
                }
            }
        }
        let peer = Peer {
            resp: ctx.session.resp,
            pubsub: ctx.session.subscribed(),
        };
        if let Some(target) = redirect_peer {
            ctx.core.tracking.set_peer(redirect as u64, target);
        }
        ctx.core
            .tracking
            .enable(id, peer, redirect as u64, options, &prefixes);
        if let Some(error) = error_then_ok {
            return Ok(Reply::Frames(vec![error, Reply::ok()]));
        }
    } else if is(argv[2], "off") {
        ctx.core.tracking.disable(id);
    } else {
        return crate::command::syntax_error();
    }
    Ok(Reply::ok())
}

/// The client `id` as tracking sees it (this client or another one), if
/// it is connected.
fn find_client(ctx: &mut Ctx, id: i64) -> Option<Peer> {
    if id == ctx.session.id as i64 {
        return Some(Peer {
            resp: ctx.session.resp,
            pubsub: ctx.session.subscribed(),
        });
    }
    let mut found = None;
    ctx.host.for_each_client(&mut |session, _| {
        if session.id as i64 == id {
            found = Some(Peer {
                resp: session.resp,
                pubsub: session.subscribed(),
            });
        }
    });
    found
}

fn overlap_error(what: &str, prefix: &[u8], other: &[u8]) -> Reply {
    // Redis formats the prefixes with %s: they end at a NUL byte.
    let text = |b: &[u8]| {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    let message = format!(
        "ERR Prefix '{}' overlaps with {what} '{}'. Prefixes for a single client must not overlap.",
        text(prefix),
        text(other)
    );
    Reply::error(crate::command::error_text(message.as_bytes()))
}

/// CLIENT CACHING YES|NO: the next command (or transaction) is tracked
/// (OPTIN) or not (OPTOUT).
pub(super) fn client_caching(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let Some(state) = ctx.core.tracking.state_mut(ctx.session.id) else {
        return Err(Reply::err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"));
    };
    if is(argv[2], "yes") {
        if !state.optin {
            return Err(Reply::err(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if is(argv[2], "no") {
        if !state.optout {
            return Err(Reply::err(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return crate::command::syntax_error();
    }
    state.caching = true;
    Ok(Reply::ok())
}

/// CLIENT GETREDIR: the redirect target (0: none), -1 when not tracking.
pub(super) fn client_getredir(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(
        ctx.core
            .tracking
            .state(ctx.session.id)
            .map_or(-1, |s| s.redirect as i64),
    ))
}

/// CLIENT TRACKINGINFO: flags (a set), redirect, prefixes.
pub(super) fn client_trackinginfo(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    let state = ctx.core.tracking.state(ctx.session.id);
    let mut flags = vec![text(if state.is_some() { "on" } else { "off" })];
    let mut prefixes = Vec::new();
    if let Some(s) = state {
        if s.bcast {
            flags.push(text("bcast"));
        }
        if s.optin {
            flags.push(text("optin"));
            if s.caching {
                flags.push(text("caching-yes"));
            }
        }
        if s.optout {
            flags.push(text("optout"));
            if s.caching {
                flags.push(text("caching-no"));
            }
        }
        if s.noloop {
            flags.push(text("noloop"));
        }
        if s.broken_redirect {
            flags.push(text("broken_redirect"));
        }
        prefixes = s.prefixes.iter().map(|p| Reply::bulk(p)).collect();
    }
    Ok(Reply::Map(vec![
        (text("flags"), Reply::Set(flags)),
        (
            text("redirect"),
            Reply::Int(state.map_or(-1, |s| s.redirect as i64)),
        ),
        (text("prefixes"), Reply::Array(prefixes)),
    ]))
}
