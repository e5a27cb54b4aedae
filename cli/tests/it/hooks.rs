//! `afr hook` and its thin client `afr-hook`, as the coding-agent CLIs run them: a new process
//! per event with the hook JSON on standard input (payloads shaped as Claude Code 2.1.332
//! sends them: hook/tests/fixtures/). Through a real `afr serve`, without one (on-demand
//! server), escalations decided by `afr approve` / `afr reject` (signed by a real
//! `ssh-keygen` key), and an agent killed mid-call.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use super::{
    afr, initialised,
    mcp::events,
    serve::{serve, terminate},
};

fn thin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_afr-hook"))
}

fn pre(session: &str, id: &str, command: &str) -> Value {
    json!({"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
        "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": command, "description": "test"}, "tool_use_id": id})
}

fn post(session: &str, id: &str, command: &str, stdout: &str) -> Value {
    let mut v = pre(session, id, command);
    v["hook_event_name"] = json!("PostToolUse");
    v["tool_response"] =
        json!({"stdout": stdout, "stderr": "", "interrupted": false, "isImage": false});
    v["duration_ms"] = json!(12);
    v
}

/// `program --dir dir hook claude-code extra…` with `input` on its standard input.
fn spawn_hook(program: &Path, dir: &Path, extra: &[&str], input: &Value) -> Child {
    let mut c = Command::new(program)
        .arg("--dir")
        .arg(dir)
        .args(["hook", "claude-code"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    c
}

fn hook(program: &Path, dir: &Path, extra: &[&str], input: &Value) -> Output {
    spawn_hook(program, dir, extra, input)
        .wait_with_output()
        .unwrap()
}

fn journaled(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("hook-journal")).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
            .count()
    })
}

fn policy(t: &Path) -> PathBuf {
    let p = t.join("policy.toml");
    std::fs::write(
        &p,
        r#"
[[rule]]
id = "prod-sql-needs-a-human"
tool = "Bash"
args = { command = "psql*" }
verdict = "escalate"
reason = "schema changes in production need a person"

[[rule]]
id = "no-rm-rf"
tool = "Bash"
args = { command = "rm -rf*" }
verdict = "deny"
reason = "never"
"#,
    )
    .unwrap();
    p
}

