//! What both transports share: recording, the policy's verdict, and holding escalated calls
//! until a human decides. [`Gate::admit`] is the one door a `tools/call` goes through.
//!
//! One event per call, written once the call is over; until then its event as known so far is
//! in the gateway's [`journal`](crate::journal), synced before the call is forwarded:
//!
//! ```text
//!            allow ──► journal (synced) ──► forward ──► answer ──► the call's event
//!  admit ──► deny ───► the call's event ──► JSON-RPC error -32002
//!            escalate ► journal ──► queue (+ elicitation) ──► wait ──► conclude
//!                          approved ──► journal again (synced) ──► forward ──► answer ──► event
//!                          rejected / timeout ──► the call's event ──► -32004
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

/// JSON-RPC error codes the gateway answers with.
pub mod code {
    /// Not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// A duplicate key, a batch, an over-long message, a `tools/call` without a name.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The call was not recorded, so it was not forwarded (fail closed).
    pub const NOT_RECORDED: i64 = -32001;
    /// The policy denied the call.
    pub const DENIED: i64 = -32002;
    /// The server exited, or the gateway stopped, before the answer came.
    pub const NO_ANSWER: i64 = -32003;
    /// An escalated call was rejected (by a person, or because nobody decided in time).
    pub const REJECTED: i64 = -32004;
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
            let lax: Option<Value> = serde_json::from_slice(bytes).ok();
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
    /// approval, which an elicitation answer cannot carry.
    pub fn elicitable(&self) -> bool {
        self.evaluation.signed_by.is_empty()
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
        [journal::GATEWAY, journal::OTLP]
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
            batch
                .iter()
                .map(|r| self.submit_locked(&mut door, &r.event, &r.key))
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
        t
    }

