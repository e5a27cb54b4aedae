//! Integration tests of the AFR format core: spec vectors from outside (RFC 6962), the
//! contract's vectors, our own published vectors, the event JSON Schema, and a short fuzz run.
//!
//! One binary, as the style guide asks; run it alone with `cargo test -p afr-core --test it`.
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests: a failed step is a failed test"
)]

mod approval_vectors;
mod contract_vectors;
mod event_schema;
mod fuzz_smoke;
mod rfc6962;
mod spec_vectors;
mod stream;

/// The round-trip oracles shared with the `fuzz/` crate, so the libFuzzer targets and the
/// stable smoke run in [`fuzz_smoke`] check exactly the same properties.
#[path = "../../../fuzz/src/oracles.rs"]
mod oracles;

use std::path::{Path, PathBuf};

/// The `core/` directory.
pub fn core_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace root (`core/..`).
pub fn workspace_dir() -> PathBuf {
    core_dir().join("..")
}

/// The shared folder beside the workspace: `$AFR_SHARED_DIR`, else `<workspace>/../shared`.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("AFR_SHARED_DIR") {
        Some(d) => PathBuf::from(d),
        None => workspace_dir().join("../shared"),
    }
}

/// Reads a file that must exist, naming it when it does not.
pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}
