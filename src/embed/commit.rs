//! Writing each turn's effects, and the group commit under `always`.
//!
//! Batches are numbered in the order they are written: `State::batch_seq`
//! is the number of the batch being built; every smaller number was
//! written (or failed). After its command, a caller computes its *target*
//! under the engine lock: the batch being built when the log has pending
//! effects (its own, or others' it may have read), else the last batch
//! written. It returns once `Commit::durable` reaches its target, or a
//! failure covering it was published. While nobody commits, a waiter
//! becomes the leader: under the lock it writes the whole pending batch
//! (`Engine::write_log`: one write(2)); without the lock it fsyncs
//! (`LogSync::sync`) while others keep executing; it records the outcome
//! (`Engine::finish_log_sync`) and publishes it.

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use crate::config::AppendFsync;

use super::{DbError, Shared, State};

/// How long a leader waits at most for the followers the last commit
/// released to add their next command's effects to its batch.
const JOIN_WINDOW: Duration = Duration::from_micros(200);

/// The group commit's state.
#[derive(Default)]
pub(crate) struct Commit {
    /// Every batch numbered up to this is durable.
    durable: u64,
    /// A leader is writing or fsyncing.
    leading: bool,
    /// The last failure and the batch number it covers up to.
    failure: Option<(u64, DbError)>,
    /// Closed: every batch up to the close is settled (durable or not, as
    /// `failure` says).
    closed: bool,
    /// Followers waiting, by the batch they wait for.
    waiting: std::collections::BTreeMap<u64, usize>,
}

/// What a caller must wait for after its command.
pub(crate) enum Durability {
    /// Nothing (its effects are written, as the policy asks).
    Done,
    /// The batch with this number, and everything before it, durable.
    Batch(u64),
}

impl Shared {
    /// After a command (or the upkeep's cron) under the engine lock: under
    /// `everysec` and `no`, writes what it logged (one write(2); the policy
    /// applies), under `always` tells which batch to wait for. Err when the
    /// write failed: the command ran but is not durable.
    pub(crate) fn settle_turn(
        &self,
        state: &mut MutexGuard<'_, State>,
        logged: bool,
    ) -> Result<Durability, DbError> {
        let Some(engine) = state.engine.as_mut() else {
            return Ok(Durability::Done);
        };
        // A caller the last commit released has run its next command.
        let _ = self
            .joiners
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |j| j.checked_sub(1));
        if engine.config().appendfsync == AppendFsync::Always {
            let target = if engine.log_pending() {
                state.batch_seq
            } else {
                state.batch_seq - 1
            };
            return Ok(Durability::Batch(target));
        }
        if logged && engine.log_pending() {
            engine.flush_log().map_err(DbError::from_flush)?;
        }
        Ok(Durability::Done)
    }

    /// Waits until batch `target` is durable, leading the commit when
    /// nobody does. Err when a failure covers it. `caller`: the waiter is
    /// a caller that will likely run another command (not the upkeep).
    pub(crate) fn wait_durable(&self, target: u64, caller: bool) -> Result<(), DbError> {
        let mut commit = self.commit.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if commit.durable >= target {
                return Ok(());
            }
            if let Some((upto, error)) = &commit.failure {
                if *upto >= target {
                    return Err(error.clone());
                }
            }
            if commit.closed {
                return Err(DbError::Closed);
            }
            if !commit.leading {
                commit.leading = true;
                drop(commit);
                let (covered, outcome) = self.lead();
                commit = self.commit.lock().unwrap_or_else(|p| p.into_inner());
                commit.leading = false;
                if !commit.closed {
                    match outcome {
                        Ok(()) => commit.durable = commit.durable.max(covered),
                        Err(e) => commit.failure = Some((covered, e)),
                    }
                }
                // The followers this releases (and this leader's caller)
                // will likely run another command at once: the next leader
                // gives them a moment to join its batch.
                let released: usize = commit.waiting.range(..=covered).map(|(_, n)| n).sum();
                self.joiners
                    .store(released + usize::from(caller), Ordering::SeqCst);
                self.committed.notify_all();
                continue;
            }
            *commit.waiting.entry(target).or_default() += 1;
            commit = self
                .committed
                .wait(commit)
                .unwrap_or_else(|p| p.into_inner());
            if let Some(n) = commit.waiting.get_mut(&target) {
                *n -= 1;
                if *n == 0 {
                    commit.waiting.remove(&target);
                }
            }
        }
    }

    /// The leader's turn: writes the pending batch under the lock, fsyncs
    /// it without, records the outcome. Returns the batch number it covers.
    fn lead(&self) -> (u64, Result<(), DbError>) {
        let deadline = Instant::now() + JOIN_WINDOW;
        while self.joiners.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::yield_now();
        }
        let mut state = self.lock_state();
        let pending = state.engine.as_ref().is_some_and(Engine::log_pending);
        let covered = if pending {
            state.batch_seq += 1;
            state.batch_seq - 1
        } else {
            state.batch_seq - 1
        };
        let Some(engine) = state.engine.as_mut() else {
            // Closed meanwhile: the close settled everything.
            return (covered, Err(DbError::Closed));
        };
        let sync = match engine.write_log() {
            Ok(sync) => sync,
            Err(e) => return (covered, Err(DbError::from_flush(e))),
        };
        drop(state);
        let outcome = sync.sync();
        if !sync.needs_sync() {
            return (covered, Ok(()));
        }
        let mut state = self.lock_state();
        let recorded = match state.engine.as_mut() {
            Some(engine) => engine.finish_log_sync(&sync, outcome),
            None => outcome
                .map(|_| ())
                .map_err(crate::engine::FlushError::Poisoned),
        };
        (covered, recorded.map_err(DbError::from_flush))
    }

    /// The engine closed (its close fsynced everything, or failed with
    /// `failure`): every waiter is settled.
    pub(crate) fn closed(&self, failure: Option<String>) {
        let mut commit = self.commit.lock().unwrap_or_else(|p| p.into_inner());
        commit.closed = true;
        match failure {
            None => commit.durable = u64::MAX,
            Some(message) => {
                commit.failure = Some((
                    u64::MAX,
                    DbError::NotDurable {
                        message,
                        poisoned: true,
                    },
                ))
            }
        }
        self.committed.notify_all();
    }
}

use crate::engine::Engine;
