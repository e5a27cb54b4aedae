//! `cosignature/v1` (`c2sp.org/tlog-cosignature`, Ed25519, signature type `0x04`).
//!
//! ```text
//! signed message = "cosignature/v1\n" ‖ "time " decimal(timestamp) "\n" ‖ checkpoint text
//! signature      = u64be(timestamp) ‖ Ed25519(message)           (72 bytes after the key ID)
//! ```

/// The message a cosigner signs over a checkpoint's text at `timestamp` (POSIX seconds).
pub fn message(text: &str, timestamp: u64) -> String {
    format!("cosignature/v1\ntime {timestamp}\n{text}")
}
