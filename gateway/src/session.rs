//! What the gateway knows about one MCP session, and the event it builds for each call
//! (pure).
//!
//! One event per `tools/call`. [`Session::intent_event`] builds it as known before the call
//! runs (intent, execution, evaluation, provenance, a decision); the gate journals that and
//! forwards the call; [`Session::outcome_event`] completes it with the server's answer
//! (`effects`), or [`Session::unknown_outcome_event`] with `outcome unknown: <why>` when no
//! answer comes.
//!
//! ```text
//!  client ── tools/call id=7 ──► gateway ── event so far, journaled (synced) ──► server
//!  client ◄── result ─────────── gateway ◄── the event, completed, to the recorder ── server
//! ```
//!
//! A denied or rejected call's event is complete at once: no `execution` (it never ran) and
//! `effects.error` saying why.

use std::collections::HashMap;

use afr_core::{
    Category, EventInput,
    event::{
        CodeProvenance, ContextProvenance, ContextSource, Effects, Execution, GuardrailEvaluation,
        HumanApproval,
    },
};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::{gate::CallRecord, policy::Evaluation};

/// Category of every gateway event: a tool behind a protocol boundary, whose nature the
/// gateway cannot know (annotations are the server's claim).
pub const CATEGORY: Category = Category::Api;
/// Most resources remembered as context of later calls (the latest ones win).
pub const MAX_SOURCES: usize = 32;
/// A result bigger than this (as JSON) is recorded as its hash and size only, so that the
/// outcome fits the recorder's event cap.
pub const MAX_RECORDED_RESULT: usize = 512 * 1024;

/// Room kept beside a result for the rest of `effects` (an error text, the truncation marker).
const EFFECTS_SLACK: usize = 4 * 1024;

/// The size of `event` as JSON.
pub fn json_len(event: &EventInput) -> usize {
    serde_json::to_vec(event).map_or(usize::MAX, |v| v.len())
}

/// A request the gateway waits an answer for.
#[derive(Debug, Clone)]
pub enum Pending {
    /// `initialize` or `server/discover`: its result names the server.
    Initialize,
    /// `tools/list`: its result carries annotations.
    ToolsList,
    /// `resources/read` of `uri`.
    ResourcesRead {
        /// The resource.
        uri: String,
    },
    /// A `tools/call` that was forwarded, and its record so far.
    ToolCall(CallRecord),
}

/// Where a call stands when its intent-side event is written.
#[derive(Debug, Clone, Copy)]
pub enum Stage<'a> {
    /// Forwarded now (allowed, or no policy).
    Forward,
    /// Denied by the policy: never forwarded.
    Denied,
    /// Escalated: held until a human decides.
    Held,
    /// Decided by a human (or rejected on timeout).
    Decided {
        /// The human's decision.
        approval: &'a HumanApproval,
        /// Approved (forwarded now) or rejected (never forwarded).
        approved: bool,
        /// Why it was rejected.
        why: &'a str,
    },
}

/// One session's state.
#[derive(Debug)]
pub struct Session {
    /// The lane of every event of this session: `mcp-` and 16 random hex digits.
    pub lane: String,
    /// How the server is reached: its command line (stdio) or URL (HTTP).
    pub server_ref: String,
    /// Who the client authenticated as to the gateway (`afr mcp proxy --client-token
    /// NAME=FILE`): recorded as `delegation_provenance.on_behalf_of`.
    pub principal: Option<String>,
    transport: &'static str,
    client: Option<(String, String)>,
    server: Option<(String, String)>,
    client_elicits: bool,
    destructive: HashMap<String, bool>,
    sources: Vec<ContextSource>,
    pending: HashMap<String, Pending>,
}

fn info(v: &Value) -> Option<(String, String)> {
    Some((
        v.get("name")?.as_str()?.to_owned(),
        v.get("version")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    ))
}

/// The client's `_meta` entry `name` on a request of the stateless generation (2026-07-28),
/// under the spec's reverse-DNS prefix or bare.
fn meta<'v>(params: &'v Value, name: &str) -> Option<&'v Value> {
    let m = params.get("_meta")?;
    m.get(format!("io.modelcontextprotocol/{name}"))
        .or_else(|| m.get(name))
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The map key of a JSON-RPC id. A numeric id is keyed by its value as a double: a server
/// may answer `61.0` as `61`, and one in JavaScript answers an id above 2^53 rounded to the
/// nearest double; both must still find their request. Strings stay distinct from numbers.
pub fn id_key(id: &Value) -> String {
    match id {
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.is_finite() => format!("#{f}"),
            _ => format!("#{n}"),
        },
        other => other.to_string(),
    }
}

