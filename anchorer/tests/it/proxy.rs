//! A JSON-RPC proxy in front of anvil for the tests: counts every call by method, and can lag
//! one block behind on reads of `latest` (`eth_call`, `eth_getBlockByNumber`,
//! `eth_blockNumber`), as a load-balanced provider does when a request lands on a node one
//! block behind. Block-hash reads (EIP-1898), receipts and sends go through untouched.
//!
//! std TCP, one thread per connection, one request per connection (`connection: close`).

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use serde_json::{Value, json};

/// A running proxy.
pub struct Proxy {
    /// Its URL.
    pub url: String,
    calls: Arc<Mutex<Vec<String>>>,
    requests: Arc<AtomicU64>,
    lag: Arc<AtomicBool>,
}

impl Proxy {
    /// Starts a proxy to `upstream` (an `http://host:port` URL).
    pub fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let up = upstream.trim_start_matches("http://").to_owned();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(AtomicU64::new(0));
        let lag = Arc::new(AtomicBool::new(false));
        let (c, r, l) = (calls.clone(), requests.clone(), lag.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { break };
                let (c, r, l, up) = (c.clone(), r.clone(), l.clone(), up.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, &up, &c, &r, &l);
                });
            }
        });
        Proxy {
            url,
            calls,
            requests,
            lag,
        }
    }

    /// Lag one block behind on reads of `latest` (or not).
    pub fn lag(&self, on: bool) {
        self.lag.store(on, Ordering::SeqCst);
    }

    /// Forgets the counts.
    pub fn reset(&self) {
        self.calls.lock().unwrap().clear();
        self.requests.store(0, Ordering::SeqCst);
    }

    /// JSON-RPC calls seen since the last reset, by method (batches count each call).
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    /// HTTP requests seen since the last reset (a batch is one).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

fn read_http(stream: &mut impl BufRead) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = 0usize;
    let mut first = true;
    loop {
        let mut line = String::new();
        if stream.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        if first {
            first = false;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; len];
    stream.read_exact(&mut body)?;
    Ok(Some(body))
}

fn post(upstream: &str, body: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect(upstream)?;
    write!(
        s,
        "POST / HTTP/1.1\r\nhost: {upstream}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )?;
    s.write_all(body)?;
    let mut r = BufReader::new(s);
    // Status line and headers, then the body (anvil sends a content-length).
    let mut len = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            break;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().ok();
        }
    }
    let mut out = Vec::new();
    match len {
        Some(n) => {
            out.resize(n, 0);
            r.read_exact(&mut out)?;
        }
        None => {
            r.read_to_end(&mut out)?;
        }
    }
    Ok(out)
}

fn rpc(upstream: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc":"2.0","id":1,"method":method,"params":params}).to_string();
    let out = post(upstream, body.as_bytes()).unwrap_or_default();
    serde_json::from_slice::<Value>(&out).unwrap_or(Value::Null)["result"].clone()
}

fn serve(
    conn: TcpStream,
    upstream: &str,
    calls: &Mutex<Vec<String>>,
    requests: &AtomicU64,
    lag: &AtomicBool,
) -> std::io::Result<()> {
    let mut w = conn.try_clone()?;
    let mut r = BufReader::new(conn);
    let Some(body) = read_http(&mut r)? else {
        return Ok(());
    };
    requests.fetch_add(1, Ordering::SeqCst);
    let mut v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let items: Vec<&mut Value> = match &mut v {
        Value::Array(a) => a.iter_mut().collect(),
        other => vec![other],
    };
    let lagging = lag.load(Ordering::SeqCst);
    let behind = if lagging {
        let n = rpc(upstream, "eth_blockNumber", json!([]));
        let n = u64::from_str_radix(n.as_str().unwrap_or("0x0").trim_start_matches("0x"), 16)
            .unwrap_or(0);
        Some(format!("{:#x}", n.saturating_sub(1)))
    } else {
        None
    };
    let mut block_number_ids = Vec::new();
    for item in items {
        let method = item["method"].as_str().unwrap_or_default().to_owned();
        calls.lock().unwrap().push(method.clone());
        let Some(b) = &behind else { continue };
        match method.as_str() {
            "eth_getBlockByNumber" if item["params"][0] == "latest" => {
                item["params"][0] = json!(b);
            }
            "eth_call" => {
                let p = item["params"].as_array_mut().unwrap();
                if p.len() < 2 {
                    p.push(json!(b));
                } else if p[1] == "latest" {
                    p[1] = json!(b);
                }
            }
            "eth_blockNumber" => block_number_ids.push(item["id"].clone()),
            _ => {}
        }
    }
    let out = post(upstream, v.to_string().as_bytes())?;
    let out = match (&behind, block_number_ids.is_empty()) {
        (Some(b), false) => {
            let mut a: Value = serde_json::from_slice(&out).unwrap_or(Value::Null);
            let fix = |x: &mut Value| {
                if block_number_ids.contains(&x["id"]) {
                    x["result"] = json!(b);
                }
            };
            match &mut a {
                Value::Array(xs) => xs.iter_mut().for_each(fix),
                x => fix(x),
            }
            a.to_string().into_bytes()
        }
        _ => out,
    };
    write!(
        w,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        out.len()
    )?;
    w.write_all(&out)?;
    w.flush()
}
