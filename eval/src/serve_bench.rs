//! `afr bench serve`: a real `afr serve` over its Unix socket, measured side by side with the
//! in-process [`Recorder`] it wraps, in one run.
//!
//! The bench starts the `afr` beside `afr-eval` as `afr serve` on a fresh store, and opens a
//! [`Recorder`] on a second fresh store in this process, both with the same durability (group
//! by default) and epoch size. Each workload then runs on both, same events (the synthetic
//! workload, cycled), same machine:
//!
//! | workload | in process | through the server |
//! |---|---|---|
//! | one event at a time | `record()`, 1 thread | single-event POSTs, 1 connection |
//! | single events, concurrently | `record()`, N threads | single-event POSTs, N connections |
//! | batches of 100 | `submit()` × 100 then `wait_written`, M threads | NDJSON POSTs of 100 lines, M connections |
//!
//! Latency is per call: from the `record()` call (the first byte of the request) to the
//! receipt (the last byte of the response); for batches, per batch. The latency the server
//! adds is the difference of the two sides' percentiles in the first workload, where nothing
//! queues. The client is a plain HTTP/1.1 client over `UnixStream` with kept-alive
//! connections, one per thread; it checks every answer (status 200, one receipt per line), and
//! at the end the server's `GET /v1/status` must count every event sent. Client threads and
//! the server share the machine's cores, as an agent on the same host would.

use std::{
    io::{BufRead, BufReader, IsTerminal, Read, Write},
    os::unix::net::UnixStream,
    path::{Path, PathBuf},
    process::{Child, Command, ExitCode, Stdio},
    time::{Duration, Instant},
};

use afr_core::EventInput;
use afr_recorder::{Config, Durability, Recorder};
use anyhow::{Context, Result, bail};
use clap::Args;

use crate::bench::percentile;
use serde::Serialize;
use serde_json::json;

/// Batched ingest the issue asks of `afr serve` (events per second, NDJSON batches of 100).
pub const TARGET_BATCHED_EVENTS_PER_S: f64 = 50_000.0;
/// Single-event POSTs per second the issue asks of `afr serve`.
pub const TARGET_SINGLE_POSTS_PER_S: f64 = 10_000.0;
/// Largest P99 latency a single-event POST may add to `record()`, in microseconds.
pub const TARGET_P99_ADDED_US: f64 = 1_000.0;

/// Distinct synthetic events; longer workloads cycle through them.
const POOL: u64 = 10_000;
/// How long `afr serve` may take to answer on its socket, and to stop after SIGTERM.
const START_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// Options of `afr bench serve`.
#[derive(Args, Debug)]
pub struct ServeBench {
    /// Events sent one at a time on each side (the latency workload).
    #[arg(long, default_value_t = 5_000)]
    latency_events: u64,
    /// Single events sent concurrently on each side.
    #[arg(long, default_value_t = 20_000)]
    posts: u64,
    /// Connections (in process: threads) sending the concurrent single events.
    #[arg(long, default_value_t = 16)]
    post_clients: usize,
    /// Events sent in batches on each side.
    #[arg(long, default_value_t = 50_000)]
    batched_events: u64,
    /// Events per batch (lines per NDJSON request).
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Connections (in process: threads) sending batches.
    #[arg(long, default_value_t = 4)]
    batch_clients: usize,
    /// Events sent on each side before measuring, one at a time.
    #[arg(long, default_value_t = 500)]
    warmup: u64,
    /// Durability mode of both recorders: sync, group or buffered.
    #[arg(long, default_value = "group")]
    durability: Durability,
    /// Epoch size of both recorders.
    #[arg(long, default_value_t = 100)]
    epoch_size: u64,
    /// Workload seed.
    #[arg(long, default_value_t = crate::synth::DEFAULT_SEED)]
    seed: u64,
    /// The `afr` program to run as the server (default: the `afr` beside this program).
    #[arg(long)]
    afr: Option<PathBuf>,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

/// One side of one workload.
#[derive(Debug, Clone, Copy, Serialize)]
struct Row {
    events: u64,
    /// Threads or connections.
    clients: usize,
    events_per_s: f64,
    /// Per call (per batch for batches), from the call to the receipt.
    median_us: f64,
    p99_us: f64,
}

impl Row {
    fn new(events: u64, clients: usize, wall: Duration, mut lat_us: Vec<f64>) -> Row {
        lat_us.sort_by(f64::total_cmp);
        Row {
            events,
            clients,
            events_per_s: (events as f64 / wall.as_secs_f64().max(f64::MIN_POSITIVE)).round(),
            median_us: round2(percentile(&lat_us, 0.5)),
            p99_us: round2(percentile(&lat_us, 0.99)),
        }
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The workload: synthetic events and their JSON lines, cycled.
struct Workload {
    events: Vec<EventInput>,
    lines: Vec<Vec<u8>>,
}

impl Workload {
    fn new(seed: u64) -> Result<Workload> {
        let mut events = crate::synth::generate(POOL, seed);
        for e in &mut events {
            // With several producers the order is decided at run time, and events are reused:
            // references to overlapping events could point forward. Keep the lane only.
            e.concurrent_with.clear();
        }
        let lines = events
            .iter()
            .map(serde_json::to_vec)
            .collect::<Result<_, _>>()?;
        Ok(Workload { events, lines })
    }

    fn event(&self, i: u64) -> EventInput {
        self.events[(i % POOL) as usize].clone()
    }

    fn line(&self, i: u64) -> &[u8] {
        &self.lines[(i % POOL) as usize]
    }

    /// The NDJSON body of events `range`.
    fn batch_body(&self, range: std::ops::Range<u64>) -> Vec<u8> {
        let mut body = Vec::new();
        for i in range {
            body.extend_from_slice(self.line(i));
            body.push(b'\n');
        }
        body
    }
}

/// Runs `work(t)` for `t` in `0..threads` at once; the wall time and every call's latency.
pub(crate) fn parallel<F>(threads: usize, work: F) -> Result<(Duration, Vec<f64>)>
where
    F: Fn(usize) -> Result<Vec<f64>> + Sync,
{
    let start = Instant::now();
    let results: Vec<Result<Vec<f64>>> = std::thread::scope(|s| {
        let work = &work;
        let handles: Vec<_> = (0..threads).map(|t| s.spawn(move || work(t))).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a bench thread panicked")))
            })
            .collect()
    });
    let wall = start.elapsed();
    let mut lat = Vec::new();
    for r in results {
        lat.extend(r?);
    }
    Ok((wall, lat))
}

fn micros_since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1e6
}

