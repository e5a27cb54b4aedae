//! The hook payloads Claude Code 2.1.332, Codex 0.171.0 and Gemini CLI 0.61.0 really sent
//! (captured by tests/agents/capture.py: a shell command, a file write, an edit, an MCP tool,
//! a failing command, and a call the capture hook blocked), replayed through `afr_hook::run`
//! into a real store: one event per call, with its exact command and effects.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use std::{path::Path, time::Duration};

use afr_client::{Door, NoServer, journal};
use afr_core::agent::Agent;
use afr_hook::{HookOptions, Phase, run};
use serde_json::Value;

fn fixture(agent: Agent) -> Vec<Value> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/{}.jsonl", agent.name()));
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const POLICY: &str = r#"
[[rule]]
id = "no-blocked-files"
args = { command = "*AFR_BLOCK*" }
verdict = "deny"
reason = "the test blocks it"
"#;

fn options(dir: &Path, agent: Agent) -> HookOptions {
    HookOptions {
        dir: dir.to_owned(),
        agent,
        policy: Some(afr_gateway::Policy::parse(POLICY.as_bytes()).unwrap()),
        fail_open: false,
        approval_timeout: Duration::from_secs(5),
        mcp_wrapped: Vec::new(),
        no_server: NoServer::OpenStore,
        recorder: None,
        context: afr_hook::Context::of_this_process(agent),
    }
}

fn store() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    afr_recorder::init(d.path(), [7u8; 20]).unwrap();
    d
}

fn events(dir: &Path) -> Vec<Value> {
    let mut door = Door::reader(dir).unwrap();
    door.events("seq >= 0")
        .unwrap()
        .into_iter()
        .map(|(_, e)| e.unwrap())
        .collect()
}

fn replay(agent: Agent) -> (tempfile::TempDir, Vec<Value>) {
    let d = store();
    let o = options(d.path(), agent);
    // The captured session's project directory, moved to a fresh one (the hooks read files to
    // compute diffs).
    let project = d.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let payloads = fixture(agent);
    let was = payloads[0]["cwd"].as_str().unwrap().to_owned();
    for p in payloads {
        let p: Value =
            serde_json::from_str(&p.to_string().replace(&was, project.to_str().unwrap())).unwrap();
        let phase = Phase::of(agent, p["hook_event_name"].as_str().unwrap());
        let a = run(&o, p.to_string().as_bytes());
        let blocked = p["tool_input"]["command"]
            .as_str()
            .is_some_and(|c| c.contains("AFR_BLOCK"));
        match phase {
            Phase::BeforeTool if blocked => {
                assert_eq!(a.code, 2, "{a:?}");
                assert!(a.stderr.contains("no-blocked-files"), "{a:?}");
            }
            _ => assert_eq!(a.code, 0, "{p} -> {a:?}"),
        }
        assert!(
            a.stdout.is_empty(),
            "hooks print nothing the CLI would take as context: {a:?}"
        );
        // What the CLI did after its post-tool hook: the file as the tool left it.
        if let (Phase::AfterTool, Some(path)) = (phase, p["tool_input"]["file_path"].as_str()) {
            let text = match p["tool_input"]["content"].as_str() {
                Some(c) => c.to_owned(),
                None => "alpha\ngamma\n".to_owned(),
            };
            std::fs::write(path, text).unwrap();
        }
    }
    let ev = events(d.path());
    (d, ev)
}

fn tool_events<'a>(ev: &'a [Value], tool: &str) -> Vec<&'a Value> {
    ev.iter().filter(|e| e["intent"]["tool"] == tool).collect()
}

