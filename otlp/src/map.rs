//! From OTLP spans to AFR events (pure): one event per tool-execution span, in any of the three
//! dialects agent frameworks speak. The mapping is documented field by field in `docs/otlp.md`.
//!
//! | dialect | a tool span is | tool | arguments | result |
//! |---|---|---|---|---|
//! | GenAI semantic conventions | `gen_ai.operation.name = execute_tool` | `gen_ai.tool.name` | `gen_ai.tool.call.arguments` | `gen_ai.tool.call.result` |
//! | OpenInference | `openinference.span.kind = TOOL` | `tool.name` | `input.value` | `output.value` |
//! | OpenLLMetry | `traceloop.span.kind = tool` | `gen_ai.tool.name`, `traceloop.entity.name` | `traceloop.entity.input` | `traceloop.entity.output` |
//!
//! Everything else is counted by kind in the [`Summary`], never dropped silently.

use std::collections::HashMap;

use afr_core::{
    Category, EventInput,
    event::{
        CodeProvenance, ContextProvenance, ContextSource, DelegationProvenance, Effects, Execution,
    },
};
use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::{AnyValue, KeyValue, any_value::Value as Av},
    trace::v1::{Span, status::StatusCode},
};
use serde::Serialize;
use serde_json::{Value, json};

/// The largest argument or result recorded as is; larger ones are recorded as their size and
/// SHA-256 (an event must fit the recorder's cap).
pub const MAX_RECORDED_VALUE: usize = 256 * 1024;

/// A tool span turned into an event.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEvent {
    /// The idempotency key: `otlp:<trace id>:<span id>` (a retried export records nothing twice).
    pub key: String,
    /// The event.
    pub event: EventInput,
    /// The index, in the same list, of the tool span this one ran under (a sub-agent's tool
    /// under the tool that delegated to it): its event is recorded first, and this one's
    /// `delegation_provenance.parent_event` names it.
    pub parent: Option<usize>,
    /// The (trace id, span id) of the span above it that this export lacks (the chain of
    /// parents breaks there): its agent, conversation and delegation may be filled in once
    /// that span arrives.
    pub missing_parent: Option<(Vec<u8>, Vec<u8>)>,
    /// The W3C trace contexts (`00-<trace>-<span>-01`) of this span and the spans under it in
    /// the export: an MCP client sends the current one as `_meta.traceparent`, which the MCP
    /// gateway records; an event of the gateway citing one of them is the same call.
    pub joins: Vec<String>,
}

/// What one export held.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Spans in the export.
    pub spans: u64,
    /// Tool-execution spans, by dialect.
    pub tool_spans: HashMap<String, u64>,
    /// Other spans, by kind (`invoke_agent`, `chat`, `other`): seen, not recorded.
    pub ignored: HashMap<String, u64>,
    /// Spans refused as malformed (no trace or span id of the right length).
    pub malformed: u64,
}

/// The dialect a tool span speaks, or what else a span is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tool(&'static str),
    Agent,
    Chat,
    Other,
}

pub(crate) fn get<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Av> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

pub(crate) fn text<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match get(attrs, key)? {
        Av::StringValue(s) if !s.is_empty() => Some(s),
        _ => None,
    }
}

/// An attribute value as JSON: arrays and key-value lists structurally, bytes as hex.
pub fn json_of(v: &AnyValue) -> Value {
    match &v.value {
        None => Value::Null,
        Some(Av::StringValue(s)) => Value::String(s.clone()),
        Some(Av::BoolValue(b)) => Value::Bool(*b),
        Some(Av::IntValue(i)) => json!(i),
        Some(Av::DoubleValue(d)) => json!(d),
        Some(Av::ArrayValue(a)) => Value::Array(a.values.iter().map(json_of).collect()),
        Some(Av::KvlistValue(l)) => Value::Object(
            l.values
                .iter()
                .map(|kv| {
                    (
                        kv.key.clone(),
                        kv.value.as_ref().map_or(Value::Null, json_of),
                    )
                })
                .collect(),
        ),
        Some(Av::BytesValue(b)) => Value::String(hex::encode(b)),
        // An index into a profiles dictionary: meaningless in a trace.
        Some(Av::StringValueStrindex(_)) => Value::Null,
    }
}

/// A structured value: a string that holds JSON is parsed (frameworks send arguments as JSON
/// text), anything else kept as it is.
pub(crate) fn structured(v: &Av) -> Value {
    match v {
        Av::StringValue(s) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
        other => json_of(&AnyValue {
            value: Some(other.clone()),
        }),
    }
}

/// `v`, or its size and hash when over [`MAX_RECORDED_VALUE`].
pub(crate) fn capped(v: Value) -> Value {
    let text = v.to_string();
    if text.len() <= MAX_RECORDED_VALUE {
        return v;
    }
    json!({
        "truncated": true,
        "bytes": text.len(),
        "sha256": format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(text.as_bytes()))),
    })
}

