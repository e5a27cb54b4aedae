//! `afr bench mcp`: a `tools/call` to the reference server-everything's `echo`, direct and
//! through the gateway, side by side in one run.
//!
//! | transport | direct | through the gateway |
//! |---|---|---|
//! | stdio | `node server-everything stdio` | `afr mcp wrap -- node server-everything stdio` |
//! | Streamable HTTP | server-everything `streamableHttp` | `afr mcp proxy --upstream` it |
//!
//! The gateway records into a fresh store opened directly, in group durability (the
//! default): one event per call, journaled (synced) before the call is forwarded and recorded
//! complete after the answer.
//!
//! Workloads, each on every side:
//! - **latency**: one call at a time; the median and P99 from writing the request to reading
//!   its response. The gateway's cost is the difference of the two sides' percentiles.
//! - **throughput**: calls per second with several in flight (stdio: a window of requests on
//!   the one pipe, as an agent issuing parallel tool calls does; HTTP: one call at a time on
//!   each of several connections).
//!
//! Every answer is checked (`Echo: <message>`), and at the end the store must hold one event
//! per call made through the gateway.

use std::{
    io::{BufRead, BufReader, BufWriter, IsTerminal, Read, Write},
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use clap::Args;

use crate::bench::percentile;
use serde::Serialize;
use serde_json::{Value, json};

/// Largest P99 latency the gateway may add to a call, in microseconds.
pub const TARGET_P99_ADDED_US: f64 = 1_000.0;
/// Largest median latency the gateway may add to a real SDK client's call on stdio (µs).
pub const TARGET_SDK_MEDIAN_ADDED_US: f64 = 500.0;
/// Largest P99 latency the gateway may add to a real SDK client's call on stdio (µs).
pub const TARGET_SDK_P99_ADDED_US: f64 = 1_000.0;
/// Smallest throughput through the gateway, as a fraction of direct.
pub const TARGET_THROUGHPUT_RATIO: f64 = 0.90;

/// Options of `afr bench mcp`.
#[derive(Args, Debug)]
pub struct McpBench {
    /// Calls made one at a time on each side (the latency workload).
    #[arg(long, default_value_t = 2_000)]
    calls: u64,
    /// Calls made with several in flight on each side (the throughput workload).
    #[arg(long, default_value_t = 4_000)]
    concurrent_calls: u64,
    /// Calls in flight at once (stdio: requests on the pipe; HTTP: connections).
    #[arg(long, default_value_t = 8)]
    in_flight: usize,
    /// Calls made on each side before measuring.
    #[arg(long, default_value_t = 300)]
    warmup: u64,
    /// Skip the Streamable HTTP sides.
    #[arg(long)]
    no_http: bool,
    /// The directory holding the pinned MCP servers' node_modules (scripts/setup.sh installs
    /// them in tests/mcp/).
    #[arg(long)]
    node_modules: Option<PathBuf>,
    /// The `afr` program (default: the one beside this program).
    #[arg(long)]
    afr: Option<PathBuf>,
    /// Also measure with the real Python MCP SDK as the client (tests/mcp/sdk_latency.py, run
    /// with this Python; scripts/setup.sh installs the SDK in .venv/): `--calls` sequential
    /// echo calls, direct and through `afr mcp wrap`, interleaved in blocks of 25.
    #[arg(long, value_name = "PYTHON")]
    sdk: Option<PathBuf>,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, Serialize)]
struct Latency {
    calls: u64,
    median_us: f64,
    p99_us: f64,
}

#[derive(Debug, Clone, Copy, Serialize)]
struct Side {
    latency: Latency,
    calls_per_s: f64,
}

