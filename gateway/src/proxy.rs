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
//!   are kept apart by the client each names in its own `_meta`.
//! - Several named upstreams (`--upstream NAME=URL`, repeated): the proxy terminates MCP
//!   itself and routes tools by prefix ([`multi`]).
//! - Client tokens (`--client-token NAME=FILE`): a request without one is refused `401`;
//!   the name is recorded with the client's calls ([`auth`]).

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
        Admission, Forward, Gate, Held, Refusal, ToolCall, code, elicitation_request,
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
    /// The MCP servers: one endpoint (`http://host:port/path`), relayed byte for byte, or
    /// several `NAME=URL`, behind one MCP endpoint of the proxy's own ([`multi`]).
    pub upstreams: Vec<String>,
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
    /// Bearer tokens clients must present, each with the name recorded for its calls; none:
    /// the proxy authenticates nobody.
    pub client_tokens: Vec<ClientToken>,
    /// Pass a client's `Authorization` header on to the upstreams even when it authenticated
    /// the client to the proxy (by default such a header is the proxy's credential, and is
    /// stripped). Without client tokens the header always passes through.
    pub pass_authorization: bool,
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
    /// A non-loopback address with neither client tokens nor `--allow-remote`.
    #[error(
        "--listen {0} is not a loopback address and no --client-token is configured, so the proxy would authenticate nobody: add --client-token NAME=FILE (one per client), or --allow-remote to serve other hosts unauthenticated"
    )]
    Remote(SocketAddr),
    /// The client tokens are not usable.
    #[error("{0}")]
    Tokens(String),
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
    /// The one upstream of a relay (the first one, unused, behind [`Proxy::multi`]).
    upstream: Uri,
    /// Several named upstreams behind the proxy's own MCP endpoint.
    multi: Option<multi::Multi>,
    /// The path clients POST to: the upstream's, or [`multi::ENDPOINT`].
    endpoint: String,
    tokens: auth::Tokens,
    /// Whether a client's `Authorization` header is removed before forwarding (it
    /// authenticated the client to the proxy, and `--pass-authorization` was not given).
    strip_authorization: bool,
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

mod auth;
mod multi;
mod sse;
mod upstream;
mod watch;

pub use auth::ClientToken;
use sse::{is_sse, sse_event};
use upstream::{chain, parse_upstream, public_url, tls_config};
use watch::{CancelGuard, Watch, pump_sse};

