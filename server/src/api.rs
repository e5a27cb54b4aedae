//! Routes, authentication, and the one place where errors become status codes.

use std::{convert::Infallible, sync::Arc};

use afr_recorder::{LogReader, RecordError, query::Query};
use bytes::Bytes;
use hyper::{
    Method, Request, Response, StatusCode,
    body::Incoming,
    header::{self, HeaderValue},
};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use afr_client::http::{self as body, Body, LineBounds, ReadError};

use crate::{AppState, Counters, ingest, status};

/// `Content-Type` of one event.
pub const JSON: &str = "application/json";
/// `Content-Type` of a batch of events, and of the query answer.
pub const NDJSON: &str = "application/x-ndjson";
/// `Content-Type` of a disclosure bundle.
pub const CBOR: &str = "application/cbor";
/// `Content-Type` of an export (a CBOR sequence, RFC 8742).
pub const CBOR_SEQ: &str = "application/cbor-seq";
/// Longest `POST /v1/disclose` body.
const MAX_DISCLOSE_BODY: usize = 16 << 20;
/// Most events one disclosure may name (as `afr disclose --seq`).
const MAX_DISCLOSE_SEQS: usize = 1_000_000;

/// An error answer: a status and `{"error": message}`.
#[derive(Debug)]
pub(crate) struct Failure {
    status: StatusCode,
    message: String,
    retry_after: Option<u32>,
}

impl Failure {
    fn new(status: StatusCode, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
            retry_after: None,
        }
    }
}

impl From<RecordError> for Failure {
    fn from(e: RecordError) -> Failure {
        let status = match &e {
            RecordError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            RecordError::UnknownEvent(_) => StatusCode::NOT_FOUND,
            RecordError::Unsealed { .. }
            | RecordError::EpochNotSealed(_)
            | RecordError::AlreadyErased(_) => StatusCode::CONFLICT,
            RecordError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Failure::new(status, e.to_string())
    }
}

impl From<ReadError> for Failure {
    fn from(e: ReadError) -> Failure {
        match e {
            ReadError::TooLarge(what, max) => Failure::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("{what} is over the limit of {max}"),
            ),
            ReadError::Timeout => Failure::new(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time",
            ),
            ReadError::Io(m) => Failure::new(StatusCode::BAD_REQUEST, m),
        }
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn json_response(status: StatusCode, v: &Value) -> Response<Body> {
    let mut b = v.to_string().into_bytes();
    b.push(b'\n');
    respond(status, JSON, body::full(b))
}

fn failure_response(f: Failure) -> Response<Body> {
    let mut r = json_response(f.status, &json!({ "error": f.message }));
    if let Some(s) = f.retry_after {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    r
}

/// Runs `f` on the blocking pool (the recorder's calls wait on locks and disk).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the request's task failed: {e}"),
        )
    })?
}

/// The server's one handler.
pub(crate) async fn handle(
    state: Arc<AppState>,
    token: Option<Arc<Zeroizing<Vec<u8>>>>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    if let Some(t) = token
        && !authorized(&req, &t)
    {
        let mut r = failure_response(Failure::new(
            StatusCode::UNAUTHORIZED,
            "a valid `Authorization: Bearer <token>` header is required",
        ));
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return Ok(r);
    }
    let res = match (req.method(), req.uri().path()) {
        (&Method::POST, "/v1/events") => post_events(&state, req).await,
        (&Method::GET, "/v1/events") => get_events(&state, &req).await,
        (&Method::GET, "/v1/status") => get_status(&state).await,
        (&Method::POST, "/v1/seal") => post_seal(&state).await,
        (&Method::POST, "/v1/handover") => post_handover(&state),
        (&Method::POST, "/v1/hook") => post_hook(&state, req).await,
        (&Method::POST, "/v1/disclose") => post_disclose(&state, req).await,
        (&Method::GET, "/v1/export") => get_export(&state).await,
        (&Method::GET, "/metrics") => get_metrics(&state).await,
        (
            &Method::POST,
            p @ ("/v1/delegations/offer" | "/v1/delegations/accept" | "/v1/delegations/receipt"),
        ) => {
            let step = p.rsplit('/').next().unwrap_or_default().to_owned();
            post_delegation(&state, req, &step).await
        }
        (
            _,
            "/v1/events"
            | "/v1/status"
            | "/v1/seal"
            | "/v1/handover"
            | "/v1/hook"
            | "/v1/disclose"
            | "/v1/export"
            | "/metrics"
            | "/v1/delegations/offer"
            | "/v1/delegations/accept"
            | "/v1/delegations/receipt",
        ) => Err(Failure::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{} is not allowed here", req.method()),
        )),
        (_, p) => Err(Failure::new(
            StatusCode::NOT_FOUND,
            format!("no route {}", afr_core::text::escape(p)),
        )),
    };
    Ok(res.unwrap_or_else(failure_response))
}

