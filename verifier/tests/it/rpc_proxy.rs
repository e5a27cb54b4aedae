//! A JSON-RPC HTTP proxy for tests: it stands in front of a real node (anvil) and lets a test
//! rewrite what the node answers, call by call, to play a hostile provider.
//!
//! Std only, plus `ureq` for the upstream leg and `serde_json`. HTTP/1.1 with `Content-Length`
//! (or chunked) request bodies, keep-alive unless the client says `Connection: close`, a
//! thread per connection, and JSON-RPC batches: an array body is forwarded as it is, then the
//! rewrite runs on each answer, matched to its request by id. The proxy stops when dropped.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{Shutdown, TcpListener, TcpStream},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use serde_json::Value;

/// Rewrites one answer: the request object (`method`, `params`, `id`) and the upstream's whole
/// response object for it (`result` or `error`); returns the response the client gets.
pub(crate) type Rewrite = dyn Fn(&Value, Value) -> Value + Send + Sync + 'static;

/// Bodies larger than this are refused (413); a test node never needs more.
const MAX_BODY: usize = 64 << 20;

/// A running proxy on 127.0.0.1, stopped when dropped.
pub(crate) struct Proxy {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    methods: Arc<Mutex<Vec<String>>>,
    accept: Option<JoinHandle<()>>,
}

struct Shared {
    upstream: String,
    agent: ureq::Agent,
    rewrite: Box<Rewrite>,
    stop: Arc<AtomicBool>,
    methods: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    /// A proxy for `upstream` (an `http://` JSON-RPC URL) listening on a free port.
    pub(crate) fn start(
        upstream: &str,
        rewrite: impl Fn(&Value, Value) -> Value + Send + Sync + 'static,
    ) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let methods = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Shared {
            upstream: upstream.to_owned(),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(30)))
                .build()
                .into(),
            rewrite: Box::new(rewrite),
            stop: stop.clone(),
            methods: methods.clone(),
        });
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if shared.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let shared = shared.clone();
                std::thread::spawn(move || serve(conn, &shared));
            }
        });
        Proxy {
            addr,
            stop,
            methods,
            accept: Some(accept),
        }
    }

    /// A proxy that changes nothing: an honest second endpoint in front of the same node.
    pub(crate) fn honest(upstream: &str) -> Proxy {
        Proxy::start(upstream, |_, resp| resp)
    }

    /// Its URL.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The JSON-RPC methods it was asked so far, in order (batch items one by one).
    pub(crate) fn methods(&self) -> Vec<String> {
        self.methods.lock().unwrap().clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// One connection: requests until the client closes, asks to, or the proxy stops.
fn serve(conn: TcpStream, shared: &Shared) {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
    let _ = conn.set_nodelay(true);
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    while let Some(req) = read_request(&mut reader, &shared.stop) {
        let (status, body) = match req.body {
            Err(status) => (status, String::new()),
            Ok(body) => match answer(&body, shared) {
                Ok(b) => ("200 OK", b),
                Err(e) => ("502 Bad Gateway", e),
            },
        };
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}\r\n",
            body.len(),
            if req.close {
                "connection: close\r\n"
            } else {
                ""
            }
        );
        if out.write_all(head.as_bytes()).is_err()
            || out.write_all(body.as_bytes()).is_err()
            || out.flush().is_err()
            || req.close
        {
            break;
        }
    }
    let _ = out.shutdown(Shutdown::Both);
}

struct Request {
    /// The body, or the status refusing it.
    body: Result<Vec<u8>, &'static str>,
    close: bool,
}

/// Reads until a byte arrives, retrying on the read timeout until the proxy stops.
fn fill<R: BufRead>(r: &mut R, stop: &AtomicBool) -> Option<()> {
    loop {
        match r.fill_buf() {
            Ok([]) => return None,
            Ok(_) => return Some(()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                if stop.load(Ordering::SeqCst) {
                    return None;
                }
            }
            Err(_) => return None,
        }
    }
}

