//! `afr mcp wrap` between a client speaking MCP 2025-11-25 over stdio and the real reference
//! servers from npm (`tests/mcp/`, installed by scripts/setup.sh): byte-for-byte relay seen
//! through taps on both sides of the server, the events of each call, policy, a server killed
//! mid-call, recording through `afr serve`, and failing closed.

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
    sync::mpsc::{Receiver, channel},
    time::Duration,
};

use serde_json::{Value, json};

use super::{afr, initialised, serve::serve, serve::terminate};

/// A reference server's executable in tests/mcp/node_modules/.bin.
pub(super) fn server_bin(name: &str) -> PathBuf {
    afr_testkit::installed(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/mcp/node_modules/.bin")
            .join(name),
        "scripts/setup.sh",
    )
}

/// A shell command that runs `server` with `args`, copying what it reads to `tap/in` and what
/// it writes to `tap/out`.
pub(super) fn tapped(tap: &Path, server: &Path, args: &str) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "tee '{}' | '{}' {args} | tee '{}'",
            tap.join("in").display(),
            server.display(),
            tap.join("out").display()
        ),
    ]
}

/// An MCP client (2025-11-25, stdio) talking to `afr mcp wrap`.
pub(super) struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    /// Every byte sent.
    sent: Vec<u8>,
    /// Every byte received.
    received: Vec<u8>,
}

impl Client {
    pub(super) fn start(dir: &Path, extra: &[&str], command: &[String]) -> Client {
        let mut child = afr(dir)
            .args(["mcp", "wrap"])
            .args(extra)
            .arg("--")
            .args(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut r = stdout;
            loop {
                let mut l = Vec::new();
                if r.read_until(b'\n', &mut l).unwrap_or(0) == 0 || tx.send(l).is_err() {
                    return;
                }
            }
        });
        Client {
            stdin: child.stdin.take(),
            child,
            lines,
            sent: Vec::new(),
            received: Vec::new(),
        }
    }

    /// Sends `line` exactly as given (a newline is added).
    pub(super) fn send_raw(&mut self, line: &str) {
        let mut b = line.as_bytes().to_vec();
        b.push(b'\n');
        self.stdin.as_mut().unwrap().write_all(&b).unwrap();
        self.stdin.as_mut().unwrap().flush().unwrap();
        self.sent.extend_from_slice(&b);
    }

    /// Waits for the response to `id`, skipping notifications and server requests.
    pub(super) fn response(&mut self, id: &Value) -> Value {
        loop {
            let l = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .expect("no response within 60 s");
            self.received.extend_from_slice(&l);
            let v: Value = serde_json::from_slice(&l).unwrap();
            if v.get("method").is_none() && v.get("id") == Some(id) {
                return v;
            }
        }
    }

    pub(super) fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        let m = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&m.to_string());
        self.response(&json!(id))
    }

    /// `initialize` and `notifications/initialized`; the initialize result.
    pub(super) fn initialize(&mut self) -> Value {
        let r = self.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "afr-test-client", "version": "0.0.1"}}),
        );
        self.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        r["result"].clone()
    }

    /// Closes stdin, reads everything left, and waits for the gateway to exit.
    pub(super) fn finish(mut self) -> (Vec<u8>, Vec<u8>, Option<i32>) {
        drop(self.stdin.take());
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(30)) {
            self.received.extend_from_slice(&l);
        }
        let st = self.child.wait().unwrap();
        (self.sent, self.received, st.code())
    }
}

/// The `afr query --json` lines of every event in the store (through `afr serve` if it runs),
/// in order.
pub(super) fn query_lines(dir: &Path) -> Vec<Value> {
    let out = afr_testkit::ok(afr(dir).args(["query", "--json", "seq in 0..1000000"]));
    out.stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice::<Value>(l).unwrap())
        .collect()
}

