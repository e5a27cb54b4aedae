//! The request whose answer a response is watched for: a call's outcome is recorded when its
//! answer passes, or as unknown when the exchange ends without one.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::{Response, StatusCode, body::Incoming};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::{
    Body, Proxy, Shared, lock, rpc_error,
    sse::{event_end, sse_event, sse_message},
    warn,
};
use crate::{
    gate::{CallRecord, code},
    session::Session,
};

/// The request whose answer a response is watched for.
#[derive(Clone)]
pub(super) struct Watch {
    pub(super) proxy: Arc<Proxy>,
    pub(super) session: Shared<Session>,
    /// The session's key of the request.
    pub(super) key: String,
    /// Its JSON-RPC id.
    pub(super) id: Value,
}

impl Watch {
    /// The SSE event to relay instead of `msg`, when it answers this exchange's `tools/list`
    /// and the policy leaves tools out (recorded).
    pub(super) fn filter_tools_list(&self, msg: &Map<String, Value>) -> Option<Bytes> {
        if msg.get("id") != Some(&self.id) {
            return None;
        }
        let filtered = {
            let s = lock(&self.session);
            if !s.awaits_tools_list(&self.key) {
                return None;
            }
            self.proxy.gate.filter_tools_list(&s, msg)?
        };
        let (line, ev) = filtered;
        tokio::task::block_in_place(|| self.proxy.gate.record_filtering(&ev));
        Some(sse_event(line.trim_ascii_end()))
    }

    /// Notes `msg` if it answers the watched request; records a call's outcome (blocking).
    /// Returns whether it was the answer.
    pub(super) fn on_message(&self, msg: &Map<String, Value>) -> bool {
        if msg.contains_key("method") || msg.get("id") != Some(&self.id) {
            return false;
        }
        let mut s = lock(&self.session);
        if let Some(record) = s.on_response(&self.key, msg) {
            let event = s.outcome_event(&record, msg);
            drop(s);
            // Handed to the recorder before the answer is relayed (Gate::complete).
            self.proxy.gate.complete(CallRecord {
                key: record.key,
                event: Box::new(event),
            });
        }
        true
    }

    /// The gateway's answer when the server's cannot be had: the outcome is unknown.
    pub(super) fn no_answer(&self, why: &str) -> Response<Body> {
        self.unanswered(why);
        rpc_error(
            StatusCode::BAD_GATEWAY,
            &self.id,
            code::NO_ANSWER,
            &format!("afr gateway: {why}"),
        )
    }

    /// The exchange ended without an answer: a pending call's outcome is unknown.
    pub(super) fn unanswered(&self, why: &str) {
        tokio::task::block_in_place(|| self.unanswered_blocking(why));
    }

    pub(super) fn unanswered_blocking(&self, why: &str) {
        let mut s = lock(&self.session);
        if let Some(record) = s.forget(&self.key) {
            let ev = s.unknown_outcome_event(&record, why);
            drop(s);
            let tool = &record.event.intent.tool;
            if let Err(e) = self.proxy.gate.record(&record.key, &ev) {
                warn(&format!(
                    "outcome of `{tool}` (unknown: {why}) not recorded: {e}"
                ));
            }
        }
    }
}

/// Records a watched call's outcome as unknown if it is dropped armed: hyper drops a
/// request's handler when its client disconnects, before any answer could be relayed.
pub(super) struct CancelGuard(pub(super) Option<Watch>);

impl CancelGuard {
    pub(super) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if let Some(w) = self.0.take() {
            // Not on a runtime worker: recording blocks.
            tokio::task::spawn_blocking(move || {
                w.unanswered_blocking(
                    "the client disconnected before the answer (the call was cancelled)",
                );
            });
        }
    }
}

/// Relays an upstream SSE body into `tx` event by event, watching for the answer.
pub(super) async fn pump_sse(
    mut body: Incoming,
    watch: Watch,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    const GONE: &str = "the client disconnected before the answer (the call was cancelled)";
    let mut buf: Vec<u8> = Vec::new();
    let mut answered = false;
    let why = loop {
        let next = tokio::select! {
            f = body.frame() => f,
            // The client went away (its connection closed, so hyper dropped the body): known
            // now, not at the server's next event, which may be the answer a minute later.
            () = tx.closed() => break GONE,
        };
        match next {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                buf.extend_from_slice(&data);
                let mut gone = false;
                while let Some(end) = event_end(&buf) {
                    let mut event: Vec<u8> = buf.drain(..end).collect();
                    if !answered && let Some(m) = sse_message(&event) {
                        // A tools/list answer leaves out what the policy denies outright.
                        if let Some(filtered) = watch.filter_tools_list(&m) {
                            event = filtered.to_vec();
                        }
                        answered = watch.on_message(&m);
                    }
                    if tx.send(Ok(Bytes::from(event))).await.is_err() {
                        gone = true;
                        break;
                    }
                }
                if gone {
                    break GONE;
                }
            }
            Some(Err(_)) => break "the server's stream broke before the answer",
            None => break "the server's stream ended before the answer",
        }
    };
    if !buf.is_empty() {
        let _ = tx.send(Ok(Bytes::from(buf))).await;
    }
    if !answered {
        watch.unanswered(why);
    }
}
