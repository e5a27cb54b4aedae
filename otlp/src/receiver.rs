//! `afr otlp`: OTLP/HTTP (`POST /v1/traces` and `POST /v1/logs`, protobuf or JSON, gzip,
//! chunked or not) and OTLP/gRPC (`TraceService/Export`, `LogsService/Export`, gzip) receivers
//! in one process, recording through `afr serve` when it runs, else into the store.
//!
//! An export is answered only once the events of its tool spans or tool log records are
//! durable; each event is recorded under `otlp:<trace id>:<span id>` (a span) or the call's
//! key shared with `afr hook` (a log record, [`crate::calls`]), so an exporter's retry of the
//! same export records nothing twice. Limits: a request body over [`ReceiverOptions::max_body`] is refused
//! (HTTP 413; gRPC: tonic's own `OUT_OF_RANGE`, or `RESOURCE_EXHAUSTED` for a gzip message);
//! more than [`ReceiverOptions::max_inflight`] exports
//! at once are refused with HTTP 429 and `Retry-After: 1` (gRPC `RESOURCE_EXHAUSTED`), which
//! the exporters retry.

use std::{
    collections::{HashMap, HashSet},
    net::SocketAddr,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use afr_client::{
    Door, DoorError, NoServer, StartError,
    journal::{self, Journal},
};
use afr_core::{
    EventInput,
    event::{ContextSource, Effects, EventRef},
};
use opentelemetry_proto::tonic::{
    collector::logs::v1::{
        ExportLogsPartialSuccess, ExportLogsServiceRequest, ExportLogsServiceResponse,
        logs_service_server::{LogsService, LogsServiceServer},
    },
    collector::trace::v1::{
        ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    },
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span},
};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use crate::{
    calls::Calls,
    logs::{LogSummary, map_logs},
    map::{Summary, ToolEvent, map, span_key},
};

/// Settings of `afr otlp`.
#[derive(Debug)]
pub struct ReceiverOptions {
    /// The recorder directory.
    pub dir: PathBuf,
    /// OTLP/HTTP address (`None`: no HTTP receiver).
    pub http: Option<SocketAddr>,
    /// OTLP/gRPC address (`None`: no gRPC receiver).
    pub grpc: Option<SocketAddr>,
    /// A bearer token required on every export (required for a non-loopback address).
    pub token: Option<Zeroizing<Vec<u8>>>,
    /// Largest request body (after decompression), in bytes.
    pub max_body: usize,
    /// Most exports handled at once; more are refused with a retry hint.
    pub max_inflight: usize,
    /// How long a tool span whose parent span has not arrived is held for it, and a
    /// coding-agent CLI's rejection of a call for the call's result.
    pub hold: Duration,
    /// Most tool spans held at once, and most tool decisions; an export that would hold more
    /// is refused with a retry hint.
    pub max_held: usize,
    /// What to do when no `afr serve` answers on `dir`.
    pub no_server: NoServer,
    /// MCP servers (the coding-agent CLI's names for them; `*`: all) whose calls `afr mcp
    /// wrap` records: their log records are not recorded again (besides those listed in
    /// `<dir>/mcp-wrapped`, which `afr setup` writes).
    pub mcp_wrapped: Vec<String>,
}

/// Default hold for a tool span's parent: the Python SDK's batch processor exports every 5 s.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(6);
/// Default most held spans.
pub const DEFAULT_MAX_HELD: usize = 10_000;

/// Default largest request body: 16 MiB.
pub const DEFAULT_MAX_BODY: usize = 16 * 1024 * 1024;
/// Default most exports at once.
pub const DEFAULT_MAX_INFLIGHT: usize = 8;

/// Errors starting the receiver.
#[derive(Debug, thiserror::Error)]
pub enum ReceiverError {
    /// A non-loopback address without a token.
    #[error(
        "{0} is not a loopback address: give a token (--token-file) to receive from other hosts"
    )]
    NoToken(SocketAddr),
    /// The listener or the runtime could not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The recorder could not be opened.
    #[error(transparent)]
    Recorder(#[from] DoorError),
    /// The gRPC server failed.
    #[error("gRPC: {0}")]
    Grpc(String),
}

