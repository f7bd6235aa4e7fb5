//! State that links clients to each other through the engine: clients
//! blocked on keys, WATCHed keys, Pub/Sub subscriptions and the messages
//! waiting to be delivered.
//!
//! Sessions are owned by the host (the server's connections, or an
//! embedding program), so the engine refers to them by id here; the
//! per-session half of each relation lives in [`Session`](super::Session).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::reply::Reply;
use crate::types::Blob;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
type FastSet<K> = HashSet<K, foldhash::fast::RandomState>;

/// The type of value a blocked client waits for (a key of another type
/// does not wake it, as in Redis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP.
    List,
    /// BZPOPMIN, BZPOPMAX, BZMPOP.
    ZSet,
    /// XREAD and XREADGROUP with BLOCK.
    Stream,
    /// WAIT: no keys; woken when enough replicas acknowledged the
    /// client's writes, and answered with how many did.
    Replicas,
}

/// What a command asks for when it blocks (see `Ctx::block`).
#[derive(Debug, Clone)]
pub struct BlockRequest {
    /// Keys in the selected database, in the command's order.
    pub keys: Vec<Blob>,
    /// Unix ms at which the wait ends, or None to wait forever.
    pub deadline_ms: Option<i64>,
    /// The type the keys must hold to wake the client.
    pub kind: BlockKind,
    /// The reply sent when the wait times out (a null of the right shape).
    pub timeout_reply: Reply,
    /// The command to run again when a key is ready, when it differs from
    /// the one received (XREAD's `$` becomes the concrete last ID).
    pub argv: Option<Vec<Vec<u8>>>,
    /// Also wake when a key is deleted or changes type (XREADGROUP, whose
    /// retry then fails with an error instead of waiting forever).
    pub wake_on_delete: bool,
}

/// A blocked session's wait (kept in its [`Session`](super::Session)).
#[derive(Debug, Clone)]
pub struct BlockState {
    /// The database the keys are in.
    pub db: usize,
    /// The command to run again when a key is ready.
    pub argv: Vec<Vec<u8>>,
    /// The request the command made.
    pub request: BlockRequest,
}

/// A Pub/Sub message, encoded once for all its receivers: the RESP2 array
/// form is kept; a RESP3 receiver gets the same bytes with `>` (push) in
/// place of the leading `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message(Arc<[u8]>);

impl Message {
    /// The message made of `parts` (`message`, channel, payload, …).
    pub fn new(parts: &[&[u8]]) -> Message {
        let len: usize = parts.iter().map(|p| p.len() + 16).sum();
        let mut out = Vec::with_capacity(len + 8);
        out.push(b'*');
        crate::types::num::write_i64(&mut out, parts.len() as i64);
        out.extend_from_slice(b"\r\n");
        for part in parts {
            crate::reply::encode_bulk(&mut out, part);
        }
        Message(out.into())
    }

    /// A message given as its RESP2 frame (an array, starting with `*`):
    /// client-side caching's invalidations, whose parts are not all bulks.
    pub fn from_frame(frame: Vec<u8>) -> Message {
        debug_assert_eq!(frame.first(), Some(&b'*'));
        Message(frame.into())
    }

    /// A status line (`+line\r\n`, the same in both protocols): MONITOR's.
    pub fn status_line(mut line: Vec<u8>) -> Message {
        line.insert(0, b'+');
        line.extend_from_slice(b"\r\n");
        Message(line.into())
    }

    /// Appends the message as protocol `resp` (2 or 3) frames it.
    pub fn encode(&self, resp: u8, out: &mut Vec<u8>) {
        if resp >= 3 && self.0[0] == b'*' {
            out.push(b'>');
            out.extend_from_slice(&self.0[1..]);
        } else {
            out.extend_from_slice(&self.0);
        }
    }

    /// The message as a reply already encoded for protocol `resp`.
    pub fn to_reply(&self, resp: u8) -> Reply {
        let mut out = Vec::with_capacity(self.0.len());
        self.encode(resp, &mut out);
        Reply::Raw(out)
    }
}

