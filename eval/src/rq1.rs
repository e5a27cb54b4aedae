//! RQ1: what each layer costs per event, in time and bytes.
//!
//! Five cumulative configurations log the same events, each one event per call, timed from the
//! call to its return (the event is built before the clock starts):
//!
//! | config | what one call does | bytes counted |
//! |---|---|---|
//! | `json` | `serde_json` line appended to a buffered file | the file |
//! | `cbor` | envelope + payload as canonical CBOR, appended | the file |
//! | `chain` | + a record linking the previous record's hash and committing to the payload | the file |
//! | `merkle` | + a Merkle tree per epoch and a sealed epoch header every `epoch_size` events | the file |
//! | `full` | the real recorder: sealing under a per-event key, RocksDB, epochs, buffered durability | SST files after flush |
//!
//! The first four append to a `BufWriter` over a file (not synced), like the recorder's
//! buffered mode. Anchoring is not on the record path in any configuration; its cost is RQ2.

use std::{
    fs::File,
    io::{BufWriter, Write},
    path::Path,
    time::Instant,
};

use afr_core::{
    EventInput, Payload,
    cbor::Writer,
    event::Envelope,
    hash::sha256,
    sequencer::{Links, Sequencer},
};
use afr_recorder::{Config, Recorder};
use anyhow::{Context, Result};
use serde::Serialize;

/// The configurations, cumulative, in order.
pub const CONFIGS: [&str; 5] = ["json", "cbor", "chain", "merkle", "full"];

/// Human names of [`CONFIGS`].
pub const CONFIG_NAMES: [&str; 5] = [
    "baseline: plain JSON log",
    "+ schema, canonical CBOR",
    "+ hash chain",
    "+ Merkle epochs",
    "full: + encryption, RocksDB (anchoring off-path)",
];

/// Epoch size of the `merkle` and `full` configurations.
pub const EPOCH_SIZE: u64 = 100;

/// One run: latencies in µs, and bytes on disk.
#[derive(Debug, Clone)]
pub struct Run {
    /// Per-event latency, µs, in recording order.
    pub latencies_us: Vec<f64>,
    /// Bytes the configuration left on disk.
    pub bytes: u64,
}

/// Summary of one configuration at one size, over every seed.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Configuration key.
    pub config: &'static str,
    /// Events per run.
    pub events: usize,
    /// Runs (seeds or repetitions).
    pub runs: usize,
    /// Median over every event of every run.
    pub median_us: f64,
    /// 99th percentile over every event of every run.
    pub p99_us: f64,
    /// Lowest and highest per-run median.
    pub run_median_range_us: (f64, f64),
    /// Mean bytes per event.
    pub bytes_per_event: f64,
}

struct Plain {
    out: BufWriter<File>,
    scratch: Vec<u8>,
}

/// The `chain` and `merkle` configurations: records through the core's sequencer, the hash
/// chain alone ([`Links`]) or with Merkle epochs ([`Sequencer`]), appended to a file.
struct Chained {
    out: BufWriter<File>,
    seq: Mode,
}

enum Mode {
    Links(Links),
    Epochs(Box<Sequencer>),
}

fn cbor_event(env: &Envelope, payload: &Payload) -> Result<Vec<u8>> {
    let p = payload.encode().context("payload encodes")?;
    let mut w = Writer::with_capacity(p.len() + 32);
    w.array(3);
    w.uint(env.timestamp_us.unwrap_or(0));
    w.uint(env.category as u64);
    w.bytes(&p);
    Ok(w.buf)
}

impl Chained {
    fn log(&mut self, ev: EventInput) -> Result<()> {
        let (env, payload) = ev.into_payload();
        let payload = cbor_event(&env, &payload)?;
        let commitment = sha256(&[&payload]);
        let appended = match &mut self.seq {
            Mode::Links(l) => l.link(env, 0, 0, commitment)?,
            Mode::Epochs(c) => c.append(env, 0, commitment)?,
        };
        self.out.write_all(&appended.bytes)?;
        self.out.write_all(&payload)?;
        if let Mode::Epochs(c) = &self.seq
            && c.open().len() == EPOCH_SIZE
        {
            self.seal()?;
        }
        Ok(())
    }

    fn seal(&mut self) -> Result<()> {
        if let Mode::Epochs(c) = &mut self.seq
            && let Some(sealed) = c.seal(afr_recorder::now_us())
        {
            self.out.write_all(&sealed.header().encode())?;
        }
        Ok(())
    }
}

