//! Round-trip oracles for the AFR fuzz targets; see `oracles.rs` and `README.md`.

pub mod oracles;
