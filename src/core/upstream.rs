//! The engine's state as a replica (docs/replication.md §5): which master
//! it follows, where the link stands, and the offsets INFO replication and
//! ROLE report. The server's master link (`server::master_link`) keeps
//! these facts current; REPLICAOF changes the master and bumps the
//! generation, which tells the server to drop its link and start over.

use super::Core;
use crate::repl::ids::{Position, ReplId};

/// A master this server follows.
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    /// The master's host, as REPLICAOF gave it.
    pub(crate) host: String,
    /// The master's port.
    pub(crate) port: u16,
    /// The link's state as ROLE names it: `connect`, `connecting`,
    /// `handshake`, `sync` or `connected`.
    pub(crate) state: &'static str,
    /// Unix ms of the last byte received from the master.
    pub(crate) last_io_ms: i64,
    /// Stream bytes read from the master (`slave_read_repl_offset`).
    pub(crate) read_reploff: i64,
    /// The offset of the last complete unit applied (`slave_repl_offset`).
    pub(crate) reploff: i64,
    /// The master's replication id once a sync told it.
    pub(crate) replid: Option<ReplId>,
    /// The payload being received: (announced length, 0 in the mark
    /// form; bytes received so far; unix ms of the last payload byte).
    pub(crate) transfer: Option<(u64, u64, i64)>,
    /// Unix ms when the link went down; None while it never was up.
    pub(crate) down_since_ms: Option<i64>,
    /// The database the stream had selected (for the cached master).
    pub(crate) stream_db: u32,
    /// The offset the AOF's last `#repl` line recorded (-1: none yet).
    pub(crate) recorded_off: i64,
    /// A full sync's payload loading in the background (INFO).
    pub(crate) loading: Option<super::sync_load::SyncLoad>,
}

impl Upstream {
    /// A master to follow, not connected yet.
    pub(crate) fn new(host: String, port: u16) -> Upstream {
        Upstream {
            host,
            port,
            state: "connect",
            last_io_ms: 0,
            read_reploff: 0,
            reploff: 0,
            replid: None,
            transfer: None,
            down_since_ms: None,
            stream_db: 0,
            recorded_off: -1,
            loading: None,
        }
    }

    /// True while the stream flows (`master_link_status:up`).
    pub(crate) fn link_up(&self) -> bool {
        self.state == "connected"
    }

    /// The position to PSYNC from: the master's id and the last applied
    /// offset, once a sync told the id.
    pub(crate) fn position(&self) -> Option<Position> {
        self.replid.map(|replid| Position {
            replid,
            offset: self.reploff,
            stream_db: self.stream_db,
        })
    }
}

/// Whether this server is a replica, and of whom.
#[derive(Debug, Default)]
pub(crate) struct ReplicaRole {
    /// The master followed; None on a master.
    pub(crate) master: Option<Upstream>,
    /// Bumped by every change of master (REPLICAOF): the server's link of
    /// an older generation is closed.
    pub(crate) generation: u64,
    /// The position to try first after a change of master (our own, when
    /// a master becomes a replica: a promoted former replica of ours lets
    /// us continue).
    pub(crate) cached: Option<Position>,
    /// Set by a change of master: the server closes every blocked client
    /// with Redis's UNBLOCKED error (`disconnectAllBlockedClients`).
    pub(crate) disconnect_blocked: bool,
}

impl ReplicaRole {
    /// True on a replica.
    pub(crate) fn is_replica(&self) -> bool {
        self.master.is_some()
    }

    /// True on a replica whose link is not up.
    pub(crate) fn link_down(&self) -> bool {
        self.master.as_ref().is_some_and(|m| !m.link_up())
    }

    /// Follows `host`:`port` from now on.
    pub(crate) fn follow(&mut self, host: String, port: u16, cached: Option<Position>) {
        self.master = Some(Upstream::new(host, port));
        self.cached = cached;
        self.disconnect_blocked = true;
        self.generation += 1;
    }

    /// Stops following (REPLICAOF NO ONE).
    pub(crate) fn stop(&mut self) -> Option<Upstream> {
        self.generation += 1;
        self.cached = None;
        self.master.take()
    }
}

