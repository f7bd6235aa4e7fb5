//! Executing commands: checks, MULTI queueing, logging each command's
//! effects, and serving blocked clients.

use crate::clock::now_ms;
use crate::command::{
    self, flags, BlockKind, BlockState, CommandSpec, Ctx, Effect, Host, NullHost, Session,
};
use crate::config::CommandName;
use crate::reply::Reply;
use crate::types::{Blob, Value};

use super::{not_durable_reply, Engine};

/// Redis's reply to a command it does not run while loading a dataset.
pub(crate) const LOADING_ERROR: &str = "LOADING Redis is loading the dataset in memory";

/// How a command's effects are grouped for the AOF and the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Units {
    /// One unit: `MULTI`…`EXEC` around it when it holds more than one.
    One,
    /// Each effect its own unit (a command that touches arbitrary keys).
    EachEffect,
}

impl Engine {
    /// Executes one command for `session` with no host (embedded use).
    ///
    /// With the AOF on, a write's batch is written (and fsynced under
    /// `appendfsync always`) before this returns. A write's error reply
    /// says whether it was applied:
    ///
    /// - `MISCONF …`: refused before it ran (the AOF cannot be written
    ///   now, or lost durability): nothing changed; repeat it once writes
    ///   are accepted again.
    /// - `NOTDURABLE …` ([`NOT_DURABLE`](super::NOT_DURABLE)): it ran and is visible in memory,
    ///   but its batch could not be made durable. After a failed write(2)
    ///   the batch is kept and written by a later retry (cron); after a
    ///   failed fsync it may or may not survive a restart. Do not repeat
    ///   it (that would apply it twice); [`Engine::sync`] tells when
    ///   everything logged is durable.
    pub fn execute(&mut self, session: &mut Session, argv: &[&[u8]]) -> Reply {
        self.execute_with_host(session, argv, &mut NullHost)
    }

    /// Executes one command for `session`, with `host` answering for the
    /// surrounding program (other clients, shutdown).
    ///
    /// When the command blocks (BLPOP on an empty list, …) `session.blocked`
    /// is set on return and the returned reply must not be sent: the reply
    /// comes later from [`Engine::serve_blocked`] or
    /// [`Engine::unblock`]. Pub/Sub messages for any session are queued
    /// for [`Engine::take_messages`].
    pub fn execute_with_host(
        &mut self,
        session: &mut Session,
        argv: &[&[u8]],
        host: &mut dyn Host,
    ) -> Reply {
        if !self.core.tracking.active() {
            let mut reply = self.execute_unit(session, argv, host);
            if self.core.debug.load_aof {
                reply = self.finish_debug_load_aof(reply, host);
            }
            if !self.core.tracking.active() {
                return reply;
            }
            // This command enabled tracking.
            return self.after_tracked_command(session, argv, reply);
        }
        let mut reply = self.execute_unit(session, argv, host);
        if self.core.debug.load_aof {
            reply = self.finish_debug_load_aof(reply, host);
        }
        self.after_tracked_command(session, argv, reply)
    }

    /// Client-side caching after a command (Redis's resetClient and
    /// afterCommand): the client's facts refreshed, the CACHING choice
    /// spent, and the invalidations the command caused for the client
    /// itself written after its reply (even with CLIENT REPLY OFF, like
    /// every push).
    fn after_tracked_command(&mut self, session: &Session, argv: &[&[u8]], reply: Reply) -> Reply {
        let tracking = &mut self.core.tracking;
        tracking.set_current(None);
        tracking.refresh_peer(session.id, session.resp, session.subscribed());
        let client_command = argv
            .first()
            .is_some_and(|name| name.eq_ignore_ascii_case(b"client"));
        tracking.after_command(session.id, session.multi.is_some(), client_command);
        let pushes = tracking.take_pending(&mut self.core.clients, session.id);
        with_pushes(session, reply, pushes)
    }

