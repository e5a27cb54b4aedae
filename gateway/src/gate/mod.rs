//! What both transports share: recording, the policy's verdict, and holding escalated calls
//! until a human decides. [`Gate::admit`] is the one door a `tools/call` goes through.
//!
//! One event per call, written once the call is over; until then its event as known so far is
//! in the gateway's [`journal`](crate::journal), synced before the call is forwarded:
//!
//! ```text
//!            allow ──► journal (synced) ──► forward ──► answer ──► the call's event
//!  admit ──► deny ───► the call's event ──► JSON-RPC error -32081
//!            escalate ► journal ──► queue (+ elicitation) ──► wait ──► conclude
//!                          approved ──► journal again (synced) ──► forward ──► answer ──► event
//!                          rejected / timeout ──► the call's event ──► -32083
//! ```
//!
//! A rule with `signed_by` needs a signed approval (`docs/spec/approvals.md`): the queue entry
//! carries the call's `intent` and `execution` as they will be recorded, `afr approve` signs
//! their digest, and [`Gate::conclude`] forwards the call only if the signature is valid, over
//! this call's digest, by one of the rule's approvers, unexpired and with a fresh nonce;
//! otherwise the call is refused and its event says why.

use std::{
    collections::HashSet,
    path::PathBuf,
    sync::{
        Arc, Condvar, Mutex, MutexGuard, Weak,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc::Receiver,
    },
    time::Duration,
};

use afr_core::{
    EventInput,
    event::{Effects, GuardrailEvaluation, HumanApproval},
};
use afr_recorder::now_us;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use afr_client::{
    Door, DoorError, NoServer, Ticket,
    journal::{self, Journal},
};

use crate::{
    approvals::{self, Decision, PendingCall, Ruling},
    json::parse_strict,
    policy::{Call, Evaluation, GuardrailVerdict, Policy},
    session::{Session, Stage},
};

/// JSON-RPC error codes the gateway answers with. The gateway's own are in -32080..=-32089,
/// clear of the codes the MCP specification and its SDKs give a meaning (-32000 connection
/// closed and -32001 request timeout in both SDKs, -32002 resource not found, -32020..-32022,
/// -32042 URL elicitation required), so a host can tell "the gateway refused" from "the server
/// or the transport failed".
pub mod code {
    /// Not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// A duplicate key, a batch, an over-long message, a `tools/call` without a name.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The call was not recorded, so it was not forwarded (fail closed).
    pub const NOT_RECORDED: i64 = -32080;
    /// The policy denied the call.
    pub const DENIED: i64 = -32081;
    /// The server exited, or the gateway stopped, before the answer came.
    pub const NO_ANSWER: i64 = -32082;
    /// An escalated call was rejected (by a person, or because nobody decided in time).
    pub const REJECTED: i64 = -32083;
    /// Every code of the gateway's own.
    pub const ALL: [i64; 4] = [NOT_RECORDED, DENIED, NO_ANSWER, REJECTED];
}

/// How long an escalated call waits for a decision by default.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);
/// How often a held call looks for a decision file.
const POLL: Duration = Duration::from_millis(50);
/// The prefix of the JSON-RPC ids of the gateway's own elicitation requests.
pub const ELICITATION_ID_PREFIX: &str = "afr-approval-";

/// A `tools/call` as the client sent it.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// `params.name`.
    pub tool: String,
    /// `params.arguments` (`Null` if absent).
    pub args: Value,
    /// All of `params` (for `_meta`).
    pub params: Value,
}

impl ToolCall {
    /// The call in a `tools/call`'s `params`; refused without a tool name.
    pub fn from_params(params: Value) -> Result<ToolCall, Refusal> {
        let Some(tool) = params
            .get("name")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
        else {
            return Err(Refusal {
                code: code::INVALID_REQUEST,
                message: "afr gateway: tools/call without a tool name; not forwarded".into(),
            });
        };
        Ok(ToolCall {
            tool,
            args: params.get("arguments").cloned().unwrap_or(Value::Null),
            params,
        })
    }
}

