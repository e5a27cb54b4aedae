//! The research harness end to end: `afr-eval` and `afr`'s hand-over to it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on purpose"
)]

use std::process::Command;

mod eval;
mod matrix;
mod rq;

fn afr_eval() -> Command {
    Command::new(env!("CARGO_BIN_EXE_afr-eval"))
}

use afr_testkit::ok;

/// `afr gen` is `afr-eval gen`: the same bytes, through `afr`'s hand-over. The `afr` binary
/// is the one `cargo test --workspace` builds beside this test's `afr-eval`.
#[test]
fn afr_hands_research_commands_to_afr_eval_and_refuses_unknown_ones() {
    let dir = std::path::Path::new(env!("CARGO_BIN_EXE_afr-eval"))
        .parent()
        .unwrap()
        .to_owned();
    let afr = dir.join("afr");
    assert!(
        afr.exists(),
        "{} missing: run the workspace's tests (cargo test --workspace)",
        afr.display()
    );
    let direct = ok(afr_eval().args(["gen", "--events", "25", "--seed", "3"])).stdout;
    let handed = ok(Command::new(&afr).args(["gen", "--events", "25", "--seed", "3"])).stdout;
    assert_eq!(direct, handed);
    assert_eq!(String::from_utf8(direct).unwrap().lines().count(), 25);

    let out = Command::new(&afr).arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown command `frobnicate`"));
}

/// `afr bench serve` runs end to end against a real `afr serve` (small counts) and reports each
/// figure the issue asks for, in process and through the server.
#[test]
fn bench_serve_measures_the_server_beside_the_recorder() {
    let out = ok(afr_eval().args([
        "bench",
        "serve",
        "--json",
        "--latency-events",
        "200",
        "--posts",
        "400",
        "--post-clients",
        "4",
        "--batched-events",
        "2000",
        "--batch-clients",
        "2",
        "--warmup",
        "20",
    ]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for side in [
        &v["batches"]["in_process_submit"],
        &v["batches"]["ndjson_post"],
        &v["concurrent_single"]["in_process_record"],
        &v["concurrent_single"]["single_post"],
    ] {
        assert!(side["events_per_s"].as_f64().unwrap() > 0.0, "{v}");
        assert!(side["p99_us"].as_f64().unwrap() >= side["median_us"].as_f64().unwrap());
    }
    assert!(v["added_latency_us"]["p99"].as_f64().is_some(), "{v}");
    // Every target is reported (met or not: a debug build on a busy machine is not the bench).
    for target in ["batched", "single", "p99_added"] {
        assert!(v["met"][target].is_boolean(), "{target}: {v}");
    }
}