/// One session's watch of one key.
#[derive(Debug, Clone, Copy)]
struct Watch {
    session: u64,
    /// The key had expired (not yet deleted) when WATCH ran.
    expired: bool,
}

/// The engine's half of the client relations.
#[derive(Debug, Default)]
pub struct Clients {
    /// Session ids blocked on each key, first come first served.
    blocked_on: FastMap<(usize, Blob), VecDeque<u64>>,
    /// Keys that received data while someone was blocked on them, in the
    /// order they became ready.
    ready: Vec<(usize, Blob)>,
    ready_set: FastSet<(usize, Blob)>,
    /// Wait deadlines: (unix ms, session id).
    deadlines: BTreeSet<(i64, u64)>,
    /// Number of blocked sessions (INFO `blocked_clients`).
    blocked_count: usize,
    /// Sessions watching each key.
    watchers: FastMap<(usize, Blob), Vec<Watch>>,
    /// Sessions whose watched keys were touched: their EXEC fails.
    dirty_cas: FastSet<u64>,
    /// Subscribers of each channel, in subscription order.
    channels: FastMap<Blob, Vec<u64>>,
    /// Subscribers of each shard channel (SSUBSCRIBE), in order.
    shard_channels: FastMap<Blob, Vec<u64>>,
    /// Subscribers of each pattern, in subscription order.
    patterns: FastMap<Blob, Vec<u64>>,
    /// Messages for sessions: (session id, message).
    outbox: Vec<(u64, Message)>,
}

impl Clients {
    // -- blocking -----------------------------------------------------------

    /// Records that `session` waits on `state`'s keys.
    pub fn add_blocked(&mut self, session: u64, state: &BlockState) {
        for key in &state.request.keys {
            let queue = self.blocked_on.entry((state.db, key.clone())).or_default();
            if !queue.contains(&session) {
                queue.push_back(session);
            }
        }
        if let Some(at) = state.request.deadline_ms {
            self.deadlines.insert((at, session));
        }
        self.blocked_count += 1;
    }

    /// Forgets `session`'s wait.
    pub fn remove_blocked(&mut self, session: u64, state: &BlockState) {
        for key in &state.request.keys {
            let k = (state.db, key.clone());
            if let Some(queue) = self.blocked_on.get_mut(&k) {
                queue.retain(|s| *s != session);
                if queue.is_empty() {
                    self.blocked_on.remove(&k);
                }
            }
        }
        if let Some(at) = state.request.deadline_ms {
            self.deadlines.remove(&(at, session));
        }
        self.blocked_count = self.blocked_count.saturating_sub(1);
    }

    /// Number of blocked sessions.
    pub fn blocked_count(&self) -> usize {
        self.blocked_count
    }

    /// Number of blocked sessions with a deadline (INFO
    /// `clients_in_timeout_table`).
    pub fn timeout_count(&self) -> usize {
        self.deadlines.len()
    }

    /// Called for every modified key: queues it for serving when someone
    /// waits on it. `exists` tells whether the key exists after the change
    /// (asked only when someone watches it).
    pub fn key_touched(&mut self, db: usize, key: &[u8], exists: impl FnOnce() -> bool) {
        if !self.blocked_on.is_empty() {
            let k = (db, Blob::new(key));
            if self.blocked_on.contains_key(&k) && self.ready_set.insert(k.clone()) {
                self.ready.push(k);
            }
        }
        if self.watchers.is_empty() {
            return;
        }
        let Some(list) = self.watchers.get_mut(&(db, Blob::new(key))) else {
            return;
        };
        let exists = exists();
        for watch in list.iter_mut() {
            if watch.expired {
                // Watched while already expired: its deletion is no
                // logical change (Redis's touchWatchedKey).
                if !exists {
                    watch.expired = false;
                }
                continue;
            }
            self.dirty_cas.insert(watch.session);
        }
    }

    /// Queues `key` for serving if someone waits on it (SWAPDB brings in
    /// keys without modifying them).
    pub fn mark_ready(&mut self, db: usize, key: &[u8]) {
        let k = (db, Blob::new(key));
        if self.blocked_on.contains_key(&k) && self.ready_set.insert(k.clone()) {
            self.ready.push(k);
        }
    }

