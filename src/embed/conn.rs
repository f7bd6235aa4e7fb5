//! [`Conn`]: one client of the embedded engine, with its own session.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use crate::clock::now_ms;
use crate::command::Host;
use crate::engine::{Engine, Message};
use crate::reply::Reply;
use crate::Session;

use super::commit::Durability;
use super::error::into_result;
use super::{Db, DbError, Shared, State};

/// A connection to the embedded engine: its own [`Session`] (selected
/// database, MULTI queue, WATCHed keys, name, protocol, subscriptions)
/// across calls, as one client of the server has. `Send`: a connection
/// may move between threads, but one thread uses it at a time (`&mut
/// self`). Dropping it ends the session (its WATCHes, subscriptions and
/// queued transaction are forgotten); it keeps the [`Db`] open meanwhile.
pub struct Conn {
    db: Db,
    /// None until the first call (and while its thread is blocked).
    session: Option<Session>,
    /// A connection for one call ([`Db::execute`]): its session ends
    /// under the same lock as its command.
    one_call: bool,
}

impl Conn {
    pub(crate) fn new(db: Db) -> Conn {
        db.shared().connections.fetch_add(1, Ordering::Relaxed);
        Conn {
            db,
            session: None,
            one_call: false,
        }
    }

    /// A connection whose session ends with its first call.
    pub(crate) fn for_one_call(db: Db) -> Conn {
        db.shared().connections.fetch_add(1, Ordering::Relaxed);
        Conn {
            db,
            session: None,
            one_call: true,
        }
    }

    /// Executes one command for this connection. A top-level error reply
    /// is `Err` ([`DbError`] tells a command error from a persistence
    /// failure from a closed engine). Under `appendfsync always` it returns
    /// once its effects (and every write that executed before it) are
    /// fsynced; under `everysec` and `no` once they are written.
    ///
    /// A blocking command (BLPOP, BLMOVE, BZPOPMIN, XREAD BLOCK, …) that
    /// cannot be served at once blocks this thread only, until a write from
    /// another thread serves it or its timeout passes.
    pub fn execute(&mut self, argv: &[&[u8]]) -> Result<Reply, DbError> {
        let shared = Arc::clone(self.db.shared());
        let mut state = shared.lock_state();
        let State {
            engine, blocked, ..
        } = &mut *state;
        let engine = engine.as_mut().ok_or(DbError::Closed)?;
        let session = self.session.get_or_insert_with(|| engine.new_session());
        let before = engine.log_appended();
        let mut host = EmbedHost {
            blocked,
            unblock: Vec::new(),
            clients: shared.connections.load(Ordering::Relaxed),
        };
        let mut reply = engine.execute_with_host(session, argv, &mut host);
        let unblock = host.unblock;
        let blocks = session.blocked.is_some();
        shared.end_waits(&mut state, unblock);
        if blocks {
            let (served, s) = self.block(&shared, state)?;
            reply = served;
            state = s;
        }
        shared.after_command(&mut state);
        let logged = state
            .engine
            .as_ref()
            .is_some_and(|e| e.log_appended() != before);
        let durability = shared.settle_turn(&mut state, logged);
        if self.one_call {
            if let (Some(mut session), Some(engine)) = (self.session.take(), state.engine.as_mut())
            {
                engine.end_session(&mut session);
            }
        }
        drop(state);
        match durability {
            Ok(Durability::Done) => {}
            Ok(Durability::Batch(target)) => match shared.wait_durable(target, true) {
                Ok(()) => {}
                // A reader's reply does not depend on others' writes
                // being durable once they failed (the server releases it).
                Err(e) if logged || matches!(e, DbError::Closed) => return Err(e),
                Err(_) => {}
            },
            Err(e) => return Err(e),
        }
        into_result(reply)
    }

