//! End-to-end tests of the `afr-verify` binary on logs built with the core crate alone.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on purpose"
)]

mod anvil;
mod approvals;
mod case;
mod hardhat;
mod hostile_rpc;
mod report;
mod rpc_proxy;
mod testdata;

use std::process::Command;

use afr_core::{
    Category, EpochHeader, Hash32, Record,
    crypto::{MasterKey, Slot, encrypt},
    export::LogWriter,
    hash::leaf_hash,
    merkle::CompactRange,
};

const RECORDER: [u8; 20] = [0x5a; 20];

/// An honest export of `epochs` epochs of 4 events each; returns it and its epoch roots.
fn honest_log(epochs: u64) -> (Vec<u8>, Vec<Hash32>) {
    let master = MasterKey::from_bytes([3; 32]);
    let mut w = LogWriter::start(&RECORDER, 1);
    let (mut prev, mut prev_root, mut roots) = (Hash32::ZERO, Hash32::ZERO, Vec::new());
    for e in 0..epochs {
        let ek = master.epoch_key(&[e as u8; 32], &RECORDER, e);
        let mut tree = CompactRange::new();
        let mut frames = Vec::new();
        for i in 0..4 {
            let seq = e * 4 + i;
            let s = encrypt(
                &ek.event_key(seq),
                &Slot {
                    recorder: RECORDER,
                    epoch: e,
                    seq,
                },
                [0; 12],
                b"\xa0",
            );
            let r = Record {
                recorder: RECORDER,
                seq,
                epoch: e,
                timestamp_us: seq,
                category: Category::Api,
                lane: None,
                concurrent_with: Vec::new(),
                prev_hash: prev,
                payload_commitment: s.commitment(),
            };
            let b = r.encode();
            prev = leaf_hash(&b);
            tree.push(prev);
            frames.push((b, s.encode()));
        }
        let h = EpochHeader {
            recorder: RECORDER,
            epoch: e,
            first_seq: e * 4,
            count: 4,
            merkle_root: tree.root(),
            chain_head: prev,
            prev_epoch_root: prev_root,
            sealed_at_us: e,
        };
        w.epoch(&h.encode());
        for (r, p) in &frames {
            w.event(r, Some(p));
        }
        prev_root = h.root();
        roots.push(prev_root);
    }
    w.tail(0);
    w.end(epochs * 4, epochs);
    (w.take(), roots)
}

fn anchors_file(dir: &std::path::Path, name: &str, roots: &[Hash32]) -> std::path::PathBuf {
    let map: serde_json::Map<String, serde_json::Value> = roots
        .iter()
        .enumerate()
        .map(|(e, r)| {
            (
                e.to_string(),
                serde_json::json!({"root": format!("0x{r}"), "tx": format!("0x{:064x}", e + 1),
                    "block": 9, "log_index": e}),
            )
        })
        .collect();
    let v = serde_json::json!({
        "version": 2, "chain_id": 31337,
        "contract": afr_core::deployment::ANCHOR_ADDRESS.to_ascii_lowercase(),
        "recorder": format!("0x{}", hex::encode(RECORDER)), "block": 9,
        "head": roots.len().checked_sub(1), "roots": map,
    });
    let p = dir.join(name);
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

/// Runs `afr-verify ARGS --json`, pinning chain 31337 and [`RECORDER`] where anchors are read.
/// Asserts an incomplete verdict (exit 2) whose `missing` part mentions `what`.
fn assert_incomplete(code: i32, v: &serde_json::Value, what: &str) {
    assert_eq!(code, 2, "{v}");
    assert!(v["missing"].to_string().contains(what), "{v}");
}

fn verify(args: &[&std::ffi::OsStr]) -> (i32, serde_json::Value) {
    let rec = format!("0x{}", hex::encode(RECORDER));
    let pins: Vec<&str> = if args.iter().any(|a| *a == "--anchors") {
        // The files here are version 2 (roots without proofs): taken as they are.
        vec![
            "--chain-id",
            "31337",
            "--recorder",
            &rec,
            "--unproven-anchors",
        ]
    } else {
        vec![]
    };
    let out = Command::new(env!("CARGO_BIN_EXE_afr-verify"))
        .args(args)
        .args(&pins)
        .arg("--json")
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap(), v)
}

