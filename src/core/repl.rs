//! The engine's replication state as master (docs/replication.md): the
//! ids and offsets INFO replication and ROLE report, the stream being
//! built in this turn (`pending`), the shared buffer and backlog once a
//! replica asked for one, the replicas the server serves, and the
//! replication capture that produces their payload.
//!
//! A master that never had a replica has no backlog: nothing is encoded,
//! its offset does not move (§1). The first SYNC or PSYNC creates the
//! backlog ([`ReplState::create_backlog`]); from then on every unit the
//! AOF receives is also encoded into `pending` with the stream's own
//! SELECT tracking, and the host publishes `pending` after the turn's AOF
//! write succeeded ([`ReplState::publish`]): a replica never holds a write
//! the master's log lacks (§3.2).
//!
//! On a replica the state *mirrors* its master's history (§5.6, chains):
//! `replid` is the master's, the offset is the replica's applied offset,
//! and the stream is the master's own bytes, appended unit by unit as they
//! are applied ([`ReplState::mirror_applied`]); the encoder adds nothing
//! of its own. The same publication step sends them on to sub-replicas.

use std::collections::BTreeMap;

use crate::persist::aof::Effect;
use crate::repl::buffer::{CursorId, ReplBuffer};
use crate::repl::ids::{Position, ReplId};
use crate::repl::stream::StreamEncoder;

/// Where a replica is in its synchronisation (INFO's `state=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplicaState {
    /// Waiting for a capture to start or to end (`wait_bgsave`).
    WaitBgsave,
    /// Receiving its payload (`send_bulk`).
    SendBulk,
    /// Receiving the stream (`online`).
    Online,
}

impl ReplicaState {
    /// The name INFO replication prints.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ReplicaState::WaitBgsave => "wait_bgsave",
            ReplicaState::SendBulk => "send_bulk",
            ReplicaState::Online => "online",
        }
    }
}

/// What a connection said about itself with REPLCONF before its SYNC or
/// PSYNC (kept in the session until then).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplConf {
    /// `listening-port` (0 when not given; Redis keeps any integer).
    pub listening_port: i64,
    /// `ip-address`, when given.
    pub ip_address: Option<String>,
    /// `capa eof`: accepts the `$EOF:` payload form.
    pub capa_eof: bool,
    /// `capa psync2`: understands `+CONTINUE <replid>`.
    pub capa_psync2: bool,
    /// `rdb-only 1`: wants the payload and no stream (`redis-cli --rdb`).
    pub rdb_only: bool,
    /// `rdb-filter-only`: what its payload leaves out.
    pub filter: crate::repl::capture::PayloadFilter,
}

/// How a replica's payload reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Transfer {
    /// Waiting for a capture to start.
    None,
    /// Attached to a disk-form capture still running.
    Waiting,
    /// The bytes of the capture go to its outbox as they are produced,
    /// between `$EOF:<mark>` and the mark.
    Diskless,
    /// The capture's file, `len` bytes, after `$<len>`; the server sends
    /// it from `path` and calls `Core::replica_bulk_sent` at its end.
    Disk {
        /// The temporary payload file.
        path: std::path::PathBuf,
        /// Its length.
        len: u64,
    },
    /// The payload was sent.
    Done,
}

/// A replica as the master sees it.
#[derive(Debug)]
pub(crate) struct Replica {
    /// `<ip>:<listening-port>`, the name in Redis's log lines.
    pub(crate) name: String,
    /// The address INFO shows: `REPLCONF ip-address`, else the peer's.
    pub(crate) ip: String,
    /// What it said with REPLCONF.
    pub(crate) conf: ReplConf,
    /// Where it is in its synchronisation.
    pub(crate) state: ReplicaState,
    /// Its place in the shared buffer: the next stream byte to send it
    /// (from the capture instant on).
    pub(crate) cursor: Option<CursorId>,
    /// Bytes the server writes to it before anything else: the
    /// `+FULLRESYNC` line, keepalive newlines, the payload's framing and,
    /// diskless, the payload.
    pub(crate) outbox: Vec<u8>,
    /// How its payload is sent.
    pub(crate) transfer: Transfer,
    /// Asked with SYNC (no `+FULLRESYNC`, no ACKs expected).
    pub(crate) pre_psync: bool,
    /// After a diskless payload the stream waits for its first ACK.
    pub(crate) waiting_first_ack: bool,
    /// The last offset it acknowledged (`REPLCONF ACK`).
    pub(crate) ack_off: i64,
    /// The last offset it reported fsynced (`FACK`).
    pub(crate) aof_off: i64,
    /// Unix ms of its last ACK (or newline) — `lag` and `repl-timeout`.
    pub(crate) ack_time_ms: i64,
    /// Unix ms since when it waits for a capture.
    pub(crate) waiting_since_ms: i64,
    /// The most stream it could have received: its sync offset, then the
    /// offset of the last byte written to it (ACKs above are lies, D12).
    pub(crate) sent_off: i64,
    /// A lying ACK was logged already.
    pub(crate) lie_logged: bool,
    /// The server should close it (timed out, its capture failed).
    pub(crate) close: bool,
    /// The server closes it once its output is written (`rdb-only`).
    pub(crate) close_after_output: bool,
}

