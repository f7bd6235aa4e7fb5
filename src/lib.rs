//! hozon: a Redis-compatible keyspace engine whose first concern is
//! durability.
//!
//! Most embedders want [`Db`] ([`embed`]): open a data directory, use the
//! handle from any number of threads, close it (or drop the last handle).
//! A background thread keeps it healthy (active expiry, the `everysec`
//! fsync, save points, AOF rewrites), and under `appendfsync always`
//! concurrent callers share fsyncs (group commit).
//!
//! ```
//! use hozon::config::AppendFsync;
//! use hozon::{Db, Reply};
//!
//! let dir = tempfile::tempdir().unwrap();
//! // `Db::open(path)` takes the server's durable defaults (everysec);
//! // here every acknowledged write is fsynced first.
//! let db = Db::builder(dir.path()).fsync(AppendFsync::Always).open().unwrap();
//! let threads: Vec<_> = (0..4)
//!     .map(|_| {
//!         let db = db.clone(); // Clone + Send + Sync
//!         std::thread::spawn(move || db.execute(&[b"INCR", b"hits"]).unwrap())
//!     })
//!     .collect();
//! for t in threads {
//!     t.join().unwrap();
//! }
//! assert_eq!(db.execute(&[b"GET", b"hits"]).unwrap(), Reply::Bulk(b"4".to_vec()));
//! db.close().unwrap(); // fsync, final snapshot, directory unlocked
//! let db = Db::open(dir.path()).unwrap(); // everything acknowledged is back
//! assert_eq!(db.execute(&[b"GET", b"hits"]).unwrap(), Reply::Bulk(b"4".to_vec()));
//! ```
//!
//! **Durability contract** (the server's, docs/embedding.md): under
//! `always` an `Ok` write is fsynced, and so is every write a reply could
//! have shown; under `everysec` (the default) it is written (it survives
//! the process being killed) and fsynced within about a second; under `no`
//! the OS flushes it. Recovery always gives a prefix of the acknowledged
//! history. [`DbError`] tells a command error from a persistence failure
//! from a closed handle. With the `redis` feature, the `redis` crate's
//! API runs on an embedded connection.
//!
//! Below it, the [`Engine`] holds sixteen databases of Redis's data types
//! and executes Redis commands one at a time for a caller that drives it
//! (`&mut self`, upkeep left to the caller), returning typed [`Reply`]
//! values. The `server` feature adds the RESP server used by the
//! `hozon-server` binary.
//!
//! ```
//! use hozon::{Config, Engine, Reply};
//!
//! let mut engine = Engine::open(Config::in_memory()).unwrap();
//! let mut session = engine.new_session();
//! assert_eq!(engine.execute(&mut session, &[b"SET", b"k", b"v"]), Reply::ok());
//! assert_eq!(engine.execute(&mut session, &[b"GET", b"k"]), Reply::Bulk(b"v".to_vec()));
//! ```
//!
//! # API boundary
//!
//! Public are the embedded library ([`embed`]), the engine API ([`Engine`], [`Config`], [`Session`],
//! [`Reply`], [`Error`] with [`CorruptFile`], [`Effect`], the [`engine`],
//! [`config`] and [`error`] modules) and the file formats with the tools' support code, which
//! `hozon-inspect`, `hozon-repair`, the tests and the fuzz targets read and
//! write: [`rdb`], [`persist`], [`resp`], [`types`], [`keyspace`] and
//! [`tools`]. [`rand`] is the seeded generator the tests and fuzz checks
//! share, and `server` (feature `server`) the RESP server. The
//! command implementations, the engine's state and the scripting layer
//! are crate-private: an embedder changes data only with
//! [`Engine::execute`], so that every change is logged (ARCHITECTURE.md,
//! "API boundary").

// Every public item is documented (clippy -D warnings enforces it).
#![warn(missing_docs)]

// The engine API.
pub mod config;
pub mod embed;
pub mod engine;
pub mod error;
mod reply;

// The file formats and the tools' support code.
pub mod keyspace;
pub mod persist;
pub mod rdb;
pub mod resp;
pub mod tools;
pub mod types;

// The seeded generator of the tests and fuzz checks.
pub mod rand;

#[cfg(feature = "server")]
pub mod server;

// Crate-private.
mod acl;
mod clock;
mod command;
mod core;
mod glob;
#[cfg(test)]
mod layers;
// Replication (issue 25, docs/replication.md) is built in steps; until the
// engine and the server drive it, only its tests use it.
#[cfg_attr(not(test), allow(dead_code))]
mod repl;
mod script;

pub use command::server::REDIS_VERSION;
pub use command::{Effect, Session};
pub use config::Config;
pub use embed::{Db, DbError};
pub use engine::Engine;
pub use error::{CorruptCause, CorruptFile, Error};
pub use reply::Reply;
