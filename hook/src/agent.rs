//! The coding-agent CLIs the hooks know.

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
    /// paired by order, see [`crate::session`]).
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

#[cfg(test)]
mod tests {
    use super::*;

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
