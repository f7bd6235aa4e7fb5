//! Client pauses (Redis 7.0's `pauseClients`): while writes are paused,
//! commands that write or may replicate wait (the server postpones the
//! client, its input kept) and no key expires, so the replication offset
//! stays where it is; in ALL mode every command of every client but a
//! replica waits. The purposes are CLIENT PAUSE (with a timeout) and a
//! shutdown waiting for its replicas (docs/replication.md §3.8); each
//! purpose pauses and unpauses independently, and the strictest active
//! pause applies.

use super::Core;

/// Why clients are paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PausePurpose {
    /// A shutdown waits for its replicas to acknowledge the whole stream.
    Shutdown,
    /// CLIENT PAUSE (until its timeout or CLIENT UNPAUSE).
    Client,
    /// FAILOVER, until the failover ends.
    Failover,
}

/// What a pause holds back (ordered: the later holds back more).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PauseMode {
    /// Commands that write or may replicate (`CLIENT_PAUSE_WRITE`).
    Write,
    /// Every command of every client but replicas (`CLIENT_PAUSE_ALL`).
    All,
}

/// One purpose's pause: its mode and its end (Unix ms; None: until
/// unpaused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pause {
    mode: PauseMode,
    end_ms: Option<i64>,
}

/// The active pauses, one per purpose.
#[derive(Debug, Default)]
pub(crate) struct Pauses {
    shutdown: Option<Pause>,
    client: Option<Pause>,
    failover: Option<Pause>,
    /// Clients the server holds for a pause or a shutdown (counted in
    /// INFO `blocked_clients`, as Redis counts them).
    pub(crate) waiting_clients: usize,
}

impl Pauses {
    fn slot(&mut self, purpose: PausePurpose) -> &mut Option<Pause> {
        match purpose {
            PausePurpose::Shutdown => &mut self.shutdown,
            PausePurpose::Client => &mut self.client,
            PausePurpose::Failover => &mut self.failover,
        }
    }

    /// Pauses clients for `purpose` until unpaused (replacing that
    /// purpose's pause).
    pub(crate) fn pause(&mut self, purpose: PausePurpose, mode: PauseMode) {
        *self.slot(purpose) = Some(Pause { mode, end_ms: None });
    }

    /// Pauses clients for `purpose` until `end_ms`, as Redis's
    /// `pauseClients` does: a pause of that purpose already active keeps
    /// the stricter mode and the later end.
    pub(crate) fn pause_until(
        &mut self,
        purpose: PausePurpose,
        mode: PauseMode,
        end_ms: i64,
        now_ms: i64,
    ) {
        let slot = self.slot(purpose);
        let active = slot.filter(|p| p.end_ms.is_none_or(|end| end >= now_ms));
        *slot = Some(match active {
            None => Pause {
                mode,
                end_ms: Some(end_ms),
            },
            Some(p) => Pause {
                mode: p.mode.max(mode),
                end_ms: p.end_ms.map(|end| end.max(end_ms)),
            },
        });
    }

    /// Ends `purpose`'s pause; the other purposes' stay.
    pub(crate) fn unpause(&mut self, purpose: PausePurpose) {
        *self.slot(purpose) = None;
    }

    /// The strictest pause in force at `now_ms`, if any (a pause whose
    /// end has passed is over; Redis ends it when its end is before now).
    pub(crate) fn mode_at(&self, now_ms: i64) -> Option<PauseMode> {
        [self.shutdown, self.client, self.failover]
            .into_iter()
            .flatten()
            .filter(|p| p.end_ms.is_none_or(|end| end >= now_ms))
            .map(|p| p.mode)
            .max()
    }

    /// The strictest pause in force now.
    pub(crate) fn mode(&self) -> Option<PauseMode> {
        if self.shutdown.is_none() && self.client.is_none() && self.failover.is_none() {
            return None;
        }
        self.mode_at(crate::clock::now_ms())
    }

    /// True while some pause holds writes back (every pause does).
    pub(crate) fn writes_paused(&self) -> bool {
        self.mode().is_some()
    }
}

impl Core {
    /// True while keys must not expire here: on a replica (its master's
    /// DELs remove them) and while writes are paused (an expiry would move
    /// the replication offset). Such keys read as absent meanwhile.
    pub(crate) fn expiry_held(&self) -> bool {
        self.replica.is_replica() || self.pauses.writes_paused()
    }
}

#[cfg(test)]
mod tests {
    use super::{PauseMode, PausePurpose};
    use crate::config::Config;
    use crate::engine::Engine;

    #[test]
    fn client_pauses_merge_as_redis_pause_clients_does() {
        use super::Pauses;
        let mut p = Pauses::default();
        assert_eq!(p.mode_at(1000), None);
        p.pause_until(PausePurpose::Client, PauseMode::All, 2000, 1000);
        // A second pause keeps the stricter mode and the later end.
        p.pause_until(PausePurpose::Client, PauseMode::Write, 5000, 1500);
        assert_eq!(p.mode_at(1500), Some(PauseMode::All));
        assert_eq!(p.mode_at(5000), Some(PauseMode::All));
        assert_eq!(p.mode_at(5001), None);
        // An expired pause is replaced, not merged.
        p.pause_until(PausePurpose::Client, PauseMode::Write, 9000, 6000);
        assert_eq!(p.mode_at(6000), Some(PauseMode::Write));
        // A zero timeout (end 0) is over at once; it does not shorten one
        // in force.
        p.pause_until(PausePurpose::Client, PauseMode::Write, 0, 6000);
        assert_eq!(p.mode_at(8000), Some(PauseMode::Write));
        let mut fresh = Pauses::default();
        fresh.pause_until(PausePurpose::Client, PauseMode::All, 0, 6000);
        assert_eq!(fresh.mode_at(6000), None);
        // The strictest purpose applies; unpausing one leaves the other.
        p.pause(PausePurpose::Shutdown, PauseMode::Write);
        p.pause_until(PausePurpose::Client, PauseMode::All, 20_000, 10_000);
        assert_eq!(p.mode_at(10_000), Some(PauseMode::All));
        p.unpause(PausePurpose::Client);
        assert_eq!(p.mode_at(10_000), Some(PauseMode::Write));
        assert_eq!(p.mode_at(i64::MAX), Some(PauseMode::Write));
        p.unpause(PausePurpose::Shutdown);
        assert_eq!(p.mode_at(10_000), None);
    }

