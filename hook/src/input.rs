//! What a CLI hands its hook on standard input, read into one shape for the three CLIs.
//!
//! Claude Code and Codex share event names and keys (`hook_event_name`, `session_id`, `cwd`,
//! `tool_name`, `tool_input`, `tool_use_id`, `tool_response`, `error`, `prompt`); Gemini CLI
//! names its events `BeforeTool`/`AfterTool`/`BeforeAgent` and carries no tool-call id. Keys
//! the hook does not use are ignored (the CLIs add keys between versions); a payload without
//! an event name or a session is refused.

use serde_json::{Map, Value};

use crate::Agent;

/// Which moment of the agent's work a hook runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before a tool runs: `PreToolUse`, `BeforeTool`. The hook may block the call.
    BeforeTool,
    /// After a tool ran: `PostToolUse`, `AfterTool`.
    AfterTool,
    /// After a tool failed: `PostToolUseFailure`.
    AfterToolFailure,
    /// The user submitted a prompt: `UserPromptSubmit`, `BeforeAgent`.
    Prompt,
    /// Claude Code asks whether a call may run: `PermissionRequest`.
    Permission,
    /// Claude Code's permission prompt refused a call: `PermissionDenied`. It did not run.
    PermissionDenied,
    /// A session starts: `SessionStart`.
    SessionStart,
    /// A session ends: `SessionEnd`.
    SessionEnd,
    /// A subagent starts: `SubagentStart`.
    SubagentStart,
    /// A subagent stopped: `SubagentStop`.
    SubagentStop,
    /// Any other event (`Stop`, `Notification`, `PreCompact`, …): nothing to record.
    Other,
}

impl Phase {
    /// The phase of the CLI's event name.
    pub fn of(agent: Agent, name: &str) -> Phase {
        match (agent, name) {
            (Agent::Gemini, "BeforeTool") | (_, "PreToolUse") => Phase::BeforeTool,
            (Agent::Gemini, "AfterTool") | (_, "PostToolUse") => Phase::AfterTool,
            (_, "PostToolUseFailure") => Phase::AfterToolFailure,
            (Agent::Gemini, "BeforeAgent") | (_, "UserPromptSubmit") => Phase::Prompt,
            (_, "PermissionRequest") => Phase::Permission,
            (_, "PermissionDenied") => Phase::PermissionDenied,
            (_, "SessionStart") => Phase::SessionStart,
            (_, "SessionEnd") => Phase::SessionEnd,
            (_, "SubagentStart") => Phase::SubagentStart,
            (_, "SubagentStop") => Phase::SubagentStop,
            _ => Phase::Other,
        }
    }

    /// Whether the phase is about one tool call.
    pub fn is_tool(self) -> bool {
        matches!(
            self,
            Phase::BeforeTool
                | Phase::AfterTool
                | Phase::AfterToolFailure
                | Phase::Permission
                | Phase::PermissionDenied
        )
    }
}

/// A hook's input.
#[derive(Debug, Clone, PartialEq)]
pub struct HookInput {
    /// The phase.
    pub phase: Phase,
    /// The CLI's event name, as sent.
    pub event_name: String,
    /// The session id.
    pub session: String,
    /// The agent's working directory.
    pub cwd: Option<String>,
    /// The tool's name (tool phases).
    pub tool: Option<String>,
    /// The tool's arguments (`Null` if absent).
    pub tool_input: Value,
    /// The tool-call id (Claude Code `tool_use_id`, Codex the call id); Gemini has none.
    pub call_id: Option<String>,
    /// The tool's result as the CLI reports it (`Null` if absent).
    pub response: Value,
    /// The error of a failed call.
    pub error: Option<String>,
    /// Whether the user interrupted the call.
    pub interrupted: bool,
    /// The prompt (prompt phase).
    pub prompt: Option<String>,
    /// The model, where the payload names one.
    pub model: Option<String>,
    /// The MCP server of an MCP tool, as the CLI names it (Claude Code `mcp_server.name`,
    /// Gemini CLI `mcp_context.server_name`).
    pub mcp_server: Option<String>,
    /// The subagent's id, when the hook runs inside one.
    pub agent_id: Option<String>,
    /// The subagent's type.
    pub agent_type: Option<String>,
    /// How long the tool ran, in milliseconds, where the CLI says.
    pub duration_ms: Option<u64>,
    /// The whole payload.
    pub raw: Map<String, Value>,
    /// What the hook's process knows beyond the payload.
    pub context: Context,
}

/// What a hook knows from its process rather than its input: who runs it, its environment.
/// Computed where the hook runs ([`Context::of_this_process`]), and sent along when the thin
/// client hands the input to `afr serve`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Context {
    /// The agent CLI's process: its death makes the call's journal entry an orphan.
    pub owner_pid: u32,
    /// `TRACEPARENT` (Claude Code with `CLAUDE_CODE_PROPAGATE_TRACEPARENT=1`).
    #[serde(default)]
    pub traceparent: Option<String>,
    /// The CLI's version (`AFR_AGENT_VERSION`, else the CLI's own variable).
    #[serde(default)]
    pub agent_version: Option<String>,
}