fn kind(s: &Span) -> Kind {
    let a = &s.attributes;
    match text(a, "gen_ai.operation.name") {
        Some("execute_tool") => return Kind::Tool("genai"),
        Some("invoke_agent" | "create_agent") => return Kind::Agent,
        Some("chat" | "text_completion" | "generate_content" | "embeddings") => return Kind::Chat,
        _ => {}
    }
    match text(a, "openinference.span.kind") {
        Some("TOOL") => return Kind::Tool("openinference"),
        Some("AGENT" | "CHAIN") => return Kind::Agent,
        Some("LLM") => return Kind::Chat,
        _ => {}
    }
    match text(a, "traceloop.span.kind") {
        Some("tool") => Kind::Tool("openllmetry"),
        Some("agent" | "workflow") => Kind::Agent,
        _ if s.name.ends_with(".tool") => Kind::Tool("openllmetry"),
        _ => Kind::Other,
    }
}

fn tool_name(s: &Span, dialect: &str) -> String {
    let a = &s.attributes;
    let named = match dialect {
        "openinference" => text(a, "tool.name"),
        "openllmetry" => text(a, "gen_ai.tool.name").or_else(|| text(a, "traceloop.entity.name")),
        _ => text(a, "gen_ai.tool.name"),
    };
    named
        .map(str::to_owned)
        .or_else(|| s.name.strip_prefix("execute_tool ").map(str::to_owned))
        .or_else(|| s.name.strip_suffix(".tool").map(str::to_owned))
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| {
            if s.name.is_empty() {
                "unknown_tool".to_owned()
            } else {
                s.name.clone()
            }
        })
}

fn arguments(s: &Span, dialect: &str) -> Option<Value> {
    let a = &s.attributes;
    let v = match dialect {
        "openinference" => get(a, "input.value").map(structured),
        "openllmetry" => get(a, "traceloop.entity.input").map(structured),
        _ => get(a, "gen_ai.tool.call.arguments").map(structured),
    }?;
    Some(unwrap_arguments(v))
}

/// The call's own arguments out of the wrappers instrumentations put around them:
/// `{"args": [], "kwargs": {…}}` (OpenInference for smolagents, OpenLLMetry) gives the keyword
/// arguments; LangChain's `{"input_str": …, "inputs": {…}, "kwargs": …, …}` (OpenLLMetry) gives
/// `inputs`; `{"input_str": "<JSON or Python dict>"}` (as #31 saw from OpenInference for
/// LangGraph; 0.1.80 sends the arguments themselves) gives the parsed string. Anything else is kept as it is.
pub fn unwrap_arguments(v: Value) -> Value {
    let Value::Object(m) = &v else { return v };
    if let (Some(Value::Array(args)), Some(kw @ Value::Object(_))) =
        (m.get("args"), m.get("kwargs"))
        && args.is_empty()
    {
        return kw.clone();
    }
    if let Some(s) = m.get("input_str").and_then(Value::as_str) {
        if let Some(inputs @ Value::Object(_)) = m.get("inputs") {
            return inputs.clone();
        }
        if let Some(parsed) = python_literal(s) {
            return parsed;
        }
        if m.len() == 1 {
            return json!({ "input": s });
        }
    }
    v
}

/// `s` as JSON, or as a Python literal dict or list of the simple kind LangChain prints
/// (`{'query': 'x', 'n': 2, 'ok': True, 'none': None}`): quotes and constants translated
/// outside strings. `None` when it is neither an object nor an array.
fn python_literal(s: &str) -> Option<Value> {
    let t = s.trim();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    if let Ok(v @ (Value::Object(_) | Value::Array(_))) = serde_json::from_str::<Value>(t) {
        return Some(v);
    }
    let mut out = String::with_capacity(t.len());
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                // A string: re-quoted as JSON.
                let mut body = String::new();
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            if let Some(e) = chars.next() {
                                if e != c {
                                    body.push('\\');
                                }
                                body.push(e);
                            }
                        }
                        d if d == c => break,
                        d => body.push(d),
                    }
                }
                out.push_str(&serde_json::to_string(&body.replace("\\'", "'")).ok()?);
            }
            c if c.is_ascii_alphabetic() => {
                let mut word = String::from(c);
                while let Some(&d) = chars.peek() {
                    if d.is_ascii_alphanumeric() || d == '_' {
                        word.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push_str(match word.as_str() {
                    "True" => "true",
                    "False" => "false",
                    "None" => "null",
                    _ => return None,
                });
            }
            c => out.push(c),
        }
    }
    match serde_json::from_str(&out).ok()? {
        v @ (Value::Object(_) | Value::Array(_)) => Some(v),
        _ => None,
    }
}

