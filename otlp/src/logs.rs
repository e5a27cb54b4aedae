//! From the coding-agent CLIs' OTLP log records to AFR events (pure): Claude Code, Codex and
//! Gemini CLI log each tool call they make as OpenTelemetry log records, and each becomes one
//! event. The mapping is documented field by field in `docs/otlp.md` (section "Logs").
//!
//! | CLI | decision record | result record | call id | session |
//! |---|---|---|---|---|
//! | Claude Code | `claude_code.tool_decision` | `claude_code.tool_result` | `tool_use_id` | `session.id` |
//! | Codex | `codex.tool_decision` | `codex.tool_result` | `call_id` | `conversation.id` |
//! | Gemini CLI | (in the result) | `gemini_cli.tool_call` | none: content and rank | `session.id` |
//!
//! The record's name is its `event.name` attribute (Codex, Gemini CLI; Claude Code without its
//! prefix), else its body (Claude Code), else the OTLP `eventName` field. A decision and the
//! result of the same call are paired by the receiver ([`crate::calls`]), which also names the
//! calls of Gemini CLI (no ids) by content and rank, as its hook does.
//!
//! Every other record (prompts, API requests, hook runs) is counted by name in the
//! [`LogSummary`], never dropped silently.

use std::collections::BTreeMap;

use afr_core::{
    EventInput,
    agent::{Agent, category, lane},
    event::{
        Capture, CodeProvenance, ContextProvenance, ContextSource, Effects, Execution,
        GuardrailEvaluation, GuardrailVerdict,
    },
};
use opentelemetry_proto::tonic::{
    collector::logs::v1::ExportLogsServiceRequest,
    common::v1::{InstrumentationScope, KeyValue, any_value::Value as Av},
    logs::v1::LogRecord,
};
use prost::Message;
use serde::Serialize;
use serde_json::{Value, json};

use crate::map::{cap_str, capped, get, structured, text, traceparent};

/// The capturing component named in `code_provenance.capture.via`.
pub const VIA: &str = "otlp:logs";

/// How a call is named for its idempotency key ([`afr_core::agent::key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallName {
    /// The CLI's call id (Claude Code `tool_use_id`, Codex `call_id`).
    Id(String),
    /// Gemini CLI: no id. The receiver ranks the call among the session's calls of the same
    /// content ([`afr_core::agent::ranked`]); `record` tells a record sent again (an exporter's
    /// retry) from a new call of the same content.
    Unnamed {
        /// [`afr_core::agent::content_id`] of the tool and its arguments.
        content: String,
        /// 32 hex digits of SHA-256 over the record's protobuf encoding.
        record: String,
    },
}

/// A `tool_decision` record: whether the CLI let the call run, and who decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The CLI.
    pub agent: Agent,
    /// Its session id.
    pub session: String,
    /// The call id.
    pub call: String,
    /// The decision as a policy evaluation: guardrail `<agent>:<source>`.
    pub evaluation: GuardrailEvaluation,
    /// The event of the call as the decision describes it, for a call it rejected: recorded
    /// when no result of the call follows ([`Decision::rejected`]).
    pub event: EventInput,
}

impl Decision {
    /// Whether the decision rejected the call.
    pub fn rejects(&self) -> bool {
        self.evaluation.verdict == GuardrailVerdict::Deny
    }
}

/// A tool result record (Gemini CLI's `tool_call`), as an event.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The CLI.
    pub agent: Agent,
    /// Its session id.
    pub session: String,
    /// How the call is named.
    pub call: CallName,
    /// The event (a decision of the same call is folded in by [`fold`]).
    pub event: EventInput,
}

/// One tool record of an export.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolRecord {
    /// A decision on a call.
    Decision(Box<Decision>),
    /// A call's result.
    Result(Box<ToolResult>),
}