/// Polls the store until it holds at least `n` events (or 60 s pass); its `afr query --json`
/// lines.
pub(super) fn wait_for_lines(dir: &Path, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let lines = query_lines(dir);
        if lines.len() >= n {
            return lines;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {n} events: {lines:#?}",
            lines.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every event in the store, in order.
pub(super) fn events(dir: &Path) -> Vec<Value> {
    query_lines(dir)
        .into_iter()
        .map(|v| v["event"].clone())
        .collect()
}

/// Sends `tools/call` `id` of server-everything's minute-long operation, and waits until it
/// is journaled (the journal is synced before the server sees the call).
fn long_call_recorded(c: &mut Client, dir: &Path, id: u64) {
    c.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"trigger-long-running-operation","arguments":{{"duration":60,"steps":60}}}}}}"#
    ));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !journal_text(dir).contains("trigger-long-running-operation") {
        assert!(
            std::time::Instant::now() < deadline,
            "the call was not journaled"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Everything in the gateway journals of `dir`.
pub(super) fn journal_text(dir: &Path) -> String {
    let mut all = String::new();
    if let Ok(entries) = std::fs::read_dir(dir.join("gateway-journal")) {
        for e in entries.flatten() {
            all.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
        }
    }
    all
}

/// `afr mcp wrap` over server-everything, with call `id` of its minute-long operation in
/// flight (its intent recorded).
fn long_call_through_wrap(dir: &Path, id: u64) -> Client {
    let command = [
        server_bin("mcp-server-everything").display().to_string(),
        "stdio".into(),
    ];
    let mut c = Client::start(dir, &[], &command);
    c.initialize();
    long_call_recorded(&mut c, dir, id);
    c
}

/// server-everything over stdio, started through `sh` so that its PID lands in `pidfile`.
fn everything_writing_its_pid(pidfile: &Path) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "echo $$ > '{}'; exec '{}' stdio",
            pidfile.display(),
            server_bin("mcp-server-everything").display()
        ),
    ]
}

/// [`long_call_through_wrap`] with the server's PID written to `pidfile`.
fn long_call_with_server_pid(dir: &Path, pidfile: &Path, id: u64) -> Client {
    let mut c = Client::start(dir, &[], &everything_writing_its_pid(pidfile));
    c.initialize();
    long_call_recorded(&mut c, dir, id);
    c
}

/// A fresh directory `files` under `parent`, canonical (server-filesystem resolves links).
fn files_dir(parent: &Path) -> PathBuf {
    let root = parent.join("files");
    std::fs::create_dir(&root).unwrap();
    root.canonicalize().unwrap()
}

/// Asserts that `v` is a string holding `needle` (`whole` is shown if not).
pub(super) fn assert_text(v: &Value, needle: &str, whole: &Value) {
    assert!(
        v.as_str().is_some_and(|t| t.contains(needle)),
        "{needle:?} not in {whole}"
    );
}

/// Asserts that `r` is the JSON-RPC error -32083 of a call that was not approved (rejected,
/// timed out, or its signature refused), with `needle` in its message.
pub(super) fn assert_not_approved(r: &Value, needle: &str) {
    assert_eq!(r["error"]["code"], -32083, "{r}");
    assert_text(&r["error"]["message"], needle, r);
}

/// `kill <signal> <pid>`, which must succeed.
pub(super) fn kill(pid: &str, signal: &str) {
    assert!(
        Command::new("kill")
            .args([signal, pid])
            .status()
            .unwrap()
            .success()
    );
}

