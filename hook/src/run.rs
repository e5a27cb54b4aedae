//! One hook invocation: read the CLI's JSON, decide, record, answer.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use afr_client::{Door, DoorError, NoServer, journal};
use afr_core::{
    EventInput,
    event::{Capture, Effects, GuardrailEvaluation, GuardrailVerdict, HumanApproval},
};
use afr_gateway::{
    approvals::{self, Decision, PendingCall, Ruling},
    gate::{SIGNED_APPROVAL_GUARDRAIL, SignatureRefused, action_of, check_signed_approval},
    policy::{Call, Evaluation, Policy},
};
use afr_recorder::now_us;
use serde_json::{Value, json};

use crate::{
    Agent, HookInput, Phase,
    event::{self, capped, sha256},
    input, session,
};

/// How long an escalated call waits for a decision by default: under the hook timeout that
/// `afr setup` writes ([`HOOK_TIMEOUT`]), so the hook always answers before the CLI gives up
/// on it.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(240);
/// The hook timeout `afr setup` configures for the pre-tool hook, in seconds.
pub const HOOK_TIMEOUT: u64 = 300;
/// How often a held call looks for a decision.
const POLL: Duration = Duration::from_millis(50);

/// How a hook runs.
#[derive(Debug, Clone)]
pub struct HookOptions {
    /// The recorder directory.
    pub dir: PathBuf,
    /// The CLI.
    pub agent: Agent,
    /// The policy; without one every call is allowed (and no evaluation is recorded).
    pub policy: Option<Policy>,
    /// Allow calls that cannot be recorded, with a warning (default: block them).
    pub fail_open: bool,
    /// How long an escalated call waits for `afr approve` / `afr reject`.
    pub approval_timeout: Duration,
    /// The MCP servers (by the CLI's name for them; `*`: all) whose calls `afr mcp wrap`
    /// records and guards in front of them: the hook leaves their tools alone (else each call
    /// would be recorded twice).
    pub mcp_wrapped: Vec<String>,
    /// What to do when no `afr serve` answers.
    pub no_server: NoServer,
    /// The recorder itself, when the hook runs inside `afr serve` (handed over by the thin
    /// client, [`crate::remote`]); else the hook reaches it through its door.
    pub recorder: Option<std::sync::Arc<afr_recorder::Recorder>>,
    /// The hook process's context.
    pub context: crate::input::Context,
}

/// What the hook answers the CLI: its exit status and what it prints.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Answer {
    /// 0 lets the call (or event) go on; 2 blocks a call, in all three CLIs.
    pub code: u8,
    /// Standard output (JSON for the CLI, or nothing: Claude Code adds a prompt hook's output
    /// to the model's context, and ignores a JSON answer with any key it does not know).
    pub stdout: String,
    /// Standard error (the reason of a block, shown to the model; warnings).
    pub stderr: String,
}

impl Answer {
    fn go_on() -> Answer {
        Answer {
            code: 0,
            stdout: String::new(),
            stderr: String::new(),
        }
    }

    fn warn(m: impl Into<String>) -> Answer {
        Answer {
            stderr: m.into(),
            ..Answer::go_on()
        }
    }

    /// Blocks the call: exit status 2 with the reason on standard error, the one answer all
    /// three CLIs take as "do not run it".
    fn block(reason: impl Into<String>) -> Answer {
        Answer {
            code: 2,
            stdout: String::new(),
            stderr: reason.into(),
        }
    }
}

/// Runs one hook on the CLI's input `stdin`.
pub fn run(o: &HookOptions, stdin: &[u8]) -> Answer {
    let input = match input::parse(o.agent, stdin) {
        Ok(mut i) => {
            i.context = o.context.clone();
            i
        }
        // Unreadable input may be a tool call: blocked unless failing open.
        Err(e) if o.fail_open => {
            return Answer::warn(format!("afr hook: {e}; allowed (--fail-open)"));
        }
        Err(e) => {
            return Answer::block(format!(
                "afr hook: {e}; blocked (the call cannot be recorded)"
            ));
        }
    };
    let h = Hook { o, input: &input };
    match input.phase {
        Phase::BeforeTool => h.before(),
        Phase::AfterTool | Phase::AfterToolFailure => h.after(),
        Phase::Prompt => h.prompt(),
        Phase::Permission => h.permission(),
        Phase::PermissionDenied => h.permission_denied(),
        Phase::SessionStart => h.session_start(),
        Phase::SubagentStart => h.subagent_start(),
        Phase::SessionEnd | Phase::SubagentStop | Phase::Other => Answer::go_on(),
    }
}

