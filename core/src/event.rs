//! The event schema: the eight semantic fields of a tool call, and how they arrive as JSON.
//!
//! An [`EventInput`] is what a caller hands the recorder (one JSON object per line on the
//! CLI, following `docs/event.schema.json`). It splits into envelope fields, which go into the
//! [`crate::Record`], and the [`Payload`], which is canonical-CBOR encoded and sealed.
//!
//! Parsing is strict: unknown or misspelled fields, wrong types, duplicate keys (at any depth)
//! and trailing characters are errors that name the field path. The intent holds the tool and
//! its structured arguments only; there is no field for model reasoning, by design.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, de};
use serde_json::Value as Json;

use crate::{cbor, record::Category};

/// Tool names with this prefix are written by the recorder itself (`afr.erase`); a client
/// event naming one is refused, so a verifier can take such an event as the recorder's own.
pub const RESERVED_TOOL_PREFIX: &str = "afr.";

/// Default cap on one event's size, as JSON and as canonical CBOR: 1 MiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1 << 20;

/// One tool call as submitted to the recorder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventInput {
    /// Kind of action.
    pub category: Category,
    /// When it happened, microseconds since the Unix epoch; the recorder's clock if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_us: Option<u64>,
    /// Lane or task id, for concurrent agents (at most 64 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// Earlier events (sequence numbers) this one ran concurrently with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub concurrent_with: Vec<u64>,
    /// What the agent set out to do.
    #[serde(deserialize_with = "object")]
    pub intent: Intent,
    /// Guardrails evaluated before execution.
    #[serde(
        default,
        deserialize_with = "object_vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub policy_evaluation: Vec<GuardrailEvaluation>,
    /// The human approval, if one was asked for.
    #[serde(
        default,
        deserialize_with = "object_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub human_approval: Option<HumanApproval>,
    /// The concrete command or API mutation that ran.
    #[serde(
        default,
        deserialize_with = "object_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub execution: Option<Execution>,
    /// What happened as a result.
    #[serde(
        default,
        deserialize_with = "object_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub effects: Option<Effects>,
    /// Retrieved content and environment that influenced the call.
    #[serde(
        default,
        deserialize_with = "object_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub context_provenance: Option<ContextProvenance>,
    /// Which code and model produced the call.
    #[serde(
        default,
        deserialize_with = "object_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub code_provenance: Option<CodeProvenance>,
    /// Who delegated the work.
    #[serde(
        default,
        deserialize_with = "object_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub delegation_provenance: Option<DelegationProvenance>,
}

/// The eight semantic fields: what is sealed and stored apart from the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payload {
    /// What the agent set out to do.
    pub intent: Intent,
    /// Guardrails evaluated before execution.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy_evaluation: Vec<GuardrailEvaluation>,
    /// The human approval, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human_approval: Option<HumanApproval>,
    /// The concrete command or API mutation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<Execution>,
    /// Results, state changes, errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<Effects>,
    /// Retrieved content and environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_provenance: Option<ContextProvenance>,
    /// Code and model provenance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_provenance: Option<CodeProvenance>,
    /// Delegation provenance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation_provenance: Option<DelegationProvenance>,
}

/// Intent: the tool and its structured arguments. Never chain-of-thought.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    /// Tool name, e.g. `psql` or `github.create_pull_request`.
    pub tool: String,
    /// Structured arguments (any JSON value; duplicate keys rejected).
    #[serde(
        default,
        deserialize_with = "strict_json",
        skip_serializing_if = "Json::is_null"
    )]
    pub args: Json,
}

/// The outcome of one guardrail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuardrailVerdict {
    /// Allowed the call.
    Allow,
    /// Blocked the call.
    Deny,
    /// Allowed with a warning.
    Warn,
    /// Sent the call to a human.
    Escalate,
}

impl GuardrailVerdict {
    /// Every verdict, in declaration order.
    pub const ALL: [GuardrailVerdict; 4] = [
        GuardrailVerdict::Allow,
        GuardrailVerdict::Deny,
        GuardrailVerdict::Warn,
        GuardrailVerdict::Escalate,
    ];
    /// The lower-case names used in JSON, in the order of [`GuardrailVerdict::ALL`].
    pub const NAMES: [&'static str; 4] = [
        GuardrailVerdict::Allow.name(),
        GuardrailVerdict::Deny.name(),
        GuardrailVerdict::Warn.name(),
        GuardrailVerdict::Escalate.name(),
    ];