impl Core {
    /// Follows `host`:`port` (`replicaof`, REPLICAOF): our own position
    /// becomes the one to try first (Redis's
    /// `replicationCacheMasterUsingMyself`). As in Redis 7.0's
    /// `replicationSetMaster`, our replicas and our backlog stay: if the
    /// new master continues our history (`+CONTINUE` with our id) they go
    /// on receiving its stream through us; a new id or a full sync closes
    /// them then (they resync with us). Keys past their TTL stay until
    /// the master deletes them.
    pub(crate) fn become_replica(&mut self, host: String, port: u16) {
        let repl = &mut self.repl;
        let own = Position {
            replid: repl.replid,
            offset: repl.stream_end(),
            stream_db: repl.stream_db(),
        };
        let cached = match &self.replica.master {
            // Already a replica: keep what we applied from the old master.
            Some(m) => m.position(),
            None => Some(own),
        };
        if !repl.mirror {
            // From now on the stream is the master's: what we encoded so
            // far is published at the end of this turn, nothing after.
            repl.mirror = true;
            repl.mirror_db = own.stream_db;
            repl.get_ack = false;
        }
        self.replica.follow(host, port, cached);
        if let Some(master) = self.replica.master.as_mut() {
            if let Some(cached) = cached {
                master.replid = Some(cached.replid);
                master.reploff = cached.offset;
                master.read_reploff = cached.offset;
                master.stream_db = cached.stream_db;
            }
        }
    }

    /// Stops following (REPLICAOF NO ONE), Redis's `replicationUnsetMaster`:
    /// the id we mirrored (the master's) becomes our secondary id, valid up
    /// to the offset applied (`shiftReplicationId`); a new id starts our
    /// own history; the backlog we hold (the master's bytes) stays, so our
    /// replicas and the old master's other replicas continue with us
    /// (`+CONTINUE`); our replicas are closed to learn the new id. Returns
    /// Redis's log line about the ids.
    pub(crate) fn become_master(&mut self) -> Option<String> {
        self.replica.stop()?;
        let backlog_size = self.config.repl.backlog_size as usize;
        // Sub-replicas reconnect and continue under the new id; a capture
        // for one of them would carry the old id.
        self.abort_repl_sync();
        let repl = &mut self.repl;
        repl.close_replicas();
        let offset = repl.stream_end();
        repl.ensure_backlog(backlog_size);
        repl.shift_replid(ReplId::random());
        repl.mirror = false;
        repl.encoder.forget_db();
        Some(format!(
            "Setting secondary replication ID to {}, valid up to offset: {}. New replication ID is {}",
            repl.replid2,
            offset + 1,
            repl.replid
        ))
    }

    /// Before a full sync's payload is loaded (Redis's
    /// `replicationAttachToNewMaster`): our replicas are closed (they
    /// resync with us once we have the new history) and a capture for
    /// them stops (it reads the dataset about to be replaced).
    pub(crate) fn attach_to_new_master(&mut self) {
        self.abort_repl_sync();
        self.repl.close_replicas();
    }

    /// A full sync's payload was loaded: our history is the master's from
    /// `offset` on (Redis's `readSyncBulkPayload`: its replid, its offset,
    /// no secondary id, a new backlog). Without an id (a master that
    /// answered SYNC, not PSYNC) the history gets a new random id, so no
    /// replica of ours continues an older one with us.
    pub(crate) fn mirror_full_sync(&mut self, replid: Option<ReplId>, offset: i64) {
        self.repl.close_replicas();
        let size = self.config.repl.backlog_size as usize;
        let replid = replid.unwrap_or_else(ReplId::random);
        self.repl.mirror_reset(replid, offset, 0, size);
    }

    /// The master answered `+CONTINUE` (Redis's
    /// `slaveTryPartialResynchronization`): a backlog exists from here on;
    /// a new id (`new_replid`, the handshake logged it) moves ours to the
    /// secondary id and closes our replicas so that they learn it (they
    /// continue partially). Our stream's end is the applied offset; should
    /// it not be, the backlog restarts at the applied offset and our
    /// replicas resync.
    pub(crate) fn mirror_continue(&mut self, new_replid: Option<ReplId>) {
        let size = self.config.repl.backlog_size as usize;
        let Some(master) = self.replica.master.as_mut() else {
            return;
        };
        let (reploff, stream_db) = (master.reploff, master.stream_db);
        let repl = &mut self.repl;
        let cached = master.replid.unwrap_or(repl.replid);
        repl.mirror = true;
        if repl.buffer.is_none() || repl.stream_end() != reploff || repl.replid != cached {
            repl.close_replicas();
            repl.mirror_reset(cached, reploff, stream_db, size);
        }
        if let Some(id) = new_replid.filter(|id| *id != repl.replid) {
            repl.shift_replid(id);
            repl.close_replicas();
            master.replid = Some(id);
        }
    }
}