impl Replica {
    /// A replica that asked for a full sync (SYNC or PSYNC) just now.
    pub(crate) fn new(
        name: String,
        ip: String,
        conf: ReplConf,
        pre_psync: bool,
        now_ms: i64,
    ) -> Replica {
        Replica {
            name,
            ip,
            conf,
            state: ReplicaState::WaitBgsave,
            cursor: None,
            outbox: Vec::new(),
            transfer: Transfer::None,
            pre_psync,
            waiting_first_ack: false,
            ack_off: 0,
            aof_off: 0,
            ack_time_ms: now_ms,
            waiting_since_ms: now_ms,
            sent_off: 0,
            lie_logged: false,
            close: false,
            close_after_output: false,
        }
    }

    /// True once a diskless payload started (no keepalive newline may
    /// go between its `$EOF:` line and its bytes).
    pub(crate) fn diskless_started(&self) -> bool {
        self.transfer == Transfer::Diskless
    }

    /// The payload was sent: the replica is online. After a diskless
    /// payload its stream waits for its first ACK (Redis's rule: it reads
    /// the payload from the socket and must not find stream bytes behind
    /// the mark); `rdb-only` replicas are closed once it is written.
    pub(crate) fn payload_done(&mut self, diskless: bool, now_ms: i64) {
        self.state = ReplicaState::Online;
        self.transfer = Transfer::Done;
        self.ack_time_ms = now_ms;
        self.waiting_first_ack = diskless && !self.pre_psync;
        if self.conf.rdb_only {
            self.close_after_output = true;
        }
    }

    /// True when the stream may be written to it.
    pub(crate) fn streams(&self) -> bool {
        self.state == ReplicaState::Online && !self.waiting_first_ack && self.cursor.is_some()
    }
}

/// A client blocked in WAIT or WAITAOF (docs/replication.md §3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Waiter {
    /// The offset just after its last propagated unit (its `woff`).
    pub(crate) woff: i64,
    /// How many replicas it waits for.
    pub(crate) replicas: i64,
    /// WAITAOF: whether the local AOF must have fsynced the client's
    /// writes, and its mark in the AOF's logical offsets.
    pub(crate) aof: Option<(bool, u64)>,
}

/// INFO stats counters of replication.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReplStats {
    pub(crate) sync_full: u64,
    pub(crate) sync_partial_ok: u64,
    pub(crate) sync_partial_err: u64,
    pub(crate) net_repl_output_bytes: u64,
    pub(crate) net_repl_input_bytes: u64,
}