/// Event indices `offset + i` for the `i` in `0..n` with `i % threads == t`.
fn share(offset: u64, n: u64, threads: usize, t: usize) -> impl Iterator<Item = u64> {
    (t as u64..n).step_by(threads).map(move |i| offset + i)
}

/// Batch `b`'s events, of `n` events from `offset` in batches of `batch`.
fn batch_range(offset: u64, n: u64, batch: u64, b: u64) -> std::ops::Range<u64> {
    offset + b * batch..offset + ((b + 1) * batch).min(n)
}

/// `record()` of one event per call, on `threads` threads.
fn in_process_single(
    rec: &Recorder,
    w: &Workload,
    offset: u64,
    n: u64,
    threads: usize,
) -> Result<Row> {
    let (wall, lat) = parallel(threads, |t| {
        let mut lat = Vec::new();
        for i in share(offset, n, threads, t) {
            let ev = w.event(i);
            let t0 = Instant::now();
            rec.record(ev)?;
            lat.push(micros_since(t0));
        }
        Ok(lat)
    })?;
    Ok(Row::new(n, threads, wall, lat))
}

/// Batches to run: `(offset, events, batch size, threads)`.
type Plan = (u64, u64, u64, usize);

/// Runs the batches of `n` events (`batch` each, from `offset`) spread over `threads` threads,
/// each thread with its own `C` from `open`; `run` does one batch's range and returns its
/// latency in µs (it times only the call being measured).
fn each_batch<C>(
    (offset, n, batch, threads): Plan,
    open: impl Fn() -> Result<C> + Sync,
    run: impl Fn(&mut C, std::ops::Range<u64>) -> Result<f64> + Sync,
) -> Result<Row> {
    let batches = n.div_ceil(batch);
    let (wall, lat) = parallel(threads, |t| {
        let mut c = open()?;
        let mut lat = Vec::new();
        for b in (t as u64..batches).step_by(threads) {
            lat.push(run(&mut c, batch_range(offset, n, batch, b))?);
        }
        Ok(lat)
    })?;
    Ok(Row::new(n, threads, wall, lat))
}

/// `submit()` of a batch's events then `wait_written` of the last, as the server does it, on
/// `threads` threads.
fn in_process_batches(rec: &Recorder, w: &Workload, plan: Plan) -> Result<Row> {
    each_batch(
        plan,
        || Ok(()),
        |(), range| {
            let evs: Vec<EventInput> = range.map(|i| w.event(i)).collect();
            let t0 = Instant::now();
            let mut last = 0;
            for ev in evs {
                last = rec.submit(ev)?.seq;
            }
            if rec.config().durability == Durability::Group {
                rec.wait_written(last)?;
            }
            Ok(micros_since(t0))
        },
    )
}