#[test]
fn mcp_wrap_relays_byte_for_byte_and_records_one_event_per_call() {
    let (tmp, dir) = initialised();
    let tap = tmp.path();
    let mut c = Client::start(
        &dir,
        &[],
        &tapped(tap, &server_bin("mcp-server-everything"), "stdio"),
    );
    let init = c.initialize();
    assert_eq!(init["serverInfo"]["name"], "mcp-servers/everything");
    c.request(2, "tools/list", json!({}));
    let list = c.request(3, "resources/list", json!({}));
    let uri = list["result"]["resources"][0]["uri"]
        .as_str()
        .unwrap()
        .to_owned();
    let read = c.request(4, "resources/read", json!({"uri": uri}));
    assert!(read["result"]["contents"].is_array(), "{read}");
    // Odd spacing, key order, an unknown member and a \u escape: relayed as they are.
    c.send_raw(
        r#"{ "params" : {"arguments":{"message":"h\u00e9llo"},"name":"echo","_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},"x-unknown":[1, 2.50]},"id":5,  "jsonrpc":"2.0","method":"tools/call"}"#,
    );
    let echo = c.response(&json!(5));
    assert_eq!(echo["result"]["content"][0]["text"], "Echo: héllo");
    let sc = c.request(
        6,
        "tools/call",
        json!({"name": "get-structured-content", "arguments": {"location": "Chicago"}}),
    );
    assert!(
        sc["result"]["structuredContent"]["temperature"].is_number(),
        "{sc}"
    );
    let sent_before_dup = c.sent.len();
    // A duplicate key: answered by the gateway, never forwarded.
    c.send_raw(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"a","message":"b"}}}"#);
    let dup = c.response(&json!(7));
    assert_eq!(dup["error"]["code"], -32600, "{dup}");
    let dup_line_len = c.sent.len() - sent_before_dup;
    let gateway_answer_len = c.received.len();
    let (sent, received, code) = c.finish();
    assert_eq!(code, Some(0));

    // The server read exactly what the client sent, except the refused line.
    let tap_in = std::fs::read(tap.join("in")).unwrap();
    let mut expected = sent[..sent_before_dup].to_vec();
    expected.extend_from_slice(&sent[sent_before_dup + dup_line_len..]);
    assert_eq!(tap_in, expected);
    // The client read exactly what the server wrote, plus the gateway's one answer.
    let tap_out = std::fs::read(tap.join("out")).unwrap();
    let dup_answer_start = received[..gateway_answer_len]
        .rsplit(|b| *b == b'\n')
        .nth(1)
        .map(|l| gateway_answer_len - l.len() - 1)
        .unwrap();
    let mut from_server = received[..dup_answer_start].to_vec();
    from_server.extend_from_slice(&received[gateway_answer_len..]);
    assert_eq!(from_server, tap_out);

    // Two calls, one event each, complete: intent, execution, effects, provenance.
    let evs = events(&dir);
    assert_eq!(evs.len(), 2, "{evs:#?}");
    let intent = &evs[0];
    assert_eq!(intent["category"], "api");
    assert_eq!(
        intent["intent"],
        json!({"tool": "echo", "args": {"message": "héllo"}})
    );
    assert_eq!(intent["execution"]["command"], "tools/call");
    let target = intent["execution"]["target"].as_str().unwrap();
    assert!(
        target.starts_with("mcp-servers/everything 2.0.0 (stdio: sh -c "),
        "{target}"
    );
    assert_eq!(intent["code_provenance"]["agent"], "afr-test-client");
    assert_eq!(intent["code_provenance"]["agent_version"], "0.0.1");
    assert_eq!(
        intent["code_provenance"]["tool_version"],
        "mcp-servers/everything 2.0.0"
    );
    let sources = intent["context_provenance"]["sources"].as_array().unwrap();
    assert_eq!(sources[0]["uri"], uri.as_str());
    assert!(
        sources[0]["content_hash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(
        sources[1]["uri"],
        "traceparent:00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    );
    assert_eq!(
        intent["effects"]["return_value"]["content"][0]["text"],
        "Echo: héllo"
    );
    assert!(intent.get("delegation_provenance").is_none());
    assert_eq!(intent["lane"], evs[1]["lane"]);
    assert_eq!(evs[1]["intent"]["tool"], "get-structured-content");
    assert_eq!(evs[1]["intent"]["args"], json!({"location": "Chicago"}));
    assert!(evs[1]["effects"]["return_value"]["structuredContent"]["humidity"].is_number());
    // Nothing is left in the gateway's journal.
    assert!(journal_text(&dir).is_empty());
}

#[test]
fn mcp_wrap_denied_call_never_reaches_the_server_and_is_recorded() {
    let (tmp, dir) = initialised();
    let root = files_dir(tmp.path());
    let policy = tmp.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            r#"
[[rule]]
id = "notes-only"
tool = "write_file"
args = {{ path = "{}/notes/*" }}
verdict = "allow"

[[rule]]
id = "no-other-writes"
tool = "write_file"
server = "secure-filesystem-*"
verdict = "deny"
reason = "writes only under notes/"
"#,
            root.display()
        ),
    )
    .unwrap();
    let policy_hash = {
        use sha2::Digest;
        format!(
            "sha256:{}",
            hex::encode(sha2::Sha256::digest(std::fs::read(&policy).unwrap()))
        )
    };
    std::fs::create_dir(root.join("notes")).unwrap();
    let server = format!("'{}'", root.display());
    let command = tapped(tmp.path(), &server_bin("mcp-server-filesystem"), &server);
    let mut c = Client::start(&dir, &["--policy", policy.to_str().unwrap()], &command);
    let init = c.initialize();
    let name = init["serverInfo"]["name"].as_str().unwrap().to_owned();
    assert!(name.starts_with("secure-filesystem"), "{name}");
    c.request(2, "tools/list", json!({}));
    let bad = root.join("evil.txt");
    let denied = c.request(
        3,
        "tools/call",
        json!({"name": "write_file", "arguments": {"path": bad, "content": "x"}}),
    );
    assert_eq!(denied["error"]["code"], -32081, "{denied}");
    let msg = denied["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("no-other-writes") && msg.contains("writes only under notes/"),
        "{msg}"
    );
    let good = root.join("notes/ok.txt");
    let allowed = c.request(
        4,
        "tools/call",
        json!({"name": "write_file", "arguments": {"path": good, "content": "fine"}}),
    );
    assert!(allowed.get("result").is_some(), "{allowed}");
    let (_, _, code) = c.finish();
    assert_eq!(code, Some(0));

    assert!(!bad.exists(), "the denied write ran");
    assert_eq!(std::fs::read_to_string(&good).unwrap(), "fine");
    let tap_in = String::from_utf8(std::fs::read(tmp.path().join("in")).unwrap()).unwrap();
    assert!(
        !tap_in.contains("evil.txt"),
        "the denied call reached the server"
    );

    let evs = events(&dir);
    assert_eq!(evs.len(), 2, "{evs:#?}");
    let d = &evs[0];
    assert_eq!(d["intent"]["tool"], "write_file");
    assert_eq!(
        d["policy_evaluation"],
        json!([{"guardrail": "no-other-writes", "version": policy_hash, "verdict": "deny", "reason": "writes only under notes/"}])
    );
    assert!(
        d.get("execution").is_none(),
        "a denied call did not execute"
    );
    assert!(d["effects"]["error"].as_str().unwrap().contains("denied"));
    let a = &evs[1];
    assert_eq!(a["policy_evaluation"][0]["guardrail"], "notes-only");
    assert_eq!(a["policy_evaluation"][0]["verdict"], "allow");
    // server-filesystem annotates write_file as destructive: its arguments are the mutation.
    assert_eq!(a["execution"]["mutation"]["content"], "fine");
    assert!(a["effects"]["return_value"]["content"].is_array(), "{a}");
}