/// Why an export was refused.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Not a valid export (the message says what is wrong).
    Malformed(String),
    /// Over the body limit.
    TooLarge,
    /// Too many exports at once.
    Busy,
    /// The events could not be recorded (retryable).
    Unavailable(String),
    /// No or a wrong token.
    Unauthorized,
}

/// A tool span held for a parent span a later export should bring.
struct HeldSpan {
    resource: Option<Resource>,
    span: Span,
    since: Instant,
    /// Its event as last mapped (with whatever context arrived since): recorded as is when
    /// the time is up.
    event: ToolEvent,
}

/// A tool span recorded without its parent (not received within the hold): kept for
/// [`RELEASED_FOR`], so that a parent arriving later still gives it its agent.
struct Released {
    resource: Option<Resource>,
    span: Span,
    /// Its event's sequence number.
    seq: u64,
    /// The agent it was recorded with (the service, without its parent).
    agent: Option<String>,
    since: Instant,
}

/// How long a span recorded without its parent waits for the parent to come after all.
const RELEASED_FOR: Duration = Duration::from_secs(600);

fn agent_of(e: &EventInput) -> Option<String> {
    e.code_provenance.as_ref()?.agent.clone()
}

/// The held spans, and the journal that keeps them.
type Holding = (HashMap<String, HeldSpan>, Option<Arc<Journal>>);

pub(crate) struct Ingest {
    dir: PathBuf,
    sink: Mutex<Option<Door>>,
    no_server: NoServer,
    /// Tool spans held for their parents, by idempotency key; with the journal that keeps
    /// them across a crash (created on the first hold).
    held: Mutex<Holding>,
    released: Mutex<HashMap<String, Released>>,
    /// The coding-agent CLIs' tool decisions waiting for their calls' results, and Gemini
    /// CLI's call ranks.
    calls: Mutex<Calls>,
    hold: Duration,
    max_held: usize,
    token: Option<Zeroizing<Vec<u8>>>,
    pub(crate) max_body: usize,
    max_inflight: usize,
    inflight: AtomicUsize,
    exports: AtomicU64,
    recorded: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Ingest {
    pub(crate) fn authorized(&self, header: Option<&[u8]>) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        header
            .and_then(|h| h.strip_prefix(b"Bearer "))
            .is_some_and(|t| bool::from(t.ct_eq(token)))
    }