/// A call's record in progress: its idempotency key and its event as known so far.
#[derive(Debug, Clone)]
pub struct CallRecord {
    /// The key the call's event is recorded under (a retry, or a recovery, records nothing
    /// twice).
    pub key: String,
    /// The event: intent, execution, evaluation, provenance; effects come with the answer.
    pub event: Box<EventInput>,
}

/// A call cleared to go: forward it once [`Gate::settle_intent`] says its record is durable.
#[derive(Debug)]
pub struct Forward {
    /// The call's record, to complete with the answer ([`Gate::complete`]).
    pub record: CallRecord,
    /// Where its journal entry stands.
    pub ticket: JournalTicket,
}

/// A journal entry: durable once synced up to its offset.
#[derive(Debug)]
pub enum JournalTicket {
    /// Appended; sync up to `offset` before forwarding.
    Appended {
        /// The journal.
        journal: Arc<Journal>,
        /// The entry's end.
        offset: u64,
    },
    /// Could not be journaled (or no recorder): why.
    Failed(String),
}

/// What to do with a call.
#[derive(Debug)]
pub enum Admission {
    /// Forward it once its record is durable: [`Gate::settle_intent`] first.
    Forward(Forward),
    /// Answer it with this JSON-RPC error; it never reaches the server.
    Refuse(Refusal),
    /// Hold it: [`Gate::wait`] for the decision, then [`Gate::conclude`].
    Hold(Box<Held>),
}

/// A JSON-RPC error the gateway answers a call with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The JSON-RPC error code ([`code`]).
    pub code: i64,
    /// The message.
    pub message: String,
}

