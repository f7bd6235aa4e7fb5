//! The I/O layer under every persistence file operation.
//!
//! [`Io`] is the only way `persist` touches the file system, so tests can
//! swap in [`FaultyIo`]: an in-memory file system that fails chosen writes
//! or fsyncs (EIO, ENOSPC, short writes) and simulates power loss by
//! dropping or tearing whatever was not fsynced.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// An open file that is appended to.
pub trait AppendFile: Send {
    /// Appends `buf` (may write less, like `write(2)`).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// True when the file holds no bytes.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Truncates (or extends) to `len` bytes; the next write appends there.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
    /// A handle that fsyncs this file from another thread.
    fn syncer(&self) -> io::Result<Arc<dyn SyncHandle>>;
}

/// Something that can `fdatasync` a file, shareable across threads.
pub trait SyncHandle: Send + Sync {
    /// Makes every byte written so far durable.
    fn sync_data(&self) -> io::Result<()>;
}

/// File-system operations used by persistence.
pub trait Io: Send + Sync {
    /// Opens `path` for appending, creating it when absent.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>>;
    /// Reads the whole file.
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Reads up to `buf.len()` bytes at `offset`; returns how many (0 at
    /// the end). The AOF rewrite copies the old file's tail with it.
    fn read_at(&self, path: &Path, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let data = self.read_all(path)?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }
    /// The whole file as bytes for reading, memory-mapped where possible
    /// so a large file is not copied into the heap.
    fn map(&self, path: &Path) -> io::Result<FileBytes> {
        self.read_all(path).map(FileBytes::Owned)
    }
    /// True when `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Atomically renames `from` to `to` (same directory).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the directory entries of `dir` durable (after create/rename).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Names of the entries in `dir`.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Truncates `path` to `len` bytes and makes that durable.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// True for the real file system (the directory lock applies there).
    fn is_real(&self) -> bool {
        false
    }
}

/// A file's contents: mapped, or read into memory.
pub enum FileBytes {
    /// A read-only memory map of the file.
    Mapped(memmap2::Mmap),
    /// The bytes, copied.
    Owned(Vec<u8>),
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => m,
            FileBytes::Owned(v) => v,
        }
    }
}

// ---------------------------------------------------------------------------
// The real file system.

/// [`Io`] over the real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealIo;

struct RealFile {
    file: File,
}

struct RealSync {
    file: File,
}

impl SyncHandle for RealSync {
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

impl AppendFile for RealFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        // O_APPEND writes go to the end, so truncating is enough.
        self.file.set_len(len)
    }

    fn syncer(&self) -> io::Result<Arc<dyn SyncHandle>> {
        Ok(Arc::new(RealSync {
            file: self.file.try_clone()?,
        }))
    }
}

impl Io for RealIo {
    fn is_real(&self) -> bool {
        true
    }

    fn map(&self, path: &Path) -> io::Result<FileBytes> {
        let file = File::open(path)?;
        if file.metadata()?.len() == 0 {
            return Ok(FileBytes::Owned(Vec::new())); // empty files cannot be mapped
        }
        // SAFETY: the data directory is locked by this engine, so no other
        // hozon process modifies the file while it is mapped; the map is
        // dropped before the engine truncates or appends to the file.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        Ok(FileBytes::Mapped(map))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Box::new(RealFile { file }))
    }

    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut data = Vec::new();
        File::open(path)?.read_to_end(&mut data)?;
        Ok(data)
    }

    fn read_at(&self, path: &Path, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let file = File::open(path)?;
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(len)?;
        file.sync_all()
    }
}

// ---------------------------------------------------------------------------
// The fault-injecting file system.

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
    /// The Nth fsync fails with this errno (and, like Linux, the dirty
    /// data it was meant to persist may be lost at the next power loss).
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
}

#[derive(Debug, Default, Clone)]
struct MemFile {
    data: Vec<u8>,
    /// Bytes known durable (prefix length of `data`).
    synced_len: usize,
}

#[derive(Debug, Default)]
struct FaultState {
    files: BTreeMap<PathBuf, MemFile>,
    /// Directory entries made durable: paths that survive a power loss.
    durable_names: BTreeMap<PathBuf, ()>,
    faults: Vec<Fault>,
    writes: u64,
    syncs: u64,
    write_failing: Option<i32>,
}