#[test]
fn mcp_wrap_server_killed_mid_call_records_outcome_unknown() {
    let (tmp, dir) = initialised();
    let pidfile = tmp.path().join("server.pid");
    let mut c = long_call_with_server_pid(&dir, &pidfile, 9);
    std::thread::sleep(Duration::from_millis(300));
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    // The server is this test's grandchild, started through the gateway: killed by its PID.
    kill(pid.trim(), "-KILL");
    let answer = c.response(&json!(9));
    assert_eq!(answer["error"]["code"], -32082, "{answer}");
    let (_, _, code) = c.finish();
    assert_ne!(code, Some(0));

    let evs = events(&dir);
    assert_eq!(evs.len(), 1, "{evs:#?}");
    assert_eq!(evs[0]["intent"]["tool"], "trigger-long-running-operation");
    assert_eq!(evs[0]["intent"]["args"]["duration"], 60);
    assert_eq!(evs[0]["execution"]["command"], "tools/call");
    assert_text(
        &evs[0]["effects"]["error"],
        "outcome unknown: the server exited",
        &evs[0],
    );
}

#[test]
fn mcp_wrap_records_through_a_running_afr_serve() {
    let (_tmp, dir) = initialised();
    let server = serve(&dir, &[]);
    let mut c = Client::start(
        &dir,
        &[],
        &[
            server_bin("mcp-server-everything").display().to_string(),
            "stdio".into(),
        ],
    );
    c.initialize();
    let r = c.request(
        2,
        "tools/call",
        json!({"name": "get-sum", "arguments": {"a": 2, "b": 3}}),
    );
    assert_text(&r["result"]["content"][0]["text"], "5", &r);
    let (_, _, code) = c.finish();
    assert_eq!(code, Some(0));
    // Read through the server, which holds the store open.
    let evs = events(&dir);
    assert_eq!(evs.len(), 1, "{evs:#?}");
    assert_eq!(evs[0]["intent"]["args"], json!({"a": 2, "b": 3}));
    assert!(evs[0]["effects"]["return_value"]["content"].is_array());
    let (st, err) = terminate(server);
    assert_eq!(st, Some(0), "{err}");
}

