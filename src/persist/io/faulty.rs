//! [`FaultyIo`]: an in-memory file system for fault-injection tests.
//!
//! It behaves like a POSIX file system as far as durability goes:
//!
//! - **Inodes and names.** A name refers to an inode; an open handle keeps
//!   writing to the inode it opened, whatever happens to the name (a rename
//!   over it, an unlink). A write through an old handle after a rewrite's
//!   switch lands in a file that no longer has a name, as on Linux.
//! - **Data durability.** Bytes are durable once an fsync of their inode
//!   succeeded. A *failed* fsync drops the dirty bytes it was meant to
//!   persist, as Linux does (the pages are marked clean): a later fsync that
//!   succeeds does not bring them back, and a power loss turns them into
//!   zeros.
//! - **Name durability.** Creating, renaming and unlinking change the live
//!   directory at once; the change survives a power loss only after a
//!   successful fsync of the directory. A power loss puts every name back
//!   to what it referred to at the last directory fsync (a rename is undone
//!   whole: the old file is back under the name), and inodes no surviving
//!   name refers to vanish.
//! - **Stops.** [`FaultyIo::power_loss`] cuts and restores the power at
//!   once; [`Fault::Stop`] stops the program (a crash or a power loss) just
//!   before the Nth operation while it runs, so that operation and every
//!   later one fail with EIO until [`FaultyIo::power_on`]. Handles opened
//!   before a stop stay dead after it, and so does a view made by
//!   [`FaultyIo::process`]: a restarted program must open its files again.
//!
//! [`FaultyIo::set_lying_disk`] makes fsyncs (of data or of directories)
//! report success without making anything durable: the tests use it to
//! prove that the power-loss tests notice a missing fsync.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{AppendFile, Io, SyncHandle};

/// What a simulated power loss does to bytes written but not fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerLoss {
    /// Unsynced bytes vanish.
    DropUnsynced,
    /// A prefix of the unsynced bytes survives (`keep` of them, capped).
    Torn {
        /// How many unsynced bytes survive.
        keep: usize,
    },
    /// A prefix survives and is followed by `garbage` bytes of junk (a
    /// partially written page).
    TornWithGarbage {
        /// How many unsynced bytes survive.
        keep: usize,
        /// How many junk bytes follow them.
        garbage: usize,
    },
}

/// A fault to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The Nth write (counting from 1 after arming) fails with this errno.
    FailWrite {
        /// Which write.
        nth: u64,
        /// `libc`-style error number (e.g. 28 = ENOSPC, 5 = EIO).
        errno: i32,
        /// When true, every later write fails as well (a full disk).
        sticky: bool,
    },
    /// The Nth write writes only `bytes` bytes and reports that.
    ShortWrite {
        /// Which write.
        nth: u64,
        /// Bytes actually written.
        bytes: usize,
    },
    /// The Nth fsync of a file fails with this errno, and, like Linux, the
    /// dirty bytes it was meant to persist are lost at the next power loss
    /// even if a later fsync succeeds.
    FailSync {
        /// Which fsync.
        nth: u64,
        /// Error number.
        errno: i32,
    },
    /// The Nth fsync takes `delay_ms` before it completes (a slow disk).
    SlowSync {
        /// Which fsync.
        nth: u64,
        /// How long it takes.
        delay_ms: u64,
    },
    /// The Nth rename fails with this errno (nothing is renamed).
    FailRename {
        /// Which rename.
        nth: u64,
        /// Error number.
        errno: i32,
    },
    /// The Nth fsync of a directory fails with this errno: the directory
    /// changes since the last successful one stay undone by a power loss.
    FailDirSync {
        /// Which directory fsync.
        nth: u64,
        /// Error number.
        errno: i32,
    },
    /// The program stops just before the Nth operation that changes the
    /// file system or makes it durable (open for appending, write, fsync,
    /// truncate, rename, unlink, directory fsync), as `how` says: that
    /// operation and every later one fail with EIO until
    /// [`FaultyIo::power_on`].
    Stop {
        /// Which operation.
        nth_op: u64,
        /// A crash of the process or a power loss.
        how: Stop,
    },
}

/// How the program stops at a [`Fault::Stop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The process dies (`kill -9`): every byte written and every name
    /// change stays, since the kernel has them.
    Crash,
    /// The power fails: unsynced bytes go as `PowerLoss` says, and names
    /// go back to what their directory's last fsync made durable.
    PowerLoss(PowerLoss),
    /// The power fails, but the directory changes not yet fsynced happen
    /// to have reached the disk (renames and new names survive).
    PowerLossKeepingNames(PowerLoss),
}

