//! [`Session`]: one client's state as the engine sees it.

use super::clients::BlockState;
use crate::types::Blob;

/// One client's state as the engine sees it (the server adds sockets).
#[derive(Debug, Clone)]
pub struct Session {
    /// Unique id (CLIENT ID).
    pub id: u64,
    /// Selected database.
    pub db: usize,
    /// Protocol version: 2 or 3 (HELLO).
    pub resp: u8,
    /// CLIENT SETNAME.
    pub name: Option<Vec<u8>>,
    /// True once AUTH succeeded, or when no password is required.
    pub authenticated: bool,
    /// The ACL user the connection runs as (`default` until AUTH).
    pub user: Vec<u8>,
    /// Unix ms when the session was created.
    pub created_ms: i64,
    /// Set by QUIT / CLIENT KILL: the server closes the connection after
    /// writing pending replies.
    pub close_after_reply: bool,
    /// Name of the last command executed (CLIENT LIST `cmd=`).
    pub last_command: &'static str,
    /// CLIENT REPLY OFF: no replies are sent.
    pub reply_off: bool,
    /// The reply of the command being executed is not sent (CLIENT REPLY
    /// SKIP, for the command after it).
    pub reply_skip: bool,
    /// CLIENT REPLY SKIP ran: skip the reply of the next command.
    pub reply_skip_next: bool,
    /// CLIENT NO-EVICT ON (CLIENT LIST flag `e`).
    pub no_evict: bool,
    /// The wait of a blocked command (BLPOP, XREAD BLOCK, …): while set, the
    /// host sends no reply and reads no further command from the client.
    pub blocked: Option<Box<BlockState>>,
    /// MULTI was called: commands are queued until EXEC or DISCARD.
    pub multi: Option<Box<MultiState>>,
    /// Keys this session WATCHes (db, key).
    pub watched: Vec<(usize, Blob)>,
    /// Channels this session is subscribed to, in subscription order.
    pub channels: Vec<Blob>,
    /// Patterns this session is subscribed to, in subscription order.
    pub patterns: Vec<Blob>,
    /// Shard channels this session is subscribed to (SSUBSCRIBE).
    pub shard_channels: Vec<Blob>,
    /// The replication offset just after this client's last propagated
    /// command (Redis's `woff`): what WAIT waits for.
    pub woff: i64,
    /// The AOF's logical offset just after this client's last logged
    /// command: what WAITAOF's local part waits for.
    pub aof_woff: u64,
    /// The connection is a replica (it sent SYNC or PSYNC): the host
    /// writes it the replication stream instead of replies.
    pub is_replica: bool,
    /// The connection is this replica's master: its commands are applied
    /// without replies, allowed on a read-only replica, and see keys past
    /// their TTL (only its DELs remove them).
    pub is_master: bool,
    /// In MONITOR mode (`core::monitor`).
    pub monitor: bool,
    /// What the connection said with REPLCONF before its SYNC or PSYNC.
    pub(crate) repl_conf: Option<Box<super::repl::ReplConf>>,
}

/// The commands queued by MULTI.
#[derive(Debug, Clone, Default)]
pub struct MultiState {
    /// Queued commands, in order.
    pub commands: Vec<Vec<Vec<u8>>>,
    /// A queued command was rejected: EXEC answers EXECABORT.
    pub failed: bool,
    /// A queued command writes (EXEC is then refused like a write).
    pub has_write: bool,
    /// A queued command may replicate (PUBLISH, EVAL): EXEC waits during
    /// a write pause.
    pub may_replicate: bool,
    /// A queued command lacks Redis's `loading` flag: EXEC is refused
    /// with -LOADING while a dataset loads.
    pub denied_while_loading: bool,
}

impl Session {
    /// A session with the given id, on database 0, RESP2.
    pub fn new(id: u64, authenticated: bool, created_ms: i64) -> Session {
        Session {
            id,
            db: 0,
            resp: 2,
            name: None,
            authenticated,
            user: b"default".to_vec(),
            created_ms,
            close_after_reply: false,
            last_command: "NULL",
            reply_off: false,
            reply_skip: false,
            reply_skip_next: false,
            no_evict: false,
            blocked: None,
            multi: None,
            watched: Vec::new(),
            channels: Vec::new(),
            patterns: Vec::new(),
            shard_channels: Vec::new(),
            woff: 0,
            aof_woff: 0,
            is_replica: false,
            is_master: false,
            monitor: false,
            repl_conf: None,
        }
    }

    /// True while subscribed to a channel or pattern (RESP2's subscribed
    /// mode restricts the commands a client may send).
    pub fn subscribed(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty() || !self.shard_channels.is_empty()
    }

    /// Called by the server after each command: true when that command's
    /// reply must not be sent (CLIENT REPLY OFF/SKIP). Moves a pending
    /// SKIP on to the next command, as Redis's `resetClient` does.
    pub fn reply_suppressed(&mut self) -> bool {
        let suppressed = self.reply_off || self.reply_skip;
        self.reply_skip = std::mem::take(&mut self.reply_skip_next);
        suppressed
    }
}