/// Single-event POSTs (`application/json`), one kept-alive connection per thread.
fn served_single(socket: &Path, w: &Workload, offset: u64, n: u64, threads: usize) -> Result<Row> {
    let (wall, lat) = parallel(threads, |t| {
        let mut c = Conn::connect(socket)?;
        let mut lat = Vec::new();
        for i in share(offset, n, threads, t) {
            let t0 = Instant::now();
            let answer = c.post("application/json", w.line(i))?;
            lat.push(micros_since(t0));
            check_receipts(&answer, 1)?;
        }
        Ok(lat)
    })?;
    Ok(Row::new(n, threads, wall, lat))
}

/// NDJSON POSTs of `batch` lines, one kept-alive connection per thread.
fn served_batches(socket: &Path, w: &Workload, plan: Plan) -> Result<Row> {
    each_batch(
        plan,
        || Conn::connect(socket),
        |c, range| {
            let lines = (range.end - range.start) as usize;
            let body = w.batch_body(range);
            let t0 = Instant::now();
            let answer = c.post("application/x-ndjson", &body)?;
            let us = micros_since(t0);
            check_receipts(&answer, lines)?;
            Ok(us)
        },
    )
}

/// An ingest answer must hold `lines` receipts and no error.
pub(crate) fn check_receipts(answer: &[u8], lines: usize) -> Result<()> {
    let v: serde_json::Value = serde_json::from_slice(answer).context("ingest answer")?;
    let receipts = v["receipts"].as_array().map_or(0, Vec::len);
    let errors = v["errors"].as_array().map_or(0, Vec::len);
    if receipts != lines || errors != 0 {
        bail!("the server recorded {receipts} of {lines} events ({errors} rejected)");
    }
    Ok(())
}

/// One kept-alive HTTP/1.1 connection to `afr serve`'s Unix socket. Answers must carry a
/// `Content-Length` (every answer the bench asks for does).
pub(crate) struct Conn {
    stream: BufReader<UnixStream>,
    request: Vec<u8>,
}

impl Conn {
    pub(crate) fn connect(socket: &Path) -> Result<Conn> {
        let s = UnixStream::connect(socket)
            .with_context(|| format!("cannot connect to {}", socket.display()))?;
        Ok(Conn {
            stream: BufReader::new(s),
            request: Vec::new(),
        })
    }

    /// POSTs `body` to `/v1/events`; the answer's body, which must come with status 200.
    pub(crate) fn post(&mut self, content_type: &str, body: &[u8]) -> Result<Vec<u8>> {
        self.request.clear();
        write!(
            self.request,
            "POST /v1/events HTTP/1.1\r\nHost: afr\r\nContent-Type: {content_type}\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        )?;
        self.request.extend_from_slice(body);
        self.exchange()
    }

    fn get(&mut self, target: &str) -> Result<Vec<u8>> {
        self.request.clear();
        write!(self.request, "GET {target} HTTP/1.1\r\nHost: afr\r\n\r\n")?;
        self.exchange()
    }

    fn exchange(&mut self) -> Result<Vec<u8>> {
        self.stream.get_mut().write_all(&self.request)?;
        let mut line = String::new();
        self.stream.read_line(&mut line)?;
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("bad status line {line:?}"))?;
        let mut length = None;
        loop {
            line.clear();
            if self.stream.read_line(&mut line)? == 0 {
                bail!("the server closed the connection");
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = Some(v.trim().parse::<usize>()?);
            }
        }
        let mut body = vec![0; length.context("an answer without Content-Length")?];
        self.stream.read_exact(&mut body)?;
        if status != 200 {
            bail!(
                "afr serve answered {status}: {}",
                crate::esc(String::from_utf8_lossy(&body).trim())
            );
        }
        Ok(body)
    }
}

/// An `afr serve` this bench started; stopped with SIGTERM, or killed if dropped running.
pub(crate) struct Server {
    child: Child,
    pub(crate) socket: PathBuf,
    log: PathBuf,
}

