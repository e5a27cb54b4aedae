//! `afr serve` as a real process: the CLI through it and without it, kill -9 during ingest,
//! anchoring with the RPC down.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use afr_client::socket::Client;
use afr_core::verify::{Outcome, verify_log};
use afr_recorder::{Config, Recorder};

use super::{afr, gen_lines, receipts_of, record_stdin};

/// A fresh recorder directory, and a file of `n` synthetic events (seed `seed`) beside it.
fn initialised_with_events(n: u64, seed: u64) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    assert!(afr(&dir).arg("init").status().unwrap().success());
    let events = tmp.path().join("e.jsonl");
    std::fs::write(&events, gen_lines(n, seed)).unwrap();
    (tmp, dir, events)
}

/// `afr serve ARGS` on `dir`, once its socket answers.
pub(super) fn serve(dir: &Path, args: &[&str]) -> Child {
    let child = afr(dir)
        .arg("serve")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    // Not a server a producer started on demand (this one takes the store over from it).
    let long_running = |c: &mut Client| {
        c.request("GET", "/v1/status", None, b"")
            .is_ok_and(|r| r.json()["on_demand"] == false)
    };
    while !Client::running(dir).is_some_and(|mut c| long_running(&mut c)) {
        assert!(Instant::now() < deadline, "afr serve did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// SIGTERM to a child this test started, then its exit status and stderr.
pub(super) fn terminate(mut child: Child) -> (Option<i32>, String) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            return (st.code(), err);
        }
        assert!(Instant::now() < deadline, "afr serve did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stdout(c: &mut Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_cli_switches_transparently_between_server_and_direct_modes() {
    let (tmp, dir, events) = initialised_with_events(40, 11);
    // Direct: 40 events.
    afr_testkit::ok(afr(&dir).arg("record").arg(&events));
    let direct_query = stdout(afr(&dir).args(["query", "--json", "seq in 0..5"]));
    let direct_status: serde_json::Value =
        serde_json::from_str(&stdout(afr(&dir).args(["status", "--json"]))).unwrap();

    let server = serve(&dir, &[]);
    // The same reading commands answer the same through the server.
    assert_eq!(
        stdout(afr(&dir).args(["query", "--json", "seq in 0..5"])),
        direct_query
    );
    let st: serde_json::Value =
        serde_json::from_str(&stdout(afr(&dir).args(["status", "--json"]))).unwrap();
    for k in [
        "recorder",
        "events",
        "sealed_epochs",
        "open_epoch",
        "open_epoch_events",
    ] {
        assert_eq!(st[k], direct_status[k], "{k}");
    }
    // Recording through the server: receipts, bad lines named by their line number.
    let mut input = gen_lines(30, 12);
    input.extend_from_slice(b"{\"category\":\"shell\",\"oops\":1}\n");
    let out = record_stdin(&dir, &[&b"\n"[..], &input].concat());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{err}");
    assert!(err.contains("line 32: "), "{err}");
    assert!(err.contains("recorded 30 events"), "{err}");
    assert!(err.contains("next seq 70"), "{err}");
    let mut c = afr(&dir);
    c.args(["record", "--receipts"]).arg(&events);
    let receipts = stdout(&mut c);
    let first: serde_json::Value = serde_json::from_str(receipts.lines().next().unwrap()).unwrap();
    assert_eq!(first["line"], 1);
    assert_eq!(first["seq"], 70);
    // Seal, disclose, export: through the server.
    assert!(stdout(afr(&dir).arg("seal")).starts_with("sealed epoch 1 (10 events)"));
    let bundle = tmp.path().join("b.bundle");
    let out = stdout(
        afr(&dir)
            .args(["disclose", "--seq", "3,71", "--with-keys", "--out"])
            .arg(&bundle),
    );
    assert!(out.starts_with("disclosed 2 events ("), "{out}");
    afr_testkit::ok(afr(&dir).arg("verify-bundle").arg(&bundle));
    let log = tmp.path().join("log.afr");
    let out = stdout(afr(&dir).args(["export", "--out"]).arg(&log));
    assert!(
        out.starts_with("exported 110 events in 2 sealed epochs (0 not yet sealed)"),
        "{out}"
    );
    assert_eq!(
        verify_log(&std::fs::read(&log).unwrap()).outcome,
        Outcome::Verified
    );
    let table = stdout(afr(&dir).args(["query", "seq in 70..72"]));
    assert!(table.contains("2 events matched"), "{table}");
    assert_eq!(table.lines().count(), 4, "{table}");
    // A few more events stay in the open epoch across a graceful stop.
    afr_testkit::ok(afr(&dir).arg("record").arg(&events));
    let (code, err) = terminate(server);
    assert_eq!(code, Some(0), "{err}");
    assert!(!dir.join(afr_server::SOCKET_FILE).exists());
    // Direct again: everything is there, and the open epoch was not force-sealed.
    let st: serde_json::Value =
        serde_json::from_str(&stdout(afr(&dir).args(["status", "--json"]))).unwrap();
    assert_eq!(st["events"], 150);
    assert_eq!(st["open_epoch_events"], 40);
    afr_testkit::ok(afr(&dir).arg("record").arg(&events));
    assert_eq!(
        Recorder::open(&dir, Config::default()).unwrap().next_seq(),
        190
    );
}

#[test]
fn kill_dash_nine_during_ingest_then_restart_loses_no_receipted_event() {
    let (_tmp, dir, events) = initialised_with_events(20_000, 5);
    let mut acked = Vec::new();
    for round in 0..3u64 {
        let mut server = serve(&dir, &["--epoch-size", "37"]);
        let mut client = afr(&dir)
            .args(["record", "--receipts"])
            .arg(&events)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let reader = receipts_of(client.stdout.take().unwrap());
        std::thread::sleep(Duration::from_millis(300 + 200 * round));
        server.kill().unwrap(); // SIGKILL
        server.wait().unwrap();
        let _ = client.wait();
        let got = reader.join().unwrap();
        assert!(!got.is_empty(), "round {round}: nothing was receipted");
        acked.extend(got);
    }
    // A restart over the stale socket, then the store holds every receipted event.
    let server = serve(&dir, &[]);
    let (code, err) = terminate(server);
    assert_eq!(code, Some(0), "{err}");
    let r = Recorder::open(&dir, Config::default()).unwrap();
    let next = r.next_seq();
    for (seq, leaf) in &acked {
        assert!(*seq < next, "receipted event {seq} lost");
        let rec = r.store().record(*seq).unwrap().unwrap();
        assert_eq!(&rec.leaf_hash().to_hex(), leaf, "event {seq} differs");
    }
    drop(r);
    let rep = verify_log(&super::export(&dir));
    assert_ne!(rep.outcome, Outcome::Tampered, "{:?}", rep.first_failure);
    assert_eq!(rep.events, next);
}

#[test]
fn anchoring_with_the_rpc_down_never_stalls_ingest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    assert!(afr(&dir).arg("init").status().unwrap().success());
    // Nothing listens on port 9 of loopback: every call of every pass fails.
    let server = serve(
        &dir,
        &[
            "--epoch-size",
            "5",
            "--anchor-rpc",
            "http://127.0.0.1:9/v3/secret-api-key",
            "--contract",
            "0x00000000000000000000000000000000000000aa",
            "--anchor-interval-ms",
            "100",
        ],
    );
    let events = tmp.path().join("e.jsonl");
    std::fs::write(&events, gen_lines(500, 6)).unwrap();
    let started = Instant::now();
    afr_testkit::ok(afr(&dir).arg("record").arg(&events));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "ingest took {took:?}");
    let mut c = Client::running(&dir).unwrap();
    let m = String::from_utf8(c.request("GET", "/metrics", None, b"").unwrap().body).unwrap();
    assert!(m.contains("\nafr_events_total 500\n"), "{m}");
    assert!(m.contains("\nafr_sealed_epochs_total 100\n"), "{m}");
    let (code, err) = terminate(server);
    assert_eq!(code, Some(0), "{err}");
    // The pass was failing (and retrying) the whole time; the stop did not wait for it.
    assert!(
        err.contains("failed: chain id") || err.contains("anchoring pass failed"),
        "{err}"
    );
    assert!(
        !err.contains("secret-api-key"),
        "the endpoint's key leaked into the log: {err}"
    );
}

