//! MIGRATE's connection cache (Redis's `migrate_cached_sockets`): one TCP
//! connection per target `host:port`, kept for the next MIGRATE to the
//! same target, closed by the cron after 10 seconds unused. At most 64
//! are kept; a new one beyond that closes one at random.
//!
//! The connections are blocking sockets used only from the command
//! thread while a MIGRATE runs (with its timeout), as Redis does.

use std::collections::HashMap;
use std::net::TcpStream;

/// How many connections are kept (Redis's `MIGRATE_SOCKET_CACHE_ITEMS`).
const MAX_ITEMS: usize = 64;
/// Seconds a connection may stay unused (Redis's `MIGRATE_SOCKET_CACHE_TTL`).
const TTL_S: i64 = 10;

/// One cached connection to a target.
#[derive(Debug)]
pub(crate) struct CachedSocket {
    /// The connection.
    pub(crate) stream: TcpStream,
    /// The database the target has selected on it, or -1 when unknown.
    pub(crate) last_dbid: i64,
    /// When it was last used (Unix seconds).
    pub(crate) last_use_s: i64,
    /// Bytes read past the last reply line (normally none).
    pub(crate) unread: Vec<u8>,
}

/// The cache, by `host:port` as the command named them.
#[derive(Debug, Default)]
pub(crate) struct MigrateSockets {
    sockets: HashMap<Vec<u8>, CachedSocket>,
}

impl MigrateSockets {
    /// The cached connection to `name`, marked used at `now_s`.
    pub(crate) fn get(&mut self, name: &[u8], now_s: i64) -> Option<&mut CachedSocket> {
        let socket = self.sockets.get_mut(name)?;
        socket.last_use_s = now_s;
        Some(socket)
    }

    /// Caches a new connection to `name` (closing one at random when full).
    pub(crate) fn insert(&mut self, name: Vec<u8>, socket: CachedSocket, pick: usize) {
        if self.sockets.len() >= MAX_ITEMS {
            if let Some(victim) = self.sockets.keys().nth(pick % self.sockets.len()).cloned() {
                self.sockets.remove(&victim);
            }
        }
        self.sockets.insert(name, socket);
    }

    /// Closes the connection to `name`, if any.
    pub(crate) fn close(&mut self, name: &[u8]) {
        self.sockets.remove(name);
    }

    /// Closes connections unused for more than 10 seconds (the cron's).
    pub(crate) fn close_idle(&mut self, now_s: i64) {
        if !self.sockets.is_empty() {
            self.sockets.retain(|_, s| now_s - s.last_use_s <= TTL_S);
        }
    }

    /// How many connections are cached (INFO's `migrate_cached_sockets`).
    pub(crate) fn len(&self) -> usize {
        self.sockets.len()
    }
}