#[derive(Debug, Serialize)]
struct Pair {
    transport: &'static str,
    direct: Side,
    gateway: Side,
    added_median_us: f64,
    added_p99_us: f64,
    throughput_ratio: f64,
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn latency(mut us: Vec<f64>) -> Latency {
    us.sort_by(f64::total_cmp);
    Latency {
        calls: us.len() as u64,
        median_us: round1(percentile(&us, 0.5)),
        p99_us: round1(percentile(&us, 0.99)),
    }
}

fn echo_call(id: u64) -> Vec<u8> {
    let mut b = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": format!("m{id}")}}})
    .to_string()
    .into_bytes();
    b.push(b'\n');
    b
}

fn check_echo(id: u64, v: &Value) -> Result<()> {
    let text = v.pointer("/result/content/0/text").and_then(Value::as_str);
    ensure!(
        text == Some(format!("Echo: m{id}").as_str()),
        "call {id}: unexpected answer {v}"
    );
    Ok(())
}

/// An MCP client over a child's stdio (2025-11-25).
struct Stdio2 {
    child: Child,
    to: BufWriter<ChildStdin>,
    from: BufReader<ChildStdout>,
    next_id: u64,
}

impl Stdio2 {
    fn start(mut cmd: Command) -> Result<Stdio2> {
        let mut child = spawn(&mut cmd, Stdio::piped(), Stdio::piped(), Stdio::null())?;
        let to = BufWriter::new(child.stdin.take().context("no stdin")?);
        let from = BufReader::new(child.stdout.take().context("no stdout")?);
        let mut c = Stdio2 {
            child,
            to,
            from,
            next_id: 1,
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "afr-bench", "version": "1"}}});
        c.send(format!("{init}\n").as_bytes())?;
        c.flush()?;
        c.read_response()?;
        c.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")?;
        c.flush()?;
        Ok(c)
    }

    fn send(&mut self, b: &[u8]) -> Result<()> {
        self.to.write_all(b).context("the server's stdin closed")
    }

    fn flush(&mut self) -> Result<()> {
        self.to.flush().context("the server's stdin closed")
    }

    /// The next response (notifications and server requests skipped).
    fn read_response(&mut self) -> Result<Value> {
        let mut line = Vec::new();
        loop {
            line.clear();
            if self.from.read_until(b'\n', &mut line)? == 0 {
                bail!("the server closed its stdout");
            }
            let v: Value = serde_json::from_slice(&line).context("a line that is not JSON")?;
            if v.get("method").is_none() {
                return Ok(v);
            }
        }
    }

    /// `n` calls one at a time; each one's latency in µs.
    fn sequential(&mut self, n: u64) -> Result<Vec<f64>> {
        let mut lat = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let id = self.next_id;
            self.next_id += 1;
            let t = Instant::now();
            self.send(&echo_call(id))?;
            self.flush()?;
            let v = self.read_response()?;
            lat.push(t.elapsed().as_secs_f64() * 1e6);
            check_echo(id, &v)?;
        }
        Ok(lat)
    }

    /// `n` calls with up to `window` in flight; calls per second.
    fn windowed(&mut self, n: u64, window: usize) -> Result<f64> {
        let first = self.next_id;
        let (mut sent, mut done) = (0u64, 0u64);
        let t = Instant::now();
        while done < n {
            while sent < n && sent - done < window as u64 {
                self.send(&echo_call(first + sent))?;
                sent += 1;
            }
            self.flush()?;
            let v = self.read_response()?;
            let id = v
                .get("id")
                .and_then(Value::as_u64)
                .context("a response without id")?;
            check_echo(id, &v)?;
            done += 1;
        }
        self.next_id += n;
        Ok(n as f64 / t.elapsed().as_secs_f64())
    }

    fn stop(mut self) {
        drop(self.to);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child process killed when dropped.
pub(crate) struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        // SIGTERM first (the proxy records outcomes on it), then SIGKILL.
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(cmd: &mut Command, stdin: Stdio, stdout: Stdio, stderr: Stdio) -> Result<Child> {
    cmd.stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("cannot start {cmd:?}"))
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// [`start_until`], and the first `http://` URL in that line.
pub(crate) fn start_until_url(cmd: Command, ready: &str) -> Result<(Killed, String)> {
    let (child, line) = start_until(cmd, ready)?;
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .with_context(|| format!("no URL in {line:?}"))?
        .to_owned();
    Ok((child, url))
}

/// Starts `cmd` and waits until its stderr has a line containing `ready`; the line.
pub(crate) fn start_until(mut cmd: Command, ready: &str) -> Result<(Killed, String)> {
    let mut child = spawn(&mut cmd, Stdio::null(), Stdio::null(), Stdio::piped())?;
    let err = child.stderr.take().context("no stderr")?;
    let child = Killed(child);
    let (tx, rx) = std::sync::mpsc::channel();
    let ready = ready.to_owned();
    std::thread::spawn(move || {
        let mut r = BufReader::new(err);
        let mut line = String::new();
        let mut sent = false;
        // Keep reading (and discarding) so that the child never blocks on a full pipe.
        while r.read_line(&mut line).unwrap_or(0) > 0 {
            if !sent && line.contains(&ready) {
                let _ = tx.send(line.clone());
                sent = true;
            }
            line.clear();
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .with_context(|| format!("{cmd:?} did not get ready"))?;
    Ok((child, line))
}

/// An MCP client over Streamable HTTP (2025-11-25): one session, calls on several
/// connections.
struct Http {
    url: String,
    session: String,
}

pub(crate) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .new_agent()
}

/// The JSON-RPC messages of an answer: a JSON body, or the `data:` of each SSE event.
fn messages(content_type: &str, body: &str) -> Vec<Value> {
    if content_type.starts_with("text/event-stream") {
        body.split("\n\n")
            .filter_map(|ev| {
                let data: Vec<&str> = ev
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                serde_json::from_str(&data.join("\n")).ok()
            })
            .collect()
    } else {
        serde_json::from_str(body).into_iter().collect()
    }
}

impl Http {
    fn post(&self, agent: &ureq::Agent, body: &[u8]) -> Result<(Option<String>, Vec<Value>)> {
        let mut req = agent
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25");
        if !self.session.is_empty() {
            req = req.header("mcp-session-id", &self.session);
        }
        let mut resp = req
            .send(body)
            .with_context(|| format!("POST {}", self.url))?;
        let status = resp.status();
        let sid = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let mut text = String::new();
        resp.body_mut()
            .as_reader()
            .read_to_string(&mut text)
            .context("reading an answer")?;
        ensure!(status.is_success(), "HTTP {status}: {text}");
        Ok((sid, messages(&ct, &text)))
    }

    fn open(url: String) -> Result<Http> {
        let mut h = Http {
            url,
            session: String::new(),
        };
        let a = agent();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "afr-bench", "version": "1"}}});
        let (sid, _) = h.post(&a, init.to_string().as_bytes())?;
        h.session = sid.context("no Mcp-Session-Id in the initialize answer")?;
        h.post(
            &a,
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
        )?;
        Ok(h)
    }

    fn call(&self, agent: &ureq::Agent, id: u64) -> Result<f64> {
        let body = echo_call(id);
        let t = Instant::now();
        let (_, msgs) = self.post(agent, &body)?;
        let us = t.elapsed().as_secs_f64() * 1e6;
        let answer = msgs
            .iter()
            .find(|m| m.get("id").and_then(Value::as_u64) == Some(id))
            .with_context(|| format!("call {id}: no answer"))?;
        check_echo(id, answer)?;
        Ok(us)
    }

    /// `n` calls from `clients` connections at once (ids from `first`); calls per second and
    /// every latency.
    fn run(&self, first: u64, n: u64, clients: usize) -> Result<(f64, Vec<f64>)> {
        let t = Instant::now();
        let results: Vec<Result<Vec<f64>>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..clients)
                .map(|c| {
                    s.spawn(move || {
                        let a = agent();
                        (c as u64..n)
                            .step_by(clients)
                            .map(|i| self.call(&a, first + i))
                            .collect()
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a client panicked")))
                })
                .collect()
        });
        let rate = n as f64 / t.elapsed().as_secs_f64();
        let mut lat = Vec::new();
        for r in results {
            lat.extend(r?);
        }
        Ok((rate, lat))
    }
}

