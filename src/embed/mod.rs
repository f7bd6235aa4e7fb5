//! The embedded library: [`Db`], a thread-safe handle on an [`Engine`]
//! with a background upkeep thread, group commit across threads under
//! `appendfsync always`, and typed errors ([`DbError`]).
//!
//! ```
//! use hozon::embed::{Db, DbError};
//! use hozon::Reply;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path()).unwrap(); // the server's durable defaults
//! let handles: Vec<_> = (0..4)
//!     .map(|t| {
//!         let db = db.clone(); // Clone + Send + Sync
//!         std::thread::spawn(move || {
//!             let key = format!("k{t}");
//!             db.execute(&[b"SET", key.as_bytes(), b"v"]).unwrap();
//!         })
//!     })
//!     .collect();
//! for h in handles {
//!     h.join().unwrap();
//! }
//! assert_eq!(db.execute(&[b"DBSIZE"]).unwrap(), Reply::Int(4));
//! let mut conn = db.connect(); // SELECT, MULTI, WATCH state
//! conn.execute(&[b"SELECT", b"1"]).unwrap();
//! assert_eq!(conn.execute(&[b"DBSIZE"]).unwrap(), Reply::Int(0));
//! match db.execute(&[b"LPUSH", b"k0", b"x"]) {
//!     Err(DbError::Command(e)) => assert_eq!(e.code(), "WRONGTYPE"),
//!     other => panic!("{other:?}"),
//! }
//! drop(conn);
//! db.close().unwrap(); // fsync, final snapshot, lock released
//! assert!(matches!(db.execute(&[b"PING"]), Err(DbError::Closed)));
//! ```
//!
//! The design, the threading model and the durability contract of each
//! fsync policy: docs/embedding.md.

#[cfg(feature = "redis")]
mod adapter;
mod commit;
mod conn;
mod error;
mod upkeep;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::config::{AppendFsync, Config};
use crate::engine::Engine;
use crate::persist::io::{Io, RealIo};
use crate::reply::Reply;

#[cfg(feature = "redis")]
pub use adapter::AsyncConn;
pub use conn::Conn;
pub use error::{CommandError, DbError};

/// A thread-safe handle on an open engine: `Clone + Send + Sync`; every
/// clone refers to the same engine. The engine closes when [`Db::close`]
/// is called or the last handle (and the last [`Conn`]) is dropped.
#[derive(Clone)]
pub struct Db {
    inner: Arc<Handle>,
}

/// What the user-facing handles share; its drop closes the engine.
struct Handle {
    shared: Arc<Shared>,
    upkeep: Mutex<Option<JoinHandle<()>>>,
}

/// What the handles and the upkeep thread share.
pub(crate) struct Shared {
    /// The engine and what goes with it, behind the one lock.
    state: Mutex<State>,
    /// Signalled when a blocked session was served or the engine closed.
    woken: Condvar,
    /// The group commit's state (its own lock, never held with `state`'s
    /// other than `state` first).
    commit: Mutex<commit::Commit>,
    /// Signalled when the durable position moved or a commit failed.
    committed: Condvar,
    /// Set to stop the upkeep thread.
    stop: Mutex<bool>,
    stop_signal: Condvar,
    /// Followers released by the last commit that have not yet added a
    /// command to the batch (`commit.rs`).
    joiners: std::sync::atomic::AtomicUsize,
    /// Open connections ([`Conn`]s, one-call ones included): INFO's
    /// `connected_clients`.
    connections: std::sync::atomic::AtomicUsize,
}

/// The state behind the engine lock.
pub(crate) struct State {
    /// None once closed.
    engine: Option<Engine>,
    /// The sequence number of the batch being built (batches written
    /// have smaller numbers; see `commit.rs`).
    batch_seq: u64,
    /// Sessions blocked by their thread's command, by id.
    blocked: std::collections::HashMap<u64, crate::Session>,
    /// Served blocked sessions, with their reply, for their thread.
    served: std::collections::HashMap<u64, (crate::Session, Reply)>,
    /// Where each subscribed connection's messages go, by session id.
    subscribers: std::collections::HashMap<u64, conn::MessageSender>,
}

/// Options for opening a [`Db`]: start with [`Db::builder`].
pub struct Builder {
    config: Config,
    io: Arc<dyn Io>,
    upkeep_interval: Option<Duration>,
}

impl Builder {
    /// The fsync policy (`appendfsync`; docs/embedding.md states each one's
    /// contract).
    pub fn fsync(mut self, policy: AppendFsync) -> Builder {
        self.config.appendfsync = policy;
        self
    }

    /// Changes any configuration field (`hz`, `save`, `appendonly`,
    /// `maxmemory`…).
    pub fn config(mut self, change: impl FnOnce(&mut Config)) -> Builder {
        change(&mut self.config);
        self
    }

    /// Applies configuration text (redis.conf syntax).
    pub fn config_text(mut self, text: &str) -> Result<Builder, DbError> {
        self.config
            .apply_text(text.as_bytes())
            .map_err(|e| DbError::Open(Arc::new(crate::Error::Config(e.to_string()))))?;
        Ok(self)
    }

    /// The file-system backend (tests inject faults with
    /// [`FaultyIo`](crate::persist::io::FaultyIo)).
    pub fn io(mut self, io: Arc<dyn Io>) -> Builder {
        self.io = io;
        self
    }

