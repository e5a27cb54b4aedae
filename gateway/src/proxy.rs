//! `afr mcp proxy`: the gateway in front of a Streamable HTTP MCP server.
//!
//! ```text
//!  client ── POST/GET/DELETE <path> ──► proxy (Host/Origin checked) ──► upstream <path>
//!  client ◄── JSON or SSE, streamed ─── proxy (a copy of each message parsed) ◄── upstream
//! ```
//!
//! - **POST** carries one JSON-RPC message. Its bytes are forwarded unchanged; a `tools/call`
//!   goes through [`Gate::admit`] first, exactly as over stdio. The answer is relayed as the
//!   upstream sent it: a JSON body whole, an SSE stream event by event (never the whole stream:
//!   an event is passed on as soon as it is complete); the event or body holding a call's
//!   response is passed on only after the outcome event is durable.
//! - **GET** (the server-to-client stream) and **DELETE** (end of session) pass through
//!   unbuffered and unparsed.
//! - Headers pass through both ways (`Mcp-Session-Id`, `MCP-Protocol-Version`,
//!   `Last-Event-ID`, `Authorization`, ...), except hop-by-hop ones. Nothing from a header is
//!   ever recorded.
//! - A client that disconnects before a call is answered cancels it: the upstream connection
//!   is dropped and the outcome is recorded as unknown.
//! - Sessions: the state of a client (its info, resources read, the server's annotations) is
//!   kept per `Mcp-Session-Id`; requests without one (the stateless 2026-07-28 generation)
//!   share one state, and name their client in `_meta` on each request.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
        mpsc as std_mpsc,
    },
};

use afr_client::{StartError, http::ChannelBody, runtime};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, combinators::BoxBody};
use hyper::{
    HeaderMap, Method, Request, Response, StatusCode, Uri,
    body::Incoming,
    header::{self, HeaderValue},
};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::{TokioExecutor, TokioIo, TokioTimer},
};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::{
    approvals::Ruling,
    gate::{
        Admission, CallRecord, Forward, Gate, Held, Refusal, ToolCall, code, elicitation_request,
        elicitation_ruling, error_message, parse_client_message,
    },
    session::Session,
};

type Body = BoxBody<Bytes, std::io::Error>;
type Shared<T> = Arc<Mutex<T>>;

/// Settings of `afr mcp proxy`.
#[derive(Debug)]
pub struct ProxyOptions {
    /// The recorder, policy and approval settings.
    pub gate: Arc<Gate>,
    /// The MCP server's endpoint (`http://host:port/path`).
    pub upstream: String,
    /// Where clients connect.
    pub listen: SocketAddr,
    /// Whether a non-loopback `listen` is allowed.
    pub allow_remote: bool,
    /// Host header values accepted besides the loopback names.
    pub allowed_hosts: Vec<String>,
    /// Origins accepted besides loopback ones.
    pub allowed_origins: Vec<String>,
    /// Largest request or JSON response body, in bytes.
    pub max_body: usize,
    /// A PEM file of CA certificates an `https` upstream's certificate may chain to, besides
    /// the system's roots (a private CA). The certificate is always verified.
    pub upstream_ca: Option<std::path::PathBuf>,
}

/// Errors starting the proxy.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The upstream URL is not usable.
    #[error("--upstream {url}: {why}")]
    Upstream {
        /// The URL.
        url: String,
        /// What is wrong.
        why: String,
    },
    /// A non-loopback address without `--allow-remote`.
    #[error(
        "--listen {0} is not a loopback address; the proxy authenticates nobody, so add --allow-remote to serve other hosts"
    )]
    Remote(SocketAddr),
    /// The listener or the runtime could not start.
    #[error(transparent)]
    Start(#[from] StartError),
}

/// Hop-by-hop headers, never forwarded (RFC 9110 §7.6.1), and `host` (set for the upstream).
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