fn pair(transport: &'static str, direct: Side, gateway: Side) -> Pair {
    Pair {
        transport,
        added_median_us: round1(gateway.latency.median_us - direct.latency.median_us),
        added_p99_us: round1(gateway.latency.p99_us - direct.latency.p99_us),
        throughput_ratio: (gateway.calls_per_s / direct.calls_per_s * 1000.0).round() / 1000.0,
        direct,
        gateway,
    }
}

fn stdio_side(cmd: Command, b: &McpBench) -> Result<Side> {
    let mut c = Stdio2::start(cmd)?;
    c.sequential(b.warmup)?;
    let lat = c.sequential(b.calls)?;
    let rate = c.windowed(b.concurrent_calls, b.in_flight.max(1))?;
    c.stop();
    Ok(Side {
        latency: latency(lat),
        calls_per_s: rate.round(),
    })
}

fn http_side(url: String, b: &McpBench) -> Result<Side> {
    let h = Http::open(url)?;
    let mut first = 1;
    h.run(first, b.warmup, 1)?;
    first += b.warmup;
    let (_, lat) = h.run(first, b.calls, 1)?;
    first += b.calls;
    let (rate, _) = h.run(first, b.concurrent_calls, b.in_flight.max(1))?;
    Ok(Side {
        latency: latency(lat),
        calls_per_s: rate.round(),
    })
}

