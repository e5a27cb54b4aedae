//! `afr mcp wrap`: the stdio relay.
//!
//! Two threads relay lines: the caller's thread reads the client (our stdin) and writes the
//! server's stdin; a second reads the server's stdout and writes ours. Every line is forwarded
//! as the exact bytes read; a parsed copy drives the bookkeeping. The server's stderr is
//! inherited. A third thread waits for SIGTERM, SIGINT or SIGHUP.

use std::{
    ffi::OsString,
    io::{BufRead, BufReader, Write},
    path::PathBuf,
    process::{Child, ChildStdin, Command, Stdio},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use serde_json::{Map, Value, json};

use crate::{
    json::parse_strict,
    policy::{Call, Policy, Verdict},
    session::Session,
    sink::Sink,
};

/// Longest JSON-RPC message (one line) relayed, in bytes, by default.
pub const DEFAULT_MAX_LINE: usize = 16 * 1024 * 1024;
/// How long the server may take to exit after its stdin is closed before it is killed.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);

/// JSON-RPC error codes the gateway answers with.
pub mod code {
    /// Not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// A duplicate key, a batch, an over-long line, a `tools/call` without a name.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The call was not recorded, so it was not forwarded (fail closed).
    pub const NOT_RECORDED: i64 = -32001;
    /// The policy denied the call.
    pub const DENIED: i64 = -32002;
    /// The server exited, or the gateway stopped, before the answer came.
    pub const NO_ANSWER: i64 = -32003;
}

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
    /// The recorder directory.
    pub dir: PathBuf,
    /// The policy, if any (without one, every call is allowed and no evaluation is recorded).
    pub policy: Option<Policy>,
    /// Forward calls that could not be recorded (default: refuse them).
    pub fail_open: bool,
    /// The server's command and arguments.
    pub command: Vec<OsString>,
    /// Longest line relayed.
    pub max_line: usize,
}

struct State {
    session: Session,
    sink: Option<Sink>,
    dir: PathBuf,
}

impl State {
    /// Records `event`; opens the sink again if it is missing (`afr serve` may start later).
    fn record(&mut self, event: &Value, phase: &str) -> Result<u64, String> {
        let key = self.session.next_key(phase);
        if self.sink.is_none() {
            self.sink = Some(Sink::open(&self.dir).map_err(|e| e.to_string())?);
        }
        let sink = self.sink.as_mut().ok_or("no recorder")?;
        match sink.record(event, &key) {
            Ok(seq) => Ok(seq),
            Err(first) => {
                // `afr serve` may have stopped (or started): once more on a fresh sink.
                self.sink = None;
                let mut sink = Sink::open(&self.dir).map_err(|e| format!("{first}; {e}"))?;
                let r = sink
                    .record(event, &key)
                    .map_err(|e| format!("{first}; {e}"));
                self.sink = Some(sink);
                r
            }
        }
    }

    /// Records "outcome unknown" for every call still waiting, and answers each with an error.
    fn abandon_pending(&mut self, why: &str, out: &Out) {
        for (id, tool, seq) in self.session.take_pending_calls() {
            let ev = self.session.unknown_outcome_event(&tool, seq, why);
            if let Err(e) = self.record(&ev, "unknown") {
                warn(&format!(
                    "outcome of `{tool}` (unknown: {why}) not recorded: {e}"
                ));
            }
            out.error(&id, code::NO_ANSWER, &format!("afr gateway: {why}"));
        }
    }
}

type Shared = Arc<Mutex<State>>;

fn lock(s: &Shared) -> MutexGuard<'_, State> {
    // A panic while holding the lock leaves consistent-enough state to record outcomes.
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn warn(m: &str) {
    eprintln!("afr mcp wrap: {m}");
}

/// Our stdout, shared by the relay and the gateway's own answers; one whole line at a time.
#[derive(Clone)]
struct Out(Arc<Mutex<std::io::Stdout>>);

impl Out {
    fn line(&self, bytes: &[u8]) {
        let mut o = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // The client went away: nothing to answer to; the relay ends on its own EOF.
        let _ = o.write_all(bytes).and_then(|()| o.flush());
    }

