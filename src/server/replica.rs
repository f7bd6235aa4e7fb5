//! Replica connections on the master (docs/replication.md §2.4, §3.2–§3.4):
//! what the event loop writes to a client that sent SYNC or PSYNC. In
//! order: its own output (replies written before it became a replica),
//! its outbox in the engine (`+FULLRESYNC`, keepalive newlines, the
//! payload's framing and, diskless, the payload), the disk payload file,
//! then the stream from its cursor in the shared buffer.

use std::io::{self, Read, Write};

use super::log::{self, Level};
use super::{Client, Server};
use crate::core::repl::{ReplState, Transfer};
use crate::engine::now_ms;

/// Bytes of a disk payload read per write.
const BULK_CHUNK: usize = 64 * 1024;

/// A disk payload being sent to one replica.
pub(super) struct BulkSend {
    file: std::fs::File,
    sent: u64,
    len: u64,
}

impl Server {
    /// Publishes the turn's stream (after the AOF write) and queues the
    /// replicas that have something to write.
    pub(super) fn publish_stream(&mut self) {
        if self.engine.publish_stream() {
            self.queue_replicas();
        }
    }

    /// Queues every replica with output, closes those the engine gave up
    /// on or that went over their output limit, and writes replication's
    /// log lines.
    pub(super) fn service_replicas(&mut self) {
        for (warning, line) in self.engine.take_repl_log() {
            let level = if warning {
                Level::Warning
            } else {
                Level::Notice
            };
            log::log(level, &line);
        }
        let satisfied = self.engine.satisfied_waiters();
        let woke = !satisfied.is_empty();
        for id in satisfied {
            self.end_wait(id, false);
        }
        if self.engine.core().repl.replicas.is_empty() {
            if woke {
                self.flush_pending();
            }
            return;
        }
        let limit = self.engine.config().replica_output_limit;
        let now = now_ms();
        let mut close = Vec::new();
        let ReplState {
            replicas, buffer, ..
        } = &mut self.engine.core().repl;
        for (id, replica) in replicas.iter_mut() {
            let Some(&token) = self.session_tokens.get(id) else {
                continue;
            };
            let Some(client) = self.clients.get_mut(&token) else {
                continue;
            };
            if replica.close {
                close.push(token);
                continue;
            }
            // Redis 7.0 counts the stream from the block the replica's
            // cursor is in, plus what it has privately queued.
            let stream = match (&replica.cursor, buffer.as_ref()) {
                (Some(cursor), Some(buffer)) => buffer.output_usage(cursor),
                _ => 0,
            };
            let used = (stream + replica.outbox.len() + client.output_len()) as u64;
            if client.replica_over_limit(&limit, used, now) {
                log::log(
                    Level::Warning,
                    &format!(
                        "Client id={} addr={} scheduled to be closed ASAP for overcoming of output buffer limits.",
                        client.session.id, client.addr
                    ),
                );
                close.push(token);
            }
        }
        for token in close {
            if let Some(client) = self.clients.remove(&token) {
                self.close(token, client);
            }
        }
        // What cron and the capture queued goes now, not a tick later.
        if self.queue_replicas() || woke {
            self.flush_pending();
        }
    }

    /// Adds every replica with something to write to this turn's writes.
    fn queue_replicas(&mut self) -> bool {
        let mut queued = false;
        let repl = &self.engine.core().repl;
        for (id, replica) in &repl.replicas {
            let has_stream = replica.streams()
                && match (&replica.cursor, &repl.buffer) {
                    (Some(cursor), Some(buffer)) => buffer.pending(cursor) > 0,
                    _ => false,
                };
            let has_payload = matches!(replica.transfer, Transfer::Disk { .. });
            if !replica.outbox.is_empty() || has_stream || has_payload || replica.close_after_output
            {
                if let Some(&token) = self.session_tokens.get(id) {
                    self.pending.push(token);
                    queued = true;
                }
            }
        }
        queued
    }

    /// Writes what a replica has to be sent, as far as its socket takes
    /// it; Ok(true) when everything was written.
    pub(super) fn write_replica(&mut self, client: &mut Client) -> io::Result<bool> {
        if !self.write_client(client)? {
            return Ok(false);
        }
        let now = now_ms();
        let id = client.session.id;
        let core = self.engine.core();
        let ReplState {
            replicas,
            buffer,
            stats,
            ..
        } = &mut core.repl;
        let Some(replica) = replicas.get_mut(&id) else {
            return Ok(true);
        };
        let mut written_total = 0u64;
        let result = (|| -> io::Result<bool> {
            // Written from an index and drained once: draining after each
            // write would move a large diskless payload over and over.
            let mut sent = 0;
            let blocked = loop {
                if sent == replica.outbox.len() {
                    break false;
                }
                match write_some(&mut client.stream, &replica.outbox[sent..]) {
                    Ok(None) => break true,
                    Ok(Some(n)) => sent += n,
                    Err(e) => {
                        replica.outbox.drain(..sent);
                        return Err(e);
                    }
                }
            };
            replica.outbox.drain(..sent);
            written_total += sent as u64;
            if blocked {
                return Ok(false);
            }
            if let Transfer::Disk { path, len } = &replica.transfer {
                if client.bulk.is_none() {
                    client.bulk = Some(BulkSend {
                        file: std::fs::File::open(path)?,
                        sent: 0,
                        len: *len,
                    });
                }
                let bulk = client.bulk.as_mut().expect("just set");
                let mut chunk = vec![0u8; BULK_CHUNK];
                while bulk.sent < bulk.len {
                    let want = BULK_CHUNK.min((bulk.len - bulk.sent) as usize);
                    let got = bulk.file.read(&mut chunk[..want])?;
                    if got == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the payload file is shorter than announced",
                        ));
                    }
                    bulk.sent += got as u64;
                    match write_some(&mut client.stream, &chunk[..got])? {
                        None => {
                            client.out.extend_from_slice(&chunk[..got]);
                            return Ok(false);
                        }
                        Some(n) => {
                            written_total += n as u64;
                            if n < got {
                                client.out.extend_from_slice(&chunk[n..got]);
                                return Ok(false);
                            }
                        }
                    }
                }
                return Ok(true);
            }
            if replica.streams() {
                if let (Some(cursor), Some(buffer)) = (&replica.cursor, buffer.as_mut()) {
                    loop {
                        let chunk = buffer.chunk(cursor);
                        if chunk.is_empty() {
                            break;
                        }
                        match write_some(&mut client.stream, chunk)? {
                            None => return Ok(false),
                            Some(n) => {
                                buffer.advance(cursor, n);
                                written_total += n as u64;
                            }
                        }
                    }
                }
            }
            Ok(true)
        })();
        stats.net_repl_output_bytes += written_total;
        let done = result?;
        if done && client.bulk.take().is_some() {
            // The whole file went: the replica is online.
            core.replica_bulk_sent(id, now);
            return self.write_replica(client);
        }
        if done
            && core
                .repl
                .replicas
                .get(&id)
                .is_some_and(|r| r.close_after_output)
        {
            client.closing = true;
        }
        Ok(done)
    }
}

/// One write; Ok(None) when the socket takes nothing now.
fn write_some(stream: &mut impl Write, bytes: &[u8]) -> io::Result<Option<usize>> {
    loop {
        match stream.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => return Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
