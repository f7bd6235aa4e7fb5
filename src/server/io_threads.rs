//! `io-threads N`: the turn's reply writes shared with N-1 helper threads
//! (Redis's I/O threads with `io-threads-do-reads no`; docs/cores.md).
//!
//! At the end of a turn, once the AOF batch is written, the command thread
//! deals the clients with replies to send round-robin: one share it writes
//! itself, one share to each helper. A handed-off client lends its output
//! buffer (moved, not copied) and its socket's descriptor; the command
//! thread touches no handed-off client until every helper has given its
//! share back, so the descriptor stays open and nobody else writes to it.
//! The helpers sleep on a channel between turns (no spinning).

use std::io;
use std::os::fd::RawFd;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

/// One client's reply handed to a helper: the bytes and how far they got.
#[derive(Debug)]
pub(super) struct Write {
    /// The client's token.
    pub token: usize,
    fd: RawFd,
    /// The client's output buffer, lent for the turn.
    pub out: Vec<u8>,
    /// Bytes of `out` written (starts at the client's `out_pos`).
    pub pos: usize,
    /// Successful write calls made.
    pub calls: u64,
    /// `Ok(true)` all written, `Ok(false)` the socket is full, or the error
    /// that ends the connection.
    pub outcome: io::Result<bool>,
}

impl Write {
    /// A reply to write on `fd` from `pos`.
    pub fn new(token: usize, fd: RawFd, out: Vec<u8>, pos: usize) -> Write {
        Write {
            token,
            fd,
            out,
            pos,
            calls: 0,
            outcome: Ok(false),
        }
    }

    /// Writes as much as the socket takes (the helper's side).
    fn run(&mut self) {
        self.outcome = loop {
            if self.pos >= self.out.len() {
                break Ok(true);
            }
            let rest = &self.out[self.pos..];
            // SAFETY: `fd` is the socket of a client the command thread
            // keeps open, and does not use, until this write comes back
            // (`IoThreads::collect`); `rest` is a live buffer we own.
            let n = unsafe {
                libc::send(
                    self.fd,
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n > 0 {
                self.pos += n as usize;
                self.calls += 1;
                continue;
            }
            if n == 0 {
                break Err(io::ErrorKind::WriteZero.into());
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => break Ok(false),
                io::ErrorKind::Interrupted => continue,
                _ => break Err(e),
            }
        };
    }
}

/// The helper threads and their channels.
pub(super) struct IoThreads {
    jobs: Vec<Sender<Vec<Write>>>,
    done: Receiver<Vec<Write>>,
    handles: Vec<JoinHandle<()>>,
}

impl IoThreads {
    /// Starts `threads - 1` helpers (`threads` counts the command thread,
    /// as Redis's `io-threads` does); `None` for 1.
    pub fn start(threads: usize) -> io::Result<Option<IoThreads>> {
        if threads <= 1 {
            return Ok(None);
        }
        let (done_tx, done) = channel();
        let mut io = IoThreads {
            jobs: Vec::new(),
            done,
            handles: Vec::new(),
        };
        for i in 1..threads {
            let (tx, rx) = channel::<Vec<Write>>();
            let done_tx = done_tx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("hozon-io-{i}"))
                .spawn(move || {
                    for mut share in rx {
                        for write in &mut share {
                            write.run();
                        }
                        if done_tx.send(share).is_err() {
                            return;
                        }
                    }
                })?;
            io.jobs.push(tx);
            io.handles.push(handle);
        }
        Ok(Some(io))
    }

    /// Threads writing replies, the command thread included.
    pub fn threads(&self) -> usize {
        self.jobs.len() + 1
    }

    /// Whether a turn with `clients` replies to send shares them: only
    /// with at least two per thread, as Redis decides (below that the
    /// handoff costs more than it saves).
    pub fn worth_sharing(&self, clients: usize) -> bool {
        clients >= 2 * self.threads()
    }

    /// Hands each helper its share (`shares[i]` to helper `i`).
    pub fn hand_off(&self, shares: Vec<Vec<Write>>) {
        for (tx, share) in self.jobs.iter().zip(shares) {
            tx.send(share).expect("an I/O thread exited");
        }
    }

    /// Waits for every helper's share to come back.
    pub fn collect(&self) -> Vec<Write> {
        let mut all = Vec::new();
        for _ in 0..self.jobs.len() {
            all.extend(self.done.recv().expect("an I/O thread exited"));
        }
        all
    }
}

impl Drop for IoThreads {
    fn drop(&mut self) {
        self.jobs.clear();
        for handle in self.handles.drain(..) {
            let _ = handle.join();
        }
    }
}