/// What one logs export held.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LogSummary {
    /// Log records in the export.
    pub records: u64,
    /// Tool results, by CLI.
    pub results: BTreeMap<String, u64>,
    /// Tool decisions.
    pub decisions: u64,
    /// Other records, by name (`claude_code.api_request`, or `other` for records of no
    /// coding-agent CLI): seen, not recorded.
    pub ignored: BTreeMap<String, u64>,
    /// Tool records that cannot be mapped (no session id, no call id, no tool name), rejected.
    pub malformed: u64,
}

const PREFIXES: [(&str, Agent); 3] = [
    ("claude_code.", Agent::ClaudeCode),
    ("codex.", Agent::Codex),
    ("gemini_cli.", Agent::Gemini),
];

fn prefix(agent: Agent) -> &'static str {
    match agent {
        Agent::ClaudeCode => "claude_code.",
        Agent::Codex => "codex.",
        Agent::Gemini => "gemini_cli.",
    }
}

fn body_text(r: &LogRecord) -> Option<&str> {
    match r.body.as_ref()?.value.as_ref()? {
        Av::StringValue(s) => Some(s),
        _ => None,
    }
}

/// The CLI and the record's name without the CLI's prefix (`tool_result`).
fn identify<'a>(r: &'a LogRecord, resource: &'a [KeyValue]) -> Option<(Agent, &'a str)> {
    let named = [
        text(&r.attributes, "event.name"),
        body_text(r),
        Some(r.event_name.as_str()),
    ];
    for n in named.into_iter().flatten() {
        for (p, a) in PREFIXES {
            if let Some(rest) = n.strip_prefix(p) {
                return Some((a, rest));
            }
        }
    }
    // An unprefixed `event.name` of a CLI its resource names.
    let agent = match text(resource, "service.name")? {
        "claude-code" => Agent::ClaudeCode,
        s if s.starts_with("codex") => Agent::Codex,
        "gemini-cli" => Agent::Gemini,
        _ => return None,
    };
    text(&r.attributes, "event.name").map(|n| (agent, n))
}