/// Whether `req` carries the bearer token; compared in constant time.
fn authorized(req: &Request<Incoming>, token: &[u8]) -> bool {
    let Some(v) = req.headers().get(header::AUTHORIZATION) else {
        return false;
    };
    let Some(given) = v.as_bytes().strip_prefix(b"Bearer ") else {
        return false;
    };
    bool::from(given.trim_ascii().ct_eq(token))
}

fn content_type(req: &Request<Incoming>) -> &str {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim)
        .unwrap_or("")
}

fn content_length(req: &Request<Incoming>) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

async fn post_events(
    state: &Arc<AppState>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    let limits = &state.limits;
    let max_line = state.recorder.config().max_event_bytes + ingest::LINE_SLACK;
    let ndjson = match content_type(&req) {
        NDJSON => true,
        JSON => false,
        other => {
            return Err(Failure::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "Content-Type must be {JSON} (one event) or {NDJSON} (one event per line), not `{}`",
                    afr_core::text::escape(other)
                ),
            ));
        }
    };
    let max_body = if ndjson {
        limits.max_body_bytes
    } else {
        max_line
    };
    if content_length(&req).is_some_and(|n| n > max_body as u64) {
        return Err(ReadError::TooLarge("request body", max_body).into());
    }
    let Ok(permit) = state.inflight.clone().try_acquire_owned() else {
        Counters::bump(&state.counters.busy);
        return Err(Failure {
            retry_after: Some(1),
            ..Failure::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many batches in flight; retry after the time in Retry-After",
            )
        });
    };
    let lines = if ndjson {
        body::read_lines(
            req.into_body(),
            LineBounds {
                line: max_line,
                lines: limits.max_batch_lines,
                body: limits.max_body_bytes,
            },
            limits.body_timeout,
        )
        .await?
    } else {
        // One event: newlines inside it are JSON whitespace, not separators.
        let b = body::read_all(req.into_body(), max_line, limits.body_timeout).await?;
        let flat: Vec<u8> = b
            .iter()
            .map(|&c| if c == b'\n' { b' ' } else { c })
            .collect();
        vec![Bytes::from(flat)]
    };
    let r = state.recorder.clone();
    let out = blocking(move || {
        let out = ingest::record_lines(&r, &lines);
        drop(permit);
        Ok(out)
    })
    .await?;
    state.counters.rejected_lines.fetch_add(
        out.errors.len() as u64,
        std::sync::atomic::Ordering::Relaxed,
    );
    if let Some(e) = out.fatal {
        let f = Failure::from(e);
        return Ok(json_response(
            f.status,
            &json!({ "receipts": out.receipts, "errors": out.errors, "error": f.message }),
        ));
    }
    let status = if out.errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    Ok(json_response(
        status,
        &json!({ "receipts": out.receipts, "errors": out.errors }),
    ))
}

/// The decoded `name=value` pairs of a URL query string (`+` is a space).
fn query_params(q: &str) -> Result<Vec<(String, String)>, Failure> {
    let decode = |s: &str| -> Result<String, Failure> {
        let bad = || {
            Failure::new(
                StatusCode::BAD_REQUEST,
                "malformed percent-encoding in the URL",
            )
        };
        let mut out = Vec::with_capacity(s.len());
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'+' => out.push(b' '),
                b'%' => {
                    let h = b.get(i + 1..i + 3).ok_or_else(bad)?;
                    let h = std::str::from_utf8(h).map_err(|_| bad())?;
                    out.push(u8::from_str_radix(h, 16).map_err(|_| bad())?);
                    i += 2;
                }
                c => out.push(c),
            }
            i += 1;
        }
        String::from_utf8(out).map_err(|_| bad())
    };
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Ok((decode(k)?, decode(v)?))
        })
        .collect()
}

