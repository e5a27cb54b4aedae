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
    /// MCP servers (comma-separated names as the CLI calls them, or `*`) that run behind
    /// `afr mcp wrap`, which records and guards their calls: the hook leaves their tools alone
    /// (each call recorded once). `afr setup` sets it.
    #[arg(long, value_delimiter = ',', value_name = "SERVERS")]
    pub mcp_wrapped: Vec<String>,
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
        // A policy that cannot be read blocks every call, --fail-open or not: failing open is
        // for calls that cannot be recorded, never for rules that cannot be applied.
        (_, Err(e)) => afr_hook::Answer {
            code: 2,
            stdout: String::new(),
            stderr: format!("afr hook: {e}; blocked (the policy cannot be applied)"),
        },
        // A hook that crashes lets the call run in all three CLIs (only exit 2 blocks): a panic
        // is answered like any other failure to record, blocked unless failing open.
        (Ok(_), Ok(policy)) => std::panic::catch_unwind(|| {
            afr_hook::run(
                &HookOptions {
                    dir: dir.to_owned(),
                    agent: a.agent.agent(),
                    policy,
                    fail_open: a.fail_open,
                    approval_timeout: Duration::from_secs(a.approval_timeout),
                    mcp_wrapped: a.mcp_wrapped.clone(),
                    no_server: crate::mcp::no_server(),
                    recorder: None,
                    context: afr_hook::Context::of_this_process(a.agent.agent()),
                },
                &input,
            )
        })
        .unwrap_or_else(|_| block_or_warn(a, "afr hook: an internal error (see above)")),
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

#[derive(Args, Debug)]
pub struct SetupArgs {
    /// Which CLI to configure.
    pub agent: AgentName,
    /// Configure the project at DIR (its .claude/, .codex/ or .gemini/ and .mcp.json); the
    /// default is the current directory.
    #[arg(long, value_name = "DIR", conflicts_with = "user")]
    pub project: Option<PathBuf>,
    /// Configure the user's own settings instead (~/.claude, $CODEX_HOME or ~/.codex, ~/.gemini).
    #[arg(long)]
    pub user: bool,
    /// Policy file the hooks and the wrapped MCP servers enforce (docs/gateway.md).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Allow calls that cannot be recorded (hooks and wrapped servers), with a warning.
    #[arg(long)]
    pub fail_open: bool,
    /// Leave the MCP servers as they are (their calls are then recorded by the hooks).
    #[arg(long)]
    pub no_mcp: bool,
    /// Show what would be written, write nothing.
    #[arg(long)]
    pub print: bool,
    /// Put back the files as they were before the first `afr setup`.
    #[arg(long, conflicts_with = "print")]
    pub undo: bool,
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_owned()
    } else {
        std::env::current_dir()?.join(p)
    })
}

pub fn setup(dir: &Path, a: &SetupArgs) -> anyhow::Result<ExitCode> {
    use afr_hook::setup::{Scope, SetupOptions};
    let home =
        PathBuf::from(std::env::var_os("HOME").ok_or_else(|| anyhow::anyhow!("HOME is not set"))?);
    let scope = if a.user {
        Scope::User {
            home: home.clone(),
            codex_home: std::env::var_os("CODEX_HOME").map(PathBuf::from),
        }
    } else {
        let d = absolute(a.project.as_deref().unwrap_or(Path::new(".")))?;
        Scope::Project(d.canonicalize().unwrap_or(d))
    };
    let policy = a.policy.as_deref().map(absolute).transpose()?;
    if let Some(p) = &policy {
        // A policy the hooks cannot read would block every call: say so now.
        afr_gateway::Policy::load(p)?;
    }
    let afr = std::env::current_exe()?;
    let afr = afr.canonicalize().unwrap_or(afr);
    let thin = afr.with_file_name("afr-hook");
    let o = SetupOptions {
        agent: a.agent.agent(),
        scope,
        hook_program: thin.is_file().then_some(thin),
        afr,
        dir: absolute(dir)?,
        policy,
        fail_open: a.fail_open,
        wrap_mcp: !a.no_mcp,
        home,
    };
    if a.undo {
        let done = afr_hook::setup::undo(&o)?;
        if done.is_empty() {
            println!(
                "afr setup: nothing to undo (no backup from an earlier `afr setup {}`)",
                o.agent
            );
        }
        for d in done {
            println!("afr setup: {d}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let plan = afr_hook::setup::plan(&o)?;
    for r in &plan.refusals {
        eprintln!("afr setup: refused: {r}");
    }
    for n in &plan.notes {
        eprintln!("afr setup: note: {n}");
    }
    if a.print {
        for c in &plan.changes {
            println!(
                "# {}{}",
                c.path.display(),
                if c.before.is_none() { " (new)" } else { "" }
            );
            print!("{}", c.after);
        }
        if plan.changes.is_empty() {
            println!("# nothing to change: {} is set up", o.agent);
        }
        return Ok(if plan.refusals.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(3)
        });
    }
    if !plan.refusals.is_empty() {
        eprintln!("afr setup: nothing written");
        return Ok(ExitCode::from(3));
    }
    afr_hook::setup::apply(&plan)?;
    if plan.changes.is_empty() {
        println!("afr setup: {} is already set up; nothing changed", o.agent);
    }
    for c in &plan.changes {
        println!(
            "afr setup: wrote {} (backup: {}.afr-backup; `afr setup {} --undo` restores it)",
            c.path.display(),
            c.path.display(),
            o.agent
        );
        for s in &c.summary {
            println!("  {s}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