    /// Records the tool spans of `req` durably, and holds those whose parent span has not
    /// arrived (journaled, synced); the number of spans rejected, and what the export held.
    pub(crate) fn record(
        &self,
        req: &ExportTraceServiceRequest,
    ) -> Result<(u64, Summary), Refused> {
        let (mut events, summary) = map(req);
        let mut held = lock(&self.held);
        // Spans held earlier for a parent in one of this export's traces are mapped again
        // with it (the export alone is mapped once when nothing is held for it).
        let released = lock(&self.released);
        let extra: Vec<ResourceSpans> = if held.0.is_empty() && released.is_empty() {
            Vec::new()
        } else {
            let traces: HashSet<&[u8]> = spans(req).map(|(_, s)| &s.trace_id[..]).collect();
            held.0
                .values()
                .filter(|h| traces.contains(&h.span.trace_id[..]))
                .map(|h| single(h.resource.clone(), h.span.clone()))
                .chain(
                    released
                        .values()
                        .filter(|r| traces.contains(&r.span.trace_id[..]))
                        .map(|r| single(r.resource.clone(), r.span.clone())),
                )
                .collect()
        };
        drop(released);
        let merged;
        let source = if extra.is_empty() {
            req
        } else {
            let mut m = req.clone();
            m.resource_spans.extend(extra);
            merged = m;
            events = map(&merged).0;
            &merged
        };
        let now = Instant::now();
        // A span recorded earlier without its parent, mapped again with the parent now here:
        // not recorded again; if the parent names its agent, an event saying so, linked to it.
        let events = {
            let mut late = lock(&self.released);
            let mut out = Vec::with_capacity(events.len());
            for mut e in events {
                let Some(r) = late.get(&e.key) else {
                    out.push(e);
                    continue;
                };
                if e.missing_parent.is_some() {
                    continue; // still no parent: nothing new
                }
                let (seq, before) = (r.seq, r.agent.clone());
                late.remove(&e.key);
                if agent_of(&e.event) == before {
                    continue;
                }
                e.key = format!("{}:attributed", e.key);
                e.event.intent.args = serde_json::Value::Null;
                e.event.effects = None;
                e.event
                    .context_provenance
                    .get_or_insert_with(|| afr_core::event::ContextProvenance {
                        sources: Vec::new(),
                        environment: None,
                    })
                    .sources
                    .push(ContextSource {
                        uri: format!("afr:event/{seq}"),
                        content_hash: None,
                        kind: Some("attribution_of".into()),
                    });
                e.parent = None;
                out.push(e);
            }
            out
        };
        let (wait, go): (Vec<_>, Vec<_>) = events.into_iter().partition(|e| {
            e.missing_parent.is_some()
                && held
                    .0
                    .get(&e.key)
                    .is_none_or(|h| now.duration_since(h.since) < self.hold)
        });
        // The spans to hold, by key (only when some are to be held).
        let by_key: HashMap<String, (Option<&Resource>, &Span)> = if wait.is_empty() {
            HashMap::new()
        } else {
            spans(source)
                .map(|(r, s)| (span_key(&s.trace_id, &s.span_id), (r, s)))
                .collect()
        };
        let new_holds = wait.iter().filter(|e| !held.0.contains_key(&e.key)).count();
        if held.0.len() + new_holds > self.max_held {
            return Err(Refused::Busy);
        }
        let mut synced_to = None;
        for e in &wait {
            let Some(&(resource, span)) = by_key.get(&e.key) else {
                continue;
            };
            let journal = match &held.1 {
                Some(j) => j.clone(),
                None => {
                    let j = Arc::new(
                        Journal::create(&self.dir, journal::OTLP)
                            .map_err(|e| Refused::Unavailable(format!("the journal: {e}")))?,
                    );
                    held.1 = Some(j.clone());
                    j
                }
            };
            let offset = journal
                .append(&e.key, &e.event)
                .map_err(|err| Refused::Unavailable(format!("the journal: {err}")))?;
            synced_to = Some((journal, offset));
            held.0
                .entry(e.key.clone())
                .and_modify(|h| h.event = e.clone())
                .or_insert(HeldSpan {
                    resource: resource.cloned(),
                    span: span.clone(),
                    since: now,
                    event: e.clone(),
                });
        }
        let keys: Vec<String> = go.iter().map(|e| e.key.clone()).collect();
        let (ok, known, _) = self.write(&go)?;
        // What was held and is now recorded leaves the journal.
        for k in &keys {
            if held.0.remove(k).is_some()
                && let Some(j) = &held.1
            {
                j.done(k);
            }
        }
        drop(held);
        if let Some((j, offset)) = synced_to {
            j.sync_to(offset)
                .map_err(|e| Refused::Unavailable(format!("the journal: {e}")))?;
        }
        self.recorded.fetch_add(ok, Ordering::Relaxed);
        let n = self.exports.fetch_add(1, Ordering::Relaxed) + 1;
        let held_now = if wait.is_empty() {
            String::new()
        } else {
            format!("; {} held for a parent span not received yet", wait.len())
        };
        let again = if known > 0 {
            format!("; {known} already recorded (a retry)")
        } else {
            String::new()
        };
        eprintln!(
            "afr otlp: export {n}: {}{again}{held_now}",
            describe(&summary, ok)
        );
        let refused = (go.len() as u64).saturating_sub(ok + known);
        Ok((refused + summary.malformed, summary))
    }

