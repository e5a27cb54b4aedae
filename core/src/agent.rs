//! The coding-agent CLIs AFR captures (`afr hook`, and `afr otlp` for their OTel logs), and the
//! names both give one tool call, so that a call seen by a hook and by an OTLP log record is
//! recorded once (`docs/coding-agents.md`).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::Category;

/// A coding-agent CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Agent {
    /// Anthropic's Claude Code (`claude`).
    ClaudeCode,
    /// OpenAI's Codex CLI (`codex`).
    Codex,
    /// Google's Gemini CLI (`gemini`).
    Gemini,
}

impl Agent {
    /// Every agent.
    pub const ALL: [Agent; 3] = [Agent::ClaudeCode, Agent::Codex, Agent::Gemini];

    /// The name on the command line and in records: `claude-code`, `codex`, `gemini`.
    pub const fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
        }
    }

    /// The agent named `s` ([`Agent::name`]).
    pub fn from_name(s: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.name() == s)
    }

    /// The capturing component recorded in `code_provenance.capture.via`.
    pub const fn via(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "hook:claude-code",
            Agent::Codex => "hook:codex",
            Agent::Gemini => "hook:gemini",
        }
    }

    /// Whether the CLI's hook payloads carry a tool-call id (Gemini's do not: its calls are
    /// paired by content and rank, see [`ranked`]).
    pub const fn has_call_ids(self) -> bool {
        !matches!(self, Agent::Gemini)
    }

    /// The MCP server and tool of a tool name, if it names an MCP tool: `mcp__S__T` (Claude
    /// Code, Codex) or `mcp_S_T` (Gemini, where the server name may not contain `_`).
    pub fn mcp_tool(self, tool: &str) -> Option<(&str, &str)> {
        match self {
            Agent::ClaudeCode | Agent::Codex => {
                let rest = tool.strip_prefix("mcp__")?;
                let (s, t) = rest.split_once("__")?;
                (!s.is_empty() && !t.is_empty()).then_some((s, t))
            }
            Agent::Gemini => {
                let rest = tool.strip_prefix("mcp_")?;
                let (s, t) = rest.split_once('_')?;
                (!s.is_empty() && !t.is_empty()).then_some((s, t))
            }
        }
    }
}

impl std::fmt::Display for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The idempotency key of a tool call: `hook:<agent>:` + the first 40 hex digits of
/// SHA-256(`session` + `"\n"` + `call`). Computed the same way by the OTLP receiver from a log
/// record's session and call ids, so that a call seen by both is recorded once.
pub fn key(agent: Agent, session: &str, call: &str) -> String {
    format!("hook:{}:{}", agent.name(), tag(session, call))
}

/// The hex part of [`key`]: names the call's journal entry.
pub fn tag(session: &str, call: &str) -> String {
    let mut h = Sha256::new();
    h.update(session.as_bytes());
    h.update(b"\n");
    h.update(call.as_bytes());
    let mut t = hex::encode(h.finalize());
    t.truncate(40);
    t
}

/// The kind of a native tool, or of an MCP tool (`api`).
pub fn category(agent: Agent, tool: &str) -> Category {
    if agent.mcp_tool(tool).is_some() {
        return Category::Api;
    }
    match tool {
        "Bash" | "BashOutput" | "KillShell" | "shell" | "exec_command" | "local_shell"
        | "unified_exec" | "run_shell_command" => Category::Shell,
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" | "apply_patch" | "write_file"
        | "replace" | "edit" => Category::File,
        "Read"
        | "Glob"
        | "Grep"
        | "LS"
        | "WebFetch"
        | "WebSearch"
        | "read_file"
        | "read_many_files"
        | "glob"
        | "search_file_content"
        | "grep"
        | "list_directory"
        | "web_fetch"
        | "google_web_search"
        | "view_image" => Category::Retrieval,
        "Task" | "Agent" | "spawn_agent" => Category::Delegation,
        _ => Category::Other,
    }
}