#[test]
fn mcp_wrap_fails_closed_without_a_recorder_and_fail_open_forwards() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("not-initialised");
    for (extra, forwarded) in [(&[][..], false), (&["--fail-open"][..], true)] {
        let tap = tempfile::tempdir_in(tmp.path()).unwrap();
        let command = tapped(tap.path(), &server_bin("mcp-server-everything"), "stdio");
        let mut c = Client::start(&dir, extra, &command);
        c.initialize();
        let r = c.request(
            2,
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "x"}}),
        );
        let (_, _, code) = c.finish();
        assert_eq!(code, Some(0));
        let tap_in = String::from_utf8(std::fs::read(tap.path().join("in")).unwrap()).unwrap();
        assert_eq!(tap_in.contains("tools/call"), forwarded, "{extra:?}");
        if forwarded {
            assert_eq!(r["result"]["content"][0]["text"], "Echo: x");
        } else {
            assert_eq!(r["error"]["code"], -32080, "{r}");
        }
    }
}

#[test]
fn mcp_wrap_stopped_mid_call_records_outcome_unknown() {
    let (_tmp, dir) = initialised();
    let mut c = long_call_through_wrap(&dir, 3);
    // SIGTERM to the gateway, which this test started.
    let pid = c.child.id().to_string();
    kill(&pid, "-TERM");
    let answer = c.response(&json!(3));
    assert_eq!(answer["error"]["code"], -32082, "{answer}");
    let (_, _, code) = c.finish();
    assert_eq!(code, Some(128 + 15));
    let evs = events(&dir);
    assert_eq!(evs.len(), 1, "{evs:#?}");
    let err = evs[0]["effects"]["error"].as_str().unwrap();
    assert_eq!(err, "outcome unknown: the gateway was stopped by signal 15");
    assert_eq!(evs[0]["intent"]["args"]["duration"], 60);
}