fn read_line<R: BufRead>(r: &mut R, stop: &AtomicBool) -> Option<String> {
    let mut line = Vec::new();
    loop {
        fill(r, stop)?;
        let buf = r.fill_buf().ok()?;
        if let Some(i) = buf.iter().position(|b| *b == b'\n') {
            line.extend_from_slice(&buf[..=i]);
            r.consume(i + 1);
            break;
        }
        let n = buf.len();
        line.extend_from_slice(buf);
        r.consume(n);
        if line.len() > 64 << 10 {
            return None;
        }
    }
    Some(String::from_utf8_lossy(&line).trim_end().to_owned())
}

fn read_exact<R: BufRead>(r: &mut R, n: usize, stop: &AtomicBool) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        fill(r, stop)?;
        let buf = r.fill_buf().ok()?;
        let k = buf.len().min(n - out.len());
        out.extend_from_slice(&buf[..k]);
        r.consume(k);
    }
    Some(out)
}

/// One HTTP/1.1 request; `None` when the connection is done.
fn read_request<R: BufRead>(r: &mut R, stop: &AtomicBool) -> Option<Request> {
    let mut start = read_line(r, stop)?;
    while start.is_empty() {
        // Tolerates a stray CRLF between requests.
        start = read_line(r, stop)?;
    }
    let http10 = start.ends_with("HTTP/1.0");
    let (mut len, mut chunked, mut close) = (0usize, false, http10);
    loop {
        let line = read_line(r, stop)?;
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => len = value.parse().ok()?,
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            "connection" => {
                close = value.eq_ignore_ascii_case("close")
                    || (http10 && !value.eq_ignore_ascii_case("keep-alive"));
            }
            _ => {}
        }
    }
    let body = if chunked {
        let mut body = Vec::new();
        loop {
            let size = read_line(r, stop)?;
            let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
            if size == 0 {
                // Trailers, then the empty line.
                while !read_line(r, stop)?.is_empty() {}
                break;
            }
            if body.len() + size > MAX_BODY {
                return Some(Request {
                    body: Err("413 Payload Too Large"),
                    close: true,
                });
            }
            body.extend(read_exact(r, size, stop)?);
            read_line(r, stop)?;
        }
        body
    } else if len > MAX_BODY {
        return Some(Request {
            body: Err("413 Payload Too Large"),
            close: true,
        });
    } else {
        read_exact(r, len, stop)?
    };
    Some(Request {
        body: Ok(body),
        close,
    })
}

/// Forwards `body` upstream and rewrites the answer; the error text on a failure upstream.
fn answer(body: &[u8], shared: &Shared) -> Result<String, String> {
    let request: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    {
        let mut m = shared.methods.lock().unwrap();
        let items = match &request {
            Value::Array(items) => items.iter().collect(),
            one => vec![one],
        };
        m.extend(
            items
                .iter()
                .map(|i| i["method"].as_str().unwrap_or("?").to_owned()),
        );
    }
    let text = shared
        .agent
        .post(&shared.upstream)
        .header("content-type", "application/json")
        .send(body)
        .map_err(|e| format!("upstream: {e}"))?
        .body_mut()
        .with_config()
        .limit(MAX_BODY as u64)
        .read_to_string()
        .map_err(|e| format!("upstream body: {e}"))?;
    let response: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        // Not JSON: passed on as it came.
        Err(_) => return Ok(text),
    };
    let out = match (&request, response) {
        (Value::Array(reqs), Value::Array(resps)) => Value::Array(
            resps
                .into_iter()
                .map(|resp| match reqs.iter().find(|q| q["id"] == resp["id"]) {
                    Some(q) => (shared.rewrite)(q, resp),
                    None => resp,
                })
                .collect(),
        ),
        (Value::Object(_), resp) => (shared.rewrite)(&request, resp),
        (_, resp) => resp,
    };
    Ok(out.to_string())
}