    /// The lower-case name used in JSON.
    pub const fn name(self) -> &'static str {
        match self {
            GuardrailVerdict::Allow => "allow",
            GuardrailVerdict::Deny => "deny",
            GuardrailVerdict::Warn => "warn",
            GuardrailVerdict::Escalate => "escalate",
        }
    }

    /// The verdict with JSON name `s`.
    pub fn from_name(s: &str) -> Option<GuardrailVerdict> {
        GuardrailVerdict::ALL.into_iter().find(|v| v.name() == s)
    }
}

/// One guardrail evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardrailEvaluation {
    /// Guardrail name.
    pub guardrail: String,
    /// Guardrail version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Its verdict.
    pub verdict: GuardrailVerdict,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A human's decision on the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Approved.
    Approved,
    /// Rejected.
    Rejected,
}

impl Decision {
    /// Every decision, in declaration order.
    pub const ALL: [Decision; 2] = [Decision::Approved, Decision::Rejected];
    /// The lower-case names used in JSON, in the order of [`Decision::ALL`].
    pub const NAMES: [&'static str; 2] = [Decision::Approved.name(), Decision::Rejected.name()];

    /// The lower-case name used in JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Decision::Approved => "approved",
            Decision::Rejected => "rejected",
        }
    }

    /// The decision with JSON name `s`.
    pub fn from_name(s: &str) -> Option<Decision> {
        Decision::ALL.into_iter().find(|d| d.name() == s)
    }
}

/// Human approval of the action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HumanApproval {
    /// Who decided (e-mail, employee id, key fingerprint).
    pub approver: String,
    /// The prompt the approver was shown.
    pub prompt: String,
    /// The decision.
    pub decision: Decision,
    /// When, microseconds since the Unix epoch.
    pub decided_at_us: u64,
    /// A signature by the approver over the action, if the approval system produces one.
    #[serde(
        default,
        deserialize_with = "object_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub signature: Option<ApprovalSignature>,
}

/// The approver's signature over the approved action (`docs/spec/approvals.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSignature {
    /// `eip712` or `ssh`.
    pub scheme: String,
    /// The signer: an Ethereum address (`0x…`) or an OpenSSH public key (`ssh-ed25519 AAAA…`).
    pub signer: String,
    /// What was signed: the action digest and the fields the approver was shown.
    #[serde(deserialize_with = "object")]
    pub statement: crate::approval::Statement,
    /// The signature: `0x` + 130 hex digits (EIP-712), or the armored SSHSIG text.
    pub signature: String,
}

/// The concrete command or API mutation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Execution {
    /// The exact command line, SQL statement or `METHOD url`.
    pub command: String,
    /// What it acted on: host, database, file path, API resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Structured body of an API mutation.
    #[serde(
        default,
        deserialize_with = "strict_json",
        skip_serializing_if = "Json::is_null"
    )]
    pub mutation: Json,
}

/// What the action did.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Effects {
    /// Return value.
    #[serde(
        default,
        deserialize_with = "strict_json",
        skip_serializing_if = "Json::is_null"
    )]
    pub return_value: Json,
    /// State changes, one description each (e.g. `dropped table users (48,213 rows)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub state_changes: Vec<String>,
    /// Response of an external system.
    #[serde(
        default,
        deserialize_with = "strict_json",
        skip_serializing_if = "Json::is_null"
    )]
    pub external_response: Json,
    /// Error, if the action failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Content that influenced the call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextProvenance {
    /// Retrieved sources.
    #[serde(
        default,
        deserialize_with = "object_vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sources: Vec<ContextSource>,
    /// Environment the agent believed it acted in (`production`, `staging`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
}

/// One retrieved source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextSource {
    /// Where it came from.
    pub uri: String,
    /// Hash of the content as retrieved, e.g. `sha256:<hex>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// Kind: `file`, `web`, `retrieval`, `tool_output`, `user`...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// Code and model provenance.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeProvenance {
    /// Agent name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Agent version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// Tool version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// Repository URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// Commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Model id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Which part of AFR captured the call, and whether it sat in the call's path.
    #[serde(
        default,
        deserialize_with = "object_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub capture: Option<Capture>,
}