impl Session {
    /// A new session with the server reached over `transport` (`stdio`, `http`) at
    /// `server_ref` (its command line, or its URL).
    pub fn new(transport: &'static str, server_ref: String) -> Session {
        Session {
            lane: format!("mcp-{:016x}", rand::random::<u64>()),
            server_ref,
            principal: None,
            transport,
            client: None,
            server: None,
            client_elicits: false,
            destructive: HashMap::new(),
            sources: Vec::new(),
            pending: HashMap::new(),
        }
    }

    /// serverInfo.name, once `initialize` (or `server/discover`) was answered.
    pub fn server_name(&self) -> Option<&str> {
        self.server.as_ref().map(|(n, _)| n.as_str())
    }

    /// clientInfo.name, once the client said it.
    pub fn client_name(&self) -> Option<&str> {
        self.client.as_ref().map(|(n, _)| n.as_str())
    }

    /// Whether the client declared the elicitation capability (it can be asked to approve).
    pub fn client_elicits(&self) -> bool {
        self.client_elicits
    }

    /// Notes a request from the client before it is forwarded; `key` names it until its
    /// answer comes (the JSON-RPC id over stdio, the exchange over HTTP).
    pub fn on_request(&mut self, key: String, method: &str, params: &Value) {
        if let Some(c) = params
            .get("clientInfo")
            .or_else(|| meta(params, "clientInfo"))
        {
            self.client = info(c).or(self.client.take());
        }
        // Only a session opened with `initialize` (2025-11-25) takes server-to-client
        // requests; a stateless client (2026-07-28) gets `input_required` results instead,
        // which the gateway does not originate, so it is never asked directly.
        if method == "initialize" {
            self.client_elicits = params.pointer("/capabilities/elicitation").is_some();
        }
        let pending = match method {
            "initialize" | "server/discover" => Pending::Initialize,
            "tools/list" => Pending::ToolsList,
            "resources/read" => match params.get("uri").and_then(Value::as_str) {
                Some(uri) => Pending::ResourcesRead {
                    uri: uri.to_owned(),
                },
                None => return,
            },
            _ => return,
        };
        self.pending.insert(key, pending);
    }

    /// Whether the request `key` waits for a `tools/list` answer.
    pub fn awaits_tools_list(&self, key: &str) -> bool {
        matches!(self.pending.get(key), Some(Pending::ToolsList))
    }

    /// Notes a forwarded `tools/call`.
    pub fn on_call_forwarded(&mut self, key: String, record: CallRecord) {
        self.pending.insert(key, Pending::ToolCall(record));
    }

    /// Takes the answer to the request `key`; a `tools/call`'s record is returned, to be
    /// completed with the answer.
    pub fn on_response(&mut self, key: &str, msg: &Map<String, Value>) -> Option<CallRecord> {
        let result = msg.get("result");
        // 2026-07-28: every result names its server in `_meta`.
        if let Some(s) = result
            .and_then(|r| r.get("_meta"))
            .and_then(|m| m.get("io.modelcontextprotocol/serverInfo"))
            .and_then(info)
        {
            self.server = Some(s);
        }
        let pending = self.pending.remove(key)?;
        match pending {
            Pending::Initialize => {
                if let Some(s) = result.and_then(|r| r.get("serverInfo")).and_then(info) {
                    self.server = Some(s);
                }
            }
            Pending::ToolsList => {
                let tools = result
                    .and_then(|r| r.get("tools"))
                    .and_then(Value::as_array);
                for t in tools.into_iter().flatten() {
                    if let Some(name) = t.get("name").and_then(Value::as_str) {
                        let d = t
                            .pointer("/annotations/destructiveHint")
                            .and_then(Value::as_bool)
                            .unwrap_or(false);
                        self.destructive.insert(name.to_owned(), d);
                    }
                }
            }
            Pending::ResourcesRead { uri } => {
                if let Some(contents) = result.and_then(|r| r.get("contents")) {
                    // serde_json's map is sorted, so the hash does not depend on key order.
                    let hash = sha256(contents.to_string().as_bytes());
                    self.sources.retain(|s| s.uri != *uri);
                    self.sources.push(ContextSource {
                        uri: uri.clone(),
                        content_hash: Some(hash),
                        kind: Some("mcp_resource".into()),
                    });
                    if self.sources.len() > MAX_SOURCES {
                        self.sources.remove(0);
                    }
                }
            }
            Pending::ToolCall(record) => return Some(record),
        }
        None
    }