/// A boolean attribute: a bool, or the strings `true`/`false` (Claude Code, Codex).
fn flag(attrs: &[KeyValue], key: &str) -> Option<bool> {
    match get(attrs, key)? {
        Av::BoolValue(b) => Some(*b),
        Av::StringValue(s) => match s.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// An integer attribute: an int, a whole double, or a string of digits (Claude Code, Codex).
fn int(attrs: &[KeyValue], key: &str) -> Option<i64> {
    match get(attrs, key)? {
        Av::IntValue(i) => Some(*i),
        #[expect(clippy::cast_possible_truncation, reason = "whole doubles only")]
        Av::DoubleValue(d) if d.fract() == 0.0 && d.abs() < 9e15 => Some(*d as i64),
        Av::StringValue(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A JSON-text attribute, parsed (a string that is not JSON stays a string).
fn json_attr(attrs: &[KeyValue], key: &str) -> Option<Value> {
    get(attrs, key).map(structured)
}

/// A record with where it came from.
struct Ctx<'a> {
    agent: Agent,
    r: &'a LogRecord,
    resource: &'a [KeyValue],
    scope: Option<&'a InstrumentationScope>,
}

impl Ctx<'_> {
    fn a(&self) -> &[KeyValue] {
        &self.r.attributes
    }

    fn session(&self) -> Option<&str> {
        match self.agent {
            Agent::Codex => {
                text(self.a(), "conversation.id").or_else(|| text(self.a(), "session.id"))
            }
            _ => text(self.a(), "session.id").or_else(|| text(self.resource, "session.id")),
        }
    }

    /// When the record was made, in microseconds (Codex leaves `timeUnixNano` 0).
    fn time_us(&self) -> Option<u64> {
        [self.r.time_unix_nano, self.r.observed_time_unix_nano]
            .into_iter()
            .find(|t| *t > 0)
            .map(|t| t / 1000)
    }

    /// The CLI's version: `service.version`, except Gemini CLI's, which is Node's.
    fn version(&self) -> Option<&str> {
        let v = text(self.resource, "service.version").or_else(|| text(self.a(), "app.version"))?;
        let node = text(self.resource, "process.runtime.version")
            .is_some_and(|n| v.strip_prefix('v').unwrap_or(v) == n);
        (!node).then_some(v)
    }

    /// The event of a call of `tool` with `args` (before its outcome): category, lane,
    /// provenance, the record's account of who and when.
    fn event(&self, session: &str, tool: &str, args: Value, call: Option<&str>) -> EventInput {
        let mut ev =
            EventInput::intent_only(category(self.agent, tool), cap_str(tool), capped(args));
        ev.lane = Some(lane(session, None));
        ev.timestamp_us = self.time_us();
        ev.code_provenance = Some(CodeProvenance {
            agent: Some(self.agent.name().to_owned()),
            agent_version: self.version().map(cap_str),
            model: text(self.a(), "model").map(cap_str),
            capture: Some(Capture::self_reported(VIA)),
            ..CodeProvenance::default()
        });
        let source = |uri: String, kind: &str| ContextSource {
            uri: cap_str(&uri),
            content_hash: None,
            kind: Some(kind.to_owned()),
        };
        let service = text(self.resource, "service.name").unwrap_or("unknown_service");
        let scope = self
            .scope
            .filter(|s| !s.name.is_empty())
            .map(|s| match s.version.as_str() {
                "" => format!(" ({})", s.name),
                v => format!(" ({} {v})", s.name),
            })
            .unwrap_or_default();
        // The marker: this event is the CLI's own account, after the fact.
        let mut sources = vec![source(
            format!("otlp:{service}{scope}"),
            "self_reported_log",
        )];
        if let Some(c) = call {
            sources.push(source(format!("tool_call:{c}"), "tool_call_id"));
        }
        if let Some(p) = text(self.a(), "prompt.id").or_else(|| text(self.a(), "prompt_id")) {
            sources.push(source(format!("prompt:{p}"), "prompt_id"));
        }
        // Claude Code: the turn's span (the `TRACEPARENT` its hooks get) on a result, the
        // permission span on a decision; Codex: the turn's; Gemini CLI: the call's schedule.
        if self.r.trace_id.len() == 16 && self.r.span_id.len() == 8 {
            sources.push(source(
                format!(
                    "traceparent:{}",
                    traceparent(&self.r.trace_id, &self.r.span_id)
                ),
                "otel_log",
            ));
        }
        ev.context_provenance = Some(ContextProvenance {
            sources,
            environment: text(self.resource, "deployment.environment.name")
                .or_else(|| text(self.resource, "deployment.environment"))
                .map(cap_str),
        });
        ev
    }
}

/// `s` and what follows, as `<s>: <detail>` or alone.
fn with_type(kind: Option<&str>, message: Option<&str>) -> Option<String> {
    match (kind, message) {
        (Some(k), Some(m)) if !m.starts_with(k) => Some(format!("{k}: {m}")),
        (_, Some(m)) => Some(m.to_owned()),
        (Some(k), None) => Some(k.to_owned()),
        (None, None) => None,
    }
}

fn str_at<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| v.get(*k).and_then(Value::as_str))
}

/// What a call did, concretely, as `afr hook` records it: the exact shell command; for a file
/// write or edit, the path and what the tool was asked to do (the file is not read: the call
/// ran before the record arrived); for Codex's `apply_patch`, the patch; for an MCP tool,
/// `tools/call` on the server; otherwise the tool with its arguments.
pub fn execution(agent: Agent, tool: &str, args: &Value) -> Execution {
    if let Some((server, t)) = agent.mcp_tool(tool) {
        return Execution {
            command: cap_str(&format!("tools/call {t}")),
            target: Some(cap_str(&format!("mcp server {server}"))),
            mutation: capped(args.clone()),
        };
    }
    match category(agent, tool) {
        afr_core::Category::Shell => {
            if let Some(c) = afr_core::agent::shell_command(args) {
                return Execution {
                    command: cap_str(&c),
                    target: str_at(args, &["workdir", "dir_path", "directory", "cwd"]).map(cap_str),
                    mutation: Value::Null,
                };
            }
        }
        afr_core::Category::File => {
            if let Some(path) = str_at(args, &["file_path", "path", "absolute_path"]) {
                let verb = if matches!(tool, "Write" | "write_file") {
                    "write"
                } else {
                    "edit"
                };
                return Execution {
                    command: cap_str(&format!("{verb} {path}")),
                    target: Some(cap_str(path)),
                    mutation: json!({"path": cap_str(path), "requested": capped(args.clone())}),
                };
            }
            if tool == "apply_patch" {
                let patch = match args {
                    Value::String(s) => Some(s.as_str()),
                    v => str_at(v, &["command", "input", "patch"]),
                };
                return Execution {
                    command: "apply_patch".into(),
                    target: None,
                    mutation: match patch {
                        Some(p) => capped(json!({"patch": p})),
                        None => capped(args.clone()),
                    },
                };
            }
        }
        _ => {}
    }
    Execution {
        command: cap_str(tool),
        target: None,
        mutation: capped(args.clone()),
    }
}

/// The exit status a CLI wrote into a result's text: `Process exited with code N` (Codex's
/// shell output in its logs), `Exit code: N` (Codex's patches), `Exit Code: N` (Gemini CLI).
fn exit_status_in_text(text: &str) -> Option<i64> {
    afr_core::agent::exit_status_line(
        text,
        &["Process exited with code", "Exit code:", "Exit Code:"],
    )
}

/// The files a successful call changed, as `afr hook` says it.
fn state_changes(tool: &str, execution: Option<&Execution>) -> Vec<String> {
    if tool == "apply_patch" {
        return vec!["applied a patch".into()];
    }
    let Some(e) = execution else {
        return Vec::new();
    };
    if let Some(p) = e.command.strip_prefix("write ") {
        vec![format!("wrote {p}")]
    } else if let Some(p) = e.command.strip_prefix("edit ") {
        vec![format!("edited {p}")]
    } else {
        Vec::new()
    }
}

/// A result's effects: `error` (none for a success), the CLI's report of the output, how long.
fn effects(
    tool: &str,
    execution: Option<&Execution>,
    error: Option<String>,
    output: Value,
    external: Value,
) -> Effects {
    Effects {
        state_changes: if error.is_none() {
            state_changes(tool, execution)
        } else {
            Vec::new()
        },
        return_value: capped(output),
        external_response: external,
        error: error.as_deref().map(cap_str),
    }
}

fn external(attrs: &[KeyValue]) -> Value {
    let mut m = serde_json::Map::new();
    if let Some(ms) = int(attrs, "duration_ms") {
        m.insert("duration_ms".into(), json!(ms));
    }
    if let Some(b) = int(attrs, "tool_result_size_bytes") {
        m.insert("result_bytes".into(), json!(b));
    }
    if m.is_empty() {
        Value::Null
    } else {
        Value::Object(m)
    }
}

/// The start of a call whose record was made at its end, `duration_ms` after it started.
fn started(ev: &mut EventInput, attrs: &[KeyValue]) {
    if let (Some(t), Some(ms)) = (ev.timestamp_us, int(attrs, "duration_ms")) {
        let us = u64::try_from(ms).unwrap_or(0).saturating_mul(1000);
        ev.timestamp_us = Some(t.saturating_sub(us));
    }
}

/// Claude Code's tool name: `tool_name`, or for an MCP call (`mcp_tool`) the hook's name
/// `mcp__<server>__<tool>` from `tool_parameters`.
fn claude_tool(a: &[KeyValue]) -> Option<String> {
    let t = text(a, "tool_name")?;
    if t == "mcp_tool"
        && let Some(p) = json_attr(a, "tool_parameters")
        && let (Some(s), Some(n)) = (
            str_at(&p, &["mcp_server_name"]),
            str_at(&p, &["mcp_tool_name"]),
        )
    {
        return Some(format!("mcp__{s}__{n}"));
    }
    Some(t.to_owned())
}

/// Claude Code's arguments: `tool_input` (with `OTEL_LOG_TOOL_DETAILS=1`), else the
/// `tool_parameters` summary (a shell call's `full_command`, an MCP call's names).
fn claude_args(a: &[KeyValue]) -> Value {
    json_attr(a, "tool_input")
        .or_else(|| {
            json_attr(a, "tool_parameters").map(|p| match str_at(&p, &["full_command"]) {
                Some(c) => json!({"command": c}),
                None => p,
            })
        })
        .unwrap_or(Value::Null)
}

/// Codex's tool name as its hook names it: an MCP tool `mcp__<server>__<tool>` (namespace
/// `mcp__<server>`), a function `<name>`, another namespace run together with the name.
fn codex_tool(a: &[KeyValue]) -> Option<String> {
    let t = text(a, "tool_name")?;
    Some(match text(a, "tool_namespace") {
        None | Some("functions") => t.to_owned(),
        Some(ns) if ns.starts_with("mcp__") => format!("{ns}__{t}"),
        Some(ns) => format!("{ns}{t}"),
    })
}

fn verdict_of(decision: &str) -> Option<GuardrailVerdict> {
    match decision.to_ascii_lowercase().as_str() {
        "accept"
        | "approved"
        | "approved_for_session"
        | "approve"
        | "allow"
        | "auto_accept"
        | "modify" => Some(GuardrailVerdict::Allow),
        "reject" | "rejected" | "denied" | "deny" | "abort" | "block" | "cancel" => {
            Some(GuardrailVerdict::Deny)
        }
        _ => None,
    }
}

/// Why a rejected call did not run.
fn rejection(agent: Agent, e: &GuardrailEvaluation) -> String {
    let by = e.guardrail.split_once(':').map_or("the CLI", |(_, s)| s);
    format!(
        "rejected by {by} ({} tool_decision: {}); the call did not run",
        agent.name(),
        e.reason.as_deref().unwrap_or("reject")
    )
}

fn decision(c: &Ctx<'_>) -> Result<Option<Decision>, ()> {
    let a = c.a();
    let session = c.session().ok_or(())?.to_owned();
    let call = match c.agent {
        Agent::Codex => text(a, "call_id"),
        _ => text(a, "tool_use_id"),
    }
    .ok_or(())?
    .to_owned();
    let tool = match c.agent {
        Agent::Codex => codex_tool(a),
        _ => claude_tool(a),
    }
    .ok_or(())?;
    let raw = text(a, "decision").unwrap_or("");
    // A value of no known meaning is no evidence either way: counted, not recorded.
    let Some(verdict) = verdict_of(raw) else {
        return Ok(None);
    };
    let source = text(a, "source").unwrap_or("unknown").to_ascii_lowercase();
    let mut reason = format!("{raw} ({source}");
    if let Some(m) = text(a, "permission_mode") {
        reason.push_str(&format!(", permission mode {m}"));
    }
    reason.push(')');
    let evaluation = GuardrailEvaluation {
        guardrail: cap_str(&format!("{}:{source}", c.agent.name())),
        version: None,
        verdict,
        reason: Some(cap_str(&reason)),
    };
    let args = match c.agent {
        Agent::Codex => json_attr(a, "arguments").unwrap_or(Value::Null),
        _ => claude_args(a),
    };
    let mut event = c.event(&session, &tool, args, Some(&call));
    event.policy_evaluation = vec![evaluation.clone()];
    event.effects = Some(Effects {
        error: Some(rejection(c.agent, &evaluation)),
        ..Effects::default()
    });
    Ok(Some(Decision {
        agent: c.agent,
        session,
        call,
        evaluation,
        event,
    }))
}

fn claude_result(c: &Ctx<'_>) -> Result<ToolResult, ()> {
    let a = c.a();
    let session = c.session().ok_or(())?.to_owned();
    let call = text(a, "tool_use_id").ok_or(())?.to_owned();
    let tool = claude_tool(a).ok_or(())?;
    let args = claude_args(a);
    let mut ev = c.event(&session, &tool, args.clone(), Some(&call));
    started(&mut ev, a);
    let execution = execution(c.agent, &tool, &args);
    let error = (flag(a, "success") == Some(false)).then(|| {
        with_type(text(a, "error_type"), text(a, "error"))
            .unwrap_or_else(|| "the tool reported a failure".into())
    });
    ev.effects = Some(effects(
        &tool,
        Some(&execution),
        error,
        Value::Null,
        external(a),
    ));
    ev.execution = Some(execution);
    Ok(ToolResult {
        agent: c.agent,
        session,
        call: CallName::Id(call),
        event: ev,
    })
}

fn codex_result(c: &Ctx<'_>) -> Result<ToolResult, ()> {
    let a = c.a();
    let session = c.session().ok_or(())?.to_owned();
    let call = text(a, "call_id").ok_or(())?.to_owned();
    let tool = codex_tool(a).ok_or(())?;
    let args = json_attr(a, "arguments").unwrap_or(Value::Null);
    let mut ev = c.event(&session, &tool, args.clone(), Some(&call));
    started(&mut ev, a);
    let execution = execution(c.agent, &tool, &args);
    let output = text(a, "output").unwrap_or("");
    // `success` is "true" for a command that exited 1: the status is in the output.
    let error = match exit_status_in_text(output).filter(|s| *s != 0) {
        Some(s) => Some(format!("exit status {s}")),
        None => (flag(a, "success") == Some(false)).then(|| "the tool reported a failure".into()),
    };
    let out = match get(a, "output") {
        Some(Av::StringValue(s)) => Value::String(s.clone()),
        _ => Value::Null,
    };
    ev.effects = Some(effects(&tool, Some(&execution), error, out, external(a)));
    ev.execution = Some(execution);
    Ok(ToolResult {
        agent: c.agent,
        session,
        call: CallName::Id(call),
        event: ev,
    })
}

fn gemini_result(c: &Ctx<'_>) -> Result<ToolResult, ()> {
    let a = c.a();
    let session = c.session().ok_or(())?.to_owned();
    let tool = text(a, "function_name").ok_or(())?.to_owned();
    // Pretty JSON text: parsed, so that the content id is the hook's (serde_json's text).
    let args = json_attr(a, "function_args").unwrap_or(Value::Null);
    let content = afr_core::agent::content_id(&tool, &args);
    let record = {
        use sha2::Digest;
        let mut h = hex::encode(sha2::Sha256::digest(c.r.encode_to_vec()));
        h.truncate(32);
        h
    };
    let mut ev = c.event(&session, &tool, args.clone(), None);
    started(&mut ev, a);
    let kind = text(a, "error_type").or_else(|| text(a, "error.type"));
    let message = text(a, "error").or_else(|| text(a, "error.message"));
    let decided = text(a, "decision");
    let denied = decided.and_then(verdict_of) == Some(GuardrailVerdict::Deny);
    let blocked = kind == Some("policy_violation");
    if let Some(d) = decided
        && let Some(verdict) = verdict_of(d)
    {
        ev.policy_evaluation.push(GuardrailEvaluation {
            guardrail: "gemini:approval".into(),
            version: None,
            verdict,
            reason: Some(cap_str(d)),
        });
    }
    if blocked {
        ev.policy_evaluation.push(GuardrailEvaluation {
            guardrail: "gemini:policy".into(),
            version: None,
            verdict: GuardrailVerdict::Deny,
            reason: message.map(cap_str),
        });
    }
    let exit = json_attr(a, "metadata")
        .and_then(|m| m.get("exitCode").and_then(Value::as_i64))
        .filter(|s| *s != 0);
    let mut error = with_type(kind, message);
    if error.is_none()
        && let Some(s) = exit
    {
        error = Some(format!("exit status {s}"));
    }
    if error.is_none() && flag(a, "success") == Some(false) {
        error = Some("the tool reported a failure".into());
    }
    let execution = if denied || blocked {
        error = Some(format!(
            "{}; the call did not run",
            error.as_deref().unwrap_or("rejected")
        ));
        None
    } else {
        Some(execution(c.agent, &tool, &args))
    };
    ev.effects = Some(effects(
        &tool,
        execution.as_ref(),
        error,
        Value::Null,
        external(a),
    ));
    ev.execution = execution;
    Ok(ToolResult {
        agent: c.agent,
        session,
        call: CallName::Unnamed { content, record },
        event: ev,
    })
}

fn result(t: ToolResult) -> Option<ToolRecord> {
    Some(ToolRecord::Result(Box::new(t)))
}

/// The tool records of an export, in order, and what it held.
pub fn map_logs(req: &ExportLogsServiceRequest) -> (Vec<ToolRecord>, LogSummary) {
    let mut summary = LogSummary::default();
    let mut out = Vec::new();
    for rl in &req.resource_logs {
        let resource = rl.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
        for sl in &rl.scope_logs {
            for r in &sl.log_records {
                summary.records += 1;
                let Some((agent, name)) = identify(r, resource) else {
                    *summary.ignored.entry("other".into()).or_default() += 1;
                    continue;
                };
                let c = Ctx {
                    agent,
                    r,
                    resource,
                    scope: sl.scope.as_ref(),
                };
                let mapped = match (agent, name) {
                    (Agent::ClaudeCode | Agent::Codex, "tool_decision") => {
                        summary.decisions += 1;
                        match decision(&c) {
                            Ok(Some(d)) => Ok(Some(ToolRecord::Decision(Box::new(d)))),
                            Ok(None) => {
                                let k =
                                    format!("{}tool_decision (unknown decision)", prefix(agent));
                                *summary.ignored.entry(k).or_default() += 1;
                                Ok(None)
                            }
                            Err(()) => Err(()),
                        }
                    }
                    (Agent::ClaudeCode, "tool_result") => claude_result(&c).map(result),
                    (Agent::Codex, "tool_result") => codex_result(&c).map(result),
                    (Agent::Gemini, "tool_call") => gemini_result(&c).map(result),
                    _ => {
                        let k = cap_str(&format!("{}{name}", prefix(agent)));
                        *summary.ignored.entry(k).or_default() += 1;
                        continue;
                    }
                };
                match mapped {
                    Ok(Some(ToolRecord::Result(t))) => {
                        *summary.results.entry(agent.name().into()).or_default() += 1;
                        out.push(ToolRecord::Result(t));
                    }
                    Ok(Some(t)) => out.push(t),
                    Ok(None) => {}
                    Err(()) => summary.malformed += 1,
                }
            }
        }
    }
    (out, summary)
}

/// Folds a decision on the call into its result's event: a policy evaluation (first); a
/// rejection also means the call did not run, whatever the result says.
pub fn fold(event: &mut EventInput, d: &Decision) {
    if event.policy_evaluation.contains(&d.evaluation) {
        return;
    }
    event.policy_evaluation.insert(0, d.evaluation.clone());
    if d.rejects() {
        event.execution = None;
        let why = rejection(d.agent, &d.evaluation);
        let e = event.effects.get_or_insert_with(Effects::default);
        e.state_changes.clear();
        e.error = Some(match e.error.take() {
            Some(was) => cap_str(&format!("{why}: {was}")),
            None => why,
        });
    }
}

#[cfg(test)]
#[path = "logs_tests.rs"]
mod tests;
