//! FAILOVER (Redis 6.2's coordinated failover, as 7.0 does it;
//! docs/scale-out.md): the master pauses writes, waits until a replica
//! (the one named, or any) has acknowledged the whole stream, then
//! becomes a replica of it and asks it with `PSYNC <replid> <offset>
//! FAILOVER` to take over (the replica promotes itself and answers
//! `+CONTINUE`). A timeout aborts, or with FORCE fails over anyway; a
//! refused PSYNC or FAILOVER ABORT makes this server a master again.

use super::pause::{PauseMode, PausePurpose};
use super::Core;

/// Where a failover stands (INFO `master_failover_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Writes paused; waiting for a replica to acknowledge everything.
    WaitForSync,
    /// Following the target, whose answer to `PSYNC … FAILOVER` ends it.
    InProgress,
}

/// A failover in progress.
#[derive(Debug, Clone)]
pub(crate) struct Failover {
    pub(crate) stage: Stage,
    /// The designated replica (`TO host port`), or the one found caught up.
    pub(crate) target: Option<(String, u16)>,
    /// Unix ms after which it times out (`TIMEOUT`).
    pub(crate) end_ms: Option<i64>,
    /// `FORCE`: fail over to the target at the timeout even if behind.
    pub(crate) force: bool,
}

impl Core {
    /// INFO's `master_failover_state`.
    pub(crate) fn failover_state_name(&self) -> &'static str {
        match self.failover.as_ref().map(|f| f.stage) {
            None => "no-failover",
            Some(Stage::WaitForSync) => "waiting-for-sync",
            Some(Stage::InProgress) => "failover-in-progress",
        }
    }

    /// True while this server asks its new master to take over.
    pub(crate) fn failover_in_progress(&self) -> bool {
        self.failover
            .as_ref()
            .is_some_and(|f| f.stage == Stage::InProgress)
    }

    /// Starts a failover (the command checked its arguments): writes are
    /// paused until it ends.
    pub(crate) fn start_failover(&mut self, failover: Failover) {
        self.failover = Some(failover);
        self.pauses.pause(PausePurpose::Failover, PauseMode::Write);
    }

    /// Redis's `clearFailoverState`: the failover is over; writes resume.
    pub(crate) fn clear_failover(&mut self) {
        self.failover = None;
        self.pauses.unpause(PausePurpose::Failover);
    }

    /// Redis's `abortFailover`: logs why, and when this server was already
    /// following the target, makes it a master again.
    pub(crate) fn abort_failover(&mut self, why: &str) {
        let Some(failover) = self.failover.take() else {
            return;
        };
        let line = match &failover.target {
            Some((host, port)) => format!("FAILOVER to {host}:{port} aborted: {why}"),
            None => format!("FAILOVER to any replica aborted: {why}"),
        };
        self.repl_log(false, line);
        if failover.stage == Stage::InProgress {
            if let Some(ids) = self.become_master() {
                self.repl_log(false, ids);
            }
        }
        self.clear_failover();
    }

    /// The replica at `host`:`port` (its announced address and listening
    /// port), if one is connected.
    pub(crate) fn find_replica(&self, host: &str, port: u16) -> Option<u64> {
        self.repl
            .replicas
            .iter()
            .find(|(_, r)| {
                r.ip.eq_ignore_ascii_case(host) && r.conf.listening_port == i64::from(port)
            })
            .map(|(id, _)| *id)
    }

    /// Redis's `updateFailoverStatus`, from cron: times out, or starts
    /// following a replica that acknowledged the whole stream.
    pub(crate) fn failover_cron(&mut self, now_ms: i64) {
        let Some(failover) = self.failover.clone() else {
            return;
        };
        if failover.stage != Stage::WaitForSync {
            return;
        }
        if failover.end_ms.is_some_and(|end| end <= now_ms) {
            match (&failover.target, failover.force) {
                (Some((host, port)), true) => {
                    self.repl_log(
                        false,
                        format!("FAILOVER to {host}:{port} time out exceeded, failing over."),
                    );
                    self.follow_failover_target(host.clone(), *port);
                }
                _ => self.abort_failover("Replica never caught up before timeout"),
            }
            return;
        }
        let end = self.repl.master_repl_offset();
        let caught_up = |r: &super::repl::Replica| r.ack_off == end;
        let target = match &failover.target {
            Some((host, port)) => self
                .find_replica(host, *port)
                .and_then(|id| self.repl.replicas.get(&id))
                .filter(|r| caught_up(r))
                .map(|_| (host.clone(), *port)),
            None => self
                .repl
                .replicas
                .values()
                .find(|r| caught_up(r))
                .map(|r| (r.ip.clone(), r.conf.listening_port as u16)),
        };
        if let Some((host, port)) = target {
            self.repl_log(
                false,
                format!("Failover target {host}:{port} is synced, failing over."),
            );
            self.follow_failover_target(host, port);
        }
    }

    /// The failover's last step: this server follows the target (the link
    /// sends `PSYNC … FAILOVER`).
    fn follow_failover_target(&mut self, host: String, port: u16) {
        if let Some(failover) = self.failover.as_mut() {
            failover.stage = Stage::InProgress;
            failover.target = Some((host.clone(), port));
        }
        self.become_replica(host, port);
    }
}
