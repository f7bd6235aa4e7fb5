//! Client pauses (Redis 7.0's `pauseClients`): while writes are paused,
//! commands that write or may replicate wait (the server postpones the
//! client, its input kept) and no key expires, so the replication offset
//! stays where it is. Today the one purpose is a shutdown waiting for its
//! replicas (docs/replication.md §3.8); each purpose pauses and unpauses
//! independently, and the strictest active pause applies.

use super::Core;

/// Why clients are paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PausePurpose {
    /// A shutdown waits for its replicas to acknowledge the whole stream.
    Shutdown,
}

/// What a pause holds back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PauseMode {
    /// Commands that write or may replicate (`CLIENT_PAUSE_WRITE`).
    Write,
}

/// The active pauses, one per purpose.
#[derive(Debug, Default)]
pub(crate) struct Pauses {
    shutdown: Option<PauseMode>,
    /// Clients the server holds for a pause or a shutdown (counted in
    /// INFO `blocked_clients`, as Redis counts them).
    pub(crate) waiting_clients: usize,
}

impl Pauses {
    /// Pauses clients for `purpose` (replacing that purpose's pause).
    pub(crate) fn pause(&mut self, purpose: PausePurpose, mode: PauseMode) {
        match purpose {
            PausePurpose::Shutdown => self.shutdown = Some(mode),
        }
    }

    /// Ends `purpose`'s pause; the other purposes' stay.
    pub(crate) fn unpause(&mut self, purpose: PausePurpose) {
        match purpose {
            PausePurpose::Shutdown => self.shutdown = None,
        }
    }

    /// True while some pause holds writes back.
    pub(crate) fn writes_paused(&self) -> bool {
        self.shutdown.is_some()
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