    /// [`Engine::execute_with_host`] without client-side caching's
    /// bookkeeping around it.
    fn execute_unit(
        &mut self,
        session: &mut Session,
        argv: &[&[u8]],
        host: &mut dyn Host,
    ) -> Reply {
        // One reading of the statistics clock gives the command's time
        // (Unix ms, for its expiries) and the start of its duration
        // (commandstats, slowlog): its admission is timed with it.
        let mut started = crate::core::stats_clock::now();
        let now = self.core.wall.unix_ms(started);
        if !self.core.loading
            && self.core.startup_load.is_none()
            && now - self.core.last_cron_ms >= i64::from(1000 / self.core.config.hz.max(1))
        {
            self.cron_at(now);
            // The cron's work is not the command's.
            started = crate::core::stats_clock::now();
        }
        if self.core.tracking.active() {
            // Redis's current_client, after the cron's own work.
            self.core.tracking.set_current(Some(session.id));
        }
        // rename-command: the client's name for the command becomes its
        // real name, so everything after (errors, MULTI's queue, the AOF)
        // sees the real command. Replay uses real names already.
        let renamed: Vec<&[u8]>;
        let mut argv = argv;
        if !self.core.loading && !self.core.config.command_renames.is_empty() {
            if let Some(name) = argv.first() {
                match self.core.config.command_renames.resolve(name) {
                    CommandName::Unchanged => {}
                    CommandName::Renamed(real) => {
                        renamed = std::iter::once(real.as_bytes())
                            .chain(argv[1..].iter().copied())
                            .collect();
                        argv = &renamed;
                    }
                    CommandName::Removed => {
                        session.last_command = "NULL";
                        if let Some(multi) = session.multi.as_mut() {
                            multi.failed = true;
                        }
                        return command::unknown_command_error(argv);
                    }
                }
            }
        }
        let (top, spec) = match self.admit(session, argv, host) {
            Ok(specs) => specs,
            Err(reply) => {
                let is_exec = argv
                    .first()
                    .is_some_and(|name| name.eq_ignore_ascii_case(b"exec"));
                if is_exec {
                    // Redis's rejectCommand for EXEC: the transaction is
                    // discarded and the reason given under EXECABORT.
                    command::multi::discard_transaction(&mut self.core, session);
                    if self.core.monitors.active() {
                        command::monitor::feed(
                            &mut self.core,
                            argv,
                            session.db,
                            Some(&*host),
                            None,
                        );
                    }
                    if let Reply::Error(text) = &reply {
                        let reason = text.strip_prefix("ERR ").unwrap_or(text);
                        let reply = Reply::error(format!(
                            "EXECABORT Transaction discarded because of: {reason}"
                        ));
                        command::observe::rejected(&mut self.core, argv, &reply);
                        return reply;
                    }
                }
                // An error while queueing aborts the transaction at EXEC.
                if let Some(multi) = session.multi.as_mut() {
                    multi.failed = true;
                }
                command::observe::rejected(&mut self.core, argv, &reply);
                return reply;
            }
        };
        if self.core.tracking.active() {
            // Redis's processCommand keeps the invalidation table within
            // `tracking-table-max-keys` before each command.
            let max_keys = self.core.config.tracking_table_max_keys;
            self.core.tracking.limit(&mut self.core.clients, max_keys);
        }
        if let Some(multi) = session.multi.as_mut() {
            if !matches!(
                top.name,
                "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
            ) {
                session.last_command = spec.name;
                // Redis's mstate.cmd_flags: a script's declared flags count.
                let (write, may_replicate) = self.write_flags(top.name, spec, argv);
                multi.has_write |= write;
                multi.may_replicate |= may_replicate;
                multi.denied_while_loading |= !spec.has(flags::LOADING);
                // Nothing is kept for a transaction that will not run.
                if !multi.failed && !self.core.clients.is_dirty(session.id) {
                    multi
                        .commands
                        .push(argv.iter().map(|a| a.to_vec()).collect());
                }
                return Reply::simple("QUEUED");
            }
        }
        session.last_command = spec.name;
        self.core.stats.commands_processed += 1;
        let stream_before = self.core.repl.stream_end();
        let logged_before = self.log_appended();
        command::observe::call_started(&mut self.core);
        let reply = self.run_command(session, argv, spec, host, now);
        command::observe::after_call(
            &mut self.core,
            session,
            host,
            top,
            spec,
            argv,
            started,
            &reply,
        );
        if self.log_appended() != logged_before {
            // WAITAOF's local mark: the AOF's logical end after this unit.
            if let Some(aof) = &self.core.aof {
                session.aof_woff = aof.logged_end();
            }
        }
        // Redis's `c->woff`: where the replication stream stood after the
        // client's last command that propagated (WAIT waits for it).
        let stream_after = self.core.repl.stream_end();
        if stream_after != stream_before {
            session.woff = stream_after;
        }
        reply
    }

