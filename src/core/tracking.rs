//! Client-side caching (CLIENT TRACKING), as Redis 7.0's `tracking.c`
//! does it.
//!
//! - **Default mode**: after a read-only command of a tracking client the
//!   command layer records its keys here ([`Tracking::remember`]): the
//!   invalidation table maps a key name (of any database, as in Redis) to
//!   the ids of the clients that read it. A modified key
//!   ([`Core::signal_modified`](super::Core::signal_modified)) is removed
//!   from the table and each of its clients that still tracks (not in
//!   BCAST mode, and not the modifier itself under NOLOOP) is sent one
//!   invalidation message. `tracking-table-max-keys` bounds the table:
//!   past it, keys are invalidated as if modified ([`Tracking::limit`]).
//! - **BCAST mode**: clients register prefixes (the empty one by default)
//!   in the prefix table; modified keys are collected per prefix with the
//!   client that modified them, and at the end of the event-loop turn each
//!   prefix's keys go out as one message per client
//!   ([`Tracking::broadcast`]).
//! - **Delivery**: RESP3 clients get `>2 invalidate [keys]` pushes; a
//!   client with REDIRECT has them sent to the other client instead (as a
//!   RESP3 push, or for a RESP2 client in Pub/Sub mode as a `message` on
//!   `__redis__:invalidate`); a RESP2 client without redirect gets
//!   nothing. A redirect target that went away makes the client's
//!   redirect broken (`tracking-redir-broken` push to a RESP3 client).
//!   Messages go through the Pub/Sub outbox, except those for the client
//!   whose running command caused them: Redis writes those after the
//!   command's reply, so they are kept ([`Tracking::take_pending`]) and
//!   the dispatch appends them to the reply.
//! - FLUSHALL, FLUSHDB and a replica's full sync send every tracking
//!   client a null invalidation and empty the table ([`Tracking::flush`]).
//!
//! Sessions belong to the host, so this keeps what invalidation needs to
//! know about other clients (protocol, Pub/Sub mode, still connected) in
//! [`Peer`] entries, refreshed by the dispatch after each command of a
//! client it knows.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::clients::{Clients, Message};
use crate::reply::Reply;
use crate::types::Blob;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The Pub/Sub channel RESP2 redirect targets receive invalidations on.
pub(crate) const CHANNEL: &[u8] = b"__redis__:invalidate";

/// One tracking client's mode (Redis's `CLIENT_TRACKING_*` flags).
#[derive(Debug, Clone, Default)]
pub(crate) struct TrackState {
    /// BCAST: invalidations for prefixes, nothing remembered.
    pub bcast: bool,
    /// OPTIN: only keys read right after CLIENT CACHING yes are tracked.
    pub optin: bool,
    /// OPTOUT: keys read right after CLIENT CACHING no are not tracked.
    pub optout: bool,
    /// CLIENT CACHING was given for the next command (or transaction).
    pub caching: bool,
    /// NOLOOP: no invalidation for keys the client modified itself.
    pub noloop: bool,
    /// The redirect target went away (`R` flag, `broken_redirect`).
    pub broken_redirect: bool,
    /// The client receiving this one's invalidations (0: none).
    pub redirect: u64,
    /// BCAST prefixes, in byte order (Redis's rax).
    pub prefixes: BTreeSet<Blob>,
}

/// The options of one CLIENT TRACKING ON.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Options {
    /// BCAST.
    pub bcast: bool,
    /// OPTIN.
    pub optin: bool,
    /// OPTOUT.
    pub optout: bool,
    /// NOLOOP.
    pub noloop: bool,
}

/// What invalidation needs to know about a client it may write to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer {
    /// Its protocol (2 or 3).
    pub resp: u8,
    /// It is subscribed to something (Redis's `CLIENT_PUBSUB`).
    pub pubsub: bool,
}

/// One prefix of the BCAST table.
#[derive(Debug, Default)]
struct Bcast {
    /// Keys modified since the last broadcast, each with the client that
    /// modified it last (None: no client, e.g. expiry).
    keys: BTreeMap<Blob, Option<u64>>,
    /// Clients registered for the prefix.
    clients: Vec<u64>,
}

/// An invalidation kept for after the running command's reply.
#[derive(Debug, Clone)]
enum Pending {
    Key(Blob),
    Flush,
}

/// The value part of an invalidation message.
enum Payload<'a> {
    /// An array of key names.
    Keys(&'a [&'a [u8]]),
    /// A null (a flush), in the tracking client's protocol.
    Null(u8),
    /// An integer (the redirect id of `tracking-redir-broken`).
    Int(u64),
}

