//! Full synchronisation as master (docs/replication.md §2.4): starting the
//! replication capture for the replicas that wait, feeding its payload to
//! a temporary file (disk form) or to the replicas' outboxes (diskless),
//! and the replication cron (the stream's PING, keepalive newlines,
//! timeouts).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::time::Duration;

use super::repl::{ReplicaState, Transfer, Waiter};
use super::Core;
use crate::persist::saver::hand_over;
use crate::repl::capture::PayloadCapture;
use crate::repl::ids::Position;
use crate::repl::payload::{length_header, EofMark};

/// Chunks queued for the disk writer thread before the capture pauses.
const MAX_QUEUED_CHUNKS: usize = 4;
/// A diskless capture pauses while a replica has this much payload unsent
/// (the slowest replica paces it, like Redis's pipe).
const DISKLESS_MAX_UNSENT: usize = 8 * 1024 * 1024;

/// A message to the disk writer thread.
enum ToWriter {
    Chunk(Vec<u8>),
    Finish,
}

/// The thread writing a disk-form payload to its temporary file.
struct DiskWriter {
    to_writer: SyncSender<ToWriter>,
    result: Receiver<Result<u64, String>>,
    queued: VecDeque<ToWriter>,
    finish_sent: bool,
}

/// The replication capture in progress.
pub(crate) struct ReplSync {
    capture: PayloadCapture,
    /// The diskless form's mark; None for the disk form.
    mark: Option<EofMark>,
    disk: Option<DiskWriter>,
    /// The temporary payload file (disk form).
    path: PathBuf,
    /// The replicas served by this capture (session ids).
    attached: Vec<u64>,
}