struct Hook<'a> {
    o: &'a HookOptions,
    input: &'a HookInput,
}

/// A call's names: its idempotency key and its journal entry's tag.
struct Names {
    key: String,
    tag: String,
}

impl Hook<'_> {
    fn agent(&self) -> Agent {
        self.o.agent
    }

    fn tool(&self) -> &str {
        self.input.tool.as_deref().unwrap_or_default()
    }

    fn names_of(&self, call: &str) -> Names {
        Names {
            key: crate::key(self.agent(), &self.input.session, call),
            tag: crate::tag(&self.input.session, call),
        }
    }

    /// The content id of a call without an id (Gemini), see [`session`].
    fn content(&self) -> String {
        session::content_id(self.tool(), &self.input.tool_input)
    }

    /// An MCP tool of a server behind `afr mcp wrap`: the gateway records and guards it.
    fn leave_alone(&self) -> bool {
        let Some((parsed, _)) = self.agent().mcp_tool(self.tool()) else {
            return false;
        };
        // The payload's own server name where it gives one (Gemini's `mcp_S_T` cannot be split
        // when S holds `_`); else a wrapped name the tool name starts with.
        let tool = self.tool();
        self.o.mcp_wrapped.iter().any(|w| {
            w == "*"
                || match self.input.mcp_server.as_deref() {
                    // The payload names the server: only that counts.
                    Some(server) => server == w,
                    None => {
                        w == parsed
                            || tool.starts_with(&format!("mcp__{w}__"))
                            || (self.agent() == Agent::Gemini
                                && tool.starts_with(&format!("mcp_{w}_")))
                    }
                }
        })
    }

    fn evaluate(&self) -> Option<Evaluation> {
        let mcp = self.agent().mcp_tool(self.tool());
        self.o.policy.as_ref().map(|p| {
            p.evaluate(&Call {
                tool: self.tool(),
                args: &self.input.tool_input,
                // The payload's own server name where it gives one (Gemini's `mcp_S_T` cannot
                // be split when S holds `_`).
                server_name: Some(
                    self.input
                        .mcp_server
                        .as_deref()
                        .unwrap_or_else(|| mcp.map_or(self.agent().name(), |(s, _)| s)),
                ),
                command_line: self.agent().name(),
            })
        })
    }

    fn door(&self) -> Result<Door, DoorError> {
        match &self.o.recorder {
            Some(r) => Ok(Door::of_recorder(&self.o.dir, r.clone())),
            None => Door::for_producer(&self.o.dir, &self.o.no_server),
        }
    }

    /// A call that cannot be recorded: blocked, or allowed with a warning under `--fail-open`.
    /// `may_open`: whether `--fail-open` may let it run (never an escalated call: it runs only
    /// once its approval is journaled).
    fn unrecorded(&self, why: &str, may_open: bool) -> Answer {
        if self.o.fail_open && may_open {
            Answer::warn(format!(
                "afr hook: the call of `{}` runs unrecorded (--fail-open): {why}",
                self.tool()
            ))
        } else {
            Answer::block(format!(
                "afr hook: blocked: the call of `{}` could not be recorded ({why}). Start `afr serve`, or fix the recorder; `afr hook --fail-open` allows calls that cannot be recorded.",
                self.tool()
            ))
        }
    }

    fn record(&self, door: &mut Door, event: &EventInput, key: &str) -> Result<u64, DoorError> {
        door.submit(event, key).and_then(afr_client::Ticket::settle)
    }

    fn before(&self) -> Answer {
        if self.leave_alone() {
            return Answer::go_on();
        }
        let eval = self.evaluate();
        let verdict = eval.as_ref().map_or(GuardrailVerdict::Allow, |e| e.verdict);
        let mut door = match self.door() {
            Ok(d) => d,
            Err(e) => {
                if verdict == GuardrailVerdict::Deny {
                    return self.denied_answer(eval.as_ref());
                }
                return self.unrecorded(
                    &format!("the recorder cannot be reached: {e}"),
                    verdict != GuardrailVerdict::Escalate,
                );
            }
        };
        let names = match self.claim_names() {
            Ok(n) => n,
            Err(e) => {
                return self.unrecorded(
                    &format!("the session file: {e}"),
                    verdict != GuardrailVerdict::Escalate,
                );
            }
        };
        // A call that starts a subagent: the subagent's calls name it.
        if afr_core::agent::category(self.agent(), self.tool()) == afr_core::Category::Delegation
            && let (Some(id), Ok(mut l)) = (
                &self.input.call_id,
                session::lock(&self.o.dir, self.agent(), &self.input.session),
            )
        {
            l.state.delegating = Some((self.tool().to_owned(), id.clone()));
            let _ = l.save(false);
        }
        let state = session::read(&self.o.dir, self.agent(), &self.input.session);
        let inline = Capture::inline(self.agent().via());
        match verdict {
            GuardrailVerdict::Allow | GuardrailVerdict::Warn => {
                let ev = event::call_event(
                    self.agent(),
                    self.input,
                    &state,
                    eval.as_ref(),
                    true,
                    inline,
                );
                if let Err(e) = self.journal(&names, &ev, false) {
                    return self.unrecorded(&format!("the hook journal: {e}"), true);
                }
                match eval.filter(|e| e.verdict == GuardrailVerdict::Warn) {
                    Some(e) => Answer::warn(format!(
                        "afr: warning by policy rule `{}`: {}",
                        e.guardrail,
                        e.reason.as_deref().unwrap_or("no reason given")
                    )),
                    None => Answer::go_on(),
                }
            }
            GuardrailVerdict::Deny => {
                let mut ev = event::call_event(
                    self.agent(),
                    self.input,
                    &state,
                    eval.as_ref(),
                    false,
                    inline,
                );
                let answer = self.denied_answer(eval.as_ref());
                ev.effects = Some(error_effects(&answer.stderr));
                if let Err(e) = self.record(&mut door, &ev, &names.key) {
                    return Answer::block(format!(
                        "{} (and the denial could not be recorded: {e})",
                        answer.stderr
                    ));
                }
                answer
            }
            GuardrailVerdict::Escalate => {
                let Some(e) = eval else {
                    return Answer::go_on();
                };
                self.hold(&mut door, &names, &state, e)
            }
        }
    }

    fn denied_answer(&self, eval: Option<&Evaluation>) -> Answer {
        let (rule, reason) = eval.map_or(("default", "no reason given"), |e| {
            (
                e.guardrail.as_str(),
                e.reason.as_deref().unwrap_or("no reason given"),
            )
        });
        Answer::block(format!(
            "afr: denied by policy rule `{rule}`: {reason}; the call did not run"
        ))
    }

    /// The names of the call a before-hook sees: from its id, or (Gemini) its content and
    /// rank, counted in the session file (synced before the journal entry is written).
    fn claim_names(&self) -> std::io::Result<Names> {
        if let (true, Some(id)) = (self.agent().has_call_ids(), &self.input.call_id) {
            return Ok(self.names_of(id));
        }
        let content = self.content();
        let mut l = session::lock(&self.o.dir, self.agent(), &self.input.session)?;
        let n = l.state.started.entry(content.clone()).or_default();
        let k = *n;
        *n += 1;
        l.save(true)?;
        Ok(self.names_of(&session::ranked(&content, k)))
    }

    /// The journal entry of the call an after-hook reports, with its names: by id, or
    /// (Gemini) the lowest-ranked entry of the same content still journaled.
    fn find_entry(&self) -> (Names, Option<(PathBuf, String, Value)>) {
        if let (true, Some(id)) = (self.agent().has_call_ids(), &self.input.call_id) {
            let n = self.names_of(id);
            let found = journal::find_one(&self.o.dir, journal::HOOK, &n.tag);
            return (n, found);
        }
        let content = self.content();
        let started = session::read(&self.o.dir, self.agent(), &self.input.session)
            .started
            .get(&content)
            .copied()
            .unwrap_or(0);
        for k in 0..started {
            let n = self.names_of(&session::ranked(&content, k));
            if let Some(found) = journal::find_one(&self.o.dir, journal::HOOK, &n.tag) {
                return (n, Some(found));
            }
        }
        // Seen after the fact only: a name of its own.
        (
            self.names_of(&format!("after/{content}/{}", now_us())),
            None,
        )
    }

    fn journal(&self, n: &Names, ev: &EventInput, complete: bool) -> std::io::Result<PathBuf> {
        journal::write_one(
            &self.o.dir,
            journal::HOOK,
            self.input.context.owner_pid,
            &n.tag,
            &n.key,
            ev,
            complete,
        )
    }

    fn after(&self) -> Answer {
        if self.leave_alone() {
            return Answer::go_on();
        }
        let (names, entry) = self.find_entry();
        let mut ev = match &entry {
            Some((_, key, ev)) => match parse_event(ev) {
                Ok(ev) => {
                    let _ = key;
                    ev
                }
                Err(e) => {
                    return Answer::warn(format!(
                        "afr hook: the journaled call is unreadable: {e}"
                    ));
                }
            },
            // No before-hook saw it (not configured, or it failed open): reported after the
            // fact, like an OTLP record.
            None => {
                let state = session::read(&self.o.dir, self.agent(), &self.input.session);
                event::call_event(
                    self.agent(),
                    self.input,
                    &state,
                    None,
                    true,
                    Capture::self_reported(self.agent().via()),
                )
            }
        };
        let key = entry
            .as_ref()
            .map_or(names.key.clone(), |(_, k, _)| k.clone());
        ev.effects = Some(event::effects(self.input, ev.execution.as_ref()));
        let recorded = self.door().and_then(|mut d| self.record(&mut d, &ev, &key));
        match recorded {
            Ok(_) => {
                if let Some((path, ..)) = &entry {
                    journal::remove_one(path);
                }
                Answer::go_on()
            }
            Err(e) => {
                // Kept whole in the journal: recovered as it is by the next writer.
                let n = Names {
                    key,
                    tag: names.tag,
                };
                match self.journal(&n, &ev, true) {
                    Ok(_) => Answer::warn(format!(
                        "afr hook: the call's outcome waits in the hook journal (the recorder: {e})"
                    )),
                    Err(j) => Answer::warn(format!(
                        "afr hook: the call's outcome was not recorded: {e}; the journal: {j}"
                    )),
                }
            }
        }
    }

    fn hold(
        &self,
        door: &mut Door,
        names: &Names,
        state: &session::State,
        e: Evaluation,
    ) -> Answer {
        let inline = || Capture::inline(self.agent().via());
        let runs = event::call_event(self.agent(), self.input, state, Some(&e), true, inline());
        let held = event::call_event(self.agent(), self.input, state, Some(&e), false, inline());
        // Journaled while it waits: a hook killed meanwhile leaves it recorded as not run.
        if let Err(err) = self.journal(names, &held, false) {
            return self.unrecorded(&format!("the hook journal: {err}"), false);
        }
        let recorder = door
            .recorder_id()
            .map(|r| format!("0x{}", hex::encode(r)))
            .unwrap_or_default();
        let id = approvals::new_id();
        let now = now_us();
        let timeout = self.o.approval_timeout;
        let pending = PendingCall {
            prompt: prompt(self.agent(), self.input, &runs, &e, &id, timeout),
            tool: self.tool().to_owned(),
            arguments: capped(self.input.tool_input.clone()),
            server: format!("{} (session {})", self.agent(), self.input.session),
            lane: runs.lane.clone().unwrap_or_default(),
            rule: e.guardrail.clone(),
            created_at_us: now,
            expires_at_us: now
                .saturating_add(u64::try_from(timeout.as_micros()).unwrap_or(u64::MAX)),
            pid: std::process::id(),
            intent: serde_json::to_value(&runs.intent).unwrap_or_default(),
            execution: runs
                .execution
                .as_ref()
                .and_then(|x| serde_json::to_value(x).ok())
                .unwrap_or_default(),
            action: action_of(&runs),
            recorder: recorder.clone(),
            signed_by: e.signed_by.iter().map(|a| a.name.clone()).collect(),
            id,
        };
        if let Err(err) = approvals::submit(&self.o.dir, &pending) {
            let why = format!(
                "afr: the call needs approval and could not be queued: {err}; the call did not run"
            );
            let mut ev = held;
            ev.effects = Some(error_effects(&why));
            let _ = self.record(door, &ev, &names.key);
            return Answer::block(why);
        }
        let ruling = wait(&self.o.dir, &pending, timeout);
        approvals::remove(&self.o.dir, &pending.id);
        let approval = HumanApproval {
            approver: ruling.approver.clone(),
            prompt: pending.prompt.clone(),
            decision: ruling.decision,
            decided_at_us: ruling.decided_at_us,
            signature: None,
        };
        if ruling.decision == Decision::Approved {
            let mut ev = runs;
            ev.human_approval = Some(approval);
            let signed = match &ruling.signature {
                Some(sig) => check_signed_approval(&self.o.dir, &e, &recorder, &mut ev, sig),
                None if !e.signed_by.is_empty() => Err(SignatureRefused::Unsigned {
                    approver: ruling.approver.clone(),
                    rule: e.guardrail.clone(),
                    approvers: e
                        .signed_by
                        .iter()
                        .map(|a| a.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                }),
                None => Ok(()),
            };
            return match signed {
                Ok(()) => {
                    ev.timestamp_us = Some(now_us());
                    match self.journal(names, &ev, false) {
                        Ok(_) => Answer::go_on(),
                        Err(err) => self.unrecorded(&format!("the hook journal: {err}"), false),
                    }
                }
                Err(why) => {
                    let why = why.to_string();
                    let mut ev = held;
                    ev.policy_evaluation.push(GuardrailEvaluation {
                        guardrail: SIGNED_APPROVAL_GUARDRAIL.into(),
                        version: Some(e.version.clone()),
                        verdict: GuardrailVerdict::Deny,
                        reason: Some(why.clone()),
                    });
                    let message = format!(
                        "afr: the approval's signature was refused ({why}); the call did not run"
                    );
                    ev.effects = Some(error_effects(&message));
                    match self.settle_refusal(door, names, &ev) {
                        Ok(()) => Answer::block(message),
                        Err(err) => Answer::block(format!(
                            "{message} (the refusal waits in the hook journal: {err})"
                        )),
                    }
                }
            };
        }
        let why = match &ruling.reason {
            Some(r) => format!(
                "afr: rejected by {}: {r}; the call did not run",
                ruling.approver
            ),
            None => format!("afr: rejected by {}; the call did not run", ruling.approver),
        };
        let mut ev = held;
        ev.human_approval = Some(approval);
        ev.effects = Some(error_effects(&why));
        match self.settle_refusal(door, names, &ev) {
            Ok(()) => Answer::block(why),
            Err(err) => Answer::block(format!(
                "{why} (the rejection waits in the hook journal: {err})"
            )),
        }
    }

    /// Records the final event of a call that will not run, and removes its journal entry;
    /// if it cannot be recorded now, the journal keeps it whole (recovered as it is).
    fn settle_refusal(
        &self,
        door: &mut Door,
        names: &Names,
        ev: &EventInput,
    ) -> Result<(), DoorError> {
        match self.record(door, ev, &names.key) {
            Ok(_) => {
                if let Some((p, ..)) = journal::find_one(&self.o.dir, journal::HOOK, &names.tag) {
                    journal::remove_one(&p);
                }
                Ok(())
            }
            Err(e) => {
                let _ = self.journal(names, ev, true);
                Err(e)
            }
        }
    }

    fn prompt(&self) -> Answer {
        let Some(text) = &self.input.prompt else {
            return Answer::go_on();
        };
        let state = session::read(&self.o.dir, self.agent(), &self.input.session);
        let mut ev = EventInput::intent_only(
            afr_core::Category::Other,
            "user_prompt",
            capped(json!({"prompt": text})),
        );
        ev.lane = Some(afr_core::agent::lane(
            &self.input.session,
            self.input.agent_id.as_deref(),
        ));
        let mut bare = state.clone();
        bare.prompt = None;
        event::provenance(
            self.agent(),
            self.input,
            &bare,
            &mut ev,
            Capture::inline(self.agent().via()),
        );
        let hash = sha256(text.as_bytes());
        let names = self.names_of(&format!("prompt/{hash}/{}", now_us()));
        let seq = match self
            .door()
            .and_then(|mut d| self.record(&mut d, &ev, &names.key))
        {
            Ok(s) => s,
            Err(e) => return Answer::warn(format!("afr hook: the prompt was not recorded: {e}")),
        };
        if let Ok(mut l) = session::lock(&self.o.dir, self.agent(), &self.input.session) {
            l.state.prompt = Some(session::PromptRef { seq, sha256: hash });
            if self.input.model.is_some() {
                l.state.model.clone_from(&self.input.model);
            }
            let _ = l.save(false);
        }
        Answer::go_on()
    }

    fn session_start(&self) -> Answer {
        if let Some(m) = &self.input.model
            && let Ok(mut l) = session::lock(&self.o.dir, self.agent(), &self.input.session)
        {
            l.state.model = Some(m.clone());
            let _ = l.save(false);
        }
        // What killed agents left: recorded now, through the one writer.
        if journal::waiting(&self.o.dir) > 0
            && let Ok(mut door) = self.door()
        {
            journal::recover_through(&self.o.dir, &mut door);
        }
        Answer::go_on()
    }

    fn subagent_start(&self) -> Answer {
        if let (Some(id), Ok(mut l)) = (
            &self.input.agent_id,
            session::lock(&self.o.dir, self.agent(), &self.input.session),
        ) {
            l.state.subagents.insert(
                id.clone(),
                self.input.agent_type.clone().unwrap_or_default(),
            );
            if let Some((tool, call)) = l.state.delegating.take() {
                l.state
                    .delegated_by
                    .insert(id.clone(), format!("{tool} {call}"));
            }
            let _ = l.save(false);
        }
        Answer::go_on()
    }

    /// Claude Code's permission prompt refused a call the hooks had allowed: its journaled
    /// event is recorded as not run (no execution), and the entry removed.
    fn permission_denied(&self) -> Answer {
        if self.leave_alone() {
            return Answer::go_on();
        }
        let (names, entry) = self.find_entry();
        let Some((path, key, ev)) = entry else {
            return Answer::go_on();
        };
        let mut ev = match parse_event(&ev) {
            Ok(ev) => ev,
            Err(e) => {
                return Answer::warn(format!("afr hook: the journaled call is unreadable: {e}"));
            }
        };
        ev.execution = None;
        let reason = self
            .input
            .raw
            .get("reason")
            .and_then(Value::as_str)
            .map_or(String::new(), |r| format!(": {r}"));
        ev.effects = Some(error_effects(&format!(
            "refused at {}'s permission prompt{reason}; the call did not run",
            self.agent()
        )));
        match self.door().and_then(|mut d| self.record(&mut d, &ev, &key)) {
            Ok(_) => {
                journal::remove_one(&path);
                Answer::go_on()
            }
            Err(e) => {
                let _ = self.journal(
                    &Names {
                        key,
                        tag: names.tag,
                    },
                    &ev,
                    true,
                );
                Answer::warn(format!(
                    "afr hook: the refusal waits in the hook journal: {e}"
                ))
            }
        }
    }

    /// Claude Code's `PermissionRequest`: a call the policy denies is denied here too; a call a
    /// person approved through `afr approve` (journaled with its approval) is allowed without
    /// asking again; anything else is left to Claude Code's own prompt.
    fn permission(&self) -> Answer {
        let decision = |behavior: &str, message: Option<String>| {
            let mut d = json!({"behavior": behavior});
            if let Some(m) = message {
                d["message"] = json!(m);
            }
            Answer {
                stdout: json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": d}}).to_string(),
                ..Answer::go_on()
            }
        };
        let eval = self.evaluate();
        if let Some(e) = eval
            .as_ref()
            .filter(|e| e.verdict == GuardrailVerdict::Deny)
        {
            return decision("deny", Some(self.denied_answer(Some(e)).stderr));
        }
        let approved = self
            .input
            .call_id
            .as_ref()
            .and_then(|id| journal::find_one(&self.o.dir, journal::HOOK, &self.names_of(id).tag))
            .is_some_and(|(_, _, ev)| {
                ev.pointer("/human_approval/decision") == Some(&json!("approved"))
            });
        if approved {
            return decision("allow", None);
        }
        Answer::go_on()
    }
}