    /// Runs an admitted command and logs its effects.
    fn run_command(
        &mut self,
        session: &mut Session,
        argv: &[&[u8]],
        spec: &'static CommandSpec,
        host: &mut dyn Host,
        now: i64,
    ) -> Reply {
        let effects_before = self.core.effects.len();
        self.core.tracking.set_in_call(true);
        let mut ctx = Ctx::new(&mut self.core, session, host, now);
        let mut reply = match (spec.handler)(&mut ctx, argv) {
            Ok(r) | Err(r) => r,
        };
        let dirty = ctx.dirty;
        let logged_custom = ctx.logged_custom;
        let block = ctx.block_request.take();
        let db = ctx.session.db;
        if self.core.monitors.active() {
            reply = command::monitor::after_call(&mut self.core, spec, argv, session, host, reply);
        }
        command::server::tracking::remember_read_keys(&mut self.core, session.id, spec, argv);
        self.core.tracking.set_in_call(false);
        if let Some(request) = block {
            let state = BlockState {
                db,
                argv: request
                    .argv
                    .clone()
                    .unwrap_or_else(|| argv.iter().map(|a| a.to_vec()).collect()),
                request,
            };
            self.core.clients.add_blocked(session.id, &state);
            session.blocked = Some(Box::new(state));
        }
        if dirty > 0 {
            self.core.dirty += dirty;
            if !logged_custom {
                let streaming = self.core.repl.streaming();
                match self.core.aof.as_mut() {
                    // The common case: logged as received, nothing else
                    // logged by this command: encode straight into the
                    // batch (and the replication stream).
                    Some(aof)
                        if !self.core.loading && self.core.effects.len() == effects_before =>
                    {
                        aof.push_command(db, argv);
                        self.core.repl.log_command(db, argv);
                        if !self.group_commit {
                            if let Err(e) = aof.flush(now) {
                                return not_durable_reply(e);
                            }
                        }
                        return reply;
                    }
                    // No log, no replicas and nobody collecting effects:
                    // nothing to build.
                    None if !self.capture_effects && !streaming => {}
                    _ => self.core.effects.push(Effect {
                        db,
                        argv: argv.iter().map(|a| a.to_vec()).collect(),
                    }),
                }
            }
        }
        // Redis's propagatePendingCommands: a command that touches
        // arbitrary keys (SCAN, RANDOMKEY) propagates its expiry DELs bare,
        // like active expiry, not as one MULTI/EXEC.
        let units = if spec.has(flags::TOUCHES_ARBITRARY_KEYS) {
            Units::EachEffect
        } else {
            Units::One
        };
        match self.log_unit(effects_before, now, units) {
            Ok(()) => reply,
            Err(refusal) => refusal,
        }
    }