/// Replication ids, offsets, the stream and the replicas.
#[derive(Debug)]
pub(crate) struct ReplState {
    /// This history's id (random at start, as Redis's).
    pub(crate) replid: ReplId,
    /// The previous history's id, 40 `0`s when none.
    pub(crate) replid2: ReplId,
    /// The first offset `replid2` does not cover; -1 when none.
    pub(crate) second_replid_offset: i64,
    /// The offset of the last stream byte produced, while there is no
    /// backlog (then the buffer's).
    offset: i64,
    /// The shared buffer (backlog and replica cursors), once created.
    pub(crate) buffer: Option<ReplBuffer>,
    /// The stream's SELECT tracking.
    pub(crate) encoder: StreamEncoder,
    /// Stream bytes of this turn, published after the AOF write.
    pub(crate) pending: Vec<u8>,
    /// The replicas, by session id.
    pub(crate) replicas: BTreeMap<u64, Replica>,
    /// Counters for INFO stats.
    pub(crate) stats: ReplStats,
    /// Unix ms of the last PING put in the stream.
    pub(crate) last_ping_ms: i64,
    /// Log lines for the host: (warning, text).
    pub(crate) log: Vec<(bool, String)>,
    /// The second of the last keepalive newlines.
    pub(crate) last_newline_s: i64,
    /// The position the snapshot loaded at startup recorded.
    pub(crate) loaded: Option<Position>,
    /// Since when no replica is connected (`repl-backlog-ttl`).
    pub(crate) no_replicas_since_ms: Option<i64>,
    /// Clients blocked in WAIT, by session id.
    pub(crate) waiters: BTreeMap<u64, Waiter>,
    /// A WAIT blocked in this turn: `REPLCONF GETACK *` goes into the
    /// stream with the turn's publication.
    pub(crate) get_ack: bool,
    /// Why the stream stopped for good (the AOF lost durability): SYNC and
    /// PSYNC are refused with this until restart.
    pub(crate) broken: Option<String>,
    /// True on a replica: the stream is the master's bytes as applied
    /// ([`ReplState::mirror_applied`]); nothing is encoded here.
    pub(crate) mirror: bool,
    /// On a replica, the database the master's stream had selected after
    /// the last unit applied (a payload captured here records it, as
    /// Redis's `rdbPopulateSaveInfo` takes its master client's db).
    pub(crate) mirror_db: u32,
}

impl ReplState {
    /// A master that never had a replica: a new id, no secondary one.
    pub(crate) fn new() -> ReplState {
        ReplState {
            replid: ReplId::random(),
            replid2: ReplId::NONE,
            second_replid_offset: -1,
            offset: 0,
            buffer: None,
            encoder: StreamEncoder::new(),
            pending: Vec::new(),
            replicas: BTreeMap::new(),
            stats: ReplStats::default(),
            last_ping_ms: 0,
            log: Vec::new(),
            last_newline_s: 0,
            loaded: None,
            no_replicas_since_ms: None,
            waiters: BTreeMap::new(),
            get_ack: false,
            broken: None,
            mirror: false,
            mirror_db: 0,
        }
    }

    /// `master_repl_offset`: the offset of the last stream byte published.
    pub(crate) fn master_repl_offset(&self) -> i64 {
        self.buffer
            .as_ref()
            .map_or(self.offset, ReplBuffer::master_repl_offset)
    }

    /// The offset just after the last stream byte encoded so far (published
    /// or pending): a session's `woff` after a command that propagated.
    pub(crate) fn stream_end(&self) -> i64 {
        self.master_repl_offset() + self.pending.len() as i64
    }

    /// The position a batch committed now records (§4.1): the stream's
    /// end after this turn's pending bytes, when the turn has any. The
    /// turn's GETACK goes into the stream first, so that it is counted.
    pub(crate) fn position_to_record(&mut self) -> Option<Position> {
        self.buffer.as_ref()?;
        if self.mirror {
            // A replica records its master's position itself
            // (`Core::replica_position_to_record`).
            self.get_ack = false;
            return None;
        }
        if std::mem::take(&mut self.get_ack) {
            self.encoder
                .push_dbless(&[b"REPLCONF", b"GETACK", b"*"], &mut self.pending);
        }
        if self.pending.is_empty() {
            return None;
        }
        Some(Position {
            replid: self.replid,
            offset: self.stream_end(),
            stream_db: self.stream_db(),
        })
    }

    /// The database selected at the end of the stream: the encoder's on a
    /// master, the master's stream's on a replica.
    pub(crate) fn stream_db(&self) -> u32 {
        if self.mirror {
            self.mirror_db
        } else {
            self.encoder.selected_db().unwrap_or(0) as u32
        }
    }

    /// The position of the data in memory now (a snapshot's capture
    /// instant): the stream's end including this turn's pending bytes,
    /// whose writes are applied already. None without a backlog.
    pub(crate) fn position_now(&self) -> Option<Position> {
        self.buffer.as_ref()?;
        Some(Position {
            replid: self.replid,
            offset: self.stream_end(),
            stream_db: self.stream_db(),
        })
    }

