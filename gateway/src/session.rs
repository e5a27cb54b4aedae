//! What the gateway knows about one MCP session, and the events it builds from it (pure).
//!
//! Each `tools/call` gives two events, because the store is append-only and nothing may run
//! before it is recorded:
//!
//! ```text
//!  client ── tools/call id=7 ──► gateway ── intent event (seq n) durable ──► server
//!  client ◄── result ─────────── gateway ◄── outcome event, parent_event = n ── server
//! ```
//!
//! - the **intent** event (before forwarding): `intent` = tool + arguments, `execution`,
//!   `policy_evaluation`, `code_provenance`, `context_provenance`;
//! - the **outcome** event (when the response arrives, before the client sees it): `intent` =
//!   the tool only, `effects` = the result or the JSON-RPC error, and
//!   `delegation_provenance.parent_event` = the intent's sequence number. If no response ever
//!   arrives, the outcome says `outcome unknown: <why>` where the gateway can still write it
//!   (server exit, a signal); after `kill -9` of the gateway only the intent remains, which is
//!   itself the evidence that the outcome is unknown.
//!
//! A denied call gives one event: the intent with the `deny` evaluation and
//! `effects.error`, no `execution` (it never ran).

use std::collections::HashMap;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::policy::{Evaluation, Verdict};

/// Category of every gateway event: a tool behind a protocol boundary, whose nature the
/// gateway cannot know (annotations are the server's claim).
pub const CATEGORY: &str = "api";
/// Most resources remembered as context of later calls (the latest ones win).
pub const MAX_SOURCES: usize = 32;
/// A result bigger than this (as JSON) is recorded as its hash and size only, so that the
/// outcome fits the recorder's event cap.
pub const MAX_RECORDED_RESULT: usize = 512 * 1024;

/// A request the gateway waits an answer for.
#[derive(Debug, Clone)]
pub enum Pending {
    /// `initialize`: its result names the server.
    Initialize,
    /// `tools/list`: its result carries annotations.
    ToolsList,
    /// `resources/read` of `uri`.
    ResourcesRead {
        /// The resource.
        uri: String,
    },
    /// A `tools/call` that was forwarded.
    ToolCall {
        /// The tool.
        tool: String,
        /// Its intent event, unless it was forwarded unrecorded (`--fail-open`).
        intent_seq: Option<u64>,
    },
}

/// One session's state.
#[derive(Debug)]
pub struct Session {
    /// The lane of every event of this session: `mcp-` and 16 random hex digits.
    pub lane: String,
    /// The server's command line.
    pub command_line: String,
    client: Option<(String, String)>,
    server: Option<(String, String)>,
    destructive: HashMap<String, bool>,
    sources: Vec<Value>,
    pending: HashMap<String, Pending>,
    counter: u64,
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

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The map key of a JSON-RPC id.
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

impl Session {
    /// A new session around the server started with `command_line`.
    pub fn new(command_line: String) -> Session {
        Session {
            lane: format!("mcp-{:016x}", rand::random::<u64>()),
            command_line,
            client: None,
            server: None,
            destructive: HashMap::new(),
            sources: Vec::new(),
            pending: HashMap::new(),
            counter: 0,
        }
    }

    /// serverInfo.name, once `initialize` was answered.
    pub fn server_name(&self) -> Option<&str> {
        self.server.as_ref().map(|(n, _)| n.as_str())
    }

    /// A fresh idempotency key for the next event (unique per session and event).
    pub fn next_key(&mut self, phase: &str) -> String {
        self.counter += 1;
        let h = Sha256::digest(format!("{}/{}/{phase}", self.lane, self.counter));
        format!("mcp:{}", hex::encode(h))
    }

    /// Notes a request from the client before it is forwarded.
    pub fn on_request(&mut self, id: &Value, method: &str, params: &Value) {
        let pending = match method {
            "initialize" => {
                self.client = params.get("clientInfo").and_then(info);
                Pending::Initialize
            }
            "tools/list" => Pending::ToolsList,
            "resources/read" => match params.get("uri").and_then(Value::as_str) {
                Some(uri) => Pending::ResourcesRead {
                    uri: uri.to_owned(),
                },
                None => return,
            },
            _ => return,
        };
        self.pending.insert(id_key(id), pending);
    }