#[test]
fn the_thin_client_records_each_call_once_through_afr_serve() {
    let (tmp, dir) = initialised();
    let server = serve(&dir, &[]);
    let pol = policy(tmp.path());
    let p = ["--policy", pol.to_str().unwrap()];
    let out = hook(&thin(), &dir, &p, &pre("s1", "toolu_1", "ls -la"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty());
    // Durable before the call runs: its journal entry is there between the two hooks.
    assert_eq!(journaled(&dir), 1);
    let out = hook(
        &thin(),
        &dir,
        &p,
        &post("s1", "toolu_1", "ls -la", "total 0"),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(journaled(&dir), 0);
    // Denied: exit 2 with the reason, recorded, never journaled as running.
    let out = hook(&thin(), &dir, &p, &pre("s1", "toolu_2", "rm -rf /"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("denied by policy rule `no-rm-rf`"));
    // Without the thin client (`afr hook` itself), the same.
    let out = hook(
        Path::new(env!("CARGO_BIN_EXE_afr")),
        &dir,
        &p,
        &pre("s1", "toolu_3", "date"),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = hook(
        Path::new(env!("CARGO_BIN_EXE_afr")),
        &dir,
        &p,
        &post("s1", "toolu_3", "date", "today"),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    terminate(server);
    let ev = events(&dir);
    assert_eq!(ev.len(), 3, "{ev:#?}");
    assert_eq!(ev[0]["execution"]["command"], "ls -la");
    assert_eq!(ev[0]["effects"]["return_value"]["stdout"], "total 0");
    assert_eq!(ev[0]["effects"]["external_response"]["duration_ms"], 12);
    assert_eq!(
        ev[0]["code_provenance"]["capture"]["via"],
        "hook:claude-code"
    );
    assert_eq!(ev[0]["lane"], "s1");
    assert_eq!(ev[1]["policy_evaluation"][0]["verdict"], "deny");
    assert!(ev[1]["execution"].is_null());
    assert_eq!(ev[2]["execution"]["command"], "date");
}

#[test]
fn without_a_server_the_thin_client_falls_back_to_afr_hook() {
    let (_tmp, dir) = initialised();
    let out = hook(&thin(), &dir, &[], &pre("s2", "toolu_9", "uname"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = hook(&thin(), &dir, &[], &post("s2", "toolu_9", "uname", "Linux"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let ev = events(&dir);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["effects"]["return_value"]["stdout"], "Linux");
    // A store that does not exist: blocked, with the reason, unless failing open.
    let missing = dir.with_extension("missing");
    let out = hook(&thin(), &missing, &[], &pre("s2", "toolu_10", "uname"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("could not be recorded"));
    let out = hook(
        &thin(),
        &missing,
        &["--fail-open"],
        &pre("s2", "toolu_11", "uname"),
    );
    assert_eq!(out.status.code(), Some(0));
}

fn held(dir: &Path) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = afr(dir).args(["approvals", "--json"]).output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(json!([]));
        if let Some(c) = v.as_array().and_then(|a| a.first()) {
            return c.clone();
        }
        assert!(Instant::now() < deadline, "no call was held");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The paper's scenario: a Claude Code session runs `psql … DROP SCHEMA` through Bash under an
/// escalate rule; a person approves it with a signed approval; one more is rejected.
#[test]
fn an_escalated_drop_schema_waits_for_a_signed_approval() {
    let (tmp, dir) = initialised();
    let server = serve(&dir, &[]);
    let pol = policy(tmp.path());
    let p = ["--policy", pol.to_str().unwrap()];
    let drop = "psql -h prod-db -c 'DROP SCHEMA analytics CASCADE'";
    let child = spawn_hook(&thin(), &dir, &p, &pre("s3", "toolu_20", drop));
    let c = held(&dir);
    assert_eq!(c["tool"], "Bash");
    assert_eq!(c["rule"], "prod-sql-needs-a-human");
    let prompt = c["prompt"].as_str().unwrap();
    assert!(prompt.contains(&format!("runs: {drop}")), "{prompt}");
    let id = c["id"].as_str().unwrap().to_owned();
    // Signed with an SSH key made by the real ssh-keygen.
    let key = tmp.path().join("dba");
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "dba", "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen (scripts/setup.sh installs openssh-client)");
    assert!(st.success());
    let out = afr(&dir)
        .args(["approve", &id, "--as", "dba@acme.example", "--ssh-key"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "approved: the call may run: {out:?}"
    );
    let out = hook(
        &thin(),
        &dir,
        &p,
        &post("s3", "toolu_20", drop, "DROP SCHEMA"),
    );
    assert_eq!(out.status.code(), Some(0));
    // A second one, rejected: blocked with the reason, recorded.
    let child = spawn_hook(&thin(), &dir, &p, &pre("s3", "toolu_21", drop));
    let id = held(&dir)["id"].as_str().unwrap().to_owned();
    assert!(
        afr(&dir)
            .args(["reject", &id, "--as", "cto", "--reason", "not today"])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("rejected by cto: not today"));
    terminate(server);
    let ev = events(&dir);
    assert_eq!(ev.len(), 2, "{ev:#?}");
    let ran = &ev[0];
    assert_eq!(ran["execution"]["command"], drop);
    assert_eq!(
        ran["policy_evaluation"][0]["guardrail"],
        "prod-sql-needs-a-human"
    );
    assert_eq!(ran["policy_evaluation"][0]["verdict"], "escalate");
    assert_eq!(ran["human_approval"]["decision"], "approved");
    assert_eq!(ran["human_approval"]["signature"]["scheme"], "ssh");
    assert_eq!(ran["effects"]["return_value"]["stdout"], "DROP SCHEMA");
    let refused = &ev[1];
    assert_eq!(refused["human_approval"]["decision"], "rejected");
    assert!(refused["execution"].is_null());
    // The export verifies, approvals and all.
    let export = dir.with_extension("afrlog");
    super::ok(afr(&dir).args(["export", "--out"]).arg(&export));
    let out = Command::new(env!("CARGO_BIN_EXE_afr"))
        .args(["verify-export", "--json"])
        .arg(&export)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(v["outcome"], "tampered", "{v}");
    assert_eq!(v["checks"].as_object().map(|c| c.is_empty()), Some(false));
}

/// The agent is killed while its call runs: the call's "after" never comes; once the agent
/// is gone the call is recorded as outcome unknown.
#[test]
fn a_call_whose_agent_was_killed_is_recovered_as_outcome_unknown() {
    let (_tmp, dir) = initialised();
    let server = serve(&dir, &[]);
    // A stand-in agent process (not a shell, so the hook names it as its agent): runs its
    // pre-tool hook, then "runs the tool" until killed.
    let script = format!(
        "import subprocess, sys, time\n\
         p = subprocess.run([{thin:?}, '--dir', {dir:?}, 'hook', 'claude-code'], input={input:?}.encode())\n\
         print(p.returncode, flush=True)\n\
         time.sleep(600)\n",
        thin = thin().display().to_string(),
        dir = dir.display().to_string(),
        input = pre("s4", "toolu_30", "sleep 600").to_string(),
    );
    let mut agent = Command::new("python3")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(agent.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "0", "the pre-tool hook allowed the call");
    assert_eq!(journaled(&dir), 1);
    // While the agent lives, its call is not an orphan.
    let st = afr(&dir).arg("recover").output().unwrap();
    assert!(st.status.success());
    assert!(events(&dir).is_empty());
    agent.kill().unwrap();
    agent.wait().unwrap();
    let out = afr(&dir).args(["status"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("wait in a journal")
            || String::from_utf8_lossy(&out.stdout).contains("wait in a journal"),
        "{out:?}"
    );
    super::ok(afr(&dir).arg("recover"));
    terminate(server);
    let ev = events(&dir);
    assert_eq!(ev.len(), 1, "{ev:#?}");
    assert_eq!(ev[0]["execution"]["command"], "sleep 600");
    let err = ev[0]["effects"]["error"].as_str().unwrap();
    assert!(err.starts_with("outcome unknown: the agent (pid "), "{err}");
    assert_eq!(journaled(&dir), 0);
}
