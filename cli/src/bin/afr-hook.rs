//! `afr-hook`: the thin client of `afr hook`, for the coding-agent CLIs' hook commands.
//!
//! A CLI runs its hook as a new process per event, on the agent's critical path. This binary
//! takes the arguments of `afr` (`afr-hook --dir D hook claude-code [--policy F] …`), reads
//! the hook's input, and hands it with its context (the agent's pid, `TRACEPARENT`, the
//! agent's version) to `afr serve` on `D/afr.sock` (`POST /v1/hook`, `afr_hook::remote`),
//! which runs the hook on the recorder it holds; then prints the answer and exits with its
//! status. It links neither RocksDB nor the policy engine, so it starts in about the time of
//! `true`. When no server answers (or it runs no hooks), it runs `afr` beside it with the same
//! arguments and input, which does all of it in-process.

use std::{
    io::{BufRead, BufReader, Read, Write},
    os::unix::net::UnixStream,
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
    time::Duration,
};

use serde_json::{Value, json};

/// Largest hook input read.
const MAX_INPUT: u64 = 64 << 20;

/// The options of `afr hook` this client passes on (anything else: `afr` decides).
#[derive(Debug, Default)]
struct Args {
    dir: Option<PathBuf>,
    agent: Option<String>,
    policy: Option<PathBuf>,
    fail_open: bool,
    approval_timeout: Option<u64>,
    mcp_wrapped: Vec<String>,
    /// Something this client does not know: `afr` decides.
    other: bool,
}

fn parse(argv: &[String]) -> Args {
    let mut a = Args::default();
    let mut it = argv.iter();
    let mut seen_hook = false;
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next().cloned());
        match name {
            // An option without its value is `afr`'s to refuse (it exits 2, blocking).
            "--dir" => match value() {
                Some(v) => a.dir = Some(PathBuf::from(v)),
                None => a.other = true,
            },
            "--policy" => match value() {
                Some(v) => a.policy = Some(PathBuf::from(v)),
                None => a.other = true,
            },
            "--fail-open" => a.fail_open = true,
            "--approval-timeout" => match value().and_then(|v| v.parse().ok()) {
                Some(s) => a.approval_timeout = Some(s),
                None => a.other = true,
            },
            "--mcp-wrapped" => a.mcp_wrapped.extend(
                value()
                    .unwrap_or_default()
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            ),
            "hook" if !seen_hook => seen_hook = true,
            s if seen_hook && a.agent.is_none() && !s.starts_with('-') => {
                a.agent = Some(s.to_owned());
            }
            _ => a.other = true,
        }
    }
    if !seen_hook || a.agent.is_none() {
        a.other = true;
    }
    a
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_owned()
    } else {
        std::env::current_dir().map_or_else(|_| p.to_owned(), |d| d.join(p))
    }
}

/// The agent CLI's process: the same code as `afr hook`'s (a call's journal entry is named
/// after it), without linking the hook crate.
#[path = "../../../hook/src/pid.rs"]
mod pid;
use pid::agent_pid;

fn env(names: &[&str], max: usize) -> Value {
    names
        .iter()
        .find_map(|v| std::env::var(v).ok())
        .filter(|v| !v.is_empty() && v.len() <= max)
        .map_or(Value::Null, Value::String)
}

/// What asking the server came to.
enum Asked {
    /// Its answer.
    Answer(Value),
    /// No server took the request: `afr` may run the hook itself.
    NoServer,
    /// The request reached the server, which may have acted on it (recorded it, held it for a
    /// decision, claimed a Gemini rank): running the hook again could record it twice or give
    /// an escalated call a fresh wait, so the call is blocked, with why.
    Failed(String),
}

/// POSTs the request to the server (`wait` bounds how long it may take: an escalated call
/// waits for a person).
fn ask(socket: &Path, body: &[u8], wait: Duration) -> Asked {
    let Ok(mut s) = UnixStream::connect(socket) else {
        return Asked::NoServer;
    };
    match exchange(&mut s, body, wait) {
        Ok(Some(v)) => Asked::Answer(v),
        // A server that runs no hooks (404) has done nothing with the call.
        Ok(None) => Asked::NoServer,
        Err(e) => Asked::Failed(e),
    }
}