    /// Notes a forwarded `tools/call`.
    pub fn on_call_forwarded(&mut self, id: &Value, tool: &str, intent_seq: Option<u64>) {
        self.pending.insert(
            id_key(id),
            Pending::ToolCall {
                tool: tool.to_owned(),
                intent_seq,
            },
        );
    }

    /// Takes a response from the server; a `tools/call` answer is returned for recording.
    pub fn on_response(&mut self, msg: &Map<String, Value>) -> Option<(String, Option<u64>)> {
        let pending = self.pending.remove(&id_key(msg.get("id")?))?;
        let result = msg.get("result");
        match pending {
            Pending::Initialize => {
                self.server = result.and_then(|r| r.get("serverInfo")).and_then(info);
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
                    self.sources.retain(|s| s["uri"] != uri.as_str());
                    self.sources
                        .push(json!({"uri": uri, "content_hash": hash, "kind": "mcp_resource"}));
                    if self.sources.len() > MAX_SOURCES {
                        self.sources.remove(0);
                    }
                }
            }
            Pending::ToolCall { tool, intent_seq } => return Some((tool, intent_seq)),
        }
        None
    }

    /// Takes every `tools/call` still waiting for an answer, with its JSON-RPC id.
    pub fn take_pending_calls(&mut self) -> Vec<(Value, String, Option<u64>)> {
        let mut out = Vec::new();
        self.pending.retain(|k, p| match p {
            Pending::ToolCall { tool, intent_seq } => {
                let id = serde_json::from_str(k).unwrap_or(Value::Null);
                out.push((id, tool.clone(), *intent_seq));
                false
            }
            _ => true,
        });
        out
    }

    fn target(&self) -> String {
        match &self.server {
            Some((n, v)) => format!("{n} {v} (stdio: {})", self.command_line),
            None => format!("stdio: {}", self.command_line),
        }
    }

    fn code_provenance(&self) -> Value {
        let mut m = Map::new();
        if let Some((n, v)) = &self.client {
            m.insert("agent".into(), n.as_str().into());
            m.insert("agent_version".into(), v.as_str().into());
        }
        if let Some((n, v)) = &self.server {
            m.insert("tool_version".into(), format!("{n} {v}").into());
        }
        Value::Object(m)
    }

    /// The intent event of a call (before forwarding), or the only event of a denied call.
    pub fn intent_event(
        &self,
        tool: &str,
        args: &Value,
        params: &Value,
        evaluation: Option<&Evaluation>,
    ) -> Value {
        let mut ev = json!({
            "category": CATEGORY,
            "lane": self.lane,
            "intent": {"tool": tool, "args": args},
            "code_provenance": self.code_provenance(),
        });
        let denied = evaluation.is_some_and(|e| e.verdict == Verdict::Deny);
        if let Some(e) = evaluation {
            ev["policy_evaluation"] = json!([{
                "guardrail": e.guardrail,
                "version": e.version,
                "verdict": e.verdict.name(),
                "reason": e.reason,
            }]);
        }
        if denied {
            ev["effects"] = json!({"error": "denied by policy; not forwarded to the server"});
        } else {
            ev["execution"] = json!({"command": "tools/call", "target": self.target()});
            if self.destructive.get(tool).copied().unwrap_or(false) {
                ev["execution"]["mutation"] = args.clone();
            }
        }
        let mut sources = self.sources.clone();
        if let Some(tp) = params.pointer("/_meta/traceparent").and_then(Value::as_str) {
            sources.push(json!({"uri": format!("traceparent:{tp}"), "kind": "traceparent"}));
        }
        if !sources.is_empty() {
            ev["context_provenance"] = json!({ "sources": sources });
        }
        ev
    }