    /// Redis's processCommand checks before a command runs or is queued:
    /// lookup and arity, authentication, the write refusal (MISCONF), the
    /// RESP2 subscribed context, a dataset loading.
    fn admit(
        &mut self,
        session: &mut Session,
        argv: &[&[u8]],
        host: &mut dyn Host,
    ) -> Result<(&'static CommandSpec, &'static CommandSpec), Reply> {
        let (top, spec) = command::resolve(argv).inspect_err(|_| {
            // Redis's lastcmd is the looked-up command: NULL when unknown.
            let known = argv
                .first()
                .and_then(|name| command::lookup(name))
                .is_some_and(|top| {
                    top.subcommands.is_empty()
                        || argv.get(1).is_some_and(|sub| top.subcommand(sub).is_some())
                });
            if !known {
                session.last_command = "NULL";
            }
        })?;
        // Redis checks the protected commands right after the arity (the
        // `local` setting is checked by DEBUG itself, which sees the peer).
        if top.name == "debug"
            && self.core.config.enable_debug_command == crate::config::PROTECTED_NO
        {
            return Err(Reply::err(command::debug::NOT_ALLOWED_ERR));
        }
        if !session.authenticated
            && !self.core.acl.default_needs_no_auth()
            && !spec.has(flags::NO_AUTH)
        {
            return Err(Reply::err("NOAUTH Authentication required."));
        }
        command::acl::check(&mut self.core, session, &*host, top, spec, argv)?;
        if self.core.config.maxmemory != 0 && !self.core.loading {
            self.check_memory(session, top, spec, argv, host)?;
        }
        if !self.core.loading && !session.is_master {
            let exec_writes =
                top.name == "exec" && session.multi.as_ref().is_some_and(|m| m.has_write);
            if spec.is_write() || top.name == "ping" || exec_writes {
                if let Some(refusal) = self.core.write_refusal() {
                    return Err(Reply::error(refusal));
                }
            }
            let writes = spec.is_write() || exec_writes;
            if writes {
                if let Some(refusal) = self.core.noreplicas_refusal() {
                    return Err(Reply::err(refusal));
                }
            }
            // Redis's is_denystale_command: EXEC is refused on a stale
            // replica when a queued command lacks the `stale` flag.
            let stale = spec.has(flags::STALE)
                && !(top.name == "exec"
                    && self.core.replica.master.is_some()
                    && session
                        .multi
                        .as_ref()
                        .is_some_and(|m| m.commands.iter().any(|c| !queued_allows_stale(c))));
            if let Some(refusal) = self.core.replica_refusal(writes, stale, session.is_master) {
                return Err(Reply::err(refusal));
            }
        }
        if session.multi.is_some() && spec.has(flags::NO_MULTI) {
            return Err(Reply::err("ERR Command not allowed inside a transaction"));
        }
        if session.resp == 2
            && session.subscribed()
            && !matches!(
                top.name,
                "ping"
                    | "subscribe"
                    | "ssubscribe"
                    | "unsubscribe"
                    | "sunsubscribe"
                    | "psubscribe"
                    | "punsubscribe"
                    | "quit"
                    | "reset"
            )
        {
            return Err(Reply::error(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                command::full_name(top, spec)
            )));
        }
        if let Some(asynchronous) = self.loading_kind() {
            if !session.is_master && refused_while_loading(asynchronous, top, spec, session) {
                return Err(Reply::err(LOADING_ERROR));
            }
        }
        if session.monitor
            && spec.flags & (flags::WRITE | flags::READONLY | flags::MAY_REPLICATE) != 0
        {
            // Redis marks a monitor a replica, which may not touch keys.
            return Err(Reply::err("ERR Replica can't interact with the keyspace"));
        }
        Ok((top, spec))
    }

    /// Whether a dataset is loading: `Some(false)` for the files read at
    /// startup or a full sync's payload (Redis's `loading`: only commands
    /// with the `loading` flag run), `Some(true)` for a full sync that
    /// serves the old data meanwhile (Redis's `async_loading`).
    fn loading_kind(&self) -> Option<bool> {
        if self.core.startup_load.is_some() {
            return Some(false);
        }
        self.core
            .replica
            .master
            .as_ref()
            .and_then(|m| m.loading.as_ref())
            .map(|load| load.asynchronous)
    }

    /// Sends the effects logged since `effects_before` to the AOF and the
    /// replication stream as one atomic unit, or each as its own with
    /// [`Units::EachEffect`] (and, without group commit, writes them). Err
    /// is the reply a write gets when its effect could not be logged.
    pub(super) fn log_unit(
        &mut self,
        effects_before: usize,
        now: i64,
        units: Units,
    ) -> Result<(), Reply> {
        debug_assert!(
            self.core.effects.len() >= effects_before,
            "a command never removes logged effects"
        );
        if self.core.loading {
            return Ok(());
        }
        let logged = self.core.effects.len() > effects_before;
        let effects = &self.core.effects[effects_before..];
        if logged {
            match units {
                Units::One => self.core.repl.log_unit(effects),
                Units::EachEffect => {
                    for effect in effects {
                        self.core.repl.log_unit(std::slice::from_ref(effect));
                    }
                }
            }
        }
        if self.core.aof.is_none() && !self.capture_effects {
            self.core.effects.clear();
        }
        if let Some(aof) = self.core.aof.as_mut() {
            if logged {
                let effects = &self.core.effects[effects_before..];
                match units {
                    Units::One => aof.push_unit(effects),
                    Units::EachEffect => {
                        for effect in effects {
                            aof.push_unit(std::slice::from_ref(effect));
                        }
                    }
                }
                self.core.effects.truncate(effects_before);
            }
            // Only a command that logged something waits for the log; a
            // batch that failed earlier is retried by cron.
            if !self.group_commit && logged {
                if let Err(e) = aof.flush(now) {
                    // Applied in memory but not logged: not acknowledged.
                    return Err(not_durable_reply(e));
                }
            }
        }
        Ok(())
    }

    /// True when the command `argv` of `session` has to wait for the
    /// pause to end (Redis's `processCommand`: replicas are never paused,
    /// our master's link is;
    /// in ALL mode, every command; in WRITE mode, commands flagged `write`
    /// or `may-replicate`, and EXEC of a transaction holding one). Unknown commands and clients
    /// that must authenticate first do not wait: their error comes at once.
    pub(crate) fn must_wait_for_pause(&self, session: &Session, argv: &[&[u8]]) -> bool {
        if session.is_replica {
            return false;
        }
        let Some(mode) = self.core.pauses.mode() else {
            return false;
        };
        if !session.authenticated && !self.core.acl.default_needs_no_auth() {
            return false;
        }
        let Ok((top, spec)) = crate::command::resolve(argv) else {
            return false;
        };
        if mode == crate::core::PauseMode::All {
            return true;
        }
        if top.name == "exec" {
            return session
                .multi
                .as_ref()
                .is_some_and(|m| m.has_write || m.may_replicate);
        }
        let (write, may_replicate) = self.write_flags(top.name, spec, argv);
        write || may_replicate
    }

    /// The command's `write` and `may-replicate` flags as Redis's
    /// getCommandFlags gives them: for EVAL, EVALSHA and FCALL, from the
    /// script's or function's declared flags when it has them
    /// (scriptFlagsToCmdFlags: it writes unless `no-writes`, and no longer
    /// "may replicate"); else the command's own.
    fn write_flags(
        &self,
        name: &str,
        spec: &crate::command::CommandSpec,
        argv: &[&[u8]],
    ) -> (bool, bool) {
        if matches!(name, "eval" | "evalsha") {
            if let Some(declared) = self.script_flags(name == "evalsha", argv) {
                if !declared.compat {
                    return (!declared.no_writes, false);
                }
            }
        }
        if name == "fcall" {
            let engine = self
                .core
                .function_engine
                .get::<crate::script::functions::FunctionEngine>();
            if let Some(f) = engine.and_then(|e| argv.get(1).and_then(|n| e.function(n))) {
                return (!f.flags.no_writes, false);
            }
        }
        (spec.is_write(), spec.has(flags::MAY_REPLICATE))
    }

    /// The flags of the script EVAL or EVALSHA (`evalsha`) names in
    /// `argv`, as Redis's `evalGetCommandFlags` finds them: the cached
    /// script's, else (EVAL) its shebang's. None when they cannot be
    /// known (an unknown sha, a bad shebang): the command's own flags apply.
    pub(super) fn script_flags(
        &self,
        evalsha: bool,
        argv: &[&[u8]],
    ) -> Option<crate::script::ScriptFlags> {
        let body = argv.get(1)?;
        let sha = if evalsha {
            crate::script::parse_sha(body)?
        } else {
            crate::script::script_sha(body)
        };
        let cached = command::scripting::state(&self.core).and_then(|s| s.flags(&sha));
        match cached {
            Some(flags) => Some(flags),
            None if evalsha => None,
            None => crate::script::parse_shebang(body)
                .ok()
                .map(|(flags, _)| flags),
        }
    }

    /// True when keys that blocked clients wait on received data: the host
    /// should call [`Engine::take_ready_keys`] and serve those clients.
    pub fn has_ready_keys(&self) -> bool {
        self.core.clients.has_ready()
    }

    /// The keys that became ready, in order, each with the ids of the
    /// sessions blocked on it (first come first): call
    /// [`Engine::serve_blocked`] for each, in that order.
    ///
    /// A ready key whose TTL has passed is deleted first, its DEL logged as
    /// its own unit (Redis's handleClientsBlockedOnKeys looks each ready
    /// key up, which expires it): its waiters then find nothing and keep
    /// waiting.
    pub fn take_ready_keys(&mut self) -> Vec<(usize, Blob, Vec<u64>)> {
        let ready = self.core.clients.take_ready();
        let now = now_ms();
        let mut out = Vec::with_capacity(ready.len());
        for (db, key) in ready {
            let effects_before = self.core.effects.len();
            if self.core.expire_if_needed(db, &key, now) {
                // The key is already gone; a failed log write poisons the
                // engine as for any other write.
                let _ = self.log_unit(effects_before, now, Units::One);
            }
            let waiting = self.core.clients.blocked_on(db, &key);
            out.push((db, key, waiting));
        }
        out
    }

    /// Runs `session`'s blocked command again because `key` in `db`
    /// received data. Returns its reply when it was served (the session is
    /// no longer blocked), None when it still waits (the key holds another
    /// type, or what arrived was taken by a client ahead of it).
    pub fn serve_blocked(&mut self, session: &mut Session, db: usize, key: &[u8]) -> Option<Reply> {
        let state = session.blocked.as_ref()?;
        if state.db != db || !state.request.keys.iter().any(|k| k.as_bytes() == key) {
            return None;
        }
        let now = now_ms();
        let database = self.core.keyspace.db(db);
        let live = database.get(key).filter(|_| !database.is_expired(key, now));
        let matches = matches!(
            (state.request.kind, live),
            (BlockKind::List, Some(Value::List(_)))
                | (BlockKind::ZSet, Some(Value::ZSet(_)))
                | (BlockKind::Stream, Some(Value::Stream(_)))
        );
        if !matches && !state.request.wake_on_delete {
            return None;
        }
        let argv_owned = state.argv.clone();
        let argv: Vec<&[u8]> = argv_owned.iter().map(Vec::as_slice).collect();
        let Ok((_, spec)) = command::resolve(&argv) else {
            return None;
        };
        let effects_before = self.core.effects.len();
        let saved_db = session.db;
        session.db = db;
        let mut host = NullHost;
        let tracking = self.core.tracking.active();
        if tracking {
            self.core.tracking.set_current(Some(session.id));
            self.core.tracking.set_in_call(true);
        }
        let started = crate::core::stats_clock::now();
        let mut ctx = Ctx::new(&mut self.core, session, &mut host, now);
        ctx.ready_key = Some(Blob::new(key));
        let reply = match (spec.handler)(&mut ctx, &argv) {
            Ok(r) | Err(r) => r,
        };
        let still_blocked = ctx.block_request.take().is_some();
        let dirty = ctx.dirty;
        let logged_custom = ctx.logged_custom;
        let reply = if tracking {
            command::server::tracking::remember_read_keys(&mut self.core, session.id, spec, &argv);
            self.core.tracking.set_in_call(false);
            self.after_tracked_command(session, &argv, reply)
        } else {
            reply
        };
        session.db = saved_db;
        if still_blocked {
            debug_assert!(dirty == 0, "a command that blocks changes nothing");
            return None;
        }
        if let Some(state) = session.blocked.take() {
            self.core.clients.remove_blocked(session.id, &state);
        }
        command::observe::after_unblock(
            &mut self.core,
            session,
            &argv,
            started,
            Some(&reply),
            false,
        );
        self.core.dirty += dirty;
        if dirty > 0
            && !logged_custom
            && (self.core.aof.is_some() || self.capture_effects || self.core.repl.streaming())
        {
            self.core.effects.push(Effect {
                db,
                argv: argv_owned,
            });
        }
        Some(match self.log_unit(effects_before, now, Units::One) {
            Ok(()) => reply,
            Err(refusal) => refusal,
        })
    }

    /// Ids of blocked sessions whose timeout has passed: answer each with
    /// [`Engine::unblock`].
    pub fn timed_out_sessions(&self) -> Vec<u64> {
        self.core.clients.timed_out(now_ms())
    }

    /// The earliest blocking deadline (Unix ms), for the host's timer.
    pub fn next_block_deadline(&self) -> Option<i64> {
        self.core.clients.next_deadline()
    }

    /// Ends `session`'s wait: with its timeout reply, or with the
    /// UNBLOCKED error (CLIENT UNBLOCK … ERROR). None if it was not blocked.
    pub fn unblock(&mut self, session: &mut Session, with_error: bool) -> Option<Reply> {
        let state = session.blocked.take()?;
        self.core.clients.remove_blocked(session.id, &state);
        let waiter = self.core.repl.waiters.remove(&session.id);
        let argv: Vec<&[u8]> = state.argv.iter().map(Vec::as_slice).collect();
        let error = with_error.then(|| Reply::err("UNBLOCKED client unblocked via CLIENT UNBLOCK"));
        let started = crate::core::stats_clock::now();
        command::observe::after_unblock(
            &mut self.core,
            session,
            &argv,
            started,
            error.as_ref(),
            true,
        );
        Some(if with_error {
            Reply::err("UNBLOCKED client unblocked via CLIENT UNBLOCK")
        } else if let Some(waiter) = waiter {
            // WAIT and WAITAOF answer their counts as they are now.
            self.core.wait_reply(&waiter)
        } else {
            state.request.timeout_reply
        })
    }

    /// Forgets everything the engine holds for `session` (its wait, WATCHes,
    /// subscriptions, queued transaction): call it when a client goes away.
    pub fn end_session(&mut self, session: &mut Session) {
        if let Some(state) = session.blocked.take() {
            self.core.clients.remove_blocked(session.id, &state);
            self.core.observe.slowlog.take_blocked(session.id);
        }
        self.core.repl.waiters.remove(&session.id);
        self.core.tracking.forget(session.id);
        command::monitor::stop(&mut self.core, session);
        command::multi::discard_transaction(&mut self.core, session);
        command::pubsub::unsubscribe_everything(&mut self.core, session);
        if session.is_replica {
            self.core.drop_replica(session.id);
        }
    }

    /// True when Pub/Sub messages wait for delivery.
    pub fn has_messages(&self) -> bool {
        self.core.clients.has_messages()
    }

    /// Takes the Pub/Sub messages queued for sessions: (session id,
    /// message), in publication order.
    pub fn take_messages(&mut self) -> Vec<(u64, crate::command::clients::Message)> {
        self.core.clients.take_messages()
    }

    /// Client-side caching's work at the end of an event-loop turn
    /// (Redis's beforeSleep and cron): the invalidation table brought
    /// within `tracking-table-max-keys`, BCAST clients sent the keys
    /// modified during the turn. Messages go to the outbox
    /// ([`Engine::take_messages`]).
    pub(crate) fn tracking_turn_end(&mut self) {
        if !self.core.tracking.active() {
            return;
        }
        let max_keys = self.core.config.tracking_table_max_keys;
        self.core.tracking.limit(&mut self.core.clients, max_keys);
        self.core.tracking.broadcast(&mut self.core.clients);
    }
}

