//! `afr mcp wrap|proxy` (the MCP gateway) and the approval queue's commands: `afr approvals`,
//! `afr approve ID`, `afr reject ID`.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use afr_core::text::escape;
use afr_gateway::approvals::{self, Decision, Ruling};
use afr_recorder::now_us;
use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Subcommand, Debug)]
pub enum McpCmd {
    /// Run a stdio MCP server as a child and relay its JSON-RPC byte for byte, recording each
    /// tools/call (intent before it is forwarded, outcome when it is answered). Records through
    /// `afr serve` when it runs, else into the store directly.
    Wrap {
        #[command(flatten)]
        gate: GateArgs,
        /// The server's command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<OsString>,
    },
    /// Stand in front of a Streamable HTTP MCP server: clients connect to --listen, calls go
    /// to --upstream, recorded and checked as with `wrap`.
    Proxy(ProxyArgs),
}

/// What `wrap` and `proxy` share.
#[derive(Args, Debug)]
pub struct GateArgs {
    /// Guardrails: a TOML file of ordered allow/deny/escalate rules (docs/gateway.md).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Forward calls that could not be recorded (default: answer them with an error).
    #[arg(long)]
    fail_open: bool,
    /// Seconds an escalated call waits for `afr approve`/`afr reject` (or the client's
    /// elicitation answer) before it is rejected.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    approval_timeout: u64,
    /// Never ask the client's user through MCP elicitation; escalated calls wait for `afr
    /// approve` / `afr reject` only. For headless hosts that declare elicitation but cancel
    /// every request (fast-agent); the policy's `elicitation = false` does the same.
    #[arg(long)]
    no_elicitation: bool,
    /// Leave out of `tools/list` answers the tools the policy denies outright, recording what
    /// was left out (the policy's `filter_tools = true` does the same).
    #[arg(long)]
    filter_tools: bool,
}

/// A producer that finds no `afr serve` starts one on demand with this very binary
/// (`afr_client::writer`), so that it never holds the store itself.
pub(crate) fn no_server() -> afr_client::NoServer {
    match std::env::current_exe() {
        Ok(afr) => afr_client::NoServer::StartOne(afr),
        Err(_) => afr_client::NoServer::OpenStore,
    }
}

impl GateArgs {
    fn gate(&self, dir: &Path) -> Result<std::sync::Arc<afr_gateway::Gate>> {
        let policy = self
            .policy
            .as_deref()
            .map(afr_gateway::Policy::load)
            .transpose()?
            .map(|p| {
                if self.no_elicitation {
                    p.without_elicitation()
                } else {
                    p
                }
            })
            .map(|p| {
                if self.filter_tools {
                    p.with_tool_filter()
                } else {
                    p
                }
            });
        Ok(afr_gateway::Gate::new(
            dir.to_owned(),
            policy,
            self.fail_open,
            Duration::from_secs(self.approval_timeout),
            no_server(),
        ))
    }
}

#[derive(Args, Debug)]
pub struct ProxyArgs {
    #[command(flatten)]
    gate: GateArgs,
    /// The MCP server's endpoint, e.g. http://127.0.0.1:3001/mcp, relayed byte for byte. Or,
    /// repeated, NAME=URL: several servers behind one endpoint (/mcp), their tools named
    /// NAME_tool (NAME: letters, digits and `-`).
    #[arg(long, required = true, value_name = "[NAME=]URL")]
    upstream: Vec<String>,
    /// A PEM file of CA certificates an https --upstream may chain to, besides the system's
    /// roots (a private CA); the certificate and host name are always verified.
    #[arg(long, value_name = "PEM")]
    upstream_ca: Option<PathBuf>,
    /// Where clients connect (the path is the upstream's).
    #[arg(long, default_value = "127.0.0.1:8931")]
    listen: std::net::SocketAddr,
    /// Allow a --listen address that is not loopback without --client-token (nobody is
    /// authenticated).
    #[arg(long)]
    allow_remote: bool,
    /// A client's name and a file (mode 0600) whose first line is its bearer token
    /// (repeatable): every request must then carry one of the tokens (`Authorization: Bearer
    /// ...`) or is refused 401, and the name is recorded with the client's calls.
    #[arg(long = "client-token", value_name = "NAME=FILE")]
    client_tokens: Vec<String>,
    /// With --client-token: still pass the client's Authorization header on to the upstream
    /// (by default it is the gateway's credential, and removed).
    #[arg(long)]
    pass_authorization: bool,
    /// Also accept this Host (name or name:port; repeatable); loopback names are accepted.
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
    /// Also accept requests whose Origin is this (e.g. https://app.example; repeatable);
    /// requests without an Origin, and from loopback origins, are accepted.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    allowed_origins: Vec<String>,
}