    /// Forgets the request `key` (its exchange ended without an answer); a `tools/call`'s
    /// record is returned, to be recorded with its outcome unknown.
    pub fn forget(&mut self, key: &str) -> Option<CallRecord> {
        match self.pending.remove(key)? {
            Pending::ToolCall(record) => Some(record),
            _ => None,
        }
    }

    /// Takes every `tools/call` still waiting for an answer, with its key.
    pub fn take_pending_calls(&mut self) -> Vec<(String, CallRecord)> {
        let mut out = Vec::new();
        self.pending.retain(|k, p| match p {
            Pending::ToolCall(record) => {
                out.push((k.clone(), record.clone()));
                false
            }
            _ => true,
        });
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The server as events and prompts name it: `<name> <version> (<transport>: <ref>)`.
    pub fn target(&self) -> String {
        match &self.server {
            Some((n, v)) => format!("{n} {v} ({}: {})", self.transport, self.server_ref),
            None => format!("{}: {}", self.transport, self.server_ref),
        }
    }

    fn code_provenance(&self) -> CodeProvenance {
        CodeProvenance {
            agent: self.client.as_ref().map(|(n, _)| n.clone()),
            agent_version: self.client.as_ref().map(|(_, v)| v.clone()),
            tool_version: self.server.as_ref().map(|(n, v)| format!("{n} {v}")),
            capture: Some(afr_core::event::Capture::inline("mcp-gateway")),
            ..CodeProvenance::default()
        }
    }

    /// A call's event as known before it can run: journaled for a forwarded or held call,
    /// complete for a denied or rejected one.
    pub fn intent_event(
        &self,
        tool: &str,
        args: &Value,
        params: &Value,
        evaluation: Option<&Evaluation>,
        stage: Stage<'_>,
    ) -> EventInput {
        let mut ev = EventInput::intent_only(CATEGORY, tool, args.clone());
        ev.lane = Some(self.lane.clone());
        ev.code_provenance = Some(self.code_provenance());
        if let Some(p) = &self.principal {
            ev.delegation_provenance = Some(afr_core::event::DelegationProvenance {
                on_behalf_of: Some(p.clone()),
                ..Default::default()
            });
        }
        if let Some(e) = evaluation {
            ev.policy_evaluation = vec![GuardrailEvaluation {
                guardrail: e.guardrail.clone(),
                version: Some(e.version.clone()),
                verdict: e.verdict,
                reason: e.reason.clone(),
            }];
        }
        let error = |why: &str| Effects {
            error: Some(why.to_owned()),
            ..Effects::default()
        };
        let runs = match stage {
            Stage::Forward => true,
            Stage::Denied => {
                ev.effects = Some(error("denied by policy; not forwarded to the server"));
                false
            }
            Stage::Held => false,
            Stage::Decided {
                approval,
                approved,
                why,
            } => {
                ev.human_approval = Some(approval.clone());
                if !approved {
                    ev.effects = Some(error(why));
                }
                approved
            }
        };
        if runs {
            let destructive = self.destructive.get(tool).copied().unwrap_or(false);
            ev.execution = Some(Execution {
                command: "tools/call".into(),
                target: Some(self.target()),
                mutation: if destructive {
                    args.clone()
                } else {
                    Value::Null
                },
            });
        }
        let mut sources = self.sources.clone();
        if let Some(tp) = params.pointer("/_meta/traceparent").and_then(Value::as_str) {
            sources.push(ContextSource {
                uri: format!("traceparent:{tp}"),
                content_hash: None,
                kind: Some("traceparent".into()),
            });
        }
        // 2026-07-28: a retry after `input_required` carries the user's answers; what they
        // said shaped the call.
        if let Some(answers) = params.get("inputResponses") {
            sources.push(ContextSource {
                uri: "mcp:inputResponses".into(),
                content_hash: Some(sha256(answers.to_string().as_bytes())),
                kind: Some("mcp_input_responses".into()),
            });
        }
        if !sources.is_empty() {
            ev.context_provenance = Some(ContextProvenance {
                sources,
                environment: None,
            });
        }
        ev
    }

    /// A call's event completed with the server's response: `effects`.
    pub fn outcome_event(&self, record: &CallRecord, msg: &Map<String, Value>) -> EventInput {
        let mut effects = Effects::default();
        if let Some(Value::Object(r)) = msg.get("result") {
            // The whole result but its `_meta`: content, structuredContent, isError, and in
            // the 2026-07-28 generation resultType (`input_required` and its requests).
            let mut rv = r.clone();
            rv.remove("_meta");
            let rv = Value::Object(rv);
            let text = rv.to_string();
            // Whatever the event holds already (arguments, an approval), the result gets only
            // the room left under the recorder's cap.
            let room = MAX_RECORDED_RESULT.min(
                afr_core::event::DEFAULT_MAX_EVENT_BYTES
                    .saturating_sub(json_len(&record.event))
                    .saturating_sub(EFFECTS_SLACK),
            );
            effects.return_value = if text.len() > room {
                json!({"truncated": true, "bytes": text.len(), "sha256": sha256(text.as_bytes())})
            } else {
                rv
            };
            if r.get("isError").and_then(Value::as_bool) == Some(true) {
                effects.error = Some("the tool reported isError".into());
            }
        } else if let Some(e) = msg.get("error") {
            let message = e.get("message").and_then(Value::as_str).unwrap_or("");
            let code = e.get("code").cloned().unwrap_or(Value::Null);
            effects.error = Some(format!("JSON-RPC error {code}: {message}"));
            effects.external_response = e.clone();
        }
        let mut ev = (*record.event).clone();
        ev.effects = Some(effects);
        ev
    }

    /// A call's event completed without an answer: `outcome unknown: <why>`.
    pub fn unknown_outcome_event(&self, record: &CallRecord, why: &str) -> EventInput {
        let mut ev = (*record.event).clone();
        ev.effects = Some(Effects {
            error: Some(format!("outcome unknown: {why}")),
            ..Effects::default()
        });
        ev
    }
}

#[cfg(test)]
mod id_tests {
    use super::*;

