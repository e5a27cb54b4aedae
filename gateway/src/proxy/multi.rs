//! Several named upstreams behind one MCP endpoint (`--upstream NAME=URL`, repeated).
//!
//! ```text
//!                                      ┌─ own session ─► alpha  (tools: echo, …)
//!  client ── /mcp ──► proxy: initialize│
//!                     tools/list merged└─ own session ─► beta   (tools: echo, …)
//!                     alpha_echo ──► the gate ──► alpha: echo (id kept)
//! ```
//!
//! A byte relay cannot serve two servers on one session, so here the proxy terminates MCP
//! itself, as agentgateway does with several targets:
//!
//! - **`initialize`** is answered by the proxy (its own `Mcp-Session-Id`, `serverInfo`
//!   `afr-gateway`, capabilities `tools`), which opens a session of its own with each upstream
//!   (`initialize` with the client's `protocolVersion` and `clientInfo`, then
//!   `notifications/initialized`). Server-to-client requests are not routed between several
//!   upstreams, so the proxy declares no client capabilities to them.
//! - **`tools/list`** asks every upstream and merges the answers, each tool named
//!   `NAME_tool` ([`SEPARATOR`]; upstream names hold no `_`, so the first `_` splits). An
//!   upstream that cannot be reached is left out, with a warning, and tried again next time.
//! - **`tools/call`** of `NAME_tool` goes through the gate as `NAME_tool` (what the client
//!   called; what rules and the event see), is forwarded to `NAME` as `tool` with the client's
//!   JSON-RPC id, and its answer relayed as the upstream sent it.
//! - A **2026-07-28** (stateless) client's requests are forwarded one by one, with its own
//!   `_meta`, to every upstream; `server/discover` is answered by the proxy when every upstream
//!   answers it, and refused as a 2025-only server refuses it otherwise (the client then falls
//!   back to `initialize`). The proxy does not translate between generations.
//!
//! Each upstream has its own [`Session`] per client (its server's name, annotations and
//! URL), all on the client's one lane. Resources, prompts and completions are not routed.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{
    HeaderMap, Method, Request, Response, StatusCode, Uri,
    header::{self, HeaderValue},
};
use serde_json::{Map, Value, json};

use super::{
    Body, Proxy, ProxyError, Shared, Watch, accepts_sse, copy_headers, full, lock, parse_upstream,
    plain, principal_of, public_url, refusal, rpc_error,
    sse::{event_end, is_sse, sse_message},
    stateless_key, warn,
};
use crate::{
    gate::{Refusal, ToolCall, code, parse_client_message},
    session::{Session, id_key},
};

/// The endpoint clients use when the proxy serves several upstreams.
pub(super) const ENDPOINT: &str = "/mcp";
/// Between an upstream's name and its tool's: `alpha_echo`. The characters MCP allows in a
/// tool name are letters, digits, `_`, `-` and `.`, and many model APIs take only the first
/// four; `_` is the one every host accepts, and agentgateway's choice.
pub(super) const SEPARATOR: char = '_';
/// How long the proxy waits for an upstream's answer to a request of its own.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Most pages of `tools/list` read from one upstream.
const MAX_PAGES: usize = 32;
/// Forwarded calls remembered per client, for routing their cancellation.
const MAX_INFLIGHT: usize = 1024;

/// One upstream: its name, endpoint, and how events name it (`NAME=URL`, no secrets).
pub(super) struct Named {
    pub(super) name: String,
    uri: Uri,
    pub(super) public: String,
}

/// The upstream of a relay, and the named upstreams when there are several.
pub(super) fn parse_upstreams(args: &[String]) -> Result<(Uri, Option<Vec<Named>>), ProxyError> {
    let bad = |url: &str, why: &str| ProxyError::Upstream {
        url: afr_core::redact_urls_in(url),
        why: why.to_owned(),
    };
    let split = |a: &str| -> Option<(String, String)> {
        let (name, url) = a.split_once('=')?;
        let plain_word = !name.is_empty()
            && name.len() <= 32
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        // `http://h/mcp?k=v` is a URL, not a name: a name is a plain word.
        plain_word.then(|| (name.to_owned(), url.to_owned()))
    };
    match args {
        [] => Err(bad("", "no upstream given")),
        [one] => {
            let url = split(one).map_or(one.clone(), |(_, u)| u);
            Ok((parse_upstream(&url)?, None))
        }
        many => {
            let mut named: Vec<Named> = Vec::new();
            for a in many {
                let Some((name, url)) = split(a) else {
                    return Err(bad(
                        a,
                        "with several upstreams, name each: --upstream NAME=URL (NAME: letters, digits and `-`, up to 32)",
                    ));
                };
                if named.iter().any(|n| n.name == name) {
                    return Err(bad(a, "two upstreams have this name"));
                }
                let uri = parse_upstream(&url)?;
                let public = format!("{name}={}", public_url(&uri));
                named.push(Named { name, uri, public });
            }
            let first = named[0].uri.clone();
            Ok((first, Some(named)))
        }
    }
}

