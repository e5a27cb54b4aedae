//! Coding agents recorded without code changes: the hook command that Claude Code, Codex and
//! Gemini CLI run before and after every tool call (`afr hook <agent>`).
//!
//! The CLIs run their consequential actions (shell commands, file writes and edits) as native
//! tools that pass through neither MCP nor OTLP traces. Each CLI runs a configured command
//! before a tool runs (it may block the call) and after it ran, with the call as JSON on
//! standard input. `afr hook` is that command:
//!
//! - **Before** (`PreToolUse`, Gemini `BeforeTool`): the policy file of the MCP gateway
//!   (`docs/gateway.md`) is evaluated on the tool's name and arguments; an allowed call's event
//!   as known so far (intent, execution, evaluation, provenance) is made durable in the hook
//!   journal ([`afr_client::journal::HOOK`]) *before* the hook answers allow; a denied call is
//!   recorded complete and blocked; an escalated one is held for `afr approve` / `afr reject`
//!   (signed approvals as in the gateway), then allowed or blocked.
//! - **After** (`PostToolUse`, `PostToolUseFailure`, Gemini `AfterTool`): the journaled event
//!   gets its effects (output, exit status, error) and goes to the recorder as one event under
//!   the call's idempotency key ([`key`]); the journal entry is removed. A call whose "after"
//!   never comes (the agent was killed) is recovered as "outcome unknown" by the next writer,
//!   `afr recover`, or the next session's `SessionStart` hook.
//! - **Prompts** (`UserPromptSubmit`, Gemini `BeforeAgent`): recorded as an event of their own
//!   (sealed like any payload); the calls that follow name it as a context source.
//!
//! Guarantees:
//!
//! - A call MUST NOT be answered "allow" before its intent is durable (the hook journal, synced
//!   with its name), unless `--fail-open`; a hook that cannot record blocks the call.
//! - A denied or rejected call MUST NOT be answered "allow"; it is recorded.
//! - An escalated call MUST NOT be answered "allow" before a human approved it and the approval
//!   is journaled with the call.
//!
//! User guide: `docs/coding-agents.md`.

pub mod event;
pub mod input;
mod pid;
pub mod remote;
pub mod run;
pub mod session;
pub mod setup;

pub use afr_core::agent::{Agent, key, tag};
pub use input::{Context, HookInput, Phase};
pub use run::{Answer, HookOptions, run};