/// How an event was captured: by a part of AFR in the call's path before it ran (which could
/// have stopped it), or from the agent's own report after the fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capture {
    /// In the path, or reported.
    pub strength: CaptureStrength,
    /// The capturing component: `mcp-gateway`, `hook:claude-code`, `hook:codex`, `hook:gemini`,
    /// `otlp:traces`, `otlp:logs`, `import:swe-agent`, or a producer's own name.
    pub via: String,
}

/// Where a capture sat relative to the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureStrength {
    /// Seen before the call ran, by a component that could stop it (the MCP gateway, a
    /// pre-tool hook): the call could not have run without this record's intent existing.
    Inline,
    /// Reported by the agent after the call ran (OTLP traces and logs, imported
    /// trajectories): the agent could have left it out or told it otherwise.
    SelfReported,
}

impl CaptureStrength {
    /// Every strength, in declaration order.
    pub const ALL: [CaptureStrength; 2] = [CaptureStrength::Inline, CaptureStrength::SelfReported];
    /// The names used in JSON, in the order of [`CaptureStrength::ALL`].
    pub const NAMES: [&'static str; 2] = [
        CaptureStrength::Inline.name(),
        CaptureStrength::SelfReported.name(),
    ];

    /// The name used in JSON.
    pub const fn name(self) -> &'static str {
        match self {
            CaptureStrength::Inline => "inline",
            CaptureStrength::SelfReported => "self_reported",
        }
    }
}

impl Capture {
    /// Captured in the call's path by `via`.
    pub fn inline(via: impl Into<String>) -> Capture {
        Capture {
            strength: CaptureStrength::Inline,
            via: via.into(),
        }
    }

    /// Reported after the fact, received by `via`.
    pub fn self_reported(via: impl Into<String>) -> Capture {
        Capture {
            strength: CaptureStrength::SelfReported,
            via: via.into(),
        }
    }
}

impl EventInput {
    /// Sets how the event was captured (creating its code provenance if absent).
    pub fn set_capture(&mut self, capture: Capture) {
        self.code_provenance
            .get_or_insert_with(CodeProvenance::default)
            .capture = Some(capture);
    }

    /// How the event was captured, if it says.
    pub fn capture(&self) -> Option<&Capture> {
        self.code_provenance.as_ref()?.capture.as_ref()
    }
}

/// Who handed the work to this agent.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegationProvenance {
    /// The event that delegated this one.
    #[serde(
        default,
        deserialize_with = "object_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub parent_event: Option<EventRef>,
    /// The delegating agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegating_agent: Option<String>,
    /// The delegating organisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organisation: Option<String>,
    /// On whose behalf the work is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<String>,
    /// The events, in other recorders' logs, that accepted work this event's delegation
    /// handed over: their receipts, recorded by the delegating side (`docs/spec/delegation.md`).
    #[serde(
        default,
        deserialize_with = "object_vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub delegated_to: Vec<EventRef>,
}

/// A reference to an event, possibly in another recorder's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventRef {
    /// Recorder address (`0x` + 40 hex); this recorder if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder: Option<String>,
    /// Sequence number in that recorder's log.
    pub seq: u64,
    /// The event's record leaf hash (64 hex digits), from the recorder's receipt: binds the
    /// reference to that exact event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaf_hash: Option<String>,
    /// That recorder's signature over the receipt (`docs/spec/delegation.md`), `0x` + 130 hex
    /// digits: its word that the leaf sits at `seq` of its log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// In a receipt of a delegating event (an offer): the recorder it is offered to, `0x` + 40
    /// hex digits, bound by the signature (`docs/spec/delegation.md` §1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// In a receipt of a receiving event (an accept): the offer it accepts, bound by the
    /// signature (`docs/spec/delegation.md` §1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<OfferRef>,
}

/// The offer an accepting event's receipt answers: a delegating recorder's event, exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfferRef {
    /// The delegating recorder, `0x` + 40 hex digits.
    pub recorder: String,
    /// The offer's sequence number in its log.
    pub seq: u64,
    /// The offer's record leaf hash, 64 hex digits.
    pub leaf_hash: String,
}

impl EventRef {
    /// A reference to event `seq` of the same log, by position only.
    pub fn same_log(seq: u64) -> EventRef {
        EventRef {
            recorder: None,
            seq,
            leaf_hash: None,
            signature: None,
            to: None,
            answers: None,
        }
    }