/// A non-loopback TCP address is refused without `--allow-remote`; TCP without a token file is
/// refused too. Nothing starts, and the store stays usable directly.
#[test]
fn remote_listening_needs_allow_remote_and_a_token() {
    let (tmp, dir) = super::initialised();
    let token = tmp.path().join("token");
    std::fs::write(&token, "0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let refused = |args: &[&str], want: &str| {
        let out = afr(&dir).arg("serve").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started");
        assert!(err.contains(want), "{args:?}: {err}");
    };
    let token = token.to_str().unwrap();
    refused(
        &["--listen", "0.0.0.0:0", "--token-file", token],
        "not a loopback address",
    );
    refused(&["--listen", "127.0.0.1:0"], "token");
    assert!(Client::running(&dir).is_none());
    afr_testkit::ok(afr(&dir).args(["status", "--json"]));
}

/// The server anchors on its own, on a real chain: events recorded through it end up under
/// anchored roots, without `afr anchor`, and ingest carries on meanwhile.
#[test]
fn the_server_anchors_sealed_epochs_on_a_real_chain() {
    let chain = afr_testkit::anvil();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    let keyed = |c: &mut Command| {
        c.env("AFR_ANCHOR_KEY", afr_testkit::DEV_KEY)
            .env_remove("AFR_RPC_URL");
    };
    let mut c = afr(&dir);
    keyed(&mut c);
    afr_testkit::ok(c.arg("init"));
    let mut c = afr(&dir);
    keyed(&mut c);
    let out = afr_testkit::ok(c.args(["deploy", "--json", "--rpc", &chain.url]));
    let contract = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["contract"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut cmd = afr(&dir);
    keyed(&mut cmd);
    let mut server = cmd
        .args([
            "serve",
            "--epoch-size",
            "10",
            "--anchor-rpc",
            &chain.url,
            "--contract",
            &contract,
            "--anchor-interval-ms",
            "200",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Client::running(&dir).is_none() {
        assert!(Instant::now() < deadline, "afr serve did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let events = tmp.path().join("e.jsonl");
    std::fs::write(&events, gen_lines(50, 8)).unwrap();
    afr_testkit::ok(afr(&dir).arg("record").arg(&events));
    // Five sealed epochs; the server's own passes anchor them.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let st: serde_json::Value =
            serde_json::from_str(&stdout(afr(&dir).args(["status", "--json"]))).unwrap();
        if st["anchored_epochs"] == 5 {
            break;
        }
        if Instant::now() > deadline {
            let _ = server.kill();
            panic!("not anchored in time: {st}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let me = afr_testkit::DEV_ADDR;
    let on_chain = afr_testkit::anchored_logs(&chain.url, &contract, me);
    assert_eq!(
        on_chain.iter().map(|(e, _)| *e).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    let (code, err) = terminate(server);
    assert_eq!(code, Some(0), "{err}");
}

/// An idempotent retry after the server was killed with SIGKILL (the client never saw the
/// answer, say) returns the receipt the first attempt got, and records nothing twice.
#[test]
fn an_idempotent_retry_after_kill_dash_nine_returns_the_first_receipt() {
    let (_tmp, dir) = super::initialised();
    let line = br#"{"idempotency_key":"call-7f3a","category":"shell","intent":{"tool":"rm","args":{"path":"/tmp/x"}}}"#;
    let post = || {
        let mut c = Client::running(&dir).unwrap();
        let r = c
            .request("POST", "/v1/events", Some("application/json"), line)
            .unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        v["receipts"][0].clone()
    };
    let mut server = serve(&dir, &[]);
    let first = post();
    assert_eq!(first["duplicate"], false);
    server.kill().unwrap(); // SIGKILL: no drain, no flush beyond what the receipt promised
    server.wait().unwrap();
    let server = serve(&dir, &[]);
    let again = post();
    assert_eq!(again["duplicate"], true);
    for k in ["seq", "epoch", "leaf_hash", "timestamp_us"] {
        assert_eq!(again[k], first[k], "{k}");
    }
    let (code, err) = terminate(server);
    assert_eq!(code, Some(0), "{err}");
    let r = Recorder::open(&dir, Config::default()).unwrap();
    assert_eq!(r.next_seq(), 1, "recorded once");
}
