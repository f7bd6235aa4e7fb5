//! The data-directory lock: one open engine per directory.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// An exclusive OS lock on `<dir>/LOCK`, held until dropped.
#[derive(Debug)]
pub struct DirLock {
    file: File,
}

impl DirLock {
    /// Locks `dir` (creating it if needed) or fails at once with an error
    /// naming the directory and, when recorded, the holder's pid.
    pub fn acquire(dir: &Path) -> Result<DirLock, crate::Error> {
        std::fs::create_dir_all(dir).map_err(|source| crate::Error::Io {
            context: format!("creating data directory {}", dir.display()),
            source,
        })?;
        let path = dir.join("LOCK");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|source| crate::Error::Io {
                context: format!("opening {}", path.display()),
                source,
            })?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let who = if holder.is_empty() {
                    String::new()
                } else {
                    format!(" (held by pid {holder})")
                };
                return Err(crate::Error::Locked(format!(
                    "data directory {} is in use by another hozon process{who}",
                    dir.display()
                )));
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(crate::Error::Io {
                    context: format!("locking {}", path.display()),
                    source,
                })
            }
        }
        // Record our pid for the error message a second opener gets.
        let _ = file.set_len(0);
        let _ = file.seek(SeekFrom::Start(0));
        let _ = write!(file, "{}", std::process::id());
        let _ = file.sync_data();
        Ok(DirLock { file })
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_fails_naming_dir_and_pid() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path()).unwrap();
        let err = DirLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(err.contains(&dir.path().display().to_string()), "{err}");
        assert!(err.contains(&std::process::id().to_string()), "{err}");
        drop(first);
        DirLock::acquire(dir.path()).unwrap();
    }
}
