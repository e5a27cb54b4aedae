//! `afr otlp` against REAL OpenTelemetry emitters (tests/otlp/FACTS.md, installed by
//! scripts/setup.sh): a Pydantic AI agent run (`emit_agent.py`) and hand-built spans in the
//! GenAI / OpenInference / OpenLLMetry dialects (`emit_raw.py`), exported by the OTel Python
//! SDK's own OTLP exporters over HTTP (protobuf, JSON, gzip) and gRPC, and by the OTel JS SDK's
//! OTLP/HTTP JSON exporter (`emit_js.mjs`); plus raw HTTP requests
//! re-sending bodies those exporters really sent (captured with `capture_sink.py`).

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc::Receiver,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use super::{
    afr, initialised,
    proc::{Daemon, Guard, python, slurp},
};

/// How long an emitter run may take, and how long a daemon may take to come up.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

fn otlp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/otlp")
}

/// Runs `c` to completion (at most [`RUN_TIMEOUT`]); its exit code, stdout and stderr.
fn run(c: &mut Command) -> (Option<i32>, String, String) {
    let mut g = Guard(
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = slurp(g.0.stdout.take().unwrap());
    let err = slurp(g.0.stderr.take().unwrap());
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(st) = g.0.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "{c:?} ran over {RUN_TIMEOUT:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = |r: Receiver<Vec<u8>>| {
        String::from_utf8_lossy(&r.recv_timeout(Duration::from_secs(30)).unwrap_or_default())
            .into_owned()
    };
    (status.code(), text(out), text(err))
}

/// `python tests/otlp/<script> ARGS` (`node` for a `.mjs`): exits 0 (every export accepted); the
/// JSON line it printed.
fn emit(script: &str, args: &[&str]) -> Value {
    emit_expecting(script, args, true)
}

/// `python tests/otlp/<script> ARGS`, which must fail (an export refused): what it printed.
fn emit_refused(script: &str, args: &[&str]) -> Value {
    emit_expecting(script, args, false)
}

fn emit_expecting(script: &str, args: &[&str], ok: bool) -> Value {
    // A `.mjs` emitter runs on Node with the pinned JS SDK in tests/otlp/node_modules.
    let mut c = if script.ends_with(".mjs") {
        afr_testkit::installed(
            &otlp_dir().join("node_modules/@opentelemetry/exporter-trace-otlp-http"),
            "scripts/setup.sh",
        );
        Command::new("node")
    } else {
        Command::new(python())
    };
    let (code, out, err) = run(c.arg(otlp_dir().join(script)).args(args));
    let want = if ok { 0 } else { 1 };
    assert_eq!(
        code,
        Some(want),
        "{script} {args:?}\nstdout: {out}\nstderr: {err}"
    );
    let v: Value =
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}\nstderr: {err}"));
    assert_eq!(v["ok"], ok, "{v}");
    v
}

/// `afr otlp` started in a fresh store, and what `script` printed after exporting to its
/// OTLP/HTTP endpoint (`--endpoint URL ARGS`).
fn emit_over_http(script: &str, args: &[&str]) -> (tempfile::TempDir, PathBuf, Otlp, Value) {
    let (tmp, dir) = initialised();
    let rx = Otlp::start(&dir, &[]);
    let url = rx.http_url();
    let mut all = vec!["--endpoint", url.as_str()];
    all.extend_from_slice(args);
    let run = emit(script, &all);
    (tmp, dir, rx, run)
}

/// A running `afr otlp` and the addresses it bound.
pub(super) struct Otlp {
    d: Daemon,
    /// `host:port` of OTLP/HTTP (a wildcard host is given as 127.0.0.1).
    pub(super) http: Option<String>,
    /// `host:port` of OTLP/gRPC.
    grpc: Option<String>,
}