/// Waits until `n` calls are held in the approval queue; they, oldest first.
pub(super) fn held_calls(dir: &Path, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let out = afr_testkit::ok(afr(dir).args(["approvals", "--json"]));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let calls = v.as_array().unwrap().clone();
        if calls.len() >= n {
            return calls;
        }
        assert!(std::time::Instant::now() < deadline, "no held call: {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(super) fn write_policy(path: &Path, body: &str) -> String {
    std::fs::write(path, body).unwrap();
    path.to_str().unwrap().to_owned()
}

const ESCALATE_WRITES: &str = r#"
[[rule]]
id = "writes-need-a-human"
tool = "write_file"
verdict = "escalate"
reason = "every write is reviewed"
"#;

#[test]
fn mcp_wrap_escalated_calls_wait_for_afr_approve_or_reject() {
    let (tmp, dir) = initialised();
    let root = files_dir(tmp.path());
    let policy = write_policy(&tmp.path().join("policy.toml"), ESCALATE_WRITES);
    let command = tapped(
        tmp.path(),
        &server_bin("mcp-server-filesystem"),
        &format!("'{}'", root.display()),
    );
    let mut c = Client::start(&dir, &["--policy", &policy], &command);
    c.initialize();
    c.request(2, "tools/list", json!({}));
    let (yes, no) = (root.join("approved.txt"), root.join("rejected.txt"));

    c.send_raw(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": yes, "content": "ok"}}})
        .to_string(),
    );
    let held = held_calls(&dir, 1);
    let prompt = held[0]["prompt"].as_str().unwrap().to_owned();
    assert!(
        prompt.contains("write_file") && prompt.contains("approved.txt"),
        "{prompt}"
    );
    assert_eq!(held[0]["rule"], "writes-need-a-human");
    // Held: nothing reached the server yet.
    let tap_in = || std::fs::read_to_string(tmp.path().join("in")).unwrap();
    assert!(!tap_in().contains("approved.txt"));
    let id = held[0]["id"].as_str().unwrap();
    let out = afr_testkit::ok(afr(&dir).args(["approve", id, "--as", "alice@example.org"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("approved"));
    let r = c.response(&json!(3));
    assert!(r.get("result").is_some(), "{r}");
    assert_eq!(std::fs::read_to_string(&yes).unwrap(), "ok");
    // A second decision on the same call is refused.
    let again = afr(&dir).args(["reject", id]).output().unwrap();
    assert!(!again.status.success());

    c.send_raw(
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": no, "content": "no"}}})
        .to_string(),
    );
    let held = held_calls(&dir, 1);
    let id = held[0]["id"].as_str().unwrap();
    afr_testkit::ok(afr(&dir).args(["reject", id, "--as", "bob", "--reason", "not today"]));
    let r = c.response(&json!(4));
    assert_not_approved(&r, "not today");
    let (_, _, code) = c.finish();
    assert_eq!(code, Some(0));
    assert!(!no.exists(), "the rejected write ran");
    assert!(
        !tap_in().contains("rejected.txt"),
        "the rejected call reached the server"
    );
    assert!(held_calls(&dir, 0).is_empty(), "the queue is left empty");

    let evs = events(&dir);
    // One event per call: the escalation, the decision and what followed.
    assert_eq!(evs.len(), 2, "{evs:#?}");
    let a = &evs[0];
    assert_eq!(a["policy_evaluation"][0]["verdict"], "escalate");
    assert_eq!(
        a["policy_evaluation"][0]["guardrail"],
        "writes-need-a-human"
    );
    assert_eq!(a["human_approval"]["approver"], "alice@example.org");
    assert_eq!(a["human_approval"]["decision"], "approved");
    assert_eq!(a["human_approval"]["prompt"], prompt.as_str());
    assert!(
        a["human_approval"]["decided_at_us"].as_u64().unwrap()
            <= a["timestamp_us"].as_u64().unwrap()
    );
    assert_eq!(a["execution"]["mutation"]["content"], "ok");
    assert!(a["effects"]["return_value"]["content"].is_array(), "{a}");
    // Rejected: recorded, never executed.
    let r = &evs[1];
    assert_eq!(r["policy_evaluation"][0]["verdict"], "escalate");
    assert_eq!(r["human_approval"]["approver"], "bob");
    assert_eq!(r["human_approval"]["decision"], "rejected");
    assert!(r.get("execution").is_none());
    assert_eq!(
        r["effects"]["error"],
        "rejected by bob: not today; not forwarded to the server"
    );
}

#[test]
fn mcp_wrap_asks_a_client_that_can_elicit_and_rejects_on_timeout() {
    let (tmp, dir) = initialised();
    let policy = write_policy(
        &tmp.path().join("policy.toml"),
        "[[rule]]\nid = \"echo-reviewed\"\ntool = \"echo\"\nverdict = \"escalate\"\n",
    );
    let command = tapped(tmp.path(), &server_bin("mcp-server-everything"), "stdio");
    let mut c = Client::start(
        &dir,
        &["--policy", &policy, "--approval-timeout", "2"],
        &command,
    );
    c.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
               "clientInfo": {"name": "afr-test-client", "version": "0.0.1"}}),
    );
    c.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    // Each call: the gateway asks the client; the client answers as its user chose.
    let ask = |c: &mut Client, id: u64, answer: Option<Value>| -> Value {
        c.send_raw(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": format!("m{id}")}}})
            .to_string(),
        );
        // Skip the server's notifications up to the gateway's question.
        let req = loop {
            let l = c.lines.recv_timeout(Duration::from_secs(30)).unwrap();
            c.received.extend_from_slice(&l);
            let m: Value = serde_json::from_slice(&l).unwrap();
            if m.get("id").is_some() {
                break m;
            }
        };
        assert_eq!(req["method"], "elicitation/create", "{req}");
        let msg = req["params"]["message"].as_str().unwrap();
        assert!(
            msg.contains("echo") && msg.contains(&format!("m{id}")),
            "{msg}"
        );
        assert_eq!(
            req["params"]["requestedSchema"]["properties"]["approve"]["type"],
            "boolean"
        );
        if let Some(result) = answer {
            c.send_raw(&json!({"jsonrpc": "2.0", "id": req["id"], "result": result}).to_string());
        }
        c.response(&json!(id))
    };
    let ok = ask(
        &mut c,
        2,
        Some(json!({"action": "accept", "content": {"approve": true}})),
    );
    assert_eq!(ok["result"]["content"][0]["text"], "Echo: m2", "{ok}");
    let declined = ask(&mut c, 3, Some(json!({"action": "decline"})));
    assert_eq!(declined["error"]["code"], -32083, "{declined}");
    let timed_out = ask(&mut c, 4, None);
    assert_text(
        &timed_out["error"]["message"],
        "no decision within 2 s",
        &timed_out,
    );
    let (_, _, code) = c.finish();
    assert_eq!(code, Some(0));
    let tap_in = std::fs::read_to_string(tmp.path().join("in")).unwrap();
    assert!(tap_in.contains("m2") && !tap_in.contains("m3") && !tap_in.contains("m4"));
    assert!(
        !tap_in.contains("afr-approval-"),
        "an elicitation answer reached the server"
    );

    let evs = events(&dir);
    assert_eq!(evs.len(), 3, "one event per call: {evs:#?}");
    // In the order the calls were made (an event is recorded when its call is over).
    let by_message = |m: &str| {
        evs.iter()
            .find(|e| e["intent"]["args"]["message"] == m)
            .unwrap_or_else(|| panic!("no event for {m}: {evs:#?}"))
    };
    let decisions = [by_message("m2"), by_message("m3"), by_message("m4")];
    assert_eq!(
        decisions[0]["effects"]["return_value"]["content"][0]["text"],
        "Echo: m2"
    );
    assert_eq!(
        decisions[0]["human_approval"]["approver"],
        "user of MCP client afr-test-client"
    );
    assert_eq!(decisions[0]["human_approval"]["decision"], "approved");
    assert_eq!(decisions[1]["human_approval"]["decision"], "rejected");
    assert_eq!(decisions[2]["human_approval"]["approver"], "afr-gateway");
    assert_eq!(
        decisions[2]["effects"]["error"],
        "rejected by afr-gateway: no decision within 2 s; not forwarded to the server"
    );
}

