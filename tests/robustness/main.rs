//! Robustness tests against a real `hozon-server`: abusive clients (huge
//! bulk lengths, huge multibulks, slow and dribbling clients, clients that
//! never read their replies, more clients than `maxclients`) and the
//! security settings (AUTH, protected mode, rename-command, immutable
//! paths, the Lua sandbox).

mod common;
#[path = "../diff/harness.rs"]
mod harness;

mod abusive;
mod busy_poll;
mod security;