struct Proxy {
    gate: Arc<Gate>,
    upstream: Uri,
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    hosts: Vec<String>,
    origins: Vec<String>,
    max_body: usize,
    sessions: Mutex<HashMap<String, Shared<Session>>>,
    /// Stateless (2026-07-28) clients, each by its own identity ([`stateless_key`]): every
    /// request names its client in `_meta`, and no session id ties requests together.
    stateless: Mutex<HashMap<String, Shared<Session>>>,
    exchanges: AtomicU64,
    /// The gateway's own elicitations still waited for, by JSON-RPC id.
    elicitations: Mutex<HashMap<String, std_mpsc::Sender<Ruling>>>,
    /// Held calls by session lane and request id: where a POSTed `notifications/cancelled`
    /// for one goes.
    held_calls: Mutex<HashMap<String, std_mpsc::Sender<Ruling>>>,
    /// Every elicitation id the gateway sent (answers to them are never forwarded).
    asked: Mutex<std::collections::HashSet<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn warn(m: &str) {
    eprintln!("afr mcp proxy: {m}");
}

/// The upstream as events name it: no credentials, no query (either may hold a secret).
fn public_url(u: &Uri) -> String {
    let host = u.host().unwrap_or("");
    let port = u.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
    format!(
        "{}://{host}{port}{}",
        u.scheme_str().unwrap_or("http"),
        u.path()
    )
}

fn parse_upstream(url: &str) -> Result<Uri, ProxyError> {
    let bad = |why: &str| ProxyError::Upstream {
        url: afr_core::redact_urls_in(url),
        why: why.to_owned(),
    };
    let u: Uri = url.parse().map_err(|_| bad("not a URL"))?;
    match u.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(bad("the scheme must be http or https")),
    }
    if u.host().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if u.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(bad(
            "credentials in the URL are not forwarded; send them in a header from the client",
        ));
    }
    Ok(u)
}

/// An error with its causes (`client error (Connect): invalid peer certificate: UnknownIssuer`).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// The TLS settings for an https upstream: the system's root certificates, plus those of
/// `extra` (PEM); certificates and host names always verified.
fn tls_config(extra: Option<&std::path::Path>) -> Result<rustls::ClientConfig, ProxyError> {
    use rustls_pki_types::{CertificateDer, pem::PemObject};
    let bad = |why: String| ProxyError::Upstream {
        url: "--upstream-ca".into(),
        why,
    };
    let mut roots = rustls::RootCertStore::empty();
    // The system's roots: an unreadable one is skipped (as rustls-native-certs reports).
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if let Some(path) = extra {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| bad(format!("{}: {e}", path.display())))?
            .collect::<Result<_, _>>()
            .map_err(|e| bad(format!("{}: {e}", path.display())))?;
        if certs.is_empty() {
            return Err(bad(format!("{}: no PEM certificate in it", path.display())));
        }
        for c in certs {
            roots
                .add(c)
                .map_err(|e| bad(format!("{}: {e}", path.display())))?;
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

/// Runs the proxy until SIGTERM or SIGINT.
pub fn serve(opts: ProxyOptions) -> Result<(), ProxyError> {
    let upstream = parse_upstream(&opts.upstream)?;
    if !opts.listen.ip().is_loopback() && !opts.allow_remote {
        return Err(ProxyError::Remote(opts.listen));
    }
    let rt = runtime()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(opts.listen)
            .await
            .map_err(|source| StartError::Bind {
                addr: opts.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: opts.listen,
            source,
        })?;
        let mut hosts = Vec::new();
        for name in ["localhost", "127.0.0.1", "[::1]"] {
            hosts.push(name.to_owned());
            hosts.push(format!("{name}:{}", addr.port()));
        }
        if !addr.ip().is_loopback() {
            hosts.push(addr.to_string());
        }
        hosts.extend(opts.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()));
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        // https upstreams (http ones pass through): the system's roots and --upstream-ca.
        connector.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(opts.upstream_ca.as_deref())?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let proxy = Arc::new(Proxy {
            gate: opts.gate,
            client: Client::builder(TokioExecutor::new()).build(connector),
            hosts,
            origins: opts
                .allowed_origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            max_body: opts.max_body,
            sessions: Mutex::new(HashMap::new()),
            stateless: Mutex::new(HashMap::new()),
            exchanges: AtomicU64::new(0),
            elicitations: Mutex::new(HashMap::new()),
            held_calls: Mutex::new(HashMap::new()),
            asked: Mutex::new(std::collections::HashSet::new()),
            upstream,
        });
        eprintln!(
            "afr mcp proxy: listening on http://{addr}{} -> {}",
            proxy.upstream.path(),
            public_url(&proxy.upstream)
        );
        let signo = accept_loop(&listener, &proxy).await;
        tokio::task::block_in_place(|| {
            proxy.abandon(&format!("the gateway was stopped by signal {signo}"));
            proxy.gate.close_journal();
        });
        Ok(())
    })
}

