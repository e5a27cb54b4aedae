//! `afr bench scale`: the growth curve. For each log size (1M and 10M events by default) it
//! records the synthetic workload into a real store at full speed, anchors every epoch on a
//! local anvil, and measures what an operator and an auditor then do with the log:
//!
//! | step | how | figures |
//! |---|---|---|
//! | record | in process, buffered durability, one producer | events/s, write stalls, store bytes/event |
//! | anchor | `anchor_pending` on anvil, batches of `--batch` epochs | gas/event, transactions |
//! | export | `afr export` (child process) | seconds, bytes, peak RSS |
//! | verify | `afr-verify log` offline, beside `sha256sum` of the same file; then pinned to the anvil | seconds, peak RSS, ratio |
//! | query | in process: indexed lookups (median of runs) and a full scan | ms, events/s |
//! | disclose | `afr disclose --seq` of one event (child process) | seconds, peak RSS |
//!
//! Child processes are timed by wall clock and their peak RSS sampled from the kernel's
//! high-water mark, so each figure is the real binary's. Events are generated one at a time
//! ([`crate::synth::stream`]): the workload never sits in memory. Each size's store and export
//! are deleted before the next size starts (`--keep` keeps them).

use std::{
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
    time::Instant,
};

use afr_anchorer::AnchorStore;
use afr_recorder::{Config, Recorder, query::Query};
use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Value, json};

use crate::svg::{Series, loglog};

/// Options of `afr bench scale`.
#[derive(Args, Debug)]
pub struct ScaleBench {
    /// Log sizes in events, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000_000u64, 10_000_000])]
    sizes: Vec<u64>,
    /// Epoch size.
    #[arg(long, default_value_t = 1000)]
    epoch_size: u64,
    /// Epochs per anchoring transaction (`anchorBatch`).
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Working directory (needs about 1.2 KB of free disk per event of the largest size).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep each size's store and export in the working directory.
    #[arg(long)]
    keep: bool,
    /// Skip anchoring (no anvil needed; no gas figure, no pinned verification).
    #[arg(long)]
    no_anchor: bool,
    /// The anvil binary (default: .tools/bin/anvil, else anvil on PATH).
    #[arg(long)]
    anvil: Option<PathBuf>,
    /// Workload seed.
    #[arg(long, default_value_t = crate::synth::DEFAULT_SEED)]
    seed: u64,
    /// Write the figures as JSON to this file too.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write the growth plot (SVG) to this file.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Measure nothing: read the figures of an earlier run (its `--out` file) and recompute
    /// the growth exponents, the table and the plot from them.
    #[arg(long)]
    from: Option<PathBuf>,
}

/// The full-scan query: a substring of the arguments, which the index cannot answer.
const SCAN: &str = r#"intent.args.input ~ "credentials""#;

/// A finished child process: wall time and peak resident memory.
struct Child {
    secs: f64,
    peak_rss_mb: f64,
    stdout: String,
}

impl Child {
    /// The JSON report the child printed (`afr-verify --json`).
    fn report(&self) -> Result<Value> {
        serde_json::from_str(&self.stdout)
            .with_context(|| format!("afr-verify printed no JSON report: {:.200}", self.stdout))
    }
}