    /// Journals a call's record (again, for a call journaled before) once a recorder is there
    /// to receive its event later; the ticket to settle before forwarding.
    fn journal(&self, record: &CallRecord) -> JournalTicket {
        {
            let mut door = lock(&self.door);
            if door.is_none() {
                match Door::for_producer(&self.dir, &self.no_server) {
                    Ok(d) => *door = Some(d),
                    Err(e) => return JournalTicket::Failed(format!("no recorder: {e}")),
                }
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

    fn hold(
        &self,
        session: &Session,
        call: ToolCall,
        evaluation: Evaluation,
        key: String,
    ) -> Admission {
        let id = approvals::new_id();
        let now = now_us();
        let timeout_us = u64::try_from(self.approval_timeout.as_micros()).unwrap_or(u64::MAX);
        // What an approval signs: the intent and execution recorded if the call runs.
        let runs = self.approved_event(session, &call, &evaluation, None);
        let recorder = lock(&self.door)
            .as_mut()
            .and_then(|d| d.recorder_id().ok())
            .map(|r| format!("0x{}", hex::encode(r)))
            .unwrap_or_default();
        let pending = PendingCall {
            intent: serde_json::to_value(&runs.intent).unwrap_or_default(),
            execution: runs
                .execution
                .as_ref()
                .and_then(|e| serde_json::to_value(e).ok())
                .unwrap_or_default(),
            action: action_of(&runs),
            recorder,
            signed_by: evaluation
                .signed_by
                .iter()
                .map(|a| a.name.clone())
                .collect(),
            prompt: prompt(session, &call, &evaluation, &id, self.approval_timeout),
            id,
            tool: call.tool.clone(),
            arguments: call.args.clone(),
            server: session.target(),
            lane: session.lane.clone(),
            rule: evaluation.guardrail.clone(),
            created_at_us: now,
            expires_at_us: now.saturating_add(timeout_us),
            pid: std::process::id(),
        };
        if let Err(e) = approvals::submit(&self.dir, &pending) {
            warn(&format!("call of `{}` could not be queued: {e}", call.tool));
            let r = Refusal {
                code: code::REJECTED,
                message: format!(
                    "afr gateway: the call needs approval and could not be queued: {e}"
                ),
            };
            let mut ev = session.intent_event(
                &call.tool,
                &call.args,
                &call.params,
                Some(&evaluation),
                Stage::Held,
            );
            ev.effects = Some(Effects {
                error: Some(r.message.clone()),
                ..Effects::default()
            });
            if let Err(err) = self.record(&key, &ev) {
                warn(&format!(
                    "the refusal of `{}` was not recorded: {err}",
                    call.tool
                ));
            }
            return Admission::Refuse(r);
        }
        self.held_ids().insert(pending.id.clone());
        warn(&format!(
            "call of `{}` held for approval: afr approve {} (or afr reject {})",
            call.tool, pending.id, pending.id
        ));
        Admission::Hold(Box::new(Held {
            call,
            evaluation,
            pending,
            key,
        }))
    }

    fn held_ids(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits (blocking) for the first of: a decision in the queue, one from `elicited` (the
    /// client's answer to an elicitation), or the timeout, which rejects.
    pub fn wait(&self, held: &Held, elicited: Option<&Receiver<Ruling>>) -> Ruling {
        let id = &held.pending.id;
        loop {
            match approvals::decision(&self.dir, id) {
                Ok(Some(r)) => return r,
                Ok(None) => {}
                // A half-written or unreadable decision is not a decision; say so and wait on.
                Err(e) => warn(&format!("approval {id}: {e}")),
            }
            // The gateway's own rejection: it stops, or nobody decided in time.
            let why = if self.stopping.load(Ordering::Relaxed) {
                Some("the gateway stopped before a decision".to_owned())
            } else if now_us() >= held.pending.expires_at_us {
                Some(format!(
                    "no decision within {} s",
                    self.approval_timeout.as_secs()
                ))
            } else {
                None
            };
            if let Some(reason) = why {
                let own = Ruling {
                    decision: Decision::Rejected,
                    approver: "afr-gateway".into(),
                    decided_at_us: now_us(),
                    reason: Some(reason),
                    signature: None,
                };
                return approvals::claim(&self.dir, id, own);
            }
            match elicited.map(|rx| rx.recv_timeout(POLL)) {
                // The client's answer is a decision like any other: the first one wins.
                Some(Ok(r)) => return approvals::claim(&self.dir, id, r),
                Some(Err(_)) => {}
                None => std::thread::sleep(POLL),
            }
        }
    }

    /// Takes the decision on a held call: an approved call is journaled again with its
    /// approval and execution (synced) and may then be forwarded; a rejected one gets its
    /// event now and is answered with an error.
    pub fn conclude(
        &self,
        session: &Session,
        held: Held,
        ruling: &Ruling,
    ) -> Result<Forward, Refusal> {
        approvals::remove(&self.dir, &held.pending.id);
        self.held_ids().remove(&held.pending.id);
        let call = &held.call;
        let approval = HumanApproval {
            approver: ruling.approver.clone(),
            prompt: held.pending.prompt.clone(),
            decision: match ruling.decision {
                Decision::Approved => afr_core::event::Decision::Approved,
                Decision::Rejected => afr_core::event::Decision::Rejected,
            },
            decided_at_us: ruling.decided_at_us,
            signature: None,
        };
        if ruling.decision == Decision::Approved {
            let mut event = self.approved_event(session, call, &held.evaluation, Some(&approval));
            let signed = match &ruling.signature {
                Some(sig) => self.check_signature(&held, &mut event, sig),
                None if !held.evaluation.signed_by.is_empty() => Err(SignatureRefused::Unsigned {
                    approver: ruling.approver.clone(),
                    rule: held.evaluation.guardrail.clone(),
                    approvers: names(&held.evaluation),
                }),
                None => Ok(()),
            };
            match signed {
                Ok(()) => {
                    // When it ran: now, as it is forwarded (an approval's validity window is
                    // checked against it).
                    event.timestamp_us = Some(now_us());
                    let record = CallRecord {
                        key: held.key.clone(),
                        event: Box::new(event),
                    };
                    let ticket = self.journal(&record);
                    self.settle_intent(&call.tool, &ticket)?;
                    return Ok(Forward { record, ticket });
                }
                Err(why) => {
                    return Err(self.refuse_signature(session, &held, &why.to_string()));
                }
            }
        }
        let why = match &ruling.reason {
            Some(r) => format!(
                "rejected by {}: {r}; not forwarded to the server",
                ruling.approver
            ),
            None => format!(
                "rejected by {}; not forwarded to the server",
                ruling.approver
            ),
        };
        if ruling.signature.is_some() {
            warn(&format!(
                "the signature on the rejection of `{}` was not recorded: the gateway records signed approvals only",
                call.tool
            ));
        }
        let stage = Stage::Decided {
            approval: &approval,
            approved: false,
            why: &why,
        };
        let event = session.intent_event(
            &call.tool,
            &call.args,
            &call.params,
            Some(&held.evaluation),
            stage,
        );
        if let Err(e) = self.record(&held.key, &event) {
            warn(&format!("rejection of `{}` not recorded: {e}", call.tool));
        }
        Err(Refusal {
            code: code::REJECTED,
            message: format!("afr gateway: {why}"),
        })
    }

    /// The event of `call` as recorded if it runs with `approval` (arguments capped as
    /// [`Gate::admit`] caps them).
    fn approved_event(
        &self,
        session: &Session,
        call: &ToolCall,
        evaluation: &Evaluation,
        approval: Option<&HumanApproval>,
    ) -> EventInput {
        let mut ev = session.intent_event(
            &call.tool,
            &call.args,
            &call.params,
            Some(evaluation),
            match approval {
                Some(approval) => Stage::Decided {
                    approval,
                    approved: true,
                    why: "",
                },
                // What an approval will sign: the event as it runs, before the decision.
                None => Stage::Forward,
            },
        );
        cap_arguments(&mut ev);
        ev
    }

    /// Checks `sig` on the approval of `held`, whose event is `event`: bound to this event's
    /// intent and execution, valid, by one of the rule's approvers (if it names any), unexpired
    /// now, its nonce never used before. On success the signature goes into the event, with
    /// the approver's name from the policy.
    fn check_signature(
        &self,
        held: &Held,
        event: &mut EventInput,
        sig: &afr_core::event::ApprovalSignature,
    ) -> Result<(), SignatureRefused> {
        let approval = event
            .human_approval
            .as_mut()
            .ok_or(SignatureRefused::NoApproval)?;
        approval.signature = Some(sig.clone());
        event.validate().map_err(SignatureRefused::Malformed)?;
        let payload = event.clone().into_payload().1;
        let mut recorder = [0u8; 20];
        hex::decode_to_slice(
            held.pending.recorder.trim_start_matches("0x"),
            &mut recorder,
        )
        .map_err(|_| SignatureRefused::NoRecorderId)?;
        let signed = match afr_core::approval::check(&payload, &recorder, now_us()) {
            Ok(Some(s)) => s,
            Ok(None) => return Err(SignatureRefused::NoSignature),
            Err(p) => {
                return Err(SignatureRefused::Check {
                    check: p.check.to_string(),
                    detail: p.detail,
                });
            }
        };
        let e = &held.evaluation;
        if !e.signed_by.is_empty() {
            let Some(a) = e.signed_by.iter().find(|a| a.keys.contains(&signed.signer)) else {
                return Err(SignatureRefused::NotAnApprover {
                    signer: signed.signer,
                    rule: e.guardrail.clone(),
                    approvers: names(e),
                });
            };
            if let Some(h) = event.human_approval.as_mut() {
                h.approver.clone_from(&a.name);
            }
        }
        // Durable and shared by every gateway of this recorder: a restarted `afr mcp wrap`
        // (every MCP client restart) must not run the same signed decision twice.
        match approvals::claim_nonce(&self.dir, &signed.nonce) {
            Ok(true) => Ok(()),
            Ok(false) => Err(SignatureRefused::Replayed {
                nonce: signed.nonce,
            }),
            Err(e) => Err(SignatureRefused::NonceNotDurable(e)),
        }
    }

    /// Refuses `held` because its approval's signature does not hold (`why`): the call never
    /// runs, and its event records the refusal as the gateway's own `signed-approval` verdict.
    fn refuse_signature(&self, session: &Session, held: &Held, why: &str) -> Refusal {
        let call = &held.call;
        warn(&format!(
            "call of `{}` refused: its approval's signature does not hold: {why}",
            call.tool
        ));
        let message =
            format!("the approval's signature was refused ({why}); not forwarded to the server");
        let mut event = session.intent_event(
            &call.tool,
            &call.args,
            &call.params,
            Some(&held.evaluation),
            Stage::Held,
        );
        event.policy_evaluation.push(GuardrailEvaluation {
            guardrail: SIGNED_APPROVAL_GUARDRAIL.into(),
            version: Some(held.evaluation.version.clone()),
            verdict: GuardrailVerdict::Deny,
            reason: Some(why.to_owned()),
        });
        event.effects = Some(Effects {
            error: Some(message.clone()),
            ..Effects::default()
        });
        if let Err(e) = self.record(&held.key, &event) {
            warn(&format!("refusal of `{}` not recorded: {e}", call.tool));
        }
        Refusal {
            code: code::REJECTED,
            message: format!("afr gateway: {message}"),
        }
    }

    /// Removes this gateway's held calls from the queue and rejects them (it is stopping;
    /// they never ran).
    pub fn abandon_held(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        for id in self.held_ids().drain() {
            approvals::remove(&self.dir, &id);
        }
    }
}

/// Why the signature on an approval does not let its call run (recorded as the reason of the
/// gateway's `signed-approval` verdict).
#[derive(Debug, thiserror::Error)]
pub enum SignatureRefused {
    /// The rule requires a signature and the decision came without one.
    #[error(
        "the approval by {approver} is unsigned, and rule `{rule}` requires one signed by {approvers}"
    )]
    Unsigned {
        /// Who decided.
        approver: String,
        /// The rule.
        rule: String,
        /// Its approvers, by name.
        approvers: String,
    },
    /// The event holds no approval to sign (a gateway bug).
    #[error("the approved call has no approval")]
    NoApproval,
    /// The signature's fields break the event's limits.
    #[error("the signed approval is malformed: {0}")]
    Malformed(afr_core::event::InputError),
    /// The gateway cannot name the recorder the signature must be bound to.
    #[error("the gateway does not know its recorder's id")]
    NoRecorderId,
    /// The approval carries no signature after all.
    #[error("the approval carries no signature")]
    NoSignature,
    /// A check of `docs/spec/approvals.md` failed (binding, validity, signer).
    #[error("{check}: {detail}")]
    Check {
        /// The check.
        check: String,
        /// What failed.
        detail: String,
    },
    /// A valid signature by a key of none of the rule's approvers.
    #[error("signed by {signer}, who is none of the approvers of rule `{rule}` ({approvers})")]
    NotAnApprover {
        /// The signer.
        signer: String,
        /// The rule.
        rule: String,
        /// Its approvers, by name.
        approvers: String,
    },
    /// The statement's nonce was claimed before: a replay.
    #[error("the approval's nonce {nonce} was used before: a replayed approval")]
    Replayed {
        /// The nonce.
        nonce: String,
    },
    /// The nonce could not be claimed durably.
    #[error("the approval's nonce could not be claimed durably ({0}); not forwarded")]
    NonceNotDurable(approvals::QueueError),
}

/// The guardrail under which the gateway records a refused approval signature.
pub const SIGNED_APPROVAL_GUARDRAIL: &str = "signed-approval";

/// The action digest of an event's `intent` and `execution` (hex).
pub fn action_of(event: &EventInput) -> String {
    afr_core::approval::action_digest(&event.intent, event.execution.as_ref()).to_hex()
}

fn names(e: &Evaluation) -> String {
    let n: Vec<&str> = e.signed_by.iter().map(|a| a.name.as_str()).collect();
    n.join(", ")
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

/// The text an approver is shown, in the queue and in an elicitation; recorded verbatim as
/// `human_approval.prompt`.
fn prompt(
    session: &Session,
    call: &ToolCall,
    e: &Evaluation,
    id: &str,
    timeout: Duration,
) -> String {
    let args = serde_json::to_string_pretty(&call.args).unwrap_or_default();
    let signed = if e.signed_by.is_empty() {
        String::new()
    } else {
        format!("\nneeds an approval signed by one of: {}", names(e))
    };
    format!(
        "Approve this tool call?\n\
         tool: {}\n\
         server: {}\n\
         arguments: {args}\n\
         policy rule: {} ({}){signed}\n\
         approval id: {id}; rejected unless decided within {} s",
        call.tool,
        session.target(),
        e.guardrail,
        e.reason.as_deref().unwrap_or("no reason given"),
        timeout.as_secs()
    )
}

/// The gateway's own `elicitation/create` request asking the client's user to decide on
/// `held` (2025-11-25 generation, form mode: one boolean).
pub fn elicitation_request(held: &Held) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": format!("{ELICITATION_ID_PREFIX}{}", held.pending.id),
        "method": "elicitation/create",
        "params": {
            "message": held.pending.prompt,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "approve": {
                        "type": "boolean",
                        "title": "Approve",
                        "description": "Run this tool call",
                    },
                },
                "required": ["approve"],
            },
        },
    })
}