impl Otlp {
    /// `afr --dir DIR otlp --http 127.0.0.1:0 --grpc 127.0.0.1:0 EXTRA`.
    pub(super) fn start(dir: &Path, extra: &[&str]) -> Otlp {
        Otlp::start_with(
            dir,
            &["--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
            extra,
        )
    }

    fn start_with(dir: &Path, listen: &[&str], extra: &[&str]) -> Otlp {
        let mut d = Daemon::spawn(afr(dir).arg("otlp").args(listen).args(extra));
        let want_http = !extra.contains(&"--no-http") && !listen.contains(&"--no-http");
        let want_grpc = !extra.contains(&"--no-grpc") && !listen.contains(&"--no-grpc");
        let local = |a: &str| a.replace("0.0.0.0:", "127.0.0.1:");
        let (mut http, mut grpc) = (None, None);
        while (want_http && http.is_none()) || (want_grpc && grpc.is_none()) {
            let line = d.wait_for(|l| Some(l.to_owned()));
            let line = line.unwrap_or_else(|| panic!("afr otlp did not start: {}", d.stderr()));
            if let Some(a) = line.strip_prefix("afr otlp: OTLP/HTTP on http://") {
                http = Some(local(a.strip_suffix("/v1/traces").unwrap()));
            } else if let Some(a) = line.strip_prefix("afr otlp: OTLP/gRPC on grpc://") {
                grpc = Some(local(a));
            }
        }
        Otlp { d, http, grpc }
    }

    fn http_url(&self) -> String {
        format!("http://{}", self.http.as_ref().unwrap())
    }

    fn grpc_url(&self) -> String {
        format!("http://{}", self.grpc.as_ref().unwrap())
    }

    /// The next "afr otlp: export N: ..." summary line.
    fn next_export_line(&mut self) -> String {
        let l = self
            .d
            .wait_for(|l| l.starts_with("afr otlp: export ").then(|| l.to_owned()));
        l.unwrap_or_else(|| panic!("no export line: {}", self.d.stderr()))
    }

    /// Kills it (SIGKILL) and reaps it.
    pub(super) fn kill(mut self) {
        let _ = self.d.guard.0.kill();
        let _ = self.d.guard.0.wait();
    }
}

/// Every `{"seq", "event", ...}` line of `afr query --json`.
fn query(dir: &Path) -> Vec<Value> {
    super::mcp::query_lines(dir)
}

/// Polls the store until `n` events are there (or 60 s pass), then checks no more came.
fn exactly(dir: &Path, n: usize) -> Vec<Value> {
    let lines = super::mcp::wait_for_lines(dir, n);
    assert_eq!(lines.len(), n, "{lines:#?}");
    lines
}

/// `get_weather` of Paris, answered 21.5 °C and clear.
fn assert_weather(ev: &Value) {
    assert_eq!(ev["intent"]["tool"], "get_weather", "{ev}");
    assert_eq!(ev["intent"]["args"], json!({"city": "Paris"}), "{ev}");
    assert_eq!(
        ev["effects"]["return_value"],
        json!({"temp_c": 21.5, "sky": "clear"}),
        "{ev}"
    );
}

/// The one line whose event's tool is `tool` and that `f` accepts.
fn one<'a>(lines: &'a [Value], tool: &str, f: impl Fn(&Value) -> bool) -> &'a Value {
    let hits: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"]["intent"]["tool"] == tool && f(&l["event"]))
        .collect();
    assert_eq!(hits.len(), 1, "{tool}: {lines:#?}");
    hits[0]
}

/// The span id in the event's `traceparent:00-<trace>-<span>-01` source, checked against
/// `trace`.
fn span_of(event: &Value, trace: &str) -> String {
    let sources = event["context_provenance"]["sources"].as_array().unwrap();
    let tp: Vec<&str> = sources
        .iter()
        .filter(|s| s["kind"] == "otel_span")
        .map(|s| s["uri"].as_str().unwrap())
        .collect();
    assert_eq!(tp.len(), 1, "{event}");
    let rest = tp[0]
        .strip_prefix(&format!("traceparent:00-{trace}-"))
        .unwrap_or_else(|| panic!("{} is not in trace {trace}", tp[0]));
    let span = rest.strip_suffix("-01").unwrap();
    assert!(
        span.len() == 16
            && span
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{}",
        tp[0]
    );
    assert!(
        sources.iter().any(|s| s["kind"] == "self_reported_span"
            && s["uri"].as_str().unwrap().starts_with("otlp:")),
        "no self-report marker: {event}"
    );
    span.to_owned()
}

/// The event of the tool span `span` of `trace` (the emitters print both).
fn by_span<'a>(lines: &'a [Value], trace: &str, span: &str) -> &'a Value {
    let want = format!("traceparent:00-{trace}-{span}-01");
    let hits: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            l["event"]["context_provenance"]["sources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["uri"] == want.as_str())
        })
        .collect();
    assert_eq!(hits.len(), 1, "{want}: {lines:#?}");
    &hits[0]["event"]
}

/// A response: status, header block, body.
pub(super) struct Resp {
    pub(super) status: u16,
    pub(super) head: String,
    body: Vec<u8>,
}