    /// A master restarted from files recording `position` (§4.2): the
    /// recorded history becomes the secondary id under a new id, with an
    /// empty backlog at its offset, so a replica caught up with it
    /// continues (`+CONTINUE`) instead of syncing in full.
    pub(crate) fn resume_from(&mut self, position: &Position, backlog_size: usize) -> String {
        self.replid2 = position.replid;
        self.second_replid_offset = position.offset + 1;
        self.offset = position.offset;
        self.encoder.forget_db();
        self.buffer = Some(ReplBuffer::new(position.offset, backlog_size));
        format!(
            "Replication position {}:{} loaded: new replication ID {}, the loaded one kept as the secondary ID up to offset {}",
            position.replid, position.offset, self.replid, self.second_replid_offset
        )
    }

    /// Online replicas that reported `offset` fsynced in their AOF
    /// (`REPLCONF ACK … FACK`, Redis 7.2's `replicationCountAOFAcksByOffset`).
    pub(crate) fn count_aof_acks(&self, offset: i64) -> i64 {
        self.replicas
            .values()
            .filter(|r| r.state == ReplicaState::Online && !r.pre_psync && r.aof_off >= offset)
            .count() as i64
    }

    /// Online replicas that acknowledged `offset` (Redis's
    /// `replicationCountAcksByOffset`).
    pub(crate) fn count_acks(&self, offset: i64) -> i64 {
        self.replicas
            .values()
            .filter(|r| r.state == ReplicaState::Online && !r.pre_psync && r.ack_off >= offset)
            .count() as i64
    }

    /// Online replicas whose last ACK is at most `max_lag_s` seconds old
    /// (INFO's `min_slaves_good_slaves`).
    pub(crate) fn good_replicas(&self, now_ms: i64, max_lag_s: u64) -> u64 {
        self.replicas
            .values()
            .filter(|r| {
                r.state == ReplicaState::Online
                    && (now_ms / 1000 - r.ack_time_ms / 1000) <= max_lag_s as i64
            })
            .count() as u64
    }

    /// True while units are encoded into the stream: a backlog exists and
    /// this is a master (a replica's stream is its master's bytes).
    pub(crate) fn streaming(&self) -> bool {
        self.buffer.is_some() && !self.mirror
    }

    /// True while a backlog exists (the turn's stream bytes, encoded or
    /// mirrored, are published).
    pub(crate) fn has_backlog(&self) -> bool {
        self.buffer.is_some()
    }

    /// Creates the backlog (the first SYNC or PSYNC), as Redis's
    /// `createReplicationBacklog` after `changeReplicationId` and
    /// `clearReplicationId2`: a new history starting after the current
    /// offset. Returns Redis's log line. On a replica the history is its
    /// master's: the ids stay.
    pub(crate) fn create_backlog(&mut self, backlog_size: usize) -> String {
        if self.mirror {
            self.ensure_backlog(backlog_size);
            return format!(
                "Replication backlog created, my replication IDs are '{}' and '{}'",
                self.replid, self.replid2
            );
        }
        self.replid = ReplId::random();
        self.replid2 = ReplId::NONE;
        self.second_replid_offset = -1;
        self.encoder.forget_db();
        self.buffer = Some(ReplBuffer::new(self.offset, backlog_size));
        format!(
            "Replication backlog created, my new replication IDs are '{}' and '{}'",
            self.replid, self.replid2
        )
    }

    /// Frees the backlog: a new id, no secondary one; the offset stays.
    pub(crate) fn free_backlog(&mut self) {
        self.offset = self.master_repl_offset();
        self.buffer = None;
        self.pending.clear();
        self.replid = ReplId::random();
        self.replid2 = ReplId::NONE;
        self.second_replid_offset = -1;
        self.no_replicas_since_ms = None;
    }

    /// A backlog at the current offset when there is none (the ids stay:
    /// Redis's replica-side `createReplicationBacklog`).
    pub(crate) fn ensure_backlog(&mut self, backlog_size: usize) {
        if self.buffer.is_none() {
            self.buffer = Some(ReplBuffer::new(self.offset, backlog_size));
        }
    }