    /// The protocol (2 or 3) and the selected database of this
    /// connection's session (RESP2 and database 0 before its first call).
    #[cfg(feature = "redis")]
    pub(crate) fn protocol_and_db(&self) -> (u8, usize) {
        self.session.as_ref().map_or((2, 0), |s| (s.resp, s.db))
    }

    /// The handle this connection belongs to.
    #[cfg(feature = "redis")]
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// A receiver of the Pub/Sub messages (and keyspace notifications)
    /// this connection's subscriptions receive: SUBSCRIBE, PSUBSCRIBE and
    /// SSUBSCRIBE through [`Conn::execute`] as usual, then read here. Each
    /// message is the array the server would push (`message`, channel,
    /// payload; `pmessage`, pattern, channel, payload).
    pub fn messages(&mut self) -> Result<Receiver<Vec<Vec<u8>>>, DbError> {
        let shared = Arc::clone(self.db.shared());
        let mut state = shared.lock_state();
        let engine = state.engine.as_mut().ok_or(DbError::Closed)?;
        let id = self.session.get_or_insert_with(|| engine.new_session()).id;
        let (tx, rx) = mpsc::channel();
        state.subscribers.insert(id, tx);
        Ok(rx)
    }

    /// Waits (this thread only) until the blocked session is served, its
    /// timeout passes, or the engine closes. The session is parked in the
    /// shared state meanwhile, where other threads' writes serve it.
    fn block<'a>(
        &mut self,
        shared: &'a Shared,
        mut state: MutexGuard<'a, State>,
    ) -> Result<(Reply, MutexGuard<'a, State>), DbError> {
        let session = self.session.take().expect("a blocked session");
        let id = session.id;
        let deadline = session.blocked.as_ref().and_then(|b| b.request.deadline_ms);
        state.blocked.insert(id, session);
        loop {
            if let Some((session, reply)) = state.served.remove(&id) {
                self.session = Some(session);
                return Ok((reply, state));
            }
            if state.engine.is_none() {
                return Err(DbError::Closed);
            }
            let now = now_ms();
            if deadline.is_some_and(|d| now >= d) {
                let mut session = state.blocked.remove(&id).expect("still blocked");
                let engine = state.engine.as_mut().expect("open");
                let reply = engine.unblock(&mut session, false).unwrap_or(Reply::Null);
                self.session = Some(session);
                return Ok((reply, state));
            }
            let wait = deadline.map_or(Duration::from_secs(1), |d| {
                Duration::from_millis((d - now).clamp(1, 1000) as u64)
            });
            state = shared
                .woken
                .wait_timeout(state, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let shared = self.db.shared();
        shared.connections.fetch_sub(1, Ordering::Relaxed);
        let Some(mut session) = self.session.take() else {
            return;
        };
        let mut state = shared.lock_state();
        state.subscribers.remove(&session.id);
        if let Some(engine) = state.engine.as_mut() {
            engine.end_session(&mut session);
        }
    }
}

impl Shared {
    /// What the server does after each command for the other clients:
    /// blocked sessions served from the keys that became ready (first come
    /// first served, each woken thread finds its reply), Pub/Sub messages
    /// routed to their connections' receivers, client-side caching's turn.
    pub(crate) fn after_command(&self, state: &mut MutexGuard<'_, State>) {
        let State {
            engine,
            blocked,
            served,
            subscribers,
            ..
        } = &mut **state;
        let Some(engine) = engine.as_mut() else {
            return;
        };
        // WAIT and WAITAOF whose replicas or fsync caught up.
        let satisfied = engine.satisfied_waiters();
        let mut woke = end_waits(
            engine,
            blocked,
            served,
            satisfied.into_iter().map(|id| (id, false)),
        );
        while engine.has_ready_keys() {
            for (db, key, ids) in engine.take_ready_keys() {
                for id in ids {
                    let Some(session) = blocked.get_mut(&id) else {
                        continue;
                    };
                    if let Some(reply) = engine.serve_blocked(session, db, key.as_bytes()) {
                        let session = blocked.remove(&id).expect("present");
                        served.insert(id, (session, reply));
                        woke = true;
                    }
                }
            }
        }
        engine.tracking_turn_end();
        if engine.has_messages() {
            for (id, message) in engine.take_messages() {
                if let Some(tx) = subscribers.get(&id) {
                    let _ = tx.send(message_parts(&message));
                }
            }
        }
        if woke {
            self.woken.notify_all();
        }
    }

    /// Ends the waits CLIENT UNBLOCK asked for (`(id, with_error)`): each
    /// parked session gets its timeout reply or the UNBLOCKED error, and
    /// its thread wakes.
    fn end_waits(&self, state: &mut MutexGuard<'_, State>, requests: Vec<(u64, bool)>) {
        if requests.is_empty() {
            return;
        }
        let State {
            engine,
            blocked,
            served,
            ..
        } = &mut **state;
        let Some(engine) = engine.as_mut() else {
            return;
        };
        if end_waits(engine, blocked, served, requests.into_iter()) {
            self.woken.notify_all();
        }
    }
}

/// Moves the parked sessions `ids` from `blocked` to `served` with the
/// reply that ends their wait ([`Engine::unblock`]). True when any was.
fn end_waits(
    engine: &mut Engine,
    blocked: &mut HashMap<u64, Session>,
    served: &mut HashMap<u64, (Session, Reply)>,
    ids: impl Iterator<Item = (u64, bool)>,
) -> bool {
    let mut woke = false;
    for (id, with_error) in ids {
        let Some(mut session) = blocked.remove(&id) else {
            continue;
        };
        let reply = engine
            .unblock(&mut session, with_error)
            .unwrap_or(Reply::Null);
        served.insert(id, (session, reply));
        woke = true;
    }
    woke
}

/// The embedded engine's [`Host`]: the other clients are the handle's
/// connections; the blocked ones are parked in the shared state, where
/// CLIENT UNBLOCK finds them.
struct EmbedHost<'a> {
    blocked: &'a HashMap<u64, Session>,
    /// CLIENT UNBLOCK's requests, carried out after the command.
    unblock: Vec<(u64, bool)>,
    clients: usize,
}

