//! End-to-end tests of the `afr` binary.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on purpose"
)]

use std::{
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use afr_core::verify::{Outcome, verify_log};
use afr_recorder::{Config, Recorder, export_log};

mod anchoring;
mod approvals;
mod case;
mod delegate;
mod escape;
mod hooks;
mod import;
mod mcp;
mod mcp_multi;
mod mcp_peers;
mod otlp;
mod otlp_logs;
mod pipes;
mod proc;
mod producers;
mod query;
mod roots;
mod serve;
mod status_roots;
mod witness;

fn afr(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_afr"));
    c.arg("--dir").arg(dir);
    c
}

/// `afr record -` with `input` on its standard input; its output.
fn record_stdin(dir: &Path, input: &[u8]) -> std::process::Output {
    let mut child = afr(dir)
        .args(["record", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// `n` events of the synthetic workload with `seed`, as JSON lines (what `afr gen` prints).
fn gen_lines(n: u64, seed: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for ev in afr_testkit::synth::generate(n, seed) {
        serde_json::to_writer(&mut out, &ev).unwrap();
        out.push(b'\n');
    }
    out
}

use afr_testkit::ok;

/// A temporary directory holding a fresh recorder (`afr init`), and the recorder's path.
fn initialised() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    ok(afr(&dir).arg("init"));
    (tmp, dir)
}

/// What a `--json` command printed, parsed.
fn stdout_json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runs a `--json` command, asserts it exits with `code`, and returns what it printed, parsed.
fn json_with_code(c: &mut Command, code: i32) -> serde_json::Value {
    let out = c.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout_json(&out)
}

/// `afr import swe-agent --print FILE` on a file it must reject: exit 65 (bad input).
fn import_rejected(dir: &Path, file: &Path) -> std::process::Output {
    let out = afr(dir)
        .args(["import", "swe-agent", "--print"])
        .arg(file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(65));
    out
}

/// `afr status --json`, parsed.
fn status_json(dir: &Path) -> serde_json::Value {
    stdout_json(&ok(afr(dir).args(["status", "--json"])))
}

/// `afr init`, then `n` events of `afr gen` recorded by `afr record` from a file.
fn init_with_synthetic(dir: &Path, n: u64) {
    ok(afr(dir).arg("init"));
    let events = dir.with_extension("jsonl");
    std::fs::write(&events, gen_lines(n, afr_testkit::synth::DEFAULT_SEED)).unwrap();
    ok(afr(dir).arg("record").arg(&events));
}

fn export(dir: &Path) -> Vec<u8> {
    let r = Recorder::open(dir, Config::default()).unwrap();
    let mut out = Vec::new();
    export_log(r.store(), &mut out).unwrap();
    out
}

/// A thread collecting the `(seq, leaf_hash)` of every receipt line `afr record --receipts`
/// prints on `out`, until it closes.
fn receipts_of(
    out: impl std::io::Read + Send + 'static,
) -> std::thread::JoinHandle<Vec<(u64, String)>> {
    std::thread::spawn(move || {
        BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
            .map(|v| {
                (
                    v["seq"].as_u64().unwrap(),
                    v["leaf_hash"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    })
}

/// A tiny deterministic generator for the kill schedule (no extra dependency).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn kill_dash_nine_at_random_moments_never_loses_an_acknowledged_event() {
    let (tmp, dir) = initialised();
    let events = tmp.path().join("events.jsonl");
    std::fs::write(&events, gen_lines(40_000, 9)).unwrap();

    let mut rng = Lcg(0xdead_beef);
    let modes = ["group", "sync", "buffered"];
    let mut acked_total = 0u64;
    for round in 0..50 {
        let mode = modes[round % 3];
        let before = Recorder::open(&dir, Config::default()).unwrap().next_seq();
        let mut child = afr(&dir)
            .args([
                "record",
                "--receipts",
                "--epoch-size",
                "37",
                "--durability",
                mode,
            ])
            .arg(&events)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Read receipts on a thread while the child writes at full speed.
        let reader = receipts_of(stdout);
        std::thread::sleep(Duration::from_millis(30 + rng.next(250)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let acked = reader.join().unwrap();

        // The store opens, stays gapless, verifies, and holds every acknowledged event.
        let r = Recorder::open(&dir, Config::default()).unwrap();
        let next = r.next_seq();
        assert!(next >= before, "round {round}: sequence went backwards");
        if mode != "buffered" {
            for (seq, leaf) in &acked {
                assert!(
                    *seq < next,
                    "round {round} ({mode}): acknowledged event {seq} lost"
                );
                let rec = r.store().record(*seq).unwrap().unwrap();
                assert_eq!(
                    &rec.leaf_hash().to_hex(),
                    leaf,
                    "round {round}: event {seq} differs"
                );
            }
            acked_total += acked.len() as u64;
        }
        drop(r);
        let rep = verify_log(&export(&dir));
        assert_ne!(
            rep.outcome,
            Outcome::Tampered,
            "round {round} ({mode}): {:?}",
            rep.first_failure
        );
        assert_eq!(rep.events, next);
    }
    assert!(
        acked_total > 100,
        "the child acknowledged only {acked_total} events in synced modes"
    );
    // Finally seal everything: the whole history verifies.
    assert!(afr(&dir).args(["seal"]).status().unwrap().success());
    assert_eq!(verify_log(&export(&dir)).outcome, Outcome::Verified);
}

#[test]
fn bad_lines_are_reported_by_line_and_field_and_skipped() {
    let (_tmp, dir) = initialised();
    let good = r#"{"category":"shell","intent":{"tool":"ls","args":{"path":"/"}}}"#;
    let input = format!(
        "{good}\n{}\n{good}\n{}\nBAD\n{good}\n",
        r#"{"category":"shell","intent":{"tool":"ls","agrs":{}}}"#,
        r#"{"category":"shell","intent":{"tool":"ls"},"timestamp_us":"now"}"#,
    );
    let mut bytes = input.into_bytes();
    // Replace the placeholder with a real non-UTF-8 byte.
    let pos = bytes.windows(3).position(|w| w == b"BAD").unwrap();
    bytes.splice(pos..pos + 3, [0xffu8]);
    let out = record_stdin(&dir, &bytes);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{err}");
    assert!(err.contains("line 2: field `intent.agrs`"), "{err}");
    assert!(err.contains("line 4: field `timestamp_us`"), "{err}");
    assert!(err.contains("line 5: not valid UTF-8"), "{err}");
    assert!(err.contains("recorded 3 events"), "{err}");
    assert_eq!(
        Recorder::open(&dir, Config::default()).unwrap().next_seq(),
        3
    );
}

#[test]
fn export_and_verify_commands_report_outcomes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    init_with_synthetic(&dir, 250);
    let file = tmp.path().join("log.afr");
    ok(afr(&dir).args(["export", "--out"]).arg(&file));
    // 50 events are unsealed: incomplete, exit 2.
    assert_eq!(
        afr(&dir)
            .arg("verify-export")
            .arg(&file)
            .status()
            .unwrap()
            .code(),
        Some(2)
    );
    assert!(afr(&dir).arg("seal").status().unwrap().success());
    ok(afr(&dir).args(["export", "--out"]).arg(&file));
    let v = json_with_code(afr(&dir).args(["verify-export", "--json"]).arg(&file), 0);
    assert_eq!(v["outcome"], "verified");
    assert_eq!(v["epochs"], 3);
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    let v = json_with_code(afr(&dir).args(["verify-export", "--json"]).arg(&file), 1);
    assert_eq!(v["outcome"], "tampered");
    assert!(v["first_failure"]["check"].is_string());
    let v = status_json(&dir);
    assert_eq!(v["events"], 250);
    assert_eq!(v["sealed_epochs"], 3);
}

/// While `afr record` holds the store (its writer and RocksDB's lock), `afr status`, `afr
/// query`, `afr export` and `afr disclose` read it through a read-only view, and see every
/// event acknowledged so far.
#[test]
fn reading_commands_run_beside_a_recording_writer() {
    let (tmp, dir) = initialised();
    let mut writer = afr(&dir)
        .args(["record", "-", "--receipts", "--epoch-size", "10"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = writer.stdin.take().unwrap();
    let mut receipts = BufReader::new(writer.stdout.take().unwrap()).lines();
    for line in String::from_utf8(gen_lines(25, 5)).unwrap().lines() {
        writeln!(input, "{line}").unwrap();
        input.flush().unwrap();
        receipts.next().unwrap().unwrap();
    }
    // 25 acknowledged: two sealed epochs of 10, five in the open one.
    let v = status_json(&dir);
    assert_eq!(v["events"], 25, "{v}");
    let q = ok(afr(&dir).args(["query", "seq < 25", "--json"]));
    assert_eq!(String::from_utf8_lossy(&q.stdout).lines().count(), 25);
    let bundle = tmp.path().join("b.bundle");
    ok(afr(&dir)
        .args(["disclose", "--seq", "3", "--with-keys", "--out"])
        .arg(&bundle));
    let log = tmp.path().join("log.afr");
    ok(afr(&dir).args(["export", "--out"]).arg(&log));
    // The writer is still running and still records.
    writeln!(
        input,
        r#"{{"category":"shell","intent":{{"tool":"after"}}}}"#
    )
    .unwrap();
    input.flush().unwrap();
    receipts.next().unwrap().unwrap();
    drop(input);
    assert!(writer.wait().unwrap().success());
    let v = status_json(&dir);
    assert_eq!(v["events"], 26, "{v}");
}