    /// A replica's stream was replaced at `offset` (a full sync from its
    /// master, a restart from a recorded position): an empty backlog at
    /// `offset` under the master's id `replid`, no secondary id. Replicas
    /// still attached must have been closed first (their cursors are
    /// detached, [`ReplState::close_replicas`]).
    pub(crate) fn mirror_reset(&mut self, replid: ReplId, offset: i64, db: u32, size: usize) {
        debug_assert!(self.replicas.values().all(|r| r.cursor.is_none()));
        self.mirror = true;
        self.replid = replid;
        self.replid2 = ReplId::NONE;
        self.second_replid_offset = -1;
        self.offset = offset;
        self.mirror_db = db;
        self.pending.clear();
        self.encoder.forget_db();
        self.buffer = Some(ReplBuffer::new(offset, size));
    }

    /// The master's bytes of one unit just applied (`db` selected after
    /// it) join this turn's stream, verbatim (Redis's
    /// `replicationFeedStreamFromMasterStream`).
    pub(crate) fn mirror_applied(&mut self, bytes: &[u8], db: u32) {
        self.mirror_db = db;
        if self.buffer.is_some() {
            self.pending.extend_from_slice(bytes);
        } else {
            self.offset += bytes.len() as i64;
        }
    }

    /// Redis's `shiftReplicationId` on a replica whose master continued
    /// under `new_id`: ours goes to the secondary id, valid up to the
    /// offset now.
    pub(crate) fn shift_replid(&mut self, new_id: ReplId) {
        self.replid2 = self.replid;
        self.second_replid_offset = self.stream_end() + 1;
        self.replid = new_id;
    }

    /// Closes every replica (Redis's `disconnectSlaves`): each is flagged
    /// for the server to close, its cursor detached now (the backlog may
    /// be replaced before the server closes it).
    pub(crate) fn close_replicas(&mut self) {
        for replica in self.replicas.values_mut() {
            if let (Some(cursor), Some(buffer)) = (replica.cursor.take(), self.buffer.as_mut()) {
                buffer.detach(cursor);
            }
            replica.close = true;
        }
    }

    /// Encodes one unit (the effects of one command execution) into this
    /// turn's stream, when there is a backlog.
    pub(crate) fn log_unit(&mut self, effects: &[Effect]) {
        if self.streaming() {
            self.encoder.push_unit(effects, &mut self.pending);
        }
    }

    /// Encodes one command logged as received in database `db`.
    pub(crate) fn log_command(&mut self, db: usize, argv: &[&[u8]]) {
        if self.streaming() {
            self.encoder.push_command(db, argv, &mut self.pending);
        }
    }

    /// Encodes a command no database applies to (PING, REPLCONF GETACK).
    pub(crate) fn log_dbless(&mut self, argv: &[&[u8]]) {
        if self.streaming() {
            self.encoder.push_dbless(argv, &mut self.pending);
        }
    }

    /// Moves this turn's stream bytes into the shared buffer (the host
    /// calls it once they are in the AOF, §3.2 step 4). Returns true when
    /// bytes were added (the online replicas have something to write).
    pub(crate) fn publish(&mut self) -> bool {
        let Some(buffer) = self.buffer.as_mut() else {
            self.pending.clear();
            return false;
        };
        if std::mem::take(&mut self.get_ack) && !self.mirror {
            self.encoder
                .push_dbless(&[b"REPLCONF", b"GETACK", b"*"], &mut self.pending);
        }
        if self.pending.is_empty() {
            return false;
        }
        buffer.append(&self.pending);
        self.pending.clear();
        true
    }

    /// The AOF lost durability: what this turn encoded is dropped and the
    /// stream stops for good (every replica is to be closed; SYNC and
    /// PSYNC are refused until restart).
    pub(crate) fn break_stream(&mut self, cause: &str) {
        self.pending.clear();
        if self.broken.is_none() {
            self.broken = Some(cause.to_string());
        }
        for replica in self.replicas.values_mut() {
            replica.close = true;
        }
    }

    /// Forgets a replica (its connection closed): its cursor is detached.
    pub(crate) fn remove_replica(&mut self, session: u64) -> Option<Replica> {
        let mut replica = self.replicas.remove(&session)?;
        if let (Some(cursor), Some(buffer)) = (replica.cursor.take(), self.buffer.as_mut()) {
            buffer.detach(cursor);
        }
        Some(replica)
    }

    /// The replicas waiting for a capture to start.
    pub(crate) fn waiting(&self) -> impl Iterator<Item = (&u64, &Replica)> {
        self.replicas
            .iter()
            .filter(|(_, r)| r.state == ReplicaState::WaitBgsave && r.cursor.is_none())
    }
}
