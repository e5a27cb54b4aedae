//! `afr mcp wrap`: the stdio relay.
//!
//! Three threads relay lines: the caller's thread reads the client (our stdin) and journals
//! each call; a second writes the server's stdin (the first does when nothing is queued); a
//! third reads the server's stdout and writes ours. Every line is forwarded as the exact bytes read; a parsed copy drives the bookkeeping.
//! The server's stderr is inherited. A fourth thread waits for SIGTERM, SIGINT or SIGHUP.

use std::{
    collections::{HashMap, HashSet},
    ffi::OsString,
    io::{BufRead, BufReader, BufWriter, Write},
    process::{Child, ChildStdin, Command, Stdio},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicUsize, Ordering},
        mpsc,
    },
    time::Duration,
};

use serde_json::{Map, Value};

pub use crate::gate::code;
use crate::{
    approvals::Ruling,
    gate::{
        Admission, CallRecord, ELICITATION_ID_PREFIX, Forward, Gate, Held, ToolCall,
        elicitation_request, elicitation_ruling, error_message, parse_client_message,
    },
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
    pub gate: Arc<Gate>,
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
    /// Held calls by their request's id key: where a `notifications/cancelled` for one goes.
    held: HashMap<String, mpsc::Sender<Ruling>>,
    /// The id of each forwarded call as the client spelled it, by its key (the gateway's own
    /// answers to it carry that spelling).
    ids: HashMap<String, Value>,
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
    for (key, record) in st.session.take_pending_calls() {
        let ev = st.session.unknown_outcome_event(&record, why);
        if let Err(e) = gate.record(&record.key, &ev) {
            warn(&format!(
                "outcome of `{}` (unknown: {why}) not recorded: {e}",
                record.event.intent.tool
            ));
        }
        let id = st.ids.remove(&key).unwrap_or(Value::Null);
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
        self.json(&error_message(id, code, message));
    }
}

/// What goes to the server, in order.
enum ToServer {
    /// Relay as is.
    Line(Vec<u8>),
    /// A `tools/call`: relay once its journal entry is durable, else answer the client's
    /// refusal.
    Call {
        line: Vec<u8>,
        fwd: Forward,
        id: Value,
        tool: String,
    },
}

/// The server's stdin, written by the writer thread, or by the client reader itself when nothing
/// is queued (one thread hop less for a call made alone).
struct ServerPipe {
    /// `None` once the writer thread has closed it.
    w: Mutex<Option<BufWriter<ChildStdin>>>,
    /// Messages sent to the writer thread and not written yet (changed under `w`'s lock by the
    /// writer, so that holding the lock with `queued == 0` means every earlier message is
    /// written and flushed).
    queued: AtomicUsize,
}

/// Writes one message to the server (a call once its journal entry is durable, else its
/// refusal goes to the client); `false` once the server's stdin is closed.
fn deliver(
    w: &mut BufWriter<ChildStdin>,
    msg: ToServer,
    gate: &Gate,
    state: &Shared,
    out: &Out,
) -> bool {
    let line = match msg {
        ToServer::Line(line) => line,
        ToServer::Call {
            line,
            fwd,
            id,
            tool,
        } => match gate.settle_intent(&tool, &fwd.ticket) {
            Ok(()) => {
                let mut st = lock(state);
                st.ids.insert(id_key(&id), id.clone());
                st.session.on_call_forwarded(id_key(&id), fwd.record);
                line
            }
            Err(r) => {
                out.error(&id, r.code, &r.message);
                return true;
            }
        },
    };
    w.write_all(&line).is_ok()
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
///
/// Three threads, so that recording never stalls reading: the caller's reads the client and
/// journals each call; a second writes to the server in order, each call once its journal
/// entry is durable (calls in flight together share one sync; a call made alone, with nothing
/// queued before it, is synced and written by the caller's thread); a third reads the server, hands
/// each call's completed event to the recorder and writes the answer to the client itself (one
/// write per line, no hop to another thread on the way back). A fourth waits for SIGTERM,
/// SIGINT or SIGHUP.
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
        held: HashMap::new(),
        ids: HashMap::new(),
    }));
    let out = Out(Arc::new(Mutex::new(std::io::stdout())));
    let child = Arc::new(Mutex::new(child));
    let gate = opts.gate;
    let (server_tx, server_rx) = mpsc::channel::<ToServer>();
    let pipe = Arc::new(ServerPipe {
        w: Mutex::new(Some(BufWriter::new(to_server))),
        queued: AtomicUsize::new(0),
    });
    {
        let (gate, state, out, pipe) = (gate.clone(), state.clone(), out.clone(), pipe.clone());
        std::thread::spawn(move || write_server(&pipe, &server_rx, &gate, &state, &out));
    }
    {
        let (gate, state, out, child) = (gate.clone(), state.clone(), out.clone(), child.clone());
        let cap = opts.max_line;
        std::thread::spawn(move || read_server(from_server, cap, &gate, &state, &out, &child));
    }
    {
        let (gate, state, out, child) = (gate.clone(), state.clone(), out.clone(), child.clone());
        std::thread::spawn(move || on_signal(&gate, &state, &out, &child));
    }
    let relay = Relay {
        gate,
        state,
        out,
        to_server: server_tx,
        pipe,
        max_line: opts.max_line,
    };
    relay.client_to_server();
    // The client closed our stdin: held calls can no longer be answered; once the queue to
    // the server is drained its stdin closes.
    relay.gate.abandon_held();
    drop(relay);
    // The server reader exits the process once the server's stdout ends; kill the server if
    // it lingers.
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
    to_server: mpsc::Sender<ToServer>,
    pipe: Arc<ServerPipe>,
    max_line: usize,
}

