//! `afr-verify` speed on a large real log: a whole-log export of 1,000,000 recorded events,
//! verified integrity-only against pinned anchors, and one disclosed event in a bundle.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "benchmark set-up fails loudly on purpose"
)]
//!
//! `cargo bench -p afr-benches --bench verify` (`AFR_BENCH_EVENTS=N` for another size,
//! `AFR_BENCH_EPOCH=N` for another epoch size, default 100). The events are the synthetic
//! workload recorded through the real recorder into RocksDB and exported with `afr export`'s
//! code; each timed run does what `afr-verify log FILE --anchors A` does: read the file,
//! check every frame, leaf, Merkle root, header, back-pointer and chain link, and compare every
//! epoch root with the pinned anchors. The bundle run does what `afr-verify bundle` does with
//! keys: proofs, the header chain up to the event's epoch, decryption and commitment checks.
//! Figures are medians over several runs in one process; the machine is noisy.

use std::time::{Duration, Instant};

use afr_core::{bundle::verify_bundle, verify::Outcome, verify::verify_log};
use afr_recorder::{Config, Recorder};
use afr_verify::{Verdict, anchors::Anchors, check_anchors};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing and expects a
    // quick pass, so run a small size there.
    let bench = std::env::args().any(|a| a == "--bench");
    let events = env_u64("AFR_BENCH_EVENTS", if bench { 1_000_000 } else { 2_000 });
    let epoch_size = env_u64("AFR_BENCH_EPOCH", 100);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");

    let t = Instant::now();
    afr_recorder::init(&dir, [0x42; 20]).unwrap();
    let rec = Recorder::open(&dir, Config::buffered(epoch_size)).unwrap();
    let chunk = 100_000;
    let mut done = 0;
    while done < events {
        let n = chunk.min(events - done);
        for e in afr_testkit::synth::generate(n, afr_testkit::synth::DEFAULT_SEED + done) {
            rec.record(e).unwrap();
        }
        done += n;
    }
    rec.seal().unwrap();
    rec.flush().unwrap();
    let log_path = tmp.path().join("log.afr");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&log_path).unwrap());
    let summary = afr_recorder::export_log(rec.store(), &mut out).unwrap();
    drop(out);
    let bundle = rec.disclose(&[events / 2], true).unwrap().encode();
    drop(rec);
    eprintln!(
        "set-up: recorded and exported {} events in {} epochs ({:.1} MB) in {:.1} s",
        summary.events,
        summary.epochs,
        summary.bytes as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );

    // Pin the anchors an honest chain would hold: every epoch root of the log.
    let bytes = std::fs::read(&log_path).unwrap();
    let honest = verify_log(&bytes);
    assert_eq!(
        honest.outcome,
        Outcome::Verified,
        "{:?}",
        honest.first_failure
    );
    let roots: Vec<_> = honest.epoch_roots.iter().map(|(_, r)| *r).collect();
    let anchors = Anchors::assumed(
        31_337,
        &format!("0x{}", "11".repeat(20)),
        &[0x42; 20],
        &roots,
        1,
    );
    let anchors_path = tmp.path().join("anchors.json");
    std::fs::write(&anchors_path, serde_json::to_string(&anchors).unwrap()).unwrap();
    drop(bytes);

    let runs = if bench { 5 } else { 1 };
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let bytes = std::fs::read(&log_path).unwrap();
        let mut v = Verdict::from_log(&verify_log(&bytes));
        check_anchors(&mut v, &Anchors::load(&anchors_path).unwrap(), true).unwrap();
        v.settle();
        times.push(t.elapsed());
        assert_eq!(v.outcome, Outcome::Verified, "{:?}", v.first_failure);
    }
    let m = median(times.clone());
    println!(
        "verify log: {} events, {:.1} MB, integrity only, pinned anchors: median {:.0} ms over {} runs (min {:.0}, max {:.0}); {:.2} M events/s, {:.0} MB/s",
        summary.events,
        summary.bytes as f64 / 1e6,
        ms(m),
        runs,
        ms(*times.iter().min().unwrap()),
        ms(*times.iter().max().unwrap()),
        summary.events as f64 / m.as_secs_f64() / 1e6,
        summary.bytes as f64 / m.as_secs_f64() / 1e6,
    );

    let runs = if bench { 101 } else { 3 };
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let mut v = Verdict::from_bundle(&verify_bundle(&bundle));
        check_anchors(&mut v, &anchors, false).unwrap();
        v.settle();
        times.push(t.elapsed());
        assert_eq!(v.outcome, Outcome::Verified, "{:?}", v.first_failure);
        assert_eq!(v.opened.len(), 1);
    }
    println!(
        "verify bundle: 1 event (seq {}) with its key, {} bytes incl. {} epoch headers: median {:.3} ms over {} runs",
        events / 2,
        bundle.len(),
        (events / 2) / epoch_size + 1,
        ms(median(times)),
        runs
    );
}