/// The decision a client's answer to [`elicitation_request`] carries: approved only for
/// `action: accept` with `approve: true`; anything else (decline, cancel, an error) rejects.
pub fn elicitation_ruling(answer: &Map<String, Value>, client: Option<&str>) -> Ruling {
    let result = answer.get("result");
    let action = result.and_then(|r| r.get("action")).and_then(Value::as_str);
    let approve = result
        .and_then(|r| r.pointer("/content/approve"))
        .and_then(Value::as_bool);
    let (decision, reason) = match (action, approve) {
        (Some("accept"), Some(true)) => (Decision::Approved, None),
        (Some("accept"), _) => (Decision::Rejected, Some("answered approve = false".into())),
        (Some(a), _) => (Decision::Rejected, Some(format!("the user chose `{a}`"))),
        (None, _) => (
            Decision::Rejected,
            Some("the client answered the elicitation with an error".into()),
        ),
    };
    Ruling {
        decision,
        // The gateway cannot authenticate the person behind the client: it names the client.
        approver: format!("user of MCP client {}", client.unwrap_or("(unnamed)")),
        decided_at_us: now_us(),
        reason,
        signature: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn elicitation_answers() {
        let m = |v: Value| match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        let yes = json!({"id": "afr-approval-1", "result": {"action": "accept", "content": {"approve": true}}});
        let r = elicitation_ruling(&m(yes), Some("claude"));
        assert_eq!(r.decision, Decision::Approved);
        assert_eq!(r.approver, "user of MCP client claude");
        for no in [
            json!({"result": {"action": "accept", "content": {"approve": false}}}),
            json!({"result": {"action": "decline"}}),
            json!({"result": {"action": "cancel"}}),
            json!({"error": {"code": -1, "message": "x"}}),
        ] {
            assert_eq!(
                elicitation_ruling(&m(no), None).decision,
                Decision::Rejected
            );
        }
    }
}