#[test]
fn mcp_wrap_killed_mid_call_leaves_its_intent_recorded_with_outcome_unknown() {
    let (tmp, dir) = initialised();
    let pidfile = tmp.path().join("server.pid");
    let mut c = long_call_with_server_pid(&dir, &pidfile, 3);
    // kill -9: no handler runs; the journal, synced before the call was forwarded, remains.
    c.child.kill().unwrap();
    c.child.wait().unwrap();
    // The orphaned server would go on with its minute-long operation: stop it too.
    kill(std::fs::read_to_string(&pidfile).unwrap().trim(), "-KILL");
    assert!(journal_text(&dir).contains("trigger-long-running-operation"));
    // A reader of the log never writes: it says what waits in the journal.
    let out = afr_testkit::ok(afr(&dir).args(["query", "--json", "seq in 0..1000000"]));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 call wait in a journal"), "{err}");
    assert!(err.contains("afr recover"), "{err}");
    // `afr recover` records it, once.
    for _ in 0..2 {
        afr_testkit::ok(afr(&dir).arg("recover"));
    }
    for _ in 0..2 {
        let evs = events(&dir);
        assert_eq!(evs.len(), 1, "{evs:#?}");
        let e = &evs[0];
        assert_eq!(e["intent"]["tool"], "trigger-long-running-operation");
        assert_eq!(e["intent"]["args"]["steps"], 60);
        assert_eq!(e["execution"]["command"], "tools/call");
        assert_text(
            &e["effects"]["error"],
            "outcome unknown: the gateway (pid ",
            e,
        );
        assert_text(&e["effects"]["error"], "recovered from its journal", e);
    }
    assert!(
        journal_text(&dir).is_empty(),
        "the journal is gone once recorded"
    );
}

/// #31, defect 6: the gateway's own error codes must not be codes the real SDKs give another
/// meaning (-32001 was the TypeScript and Python SDKs' request timeout): asked of the SDKs
/// themselves, as installed by scripts/setup.sh.
#[test]
fn the_gateways_error_codes_are_none_of_the_sdks_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let ts = Command::new("node")
        .current_dir(root.join("tests/mcp"))
        .args([
            "-e",
            "const t = require('@modelcontextprotocol/sdk/types.js'); \
             console.log(JSON.stringify(Object.values(t.ErrorCode).filter(v => typeof v === 'number')))",
        ])
        .output()
        .unwrap();
    assert!(ts.status.success(), "{ts:?}");
    let py = Command::new(root.join(".venv/bin/python"))
        .args([
            "-c",
            "import json, mcp_types as t; \
             print(json.dumps([v for v in vars(t).values() if isinstance(v, int) and -32768 <= v <= -32000]))",
        ])
        .output()
        .unwrap();
    assert!(py.status.success(), "{py:?}");
    let mut sdk: Vec<i64> = serde_json::from_slice(&ts.stdout).unwrap();
    sdk.extend(serde_json::from_slice::<Vec<i64>>(&py.stdout).unwrap());
    assert!(sdk.contains(&-32001), "the SDKs' request timeout: {sdk:?}");
    for c in afr_gateway::gate::code::ALL {
        assert!(
            !sdk.contains(&c),
            "the gateway's code {c} means something else to an SDK"
        );
        assert!(
            (-32099..=-32000).contains(&c),
            "{c} is not a server error code"
        );
    }
}