/// The shell command of a shell tool's arguments, as the CLIs send it: `command` (or Codex's
/// `cmd`) as a string, or an argv array joined with spaces; a `bash -lc <script>` argv gives
/// the script. The hooks and the OTLP receiver both record it as `execution.command`.
pub fn shell_command(args: &Value) -> Option<String> {
    match args.get("command").or_else(|| args.get("cmd"))? {
        Value::String(s) => Some(s.clone()),
        Value::Array(a) => {
            let argv: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
            match argv.as_slice() {
                [sh, flag, script]
                    if flag.starts_with('-') && flag.ends_with('c') && sh.ends_with("sh") =>
                {
                    Some((*script).to_owned())
                }
                _ => Some(argv.join(" ")),
            }
        }
        _ => None,
    }
}

/// The number after the first of `prefixes` that starts a line of `text` (trimmed): how the
/// CLIs report a command's exit status inside its output (`Exit code: 1`).
pub fn exit_status_line(text: &str, prefixes: &[&str]) -> Option<i64> {
    text.lines().find_map(|l| {
        let l = l.trim();
        let rest = prefixes.iter().find_map(|p| l.strip_prefix(p))?;
        rest.trim().parse().ok()
    })
}

/// A lane from a session (and subagent) id: as it is when it fits the 64-byte limit, else
/// `h:` and 40 hex digits of its SHA-256.
pub fn lane(session: &str, subagent: Option<&str>) -> String {
    let l = match subagent {
        Some(a) => format!("{session}/{a}"),
        None => session.to_owned(),
    };
    if l.len() <= crate::record::MAX_LANE_LEN {
        l
    } else {
        let mut h = hex::encode(Sha256::digest(l.as_bytes()));
        h.truncate(40);
        format!("h:{h}")
    }
}

/// What names a Gemini call with no id: 16 hex digits of SHA-256 over the tool's name and its
/// arguments' JSON text (serde_json's, keys in order).
pub fn content_id(tool: &str, args: &Value) -> String {
    let mut h = Sha256::new();
    h.update(tool.as_bytes());
    h.update(b"\n");
    h.update(args.to_string().as_bytes());
    let mut t = hex::encode(h.finalize());
    t.truncate(16);
    t
}

/// The call name of the `k`-th call (from 0) of content `content` in a session.
pub fn ranked(content: &str, k: u64) -> String {
    format!("#{content}/{k}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lanes_are_hashed() {
        assert_eq!(lane("s", Some("a")), "s/a");
        let l = lane(&"x".repeat(80), None);
        assert!(l.starts_with("h:") && l.len() == 42, "{l}");
    }

    #[test]
    fn keys_fit_the_recorders_limit() {
        let k = key(Agent::ClaudeCode, &"s".repeat(500), &"c".repeat(500));
        assert!(k.len() <= 64, "{k}");
        assert_eq!(
            k,
            key(Agent::ClaudeCode, &"s".repeat(500), &"c".repeat(500))
        );
        assert_ne!(
            key(Agent::Codex, "s", "c"),
            key(Agent::ClaudeCode, "s", "c")
        );
    }

    #[test]
    fn mcp_names() {
        assert_eq!(
            Agent::ClaudeCode.mcp_tool("mcp__fs__read_file"),
            Some(("fs", "read_file"))
        );
        assert_eq!(Agent::Codex.mcp_tool("mcp__fs__"), None);
        assert_eq!(Agent::Codex.mcp_tool("Bash"), None);
        assert_eq!(
            Agent::Gemini.mcp_tool("mcp_fs_read_file"),
            Some(("fs", "read_file"))
        );
        assert_eq!(Agent::Gemini.mcp_tool("run_shell_command"), None);
        for a in Agent::ALL {
            assert_eq!(Agent::from_name(a.name()), Some(a));
        }
    }
}
