//! The engine's replication hooks for the server (docs/replication.md
//! §3.2): publishing the turn's stream once the AOF has it, and the log
//! lines replication produced.

use super::Engine;

impl Engine {
    /// Step 4 of a turn (§3.2): moves the stream bytes of the turn into the
    /// shared buffer, unless the AOF still holds a batch it could not
    /// write (the stream waits behind it: a replica never holds a write
    /// the master's log lacks). When the AOF lost durability the stream
    /// stops for good. Returns true when bytes were published.
    pub(crate) fn publish_stream(&mut self) -> bool {
        if !self.core.repl.has_backlog() {
            return false;
        }
        if let Some(cause) = self.log_poisoned() {
            self.core.repl.break_stream(&cause);
            return false;
        }
        if self.log_pending() {
            return false;
        }
        self.core.repl.publish()
    }

    /// Sessions blocked in WAIT whose replicas acknowledged enough: end
    /// their wait with [`Engine::unblock`] (which answers the count).
    pub(crate) fn satisfied_waiters(&self) -> Vec<u64> {
        if self.core.repl.waiters.is_empty() {
            return Vec::new();
        }
        self.core.satisfied_waiters()
    }

    /// True when the turn has stream bytes to commit (a batch recording
    /// the position is written even without data).
    pub(crate) fn stream_pending(&self) -> bool {
        self.core.repl.has_backlog()
            && (!self.core.repl.pending.is_empty() || self.core.repl.get_ack)
    }

    /// Log lines replication produced since the last call: (warning, text).
    pub(crate) fn take_repl_log(&mut self) -> Vec<(bool, String)> {
        std::mem::take(&mut self.core.repl.log)
    }
}