    /// Records `events` (parents before the tools under them) durably: how many are new, and
    /// how many keys the recorder held already (an exporter's retry, a call a hook recorded:
    /// durable, nothing new recorded).
    fn write(&self, events: &[ToolEvent]) -> Result<(u64, u64, Vec<Option<u64>>), Refused> {
        let mut sink = lock(&self.sink);
        if sink.is_none() {
            *sink = Some(
                Door::for_producer(&self.dir, &self.no_server)
                    .map_err(|e| Refused::Unavailable(e.to_string()))?,
            );
        }
        let mut tickets = Vec::with_capacity(events.len());
        // Sequence numbers by index: a sub-agent's tool names the tool that delegated to it.
        let mut seqs: Vec<Option<u64>> = vec![None; events.len()];
        // One indexed lookup for the whole export first: most exports share no call with the
        // gateway, and then no span needs its own.
        let joins: Vec<&String> = events.iter().flat_map(|e| &e.joins).collect();
        let linked = match sink.as_mut() {
            Some(s) => citing(s, &joins, false).is_some(),
            None => false,
        };
        for (i, e) in events.iter().enumerate() {
            let s = sink
                .as_mut()
                .ok_or_else(|| Refused::Unavailable("no recorder".into()))?;
            let mut event = e.event.clone();
            if let Some(seq) = e.parent.and_then(|p| seqs[p]) {
                event
                    .delegation_provenance
                    .get_or_insert_with(Default::default)
                    .parent_event = Some(EventRef::same_log(seq));
            }
            let own: Vec<&String> = e.joins.iter().collect();
            if let Some(g) = linked.then(|| citing(s, &own, true)).flatten() {
                link_to_gateway(&mut event, g);
            }
            if let Err(err) = event.validate() {
                // A span the recorder refuses (e.g. over its size cap) is reported, not
                // retried: the rest of the export is recorded.
                eprintln!("afr otlp: an event was refused: invalid event: {err}");
                continue;
            }
            match s.submit(&event, &e.key) {
                Ok(t) => {
                    seqs[i] = t.seq();
                    tickets.push(t);
                }
                Err(err @ (DoorError::Invalid { .. } | DoorError::Server { status: 422, .. })) => {
                    eprintln!("afr otlp: an event was refused: {err}");
                }
                Err(err) => {
                    *sink = None;
                    return Err(Refused::Unavailable(err.to_string()));
                }
            }
        }
        drop(sink);
        // Events recorded now; a key the recorder already held (an exporter's retry, a call a
        // hook recorded) is durable and counted apart.
        let (mut ok, mut known) = (0, 0);
        for t in tickets {
            let again = t.known();
            t.settle()
                .map_err(|e| Refused::Unavailable(e.to_string()))?;
            if again {
                known += 1;
            } else {
                ok += 1;
            }
        }
        Ok((ok, known, seqs))
    }