/// One JSON-RPC call straight to `url`: its `result` (panics on an error answer). For rewrites
/// that need to ask the node something else than what they were asked.
pub(crate) fn call(url: &str, method: &str, params: Value) -> Value {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let text = ureq::post(url)
        .header("content-type", "application/json")
        .send(&body.to_string())
        .unwrap()
        .body_mut()
        .with_config()
        .limit(MAX_BODY as u64)
        .read_to_string()
        .unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v.get("error").is_none(), "{method}: {v}");
    v["result"].clone()
}

/// Raw HTTP against the proxy: `n` requests on one connection, the last with
/// `Connection: close`; the bodies of the answers.
#[cfg(test)]
fn raw_exchange(url: &str, bodies: &[&str]) -> Vec<String> {
    let addr = url.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let never = AtomicBool::new(false);
    let mut out = Vec::new();
    for (i, b) in bodies.iter().enumerate() {
        let close = if i + 1 == bodies.len() {
            "Connection: close\r\n"
        } else {
            ""
        };
        write!(
            s,
            "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{close}Content-Length: {}\r\n\r\n{b}",
            b.len()
        )
        .unwrap();
        let status = read_line(&mut r, &never).unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        let mut len = 0;
        loop {
            let line = read_line(&mut r, &never).unwrap();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap();
            }
        }
        out.push(String::from_utf8(read_exact(&mut r, len, &never).unwrap()).unwrap());
    }
    // After `Connection: close` the proxy closes its side.
    let mut rest = Vec::new();
    assert_eq!(r.read_to_end(&mut rest).unwrap_or(0), 0);
    out
}

#[test]
fn forwards_and_rewrites_single_calls_and_batches() {
    let chain = afr_testkit::anvil();
    let proxy = Proxy::start(&chain.url, |req, mut resp| {
        if req["method"] == "eth_blockNumber" {
            resp["result"] = "0x2a".into();
        }
        resp
    });
    // A plain call through ureq (keep-alive agent): forwarded unchanged.
    assert_eq!(
        call(&proxy.url(), "eth_chainId", serde_json::json!([])),
        "0x7a69"
    );
    assert_eq!(
        call(&proxy.url(), "eth_blockNumber", serde_json::json!([])),
        "0x2a"
    );
    // A batch: only the rewritten method changes, every answer keeps its id.
    let batch = serde_json::json!([
        {"jsonrpc": "2.0", "id": 7, "method": "eth_chainId", "params": []},
        {"jsonrpc": "2.0", "id": 8, "method": "eth_blockNumber", "params": []},
        {"jsonrpc": "2.0", "id": 9, "method": "eth_getBalance",
            "params": [afr_testkit::DEV_ADDR, "latest"]},
    ])
    .to_string();
    let single =
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []})
            .to_string();
    // Two requests on one connection, the second closing it.
    let answers = raw_exchange(&proxy.url(), &[&batch, &single]);
    let items: Vec<Value> = serde_json::from_str(&answers[0]).unwrap();
    let by_id = |id: u64| items.iter().find(|i| i["id"] == id).unwrap().clone();
    assert_eq!(by_id(7)["result"], "0x7a69");
    assert_eq!(by_id(8)["result"], "0x2a");
    assert!(by_id(9)["result"].as_str().unwrap().starts_with("0x"));
    let one: Value = serde_json::from_str(&answers[1]).unwrap();
    assert_eq!(one["result"], "0x7a69");
    assert_eq!(
        proxy.methods(),
        [
            "eth_chainId",
            "eth_blockNumber",
            "eth_chainId",
            "eth_blockNumber",
            "eth_getBalance",
            "eth_chainId"
        ]
    );
    // Stopped when dropped: nothing listens any more.
    let url = proxy.url();
    drop(proxy);
    assert!(ureq::post(&url).send("{}").is_err());
}