fn time_each(
    events: Vec<EventInput>,
    mut log: impl FnMut(EventInput) -> Result<()>,
) -> Result<Vec<f64>> {
    let mut lat = Vec::with_capacity(events.len());
    for ev in events {
        let t = Instant::now();
        log(ev)?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(lat)
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

/// Logs `events` in configuration `config` inside the empty directory `dir`.
pub fn run(config: &str, events: Vec<EventInput>, dir: &Path) -> Result<Run> {
    let path = dir.join("log");
    match config {
        "json" | "cbor" => {
            let mut s = Plain {
                out: BufWriter::new(File::create(&path)?),
                scratch: Vec::with_capacity(4096),
            };
            let json = config == "json";
            let latencies_us = time_each(events, |ev| {
                if json {
                    s.scratch.clear();
                    serde_json::to_writer(&mut s.scratch, &ev)?;
                    s.scratch.push(b'\n');
                    s.out.write_all(&s.scratch)?;
                } else {
                    let (env, payload) = ev.into_payload();
                    s.out.write_all(&cbor_event(&env, &payload)?)?;
                }
                Ok(())
            })?;
            s.out.flush()?;
            drop(s);
            Ok(Run {
                latencies_us,
                bytes: file_len(&path),
            })
        }
        "chain" | "merkle" => {
            let recorder = [0x42; 20];
            let mut s = Chained {
                out: BufWriter::new(File::create(&path)?),
                seq: if config == "merkle" {
                    Mode::Epochs(Box::new(Sequencer::new(recorder)))
                } else {
                    Mode::Links(Links::new(recorder))
                },
            };
            let latencies_us = time_each(events, |ev| s.log(ev))?;
            s.seal()?;
            s.out.flush()?;
            drop(s);
            Ok(Run {
                latencies_us,
                bytes: file_len(&path),
            })
        }
        "full" => {
            let store = dir.join("afr");
            afr_recorder::init(&store, [0x42; 20])?;
            let rec = Recorder::open(&store, Config::buffered(EPOCH_SIZE))?;
            let latencies_us = time_each(events, |ev| {
                rec.record(ev)?;
                Ok(())
            })?;
            rec.flush()?;
            rec.seal()?;
            rec.store().flush()?;
            let bytes = crate::bench::sst_bytes(&store.join(afr_recorder::DB_DIR));
            Ok(Run {
                latencies_us,
                bytes,
            })
        }
        other => anyhow::bail!("unknown configuration {other}"),
    }
}

/// Runs configuration `config` `reps` times, each in a fresh directory under `tmp` (removed
/// after), on the events `events(rep)` gives.
pub fn repeat(
    config: &str,
    reps: u64,
    tmp: &Path,
    events: impl Fn(u64) -> Vec<EventInput>,
) -> Result<Vec<Run>> {
    let mut runs = Vec::new();
    for rep in 0..reps {
        let d = tmp.join(format!("{config}-{rep}"));
        std::fs::create_dir_all(&d)?;
        runs.push(run(config, events(rep), &d)?);
        std::fs::remove_dir_all(&d)?;
    }
    Ok(runs)
}

/// The value at quantile `q` of sorted `v`.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Summarises the runs of one configuration at one size.
pub fn summarise(config: &'static str, runs: &[Run]) -> Cell {
    let mut all: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.latencies_us.iter().copied())
        .collect();
    all.sort_by(f64::total_cmp);
    let medians: Vec<f64> = runs
        .iter()
        .map(|r| {
            let mut l = r.latencies_us.clone();
            l.sort_by(f64::total_cmp);
            quantile(&l, 0.5)
        })
        .collect();
    let events = runs.first().map_or(0, |r| r.latencies_us.len());
    let total_events: usize = runs.iter().map(|r| r.latencies_us.len()).sum();
    let total_bytes: u64 = runs.iter().map(|r| r.bytes).sum();
    Cell {
        config,
        events,
        runs: runs.len(),
        median_us: quantile(&all, 0.5),
        p99_us: quantile(&all, 0.99),
        run_median_range_us: (
            medians.iter().copied().fold(f64::INFINITY, f64::min),
            medians.iter().copied().fold(0.0, f64::max),
        ),
        bytes_per_event: total_bytes as f64 / total_events.max(1) as f64,
    }
}