/// `reply` followed by the invalidation `pushes` the command caused for
/// its own client; the pushes alone when the reply is not sent (CLIENT
/// REPLY OFF/SKIP).
fn with_pushes(session: &Session, reply: Reply, pushes: Vec<Reply>) -> Reply {
    if pushes.is_empty() {
        return reply;
    }
    if session.reply_off || session.reply_skip {
        return Reply::Frames(pushes);
    }
    let mut frames = Vec::with_capacity(pushes.len() + 1);
    frames.push(reply);
    frames.extend(pushes);
    Reply::Frames(frames)
}

/// Redis's processCommand rules while a dataset loads: a synchronous load
/// runs only commands with the `loading` flag (EXEC only when everything
/// it queued has it); an asynchronous one refuses the commands flagged
/// `no_async_loading` (SAVE, BGSAVE, REPLICAOF, …).
fn refused_while_loading(
    asynchronous: bool,
    top: &CommandSpec,
    spec: &CommandSpec,
    session: &Session,
) -> bool {
    let multi = session.multi.as_ref();
    if !asynchronous {
        let exec_denied = top.name == "exec" && multi.is_some_and(|m| m.denied_while_loading);
        return !spec.has(flags::LOADING) || exec_denied;
    }
    let no_async = |name: &str| {
        crate::command::docs::lookup(name)
            .is_some_and(|d| d.extra_flags & crate::command::docs::EXTRA_NO_ASYNC_LOADING != 0)
    };
    if top.name == "exec" {
        return multi.is_some_and(|m| {
            m.commands.iter().any(|argv| {
                let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
                command::resolve(&argv).is_ok_and(|(t, s)| no_async(&command::full_name(t, s)))
            })
        });
    }
    no_async(&command::full_name(top, spec))
}