#[derive(Debug, Default, Clone)]
struct Inode {
    data: Vec<u8>,
    /// Bytes known durable (prefix length of `data`).
    synced_len: usize,
    /// Byte ranges whose fsync failed: their pages were dropped, so a
    /// power loss leaves zeros there even if a later fsync succeeded.
    lost: Vec<(usize, usize)>,
}

#[derive(Debug, Default)]
struct FaultState {
    inodes: BTreeMap<u64, Inode>,
    /// The live directory entries.
    names: BTreeMap<PathBuf, u64>,
    /// The directory entries as of each directory's last successful fsync:
    /// what a power loss leaves.
    durable_names: BTreeMap<PathBuf, u64>,
    next_inode: u64,
    /// Bumped by every power loss: handles of an earlier epoch are dead.
    epoch: u64,
    /// The program is stopped (until [`FaultyIo::power_on`]).
    off: bool,
    faults: Vec<Fault>,
    writes: u64,
    syncs: u64,
    dir_syncs: u64,
    renames: u64,
    ops: u64,
    write_failing: Option<i32>,
    lying_data_sync: bool,
    lying_dir_sync: bool,
}

impl FaultState {
    fn new_inode(&mut self, inode: Inode) -> u64 {
        self.next_inode += 1;
        self.inodes.insert(self.next_inode, inode);
        self.next_inode
    }

    fn inode_of(&self, path: &Path) -> io::Result<u64> {
        self.names
            .get(path)
            .copied()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }

    /// Fails when the power is off or `epoch` (a handle's) is from before
    /// the last power loss.
    fn check_power(&self, epoch: Option<u64>) -> io::Result<()> {
        if self.off || epoch.is_some_and(|e| e != self.epoch) {
            return Err(errno_error(EIO));
        }
        Ok(())
    }

    /// Counts one operation that changes or syncs the file system; cuts
    /// the program if a [`Fault::Stop`] is due.
    fn operation(&mut self, epoch: Option<u64>) -> io::Result<()> {
        self.check_power(epoch)?;
        self.ops += 1;
        let n = self.ops;
        let stop = self.faults.iter().find_map(|f| match f {
            Fault::Stop { nth_op, how } if *nth_op == n => Some(*how),
            _ => None,
        });
        if let Some(how) = stop {
            self.stop(how);
            self.off = true;
            return Err(errno_error(EIO));
        }
        Ok(())
    }

    fn stop(&mut self, how: Stop) {
        match how {
            Stop::Crash => {
                self.epoch += 1;
                self.faults.clear();
                self.write_failing = None;
            }
            Stop::PowerLoss(mode) => self.lose_power(mode, false),
            Stop::PowerLossKeepingNames(mode) => self.lose_power(mode, true),
        }
    }

    fn lose_power(&mut self, mode: PowerLoss, keep_live_names: bool) {
        if !keep_live_names {
            self.names = self.durable_names.clone();
        }
        self.durable_names = self.names.clone();
        let alive: std::collections::BTreeSet<u64> = self.names.values().copied().collect();
        self.inodes.retain(|ino, _| alive.contains(ino));
        for inode in self.inodes.values_mut() {
            let unsynced = inode.data.len() - inode.synced_len;
            let (keep, garbage) = match mode {
                PowerLoss::DropUnsynced => (0, 0),
                PowerLoss::Torn { keep } => (keep.min(unsynced), 0),
                // Junk only where a write was in flight (past the synced
                // end): a fully synced file gets none.
                PowerLoss::TornWithGarbage { keep, garbage } if unsynced > 0 => {
                    (keep.min(unsynced), garbage)
                }
                PowerLoss::TornWithGarbage { keep, .. } => (keep.min(unsynced), 0),
            };
            inode.data.truncate(inode.synced_len + keep);
            inode.data.extend(std::iter::repeat_n(0xA5u8, garbage));
            for &(start, end) in &inode.lost {
                let end = end.min(inode.data.len());
                if start < end {
                    inode.data[start..end].fill(0);
                }
            }
            inode.lost.clear();
            inode.synced_len = inode.data.len();
        }
        self.epoch += 1;
        self.faults.clear();
        self.write_failing = None;
    }
}

const EIO: i32 = 5;