    #[test]
    fn writes_and_may_replicate_commands_wait_while_writes_are_paused() {
        let mut engine = Engine::open(Config::in_memory()).unwrap();
        let mut client = engine.new_session();
        assert!(!engine.must_wait_for_pause(&client, &[b"SET", b"k", b"v"]));
        let pause = |e: &mut Engine| {
            e.core()
                .pauses
                .pause(PausePurpose::Shutdown, PauseMode::Write)
        };
        pause(&mut engine);
        assert!(engine.must_wait_for_pause(&client, &[b"SET", b"k", b"v"]));
        assert!(engine.must_wait_for_pause(&client, &[b"PUBLISH", b"c", b"m"]));
        assert!(engine.must_wait_for_pause(&client, &[b"EVAL", b"return 1", b"0"]));
        assert!(!engine.must_wait_for_pause(&client, &[b"GET", b"k"]));
        assert!(!engine.must_wait_for_pause(&client, &[b"NOSUCH"]));
        client.is_replica = true;
        assert!(!engine.must_wait_for_pause(&client, &[b"SET", b"k", b"v"]));
        client.is_replica = false;
        engine.core().pauses.unpause(PausePurpose::Shutdown);
        assert!(!engine.must_wait_for_pause(&client, &[b"SET", b"k", b"v"]));
    }

    #[test]
    fn a_script_that_declares_no_writes_does_not_wait() {
        let mut engine = Engine::open(Config::in_memory()).unwrap();
        let mut client = engine.new_session();
        let loaded = engine.execute(
            &mut client,
            &[b"SCRIPT", b"LOAD", b"#!lua flags=no-writes\nreturn 1"],
        );
        let crate::reply::Reply::Bulk(sha) = loaded else {
            panic!("SCRIPT LOAD: {loaded:?}");
        };
        engine
            .core()
            .pauses
            .pause(PausePurpose::Shutdown, PauseMode::Write);
        let waits = |engine: &Engine, argv: &[&[u8]]| engine.must_wait_for_pause(&client, argv);
        assert!(!waits(
            &engine,
            &[b"EVAL", b"#!lua flags=no-writes\nreturn 1", b"0"]
        ));
        assert!(!waits(&engine, &[b"EVALSHA", &sha, b"0"]));
        assert!(waits(&engine, &[b"EVAL", b"#!lua\nreturn 1", b"0"]));
        assert!(waits(&engine, &[b"EVAL", b"return 1", b"0"]));
        assert!(waits(&engine, &[b"EVALSHA", &[b'0'; 40], b"0"]));
        assert!(!waits(&engine, &[b"EVAL_RO", b"return 1", b"0"]));
    }

    #[test]
    fn exec_waits_only_for_a_queue_that_writes() {
        let mut engine = Engine::open(Config::in_memory()).unwrap();
        let mut client = engine.new_session();
        engine.execute(&mut client, &[b"MULTI"]);
        engine.execute(&mut client, &[b"GET", b"k"]);
        engine
            .core()
            .pauses
            .pause(PausePurpose::Shutdown, PauseMode::Write);
        assert!(!engine.must_wait_for_pause(&client, &[b"EXEC"]));
        engine.core().pauses.unpause(PausePurpose::Shutdown);
        engine.execute(&mut client, &[b"PUBLISH", b"c", b"m"]);
        engine
            .core()
            .pauses
            .pause(PausePurpose::Shutdown, PauseMode::Write);
        assert!(engine.must_wait_for_pause(&client, &[b"EXEC"]));
    }

    #[test]
    fn keys_past_their_ttl_stay_but_read_as_absent_while_writes_are_paused() {
        let mut engine = Engine::open(Config::in_memory()).unwrap();
        let mut client = engine.new_session();
        let at = (crate::clock::now_ms() - 1000).to_string();
        engine.execute(&mut client, &[b"SET", b"k", b"v", b"PXAT", at.as_bytes()]);
        engine
            .core()
            .pauses
            .pause(PausePurpose::Shutdown, PauseMode::Write);
        assert_eq!(
            engine.execute(&mut client, &[b"GET", b"k"]),
            crate::reply::Reply::Null
        );
        assert_eq!(
            engine.execute(&mut client, &[b"EXISTS", b"k"]),
            crate::reply::Reply::Int(0)
        );
        engine.cron_now();
        assert_eq!(
            engine.execute(&mut client, &[b"DBSIZE"]),
            crate::reply::Reply::Int(1)
        );
        engine.core().pauses.unpause(PausePurpose::Shutdown);
        assert_eq!(
            engine.execute(&mut client, &[b"GET", b"k"]),
            crate::reply::Reply::Null
        );
        assert_eq!(
            engine.execute(&mut client, &[b"DBSIZE"]),
            crate::reply::Reply::Int(0)
        );
    }
}
