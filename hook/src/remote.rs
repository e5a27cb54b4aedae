//! The thin client: the hook process hands its input to `afr serve`, which runs the hook on the
//! recorder it holds (`POST /v1/hook`).
//!
//! A CLI runs its hook as a new process per event, on the agent's critical path. The `afr`
//! binary takes a few milliseconds just to start (RocksDB's static initialisers, its size);
//! `afr-hook`, a small binary beside it that links neither RocksDB nor the policy engine,
//! reads the input, adds its [`Context`] (the agent's pid, `TRACEPARENT`), and posts this
//! [`Request`] over `<dir>/afr.sock`; the server runs [`crate::run`] exactly as `afr hook`
//! would and answers the [`Answer`] to print. With no server answering, `afr-hook` runs
//! `afr hook` itself with the same arguments and input.
//!
//! ```text
//! POST /v1/hook  {"agent": "claude-code", "policy": "/abs/policy.toml", "fail_open": false,
//!                 "approval_timeout_s": 240, "mcp_wrapped": ["fs"],
//!                 "context": {"owner_pid": 4242, "traceparent": null, "agent_version": null},
//!                 "input": "<the hook's standard input, as text>"}
//! 200            {"code": 0, "stdout": "", "stderr": ""}
//! ```

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use afr_client::NoServer;
use afr_recorder::Recorder;
use serde::{Deserialize, Serialize};

use crate::{Agent, Answer, Context, HookOptions};

/// What the thin client sends.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// `claude-code`, `codex` or `gemini`.
    pub agent: String,
    /// The policy file, absolute.
    #[serde(default)]
    pub policy: Option<PathBuf>,
    /// `--fail-open`.
    #[serde(default)]
    pub fail_open: bool,
    /// `--approval-timeout`, seconds.
    pub approval_timeout_s: u64,
    /// `--mcp-wrapped`.
    #[serde(default)]
    pub mcp_wrapped: Vec<String>,
    /// The hook process's context.
    pub context: Context,
    /// The hook's standard input.
    pub input: String,
}

/// Runs the hook of `body` (a [`Request`]) on `recorder`, the store of `dir`: the answer to
/// print, as JSON. A request that cannot be read is an error (the client then runs `afr hook`
/// itself); a policy that cannot be loaded blocks the call, as `afr hook` does.
pub fn serve(dir: &Path, recorder: Arc<Recorder>, body: &[u8]) -> Result<Vec<u8>, String> {
    let r: Request = serde_json::from_slice(body).map_err(|e| format!("the hook request: {e}"))?;
    let agent = Agent::from_name(&r.agent).ok_or_else(|| format!("unknown agent `{}`", r.agent))?;
    if r.policy.as_ref().is_some_and(|p| p.is_relative()) {
        return Err("the policy path must be absolute".into());
    }
    let answer = match r
        .policy
        .as_deref()
        .map(afr_gateway::Policy::load)
        .transpose()
    {
        // Never failing open: that is for calls that cannot be recorded, not for rules that
        // cannot be applied.
        Err(e) => Answer {
            code: 2,
            stdout: String::new(),
            stderr: format!("afr hook: {e}; blocked (the policy cannot be applied)"),
        },
        Ok(policy) => crate::run(
            &HookOptions {
                dir: dir.to_owned(),
                agent,
                policy,
                fail_open: r.fail_open,
                approval_timeout: Duration::from_secs(r.approval_timeout_s),
                mcp_wrapped: r.mcp_wrapped,
                no_server: NoServer::OpenStore,
                recorder: Some(recorder),
                context: r.context,
            },
            r.input.as_bytes(),
        ),
    };
    serde_json::to_vec(&answer).map_err(|e| e.to_string())
}