async fn get_events(
    state: &Arc<AppState>,
    req: &Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    let (mut expr, mut limit, mut summary) = (None, None, false);
    for (k, v) in query_params(req.uri().query().unwrap_or(""))? {
        let bad = |m: &str| Failure::new(StatusCode::BAD_REQUEST, m.to_owned());
        match k.as_str() {
            "query" => expr = Some(v),
            "limit" => {
                limit = Some(
                    v.parse::<usize>()
                        .map_err(|_| bad("limit must be a number"))?,
                )
            }
            "summary" => summary = matches!(v.as_str(), "true" | "1"),
            other => {
                return Err(bad(&format!(
                    "unknown parameter `{}` (query, limit, summary)",
                    afr_core::text::escape(other)
                )));
            }
        }
    }
    let expr = expr.ok_or_else(|| Failure::new(StatusCode::BAD_REQUEST, "query= is required"))?;
    let q = Query::parse(&expr).map_err(|e| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            format!("query: {} (column {})", e.message, e.column),
        )
    })?;
    let r = state.recorder.clone();
    let (mut w, body) = body::channel();
    // The answer is computed before the first byte is sent, so a failing query gets a status.
    let (tx, rx) = tokio::sync::oneshot::channel::<Result<(), Failure>>();
    tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        let started = std::time::Instant::now();
        let res = match r.query(&q) {
            Ok(res) => res,
            Err(e) => {
                let _ = tx.send(Err(Failure::new(StatusCode::BAD_REQUEST, e.to_string())));
                return;
            }
        };
        let took = started.elapsed();
        let _ = tx.send(Ok(()));
        let shown = &res.matches[..limit.unwrap_or(usize::MAX).min(res.matches.len())];
        for (&seq, ev) in shown.iter().zip(r.load_events(shown)) {
            let line = match ev {
                Ok(ev) => json!({
                    "seq": seq,
                    "epoch": ev.record.epoch,
                    "erased": ev.payload.is_none(),
                    "event": ev.event_json(),
                }),
                Err(e) => return w.fail(e.to_string()),
            };
            if writeln!(w, "{line}").is_err() {
                return;
            }
        }
        if summary {
            let s = json!({ "summary": {
                "matches": res.matches,
                "unknown": res.unknown,
                "erased_epochs": res.erased_epochs,
                "notes": res.notes,
                "indexed": res.indexed,
                "examined": res.examined,
                "decrypted": res.decrypted,
                "took_us": took.as_micros() as u64,
            }});
            if writeln!(w, "{s}").is_err() {
                return;
            }
        }
        let _ = w.flush();
    });
    match rx.await {
        Ok(Ok(())) => Ok(respond(StatusCode::OK, NDJSON, body)),
        Ok(Err(f)) => Err(f),
        Err(_) => Err(Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the query task failed",
        )),
    }
}

async fn get_status(state: &Arc<AppState>) -> Result<Response<Body>, Failure> {
    let r = state.recorder.clone();
    let mut v = blocking(move || Ok(status::status_json(r.store())?)).await?;
    v["on_demand"] = state.on_demand.is_some().into();
    v["pid"] = std::process::id().into();
    Ok(json_response(StatusCode::OK, &v))
}

/// `POST /v1/handover`: a long-running `afr serve` asks the server a producer started on
/// demand to stop so that it can take the store (409 from any other server).
fn post_handover(state: &Arc<AppState>) -> Result<Response<Body>, Failure> {
    if state.on_demand.is_none() {
        return Err(Failure::new(
            StatusCode::CONFLICT,
            "this afr serve was not started on demand; it does not hand the store over",
        ));
    }
    state.handover.notify_one();
    Ok(json_response(StatusCode::OK, &json!({ "handover": true })))
}

