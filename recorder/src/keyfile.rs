//! Secret key files: created with mode 0600, refused when others can read them.

use std::{io::Write, os::unix::fs::OpenOptionsExt, path::Path};

use zeroize::Zeroizing;

use crate::RecordError;

fn key_err(path: &Path, message: impl Into<String>) -> RecordError {
    RecordError::KeyFile {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// Creates `path` with mode 0600 (failing if it exists) and writes `secret` to it, synced.
pub fn write_key_file(path: &Path, secret: &[u8]) -> Result<(), RecordError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| key_err(path, format!("cannot create: {e}")))?;
    f.write_all(secret)
        .map_err(|e| key_err(path, format!("cannot write: {e}")))?;
    f.sync_all()
        .map_err(|e| key_err(path, format!("cannot sync: {e}")))
}

/// Refuses a secret file that group or others may read or write (or that cannot be read):
/// why, in words.
pub fn check_private(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!("mode is {mode:o}; it must be 600 (chmod 600 it)"));
    }
    Ok(())
}

/// Reads a 32-byte secret; refuses a file that group or others may read or write.
pub fn read_key_file(path: &Path) -> Result<Zeroizing<[u8; 32]>, RecordError> {
    check_private(path).map_err(|m| key_err(path, m))?;
    let bytes = Zeroizing::new(
        std::fs::read(path).map_err(|e| key_err(path, format!("cannot read: {e}")))?,
    );
    let mut out = Zeroizing::new([0u8; 32]);
    if bytes.len() != 32 {
        return Err(key_err(
            path,
            format!("expected 32 bytes, found {}", bytes.len()),
        ));
    }
    out.copy_from_slice(&bytes);
    Ok(out)
}