impl Server {
    pub(crate) fn start(afr: &Path, dir: &Path, args: &[String]) -> Result<Server> {
        let init = Command::new(afr)
            .arg("--dir")
            .arg(dir)
            .arg("init")
            .output()
            .with_context(|| format!("cannot run {}", afr.display()))?;
        if !init.status.success() {
            bail!(
                "afr init failed: {}",
                crate::esc(String::from_utf8_lossy(&init.stderr).trim())
            );
        }
        let log = dir.with_extension("log");
        let child = Command::new(afr)
            .arg("--dir")
            .arg(dir)
            .arg("serve")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("cannot start {} serve", afr.display()))?;
        let mut s = Server {
            child,
            socket: dir.join("afr.sock"),
            log,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        while UnixStream::connect(&s.socket).is_err() {
            if let Some(st) = s.child.try_wait()? {
                bail!("afr serve exited ({st}): {}", s.stderr());
            }
            if Instant::now() > deadline {
                bail!("afr serve did not answer within {START_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(s)
    }

    fn stderr(&self) -> String {
        crate::esc(
            std::fs::read_to_string(&self.log)
                .unwrap_or_default()
                .trim(),
        )
    }

    /// SIGTERM (the `kill` program: this crate has no unsafe code), then the exit.
    pub(crate) fn stop(&mut self) -> Result<()> {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status()?;
        if !sent.success() {
            bail!("kill -TERM {pid} failed");
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if let Some(st) = self.child.try_wait()? {
                if !st.success() {
                    bail!("afr serve exited with {st}: {}", self.stderr());
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("afr serve did not stop within {STOP_TIMEOUT:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The `afr` beside this program.
pub(crate) fn afr_beside() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let afr = exe
        .parent()
        .map(|d| d.join("afr"))
        .filter(|p| p.is_file())
        .with_context(|| {
            format!(
                "no `afr` beside {}: build it with `cargo build --release -p afr-cli -p afr-eval` \
                 (or pass --afr PATH)",
                exe.display()
            )
        })?;
    Ok(afr)
}

/// Runs `afr bench serve` and prints its figures.
pub fn run(b: &ServeBench) -> Result<ExitCode> {
    let afr = match &b.afr {
        Some(p) => p.clone(),
        None => afr_beside()?,
    };
    let (post_clients, batch_clients) = (b.post_clients.max(1), b.batch_clients.max(1));
    let batch = b.batch.max(1) as u64;
    let w = Workload::new(b.seed)?;
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    let durability = format!("{:?}", b.durability).to_lowercase();
    let mut server = Server::start(
        &afr,
        &tmp.path().join("served"),
        &[
            "--durability".into(),
            durability.clone(),
            "--epoch-size".into(),
            b.epoch_size.to_string(),
            "--max-batch-lines".into(),
            b.batch.max(1000).to_string(),
            // One request in flight per connection: none is ever refused as busy.
            "--max-inflight".into(),
            post_clients.max(batch_clients).max(16).to_string(),
        ],
    )?;
    let dir = tmp.path().join("in-process");
    afr_recorder::init(&dir, [0x42; 20])?;
    let rec = Recorder::open(
        &dir,
        Config {
            epoch_size: b.epoch_size,
            durability: b.durability,
            ..Config::default()
        },
    )?;
    let progress = |what: &str| {
        if !b.json && std::io::stderr().is_terminal() {
            eprintln!("{what}...");
        }
    };
    let socket = server.socket.clone();

    // Event indices: each workload takes the next slice of the cycled pool, on both sides.
    let mut at = 0;
    let mut next = |n: u64| {
        let o = at;
        at += n;
        o
    };
    progress("warming up");
    let o = next(b.warmup);
    in_process_single(&rec, &w, o, b.warmup, 1)?;
    served_single(&socket, &w, o, b.warmup, 1)?;
    progress("one event at a time");
    let o = next(b.latency_events);
    let seq_rec = in_process_single(&rec, &w, o, b.latency_events, 1)?;
    let seq_post = served_single(&socket, &w, o, b.latency_events, 1)?;
    progress("single events, concurrently");
    let o = next(b.posts);
    let conc_rec = in_process_single(&rec, &w, o, b.posts, post_clients)?;
    let conc_post = served_single(&socket, &w, o, b.posts, post_clients)?;
    progress("batches");
    let o = next(b.batched_events);
    let plan = (o, b.batched_events, batch, batch_clients);
    let batch_rec = in_process_batches(&rec, &w, plan)?;
    let batch_post = served_batches(&socket, &w, plan)?;

    // Everything sent was recorded, on both sides.
    let status: serde_json::Value =
        serde_json::from_slice(&Conn::connect(&socket)?.get("/v1/status")?)?;
    let served_events = status["events"].as_u64().unwrap_or(0);
    rec.flush()?;
    let in_process_events = rec.next_seq();
    server.stop()?;
    if served_events != at || in_process_events != at {
        bail!(
            "expected {at} events on each side, the server counts {served_events}, the \
             in-process recorder {in_process_events}"
        );
    }

    let added_median = round2(seq_post.median_us - seq_rec.median_us);
    let added_p99 = round2(seq_post.p99_us - seq_rec.p99_us);
    let met_batched = batch_post.events_per_s >= TARGET_BATCHED_EVENTS_PER_S;
    let met_single = conc_post.events_per_s >= TARGET_SINGLE_POSTS_PER_S;
    let met_p99 = added_p99 <= TARGET_P99_ADDED_US;
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    if b.json {
        println!(
            "{}",
            json!({
                "durability": durability,
                "epoch_size": b.epoch_size,
                "cores": cores,
                "batch": batch,
                "one_at_a_time": { "in_process_record": seq_rec, "single_post": seq_post },
                "added_latency_us": { "median": added_median, "p99": added_p99 },
                "concurrent_single": { "in_process_record": conc_rec, "single_post": conc_post },
                "batches": { "in_process_submit": batch_rec, "ndjson_post": batch_post },
                "targets": {
                    "batched_events_per_s": TARGET_BATCHED_EVENTS_PER_S,
                    "single_posts_per_s": TARGET_SINGLE_POSTS_PER_S,
                    "p99_added_us": TARGET_P99_ADDED_US,
                },
                "met": { "batched": met_batched, "single": met_single, "p99_added": met_p99 },
                "events_per_side": at,
            })
        );
        return Ok(ExitCode::SUCCESS);
    }
    let met = |m: bool| if m { "met" } else { "NOT met" };
    println!(
        "afr bench serve: afr serve on its Unix socket vs the in-process recorder; {durability} \
         durability, epoch size {}, {cores} cores",
        b.epoch_size
    );
    println!(
        "  {:<58} {:>10} {:>11} {:>11}",
        "", "events/s", "median µs", "P99 µs"
    );
    let line = |label: String, r: &Row| {
        println!(
            "  {label:<58} {:>10} {:>11.1} {:>11.1}",
            thousands(r.events_per_s),
            r.median_us,
            r.p99_us
        )
    };
    println!(
        "  one event at a time ({} events; latency per event)",
        thousands(b.latency_events as f64)
    );
    line("  in process: record(), 1 thread".into(), &seq_rec);
    line(
        "  afr serve: single-event POST, 1 connection".into(),
        &seq_post,
    );
    println!(
        "  {:<58} {:>10} {:>+11.1} {:>+11.1}   target P99 ≤ {} µs: {}",
        "  added by the server",
        "",
        added_median,
        added_p99,
        thousands(TARGET_P99_ADDED_US),
        met(met_p99)
    );
    println!(
        "  single events, {post_clients} at a time ({} events; latency per event)",
        thousands(b.posts as f64)
    );
    line(
        format!("  in process: record(), {post_clients} threads"),
        &conc_rec,
    );
    line(
        format!("  afr serve: single-event POSTs, {post_clients} connections"),
        &conc_post,
    );
    println!(
        "  {:<58} {:>10}   target ≥ {} POSTs/s: {}",
        "",
        "",
        thousands(TARGET_SINGLE_POSTS_PER_S),
        met(met_single)
    );
    println!(
        "  batches of {batch}, {batch_clients} at a time ({} events; latency per batch)",
        thousands(b.batched_events as f64)
    );
    line(
        format!("  in process: submit() ×{batch} + wait_written, {batch_clients} threads"),
        &batch_rec,
    );
    line(
        format!("  afr serve: NDJSON POSTs of {batch}, {batch_clients} connections"),
        &batch_post,
    );
    println!(
        "  {:<58} {:>10}   target ≥ {} events/s: {}",
        "",
        "",
        thousands(TARGET_BATCHED_EVENTS_PER_S),
        met(met_batched)
    );
    Ok(ExitCode::SUCCESS)
}

/// `x` rounded, with thousands separators: 12,345.
fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_batches_cover_every_event_once() {
        let mut seen: Vec<u64> = (0..3).flat_map(|t| share(10, 7, 3, t)).collect();
        seen.sort_unstable();
        assert_eq!(seen, (10..17).collect::<Vec<_>>());
        let batches: Vec<_> = (0..3).map(|b| batch_range(10, 7, 3, b)).collect();
        assert_eq!(batches, vec![10..13, 13..16, 16..17]);
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(12_345.0), "12,345");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
    }
}