/// What every CLI's replay must show.
fn common(agent: Agent, dir: &Path, ev: &[Value], shell: &str) {
    // The prompt, as an event; every call after it names it.
    let prompts = tool_events(ev, "user_prompt");
    assert_eq!(prompts.len(), 1, "{ev:#?}");
    assert_eq!(
        prompts[0]["intent"]["args"]["prompt"],
        "Run the scripted task."
    );
    let calls: Vec<&Value> = ev
        .iter()
        .filter(|e| e["intent"]["tool"] != "user_prompt")
        .collect();
    for c in &calls {
        assert_eq!(c["code_provenance"]["agent"], agent.name());
        assert_eq!(c["code_provenance"]["capture"]["strength"], "inline", "{c}");
        assert_eq!(c["code_provenance"]["capture"]["via"], agent.via());
        let src = &c["context_provenance"]["sources"][0];
        assert_eq!(src["kind"], "user_prompt", "{c}");
        assert_eq!(src["uri"], "afr:seq/0");
    }
    // Each call once: the shell command that worked, with its output.
    let ok: Vec<&&Value> = calls
        .iter()
        .filter(|e| e["execution"]["command"] == "echo hello-from-shell | tee shell-out.txt")
        .collect();
    assert_eq!(ok.len(), 1, "{calls:#?}");
    assert_eq!(ok[0]["intent"]["tool"], shell);
    assert_eq!(ok[0]["category"], "shell");
    assert!(ok[0]["effects"]["error"].is_null(), "{}", ok[0]);
    assert!(
        ok[0]["effects"]["return_value"]
            .to_string()
            .contains("hello-from-shell")
    );
    // The blocked call: recorded as denied, never as run.
    let denied: Vec<&&Value> = calls
        .iter()
        .filter(|e| {
            e["intent"]["args"]["command"]
                .as_str()
                .is_some_and(|c| c.contains("AFR_BLOCK"))
        })
        .collect();
    assert_eq!(denied.len(), 1);
    assert!(denied[0]["execution"].is_null());
    assert_eq!(denied[0]["policy_evaluation"][0]["verdict"], "deny");
    assert_eq!(
        denied[0]["policy_evaluation"][0]["guardrail"],
        "no-blocked-files"
    );
    assert!(
        denied[0]["effects"]["error"]
            .as_str()
            .unwrap()
            .contains("did not run")
    );
    // Nothing left waiting.
    assert_eq!(journal::waiting(dir), 0);
    assert!(
        journal::orphans(dir, journal::HOOK)
            .iter()
            .all(|(_, l)| l.is_empty())
    );
    assert!(
        std::fs::read_dir(dir.join(journal::HOOK))
            .unwrap()
            .next()
            .is_none()
    );
}

fn failing(ev: &[Value]) -> &Value {
    ev.iter()
        .find(|e| e["execution"]["command"] == "echo failing-out; echo failing-err >&2; exit 1")
        .unwrap()
}

#[test]
fn claude_code_sessions_replay_as_one_event_per_call() {
    let (d, ev) = replay(Agent::ClaudeCode);
    common(Agent::ClaudeCode, d.path(), &ev, "Bash");
    assert!(
        failing(&ev)["effects"]["error"]
            .as_str()
            .unwrap()
            .starts_with("Exit code 1")
    );
    let write = &tool_events(&ev, "Write")[0];
    assert_eq!(write["category"], "file");
    assert!(
        write["execution"]["command"]
            .as_str()
            .unwrap()
            .starts_with("write /")
    );
    assert!(
        write["execution"]["mutation"]["diff"]
            .as_str()
            .unwrap()
            .ends_with("+alpha\n+beta\n")
    );
    assert!(
        write["effects"]["state_changes"][0]
            .as_str()
            .unwrap()
            .starts_with("wrote ")
    );
    let edit = &tool_events(&ev, "Edit")[0];
    assert!(
        edit["execution"]["command"]
            .as_str()
            .unwrap()
            .starts_with("edit ")
    );
    assert!(
        edit["execution"]["mutation"]["diff"]
            .as_str()
            .unwrap()
            .ends_with("@@ -2,1 +2,1 @@\n-beta\n+gamma\n"),
        "{edit}"
    );
    let mcp = &tool_events(&ev, "mcp__fs__read_text_file")[0];
    assert_eq!(mcp["category"], "api");
    assert_eq!(mcp["execution"]["command"], "tools/call read_text_file");
    assert!(mcp["effects"]["return_value"].to_string().contains("gamma"));
}

#[test]
fn codex_sessions_replay_as_one_event_per_call() {
    let (d, ev) = replay(Agent::Codex);
    common(Agent::Codex, d.path(), &ev, "Bash");
    let patches = tool_events(&ev, "apply_patch");
    assert_eq!(patches.len(), 2);
    assert!(
        patches[0]["execution"]["mutation"]["patch"]
            .as_str()
            .unwrap()
            .contains("*** Add File: notes.txt")
    );
    assert_eq!(patches[0]["effects"]["state_changes"][0], "applied a patch");
    assert_eq!(patches[0]["code_provenance"]["model"], "gpt-5.5");
    // Codex reports a failing shell command's output only (no status): recorded as it said.
    assert!(
        failing(&ev)["effects"]["return_value"]
            .to_string()
            .contains("failing-err")
    );
}