    /// How often the upkeep thread wakes (default: `1000 / hz` ms, the
    /// server cron's period).
    pub fn upkeep_interval(mut self, every: Duration) -> Builder {
        self.upkeep_interval = Some(every);
        self
    }

    /// Opens the engine (loading and verifying its files) and starts the
    /// upkeep thread.
    pub fn open(self) -> Result<Db, DbError> {
        let mut engine =
            Engine::open_with_io(self.config, self.io).map_err(|e| DbError::Open(Arc::new(e)))?;
        // The handle writes each turn's batch itself (below the lock, or
        // through the group commit), as the server's event loop does.
        engine.set_group_commit(true);
        engine.set_capture_effects(false);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                engine: Some(engine),
                batch_seq: 1,
                blocked: Default::default(),
                served: Default::default(),
                subscribers: Default::default(),
            }),
            woken: Condvar::new(),
            commit: Mutex::new(commit::Commit::default()),
            committed: Condvar::new(),
            stop: Mutex::new(false),
            stop_signal: Condvar::new(),
            joiners: Default::default(),
            connections: Default::default(),
        });
        let thread =
            upkeep::start(Arc::clone(&shared), self.upkeep_interval).map_err(|source| {
                DbError::Open(Arc::new(crate::Error::Io {
                    context: "starting the upkeep thread".into(),
                    source,
                }))
            })?;
        Ok(Db {
            inner: Arc::new(Handle {
                shared,
                upkeep: Mutex::new(Some(thread)),
            }),
        })
    }
}

impl Db {
    /// Opens (creating it when absent) the data directory `path` with the
    /// server's defaults: `appendonly yes`, `appendfsync everysec`, Redis's
    /// save points, the native snapshot.
    pub fn open(path: impl AsRef<Path>) -> Result<Db, DbError> {
        Db::builder(path).open()
    }

    /// A [`Builder`] for the data directory `path`, with the server's
    /// defaults.
    pub fn builder(path: impl AsRef<Path>) -> Builder {
        let dir: PathBuf = path.as_ref().to_path_buf();
        let config = Config {
            dir,
            ..Config::default()
        };
        Builder {
            config,
            io: Arc::new(RealIo),
            upkeep_interval: None,
        }
    }

    /// A [`Builder`] for an engine without files (`Config::in_memory()`).
    pub fn in_memory() -> Builder {
        Builder {
            config: Config::in_memory(),
            io: Arc::new(RealIo),
            upkeep_interval: None,
        }
    }

    /// Executes one command on a connection of its own (database 0, RESP2)
    /// that ends with the call. A top-level error reply is `Err`
    /// ([`DbError`] says which kind); a blocking command blocks this
    /// thread.
    pub fn execute(&self, argv: &[&[u8]]) -> Result<Reply, DbError> {
        Conn::for_one_call(self.clone()).execute(argv)
    }

    /// A connection: its own session (database, MULTI, WATCH, name,
    /// protocol) across calls.
    pub fn connect(&self) -> Conn {
        Conn::new(self.clone())
    }

    /// An asynchronous connection for the redis crate's async API
    /// (feature `redis`; docs/embedding.md, "The redis crate's API"): its
    /// own session, served by a thread of its own, so that a blocking
    /// command never blocks the async runtime.
    #[cfg(feature = "redis")]
    pub fn connect_async(&self) -> AsyncConn {
        AsyncConn::new(self)
    }

    /// Waits until everything logged so far is fsynced, whatever the
    /// policy.
    pub fn sync(&self) -> Result<(), DbError> {
        let mut state = self.inner.shared.lock_state();
        let engine = state.engine.as_mut().ok_or(DbError::Closed)?;
        engine.sync().map_err(DbError::from_flush)
    }

    /// Runs `read` on the engine under the lock (figures, `keyspace()`).
    /// `read` must not call this handle (the lock is held).
    pub fn with_engine<T>(&self, read: impl FnOnce(&Engine) -> T) -> Result<T, DbError> {
        let state = self.inner.shared.lock_state();
        state.engine.as_ref().map(read).ok_or(DbError::Closed)
    }

    /// Closes the engine: stops the upkeep thread, then does what the
    /// server's SHUTDOWN does (a running rewrite abandoned, the AOF
    /// fsynced, a final snapshot with save points configured) and releases
    /// the data directory. Later calls on any handle fail with
    /// [`DbError::Closed`]; closing twice is Ok.
    pub fn close(&self) -> Result<(), DbError> {
        self.inner.close()
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }
}

impl Handle {
    fn close(&self) -> Result<(), DbError> {
        let shared = &self.shared;
        *shared.stop.lock().unwrap_or_else(|p| p.into_inner()) = true;
        shared.stop_signal.notify_all();
        let thread = self.upkeep.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
        let mut state = shared.lock_state();
        let Some(mut engine) = state.engine.take() else {
            return Ok(());
        };
        let result = engine.shutdown();
        drop(engine);
        state.blocked.clear();
        drop(state);
        shared.woken.notify_all();
        shared.closed(result.clone().err());
        result.map_err(|message| DbError::NotDurable {
            message,
            poisoned: true,
        })
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl Shared {
    fn lock_state(&self) -> MutexGuard<'_, State> {
        // A panic in a command is a bug; the engine's state is what it was
        // left in, as a server's would be.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

// Compile-time check: the handle is shared between threads, a connection
// moves between them.
const _: () = {
    const fn assert_shared<T: Clone + Send + Sync>() {}
    const fn assert_send<T: Send>() {}
    assert_shared::<Db>();
    assert_send::<Conn>();
};