async fn get_metrics(state: &Arc<AppState>) -> Result<Response<Body>, Failure> {
    let st = state.clone();
    let text = blocking(move || {
        let v = status::status_json(st.recorder.store())?;
        Ok(status::metrics_text(&v, &st.counters.exposition()))
    })
    .await?;
    Ok(respond(
        StatusCode::OK,
        "text/plain; version=0.0.4",
        body::full(text),
    ))
}

/// `POST /v1/delegations/{offer,accept,receipt}`: one step of the delegation handshake
/// (`docs/api.md`, `docs/spec/delegation.md`), answered with this recorder's signed receipt.
async fn post_delegation(
    state: &Arc<AppState>,
    req: Request<Incoming>,
    step: &str,
) -> Result<Response<Body>, Failure> {
    use afr_core::delegation::Receipt;
    use afr_recorder::delegation::DelegationError;
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Ask {
        #[serde(default)]
        event: Option<serde_json::Value>,
        #[serde(default)]
        idempotency_key: Option<String>,
        #[serde(default)]
        parent: Option<Receipt>,
        #[serde(default)]
        offer: Option<Receipt>,
        #[serde(default)]
        receipt: Option<Receipt>,
        #[serde(default)]
        to: Option<String>,
    }
    let Some(sign) = state.receipt_signer.clone() else {
        return Err(Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "this server holds no receipt key: start afr serve with the anchoring key (an encrypted keystore needs --password-file or AFR_KEYSTORE_PASSWORD)",
        ));
    };
    if content_type(&req) != JSON {
        return Err(Failure::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Type must be {JSON}"),
        ));
    }
    let max = state.recorder.config().max_event_bytes + ingest::LINE_SLACK;
    let b = body::read_all(req.into_body(), max, state.limits.body_timeout).await?;
    let ask: Ask = serde_json::from_slice(&b)
        .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, format!("body: {e}")))?;
    let step = step.to_owned();
    let missing = move |step: &str, what: &str| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            format!("the {step} step needs `{what}`"),
        )
    };
    let event = match (&ask.event, step.as_str()) {
        (Some(v), "offer" | "accept") => Some(
            afr_core::EventInput::from_json(
                v.to_string().as_bytes(),
                state.recorder.config().max_event_bytes,
            )
            .map_err(|e| Failure::new(StatusCode::UNPROCESSABLE_ENTITY, format!("event: {e}")))?,
        ),
        (None, "offer" | "accept") => return Err(missing(&step, "event")),
        _ => None,
    };
    let r = state.recorder.clone();
    let receipt = blocking(move || {
        let sign = |d: &[u8; 32]| (sign.0)(d);
        let key = ask.idempotency_key.as_deref();
        let out = match (step.as_str(), event) {
            ("offer", Some(e)) => {
                let to = ask.to.as_deref().ok_or_else(|| missing(&step, "to"))?;
                let to = afr_core::delegation::parse_recorder(&to.to_ascii_lowercase())
                    .ok_or_else(|| {
                        Failure::new(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            format!("to: `{to}` is not a recorder id (0x and 40 hex digits)"),
                        )
                    })?;
                r.delegate_offer(e, &to, key, &sign)
            }
            ("accept", Some(e)) => {
                let parent = ask
                    .parent
                    .as_ref()
                    .ok_or_else(|| missing(&step, "parent"))?;
                r.delegate_accept(e, parent, key, &sign)
            }
            _ => {
                let ours = ask.offer.as_ref().ok_or_else(|| missing(&step, "offer"))?;
                let theirs = ask
                    .receipt
                    .as_ref()
                    .ok_or_else(|| missing(&step, "receipt"))?;
                r.delegate_receipt(ours, theirs, &sign)
            }
        };
        out.map_err(|e| match e {
            DelegationError::Invalid(m) => Failure::new(StatusCode::UNPROCESSABLE_ENTITY, m),
            DelegationError::Record(e) => e.into(),
            DelegationError::Sign(m) => Failure::new(StatusCode::INTERNAL_SERVER_ERROR, m),
        })
    })
    .await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({ "receipt": receipt }),
    ))
}