pub fn run(dir: &Path, cmd: McpCmd) -> Result<ExitCode> {
    match cmd {
        McpCmd::Wrap { gate, command } => {
            let code = afr_gateway::run(afr_gateway::WrapOptions {
                gate: gate.gate(dir)?,
                command,
                max_line: afr_gateway::wrap::DEFAULT_MAX_LINE,
            })?;
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
        }
        McpCmd::Proxy(p) => {
            let mut client_tokens = Vec::new();
            for t in &p.client_tokens {
                let Some((name, file)) = t.split_once('=') else {
                    anyhow::bail!("--client-token {t}: expected NAME=FILE");
                };
                client_tokens.push(afr_gateway::proxy::ClientToken {
                    name: name.to_owned(),
                    token: afr_server::read_token_file(Path::new(file))?,
                });
            }
            afr_gateway::proxy::serve(afr_gateway::proxy::ProxyOptions {
                gate: p.gate.gate(dir)?,
                upstreams: p.upstream,
                client_tokens,
                pass_authorization: p.pass_authorization,
                listen: p.listen,
                allow_remote: p.allow_remote,
                allowed_hosts: p.allowed_hosts,
                allowed_origins: p.allowed_origins,
                max_body: afr_gateway::wrap::DEFAULT_MAX_LINE,
                upstream_ca: p.upstream_ca,
            })?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `afr approvals`: the calls held for a decision.
pub fn list(dir: &Path, json: bool) -> Result<ExitCode> {
    let calls = approvals::list(dir)?;
    let now = now_us();
    if json {
        let out: Vec<_> = calls
            .iter()
            .map(|(c, decided)| {
                let mut v = serde_json::to_value(c).unwrap_or_default();
                v["decided"] = (*decided).into();
                v["stale"] = stale(c.pid).into();
                v
            })
            .collect();
        println!("{}", serde_json::Value::Array(out));
        return Ok(ExitCode::SUCCESS);
    }
    if calls.is_empty() {
        println!("no calls are waiting for approval");
    }
    for (c, decided) in &calls {
        let state = if *decided {
            "decided, waiting for the gateway to act".to_owned()
        } else if stale(c.pid) {
            format!("stale: its gateway (pid {}) is gone", c.pid)
        } else {
            format!(
                "held {} s, rejected in {} s unless decided",
                now.saturating_sub(c.created_at_us) / 1_000_000,
                c.expires_at_us.saturating_sub(now) / 1_000_000
            )
        };
        println!("{}  {}", c.id, state);
        for line in c.prompt.lines() {
            println!("    {}", escape(line));
        }
        if !c.signed_by.is_empty() {
            println!(
                "    needs an approval signed by one of: {} (afr approve {} --ssh-key PATH | --eth-key PATH)",
                escape(&c.signed_by.join(", ")),
                c.id
            );
        }
        println!();
    }
    if !calls.is_empty() {
        println!("decide with: afr approve ID | afr reject ID [--reason TEXT]");
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn stale(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// Who decides on a held call.
#[derive(Args, Debug)]
pub struct DecideArgs {
    /// The call's id, from `afr approvals`.
    id: String,
    /// Who decides, as recorded in `human_approval.approver` (default: the login name). This
    /// is the approver's own claim; signed approvals bind it to a key.
    #[arg(long = "as", value_name = "APPROVER")]
    approver: Option<String>,
    /// Why (recorded with a rejection, and sent to the client).
    #[arg(long)]
    reason: Option<String>,
}

/// `afr reject ID`.
pub fn decide(dir: &Path, args: DecideArgs, decision: Decision) -> Result<ExitCode> {
    let approver = args
        .approver
        .or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok())
        .filter(|a| !a.trim().is_empty())
        .unwrap_or_else(|| "unknown user".into());
    let ruling = Ruling {
        decision,
        approver: approver.clone(),
        decided_at_us: now_us(),
        reason: args.reason,
        signature: None,
    };
    let call = approvals::decide(dir, &args.id, &ruling)?;
    for line in call.prompt.lines() {
        println!("    {}", escape(line));
    }
    println!(
        "{} {} as {}{}",
        decision.name(),
        call.id,
        escape(&approver),
        if stale(call.pid) {
            " (but its gateway is gone: nothing will run)"
        } else {
            ""
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `afr otlp`: the OTLP receiver.
#[derive(Args, Debug)]
pub struct OtlpArgs {
    /// OTLP/HTTP address (`POST /v1/traces` and `POST /v1/logs`, protobuf or JSON, gzip,
    /// chunked).
    #[arg(long, default_value = "127.0.0.1:4318", value_name = "ADDR")]
    http: std::net::SocketAddr,
    /// OTLP/gRPC address.
    #[arg(long, default_value = "127.0.0.1:4317", value_name = "ADDR")]
    grpc: std::net::SocketAddr,
    /// No HTTP receiver.
    #[arg(long)]
    no_http: bool,
    /// No gRPC receiver.
    #[arg(long)]
    no_grpc: bool,
    /// File whose first line is a bearer token every export must carry (`Authorization:
    /// Bearer ...`; mode 0600); required for a non-loopback address.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Largest export body after decompression, in bytes.
    #[arg(long, default_value_t = afr_otlp::receiver::DEFAULT_MAX_BODY)]
    max_body: usize,
    /// Most exports handled at once; more are answered 429 / RESOURCE_EXHAUSTED with a retry
    /// hint.
    #[arg(long, default_value_t = afr_otlp::receiver::DEFAULT_MAX_INFLIGHT)]
    max_inflight: usize,
    /// Milliseconds a tool span whose parent span has not arrived is held for it (journaled,
    /// so the export is answered at once), and a coding-agent CLI's rejection of a call for
    /// the call's result; then it is recorded with what is known.
    #[arg(long, default_value_t = 6000, value_name = "MS")]
    hold_ms: u64,
    /// Most tool spans (and tool decisions) held at once; an export that would hold more is answered 429 /
    /// RESOURCE_EXHAUSTED with a retry hint.
    #[arg(long, default_value_t = afr_otlp::receiver::DEFAULT_MAX_HELD)]
    max_held: usize,
    /// MCP servers (comma-separated, as the coding-agent CLI names them; `*`: all) that run
    /// behind `afr mcp wrap`: their calls' log records are left to the gateway. `afr setup`
    /// lists the servers it wraps in <dir>/mcp-wrapped, which the receiver also reads.
    #[arg(long, value_delimiter = ',', value_name = "SERVERS")]
    mcp_wrapped: Vec<String>,
}

/// Runs `afr otlp` until SIGTERM or SIGINT.
pub fn otlp(dir: &Path, a: OtlpArgs) -> Result<ExitCode> {
    let token = a
        .token_file
        .as_deref()
        .map(afr_server::read_token_file)
        .transpose()?;
    afr_otlp::serve(afr_otlp::ReceiverOptions {
        dir: dir.to_owned(),
        http: (!a.no_http).then_some(a.http),
        grpc: (!a.no_grpc).then_some(a.grpc),
        token,
        max_body: a.max_body,
        max_inflight: a.max_inflight,
        hold: std::time::Duration::from_millis(a.hold_ms),
        max_held: a.max_held,
        no_server: no_server(),
        mcp_wrapped: a.mcp_wrapped,
    })?;
    Ok(ExitCode::SUCCESS)
}