/// An in-memory file system with injectable faults and power loss.
#[derive(Debug, Default, Clone)]
pub struct FaultyIo {
    state: Arc<Mutex<FaultState>>,
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

    /// Simulates a power loss: every file keeps its synced bytes plus what
    /// `mode` says of the rest; files whose directory entry was never made
    /// durable disappear.
    pub fn power_loss(&self, mode: PowerLoss) {
        let mut s = self.lock();
        let durable = s.durable_names.clone();
        s.files.retain(|path, _| durable.contains_key(path));
        for file in s.files.values_mut() {
            let unsynced = file.data.len() - file.synced_len;
            let (keep, garbage) = match mode {
                PowerLoss::DropUnsynced => (0, 0),
                PowerLoss::Torn { keep } => (keep.min(unsynced), 0),
                PowerLoss::TornWithGarbage { keep, garbage } => (keep.min(unsynced), garbage),
            };
            file.data.truncate(file.synced_len + keep);
            file.data.extend(std::iter::repeat_n(0xA5u8, garbage));
            file.synced_len = file.data.len();
        }
        s.faults.clear();
        s.write_failing = None;
    }

    /// The current contents of `path` (as the running process sees them).
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        self.lock().files.get(path).map(|f| f.data.clone())
    }

    /// Replaces the contents of `path` (fully synced and durable), for
    /// damage tests.
    pub fn set_contents(&self, path: &Path, data: Vec<u8>) {
        let mut s = self.lock();
        let synced_len = data.len();
        s.files
            .insert(path.to_path_buf(), MemFile { data, synced_len });
        s.durable_names.insert(path.to_path_buf(), ());
    }
}

fn errno_error(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

struct FaultyFile {
    io: FaultyIo,
    path: PathBuf,
}

struct FaultySync {
    io: FaultyIo,
    path: PathBuf,
}

impl SyncHandle for FaultySync {
    fn sync_data(&self) -> io::Result<()> {
        let mut s = self.io.lock();
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
        }
        if let Some(errno) = s.faults.iter().find_map(|f| match f {
            Fault::FailSync { nth, errno } if *nth == n => Some(*errno),
            _ => None,
        }) {
            return Err(errno_error(errno));
        }
        if let Some(file) = s.files.get_mut(&self.path) {
            file.synced_len = file.data.len();
        }
        Ok(())
    }
}

impl AppendFile for FaultyFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut s = self.io.lock();
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
        let file = s.files.entry(self.path.clone()).or_default();
        file.data.extend_from_slice(&buf[..limit]);
        Ok(limit)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self
            .io
            .lock()
            .files
            .get(&self.path)
            .map_or(0, |f| f.data.len() as u64))
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        let mut s = self.io.lock();
        let file = s.files.entry(self.path.clone()).or_default();
        file.data.resize(len as usize, 0);
        file.synced_len = file.synced_len.min(file.data.len());
        Ok(())
    }

    fn syncer(&self) -> io::Result<Arc<dyn SyncHandle>> {
        Ok(Arc::new(FaultySync {
            io: self.io.clone(),
            path: self.path.clone(),
        }))
    }
}

impl Io for FaultyIo {
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
        self.lock().files.entry(path.to_path_buf()).or_default();
        Ok(Box::new(FaultyFile {
            io: self.clone(),
            path: path.to_path_buf(),
        }))
    }

    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.lock()
            .files
            .get(path)
            .map(|f| f.data.clone())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }

    fn read_at(&self, path: &Path, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let state = self.lock();
        let file = state
            .files
            .get(path)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(file.data.len());
        let n = buf.len().min(file.data.len() - start);
        buf[..n].copy_from_slice(&file.data[start..start + n]);
        Ok(n)
    }

    fn exists(&self, path: &Path) -> bool {
        self.lock().files.contains_key(path)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.durable_names.remove(path);
        s.files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        let file = s
            .files
            .remove(from)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))?;
        s.files.insert(to.to_path_buf(), file);
        // Until the directory is synced, a power loss may undo the rename.
        s.durable_names.remove(to);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        let names: Vec<PathBuf> = s
            .files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .cloned()
            .collect();
        s.durable_names.retain(|p, _| p.parent() != Some(dir));
        for name in names {
            s.durable_names.insert(name, ());
        }
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        Ok(self
            .lock()
            .files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut s = self.lock();
        let file = s
            .files
            .get_mut(path)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))?;
        file.data.truncate(len as usize);
        file.synced_len = file.data.len();
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
}