fn error_effects(why: &str) -> Effects {
    Effects {
        error: Some(why.to_owned()),
        ..Effects::default()
    }
}

fn parse_event(v: &Value) -> Result<EventInput, String> {
    let bytes = serde_json::to_vec(v).map_err(|e| e.to_string())?;
    EventInput::from_json(&bytes, afr_core::event::DEFAULT_MAX_EVENT_BYTES)
        .map_err(|e| e.to_string())
}

/// Waits for a decision on `pending` in the queue, or rejects it at its expiry.
fn wait(dir: &std::path::Path, pending: &PendingCall, timeout: Duration) -> Ruling {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(r)) = approvals::decision(dir, &pending.id) {
            return r;
        }
        if Instant::now() >= deadline || now_us() >= pending.expires_at_us {
            let own = Ruling {
                decision: Decision::Rejected,
                approver: "afr-hook".into(),
                decided_at_us: now_us(),
                reason: Some(format!("no decision within {} s", timeout.as_secs())),
                signature: None,
            };
            return approvals::claim(dir, &pending.id, own);
        }
        std::thread::sleep(POLL);
    }
}

/// The text an approver is shown, recorded verbatim as `human_approval.prompt`: the tool, the
/// exact command or file change, the arguments (capped), the rule.
fn prompt(
    agent: Agent,
    input: &HookInput,
    runs: &EventInput,
    e: &Evaluation,
    id: &str,
    timeout: Duration,
) -> String {
    let args = afr_gateway::gate::prompt_arguments(&input.tool_input);
    let exec = runs.execution.as_ref().map_or(String::new(), |x| {
        let shown = x
            .mutation
            .get("diff")
            .and_then(Value::as_str)
            .map_or(String::new(), |d| {
                let mut cut = d.len().min(afr_gateway::gate::MAX_PROMPT_ARGUMENTS);
                while !d.is_char_boundary(cut) {
                    cut -= 1;
                }
                let more = if cut < d.len() {
                    "\n… (the diff goes on)"
                } else {
                    ""
                };
                format!("\n{}{more}", d.get(..cut).unwrap_or_default())
            });
        format!("\nruns: {}{shown}", x.command)
    });
    let signed = if e.signed_by.is_empty() {
        String::new()
    } else {
        let n: Vec<&str> = e.signed_by.iter().map(|a| a.name.as_str()).collect();
        format!("\nneeds an approval signed by one of: {}", n.join(", "))
    };
    format!(
        "Approve this tool call?\n\
         tool: {}\n\
         agent: {agent} (session {}){}{exec}\n\
         arguments: {args}\n\
         policy rule: {} ({}){signed}\n\
         approval id: {id}; rejected unless decided within {} s",
        input.tool.as_deref().unwrap_or_default(),
        input.session,
        input
            .cwd
            .as_deref()
            .map_or(String::new(), |c| format!("\nworking directory: {c}")),
        e.guardrail,
        e.reason.as_deref().unwrap_or("no reason given"),
        timeout.as_secs()
    )
}