/// What a LangChain `ToolMessage` result says, out of its serialisations.
#[derive(Debug, Clone, PartialEq)]
struct ToolMessage {
    /// What the tool returned.
    content: Value,
    /// A handled `ToolException` (the span's status stays OK; the message says `status:
    /// error`): `the tool reported an error: <content>`.
    error: Option<String>,
    /// The model's tool call it answers.
    call_id: Option<String>,
}

/// The `ToolMessage` in a tool span's result, as the instrumentations serialise it: OpenLLMetry
/// `{"output": {"lc": 1, "type": "constructor", "id": [..., "ToolMessage"], "kwargs": {…}}, "kwargs": {…}}`,
/// OpenInference `{"type": "tool", "data": {…}}`, or the message's fields themselves
/// (`{"type": "tool", "content": …, "status": …}`). `None` for any other result.
fn tool_message(result: &Value) -> Option<ToolMessage> {
    if let Some(m) = result.get("output").and_then(tool_message) {
        return Some(m);
    }
    let v = result;
    let fields =
        if v.get("lc").is_some() && v.get("type").and_then(Value::as_str) == Some("constructor") {
            let id = v.get("id")?.as_array()?;
            (id.last()?.as_str()? == "ToolMessage").then_some(())?;
            v.get("kwargs")?
        } else if v.get("type").and_then(Value::as_str) == Some("tool") {
            match v.get("data") {
                Some(d @ Value::Object(_)) => d,
                _ => v,
            }
        } else {
            return None;
        };
    let m = fields.as_object()?;
    if m.get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t != "tool")
    {
        return None;
    }
    let content = m.get("content")?.clone();
    let error = (m.get("status").and_then(Value::as_str) == Some("error")).then(|| {
        let text = match &content {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        format!("the tool reported an error: {text}")
    });
    Some(ToolMessage {
        content,
        error,
        call_id: m
            .get("tool_call_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// LangGraph's ToolNode runs each tool call in a node task whose input is
/// `{"__type": "tool_call_with_context", "tool_call": {"name", "args", "id"}, "state": …}`
/// (OpenLLMetry wraps it in `{"inputs": …}`): the arguments and call id of `tool`'s call, from
/// the nearest span above it that has one.
fn langgraph_tool_call(
    s: &Span,
    tool: &str,
    by_id: &HashMap<(&[u8], &[u8]), Ctx<'_>>,
) -> Option<(Value, Option<String>)> {
    ancestors(s, by_id).into_iter().take(2).find_map(|c| {
        let a = &c.span.attributes;
        let input = get(a, "input.value")
            .or_else(|| get(a, "traceloop.entity.input"))
            .map(structured)?;
        let input = input.get("inputs").unwrap_or(&input);
        if input.get("__type").and_then(Value::as_str) != Some("tool_call_with_context") {
            return None;
        }
        let call = input.get("tool_call")?;
        if call.get("name").and_then(Value::as_str) != Some(tool) {
            return None;
        }
        Some((
            call.get("args")?.clone(),
            call.get("id").and_then(Value::as_str).map(str::to_owned),
        ))
    })
}

fn result(s: &Span, dialect: &str) -> Option<Value> {
    let key = match dialect {
        "openinference" => "output.value",
        "openllmetry" => "traceloop.entity.output",
        _ => "gen_ai.tool.call.result",
    };
    get(&s.attributes, key).map(structured)
}

/// The error a span reports: its status message, else its exception event, else its
/// `error.type`.
fn error(s: &Span) -> Option<String> {
    let status = s.status.as_ref()?;
    if status.code != StatusCode::Error as i32 {
        return None;
    }
    if !status.message.is_empty() {
        return Some(status.message.clone());
    }
    for e in &s.events {
        if e.name == "exception" {
            let t = text(&e.attributes, "exception.type").unwrap_or("exception");
            return Some(match text(&e.attributes, "exception.message") {
                Some(m) => format!("{t}: {m}"),
                None => t.to_owned(),
            });
        }
    }
    Some(
        text(&s.attributes, "error.type")
            .unwrap_or("the span's status is ERROR")
            .to_owned(),
    )
}

/// A span with the resource it came from.
struct Ctx<'a> {
    span: &'a Span,
    resource: &'a [KeyValue],
}

fn valid_ids(s: &Span) -> bool {
    s.trace_id.len() == 16
        && s.span_id.len() == 8
        && (s.parent_span_id.is_empty() || s.parent_span_id.len() == 8)
}

/// The events of an export's tool spans, and what it held.
pub fn map(req: &ExportTraceServiceRequest) -> (Vec<ToolEvent>, Summary) {
    let mut summary = Summary::default();
    let mut by_id: HashMap<(&[u8], &[u8]), Ctx<'_>> = HashMap::new();
    let mut order = Vec::new();
    for rs in &req.resource_spans {
        let resource = rs.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
        for ss in &rs.scope_spans {
            for span in &ss.spans {
                summary.spans += 1;
                if !valid_ids(span) {
                    summary.malformed += 1;
                    continue;
                }
                by_id.insert(
                    (&span.trace_id[..], &span.span_id[..]),
                    Ctx { span, resource },
                );
                order.push((&span.trace_id[..], &span.span_id[..]));
            }
        }
    }
    let mut children: Children<'_> = HashMap::new();
    for c in by_id.values() {
        if !c.span.parent_span_id.is_empty() {
            children
                .entry((&c.span.trace_id[..], &c.span.parent_span_id[..]))
                .or_default()
                .push(&c.span.span_id[..]);
        }
    }
    let mut events = Vec::new();
    let mut tools: Vec<&Span> = Vec::new();
    for id in order {
        let Some(ctx) = by_id.get(&id) else { continue };
        match kind(ctx.span) {
            Kind::Tool(dialect) => {
                *summary.tool_spans.entry(dialect.to_owned()).or_default() += 1;
                let mut ev = tool_event(ctx, dialect, &by_id);
                ev.joins = subtree(ctx.span, &children)
                    .into_iter()
                    .map(|id| traceparent(&ctx.span.trace_id, id))
                    .collect();
                events.push(ev);
                tools.push(ctx.span);
            }
            Kind::Agent => *summary.ignored.entry("invoke_agent".into()).or_default() += 1,
            Kind::Chat => *summary.ignored.entry("chat".into()).or_default() += 1,
            Kind::Other => *summary.ignored.entry("other".into()).or_default() += 1,
        }
    }
    (parents_first(events, &tools, &by_id), summary)
}

/// The span ids under each (trace id, span id) of an export.
type Children<'a> = HashMap<(&'a [u8], &'a [u8]), Vec<&'a [u8]>>;

/// `s` and the spans under it in the export (span ids), breadth first, bounded.
fn subtree<'a>(s: &'a Span, children: &Children<'a>) -> Vec<&'a [u8]> {
    let mut out = vec![&s.span_id[..]];
    let mut i = 0;
    while i < out.len() && out.len() < 64 {
        if let Some(c) = children.get(&(&s.trace_id[..], out[i])) {
            out.extend(c.iter().copied());
        }
        i += 1;
    }
    out.truncate(64);
    out
}

/// The idempotency key of a span's event: `otlp:<trace id>:<span id>` (hex).
pub fn span_key(trace: &[u8], span: &[u8]) -> String {
    format!("otlp:{}:{}", hex::encode(trace), hex::encode(span))
}

/// The W3C trace context of a span, as the MCP gateway records it (`traceparent:` + this).
pub fn traceparent(trace: &[u8], span: &[u8]) -> String {
    format!("00-{}-{}-01", hex::encode(trace), hex::encode(span))
}

/// `events` ordered so that a tool span's event comes after the tool span it ran under, with
/// `parent` set to that one's index.
fn parents_first(
    events: Vec<ToolEvent>,
    tools: &[&Span],
    by_id: &HashMap<(&[u8], &[u8]), Ctx<'_>>,
) -> Vec<ToolEvent> {
    let index: HashMap<&[u8], usize> = tools
        .iter()
        .enumerate()
        .map(|(i, s)| (&s.span_id[..], i))
        .collect();
    let parent_of: Vec<Option<usize>> = tools
        .iter()
        .map(|s| {
            ancestors(s, by_id)
                .into_iter()
                .find_map(|c| index.get(&c.span.span_id[..]).copied())
        })
        .collect();
    let depth = |mut i: usize| {
        let mut d = 0;
        while let Some(p) = parent_of[i] {
            i = p;
            d += 1;
            if d > 64 {
                break;
            }
        }
        d
    };
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| (depth(i), i));
    let position: HashMap<usize, usize> =
        order.iter().enumerate().map(|(at, &i)| (i, at)).collect();
    let mut slots: Vec<Option<ToolEvent>> = events.into_iter().map(Some).collect();
    order
        .iter()
        .map(|&i| {
            let mut e = slots[i]
                .take()
                .unwrap_or_else(|| unreachable!("each index once"));
            e.parent = parent_of[i].and_then(|p| position.get(&p).copied());
            e
        })
        .collect()
}

/// Longest string kept whole in an event (a span name, a status message, an id...); longer
/// ones keep their start and the hash of the whole.
pub const MAX_STRING: usize = 4096;
/// The schema's longest lane.
const MAX_LANE: usize = 64;

/// `conv-<conversation id>`, else `trace-<trace id>`; a conversation id too long for a lane is
/// replaced by its hash.
fn lane(conversation: Option<&str>, trace: &str) -> String {
    match conversation {
        Some(c) if c.len() + 5 <= MAX_LANE => format!("conv-{c}"),
        Some(c) => {
            let h = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(c.as_bytes()));
            format!("conv-sha256-{}", &h[..32])
        }
        None => format!("trace-{trace}"),
    }
}

/// `s`, cut to [`MAX_STRING`] bytes (at a character boundary) with its size and hash when
/// longer: every string of an event but its arguments and result, which are [`capped`].
pub(crate) fn cap_str(s: &str) -> String {
    if s.len() <= MAX_STRING {
        return s.to_owned();
    }
    let mut cut = MAX_STRING;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    let h = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(s.as_bytes()));
    format!("{}… (truncated; {} bytes, sha256:{h})", &s[..cut], s.len())
}

