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

/// `afr bench scale` end to end at small sizes: records, anchors on a real anvil, exports,
/// verifies (beside `sha256sum`), queries and discloses at each size, and reports each figure
/// the issue asks for with its growth exponent; `--from` re-plots a saved run.
#[test]
fn bench_scale_measures_every_step_at_each_size() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("scale.json");
    let svg = work.path().join("scale.svg");
    let run = ok(afr_eval()
        .args([
            "bench",
            "scale",
            "--sizes",
            "3000,9000",
            "--epoch-size",
            "100",
        ])
        .args(["--batch", "10", "--json", "--anvil"])
        .arg(afr_testkit::tool("anvil"))
        .arg("--dir")
        .arg(work.path().join("w"))
        .arg("--out")
        .arg(&out)
        .arg("--svg")
        .arg(&svg));
    let v: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let sizes = v["sizes"].as_array().unwrap();
    assert_eq!(sizes.len(), 2);
    for (r, n) in sizes.iter().zip([3000u64, 9000]) {
        assert_eq!(r["events"], n);
        let num = |p: &str| {
            r.pointer(p)
                .and_then(serde_json::Value::as_f64)
                .unwrap_or_else(|| panic!("{p} missing in {r}"))
        };
        for p in [
            "/record/events_per_s",
            "/record/store_bytes_per_event",
            "/record/peak_rss_mb",
            "/anchor/gas_per_event",
            "/export/secs",
            "/export/bytes",
            "/export/peak_rss_mb",
            "/verify/secs",
            "/verify/peak_rss_mb",
            "/verify/sha256sum_secs",
            "/verify/pinned/secs",
            "/query/scan/events_per_s",
            "/disclose/secs",
            "/disclose/bundle_bytes",
        ] {
            assert!(num(p) > 0.0, "{p} is not positive in {r}");
        }
        assert_eq!(num("/record/write_stall_s"), 0.0);
        // Every epoch anchored, 10 per transaction; the pinned verification sees them.
        assert_eq!(num("/anchor/epochs"), (n / 100) as f64);
        assert_eq!(num("/anchor/transactions"), (n / 1000) as f64);
        assert_eq!(r["verify"]["pinned"]["outcome"], "verified");
        // The selective lookup finds the delegation's children through the index.
        assert!(num("/query/indexed/0/matches") >= 1.0, "{r}");
        let per_event = num("/export/bytes") / n as f64;
        assert!(
            (400.0..800.0).contains(&per_event),
            "{per_event} bytes/event"
        );
    }
    let growth = v["growth"].as_array().unwrap();
    let k = |name: &str| {
        growth
            .iter()
            .find(|g| g["figure"] == name)
            .and_then(|g| g["exponent"].as_f64())
            .unwrap_or_else(|| panic!("no exponent for {name}"))
    };
    // Bytes grow linearly, gas too (one anchor per 100 events).
    assert!(
        (0.95..1.05).contains(&k("export bytes")),
        "{}",
        k("export bytes")
    );
    assert!(
        (0.95..1.05).contains(&k("anchoring gas")),
        "{}",
        k("anchoring gas")
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("linear (k=1)"));
    // Re-plotting a saved run measures nothing and gives the same exponents.
    let again = ok(afr_eval()
        .args(["bench", "scale", "--json", "--from"])
        .arg(&out));
    let w: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(w["growth"], v["growth"]);
    assert_eq!(w["sizes"], v["sizes"]);
}
