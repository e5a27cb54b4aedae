//! `afr mcp proxy` with several named upstreams (`--upstream NAME=URL`) and per-token client
//! identity (`--client-token NAME=FILE`), between REAL MCP peers (tests/mcp/PEERS.md): the
//! PyPI `mcp` 2.3.0 client and server, and the npm server-everything.

use std::{
    net::TcpStream,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use super::{
    afr, initialised,
    mcp::{events, write_policy},
    mcp_peers::{
        assert_ran, exactly_events, free_port, journal_settles, mcp_dir, post, py_client,
        read_until, run_client, start_everything, start_py_server, status_of,
    },
    proc::{Daemon, python},
};

/// `afr --dir DIR mcp proxy EXTRA --upstream NAME=URL... --listen 127.0.0.1:0`; the URL
/// clients use.
fn start_multi(dir: &Path, upstreams: &[(&str, &str)], extra: &[&str]) -> (Daemon, String) {
    let mut c = afr(dir);
    c.args(["mcp", "proxy"]).args(extra);
    for (name, url) in upstreams {
        c.arg("--upstream").arg(format!("{name}={url}"));
    }
    let mut d = Daemon::spawn(c.args(["--listen", "127.0.0.1:0"]));
    let url = d.wait_for(|l| {
        let rest = l.strip_prefix("afr mcp proxy: listening on ")?;
        let (url, _) = rest.split_once(" -> ")?;
        Some(url.to_owned())
    });
    let url = url.unwrap_or_else(|| panic!("the proxy did not start: {}", d.stderr()));
    (d, url)
}

/// The names of the tools a client was offered.
fn tools(out: &Value) -> Vec<String> {
    out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn two_upstreams_behind_one_proxy_route_by_prefix_under_one_policy() {
    let (tmp, dir) = initialised();
    let (_alpha, alpha) = start_py_server();
    let (_beta, beta) = start_everything();
    // One policy over both: the upstream's name in the `server` glob, the tool's own name
    // after the prefix.
    let policy = write_policy(
        &tmp.path().join("policy.toml"),
        r#"
[[rule]]
id = "no-deletes-on-alpha"
server = "alpha=*"
tool = "*_delete_record"
verdict = "deny"
reason = "alpha is production"
"#,
    );
    let (proxy, url) = start_multi(
        &dir,
        &[("alpha", &alpha), ("beta", &beta)],
        &["--policy", &policy],
    );
    // `auto`: server/discover first, which server-everything (2025-11-25 only) refuses, so
    // the proxy refuses it too and the client falls back to initialize.
    let out = run_client(
        py_client()
            .args(["http", &url])
            .args(["--call", "alpha_echo", r#"{"message":"hi"}"#])
            .args(["--call", "beta_echo", r#"{"message":"hi"}"#])
            .args(["--call", "gamma_echo", r#"{"message":"hi"}"#])
            .args(["--call", "alpha_delete_record", r#"{"id":"7"}"#]),
    );
    assert_eq!(out["protocol"], "2025-11-25", "{out}");
    assert_eq!(out["server"]["name"], "afr-gateway", "{out}");
    let offered = tools(&out);
    for t in [
        "alpha_echo",
        "alpha_delete_record",
        "beta_echo",
        "beta_get-sum",
    ] {
        assert!(offered.contains(&t.to_owned()), "{t} not in {offered:?}");
    }
    assert!(!offered.contains(&"echo".to_owned()), "{offered:?}");
    // Each call reached its own upstream: py_server echoes bare, server-everything says so.
    assert_eq!(out["calls"][0]["content"][0]["text"], "hi", "{out}");
    assert_eq!(out["calls"][1]["content"][0]["text"], "Echo: hi", "{out}");
    let unknown = out["calls"][2]["error"].as_str().unwrap();
    assert!(unknown.contains("unknown tool `gamma_echo`"), "{out}");
    let denied = out["calls"][3]["error"].as_str().unwrap();
    assert!(denied.contains("no-deletes-on-alpha"), "{out}");

    // One event per call that reached the gate, each naming its upstream and URL.
    let evs = exactly_events(&dir, 3);
    assert_ran(&evs[0], "alpha_echo", "hi");
    assert_eq!(
        evs[0]["execution"]["target"],
        format!("afr-py-server 0.1.0 (http: alpha={alpha})")
    );
    assert_ran(&evs[1], "beta_echo", "Echo: hi");
    assert_eq!(
        evs[1]["execution"]["target"],
        format!("mcp-servers/everything 2.0.0 (http: beta={beta})")
    );
    assert_eq!(
        evs[1]["code_provenance"]["tool_version"],
        "mcp-servers/everything 2.0.0"
    );
    assert_eq!(evs[2]["intent"]["tool"], "alpha_delete_record");
    assert_eq!(
        evs[2]["policy_evaluation"][0]["guardrail"],
        "no-deletes-on-alpha"
    );
    assert!(evs[2].get("execution").is_none(), "{}", evs[2]);
    for ev in &evs {
        assert_eq!(ev["code_provenance"]["agent"], "afr-py-client");
        assert_eq!(ev["lane"], evs[0]["lane"], "one client session, one lane");
    }
    journal_settles(&dir);
    drop(proxy);
}

#[test]
fn an_upstream_that_is_down_leaves_the_others_working() {
    let (_tmp, dir) = initialised();
    let (_alpha, alpha) = start_py_server();
    let down = format!("http://127.0.0.1:{}/mcp", free_port());
    let (mut proxy, url) = start_multi(&dir, &[("alpha", &alpha), ("beta", &down)], &[]);
    let out = run_client(
        py_client()
            .args(["http", &url, "--protocol", "2025-11-25"])
            .args(["--call", "beta_echo", r#"{"message":"hi"}"#])
            .args(["--call", "alpha_echo", r#"{"message":"still here"}"#]),
    );
    let offered = tools(&out);
    assert!(offered.contains(&"alpha_echo".to_owned()), "{offered:?}");
    assert!(
        offered.iter().all(|t| !t.starts_with("beta_")),
        "{offered:?}"
    );
    let e = out["calls"][0]["error"].as_str().unwrap();
    assert!(e.contains("upstream `beta` cannot be reached"), "{out}");
    assert_eq!(out["calls"][1]["content"][0]["text"], "still here", "{out}");
    let evs = exactly_events(&dir, 1);
    assert_ran(&evs[0], "alpha_echo", "still here");
    let log = proxy.stderr();
    assert!(
        log.contains("upstream `beta`") && log.contains("left out"),
        "{log}"
    );
}

#[test]
fn stateless_clients_reach_several_upstreams_and_filtered_lists() {
    let (tmp, dir) = initialised();
    let (_alpha, alpha) = start_py_server();
    let (_beta, beta) = start_py_server();
    let policy = write_policy(
        &tmp.path().join("policy.toml"),
        "[[rule]]\nid = \"beta-keeps-its-records\"\ntool = \"beta_delete_record\"\nverdict = \"deny\"\n",
    );
    let (_proxy, url) = start_multi(
        &dir,
        &[("alpha", &alpha), ("beta", &beta)],
        &["--policy", &policy, "--filter-tools"],
    );
    let out = run_client(
        py_client()
            .args(["http", &url, "--protocol", "2026-07-28"])
            .args(["--call", "beta_echo", r#"{"message":"b"}"#])
            .args(["--call", "alpha_echo", r#"{"message":"a"}"#]),
    );
    assert_eq!(out["protocol"], "2026-07-28", "{out}");
    let offered = tools(&out);
    assert!(
        offered.contains(&"alpha_delete_record".to_owned()),
        "{offered:?}"
    );
    assert!(
        !offered.contains(&"beta_delete_record".to_owned()),
        "{offered:?}"
    );
    assert_eq!(out["calls"][0]["content"][0]["text"], "b", "{out}");
    assert_eq!(out["calls"][1]["content"][0]["text"], "a", "{out}");
    // The filtering of beta's list, then the two calls, each at its upstream.
    let evs = exactly_events(&dir, 3);
    assert_eq!(evs[0]["intent"]["tool"], "tools/list");
    assert_eq!(
        evs[0]["intent"]["args"]["hidden"],
        json!(["beta_delete_record"])
    );
    assert!(
        evs[0]["execution"]["target"]
            .as_str()
            .unwrap()
            .contains("beta="),
        "{}",
        evs[0]
    );
    assert_ran(&evs[1], "beta_echo", "b");
    assert_eq!(
        evs[1]["execution"]["target"],
        format!("afr-py-server 0.1.0 (http: beta={beta})")
    );
    assert_ran(&evs[2], "alpha_echo", "a");
    assert_eq!(
        evs[2]["execution"]["target"],
        format!("afr-py-server 0.1.0 (http: alpha={alpha})")
    );
    assert_eq!(evs[1]["lane"], evs[2]["lane"]);
}

/// A token file (0600) holding `token`.
fn token_file(dir: &Path, name: &str, token: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// `wiretap.py http LOG` on a free port in front of `upstream`; its URL.
fn start_wiretap(log: &Path, upstream: &str) -> (Daemon, String) {
    let port = free_port();
    let d = Daemon::spawn(
        Command::new(python())
            .arg(mcp_dir().join("wiretap.py"))
            .arg("http")
            .arg(log)
            .args(["--listen", &port.to_string(), "--upstream", upstream]),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "wiretap did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (d, format!("http://127.0.0.1:{port}/mcp"))
}

/// Every file under `dir`, concatenated (the store's bytes, journals, logs).
fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(all_bytes(&p));
        } else if let Ok(b) = std::fs::read(&p) {
            out.extend(b);
        }
    }
    out
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn client_tokens_name_the_client_refuse_the_rest_and_are_never_recorded() {
    const ALICE: &str = "alice-token-0123456789abcdef";
    const BOB: &str = "bob-token-0123456789abcdef00";
    let (tmp, dir) = initialised();
    let (_alpha, alpha) = start_py_server();
    let (_beta, beta) = start_py_server();
    // What reaches alpha is logged: the client's token must not.
    let tap = tmp.path().join("alpha.wire.jsonl");
    let (_wiretap, tapped) = start_wiretap(&tap, &alpha);
    let a = token_file(tmp.path(), "alice.token", ALICE)
        .display()
        .to_string();
    let b = token_file(tmp.path(), "bob.token", BOB)
        .display()
        .to_string();
    let (mut proxy, url) = start_multi(
        &dir,
        &[("alpha", &tapped), ("beta", &beta)],
        &[
            "--client-token",
            &format!("alice={a}"),
            "--client-token",
            &format!("bob={b}"),
        ],
    );
    let addr = url
        .strip_prefix("http://")
        .unwrap()
        .split('/')
        .next()
        .unwrap();

    // Without a token, or with one nobody was given: 401, nothing forwarded or recorded.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    for auth in [
        vec![],
        vec!["Authorization: Bearer not-a-token-of-anyone".to_owned()],
    ] {
        let mut s = post(
            addr,
            &[auth, vec!["Connection: close".into()]].concat(),
            &list,
        );
        let r = read_until(&mut s, |_| false);
        assert_eq!(status_of(&r), 401, "{r}");
        assert!(
            r.to_ascii_lowercase().contains("www-authenticate: bearer"),
            "{r}"
        );
    }
    let out = run_client(
        py_client()
            .args(["http", &url])
            .args(["--header", &format!("Authorization: Bearer {ALICE}")])
            .args(["--call", "alpha_echo", r#"{"message":"from alice"}"#]),
    );
    assert_eq!(out["calls"][0]["content"][0]["text"], "from alice", "{out}");
    let out = run_client(
        py_client()
            .args(["http", &url, "--protocol", "2026-07-28"])
            .args(["--header", &format!("Authorization: Bearer {BOB}")])
            .args(["--call", "beta_echo", r#"{"message":"from bob"}"#]),
    );
    assert_eq!(out["calls"][0]["content"][0]["text"], "from bob", "{out}");

    let evs = exactly_events(&dir, 2);
    assert_ran_for(&evs[0], "alpha_echo", "alice");
    assert_ran_for(&evs[1], "beta_echo", "bob");
    journal_settles(&dir);

    // The tokens are nowhere: not in the events, the store's files, what reached alpha (the
    // header is the gateway's credential and is stripped), nor the proxy's log.
    let q = afr_testkit::ok(afr(&dir).args(["query", "--json", "seq in 0..100"]));
    let wire = std::fs::read(&tap).unwrap();
    assert!(
        contains(&wire, "alpha_echo") || contains(&wire, "\"echo\""),
        "the tap saw nothing"
    );
    assert!(
        !contains(&wire, "authorization") && !contains(&wire, "Authorization"),
        "the Authorization header reached the upstream"
    );
    let store = all_bytes(&dir);
    let err = proxy.stderr();
    for t in [ALICE, BOB] {
        assert!(!contains(&q.stdout, t), "{t} in the events");
        assert!(!contains(&store, t), "{t} in the store's bytes");
        assert!(!err.contains(t), "{t} in the proxy's log: {err}");
    }
    assert_eq!(events(&dir).len(), 2);
}

/// `ev` ran and is recorded on behalf of `who`, beside the client's own clientInfo.
fn assert_ran_for(ev: &Value, tool: &str, who: &str) {
    assert_eq!(ev["intent"]["tool"], tool, "{ev}");
    assert_eq!(ev["execution"]["command"], "tools/call", "{ev}");
    assert_eq!(ev["delegation_provenance"]["on_behalf_of"], who, "{ev}");
    assert_eq!(ev["code_provenance"]["agent"], "afr-py-client", "{ev}");
    assert!(ev["effects"].get("error").is_none(), "{ev}");
}

#[test]
fn a_relay_with_client_tokens_passes_authorization_only_when_told() {
    const CAROL: &str = "carol-token-0123456789abcdef";
    let (tmp, dir) = initialised();
    let (_server, upstream) = start_py_server();
    let tap = tmp.path().join("wire.jsonl");
    let (_wiretap, tapped) = start_wiretap(&tap, &upstream);
    let c = token_file(tmp.path(), "carol.token", CAROL)
        .display()
        .to_string();
    let token = format!("carol={c}");
    let mut c = afr(&dir);
    c.args([
        "mcp",
        "proxy",
        "--client-token",
        &token,
        "--pass-authorization",
    ])
    .args(["--upstream", &tapped, "--listen", "127.0.0.1:0"]);
    let mut d = Daemon::spawn(&mut c);
    let url = d
        .wait_for(|l| {
            let rest = l.strip_prefix("afr mcp proxy: listening on ")?;
            Some(rest.split_once(" -> ")?.0.to_owned())
        })
        .unwrap_or_else(|| panic!("{}", d.stderr()));
    let out = run_client(
        py_client()
            .args(["http", &url, "--protocol", "2025-11-25"])
            .args(["--header", &format!("Authorization: Bearer {CAROL}")])
            .args(["--call", "echo", r#"{"message":"c"}"#]),
    );
    assert_eq!(out["calls"][0]["content"][0]["text"], "c", "{out}");
    let evs = exactly_events(&dir, 1);
    assert_ran_for(&evs[0], "echo", "carol");
    // --pass-authorization: the header reached the server, and still nothing recorded it.
    let wire = std::fs::read(&tap).unwrap();
    assert!(
        contains(&wire, CAROL),
        "the Authorization header was not passed on"
    );
    assert!(!contains(&all_bytes(&dir), CAROL));
    assert!(!d.stderr().contains(CAROL));
}

#[test]
fn a_remote_listen_needs_client_tokens_or_allow_remote() {
    let (tmp, dir) = initialised();
    let out = afr(&dir)
        .args(["mcp", "proxy", "--upstream", "http://127.0.0.1:9/mcp"])
        .args(["--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--client-token"), "{err}");
    // With a token, it starts (and says whom it listens for).
    let f = token_file(tmp.path(), "t", "dave-token-0123456789abcdef");
    let mut d = Daemon::spawn(
        afr(&dir)
            .args(["mcp", "proxy", "--upstream", "http://127.0.0.1:9/mcp"])
            .args(["--listen", "0.0.0.0:0", "--client-token"])
            .arg(format!("dave={}", f.display())),
    );
    let up = d.wait_for(|l| l.contains("listening on").then_some(()));
    assert!(up.is_some(), "{}", d.stderr());
}