impl Core {
    /// The position a batch committed now records on a replica (the
    /// master's id, the offset of the last complete unit applied, the
    /// stream's database), when it moved since the last one recorded; so
    /// a restarted replica PSYNCs from what its AOF holds (D7).
    pub(crate) fn replica_position_to_record(&mut self) -> Option<Position> {
        let master = self.replica.master.as_mut()?;
        let position = master.position()?;
        if master.recorded_off == master.reploff || master.state != "connected" {
            return None;
        }
        master.recorded_off = master.reploff;
        Some(position)
    }

    /// A replica started from files without a position: no cached master,
    /// the first PSYNC is `PSYNC ? -1`.
    pub(crate) fn forget_cached_master(&mut self) {
        self.replica.cached = None;
        if let Some(master) = self.replica.master.as_mut() {
            master.replid = None;
        }
    }

    /// A replica restarted from files recording `position` (D7): it is the
    /// cached master, the first PSYNC asks to continue from it; our
    /// history is the master's up to there, with an empty backlog at its
    /// offset, so our own replicas caught up with it continue once the
    /// link is up again.
    pub(crate) fn resume_as_replica(&mut self, position: Position) {
        let size = self.config.repl.backlog_size as usize;
        self.repl.close_replicas();
        self.repl
            .mirror_reset(position.replid, position.offset, position.stream_db, size);
        self.replica.cached = Some(position);
        if let Some(master) = self.replica.master.as_mut() {
            master.replid = Some(position.replid);
            master.reploff = position.offset;
            master.read_reploff = position.offset;
            master.stream_db = position.stream_db;
            master.recorded_off = position.offset;
        }
    }
}

/// Redis's refusal of writes on a read-only replica.
pub(crate) const READONLY_ERR: &str = "READONLY You can't write against a read only replica.";

/// Redis's refusal while the link is down and stale data is not served.
const MASTERDOWN_ERR: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