/// A JSON-RPC error response to the request `id` (what the gateway answers a refused call
/// with, on either transport).
pub fn error_message(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A client's message, parsed strictly, or why it is refused without being forwarded (with
/// its id when a lax parse could read one): a duplicate key, a batch, not an object, not
/// JSON. The refusal is also reported on stderr.
pub fn parse_client_message(bytes: &[u8]) -> Result<Map<String, Value>, (Value, Refusal)> {
    let refuse = |id: Value, code: i64, message: &str| {
        Err((
            id,
            Refusal {
                code,
                message: format!("afr gateway: {message}; not forwarded"),
            },
        ))
    };
    match parse_strict(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(Value::Array(_)) => refuse(
            Value::Null,
            code::INVALID_REQUEST,
            "JSON-RPC batches are not supported",
        ),
        Ok(_) => refuse(Value::Null, code::INVALID_REQUEST, "not a JSON-RPC message"),
        Err(e) => {
            // A lone UTF-16 surrogate (`"\ud800"`) is valid JSON text to a JavaScript peer but
            // not Unicode: no parser here reads it, so find the request's id in a copy with
            // such escapes replaced, to answer it rather than leave the client waiting.
            let lax: Option<Value> = serde_json::from_slice(bytes)
                .ok()
                .or_else(|| serde_json::from_slice(&without_lone_surrogates(bytes)).ok());
            let id = lax
                .as_ref()
                .and_then(|v| v.get("id"))
                .cloned()
                .unwrap_or(Value::Null);
            let (code, what) = if lax.is_some() {
                (code::INVALID_REQUEST, "refused")
            } else {
                (code::PARSE_ERROR, "not JSON")
            };
            warn(&format!("client message {what}: {e}"));
            refuse(id, code, &format!("{what}: {e}"))
        }
    }
}

/// `bytes` with every `\uD800`-`\uDFFF` escape that is not half of a valid pair replaced
/// by `\uFFFD`.
fn without_lone_surrogates(bytes: &[u8]) -> Vec<u8> {
    let hex = |b: &[u8]| -> Option<u16> {
        let s = std::str::from_utf8(b).ok()?;
        u16::from_str_radix(s, 16).ok()
    };
    let at = |i: usize| -> Option<u16> {
        if bytes.get(i..i + 2)? == b"\\u" {
            hex(bytes.get(i + 2..i + 6)?)
        } else {
            None
        }
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        // An escaped backslash is not the start of an escape.
        if bytes.get(i..i + 2) == Some(b"\\\\") {
            out.extend_from_slice(b"\\\\");
            i += 2;
            continue;
        }
        match at(i) {
            Some(hi @ 0xD800..=0xDBFF) if matches!(at(i + 6), Some(0xDC00..=0xDFFF)) => {
                let _ = hi;
                out.extend_from_slice(bytes.get(i..i + 12).unwrap_or_default());
                i += 12;
            }
            Some(0xD800..=0xDFFF) => {
                out.extend_from_slice(b"\\uFFFD");
                i += 6;
            }
            _ => {
                out.extend_from_slice(bytes.get(i..i + 1).unwrap_or_default());
                i += 1;
            }
        }
    }
    out
}

/// A call held for a decision.
#[derive(Debug)]
pub struct Held {
    /// The call.
    pub call: ToolCall,
    /// The escalating evaluation.
    pub evaluation: Evaluation,
    /// Its entry in the approval queue.
    pub pending: PendingCall,
    /// Its idempotency key (its journal entry's).
    pub key: String,
}

impl Held {
    /// Whether the client may decide through an elicitation: not when the rule needs a signed
    /// approval, which an elicitation answer cannot carry, nor when the policy or the rule
    /// (`elicitation = false`, `elicit = false`, `--no-elicitation`) says to wait for `afr
    /// approve` only.
    pub fn elicitable(&self) -> bool {
        self.evaluation.signed_by.is_empty() && self.evaluation.elicit
    }
}

/// The gateway's recorder, policy and approval settings (one per process).
#[derive(Debug)]
pub struct Gate {
    /// The recorder directory (and its approval queue).
    pub dir: PathBuf,
    /// The policy; without one every call is allowed and no evaluation is recorded.
    pub policy: Option<Policy>,
    /// Forward calls that could not be recorded.
    pub fail_open: bool,
    /// How long a held call waits for a decision before it is rejected.
    pub approval_timeout: Duration,
    door: Mutex<Option<Door>>,
    /// Whether `door` holds a door (read without its lock while it writes).
    has_door: AtomicBool,
    no_server: NoServer,
    nonce: u64,
    counter: AtomicU64,
    held: Mutex<HashSet<String>>,
    stopping: AtomicBool,
    /// Completed calls' events waiting to be written together ([`Gate::complete`]).
    deferred: Mutex<Vec<CallRecord>>,
    deferred_cv: Condvar,
    journal: Mutex<Option<Arc<Journal>>>,
}

/// How long a completed call's event waits for others to share a synced write with.
pub const DEFER_WINDOW: Duration = Duration::from_millis(1);

fn warn(m: &str) {
    eprintln!("afr mcp: {m}");
}

impl Gate {
    /// A gateway recording into `dir`: through `afr serve` when it answers, else directly.
    /// A recorder that cannot be opened now is retried on each event. Starts the thread that
    /// writes deferred outcomes.
    pub fn new(
        dir: PathBuf,
        policy: Option<Policy>,
        fail_open: bool,
        approval_timeout: Duration,
        no_server: NoServer,
    ) -> Arc<Gate> {
        let door = match Door::for_producer(&dir, &no_server) {
            Ok(d) => Some(d),
            Err(e) => {
                warn(&format!(
                    "recorder unavailable ({e}); tool calls {}",
                    if fail_open {
                        "will be forwarded unrecorded (--fail-open)"
                    } else {
                        "will be refused until it is"
                    }
                ));
                None
            }
        };
        let gate = Arc::new(Gate {
            dir,
            policy,
            fail_open,
            approval_timeout,
            has_door: AtomicBool::new(door.is_some()),
            door: Mutex::new(door),
            no_server,
            nonce: rand::random(),
            counter: AtomicU64::new(0),
            held: Mutex::new(HashSet::new()),
            stopping: AtomicBool::new(false),
            deferred: Mutex::new(Vec::new()),
            deferred_cv: Condvar::new(),
            journal: Mutex::new(None),
        });
        gate.recover();
        let weak = Arc::downgrade(&gate);
        std::thread::spawn(move || write_deferred(&weak));
        gate
    }

    /// Records, under their own keys, the calls that gateways (and the spans that OTLP
    /// receivers) which died left in their journals (see [`journal`]), then deletes those
    /// journals.
    pub fn recover(&self) -> usize {
        journal::ALL
            .iter()
            .map(|name| {
                journal::recover(&self.dir, name, |o| {
                    self.record(&o.key, &journal::orphan_input(o)?)
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                })
            })
            .sum()
    }

    /// A fresh idempotency key for a call.
    fn new_key(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!(
            "mcp:{}",
            hex::encode(Sha256::digest(format!("{:016x}/{n}", self.nonce)))
        )
    }

    /// The call is over: its complete event goes to the recorder with others completed at
    /// about the same time (within [`DEFER_WINDOW`]), sharing one synced write; then its
    /// journal entry is marked done. The answer is relayed without waiting for that write (a
    /// crash in between leaves the journal entry, which [`Gate::recover`] records as
    /// "outcome unknown"). A failure to record it is reported on stderr.
    pub fn complete(&self, record: CallRecord) {
        lock(&self.deferred).push(record);
        self.deferred_cv.notify_one();
    }

    /// Writes every completed call's event now, then marks them done in the journal.
    fn write_completed(&self) {
        let batch = std::mem::take(&mut *lock(&self.deferred));
        if batch.is_empty() {
            return;
        }
        let tickets: Vec<_> = {
            let mut door = lock(&self.door);
            // One request for the whole batch through `afr serve` (one durable answer); an
            // event whose batch failed is sent again alone, through a door opened again.
            let events: Vec<(&EventInput, &str)> =
                batch.iter().map(|r| (&*r.event, r.key.as_str())).collect();
            let first = match door.as_mut() {
                Some(d) => d.submit_all(&events),
                None => Vec::new(),
            };
            let mut first = first.into_iter();
            batch
                .iter()
                .map(|r| match first.next() {
                    Some(t @ Ticket::Pending { .. }) => t,
                    Some(t @ (Ticket::Done(Ok(_)) | Ticket::Known(_))) => t,
                    _ => self.submit_locked(&mut door, &r.event, &r.key),
                })
                .collect()
        };
        let journal = lock(&self.journal).clone();
        for (r, t) in batch.iter().zip(tickets) {
            match t.settle() {
                Ok(_) => {
                    if let Some(j) = &journal {
                        j.done(&r.key);
                    }
                }
                Err(e) => warn(&format!(
                    "the event of a call of `{}` was not recorded: {e}",
                    r.event.intent.tool
                )),
            }
        }
    }

    /// Records `event` under `key` durably now (a denied or rejected call, an outcome
    /// unknown), and marks the call done in the journal; its sequence number.
    pub fn record(&self, key: &str, event: &EventInput) -> Result<u64, DoorError> {
        let t = self.submit_locked(&mut lock(&self.door), event, key);
        let r = t.settle();
        if r.is_ok()
            && let Some(j) = lock(&self.journal).as_ref()
        {
            j.done(key);
        }
        r
    }

    /// Hands `event` to the recorder under `key`; opens the door again if it is missing or
    /// failed (`afr serve` may have started or stopped) and tries once more.
    fn submit_locked(&self, door: &mut Option<Door>, event: &EventInput, key: &str) -> Ticket {
        let first = match door.as_mut().map(|d| d.submit(event, key)) {
            Some(Ok(t)) => return t,
            Some(Err(e)) => e,
            None => DoorError::NoRecorder,
        };
        *door = None;
        self.has_door.store(false, Ordering::Relaxed);
        let again = |e: DoorError, first: DoorError| {
            Ticket::Done(Err(DoorError::Again {
                first: Box::new(first),
                again: Box::new(e),
            }))
        };
        let mut fresh = match Door::for_producer(&self.dir, &self.no_server) {
            Ok(d) => d,
            Err(e) => return again(e, first),
        };
        let t = fresh.submit(event, key).unwrap_or_else(|e| again(e, first));
        *door = Some(fresh);
        self.has_door.store(true, Ordering::Relaxed);
        t
    }

    /// Journals a call's record (again, for a call journaled before) once a recorder is there
    /// to receive its event later; the ticket to settle before forwarding.
    fn journal(&self, record: &CallRecord) -> JournalTicket {
        // A door busy writing completed calls is there: this call does not wait for that
        // write (it needs only its own journal entry before it runs).
        let door = match self.door.try_lock() {
            Ok(d) => Some(d),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if self.has_door.load(Ordering::Relaxed) => {
                None
            }
            Err(std::sync::TryLockError::WouldBlock) => Some(lock(&self.door)),
        };
        if let Some(mut door) = door
            && door.is_none()
        {
            match Door::for_producer(&self.dir, &self.no_server) {
                Ok(d) => {
                    *door = Some(d);
                    self.has_door.store(true, Ordering::Relaxed);
                }
                Err(e) => return JournalTicket::Failed(format!("no recorder: {e}")),
            }
        }
        let mut j = lock(&self.journal);
        if j.is_none() {
            match Journal::create(&self.dir, journal::GATEWAY) {
                Ok(created) => *j = Some(Arc::new(created)),
                Err(e) => return JournalTicket::Failed(format!("the journal: {e}")),
            }
        }
        let Some(journal) = j.clone() else {
            return JournalTicket::Failed("no journal".into());
        };
        drop(j);
        match journal.append(&record.key, &record.event) {
            Ok(offset) => JournalTicket::Appended { journal, offset },
            Err(e) => JournalTicket::Failed(format!("the journal: {e}")),
        }
    }

    /// Writes and syncs every event handed over so far, and removes the journal when no call
    /// is left in it (before the process exits).
    pub fn flush(&self) {
        self.write_completed();
        if let Some(d) = lock(&self.door).as_ref()
            && let Err(e) = d.flush()
        {
            warn(&format!("events could not be written: {e}"));
        }
    }

    /// Writes every event handed over, and removes the journal if no call is left in it (the
    /// process is exiting; a held call left there is recorded by the next [`Gate::recover`]
    /// as never forwarded).
    pub fn close_journal(&self) {
        self.flush();
        if let Some(j) = lock(&self.journal).as_ref() {
            j.remove_if_done();
        }
    }

    /// Whether a call may be forwarded: its record is durable in the journal, or (under
    /// `--fail-open`) it is forwarded unrecorded.
    pub fn settle_intent(&self, tool: &str, ticket: &JournalTicket) -> Result<(), Refusal> {
        let r = match ticket {
            JournalTicket::Appended { journal, offset } => journal
                .sync_to(*offset)
                .map_err(|e| format!("the journal: {e}")),
            JournalTicket::Failed(e) => Err(e.clone()),
        };
        match r {
            Ok(()) => Ok(()),
            Err(err) if self.fail_open => {
                warn(&format!(
                    "call of `{tool}` forwarded unrecorded (--fail-open): {err}"
                ));
                Ok(())
            }
            Err(err) => {
                warn(&format!(
                    "call of `{tool}` refused: it could not be recorded: {err}"
                ));
                Err(Refusal {
                    code: code::NOT_RECORDED,
                    message: format!(
                        "afr gateway: the call could not be recorded, so it was not forwarded: {err}"
                    ),
                })
            }
        }
    }

    /// Decides what happens to `call` in `session`, and records it: the one door of a
    /// `tools/call`.
    pub fn admit(&self, session: &Session, call: ToolCall) -> Admission {
        let evaluation = self.policy.as_ref().map(|p| {
            p.evaluate(&Call {
                tool: &call.tool,
                args: &call.args,
                server_name: session.server_name(),
                command_line: &session.server_ref,
            })
        });
        let tool = call.tool.as_str();
        let verdict = evaluation
            .as_ref()
            .map_or(GuardrailVerdict::Allow, |e| e.verdict);
        let stage = match verdict {
            GuardrailVerdict::Allow | GuardrailVerdict::Warn => Stage::Forward,
            GuardrailVerdict::Deny => Stage::Denied,
            GuardrailVerdict::Escalate => Stage::Held,
        };
        let mut record = CallRecord {
            key: self.new_key(),
            event: Box::new(session.intent_event(
                tool,
                &call.args,
                &call.params,
                evaluation.as_ref(),
                stage,
            )),
        };
        // The event must be one the recorder takes, with room left for the result: arguments
        // too big to keep whole are kept as their size and hash (the call still runs).
        cap_arguments(&mut record.event);
        if let Err(e) = recordable(&record.event) {
            warn(&format!(
                "call of `{tool}` refused: its event cannot be recorded: {e}"
            ));
            return Admission::Refuse(Refusal {
                code: code::INVALID_REQUEST,
                message: format!("afr gateway: the call cannot be recorded ({e}); not forwarded"),
            });
        }
        let Some(e) = evaluation.filter(|e| {
            matches!(
                e.verdict,
                GuardrailVerdict::Deny | GuardrailVerdict::Escalate
            )
        }) else {
            let ticket = self.journal(&record);
            return Admission::Forward(Forward { record, ticket });
        };
        if e.verdict == GuardrailVerdict::Deny {
            // Never forwarded: its one event is complete now.
            if let Err(err) = self.record(&record.key, &record.event) {
                warn(&format!("denied call of `{tool}` not recorded: {err}"));
            }
            let reason = e.reason.as_deref().unwrap_or("no reason given");
            return Admission::Refuse(Refusal {
                code: code::DENIED,
                message: format!(
                    "afr gateway: denied by policy rule `{}`: {reason}",
                    e.guardrail
                ),
            });
        }
        // Escalated: journaled while it waits (a gateway that dies leaves it recorded as
        // never forwarded).
        if let Err(r) = self.settle_intent(tool, &self.journal(&record)) {
            return Admission::Refuse(r);
        }
        self.hold(session, call, e, record.key)
    }
}

impl Gate {
    /// A `tools/list` answer without the tools the policy denies outright (when it filters),
    /// and the event recording what was left out: `None` when nothing is left out. The answer
    /// is re-encoded (the only message the gateway rewrites).
    pub fn filter_tools_list(
        &self,
        session: &Session,
        msg: &Map<String, Value>,
    ) -> Option<(Vec<u8>, EventInput)> {
        let policy = self.policy.as_ref().filter(|p| p.filters_tools())?;
        let tools = msg.get("result")?.get("tools")?.as_array()?;
        let mut hidden = Vec::new();
        let mut kept = Vec::new();
        for t in tools {
            let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
            match policy.hides(name, session.server_name(), &session.server_ref) {
                Some(e) => hidden.push((name.to_owned(), e)),
                None => kept.push(t.clone()),
            }
        }
        if hidden.is_empty() {
            return None;
        }
        let mut out = msg.clone();
        if let Some(Value::Object(r)) = out.get_mut("result") {
            r.insert("tools".into(), Value::Array(kept));
        }
        let names: Vec<&str> = hidden.iter().map(|(n, _)| n.as_str()).collect();
        let mut ev = EventInput::intent_only(
            afr_core::Category::Other,
            "tools/list",
            json!({"hidden": names, "offered": tools.len() - names.len()}),
        );
        ev.lane = Some(session.lane.clone());
        ev.policy_evaluation = hidden
            .iter()
            .map(|(n, e)| afr_core::event::GuardrailEvaluation {
                guardrail: e.guardrail.clone(),
                version: Some(e.version.clone()),
                verdict: GuardrailVerdict::Deny,
                reason: Some(format!(
                    "`{n}` not offered: {}",
                    e.reason.as_deref().unwrap_or("denied by the policy")
                )),
            })
            .collect();
        ev.execution = Some(afr_core::event::Execution {
            command: "tools/list".into(),
            target: Some(session.target()),
            mutation: json!({"hidden": names}),
        });
        ev.set_capture(afr_core::event::Capture::inline("mcp-gateway"));
        let mut bytes = Value::Object(out).to_string().into_bytes();
        bytes.push(b'\n');
        Some((bytes, ev))
    }

    /// Records a `tools/list` filtering ([`Gate::filter_tools_list`]) under a fresh key.
    pub fn record_filtering(&self, ev: &EventInput) {
        let key = self.new_key();
        if let Err(e) = self.record(&key, ev) {
            warn(&format!(
                "the filtering of a tools/list answer was not recorded: {e}"
            ));
        }
    }
}

/// The action digest of an event's `intent` and `execution` (hex).
pub fn action_of(event: &EventInput) -> String {
    afr_core::approval::action_digest(&event.intent, event.execution.as_ref()).to_hex()
}

/// Arguments (and their copy in `execution.mutation`) larger than this are recorded as their
/// size and hash: the event must fit the recorder's cap with the result
/// ([`crate::session::MAX_RECORDED_RESULT`]) beside them.
pub const MAX_RECORDED_ARGS: usize = 256 * 1024;

fn cap_arguments(event: &mut EventInput) {
    let cap = |v: &mut Value| {
        let text = v.to_string();
        if text.len() > MAX_RECORDED_ARGS {
            *v = json!({
                "truncated": true,
                "bytes": text.len(),
                "sha256": crate::session::sha256(text.as_bytes()),
            });
        }
    };
    cap(&mut event.intent.args);
    if let Some(e) = event.execution.as_mut() {
        cap(&mut e.mutation);
    }
}

/// Whether the recorder takes `event`: its limits and reserved names, and its size as JSON
/// under the recorder's cap.
fn recordable(event: &EventInput) -> Result<(), afr_core::event::InputError> {
    event.validate()?;
    let too_big = |message: String| afr_core::event::InputError {
        path: String::new(),
        message,
    };
    let bytes = serde_json::to_vec(event)
        .map_err(|e| too_big(e.to_string()))?
        .len();
    if bytes > afr_core::event::DEFAULT_MAX_EVENT_BYTES {
        return Err(too_big(format!(
            "the event is {bytes} bytes, over the cap of {}",
            afr_core::event::DEFAULT_MAX_EVENT_BYTES
        )));
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The thread that writes completed calls' events, until the gate is gone.
fn write_deferred(gate: &Weak<Gate>) {
    loop {
        let Some(g) = gate.upgrade() else { return };
        let waiting = {
            let d = lock(&g.deferred);
            let (d, _) = g
                .deferred_cv
                .wait_timeout_while(d, Duration::from_millis(200), |d| d.is_empty())
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            !d.is_empty()
        };
        if waiting {
            std::thread::sleep(DEFER_WINDOW);
            g.write_completed();
        }
    }
}

mod held;

pub use held::{
    MAX_PROMPT_ARGUMENTS, SIGNED_APPROVAL_GUARDRAIL, SignatureRefused, check_signed_approval,
    elicitation_request, elicitation_ruling, prompt_arguments,
};