/// Runs the proxy until SIGTERM or SIGINT.
pub fn serve(opts: ProxyOptions) -> Result<(), ProxyError> {
    let (upstream, named) = multi::parse_upstreams(&opts.upstreams)?;
    let tokens = auth::Tokens::new(opts.client_tokens).map_err(ProxyError::Tokens)?;
    if !opts.listen.ip().is_loopback() && !opts.allow_remote && !tokens.configured() {
        return Err(ProxyError::Remote(opts.listen));
    }
    if !opts.listen.ip().is_loopback() && !tokens.configured() {
        warn("serving other hosts, and authenticating nobody (no --client-token)");
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
        let endpoint = match &named {
            Some(_) => multi::ENDPOINT.to_owned(),
            None => upstream.path().to_owned(),
        };
        let shown = match &named {
            Some(n) => n
                .iter()
                .map(|u| u.public.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            None => public_url(&upstream),
        };
        let proxy = Arc::new(Proxy {
            gate: opts.gate,
            multi: named.map(multi::Multi::new),
            endpoint,
            strip_authorization: tokens.configured() && !opts.pass_authorization,
            tokens,
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
            "afr mcp proxy: listening on http://{addr}{} -> {shown}",
            proxy.endpoint
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

/// The name of the client token a request carried (`None`: no tokens are configured),
/// kept in the request's extensions once [`auth::Tokens::identify`] let it in.
#[derive(Clone)]
struct Principal(Option<String>);

fn principal_of(parts: &hyper::http::request::Parts) -> Option<String> {
    parts
        .extensions
        .get::<Principal>()
        .and_then(|p| p.0.clone())
}

/// The answer to a request without a configured client token (nothing was forwarded).
fn unauthorized() -> Response<Body> {
    let mut r = plain(
        StatusCode::UNAUTHORIZED,
        "a client token is required (Authorization: Bearer ...)",
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"afr mcp proxy\""),
    );
    r
}

/// Whether the client takes an SSE answer (a held call can then ask it to approve).
fn accepts_sse(h: &HeaderMap) -> bool {
    h.get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("text/event-stream"))
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
        parts: &hyper::http::request::Parts,
        method: &str,
        params: &Value,
    ) -> (Shared<Session>, Option<String>) {
        let headers = &parts.headers;
        let principal = principal_of(parts);
        let new = || {
            let mut s = Session::new("http", public_url(&self.upstream));
            s.principal.clone_from(&principal);
            Arc::new(Mutex::new(s))
        };
        match headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            Some(sid) => {
                let mut all = lock(&self.sessions);
                let s = all.entry(sid.to_owned()).or_insert_with(new).clone();
                (s, Some(sid.to_owned()))
            }
            // A new stateful session: it gets its id in the answer.
            None if method == "initialize" => (new(), None),
            None => {
                let key = stateless_key(headers, params);
                let s = lock(&self.stateless).entry(key).or_insert_with(new).clone();
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
        if req.uri().path() != self.endpoint {
            return plain(
                StatusCode::NOT_FOUND,
                &format!("the MCP endpoint is {}", self.endpoint),
            );
        }
        // Before anything is read or forwarded: who the client is, when tokens say.
        let principal = match self.tokens.identify(req.headers()) {
            auth::Identity::Anonymous => None,
            auth::Identity::Named(n) => Some(n),
            auth::Identity::Refused => return unauthorized(),
        };
        let (mut parts, body) = req.into_parts();
        parts.extensions.insert(Principal(principal.clone()));
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
        if let Some(m) = &self.multi {
            return m.handle(&self, parts, bytes).await;
        }
        if let Some(sid) = parts.headers.get("mcp-session-id")
            && let Some(s) = lock(&self.sessions).get(sid.to_str().unwrap_or_default())
            && lock(s).principal != principal
        {
            return plain(
                StatusCode::FORBIDDEN,
                "this session was opened by another client",
            );
        }
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
        if self.strip_authorization {
            req.headers_mut().remove(header::AUTHORIZATION);
        }
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
            let stateful = parts.headers.contains_key("mcp-session-id");
            let params = msg.get("params").cloned().unwrap_or(Value::Null);
            if let Some(r) = self.consume(&msg, stateful, || self.session(&parts, "", &params).0) {
                return r;
            }
            return self.pass(&parts, bytes).await;
        };
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let (session, sid) = self.session(&parts, &method, &params);
        let key = format!("x{}", self.exchanges.fetch_add(1, Ordering::Relaxed));
        let watch = Watch {
            proxy: self.clone(),
            session: session.clone(),
            key: key.clone(),
            id: id.clone(),
        };
        if method != "tools/call" {
            lock(&session).on_request(key, &method, &params);
            let r = self
                .forward(self.upstream_request(&parts, bytes), watch)
                .await;
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
        let sse = accepts_sse(&parts.headers);
        let req = self.upstream_request(&parts, bytes);
        self.call(session, call, sse, req, watch).await
    }

    /// Takes what the client sent the gateway itself: a `notifications/cancelled` for a held
    /// call (which then never runs: the server never saw it), or the answer to the gateway's
    /// own elicitation (which goes no further, even when it comes too late). `session` finds
    /// the client's session (any of them, in [`multi`]: they share the lane).
    fn consume(
        &self,
        msg: &Map<String, Value>,
        stateful: bool,
        session: impl Fn() -> Shared<Session>,
    ) -> Option<Response<Body>> {
        if msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
            && let Some(rid) = msg.get("params").and_then(|p| p.get("requestId"))
        {
            let params = msg.get("params").cloned().unwrap_or(Value::Null);
            let key = held_key(&session(), rid);
            let mut held = lock(&self.held_calls);
            // A stateless client's notification may not name its client: then the one
            // held call with that id, if there is exactly one.
            let key = if held.contains_key(&key) {
                Some(key)
            } else if stateful {
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
                return Some(plain(StatusCode::ACCEPTED, ""));
            }
        }
        if let Some(id) = msg.get("id").and_then(Value::as_str)
            && lock(&self.asked).contains(id)
        {
            if let Some(tx) = lock(&self.elicitations).remove(id) {
                let client = lock(&session()).client_name().map(str::to_owned);
                let _ = tx.send(elicitation_ruling(msg, client.as_deref()));
            }
            return Some(plain(StatusCode::ACCEPTED, ""));
        }
        None
    }

    /// A `tools/call` through the gate: admitted (recorded, then `req` forwarded), refused,
    /// or held for a decision. `watch` watches for its answer in `session`.
    async fn call(
        self: Arc<Self>,
        session: Shared<Session>,
        call: ToolCall,
        accepts_sse: bool,
        req: Request<Full<Bytes>>,
        watch: Watch,
    ) -> Response<Body> {
        let (id, key) = (watch.id.clone(), watch.key.clone());
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
                self.forward(req, watch).await
            }
            (Admission::Refuse(r), _) => refusal(&id, &r),
            (Admission::Hold(held), elicits) => {
                if elicits && accepts_sse && held.elicitable() {
                    return self.hold_streaming(*held, req, watch);
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
                        self.forward(req, watch).await
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
        req: Request<Full<Bytes>>,
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
            let answer = self.forward(req, watch).await;
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
    async fn forward(&self, req: Request<Full<Bytes>>, watch: Watch) -> Response<Body> {
        let guard = CancelGuard(Some(watch.clone()));
        let r = async {
            let resp = match self.client.request(req).await {
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
        if let Some(m) = &self.multi {
            all.extend(m.all_sessions());
        }
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