fn exchange(s: &mut UnixStream, body: &[u8], wait: Duration) -> Result<Option<Value>, String> {
    let io = |e: std::io::Error| format!("afr serve: {e}");
    s.set_write_timeout(Some(Duration::from_secs(30)))
        .map_err(io)?;
    s.set_read_timeout(Some(wait)).map_err(io)?;
    let head = format!(
        "POST /v1/hook HTTP/1.1\r\nHost: afr\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).map_err(io)?;
    s.write_all(body).map_err(io)?;
    let mut r = BufReader::new(s);
    let mut status = String::new();
    r.read_line(&mut status).map_err(io)?;
    match status.split_whitespace().nth(1) {
        Some("200") => {}
        Some("404") => return Ok(None),
        other => return Err(format!("afr serve answered {}", other.unwrap_or("nothing"))),
    }
    let mut len = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).map_err(io)? == 0 {
            return Err("afr serve closed the connection".into());
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse::<usize>().ok();
        }
    }
    let mut b = vec![0; len.ok_or("afr serve sent no Content-Length")?];
    r.read_exact(&mut b).map_err(io)?;
    serde_json::from_slice(&b)
        .map(Some)
        .map_err(|e| format!("afr serve's answer: {e}"))
}

/// Runs `afr` (beside this binary, else on PATH) with the same arguments and input.
fn fall_back(argv: &[String], input: &[u8]) -> ExitCode {
    let afr = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("afr")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("afr"));
    let mut child = match Command::new(&afr).args(argv).stdin(Stdio::piped()).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "afr-hook: blocked: cannot run {} ({e}) to record the call",
                afr.display()
            );
            return ExitCode::from(2);
        }
    };
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(input);
    }
    match child.wait() {
        Ok(s) => ExitCode::from(s.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(2)),
        Err(e) => {
            eprintln!("afr-hook: blocked: {e}");
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin()
        .lock()
        .take(MAX_INPUT)
        .read_to_end(&mut input)
    {
        eprintln!("afr-hook: blocked: standard input: {e}");
        return ExitCode::from(2);
    }
    let a = parse(&argv);
    let text = match std::str::from_utf8(&input) {
        Ok(t) if !a.other => t.to_owned(),
        _ => return fall_back(&argv, &input),
    };
    let dir = absolute(
        &a.dir
            .clone()
            .or_else(|| std::env::var_os("AFR_DIR").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(".afr")),
    );
    let agent = a.agent.clone().unwrap_or_default();
    let policy = a
        .policy
        .clone()
        .or_else(|| std::env::var_os("AFR_POLICY").map(PathBuf::from))
        .map(|p| absolute(&p));
    let version_vars: &[&str] = match agent.as_str() {
        "claude-code" => &["AFR_AGENT_VERSION", "CLAUDE_CODE_VERSION"],
        "codex" => &["AFR_AGENT_VERSION", "CODEX_VERSION"],
        _ => &["AFR_AGENT_VERSION", "GEMINI_CLI_VERSION"],
    };
    let body = json!({
        "agent": agent,
        "policy": policy,
        "fail_open": a.fail_open,
        "approval_timeout_s": a.approval_timeout.unwrap_or(240),
        "mcp_wrapped": a.mcp_wrapped,
        "context": {
            "owner_pid": agent_pid(),
            "traceparent": env(&["TRACEPARENT"], 128),
            "agent_version": env(version_vars, 64),
        },
        "input": text,
    })
    .to_string();
    // Longer than the server's own wait for a decision, shorter than the CLIs' hook timeout
    // that `afr setup` writes (300 s).
    let wait = Duration::from_secs(a.approval_timeout.unwrap_or(240) + 30);
    let answer = match ask(&dir.join("afr.sock"), body.as_bytes(), wait) {
        Asked::Answer(v) => v,
        Asked::NoServer => return fall_back(&argv, &input),
        Asked::Failed(why) => {
            eprintln!("afr-hook: blocked: {why} (the call's hook did not finish)");
            return ExitCode::from(2);
        }
    };
    let field = |k: &str| {
        answer
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (out, err) = (field("stdout"), field("stderr"));
    if !out.is_empty() {
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(out.as_bytes());
        let _ = o.flush();
    }
    if !err.is_empty() {
        eprintln!("{err}");
    }
    let code = answer
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(2);
    ExitCode::from(code)
}
