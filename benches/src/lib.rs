//! Criterion benchmarks of the hot pieces live in `benches/benches/`.
