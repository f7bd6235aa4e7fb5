//! The engine's periodic work: background saves and rewrites, active
//! rehashing and expiry, the AOF's timed flushes and fsyncs.

use crate::clock::now_ms;

use super::Engine;

impl Engine {
    /// Advances a running BGSAVE by about `budget` of work (and starts one
    /// when a save point is due). A host with an event loop calls it
    /// between turns; an embedded engine's [`Engine::cron`] calls it too.
    /// Returns a line for the log when a save started or ended.
    pub fn background_step(&mut self, budget: std::time::Duration, now_ms: i64) -> Option<String> {
        if self.core.startup_load.is_some() {
            // Nothing to save or rewrite before the files are loaded.
            return None;
        }
        self.core.background_step(budget, now_ms)
    }

    /// Runs background work (active expiry, AOF fsync scheduling and
    /// retries) if it is due: `hz` times a second.
    pub fn cron(&mut self) {
        let now = now_ms();
        if now - self.core.last_cron_ms >= i64::from(1000 / self.core.config.hz.max(1)) {
            self.cron_at(now);
        }
    }

    /// Runs background work now, whether due or not.
    pub fn cron_now(&mut self) {
        self.cron_at(now_ms());
    }

    pub(super) fn cron_at(&mut self, now: i64) {
        self.core.last_cron_ms = now;
        self.core.refresh_access_clock(now);
        if self.core.startup_load.is_some() {
            // No data, no AOF and no replication before the files are
            // loaded (Redis runs only `whileBlockedCron` meanwhile).
            return;
        }
        if !self.group_commit {
            // An embedded engine has no event loop to drive a BGSAVE (or
            // start one for a save point): cron does, a slice at a time.
            let _ = self.background_step(std::time::Duration::from_millis(5), now);
        }
        // DEBUG PAUSE-CRON stops the periodic work, except what durability
        // needs (the AOF's flushes and fsyncs below).
        let paused = self.core.debug.pause_cron;
        // Active rehashing: finish resizes that writes alone would leave
        // half done (at most 1 ms per database and cycle).
        for db in 0..if paused {
            0
        } else {
            self.core.keyspace.db_count()
        } {
            self.core
                .keyspace
                .db_mut(db)
                .rehash_for(std::time::Duration::from_millis(1));
        }
        let before = self.core.effects.len();
        if !self.core.expiry_held() && self.core.debug.active_expire && !paused {
            // A replica's keys expire by its master's DELs only; nothing
            // expires while writes are paused.
            let started = std::time::Instant::now();
            self.core.active_expire_cycle(now);
            let ms = started.elapsed().as_millis() as u64;
            let threshold = self.core.config.latency_monitor_threshold;
            let monitor = &mut self.core.observe.latency;
            monitor.add_if_needed(threshold, "expire-cycle", ms, now / 1000);
        } else if self.core.replica.is_replica()
            && !self.core.pauses.writes_paused()
            && self.core.debug.active_expire
            && !paused
        {
            // Keys given a TTL by a writable replica's own clients: its
            // master will send no DEL for them.
            self.core.expire_replica_keys(now);
        }
        // Each expired key is its own unit (no MULTI wrapping).
        for effect in &self.core.effects[before..] {
            self.core.repl.log_unit(std::slice::from_ref(effect));
        }
        if !paused {
            self.core.repl_cron(now);
            self.core.migrate_sockets.close_idle(now / 1000);
        }
        if let Some(aof) = self.core.aof.as_mut() {
            for effect in self.core.effects.drain(before..) {
                aof.push_unit(std::slice::from_ref(&effect));
            }
            if !self.group_commit && aof.has_pending() {
                // A failure is kept for retry and reported by the next write.
                let _ = aof.flush(now);
            }
            aof.cron(now);
        } else if !self.capture_effects {
            self.core.effects.clear();
        }
        crate::command::observe::cron(&mut self.core, now);
    }
}