/// What to do with one client line.
enum Action {
    Relay,
    Call { fwd: Forward, tool: String },
    Done,
}

impl Relay {
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
            let (action, id) = self.check_client_line(&buf);
            let msg = match action {
                Action::Relay => ToServer::Line(buf.clone()),
                Action::Call { fwd, tool } => ToServer::Call {
                    line: buf.clone(),
                    fwd,
                    id,
                    tool,
                },
                Action::Done => continue,
            };
            // Alone (no other line waiting to be read): written from this thread if the
            // writer has nothing queued; else queued, so that its sync covers the others too.
            if !self.send(msg, stdin.buffer().is_empty()) {
                return;
            }
        }
    }

    /// Hands `msg` to the server, in order: written here and now when `inline` and nothing
    /// is queued for the writer thread, else queued for it. `false` once the server is gone.
    fn send(&self, msg: ToServer, inline: bool) -> bool {
        let pipe = &self.pipe;
        if inline && pipe.queued.load(Ordering::Acquire) == 0 {
            let mut w = lock(&pipe.w);
            if pipe.queued.load(Ordering::Acquire) == 0 {
                let Some(w) = w.as_mut() else { return false };
                return deliver(w, msg, &self.gate, &self.state, &self.out) && w.flush().is_ok();
            }
        }
        pipe.queued.fetch_add(1, Ordering::AcqRel);
        self.to_server.send(msg).is_ok()
    }

    /// Bookkeeping, recording and policy for one client line: what to do with it, and its
    /// JSON-RPC id.
    fn check_client_line(&self, line: &[u8]) -> (Action, Value) {
        let out = &self.out;
        if line.iter().all(u8::is_ascii_whitespace) {
            return (Action::Relay, Value::Null);
        }
        let msg = match parse_client_message(line) {
            Ok(m) => m,
            Err((id, r)) => {
                out.error(&id, r.code, &r.message);
                return (Action::Done, Value::Null);
            }
        };
        let Some(id) = msg.get("id").cloned() else {
            if msg.get("method").and_then(Value::as_str) == Some("tools/call") {
                // A call sent as a notification would run unrecorded and unchecked.
                warn("refused a tools/call without an id");
                out.error(
                    &Value::Null,
                    code::INVALID_REQUEST,
                    "afr gateway: tools/call without an id; not forwarded",
                );
                return (Action::Done, Value::Null);
            }
            if msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
                && self.on_cancelled(&msg)
            {
                return (Action::Done, Value::Null);
            }
            return (Action::Relay, Value::Null); // a notification: relayed untouched
        };
        let Some(method) = msg.get("method").and_then(Value::as_str) else {
            // A response: to one of the gateway's own elicitations, or to the server.
            if self.on_elicitation_answer(&id, &msg) {
                return (Action::Done, id);
            }
            return (Action::Relay, id);
        };
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let mut st = lock(&self.state);
        if method != "tools/call" {
            st.session.on_request(id_key(&id), method, &params);
            return (Action::Relay, id);
        }
        let call = match ToolCall::from_params(params) {
            Ok(c) => c,
            Err(r) => {
                out.error(&id, r.code, &r.message);
                return (Action::Done, id);
            }
        };
        let tool = call.tool.clone();
        match self.gate.admit(&st.session, call) {
            Admission::Forward(fwd) => (Action::Call { fwd, tool }, id),
            Admission::Refuse(r) => {
                out.error(&id, r.code, &r.message);
                (Action::Done, id)
            }
            Admission::Hold(held) => {
                let elicit = st.session.client_elicits() && held.elicitable();
                drop(st);
                let (relay, line) = (self.clone(), line.to_vec());
                let hid = id.clone();
                std::thread::spawn(move || relay.finish_held(*held, elicit, &hid, line));
                (Action::Done, id)
            }
        }
    }

    /// The client's `notifications/cancelled`: whether it stops here. For a call held for a
    /// decision it does: the call must never run, and the server never saw that request. For a
    /// call already forwarded it is relayed (the server is told to stop), and the call's event
    /// is recorded now, its outcome unknown, not at exit as "the server exited"; no answer to
    /// it follows.
    fn on_cancelled(&self, msg: &Map<String, Value>) -> bool {
        let params = msg.get("params");
        let Some(rid) = params.and_then(|p| p.get("requestId")) else {
            return false;
        };
        let reason = params.and_then(|p| p.get("reason")).and_then(Value::as_str);
        let key = id_key(rid);
        let mut st = lock(&self.state);
        if let Some(tx) = st.held.remove(&key) {
            let _ = tx.send(crate::approvals::cancelled_by_client(reason));
            return true;
        }
        if let Some(record) = st.session.forget(&key) {
            st.ids.remove(&key);
            let reason = reason.map_or(String::new(), |r| format!(": {r}"));
            let event = st.session.unknown_outcome_event(
                &record,
                &format!(
                    "the client cancelled the call after it was forwarded{reason}; the server was told to stop"
                ),
            );
            drop(st);
            self.gate.complete(CallRecord {
                key: record.key,
                event: Box::new(event),
            });
        }
        false
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
    fn finish_held(&self, held: Held, elicit: bool, id: &Value, line: Vec<u8>) {
        let (tx, rx) = mpsc::channel();
        let ask = elicitation_request(&held);
        let ask_id = ask["id"].as_str().unwrap_or_default().to_owned();
        // Where the client's answer (elicitation) or its cancellation of the call goes.
        lock(&self.state).held.insert(id_key(id), tx.clone());
        if elicit {
            let mut st = lock(&self.state);
            st.asked.insert(ask_id.clone());
            st.waiting.insert(ask_id.clone(), tx);
            drop(st);
            self.out.json(&ask);
        }
        let ruling = self.gate.wait(&held, Some(&rx));
        {
            let mut st = lock(&self.state);
            st.waiting.remove(&ask_id);
            st.held.remove(&id_key(id));
        }
        let cancelled = crate::approvals::is_cancelled_by_client(&ruling);
        let tool = held.call.tool.clone();
        let st = lock(&self.state);
        match self.gate.conclude(&st.session, held, &ruling) {
            Ok(fwd) => {
                drop(st);
                let call = ToServer::Call {
                    line,
                    fwd,
                    id: id.clone(),
                    tool,
                };
                if !self.send(call, false) {
                    warn("an approved call could not be forwarded: the server is gone");
                }
            }
            // A cancelled request gets no response (the client stopped waiting for one).
            Err(_) if cancelled => drop(st),
            Err(r) => {
                drop(st);
                self.out.error(id, r.code, &r.message);
            }
        }
    }
}