    /// Records the held spans whose time is up (all of them with `all`), with what is known.
    fn release(&self, all: bool) {
        let mut held = lock(&self.held);
        let now = Instant::now();
        let due: Vec<String> = held
            .0
            .iter()
            .filter(|(_, h)| all || now.duration_since(h.since) >= self.hold)
            .map(|(k, _)| k.clone())
            .collect();
        if due.is_empty() {
            if all && let Some(j) = held.1.take() {
                j.remove_if_done();
            }
            return;
        }
        // As last mapped: with the context the exports since brought, if any.
        let events: Vec<ToolEvent> = due
            .iter()
            .filter_map(|k| held.0.get(k))
            .map(|h| ToolEvent {
                parent: None,
                ..h.event.clone()
            })
            .collect();
        match self.write(&events) {
            Ok((n, _, seqs)) => {
                // Kept a while: should their parent arrive later (a run longer than the hold),
                // their agent is recorded then, in an event linked to them.
                let mut late = lock(&self.released);
                late.retain(|_, r| now.duration_since(r.since) < RELEASED_FOR);
                for (e, seq) in events.iter().zip(&seqs) {
                    if let (Some(seq), Some(h)) = (seq, held.0.get(&e.key))
                        && late.len() < self.max_held
                    {
                        late.insert(
                            e.key.clone(),
                            Released {
                                resource: h.resource.clone(),
                                span: h.span.clone(),
                                seq: *seq,
                                agent: agent_of(&e.event),
                                since: now,
                            },
                        );
                    }
                }
                drop(late);
                for k in &due {
                    held.0.remove(k);
                    if let Some(j) = &held.1 {
                        j.done(k);
                    }
                }
                self.recorded.fetch_add(n, Ordering::Relaxed);
                eprintln!(
                    "afr otlp: {n} held tool spans recorded without their parent span (not received within {} ms)",
                    self.hold.as_millis()
                );
            }
            Err(e) => eprintln!("afr otlp: held tool spans not recorded yet: {e:?}"),
        }
        if all
            && held.0.is_empty()
            && let Some(j) = held.1.take()
        {
            j.remove_if_done();
        }
    }

    /// Records the tool calls of the coding-agent CLIs' log records of `req` durably (leaving
    /// to `afr hook` the calls its journal holds), and holds their decisions for the calls'
    /// results; the number of records rejected.
    pub(crate) fn record_logs(&self, req: &ExportLogsServiceRequest) -> Result<u64, Refused> {
        let (records, summary) = map_logs(req);
        let mut calls = lock(&self.calls);
        let plan = calls.plan(records, self.max_held).map_err(|e| match e {
            None => Refused::Busy,
            Some(e) => Refused::Unavailable(format!("the Gemini CLI call ranks: {e}")),
        })?;
        let (ok, known, _) = self.write(&plan.write)?;
        let refused = (plan.write.len() as u64).saturating_sub(ok + known);
        let (linked, holding) = (plan.linked, plan.holding);
        calls
            .commit(plan)
            .map_err(|e| Refused::Unavailable(format!("the journal: {e}")))?;
        drop(calls);
        self.recorded.fetch_add(ok, Ordering::Relaxed);
        let n = self.exports.fetch_add(1, Ordering::Relaxed) + 1;
        eprintln!(
            "afr otlp: logs export {n}: {}",
            describe_logs(&summary, ok, known, linked, holding)
        );
        Ok(refused + summary.malformed)
    }

    /// Records the rejections whose call's result did not come within the hold (all of them
    /// with `all`), and lets go of the allowing decisions that waited long enough.
    fn release_calls(&self, all: bool) {
        let mut calls = lock(&self.calls);
        if calls.held() == 0 {
            if all {
                calls.close();
            }
            return;
        }
        let (due, dropped) = calls.due(self.hold, all);
        if !due.is_empty() {
            match self.write(&due) {
                Ok((n, _, _)) => {
                    for e in &due {
                        calls.forget(&e.key);
                    }
                    self.recorded.fetch_add(n, Ordering::Relaxed);
                    eprintln!(
                        "afr otlp: {n} rejected tool calls recorded (no result within {} ms)",
                        self.hold.as_millis()
                    );
                }
                Err(e) => eprintln!("afr otlp: rejected tool calls not recorded yet: {e:?}"),
            }
        }
        if dropped > 0 {
            eprintln!(
                "afr otlp: {dropped} tool decisions let go: no result of their call came (the decision was not recorded)"
            );
        }
        if all {
            calls.close();
        }
    }