/// Whether the queued command `argv` may run on a stale replica (Redis's
/// `stale` flag; a name that no longer resolves counts as allowed, as it
/// was checked when queued).
fn queued_allows_stale(argv: &[Vec<u8>]) -> bool {
    let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    command::resolve(&argv).map_or(true, |(_, spec)| spec.has(flags::STALE))
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::engine::Engine;
    use crate::reply::Reply;

    fn run(engine: &mut Engine, session: &mut crate::command::Session, line: &str) -> Reply {
        let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        engine.execute(session, &argv)
    }

    /// Lazy expiry in the AOF as in Redis's stream: SCAN's and RANDOMKEY's
    /// DELs each a unit of their own, MGET's two DELs one MULTI/EXEC unit;
    /// the file replays to the same (empty) keyspace.
    #[test]
    fn scan_and_randomkey_expiry_dels_are_separate_aof_units() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::in_memory();
        config.appendonly = true;
        config.dir = dir.path().to_path_buf();
        // Cron (active expiry) at most once a second: not within this test.
        config.hz = 1;
        {
            let mut engine = Engine::open(config.clone()).unwrap();
            let mut s = engine.new_session();
            for line in [
                "SET m1 v PX 1",
                "SET m2 v PX 1",
                "SELECT 1",
                "SET foo1 v PX 1",
                "SET foo2 v PX 1",
                "SELECT 2",
                "SET bar1 v PX 1",
                "SET bar2 v PX 1",
                "SELECT 0",
            ] {
                assert_ne!(run(&mut engine, &mut s, line), Reply::Null, "{line}");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            let empty = Reply::Array(vec![Reply::Null, Reply::Null]);
            assert_eq!(run(&mut engine, &mut s, "MGET m1 m2"), empty);
            run(&mut engine, &mut s, "SELECT 1");
            run(&mut engine, &mut s, "SCAN 0 COUNT 100");
            run(&mut engine, &mut s, "SELECT 2");
            assert_eq!(run(&mut engine, &mut s, "RANDOMKEY"), Reply::Null);
        }
        let text =
            String::from_utf8_lossy(&std::fs::read(dir.path().join("appendonly.aof")).unwrap())
                .to_lowercase();
        assert_eq!(text.matches("multi").count(), 1, "only MGET's unit: {text}");
        let after_exec = &text[text.find("exec").expect("MGET's EXEC")..];
        for key in ["foo1", "foo2", "bar1", "bar2"] {
            assert!(
                after_exec.contains(&format!("$3\r\ndel\r\n$4\r\n{key}")),
                "{text}"
            );
        }
        let mut engine = Engine::open(config).unwrap();
        let mut s = engine.new_session();
        for db in 0..3 {
            run(&mut engine, &mut s, &format!("SELECT {db}"));
            assert_eq!(run(&mut engine, &mut s, "DBSIZE"), Reply::Int(0), "db {db}");
        }
    }
}
