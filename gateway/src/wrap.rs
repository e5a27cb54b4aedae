//! `afr mcp wrap`: the stdio relay.
//!
//! Two threads relay lines: the caller's thread reads the client (our stdin) and writes the
//! server's stdin; a second reads the server's stdout and writes ours. Every line is forwarded
//! as the exact bytes read; a parsed copy drives the bookkeeping. The server's stderr is
//! inherited. A third thread waits for SIGTERM, SIGINT or SIGHUP.

use std::{
    collections::{HashMap, HashSet},
    ffi::OsString,
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, Command, Stdio},
    sync::{Arc, Mutex, MutexGuard, mpsc},
    time::Duration,
};

use serde_json::{Map, Value, json};

pub use crate::gate::code;
use crate::{
    approvals::Ruling,
    gate::{
        Admission, ELICITATION_ID_PREFIX, Gate, Held, ToolCall, elicitation_request,
        elicitation_ruling,
    },
    json::parse_strict,
    session::{Session, id_key},
};

/// Longest JSON-RPC message (one line) relayed, in bytes, by default.
pub const DEFAULT_MAX_LINE: usize = 16 * 1024 * 1024;
/// How long the server may take to exit after its stdin is closed before it is killed.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Errors starting the gateway.
#[derive(Debug, thiserror::Error)]
pub enum WrapError {
    /// No server command was given.
    #[error("no server command (afr mcp wrap -- <command...>)")]
    NoCommand,
    /// The server could not be started.
    #[error("cannot start {command}: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Settings of `afr mcp wrap`.
#[derive(Debug)]
pub struct WrapOptions {
    /// The recorder, policy and approval settings.
    pub gate: Gate,
    /// The server's command and arguments.
    pub command: Vec<OsString>,
    /// Longest line relayed.
    pub max_line: usize,
}

/// The session, and the elicitations the gateway itself asked the client.
struct State {
    session: Session,
    /// Ids of every elicitation the gateway sent (their answers are never forwarded).
    asked: HashSet<String>,
    /// Those still waited for, and where their answer goes.
    waiting: HashMap<String, mpsc::Sender<Ruling>>,
}

type Shared = Arc<Mutex<State>>;

fn lock<T>(s: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves consistent-enough state to record outcomes.
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn warn(m: &str) {
    eprintln!("afr mcp wrap: {m}");
}

/// Records "outcome unknown" for every call still waiting, and answers each with an error.
fn abandon_pending(gate: &Gate, state: &Shared, why: &str, out: &Out) {
    let mut st = lock(state);
    for (key, tool, seq) in st.session.take_pending_calls() {
        let ev = st.session.unknown_outcome_event(&tool, seq, why);
        if let Err(e) = gate.record(&ev, "unknown") {
            warn(&format!(
                "outcome of `{tool}` (unknown: {why}) not recorded: {e}"
            ));
        }
        let id = serde_json::from_str(&key).unwrap_or(Value::Null);
        out.error(&id, code::NO_ANSWER, &format!("afr gateway: {why}"));
    }
    gate.abandon_held();
}

/// Our stdout, shared by the relay and the gateway's own messages; one whole line at a time.
#[derive(Clone)]
struct Out(Arc<Mutex<std::io::Stdout>>);

impl Out {
    fn line(&self, bytes: &[u8]) {
        let mut o = lock(&self.0);
        // The client went away: nothing to answer to; the relay ends on its own EOF.
        let _ = o.write_all(bytes).and_then(|()| o.flush());
    }

    fn json(&self, v: &Value) {
        let mut b = v.to_string().into_bytes();
        b.push(b'\n');
        self.line(&b);
    }

    fn error(&self, id: &Value, code: i64, message: &str) {
        self.json(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }
}

/// The server's stdin, shared by the relay and the threads of held calls.
type ToServer = Arc<Mutex<ChildStdin>>;

/// One line read with a cap.
enum Line {
    /// A whole line (with its `\n`, unless it ended the stream).
    Data,
    /// Longer than the cap; the rest of it was skipped.
    TooLong,
    /// End of stream.
    Eof,
}

fn read_line(r: &mut impl BufRead, cap: usize, buf: &mut Vec<u8>) -> std::io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            return Ok(if too_long {
                Line::TooLong
            } else if buf.is_empty() {
                Line::Eof
            } else {
                Line::Data
            });
        }
        let (n, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + n > cap + 1 {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..n]);
            }
        }
        r.consume(n);
        if done {
            return Ok(if too_long { Line::TooLong } else { Line::Data });
        }
    }
}

