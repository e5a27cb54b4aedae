//! `afr bench hook`: what the hook `afr setup` configures (the thin client `afr-hook`, else
//! `afr hook`) adds to each tool call of a coding agent, spawn to exit, beside `afr hook`
//! in-process and a no-op hook, in the same run.
//!
//! A CLI runs its hook as a new process per event, on the agent's critical path: once before
//! the tool runs (`PreToolUse`: the policy, the journal entry synced) and once after
//! (`PostToolUse`: the complete event recorded durably through `afr serve`). The bench runs a
//! real `afr serve` on a fresh store with a policy file, then for each call spawns
//! `afr-hook --dir D hook claude-code --policy F` twice (pre, then post) with the call's JSON
//! on standard input, waiting for each to exit, exactly as Claude Code does; and, interleaved
//! call by call, `afr hook` the same way, and the no-op hook `/bin/true` (the cost of spawning
//! any hook). Per call it reports
//! the time of both hooks together; the added cost is the difference of the percentiles.
//! At the end the store must hold one event per call.

use std::{
    io::Write,
    path::PathBuf,
    process::{Command, ExitCode, Stdio},
    time::Instant,
};

use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use serde::Serialize;
use serde_json::json;

use crate::{bench::percentile, serve_bench::Server};

/// Largest P99 the hooks (pre + post) may add to a tool call, in milliseconds.
pub const TARGET_P99_ADDED_MS: f64 = 10.0;

/// Options of `afr bench hook`.
#[derive(Args, Debug)]
pub struct HookBench {
    /// Tool calls measured (each runs a pre- and a post-tool hook).
    #[arg(long, default_value_t = 500)]
    calls: u64,
    /// Calls made before measuring.
    #[arg(long, default_value_t = 30)]
    warmup: u64,
    /// The `afr` program (default: the one beside this program).
    #[arg(long)]
    afr: Option<PathBuf>,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, Serialize)]
struct Side {
    median_ms: f64,
    p99_ms: f64,
}

fn side(mut ms: Vec<f64>) -> Side {
    ms.sort_by(f64::total_cmp);
    let r = |x: f64| (x * 1000.0).round() / 1000.0;
    Side {
        median_ms: r(percentile(&ms, 0.5)),
        p99_ms: r(percentile(&ms, 0.99)),
    }
}

/// Runs `program args` with `input` on standard input; its exit status must be 0.
fn spawn(program: &std::path::Path, args: &[String], input: &[u8]) -> Result<()> {
    let mut c = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", program.display()))?;
    if let Some(mut i) = c.stdin.take() {
        // A no-op hook may exit before reading: a broken pipe is its answer, not an error.
        let _ = i.write_all(input);
    }
    let out = c.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "{} exited with {}: {}",
            program.display(),
            out.status,
            crate::esc(String::from_utf8_lossy(&out.stderr).trim())
        );
    }
    Ok(())
}