/// Writes what is queued for the server, in order: each call once its intent is durable.
fn write_server(
    pipe: &ServerPipe,
    rx: &mpsc::Receiver<ToServer>,
    gate: &Gate,
    state: &Shared,
    out: &Out,
) {
    while let Ok(first) = rx.recv() {
        let mut guard = lock(&pipe.w);
        let Some(w) = guard.as_mut() else { return };
        let mut next = Some(first);
        let mut ok = true;
        while let Some(msg) = next {
            ok = ok && deliver(w, msg, gate, state, out);
            pipe.queued.fetch_sub(1, Ordering::AcqRel);
            next = rx.try_recv().ok();
        }
        // Nothing more queued: let the server see what was written.
        if !ok || w.flush().is_err() {
            *guard = None;
            return;
        }
    }
    // Every sender is gone: the client closed our stdin. Closing ours closes the server's.
    *lock(&pipe.w) = None;
}

/// Reads the server and writes each line to the client, in order: a call's answer once its
/// outcome is handed to the recorder. Exits the process when the server's stdout has ended.
fn read_server(
    from_server: std::process::ChildStdout,
    cap: usize,
    gate: &Gate,
    state: &Shared,
    out: &Out,
    child: &Arc<Mutex<Child>>,
) -> ! {
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
        let mut filtered = None;
        if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(&buf)
            && !m.contains_key("method")
            && let Some(id) = m.get("id")
        {
            let mut st = lock(state);
            st.ids.remove(&id_key(id));
            // A tools/list answer leaves out what the policy denies outright (when it filters).
            if st.session.awaits_tools_list(&id_key(id))
                && let Some((line, ev)) = gate.filter_tools_list(&st.session, &m)
            {
                gate.record_filtering(&ev);
                filtered = Some(line);
            }
            if let Some(record) = st.session.on_response(&id_key(id), &m) {
                let event = st.session.outcome_event(&record, &m);
                drop(st);
                // The call's event is handed to the recorder before the answer is relayed,
                // which does not wait for it to be written (Gate::complete).
                gate.complete(CallRecord {
                    key: record.key,
                    event: Box::new(event),
                });
            }
        }
        // One write of the whole line (the client may wake on every write it sees).
        out.line(filtered.as_deref().unwrap_or(&buf));
    }
    abandon_pending(gate, state, "the server exited before answering", out);
    gate.close_journal();
    let code = lock(child).wait().ok().and_then(|s| s.code()).unwrap_or(1);
    std::process::exit(code);
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
    gate.close_journal();
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
