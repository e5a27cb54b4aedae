//! The library behind `afr-verify`: anchored roots, the verdict that combines a file's own
//! checks with them, and the tamper matrix that measures what each layer detects.
//!
//! The binary and the matrix share one implementation of the anchored-root comparison
//! ([`verdict::check_anchors`]), so the matrix measures exactly what the tool decides.

pub mod anchors;
pub mod matrix;
pub mod tamper;
pub mod verdict;

pub use verdict::{Verdict, check_anchors, check_recorder, parse_addr};