pub(crate) fn events_in(afr: &Path, dir: &Path) -> Result<u64> {
    let out = Command::new(afr)
        .arg("--dir")
        .arg(dir)
        .args(["status", "--json"])
        .output()?;
    ensure!(out.status.success(), "afr status failed");
    let v: Value = serde_json::from_slice(&out.stdout)?;
    v["events"]
        .as_u64()
        .context("no event count in `afr status --json`")
}

/// Runs `afr bench mcp` and prints its figures.
pub fn run(b: &McpBench) -> Result<ExitCode> {
    let afr = match &b.afr {
        Some(p) => p.clone(),
        None => crate::serve_bench::afr_beside()?,
    };
    let modules = b
        .node_modules
        .clone()
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/node_modules"));
    let server = modules.join("@modelcontextprotocol/server-everything/dist/index.js");
    ensure!(
        server.is_file(),
        "no {}: run scripts/setup.sh (it installs the pinned MCP servers), or pass --node-modules",
        server.display()
    );
    let node = |args: &[&str]| {
        let mut c = Command::new("node");
        c.arg(&server).args(args);
        c
    };
    let progress = |what: &str| {
        if !b.json && std::io::stderr().is_terminal() {
            eprintln!("{what}...");
        }
    };
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    let init = |name: &str| -> Result<PathBuf> {
        let dir = tmp.path().join(name);
        afr_recorder::init(&dir, [0x42; 20])?;
        Ok(dir)
    };
    let mut pairs = Vec::new();
    let per_side = b.warmup + b.calls + b.concurrent_calls;

    progress("stdio, direct");
    let direct = stdio_side(node(&["stdio"]), b)?;
    progress("stdio, through afr mcp wrap");
    let wrap_dir = init("wrap")?;
    let mut wrap = Command::new(&afr);
    wrap.arg("--dir")
        .arg(&wrap_dir)
        .args(["mcp", "wrap", "--", "node"])
        .arg(&server)
        .arg("stdio");
    let gateway = stdio_side(wrap, b)?;
    let recorded = events_in(&afr, &wrap_dir)?;
    ensure!(
        recorded == per_side,
        "afr mcp wrap recorded {recorded} events for {per_side} calls (expected one per call)"
    );
    pairs.push(pair("stdio", direct, gateway));

    // The same calls from a real SDK client: what an agent sees (its own client's cost is on
    // both sides; the difference is the gateway's).
    let mut sdk = None;
    if let Some(python) = &b.sdk {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/sdk_latency.py");
        // Both sides in one client process, interleaved in blocks of 25 calls, so that both
        // see the same machine (a slow spell on a shared machine lands on both).
        progress("stdio, Python SDK client, direct and through afr mcp wrap (interleaved)");
        let sdk_dir = init("sdk")?;
        let out = Command::new(python)
            .arg(&script)
            .args([
                "--calls",
                &b.calls.to_string(),
                "--warmup",
                &b.warmup.to_string(),
                "--",
                "node",
            ])
            .arg(&server)
            .args(["stdio", "---"])
            .arg(&afr)
            .arg("--dir")
            .arg(&sdk_dir)
            .args(["mcp", "wrap", "--", "node"])
            .arg(&server)
            .arg("stdio")
            .stderr(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {}", python.display()))?;
        ensure!(
            out.status.success(),
            "sdk_latency.py failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let v: Value = serde_json::from_slice(&out.stdout).context("sdk_latency.py's answer")?;
        let side = |i: usize| Latency {
            calls: v["sides"][i]["calls"].as_u64().unwrap_or(0),
            median_us: v["sides"][i]["median_us"].as_f64().unwrap_or(f64::NAN),
            p99_us: v["sides"][i]["p99_us"].as_f64().unwrap_or(f64::NAN),
        };
        let (direct, gateway) = (side(0), side(1));
        let recorded = events_in(&afr, &sdk_dir)?;
        ensure!(
            recorded == b.warmup + b.calls,
            "afr mcp wrap recorded {recorded} events for {} SDK calls (expected one per call)",
            b.warmup + b.calls
        );
        ensure!(
            direct.calls == b.calls && gateway.calls == b.calls,
            "sdk_latency.py made {} and {} calls, not {}",
            direct.calls,
            gateway.calls,
            b.calls
        );
        sdk = Some(json!({
            "client": "mcp (Python SDK)",
            "direct": direct,
            "gateway": gateway,
            "added_median_us": round1(gateway.median_us - direct.median_us),
            "added_p99_us": round1(gateway.p99_us - direct.p99_us),
            "targets": {"added_median_us_at_most": TARGET_SDK_MEDIAN_ADDED_US, "added_p99_us_at_most": TARGET_SDK_P99_ADDED_US},
        }));
    }

    if !b.no_http {
        progress("Streamable HTTP, direct");
        let port = free_port()?;
        let mut srv = node(&["streamableHttp"]);
        srv.env("PORT", port.to_string());
        let (_srv, _) = start_until(srv, "listening on port")?;
        let upstream = format!("http://127.0.0.1:{port}/mcp");
        let direct = http_side(upstream.clone(), b)?;
        progress("Streamable HTTP, through afr mcp proxy");
        let proxy_dir = init("proxy")?;
        let mut proxy = Command::new(&afr);
        proxy.arg("--dir").arg(&proxy_dir).args([
            "mcp",
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &upstream,
        ]);
        let (proxy, url) = start_until_url(proxy, "listening on http://")?;
        let gateway = http_side(url, b)?;
        drop(proxy);
        let recorded = events_in(&afr, &proxy_dir)?;
        ensure!(
            recorded == per_side,
            "afr mcp proxy recorded {recorded} events for {per_side} calls (expected one per call)"
        );
        pairs.push(pair("http", direct, gateway));
    }

    let report = json!({
        "server": "@modelcontextprotocol/server-everything echo",
        "durability": "group",
        "in_flight": b.in_flight,
        "pairs": pairs,
        "sdk_client": sdk,
        "targets": {"added_p99_us_at_most": TARGET_P99_ADDED_US,
                    "throughput_ratio_at_least": TARGET_THROUGHPUT_RATIO},
    });
    if b.json {
        println!("{report}");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "tools/call echo on server-everything, direct vs through the gateway (group durability, \
         one event per call)"
    );
    println!(
        "{:<7} {:>13} {:>13} {:>13} {:>13} {:>11} {:>11} {:>7}",
        "", "median µs", "P99 µs", "gw median", "gw P99", "calls/s", "gw calls/s", "ratio"
    );
    for p in &pairs {
        println!(
            "{:<7} {:>13} {:>13} {:>13} {:>13} {:>11} {:>11} {:>7}",
            p.transport,
            p.direct.latency.median_us,
            p.direct.latency.p99_us,
            p.gateway.latency.median_us,
            p.gateway.latency.p99_us,
            p.direct.calls_per_s,
            p.gateway.calls_per_s,
            p.throughput_ratio
        );
    }
    for p in &pairs {
        println!(
            "{}: the gateway adds {} µs at the median, {} µs at P99 (target ≤ {} µs: {}); \
             throughput {:.1}% of direct with {} in flight (target ≥ {:.0}%: {})",
            p.transport,
            p.added_median_us,
            p.added_p99_us,
            TARGET_P99_ADDED_US,
            if p.added_p99_us <= TARGET_P99_ADDED_US {
                "met"
            } else {
                "missed"
            },
            p.throughput_ratio * 100.0,
            b.in_flight,
            TARGET_THROUGHPUT_RATIO * 100.0,
            if p.throughput_ratio >= TARGET_THROUGHPUT_RATIO {
                "met"
            } else {
                "missed"
            },
        );
    }
    if let Some(s) = &sdk {
        let (m, p) = (
            s["added_median_us"].as_f64().unwrap_or(f64::NAN),
            s["added_p99_us"].as_f64().unwrap_or(f64::NAN),
        );
        println!(
            "stdio with the Python SDK client: direct median {} µs P99 {} µs; through the gateway median {} µs P99 {} µs; added {m} µs median (target ≤ {TARGET_SDK_MEDIAN_ADDED_US}: {}), {p} µs P99 (target ≤ {TARGET_SDK_P99_ADDED_US}: {})",
            s["direct"]["median_us"],
            s["direct"]["p99_us"],
            s["gateway"]["median_us"],
            s["gateway"]["p99_us"],
            if m <= TARGET_SDK_MEDIAN_ADDED_US {
                "met"
            } else {
                "missed"
            },
            if p <= TARGET_SDK_P99_ADDED_US {
                "met"
            } else {
                "missed"
            },
        );
    }
    Ok(ExitCode::SUCCESS)
}
