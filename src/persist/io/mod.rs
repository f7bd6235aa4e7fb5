//! The I/O layer under every persistence file operation.
//!
//! [`Io`] is the only way `persist` touches the file system, so tests can
//! swap in [`FaultyIo`] (see `faulty.rs`): an in-memory file system with
//! inode semantics that fails chosen writes, fsyncs or directory fsyncs
//! (EIO, ENOSPC, short writes), stops the program (a crash or a power
//! loss) at any chosen operation, and simulates power loss by dropping or
//! tearing whatever was not fsynced. [`DurableFile`] and [`commit`] are
//! the one temp file → fsync → rename → directory fsync sequence.

mod durable;
mod faulty;

pub use durable::{commit, CommitError, DurableFile, FileError, SYNC_EVERY_BYTES};
pub use faulty::{Fault, FaultyIo, PowerLoss, Stop};

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

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