async fn accept_loop(listener: &tokio::net::TcpListener, proxy: &Arc<Proxy>) -> i32 {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        warn("cannot watch signals");
        return 0;
    };
    loop {
        let stream = tokio::select! {
            _ = term.recv() => return 15,
            _ = int.recv() => return 2,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    warn(&format!("accept: {e}"));
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let proxy = proxy.clone();
                async move { Ok::<_, std::convert::Infallible>(proxy.handle(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(std::time::Duration::from_secs(30))
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).map_err(|never| match never {}).boxed()
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(full(format!("afr mcp proxy: {text}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn rpc_error(status: StatusCode, id: &Value, code: i64, message: &str) -> Response<Body> {
    let body = error_message(id, code, message);
    let mut r = Response::new(full(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn refusal(id: &Value, r: &Refusal) -> Response<Body> {
    rpc_error(StatusCode::OK, id, r.code, &r.message)
}

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for (k, v) in from {
        let name = k.as_str();
        if HOP_BY_HOP.contains(&name) || name == "host" || name == "content-length" {
            continue;
        }
        to.append(k.clone(), v.clone());
    }
}

/// One SSE event's data, as JSON, if it is a JSON object.
fn sse_message(event: &[u8]) -> Option<Map<String, Value>> {
    let text = std::str::from_utf8(event).ok()?;
    let mut data = String::new();
    for line in text.lines() {
        if let Some(d) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    match serde_json::from_str(&data).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// The end (exclusive) of the first complete SSE event in `buf`, blank line included.
fn event_end(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < buf.len() {
        // A line ends with \n, \r\n or \r; an empty line ends the event.
        let rest = &buf[i..];
        let (line_end, next) = match rest.iter().position(|b| *b == b'\n' || *b == b'\r') {
            Some(p) if rest[p] == b'\r' && rest.get(p + 1) == Some(&b'\n') => (p, p + 2),
            Some(p) if rest[p] == b'\r' && p + 1 == rest.len() => return None, // maybe \r\n
            Some(p) => (p, p + 1),
            None => return None,
        };
        if line_end == 0 && i > 0 {
            return Some(i + next);
        }
        if line_end == 0 {
            // A leading blank line: an empty event; pass it on alone.
            return Some(next);
        }
        i += next;
    }
    None
}

/// An SSE event carrying `msg` (multi-line JSON gets one `data:` per line).
fn sse_event(msg: &[u8]) -> Bytes {
    let text = String::from_utf8_lossy(msg);
    let mut out = String::from("event: message\n");
    for line in text.lines() {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

/// The request whose answer a response is watched for.
#[derive(Clone)]
struct Watch {
    proxy: Arc<Proxy>,
    session: Shared<Session>,
    /// The session's key of the request.
    key: String,
    /// Its JSON-RPC id.
    id: Value,
}

impl Watch {
    /// Notes `msg` if it answers the watched request; records a call's outcome (blocking).
    /// Returns whether it was the answer.
    /// The SSE event to relay instead of `msg`, when it answers this exchange's `tools/list`
    /// and the policy leaves tools out (recorded).
    fn filter_tools_list(&self, msg: &Map<String, Value>) -> Option<Bytes> {
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

    fn on_message(&self, msg: &Map<String, Value>) -> bool {
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
    fn no_answer(&self, why: &str) -> Response<Body> {
        self.unanswered(why);
        rpc_error(
            StatusCode::BAD_GATEWAY,
            &self.id,
            code::NO_ANSWER,
            &format!("afr gateway: {why}"),
        )
    }

    /// The exchange ended without an answer: a pending call's outcome is unknown.
    fn unanswered(&self, why: &str) {
        tokio::task::block_in_place(|| self.unanswered_blocking(why));
    }

    fn unanswered_blocking(&self, why: &str) {
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
struct CancelGuard(Option<Watch>);

impl CancelGuard {
    fn disarm(mut self) {
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
async fn pump_sse(
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

/// The key of a held call in [`Proxy::held_calls`]: its session's lane and its request id.
fn held_key(session: &Shared<Session>, id: &Value) -> String {
    format!("{}\n{}", lock(session).lane, crate::session::id_key(id))
}

/// Who a stateless request comes from: the client named in its own `_meta` (name and
/// version) and, when it sends one, a digest of its `Authorization` header (two users of one
/// client program are two clients). Never the token itself.
fn stateless_key(headers: &HeaderMap, params: &Value) -> String {
    let info = params
        .get("_meta")
        .and_then(|m| {
            m.get("io.modelcontextprotocol/clientInfo")
                .or_else(|| m.get("clientInfo"))
        })
        .map_or(String::new(), |c| {
            format!(
                "{}/{}",
                c.get("name").and_then(Value::as_str).unwrap_or_default(),
                c.get("version").and_then(Value::as_str).unwrap_or_default()
            )
        });
    let auth = headers
        .get(header::AUTHORIZATION)
        .map_or(String::new(), |a| crate::session::sha256(a.as_bytes()));
    format!("{info}\n{auth}")
}

impl Proxy {
    /// The state of the session a request belongs to.
    fn session(
        &self,
        headers: &HeaderMap,
        method: &str,
        params: &Value,
    ) -> (Shared<Session>, Option<String>) {
        match headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            Some(sid) => {
                let mut all = lock(&self.sessions);
                let s = all
                    .entry(sid.to_owned())
                    .or_insert_with(|| {
                        Arc::new(Mutex::new(Session::new("http", public_url(&self.upstream))))
                    })
                    .clone();
                (s, Some(sid.to_owned()))
            }
            // A new stateful session: it gets its id in the answer.
            None if method == "initialize" => (
                Arc::new(Mutex::new(Session::new("http", public_url(&self.upstream)))),
                None,
            ),
            None => {
                let key = stateless_key(headers, params);
                let s = lock(&self.stateless)
                    .entry(key)
                    .or_insert_with(|| {
                        Arc::new(Mutex::new(Session::new("http", public_url(&self.upstream))))
                    })
                    .clone();
                (s, None)
            }
        }
    }

    fn allowed(&self, headers: &HeaderMap) -> Result<(), Box<Response<Body>>> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_ascii_lowercase);
        match host {
            Some(h) if self.hosts.contains(&h) => {}
            Some(_) => {
                return Err(Box::new(plain(
                    StatusCode::FORBIDDEN,
                    "Host not allowed (DNS rebinding protection; see --allowed-host)",
                )));
            }
            None => return Err(Box::new(plain(StatusCode::BAD_REQUEST, "no Host header"))),
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let o = origin
                .to_str()
                .unwrap_or("")
                .trim_end_matches('/')
                .to_ascii_lowercase();
            let host = o
                .split_once("://")
                .map(|(_, rest)| rest)
                .unwrap_or("")
                .to_owned();
            let name = match host.strip_prefix('[') {
                Some(v6) => v6.split(']').next().map(|h| format!("[{h}]")),
                None => host.split(':').next().map(str::to_owned),
            };
            let loopback = matches!(name.as_deref(), Some("localhost" | "127.0.0.1" | "[::1]"));
            if !loopback && !self.origins.contains(&o) {
                return Err(Box::new(plain(
                    StatusCode::FORBIDDEN,
                    "Origin not allowed (see --allowed-origin)",
                )));
            }
        }
        Ok(())
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        if let Err(r) = self.allowed(req.headers()) {
            return *r;
        }
        if req.uri().path() != self.upstream.path() {
            return plain(
                StatusCode::NOT_FOUND,
                &format!("the MCP endpoint is {}", self.upstream.path()),
            );
        }
        let (parts, body) = req.into_parts();
        let bytes = match Limited::new(body, self.max_body).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return rpc_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &Value::Null,
                    code::INVALID_REQUEST,
                    &format!(
                        "afr gateway: message over {} bytes; not forwarded",
                        self.max_body
                    ),
                );
            }
        };
        if parts.method != Method::POST {
            let sid = parts
                .headers
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let r = self.pass(&parts, bytes).await;
            if parts.method == Method::DELETE
                && let Some(sid) = sid
                && r.status().is_success()
            {
                lock(&self.sessions).remove(&sid);
            }
            return r;
        }
        self.post(parts, bytes).await
    }

    fn upstream_request(
        &self,
        parts: &hyper::http::request::Parts,
        body: Bytes,
    ) -> Request<Full<Bytes>> {
        // The client's path was checked to be the upstream's; the upstream's own query (which
        // may carry its key) is kept, and never recorded.
        let uri = self.upstream.clone();
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = parts.method.clone();
        *req.uri_mut() = uri;
        copy_headers(&parts.headers, req.headers_mut());
        req
    }

    /// Forwards a request that is not a JSON-RPC message to watch (GET, DELETE, ...); the
    /// answer streams back unbuffered.
    async fn pass(&self, parts: &hyper::http::request::Parts, body: Bytes) -> Response<Body> {
        match self
            .client
            .request(self.upstream_request(parts, body))
            .await
        {
            Ok(r) => {
                let (rp, rb) = r.into_parts();
                let mut out = Response::new(rb.map_err(std::io::Error::other).boxed());
                *out.status_mut() = rp.status;
                copy_headers(&rp.headers, out.headers_mut());
                out
            }
            Err(e) => plain(
                StatusCode::BAD_GATEWAY,
                &format!("the upstream could not be reached: {e}"),
            ),
        }
    }

    async fn post(
        self: Arc<Self>,
        parts: hyper::http::request::Parts,
        bytes: Bytes,
    ) -> Response<Body> {
        let msg = match parse_client_message(&bytes) {
            Ok(m) => m,
            Err((id, r)) => return rpc_error(StatusCode::BAD_REQUEST, &id, r.code, &r.message),
        };
        let (Some(id), Some(method)) = (
            msg.get("id").cloned(),
            msg.get("method").and_then(Value::as_str).map(str::to_owned),
        ) else {
            // A notification, or a response to a server's request (or to the gateway's own
            // elicitation, which goes no further, even when it comes too late).
            if msg.get("method").and_then(Value::as_str) == Some("tools/call") {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    &Value::Null,
                    code::INVALID_REQUEST,
                    "afr gateway: tools/call without an id; not forwarded",
                );
            }
            // The client gave up on a held call: it never runs (the server never saw it).
            if msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
                && let Some(rid) = msg.get("params").and_then(|p| p.get("requestId"))
            {
                let params = msg.get("params").cloned().unwrap_or(Value::Null);
                let (session, _) = self.session(&parts.headers, "", &params);
                let key = held_key(&session, rid);
                let mut held = lock(&self.held_calls);
                // A stateless client's notification may not name its client: then the one
                // held call with that id, if there is exactly one.
                let key = if held.contains_key(&key) {
                    Some(key)
                } else if parts.headers.contains_key("mcp-session-id") {
                    // A session's notification names its session: nothing else to look for.
                    None
                } else {
                    let suffix = format!("\n{}", crate::session::id_key(rid));
                    let mut m = held.keys().filter(|k| k.ends_with(&suffix));
                    match (m.next(), m.next()) {
                        (Some(k), None) => Some(k.clone()),
                        _ => None,
                    }
                };
                if let Some(tx) = key.and_then(|k| held.remove(&k)) {
                    let reason = params.get("reason").and_then(Value::as_str);
                    let _ = tx.send(crate::approvals::cancelled_by_client(reason));
                    return plain(StatusCode::ACCEPTED, "");
                }
            }
            if let Some(id) = msg.get("id").and_then(Value::as_str)
                && lock(&self.asked).contains(id)
            {
                if let Some(tx) = lock(&self.elicitations).remove(id) {
                    let (session, _) = self.session(&parts.headers, "", &Value::Null);
                    let client = lock(&session).client_name().map(str::to_owned);
                    let _ = tx.send(elicitation_ruling(&msg, client.as_deref()));
                }
                return plain(StatusCode::ACCEPTED, "");
            }
            return self.pass(&parts, bytes).await;
        };
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let (session, sid) = self.session(&parts.headers, &method, &params);
        let key = format!("x{}", self.exchanges.fetch_add(1, Ordering::Relaxed));
        let watch = Watch {
            proxy: self.clone(),
            session: session.clone(),
            key: key.clone(),
            id: id.clone(),
        };
        if method != "tools/call" {
            lock(&session).on_request(key, &method, &params);
            let r = self.forward(&parts, bytes, watch).await;
            if sid.is_none()
                && method == "initialize"
                && let Some(new) = r
                    .headers()
                    .get("mcp-session-id")
                    .and_then(|v| v.to_str().ok())
            {
                lock(&self.sessions).insert(new.to_owned(), session);
            }
            return r;
        }
        let call = match ToolCall::from_params(params) {
            Ok(c) => c,
            Err(r) => return refusal(&id, &r),
        };
        let tool = call.tool.clone();
        let admission = tokio::task::block_in_place(|| {
            let s = lock(&session);
            let a = self.gate.admit(&s, call);
            (a, s.client_elicits())
        });
        match admission {
            (Admission::Forward(f), _) => {
                if let Err(r) =
                    tokio::task::block_in_place(|| self.gate.settle_intent(&tool, &f.ticket))
                {
                    return refusal(&id, &r);
                }
                lock(&session).on_call_forwarded(key, f.record);
                self.forward(&parts, bytes, watch).await
            }
            (Admission::Refuse(r), _) => refusal(&id, &r),
            (Admission::Hold(held), elicits) => {
                let sse = parts
                    .headers
                    .get(header::ACCEPT)
                    .and_then(|a| a.to_str().ok())
                    .is_some_and(|a| a.contains("text/event-stream"));
                if elicits && sse && held.elicitable() {
                    return self.hold_streaming(*held, parts, bytes, watch);
                }
                match self
                    .decide(
                        *held,
                        &session,
                        None,
                        std::future::pending(),
                        held_key(&session, &id),
                    )
                    .await
                {
                    Ok(f) => {
                        lock(&session).on_call_forwarded(key, f.record);
                        self.forward(&parts, bytes, watch).await
                    }
                    Err(r) => refusal(&id, &r),
                }
            }
        }
    }

    /// Waits for the decision on a held call (queue, elicitation answer or timeout) and
    /// records it.
    ///
    /// A client that goes away during the hold cancels the call: it never runs, even if
    /// approved afterwards, and is recorded as cancelled. Gone means this future was dropped
    /// (hyper drops a request's future when its connection closes) or `gone` completed (the
    /// SSE stream of a streaming hold lost its reader). The wait and the decision's recording
    /// run on the blocking pool to their end either way.
    async fn decide(
        &self,
        held: Held,
        session: &Shared<Session>,
        elicited: Option<(std_mpsc::Sender<Ruling>, std_mpsc::Receiver<Ruling>)>,
        gone: impl std::future::Future<Output = ()>,
        cancel_key: String,
    ) -> Result<Forward, Refusal> {
        /// Sends the client's cancellation into the wait when dropped armed.
        struct Cancel(Option<std_mpsc::Sender<Ruling>>);
        impl Drop for Cancel {
            fn drop(&mut self) {
                if let Some(tx) = self.0.take() {
                    let _ = tx.send(crate::approvals::cancelled_by_client(Some(
                        "the client disconnected during the hold",
                    )));
                }
            }
        }
        let (tx, rx) = elicited.unwrap_or_else(std_mpsc::channel);
        lock(&self.held_calls).insert(cancel_key.clone(), tx.clone());
        /// Forgets the held call's cancellation channel when the hold ends, however it ends.
        struct Forget<'a>(&'a Mutex<HashMap<String, std_mpsc::Sender<Ruling>>>, String);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                lock(self.0).remove(&self.1);
            }
        }
        let _forget = Forget(&self.held_calls, cancel_key);
        let mut cancel = Cancel(Some(tx));
        let (gate, session) = (self.gate.clone(), session.clone());
        let mut decided = tokio::task::spawn_blocking(move || {
            let ruling = gate.wait(&held, Some(&rx));
            let s = lock(&session);
            gate.conclude(&s, held, &ruling)
        });
        let failed = |e: tokio::task::JoinError| Refusal {
            code: code::REJECTED,
            message: format!("afr gateway: the decision could not be taken: {e}"),
        };
        tokio::select! {
            r = &mut decided => {
                cancel.0 = None;
                r.map_err(failed)?
            }
            () = gone => {
                drop(cancel);
                decided.await.map_err(failed)?
            }
        }
    }

    /// Holds a call whose client can be asked: answers with an SSE stream at once, asks
    /// through `elicitation/create` on it, then relays the call's answer on the same stream.
    fn hold_streaming(
        self: Arc<Self>,
        held: Held,
        parts: hyper::http::request::Parts,
        bytes: Bytes,
        watch: Watch,
    ) -> Response<Body> {
        let (tx, rx) = mpsc::channel(16);
        let ask = elicitation_request(&held);
        let ask_id = ask["id"].as_str().unwrap_or_default().to_owned();
        let (etx, erx) = std_mpsc::channel();
        lock(&self.elicitations).insert(ask_id.clone(), etx.clone());
        lock(&self.asked).insert(ask_id.clone());
        tokio::spawn(async move {
            let _ = tx.send(Ok(sse_event(ask.to_string().as_bytes()))).await;
            let reader = tx.clone();
            let decided = self
                .decide(
                    held,
                    &watch.session,
                    Some((etx, erx)),
                    async move {
                        reader.closed().await;
                    },
                    held_key(&watch.session, &watch.id),
                )
                .await;
            lock(&self.elicitations).remove(&ask_id);
            let f = match decided {
                Ok(f) => f,
                Err(r) => {
                    let e = error_message(&watch.id, r.code, &r.message);
                    let _ = tx.send(Ok(sse_event(e.to_string().as_bytes()))).await;
                    return;
                }
            };
            lock(&watch.session).on_call_forwarded(watch.key.clone(), f.record);
            // Forwarded as any call is (its outcome recorded there); its answer, JSON or SSE,
            // continues this stream.
            let answer = self.forward(&parts, bytes, watch).await;
            let sse = is_sse(answer.headers());
            let mut body = answer.into_body();
            while let Some(Ok(frame)) = body.frame().await {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                let chunk = if sse { data } else { sse_event(&data) };
                if tx.send(Ok(chunk)).await.is_err() {
                    return;
                }
            }
        });
        let mut r = Response::new(ChannelBody::new(rx).boxed());
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        r
    }

    /// Forwards a JSON-RPC request and relays its answer, watching for the response.
    async fn forward(
        &self,
        parts: &hyper::http::request::Parts,
        bytes: Bytes,
        watch: Watch,
    ) -> Response<Body> {
        let guard = CancelGuard(Some(watch.clone()));
        let r = async {
            let resp = match self
                .client
                .request(self.upstream_request(parts, bytes))
                .await
            {
                Ok(r) => r,
                // Not connected: the call never left. Connected: the request was sent (in part
                // or whole) and the upstream went away before its answer: the call may have run.
                Err(e) if e.is_connect() => {
                    return watch.no_answer(&format!(
                        "the upstream could not be reached: {}",
                        chain(&e)
                    ));
                }
                Err(e) => {
                    return watch.no_answer(&format!(
                        "the upstream closed the connection after the call was sent, before its answer (it may have run): {}",
                        chain(&e)
                    ));
                }
            };
            let (rp, rb) = resp.into_parts();
            let mut head = Response::new(());
            *head.status_mut() = rp.status;
            copy_headers(&rp.headers, head.headers_mut());
            if is_sse(&rp.headers) {
                let (tx, rx) = mpsc::channel(16);
                tokio::spawn(pump_sse(rb, watch, tx));
                return head.map(|()| ChannelBody::new(rx).boxed());
            }
            // A JSON answer (or an HTTP error) is read whole, noted, then relayed as it came.
            let b = match Limited::new(rb, self.max_body).collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) => {
                    return watch.no_answer(&format!("the server's answer could not be read: {e}"));
                }
            };
            let mut b = b;
            if let Ok(Value::Object(m)) = serde_json::from_slice(&b) {
                // A tools/list answer leaves out what the policy denies outright (when it
                // filters; JSON answers only, an SSE one is relayed as it is).
                let filtered = {
                    let s = lock(&watch.session);
                    if m.get("id") == Some(&watch.id) && s.awaits_tools_list(&watch.key) {
                        self.gate.filter_tools_list(&s, &m)
                    } else {
                        None
                    }
                };
                if let Some((line, ev)) = filtered {
                    tokio::task::block_in_place(|| self.gate.record_filtering(&ev));
                    b = Bytes::from(line);
                    head.headers_mut().remove(header::CONTENT_LENGTH);
                }
                // (an SSE answer is filtered event by event, in pump_sse)
                watch.on_message(&m);
            }
            watch.unanswered(&format!(
                "the server answered HTTP {} without a response",
                rp.status
            ));
            head.map(|()| full(b))
        }
        .await;
        guard.disarm();
        r
    }

    /// Records "outcome unknown" for every call still waiting in any session.
    fn abandon(&self, why: &str) {
        let mut all: Vec<Shared<Session>> = lock(&self.sessions).values().cloned().collect();
        all.extend(lock(&self.stateless).values().cloned());
        for s in all {
            let mut s = lock(&s);
            for (_, record) in s.take_pending_calls() {
                let ev = s.unknown_outcome_event(&record, why);
                let tool = &record.event.intent.tool;
                if let Err(e) = self.gate.record(&record.key, &ev) {
                    warn(&format!(
                        "outcome of `{tool}` (unknown: {why}) not recorded: {e}"
                    ));
                }
            }
        }
        self.gate.abandon_held();
    }
}

fn is_sse(h: &HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn sse_events_are_cut_at_blank_lines() {
        let buf = b"event: message\ndata: {\"id\":1}\n\nid: 2\r\ndata: {\"a\":\r\ndata: 2}\r\n\r\npartial";
        let end = event_end(buf).unwrap();
        assert_eq!(&buf[..end], b"event: message\ndata: {\"id\":1}\n\n");
        assert_eq!(sse_message(&buf[..end]).unwrap()["id"], 1);
        let rest = &buf[end..];
        let end2 = event_end(rest).unwrap();
        assert_eq!(sse_message(&rest[..end2]).unwrap()["a"], 2);
        assert_eq!(event_end(&rest[end2..]), None);
        assert_eq!(event_end(b"data: x\r"), None);
        let e = sse_event(b"{\n\"a\": 1\n}");
        assert_eq!(sse_message(&e).unwrap()["a"], 1);
    }

    #[test]
    fn upstreams_without_secrets() {
        let u = parse_upstream("http://127.0.0.1:3001/mcp?key=s").unwrap();
        assert_eq!(public_url(&u), "http://127.0.0.1:3001/mcp");
        assert!(parse_upstream("https://x/mcp").is_ok());
        assert!(parse_upstream("ftp://x/mcp").is_err());
        assert!(parse_upstream("http://user:pw@x/mcp").is_err());
        assert!(parse_upstream("ftp://x/").is_err());
    }
}