impl Payload<'_> {
    fn to_reply(&self) -> Reply {
        match self {
            Payload::Keys(keys) => Reply::Array(keys.iter().map(|k| Reply::bulk(k)).collect()),
            Payload::Null(_) => Reply::Null,
            Payload::Int(n) => Reply::Int(*n as i64),
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Payload::Keys(keys) => {
                out.push(b'*');
                out.extend_from_slice(keys.len().to_string().as_bytes());
                out.extend_from_slice(b"\r\n");
                for key in keys.iter() {
                    crate::reply::encode_bulk(out, key);
                }
            }
            Payload::Null(resp) => {
                out.extend_from_slice(if *resp >= 3 { b"_\r\n" } else { b"$-1\r\n" })
            }
            Payload::Int(n) => {
                out.push(b':');
                out.extend_from_slice(n.to_string().as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        }
    }
}

/// The tracking tables and every tracking client's mode.
#[derive(Debug, Default)]
pub(crate) struct Tracking {
    /// A client enabled tracking once (Redis creates its tables then): until
    /// then nothing is looked up when a key changes.
    active: bool,
    /// Key name → ids of the clients that read it.
    table: FastMap<Blob, Vec<u64>>,
    /// Ids stored across the table (INFO `tracking_total_items`).
    items: u64,
    /// Prefix → its BCAST state, in byte order.
    prefixes: BTreeMap<Blob, Bcast>,
    /// Tracking clients by id.
    clients: FastMap<u64, TrackState>,
    /// Clients invalidations may be written to (tracking clients and
    /// redirect targets) while they are connected.
    peers: FastMap<u64, Peer>,
    /// The client whose command is running (Redis's `current_client`).
    current: Option<u64>,
    /// A command is executing (Redis's `fixed_time_expire`): invalidations
    /// for the current client wait for its reply.
    in_call: bool,
    /// Invalidations for the current client, after its reply.
    pending: Vec<Pending>,
    /// Set while a flush signals its keys one by one: the flush itself
    /// already invalidated everything.
    muted: bool,
    /// Consecutive [`Tracking::limit`] runs that stayed over the limit.
    over_limit_runs: u32,
    /// The change being signalled has no client (expiry): BCAST records
    /// no modifier for it.
    no_modifier: bool,
    /// The running script's caller, when it tracks in the default mode,
    /// and the script's declared keys: each read-only command the script
    /// calls records them for the caller (Redis's call() with
    /// `script_caller`).
    script: Option<(u64, Vec<Blob>)>,
}

impl Tracking {
    /// True once a client enabled tracking.
    pub fn active(&self) -> bool {
        self.active
    }

    /// The tracking state of client `id`, when it tracks.
    pub fn state(&self, id: u64) -> Option<&TrackState> {
        self.clients.get(&id)
    }

    /// The tracking state of client `id`, mutably.
    pub fn state_mut(&mut self, id: u64) -> Option<&mut TrackState> {
        self.clients.get_mut(&id)
    }

    /// Number of tracking clients (INFO `tracking_clients`).
    pub fn client_count(&self) -> usize {
        self.clients.len()
    }

    /// Keys in the invalidation table (INFO `tracking_total_keys`).
    pub fn key_count(&self) -> usize {
        self.table.len()
    }

    /// Client ids stored in the table (INFO `tracking_total_items`).
    pub fn item_count(&self) -> u64 {
        self.items
    }

    /// Prefixes in the BCAST table (INFO `tracking_total_prefixes`).
    pub fn prefix_count(&self) -> usize {
        self.prefixes.len()
    }

    /// Records what invalidation needs to know about client `id`.
    pub fn set_peer(&mut self, id: u64, peer: Peer) {
        self.peers.insert(id, peer);
    }

    /// Refreshes client `id`'s facts after one of its commands (HELLO and
    /// SUBSCRIBE change them), when tracking knows it.
    pub fn refresh_peer(&mut self, id: u64, resp: u8, pubsub: bool) {
        if let Some(peer) = self.peers.get_mut(&id) {
            peer.resp = resp;
            peer.pubsub = pubsub;
        }
    }

    /// Client `id` disconnected: it stops tracking, and clients
    /// redirecting to it find the redirect broken. Its ids stay in the
    /// table until their keys are invalidated, as in Redis.
    pub fn forget(&mut self, id: u64) {
        self.disable(id);
        self.peers.remove(&id);
    }

    /// Whether a new prefix of client `id` overlaps with one it has:
    /// the first existing prefix that does, in byte order.
    pub fn overlapping_prefix(&self, id: u64, prefix: &[u8]) -> Option<Blob> {
        let state = self.clients.get(&id)?;
        state
            .prefixes
            .iter()
            .find(|p| prefixes_overlap(p, prefix))
            .cloned()
    }

    /// CLIENT TRACKING ON for client `id` (options already validated):
    /// the mode flags are replaced, BCAST prefixes added to the ones it
    /// has. `peer` describes the client itself.
    pub fn enable(
        &mut self,
        id: u64,
        peer: Peer,
        redirect: u64,
        options: Options,
        prefixes: &[&[u8]],
    ) {
        self.active = true;
        self.peers.insert(id, peer);
        let state = self.clients.entry(id).or_default();
        state.broken_redirect = false;
        state.redirect = redirect;
        state.bcast = options.bcast;
        state.optin = options.optin;
        state.optout = options.optout;
        state.noloop = options.noloop;
        if options.bcast {
            let mut added: Vec<Blob> = Vec::new();
            if prefixes.is_empty() {
                added.push(Blob::new(b""));
            }
            added.extend(prefixes.iter().map(|p| Blob::new(p)));
            for prefix in added {
                let bcast = self.prefixes.entry(prefix.clone()).or_default();
                if !bcast.clients.contains(&id) {
                    bcast.clients.push(id);
                    state.prefixes.insert(prefix);
                }
            }
        }
    }

    /// CLIENT TRACKING OFF (and RESET, a disconnect): forgets the mode and
    /// the client's prefixes.
    pub fn disable(&mut self, id: u64) {
        let Some(state) = self.clients.remove(&id) else {
            return;
        };
        for prefix in &state.prefixes {
            if let Some(bcast) = self.prefixes.get_mut(prefix) {
                bcast.clients.retain(|c| *c != id);
                if bcast.clients.is_empty() {
                    self.prefixes.remove(prefix);
                }
            }
        }
    }

    /// A script of client `id` with declared `keys` starts.
    pub fn begin_script(&mut self, id: u64, keys: &[&[u8]]) {
        self.script = None;
        if self.active && self.clients.get(&id).is_some_and(|s| !s.bcast) {
            self.script = Some((id, keys.iter().map(|k| Blob::new(k)).collect()));
        }
    }

    /// The running script called a read-only command: its declared keys
    /// are read for its caller.
    pub fn script_read(&mut self) {
        if let Some((id, keys)) = self.script.take() {
            self.remember(id, keys.iter().map(|k| k.as_bytes()));
            self.script = Some((id, keys));
        }
    }

    /// The script ended.
    pub fn end_script(&mut self) {
        self.script = None;
    }

    /// Takes away the modifying client BCAST records (until
    /// [`Tracking::restore_modifier`]): the change has no client.
    pub fn take_modifier(&mut self) -> bool {
        std::mem::replace(&mut self.no_modifier, true)
    }

    /// Ends [`Tracking::take_modifier`].
    pub fn restore_modifier(&mut self, previous: bool) {
        self.no_modifier = previous;
    }

    /// A command of client `id` begins (`Some`) or ends (`None`).
    pub fn set_current(&mut self, id: Option<u64>) {
        self.current = id;
    }

    /// Marks whether a command is executing (see [`Tracking::take_pending`]).
    pub fn set_in_call(&mut self, in_call: bool) {
        self.in_call = in_call;
    }

    /// Silences key invalidation while a flush signals its keys.
    pub fn set_muted(&mut self, muted: bool) {
        self.muted = muted;
    }

    /// Redis's resetClient: the CACHING choice lasts one command (or one
    /// transaction), and any CLIENT subcommand keeps it.
    pub fn after_command(&mut self, id: u64, in_multi: bool, was_client_command: bool) {
        if in_multi || was_client_command {
            return;
        }
        if let Some(state) = self.clients.get_mut(&id) {
            state.caching = false;
        }
    }

    /// Redis's trackingRememberKeys: client `id` read `keys` (the caller
    /// checked it tracks in the default mode).
    pub fn remember<'a>(&mut self, id: u64, keys: impl Iterator<Item = &'a [u8]>) {
        let Some(state) = self.clients.get(&id) else {
            return;
        };
        if (state.optin && !state.caching) || (state.optout && state.caching) {
            return;
        }
        for key in keys {
            let ids = match self.table.get_mut(key) {
                Some(ids) => ids,
                None => self.table.entry(Blob::new(key)).or_default(),
            };
            if !ids.contains(&id) {
                ids.push(id);
                self.items += 1;
            }
        }
    }

    /// Redis's trackingInvalidateKey: `key` was modified (by the current
    /// client, if any). `bcast`: also collect it for BCAST prefixes.
    pub fn invalidate(&mut self, clients: &mut Clients, key: &[u8], bcast: bool) {
        if !self.active || self.muted {
            return;
        }
        if bcast && !self.prefixes.is_empty() {
            let modifier = if self.no_modifier { None } else { self.current };
            for (prefix, state) in self.prefixes.iter_mut() {
                if key.starts_with(prefix) {
                    state.keys.insert(Blob::new(key), modifier);
                }
            }
        }
        let Some(ids) = self.table.remove(key) else {
            return;
        };
        self.items -= ids.len() as u64;
        for id in ids {
            let Some(state) = self.clients.get(&id) else {
                continue;
            };
            if state.bcast {
                continue;
            }
            let is_current = self.current == Some(id);
            if state.noloop && is_current {
                continue;
            }
            if is_current && self.in_call {
                self.pending.push(Pending::Key(Blob::new(key)));
            } else {
                self.send(clients, id, &Payload::Keys(&[key]), None);
            }
        }
    }

    /// Redis's trackingInvalidateKeysOnFlush: every tracking client gets a
    /// null invalidation (the current one after its reply), and the table
    /// is emptied.
    pub fn flush(&mut self, clients: &mut Clients) {
        let mut ids: Vec<u64> = self.clients.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            if self.current == Some(id) {
                self.pending.push(Pending::Flush);
            } else {
                let resp = self.peers.get(&id).map_or(2, |p| p.resp);
                self.send(clients, id, &Payload::Null(resp), None);
            }
        }
        if self.active {
            self.table.clear();
            self.items = 0;
        }
    }

    /// The invalidations kept for client `id` (the current one) until its
    /// reply was written, as RESP3 pushes to append after it; messages they
    /// produce for other clients (redirects) go to the outbox.
    pub fn take_pending(&mut self, clients: &mut Clients, id: u64) -> Vec<Reply> {
        if self.pending.is_empty() {
            return Vec::new();
        }
        let mut own = Vec::new();
        for pending in std::mem::take(&mut self.pending) {
            if !self.clients.contains_key(&id) {
                continue;
            }
            match pending {
                Pending::Key(key) => self.send(
                    clients,
                    id,
                    &Payload::Keys(&[key.as_bytes()]),
                    Some(&mut own),
                ),
                Pending::Flush => {
                    let resp = self.peers.get(&id).map_or(2, |p| p.resp);
                    self.send(clients, id, &Payload::Null(resp), Some(&mut own))
                }
            }
        }
        own
    }

    /// Redis's trackingLimitUsedSlots: while the table holds more than
    /// `max_keys` keys (0: no limit), keys are invalidated as if modified,
    /// with an effort that grows each time a run leaves it over the limit.
    pub fn limit(&mut self, clients: &mut Clients, max_keys: u64) {
        if !self.active || max_keys == 0 {
            return;
        }
        let max = usize::try_from(max_keys).unwrap_or(usize::MAX);
        if self.table.len() <= max {
            self.over_limit_runs = 0;
            return;
        }
        let effort = 100 * (self.over_limit_runs as usize + 1);
        let excess = self.table.len() - max;
        // The map's order stands in for Redis's random walk.
        let victims: Vec<Blob> = self
            .table
            .keys()
            .take(excess.min(effort))
            .cloned()
            .collect();
        let muted = std::mem::replace(&mut self.muted, false);
        for key in victims {
            self.invalidate(clients, &key, false);
        }
        self.muted = muted;
        if self.table.len() <= max {
            self.over_limit_runs = 0;
        } else {
            self.over_limit_runs += 1;
        }
    }

    /// Redis's trackingBroadcastInvalidationMessages, at the end of an
    /// event-loop turn: each prefix's modified keys to its clients (under
    /// NOLOOP without the keys the client modified itself).
    pub fn broadcast(&mut self, clients: &mut Clients) {
        if !self.active || self.clients.is_empty() || self.prefixes.is_empty() {
            return;
        }
        let mut batches: Vec<(u64, Vec<Blob>)> = Vec::new();
        for bcast in self.prefixes.values_mut() {
            if bcast.keys.is_empty() {
                continue;
            }
            for &id in &bcast.clients {
                let noloop = self.clients.get(&id).is_some_and(|s| s.noloop);
                let keys: Vec<Blob> = bcast
                    .keys
                    .iter()
                    .filter(|(_, by)| !noloop || **by != Some(id))
                    .map(|(k, _)| k.clone())
                    .collect();
                if !keys.is_empty() {
                    batches.push((id, keys));
                }
            }
            bcast.keys.clear();
        }
        for (id, keys) in batches {
            let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
            self.send(clients, id, &Payload::Keys(&refs), None);
        }
    }

    /// Redis's sendTrackingMessage: one invalidation for tracking client
    /// `id`, to it or to its redirect target. With `own`, what is for `id`
    /// itself is returned there (after its reply) instead of queued.
    fn send(
        &mut self,
        clients: &mut Clients,
        id: u64,
        payload: &Payload,
        own: Option<&mut Vec<Reply>>,
    ) {
        let Some(state) = self.clients.get_mut(&id) else {
            return;
        };
        let own_resp = self.peers.get(&id).map_or(2, |p| p.resp);
        let mut target = id;
        let mut redirected = false;
        if state.redirect != 0 {
            let redirect = state.redirect;
            if !self.peers.contains_key(&redirect) {
                state.broken_redirect = true;
                if own_resp > 2 {
                    let header: &[&[u8]] = &[b"tracking-redir-broken"];
                    deliver(clients, id, header, &Payload::Int(redirect), own, id);
                }
                return;
            }
            target = redirect;
            redirected = true;
        }
        let Some(peer) = self.peers.get(&target).copied() else {
            return;
        };
        let header: &[&[u8]] = if peer.resp > 2 {
            &[b"invalidate"]
        } else if redirected && peer.pubsub {
            &[b"message", CHANNEL]
        } else {
            return;
        };
        deliver(clients, target, header, payload, own, id);
    }
}