    /// Runs `f` unless too many exports are in flight.
    pub(crate) fn admitted<T>(&self, f: impl FnOnce() -> Result<T, Refused>) -> Result<T, Refused> {
        if self.inflight.fetch_add(1, Ordering::AcqRel) >= self.max_inflight {
            self.inflight.fetch_sub(1, Ordering::AcqRel);
            return Err(Refused::Busy);
        }
        let r = f();
        self.inflight.fetch_sub(1, Ordering::AcqRel);
        r
    }
}

/// The first event citing one of `joins` as its trace context: with `gateway_only`, only the
/// MCP gateway's (a `traceparent` source); else any (this receiver's own from an earlier copy
/// of the export too).
fn citing(sink: &mut Door, joins: &[&String], gateway_only: bool) -> Option<u64> {
    if joins.is_empty() {
        return None;
    }
    // Matched on trace and span id: the trace flags differ between SDKs (OpenLLMetry under OTel
    // Python 1.45 sends `-03`, the receiver's own spelling is `-01`); the W3C flags in use are
    // 00 to 03 (sampled, random trace id), each an exact, indexed match.
    let uris = joins
        .iter()
        .flat_map(|j| {
            let stem = j.rsplit_once('-').map_or(j.as_str(), |(s, _)| s).to_owned();
            ["00", "01", "02", "03"].map(move |f| {
                format!("context_provenance.sources[].uri = \"traceparent:{stem}-{f}\"")
            })
        })
        .collect::<Vec<_>>()
        .join(" or ");
    let q = if gateway_only {
        format!("context_provenance.sources[].kind = \"traceparent\" and ({uris})")
    } else {
        uris
    };
    match sink.find(&q, 1) {
        Ok(seqs) => seqs.first().copied(),
        Err(e) => {
            eprintln!("afr otlp: looking for the gateway's record of a call failed: {e}");
            None
        }
    }
}

/// Links a span's event to the gateway's event `g` of the same call instead of repeating it:
/// the arguments and the result are the gateway's (seen in the path, before the call ran);
/// the span adds who called it (agent, model) and its own account of an error.
fn link_to_gateway(event: &mut EventInput, g: u64) {
    event.intent.args = serde_json::Value::Null;
    if let Some(e) = event.effects.as_mut() {
        e.return_value = serde_json::Value::Null;
        if *e == Effects::default() {
            event.effects = None;
        }
    }
    let d = event
        .delegation_provenance
        .get_or_insert_with(Default::default);
    if d.parent_event.is_none() {
        d.parent_event = Some(EventRef::same_log(g));
    }
    if let Some(c) = event.context_provenance.as_mut() {
        c.sources.push(ContextSource {
            uri: format!("afr:event/{g}"),
            content_hash: None,
            kind: Some("same_call_in_gateway".into()),
        });
    }
}

/// Every span of `req`, with its resource.
fn spans(req: &ExportTraceServiceRequest) -> impl Iterator<Item = (Option<&Resource>, &Span)> {
    req.resource_spans.iter().flat_map(|rs| {
        rs.scope_spans
            .iter()
            .flat_map(move |ss| ss.spans.iter().map(move |s| (rs.resource.as_ref(), s)))
    })
}