/// How many temporary payload files this process made (their names).
static PAYLOAD_FILES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Core {
    /// True while a replication capture runs.
    pub(crate) fn repl_sync_running(&self) -> bool {
        self.repl_sync.is_some()
    }

    /// True while the replication capture must wait: its disk writer has
    /// the most chunks queued, or (diskless) a replica has the most
    /// payload unsent.
    pub(crate) fn repl_sync_waits(&self) -> bool {
        self.repl_sync
            .as_ref()
            .is_some_and(|sync| self.repl_sync_paced(sync))
    }

    fn repl_sync_paced(&self, sync: &ReplSync) -> bool {
        match &sync.disk {
            Some(disk) => disk.queued.len() >= MAX_QUEUED_CHUNKS,
            None => sync.attached.iter().any(|id| {
                self.repl
                    .replicas
                    .get(id)
                    .is_some_and(|r| r.outbox.len() > DISKLESS_MAX_UNSENT)
            }),
        }
    }

    /// Logs a replication line for the host (`warning` or notice).
    pub(crate) fn repl_log(&mut self, warning: bool, line: String) {
        self.repl.log.push((warning, line));
    }

    /// The replication part of cron: the stream's PING every
    /// `repl-ping-replica-period`, a newline each second to replicas
    /// waiting for their payload, and `repl-timeout`.
    pub(crate) fn repl_cron(&mut self, now_ms: i64) {
        self.failover_cron(now_ms);
        if self.repl.replicas.is_empty() {
            // The PING period counts from when replicas appear: Redis
            // pings every `repl-ping-replica-period` cron seconds since its
            // start, never at once for a replica that just attached (its
            // Tcl helper sets the period to an hour and expects the stream
            // to begin with the writes).
            self.repl.last_ping_ms = now_ms;
            self.free_idle_backlog(now_ms);
            return;
        }
        self.repl.no_replicas_since_ms = None;
        if self.repl.last_ping_ms == 0 {
            // Replicas before the first cron of the process.
            self.repl.last_ping_ms = now_ms;
        }
        let period_ms = (self.config.repl.ping_replica_period_s.max(1) as i64) * 1000;
        if now_ms - self.repl.last_ping_ms >= period_ms {
            self.repl.last_ping_ms = now_ms;
            // Redis's shared `ping` object: lower case.
            self.repl.log_dbless(&[b"ping"]);
        }
        let second = now_ms / 1000 != self.repl.last_newline_s;
        self.repl.last_newline_s = now_ms / 1000;
        let timeout_ms = (self.config.repl.timeout_s as i64).saturating_mul(1000);
        let mut lines = Vec::new();
        for replica in self.repl.replicas.values_mut() {
            match replica.state {
                ReplicaState::WaitBgsave if second && !replica.diskless_started() => {
                    replica.outbox.push(b'\n');
                }
                ReplicaState::Online
                    if !replica.pre_psync
                        && !replica.conf.rdb_only
                        && now_ms - replica.ack_time_ms > timeout_ms =>
                {
                    if !replica.close {
                        lines.push(format!(
                            "Disconnecting timedout replica (streaming sync): {}",
                            replica.name
                        ));
                    }
                    replica.close = true;
                }
                _ => {}
            }
        }
        for line in lines {
            self.repl_log(true, line);
        }
    }

    /// `repl-backlog-ttl`: a master without replicas for that long frees
    /// its backlog and starts a new history (Redis's `replicationCron`):
    /// without a backlog the offset stops, so the old id would lie about
    /// later writes. Batches written from now on carry no position, which
    /// ends the recorded one (§4.2).
    fn free_idle_backlog(&mut self, now_ms: i64) {
        if self.repl.buffer.is_none() || self.repl.mirror {
            return;
        }
        let since = *self.repl.no_replicas_since_ms.get_or_insert(now_ms);
        let ttl_s = self.config.repl.backlog_ttl_s;
        if ttl_s == 0 || now_ms - since < (ttl_s as i64).saturating_mul(1000) {
            return;
        }
        self.repl.free_backlog();
        self.repl_log(
            false,
            format!("Replication backlog freed after {ttl_s} seconds without connected replicas."),
        );
    }

    /// Starts or advances the replication capture; called by
    /// `background_step` before BGSAVE and rewrites get their turn.
    /// Returns true when it did something (the caller stops there).
    pub(crate) fn repl_sync_step(&mut self, budget: Duration, now_ms: i64) -> bool {
        if self.repl_sync.is_some() {
            self.advance_repl_sync(budget, now_ms);
            return true;
        }
        if self.repl.waiting().next().is_none() || self.save.in_progress() {
            return false;
        }
        if self.rewrite.in_progress() {
            return false;
        }
        self.maybe_start_repl_sync(now_ms)
    }

    /// Starts a capture for the waiting replicas when one may start now
    /// (§2.4, "Cron starts a capture").
    fn maybe_start_repl_sync(&mut self, now_ms: i64) -> bool {
        // The capture instant must have nothing pending: what cron logged
        // after the turn's commit is written and published first.
        if self.aof.as_ref().is_some_and(|a| a.has_pending()) || !self.repl.pending.is_empty() {
            return false;
        }
        // Replicas asking for different payloads (`rdb-filter-only`) never
        // share a capture: the first waiting one's filter goes now, the
        // others wait for the next capture (Redis's `slave_req` match).
        let Some(filter) = self.repl.waiting().next().map(|(_, r)| r.conf.filter) else {
            return false;
        };
        let group = |r: &super::repl::Replica| r.conf.filter == filter;
        let waiters: Vec<u64> = self
            .repl
            .waiting()
            .filter(|(_, r)| group(r))
            .map(|(id, _)| *id)
            .collect();
        let all_eof = self
            .repl
            .waiting()
            .filter(|(_, r)| group(r))
            .all(|(_, r)| r.conf.capa_eof || r.conf.rdb_only);
        // A filtered payload goes to the sockets even with
        // `repl-diskless-sync no`, so it never takes a payload file's place.
        let diskless = (self.config.repl_diskless_sync || filter.is_filtered()) && all_eof;
        if diskless && self.config.repl_diskless_sync {
            let longest = self
                .repl
                .waiting()
                .filter(|(_, r)| group(r))
                .map(|(_, r)| now_ms - r.waiting_since_ms)
                .max()
                .unwrap_or(0);
            let max = self.config.repl.diskless_sync_max_replicas;
            let delay_ms = (self.config.repl.diskless_sync_delay_s as i64).saturating_mul(1000);
            let enough = max > 0 && waiters.len() as u64 >= max;
            if !enough && longest < delay_ms {
                return false;
            }
        }
        let dir = self.config.dir.clone();
        let n = PAYLOAD_FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("temp-repl-{}-{n}.rdb", std::process::id()));
        let disk = if diskless {
            None
        } else {
            match start_disk_writer(path.clone()) {
                Ok(writer) => Some(writer),
                Err(cause) => {
                    self.fail_waiters(&waiters, &cause);
                    return true;
                }
            }
        };
        let offset = self.repl.master_repl_offset();
        let position = Position {
            replid: self.repl.replid,
            offset,
            stream_db: self.repl.stream_db(),
        };
        // Every stream byte after the instant starts with SELECT.
        self.repl.encoder.forget_db();
        let mark = diskless.then(EofMark::random);
        let replid = self.repl.replid;
        let buffer = self
            .repl
            .buffer
            .as_mut()
            .expect("a replica implies a backlog");
        for id in &waiters {
            let Some(replica) = self.repl.replicas.get_mut(id) else {
                continue;
            };
            if !replica.pre_psync {
                crate::repl::psync::encode_fullresync(&replid, offset, &mut replica.outbox);
            }
            if !replica.conf.rdb_only {
                replica.cursor = Some(buffer.attach_at_end());
            }
            replica.sent_off = offset;
            if let Some(mark) = &mark {
                replica.outbox.extend_from_slice(&mark.header());
                replica.state = ReplicaState::SendBulk;
                replica.transfer = Transfer::Diskless;
            } else {
                replica.transfer = Transfer::Waiting;
            }
        }
        let encoder = self.rdb_encoder();
        let capture = PayloadCapture::start(
            &mut self.keyspace,
            encoder,
            self.config.rdbchecksum,
            &position,
            &self.functions.codes(),
            now_ms,
            filter,
        );
        self.repl_sync = Some(ReplSync {
            capture,
            mark,
            disk,
            path,
            attached: waiters,
        });
        let target = if diskless { "replicas sockets" } else { "disk" };
        self.repl_log(
            false,
            format!("Starting BGSAVE for SYNC with target: {target}"),
        );
        true
    }

    /// Closes replicas whose capture could not start or failed.
    fn fail_waiters(&mut self, waiters: &[u64], cause: &str) {
        for id in waiters {
            if let Some(replica) = self.repl.replicas.get_mut(id) {
                replica.close = true;
            }
        }
        self.repl_log(
            true,
            format!("SYNC failed. BGSAVE child returned an error: {cause}"),
        );
    }

    /// Advances the running capture and hands its chunks on.
    fn advance_repl_sync(&mut self, budget: Duration, now_ms: i64) {
        let Some(mut sync) = self.repl_sync.take() else {
            return;
        };
        let _ = now_ms;
        // Replicas gone since the start.
        sync.attached
            .retain(|id| self.repl.replicas.get(id).is_some_and(|r| !r.close));
        if sync.attached.is_empty() && sync.mark.is_some() {
            sync.capture.abort(&mut self.keyspace);
            self.repl_log(
                true,
                "Diskless rdb transfer, last replica dropped, aborting the capture.".into(),
            );
            return;
        }
        let mut chunks = Vec::new();
        if !self.repl_sync_paced(&sync) && !sync.capture.is_done() {
            sync.capture.step(&mut self.keyspace, budget, &mut chunks);
        }
        match sync.disk.as_mut() {
            None => {
                for chunk in &chunks {
                    for id in &sync.attached {
                        if let Some(replica) = self.repl.replicas.get_mut(id) {
                            replica.outbox.extend_from_slice(chunk);
                        }
                    }
                }
                if sync.capture.is_done() {
                    let mark = sync.mark.take().expect("diskless");
                    let mut lines = Vec::new();
                    for id in &sync.attached {
                        if let Some(replica) = self.repl.replicas.get_mut(id) {
                            replica.outbox.extend_from_slice(mark.as_bytes());
                            replica.payload_done(true, now_ms);
                            lines.push(format!(
                                "Streamed RDB transfer with replica {} succeeded (socket). Waiting for REPLCONF ACK from slave to enable streaming",
                                replica.name
                            ));
                        }
                    }
                    self.repl_log(
                        false,
                        "Background RDB transfer terminated with success".into(),
                    );
                    for line in lines {
                        self.repl_log(false, line);
                    }
                    return;
                }
            }
            Some(disk) => {
                disk.queued.extend(chunks.into_iter().map(ToWriter::Chunk));
                if sync.capture.is_done() && !disk.finish_sent {
                    disk.queued.push_back(ToWriter::Finish);
                    disk.finish_sent = true;
                }
                hand_over(&mut disk.queued, &disk.to_writer);
                match disk.result.try_recv() {
                    Err(TryRecvError::Empty) => {}
                    outcome => {
                        let outcome = outcome
                            .unwrap_or_else(|_| Err("the payload writer thread ended".into()));
                        sync.capture.abort(&mut self.keyspace);
                        match outcome {
                            Ok(len) => {
                                self.repl_log(
                                    false,
                                    "Background saving terminated with success".into(),
                                );
                                for id in &sync.attached {
                                    if let Some(replica) = self.repl.replicas.get_mut(id) {
                                        replica.outbox.extend_from_slice(&length_header(len));
                                        replica.state = ReplicaState::SendBulk;
                                        replica.transfer = Transfer::Disk {
                                            path: sync.path.clone(),
                                            len,
                                        };
                                    }
                                }
                                self.remove_unused_payload(&sync.path);
                            }
                            Err(cause) => {
                                let _ = std::fs::remove_file(&sync.path);
                                let attached = std::mem::take(&mut sync.attached);
                                self.fail_waiters(&attached, &cause);
                            }
                        }
                        return;
                    }
                }
            }
        }
        self.repl_sync = Some(sync);
    }

    /// The server finished sending a replica its disk payload: the replica
    /// is online, its stream follows.
    pub(crate) fn replica_bulk_sent(&mut self, session: u64, now_ms: i64) {
        let Some(replica) = self.repl.replicas.get_mut(&session) else {
            return;
        };
        let Transfer::Disk { path, .. } = std::mem::replace(&mut replica.transfer, Transfer::Done)
        else {
            return;
        };
        replica.payload_done(false, now_ms);
        let line = format!("Synchronization with replica {} succeeded", replica.name);
        self.repl_log(false, line);
        self.remove_unused_payload(&path);
    }

    /// Removes a disk payload no replica still reads.
    pub(crate) fn remove_unused_payload(&mut self, path: &std::path::Path) {
        let used = self
            .repl
            .replicas
            .values()
            .any(|r| matches!(&r.transfer, Transfer::Disk { path: p, .. } if p == path));
        if !used {
            let _ = std::fs::remove_file(path);
        }
    }

    /// WAIT's and WAITAOF's counts for `waiter` now: (local fsync, replicas).
    pub(crate) fn wait_counts(&self, waiter: &Waiter) -> (i64, i64) {
        match waiter.aof {
            None => (0, self.repl.count_acks(waiter.woff)),
            Some((_, mark)) => {
                let local = self.aof.as_ref().is_some_and(|a| a.fsynced_end() >= mark);
                (i64::from(local), self.repl.count_aof_acks(waiter.woff))
            }
        }
    }

    /// WAIT's reply (the count) or WAITAOF's (`[local, replicas]`).
    pub(crate) fn wait_reply(&self, waiter: &Waiter) -> crate::reply::Reply {
        use crate::reply::Reply;
        let (local, replicas) = self.wait_counts(waiter);
        match waiter.aof {
            None => Reply::Int(replicas),
            Some(_) => Reply::Array(vec![Reply::Int(local), Reply::Int(replicas)]),
        }
    }

    /// True when `waiter` has what it waits for.
    pub(crate) fn wait_satisfied(&self, waiter: &Waiter) -> bool {
        let (local, replicas) = self.wait_counts(waiter);
        let local_wanted = waiter.aof.is_some_and(|(local, _)| local);
        replicas >= waiter.replicas && (local == 1 || !local_wanted)
    }

    /// The sessions blocked in WAIT or WAITAOF whose wait is over.
    pub(crate) fn satisfied_waiters(&self) -> Vec<u64> {
        self.repl
            .waiters
            .iter()
            .filter(|(_, w)| self.wait_satisfied(w))
            .map(|(id, _)| *id)
            .collect()
    }

    /// Forgets a replica whose connection closed.
    pub(crate) fn drop_replica(&mut self, session: u64) {
        if let Some(replica) = self.repl.remove_replica(session) {
            if let Transfer::Disk { path, .. } = &replica.transfer {
                self.remove_unused_payload(path);
            }
            self.repl_log(
                false,
                format!("Connection with replica {} lost.", replica.name),
            );
        }
    }

    /// Stops the replication capture (SHUTDOWN, FLUSHALL's abort of
    /// background work): its replicas are closed.
    pub(crate) fn abort_repl_sync(&mut self) {
        if let Some(mut sync) = self.repl_sync.take() {
            sync.capture.abort(&mut self.keyspace);
            for id in &sync.attached {
                if let Some(replica) = self.repl.replicas.get_mut(id) {
                    replica.close = true;
                }
            }
            drop(sync.disk.take());
            let _ = std::fs::remove_file(&sync.path);
        }
    }
}