#[test]
fn gemini_sessions_pair_calls_without_ids() {
    let (d, ev) = replay(Agent::Gemini);
    common(Agent::Gemini, d.path(), &ev, "run_shell_command");
    assert_eq!(failing(&ev)["effects"]["error"], "exit status 1");
    let w = &tool_events(&ev, "write_file")[0];
    assert!(
        w["execution"]["mutation"]["diff"]
            .as_str()
            .unwrap()
            .ends_with("+alpha\n+beta\n")
    );
    assert_eq!(tool_events(&ev, "replace").len(), 1);
    assert_eq!(
        tool_events(&ev, "mcp_fs_read_text_file")[0]["category"],
        "api"
    );
}

#[test]
fn identical_gemini_calls_pair_in_order_and_a_lost_after_is_recovered() {
    let d = store();
    let o = options(d.path(), Agent::Gemini);
    let call = |event: &str, out: &str| {
        serde_json::json!({"session_id": "g1", "cwd": "/tmp", "hook_event_name": event,
            "tool_name": "run_shell_command", "tool_input": {"command": "date"},
            "tool_response": {"llmContent": out}})
        .to_string()
    };
    for _ in 0..2 {
        assert_eq!(run(&o, call("BeforeTool", "").as_bytes()).code, 0);
    }
    assert_eq!(run(&o, call("AfterTool", "first").as_bytes()).code, 0);
    let ev = events(d.path());
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["effects"]["return_value"]["llmContent"], "first");
    // The second call's "after" never comes; its entry waits, named after the (live) agent,
    // here this test's parent process: not an orphan yet.
    assert_eq!(
        std::fs::read_dir(d.path().join(journal::HOOK))
            .unwrap()
            .count(),
        1
    );
    assert_eq!(journal::waiting(d.path()), 0);
}

#[test]
fn an_unreachable_recorder_blocks_unless_failing_open() {
    let d = tempfile::tempdir().unwrap(); // never initialised
    let mut o = options(d.path(), Agent::ClaudeCode);
    let pre = r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"t"}"#;
    let a = run(&o, pre.as_bytes());
    assert_eq!(a.code, 2);
    assert!(a.stderr.contains("could not be recorded"), "{a:?}");
    o.fail_open = true;
    let a = run(&o, pre.as_bytes());
    assert_eq!(a.code, 0);
    assert!(a.stderr.contains("--fail-open"), "{a:?}");
    // Unreadable input is a call that cannot be recorded too.
    o.fail_open = false;
    assert_eq!(run(&o, b"not json").code, 2);
}

#[test]
fn a_subagents_calls_name_the_call_that_started_it() {
    for agent in [Agent::ClaudeCode, Agent::Codex] {
        let d = store();
        let o = options(d.path(), agent);
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/fixtures/{}-subagent.jsonl", agent.name()));
        let payloads: Vec<Value> = std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let starter = payloads
            .iter()
            .find(|p| {
                p["hook_event_name"] == "PreToolUse"
                    && afr_core::agent::category(agent, p["tool_name"].as_str().unwrap())
                        == afr_core::Category::Delegation
            })
            .unwrap()
            .clone();
        for p in &payloads {
            assert_eq!(run(&o, p.to_string().as_bytes()).code, 0, "{p}");
        }
        let ev = events(d.path());
        let inner: Vec<&Value> = ev
            .iter()
            .filter(|e| e["intent"]["tool"] == "Bash")
            .collect();
        assert_eq!(inner.len(), 1, "{ev:#?}");
        let session = starter["session_id"].as_str().unwrap();
        let lane = inner[0]["lane"].as_str().unwrap();
        assert!(
            lane.starts_with(&format!("{session}/")) || lane.starts_with("h:"),
            "{lane}"
        );
        let by = inner[0]["delegation_provenance"]["delegating_agent"]
            .as_str()
            .unwrap();
        assert!(
            by.ends_with(&format!(
                "call {} {}",
                starter["tool_name"].as_str().unwrap(),
                starter["tool_use_id"].as_str().unwrap()
            )),
            "{by}"
        );
        assert!(
            inner[0]["delegation_provenance"]["on_behalf_of"]
                .as_str()
                .unwrap()
                .starts_with("subagent ")
        );
        let started = tool_events(&ev, starter["tool_name"].as_str().unwrap());
        assert_eq!(started[0]["category"], "delegation");
    }
}