    /// Checks the shapes serde cannot: `recorder` 40 hex digits (0x optional), `leaf_hash` 64
    /// hex, `signature` 0x + 130 hex.
    fn validate(&self, path: &str) -> Result<(), InputError> {
        let hex_of = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
        if let Some(r) = &self.recorder
            && !hex_of(r.strip_prefix("0x").unwrap_or(r), 40)
        {
            return Err(InputError::new(
                &format!("{path}.recorder"),
                "must be 0x followed by 40 hex digits",
            ));
        }
        if let Some(l) = &self.leaf_hash
            && !hex_of(l, 64)
        {
            return Err(InputError::new(
                &format!("{path}.leaf_hash"),
                "must be 64 hex digits",
            ));
        }
        if let Some(s) = &self.signature
            && !s.strip_prefix("0x").is_some_and(|h| hex_of(h, 130))
        {
            return Err(InputError::new(
                &format!("{path}.signature"),
                "must be 0x followed by 130 hex digits",
            ));
        }
        if let Some(t) = &self.to
            && !hex_of(t.strip_prefix("0x").unwrap_or(t), 40)
        {
            return Err(InputError::new(
                &format!("{path}.to"),
                "must be 0x followed by 40 hex digits",
            ));
        }
        if let Some(a) = &self.answers {
            if self.to.is_some() {
                return Err(InputError::new(
                    path,
                    "a receipt names either `to` (an offer) or `answers` (an accept), not both",
                ));
            }
            if !hex_of(a.recorder.strip_prefix("0x").unwrap_or(&a.recorder), 40) {
                return Err(InputError::new(
                    &format!("{path}.answers.recorder"),
                    "must be 0x followed by 40 hex digits",
                ));
            }
            if !hex_of(&a.leaf_hash, 64) {
                return Err(InputError::new(
                    &format!("{path}.answers.leaf_hash"),
                    "must be 64 hex digits",
                ));
            }
        }
        Ok(())
    }
}

