//! `afr bench record`: the recorder's latency, throughput and size, measured on the real
//! store with the paper's synthetic workload.
//!
//! Latency is per event, from the call to the receipt: for `buffered` and `sync` that is one
//! `record()` call; for `group` each producer pipelines a window of events with `submit()` and
//! waits for the window's synced write, and an event's latency runs from its own `submit()`
//! to the moment that write is confirmed. Every event in `group` and `sync` mode is synced
//! before its receipt.

use std::{
    io::IsTerminal,
    process::ExitCode,
    sync::Arc,
    time::{Duration, Instant},
};

use afr_recorder::{Config, Durability, Recorder};
use anyhow::{Context, Result};
use clap::Args;

/// Options of `afr bench record`.
#[derive(Args, Debug)]
pub struct RecordBench {
    /// Events to record.
    #[arg(long, default_value_t = 10_000)]
    events: u64,
    /// Epoch size.
    #[arg(long, default_value_t = 100)]
    epoch_size: u64,
    /// Durability mode: sync, group or buffered.
    #[arg(long, default_value = "buffered")]
    durability: Durability,
    /// Producer threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Events each producer submits before waiting for their synced write (group mode).
    #[arg(long, default_value_t = 256)]
    window: usize,
    /// Workload seed.
    #[arg(long, default_value_t = crate::synth::DEFAULT_SEED)]
    seed: u64,
    /// Keep the store in this directory instead of a temporary one.
    #[arg(long)]
    keep: Option<std::path::PathBuf>,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

/// The `p` quantile (0..=1) of `sorted`, nearest rank; 0 when empty.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs the benchmark and prints its figures.
pub fn record(b: &RecordBench) -> Result<ExitCode> {
    let events = crate::synth::generate(b.events, b.seed);
    let json_bytes: usize = events
        .iter()
        .map(|e| serde_json::to_vec(e).map_or(0, |v| v.len() + 1))
        .sum();
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    let dir = b.keep.clone().unwrap_or_else(|| tmp.path().join("afr"));
    afr_recorder::init(&dir, [0x42; 20])?;
    let config = Config {
        epoch_size: b.epoch_size,
        durability: b.durability,
        ..Config::default()
    };
    let rec = Recorder::open(&dir, config)?;
    let threads = b.threads.max(1);
    let mut shares: Vec<Vec<afr_core::EventInput>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, mut e) in events.into_iter().enumerate() {
        if threads > 1 {
            // With several producers the sequence order is decided at run time, so the
            // generator's references to earlier events may point forward; keep the lane only.
            e.concurrent_with.clear();
        }
        shares[i % threads].push(e);
    }
    let progress = std::io::stderr().is_terminal() && !b.json;
    if progress {
        eprintln!(
            "recording {} events, {threads} thread(s), {:?} durability...",
            b.events, b.durability
        );
    }
    let window = if b.durability == Durability::Group {
        b.window.max(1)
    } else {
        1
    };
    let start = Instant::now();
    let rec = Arc::new(rec);
    let handles: Vec<_> = shares
        .into_iter()
        .map(|share| {
            let rec = rec.clone();
            std::thread::spawn(move || -> Result<Vec<f64>> {
                let mut lat = Vec::with_capacity(share.len());
                let mut starts = Vec::with_capacity(window);
                let mut it = share.into_iter().peekable();
                while it.peek().is_some() {
                    starts.clear();
                    let mut last = 0;
                    for ev in it.by_ref().take(window) {
                        let t0 = Instant::now();
                        if window == 1 {
                            rec.record(ev)?;
                            lat.push(t0.elapsed().as_secs_f64() * 1e6);
                        } else {
                            last = rec.submit(ev)?.seq;
                            starts.push(t0);
                        }
                    }
                    if window > 1 {
                        rec.wait_written(last)?;
                        let t1 = Instant::now();
                        lat.extend(starts.iter().map(|t0| (t1 - *t0).as_secs_f64() * 1e6));
                    }
                }
                Ok(lat)
            })
        })
        .collect();
    let mut lat = Vec::with_capacity(b.events as usize);
    for h in handles {
        let l = h
            .join()
            .map_err(|_| anyhow::anyhow!("producer thread panicked"))??;
        lat.extend(l);
    }
    rec.flush()?;
    let wall = start.elapsed();
    lat.sort_by(f64::total_cmp);
    let n = b.events.max(1) as f64;
    rec.seal()?;
    rec.store().flush()?;
    let sst = sst_bytes(&dir.join(afr_recorder::DB_DIR));
    let mut record_bytes = 0u64;
    for kv in rec.store().records_from(0)? {
        record_bytes += kv?.1.len() as u64;
    }
    let median = percentile(&lat, 0.5);
    let p99 = percentile(&lat, 0.99);
    let eps = n / wall.as_secs_f64().max(f64::MIN_POSITIVE);
    let out = serde_json::json!({
        "events": b.events,
        "epoch_size": b.epoch_size,
        "durability": format!("{:?}", b.durability).to_lowercase(),
        "threads": threads,
        "median_us": round2(median),
        "p99_us": round2(p99),
        "max_us": round2(lat.last().copied().unwrap_or(0.0)),
        "events_per_s": eps.round(),
        "bytes_per_event": round2(sst as f64 / n),
        "record_bytes_per_event": round2(record_bytes as f64 / n),
        "baseline_json_bytes_per_event": round2(json_bytes as f64 / n),
        "wall_s": round2(wall.as_secs_f64()),
    });
    if b.json {
        println!("{out}");
    } else {
        println!(
            "afr bench record: {} events, epoch size {}, {:?} durability, {threads} thread(s)",
            b.events, b.epoch_size, b.durability
        );
        println!("  latency median   {median:>10.2} µs   (call to receipt)");
        println!("  latency P99      {p99:>10.2} µs");
        println!("  throughput       {eps:>10.0} events/s");
        println!(
            "  on disk          {:>10.1} bytes/event (SST files after flush)",
            sst as f64 / n
        );
        println!(
            "  record overhead  {:>10.1} bytes/event (the integrity record)",
            record_bytes as f64 / n
        );
        println!(
            "  plain JSON log   {:>10.1} bytes/event (baseline, same events)",
            json_bytes as f64 / n
        );
    }
    drop(rec);
    std::thread::sleep(Duration::from_millis(1));
    Ok(ExitCode::SUCCESS)
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

pub(crate) fn sst_bytes(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "sst"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
