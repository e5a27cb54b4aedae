//! `afr hook <agent>`: the coding-agent CLIs' hook command (`afr_hook`).

use std::{
    io::{Read, Write},
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use afr_hook::{Agent, HookOptions};
use clap::{Args, ValueEnum};

/// The CLIs, as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AgentName {
    /// Claude Code.
    ClaudeCode,
    /// Codex CLI.
    Codex,
    /// Gemini CLI.
    Gemini,
}

impl AgentName {
    pub fn agent(self) -> Agent {
        match self {
            AgentName::ClaudeCode => Agent::ClaudeCode,
            AgentName::Codex => Agent::Codex,
            AgentName::Gemini => Agent::Gemini,
        }
    }
}

#[derive(Args, Debug)]
pub struct HookArgs {
    /// Which CLI runs the hook (its input and answer formats).
    pub agent: AgentName,
    /// Policy file (TOML, as for `afr mcp wrap`: docs/gateway.md); rules match the CLI's tool
    /// names (`Bash`, `Write`, `Edit`, `apply_patch`, `run_shell_command`, `mcp__S__T`, …).
    #[arg(long, env = "AFR_POLICY")]
    pub policy: Option<PathBuf>,
    /// Allow calls that cannot be recorded, with a warning (default: block them).
    #[arg(long)]
    pub fail_open: bool,
    /// Seconds an escalated call waits for `afr approve` / `afr reject` before it is
    /// rejected; keep it under the CLI's hook timeout (`afr setup` does).
    #[arg(long, default_value_t = afr_hook::run::DEFAULT_APPROVAL_TIMEOUT.as_secs(), value_name = "SECONDS")]
    pub approval_timeout: u64,
    /// The agent's MCP servers run behind `afr mcp wrap`, which records and guards their
    /// calls: the hook leaves MCP tools alone (each call recorded once).
    #[arg(long)]
    pub mcp_wrapped: bool,
}

/// Largest hook input read (a tool call's JSON with a big file write).
const MAX_INPUT: u64 = 64 << 20;

pub fn hook(dir: &Path, a: &HookArgs) -> ExitCode {
    let mut input = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(MAX_INPUT)
        .read_to_end(&mut input);
    let answer = match (
        read,
        a.policy
            .as_deref()
            .map(afr_gateway::Policy::load)
            .transpose(),
    ) {
        (Err(e), _) => block_or_warn(a, &format!("afr hook: standard input: {e}")),
        // A policy that cannot be read blocks every call (never silently allows).
        (_, Err(e)) => block_or_warn(a, &format!("afr hook: {e}")),
        (Ok(_), Ok(policy)) => afr_hook::run(
            &HookOptions {
                dir: dir.to_owned(),
                agent: a.agent.agent(),
                policy,
                fail_open: a.fail_open,
                approval_timeout: Duration::from_secs(a.approval_timeout),
                mcp_wrapped: a.mcp_wrapped,
                no_server: crate::mcp::no_server(),
            },
            &input,
        ),
    };
    if !answer.stdout.is_empty() {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(answer.stdout.as_bytes());
        let _ = out.flush();
    }
    if !answer.stderr.is_empty() {
        eprintln!("{}", answer.stderr);
    }
    ExitCode::from(answer.code)
}

fn block_or_warn(a: &HookArgs, why: &str) -> afr_hook::Answer {
    afr_hook::Answer {
        code: if a.fail_open { 0 } else { 2 },
        stdout: String::new(),
        stderr: if a.fail_open {
            format!("{why}; allowed (--fail-open)")
        } else {
            format!("{why}; blocked")
        },
    }
}