/// Largest hook request: a tool call's JSON with a large file write.
const MAX_HOOK_BODY: usize = 64 << 20;

/// A coding-agent hook handed over by its thin client (`afr_hook::remote`): run on the blocking
/// pool (an escalated call waits there for its decision), answered with what to print.
async fn post_hook(
    state: &Arc<AppState>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    let Some(h) = state.hooks.clone() else {
        return Err(Failure::new(
            StatusCode::NOT_FOUND,
            "this server runs no hooks",
        ));
    };
    if content_type(&req) != JSON {
        return Err(Failure::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Type must be {JSON}"),
        ));
    }
    let b = body::read_all(req.into_body(), MAX_HOOK_BODY, state.limits.body_timeout).await?;
    let (dir, r) = (state.dir.clone(), Arc::new(state.recorder.clone()));
    let answer =
        blocking(move || (h.0)(&dir, r, &b).map_err(|e| Failure::new(StatusCode::BAD_REQUEST, e)))
            .await?;
    Ok(respond(StatusCode::OK, JSON, body::full(answer)))
}

async fn post_seal(state: &Arc<AppState>) -> Result<Response<Body>, Failure> {
    let r = state.recorder.clone();
    let h = blocking(move || Ok(r.seal()?)).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({ "sealed": h.map(|h| json!({
            "epoch": h.epoch, "count": h.count, "root": h.root().to_hex(),
        })) }),
    ))
}

async fn post_disclose(
    state: &Arc<AppState>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Ask {
        seqs: Vec<u64>,
        #[serde(default)]
        with_keys: bool,
    }
    if content_type(&req) != JSON {
        return Err(Failure::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Type must be {JSON}"),
        ));
    }
    let b = body::read_all(
        req.into_body(),
        MAX_DISCLOSE_BODY,
        state.limits.body_timeout,
    )
    .await?;
    let ask: Ask = serde_json::from_slice(&b)
        .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, format!("body: {e}")))?;
    if ask.seqs.is_empty() || ask.seqs.len() > MAX_DISCLOSE_SEQS {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            format!("seqs must name 1 to {MAX_DISCLOSE_SEQS} events"),
        ));
    }
    let r = state.recorder.clone();
    let bundle = blocking(move || Ok(r.disclose(&ask.seqs, ask.with_keys)?)).await?;
    let bytes = bundle.encode();
    let mut resp = respond(StatusCode::OK, CBOR, body::full(bytes));
    let h = resp.headers_mut();
    h.insert("afr-bundle-events", HeaderValue::from(bundle.events.len()));
    h.insert(
        "afr-bundle-headers",
        HeaderValue::from(bundle.headers.len()),
    );
    let erased = bundle
        .erased
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    if let Ok(v) = HeaderValue::from_str(&erased) {
        h.insert("afr-bundle-erased", v);
    }
    Ok(resp)
}

async fn get_export(state: &Arc<AppState>) -> Result<Response<Body>, Failure> {
    let r = state.recorder.clone();
    let dir = state.dir.clone();
    // Everything acknowledged is written, then a read-only view pins what the export holds.
    let reader = blocking(move || {
        r.flush()?;
        Ok(LogReader::open(&dir)?)
    })
    .await?;
    let (events, epochs, unsealed) = {
        let reader = &reader;
        let events = reader.next_seq()?;
        let last = reader.last_sealed()?;
        let sealed_end = last.as_ref().map_or(0, afr_core::EpochHeader::end_seq);
        (
            events,
            last.map_or(0, |h| h.epoch + 1),
            events - sealed_end.min(events),
        )
    };
    let (mut w, body) = body::channel();
    tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        match afr_recorder::export_log(reader.store(), &mut w) {
            Ok(_) => {
                let _ = w.flush();
            }
            Err(e) => w.fail(e.to_string()),
        }
    });
    let mut resp = respond(StatusCode::OK, CBOR_SEQ, body);
    let h = resp.headers_mut();
    h.insert("afr-export-events", HeaderValue::from(events));
    h.insert("afr-export-epochs", HeaderValue::from(epochs));
    h.insert("afr-export-unsealed", HeaderValue::from(unsealed));
    Ok(resp)
}
