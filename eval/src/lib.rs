//! The research harness behind `afr-eval` (never shipped: `publish = false`, and no product
//! crate depends on it). It reproduces the paper's evaluation on this machine with the real
//! recorder, store, contract and verifier:
//!
//! | module | what |
//! |---|---|
//! | [`synth`] | the seeded synthetic workload (the paper's category mix; in the test kit,
//! |  | which the recorder's own tests use too) |
//! | [`rq1`], [`anchored`] | RQ1: per-event cost of each layer, and with anchoring in flight |
//! | [`cost`] | RQ2: gas from real receipts, dollars per 100K events, compromise window |
//! | [`tamper`], [`matrix`] | RQ3: honest histories, the attack generator, the detection matrix |
//! | [`scenarios`] | RQ4: structured queries vs grep on three synthetic incidents |
//! | [`bench`], [`query_bench`] | benchmarks of the real recorder and of queries |
//! | [`scale_bench`] | the growth curve: 1M and 10M events through every step |
//! | [`serve_bench`] | a real `afr serve` over its socket beside the in-process recorder |
//! | [`witness_bench`] | checkpoints, witness round trips and timestamps per sealed epoch |
//! | [`anchors_bench`] | anchor proofs (#33): added time and bytes per anchored epoch |
//! | [`report`], [`svg`] | `docs/evaluation.md` and its plots |
//!
//! Histories are built through the core's sequencer (`afr_core::sequencer`), like the
//! recorder's, so an attack on them is an attack on what the recorder writes.

pub mod anchored;
pub mod anchors_bench;
pub mod bench;
pub mod cost;
pub mod hook_bench;
pub mod matrix;
pub mod mcp_bench;
pub mod otlp_bench;
pub mod query_bench;
pub mod report;
pub mod rq1;
pub mod scale_bench;
pub mod scenarios;
pub mod serve_bench;
pub mod svg;
pub mod tamper;
pub mod witness_bench;

pub use afr_testkit::synth;

/// Environment variable of the production anchoring key (the `afr` CLI's).
pub const ANCHOR_KEY_ENV: &str = "AFR_ANCHOR_KEY";

/// A single-threaded tokio runtime for the anchorer's async calls.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// `x` with terminal control characters escaped (`afr_core::text::escape`).
pub fn esc(x: impl std::fmt::Display) -> String {
    afr_core::text::escape(&x.to_string()).into_owned()
}