/// Runs the gateway until the server exits; returns the exit code to use.
pub fn run(opts: WrapOptions) -> Result<i32, WrapError> {
    let (program, args) = opts.command.split_first().ok_or(WrapError::NoCommand)?;
    let command_line = opts
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|source| WrapError::Spawn {
            command: command_line.clone(),
            source,
        })?;
    let (Some(to_server), Some(from_server)) = (child.stdin.take(), child.stdout.take()) else {
        // Both were requested as pipes just above.
        return Err(WrapError::Spawn {
            command: command_line,
            source: std::io::Error::other("no pipes to the server"),
        });
    };
    let state: Shared = Arc::new(Mutex::new(State {
        session: Session::new("stdio", command_line),
        asked: HashSet::new(),
        waiting: HashMap::new(),
    }));
    let out = Out(Arc::new(Mutex::new(std::io::stdout())));
    let child = Arc::new(Mutex::new(child));
    let to_server: ToServer = Arc::new(Mutex::new(to_server));
    let gate = Arc::new(opts.gate);

    {
        let (gate, state, out, child, cap) = (
            gate.clone(),
            state.clone(),
            out.clone(),
            child.clone(),
            opts.max_line,
        );
        std::thread::spawn(move || server_to_client(from_server, cap, &gate, &state, &out, &child));
    }
    {
        let (gate, state, out, child) = (gate.clone(), state.clone(), out.clone(), child.clone());
        std::thread::spawn(move || on_signal(&gate, &state, &out, &child));
    }
    let relay = Relay {
        gate,
        state,
        out,
        to_server,
        max_line: opts.max_line,
    };
    relay.client_to_server();
    // The client closed our stdin: close the server's (held calls can no longer be answered).
    relay.gate.abandon_held();
    drop(relay);
    // The relay thread exits the process once the server's stdout ends; kill the server if it
    // lingers.
    std::thread::sleep(EXIT_GRACE);
    let mut c = lock(&child);
    warn("the server did not exit after its stdin was closed; killing it");
    let _ = c.kill();
    drop(c);
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The client-to-server direction, and what held calls need to finish.
#[derive(Clone)]
struct Relay {
    gate: Arc<Gate>,
    state: Shared,
    out: Out,
    to_server: ToServer,
    max_line: usize,
}

impl Relay {
    fn send(&self, line: &[u8]) -> bool {
        let mut w = lock(&self.to_server);
        w.write_all(line).and_then(|()| w.flush()).is_ok()
    }

    fn client_to_server(&self) {
        let mut stdin = BufReader::new(std::io::stdin().lock());
        let mut buf = Vec::new();
        loop {
            match read_line(&mut stdin, self.max_line, &mut buf) {
                Ok(Line::Data) => {}
                Ok(Line::TooLong) => {
                    warn(&format!(
                        "refused a client message over {} bytes",
                        self.max_line
                    ));
                    self.out.error(
                        &Value::Null,
                        code::INVALID_REQUEST,
                        &format!(
                            "afr gateway: message over {} bytes (line cap); not forwarded",
                            self.max_line
                        ),
                    );
                    continue;
                }
                Ok(Line::Eof) | Err(_) => return,
            }
            if self.check_client_line(&buf) && !self.send(&buf) {
                return;
            }
        }
    }