/// A message as its RESP2 frame: `*n`, the bulk `header` parts, `payload`.
fn frame(header: &[&[u8]], payload: &Payload) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.push(b'*');
    out.extend_from_slice((header.len() + 1).to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for part in header {
        crate::reply::encode_bulk(&mut out, part);
    }
    payload.encode(&mut out);
    out
}

/// Queues the message (`header` parts, then `payload`) for `target`, or
/// returns it in `own` as a push when it is for `own_id`, the client whose
/// reply it must follow.
fn deliver(
    clients: &mut Clients,
    target: u64,
    header: &[&[u8]],
    payload: &Payload,
    own: Option<&mut Vec<Reply>>,
    own_id: u64,
) {
    match own {
        Some(own) if target == own_id => {
            let mut parts: Vec<Reply> = header.iter().map(|p| Reply::bulk(p)).collect();
            parts.push(payload.to_reply());
            own.push(Reply::Push(parts));
        }
        _ => clients.send(target, Message::from_frame(frame(header, payload))),
    }
}

/// Redis's prefix overlap test: one is a prefix of the other.
pub(crate) fn prefixes_overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer3() -> Peer {
        Peer {
            resp: 3,
            pubsub: false,
        }
    }

    #[test]
    fn remember_invalidate_counts_and_pushes() {
        let mut t = Tracking::default();
        let mut clients = Clients::default();
        t.enable(7, peer3(), 0, Options::default(), &[]);
        t.remember(7, [&b"a"[..], b"b", b"a"].into_iter());
        assert_eq!((t.key_count(), t.item_count()), (2, 2));
        t.invalidate(&mut clients, b"a", true);
        assert_eq!((t.key_count(), t.item_count()), (1, 1));
        let messages = clients.take_messages();
        assert_eq!(messages.len(), 1);
        let mut out = Vec::new();
        messages[0].1.encode(3, &mut out);
        assert_eq!(out, b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\na\r\n");
    }

    #[test]
    fn limit_evicts_down_to_max() {
        let mut t = Tracking::default();
        let mut clients = Clients::default();
        t.enable(1, peer3(), 0, Options::default(), &[]);
        let keys: Vec<Vec<u8>> = (0..10).map(|i| format!("k{i}").into_bytes()).collect();
        t.remember(1, keys.iter().map(Vec::as_slice));
        t.limit(&mut clients, 3);
        assert_eq!(t.key_count(), 3);
        assert_eq!(clients.take_messages().len(), 7);
    }

    #[test]
    fn overlap_is_a_common_prefix() {
        assert!(prefixes_overlap(b"BAR", b"BARB"));
        assert!(prefixes_overlap(b"", b"x"));
        assert!(!prefixes_overlap(b"foo", b"bar"));
    }
}
