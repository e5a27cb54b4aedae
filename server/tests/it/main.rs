//! The server in-process on a real store, driven through its Unix socket and TCP.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on purpose"
)]

use std::{
    io::{Read, Write},
    os::unix::net::UnixStream,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use afr_client::socket::Client;
use afr_recorder::{Config, Recorder, init};
use afr_server::{Limits, Server, ServerConfig, TcpConfig};

/// A server on its own runtime thread; stopped (gracefully) on drop.
struct Running {
    dir: PathBuf,
    tcp: Option<std::net::SocketAddr>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn client(&self) -> Client {
        Client::running(&self.dir).expect("server answers")
    }

    fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn start(dir: &Path, limits: Limits, tcp: Option<TcpConfig>) -> Running {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let d = dir.to_owned();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let r = Recorder::open(
                &d,
                Config {
                    epoch_size: 10,
                    ..Config::default()
                },
            )
            .unwrap();
            let s = Server::bind(
                r,
                ServerConfig {
                    dir: d.clone(),
                    tcp,
                    limits,
                    anchor: None,
                    receipt_signer: None,
                    on_demand: None,
                    hooks: None,
                },
            )
            .unwrap();
            ready_tx.send(s.bound().tcp).unwrap();
            s.run(async {
                let _ = stop_rx.await;
            })
            .await
            .unwrap();
        });
    });
    let tcp = ready_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    Running {
        dir: dir.to_owned(),
        tcp,
        stop: Some(stop_tx),
        thread: Some(thread),
    }
}

fn fresh() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    init(&dir, [0xab; 20]).unwrap();
    (tmp, dir)
}

fn lines(n: u64, seed: u64) -> Vec<String> {
    afr_testkit::synth::generate(n, seed)
        .into_iter()
        .map(|e| serde_json::to_string(&e).unwrap())
        .collect()
}

const NDJSON: &str = "application/x-ndjson";

fn post_batch(c: &mut Client, lines: &[String]) -> afr_client::socket::Response {
    let body = lines.join("\n");
    c.request("POST", "/v1/events", Some(NDJSON), body.as_bytes())
        .unwrap()
}

