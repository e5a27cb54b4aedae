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
