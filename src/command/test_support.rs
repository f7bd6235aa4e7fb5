//! Helpers for the command modules' unit tests: an in-memory engine, a
//! command runner and the logged effects as text.

use crate::command::{Effect, Session};
use crate::config::Config;
use crate::engine::Engine;
use crate::reply::Reply;
use crate::types::Value;

/// An engine on an in-memory configuration and one client session.
pub fn engine() -> (Engine, Session) {
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory config is valid");
    let session = engine.new_session();
    (engine, session)
}

/// Runs one command whose arguments are `line` split at single spaces.
pub fn run(engine: &mut Engine, session: &mut Session, line: &str) -> Reply {
    let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    engine.execute(session, &argv)
}

/// The effects logged since the last call, as `db: space-joined words`.
pub fn effects(engine: &mut Engine) -> Vec<String> {
    engine
        .take_effects()
        .into_iter()
        .map(|Effect { db, argv }| format!("{db}: {}", words(&argv)))
        .collect()
}

/// The effects logged since the last call, as space-joined words; all of
/// them must be in database 0.
pub fn db0_effects(engine: &mut Engine) -> Vec<String> {
    engine
        .take_effects()
        .into_iter()
        .map(|Effect { db, argv }| {
            assert_eq!(db, 0, "every test runs in database 0");
            words(&argv)
        })
        .collect()
}

fn words(argv: &[Vec<u8>]) -> String {
    argv.iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// An engine and a session, for tests that run many commands.
pub struct Fixture {
    pub engine: Engine,
    pub session: Session,
}

impl Fixture {
    pub fn new() -> Fixture {
        let (engine, session) = engine();
        Fixture { engine, session }
    }

    /// See [`run`].
    pub fn run(&mut self, line: &str) -> Reply {
        run(&mut self.engine, &mut self.session, line)
    }

    /// See [`effects`].
    pub fn effects(&mut self) -> Vec<String> {
        effects(&mut self.engine)
    }

    /// See [`db0_effects`].
    pub fn db0_effects(&mut self) -> Vec<String> {
        db0_effects(&mut self.engine)
    }

    /// OBJECT ENCODING of `key` in database 0, `None` when it is missing.
    pub fn encoding(&mut self, key: &str) -> Option<&'static str> {
        self.engine
            .core()
            .keyspace
            .db(0)
            .get(key.as_bytes())
            .map(Value::encoding)
    }
}