/// An in-memory file system with injectable faults and power loss.
#[derive(Debug, Default, Clone)]
pub struct FaultyIo {
    state: Arc<Mutex<FaultState>>,
    /// Set for a view made by [`FaultyIo::process`]: the epoch it lives in.
    epoch: Option<u64>,
}

impl FaultyIo {
    /// An empty file system with no faults.
    pub fn new() -> FaultyIo {
        FaultyIo::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FaultState> {
        // A panic while holding the lock is a test failure anyway.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Arms a fault (counters for `nth` start from the current counts).
    pub fn inject(&self, fault: Fault) {
        let mut s = self.lock();
        let fault = match fault {
            Fault::FailWrite { nth, errno, sticky } => Fault::FailWrite {
                nth: s.writes + nth,
                errno,
                sticky,
            },
            Fault::ShortWrite { nth, bytes } => Fault::ShortWrite {
                nth: s.writes + nth,
                bytes,
            },
            Fault::FailSync { nth, errno } => Fault::FailSync {
                nth: s.syncs + nth,
                errno,
            },
            Fault::SlowSync { nth, delay_ms } => Fault::SlowSync {
                nth: s.syncs + nth,
                delay_ms,
            },
            Fault::FailDirSync { nth, errno } => Fault::FailDirSync {
                nth: s.dir_syncs + nth,
                errno,
            },
            Fault::FailRename { nth, errno } => Fault::FailRename {
                nth: s.renames + nth,
                errno,
            },
            Fault::Stop { nth_op, how } => Fault::Stop {
                nth_op: s.ops + nth_op,
                how,
            },
        };
        s.faults.push(fault);
    }

    /// Removes every armed fault and makes writes succeed again (the disk
    /// was freed).
    pub fn clear_faults(&self) {
        let mut s = self.lock();
        s.faults.clear();
        s.write_failing = None;
    }

    /// Number of writes and fsyncs so far.
    pub fn counts(&self) -> (u64, u64) {
        let s = self.lock();
        (s.writes, s.syncs)
    }

    /// Number of operations so far that [`Fault::Stop`] counts.
    pub fn operations(&self) -> u64 {
        self.lock().ops
    }

    /// Simulates a power loss (cut and restored at once): every file keeps
    /// its synced bytes plus what `mode` says of the rest; every name goes
    /// back to what its directory's last fsync made durable; handles opened
    /// before stay dead.
    pub fn power_loss(&self, mode: PowerLoss) {
        self.stop_now(Stop::PowerLoss(mode));
    }

    /// A power loss after which the directory changes not yet fsynced
    /// happen to have reached the disk anyway (renames and new names
    /// survive): the other outcome a program must be ready for.
    pub fn power_loss_keeping_names(&self, mode: PowerLoss) {
        self.stop_now(Stop::PowerLossKeepingNames(mode));
    }

    /// Stops the program now as `how` says, and restarts the machine:
    /// handles opened before stay dead.
    pub fn stop_now(&self, how: Stop) {
        let mut s = self.lock();
        s.stop(how);
        s.off = false;
    }

    /// True while the program is stopped by a [`Fault::Stop`].
    pub fn is_off(&self) -> bool {
        self.lock().off
    }

    /// Restarts after a [`Fault::Stop`]: operations work again, except
    /// through handles opened before the stop, or through a view made by
    /// [`FaultyIo::process`] before it.
    pub fn power_on(&self) {
        self.lock().off = false;
    }

    /// A view of this file system for one run of a program: once the
    /// program is stopped ([`Fault::Stop`], [`FaultyIo::stop_now`], a power
    /// loss), every operation through it fails with EIO, as a dead process
    /// does nothing more; its background threads cannot touch the files
    /// the next run sees.
    pub fn process(&self) -> FaultyIo {
        FaultyIo {
            state: Arc::clone(&self.state),
            epoch: Some(self.lock().epoch),
        }
    }

    /// A disk that lies: fsyncs of files (`data`) or of directories
    /// (`dirs`) report success without making anything durable. Only for
    /// proving that a test notices a missing fsync.
    pub fn set_lying_disk(&self, data: bool, dirs: bool) {
        let mut s = self.lock();
        s.lying_data_sync = data;
        s.lying_dir_sync = dirs;
    }

    /// The current contents of `path` (as the running process sees them).
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let s = self.lock();
        let ino = s.names.get(path)?;
        s.inodes.get(ino).map(|f| f.data.clone())
    }

    /// Replaces the file at `path` with `data` (a new inode, fully synced,
    /// its name durable), for damage tests.
    pub fn set_contents(&self, path: &Path, data: Vec<u8>) {
        let mut s = self.lock();
        let synced_len = data.len();
        let ino = s.new_inode(Inode {
            data,
            synced_len,
            lost: Vec::new(),
        });
        s.names.insert(path.to_path_buf(), ino);
        s.durable_names.insert(path.to_path_buf(), ino);
    }
}

fn errno_error(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

struct FaultyFile {
    io: FaultyIo,
    inode: u64,
    epoch: u64,
}

struct FaultySync {
    io: FaultyIo,
    inode: u64,
    epoch: u64,
}

impl SyncHandle for FaultySync {
    fn sync_data(&self) -> io::Result<()> {
        let mut s = self.io.lock();
        s.operation(Some(self.epoch))?;
        s.syncs += 1;
        let n = s.syncs;
        let delay_ms = s.faults.iter().find_map(|f| match f {
            Fault::SlowSync { nth, delay_ms } if *nth == n => Some(*delay_ms),
            _ => None,
        });
        if let Some(delay_ms) = delay_ms {
            // Sleep without holding the file system's lock: writes may go
            // on meanwhile, as on a real disk.
            drop(s);
            std::thread::sleep(std::time::Duration::from_millis(delay_ms));
            s = self.io.lock();
            s.check_power(Some(self.epoch))?;
        }
        let failure = s.faults.iter().find_map(|f| match f {
            Fault::FailSync { nth, errno } if *nth == n => Some(*errno),
            _ => None,
        });
        let lying = s.lying_data_sync;
        let Some(inode) = s.inodes.get_mut(&self.inode) else {
            return Ok(());
        };
        if let Some(errno) = failure {
            // Linux drops the dirty pages an fsync failed to write.
            let range = (inode.synced_len, inode.data.len());
            if range.0 < range.1 {
                inode.lost.push(range);
            }
            return Err(errno_error(errno));
        }
        if !lying {
            inode.synced_len = inode.data.len();
        }
        Ok(())
    }
}

impl AppendFile for FaultyFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut s = self.io.lock();
        s.operation(Some(self.epoch))?;
        s.writes += 1;
        let n = s.writes;
        if let Some(errno) = s.write_failing {
            return Err(errno_error(errno));
        }
        let mut limit = buf.len();
        for fault in s.faults.clone() {
            match fault {
                Fault::FailWrite { nth, errno, sticky } if nth == n => {
                    if sticky {
                        s.write_failing = Some(errno);
                    }
                    return Err(errno_error(errno));
                }
                Fault::ShortWrite { nth, bytes } if nth == n => limit = bytes.min(buf.len()),
                _ => {}
            }
        }
        let inode = s.inodes.entry(self.inode).or_default();
        inode.data.extend_from_slice(&buf[..limit]);
        Ok(limit)
    }

