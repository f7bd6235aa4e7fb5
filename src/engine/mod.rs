//! [`Engine`]: the keyspace and its commands, executed one at a time.
//!
//! # Threading contract
//!
//! An `Engine` is `Send` but is used through `&mut self`: commands execute
//! one at a time, in the order the caller submits them, exactly as Redis's
//! single command thread does. A multi-threaded host shares it behind a
//! `Mutex`. The engine starts no threads of its own; background work
//! (active expiry) runs in [`Engine::cron`], which the server calls `hz`
//! times a second and which [`Engine::execute`] also runs opportunistically
//! when it is due, so an embedded engine expires keys without a timer.

//!
//! The engine is the layer above the commands (ARCHITECTURE.md, "Layers"):
//! `Core` (the state commands see, crate-private) lives in `core`; this module
//! owns it and adds opening and recovery (`open.rs`), dispatch, MULTI
//! queueing and blocked clients (`dispatch.rs`), and the periodic work
//! (`cron.rs`).

mod commit;
mod cron;
mod dispatch;
mod evict;
mod load_aof;
mod open;
pub use commit::LogSync;
pub use open::{LoadedFiles, StartupLoad};
mod payload_feed;
mod repl;
mod replica;
mod replica_load;

pub(crate) use payload_feed::{PayloadFeed, StreamedPayload, UNKNOWN_LENGTH_WINDOW};
pub(crate) use replica_load::{PayloadLoad, PayloadSource};

use crate::command::{Effect, Session};
use crate::config::Config;
use crate::keyspace::Keyspace;
use crate::persist::writer::AofWriter;
use crate::reply::Reply;

pub use crate::clock::now_ms;
pub use crate::command::ctx::{BusyAction, BusyScript, Connection, Host, MemoryUse, NullHost};
pub(crate) use crate::core::Core;
pub use crate::core::{
    clients::{BlockKind, BlockRequest, BlockState, Message},
    MultiState,
};
pub use crate::persist::writer::{AofStatus, FlushError};

/// The error prefix an embedded engine's write gets when it was applied in
/// memory but its logged effect could not be made durable (see
/// [`Engine::execute`]). MISCONF, in contrast, always means "refused, not
/// applied".
pub const NOT_DURABLE: &str = "NOTDURABLE";

/// The reply a write gets when it was applied but its logged effect could
/// not be written (embedded engine: each `execute` writes its own batch).
fn not_durable_reply(e: FlushError) -> Reply {
    Reply::error(match e {
        FlushError::Write(cause) => format!(
            "{NOT_DURABLE} applied in memory, but writing it to the AOF failed ({cause}); it is kept \
             and written by a later retry (cron): do not repeat the command"
        ),
        FlushError::Poisoned(cause) => format!(
            "{NOT_DURABLE} applied in memory, but the AOF's fsync failed ({cause}): it may or may \
             not survive a restart, and writes are refused until then"
        ),
    })
}