/// Starts the thread writing a disk payload to `path` (created, not
/// fsynced: a transfer buffer, D9).
fn start_disk_writer(path: PathBuf) -> Result<DiskWriter, String> {
    let (to_writer, chunks) = mpsc::sync_channel::<ToWriter>(MAX_QUEUED_CHUNKS);
    let (result_tx, result) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("hozon-repl-payload".into())
        .spawn(move || {
            let outcome = write_payload(&path, &chunks);
            if outcome.is_err() {
                let _ = std::fs::remove_file(&path);
            }
            let _ = result_tx.send(outcome);
        })
        .map_err(|e| format!("cannot start the payload writer thread: {e}"))?;
    Ok(DiskWriter {
        to_writer,
        result,
        queued: VecDeque::new(),
        finish_sent: false,
    })
}

fn write_payload(path: &std::path::Path, chunks: &Receiver<ToWriter>) -> Result<u64, String> {
    use std::io::Write;
    let mut file =
        std::fs::File::create(path).map_err(|e| format!("creating {}: {}", path.display(), e))?;
    let mut len = 0u64;
    loop {
        match chunks.recv() {
            Ok(ToWriter::Chunk(bytes)) => {
                file.write_all(&bytes)
                    .map_err(|e| format!("writing {}: {}", path.display(), e))?;
                len += bytes.len() as u64;
            }
            Ok(ToWriter::Finish) => return Ok(len),
            Err(_) => return Err("replication payload aborted".into()),
        }
    }
}