/// Runs `cmd` to completion. Its peak RSS is the kernel's high-water mark (`VmHWM` in
/// `/proc/PID/status`), read every 2 ms while it runs: the last reading before it exits.
fn run_child(cmd: &mut Command) -> Result<Child> {
    let what = format!("{:?}", cmd.get_program());
    let out = tempfile::tempfile()?;
    let t0 = Instant::now();
    let mut child = cmd
        .stdout(out.try_clone()?)
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {what}"))?;
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0u64;
    let st = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if let Some(kb) = peak_rss_kb(&status_file) {
            peak_kb = peak_kb.max(kb);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    let secs = t0.elapsed().as_secs_f64();
    let mut stdout = String::new();
    {
        use std::io::{Read as _, Seek as _};
        let mut f = out;
        f.rewind()?;
        f.read_to_string(&mut stdout)?;
    }
    // Exit 2 is `afr-verify`'s "incomplete" (an unanchored or unpinned log): a result.
    if !(st.success() || st.code() == Some(2)) {
        bail!("{what} failed: {st}");
    }
    Ok(Child {
        secs,
        peak_rss_mb: peak_kb as f64 / 1024.0,
        stdout,
    })
}

/// The high-water mark of resident memory (`VmHWM`, kB) in a `/proc/PID/status` file.
fn peak_rss_kb(status_file: &str) -> Option<u64> {
    status_kb(status_file, "VmHWM:")
}

/// One memory figure (`field`, kB) of a `/proc/PID/status` file.
fn status_kb(status_file: &str, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(status_file).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// This process's peak resident memory so far, in MB.
fn own_peak_rss_mb() -> f64 {
    peak_rss_kb("/proc/self/status").map_or(0.0, |kb| round(kb as f64 / 1024.0, 1))
}

/// A sibling binary of this one (`afr`, `afr-verify`), as built in the same target directory.
fn sibling(name: &str) -> Result<PathBuf> {
    let me = std::env::current_exe()?;
    let p = me.with_file_name(name);
    if !p.exists() {
        bail!(
            "{} not found beside {}: build it first (cargo build --release -p afr-cli -p afr-verify)",
            p.display(),
            me.display()
        );
    }
    Ok(p)
}

fn round(x: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (x * m).round() / m
}

/// The median of `f` over `runs` calls, in milliseconds.
fn median_ms(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut t = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t0 = Instant::now();
        f()?;
        t.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

/// Records `n` events into a fresh store at `dir`; returns the figures of the step.
fn record(dir: &Path, n: u64, b: &ScaleBench, recorder: [u8; 20]) -> Result<Value> {
    // Resets the high-water mark of resident memory to what is resident now (Linux 4.0+),
    // so the figure is this step's, not the earlier sizes' queries'.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    afr_recorder::init(dir, recorder)?;
    let rec = Recorder::open(dir, Config::buffered(b.epoch_size))?;
    let t0 = Instant::now();
    let (mut marks, mut rss) = (Vec::new(), Vec::new());
    let step = (n / 10).max(1);
    for (i, ev) in crate::synth::stream(b.seed).take(n as usize).enumerate() {
        rec.record(ev)?;
        if (i as u64 + 1).is_multiple_of(step) {
            marks.push(t0.elapsed().as_secs_f64());
            rss.push(
                status_kb("/proc/self/status", "VmRSS:")
                    .map_or(0.0, |kb| round(kb as f64 / 1024.0, 0)),
            );
        }
    }
    rec.seal()?;
    rec.flush()?;
    let secs = t0.elapsed().as_secs_f64();
    let stalls = rec.store().write_stalls();
    let rocksdb_mb: serde_json::Map<String, Value> = rec
        .store()
        .memory_usage()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), json!(round(v as f64 / 1048576.0, 1))))
        .collect();
    rec.store().flush()?;
    // Throughput of each tenth of the run: flat when nothing stalls as the store grows.
    let tenths: Vec<f64> = marks
        .iter()
        .scan(0.0, |prev, &t| {
            let d = t - *prev;
            *prev = t;
            Some(round(step as f64 / d.max(1e-9), 0))
        })
        .collect();
    let bytes = rec.store().disk_bytes();
    drop(rec);
    Ok(json!({
        // This process's high-water mark during the step (reset before it): the recorder
        // at full speed, and the generator.
        "peak_rss_mb": own_peak_rss_mb(),
        // Resident memory at the end of each tenth of the ingest: flat when nothing grows
        // with the log (the peak above is a flush's transient).
        "rss_mb_by_tenth": rss,
        "rocksdb_memory_mb_at_end": rocksdb_mb,
        "secs": round(secs, 2),
        "events_per_s": round(n as f64 / secs, 0),
        "events_per_s_by_tenth": tenths,
        "write_stall_s": round(stalls.stall_secs, 3),
        "write_stall_counts": stalls.counts,
        "store_bytes": bytes,
        "store_bytes_per_event": round(bytes as f64 / n as f64, 1),
    }))
}

