//! Entry points for a host that runs the engine behind a lock and fsyncs
//! outside it (the embedded handle's group commit, docs/embedding.md):
//! the pending batch written with its fsync deferred, the fsync done by
//! the caller on a [`LogSync`], its outcome recorded; and the close
//! sequence of an embedded engine (what the server's SHUTDOWN does).

use std::sync::Arc;
use std::time::Instant;

use crate::clock::now_ms;
use crate::config::AppendFsync;
use crate::persist::io::SyncHandle;
use crate::persist::writer::{error_text, FlushError};

use super::Engine;

/// A batch written by [`Engine::write_log`] whose fsync is left to the
/// caller: call [`LogSync::sync`] (without holding the engine), then
/// [`Engine::finish_log_sync`] with its outcome.
pub struct LogSync {
    /// The file's handle, when an fsync is needed for the batch to be
    /// durable (None: nothing written since the last fsync, the policy is
    /// not `always`, or `no-appendfsync-on-rewrite` holds fsyncs back).
    handle: Option<Arc<dyn SyncHandle>>,
    /// The file's length after the batch.
    len: u64,
}

impl LogSync {
    /// True when [`LogSync::sync`] has an fsync to do.
    pub fn needs_sync(&self) -> bool {
        self.handle.is_some()
    }

    /// Fsyncs the file (nothing when no fsync is needed). Returns how long
    /// it took, or the error as C's `strerror` words it.
    pub fn sync(&self) -> Result<u64, String> {
        let Some(handle) = &self.handle else {
            return Ok(0);
        };
        let started = Instant::now();
        handle.sync_data().map_err(|e| error_text(&e))?;
        Ok(started.elapsed().as_micros() as u64)
    }
}

impl Engine {
    /// Writes the pending batch of logged effects with one write(2), as
    /// [`Engine::flush_log`] does, but leaves the `always` fsync to the
    /// caller: the returned [`LogSync`] fsyncs the file outside any lock
    /// the host holds on the engine. Under `everysec` and `no` the policy
    /// applies as in `flush_log` and nothing is left to do.
    pub fn write_log(&mut self) -> Result<LogSync, FlushError> {
        let always = self.core.config.appendfsync == AppendFsync::Always;
        let suppressed = match self.core.aof.as_mut() {
            Some(aof) if always => {
                let suppressed = aof.fsync_suppressed();
                aof.set_fsync_suppressed(true);
                suppressed
            }
            _ => false,
        };
        let written = self.flush_log();
        let Some(aof) = self.core.aof.as_mut() else {
            return written.map(|()| LogSync {
                handle: None,
                len: 0,
            });
        };
        if always {
            aof.set_fsync_suppressed(suppressed);
        }
        written?;
        let needs = always && !suppressed && aof.fsynced_end() < aof.logged_end();
        Ok(LogSync {
            handle: needs.then(|| aof.sync_handle()),
            len: aof.len(),
        })
    }

    /// Records the outcome of [`LogSync::sync`] (`took_us` on success, the
    /// error otherwise). A failed fsync poisons durability as it does in
    /// the writer: writes are refused (MISCONF) until restart, and the
    /// error is returned for the callers the batch covered.
    pub fn finish_log_sync(
        &mut self,
        sync: &LogSync,
        outcome: Result<u64, String>,
    ) -> Result<(), FlushError> {
        let Some(aof) = self.core.aof.as_mut() else {
            return outcome.map(|_| ()).map_err(FlushError::Poisoned);
        };
        match outcome {
            Ok(took_us) => {
                // Only the file the batch went to: after a rewrite's switch
                // the new file was fsynced whole before it got its name.
                let same_file = sync.handle.as_ref().is_some_and(|h| {
                    std::ptr::addr_eq(Arc::as_ptr(h), Arc::as_ptr(&aof.sync_handle()))
                });
                if same_file {
                    aof.note_synced(sync.len, took_us);
                }
                Ok(())
            }
            Err(why) => {
                aof.poison(why.clone());
                Err(FlushError::Poisoned(why))
            }
        }
    }

