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

use std::time::{SystemTime, UNIX_EPOCH};

use crate::command::{self, flags, Ctx, Effect, Host, NullHost, Session};
use crate::config::Config;
use crate::keyspace::Keyspace;
use crate::rand::Rng;
use crate::reply::Reply;

/// Counters reported by INFO stats.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Commands executed.
    pub commands_processed: u64,
    /// Keys removed because their TTL passed.
    pub expired_keys: u64,
    /// Successful key lookups.
    pub keyspace_hits: u64,
    /// Failed key lookups.
    pub keyspace_misses: u64,
    /// Connections accepted (server).
    pub connections_received: u64,
    /// Connections refused by `maxclients` (server).
    pub rejected_connections: u64,
    /// Unix ms when the counters were last reset.
    pub reset_ms: i64,
}

/// The engine's state, reachable by commands through [`Ctx::core`].
pub struct Core {
    /// The databases.
    pub keyspace: Keyspace,
    /// Configuration in force.
    pub config: Config,
    /// Statistics.
    pub stats: Stats,
    /// Random source for RANDOMKEY, SPOP, sampling.
    pub rng: Rng,
    /// Effects logged and not yet taken by the persistence layer.
    pub effects: Vec<Effect>,
    /// Changes since the last save (`rdb_changes_since_last_save`).
    pub dirty: u64,
    /// Unix ms when the engine started.
    pub start_ms: i64,
    next_session_id: u64,
    last_cron_ms: i64,
}

impl Core {
    /// Called for every modified key (WATCH bookkeeping lives here).
    pub fn signal_modified(&mut self, _db: usize, _key: &[u8]) {}

    /// Active expiry: samples keys with a TTL in every database and removes
    /// expired ones, like Redis's `activeExpireCycle` (20 keys a sample,
    /// repeated while more than a quarter were expired, bounded by a time
    /// budget of 25 ms so a cycle never stalls clients for long).
    pub fn active_expire_cycle(&mut self, now_ms: i64) -> usize {
        const SAMPLE: usize = 20;
        const BUDGET_US: u128 = 25_000;
        let started = std::time::Instant::now();
        let mut removed_total = 0;
        for db in 0..self.keyspace.db_count() {
            loop {
                let database = self.keyspace.db(db);
                if database.expires_len() == 0 {
                    break;
                }
                let expired = database.sample_expired(&mut self.rng, SAMPLE, now_ms);
                for key in &expired {
                    self.keyspace.db_mut(db).remove(key);
                    self.stats.expired_keys += 1;
                    self.effects.push(Effect {
                        db,
                        argv: vec![b"DEL".to_vec(), key.to_vec()],
                    });
                    self.signal_modified(db, key);
                }
                removed_total += expired.len();
                if expired.len() * 4 <= SAMPLE || started.elapsed().as_micros() > BUDGET_US {
                    break;
                }
            }
            if started.elapsed().as_micros() > BUDGET_US {
                break;
            }
        }
        removed_total
    }
}

/// The current time in Unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// An in-process keyspace engine.
pub struct Engine {
    core: Core,
}

impl Engine {
    /// Opens an engine with `config` (in-memory: persistence arrives with
    /// the append-only file).
    pub fn open(config: Config) -> Result<Engine, crate::Error> {
        if config.databases == 0 {
            return Err(crate::Error::Config("databases must be at least 1".into()));
        }
        let now = now_ms();
        Ok(Engine {
            core: Core {
                keyspace: Keyspace::new(config.databases),
                config,
                stats: Stats {
                    reset_ms: now,
                    ..Stats::default()
                },
                rng: Rng::new(),
                effects: Vec::new(),
                dirty: 0,
                start_ms: now,
                next_session_id: 1,
                last_cron_ms: now,
            },
        })
    }

    /// A new client session (id, database 0, RESP2).
    pub fn new_session(&mut self) -> Session {
        let id = self.core.next_session_id;
        self.core.next_session_id += 1;
        let authenticated = self.core.config.requirepass.is_none();
        Session::new(id, authenticated, now_ms())
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.core.config
    }

    /// The engine state (for the server and tools in this crate).
    pub fn core(&mut self) -> &mut Core {
        &mut self.core
    }

    /// Executes one command for `session` with no host (embedded use).
    pub fn execute(&mut self, session: &mut Session, argv: &[&[u8]]) -> Reply {
        self.execute_with_host(session, argv, &mut NullHost)
    }

    /// Executes one command for `session`, with `host` answering for the
    /// surrounding program (other clients, shutdown).
    pub fn execute_with_host(&mut self, session: &mut Session, argv: &[&[u8]], host: &mut dyn Host) -> Reply {
        let now = now_ms();
        if now - self.core.last_cron_ms >= i64::from(1000 / self.core.config.hz.max(1)) {
            self.cron_at(now);
        }
        if argv.is_empty() {
            return Reply::err("ERR empty command");
        }
        let Some(mut spec) = command::lookup(argv[0]) else {
            return command::unknown_command_error(argv);
        };
        if !spec.subcommands.is_empty() {
            if argv.len() < 2 {
                return command::arity_error(spec.name);
            }
            match spec.subcommand(argv[1]) {
                Some(sub) => {
                    if !sub.arity_ok(argv.len()) {
                        return command::arity_error(&format!("{}|{}", spec.name, sub.name));
                    }
                    spec = sub;
                }
                None => return command::unknown_subcommand_error(spec.name, argv[1]),
            }
        } else if !spec.arity_ok(argv.len()) {
            return command::arity_error(spec.name);
        }
        if !session.authenticated && !spec.has(flags::NO_AUTH) {
            return Reply::err("NOAUTH Authentication required.");
        }
        session.last_command = spec.name;
        self.core.stats.commands_processed += 1;
        let effects_before = self.core.effects.len();
        let mut ctx = Ctx::new(&mut self.core, session, host, now);
        let reply = match (spec.handler)(&mut ctx, argv) {
            Ok(r) | Err(r) => r,
        };
        let dirty = ctx.dirty;
        let logged_custom = ctx.logged_custom;
        let db = ctx.session.db;
        if dirty > 0 {
            self.core.dirty += dirty;
            if !logged_custom {
                self.core.effects.push(Effect {
                    db,
                    argv: argv.iter().map(|a| a.to_vec()).collect(),
                });
            }
        }
        debug_assert!(
            self.core.effects.len() >= effects_before,
            "a command never removes logged effects"
        );
        reply
    }

    /// Runs background work now: active expiry.
    pub fn cron(&mut self) {
        self.cron_at(now_ms());
    }

    fn cron_at(&mut self, now: i64) {
        self.core.last_cron_ms = now;
        self.core.active_expire_cycle(now);
    }

    /// Takes the effects logged since the last call, in order.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.core.effects)
    }
}
