//! The witness's state on disk: per origin, the latest cosigned checkpoint, and the refused
//! but validly signed checkpoints kept as evidence.
//!
//! ```text
//! DIR/lock                                 locked while a witness serves DIR (one writer)
//! DIR/<hex SHA-256(origin)>/checkpoint     the latest cosigned note: the checkpoint as the log
//!                                          signed it, with this witness's cosignature appended
//! DIR/<hex SHA-256(origin)>/refused.log    append-only JSON lines: {"time", "status",
//!                                          "reason", "request"} (the request body verbatim)
//! ```
//!
//! Durability: [`Store::save`] returns only once the new head is on disk (written to a
//! temporary file, synced, renamed over the old one, and the directory synced), so a head
//! that was acknowledged survives a crash, and a crash mid-write leaves the old head whole.
//! The size, root and origin of a head are read back from the note itself, which is checked
//! against its directory's origin when loaded.

use std::{
    fs::{File, OpenOptions},
    io::Write as _,
    os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
};

use afr_core::hash::sha256;
use afr_tlog::{Checkpoint, witness::Head};

/// The head file's name in an origin's directory.
pub const HEAD_FILE: &str = "checkpoint";
/// The evidence file's name in an origin's directory.
pub const REFUSED_FILE: &str = "refused.log";
/// The lock file's name in the state directory.
pub const LOCK_FILE: &str = "lock";

/// Why the state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file-system operation failed.
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// On what.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another witness process holds the state directory.
    #[error("another witness is serving {} (it holds {LOCK_FILE})", .0.display())]
    Locked(PathBuf),
    /// A head file that is not a checkpoint of its directory's origin.
    #[error("{}: {why}; the witness will not start on a state it cannot read (its heads must never roll back)", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_owned();
    move |source| StoreError::Io { what, path, source }
}

/// The lowercase hex SHA-256 of an origin: its directory, and its monitoring path.
pub fn origin_hash(origin: &str) -> String {
    sha256(&[origin.as_bytes()]).to_hex()
}

/// The state directory, locked for this process.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    _lock: File,
}

fn sync_dir(path: &Path) -> Result<(), StoreError> {
    File::open(path)
        .and_then(|d| d.sync_all())
        .map_err(io("sync the directory", path))
}

fn mkdir(path: &Path) -> Result<bool, StoreError> {
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io("create the directory", path)(e)),
    }
}

impl Store {
    /// Opens (creating it, mode 0700) and locks `dir`; fails if another process holds it.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        if mkdir(dir)?
            && let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty())
        {
            sync_dir(parent)?;
        }
        let lock_path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io("open", &lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(StoreError::Locked(dir.to_owned()));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io("lock", &lock_path)(e)),
        }
        Ok(Store {
            dir: dir.to_owned(),
            _lock: lock,
        })
    }

    fn origin_dir(&self, origin: &str) -> PathBuf {
        self.dir.join(origin_hash(origin))
    }

    /// The head of `origin`, if a checkpoint of it was ever cosigned; its directory is created
    /// (and made durable) if missing.
    pub fn load(&self, origin: &str) -> Result<Option<Head>, StoreError> {
        let dir = self.origin_dir(origin);
        if mkdir(&dir)? {
            sync_dir(&self.dir)?;
        }
        let path = dir.join(HEAD_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io("read", &path)(e)),
        };
        let corrupt = |why: String| StoreError::Corrupt {
            path: path.clone(),
            why,
        };
        let (cp, _) = Checkpoint::parse_note(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if cp.origin != origin {
            return Err(corrupt(format!(
                "it holds a checkpoint of {:?}, not {origin:?}",
                cp.origin.chars().take(200).collect::<String>()
            )));
        }
        let note = String::from_utf8(bytes).map_err(|_| corrupt("not UTF-8".into()))?;
        Ok(Some(Head {
            size: cp.size,
            root: cp.root,
            note,
        }))
    }

    /// Makes `head` the head of `origin`, durably: when this returns `Ok`, the new head
    /// survives a crash; on `Err`, the file holds the old head or the new one, whole.
    pub fn save(&self, origin: &str, head: &Head) -> Result<(), StoreError> {
        let dir = self.origin_dir(origin);
        let tmp = dir.join(format!("{HEAD_FILE}.tmp"));
        let path = dir.join(HEAD_FILE);
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o644)
            .open(&tmp)
            .map_err(io("create", &tmp))?;
        f.write_all(head.note.as_bytes())
            .map_err(io("write", &tmp))?;
        f.sync_all().map_err(io("sync", &tmp))?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(io("rename into place", &path))?;
        sync_dir(&dir)
    }

    /// Appends a refused request of `origin` to its evidence file, synced.
    pub fn refused(
        &self,
        origin: &str,
        time: u64,
        status: u16,
        reason: &str,
        request: &str,
    ) -> Result<(), StoreError> {
        let path = self.origin_dir(origin).join(REFUSED_FILE);
        let mut line = serde_json::json!({
            "time": time,
            "status": status,
            "reason": reason.trim_end(),
            "request": request,
        })
        .to_string();
        line.push('\n');
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o644)
            .open(&path)
            .map_err(io("open", &path))?;
        f.write_all(line.as_bytes())
            .map_err(io("append to", &path))?;
        f.sync_data().map_err(io("sync", &path))
    }
}
