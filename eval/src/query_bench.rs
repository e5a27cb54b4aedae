//! `afr-eval bench query`: a store of synthetic events, then indexed lookups and a full scan,
//! timed.

use std::{path::PathBuf, process::ExitCode, time::Instant};

use afr_recorder::{Config, Recorder, query::Query};
use anyhow::{Context, Result};
use clap::Args;

/// Options of `afr bench query`.
#[derive(Args, Debug)]
pub struct QueryBench {
    /// Events in the store (recorded with the synthetic workload, buffered durability).
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// Epoch size.
    #[arg(long, default_value_t = 1000)]
    epoch_size: u64,
    /// Runs of each indexed query (the median is reported).
    #[arg(long, default_value_t = 7)]
    runs: usize,
    /// Workload seed.
    #[arg(long, default_value_t = crate::synth::DEFAULT_SEED)]
    seed: u64,
    /// Use (or keep) the store in this directory: an existing store is queried as it is.
    #[arg(long)]
    keep: Option<PathBuf>,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `afr-eval bench query`: builds a store, then times indexed lookups and a full scan.
pub fn bench(b: &QueryBench) -> Result<ExitCode> {
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    let dir = b.keep.clone().unwrap_or_else(|| tmp.path().join("afr"));
    let mut build_s = None;
    if !dir.join(afr_recorder::DB_DIR).exists() {
        afr_recorder::init(&dir, [0x42; 20])?;
        let r = Recorder::open(&dir, Config::buffered(b.epoch_size))?;
        if !b.json {
            eprintln!(
                "recording {} synthetic events (buffered durability)...",
                b.events
            );
        }
        let t0 = Instant::now();
        // One event at a time: the workload never sits in memory.
        for ev in crate::synth::stream(b.seed).take(b.events as usize) {
            r.record(ev)?;
        }
        r.seal()?;
        r.store().flush()?;
        build_s = Some(t0.elapsed().as_secs_f64());
    }
    let r = Recorder::open(&dir, Config::default())?;
    let n = r.next_seq();
    // A delegation event with children, for the selective lookups.
    let parent = {
        let q = Query::parse(r#"category = "delegation" and seq >= 1000"#)?;
        let res = r.query(&q)?;
        let mut pick = None;
        for s in res.matches.iter().take(50) {
            let kids = r.query(&Query::parse(&format!(
                "delegation_provenance.parent_event.seq = {s}"
            ))?)?;
            if kids.matches.len() >= 2 {
                pick = Some(*s);
                break;
            }
        }
        pick.unwrap_or(0)
    };
    let indexed = [
        format!("delegation_provenance.parent_event.seq = {parent}"),
        format!("descendants({parent})"),
        r#"policy_evaluation[].verdict = "escalate" and context_provenance.environment = "production""#.to_owned(),
        r#"human_approval.approver = "oncall@acme-corp.example""#.to_owned(),
        r#"intent.tool = "psql""#.to_owned(),
    ];
    let scans = [r#"intent.args.input ~ "credentials""#.to_owned()];
    let mut rows = Vec::new();
    for (text, runs) in indexed
        .iter()
        .map(|t| (t, b.runs.max(1)))
        .chain(scans.iter().map(|t| (t, 1)))
    {
        let q = Query::parse(text)?;
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..runs {
            let t0 = Instant::now();
            let res = r.query(&q)?;
            times.push(t0.elapsed().as_secs_f64() * 1e3);
            last = Some(res);
        }
        times.sort_by(f64::total_cmp);
        let res = last.unwrap_or_default();
        rows.push(serde_json::json!({
            "query": text,
            "matches": res.matches.len(),
            "indexed": res.indexed,
            "decrypted": res.decrypted,
            "median_ms": (times[times.len() / 2] * 100.0).round() / 100.0,
            "runs": runs,
        }));
    }
    let out = serde_json::json!({
        "events": n,
        "epoch_size": b.epoch_size,
        "build_s": build_s.map(|s| (s * 10.0).round() / 10.0),
        "store_bytes": r.store().disk_bytes(),
        "queries": rows,
    });
    if b.json {
        println!("{out}");
    } else {
        println!(
            "afr bench query: {n} events{}",
            build_s.map_or(String::new(), |s| format!(", store built in {s:.1} s"))
        );
        println!(
            "  {:>10}  {:>9}  {:>10}  {:<8}  query",
            "median ms", "matches", "decrypted", "plan"
        );
        for row in &rows {
            println!(
                "  {:>10.2}  {:>9}  {:>10}  {:<8}  {}",
                row["median_ms"].as_f64().unwrap_or(0.0),
                row["matches"].as_u64().unwrap_or(0),
                row["decrypted"].as_u64().unwrap_or(0),
                if row["indexed"].as_bool() == Some(true) {
                    "index"
                } else {
                    "scan"
                },
                row["query"].as_str().unwrap_or("")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