    /// Keys of database `db` that sessions are blocked on.
    pub fn blocked_keys_in(&self, db: usize) -> Vec<Blob> {
        self.blocked_on
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// Watched keys of database `db`.
    pub fn watched_keys_in(&self, db: usize) -> Vec<Blob> {
        self.watchers
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// Redis's touchAllWatchedKeysInDb for one watched key of a database
    /// whose contents were replaced by another's (SWAPDB): `was_there` /
    /// `is_there` say whether the key existed before / exists now, and
    /// `now_expired` whether what is there now has an elapsed TTL.
    pub fn touch_watched_replaced(
        &mut self,
        db: usize,
        key: &[u8],
        was_there: bool,
        is_there: bool,
        now_expired: bool,
    ) {
        if !was_there && !is_there {
            return;
        }
        let Some(list) = self.watchers.get_mut(&(db, Blob::new(key))) else {
            return;
        };
        for watch in list.iter_mut() {
            if watch.expired {
                if !is_there {
                    // An expired key is now gone: no logical change.
                    watch.expired = false;
                    continue;
                }
                if now_expired {
                    continue;
                }
            } else if !was_there && now_expired {
                // Nothing replaced by an expired key: still nothing.
                watch.expired = true;
                continue;
            }
            self.dirty_cas.insert(watch.session);
        }
    }

    /// True when keys became ready since the last [`Clients::take_ready`].
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Takes the keys that became ready, in order.
    pub fn take_ready(&mut self) -> Vec<(usize, Blob)> {
        self.ready_set.clear();
        std::mem::take(&mut self.ready)
    }

    /// Sessions blocked on `key`, first come first.
    pub fn blocked_on(&self, db: usize, key: &[u8]) -> Vec<u64> {
        self.blocked_on
            .get(&(db, Blob::new(key)))
            .map(|q| q.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Sessions whose wait ended at `now_ms`, earliest first.
    pub fn timed_out(&self, now_ms: i64) -> Vec<u64> {
        self.deadlines
            .iter()
            .take_while(|(at, _)| *at <= now_ms)
            .map(|(_, s)| *s)
            .collect()
    }

    /// The earliest wait deadline, if any.
    pub fn next_deadline(&self) -> Option<i64> {
        self.deadlines.first().map(|(at, _)| *at)
    }

    // -- WATCH --------------------------------------------------------------

    /// Records that `session` watches `key` in `db`; `expired` says the
    /// key exists but its TTL has passed (such a key deleted later is no
    /// change for this watch).
    pub fn watch(&mut self, session: u64, db: usize, key: &[u8], expired: bool) {
        let list = self.watchers.entry((db, Blob::new(key))).or_default();
        if !list.iter().any(|w| w.session == session) {
            list.push(Watch { session, expired });
        }
    }

    /// Whether `session`'s watch of `key` began on an already expired key
    /// (and the key has not been deleted since).
    pub fn watched_expired(&self, session: u64, db: usize, key: &Blob) -> bool {
        self.watchers
            .get(&(db, key.clone()))
            .and_then(|l| l.iter().find(|w| w.session == session))
            .is_some_and(|w| w.expired)
    }

    /// Forgets every key `session` watches (given the session's list).
    pub fn unwatch_all(&mut self, session: u64, keys: &[(usize, Blob)]) {
        for k in keys {
            if let Some(list) = self.watchers.get_mut(k) {
                list.retain(|w| w.session != session);
                if list.is_empty() {
                    self.watchers.remove(k);
                }
            }
        }
        self.dirty_cas.remove(&session);
    }

    /// True when a key `session` watches was modified.
    pub fn is_dirty(&self, session: u64) -> bool {
        self.dirty_cas.contains(&session)
    }

    // -- Pub/Sub ------------------------------------------------------------

    fn channel_map(&mut self, sharded: bool) -> &mut FastMap<Blob, Vec<u64>> {
        if sharded {
            &mut self.shard_channels
        } else {
            &mut self.channels
        }
    }

    /// Subscribes `session` to `channel` (a shard channel when `sharded`);
    /// false when it already was.
    pub fn subscribe(&mut self, session: u64, channel: &[u8], sharded: bool) -> bool {
        let list = self
            .channel_map(sharded)
            .entry(Blob::new(channel))
            .or_default();
        if list.contains(&session) {
            return false;
        }
        list.push(session);
        true
    }

    /// Unsubscribes `session` from `channel`; false when it was not.
    pub fn unsubscribe(&mut self, session: u64, channel: &[u8], sharded: bool) -> bool {
        let map = self.channel_map(sharded);
        let Some(list) = map.get_mut(channel) else {
            return false;
        };
        let before = list.len();
        list.retain(|s| *s != session);
        let removed = list.len() != before;
        if list.is_empty() {
            map.remove(channel);
        }
        removed
    }

    /// Subscribes `session` to `pattern`; false when it already was.
    pub fn psubscribe(&mut self, session: u64, pattern: &[u8]) -> bool {
        let list = self.patterns.entry(Blob::new(pattern)).or_default();
        if list.contains(&session) {
            return false;
        }
        list.push(session);
        true
    }

    /// Unsubscribes `session` from `pattern`; false when it was not.
    pub fn punsubscribe(&mut self, session: u64, pattern: &[u8]) -> bool {
        let Some(list) = self.patterns.get_mut(pattern) else {
            return false;
        };
        let before = list.len();
        list.retain(|s| *s != session);
        let removed = list.len() != before;
        if list.is_empty() {
            self.patterns.remove(pattern);
        }
        removed
    }

    /// Channels (or shard channels) with at least one subscriber.
    pub fn channels(&self, sharded: bool) -> impl Iterator<Item = &Blob> {
        if sharded {
            self.shard_channels.keys()
        } else {
            self.channels.keys()
        }
    }

    /// Subscribers of `channel` (or of the shard channel).
    pub fn channel_subscribers(&self, channel: &[u8], sharded: bool) -> &[u64] {
        let map = if sharded {
            &self.shard_channels
        } else {
            &self.channels
        };
        map.get(channel).map_or(&[], Vec::as_slice)
    }

    /// Patterns with at least one subscriber.
    pub fn patterns(&self) -> impl Iterator<Item = (&Blob, &[u64])> {
        self.patterns.iter().map(|(p, l)| (p, l.as_slice()))
    }

    /// Number of distinct patterns (PUBSUB NUMPAT).
    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    /// Number of channels (or shard channels) with subscribers (INFO
    /// `pubsub_channels`, `pubsubshard_channels`).
    pub fn channel_count(&self, sharded: bool) -> usize {
        if sharded {
            self.shard_channels.len()
        } else {
            self.channels.len()
        }
    }

    /// Queues `message` for every subscriber of `channel` (or of the shard
    /// channel); returns how many.
    pub fn send_to_channel(&mut self, channel: &[u8], sharded: bool, message: &Message) -> usize {
        let map = if sharded {
            &self.shard_channels
        } else {
            &self.channels
        };
        let Some(list) = map.get(channel) else {
            return 0;
        };
        self.outbox
            .extend(list.iter().map(|session| (*session, message.clone())));
        list.len()
    }

    /// Queues `message` for `session`.
    pub fn send(&mut self, session: u64, message: Message) {
        self.outbox.push((session, message));
    }

    /// True when messages wait for delivery.
    pub fn has_messages(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Takes the messages queued for `session` alone (EXEC places a
    /// caller's own messages inside its reply, where Redis writes them).
    pub fn take_messages_for(&mut self, session: u64) -> Vec<Message> {
        if !self.outbox.iter().any(|(s, _)| *s == session) {
            return Vec::new();
        }
        let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut self.outbox)
            .into_iter()
            .partition(|(s, _)| *s == session);
        self.outbox = others;
        mine.into_iter().map(|(_, m)| m).collect()
    }

    /// Takes the queued messages, in order.
    pub fn take_messages(&mut self) -> Vec<(u64, Message)> {
        std::mem::take(&mut self.outbox)
    }
}