impl Host for EmbedHost<'_> {
    fn connected_clients(&self) -> usize {
        self.clients.max(1)
    }

    fn unblock_client(&mut self, id: u64, with_error: bool) -> bool {
        let parked = self.blocked.get(&id).is_some_and(|s| s.blocked.is_some());
        if !parked || self.unblock.iter().any(|(i, _)| *i == id) {
            return false;
        }
        self.unblock.push((id, with_error));
        true
    }
}

/// The parts of a Pub/Sub message (its RESP2 array's elements: bulks;
/// another element, as client-side caching's null, is given as its line).
fn message_parts(message: &Message) -> Vec<Vec<u8>> {
    let Reply::Raw(bytes) = message.to_reply(2) else {
        return Vec::new();
    };
    let line = |at: usize| -> Option<(&[u8], usize)> {
        let end = at + bytes.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
        Some((&bytes[at..end], end + 2))
    };
    let mut parts = Vec::new();
    let Some((head, mut at)) = line(0) else {
        return parts;
    };
    let count: usize = std::str::from_utf8(head.get(1..).unwrap_or_default())
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    for _ in 0..count {
        let Some((item, next)) = line(at) else { break };
        if item.first() == Some(&b'$') {
            let len: Option<usize> = std::str::from_utf8(&item[1..])
                .ok()
                .and_then(|n| n.parse().ok());
            match len.and_then(|len| bytes.get(next..next + len).map(|b| (b, len))) {
                Some((body, len)) => {
                    parts.push(body.to_vec());
                    at = next + len + 2;
                }
                None => break,
            }
        } else {
            parts.push(item.to_vec());
            at = next;
        }
    }
    parts
}

/// The type of the sender a subscribed connection's messages go to.
pub(crate) type MessageSender = Sender<Vec<Vec<u8>>>;
