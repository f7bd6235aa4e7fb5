//! Robustness tests against a real `hozon-server`: abusive clients (huge
//! bulk lengths, huge multibulks, slow and dribbling clients, clients that
//! never read their replies, more clients than `maxclients`) and the
//! security settings (AUTH, protected mode, rename-command, immutable
//! paths, the Lua sandbox).

use testkit::harness;

mod common;

mod abusive;
mod busy_poll;
mod harness_ports;
mod io_threads;
mod security;
mod tls;