/// The proxy's own session with one upstream, for one client.
#[derive(Debug, Default, Clone)]
struct Remote {
    open: bool,
    /// The upstream's `Mcp-Session-Id`, if it gave one.
    sid: Option<String>,
    /// The protocol version the upstream answered `initialize` with.
    version: Option<String>,
}

struct Link {
    session: Shared<Session>,
    remote: tokio::sync::Mutex<Remote>,
}

/// One client of the proxy: a session it opened with `initialize`, or a stateless client.
struct Client {
    principal: Option<String>,
    /// The client's `initialize` params; `None` for a stateless (2026-07-28) client.
    init: Option<Value>,
    /// One per upstream, in the order of [`Multi::upstreams`].
    links: Vec<Link>,
    /// Forwarded calls by request id: which upstream has each.
    inflight: Mutex<HashMap<String, usize>>,
}

/// The named upstreams and the proxy's clients.
pub(super) struct Multi {
    upstreams: Vec<Named>,
    sessions: Mutex<HashMap<String, Arc<Client>>>,
    stateless: Mutex<HashMap<String, Arc<Client>>>,
    ids: AtomicU64,
}

impl Multi {
    pub(super) fn new(upstreams: Vec<Named>) -> Multi {
        Multi {
            upstreams,
            sessions: Mutex::new(HashMap::new()),
            stateless: Mutex::new(HashMap::new()),
            ids: AtomicU64::new(0),
        }
    }

    /// Every upstream session of every client (their calls in flight are abandoned at exit).
    pub(super) fn all_sessions(&self) -> Vec<Shared<Session>> {
        let mut clients: Vec<Arc<Client>> = lock(&self.sessions).values().cloned().collect();
        clients.extend(lock(&self.stateless).values().cloned());
        clients
            .iter()
            .flat_map(|c| c.links.iter().map(|l| l.session.clone()))
            .collect()
    }

    fn next(&self, what: &str) -> String {
        format!("afr-{what}-{}", self.ids.fetch_add(1, Ordering::Relaxed))
    }

    fn client(&self, principal: Option<String>, init: Option<Value>) -> Arc<Client> {
        let lane = format!("mcp-{:016x}", rand::random::<u64>());
        let links = self
            .upstreams
            .iter()
            .map(|u| {
                let mut s = Session::new("http", u.public.clone());
                s.lane.clone_from(&lane);
                s.principal.clone_from(&principal);
                Link {
                    session: Arc::new(Mutex::new(s)),
                    remote: tokio::sync::Mutex::new(Remote::default()),
                }
            })
            .collect();
        Arc::new(Client {
            principal,
            init,
            links,
            inflight: Mutex::new(HashMap::new()),
        })
    }