/// An in-process keyspace engine. `Send`, so a host can move it to the
/// thread that runs it or share it behind a `Mutex` (checked at compile time).
pub struct Engine {
    core: Core,
    /// When true (the server), logged effects wait for [`Engine::flush_log`]
    /// at the end of the event-loop turn; otherwise each `execute` writes
    /// its own batch before returning.
    group_commit: bool,
    /// Log lines for the host to print (what loading found).
    notices: Vec<String>,
    /// Keep logged effects for [`Engine::take_effects`] when there is no
    /// AOF to consume them (tests, embedders that ship effects elsewhere).
    capture_effects: bool,
    /// Where a startup load reports its progress (the engine a
    /// [`StartupLoad`] reads the files into).
    load_counters: Option<std::sync::Arc<crate::core::sync_load::LoadCounters>>,
}
impl Engine {
    /// Log lines describing what opening found (for the host to print).
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Makes logged effects wait for [`Engine::flush_log`] (the server's
    /// group commit) instead of being written by each `execute`.
    pub fn set_group_commit(&mut self, on: bool) {
        self.group_commit = on;
    }

    /// Writes the pending batch of logged effects with one write(2) and
    /// applies the fsync policy. Replies to the commands of the batch may
    /// be released only after this returns Ok.
    pub fn flush_log(&mut self) -> Result<(), FlushError> {
        // While replicating, every batch records the stream position after
        // it, and a turn with stream bytes only writes the position alone.
        let position = self
            .core
            .repl
            .position_to_record()
            .or_else(|| self.core.replica_position_to_record());
        match self.core.aof.as_mut() {
            Some(aof) if aof.has_pending() || position.is_some() => {
                aof.flush_at(now_ms(), position.as_ref())
            }
            _ => Ok(()),
        }
    }

    /// Bytes of logged effects waiting in the current batch (a command
    /// that grew it has a reply that must wait for the batch).
    pub fn log_batch_bytes(&self) -> usize {
        self.core.aof.as_ref().map_or(0, AofWriter::batch_bytes)
    }

    /// A counter that grows whenever a command's effects are logged: a
    /// command whose execution grew it has a reply that must wait for its
    /// batch. (The batch's size cannot tell: a command that only flushes,
    /// like BGREWRITEAOF, shrinks it, or moves it aside when the write
    /// fails.)
    pub fn log_appended(&self) -> u64 {
        self.core.aof.as_ref().map_or(0, AofWriter::logged_count)
    }

    /// Why the AOF lost durability (an fsync failed), if it did: nothing
    /// logged but not yet acknowledged may be acknowledged any more.
    pub fn log_poisoned(&self) -> Option<String> {
        self.core
            .aof
            .as_ref()
            .and_then(|a| a.poisoned().map(str::to_string))
    }

    /// True when logged effects wait to be written.
    pub fn log_pending(&self) -> bool {
        self.core.aof.as_ref().is_some_and(AofWriter::has_pending)
    }

    /// Waits until everything logged so far is on stable storage (fsync),
    /// whatever the policy.
    pub fn sync(&mut self) -> Result<(), FlushError> {
        self.flush_log()?;
        match self.core.aof.as_mut() {
            Some(aof) => aof.sync_now(),
            None => Ok(()),
        }
    }

    /// A new client session (id, database 0, RESP2).
    pub fn new_session(&mut self) -> Session {
        self.core.new_session()
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.core.config
    }

    /// The engine state, for the server in this crate. It is not public:
    /// a change made through it would bypass the AOF (no logged effect).
    /// Embedders read through the accessors below and change data only
    /// with [`Engine::execute`].
    #[cfg(feature = "server")]
    pub(crate) fn core(&mut self) -> &mut Core {
        &mut self.core
    }

    /// The data, read-only (a write goes through [`Engine::execute`], so
    /// that it is logged).
    ///
    /// ```
    /// use hozon::{Config, Engine};
    ///
    /// let mut engine = Engine::open(Config::in_memory()).unwrap();
    /// let mut session = engine.new_session();
    /// engine.execute(&mut session, &[b"SET", b"k", b"v"]);
    /// assert_eq!(engine.keyspace().db(0).len(), 1);
    /// ```
    ///
    /// An embedder cannot reach the keyspace mutably:
    ///
    /// ```compile_fail,E0596
    /// use hozon::{Config, Engine};
    ///
    /// let mut engine = Engine::open(Config::in_memory()).unwrap();
    /// engine.keyspace().db_mut(0).clear(); // `keyspace()` is a shared borrow
    /// ```
    ///
    /// nor through the engine's state, which is crate-private (E0624; a
    /// build without the `server` feature has no `core` at all):
    ///
    /// ```compile_fail
    /// use hozon::{Config, Engine};
    ///
    /// let mut engine = Engine::open(Config::in_memory()).unwrap();
    /// engine.core().keyspace.db_mut(0).clear(); // `core` is private
    /// ```
    pub fn keyspace(&self) -> &Keyspace {
        &self.core.keyspace
    }

    /// INFO persistence figures of the AOF, when it is enabled.
    pub fn aof_status(&self) -> Option<AofStatus> {
        self.core.aof_status()
    }

    /// True while a BGSAVE or an AOF rewrite runs (the host should call
    /// [`Engine::background_step`] without sleeping between turns).
    pub fn background_busy(&self) -> bool {
        self.core.background_busy()
    }

    /// True while a BGSAVE runs.
    pub fn save_in_progress(&self) -> bool {
        self.core.save.in_progress()
    }

    /// True while an AOF rewrite runs.
    pub fn rewrite_in_progress(&self) -> bool {
        self.core.rewrite.in_progress()
    }

    /// Whether the last AOF rewrite succeeded (INFO's
    /// `aof_last_bgrewrite_status`).
    pub fn rewrite_last_ok(&self) -> bool {
        self.core.rewrite.last_ok
    }

    /// AOF rewrites that failed in a row (INFO's
    /// `aof_rewrites_consecutive_failures`).
    pub fn rewrite_consecutive_failures(&self) -> u32 {
        self.core.rewrite.consecutive_failures
    }

    /// Whether effects are kept for [`Engine::take_effects`] when no AOF
    /// consumes them (without it they are dropped after each command).
    pub fn set_capture_effects(&mut self, on: bool) {
        self.capture_effects = on;
        if !on {
            self.core.effects.clear();
        }
    }

    /// Takes the effects logged since the last call, in order (only those
    /// not consumed by the AOF, and only while capturing).
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.core.effects)
    }
}

/// Closing an engine makes what it logged durable whatever the policy (as
/// Redis fsyncs its AOF at shutdown): under `everysec` or `no` the last
/// writes of an embedded engine would otherwise wait for an fsync that no
/// later command or cron call requests.
impl Drop for Engine {
    fn drop(&mut self) {
        if self.core.aof.is_some() && !self.core.loading {
            let _ = self.sync();
        }
    }
}

// Compile-time check of the threading contract: an engine may move
// between threads.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<Engine>();
};