/// Why an input line is not an acceptable event. `path` names the offending field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if path.is_empty() || path == "." { String::new() } else { format!("field `{path}`: ") })]
pub struct InputError {
    /// Dotted path of the field, empty for the whole event.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl InputError {
    fn new(path: &str, message: impl Into<String>) -> InputError {
        InputError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl EventInput {
    /// Parses one JSON event, enforcing the size cap, UTF-8, the schema and field limits.
    pub fn from_json(bytes: &[u8], max_bytes: usize) -> Result<EventInput, InputError> {
        if bytes.len() > max_bytes {
            return Err(InputError::new(
                "",
                format!(
                    "event is {} bytes, over the cap of {max_bytes}",
                    bytes.len()
                ),
            ));
        }
        if let Err(e) = std::str::from_utf8(bytes) {
            return Err(InputError::new(
                "",
                format!("not valid UTF-8 at byte {}", e.valid_up_to()),
            ));
        }
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let ev: EventInput =
            serde_path_to_error::deserialize(ObjectOnly(&mut de)).map_err(|e| {
                let path = e.path().to_string();
                let inner = e.into_inner();
                let msg = inner.to_string();
                // serde_json appends " at line L column C"; keep it, it points at the token.
                InputError::new(&path, msg)
            })?;
        de.end()
            .map_err(|e| InputError::new("", format!("trailing characters: {e}")))?;
        ev.validate()?;
        Ok(ev)
    }

    /// Checks the limits serde cannot express, and keeps the `afr.` tool names (events the
    /// recorder writes itself, such as `afr.erase`) out of what clients can record.
    pub fn validate(&self) -> Result<(), InputError> {
        if self.intent.tool.starts_with(RESERVED_TOOL_PREFIX) {
            return Err(InputError::new(
                "intent.tool",
                "tool names starting with `afr.` are reserved for events the recorder writes itself",
            ));
        }
        self.validate_limits()
    }

    /// [`EventInput::validate`] without the reserved-name rule: for the recorder's own events.
    pub fn validate_limits(&self) -> Result<(), InputError> {
        if self.intent.tool.is_empty() {
            return Err(InputError::new("intent.tool", "must not be empty"));
        }
        if let Some(l) = &self.lane
            && l.len() > crate::record::MAX_LANE_LEN
        {
            return Err(InputError::new("lane", "longer than 64 bytes"));
        }
        if self.concurrent_with.len() > crate::record::MAX_CONCURRENT {
            return Err(InputError::new("concurrent_with", "more than 16 entries"));
        }
        let after = self.concurrent_with.iter().skip(1);
        if self.concurrent_with.iter().zip(after).any(|(a, b)| a >= b) {
            return Err(InputError::new(
                "concurrent_with",
                "must be strictly increasing",
            ));
        }
        if let Some(d) = &self.delegation_provenance {
            let refs = d
                .parent_event
                .iter()
                .map(|r| ("delegation_provenance.parent_event".to_owned(), r))
                .chain(
                    d.delegated_to
                        .iter()
                        .enumerate()
                        .map(|(i, r)| (format!("delegation_provenance.delegated_to[{i}]"), r)),
                );
            for (path, r) in refs {
                r.validate(&path)?;
            }
        }
        Ok(())
    }

    /// Splits into the envelope (kept by the caller) and the payload to seal.
    pub fn into_payload(self) -> (Envelope, Payload) {
        let env = Envelope {
            category: self.category,
            timestamp_us: self.timestamp_us,
            lane: self.lane,
            concurrent_with: self.concurrent_with,
        };
        let p = Payload {
            intent: self.intent,
            policy_evaluation: self.policy_evaluation,
            human_approval: self.human_approval,
            execution: self.execution,
            effects: self.effects,
            context_provenance: self.context_provenance,
            code_provenance: self.code_provenance,
            delegation_provenance: self.delegation_provenance,
        };
        (env, p)
    }

    /// Joins an envelope and a payload: the inverse of [`EventInput::into_payload`].
    pub fn from_parts(env: Envelope, p: Payload) -> EventInput {
        EventInput {
            category: env.category,
            timestamp_us: env.timestamp_us,
            lane: env.lane,
            concurrent_with: env.concurrent_with,
            intent: p.intent,
            policy_evaluation: p.policy_evaluation,
            human_approval: p.human_approval,
            execution: p.execution,
            effects: p.effects,
            context_provenance: p.context_provenance,
            code_provenance: p.code_provenance,
            delegation_provenance: p.delegation_provenance,
        }
    }

    /// An event of `category` holding only its intent, `tool` called with `args`: every other
    /// field absent.
    pub fn intent_only(category: Category, tool: impl Into<String>, args: Json) -> EventInput {
        EventInput::from_parts(
            Envelope {
                category,
                timestamp_us: None,
                lane: None,
                concurrent_with: Vec::new(),
            },
            Payload::intent_only(tool, args),
        )
    }
}

/// The envelope fields a caller supplies; the recorder adds the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Kind of action.
    pub category: Category,
    /// Caller-supplied time, if any.
    pub timestamp_us: Option<u64>,
    /// Lane.
    pub lane: Option<String>,
    /// Concurrent earlier events.
    pub concurrent_with: Vec<u64>,
}

impl Payload {
    /// A payload holding only its intent, `tool` called with `args`: every other field absent.
    pub fn intent_only(tool: impl Into<String>, args: serde_json::Value) -> Payload {
        Payload {
            intent: Intent {
                tool: tool.into(),
                args,
            },
            policy_evaluation: Vec::new(),
            human_approval: None,
            execution: None,
            effects: None,
            context_provenance: None,
            code_provenance: None,
            delegation_provenance: None,
        }
    }

    /// Canonical CBOR bytes (the plaintext that is sealed).
    pub fn encode(&self) -> Result<Vec<u8>, cbor::CborError> {
        cbor::to_vec(self)
    }

    /// Parses canonical CBOR; rejects any byte string that is not exactly `encode` of the result.
    pub fn decode(bytes: &[u8]) -> Result<Payload, cbor::CborError> {
        let p: Payload = cbor::from_slice(bytes)?;
        if cbor::to_vec(&p)? != bytes {
            return Err(cbor::CborError::NonCanonical);
        }
        Ok(p)
    }
}

/// Feeds a struct's derived `Deserialize` a map request instead of a struct request.
///
/// serde's derive accepts a struct as a map or as a sequence of its fields in order, and
/// serde_json honours both, so `"intent": ["ls"]` would be a valid intent and one event would
/// have two spellings. Asking for a map rejects the array form with "invalid type: sequence".
/// Each struct-typed field names [`object`], [`object_opt`] or [`object_vec`].
struct ObjectOnly<D>(D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for ObjectOnly<D> {
    type Error = D::Error;

    fn deserialize_any<V: de::Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(v)
    }

    fn deserialize_struct<V: de::Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(v)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// A struct that deserializes from a map only (see [`ObjectOnly`]).
struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Obj<T>, D::Error> {
        T::deserialize(ObjectOnly(d)).map(Obj)
    }
}

fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    T::deserialize(ObjectOnly(d))
}