    /// Bookkeeping, recording and policy for one client line; whether to forward it now.
    fn check_client_line(&self, line: &[u8]) -> bool {
        let out = &self.out;
        if line.iter().all(u8::is_ascii_whitespace) {
            return true;
        }
        let msg = match parse_strict(line) {
            Ok(Value::Object(m)) => m,
            Ok(Value::Array(_)) => {
                out.error(
                    &Value::Null,
                    code::INVALID_REQUEST,
                    "afr gateway: JSON-RPC batches are not supported; not forwarded",
                );
                return false;
            }
            Ok(_) => {
                out.error(
                    &Value::Null,
                    code::INVALID_REQUEST,
                    "afr gateway: not a JSON-RPC message; not forwarded",
                );
                return false;
            }
            Err(e) => {
                let lax: Option<Value> = serde_json::from_slice(line).ok();
                let id = lax
                    .as_ref()
                    .and_then(|v| v.get("id"))
                    .cloned()
                    .unwrap_or(Value::Null);
                let (code, what) = if lax.is_some() {
                    (code::INVALID_REQUEST, "refused")
                } else {
                    (code::PARSE_ERROR, "not JSON")
                };
                warn(&format!("client message {what}: {e}"));
                out.error(
                    &id,
                    code,
                    &format!("afr gateway: {what}: {e}; not forwarded"),
                );
                return false;
            }
        };
        let Some(id) = msg.get("id") else {
            return true; // a notification: relayed untouched
        };
        let Some(method) = msg.get("method").and_then(Value::as_str) else {
            // A response: to one of the gateway's own elicitations, or to the server.
            return !self.on_elicitation_answer(id, &msg);
        };
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let mut st = lock(&self.state);
        if method != "tools/call" {
            st.session.on_request(id_key(id), method, &params);
            return true;
        }
        let Some(tool) = params
            .get("name")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        else {
            out.error(
                id,
                code::INVALID_REQUEST,
                "afr gateway: tools/call without a tool name; not forwarded",
            );
            return false;
        };
        let call = ToolCall {
            tool: tool.to_owned(),
            args: params.get("arguments").cloned().unwrap_or(Value::Null),
            params: params.clone(),
        };
        match self.gate.admit(&st.session, call) {
            Admission::Forward(seq) => {
                st.session.on_call_forwarded(id_key(id), tool, seq);
                true
            }
            Admission::Refuse(r) => {
                out.error(id, r.code, &r.message);
                false
            }
            Admission::Hold(held) => {
                let elicit = st.session.client_elicits();
                drop(st);
                let (relay, id, line) = (self.clone(), id.clone(), line.to_vec());
                std::thread::spawn(move || relay.finish_held(*held, elicit, &id, &line));
                false
            }
        }
    }

    /// Whether `msg` answered one of the gateway's elicitations (then it is not forwarded).
    fn on_elicitation_answer(&self, id: &Value, msg: &Map<String, Value>) -> bool {
        let Some(key) = id.as_str().filter(|k| k.starts_with(ELICITATION_ID_PREFIX)) else {
            return false;
        };
        let mut st = lock(&self.state);
        if !st.asked.contains(key) {
            return false;
        }
        if let Some(tx) = st.waiting.remove(key) {
            let _ = tx.send(elicitation_ruling(msg, st.session.client_name()));
        }
        true
    }

    /// Waits for the decision on a held call, records it, and forwards or refuses the call.
    fn finish_held(&self, held: Held, elicit: bool, id: &Value, line: &[u8]) {
        let (tx, rx) = mpsc::channel();
        let ask = elicitation_request(&held);
        let ask_id = ask["id"].as_str().unwrap_or_default().to_owned();
        if elicit {
            let mut st = lock(&self.state);
            st.asked.insert(ask_id.clone());
            st.waiting.insert(ask_id.clone(), tx);
            drop(st);
            self.out.json(&ask);
        }
        let ruling = self.gate.wait(&held, elicit.then_some(&rx));
        lock(&self.state).waiting.remove(&ask_id);
        let tool = held.call.tool.clone();
        let mut st = lock(&self.state);
        match self.gate.conclude(&st.session, held, &ruling) {
            Ok(seq) => {
                st.session.on_call_forwarded(id_key(id), &tool, seq);
                drop(st);
                if !self.send(line) {
                    warn(&format!("approved call of `{tool}`: the server is gone"));
                }
            }
            Err(r) => {
                drop(st);
                self.out.error(id, r.code, &r.message);
            }
        }
    }
}