    /// The tool `NAME_tool` names: its upstream's index and the upstream's own name for it.
    fn route<'t>(&self, tool: &'t str) -> Option<(usize, &'t str)> {
        let (name, bare) = tool.split_once(SEPARATOR)?;
        let i = self.upstreams.iter().position(|u| u.name == name)?;
        (!bare.is_empty()).then_some((i, bare))
    }

    /// A request to upstream `i`: the client's headers (hop-by-hop ones, its session id and,
    /// when it authenticated the client to the proxy, its `Authorization` removed), with the
    /// proxy's own session with that upstream.
    fn request(
        &self,
        proxy: &Proxy,
        i: usize,
        headers: &HeaderMap,
        remote: &Remote,
        method: Method,
        body: Bytes,
    ) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.uri_mut() = self.upstreams[i].uri.clone();
        let h = req.headers_mut();
        copy_headers(headers, h);
        h.remove("mcp-session-id");
        if proxy.strip_authorization {
            h.remove(header::AUTHORIZATION);
        }
        let set = |h: &mut HeaderMap, k: &'static str, v: &str| {
            if let Ok(v) = HeaderValue::from_str(v) {
                h.insert(k, v);
            }
        };
        if let Some(sid) = &remote.sid {
            set(h, "mcp-session-id", sid);
        }
        if let Some(v) = &remote.version {
            set(h, "mcp-protocol-version", v);
        }
        set(h, "content-type", "application/json");
        if !h.contains_key(header::ACCEPT) {
            set(h, "accept", "application/json, text/event-stream");
        }
        req
    }

    pub(super) async fn handle(
        &self,
        proxy: &Arc<Proxy>,
        parts: hyper::http::request::Parts,
        bytes: Bytes,
    ) -> Response<Body> {
        let principal = principal_of(&parts);
        let sid = parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let known = sid.as_ref().map(|s| lock(&self.sessions).get(s).cloned());
        if let Some(Some(c)) = &known
            && c.principal != principal
        {
            return plain(
                StatusCode::FORBIDDEN,
                "this session was opened by another client",
            );
        }
        if let Some(None) = known {
            // The session ended, or the proxy restarted: the client must initialize again.
            return plain(StatusCode::NOT_FOUND, "no such session; initialize again");
        }
        match parts.method {
            Method::POST => {}
            Method::DELETE => {
                let Some(sid) = sid else {
                    return plain(StatusCode::BAD_REQUEST, "DELETE needs an Mcp-Session-Id");
                };
                let closed = lock(&self.sessions).remove(&sid);
                if let Some(c) = closed {
                    self.close(proxy, &c, &parts.headers).await;
                }
                return plain(StatusCode::OK, "");
            }
            _ => {
                // No server-to-client stream: calls are answered on their own POSTs.
                let mut r = plain(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "no GET stream in front of several upstreams",
                );
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
                return r;
            }
        }
        let msg = match parse_client_message(&bytes) {
            Ok(m) => m,
            Err((id, r)) => return rpc_error(StatusCode::BAD_REQUEST, &id, r.code, &r.message),
        };
        let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let client = match (&known, method.as_deref()) {
            (Some(Some(c)), _) => c.clone(),
            (_, Some("initialize")) => self.client(principal, Some(params.clone())),
            _ => lock(&self.stateless)
                .entry(stateless_key(&parts.headers, &params))
                .or_insert_with(|| self.client(principal, None))
                .clone(),
        };
        let Some(id) = msg.get("id").cloned().filter(|_| method.is_some()) else {
            return self.note(proxy, &client, &parts, &msg, bytes).await;
        };
        let method = method.unwrap_or_default();
        match method.as_str() {
            "initialize" => self.initialize(proxy, client, &parts, &id, &params).await,
            "server/discover" => self.discover(proxy, &client, &parts, &id, bytes).await,
            "ping" => json_answer(json!({"jsonrpc": "2.0", "id": id, "result": {}})),
            "tools/list" => self.tools_list(proxy, &client, &parts, &id, &params).await,
            "tools/call" => self.tools_call(proxy, client, parts, msg, id).await,
            other => rpc_error(
                StatusCode::OK,
                &id,
                -32601,
                &format!(
                    "afr gateway: method not found: {other} (in front of several upstreams, the gateway routes tools only)"
                ),
            ),
        }
    }

    /// A notification, or an answer to a server's request.
    async fn note(
        &self,
        proxy: &Arc<Proxy>,
        client: &Arc<Client>,
        parts: &hyper::http::request::Parts,
        msg: &Map<String, Value>,
        bytes: Bytes,
    ) -> Response<Body> {
        let stateful = client.init.is_some();
        if let Some(r) = proxy.consume(msg, stateful, || client.links[0].session.clone()) {
            return r;
        }
        // A forwarded call the client gave up: its upstream is told.
        let rid = msg
            .get("params")
            .and_then(|p| p.get("requestId"))
            .filter(|_| {
                msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
            });
        let upstream = rid.and_then(|rid| lock(&client.inflight).get(&id_key(rid)).copied());
        if let Some(i) = upstream {
            let remote = client.links[i].remote.lock().await.clone();
            let req = self.request(proxy, i, &parts.headers, &remote, Method::POST, bytes);
            if let Err(e) = proxy.client.request(req).await {
                warn(&format!(
                    "a cancellation could not reach upstream `{}`: {e}",
                    self.upstreams[i].name
                ));
            }
        }
        // notifications/initialized was sent to each upstream by the proxy; answers to server
        // requests have nowhere to go (none are routed).
        plain(StatusCode::ACCEPTED, "")
    }

    /// Sends `req` and reads the upstream's answer to the request `id` (a JSON body, or the
    /// event of an SSE stream that carries it).
    async fn exchange(
        proxy: &Proxy,
        req: Request<Full<Bytes>>,
        id: &Value,
    ) -> Result<(HeaderMap, Map<String, Value>), String> {
        let read = async {
            let resp = proxy
                .client
                .request(req)
                .await
                .map_err(|e| super::chain(&e))?;
            let (rp, mut body) = resp.into_parts();
            if is_sse(&rp.headers) {
                let mut buf: Vec<u8> = Vec::new();
                while let Some(frame) = body.frame().await {
                    let frame = frame.map_err(|e| e.to_string())?;
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    buf.extend_from_slice(&data);
                    if buf.len() > proxy.max_body {
                        return Err(format!("an answer over {} bytes", proxy.max_body));
                    }
                    while let Some(end) = event_end(&buf) {
                        let event: Vec<u8> = buf.drain(..end).collect();
                        if let Some(m) = sse_message(&event)
                            && !m.contains_key("method")
                            && m.get("id") == Some(id)
                        {
                            return Ok((rp.headers, m));
                        }
                    }
                }
                return Err(format!(
                    "HTTP {}: the stream ended without an answer",
                    rp.status
                ));
            }
            let b = Limited::new(body, proxy.max_body)
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            match serde_json::from_slice(&b) {
                Ok(Value::Object(m)) if m.contains_key("result") || m.contains_key("error") => {
                    Ok((rp.headers, m))
                }
                _ => Err(format!("HTTP {} without a JSON-RPC answer", rp.status)),
            }
        };
        tokio::time::timeout(EXCHANGE_TIMEOUT, read)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {EXCHANGE_TIMEOUT:?}")))
    }

    /// Opens the proxy's own session with upstream `i` for a client that initialized, if it
    /// is not open yet: `initialize` (the client's protocol version and `clientInfo`), then
    /// `notifications/initialized`.
    async fn open(
        &self,
        proxy: &Proxy,
        client: &Client,
        i: usize,
        headers: &HeaderMap,
    ) -> Result<Remote, String> {
        let Some(init) = &client.init else {
            return Ok(Remote::default());
        };
        let link = &client.links[i];
        let mut remote = link.remote.lock().await;
        if remote.open {
            return Ok(remote.clone());
        }
        let id = Value::String(self.next("initialize"));
        let mut params = json!({
            "protocolVersion": init.get("protocolVersion").cloned().unwrap_or(json!("2025-11-25")),
            "capabilities": {},
        });
        if let Some(ci) = init.get("clientInfo") {
            params["clientInfo"] = ci.clone();
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params});
        let req = self.request(
            proxy,
            i,
            headers,
            &Remote::default(),
            Method::POST,
            Bytes::from(body.to_string()),
        );
        let (h, answer) = Self::exchange(proxy, req, &id).await?;
        let Some(result) = answer.get("result") else {
            return Err(format!("initialize was refused: {}", rpc_text(&answer)));
        };
        {
            let mut s = lock(&link.session);
            let key = id_key(&id);
            s.on_request(key.clone(), "initialize", init);
            s.on_response(&key, &answer);
        }
        let opened = Remote {
            open: true,
            sid: h
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            version: result
                .get("protocolVersion")
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let req = self.request(
            proxy,
            i,
            headers,
            &opened,
            Method::POST,
            Bytes::from(note.to_string()),
        );
        match proxy.client.request(req).await {
            Ok(r) if r.status().is_success() => {}
            Ok(r) => return Err(format!("notifications/initialized: HTTP {}", r.status())),
            Err(e) => return Err(format!("notifications/initialized: {}", super::chain(&e))),
        }
        *remote = opened;
        Ok(remote.clone())
    }

    /// Ends the proxy's sessions with the upstreams (the client's DELETE).
    async fn close(&self, proxy: &Proxy, client: &Client, headers: &HeaderMap) {
        for (i, link) in client.links.iter().enumerate() {
            let remote = link.remote.lock().await.clone();
            if remote.sid.is_some() {
                let req = self.request(proxy, i, headers, &remote, Method::DELETE, Bytes::new());
                let _ = proxy.client.request(req).await;
            }
        }
    }

    async fn initialize(
        &self,
        proxy: &Arc<Proxy>,
        client: Arc<Client>,
        parts: &hyper::http::request::Parts,
        id: &Value,
        params: &Value,
    ) -> Response<Body> {
        for (i, u) in self.upstreams.iter().enumerate() {
            match self.open(proxy, &client, i, &parts.headers).await {
                Ok(_) => {}
                Err(e) => warn(&format!(
                    "upstream `{}` ({}) could not be opened: {e}; its tools are left out until it can",
                    u.name, u.public
                )),
            }
        }
        let sid = format!("{:032x}", rand::random::<u128>());
        lock(&self.sessions).insert(sid.clone(), client);
        let version = params
            .get("protocolVersion")
            .cloned()
            .unwrap_or(json!("2025-11-25"));
        let names: Vec<&str> = self.upstreams.iter().map(|u| u.name.as_str()).collect();
        let mut r = json_answer(json!({
            "jsonrpc": "2.0",
            "id": id,
            "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": server_info(),
                "instructions": format!(
                    "Tools of several MCP servers, each named SERVER{SEPARATOR}tool; servers: {}.",
                    names.join(", ")
                ),
            }
        }));
        if let Ok(v) = HeaderValue::from_str(&sid) {
            r.headers_mut().insert("mcp-session-id", v);
        }
        r
    }

    /// A stateless client's `server/discover`: answered by the proxy when every upstream that
    /// can be reached answers it, else refused as a 2025-only server refuses it.
    async fn discover(
        &self,
        proxy: &Arc<Proxy>,
        client: &Client,
        parts: &hyper::http::request::Parts,
        id: &Value,
        bytes: Bytes,
    ) -> Response<Body> {
        let mut template: Option<Map<String, Value>> = None;
        for (i, u) in self.upstreams.iter().enumerate() {
            let req = self.request(
                proxy,
                i,
                &parts.headers,
                &Remote::default(),
                Method::POST,
                bytes.clone(),
            );
            match Self::exchange(proxy, req, id).await {
                Ok((_, answer)) => {
                    let Some(Value::Object(result)) = answer.get("result") else {
                        // This upstream speaks 2025-11-25 only: so must the client.
                        return rpc_error(
                            StatusCode::BAD_REQUEST,
                            &Value::Null,
                            -32000,
                            &format!(
                                "Bad Request: Server not initialized (upstream `{}` does not speak 2026-07-28: initialize)",
                                u.name
                            ),
                        );
                    };
                    lock(&client.links[i].session).on_response("", &answer);
                    template.get_or_insert_with(|| result.clone());
                }
                Err(e) => warn(&format!(
                    "upstream `{}` ({}) did not answer server/discover: {e}",
                    u.name, u.public
                )),
            }
        }
        let mut result = template.unwrap_or_else(|| {
            let mut m = Map::new();
            m.insert("resultType".into(), json!("complete"));
            m.insert("supportedVersions".into(), json!(["2026-07-28"]));
            m.insert("ttlMs".into(), json!(0));
            m
        });
        result.insert(
            "capabilities".into(),
            json!({"tools": {"listChanged": false}}),
        );
        result.insert("cacheScope".into(), json!("private"));
        result.insert(
            "_meta".into(),
            json!({"io.modelcontextprotocol/serverInfo": server_info()}),
        );
        json_answer(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    /// One upstream's tools (every page), and its first answer's result.
    async fn list_one(
        &self,
        proxy: &Proxy,
        client: &Client,
        i: usize,
        headers: &HeaderMap,
        id: &Value,
        params: &Value,
    ) -> Result<(Vec<Value>, Map<String, Value>), String> {
        let remote = self.open(proxy, client, i, headers).await?;
        let mut tools = Vec::new();
        let mut first: Option<Map<String, Value>> = None;
        let mut params = match params {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        params.remove("cursor");
        for _ in 0..MAX_PAGES {
            let body =
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
            let req = self.request(
                proxy,
                i,
                headers,
                &remote,
                Method::POST,
                Bytes::from(body.to_string()),
            );
            let (_, answer) = Self::exchange(proxy, req, id).await?;
            let Some(Value::Object(result)) = answer.get("result") else {
                return Err(format!("tools/list was refused: {}", rpc_text(&answer)));
            };
            if let Some(Value::Array(page)) = result.get("tools") {
                tools.extend(page.iter().cloned());
            }
            let cursor = result.get("nextCursor").cloned();
            first.get_or_insert_with(|| result.clone());
            match cursor {
                Some(c @ Value::String(_)) => {
                    params.insert("cursor".into(), c);
                }
                _ => break,
            }
        }
        Ok((tools, first.unwrap_or_default()))
    }

    /// Every upstream's tools, named `NAME_tool`, less those the policy hides (per upstream,
    /// recorded as in a relay).
    async fn tools_list(
        &self,
        proxy: &Arc<Proxy>,
        client: &Arc<Client>,
        parts: &hyper::http::request::Parts,
        id: &Value,
        params: &Value,
    ) -> Response<Body> {
        let mut merged = Vec::new();
        let mut template: Option<Map<String, Value>> = None;
        for (i, u) in self.upstreams.iter().enumerate() {
            let (tools, first) = match self
                .list_one(proxy, client, i, &parts.headers, id, params)
                .await
            {
                Ok(t) => t,
                Err(e) => {
                    warn(&format!(
                        "upstream `{}` ({}): its tools are left out of tools/list: {e}",
                        u.name, u.public
                    ));
                    continue;
                }
            };
            let prefixed: Vec<Value> = tools
                .into_iter()
                .filter_map(|mut t| {
                    let name = t.get("name")?.as_str()?.to_owned();
                    t["name"] = json!(format!("{}{SEPARATOR}{name}", u.name));
                    Some(t)
                })
                .collect();
            let mut result = Map::new();
            result.insert("tools".into(), Value::Array(prefixed));
            if let Some(m) = first.get("_meta") {
                result.insert("_meta".into(), m.clone());
            }
            let mut answer = Map::new();
            answer.insert("jsonrpc".into(), json!("2.0"));
            answer.insert("id".into(), id.clone());
            answer.insert("result".into(), Value::Object(result));
            let session = &client.links[i].session;
            let filtered = {
                let mut s = lock(session);
                // Notes the server's annotations (`destructiveHint`) under the names called.
                let key = self.next("tools-list");
                s.on_request(key.clone(), "tools/list", params);
                s.on_response(&key, &answer);
                proxy.gate.filter_tools_list(&s, &answer)
            };
            let kept = match filtered {
                Some((line, ev)) => {
                    tokio::task::block_in_place(|| proxy.gate.record_filtering(&ev));
                    serde_json::from_slice::<Value>(&line)
                        .ok()
                        .and_then(|v| v.pointer("/result/tools").cloned())
                        .unwrap_or_default()
                }
                None => answer
                    .get("result")
                    .and_then(|r| r.get("tools"))
                    .cloned()
                    .unwrap_or_default(),
            };
            if let Value::Array(k) = kept {
                merged.extend(k);
            }
            template.get_or_insert(first);
        }
        let mut result = Map::new();
        if client.init.is_none() {
            // 2026-07-28: the result fields of the first upstream's answer, as the proxy's.
            result = template.unwrap_or_default();
            result.remove("nextCursor");
            result.insert("resultType".into(), json!("complete"));
            result.insert("cacheScope".into(), json!("private"));
            result.insert(
                "_meta".into(),
                json!({"io.modelcontextprotocol/serverInfo": server_info()}),
            );
        }
        result.insert("tools".into(), Value::Array(merged));
        json_answer(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    /// A call of `NAME_tool`: through the gate as it was called, then to `NAME` as `tool`.
    async fn tools_call(
        &self,
        proxy: &Arc<Proxy>,
        client: Arc<Client>,
        parts: hyper::http::request::Parts,
        mut msg: Map<String, Value>,
        id: Value,
    ) -> Response<Body> {
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let call = match ToolCall::from_params(params) {
            Ok(c) => c,
            Err(r) => return refusal(&id, &r),
        };
        let Some((i, bare)) = self.route(&call.tool) else {
            let names: Vec<&str> = self.upstreams.iter().map(|u| u.name.as_str()).collect();
            return refusal(
                &id,
                &Refusal {
                    code: -32602,
                    message: format!(
                        "afr gateway: unknown tool `{}`: tools are named UPSTREAM{SEPARATOR}tool, and the upstreams are {}; not forwarded",
                        call.tool,
                        names.join(", ")
                    ),
                },
            );
        };
        let bare = bare.to_owned();
        let remote = match self.open(proxy, &client, i, &parts.headers).await {
            Ok(r) => r,
            Err(e) => {
                return refusal(
                    &id,
                    &Refusal {
                        code: code::NO_ANSWER,
                        message: format!(
                            "afr gateway: upstream `{}` cannot be reached ({e}); `{}` was not forwarded",
                            self.upstreams[i].name, call.tool
                        ),
                    },
                );
            }
        };
        // The one field rewritten: the tool's name as its server knows it.
        if let Some(Value::Object(p)) = msg.get_mut("params") {
            p.insert("name".into(), json!(bare));
        }
        let body = Bytes::from(Value::Object(msg).to_string());
        let mut req = self.request(proxy, i, &parts.headers, &remote, Method::POST, body);
        if req.headers().contains_key("mcp-name")
            && let Ok(v) = HeaderValue::from_str(&bare)
        {
            req.headers_mut().insert("mcp-name", v);
        }
        {
            let mut f = lock(&client.inflight);
            if f.len() >= MAX_INFLIGHT {
                f.clear();
            }
            f.insert(id_key(&id), i);
        }
        let session = client.links[i].session.clone();
        let watch = Watch {
            proxy: proxy.clone(),
            session: session.clone(),
            key: format!("x{}", proxy.exchanges.fetch_add(1, Ordering::Relaxed)),
            id,
        };
        let mut r = proxy
            .clone()
            .call(session, call, accepts_sse(&parts.headers), req, watch)
            .await;
        // The upstream's session is the proxy's, not the client's.
        r.headers_mut().remove("mcp-session-id");
        r
    }
}

/// The proxy as the server its clients see.
fn server_info() -> Value {
    json!({"name": "afr-gateway", "version": env!("CARGO_PKG_VERSION")})
}

/// A JSON-RPC error answer's code and message, for a warning.
fn rpc_text(answer: &Map<String, Value>) -> String {
    let e = answer.get("error").cloned().unwrap_or(Value::Null);
    format!(
        "{} {}",
        e.get("code").cloned().unwrap_or(Value::Null),
        e.get("message").and_then(Value::as_str).unwrap_or("")
    )
}

fn json_answer(v: Value) -> Response<Body> {
    let mut r = Response::new(full(v.to_string()));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn upstreams_are_one_url_or_several_names() {
        let (u, named) = parse_upstreams(&args(&["http://h:1/mcp?k=v"])).unwrap();
        assert_eq!(u.path(), "/mcp");
        assert!(named.is_none());
        let (_, named) =
            parse_upstreams(&args(&["a=http://h:1/mcp", "b-2=http://h:2/x?k=v"])).unwrap();
        let named = named.unwrap();
        assert_eq!(named[1].name, "b-2");
        assert_eq!(named[1].public, "b-2=http://h:2/x");
        // Unnamed, twice named, a name with the separator in it.
        assert!(parse_upstreams(&args(&["a=http://h:1/mcp", "http://h:2/mcp"])).is_err());
        assert!(parse_upstreams(&args(&["a=http://h:1/mcp", "a=http://h:2/mcp"])).is_err());
        assert!(parse_upstreams(&args(&["a_b=http://h:1/mcp", "c=http://h:2/mcp"])).is_err());
        assert!(parse_upstreams(&[]).is_err());
    }

    #[test]
    fn calls_route_on_the_first_separator() {
        let (_, named) =
            parse_upstreams(&args(&["alpha=http://h:1/mcp", "beta=http://h:2/mcp"])).unwrap();
        let m = Multi::new(named.unwrap());
        assert_eq!(m.route("alpha_echo"), Some((0, "echo")));
        assert_eq!(m.route("beta_delete_record"), Some((1, "delete_record")));
        assert_eq!(m.route("gamma_echo"), None);
        assert_eq!(m.route("echo"), None);
        assert_eq!(m.route("alpha_"), None);
    }
}