impl Context {
    /// This process's context: its agent ([`agent_pid`]) and environment.
    pub fn of_this_process(agent: Agent) -> Context {
        let env = |names: &[&str]| {
            names
                .iter()
                .find_map(|v| std::env::var(v).ok())
                .filter(|v| !v.is_empty() && v.len() <= 128)
        };
        Context {
            owner_pid: agent_pid(),
            traceparent: env(&["TRACEPARENT"]),
            agent_version: env(match agent {
                Agent::ClaudeCode => &["AFR_AGENT_VERSION", "CLAUDE_CODE_VERSION"],
                Agent::Codex => &["AFR_AGENT_VERSION", "CODEX_VERSION"],
                Agent::Gemini => &["AFR_AGENT_VERSION", "GEMINI_CLI_VERSION"],
            })
            .filter(|v| v.len() <= 64),
        }
    }
}

pub use crate::pid::agent_pid;

/// Why a hook's input cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Not a JSON object.
    #[error("the hook input is not a JSON object: {0}")]
    NotJson(String),
    /// A required key is missing or has the wrong type.
    #[error("the hook input has no {0}")]
    Missing(&'static str),
}

fn text(m: &Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| m.get(*k).and_then(Value::as_str))
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Reads `bytes`, the JSON a CLI sent its hook.
pub fn parse(agent: Agent, bytes: &[u8]) -> Result<HookInput, InputError> {
    let m = match serde_json::from_slice(bytes) {
        Ok(Value::Object(m)) => m,
        Ok(_) => return Err(InputError::NotJson("not an object".into())),
        Err(e) => return Err(InputError::NotJson(e.to_string())),
    };
    let event_name =
        text(&m, &["hook_event_name"]).ok_or(InputError::Missing("hook_event_name"))?;
    let phase = Phase::of(agent, &event_name);
    let session = text(&m, &["session_id", "sessionId", "thread_id"])
        .ok_or(InputError::Missing("session_id"))?;
    let tool = text(&m, &["tool_name"]);
    if phase.is_tool() && tool.is_none() {
        return Err(InputError::Missing("tool_name"));
    }
    let response = m
        .get("tool_response")
        .or_else(|| m.get("tool_output"))
        .cloned()
        .unwrap_or(Value::Null);
    let error = match m.get("error") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Object(o)) => o
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| Some(Value::Object(o.clone()).to_string())),
        _ => None,
    };
    Ok(HookInput {
        phase,
        event_name,
        session,
        cwd: text(&m, &["cwd"]),
        tool_input: m.get("tool_input").cloned().unwrap_or(Value::Null),
        call_id: text(&m, &["tool_use_id", "call_id", "tool_call_id"]),
        tool,
        response,
        error,
        interrupted: m.get("is_interrupt").and_then(Value::as_bool) == Some(true),
        prompt: text(&m, &["prompt", "user_prompt"]),
        model: text(&m, &["model"]).or_else(|| {
            m.get("model")
                .and_then(|v| v.get("id").or_else(|| v.get("name")))
                .and_then(Value::as_str)
                .map(str::to_owned)
        }),
        mcp_server: m
            .get("mcp_server")
            .and_then(|s| s.get("name").or(Some(s)))
            .or_else(|| m.get("mcp_context").and_then(|c| c.get("server_name")))
            .and_then(Value::as_str)
            .map(str::to_owned),
        agent_id: text(&m, &["agent_id"]),
        agent_type: text(&m, &["agent_type", "subagent_type"]),
        duration_ms: m.get("duration_ms").and_then(Value::as_u64),
        raw: m,
        context: Context::default(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn claude_pre_tool_use() {
        let i = parse(
            Agent::ClaudeCode,
            br#"{"session_id":"s1","transcript_path":"/t","cwd":"/w","permission_mode":"default",
                "hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},
                "tool_use_id":"toolu_1","future_key":1}"#,
        )
        .unwrap();
        assert_eq!(i.phase, Phase::BeforeTool);
        assert_eq!(i.tool.as_deref(), Some("Bash"));
        assert_eq!(i.call_id.as_deref(), Some("toolu_1"));
        assert_eq!(i.tool_input["command"], "ls");
    }

    #[test]
    fn gemini_names_and_refusals() {
        let i = parse(
            Agent::Gemini,
            br#"{"session_id":"g","hook_event_name":"AfterTool","tool_name":"run_shell_command",
                "tool_input":{"command":"ls"},"tool_response":{"llmContent":"x"}}"#,
        )
        .unwrap();
        assert_eq!(i.phase, Phase::AfterTool);
        assert_eq!(i.call_id, None);
        assert!(matches!(
            parse(Agent::Gemini, b"[1]"),
            Err(InputError::NotJson(_))
        ));
        assert!(matches!(
            parse(
                Agent::Codex,
                br#"{"hook_event_name":"PreToolUse","session_id":"s"}"#
            ),
            Err(InputError::Missing("tool_name"))
        ));
        assert!(matches!(
            parse(Agent::Codex, br#"{"hook_event_name":"Stop"}"#),
            Err(InputError::Missing("session_id"))
        ));
    }
}
