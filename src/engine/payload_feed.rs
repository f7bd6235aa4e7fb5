//! A full sync's payload read while it arrives (docs/replication.md
//! §5.3): the event loop writes the received bytes to the payload's file
//! and says how far it got; the loading thread reads the file through a
//! mapping of the whole window and waits here for bytes that have not
//! come yet.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

/// The mapping window for a payload whose length is not known up front
/// (the mark form): address space only, no memory until read.
#[cfg(target_pointer_width = "64")]
pub(crate) const UNKNOWN_LENGTH_WINDOW: u64 = 1 << 40;
/// The mapping window for a payload whose length is not known up front
/// (the mark form): address space only, no memory until read.
#[cfg(not(target_pointer_width = "64"))]
pub(crate) const UNKNOWN_LENGTH_WINDOW: u64 = 1 << 29;

/// How the arrival of a payload stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    /// More may come.
    Open,
    /// All of it came.
    Complete,
    /// It will not be completed (the transfer failed or was abandoned).
    Failed(String),
}

#[derive(Debug)]
struct State {
    arrived: u64,
    end: End,
}

/// How much of a payload has arrived in its file (written by the event
/// loop, read by the loading thread).
#[derive(Debug)]
pub(crate) struct PayloadFeed {
    state: Mutex<State>,
    cond: Condvar,
}

impl PayloadFeed {
    /// A payload of which nothing has arrived yet.
    pub(crate) fn new() -> Arc<PayloadFeed> {
        Arc::new(PayloadFeed {
            state: Mutex::new(State {
                arrived: 0,
                end: End::Open,
            }),
            cond: Condvar::new(),
        })
    }

    fn update(&self, change: impl FnOnce(&mut State)) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.end == End::Open {
            change(&mut state);
        }
        self.cond.notify_all();
    }

    /// The first `bytes` bytes are in the file (written, readable through
    /// a mapping).
    pub(crate) fn arrived(&self, bytes: u64) {
        self.update(|s| s.arrived = s.arrived.max(bytes));
    }

    /// All of it is in the file.
    pub(crate) fn complete(&self) {
        self.update(|s| s.end = End::Complete);
    }

    /// It will not be completed: the readers stop with `reason`.
    pub(crate) fn fail(&self, reason: &str) {
        self.update(|s| s.end = End::Failed(reason.to_string()));
    }

    /// Blocks until the payload is complete; its length.
    pub(crate) fn wait_complete(&self) -> Result<u64, String> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match &state.end {
                End::Complete => return Ok(state.arrived),
                End::Failed(reason) => return Err(reason.clone()),
                End::Open => {}
            }
            state = self.cond.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl crate::rdb::reader::Feed for PayloadFeed {
    fn wait_for(&self, end: usize) -> Result<usize, String> {
        let end = end as u64;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match &state.end {
                End::Failed(reason) => return Err(reason.clone()),
                End::Complete => return Ok(state.arrived as usize),
                End::Open if state.arrived >= end => return Ok(state.arrived as usize),
                End::Open => {}
            }
            state = self.cond.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A payload file being received, to load while it arrives.
#[derive(Debug)]
pub(crate) struct StreamedPayload {
    /// The file the event loop writes.
    pub(crate) path: PathBuf,
    /// The file mapped over the payload's length when known, else
    /// [`UNKNOWN_LENGTH_WINDOW`] bytes: address space only beyond what
    /// arrived, and only what arrived is read.
    pub(crate) window: memmap2::Mmap,
    /// How far it has arrived.
    pub(crate) feed: Arc<PayloadFeed>,
}

impl StreamedPayload {
    /// Maps `path` (the payload's file, just created) over `window` bytes.
    pub(crate) fn open(path: &std::path::Path, window: u64) -> std::io::Result<StreamedPayload> {
        let len = usize::try_from(window)
            .map_err(|_| std::io::Error::other("the payload is larger than the address space"))?;
        let file = std::fs::File::open(path)?;
        // SAFETY: the file is this process's own temporary file, only
        // appended to while mapped; only bytes the writer reported as
        // written (so within the file) are read.
        let window = unsafe { memmap2::MmapOptions::new().len(len).map(&file) }?;
        Ok(StreamedPayload {
            path: path.to_path_buf(),
            window,
            feed: PayloadFeed::new(),
        })
    }

    /// How many bytes the window holds: a payload longer than this is
    /// not read while it arrives.
    pub(crate) fn window_len(&self) -> u64 {
        self.window.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdb::reader::Feed;

    #[test]
    fn readers_wait_for_bytes_and_see_the_end() {
        let feed = PayloadFeed::new();
        let reader = {
            let feed = Arc::clone(&feed);
            std::thread::spawn(move || (feed.wait_for(10), feed.wait_for(100)))
        };
        feed.arrived(4);
        feed.arrived(12);
        feed.arrived(20);
        feed.complete();
        let (first, second) = reader.join().unwrap();
        assert!(first.unwrap() >= 10);
        // Fewer than asked for: no more will come.
        assert_eq!(second, Ok(20));
        assert_eq!(feed.wait_complete(), Ok(20));
    }

    #[test]
    fn a_failure_stops_the_readers_and_is_final() {
        let feed = PayloadFeed::new();
        let reader = {
            let feed = Arc::clone(&feed);
            std::thread::spawn(move || feed.wait_for(10))
        };
        feed.arrived(5);
        feed.fail("the link was lost");
        assert_eq!(reader.join().unwrap(), Err("the link was lost".to_string()));
        feed.complete();
        feed.arrived(50);
        assert_eq!(feed.wait_complete(), Err("the link was lost".to_string()));
    }
}
