//! The server's answers to commands that reach beyond one client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use super::Client;
use crate::command::Host;

/// [`Host`] for the RESP server. The client executing the command is not in
/// `others` (it is borrowed separately while it runs).
pub struct ServerHost<'a> {
    others: &'a mut HashMap<usize, Client>,
    shutdown: &'a AtomicBool,
}

impl<'a> ServerHost<'a> {
    /// A host view over the other clients.
    pub fn new(others: &'a mut HashMap<usize, Client>, shutdown: &'a AtomicBool) -> Self {
        ServerHost { others, shutdown }
    }
}

impl Host for ServerHost<'_> {
    fn connected_clients(&self) -> usize {
        self.others.len() + 1
    }

    fn request_shutdown(&mut self) -> bool {
        self.shutdown.store(true, Ordering::SeqCst);
        true
    }
}