#[test]
fn a_call_refused_at_the_permission_prompt_is_recorded_as_not_run() {
    let d = store();
    let o = options(d.path(), Agent::ClaudeCode);
    let call = |event: &str| {
        serde_json::json!({"session_id": "p1", "cwd": "/tmp", "hook_event_name": event,
            "tool_name": "Bash", "tool_input": {"command": "git push --force"},
            "tool_use_id": "toolu_p", "reason": "the user said no"})
        .to_string()
    };
    assert_eq!(run(&o, call("PreToolUse").as_bytes()).code, 0);
    assert_eq!(run(&o, call("PermissionDenied").as_bytes()).code, 0);
    let ev = events(d.path());
    assert_eq!(ev.len(), 1);
    assert!(ev[0]["execution"].is_null());
    assert_eq!(
        ev[0]["effects"]["error"],
        "refused at claude-code's permission prompt: the user said no; the call did not run"
    );
    assert!(
        std::fs::read_dir(d.path().join(journal::HOOK))
            .unwrap()
            .next()
            .is_none()
    );
}

#[test]
fn wrapped_mcp_servers_are_left_to_the_gateway_even_with_underscores() {
    let d = store();
    let mut o = options(d.path(), Agent::Gemini);
    o.mcp_wrapped = vec!["my_fs".into()];
    let call = |event: &str, tool: &str, server: &str| {
        serde_json::json!({"session_id": "m1", "cwd": "/tmp", "hook_event_name": event,
            "tool_name": tool, "tool_input": {"path": "/x"},
            "mcp_context": {"server_name": server, "tool_name": "read_text_file"}})
        .to_string()
    };
    for e in ["BeforeTool", "AfterTool"] {
        assert_eq!(
            run(&o, call(e, "mcp_my_fs_read_text_file", "my_fs").as_bytes()).code,
            0
        );
        // Another server's tools are the hook's to record.
        assert_eq!(
            run(&o, call(e, "mcp_web_fetch_page", "web").as_bytes()).code,
            0
        );
    }
    let ev = events(d.path());
    assert_eq!(ev.len(), 1, "{ev:#?}");
    assert_eq!(ev[0]["intent"]["tool"], "mcp_web_fetch_page");
}

#[test]
fn failing_open_never_lets_an_escalated_call_run_unapproved() {
    let d = tempfile::tempdir().unwrap(); // never initialised: nothing can be recorded
    let mut o = options(d.path(), Agent::ClaudeCode);
    o.policy = Some(
        afr_gateway::Policy::parse(
            b"[[rule]]\nid = \"sql\"\ntool = \"Bash\"\nverdict = \"escalate\"\n",
        )
        .unwrap(),
    );
    o.fail_open = true;
    let pre = r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"psql"},"tool_use_id":"t"}"#;
    assert_eq!(run(&o, pre.as_bytes()).code, 2);
}

#[test]
fn a_server_the_payload_names_decides_what_is_left_to_the_gateway() {
    let d = store();
    let mut o = options(d.path(), Agent::Gemini);
    o.mcp_wrapped = vec!["fs".into()];
    // `mcp_fs_admin_delete` starts like a tool of `fs`, but the payload says `fs_admin`.
    let call = |event: &str| {
        serde_json::json!({"session_id": "m2", "cwd": "/tmp", "hook_event_name": event,
            "tool_name": "mcp_fs_admin_delete", "tool_input": {"path": "/x"},
            "mcp_context": {"server_name": "fs_admin", "tool_name": "delete"}})
        .to_string()
    };
    for e in ["BeforeTool", "AfterTool"] {
        assert_eq!(run(&o, call(e).as_bytes()).code, 0);
    }
    let ev = events(d.path());
    assert_eq!(ev.len(), 1, "{ev:#?}");
    assert_eq!(ev[0]["execution"]["target"], "mcp server fs_admin");
}