/// The spans above `s` in this export, nearest first.
fn ancestors<'a>(s: &'a Span, by_id: &'a HashMap<(&[u8], &[u8]), Ctx<'a>>) -> Vec<&'a Ctx<'a>> {
    let mut out = Vec::new();
    let mut next: &[u8] = &s.parent_span_id;
    // Bounded: a cycle of parent ids in hostile input ends here.
    while !next.is_empty() && out.len() < 64 {
        let Some(c) = by_id.get(&(&s.trace_id[..], next)) else {
            break;
        };
        out.push(c);
        next = &c.span.parent_span_id;
    }
    out
}

/// The agent a span names, in the places the instrumentations put it (docs/otlp.md's framework
/// table says which sends which).
fn agent_name(s: &Span) -> Option<String> {
    let a = &s.attributes;
    let named = text(a, "gen_ai.agent.name")
        .or_else(|| text(a, "agent.name"))
        .or_else(|| {
            text(a, "traceloop.entity.name")
                .filter(|_| text(a, "traceloop.span.kind") == Some("agent"))
        })
        // OpenInference for openai-agents: the agent's node in the agent graph.
        .or_else(|| text(a, "graph.node.id"))
        // LangChain's `create_agent` tags its runs `lc_agent_name` (OpenLLMetry: an association
        // property).
        .or_else(|| text(a, "traceloop.association.properties.lc_agent_name"));
    if let Some(n) = named {
        return Some(n.to_owned());
    }
    // OpenInference for LangChain sends the run's metadata as one JSON text.
    let metadata = text(a, "metadata").and_then(|m| serde_json::from_str::<Value>(m).ok());
    if let Some(n) = metadata
        .as_ref()
        .and_then(|m| m.get("lc_agent_name"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        return Some(n.to_owned());
    }
    // A LangGraph subgraph's nodes run in the checkpoint namespace of the graph node that holds
    // them (`researcher:<id>|tools:<id>`): that node is the agent (a prebuilt ReAct agent run as
    // a node says its name nowhere else).
    let ns = text(
        a,
        "traceloop.association.properties.langgraph_checkpoint_ns",
    )
    .or_else(|| {
        metadata
            .as_ref()
            .and_then(|m| m.get("langgraph_checkpoint_ns"))
            .and_then(Value::as_str)
    });
    if let Some(holder) = ns.and_then(checkpoint_holder) {
        return Some(holder.to_owned());
    }
    // smolagents under OpenInference names its agent span `<agent name>.run` and nothing else.
    if text(a, "openinference.span.kind") == Some("AGENT") {
        return s
            .name
            .strip_suffix(".run")
            .filter(|n| !n.is_empty())
            .map(str::to_owned);
    }
    None
}

/// The graph node holding the innermost node of a LangGraph checkpoint namespace
/// (`outer:<id>|inner:<id>` gives `outer`); none at the top level.
fn checkpoint_holder(ns: &str) -> Option<&str> {
    let parts: Vec<&str> = ns.split('|').collect();
    let holder = parts.len().checked_sub(2).map(|i| parts[i])?;
    let name = holder.split(':').next().unwrap_or(holder);
    (!name.is_empty() && !name.starts_with("__")).then_some(name)
}

fn model_of(s: &Span) -> Option<&str> {
    let a = &s.attributes;
    text(a, "gen_ai.response.model")
        .or_else(|| text(a, "gen_ai.request.model"))
        .or_else(|| text(a, "llm.model_name"))
        .or_else(|| text(a, "model_name"))
}

fn tool_event(ctx: &Ctx<'_>, dialect: &str, by_id: &HashMap<(&[u8], &[u8]), Ctx<'_>>) -> ToolEvent {
    let s = ctx.span;
    let r = ctx.resource;
    let tool = tool_name(s, dialect);
    let trace = hex::encode(&s.trace_id);
    // Agents are the agent spans that name one (a CHAIN or workflow span in between is not an
    // agent, and delegates nothing).
    let agents: Vec<&Ctx<'_>> = ancestors(s, by_id)
        .into_iter()
        .filter(|c| kind(c.span) == Kind::Agent && agent_name(c.span).is_some())
        .collect();
    let agent = agent_name(s).or_else(|| agents.first().and_then(|c| agent_name(c.span)));
    // A sub-agent's tools were delegated by the agent above it: the first ancestor agent with
    // another name (consecutive spans of one agent are one agent, never its own delegator);
    // else, for an agent that took over by a handoff (openai-agents: a sibling of the agent
    // that handed off), the agent its span names as its parent in the agent graph.
    let delegating = agents
        .iter()
        .filter_map(|c| agent_name(c.span))
        .find(|n| Some(n) != agent.as_ref())
        .or_else(|| {
            agents
                .iter()
                .find(|c| agent_name(c.span) == agent)
                .and_then(|c| text(&c.span.attributes, "graph.node.parent_id"))
                .filter(|p| Some(*p) != agent.as_deref() && !p.starts_with("__"))
                .map(str::to_owned)
        });
    let conversation = [s]
        .into_iter()
        .chain(agents.iter().map(|c| c.span))
        .find_map(|x| {
            text(&x.attributes, "gen_ai.conversation.id")
                .or_else(|| text(&x.attributes, "session.id"))
                .or_else(|| text(&x.attributes, "traceloop.association.properties.session_id"))
        });
    // The model: the chat span just before this call under the same parent, else the agent's.
    let model = by_id
        .values()
        .filter(|c| {
            kind(c.span) == Kind::Chat
                && c.span.trace_id == s.trace_id
                && c.span.parent_span_id == s.parent_span_id
                && c.span.start_time_unix_nano <= s.start_time_unix_nano
        })
        .max_by_key(|c| c.span.start_time_unix_nano)
        .and_then(|c| model_of(c.span))
        .or_else(|| agents.first().and_then(|c| model_of(c.span)));

    // openai-agents: a handoff is a tool span named `handoff to <agent>` (or a
    // `transfer_to_<agent>` function): the work goes to another agent.
    let handoff = tool
        .strip_prefix("handoff to ")
        .or_else(|| tool.strip_prefix("transfer_to_"))
        .filter(|to| !to.is_empty())
        .map(str::to_owned);
    let category = if handoff.is_some() {
        Category::Delegation
    } else if text(&s.attributes, "gen_ai.tool.type") == Some("datastore") {
        Category::Retrieval
    } else {
        Category::Other
    };
    let service = text(r, "service.name").unwrap_or("unknown_service");
    // LangGraph's ToolNode: a tool span without its arguments (OpenLLMetry), or with only the
    // bare string of a one-argument tool (OpenInference), runs under the node task whose input
    // is the model's whole tool call.
    let sent = arguments(s, dialect);
    let call = match &sent {
        None | Some(Value::String(_)) => langgraph_tool_call(s, &tool, by_id),
        Some(_) => None,
    };
    let args = match (&call, sent) {
        (Some((a, _)), _) => Some(a.clone()),
        (None, a) => a,
    };
    let mut ev = match &handoff {
        // The handoff itself, named as what it is: the agent it goes to, and what it passed
        // (openai-agents under OpenInference sends the name of the agent handing off: left out).
        Some(to) => {
            let mut a = json!({"to": cap_str(to)});
            match args {
                Some(Value::String(from)) if Some(&from) == agent.as_ref() => {}
                Some(v) => a["input"] = capped(v),
                None => {}
            }
            EventInput::intent_only(category, "handoff", a)
        }
        None => EventInput::intent_only(category, cap_str(&tool), args.map_or(Value::Null, capped)),
    };
    ev.lane = Some(lane(conversation, &trace));
    ev.execution = Some(Execution {
        command: cap_str(&s.name),
        target: Some(cap_str(service)),
        mutation: Value::Null,
    });
    let returned = result(s, dialect);
    // A LangChain ToolMessage (the ToolNode's answer, in whichever serialisation): its content
    // is what the tool returned, its status whether it failed.
    let message = returned.as_ref().and_then(tool_message);
    let effects = Effects {
        error: error(s)
            .or_else(|| message.as_ref().and_then(|m| m.error.clone()))
            .as_deref()
            .map(cap_str),
        return_value: match &message {
            Some(m) => capped(m.content.clone()),
            None => returned.map_or(Value::Null, capped),
        },
        ..Effects::default()
    };
    if effects != Effects::default() {
        ev.effects = Some(effects);
    }
    let version = text(&s.attributes, "gen_ai.agent.version")
        .or_else(|| {
            agents
                .first()
                .and_then(|c| text(&c.span.attributes, "gen_ai.agent.version"))
        })
        .or_else(|| text(r, "service.version"));
    ev.code_provenance = Some(CodeProvenance {
        agent: agent
            .as_deref()
            .or_else(|| text(r, "service.name"))
            .map(cap_str),
        agent_version: version.map(cap_str),
        model: model.map(cap_str),
        capture: Some(afr_core::event::Capture::self_reported("otlp:traces")),
        ..CodeProvenance::default()
    });
    let sdk = [
        text(r, "telemetry.sdk.name"),
        text(r, "telemetry.sdk.language"),
        text(r, "telemetry.sdk.version"),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(" ");
    let source = |uri: String, kind: &str| ContextSource {
        uri: cap_str(&uri),
        content_hash: None,
        kind: Some(kind.to_owned()),
    };
    let mut sources = vec![
        // The marker: this event is the agent's own account, after the fact.
        source(
            format!(
                "otlp:{service}{}",
                if sdk.is_empty() {
                    String::new()
                } else {
                    format!(" ({sdk})")
                }
            ),
            "self_reported_span",
        ),
        // The join key with the gateway's events (W3C trace context of this span).
        source(
            format!("traceparent:{}", traceparent(&s.trace_id, &s.span_id)),
            "otel_span",
        ),
    ];
    if let Some(id) = text(&s.attributes, "gen_ai.tool.call.id")
        .or_else(|| text(&s.attributes, "tool.id"))
        .or_else(|| message.as_ref().and_then(|m| m.call_id.as_deref()))
        .or_else(|| call.as_ref().and_then(|(_, id)| id.as_deref()))
    {
        sources.push(source(format!("tool_call:{id}"), "tool_call_id"));
    }
    ev.context_provenance = Some(ContextProvenance {
        sources,
        environment: text(r, "deployment.environment.name")
            .or_else(|| text(r, "deployment.environment"))
            .map(cap_str),
    });
    let delegation = DelegationProvenance {
        // A handoff is this agent delegating; any other tool was delegated by the agent above.
        delegating_agent: if handoff.is_some() {
            agent.as_deref().map(cap_str)
        } else {
            delegating.as_deref().map(cap_str)
        },
        organisation: text(r, "service.namespace").map(cap_str),
        ..DelegationProvenance::default()
    };
    if delegation != DelegationProvenance::default() {
        ev.delegation_provenance = Some(delegation);
    }
    if s.start_time_unix_nano > 0 {
        // When the tool ran, by the span (not when the span reached AFR).
        ev.timestamp_us = Some(s.start_time_unix_nano / 1000);
    }
    let top = ancestors(s, by_id).last().map_or(s, |c| c.span);
    ToolEvent {
        key: span_key(&s.trace_id, &s.span_id),
        event: ev,
        parent: None,
        missing_parent: (!top.parent_span_id.is_empty())
            .then(|| (s.trace_id.clone(), top.parent_span_id.clone())),
        joins: Vec::new(),
    }
}

/// A string attribute (for code that builds spans: benches, tests).
pub fn string_attr(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Av::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

#[cfg(test)]
#[path = "map_frameworks_tests.rs"]
mod frameworks_tests;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Status};

    use super::*;

    fn kv(k: &str, v: &str) -> KeyValue {
        string_attr(k, v)
    }

    fn span(id: u8, parent: Option<u8>, name: &str, attrs: Vec<KeyValue>) -> Span {
        Span {
            trace_id: vec![7; 16],
            span_id: vec![id; 8],
            parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
            name: name.into(),
            start_time_unix_nano: 1_700_000_000_000_000_000 + u64::from(id),
            attributes: attrs,
            ..Default::default()
        }
    }

    fn export(spans: Vec<Span>) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: None,
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    #[test]
    fn an_openai_agents_handoff_is_a_delegation() {
        let agent = span(
            1,
            None,
            "triage",
            vec![
                kv("gen_ai.operation.name", "invoke_agent"),
                kv("gen_ai.agent.name", "triage"),
            ],
        );
        let tool = span(
            2,
            Some(1),
            "execute_tool handoff to billing",
            vec![
                kv("gen_ai.operation.name", "execute_tool"),
                kv("gen_ai.tool.name", "transfer_to_billing"),
                kv("gen_ai.tool.call.arguments", "{}"),
            ],
        );
        let (events, _) = map(&export(vec![agent, tool]));
        let ev = &events[0].event;
        assert_eq!(ev.category, Category::Delegation);
        assert_eq!(ev.intent.tool, "handoff");
        assert_eq!(ev.intent.args["to"], "billing");
        assert_eq!(
            ev.delegation_provenance
                .as_ref()
                .unwrap()
                .delegating_agent
                .as_deref(),
            Some("triage")
        );
    }

    #[test]
    fn wrapped_arguments_are_unwrapped() {
        // smolagents under OpenInference, OpenLLMetry: positional args empty, keywords.
        assert_eq!(
            unwrap_arguments(json!({"args": [], "kwargs": {"query": "x"}})),
            json!({"query": "x"})
        );
        // OpenLLMetry-langchain's wrapper.
        assert_eq!(
            unwrap_arguments(
                json!({"input_str": "{'query': 'x'}", "inputs": {"query": "x"}, "kwargs": {}, "tags": []})
            ),
            json!({"query": "x"})
        );
        // LangGraph under OpenInference: a Python dict printed as a string.
        assert_eq!(
            unwrap_arguments(
                json!({"input_str": "{'query': 'it\\'s', 'n': 2, 'ok': True, 'none': None}"})
            ),
            json!({"query": "it's", "n": 2, "ok": true, "none": null})
        );
        assert_eq!(
            unwrap_arguments(json!({"input_str": "plain words"})),
            json!({"input": "plain words"})
        );
        // Left as they are.
        assert_eq!(
            unwrap_arguments(json!({"args": [1], "kwargs": {}})),
            json!({"args": [1], "kwargs": {}})
        );
        assert_eq!(unwrap_arguments(json!({"a": 1})), json!({"a": 1}));
        assert_eq!(python_literal("{'a': os.system}"), None);
    }

    #[test]
    fn a_handled_tool_exception_is_an_error_and_agents_never_delegate_to_themselves() {
        let outer = span(
            1,
            None,
            "researcher",
            vec![
                kv("openinference.span.kind", "AGENT"),
                kv("agent.name", "researcher"),
            ],
        );
        let inner = span(
            2,
            Some(1),
            "researcher",
            vec![
                kv("openinference.span.kind", "AGENT"),
                kv("agent.name", "researcher"),
                kv("traceloop.association.properties.session_id", "sess-9"),
            ],
        );
        let tool = span(
            3,
            Some(2),
            "search",
            vec![
                kv("openinference.span.kind", "TOOL"),
                kv("tool.name", "search"),
                kv(
                    "input.value",
                    "{\"args\": [], \"kwargs\": {\"q\": \"rust\"}}",
                ),
                kv(
                    "output.value",
                    "{\"content\": \"rate limited\", \"status\": \"error\", \"type\": \"tool\"}",
                ),
            ],
        );
        let (events, _) = map(&export(vec![outer, inner, tool]));
        assert_eq!(events.len(), 1);
        let ev = &events[0].event;
        assert_eq!(ev.intent.args, json!({"q": "rust"}));
        assert_eq!(
            ev.effects.as_ref().unwrap().error.as_deref(),
            Some("the tool reported an error: rate limited")
        );
        assert_eq!(ev.lane.as_deref(), Some("conv-sess-9"));
        assert!(
            ev.delegation_provenance
                .as_ref()
                .is_none_or(|d| d.delegating_agent.as_deref() != Some("researcher")),
            "{:?}",
            ev.delegation_provenance
        );
    }

    #[test]
    fn chains_are_not_agents_and_hostile_strings_are_capped() {
        let long_conv = "c".repeat(70);
        let agent = span(
            1,
            None,
            "planner",
            vec![
                kv("openinference.span.kind", "AGENT"),
                kv("agent.name", "planner"),
                kv("session.id", &long_conv),
            ],
        );
        let chain = span(
            2,
            Some(1),
            "chain",
            vec![kv("openinference.span.kind", "CHAIN")],
        );
        let mut tool = span(
            3,
            Some(2),
            "lookup",
            vec![
                kv("openinference.span.kind", "TOOL"),
                kv("tool.name", "lookup"),
                kv("input.value", "{\"q\": 1}"),
            ],
        );
        tool.status = Some(Status {
            code: StatusCode::Error as i32,
            message: "x".repeat(2_000_000),
        });
        let (events, summary) = map(&export(vec![agent, chain, tool]));
        assert_eq!(summary.tool_spans["openinference"], 1);
        let e = &serde_json::to_value(&events[0].event).unwrap();
        assert_eq!(e["code_provenance"]["agent"], "planner");
        assert!(e.get("delegation_provenance").is_none(), "{e}");
        assert!(e["lane"].as_str().unwrap().len() <= 64, "{}", e["lane"]);
        assert!(e["effects"]["error"].as_str().unwrap().len() < 5000);
        assert_eq!(e["intent"]["args"], json!({"q": 1}));
        assert_eq!(e["timestamp_us"], 1_700_000_000_000_000_u64);
        assert!(events[0].missing_parent.is_none());
        let bytes = serde_json::to_vec(e).unwrap();
        afr_core::EventInput::from_json(&bytes, afr_core::event::DEFAULT_MAX_EVENT_BYTES)
            .unwrap()
            .validate()
            .unwrap();
    }
}