fn object_opt<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Ok(Option::<Obj<T>>::deserialize(d)?.map(|o| o.0))
}

fn object_vec<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Vec::<Obj<T>>::deserialize(d)?
        .into_iter()
        .map(|o| o.0)
        .collect())
}

/// Deserializes any JSON value, rejecting duplicate object keys at every depth.
fn strict_json<'de, D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
    d.deserialize_any(StrictVisitor)
}

/// Parses `bytes` as one JSON value, refusing duplicate object keys at every depth (the error
/// names the key). serde_json alone keeps the last of two equal keys while other parsers keep
/// the first: whoever checks a message and whoever acts on it must not read different values.
pub fn parse_strict_json(bytes: &[u8]) -> Result<Json, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let StrictJson(v) = StrictJson::deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

struct StrictJson(Json);

impl<'de> Deserialize<'de> for StrictJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<StrictJson, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictJson)
    }
}

struct StrictVisitor;

impl<'de> de::Visitor<'de> for StrictVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
        let mut v = Vec::new();
        while let Some(StrictJson(x)) = a.next_element()? {
            v.push(x);
        }
        Ok(Json::Array(v))
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
        let mut m = serde_json::Map::new();
        while let Some(k) = a.next_key::<String>()? {
            let StrictJson(v) = a.next_value()?;
            if m.insert(k.clone(), v).is_some() {
                return Err(de::Error::custom(format!("duplicate key `{k}`")));
            }
        }
        Ok(Json::Object(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"category":"database","intent":{"tool":"psql","args":{"db":"prod","sql":"DROP TABLE users"}},
      "policy_evaluation":[{"guardrail":"no-destructive-sql","version":"2","verdict":"allow","reason":"staging"}],
      "human_approval":{"approver":"alice@example.com","prompt":"Drop table?","decision":"approved","decided_at_us":1},
      "execution":{"command":"DROP TABLE users","target":"db.prod.internal"},
      "effects":{"return_value":{"rows":0},"state_changes":["dropped users"]},
      "context_provenance":{"environment":"staging","sources":[{"uri":"file:///etc/app.yaml","content_hash":"sha256:00"}]},
      "code_provenance":{"agent":"coder","model":"m-1"},
      "delegation_provenance":{"parent_event":{"seq":3},"delegating_agent":"planner","organisation":"acme"}}"#;

    #[test]
    fn parses_a_full_event_and_round_trips_the_payload() {
        let ev = EventInput::from_json(GOOD.as_bytes(), DEFAULT_MAX_EVENT_BYTES).unwrap();
        let (env, p) = ev.into_payload();
        assert_eq!(env.category, Category::Database);
        let b = p.encode().unwrap();
        assert_eq!(b, cbor::to_vec_via_value(&p).unwrap());
        assert_eq!(Payload::decode(&b).unwrap(), p);
    }

    fn err(s: &str) -> InputError {
        EventInput::from_json(s.as_bytes(), DEFAULT_MAX_EVENT_BYTES).unwrap_err()
    }

    #[test]
    fn errors_name_the_field() {
        let e = err(r#"{"category":"shell","intent":{"tool":"ls","argz":{}}}"#);
        assert_eq!(e.path, "intent.argz");
        assert!(e.message.contains("unknown field `argz`"), "{e}");

        let e = err(
            r#"{"category":"shell","intent":{"tool":"ls"},"human_approval":{"approver":"a","prompt":"p","decision":"approved","decided_at_us":"soon"}}"#,
        );
        assert_eq!(e.path, "human_approval.decided_at_us");

        let e = err(r#"{"category":"shel","intent":{"tool":"ls"}}"#);
        assert_eq!(e.path, "category");

        let e = err(r#"{"category":"shell","intent":{"tool":"ls","args":{"a":1,"a":2}}}"#);
        assert!(e.message.contains("duplicate key `a`"), "{e}");
        assert_eq!(e.path, "intent.args");

        let e = err(r#"{"category":"shell","category":"file","intent":{"tool":"ls"}}"#);
        assert!(e.message.contains("duplicate field"), "{e}");

        let e = err(r#"{"category":"shell","intent":{"tool":"ls"}} x"#);
        assert!(e.message.contains("trailing"), "{e}");

        let e = err(r#"{"category":"shell","intent":{"tool":""}}"#);
        assert_eq!(e.path, "intent.tool");

        let e = err(r#"{"category":"shell","intent":{"tool":"ls"},"reasoning":"I think"}"#);
        assert!(e.message.contains("unknown field `reasoning`"));
    }

    #[test]
    fn structs_are_objects_never_positional_arrays() {
        for s in [
            r#"["shell",null,null,[],{"tool":"ls"}]"#,
            r#"{"category":"shell","intent":["ls"]}"#,
            r#"{"category":"shell","intent":{"tool":"ls"},"code_provenance":[]}"#,
            r#"{"category":"shell","intent":{"tool":"ls"},"policy_evaluation":[["g","1","allow"]]}"#,
            r#"{"category":"shell","intent":{"tool":"ls"},"delegation_provenance":{"parent_event":[null,3]}}"#,
        ] {
            let e = err(s);
            assert!(e.message.contains("invalid type: sequence"), "{s}: {e}");
        }
    }

    #[test]
    fn rejects_non_utf8_and_oversize() {
        let e = EventInput::from_json(b"{\"category\":\"shell\xff\"}", 1000).unwrap_err();
        assert!(e.message.contains("UTF-8"), "{e}");
        let big = format!(
            r#"{{"category":"shell","intent":{{"tool":"{}"}}}}"#,
            "x".repeat(2000)
        );
        let e = EventInput::from_json(big.as_bytes(), 1000).unwrap_err();
        assert!(e.message.contains("over the cap"), "{e}");
    }

    /// Every variant of `all` round-trips through its name, `names` lists those names in the
    /// same order, and serde writes and reads the same name.
    fn names_agree<T>(
        all: &[T],
        names: &[&str],
        name: fn(T) -> &'static str,
        from_name: fn(&str) -> Option<T>,
    ) where
        T: Copy + PartialEq + std::fmt::Debug + Serialize + serde::de::DeserializeOwned,
    {
        assert_eq!(all.len(), names.len());
        for (&v, &n) in all.iter().zip(names) {
            assert_eq!(name(v), n, "{v:?}");
            assert_eq!(from_name(n), Some(v), "{n}");
            assert_eq!(serde_json::to_value(v).unwrap(), Json::from(n), "{v:?}");
            assert_eq!(
                serde_json::from_value::<T>(Json::from(n)).unwrap(),
                v,
                "{n}"
            );
        }
        assert_eq!(from_name("no such name"), None);
    }

    #[test]
    fn enum_names_round_trip_and_agree_with_serde() {
        names_agree(
            &Category::ALL,
            &Category::NAMES,
            Category::name,
            Category::from_name,
        );
        names_agree(
            &GuardrailVerdict::ALL,
            &GuardrailVerdict::NAMES,
            GuardrailVerdict::name,
            GuardrailVerdict::from_name,
        );
        names_agree(
            &Decision::ALL,
            &Decision::NAMES,
            Decision::name,
            Decision::from_name,
        );
        for (i, c) in Category::ALL.into_iter().enumerate() {
            assert_eq!(Category::from_wire(i as u64), Some(c));
        }
    }

    #[test]
    fn payload_decoder_rejects_explicit_nulls_and_unknown_fields() {
        // {"intent": {"tool": "x"}, "effects": null}: canonical CBOR, but not the encoding
        // of any payload (absent options are omitted).
        let mut v = ciborium::Value::Map(vec![
            (
                ciborium::Value::Text("intent".into()),
                ciborium::Value::Map(vec![(
                    ciborium::Value::Text("tool".into()),
                    ciborium::Value::Text("x".into()),
                )]),
            ),
            (
                ciborium::Value::Text("effects".into()),
                ciborium::Value::Null,
            ),
        ]);
        crate::cbor::canonicalize(&mut v).unwrap();
        let b = crate::cbor::to_vec(&v).unwrap();
        assert!(Payload::decode(&b).is_err());
    }
}
