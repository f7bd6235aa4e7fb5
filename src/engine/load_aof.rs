//! DEBUG LOADAOF: the dataset thrown away and read back from the AOF, as
//! Redis's test suite uses it ("the AOF holds what memory holds").
//!
//! The command only asks for it (`Core::debug.load_aof`); the engine does
//! it after the command (or the EXEC that queued it), because reading the
//! AOF replays commands through a second engine. The pending batch is
//! written and fsynced first, so the file holds everything executed (with
//! `appendonly no`, the file is the last BGREWRITEAOF's, as in Redis). The
//! file is replayed into a scratch engine; only a complete load replaces
//! the dataset: a damaged or torn file is an error that leaves memory as
//! it was (Redis exits in that case). Nothing is logged or propagated: the
//! data came from the log.

use std::sync::Arc;

use super::Engine;
use crate::clock::now_ms;
use crate::command::Host;
use crate::config::LogLevel;
use crate::keyspace::Keyspace;
use crate::reply::Reply;

impl Engine {
    /// Runs a DEBUG LOADAOF the command that just ran asked for, if any:
    /// `reply` when it succeeded, else the error that says why.
    pub(super) fn finish_debug_load_aof(&mut self, reply: Reply, host: &mut dyn Host) -> Reply {
        if !std::mem::take(&mut self.core.debug.load_aof) {
            return reply;
        }
        match self.load_aof_now() {
            Ok(()) => {
                host.log(
                    LogLevel::Warning,
                    "Append Only File loaded by DEBUG LOADAOF",
                );
                reply
            }
            Err(why) => Reply::error(format!("ERR DEBUG LOADAOF failed: {why}")),
        }
    }

    fn load_aof_now(&mut self) -> Result<(), String> {
        if self.core.config.dir.as_os_str().is_empty() {
            return Err("there is no data directory (dir is empty)".into());
        }
        // With the AOF off, the file is the last BGREWRITEAOF's, as Redis
        // loads the last rewrite's files then.
        if self.core.aof.is_some() {
            self.sync()
                .map_err(|e| format!("writing the AOF before loading it: {e:?}"))?;
        }
        let io = Arc::clone(&self.core.io);
        let path = self.core.config.dir.join(&self.core.config.appendfilename);
        let data = io
            .map(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let mut scratch = Engine::bare(self.core.config.clone(), Arc::clone(&io));
        let report = scratch
            .load_aof_image(&data, &path, false)
            .map_err(|e| e.to_string())?;
        drop(data);
        if let Some(torn) = report.torn {
            return Err(format!(
                "{} ends with a torn write at offset {} ({})",
                path.display(),
                torn.valid_len,
                torn.reason
            ));
        }
        let now = now_ms();
        let loaded = std::mem::replace(&mut scratch.core.keyspace, Keyspace::new(1));
        self.core.replace_keyspace(loaded, now);
        std::mem::swap(&mut self.core.functions, &mut scratch.core.functions);
        std::mem::swap(
            &mut self.core.function_engine,
            &mut scratch.core.function_engine,
        );
        self.core.dirty = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::engine::Engine;
    use crate::reply::Reply;
    use crate::types::{Blob, Value};

    fn run(engine: &mut Engine, session: &mut crate::command::Session, line: &str) -> Reply {
        let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        engine.execute(session, &argv)
    }

    /// The dataset after DEBUG LOADAOF is the AOF's: a key only in memory
    /// (never logged) is gone, logged keys keep their values and TTLs,
    /// including a write of the same turn still in the pending batch and
    /// a library.
    #[test]
    fn loadaof_replaces_memory_with_what_the_aof_holds() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::in_memory();
        config.appendonly = true;
        config.dir = dir.path().to_path_buf();
        config.enable_debug_command = crate::config::PROTECTED_YES;
        let mut engine = Engine::open(config).unwrap();
        let mut s = engine.new_session();
        for line in [
            "SET a 1 EX 1000",
            "SET a 2 KEEPTTL",
            "RPUSH l x y",
            "SELECT 3",
            "SET b 3",
        ] {
            assert!(
                !matches!(run(&mut engine, &mut s, line), Reply::Error(_)),
                "{line}"
            );
        }
        // Not through a command: memory differs from the log.
        engine
            .core
            .keyspace
            .db_mut(0)
            .set(b"ghost", Value::Str(Blob::new(b"boo")), false);
        assert_eq!(engine.core.keyspace.db(0).len(), 3);
        assert_eq!(run(&mut engine, &mut s, "DEBUG LOADAOF"), Reply::ok());
        assert_eq!(engine.core.keyspace.db(0).len(), 2, "the ghost is gone");
        run(&mut engine, &mut s, "SELECT 0");
        assert_eq!(
            run(&mut engine, &mut s, "GET a"),
            Reply::Bulk(b"2".to_vec())
        );
        match run(&mut engine, &mut s, "TTL a") {
            Reply::Int(ttl) => assert!((990..=1000).contains(&ttl), "TTL {ttl}"),
            other => panic!("TTL: {other:?}"),
        }
        assert_eq!(run(&mut engine, &mut s, "LLEN l"), Reply::Int(2));
        run(&mut engine, &mut s, "SELECT 3");
        assert_eq!(
            run(&mut engine, &mut s, "GET b"),
            Reply::Bulk(b"3".to_vec())
        );
    }

    /// Without a data directory there is nothing to load: an error, and the
    /// data stays. With `appendonly no`, the file is the last
    /// BGREWRITEAOF's; none yet is an error that keeps the data.
    #[test]
    fn loadaof_without_an_aof_file_is_an_error_that_keeps_the_data() {
        let mut config = Config::in_memory();
        config.enable_debug_command = crate::config::PROTECTED_YES;
        let mut engine = Engine::open(config.clone()).unwrap();
        let mut s = engine.new_session();
        run(&mut engine, &mut s, "SET a 1");
        match run(&mut engine, &mut s, "DEBUG LOADAOF") {
            Reply::Error(e) => assert!(e.contains("no data directory"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            run(&mut engine, &mut s, "GET a"),
            Reply::Bulk(b"1".to_vec())
        );

        let dir = tempfile::tempdir().unwrap();
        config.dir = dir.path().to_path_buf();
        let mut engine = Engine::open(config).unwrap();
        let mut s = engine.new_session();
        run(&mut engine, &mut s, "SET a 1");
        match run(&mut engine, &mut s, "DEBUG LOADAOF") {
            Reply::Error(e) => assert!(e.contains("appendonly.aof"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            run(&mut engine, &mut s, "GET a"),
            Reply::Bulk(b"1".to_vec())
        );
        // The rewrite's file is what LOADAOF reads.
        run(&mut engine, &mut s, "BGREWRITEAOF");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while engine.rewrite_in_progress() {
            assert!(
                std::time::Instant::now() < deadline,
                "the rewrite did not end"
            );
            engine.cron();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        run(&mut engine, &mut s, "SET b 2");
        assert_eq!(run(&mut engine, &mut s, "DEBUG LOADAOF"), Reply::ok());
        assert_eq!(
            run(&mut engine, &mut s, "GET a"),
            Reply::Bulk(b"1".to_vec())
        );
        assert_eq!(
            run(&mut engine, &mut s, "GET b"),
            Reply::Null,
            "b came after"
        );
    }
}