/// #31, defect 4: a real (Node) server answers an id sent as `61.0` with `61`: the call's
/// answer must still be matched (it ran: its event holds the result, not "outcome unknown";
/// ids above 2^53, which a JavaScript server rounds, are keyed the same way: unit test of
/// `id_key`). And a lone UTF-16 surrogate in an argument
/// is answered with the request's own id instead of `null`, which left the client waiting.
#[test]
fn ids_in_another_spelling_and_lone_surrogates() {
    let (_tmp, dir) = initialised();
    let command = vec![
        server_bin("mcp-server-everything").display().to_string(),
        "stdio".into(),
    ];
    let mut c = Client::start(&dir, &[], &command);
    c.initialize();
    let call = |id: &str, message: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"{message}"}}}}}}"#
        )
    };
    c.send_raw(&call("61.0", "sixty-one"));
    let r = c.response(&json!(61));
    assert_eq!(r["result"]["content"][0]["text"], "Echo: sixty-one", "{r}");
    c.send_raw(&call("77", "\\ud800 alone"));
    let r = c.response(&json!(77));
    assert!(r.get("error").is_some(), "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not forwarded"),
        "{r}"
    );
    let (_, _, code) = c.finish();
    assert_eq!(code, Some(0));
    let evs = events(&dir);
    let echoes: Vec<&Value> = evs
        .iter()
        .filter(|e| e["intent"]["tool"] == "echo")
        .collect();
    assert_eq!(echoes.len(), 1, "{evs:#?}");
    for e in echoes {
        assert!(
            e["effects"]["error"].is_null(),
            "a call that ran is not an unknown outcome: {e}"
        );
        assert!(
            e["effects"]["return_value"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with("Echo: ")
        );
    }
}

/// #31, defect 4: a forwarded call the client cancels (`notifications/cancelled`) is recorded
/// when it is cancelled, as such, not at exit as "the server exited"; and the client gets no
/// stray error for it when the gateway stops. The real server-everything's minute-long
/// operation, cancelled after its intent is durable.
#[test]
fn a_forwarded_call_the_client_cancels_is_recorded_when_cancelled() {
    let (_tmp, dir) = initialised();
    let mut c = long_call_through_wrap(&dir, 5);
    c.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"the user pressed stop"}}"#);
    // Recorded while the gateway and the server still run.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let ev = loop {
        if let Some(e) = events(&dir)
            .into_iter()
            .find(|e| e["intent"]["tool"] == "trigger-long-running-operation")
        {
            break e;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not recorded when cancelled"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = ev["effects"]["error"].as_str().unwrap();
    assert!(
        err.starts_with("outcome unknown: the client cancelled the call after it was forwarded: the user pressed stop"),
        "{err}"
    );
    let echo = c.request(
        6,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "still here"}}),
    );
    assert_eq!(
        echo["result"]["content"][0]["text"], "Echo: still here",
        "{echo}"
    );
    // (The server may still be busy with the operation it was told to stop; the gateway's exit
    // status is the server's.)
    let (received, _, _) = c.finish();
    for line in received.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let v: Value = serde_json::from_slice(line).unwrap();
        assert!(
            !(v["id"] == 5 && v.get("error").is_some()),
            "a stray answer to the cancelled call: {v}"
        );
    }
    let evs: Vec<Value> = events(&dir)
        .into_iter()
        .filter(|e| e["intent"]["tool"] == "trigger-long-running-operation")
        .collect();
    assert_eq!(evs.len(), 1, "recorded once: {evs:#?}");
}