/// Runs `afr bench hook` and prints its figures.
pub fn run(b: &HookBench) -> Result<ExitCode> {
    let afr = match &b.afr {
        Some(p) => p.clone(),
        None => crate::serve_bench::afr_beside()?,
    };
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    let dir = tmp.path().join("rec");
    let policy = tmp.path().join("policy.toml");
    std::fs::write(
        &policy,
        "default = \"allow\"\n\n[[rule]]\nid = \"no-drops\"\ntool = \"Bash\"\nargs = { command = \"*DROP*\" }\nverdict = \"deny\"\nreason = \"no schema drops\"\n",
    )?;
    let mut server = Server::start(&afr, &dir, &[])?;
    let hook_args = vec![
        "--dir".to_owned(),
        dir.display().to_string(),
        "hook".into(),
        "claude-code".into(),
        "--policy".into(),
        policy.display().to_string(),
    ];
    let noop = PathBuf::from("/bin/true");
    // What `afr setup` configures: the thin client beside `afr`, when it is there.
    let thin = afr.with_file_name("afr-hook");
    let thin = thin.is_file().then_some(thin);
    let session = "bench-session-0001";
    let call = |n: u64, post: bool| {
        let mut v = json!({
            "session_id": session,
            "transcript_path": "/tmp/t.jsonl",
            "cwd": tmp.path(),
            "permission_mode": "default",
            "hook_event_name": if post { "PostToolUse" } else { "PreToolUse" },
            "tool_name": "Bash",
            "tool_input": {"command": format!("echo call-{n}"), "description": "bench"},
            "tool_use_id": format!("toolu_bench_{n:08}"),
        });
        if post {
            v["tool_response"] = json!({"stdout": format!("call-{n}"), "stderr": "", "interrupted": false, "isImage": false});
            v["duration_ms"] = json!(3);
        }
        v.to_string().into_bytes()
    };
    let (mut with, mut full, mut without) = (Vec::new(), Vec::new(), Vec::new());
    let pair = |program: &std::path::Path, args: &[String], n: u64| -> Result<f64> {
        let t = Instant::now();
        spawn(program, args, &call(n, false))?;
        spawn(program, args, &call(n, true))?;
        Ok(t.elapsed().as_secs_f64() * 1000.0)
    };
    // Call n goes through the thin client, call n + OFFSET through `afr hook` itself, each
    // call id used once; the three sides interleave call by call.
    const OFFSET: u64 = 1 << 32;
    for n in 0..b.warmup + b.calls {
        let hooked = pair(thin.as_deref().unwrap_or(&afr), &hook_args, n)?;
        let whole = pair(&afr, &hook_args, n + OFFSET)?;
        let bare = pair(&noop, &[], n)?;
        if n >= b.warmup {
            with.push(hooked);
            full.push(whole);
            without.push(bare);
        }
    }
    let status = Command::new(&afr)
        .arg("--dir")
        .arg(&dir)
        .args(["status", "--json"])
        .output()?;
    server.stop()?;
    let st: serde_json::Value =
        serde_json::from_slice(&status.stdout).context("afr status --json")?;
    let events = st["events"]
        .as_u64()
        .or_else(|| st["total_events"].as_u64());
    let (h, f, n) = (side(with), side(full), side(without));
    let added = Side {
        median_ms: ((h.median_ms - n.median_ms) * 1000.0).round() / 1000.0,
        p99_ms: ((h.p99_ms - n.p99_ms) * 1000.0).round() / 1000.0,
    };
    if let Some(e) = events {
        ensure!(
            e == 2 * (b.warmup + b.calls),
            "the store holds {e} events after {} calls",
            2 * (b.warmup + b.calls)
        );
    }
    let met = added.p99_ms <= TARGET_P99_ADDED_MS;
    if b.json {
        println!(
            "{}",
            json!({
                "calls": b.calls,
                "hook_program": thin.as_ref().map_or("afr hook".into(), |p| p.display().to_string()),
                "afr_hook": h,
                "afr_hook_in_process": f,
                "noop_hook": n,
                "added": added,
                "target_p99_added_ms": TARGET_P99_ADDED_MS,
                "target_met": met,
                "events": events,
            })
        );
    } else {
        println!(
            "afr bench hook: {} tool calls, each a PreToolUse and a PostToolUse hook spawned to exit (afr serve running)",
            b.calls
        );
        let row = |name: &str, x: &Side| {
            println!(
                "  {name:<26} median {:>8.3} ms  p99 {:>8.3} ms",
                x.median_ms, x.p99_ms
            );
        };
        row(
            if thin.is_some() {
                "afr-hook (thin client)"
            } else {
                "afr hook"
            },
            &h,
        );
        row("afr hook (in-process)", &f);
        row("no-op hook (true)", &n);
        println!(
            "  {:<26} median {:>8.3} ms  p99 {:>8.3} ms  (target p99 <= {TARGET_P99_ADDED_MS} ms: {})",
            "added per tool call",
            added.median_ms,
            added.p99_ms,
            if met { "met" } else { "NOT met" }
        );
        if let Some(e) = events {
            println!("  store: {e} events, one per call");
        }
    }
    Ok(ExitCode::SUCCESS)
}