/// Anchors every sealed epoch of the store at `dir` on `rpc`; returns gas per event.
fn anchor(dir: &Path, n: u64, rpc: &str, b: &ScaleBench) -> Result<Value> {
    let signer = afr_anchorer::signer_from_hex(crate::cost::DEV_KEY)?;
    let rt = crate::runtime()?;
    let contract = rt.block_on(afr_anchorer::deploy(rpc, signer.clone()))?;
    let settings = crate::cost::dev_settings(rpc, contract, b.batch);
    let rec = Recorder::open(dir, Config::default())?;
    let t0 = Instant::now();
    let mut txs = 0;
    loop {
        let p = rt.block_on(afr_anchorer::anchor_pending(
            rec.store(),
            signer.clone(),
            &settings,
        ))?;
        txs += p.transactions;
        if p.posted.is_empty() && p.waiting.is_empty() {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let mut gas = 0u64;
    let mut seen = std::collections::HashSet::new();
    let mut epochs = 0u64;
    for kv in rec.store().epochs_from(0)? {
        let (e, _) = kv?;
        let r = rec
            .store()
            .anchor(e)?
            .with_context(|| format!("epoch {e} was not anchored"))?;
        epochs += 1;
        if seen.insert(r.tx) {
            gas += r.gas_used;
        }
    }
    Ok(json!({
        "contract": format!("{contract}"),
        "secs": round(secs, 2),
        "epochs": epochs,
        "transactions": txs,
        "gas": gas,
        "gas_per_event": round(gas as f64 / n as f64, 2),
    }))
}

/// Indexed lookups (median of runs) and one full scan on the store at `dir`.
fn query(dir: &Path, n: u64) -> Result<Value> {
    let rec = Recorder::open(dir, Config::default())?;
    // A delegation in the middle of the log with children: they are a selective lookup.
    let mut parent = None;
    let mut tried = 0;
    for kv in rec.store().records_from(n / 2)? {
        let (seq, bytes) = kv?;
        let r = afr_core::Record::decode(&bytes)?;
        if r.category != afr_core::Category::Delegation {
            continue;
        }
        let q = Query::parse(&format!("delegation_provenance.parent_event.seq = {seq}"))?;
        if !rec.query(&q)?.matches.is_empty() {
            parent = Some(seq);
            break;
        }
        tried += 1;
        if tried == 50 {
            break;
        }
    }
    let parent = parent.context("no delegation with children in the second half of the log")?;
    let mut indexed = Vec::new();
    for text in [
        format!("delegation_provenance.parent_event.seq = {parent}"),
        format!("descendants({parent})"),
        r#"intent.tool = "psql""#.to_owned(),
    ] {
        let q = Query::parse(&text)?;
        let mut matches = 0;
        let ms = median_ms(5, || {
            let r = rec.query(&q)?;
            anyhow::ensure!(r.indexed, "{text} was not answered from the index");
            matches = r.matches.len();
            Ok(())
        })?;
        indexed.push(json!({ "query": text, "ms": round(ms, 2), "matches": matches }));
    }
    let scan = Query::parse(SCAN)?;
    let t0 = Instant::now();
    let r = rec.query(&scan)?;
    let secs = t0.elapsed().as_secs_f64();
    anyhow::ensure!(!r.indexed, "the scan query was answered from the index");
    Ok(json!({
        "indexed": indexed,
        "scan": {
            "query": SCAN,
            "secs": round(secs, 3),
            "events_per_s": round(r.examined as f64 / secs, 0),
            "matches": r.matches.len(),
        },
    }))
}

/// `sha256sum FILE`, timed: the reference the verifier is compared with.
fn sha256sum(file: &Path) -> Result<f64> {
    Ok(run_child(Command::new("sha256sum").arg(file))?.secs)
}

/// One size, end to end.
fn one(n: u64, work: &Path, rpc: Option<&str>, b: &ScaleBench) -> Result<Value> {
    let afr = sibling("afr")?;
    let verifier = sibling("afr-verify")?;
    let dir = work.join(format!("store-{n}"));
    let log = work.join(format!("log-{n}.afr"));
    let bundle = work.join(format!("one-{n}.bundle"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let signer = afr_anchorer::signer_from_hex(crate::cost::DEV_KEY)?;
    let recorder = signer.address().0.0;
    let recorder_hex = format!("0x{}", hex::encode(recorder));
    eprintln!("[{n} events] recording...");
    let rec = record(&dir, n, b, recorder)?;
    let anchored = match rpc {
        Some(rpc) => {
            eprintln!("[{n} events] anchoring on anvil...");
            Some(anchor(&dir, n, rpc, b)?)
        }
        None => None,
    };
    eprintln!("[{n} events] export, verify, query, disclose...");
    let export = run_child(
        Command::new(&afr)
            .arg("export")
            .arg("--dir")
            .arg(&dir)
            .arg("--out")
            .arg(&log),
    )?;
    let log_bytes = std::fs::metadata(&log)?.len();
    // Side by side: the offline verification (every check but the chain's) and one hashing
    // pass over the same file, twice each, alternating; the better of each is kept (the page
    // cache is warm for both).
    let (mut verify, mut sha) = (None::<Child>, f64::INFINITY);
    for _ in 0..2 {
        let v = run_child(
            Command::new(&verifier)
                .arg("log")
                .arg(&log)
                .arg("--recorder")
                .arg(&recorder_hex)
                .arg("--json"),
        )?;
        let checked = v.report()?["events"].as_u64().unwrap_or(0);
        anyhow::ensure!(
            checked == n,
            "afr-verify checked {checked} of {n} events: {}",
            v.stdout
        );
        if verify.as_ref().is_none_or(|o| v.secs < o.secs) {
            verify = Some(v);
        }
        sha = sha.min(sha256sum(&log)?);
    }
    let verify = verify.context("no verification ran")?;
    let pinned = match (rpc, &anchored) {
        (Some(rpc), Some(a)) => {
            let v = run_child(
                Command::new(&verifier)
                    .arg("log")
                    .arg(&log)
                    .args(["--rpc", rpc, "--chain-id", "31337", "--recorder"])
                    .arg(&recorder_hex)
                    .args(["--contract", a["contract"].as_str().unwrap_or_default()])
                    .arg("--json"),
            )?;
            let rep = v.report()?;
            Some(json!({
                "secs": round(v.secs, 3),
                "peak_rss_mb": round(v.peak_rss_mb, 1),
                "outcome": rep["outcome"],
            }))
        }
        _ => None,
    };
    let q = query(&dir, n)?;
    let seq = n / 2 + 7;
    let disclose = run_child(
        Command::new(&afr)
            .arg("disclose")
            .arg("--dir")
            .arg(&dir)
            .args(["--seq", &seq.to_string(), "--with-keys", "--out"])
            .arg(&bundle),
    )?;
    let bundle_bytes = std::fs::metadata(&bundle)?.len();
    if !b.keep {
        std::fs::remove_file(&log)?;
        std::fs::remove_file(&bundle)?;
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(json!({
        "events": n,
        "record": rec,
        "anchor": anchored,
        "export": {
            "secs": round(export.secs, 3),
            "bytes": log_bytes,
            "bytes_per_event": round(log_bytes as f64 / n as f64, 1),
            "peak_rss_mb": round(export.peak_rss_mb, 1),
        },
        "verify": {
            "secs": round(verify.secs, 3),
            "peak_rss_mb": round(verify.peak_rss_mb, 1),
            "sha256sum_secs": round(sha, 3),
            "ratio_to_sha256sum": round(verify.secs / sha, 2),
            "pinned": pinned,
        },
        "query": q,
        "disclose": {
            "seq": seq,
            "secs": round(disclose.secs, 3),
            "peak_rss_mb": round(disclose.peak_rss_mb, 1),
            "bundle_bytes": bundle_bytes,
        },
    }))
}

/// The growth exponent `k` of `y ∝ n^k`: the least-squares slope of `ln y` against `ln n`
/// over every size measured (1 is linear, 0 constant; a logarithmic figure shows a small `k`
/// that falls as `n` grows).
fn exponent(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 || points.iter().any(|p| p.0 <= 0.0 || p.1 <= 0.0) {
        return None;
    }
    let logs: Vec<(f64, f64)> = points.iter().map(|p| (p.0.ln(), p.1.ln())).collect();
    let n = logs.len() as f64;
    let (mx, my) = (
        logs.iter().map(|p| p.0).sum::<f64>() / n,
        logs.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = logs.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = logs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| round(sxy / sxx, 2))
}

/// The figures plotted and given an exponent: (name, JSON pointer into one size's result).
const FIGURES: [(&str, &str); 11] = [
    ("record time", "/record/secs"),
    ("store bytes", "/record/store_bytes"),
    ("export time", "/export/secs"),
    ("export bytes", "/export/bytes"),
    ("verify time", "/verify/secs"),
    ("verify peak RSS", "/verify/peak_rss_mb"),
    ("indexed lookup", "/query/indexed/0/ms"),
    ("indexed, 11% hits", "/query/indexed/2/ms"),
    ("full scan", "/query/scan/secs"),
    ("disclose 1 event", "/disclose/secs"),
    ("anchoring gas", "/anchor/gas"),
];

/// Measures every size (see the module documentation).
fn measure(b: &ScaleBench) -> Result<Vec<Value>> {
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    let work = b.dir.clone().unwrap_or_else(|| tmp.path().to_owned());
    std::fs::create_dir_all(&work)?;
    let anvil = if b.no_anchor {
        None
    } else {
        Some(crate::cost::start_anvil(b.anvil.clone())?)
    };
    let rpc = anvil.as_ref().map(|(_, url)| url.as_str());
    b.sizes.iter().map(|&n| one(n, &work, rpc, b)).collect()
}

/// Runs `afr bench scale`.
pub fn run(b: &ScaleBench) -> Result<ExitCode> {
    if b.sizes.is_empty() || b.sizes.contains(&0) {
        bail!("--sizes needs one or more positive event counts");
    }
    let (rows, mut meta) = match &b.from {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read {}", p.display()))?;
            let v: Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not an afr bench scale result", p.display()))?;
            let rows = v["sizes"]
                .as_array()
                .cloned()
                .with_context(|| format!("{} has no \"sizes\" list of results", p.display()))?;
            (rows, v)
        }
        None => (measure(b)?, json!({})),
    };
    let mut growth = Vec::new();
    let mut series = Vec::new();
    for (name, ptr) in FIGURES {
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|r| Some((r["events"].as_f64()?, r.pointer(ptr)?.as_f64()?)))
            .collect();
        let k = exponent(&points);
        growth.push(json!({ "figure": name, "exponent": k }));
        // Plotted relative to the smallest size, so every figure shares one axis: a line
        // parallel to `linear` grows linearly, a flat one is constant.
        if points.len() == rows.len() && points.iter().all(|p| p.1 > 0.0) {
            let y0 = points[0].1;
            series.push(Series {
                name: format!("{name}, k={}", k.map_or("-".into(), |k| k.to_string())),
                points: points.iter().map(|&(n, y)| (n, y / y0)).collect(),
            });
        }
    }
    if let (Some(n0), Some(n1)) = (
        rows.first().and_then(|r| r["events"].as_f64()),
        rows.last().and_then(|r| r["events"].as_f64()),
    ) {
        series.push(Series {
            name: "linear (k=1), for reference".into(),
            points: vec![(n0, 1.0), (n1, n1 / n0)],
        });
    }
    if b.from.is_none() {
        meta = json!({
            "epoch_size": b.epoch_size,
            "batch": b.batch,
            "seed": b.seed,
            "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        });
    }
    meta["sizes"] = Value::Array(rows);
    meta["growth"] = Value::Array(growth);
    let out = meta;
    if let Some(p) = &b.out {
        std::fs::write(p, serde_json::to_string_pretty(&out)? + "\n")
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    if let Some(p) = &b.svg {
        let svg = loglog(
            "AFR at scale: growth of each figure with the log",
            "events in the log",
            "relative to the smallest log",
            &series,
        );
        std::fs::write(p, svg).with_context(|| format!("cannot write {}", p.display()))?;
    }
    if b.json {
        println!("{out}");
    } else {
        print_table(&out);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(out: &Value) {
    let rows = out["sizes"].as_array().cloned().unwrap_or_default();
    println!(
        "afr bench scale: epoch size {}, anchored in batches of {}",
        out["epoch_size"], out["batch"]
    );
    let cell = |r: &Value, p: &str| match r.pointer(p) {
        Some(Value::Null) | None => "-".to_owned(),
        Some(v) => v.to_string(),
    };
    let lines: [(&str, &str); 21] = [
        ("record events/s", "/record/events_per_s"),
        ("record peak RSS MB", "/record/peak_rss_mb"),
        ("write stall s", "/record/write_stall_s"),
        ("store bytes/event", "/record/store_bytes_per_event"),
        ("anchoring gas/event", "/anchor/gas_per_event"),
        ("anchoring txs", "/anchor/transactions"),
        ("export s", "/export/secs"),
        ("export bytes/event", "/export/bytes_per_event"),
        ("export peak RSS MB", "/export/peak_rss_mb"),
        ("verify s (offline)", "/verify/secs"),
        ("sha256sum s", "/verify/sha256sum_secs"),
        ("verify / sha256sum", "/verify/ratio_to_sha256sum"),
        ("verify peak RSS MB", "/verify/peak_rss_mb"),
        ("verify pinned s", "/verify/pinned/secs"),
        ("indexed lookup ms", "/query/indexed/0/ms"),
        ("indexed 11% ms", "/query/indexed/2/ms"),
        ("full scan s", "/query/scan/secs"),
        ("full scan events/s", "/query/scan/events_per_s"),
        ("disclose one s", "/disclose/secs"),
        ("disclose peak RSS MB", "/disclose/peak_rss_mb"),
        ("store bytes", "/record/store_bytes"),
    ];
    print!("  {:<22}", "events");
    for r in &rows {
        print!("{:>14}", r["events"]);
    }
    println!();
    for (name, p) in lines {
        print!("  {name:<22}");
        for r in &rows {
            print!("{:>14}", cell(r, p));
        }
        println!();
    }
    println!("  growth exponents (y ∝ n^k, least squares over the sizes):");
    for g in out["growth"].as_array().into_iter().flatten() {
        println!(
            "    {:<24} {}",
            g["figure"].as_str().unwrap_or(""),
            g["exponent"]
        );
    }
}