#[test]
fn outcomes_follow_the_anchors() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, roots) = honest_log(5);
    let file = tmp.path().join("log.afr");
    std::fs::write(&file, &log).unwrap();
    let f = file.as_os_str();

    // No anchors: everything checks, but the roots are not pinned.
    let (code, v) = verify(&["log".as_ref(), f]);
    assert_eq!(
        (code, v["outcome"].as_str()),
        (2, Some("incomplete")),
        "{v}"
    );

    // All five anchored: verified, and the report says it trusted the file.
    let all = anchors_file(tmp.path(), "all.json", &roots);
    let (code, v) = verify(&["log".as_ref(), f, "--anchors".as_ref(), all.as_os_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["checks"]["anchored-root"], 5);
    assert!(v["notes"].to_string().contains("TRUSTED"));

    // Only three anchored: the last two are inside the compromise window.
    let three = anchors_file(tmp.path(), "three.json", &roots[..3]);
    let (code, v) = verify(&["log".as_ref(), f, "--anchors".as_ref(), three.as_os_str()]);
    assert_incomplete(code, &v, "[3..=4]");

    // A different anchored root: a fork or an edit after anchoring.
    let mut forked = roots.clone();
    forked[2].0[0] ^= 1;
    let fork = anchors_file(tmp.path(), "fork.json", &forked);
    let (code, v) = verify(&["log".as_ref(), f, "--anchors".as_ref(), fork.as_os_str()]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["first_failure"]["check"], "anchored-root");
    assert_eq!(v["first_failure"]["location"], "epoch 2");

    // The chain holds more epochs than the log: an export taken earlier (or one cut short,
    // which looks the same). Nothing in it was altered: incomplete, not tampered.
    let (short, _) = honest_log(3);
    let short_file = tmp.path().join("short.afr");
    std::fs::write(&short_file, short).unwrap();
    let (code, v) = verify(&[
        "log".as_ref(),
        short_file.as_os_str(),
        "--anchors".as_ref(),
        all.as_os_str(),
    ]);
    assert_incomplete(
        code,
        &v,
        "the log ends at epoch 2; the chain holds anchored epochs up to at least 4",
    );

    // A flipped byte in the log: tampered before anchors are even consulted.
    let mut bad = log.clone();
    let n = bad.len();
    bad[n / 2] ^= 0x10;
    std::fs::write(&file, bad).unwrap();
    let (code, _) = verify(&["log".as_ref(), f, "--anchors".as_ref(), all.as_os_str()]);
    assert_eq!(code, 1);
}

#[test]
fn usage_and_io_errors_use_their_own_exit_codes() {
    let out = Command::new(env!("CARGO_BIN_EXE_afr-verify"))
        .args(["log"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let out = Command::new(env!("CARGO_BIN_EXE_afr-verify"))
        .args(["log", "/nonexistent/file"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(74));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
    // A malformed pin is a usage error from the library (`VerifyError::Usage`), not I/O.
    let out = Command::new(env!("CARGO_BIN_EXE_afr-verify"))
        .args(["log", "/nonexistent/file", "--recorder", "0xzz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--recorder must be 0x followed by 40 hex digits"),
        "{out:?}"
    );
}

/// `afr-verify --help` (and the help of each verifying command) opens with the pinned
/// invocation: before the usage line, the first example pins the chain and the recorder.
#[test]
fn help_shows_the_pinned_invocation_first() {
    for args in [
        &["--help"][..],
        &["log", "--help"],
        &["bundle", "--help"],
        &["case", "--help"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_afr-verify"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let help = String::from_utf8(out.stdout).unwrap();
        let (before, _) = help.split_once("Usage:").unwrap();
        assert!(
            before.starts_with("Pin what you trust, then verify:\n  afr-verify "),
            "{args:?}: {help}"
        );
        let first = before.lines().nth(1).unwrap();
        assert!(
            first.contains("--chain-id") && first.contains("--recorder"),
            "{args:?}: {first}"
        );
    }
}

#[test]
fn garbage_files_are_tampered_not_crashes() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, junk) in [
        &b""[..],
        b"\xff\xff\xff",
        b"\x84\x67afr-log\x01",
        &[0x9b; 64],
    ]
    .iter()
    .enumerate()
    {
        let p = tmp.path().join(format!("junk{i}"));
        std::fs::write(&p, junk).unwrap();
        for kind in ["log", "bundle"] {
            let (code, v) = verify(&[kind.as_ref(), p.as_os_str()]);
            assert_eq!(code, 1, "{kind} {junk:?}: {v}");
        }
    }
}
