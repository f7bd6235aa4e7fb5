//! hozon: a Redis-compatible keyspace engine whose first concern is
//! durability.
//!
//! The [`Engine`] holds sixteen databases of Redis's data types and executes
//! Redis commands in-process, one at a time, returning typed [`Reply`]
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

pub mod clock;
pub mod command;
pub mod config;
pub mod core;
pub mod engine;
pub mod error;
pub mod glob;
pub mod keyspace;
#[cfg(test)]
mod layers;
pub mod persist;
pub mod rand;
pub mod rdb;
pub mod reply;
pub mod resp;
pub mod script;
#[cfg(feature = "server")]
pub mod server;
pub mod tools;
pub mod types;

pub use command::{Effect, Session};
pub use config::Config;
pub use engine::Engine;
pub use error::Error;
pub use reply::Reply;
