//! Many producers, one writer, whatever starts first (`afr_client::writer`): gateways started
//! in parallel without `afr serve`, a server killed under load and started again, and the OTLP
//! receiver alongside. Every call is recorded exactly once and none is refused.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use afr_client::socket::Client as Socket;
use serde_json::{Value, json};

use super::{
    afr, initialised,
    mcp::{Client, events, server_bin},
    otlp::{Otlp, post},
    serve::{serve, terminate},
};

/// One `afr mcp wrap` over server-everything making `calls` `get-sum` calls tagged `tag`;
/// the answers' texts.
fn wrap_and_call(dir: &std::path::Path, tag: u64, calls: u64) -> Vec<Value> {
    let command = [
        server_bin("mcp-server-everything").display().to_string(),
        "stdio".into(),
    ];
    let mut c = Client::start(dir, &[], &command);
    c.initialize();
    let answers = (0..calls)
        .map(|i| {
            c.request(
                10 + i,
                "tools/call",
                json!({"name": "get-sum", "arguments": {"a": tag, "b": i}}),
            )
        })
        .collect();
    let (_, _, code) = c.finish();
    assert_eq!(code, Some(0));
    answers
}

/// The `(a, b)` arguments of every recorded `get-sum` call, with how often each was recorded.
fn sums(dir: &std::path::Path) -> BTreeMap<(u64, u64), usize> {
    let mut m = BTreeMap::new();
    for e in events(dir) {
        if e["intent"]["tool"] == "get-sum" {
            let a = &e["intent"]["args"];
            *m.entry((a["a"].as_u64().unwrap(), a["b"].as_u64().unwrap()))
                .or_default() += 1;
        }
    }
    m
}

fn assert_answered(answers: &[Value], tag: u64) {
    for (i, r) in answers.iter().enumerate() {
        let want = (tag + i as u64).to_string();
        assert!(
            r["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains(&want)),
            "call {i} of gateway {tag} was refused or failed: {r}"
        );
    }
}

#[test]
fn parallel_gateways_without_a_server_all_record_and_none_is_refused() {
    let (_tmp, dir) = initialised();
    // langchain-mcp-adapters starts one `afr mcp wrap` per tool call: four at once, twice.
    for round in 0..2u64 {
        let handles: Vec<_> = (0..4u64)
            .map(|g| {
                let dir = dir.clone();
                let tag = 100 * (round * 4 + g + 1);
                std::thread::spawn(move || (tag, wrap_and_call(&dir, tag, 3)))
            })
            .collect();
        for h in handles {
            let (tag, answers) = h.join().unwrap();
            assert_answered(&answers, tag);
        }
    }
    let got = sums(&dir);
    assert_eq!(got.len(), 24, "{got:?}");
    assert!(got.values().all(|n| *n == 1), "recorded twice: {got:?}");
    // The server they started on demand goes away once they are gone, and the store is free
    // for a writer that needs it alone.
    let deadline = Instant::now() + Duration::from_secs(30);
    while Socket::running(&dir).is_some() {
        assert!(
            Instant::now() < deadline,
            "the on-demand server did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    afr_testkit::ok(afr(&dir).arg("seal"));
}

#[test]
fn a_server_killed_under_load_is_replaced_and_a_restarted_one_takes_over() {
    let (_tmp, dir) = initialised();
    let server = serve(&dir, &[]);
    // Gateways calling in a loop while the server is killed, then started again.
    let load: Vec<_> = (0..2u64)
        .map(|g| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                let tag = 1000 * (g + 1);
                (tag, wrap_and_call(&dir, tag, 40))
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(400));
    let mut server = server;
    server.kill().unwrap();
    server.wait().unwrap();
    std::thread::sleep(Duration::from_millis(400));
    // A restarted `afr serve` never finds the store held by a producer: the server they
    // started on demand hands it over.
    let restarted = serve(&dir, &[]);
    let mut st = Socket::running(&dir).unwrap();
    let status = st.request("GET", "/v1/status", None, b"").unwrap().json();
    assert_eq!(status["on_demand"], false, "{status}");
    for h in load {
        let (tag, answers) = h.join().unwrap();
        assert_answered(&answers, tag);
    }
    let got = sums(&dir);
    assert_eq!(got.len(), 80, "{got:?}");
    assert!(got.values().all(|n| *n == 1), "recorded twice: {got:?}");
    let (code, err) = terminate(restarted);
    assert_eq!(code, Some(0), "{err}");
}

/// Exports one OTel GenAI `execute_tool lookup` span of trace `trace` to `rx`; acknowledged
/// once durable.
fn export_lookup(rx: &Otlp, trace: &str) {
    let span = json!({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [{
    "traceId": trace, "spanId": "b7ad6b7169203331", "name": "execute_tool lookup", "kind": 1,
    "startTimeUnixNano": "1796000000000000000", "endTimeUnixNano": "1796000000000500000",
    "attributes": [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
        {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}}
    ]}]}]}]});
    let r = post(
        rx.http.as_ref().unwrap(),
        "application/json",
        &[],
        span.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.head);
}

/// How many recorded events are calls of `tool`.
fn tool_count(dir: &std::path::Path, tool: &str) -> usize {
    events(dir)
        .iter()
        .filter(|e| e["intent"]["tool"] == tool)
        .count()
}

#[test]
fn the_otlp_receiver_and_gateways_share_one_writer() {
    let (_tmp, dir) = initialised();
    // The receiver starts first: it finds no server and starts one, as a gateway would.
    let rx = Otlp::start(&dir, &["--no-grpc"]);
    let answers = wrap_and_call(&dir, 7, 3);
    assert_answered(&answers, 7);
    export_lookup(&rx, "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(tool_count(&dir, "get-sum"), 3);
    assert_eq!(tool_count(&dir, "lookup"), 1);
    // A long-running server takes the store over from the one started on demand, with the
    // receiver still running; the receiver's next export goes to it.
    let server = serve(&dir, &[]);
    export_lookup(&rx, "1af7651916cd43dd8448eb211c80319c");
    assert_eq!(tool_count(&dir, "lookup"), 2);
    rx.kill();
    let (code, err) = terminate(server);
    assert_eq!(code, Some(0), "{err}");
}