    fn len(&self) -> io::Result<u64> {
        let s = self.io.lock();
        s.check_power(Some(self.epoch))?;
        Ok(s.inodes.get(&self.inode).map_or(0, |f| f.data.len() as u64))
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        let mut s = self.io.lock();
        s.operation(Some(self.epoch))?;
        let inode = s.inodes.entry(self.inode).or_default();
        inode.data.resize(len as usize, 0);
        inode.synced_len = inode.synced_len.min(inode.data.len());
        Ok(())
    }

    fn syncer(&self) -> io::Result<Arc<dyn SyncHandle>> {
        Ok(Arc::new(FaultySync {
            io: self.io.clone(),
            inode: self.inode,
            epoch: self.epoch,
        }))
    }
}

impl Io for FaultyIo {
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
        let mut s = self.lock();
        s.operation(self.epoch)?;
        let inode = match s.names.get(path) {
            Some(&ino) => ino,
            None => {
                let ino = s.new_inode(Inode::default());
                s.names.insert(path.to_path_buf(), ino);
                ino
            }
        };
        let epoch = s.epoch;
        drop(s);
        Ok(Box::new(FaultyFile {
            io: self.clone(),
            inode,
            epoch,
        }))
    }

    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        let s = self.lock();
        s.check_power(self.epoch)?;
        let ino = s.inode_of(path)?;
        Ok(s.inodes
            .get(&ino)
            .map(|f| f.data.clone())
            .unwrap_or_default())
    }

    fn read_at(&self, path: &Path, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let s = self.lock();
        s.check_power(self.epoch)?;
        let ino = s.inode_of(path)?;
        let Some(file) = s.inodes.get(&ino) else {
            return Ok(0);
        };
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(file.data.len());
        let n = buf.len().min(file.data.len() - start);
        buf[..n].copy_from_slice(&file.data[start..start + n]);
        Ok(n)
    }

    fn exists(&self, path: &Path) -> bool {
        self.lock().names.contains_key(path)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.operation(self.epoch)?;
        // The inode lives on for handles that have it open.
        s.names
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.operation(self.epoch)?;
        s.renames += 1;
        let n = s.renames;
        if let Some(errno) = s.faults.iter().find_map(|f| match f {
            Fault::FailRename { nth, errno } if *nth == n => Some(*errno),
            _ => None,
        }) {
            return Err(errno_error(errno));
        }
        let ino = s.inode_of(from)?;
        s.names.remove(from);
        s.names.insert(to.to_path_buf(), ino);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.operation(self.epoch)?;
        s.dir_syncs += 1;
        let n = s.dir_syncs;
        if let Some(errno) = s.faults.iter().find_map(|f| match f {
            Fault::FailDirSync { nth, errno } if *nth == n => Some(*errno),
            _ => None,
        }) {
            return Err(errno_error(errno));
        }
        if s.lying_dir_sync {
            return Ok(());
        }
        let live: Vec<(PathBuf, u64)> = s
            .names
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        s.durable_names.retain(|p, _| p.parent() != Some(dir));
        s.durable_names.extend(live);
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let s = self.lock();
        s.check_power(self.epoch)?;
        Ok(s.names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut s = self.lock();
        s.operation(self.epoch)?;
        let ino = s.inode_of(path)?;
        let lying = s.lying_data_sync;
        let file = s.inodes.entry(ino).or_default();
        file.data.truncate(len as usize);
        if !lying {
            file.synced_len = file.data.len();
        } else {
            file.synced_len = file.synced_len.min(file.data.len());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_loss_keeps_only_synced_bytes_of_durable_files() {
        let io = FaultyIo::new();
        let dir = Path::new("/d");
        let path = dir.join("f");
        let mut f = io.open_append(&path).unwrap();
        f.write(b"hello ").unwrap();
        f.syncer().unwrap().sync_data().unwrap();
        io.sync_dir(dir).unwrap();
        f.write(b"world").unwrap();
        io.power_loss(PowerLoss::Torn { keep: 2 });
        assert_eq!(io.contents(&path).unwrap(), b"hello wo");
        let never_synced_dir = dir.join("g");
        io.open_append(&never_synced_dir)
            .unwrap()
            .write(b"x")
            .unwrap();
        io.power_loss(PowerLoss::DropUnsynced);
        assert!(!io.exists(&never_synced_dir));
    }

    #[test]
    fn injected_faults_fire_once_or_stick() {
        let io = FaultyIo::new();
        let mut f = io.open_append(Path::new("/d/f")).unwrap();
        io.inject(Fault::FailWrite {
            nth: 2,
            errno: 28,
            sticky: false,
        });
        assert!(f.write(b"a").is_ok());
        assert_eq!(f.write(b"b").unwrap_err().raw_os_error(), Some(28));
        assert!(f.write(b"c").is_ok());
        io.inject(Fault::FailWrite {
            nth: 1,
            errno: 28,
            sticky: true,
        });
        assert!(f.write(b"d").is_err());
        assert!(f.write(b"e").is_err());
        io.clear_faults();
        assert_eq!(f.write(b"fg").unwrap(), 2);
        io.inject(Fault::ShortWrite { nth: 1, bytes: 1 });
        assert_eq!(f.write(b"hij").unwrap(), 1);
        assert_eq!(io.contents(Path::new("/d/f")).unwrap(), b"acfgh");
    }

    #[test]
    fn a_handle_keeps_its_inode_across_rename_over_and_unlink() {
        let io = FaultyIo::new();
        let dir = Path::new("/d");
        let (old, new) = (dir.join("aof"), dir.join("temp"));
        let mut old_handle = io.open_append(&old).unwrap();
        old_handle.write(b"old").unwrap();
        io.open_append(&new).unwrap().write(b"new").unwrap();
        io.rename(&new, &old).unwrap();
        old_handle.write(b" and more").unwrap();
        // The name now refers to the new inode; the old handle wrote to a
        // file without a name.
        assert_eq!(io.contents(&old).unwrap(), b"new");
        assert_eq!(old_handle.len().unwrap(), 12);
        let mut h = io.open_append(&old).unwrap();
        io.remove(&old).unwrap();
        h.write(b"!").unwrap();
        assert!(!io.exists(&old));
        assert_eq!(h.len().unwrap(), 4);
    }

    #[test]
    fn an_unsynced_rename_is_undone_whole_by_a_power_loss() {
        let io = FaultyIo::new();
        let dir = Path::new("/d");
        let (name, temp) = (dir.join("aof"), dir.join("temp"));
        io.set_contents(&name, b"old".to_vec());
        let mut t = io.open_append(&temp).unwrap();
        t.write(b"new").unwrap();
        t.syncer().unwrap().sync_data().unwrap();
        io.rename(&temp, &name).unwrap();
        io.inject(Fault::FailDirSync { nth: 1, errno: 5 });
        assert!(io.sync_dir(dir).is_err());
        io.power_loss(PowerLoss::DropUnsynced);
        assert_eq!(io.contents(&name).unwrap(), b"old");
        assert!(!io.exists(&temp));
        // Handles from before the power loss are dead.
        assert!(t.write(b"x").is_err());
        // Kept names: the other outcome.
        let mut t = io.open_append(&temp).unwrap();
        t.write(b"new").unwrap();
        t.syncer().unwrap().sync_data().unwrap();
        io.rename(&temp, &name).unwrap();
        io.power_loss_keeping_names(PowerLoss::DropUnsynced);
        assert_eq!(io.contents(&name).unwrap(), b"new");
    }

    #[test]
    fn bytes_whose_fsync_failed_are_lost_even_after_a_later_fsync() {
        let io = FaultyIo::new();
        let dir = Path::new("/d");
        let path = dir.join("f");
        let mut f = io.open_append(&path).unwrap();
        io.sync_dir(dir).unwrap();
        f.write(b"abc").unwrap();
        let sync = f.syncer().unwrap();
        sync.sync_data().unwrap();
        f.write(b"def").unwrap();
        io.inject(Fault::FailSync { nth: 1, errno: 5 });
        assert!(sync.sync_data().is_err());
        f.write(b"ghi").unwrap();
        sync.sync_data().unwrap();
        io.power_loss(PowerLoss::DropUnsynced);
        assert_eq!(io.contents(&path).unwrap(), b"abc\0\0\0ghi");
    }

    #[test]
    fn a_power_cut_fails_the_operation_and_everything_after_until_power_on() {
        let io = FaultyIo::new();
        let dir = Path::new("/d");
        let path = dir.join("f");
        let mut f = io.open_append(&path).unwrap();
        io.sync_dir(dir).unwrap();
        f.write(b"abc").unwrap();
        f.syncer().unwrap().sync_data().unwrap();
        io.inject(Fault::Stop {
            nth_op: 2,
            how: Stop::PowerLoss(PowerLoss::DropUnsynced),
        });
        f.write(b"def").unwrap();
        assert!(f.syncer().unwrap().sync_data().is_err());
        assert!(io.is_off());
        assert!(io.open_append(&dir.join("g")).is_err());
        assert!(f.write(b"x").is_err());
        io.power_on();
        assert!(f.write(b"x").is_err(), "a handle from before the cut");
        assert_eq!(io.contents(&path).unwrap(), b"abc");
    }

    #[test]
    fn a_crash_keeps_every_byte_but_stops_the_process_view() {
        let io = FaultyIo::new();
        let dir = Path::new("/d");
        let path = dir.join("f");
        let run = io.process();
        let mut f = run.open_append(&path).unwrap();
        f.write(b"abc").unwrap();
        io.stop_now(Stop::Crash);
        assert!(f.write(b"x").is_err());
        assert!(run.rename(&path, &dir.join("g")).is_err());
        assert_eq!(io.contents(&path).unwrap(), b"abc");
        assert!(io.process().open_append(&path).is_ok());
    }

    #[test]
    fn a_lying_disk_makes_nothing_durable() {
        let io = FaultyIo::new();
        let dir = Path::new("/d");
        let path = dir.join("f");
        io.set_lying_disk(true, true);
        let mut f = io.open_append(&path).unwrap();
        f.write(b"abc").unwrap();
        f.syncer().unwrap().sync_data().unwrap();
        io.sync_dir(dir).unwrap();
        io.power_loss(PowerLoss::DropUnsynced);
        assert!(!io.exists(&path));
    }
}
