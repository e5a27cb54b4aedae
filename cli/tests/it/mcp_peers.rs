//! The gateway between REAL MCP peers (tests/mcp/PEERS.md, installed by scripts/setup.sh): the
//! PyPI `mcp` 2.3.0 client and server (both protocol generations), the npm TypeScript client,
//! and the npm reference servers, through `afr mcp wrap` (stdio) and `afr mcp proxy`
//! (Streamable HTTP). Each test asserts what the client printed and what was recorded.

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use super::{
    afr, initialised,
    mcp::{events, held_calls, server_bin, tapped, write_policy},
    proc::{Daemon, Guard, python, slurp},
};

/// How long one client run may take, and how long a daemon may take to come up.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(180);
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

pub(super) fn mcp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp")
}

fn afr_bin() -> String {
    env!("CARGO_BIN_EXE_afr").to_owned()
}

/// `python tests/mcp/py_client.py` (arguments follow).
pub(super) fn py_client() -> Command {
    let mut c = Command::new(python());
    c.arg(mcp_dir().join("py_client.py"));
    c
}

/// py_client in the 2026-07-28 generation over `transport`, accepting elicitations, with a
/// fixed traceparent: calls `echo` then `confirm_delete` (more calls may follow).
fn stateless_client(transport: &[&str]) -> Command {
    let meta = json!({ "traceparent": TRACEPARENT }).to_string();
    let mut c = py_client();
    c.args(transport)
        .args(["--protocol", "2026-07-28", "--elicitation", "accept"])
        .args(["--meta", &meta])
        .args(["--call", "echo", r#"{"message":"hi"}"#])
        .args(["--call", "confirm_delete", r#"{"id":"7"}"#]);
    c
}

/// `node tests/mcp/ts_client.mjs` (arguments follow).
fn ts_client() -> Command {
    afr_testkit::installed(
        &mcp_dir().join("node_modules/@modelcontextprotocol/client"),
        "scripts/setup.sh",
    );
    let mut c = Command::new("node");
    c.arg(mcp_dir().join("ts_client.mjs"));
    c
}

/// The command line of py_server.py on stdio.
fn py_server_stdio() -> Vec<String> {
    vec![
        python().display().to_string(),
        mcp_dir().join("py_server.py").display().to_string(),
        "stdio".into(),
    ]
}

/// Starts a client (stdout and stderr captured).
fn spawn_client(c: &mut Command) -> Guard {
    Guard(
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Waits (at most [`CLIENT_TIMEOUT`]) for a client to exit 0; the one JSON object it printed.
fn finish_client(mut g: Guard) -> Value {
    let out = slurp(g.0.stdout.take().unwrap());
    let err = slurp(g.0.stderr.take().unwrap());
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    let status = loop {
        if let Some(st) = g.0.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = g.0.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // A grandchild (the gateway, its server) may hold the pipes a little longer.
    let out = out
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_default();
    let err = err
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_default();
    let (out, err) = (String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
    let status = status.unwrap_or_else(|| panic!("the client ran over {CLIENT_TIMEOUT:?}: {err}"));
    assert!(status.success(), "{status:?}\nstdout: {out}\nstderr: {err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}\nstderr: {err}"))
}

pub(super) fn run_client(c: &mut Command) -> Value {
    finish_client(spawn_client(c))
}

/// A port nobody listens on now (bound, then released).
pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// server-everything over Streamable HTTP on a free port; its endpoint.
pub(super) fn start_everything() -> (Daemon, String) {
    let bin = server_bin("mcp-server-everything");
    for _ in 0..5 {
        let port = free_port();
        let mut d = Daemon::spawn(
            Command::new(&bin)
                .arg("streamableHttp")
                .env("PORT", port.to_string()),
        );
        // It exits if the port was taken in between: try another one.
        if d.wait_for(|l| l.contains("listening on port").then_some(()))
            .is_some()
        {
            return (d, format!("http://127.0.0.1:{port}/mcp"));
        }
    }
    panic!("server-everything did not start");
}

/// py_server.py over Streamable HTTP on a free port; its endpoint.
pub(super) fn start_py_server() -> (Daemon, String) {
    let mut d = Daemon::spawn(
        Command::new(python())
            .arg(mcp_dir().join("py_server.py"))
            .args(["http", "--port", "0"]),
    );
    let url = d.wait_for(|l| {
        l.split_once("listening on ")
            .map(|(_, u)| u.trim().to_owned())
    });
    let url = url.unwrap_or_else(|| panic!("py_server did not start: {}", d.stderr()));
    (d, url)
}

/// `afr --dir DIR mcp proxy EXTRA --upstream UPSTREAM --listen 127.0.0.1:0`; the URL clients
/// use, from its "listening on" line.
fn start_proxy(dir: &Path, upstream: &str, extra: &[&str]) -> (Daemon, String) {
    let mut d = Daemon::spawn(afr(dir).args(["mcp", "proxy"]).args(extra).args([
        "--upstream",
        upstream,
        "--listen",
        "127.0.0.1:0",
    ]));
    let url = d.wait_for(|l| {
        let rest = l.strip_prefix("afr mcp proxy: listening on ")?;
        let (url, up) = rest.split_once(" -> ")?;
        assert_eq!(up, upstream, "{l}");
        Some(url.to_owned())
    });
    let url = url.unwrap_or_else(|| panic!("the proxy did not start: {}", d.stderr()));
    (d, url)
}

/// `host:port` of an `http://host:port/path` URL.
pub(super) fn authority(url: &str) -> &str {
    url.strip_prefix("http://")
        .unwrap()
        .split('/')
        .next()
        .unwrap()
}

/// Reads from `s` until `done` says so, EOF, or 60 s; what was read.
pub(super) fn read_until(s: &mut TcpStream, done: impl Fn(&str) -> bool) -> String {
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                data.extend_from_slice(&buf[..n]);
                if done(&String::from_utf8_lossy(&data)) {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&data).into_owned()
}

/// Opens a connection to `addr` and sends a POST of `body` to /mcp with `headers` (each
/// `Name: value`), keeping the connection open.
pub(super) fn post(addr: &str, headers: &[String], body: &Value) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    let body = body.to_string();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.push_str(&body);
    s.write_all(req.as_bytes()).unwrap();
    s
}

/// The status code of an HTTP response's first line.
pub(super) fn status_of(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"))
}

/// Polls the store until `n` events are there (or 60 s pass); them.
pub(super) fn wait_events(dir: &Path, n: usize) -> Vec<Value> {
    super::mcp::wait_for_lines(dir, n)
        .into_iter()
        .map(|l| l["event"].clone())
        .collect()
}

/// Polls the store until `n` events are there, then checks that no more came; them. A
/// call's event is written just after its answer is relayed, so a client that saw the answer
/// may be a moment ahead of the store.
pub(super) fn exactly_events(dir: &Path, n: usize) -> Vec<Value> {
    let evs = wait_events(dir, n);
    assert_eq!(evs.len(), n, "{evs:#?}");
    evs
}

/// The calls journaled by the gateways recording into `dir` and not yet done (their events
/// as journaled before forwarding), read from `<dir>/gateway-journal/*.jsonl`.
fn journal_pending(dir: &Path) -> Vec<Value> {
    let Ok(entries) = std::fs::read_dir(dir.join("gateway-journal")) else {
        return Vec::new();
    };
    let mut pending: Vec<(String, Value)> = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) != Some("jsonl") {
            continue;
        }
        // A gateway that exits removes its journal once every call in it is done.
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        // A line being written now is not complete yet: only whole lines count.
        for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}: {e}: {line}", path.display()));
            if let Some(k) = v["done"].as_str() {
                pending.retain(|(key, _)| key != k);
            } else {
                let k = v["key"].as_str().unwrap().to_owned();
                match pending.iter_mut().find(|(key, _)| *key == k) {
                    Some(p) => p.1 = v["event"].clone(),
                    None => pending.push((k, v["event"].clone())),
                }
            }
        }
    }
    pending.into_iter().map(|(_, ev)| ev).collect()
}

/// Waits (at most 30 s) until no call is pending in the gateways' journals: each call
/// journaled before it was forwarded was noted done once its event was written.
pub(super) fn journal_settles(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pending = journal_pending(dir);
        if pending.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "left pending: {pending:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `ev` is the one complete event of a call of `tool` that ran and was answered with a
/// result whose first content is `text`.
pub(super) fn assert_ran(ev: &Value, tool: &str, text: &str) {
    assert_eq!(ev["intent"]["tool"], tool, "{ev}");
    assert_eq!(ev["execution"]["command"], "tools/call", "{ev}");
    assert_eq!(
        ev["effects"]["return_value"]["content"][0]["text"], text,
        "{ev}"
    );
    assert!(ev["effects"].get("error").is_none(), "{ev}");
    assert!(
        ev.get("delegation_provenance").is_none(),
        "one event per call, linked to nothing: {ev}"
    );
}

/// The context sources of an event.
fn sources(ev: &Value) -> Vec<Value> {
    ev.pointer("/context_provenance/sources")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn has_traceparent(ev: &Value) -> bool {
    sources(ev).iter().any(|s| {
        s["kind"] == "traceparent" && s["uri"] == format!("traceparent:{TRACEPARENT}").as_str()
    })
}

/// The stateless generation's run of py_client against py_server (wrap or proxy): echo, then
/// confirm_delete (input_required, then a retry with the answers). Checks the client's output
/// and the first three events (one per call); `target` is the server's part of
/// `execution.target`.
fn check_stateless_run(out: &Value, evs: &[Value], target: &str) {
    assert_eq!(out["protocol"], "2026-07-28", "{out}");
    assert_eq!(
        out["server"],
        json!({"name": "afr-py-server", "version": "0.1.0"})
    );
    let calls = out["calls"].as_array().unwrap();
    assert_eq!(calls[0]["content"][0]["text"], "hi", "{out}");
    assert_eq!(calls[0]["isError"], false);
    assert_eq!(
        calls[1]["content"][0]["text"], "deleted record 7 (approved)",
        "{out}"
    );
    assert_eq!(
        out["elicitations"],
        json!([{"message": "Delete record 7?", "action": "accept"}])
    );

    // One event per tools/call: echo; confirm_delete (input_required); its retry.
    assert!(evs.len() >= 3, "{evs:#?}");
    for ev in &evs[..3] {
        assert_eq!(ev["code_provenance"]["agent"], "afr-py-client", "{ev}");
        assert_eq!(ev["code_provenance"]["agent_version"], "0.1.0");
        // 2026-07-28 has no initialize: the server is named by each result's `_meta`.
        assert_eq!(ev["code_provenance"]["tool_version"], "afr-py-server 0.1.0");
        assert!(has_traceparent(ev), "{ev}");
        assert_eq!(ev["execution"]["command"], "tools/call");
        let t = ev["execution"]["target"].as_str().unwrap();
        assert!(
            t.starts_with("afr-py-server 0.1.0 (") && t.contains(target),
            "{t}"
        );
        assert!(ev.get("delegation_provenance").is_none(), "{ev}");
        assert!(ev.get("human_approval").is_none(), "{ev}");
        assert_eq!(ev["lane"], evs[0]["lane"], "{ev}");
    }
    assert_eq!(
        evs[0]["intent"],
        json!({"tool": "echo", "args": {"message": "hi"}})
    );
    assert!(
        evs[0]["execution"].get("mutation").is_none(),
        "echo is not destructive"
    );
    assert_ran(&evs[0], "echo", "hi");
    assert_eq!(evs[0]["effects"]["return_value"]["resultType"], "complete");
    assert!(
        sources(&evs[0])
            .iter()
            .all(|s| s["kind"] != "mcp_input_responses")
    );
    // The first answer to confirm_delete asks for input: recorded as such, not as an error.
    assert_eq!(
        evs[1]["intent"],
        json!({"tool": "confirm_delete", "args": {"id": "7"}})
    );
    assert!(
        sources(&evs[1])
            .iter()
            .all(|s| s["kind"] != "mcp_input_responses")
    );
    let first = &evs[1]["effects"];
    assert_eq!(
        first["return_value"]["resultType"], "input_required",
        "{first}"
    );
    assert!(
        first["return_value"]["inputRequests"].is_object(),
        "{first}"
    );
    assert!(first.get("error").is_none(), "{first}");
    // The retry carries the user's answers: a context source of its own.
    assert_eq!(
        evs[2]["intent"],
        json!({"tool": "confirm_delete", "args": {"id": "7"}})
    );
    let answers: Vec<_> = sources(&evs[2])
        .into_iter()
        .filter(|s| s["kind"] == "mcp_input_responses")
        .collect();
    assert_eq!(answers.len(), 1, "{}", evs[2]);
    assert!(
        answers[0]["content_hash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{}",
        answers[0]
    );
    assert_ran(&evs[2], "confirm_delete", "deleted record 7 (approved)");
    assert_eq!(evs[2]["effects"]["return_value"]["resultType"], "complete");
}

#[test]
fn py_client_stateless_generation_through_wrap() {
    let (_tmp, dir) = initialised();
    let out = run_client(
        stateless_client(&["stdio"])
            .args(["--call", "delete_record", r#"{"id":"8"}"#])
            .args(["--", &afr_bin(), "--dir"])
            .arg(&dir)
            .args(["mcp", "wrap", "--"])
            .args(py_server_stdio()),
    );
    // The client has exited, and so has the wrap, having written every call's event.
    let evs = exactly_events(&dir, 4);
    check_stateless_run(&out, &evs, "(stdio: ");
    assert_eq!(
        out["calls"][2]["content"][0]["text"], "deleted record 8",
        "{out}"
    );
    // delete_record is annotated destructive (tools/list): its arguments are the mutation.
    let d = &evs[3];
    assert_eq!(d["intent"]["tool"], "delete_record");
    assert_eq!(d["execution"]["mutation"], json!({"id": "8"}), "{d}");
    assert!(has_traceparent(d));
    assert_ran(d, "delete_record", "deleted record 8");
    assert_eq!(d["lane"], evs[0]["lane"], "one session, one lane");
    journal_settles(&dir);
}

#[test]
fn py_client_falls_back_to_initialize_through_wrap_with_server_memory() {
    let (tmp, dir) = initialised();
    let memory = tmp.path().join("memory.jsonl");
    let entities = json!({"entities": [
        {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}
    ]})
    .to_string();
    let out = run_client(
        py_client()
            .env("MEMORY_FILE_PATH", &memory)
            .args(["stdio", "--call", "create_entities", &entities])
            .args(["--", &afr_bin(), "--dir"])
            .arg(&dir)
            .args(["mcp", "wrap", "--"])
            .args(tapped(tmp.path(), &server_bin("mcp-server-memory"), "")),
    );
    // The client fell back to the older generation.
    assert_eq!(out["protocol"], "2025-11-25", "{out}");
    assert_eq!(out["server"]["name"], "memory-server");
    assert!(out["calls"][0]["error"].is_null(), "{out}");
    assert_eq!(out["calls"][0]["isError"], false, "{out}");
    assert_eq!(
        out["calls"][0]["structuredContent"]["entities"][0]["name"],
        "Ada"
    );
    // The probe reached the server, and its -32601 reached the client, untouched.
    let tap_in = std::fs::read_to_string(tmp.path().join("in")).unwrap();
    let tap_out = std::fs::read_to_string(tmp.path().join("out")).unwrap();
    let first_in: Value = serde_json::from_str(tap_in.lines().next().unwrap()).unwrap();
    assert_eq!(first_in["method"], "server/discover", "{tap_in}");
    let probe_answer = tap_out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|m| m["id"] == first_in["id"])
        .unwrap_or_else(|| panic!("no answer to the probe: {tap_out}"));
    assert_eq!(probe_answer["error"]["code"], -32601, "{probe_answer}");
    let second_in: Value = serde_json::from_str(tap_in.lines().nth(1).unwrap()).unwrap();
    assert_eq!(second_in["method"], "initialize", "{tap_in}");
    // The call ran.
    let stored = std::fs::read_to_string(&memory).unwrap();
    assert!(stored.contains("wrote the first program"), "{stored}");

    // Only the call was recorded (not the probe), named by the fallback's initialize: one
    // event, with its result.
    let evs = exactly_events(&dir, 1);
    let i = &evs[0];
    assert_eq!(i["intent"]["tool"], "create_entities");
    assert_eq!(i["intent"]["args"]["entities"][0]["name"], "Ada");
    assert_eq!(i["code_provenance"]["agent"], "afr-py-client");
    assert_eq!(i["code_provenance"]["agent_version"], "0.1.0");
    let tv = i["code_provenance"]["tool_version"].as_str().unwrap();
    assert!(tv.starts_with("memory-server "), "{tv}");
    assert_eq!(i["execution"]["command"], "tools/call");
    assert!(i.get("delegation_provenance").is_none(), "{i}");
    assert!(i["effects"].get("error").is_none(), "{i}");
    assert_eq!(
        i["effects"]["return_value"]["structuredContent"]["entities"][0]["name"],
        "Ada"
    );
}

#[test]
fn ts_client_through_wrap_with_a_deny_policy() {
    let (tmp, dir) = initialised();
    let root = tmp.path().join("files");
    std::fs::create_dir(&root).unwrap();
    let root = root.canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "read me\n").unwrap();
    let policy = write_policy(
        &tmp.path().join("policy.toml"),
        "[[rule]]\nid = \"read-only\"\ntool = \"write_file\"\nverdict = \"deny\"\n\
         reason = \"this tree is read-only\"\n",
    );
    let evil = root.join("evil.txt");
    let write = json!({"path": evil, "content": "x"}).to_string();
    let read = json!({"path": root.join("notes.txt")}).to_string();
    let out = run_client(
        ts_client()
            .args(["--protocol", "2025-11-25"])
            .args(["--call", "write_file", &write])
            .args(["--call", "read_text_file", &read])
            .args(["stdio", "--", &afr_bin(), "--dir"])
            .arg(&dir)
            .args(["mcp", "wrap", "--policy", &policy, "--"])
            .args(tapped(
                tmp.path(),
                &server_bin("mcp-server-filesystem"),
                &format!("'{}'", root.display()),
            )),
    );
    assert_eq!(out["protocol"], "2025-11-25", "{out}");
    assert!(
        out["server"]["name"]
            .as_str()
            .unwrap()
            .starts_with("secure-filesystem"),
        "{out}"
    );
    let denied = out["calls"][0]["error"].as_str().unwrap_or_default();
    assert!(
        denied.contains("denied by policy rule `read-only`")
            && denied.contains("this tree is read-only"),
        "{out}"
    );
    assert_eq!(out["calls"][1]["content"][0]["text"], "read me\n", "{out}");
    assert!(!evil.exists(), "the denied write ran");
    let tap_in = std::fs::read_to_string(tmp.path().join("in")).unwrap();
    assert!(
        !tap_in.contains("evil.txt"),
        "the denied call reached the server"
    );
    assert!(tap_in.contains("notes.txt"));

    // One event per call: the denied write, the read.
    let evs = exactly_events(&dir, 2);
    let d = &evs[0];
    assert_eq!(d["intent"]["tool"], "write_file");
    assert_eq!(d["code_provenance"]["agent"], "afr-ts-client");
    assert_eq!(d["policy_evaluation"][0]["guardrail"], "read-only");
    assert_eq!(d["policy_evaluation"][0]["verdict"], "deny");
    assert!(d.get("execution").is_none(), "a denied call did not run");
    assert!(d["effects"]["error"].as_str().unwrap().contains("denied"));
    let r = &evs[1];
    assert_eq!(r["intent"]["tool"], "read_text_file");
    assert_eq!(r["policy_evaluation"][0]["verdict"], "allow");
    assert_ran(r, "read_text_file", "read me\n");
    assert_eq!(r["code_provenance"]["agent"], "afr-ts-client");
}

#[test]
fn proxy_py_client_stateful_with_authorization_never_recorded() {
    const TOKEN: &str = "s3cr3t-token";
    const RESOURCE: &str = "demo://resource/static/document/architecture.md";
    let (tmp, dir) = initialised();
    let (_server, upstream) = start_everything();
    let (mut proxy, url) = start_proxy(&dir, &upstream, &[]);
    let out = run_client(
        py_client()
            .args(["http", &url, "--protocol", "2025-11-25"])
            .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
            .args(["--read-resource", RESOURCE])
            .args(["--call", "echo", r#"{"message":"hi"}"#])
            .args(["--call", "get-sum", r#"{"a":2,"b":3}"#]),
    );
    assert_eq!(out["protocol"], "2025-11-25", "{out}");
    assert_eq!(out["server"]["name"], "mcp-servers/everything");
    assert!(out["resources"][0]["error"].is_null(), "{out}");
    assert!(
        out["resources"][0]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Architecture"),
        "{out}"
    );
    assert_eq!(out["calls"][0]["content"][0]["text"], "Echo: hi", "{out}");
    let sum = out["calls"][1]["content"][0]["text"].as_str().unwrap();
    assert!(sum.contains('5'), "{out}");

    // One event per call, each with what the client was answered.
    let evs = exactly_events(&dir, 2);
    for (ev, tool, text) in [(&evs[0], "echo", "Echo: hi"), (&evs[1], "get-sum", sum)] {
        assert_ran(ev, tool, text);
        let target = ev["execution"]["target"].as_str().unwrap();
        assert_eq!(
            target,
            format!("mcp-servers/everything 2.0.0 (http: {upstream})")
        );
        assert_eq!(ev["code_provenance"]["agent"], "afr-py-client");
        assert_eq!(
            ev["code_provenance"]["tool_version"],
            "mcp-servers/everything 2.0.0"
        );
        // The resource read earlier in the session is context of each later call.
        let src = sources(ev);
        let r = src
            .iter()
            .find(|s| s["uri"] == RESOURCE)
            .unwrap_or_else(|| panic!("{ev}"));
        assert_eq!(r["kind"], "mcp_resource");
        assert!(r["content_hash"].as_str().unwrap().starts_with("sha256:"));
        assert_eq!(ev["lane"], evs[0]["lane"], "one session, one lane");
    }
    assert_eq!(evs[1]["intent"]["args"], json!({"a": 2, "b": 3}));
    // Both calls are done in the proxy's journal (it runs on: its journal stays).
    journal_settles(&dir);

    // The bearer token is nowhere: not in the events, the export, nor the proxy's log.
    let q = afr_testkit::ok(afr(&dir).args(["query", "--json", "seq in 0..100"]));
    let q = String::from_utf8_lossy(&q.stdout);
    assert_eq!(q.lines().count(), 2, "{q}");
    assert!(!q.contains(TOKEN), "{q}");
    let file = tmp.path().join("log.afr");
    afr_testkit::ok(afr(&dir).args(["export", "--out"]).arg(&file));
    let exported = std::fs::read(&file).unwrap();
    assert!(exported.len() > 100);
    assert!(
        !exported.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
        "the token is in the export"
    );
    assert!(!proxy.stderr().contains(TOKEN));

    // DNS rebinding: a foreign Host or Origin is refused before anything is forwarded.
    let addr = authority(&url);
    for (host, origin) in [("evil.example", None), (addr, Some("http://evil.example"))] {
        let mut s = TcpStream::connect(addr).unwrap();
        let origin = origin
            .map(|o| format!("Origin: {o}\r\n"))
            .unwrap_or_default();
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        write!(
            s,
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let r = read_until(&mut s, |_| false);
        assert_eq!(status_of(&r), 403, "Host {host}, {origin}: {r}");
    }
    assert_eq!(events(&dir).len(), 2);
}

#[test]
fn proxy_stateless_generation_with_py_server() {
    let (_tmp, dir) = initialised();
    let (_server, upstream) = start_py_server();
    let (_proxy, url) = start_proxy(&dir, &upstream, &[]);
    let out = run_client(&mut stateless_client(&["http", &url]));
    // The proxy runs on: the last call's event comes just after its answer.
    let evs = exactly_events(&dir, 3);
    check_stateless_run(&out, &evs, &format!("(http: {upstream})"));
}

#[test]
fn proxy_escalation_asks_the_client_through_elicitation() {
    let (tmp, dir) = initialised();
    let policy = write_policy(
        &tmp.path().join("policy.toml"),
        "[[rule]]\nid = \"echo-reviewed\"\ntool = \"echo\"\nverdict = \"escalate\"\n\
         reason = \"a person reads every echo\"\n",
    );
    let (_server, upstream) = start_everything();
    let (_proxy, url) = start_proxy(
        &dir,
        &upstream,
        &["--policy", &policy, "--approval-timeout", "30"],
    );
    let client = |elicitation: &str, message: &str| -> Command {
        let mut c = py_client();
        c.args(["http", &url, "--protocol", "2025-11-25"])
            .args(["--elicitation", elicitation])
            .args(["--call", "echo", &json!({ "message": message }).to_string()]);
        c
    };
    // Asked through elicitation/create, the user accepts: the call runs.
    let yes = run_client(&mut client("accept", "m1"));
    assert_eq!(yes["calls"][0]["content"][0]["text"], "Echo: m1", "{yes}");
    let asked = yes["elicitations"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{yes}");
    let prompt = asked[0]["message"].as_str().unwrap();
    assert!(
        prompt.contains("echo") && prompt.contains("m1") && prompt.contains("echo-reviewed"),
        "{prompt}"
    );
    // The user declines: rejected, never forwarded.
    let no = run_client(&mut client("decline", "m2"));
    let err = no["calls"][0]["error"].as_str().unwrap_or_default();
    assert!(err.contains("rejected"), "{no}");
    assert_eq!(no["elicitations"].as_array().unwrap().len(), 1, "{no}");
    // A client that cannot be asked waits for `afr approve`.
    let waiting = spawn_client(&mut client("none", "m3"));
    let held = held_calls(&dir, 1);
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0]["rule"], "echo-reviewed");
    assert_eq!(held[0]["arguments"], json!({"message": "m3"}));
    // While it waits, the held call is in the journal (not forwarded: no execution), and the
    // two earlier calls are done there.
    let pending = journal_pending(&dir);
    assert_eq!(pending.len(), 1, "{pending:#?}");
    assert_eq!(
        pending[0]["intent"],
        json!({"tool": "echo", "args": {"message": "m3"}})
    );
    assert_eq!(pending[0]["policy_evaluation"][0]["verdict"], "escalate");
    assert!(pending[0].get("execution").is_none(), "{}", pending[0]);
    assert!(pending[0].get("human_approval").is_none(), "{}", pending[0]);
    assert_eq!(events(&dir).len(), 2, "the held call has no event yet");
    let id = held[0]["id"].as_str().unwrap();
    afr_testkit::ok(afr(&dir).args(["approve", id, "--as", "carol@example.org"]));
    let later = finish_client(waiting);
    assert_eq!(
        later["calls"][0]["content"][0]["text"], "Echo: m3",
        "{later}"
    );
    assert_eq!(later["elicitations"], json!([]));
    assert!(held_calls(&dir, 0).is_empty(), "the queue is left empty");

    // One event per call: its evaluation, the decision, and the result if it ran.
    let evs = exactly_events(&dir, 3);
    for (ev, message) in evs.iter().zip(["m1", "m2", "m3"]) {
        assert_eq!(
            ev["intent"],
            json!({"tool": "echo", "args": {"message": message}})
        );
        assert_eq!(ev["policy_evaluation"][0]["verdict"], "escalate", "{ev}");
        assert_eq!(ev["policy_evaluation"][0]["guardrail"], "echo-reviewed");
        assert_eq!(ev["code_provenance"]["agent"], "afr-py-client");
        assert!(ev.get("delegation_provenance").is_none(), "{ev}");
    }
    let a = &evs[0]["human_approval"];
    assert_eq!(a["approver"], "user of MCP client afr-py-client");
    assert_eq!(a["decision"], "approved");
    assert_eq!(a["prompt"], prompt);
    assert_ran(&evs[0], "echo", "Echo: m1");
    let r = &evs[1];
    assert_eq!(
        r["human_approval"]["approver"],
        "user of MCP client afr-py-client"
    );
    assert_eq!(r["human_approval"]["decision"], "rejected");
    assert!(
        r["human_approval"]["prompt"]
            .as_str()
            .unwrap()
            .contains("m2"),
        "{r}"
    );
    assert!(r.get("execution").is_none(), "a rejected call did not run");
    let why = r["effects"]["error"].as_str().unwrap();
    assert!(
        why.starts_with("rejected by user of MCP client afr-py-client")
            && why.contains("not forwarded"),
        "{r}"
    );
    assert!(r["effects"].get("return_value").is_none(), "{r}");
    let c = &evs[2];
    assert_eq!(c["human_approval"]["approver"], "carol@example.org");
    assert_eq!(c["human_approval"]["decision"], "approved");
    assert_eq!(c["human_approval"]["prompt"], held[0]["prompt"]);
    assert_ran(c, "echo", "Echo: m3");
    journal_settles(&dir);
}

#[test]
fn proxy_client_disconnect_mid_call_records_outcome_unknown() {
    let (_tmp, dir) = initialised();
    let (_server, upstream) = start_everything();
    let (_proxy, url) = start_proxy(&dir, &upstream, &[]);
    let addr = authority(&url).to_owned();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "afr-raw-client", "version": "0.0.1"}}});
    let mut s = post(&addr, &["Connection: close".into()], &init);
    let r = read_until(&mut s, |d| {
        d.contains(r#""id":1"#) && d.contains("serverInfo")
    });
    assert_eq!(status_of(&r), 200, "{r}");
    let sid = r
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id: {r}"));
    drop(s);
    let session = [
        format!("Mcp-Session-Id: {sid}"),
        "MCP-Protocol-Version: 2025-11-25".to_owned(),
    ];
    let mut headers = session.to_vec();
    headers.push("Connection: close".into());
    let mut s = post(
        &addr,
        &headers,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    let r = read_until(&mut s, |_| false);
    assert_eq!(status_of(&r), 202, "{r}");
    drop(s);

    // A minute-long call, no progress token: nothing flows until its answer.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "trigger-long-running-operation", "arguments": {"duration": 60, "steps": 60}}});
    let mut s = post(&addr, &session, &call);
    let posted = Instant::now();
    // Journaled (synced) before it was forwarded, with its execution; no event yet.
    let deadline = Instant::now() + Duration::from_secs(30);
    let pending = loop {
        let p = journal_pending(&dir);
        if !p.is_empty() {
            break p;
        }
        assert!(Instant::now() < deadline, "the call was not journaled");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(pending.len(), 1, "{pending:#?}");
    assert_eq!(
        pending[0]["intent"]["tool"],
        "trigger-long-running-operation"
    );
    assert_eq!(pending[0]["code_provenance"]["agent"], "afr-raw-client");
    assert_eq!(pending[0]["execution"]["command"], "tools/call");
    // The answer's head has come (the call is with the server); then the client goes away.
    let r = read_until(&mut s, |d| d.contains("\r\n\r\n"));
    assert_eq!(status_of(&r), 200, "{r}");
    assert!(events(&dir).is_empty(), "recorded before its answer");
    s.shutdown(std::net::Shutdown::Both).unwrap();
    drop(s);

    let evs = wait_events(&dir, 1);
    // Noticed at once, not when the server's next event is relayed: server-everything sends
    // a `: keepalive` comment 15 s into the stream, and the answer comes after 60 s.
    assert!(
        posted.elapsed() < Duration::from_secs(12),
        "noticed only {:?} after the call",
        posted.elapsed()
    );
    assert_eq!(evs.len(), 1, "{evs:#?}");
    let ev = &evs[0];
    assert_eq!(ev["intent"]["tool"], "trigger-long-running-operation");
    assert_eq!(ev["intent"]["args"], json!({"duration": 60, "steps": 60}));
    assert_eq!(ev["code_provenance"]["agent"], "afr-raw-client");
    assert_eq!(ev["execution"]["command"], "tools/call", "it was forwarded");
    assert_eq!(
        ev["effects"]["error"],
        "outcome unknown: the client disconnected before the answer (the call was cancelled)",
        "{ev}"
    );
    assert!(ev["effects"].get("return_value").is_none());
    assert!(ev.get("delegation_provenance").is_none(), "{ev}");
    journal_settles(&dir);
}

#[test]
fn proxy_signed_approval_is_never_elicited_and_carries_the_signature() {
    let (tmp, dir) = initialised();
    // Anvil's second dev key: the approver's Ethereum key.
    let key = tmp.path().join("approver.key");
    std::fs::write(
        &key,
        "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    )
    .unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let policy = write_policy(
        &tmp.path().join("policy.toml"),
        "[[approver]]\nname = \"dana@example.org\"\nkeys = [\"0x70997970c51812dc3a010c7d01b50e0d17dc79c8\"]\n\
         [[rule]]\nid = \"echo-signed\"\ntool = \"echo\"\nverdict = \"escalate\"\n\
         signed_by = [\"dana@example.org\"]\n",
    );
    let (_server, upstream) = start_everything();
    let (_proxy, url) = start_proxy(
        &dir,
        &upstream,
        &["--policy", &policy, "--approval-timeout", "30"],
    );
    // The client would accept an elicitation, but an elicitation cannot carry a signature:
    // the call waits for a signed `afr approve`.
    let waiting = spawn_client(
        py_client()
            .args(["http", &url, "--protocol", "2025-11-25"])
            .args(["--elicitation", "accept"])
            .args(["--call", "echo", r#"{"message":"signed"}"#]),
    );
    let held = held_calls(&dir, 1);
    assert_eq!(held[0]["signed_by"], json!(["dana@example.org"]));
    let id = held[0]["id"].as_str().unwrap();
    afr_testkit::ok(afr(&dir).args(["approve", id, "--eth-key"]).arg(&key));
    let out = finish_client(waiting);
    assert_eq!(
        out["calls"][0]["content"][0]["text"], "Echo: signed",
        "{out}"
    );
    assert_eq!(out["elicitations"], json!([]), "{out}");
    let evs = exactly_events(&dir, 1);
    let a = &evs[0]["human_approval"];
    assert_eq!(a["approver"], "dana@example.org");
    assert_eq!(a["signature"]["scheme"], "eip712");
    assert_eq!(
        a["signature"]["signer"],
        "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"
    );
    assert_eq!(
        a["signature"]["statement"]["action"], held[0]["action"],
        "the signed digest is the one the queue showed"
    );
}

/// #31, defect 5: a headless host that declares elicitation but cancels every request (as
/// fast-agent does) turned every escalation into a rejection. With `--no-elicitation` (or the
/// policy's `elicitation = false`) the gateway never asks the client: the call waits for `afr
/// approve`.
#[test]
fn a_host_that_cancels_every_elicitation_can_still_get_approvals() {
    let (tmp, dir) = initialised();
    let policy = write_policy(
        &tmp.path().join("policy.toml"),
        "[[rule]]\nid = \"echo-reviewed\"\ntool = \"echo\"\nverdict = \"escalate\"\n",
    );
    let (_server, upstream) = start_everything();
    let client = |url: &str, message: &str| -> Command {
        let mut c = py_client();
        c.args(["http", url, "--protocol", "2025-11-25"])
            .args(["--elicitation", "cancel"])
            .args(["--call", "echo", &json!({ "message": message }).to_string()]);
        c
    };
    // As before: asked, the host cancels, the call is rejected.
    let (proxy, url) = start_proxy(&dir, &upstream, &["--policy", &policy]);
    let no = run_client(&mut client(&url, "m1"));
    assert!(
        no["calls"][0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("rejected"),
        "{no}"
    );
    assert_eq!(no["elicitations"].as_array().unwrap().len(), 1, "{no}");
    drop(proxy);
    // Told not to ask: the call waits for a person, who approves it.
    let (_proxy, url) = start_proxy(&dir, &upstream, &["--policy", &policy, "--no-elicitation"]);
    let waiting = spawn_client(&mut client(&url, "m2"));
    let held = held_calls(&dir, 1);
    let id = held[0]["id"].as_str().unwrap();
    afr_testkit::ok(afr(&dir).args(["approve", id, "--as", "carol@example.org"]));
    let yes = finish_client(waiting);
    assert_eq!(yes["calls"][0]["content"][0]["text"], "Echo: m2", "{yes}");
    assert_eq!(yes["elicitations"], json!([]), "{yes}");
    // The same from the policy file alone.
    let quiet = write_policy(
        &tmp.path().join("quiet.toml"),
        "elicitation = false\n\n[[rule]]\nid = \"echo-reviewed\"\ntool = \"echo\"\nverdict = \"escalate\"\n",
    );
    let (_proxy2, url) = start_proxy(&dir, &upstream, &["--policy", &quiet]);
    let waiting = spawn_client(&mut client(&url, "m3"));
    let held = held_calls(&dir, 1);
    afr_testkit::ok(afr(&dir).args(["reject", held[0]["id"].as_str().unwrap()]));
    let later = finish_client(waiting);
    assert_eq!(later["elicitations"], json!([]), "{later}");
    assert!(
        later["calls"][0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("rejected"),
        "{later}"
    );
}

/// #31, defect 2 (stdio): a held call whose client gave up (the TypeScript SDK's request
/// timeout sends `notifications/cancelled`) must never run, even when a person approves it
/// afterwards while the client is still connected; it is recorded as cancelled.
#[test]
fn a_held_call_the_client_cancelled_never_runs() {
    let (tmp, dir) = initialised();
    let root = tmp.path().join("files");
    std::fs::create_dir(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let policy = write_policy(
        &tmp.path().join("policy.toml"),
        "[[rule]]\nid = \"writes-reviewed\"\ntool = \"write_file\"\nverdict = \"escalate\"\n",
    );
    let (late, next) = (root.join("late.txt"), root.join("next.txt"));
    let write = |p: &Path| json!({"path": p, "content": "too late"}).to_string();
    let mut c = ts_client();
    c.args(["--protocol", "2025-11-25", "--timeout-ms", "1500"])
        .args(["--call", "write_file", &write(&late)])
        .args(["--call", "write_file", &write(&next)])
        .args(["stdio", "--", &afr_bin(), "--dir"])
        .arg(&dir)
        .args([
            "mcp",
            "wrap",
            "--policy",
            &policy,
            "--approval-timeout",
            "60",
            "--",
        ])
        .args([
            server_bin("mcp-server-filesystem").display().to_string(),
            root.display().to_string(),
        ]);
    let client = spawn_client(&mut c);
    let first = held_calls(&dir, 1)[0]["id"].as_str().unwrap().to_owned();
    // The client gave up on the first call and sent the second: still connected.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !afr_testkit::ok(afr(&dir).args(["approvals", "--json"]))
        .stdout
        .windows(8)
        .any(|w| w == b"next.txt")
    {
        assert!(Instant::now() < deadline, "the second call was never held");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A person approves the first one now: too late, it must not run.
    let _ = afr(&dir)
        .args(["approve", &first, "--as", "late@example.org"])
        .output();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!late.exists(), "a call its client cancelled ran");
    let out = finish_client(client);
    for call in out["calls"].as_array().unwrap() {
        let err = call["error"].as_str().unwrap_or_default().to_lowercase();
        assert!(
            err.contains("timed out") || err.contains("timeout"),
            "{out}"
        );
    }
    assert!(!next.exists());
    let evs = exactly_events(&dir, 2);
    for ev in &evs {
        assert_eq!(ev["intent"]["tool"], "write_file");
        assert!(ev["execution"].is_null(), "{ev}");
        assert!(ev["human_approval"].is_null(), "nobody decided: {ev}");
        let e = ev["effects"]["error"].as_str().unwrap();
        assert!(
            e.starts_with("cancelled by the client before a decision"),
            "{e}"
        );
    }
}

/// #31, defect 3: stateless (2026-07-28) clients behind one proxy shared one session state, so
/// one client's call was recorded under another's name and lane, with the other's resource
/// read as context. Two real SDK clients, Python and TypeScript, at once: each call is
/// attributed from its own request.
#[test]
fn stateless_clients_behind_one_proxy_are_told_apart() {
    let (_tmp, dir) = initialised();
    let (_server, upstream) = start_py_server();
    let (_proxy, url) = start_proxy(&dir, &upstream, &[]);
    const N: usize = 6;
    let mut py = py_client();
    py.args(["http", &url, "--protocol", "2026-07-28"])
        .args(["--read-resource", "memo://one"]);
    let mut ts = ts_client();
    ts.args(["--protocol", "2026-07-28"]);
    for i in 0..N {
        py.args([
            "--call",
            "echo",
            &json!({ "message": format!("py-{i}") }).to_string(),
        ]);
        ts.args([
            "--call",
            "echo",
            &json!({ "message": format!("ts-{i}") }).to_string(),
        ]);
    }
    ts.args(["http", &url]);
    let (a, b) = (spawn_client(&mut py), spawn_client(&mut ts));
    let (a, b) = (finish_client(a), finish_client(b));
    assert_eq!(a["calls"].as_array().unwrap().len(), N, "{a}");
    assert_eq!(b["calls"].as_array().unwrap().len(), N, "{b}");
    let evs = exactly_events(&dir, 2 * N);
    let mut lanes = std::collections::BTreeMap::new();
    for ev in &evs {
        let m = ev["intent"]["args"]["message"].as_str().unwrap();
        let (who, reads) = if m.starts_with("py-") {
            ("afr-py-client", true)
        } else {
            ("afr-ts-client", false)
        };
        assert_eq!(ev["code_provenance"]["agent"], who, "{ev}");
        let memo = sources(ev).iter().any(|s| s["uri"] == "memo://one");
        assert_eq!(
            memo, reads,
            "the resource one client read is context of its calls only: {ev}"
        );
        lanes
            .entry(who)
            .or_insert_with(std::collections::BTreeSet::new)
            .insert(ev["lane"].as_str().unwrap().to_owned());
    }
    assert_eq!(lanes["afr-py-client"].len(), 1, "{lanes:?}");
    assert_eq!(lanes["afr-ts-client"].len(), 1, "{lanes:?}");
    assert_ne!(lanes["afr-py-client"], lanes["afr-ts-client"]);
}

/// A private CA (made by the real `openssl`) and a certificate for `localhost` it signed: the
/// CA's PEM, the server's chain and key.
fn private_ca(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("openssl");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=afr test CA",
    ]);
    run(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    )
}

/// #31: TLS upstreams. The Python SDK's server over https with a certificate from a private
/// CA: with `--upstream-ca` the call goes through (certificate and name verified); without it
/// the certificate is refused and nothing reaches the server.
#[test]
fn an_https_upstream_is_verified_against_the_system_roots_and_upstream_ca() {
    let (tmp, dir) = initialised();
    let (ca, cert, key) = private_ca(tmp.path());
    let mut d = Daemon::spawn(
        Command::new(python())
            .arg(mcp_dir().join("py_server.py"))
            .args(["http", "--port", "0", "--tls"])
            .args([&cert, &key]),
    );
    let url = d
        .wait_for(|l| {
            l.split_once("listening on ")
                .map(|(_, u)| u.trim().replace("127.0.0.1", "localhost"))
        })
        .unwrap_or_else(|| panic!("py_server did not start: {}", d.stderr()));
    assert!(url.starts_with("https://localhost:"), "{url}");
    let call = |proxy_url: &str| {
        let mut c = py_client();
        c.args(["http", proxy_url, "--protocol", "2026-07-28"])
            .args(["--call", "echo", r#"{"message":"over tls"}"#]);
        c
    };
    {
        let (_proxy, purl) = start_proxy(&dir, &url, &["--upstream-ca", ca.to_str().unwrap()]);
        let out = run_client(&mut call(&purl));
        assert_eq!(out["calls"][0]["content"][0]["text"], "over tls", "{out}");
    }
    // Without the CA: the server's certificate is refused (the client's first request fails,
    // and says why); nothing reaches the server.
    let (_proxy, purl) = start_proxy(&dir, &url, &[]);
    let out = call(&purl).output().unwrap();
    assert!(!out.status.success(), "an unknown CA was trusted: {out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("UnknownIssuer"), "{said}");
    let evs = exactly_events(&dir, 1);
    assert_eq!(
        evs[0]["effects"]["return_value"]["content"][0]["text"],
        "over tls"
    );
}

/// #31: `tools/list` filtered by policy. A tool a rule denies outright is not offered (and the
/// filtering is recorded); a tool denied only for some arguments still is. The real Python
/// SDK client over stdio, and the TypeScript one through the HTTP proxy.
#[test]
fn tools_the_policy_denies_outright_are_not_offered() {
    let (tmp, dir) = initialised();
    let policy = write_policy(
        &tmp.path().join("policy.toml"),
        "filter_tools = true\n\n\
         [[rule]]\nid = \"no-sums\"\ntool = \"get-sum\"\nverdict = \"deny\"\nreason = \"no arithmetic\"\n\n\
         [[rule]]\nid = \"no-shouting\"\ntool = \"echo\"\nargs = { message = \"*!*\" }\nverdict = \"deny\"\n",
    );
    let out = run_client(
        py_client()
            .args(["stdio", "--protocol", "2025-11-25"])
            .args(["--call", "echo", r#"{"message":"hi"}"#])
            .args(["--", &afr_bin(), "--dir"])
            .arg(&dir)
            .args(["mcp", "wrap", "--policy", &policy, "--"])
            .args([
                server_bin("mcp-server-everything").display().to_string(),
                "stdio".into(),
            ]),
    );
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"echo"),
        "denied only for some arguments: still offered: {tools:?}"
    );
    assert!(!tools.contains(&"get-sum"), "{tools:?}");
    assert!(tools.len() > 2, "{tools:?}");
    assert_eq!(out["calls"][0]["content"][0]["text"], "Echo: hi", "{out}");
    let evs = events(&dir);
    let listed: Vec<&Value> = evs
        .iter()
        .filter(|e| e["intent"]["tool"] == "tools/list")
        .collect();
    assert_eq!(listed.len(), 1, "{evs:#?}");
    assert_eq!(listed[0]["intent"]["args"]["hidden"], json!(["get-sum"]));
    assert_eq!(listed[0]["policy_evaluation"][0]["guardrail"], "no-sums");
    assert_eq!(listed[0]["policy_evaluation"][0]["verdict"], "deny");

    // Over HTTP, with the flag instead of the policy's setting.
    let plain = write_policy(
        &tmp.path().join("plain.toml"),
        "[[rule]]\nid = \"no-sums\"\ntool = \"get-sum\"\nverdict = \"deny\"\n",
    );
    let (_server, upstream) = start_everything();
    let (_proxy, url) = start_proxy(&dir, &upstream, &["--policy", &plain, "--filter-tools"]);
    let out = run_client(ts_client().args(["--protocol", "2025-11-25", "http", &url]));
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"echo") && !tools.contains(&"get-sum"),
        "{tools:?}"
    );
}

/// A held `delete_record` call through the proxy whose client gives up on it (`client` makes
/// the command, given the proxy's URL): approved afterwards, it must never run, and it is
/// recorded as cancelled, with nobody's approval.
fn a_held_call_given_up_over_http_never_runs(client: impl FnOnce(&str) -> Command) {
    let (tmp, dir) = initialised();
    let policy = write_policy(
        &tmp.path().join("policy.toml"),
        "[[rule]]\nid = \"deletes-reviewed\"\ntool = \"delete_record\"\nverdict = \"escalate\"\n",
    );
    let (_server, upstream) = start_py_server();
    let (_proxy, url) = start_proxy(
        &dir,
        &upstream,
        &["--policy", &policy, "--approval-timeout", "60"],
    );
    let client = spawn_client(&mut client(&url));
    let id = held_calls(&dir, 1)[0]["id"].as_str().unwrap().to_owned();
    let out = finish_client(client);
    assert!(
        out["calls"][0]["content"].is_null(),
        "the client gave up: {out}"
    );
    // Approved after the client gave up: too late.
    let _ = afr(&dir)
        .args(["approve", &id, "--as", "late@example.org"])
        .output();
    let evs = exactly_events(&dir, 1);
    let ev = &evs[0];
    assert_eq!(ev["intent"]["tool"], "delete_record");
    assert!(
        ev["execution"].is_null(),
        "a call its client gave up on ran: {ev}"
    );
    assert!(ev["human_approval"].is_null(), "{ev}");
    let e = ev["effects"]["error"].as_str().unwrap();
    assert!(
        e.starts_with("cancelled by the client before a decision"),
        "{e}"
    );
}

/// #31, defect 2 (HTTP): a held call whose client gave up (the Python SDK's read timeout, as
/// openai-agents' 5 s one, closes the request) must not run when a person approves it
/// afterwards.
#[test]
fn an_abandoned_held_call_over_http_never_runs() {
    a_held_call_given_up_over_http_never_runs(|url| {
        let mut c = py_client();
        c.args(["http", url, "--protocol", "2026-07-28", "--timeout", "1.5"])
            .args(["--call", "delete_record", r#"{"id":"9"}"#]);
        c
    });
}

/// #31, defect 2 (HTTP, the client's cancellation): the TypeScript SDK's request timeout POSTs
/// `notifications/cancelled` for the held call.
#[test]
fn a_held_call_cancelled_over_http_never_runs() {
    a_held_call_given_up_over_http_never_runs(|url| {
        let mut c = ts_client();
        c.args(["--protocol", "2025-11-25", "--timeout-ms", "1500"])
            .args(["--call", "delete_record", r#"{"id":"11"}"#])
            .args(["http", url]);
        c
    });
}