/// POSTs `body` to `/v1/traces` at `addr` with `content_type` and `headers` (`Name: value`),
/// `Connection: close`; the response.
pub(super) fn post(addr: &str, content_type: &str, headers: &[&str], body: &[u8]) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!(
        "POST /v1/traces HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {content_type}\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    let mut all = req.into_bytes();
    all.extend_from_slice(body);
    // The receiver may answer (413, 415) before reading all of the body.
    let _ = s.write_all(&all);
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
    let at = data
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP response: {:?}", String::from_utf8_lossy(&data)));
    let head = String::from_utf8_lossy(&data[..at]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {head:?}"));
    Resp {
        status,
        head,
        body: data[at + 4..].to_vec(),
    }
}

/// One request a real exporter sent: its body as sent, and its headers.
struct Captured {
    body: Vec<u8>,
    meta: Value,
}

/// Runs `emit_raw.py ARGS` against `capture_sink.py`; the requests it sent and what it printed.
fn capture(args: &[&str]) -> (Vec<Captured>, Value) {
    let tmp = tempfile::tempdir().unwrap();
    let mut sink = Guard(
        Command::new(python())
            .arg(otlp_dir().join("capture_sink.py"))
            .args(["--port", "0", "--dir"])
            .arg(tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(sink.0.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let port = first
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("capture_sink: {first:?}"));
    let endpoint = format!("http://127.0.0.1:{port}");
    let mut all = vec!["--endpoint", &endpoint];
    all.extend_from_slice(args);
    let printed = emit("emit_raw.py", &all);
    drop(sink);
    let mut names: Vec<PathBuf> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "body"))
        .collect();
    names.sort();
    let reqs = names
        .iter()
        .map(|p| Captured {
            body: std::fs::read(p).unwrap(),
            meta: serde_json::from_slice(&std::fs::read(p.with_extension("json")).unwrap())
                .unwrap(),
        })
        .collect();
    (reqs, printed)
}

/// `body` with every occurrence of the 16 bytes of trace `from` (hex) replaced by `to`: the
/// same export, as a new trace (the protobuf stays valid, ids have a fixed length).
fn retraced(body: &[u8], from: &str, to: [u8; 16]) -> Vec<u8> {
    let from = hex::decode(from).unwrap();
    let mut out = body.to_vec();
    let mut hits = 0;
    let mut i = 0;
    while i + 16 <= out.len() {
        if out[i..i + 16] == from[..] {
            out[i..i + 16].copy_from_slice(&to);
            hits += 1;
            i += 16;
        } else {
            i += 1;
        }
    }
    assert!(hits > 0, "the trace id is not in the body");
    out
}

#[test]
fn pydantic_ai_agent_over_http_protobuf() {
    let (_tmp, dir, mut rx, run) =
        emit_over_http("emit_agent.py", &["--protocol", "http/protobuf"]);
    let trace = run["trace_ids"][0].as_str().unwrap().to_owned();
    assert_eq!(run["trace_ids"].as_array().unwrap().len(), 1, "{run}");
    let conversation = run["conversation_id"].as_str().unwrap();
    let summary = rx.next_export_line();
    assert!(
        summary.contains("12 spans: 5 tool spans") && summary.contains("7 other spans seen"),
        "{summary}"
    );

    // One event per execute_tool span: the chat and invoke_agent spans are not recorded.
    let lines = exactly(&dir, 5);
    let mut spans: Vec<String> = lines.iter().map(|l| span_of(&l["event"], &trace)).collect();
    spans.sort();
    spans.dedup();
    assert_eq!(spans.len(), 5, "one event per span: {lines:#?}");

    let weather = &one(&lines, "get_weather", |_| true)["event"];
    assert_eq!(weather["intent"]["args"], json!({"city": "Paris"}));
    assert_eq!(
        weather["effects"]["return_value"],
        json!({"city": "Paris", "temp_c": 21.5, "sky": "clear"})
    );
    assert!(weather["effects"].get("error").is_none(), "{weather}");
    assert_eq!(weather["code_provenance"]["agent"], "weather-agent");
    assert_eq!(weather["code_provenance"]["model"], "test-model");
    assert_eq!(weather["lane"], format!("conv-{conversation}"));
    assert_eq!(weather["execution"]["target"], "afr-otlp-agent");

    // The first delete_file raised ModelRetry; the retry succeeded.
    let failed = &one(&lines, "delete_file", |e| !e["effects"]["error"].is_null())["event"];
    let err = failed["effects"]["error"].as_str().unwrap();
    assert!(err.contains("ToolRetryError"), "{failed}");
    assert!(err.contains("permission denied"), "{failed}");
    let retried = &one(&lines, "delete_file", |e| e["effects"]["error"].is_null())["event"];
    assert_eq!(
        retried["effects"]["return_value"],
        "deleted /tmp/afr-demo/old.log"
    );
    assert_eq!(
        retried["intent"]["args"],
        json!({"path": "/tmp/afr-demo/old.log"})
    );

    // The researcher sub-agent's tool names the tool that delegated to it, recorded before it.
    let ask = one(&lines, "ask_researcher", |_| true);
    let search = one(&lines, "search_docs", |_| true);
    let (ask_seq, search_seq) = (
        ask["seq"].as_u64().unwrap(),
        search["seq"].as_u64().unwrap(),
    );
    let search = &search["event"];
    assert_eq!(
        search["delegation_provenance"]["delegating_agent"], "weather-agent",
        "{search}"
    );
    assert_eq!(
        search["delegation_provenance"]["parent_event"]["seq"], ask_seq,
        "{search}"
    );
    assert!(ask_seq < search_seq, "{lines:#?}");
    assert_eq!(search["code_provenance"]["agent"], "researcher");
    assert_eq!(search["code_provenance"]["model"], "test-researcher");
    assert_eq!(
        search["intent"]["args"],
        json!({"query": "OTLP retry semantics"})
    );
    // The weather agent's own tools were delegated by nobody.
    assert!(weather.get("delegation_provenance").is_none(), "{weather}");
    assert!(ask["event"].get("delegation_provenance").is_none(), "{ask}");
    rx.kill();
}

#[test]
fn raw_dialects_over_http_json_gzip() {
    let conversation = "conv-test-7f3a";
    let (_tmp, dir, mut rx, run) = emit_over_http(
        "emit_raw.py",
        &[
            "--protocol",
            "http/json",
            "--gzip",
            "--dialect",
            "all",
            "--conversation-id",
            conversation,
        ],
    );
    for _ in 0..3 {
        rx.next_export_line();
    }
    // genai: get_weather, create_ticket, delete_file; openinference and openllmetry: get_weather.
    let lines = exactly(&dir, 5);
    let trace_of = |dialect: &str| {
        let t = run["traces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["dialect"] == dialect)
            .unwrap();

        move |name: &str| {
            let s = t["spans"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["name"] == name)
                .unwrap_or_else(|| panic!("{name}: {t}"));
            (
                s["trace_id"].as_str().unwrap().to_owned(),
                s["span_id"].as_str().unwrap().to_owned(),
            )
        }
    };
    let lane = format!("conv-{conversation}");

    let genai = trace_of("genai");
    let (t, s) = genai("execute_tool create_ticket");
    let ticket = by_span(&lines, &t, &s);
    assert_eq!(ticket["intent"]["tool"], "create_ticket");
    // A kvlistValue of arguments becomes a JSON object, its values typed.
    assert_eq!(
        ticket["intent"]["args"],
        json!({"title": "Flight delayed", "priority": 2, "tags": ["travel", "urgent"], "notify": true})
    );
    assert_eq!(
        ticket["effects"]["return_value"],
        json!({"ticket_id": "T-1001", "created": true})
    );
    assert_eq!(ticket["code_provenance"]["agent"], "planner");
    assert_eq!(ticket["code_provenance"]["agent_version"], "1.2.0");
    assert_eq!(ticket["code_provenance"]["model"], "gpt-4o-2024-08-06");
    assert_eq!(ticket["execution"]["target"], "afr-raw-genai");
    assert_eq!(ticket["lane"], lane);

    let (t, s) = genai("execute_tool get_weather");
    let weather = by_span(&lines, &t, &s);
    assert_eq!(
        weather["intent"]["args"],
        json!({"city": "Paris", "unit": "celsius"})
    );

    let (t, s) = genai("execute_tool delete_file");
    let delete = by_span(&lines, &t, &s);
    assert_eq!(delete["intent"]["tool"], "delete_file");
    assert_eq!(delete["effects"]["error"], "permission denied: /etc/passwd");
    assert_eq!(delete["intent"]["args"], json!({"path": "/etc/passwd"}));

    let (t, s) = trace_of("openinference")("get_weather");
    let oi = by_span(&lines, &t, &s);
    assert_weather(oi);
    assert!(oi["effects"].get("error").is_none(), "{oi}");
    assert_eq!(oi["code_provenance"]["agent"], "planner");
    assert_eq!(oi["code_provenance"]["model"], "gpt-4o-2024-08-06");
    assert_eq!(oi["execution"]["target"], "afr-raw-openinference");
    assert_eq!(oi["lane"], lane);
    assert!(
        oi["context_provenance"]["sources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["uri"] == "tool_call:call_oi_1"),
        "{oi}"
    );

    let (t, s) = trace_of("openllmetry")("get_weather.tool");
    let ollm = by_span(&lines, &t, &s);
    // {"args": [], "kwargs": {"city": "Paris"}}: the keyword arguments.
    assert_weather(ollm);
    assert_eq!(ollm["code_provenance"]["agent"], "planner");
    assert_eq!(ollm["execution"]["target"], "afr-raw-openllmetry");
    assert_eq!(ollm["lane"], lane);

    // The non-tool span (load_config) and the agent and chat spans are not recorded.
    assert!(
        lines
            .iter()
            .all(|l| l["event"]["intent"]["tool"] != "load_config"),
        "{lines:#?}"
    );
    rx.kill();
}

#[test]
fn js_exporter_over_http_json() {
    // The OTel JS SDK's own OTLP/HTTP exporter: JSON bodies, `Transfer-Encoding: chunked`,
    // integer attributes as JSON numbers (tests/otlp/FACTS.md).
    let conversation = "conv-js-51c2";
    let (_tmp, dir, mut rx, run) = emit_over_http(
        "emit_js.mjs",
        &[
            "--conversation-id",
            conversation,
            "--header",
            "X-Afr-Test=js",
        ],
    );
    let summary = rx.next_export_line();
    assert!(
        summary.contains("4 spans: 2 tool spans (genai 2), 2 recorded")
            && summary.contains("2 other spans seen"),
        "{summary}"
    );
    let lines = exactly(&dir, 2);
    let trace = run["trace_id"].as_str().unwrap();
    let span = |name: &str| {
        run["spans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {run}"))["span_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let lane = format!("conv-{conversation}");

    let weather = by_span(&lines, trace, &span("execute_tool get_weather"));
    assert_weather(weather);
    assert!(weather["effects"].get("error").is_none(), "{weather}");
    assert_eq!(weather["code_provenance"]["agent"], "planner");
    assert_eq!(weather["code_provenance"]["model"], "gpt-4o");
    assert_eq!(weather["lane"], lane);
    assert_eq!(weather["execution"]["target"], "afr-otlp-js");
    let sources = weather["context_provenance"]["sources"].as_array().unwrap();
    assert!(
        sources.iter().any(|s| s["uri"] == "tool_call:call_js_1"),
        "{weather}"
    );
    assert!(
        sources.iter().any(|s| s["kind"] == "self_reported_span"
            && s["uri"]
                .as_str()
                .unwrap()
                .starts_with("otlp:afr-otlp-js (opentelemetry nodejs ")),
        "{weather}"
    );

    let delete = by_span(&lines, trace, &span("execute_tool delete_file"));
    assert_eq!(delete["intent"]["tool"], "delete_file");
    assert_eq!(delete["intent"]["args"], json!({"path": "/etc/passwd"}));
    assert_eq!(delete["effects"]["error"], "permission denied: /etc/passwd");
    assert_eq!(delete["code_provenance"]["agent"], "planner");
    assert_eq!(delete["code_provenance"]["model"], "gpt-4o");
    assert_eq!(delete["lane"], lane);
    rx.kill();
}

#[test]
fn grpc_export() {
    let (_tmp, dir) = initialised();
    let mut rx = Otlp::start(&dir, &["--no-http"]);
    assert!(rx.http.is_none());
    let url = rx.grpc_url();
    let plain = emit(
        "emit_raw.py",
        &[
            "--endpoint",
            &url,
            "--protocol",
            "grpc",
            "--dialect",
            "genai",
        ],
    );
    let summary = rx.next_export_line();
    assert!(summary.contains("3 tool spans"), "{summary}");
    let lines = exactly(&dir, 3);
    let spans = plain["traces"][0]["spans"].as_array().unwrap();
    let weather = spans
        .iter()
        .find(|s| s["name"] == "execute_tool get_weather")
        .unwrap();
    let ev = by_span(
        &lines,
        weather["trace_id"].as_str().unwrap(),
        weather["span_id"].as_str().unwrap(),
    );
    assert_eq!(
        ev["intent"]["args"],
        json!({"city": "Paris", "unit": "celsius"})
    );
    assert_eq!(
        ev["effects"]["return_value"],
        json!({"temp_c": 21.5, "sky": "clear"})
    );
    assert_eq!(ev["code_provenance"]["agent"], "planner");

    // grpc-encoding: gzip too.
    emit(
        "emit_raw.py",
        &[
            "--endpoint",
            &url,
            "--protocol",
            "grpc",
            "--gzip",
            "--dialect",
            "genai",
        ],
    );
    rx.next_export_line();
    let after = exactly(&dir, 6);
    assert_eq!(after[..3], lines[..], "earlier events changed");
    rx.kill();

    // Over --max-body (the GenAI export is about 3 KB), plain and gzip: refused, nothing
    // recorded. (tonic answers OUT_OF_RANGE / RESOURCE_EXHAUSTED, which the exporter retries
    // until its timeout, then drops the batch.)
    let rx = Otlp::start(&dir, &["--no-http", "--max-body", "2000"]);
    let url = rx.grpc_url();
    for gzip in [false, true] {
        let mut args = vec![
            "--endpoint",
            &url,
            "--protocol",
            "grpc",
            "--dialect",
            "genai",
            "--timeout",
            "2",
        ];
        if gzip {
            args.push("--gzip");
        }
        emit_refused("emit_raw.py", &args);
    }
    assert_eq!(
        query(&dir),
        after,
        "an oversized gRPC export recorded something"
    );
    rx.kill();
}

#[test]
fn a_retried_export_records_nothing_twice() {
    // A body the real protobuf exporter sent.
    let (reqs, printed) = capture(&["--protocol", "http/protobuf", "--dialect", "genai"]);
    assert_eq!(reqs.len(), 1);
    let body = &reqs[0].body;
    assert_eq!(
        reqs[0].meta["headers"]["content-type"],
        "application/x-protobuf"
    );
    let trace = printed["traces"][0]["spans"][0]["trace_id"]
        .as_str()
        .unwrap();

    let (_tmp, dir) = initialised();
    let mut rx = Otlp::start(&dir, &["--no-grpc"]);
    let addr = rx.http.clone().unwrap();
    let r = post(&addr, "application/x-protobuf", &[], body);
    assert_eq!(r.status, 200, "{}", r.head);
    // A full success: an empty ExportTraceServiceResponse.
    assert!(r.body.is_empty(), "{:?}", r.body);
    let first = exactly(&dir, 3);
    for l in &first {
        span_of(&l["event"], trace);
    }

    // The exporter's retry is byte-identical.
    let r = post(&addr, "application/x-protobuf", &[], body);
    assert_eq!(r.status, 200, "{}", r.head);
    rx.next_export_line();
    rx.next_export_line();
    assert_eq!(query(&dir), first, "a retry recorded something");

    // Killed and started again on the same store: the retry still records nothing.
    rx.kill();
    let rx = Otlp::start(&dir, &["--no-grpc"]);
    let addr = rx.http.clone().unwrap();
    let r = post(&addr, "application/x-protobuf", &[], body);
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(
        query(&dir),
        first,
        "a retry after a restart recorded something"
    );

    // A new trace in the same body is recorded.
    let r = post(
        &addr,
        "application/x-protobuf",
        &[],
        &retraced(body, trace, [7; 16]),
    );
    assert_eq!(r.status, 200, "{}", r.head);
    let all = exactly(&dir, 6);
    assert_eq!(all[..3], first[..]);
    rx.kill();
}

#[test]
fn malformed_and_oversized_exports_are_refused_and_lose_nothing() {
    // Real bodies: a small good export (OpenLLMetry: one tool span), a larger one (GenAI:
    // three), the same gzip-compressed, and OTLP/JSON with base64 ids (invalid OTLP/JSON).
    let (good, good_run) = capture(&["--protocol", "http/protobuf", "--dialect", "openllmetry"]);
    let good_trace = good_run["traces"][0]["spans"][0]["trace_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let good = good[0].body.clone();
    let (big, _) = capture(&["--protocol", "http/protobuf", "--dialect", "genai"]);
    let big = big[0].body.clone();
    let (big_gz, _) = capture(&[
        "--protocol",
        "http/protobuf",
        "--gzip",
        "--dialect",
        "genai",
    ]);
    assert_eq!(big_gz[0].meta["headers"]["Content-Encoding"], "gzip");
    let decompressed = big_gz[0].meta["decompressed_bytes"].as_u64().unwrap();
    let big_gz = big_gz[0].body.clone();
    // OTLP/JSON with proto3-JSON (base64) ids, small enough to pass the size limit.
    const B64: [&str; 10] = [
        "--protocol",
        "http/json",
        "--json-ids",
        "base64",
        "--dialect",
        "openllmetry",
        "--service-name",
        "s",
        "--conversation-id",
        "c",
    ];
    let (b64, _) = capture(&B64);
    let b64 = b64[0].body.clone();
    let max = 2000;
    assert!(
        good.len() < max && b64.len() < max,
        "{} {}",
        good.len(),
        b64.len()
    );
    assert!(big.len() > max && big_gz.len() < max && decompressed > max as u64);

    let (_tmp, dir) = initialised();
    let mut rx = Otlp::start(&dir, &["--no-grpc", "--max-body", "2000"]);
    let addr = rx.http.clone().unwrap();
    let pb = "application/x-protobuf";
    let mut n = 0u8;
    let mut recorded: Vec<Value> = Vec::new();
    // A good export (a fresh trace each time) is recorded and nothing before it changed.
    let mut good_export = |what: &str| {
        n += 1;
        let r = post(&addr, pb, &[], &retraced(&good, &good_trace, [n; 16]));
        assert_eq!(r.status, 200, "after {what}: {}", r.head);
        let now = exactly(&dir, recorded.len() + 1);
        assert_eq!(now[..recorded.len()], recorded[..], "after {what}");
        recorded = now;
    };
    good_export("nothing");

    // Not protobuf.
    let r = post(&addr, pb, &[], b"\xff\xff\xff\xff garbage \x00\x01");
    assert_eq!(r.status, 400, "{}", r.head);
    assert!(
        r.head
            .to_ascii_lowercase()
            .contains("content-type: application/x-protobuf")
    );
    good_export("garbage protobuf");

    // The real exporter's own request with base64 ids (proto3 JSON, not OTLP/JSON).
    let r = post(&addr, "application/json", &[], &b64);
    assert_eq!(r.status, 400, "{}", r.head);
    let msg: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(msg["code"], 3, "{msg}");
    good_export("base64 ids");
    // ...and the emitter's exporter itself is told so (not retried, reported as failed).
    let endpoint = format!("http://{addr}");
    let mut args = vec!["--endpoint", &endpoint, "--timeout", "5"];
    args.extend(B64);
    emit_refused("emit_raw.py", &args);
    good_export("base64 ids from the exporter");

    // Over --max-body: as sent, and after decompression.
    let r = post(&addr, pb, &[], &big);
    assert_eq!(r.status, 413, "{}", r.head);
    good_export("an oversized body");
    let r = post(&addr, pb, &["Content-Encoding: gzip"], &big_gz);
    assert_eq!(r.status, 413, "{}", r.head);
    good_export("an oversized gzip body");

    // Neither protobuf nor JSON.
    let r = post(&addr, "text/plain", &[], &good);
    assert_eq!(r.status, 415, "{}", r.head);
    good_export("an unsupported content type");

    // Says gzip, is not.
    let r = post(&addr, pb, &["Content-Encoding: gzip"], &good);
    assert_eq!(r.status, 400, "{}", r.head);
    good_export("a body that is not gzip");

    // The receiver lived through all of it.
    assert_eq!(recorded.len(), 8);
    let d = rx.d.stderr();
    assert!(!d.contains("panic"), "{d}");
    rx.kill();
}

#[test]
fn a_token_is_required_off_loopback() {
    let (tmp, dir) = initialised();
    // No token: refused at start, naming the flag.
    let (code, _, err) = run(afr(&dir).args(["otlp", "--http", "0.0.0.0:0", "--no-grpc"]));
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("--token-file") && err.contains("loopback"),
        "{err}"
    );

    let token = "k3Jq9vXw2LmP8tRz5NbY7cHd4FgA6sQe";
    assert_eq!(token.len(), 32);
    let file = tmp.path().join("otlp.token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let file = file.to_str().unwrap();
    let rx = Otlp::start_with(
        &dir,
        &["--http", "0.0.0.0:0", "--grpc", "0.0.0.0:0"],
        &["--token-file", file],
    );
    let (http, grpc) = (rx.http_url(), rx.grpc_url());
    let addr = rx.http.clone().unwrap();

    // Without the token, or with a wrong one: 401, nothing recorded.
    let (good, _) = capture(&["--protocol", "http/protobuf", "--dialect", "genai"]);
    let body = &good[0].body;
    let pb = "application/x-protobuf";
    assert_eq!(post(&addr, pb, &[], body).status, 401);
    let wrong = format!("Authorization: Bearer {}x", &token[..31]);
    assert_eq!(post(&addr, pb, &[&wrong], body).status, 401);
    let bare = format!("Authorization: {token}");
    assert_eq!(post(&addr, pb, &[&bare], body).status, 401);
    emit_refused(
        "emit_raw.py",
        &["--endpoint", &http, "--dialect", "genai", "--timeout", "5"],
    );
    fn over_grpc<'a>(grpc: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut a = vec![
            "--endpoint",
            grpc,
            "--protocol",
            "grpc",
            "--dialect",
            "genai",
        ];
        a.extend_from_slice(extra);
        a
    }
    emit_refused("emit_raw.py", &over_grpc(&grpc, &["--timeout", "5"]));
    assert!(query(&dir).is_empty());

    // With it: recorded, over HTTP (a raw request and the exporter) and gRPC.
    let auth = format!("Authorization=Bearer {token}");
    let r = post(
        &addr,
        pb,
        &[&format!("Authorization: Bearer {token}")],
        body,
    );
    assert_eq!(r.status, 200, "{}", r.head);
    exactly(&dir, 3);
    emit(
        "emit_raw.py",
        &["--endpoint", &http, "--dialect", "genai", "--header", &auth],
    );
    exactly(&dir, 6);
    emit("emit_raw.py", &over_grpc(&grpc, &["--header", &auth]));
    exactly(&dir, 9);
    rx.kill();
}

#[test]
fn children_that_arrive_before_their_parents_are_held_and_completed() {
    let (_tmp, dir) = initialised();
    let rx = Otlp::start(&dir, &["--no-grpc", "--hold-ms", "30000"]);
    // Each trace's tool spans are exported before the agent span above them.
    emit(
        "emit_raw.py",
        &[
            "--endpoint",
            &rx.http_url(),
            "--dialect",
            "all",
            "--children-first",
        ],
    );
    let lines = exactly(&dir, 5);
    for l in &lines {
        // Recorded once the parent came: the agent is the agent span's, not the service.
        assert_eq!(l["event"]["code_provenance"]["agent"], "planner", "{l}");
        assert!(
            l["event"]["lane"].as_str().unwrap().starts_with("conv-"),
            "{l}"
        );
    }
    // Nothing is left held: the journal holds no pending span.
    let journal = std::fs::read_dir(dir.join("otlp-journal"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect::<String>();
    let keys: Vec<&str> = journal
        .lines()
        .filter_map(|l| l.split("\"key\":\"").nth(1))
        .collect();
    assert_eq!(keys.len(), 5, "{journal}");
    assert_eq!(journal.matches("\"done\"").count(), 5, "{journal}");
}

#[test]
fn a_span_of_a_call_the_gateway_recorded_is_linked_not_repeated() {
    linked_whatever_the_trace_flags("01");
}

/// #31, defect 7: OpenLLMetry under OTel Python 1.45 propagates `-03` (sampled, random trace
/// id): the receiver matched `-01` only, and the call was recorded twice.
#[test]
fn a_call_is_linked_on_trace_and_span_id_whatever_its_flags() {
    linked_whatever_the_trace_flags("03");
    linked_whatever_the_trace_flags("00");
}

fn linked_whatever_the_trace_flags(flags: &str) {
    let (_tmp, dir) = initialised();
    // The gateway and the receiver share the store through `afr serve`.
    let server = super::serve::serve(&dir, &[]);
    let (trace, span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let mut c = super::mcp::Client::start(
        &dir,
        &[],
        &[
            super::mcp::server_bin("mcp-server-everything")
                .display()
                .to_string(),
            "stdio".into(),
        ],
    );
    c.initialize();
    let r = c.request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "hi"},
               "_meta": {"traceparent": format!("00-{trace}-{span}-{flags}")}}),
    );
    assert_eq!(r["result"]["content"][0]["text"], "Echo: hi", "{r}");
    c.finish();
    let gateway = exactly(&dir, 1);
    let g = gateway[0]["seq"].as_u64().unwrap();

    // The framework's own span of that call: the same trace context.
    let rx = Otlp::start(&dir, &["--no-grpc"]);
    let body = json!({"resourceSpans": [{
    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent-app"}}]},
    "scopeSpans": [{"spans": [{
        "traceId": trace, "spanId": span, "name": "execute_tool echo", "kind": 1,
        "startTimeUnixNano": "1796000000000000000", "endTimeUnixNano": "1796000000000500000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "echo"}},
            {"key": "gen_ai.agent.name", "value": {"stringValue": "helper-agent"}},
            {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": "{\"message\":\"hi\"}"}},
            {"key": "gen_ai.tool.call.result", "value": {"stringValue": "Echo: hi"}}
        ]}]}]}]});
    let r = post(
        rx.http.as_ref().unwrap(),
        "application/json",
        &[],
        body.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.head);
    let lines = exactly(&dir, 2);
    let e = &lines[1]["event"];
    // Linked to the gateway's event, which holds the arguments and the result as seen in the
    // path; the span adds the agent.
    assert_eq!(e["delegation_provenance"]["parent_event"]["seq"], g, "{e}");
    assert!(e["intent"].get("args").is_none(), "{e}");
    assert!(e.get("effects").is_none(), "{e}");
    assert_eq!(e["intent"]["tool"], "echo");
    assert_eq!(e["code_provenance"]["agent"], "helper-agent");
    let sources = e["context_provenance"]["sources"].as_array().unwrap();
    assert!(
        sources.iter().any(|s| s["uri"] == format!("afr:event/{g}")),
        "{e}"
    );
    drop(rx);
    let (st, err) = super::serve::terminate(server);
    assert_eq!(st, Some(0), "{err}");
}

/// #31, defect 8: a tool span exported more than `--hold-ms` before its agent span ends (a run
/// longer than the hold) is recorded without its agent; when the agent span arrives, an event
/// linked to it records the agent (the first is never rewritten).
#[test]
fn a_tool_span_whose_agent_span_comes_late_still_gets_its_agent() {
    let (_tmp, dir) = initialised();
    let rx = Otlp::start(&dir, &["--no-grpc", "--hold-ms", "200"]);
    let trace = "5bf92f3577b34da6a3ce929d0e0e4736";
    let (agent_id, tool_id) = ("10f067aa0ba902b7", "20f067aa0ba902b7");
    let resource =
        json!({"attributes": [{"key": "service.name", "value": {"stringValue": "agent-app"}}]});
    let tool = json!({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [{
    "traceId": trace, "spanId": tool_id, "parentSpanId": agent_id, "name": "execute_tool search",
    "kind": 1, "startTimeUnixNano": "1796000000000000000", "endTimeUnixNano": "1796000000000500000",
    "attributes": [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
        {"key": "gen_ai.tool.name", "value": {"stringValue": "search"}},
        {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": "{\"q\":\"rust\"}"}}
    ]}]}]}]});
    let r = post(
        rx.http.as_ref().unwrap(),
        "application/json",
        &[],
        tool.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.head);
    // The hold passes: recorded with what is known (the service, no agent span).
    let first = exactly(&dir, 1);
    let seq = first[0]["seq"].as_u64().unwrap();
    assert_eq!(first[0]["event"]["code_provenance"]["agent"], "agent-app");
    // Seconds later, the agent span ends and is exported.
    let agent = json!({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [{
    "traceId": trace, "spanId": agent_id, "name": "invoke_agent researcher", "kind": 1,
    "startTimeUnixNano": "1795999999000000000", "endTimeUnixNano": "1796000009000000000",
    "attributes": [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
        {"key": "gen_ai.agent.name", "value": {"stringValue": "researcher"}}
    ]}]}]}]});
    let r = post(
        rx.http.as_ref().unwrap(),
        "application/json",
        &[],
        agent.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.head);
    let both = exactly(&dir, 2);
    let late = &both[1]["event"];
    assert_eq!(late["intent"]["tool"], "search");
    assert_eq!(late["code_provenance"]["agent"], "researcher", "{late}");
    assert!(late["intent"].get("args").is_none(), "{late}");
    let sources = late["context_provenance"]["sources"].as_array().unwrap();
    assert!(
        sources
            .iter()
            .any(|s| s["uri"] == format!("afr:event/{seq}") && s["kind"] == "attribution_of"),
        "{late}"
    );
    // The same export again: nothing new.
    let r = post(
        rx.http.as_ref().unwrap(),
        "application/json",
        &[],
        agent.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(super::mcp::query_lines(&dir).len(), 2);
}