    /// Closes an embedded engine as the server's SHUTDOWN does: a running
    /// AOF rewrite and a replication capture are abandoned, the AOF is
    /// written and fsynced, and with save points configured a final
    /// snapshot is saved (else a running BGSAVE is abandoned). Returns the
    /// first failure; the engine stays usable (dropping it releases the
    /// directory lock).
    pub fn shutdown(&mut self) -> Result<(), String> {
        if self.is_loading() {
            return Ok(());
        }
        let mut first = None;
        let core = &mut self.core;
        if core.aof_waiting_for_rewrite() {
            first = Some("the first AOF (CONFIG SET appendonly yes) was not in place".to_string());
        }
        core.rewrite.abort(&mut core.keyspace);
        core.abort_repl_sync();
        if self.core.aof.is_some() {
            if let Err(e) = self.sync() {
                first.get_or_insert(format!("fsync of the AOF failed: {e:?}"));
            }
        }
        let core = &mut self.core;
        if !core.config.save.is_empty() {
            if let Err(cause) = core.save_now(now_ms()) {
                first.get_or_insert(format!("saving the snapshot failed: {cause}"));
            }
        } else {
            core.save.abort(&mut core.keyspace);
        }
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use crate::config::{AppendFsync, Config};
    use crate::engine::Engine;
    use crate::persist::io::{FaultyIo, PowerLoss};
    use crate::reply::Reply;

    fn open(io: &FaultyIo) -> Engine {
        let mut config = Config::in_memory();
        config.appendonly = true;
        config.appendfsync = AppendFsync::Always;
        config.dir = Path::new("/d").to_path_buf();
        Engine::open_with_io(config, Arc::new(io.process())).unwrap()
    }

    /// `write_log` writes without the fsync (a power loss then takes the
    /// batch); `LogSync::sync` makes it durable; with nothing new written
    /// there is nothing to fsync.
    #[test]
    fn write_log_leaves_the_fsync_to_the_caller() {
        for synced in [false, true] {
            let io = FaultyIo::new();
            let mut engine = open(&io);
            engine.set_group_commit(true);
            let mut s = engine.new_session();
            assert_eq!(engine.execute(&mut s, &[b"SET", b"k", b"v"]), Reply::ok());
            assert!(engine.log_pending());
            let sync = engine.write_log().unwrap();
            assert!(!engine.log_pending());
            assert!(sync.needs_sync());
            if synced {
                let outcome = sync.sync();
                engine.finish_log_sync(&sync, outcome).unwrap();
                assert!(!engine.write_log().unwrap().needs_sync());
            }
            io.power_loss(PowerLoss::DropUnsynced);
            drop(engine);
            let mut engine = open(&io);
            let mut s = engine.new_session();
            let expected = if synced {
                Reply::bulk(b"v")
            } else {
                Reply::Null
            };
            assert_eq!(engine.execute(&mut s, &[b"GET", b"k"]), expected);
        }
    }

    /// A failed fsync poisons durability: writes are refused after it.
    #[test]
    fn a_failed_fsync_poisons() {
        let io = FaultyIo::new();
        let mut engine = open(&io);
        engine.set_group_commit(true);
        let mut s = engine.new_session();
        engine.execute(&mut s, &[b"SET", b"k", b"v"]);
        let sync = engine.write_log().unwrap();
        let failed = engine.finish_log_sync(&sync, Err("Input/output error".into()));
        assert!(matches!(
            failed,
            Err(crate::persist::writer::FlushError::Poisoned(_))
        ));
        let Reply::Error(text) = engine.execute(&mut s, &[b"SET", b"k", b"w"]) else {
            panic!("a write was accepted after a failed fsync")
        };
        assert!(text.starts_with("MISCONF"), "{text}");
    }
}