fn server_to_client(
    from_server: std::process::ChildStdout,
    cap: usize,
    gate: &Gate,
    state: &Shared,
    out: &Out,
    child: &Arc<Mutex<Child>>,
) {
    let mut r = BufReader::new(from_server);
    let mut buf = Vec::new();
    loop {
        match read_line(&mut r, cap, &mut buf) {
            Ok(Line::Data) => {}
            Ok(Line::TooLong) => {
                warn(&format!(
                    "dropped a server message over {cap} bytes (line cap)"
                ));
                continue;
            }
            Ok(Line::Eof) | Err(_) => break,
        }
        if let Ok(Value::Object(msg)) = serde_json::from_slice::<Value>(&buf)
            && !msg.contains_key("method")
        {
            on_server_response(&msg, gate, state);
        }
        out.line(&buf);
    }
    abandon_pending(gate, state, "the server exited before answering", out);
    let code = lock(child).wait().ok().and_then(|s| s.code()).unwrap_or(1);
    std::process::exit(code);
}

fn on_server_response(msg: &Map<String, Value>, gate: &Gate, state: &Shared) {
    let Some(id) = msg.get("id") else { return };
    let mut st = lock(state);
    if let Some((tool, seq)) = st.session.on_response(&id_key(id), msg) {
        let ev = st.session.outcome_event(&tool, seq, msg);
        // The call has run: its answer is relayed even if its outcome cannot be recorded.
        if let Err(e) = gate.record(&ev, "outcome") {
            warn(&format!("outcome of `{tool}` not recorded: {e}"));
        }
    }
}

fn on_signal(gate: &Gate, state: &Shared, out: &Out, child: &Arc<Mutex<Child>>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    else {
        return;
    };
    let signo = rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            return None;
        };
        Some(tokio::select! {
            _ = term.recv() => 15,
            _ = int.recv() => 2,
            _ = hup.recv() => 1,
        })
    });
    let Some(signo) = signo else { return };
    abandon_pending(
        gate,
        state,
        &format!("the gateway was stopped by signal {signo}"),
        out,
    );
    let mut c = lock(child);
    let _ = c.kill();
    let _ = c.wait();
    std::process::exit(128 + signo);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn lines(input: &[u8], cap: usize) -> Vec<Result<Vec<u8>, &'static str>> {
        // A tiny buffer, so that lines span several fills.
        let mut r = BufReader::with_capacity(3, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            match read_line(&mut r, cap, &mut buf).unwrap() {
                Line::Data => out.push(Ok(buf.clone())),
                Line::TooLong => out.push(Err("too long")),
                Line::Eof => return out,
            }
        }
    }

    #[test]
    fn lines_keep_their_bytes_and_over_long_ones_are_skipped_whole() {
        let got = lines(b"{\"a\":1}\r\nxxxxxxxxxxxx\n{}\nlast", 8);
        assert_eq!(
            got,
            vec![
                Ok(b"{\"a\":1}\r\n".to_vec()),
                Err("too long"),
                Ok(b"{}\n".to_vec()),
                Ok(b"last".to_vec()),
            ]
        );
        // Exactly the cap (plus its newline) passes.
        assert_eq!(lines(b"12345678\n", 8), vec![Ok(b"12345678\n".to_vec())]);
        assert_eq!(lines(b"123456789\n", 8), vec![Err("too long")]);
    }
}