impl Core {
    /// The replica's checks in Redis's `processCommand` for a client other
    /// than the master: READONLY for writes (EXEC of a queue with a write
    /// included) with `replica-read-only yes`, MASTERDOWN for commands
    /// without the `stale` flag while the link is down and
    /// `replica-serve-stale-data no`.
    pub(crate) fn replica_refusal(
        &self,
        writes: bool,
        stale_allowed: bool,
        is_master: bool,
    ) -> Option<&'static str> {
        let master = self.replica.master.as_ref()?;
        if is_master {
            return None;
        }
        if self.config.replica.read_only && writes {
            return Some(READONLY_ERR);
        }
        if !master.link_up() && !self.config.replica.serve_stale_data && !stale_allowed {
            return Some(MASTERDOWN_ERR);
        }
        None
    }

    /// True when a client's read must not see `key` of database `db`: on
    /// a replica, a key past its TTL reads as absent for every client but
    /// the master, and stays (only the master's DEL removes it).
    pub(crate) fn hidden_expired(
        &self,
        is_master: bool,
        db: usize,
        key: &[u8],
        now_ms: i64,
    ) -> bool {
        let held = (self.replica.is_replica() && !is_master) || self.pauses.writes_paused();
        held && self.keyspace.db(db).is_expired(key, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::engine::Engine;
    use crate::reply::Reply;

    fn replica() -> (Engine, crate::command::Session) {
        let mut engine = Engine::open(Config::in_memory()).unwrap();
        engine.core().become_replica("127.0.0.1".into(), 1);
        let session = engine.new_session();
        (engine, session)
    }

    #[test]
    fn writes_are_refused_on_a_read_only_replica_but_not_for_the_master() {
        let (mut engine, mut client) = replica();
        let readonly = Reply::err(super::READONLY_ERR);
        assert_eq!(engine.execute(&mut client, &[b"SET", b"k", b"v"]), readonly);
        assert_eq!(engine.execute(&mut client, &[b"GET", b"k"]), Reply::Null);
        let mut master = engine.new_session();
        master.is_master = true;
        assert_eq!(
            engine.execute(&mut master, &[b"SET", b"k", b"v"]),
            Reply::ok()
        );
        engine.core().config.replica.read_only = false;
        assert_eq!(
            engine.execute(&mut client, &[b"SET", b"k", b"w"]),
            Reply::ok()
        );
    }

    #[test]
    fn masterdown_only_without_stale_data_and_for_commands_without_the_flag() {
        let (mut engine, mut client) = replica();
        assert_eq!(engine.execute(&mut client, &[b"GET", b"k"]), Reply::Null);
        engine.core().config.replica.serve_stale_data = false;
        assert!(matches!(engine.execute(&mut client, &[b"GET", b"k"]),
            Reply::Error(e) if e.starts_with("MASTERDOWN")));
        assert!(!engine.execute(&mut client, &[b"INFO"]).is_error());
        engine.core().replica.master.as_mut().unwrap().state = "connected";
        assert_eq!(engine.execute(&mut client, &[b"GET", b"k"]), Reply::Null);
    }

    #[test]
    fn keys_past_their_ttl_read_as_absent_but_stay_until_the_master_deletes_them() {
        let (mut engine, mut client) = replica();
        let mut master = engine.new_session();
        master.is_master = true;
        let at = (crate::clock::now_ms() - 1000).to_string();
        engine.execute(&mut master, &[b"SET", b"k", b"v", b"PXAT", at.as_bytes()]);
        assert_eq!(engine.execute(&mut client, &[b"GET", b"k"]), Reply::Null);
        assert_eq!(
            engine.execute(&mut client, &[b"EXISTS", b"k"]),
            Reply::Int(0)
        );
        assert_eq!(engine.execute(&mut client, &[b"DBSIZE"]), Reply::Int(1));
        engine.cron_now();
        assert_eq!(engine.execute(&mut client, &[b"DBSIZE"]), Reply::Int(1));
        assert_eq!(
            engine.execute(&mut master, &[b"GET", b"k"]),
            Reply::bulk(&b"v"[..])
        );
        engine.execute(&mut master, &[b"DEL", b"k"]);
        assert_eq!(engine.execute(&mut client, &[b"DBSIZE"]), Reply::Int(0));
    }

    #[test]
    fn promotion_keeps_the_master_id_as_the_secondary_one() {
        let (mut engine, _) = replica();
        let id = crate::repl::ids::ReplId::random();
        let core = engine.core();
        let master = core.replica.master.as_mut().unwrap();
        master.replid = Some(id);
        master.reploff = 1234;
        core.mirror_full_sync(Some(id), 1234);
        let line = core.become_master().unwrap();
        assert!(line.contains("valid up to offset: 1235"), "{line}");
        assert_eq!(core.repl.replid2, id);
        assert_eq!(core.repl.second_replid_offset, 1235);
        assert_ne!(core.repl.replid, id);
        assert_eq!(core.repl.master_repl_offset(), 1234);
        assert!(!core.replica.is_replica());
        assert!(core.become_master().is_none());
    }

    #[test]
    fn a_replica_mirrors_its_masters_history_and_promotion_keeps_the_backlog() {
        let (mut engine, _) = replica();
        let id = crate::repl::ids::ReplId::random();
        let core = engine.core();
        core.mirror_full_sync(Some(id), 100);
        let master = core.replica.master.as_mut().unwrap();
        master.replid = Some(id);
        master.reploff = 100;
        // Units applied: their bytes, verbatim, published after the AOF.
        core.repl.mirror_applied(b"*1\r\n$4\r\nping\r\n", 3);
        // Nothing of our own is encoded on a replica.
        core.repl.log_dbless(&[b"ping"]);
        assert_eq!(core.repl.stream_end(), 114);
        assert!(core.repl.position_to_record().is_none());
        assert!(core.repl.publish());
        assert_eq!(core.repl.master_repl_offset(), 114);
        assert_eq!(core.repl.replid, id);
        assert_eq!(core.repl.stream_db(), 3);
        core.replica.master.as_mut().unwrap().reploff = 114;
        // `+CONTINUE` under a new id: ours shifts to the secondary id.
        let new_id = crate::repl::ids::ReplId::random();
        core.mirror_continue(Some(new_id));
        assert_eq!(core.repl.replid, new_id);
        assert_eq!(core.repl.replid2, id);
        assert_eq!(core.repl.second_replid_offset, 115);
        // Promotion: the next shift, the backlog kept with its bytes.
        core.become_master().unwrap();
        assert_eq!(core.repl.replid2, new_id);
        assert_eq!(core.repl.second_replid_offset, 115);
        let buffer = core.repl.buffer.as_ref().unwrap();
        assert_eq!(buffer.backlog_histlen(), 14);
        assert_eq!(buffer.backlog_first_byte_offset(), 101);
        assert!(core.repl.streaming());
    }
}