    /// The outcome event of a call from the server's response.
    pub fn outcome_event(
        &self,
        tool: &str,
        intent_seq: Option<u64>,
        msg: &Map<String, Value>,
    ) -> Value {
        let mut effects = Map::new();
        if let Some(r) = msg.get("result") {
            let mut rv = Map::new();
            for k in ["content", "structuredContent", "isError"] {
                if let Some(v) = r.get(k) {
                    rv.insert(k.into(), v.clone());
                }
            }
            let rv = Value::Object(rv);
            let text = rv.to_string();
            let rv = if text.len() > MAX_RECORDED_RESULT {
                json!({"truncated": true, "bytes": text.len(), "sha256": sha256(text.as_bytes())})
            } else {
                rv
            };
            effects.insert("return_value".into(), rv);
            if r.get("isError").and_then(Value::as_bool) == Some(true) {
                effects.insert("error".into(), "the tool reported isError".into());
            }
        } else if let Some(e) = msg.get("error") {
            let message = e.get("message").and_then(Value::as_str).unwrap_or("");
            let code = e.get("code").cloned().unwrap_or(Value::Null);
            effects.insert(
                "error".into(),
                format!("JSON-RPC error {code}: {message}").into(),
            );
            effects.insert("external_response".into(), e.clone());
        }
        self.outcome(tool, intent_seq, Value::Object(effects))
    }

    /// The outcome event of a call whose answer never came.
    pub fn unknown_outcome_event(&self, tool: &str, intent_seq: Option<u64>, why: &str) -> Value {
        self.outcome(
            tool,
            intent_seq,
            json!({"error": format!("outcome unknown: {why}")}),
        )
    }

    fn outcome(&self, tool: &str, intent_seq: Option<u64>, effects: Value) -> Value {
        let mut ev = json!({
            "category": CATEGORY,
            "lane": self.lane,
            "intent": {"tool": tool},
            "execution": {"command": "tools/call", "target": self.target()},
            "effects": effects,
        });
        if let Some(seq) = intent_seq {
            ev["delegation_provenance"] = json!({"parent_event": {"seq": seq}});
        }
        ev
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

    #[test]
    fn events_carry_client_server_sources_and_trace() {
        let mut s = Session::new("node server.js".into());
        s.on_request(
            &json!(1),
            "initialize",
            &json!({"clientInfo": {"name": "c", "version": "9"}}),
        );
        s.on_response(&obj(
            json!({"id": 1, "result": {"serverInfo": {"name": "srv", "version": "2"}}}),
        ));
        s.on_request(&json!("r"), "resources/read", &json!({"uri": "file:///a"}));
        s.on_response(&obj(
            json!({"id": "r", "result": {"contents": [{"text": "hi"}]}}),
        ));
        s.on_request(&json!(2), "tools/list", &Value::Null);
        s.on_response(&obj(json!({"id": 2, "result": {"tools": [{"name": "rm", "annotations": {"destructiveHint": true}}]}})));
        let params =
            json!({"name": "rm", "arguments": {"p": 1}, "_meta": {"traceparent": "00-ab-cd-01"}});
        let ev = s.intent_event("rm", &json!({"p": 1}), &params, None);
        let input = afr_core::EventInput::from_json(ev.to_string().as_bytes(), 1 << 20).unwrap();
        assert_eq!(input.intent.tool, "rm");
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
    fn outcomes_link_to_their_intent() {
        let mut s = Session::new("x".into());
        s.on_call_forwarded(&json!(5), "echo", Some(41));
        let resp = obj(json!({"id": 5, "error": {"code": -32602, "message": "bad"}}));
        let (tool, seq) = s.on_response(&resp).unwrap();
        let ev = s.outcome_event(&tool, seq, &resp);
        assert_eq!(ev["delegation_provenance"]["parent_event"]["seq"], 41);
        assert_eq!(ev["effects"]["error"], "JSON-RPC error -32602: bad");
        afr_core::EventInput::from_json(ev.to_string().as_bytes(), 1 << 20).unwrap();
        s.on_call_forwarded(&json!("a"), "slow", Some(42));
        let left = s.take_pending_calls();
        assert_eq!(left, vec![(json!("a"), "slow".to_owned(), Some(42))]);
        assert!(s.take_pending_calls().is_empty());
    }
}