/// A request part holding one span.
fn single(resource: Option<Resource>, span: Span) -> ResourceSpans {
    ResourceSpans {
        resource,
        scope_spans: vec![ScopeSpans {
            spans: vec![span],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// One line on what an export held.
pub fn describe(s: &Summary, recorded: u64) -> String {
    let list = |m: &std::collections::HashMap<String, u64>| {
        let mut v: Vec<_> = m.iter().map(|(k, n)| format!("{k} {n}")).collect();
        v.sort();
        v.join(", ")
    };
    let tools: u64 = s.tool_spans.values().sum();
    let other: u64 = s.ignored.values().sum();
    format!(
        "{} spans: {tools} tool spans ({}), {recorded} recorded; {other} other spans seen, not recorded ({}){}",
        s.spans,
        list(&s.tool_spans),
        list(&s.ignored),
        if s.malformed > 0 {
            format!("; {} malformed, rejected", s.malformed)
        } else {
            String::new()
        }
    )
}

/// One line on what a logs export held.
pub fn describe_logs(
    s: &LogSummary,
    recorded: u64,
    known: u64,
    linked: u64,
    holding: u64,
) -> String {
    let list = |m: &std::collections::BTreeMap<String, u64>| {
        m.iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let results: u64 = s.results.values().sum();
    let other: u64 = s.ignored.values().sum();
    format!(
        "{} log records: {results} tool results ({}), {} tool decisions; {recorded} recorded, {known} already recorded (a retry, or a call a hook recorded), {linked} left to the hook that holds them or the gateway, {holding} decisions held; {other} other records seen, not recorded ({}){}",
        s.records,
        list(&s.results),
        s.decisions,
        list(&s.ignored),
        if s.malformed > 0 {
            format!("; {} malformed, rejected", s.malformed)
        } else {
            String::new()
        }
    )
}

pub(crate) fn partial_logs(rejected: u64) -> Option<ExportLogsPartialSuccess> {
    (rejected > 0).then(|| ExportLogsPartialSuccess {
        rejected_log_records: i64::try_from(rejected).unwrap_or(i64::MAX),
        error_message: "tool records without a session or call id, or refused by the recorder"
            .into(),
    })
}

pub(crate) fn partial(rejected: u64) -> Option<ExportTracePartialSuccess> {
    (rejected > 0).then(|| ExportTracePartialSuccess {
        rejected_spans: i64::try_from(rejected).unwrap_or(i64::MAX),
        error_message: "spans without valid trace and span ids, or refused by the recorder".into(),
    })
}

/// Runs the receivers until SIGTERM or SIGINT.
pub fn serve(opts: ReceiverOptions) -> Result<(), ReceiverError> {
    for addr in [opts.http, opts.grpc].into_iter().flatten() {
        if !addr.ip().is_loopback() && opts.token.is_none() {
            return Err(ReceiverError::NoToken(addr));
        }
    }
    let sink = Door::for_producer(&opts.dir, &opts.no_server)?;
    let ingest = Arc::new(Ingest {
        dir: opts.dir.clone(),
        sink: Mutex::new(Some(sink)),
        no_server: opts.no_server.clone(),
        token: opts.token,
        max_body: opts.max_body,
        max_inflight: opts.max_inflight.max(1),
        inflight: AtomicUsize::new(0),
        exports: AtomicU64::new(0),
        recorded: AtomicU64::new(0),
        held: Mutex::new((HashMap::new(), None)),
        released: Mutex::new(HashMap::new()),
        calls: Mutex::new({
            let mut c = Calls::new(&opts.dir);
            c.mcp_wrapped.clone_from(&opts.mcp_wrapped);
            c
        }),
        hold: opts.hold,
        max_held: opts.max_held.max(1),
    });
    // Spans a receiver that died was holding, recorded as they were journaled, and calls a
    // gateway that died left in its journal.
    if let Some(door) = lock(&ingest.sink).as_mut() {
        journal::recover_through(&opts.dir, door);
    }
    {
        let ingest = Arc::downgrade(&ingest);
        std::thread::spawn(move || {
            while let Some(i) = ingest.upgrade() {
                i.release(false);
                i.release_calls(false);
                drop(i);
                std::thread::sleep(Duration::from_millis(200));
            }
        });
    }
    let rt = afr_client::runtime()?;
    rt.block_on(async move {
        let mut tasks = Vec::new();
        if let Some(addr) = opts.http {
            let (l, bound) = bind(addr).await.map_err(ReceiverError::from)?;
            eprintln!("afr otlp: OTLP/HTTP on http://{bound}/v1/traces");
            eprintln!("afr otlp: OTLP/HTTP logs on http://{bound}/v1/logs");
            tasks.push(tokio::spawn(crate::http::serve(l, ingest.clone())));
        }
        if let Some(addr) = opts.grpc {
            let (l, bound) = bind(addr).await.map_err(ReceiverError::from)?;
            eprintln!("afr otlp: OTLP/gRPC on grpc://{bound}");
            let gzip = tonic::codec::CompressionEncoding::Gzip;
            let svc = TraceServiceServer::new(Grpc(ingest.clone()))
                .accept_compressed(gzip)
                .send_compressed(gzip)
                .max_decoding_message_size(ingest.max_body);
            let logs = LogsServiceServer::new(Grpc(ingest.clone()))
                .accept_compressed(gzip)
                .send_compressed(gzip)
                .max_decoding_message_size(ingest.max_body);
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(l);
            tasks.push(tokio::spawn(async move {
                if let Err(e) = tonic::transport::Server::builder()
                    .add_service(svc)
                    .add_service(logs)
                    .serve_with_incoming(incoming)
                    .await
                {
                    eprintln!("afr otlp: gRPC: {e}");
                }
            }));
        }
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return Err(ReceiverError::from(StartError::Runtime(
                std::io::Error::other("cannot watch signals"),
            )));
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        for t in tasks {
            t.abort();
        }
        tokio::task::block_in_place(|| {
            ingest.release(true);
            ingest.release_calls(true);
        });
        eprintln!(
            "afr otlp: stopped after {} exports, {} events recorded",
            ingest.exports.load(Ordering::Relaxed),
            ingest.recorded.load(Ordering::Relaxed)
        );
        Ok(())
    })
}

/// A listener on `addr`, and the address it got (port 0: a free one).
async fn bind(addr: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), StartError> {
    let bad = |source| StartError::Bind { addr, source };
    let l = tokio::net::TcpListener::bind(addr).await.map_err(bad)?;
    let bound = l.local_addr().map_err(bad)?;
    Ok((l, bound))
}

struct Grpc(Arc<Ingest>);

impl Grpc {
    /// Checks the request's bearer token, then runs `f` on its export on the blocking pool,
    /// within the in-flight bound: what both gRPC services do.
    async fn run<R: Send + 'static, T: Send + 'static>(
        &self,
        request: tonic::Request<R>,
        f: fn(&Ingest, &R) -> Result<T, Refused>,
    ) -> Result<T, tonic::Status> {
        let auth = request
            .metadata()
            .get("authorization")
            .map(|v| v.as_bytes().to_vec());
        if !self.0.authorized(auth.as_deref()) {
            return Err(tonic::Status::unauthenticated("a bearer token is required"));
        }
        let ingest = self.0.clone();
        let req = request.into_inner();
        tokio::task::spawn_blocking(move || ingest.admitted(|| f(&ingest, &req)))
            .await
            .unwrap_or_else(|e| Err(Refused::Unavailable(e.to_string())))
            .map_err(grpc_status)
    }
}

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let (rejected, _) = self.run(request, Ingest::record).await?;
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: partial(rejected),
        }))
    }
}

#[tonic::async_trait]
impl LogsService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportLogsServiceRequest>,
    ) -> Result<tonic::Response<ExportLogsServiceResponse>, tonic::Status> {
        let rejected = self.run(request, Ingest::record_logs).await?;
        Ok(tonic::Response::new(ExportLogsServiceResponse {
            partial_success: partial_logs(rejected),
        }))
    }
}

/// A refusal as the gRPC status the exporters act on.
fn grpc_status(r: Refused) -> tonic::Status {
    match r {
        Refused::Busy => tonic::Status::resource_exhausted("too many exports at once; retry"),
        Refused::TooLarge => tonic::Status::resource_exhausted("the export is over the size limit"),
        Refused::Unavailable(m) => {
            tonic::Status::unavailable(format!("the recorder is unavailable: {m}"))
        }
        Refused::Malformed(m) => tonic::Status::invalid_argument(m),
        Refused::Unauthorized => tonic::Status::unauthenticated("a bearer token is required"),
    }
}