    #[test]
    fn numeric_ids_match_in_any_spelling() {
        let k = |t: &str| id_key(&serde_json::from_str(t).unwrap_or(Value::Null));
        assert_eq!(k("61.0"), k("61"));
        // A JavaScript server answers 2^53 + 1 as 2^53.
        assert_eq!(k("9007199254740993"), k("9007199254740992"));
        assert_ne!(k("61"), k("\"61\""));
        assert_ne!(k("61"), k("62"));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn answer(s: &mut Session, id: Value, result: Value) {
        s.on_response(&id_key(&id), &obj(json!({"id": id, "result": result})));
    }

    /// The record of a forwarded call of `tool`, as the gate journals it.
    fn rec(tool: &str) -> CallRecord {
        let s = Session::new("stdio", "x".into());
        CallRecord {
            key: format!("k-{tool}"),
            event: Box::new(s.intent_event(tool, &json!({}), &Value::Null, None, Stage::Forward)),
        }
    }

    /// The event as recorded (JSON).
    fn js(ev: EventInput) -> Value {
        serde_json::to_value(ev).unwrap()
    }

    fn valid(ev: &Value) -> afr_core::EventInput {
        afr_core::EventInput::from_json(ev.to_string().as_bytes(), 1 << 20).unwrap()
    }

    #[test]
    fn events_carry_client_server_sources_and_trace() {
        let mut s = Session::new("stdio", "node server.js".into());
        let init = json!({"clientInfo": {"name": "c", "version": "9"}, "capabilities": {"elicitation": {}}});
        s.on_request(id_key(&json!(1)), "initialize", &init);
        answer(
            &mut s,
            json!(1),
            json!({"serverInfo": {"name": "srv", "version": "2"}}),
        );
        assert!(s.client_elicits());
        s.on_request(
            id_key(&json!("r")),
            "resources/read",
            &json!({"uri": "file:///a"}),
        );
        answer(&mut s, json!("r"), json!({"contents": [{"text": "hi"}]}));
        s.on_request(id_key(&json!(2)), "tools/list", &Value::Null);
        let tools = json!({"tools": [{"name": "rm", "annotations": {"destructiveHint": true}}]});
        answer(&mut s, json!(2), tools);
        let params =
            json!({"name": "rm", "arguments": {"p": 1}, "_meta": {"traceparent": "00-ab-cd-01"}});
        let ev = js(s.intent_event("rm", &json!({"p": 1}), &params, None, Stage::Forward));
        assert_eq!(valid(&ev).intent.tool, "rm");
        assert_eq!(ev["code_provenance"]["agent"], "c");
        assert_eq!(ev["code_provenance"]["tool_version"], "srv 2");
        assert_eq!(ev["execution"]["target"], "srv 2 (stdio: node server.js)");
        assert_eq!(ev["execution"]["mutation"], json!({"p": 1}));
        let src = &ev["context_provenance"]["sources"];
        assert_eq!(src[0]["uri"], "file:///a");
        assert_eq!(
            src[0]["content_hash"],
            sha256(br#"[{"text":"hi"}]"#).as_str()
        );
        assert_eq!(src[1]["uri"], "traceparent:00-ab-cd-01");
    }

    #[test]
    fn the_stateless_generation_names_client_and_server_per_request() {
        let mut s = Session::new("http", "http://h/mcp".into());
        let discover = json!({"_meta": {
            "io.modelcontextprotocol/clientInfo": {"name": "py", "version": "2.3.0"},
            "io.modelcontextprotocol/clientCapabilities": {}}});
        s.on_request(id_key(&json!("x1")), "server/discover", &discover);
        answer(
            &mut s,
            json!("x1"),
            json!({"resultType": "complete",
                   "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "1"}}}),
        );
        assert_eq!(
            (s.client_name(), s.server_name()),
            (Some("py"), Some("srv"))
        );
        assert!(!s.client_elicits());
        let retry = json!({"inputResponses": {"q": {"action": "accept"}}, "requestState": "v1"});
        let ev = js(s.intent_event("ask", &Value::Null, &retry, None, Stage::Forward));
        assert_eq!(
            ev["context_provenance"]["sources"][0]["kind"],
            "mcp_input_responses"
        );
        let ask = CallRecord {
            key: "k".into(),
            event: Box::new(s.intent_event("ask", &json!({}), &Value::Null, None, Stage::Forward)),
        };
        s.on_call_forwarded("x2".into(), ask);
        let r =
            obj(json!({"id": 3, "result": {"resultType": "input_required", "_meta": {"a": 1}}}));
        let record = s.on_response("x2", &r).unwrap();
        let ev = js(s.outcome_event(&record, &r));
        assert_eq!(
            ev["effects"]["return_value"],
            json!({"resultType": "input_required"})
        );
        assert_eq!(ev["execution"]["target"], "srv 1 (http: http://h/mcp)");
    }

    #[test]
    fn held_and_decided_calls() {
        let s = Session::new("stdio", "x".into());
        let args = json!({"path": "/etc/x"});
        let held = js(s.intent_event("w", &args, &Value::Null, None, Stage::Held));
        valid(&held);
        assert!(held.get("execution").is_none() && held.get("effects").is_none());
        let approval: HumanApproval = serde_json::from_value(
            json!({"approver": "alice", "prompt": "p", "decision": "approved", "decided_at_us": 5}),
        )
        .unwrap();
        let decided = |approved, why| Stage::Decided {
            approval: &approval,
            approved,
            why,
        };
        let ev = js(s.intent_event("w", &args, &Value::Null, None, decided(true, "")));
        assert_eq!(valid(&ev).human_approval.unwrap().approver, "alice");
        assert_eq!(ev["execution"]["command"], "tools/call");
        let ev = js(s.intent_event("w", &args, &Value::Null, None, decided(false, "rejected")));
        assert!(ev.get("execution").is_none());
        assert_eq!(ev["effects"]["error"], "rejected");
    }

    #[test]
    fn a_call_is_one_event_completed_by_its_answer() {
        let mut s = Session::new("stdio", "x".into());
        s.on_call_forwarded(id_key(&json!(5)), rec("echo"));
        let resp = obj(json!({"id": 5, "error": {"code": -32602, "message": "bad"}}));
        let record = s.on_response(&id_key(&json!(5)), &resp).unwrap();
        let ev = js(s.outcome_event(&record, &resp));
        assert_eq!(ev["intent"]["tool"], "echo");
        assert_eq!(ev["execution"]["command"], "tools/call");
        assert_eq!(ev["effects"]["error"], "JSON-RPC error -32602: bad");
        valid(&ev);
        s.on_call_forwarded(id_key(&json!("a")), rec("slow"));
        let left = s.take_pending_calls();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].0, "\"a\"");
        let ev = js(s.unknown_outcome_event(&left[0].1, "gone"));
        assert_eq!(ev["effects"]["error"], "outcome unknown: gone");
        assert!(s.take_pending_calls().is_empty());
    }
}
