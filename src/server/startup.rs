//! The files read at startup, loaded on a thread of their own while the
//! event loop accepts connections and serves what Redis serves while
//! loading: the commands with Redis's `loading` flag (INFO with the
//! `loading_*` fields, CLIENT, CONFIG, SUBSCRIBE…), `-LOADING` to the
//! rest (docs/persistence.md, "Loading at startup").

use std::sync::{mpsc, Arc};

use mio::{Token, Waker};

use super::log::{self, Level};
use super::{Server, FIRST_CLIENT_TOKEN};
use crate::engine::{LoadedFiles, StartupLoad};

/// The token the loading thread wakes the event loop with when done.
pub(super) const STARTUP_TOKEN: usize = FIRST_CLIENT_TOKEN - 2;

/// The loading thread, from the event loop's side.
pub(super) struct StartupThread {
    result: mpsc::Receiver<Result<LoadedFiles, crate::Error>>,
    /// Kept registered until the result is taken.
    _waker: Arc<Waker>,
}

impl Server {
    /// Starts reading the files on a thread of their own (`load` from
    /// [`Engine::begin_open`](crate::Engine::begin_open)). "Ready to accept
    /// connections" is logged when they are loaded; a failed load ends
    /// [`Server::run`] with its error.
    pub fn start_loading(&mut self, load: StartupLoad) -> Result<(), crate::Error> {
        let io_error = |context: &str, source| crate::Error::Io {
            context: context.to_string(),
            source,
        };
        let waker = Arc::new(
            Waker::new(self.poll.registry(), Token(STARTUP_TOKEN))
                .map_err(|e| io_error("creating the loading thread's waker", e))?,
        );
        let (tx, rx) = mpsc::channel();
        let wake = Arc::clone(&waker);
        std::thread::Builder::new()
            .name("startup-load".into())
            .spawn(move || {
                let _ = tx.send(load.run());
                let _ = wake.wake();
            })
            .map_err(|e| io_error("starting the loading thread", e))?;
        self.startup = Some(StartupThread {
            result: rx,
            _waker: waker,
        });
        Ok(())
    }

    /// Takes the load's result once the thread is done: the data is
    /// served from then on. Err when the load failed (the server cannot
    /// start).
    pub(super) fn check_startup_load(&mut self) -> Result<(), crate::Error> {
        let Some(thread) = &self.startup else {
            return Ok(());
        };
        let result = match thread.result.try_recv() {
            Ok(result) => result,
            Err(mpsc::TryRecvError::Empty) => return Ok(()),
            Err(mpsc::TryRecvError::Disconnected) => Err(crate::Error::Config(
                "the thread loading the data stopped without a result".into(),
            )),
        };
        self.startup = None;
        self.engine.finish_open(result?)?;
        for notice in self.engine.take_notices() {
            log::log(Level::Warning, &notice);
        }
        if self.listeners.has_network() {
            log::log(Level::Notice, "Ready to accept connections");
        }
        if let Some(path) = self.unix_socket_path() {
            log::log(
                Level::Notice,
                &format!("The server is now ready to accept connections at {path}"),
            );
        }
        super::supervise::notify_ready(self.engine.config().replica.replicaof.is_some());
        Ok(())
    }
}