    fn error(&self, id: &Value, code: i64, message: &str) {
        let m = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
        let mut b = m.to_string().into_bytes();
        b.push(b'\n');
        self.line(&b);
    }
}

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
    let sink = match Sink::open(&opts.dir) {
        Ok(s) => Some(s),
        Err(e) => {
            warn(&format!(
                "recorder unavailable ({e}); tool calls {}",
                if opts.fail_open {
                    "will be forwarded unrecorded (--fail-open)"
                } else {
                    "will be refused until it is"
                }
            ));
            None
        }
    };
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
        session: Session::new(command_line),
        sink,
        dir: opts.dir.clone(),
    }));
    let out = Out(Arc::new(Mutex::new(std::io::stdout())));
    let child = Arc::new(Mutex::new(child));

    {
        let (state, out, child, cap) = (state.clone(), out.clone(), child.clone(), opts.max_line);
        std::thread::spawn(move || server_to_client(from_server, cap, &state, &out, &child));
    }
    {
        let (state, out, child) = (state.clone(), out.clone(), child.clone());
        std::thread::spawn(move || on_signal(&state, &out, &child));
    }
    client_to_server(to_server, &opts, &state, &out);
    // The client closed our stdin: the server's stdin was closed with it. The relay thread
    // exits the process once the server's stdout ends; kill the server if it lingers.
    std::thread::sleep(EXIT_GRACE);
    let mut c = child
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    warn("the server did not exit after its stdin was closed; killing it");
    let _ = c.kill();
    drop(c);
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn client_to_server(mut to_server: ChildStdin, opts: &WrapOptions, state: &Shared, out: &Out) {
    let mut stdin = BufReader::new(std::io::stdin().lock());
    let mut buf = Vec::new();
    loop {
        match read_line(&mut stdin, opts.max_line, &mut buf) {
            Ok(Line::Data) => {}
            Ok(Line::TooLong) => {
                warn(&format!(
                    "refused a client message over {} bytes",
                    opts.max_line
                ));
                out.error(
                    &Value::Null,
                    code::INVALID_REQUEST,
                    &format!(
                        "afr gateway: message over {} bytes (line cap); not forwarded",
                        opts.max_line
                    ),
                );
                continue;
            }
            Ok(Line::Eof) | Err(_) => return,
        }
        if check_client_line(&buf, opts, state, out)
            && to_server
                .write_all(&buf)
                .and_then(|()| to_server.flush())
                .is_err()
        {
            return;
        }
    }
}

/// Bookkeeping, recording and policy for one client line; whether to forward it.
fn check_client_line(line: &[u8], opts: &WrapOptions, state: &Shared, out: &Out) -> bool {
    let policy = opts.policy.as_ref();
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
    let (Some(method), Some(id)) = (msg.get("method").and_then(Value::as_str), msg.get("id"))
    else {
        return true; // a notification or a response to the server: relayed untouched
    };
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let mut st = lock(state);
    if method != "tools/call" {
        st.session.on_request(id, method, &params);
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
    let args = params.get("arguments").cloned().unwrap_or(Value::Null);
    let evaluation = policy.map(|p| {
        p.evaluate(&Call {
            tool,
            args: &args,
            server_name: st.session.server_name(),
            command_line: &st.session.command_line,
        })
    });
    let event = st
        .session
        .intent_event(tool, &args, &params, evaluation.as_ref());
    if let Some(e) = evaluation.as_ref().filter(|e| e.verdict == Verdict::Deny) {
        if let Err(err) = st.record(&event, "denied") {
            warn(&format!("denied call of `{tool}` not recorded: {err}"));
        }
        let reason = e.reason.as_deref().unwrap_or("no reason given");
        out.error(
            id,
            code::DENIED,
            &format!(
                "afr gateway: denied by policy rule `{}`: {reason}",
                e.guardrail
            ),
        );
        return false;
    }
    let seq = match st.record(&event, "intent") {
        Ok(seq) => Some(seq),
        Err(e) if opts.fail_open => {
            warn(&format!(
                "call of `{tool}` forwarded unrecorded (--fail-open): {e}"
            ));
            None
        }
        Err(e) => {
            warn(&format!(
                "call of `{tool}` refused: it could not be recorded: {e}"
            ));
            out.error(
                id,
                code::NOT_RECORDED,
                &format!(
                    "afr gateway: the call could not be recorded, so it was not forwarded: {e}"
                ),
            );
            return false;
        }
    };
    st.session.on_call_forwarded(id, tool, seq);
    true
}

fn server_to_client(
    from_server: std::process::ChildStdout,
    cap: usize,
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
            on_server_response(&msg, state);
        }
        out.line(&buf);
    }
    let mut st = lock(state);
    st.abandon_pending("the server exited before answering", out);
    drop(st);
    let code = {
        let mut c = child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        c.wait().ok().and_then(|s| s.code()).unwrap_or(1)
    };
    std::process::exit(code);
}

fn on_server_response(msg: &Map<String, Value>, state: &Shared) {
    let mut st = lock(state);
    if let Some((tool, seq)) = st.session.on_response(msg) {
        let ev = st.session.outcome_event(&tool, seq, msg);
        // The call has run: its answer is relayed even if its outcome cannot be recorded.
        if let Err(e) = st.record(&ev, "outcome") {
            warn(&format!("outcome of `{tool}` not recorded: {e}"));
        }
    }
}

fn on_signal(state: &Shared, out: &Out, child: &Arc<Mutex<Child>>) {
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
    let mut st = lock(state);
    st.abandon_pending(&format!("the gateway was stopped by signal {signo}"), out);
    let mut c = child
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
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