#[test]
fn a_batch_is_receipted_and_bad_lines_are_named_without_losing_the_good_ones() {
    let (_tmp, dir) = fresh();
    let srv = start(&dir, Limits::default(), None);
    let mut c = srv.client();
    let mut batch = lines(3, 1);
    batch.insert(1, r#"{"category":"tool_call","bogus":1}"#.into());
    batch.insert(2, String::new());
    let r = post_batch(&mut c, &batch);
    assert_eq!(r.status, 422, "{}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    let receipts = v["receipts"].as_array().unwrap();
    assert_eq!(receipts.len(), 3);
    let field = |k: &str| -> Vec<u64> { receipts.iter().map(|r| r[k].as_u64().unwrap()).collect() };
    assert_eq!(field("line"), [1, 4, 5]);
    assert_eq!(field("seq"), [0, 1, 2]);
    assert!(receipts.iter().all(|r| r["duplicate"] == false));
    let errors = v["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["line"], 2);
    assert!(errors[0]["message"].as_str().unwrap().len() > 3);

    // One event as application/json, pretty-printed over several lines.
    let one: serde_json::Value = serde_json::from_str(&lines(1, 2)[0]).unwrap();
    let body = serde_json::to_string_pretty(&one).unwrap();
    let r = c
        .request(
            "POST",
            "/v1/events",
            Some("application/json"),
            body.as_bytes(),
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.error_message());
    assert_eq!(r.json()["receipts"][0]["seq"], 3);

    // Malformed JSON, a wrong media type, an unknown route.
    let r = c
        .request("POST", "/v1/events", Some(NDJSON), b"{not json\n")
        .unwrap();
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["errors"][0]["line"], 1);
    let r = c
        .request("POST", "/v1/events", Some("text/plain"), b"x")
        .unwrap();
    assert_eq!(r.status, 415);
    assert_eq!(c.request("GET", "/v2/x", None, b"").unwrap().status, 404);

    let st = c.request("GET", "/v1/status", None, b"").unwrap();
    assert_eq!(st.status, 200);
    assert_eq!(st.json()["events"], 4);
    let m = c.request("GET", "/metrics", None, b"").unwrap();
    let text = String::from_utf8(m.body).unwrap();
    assert!(text.contains("\nafr_events_total 4\n"), "{text}");
    assert!(text.contains("\nafr_fork_alarm 0\n"), "{text}");
    assert!(
        text.contains("\nafr_ingest_rejected_lines_total 2\n"),
        "{text}"
    );
    srv.stop();
}

#[test]
fn an_idempotent_retry_gets_the_first_receipt_also_after_a_restart() {
    let (_tmp, dir) = fresh();
    let ev = |key: &str, seed| {
        let mut v: serde_json::Value = serde_json::from_str(&lines(1, seed)[0]).unwrap();
        v["idempotency_key"] = key.into();
        v.to_string()
    };
    let first = {
        let srv = start(&dir, Limits::default(), None);
        let mut c = srv.client();
        let r = post_batch(&mut c, &[ev("a", 1), ev("b", 2), ev("a", 3)]);
        assert_eq!(r.status, 200);
        let v = r.json();
        let rc = v["receipts"].as_array().unwrap().clone();
        assert_eq!(rc[0]["duplicate"], false);
        assert_eq!(rc[2]["duplicate"], true);
        assert_eq!(rc[2]["seq"], rc[0]["seq"]);
        assert_eq!(rc[2]["leaf_hash"], rc[0]["leaf_hash"]);
        srv.stop();
        rc[0].clone()
    };
    let srv = start(&dir, Limits::default(), None);
    let mut c = srv.client();
    let r = post_batch(&mut c, &[ev("a", 4)]);
    let again = &r.json()["receipts"][0];
    assert_eq!(again["duplicate"], true);
    for k in ["seq", "epoch", "leaf_hash", "timestamp_us"] {
        assert_eq!(again[k], first[k], "{k}");
    }
    assert_eq!(
        c.request("GET", "/v1/status", None, b"").unwrap().json()["events"],
        2
    );
    // A bad key is the line's error.
    let r = post_batch(&mut c, &[ev(&"x".repeat(129), 5)]);
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["errors"][0]["field"], "idempotency_key");
}

#[test]
fn eight_concurrent_clients_get_contiguous_seqs_that_match_the_export() {
    let (_tmp, dir) = fresh();
    let srv = start(&dir, Limits::default(), None);
    let all: Vec<(u64, String)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8u64)
            .map(|i| {
                let srv = &srv;
                s.spawn(move || {
                    let mut c = srv.client();
                    let mut got = Vec::new();
                    let evs = lines(200, 100 + i);
                    for chunk in evs.chunks(1 + (i as usize * 7) % 23) {
                        let r = post_batch(&mut c, chunk);
                        assert_eq!(r.status, 200, "{}", r.error_message());
                        for rc in r.json()["receipts"].as_array().unwrap() {
                            got.push((
                                rc["seq"].as_u64().unwrap(),
                                rc["leaf_hash"].as_str().unwrap().to_owned(),
                            ));
                        }
                    }
                    got
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let mut seqs: Vec<u64> = all.iter().map(|(s, _)| *s).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..1600).collect::<Vec<_>>());

    let mut resp = srv
        .client()
        .request_stream("GET", "/v1/export", None, b"")
        .unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("afr-export-events"), Some("1600"));
    let mut bytes = Vec::new();
    resp.read_to_end(&mut bytes).unwrap();
    let rep = afr_core::verify::verify_log(&bytes);
    // 1,600 events in epochs of 10: all sealed, the log verifies.
    assert_eq!(rep.outcome, afr_core::verify::Outcome::Verified, "{rep:?}");
    let leaves = leaf_hashes(&bytes);
    for (seq, leaf) in &all {
        assert_eq!(&leaves[*seq as usize], leaf, "seq {seq}");
    }
}

/// The leaf hash of each event of an export, by seq.
fn leaf_hashes(export: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut r = afr_core::export::LogReader::new(export);
    while let Some(frame) = r.next_frame().unwrap() {
        if let afr_core::export::Frame::Event { record, .. } = frame {
            out.push(record.leaf_hash().to_hex());
        }
    }
    out
}

#[test]
fn garbage_slow_loris_and_a_full_server_are_refused_while_others_record() {
    let (_tmp, dir) = fresh();
    let limits = Limits {
        max_inflight: 3,
        body_timeout: Duration::from_secs(2),
        header_timeout: Duration::from_secs(2),
        ..Limits::default()
    };
    let srv = start(&dir, limits, None);
    let sock = dir.join(afr_server::SOCKET_FILE);
    let mut c = srv.client();
    std::thread::scope(|s| {
        // 1 GiB of garbage, chunked: refused early, long before it is all sent.
        let garbage = s.spawn(|| {
            let mut c = UnixStream::connect(&sock).unwrap();
            c.write_all(
                b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n",
            )
            .unwrap();
            let chunk = vec![b'z'; 1 << 20];
            let mut sent = 0usize;
            while sent < 1 << 30 {
                let ok = write!(c, "{:x}\r\n", chunk.len())
                    .and_then(|()| c.write_all(&chunk))
                    .and_then(|()| c.write_all(b"\r\n"));
                if ok.is_err() {
                    break;
                }
                sent += chunk.len();
            }
            let mut answer = Vec::new();
            let _ = c.read_to_end(&mut answer);
            (sent, String::from_utf8_lossy(&answer).into_owned())
        });
        // A slow loris: headers that never end, and a body that never comes.
        let loris = s.spawn(|| {
            let mut a = UnixStream::connect(&sock).unwrap();
            a.write_all(b"POST /v1/events HTTP/1.1\r\nHost: x\r\n").unwrap();
            let mut b = UnixStream::connect(&sock).unwrap();
            b.write_all(
                b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: 100\r\n\r\n{",
            )
            .unwrap();
            let started = Instant::now();
            let mut answer = String::new();
            let _ = b.read_to_string(&mut answer);
            let mut rest = Vec::new();
            let _ = a.read_to_end(&mut rest);
            (started.elapsed(), answer)
        });
        // Meanwhile another client keeps recording.
        let mut recorded = 0;
        for i in 0..20 {
            let r = post_batch(&mut c, &lines(5, 1000 + i));
            if r.status == 200 {
                recorded += 5;
            } else {
                assert_eq!(r.status, 503);
                assert_eq!(r.header("retry-after"), Some("1"));
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        assert!(recorded >= 50, "recorded {recorded}");
        let (sent, answer) = garbage.join().unwrap();
        assert!(sent < 64 << 20, "the server read {sent} bytes of garbage");
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        let (took, answer) = loris.join().unwrap();
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(took < Duration::from_secs(10), "{took:?}");
    });
    // With every slot held by slow bodies, the next batch is told to come back later.
    let holders: Vec<UnixStream> = (0..3)
        .map(|_| {
            let mut h = UnixStream::connect(&sock).unwrap();
            h.write_all(
                b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: 100\r\n\r\n{",
            )
            .unwrap();
            h
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let r = post_batch(&mut c, &lines(1, 7));
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("1"));
    drop(holders);
    // A declared body over the limit is refused before a byte of it is read.
    let mut c = UnixStream::connect(&sock).unwrap();
    c.write_all(
        b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: 1073741824\r\n\r\n",
    )
    .unwrap();
    let mut answer = vec![0u8; 12];
    c.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 413");
}

#[test]
fn tcp_needs_the_bearer_token_and_a_private_token_file() {
    let (tmp, dir) = fresh();
    let token = tmp.path().join("token");
    std::fs::write(&token, "0123456789abcdef-token\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(afr_server::read_token_file(&token).is_err());
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let t = afr_server::read_token_file(&token).unwrap();
    let srv = start(
        &dir,
        Limits::default(),
        Some(TcpConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            token: t,
            allow_remote: false,
        }),
    );
    let addr = srv.tcp.unwrap();
    let get = |auth: &str| {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "GET /v1/status HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    assert!(get("").starts_with("HTTP/1.1 401"));
    assert!(get("Authorization: Bearer 0123456789abcdef-tokeX\r\n").starts_with("HTTP/1.1 401"));
    assert!(get("Authorization: Bearer 0123456789abcdef-token\r\n").starts_with("HTTP/1.1 200"));
    // A second server on the same directory is refused; the socket is private.
    let mode = std::fs::metadata(dir.join(afr_server::SOCKET_FILE))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn query_seal_disclose_and_shutdown_keep_the_open_epoch_open() {
    let (_tmp, dir) = fresh();
    let srv = start(&dir, Limits::default(), None);
    let mut c = srv.client();
    assert_eq!(post_batch(&mut c, &lines(25, 3)).status, 200);
    let r = c.request("POST", "/v1/seal", None, b"").unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["sealed"]["epoch"], 2);
    assert_eq!(r.json()["sealed"]["count"], 5);
    let r = c
        .request(
            "POST",
            "/v1/disclose",
            Some("application/json"),
            br#"{"seqs":[1,7],"with_keys":true}"#,
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.error_message());
    assert_eq!(r.header("afr-bundle-events"), Some("2"));
    let rep = afr_core::bundle::verify_bundle(&r.body);
    assert_eq!(rep.outcome, afr_core::verify::Outcome::Verified, "{rep:?}");
    let r = c
        .request(
            "POST",
            "/v1/disclose",
            Some("application/json"),
            br#"{"seqs":[99]}"#,
        )
        .unwrap();
    assert_eq!(r.status, 404);

    let mut q = srv
        .client()
        .request_stream(
            "GET",
            "/v1/events?query=seq+in+0..3&limit=2&summary=true",
            None,
            b"",
        )
        .unwrap();
    assert_eq!(q.status, 200);
    let mut text = String::new();
    q.read_to_string(&mut text).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert_eq!(rows[0]["seq"], 0);
    assert_eq!(rows[2]["summary"]["matches"], serde_json::json!([0, 1, 2]));
    let r = c.request("GET", "/v1/events?query=(((", None, b"").unwrap();
    assert_eq!(r.status, 400);

    assert_eq!(post_batch(&mut c, &lines(3, 4)).status, 200);
    srv.stop();
    assert!(!dir.join(afr_server::SOCKET_FILE).exists());
    let r = Recorder::open(&dir, Config::default()).unwrap();
    assert_eq!(r.next_seq(), 28);
    assert_eq!(r.open_epoch(), (3, 3));
}
