//! The mapping of real log records: `otlp/tests/data/<cli>-logs.json` are the tool records
//! (and two others) of the OTLP/JSON bodies Claude Code 2.1.332, Codex 0.171.0 and Gemini CLI
//! 0.61.0 sent in one captured session each (tests/agents/capture.py), verbatim.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use std::collections::HashSet;

use opentelemetry_proto::tonic::{
    common::v1::AnyValue,
    logs::v1::{ResourceLogs, ScopeLogs},
    resource::v1::Resource,
};

use super::*;
use crate::map::string_attr;

fn export(cli: &str) -> ExportLogsServiceRequest {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/data/{cli}-logs.json"));
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn results(records: &[ToolRecord]) -> Vec<&ToolResult> {
    records
        .iter()
        .filter_map(|r| match r {
            ToolRecord::Result(t) => Some(&**t),
            ToolRecord::Decision(_) => None,
        })
        .collect()
}

fn decisions(records: &[ToolRecord]) -> Vec<&Decision> {
    records
        .iter()
        .filter_map(|r| match r {
            ToolRecord::Decision(d) => Some(&**d),
            ToolRecord::Result(_) => None,
        })
        .collect()
}

fn json(ev: &EventInput) -> Value {
    let v = serde_json::to_value(ev).unwrap();
    // Every event is one the recorder takes.
    EventInput::from_json(
        &serde_json::to_vec(&v).unwrap(),
        afr_core::event::DEFAULT_MAX_EVENT_BYTES,
    )
    .unwrap()
    .validate()
    .unwrap();
    v
}

fn by_tool<'a>(rs: &[&'a ToolResult], tool: &str) -> Vec<&'a ToolResult> {
    rs.iter()
        .copied()
        .filter(|r| r.event.intent.tool == tool)
        .collect()
}

fn sources(v: &Value) -> Vec<(String, String)> {
    v["context_provenance"]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["uri"].as_str().unwrap().to_owned(),
                s["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn claude_code_tool_records_of_a_real_session() {
    let (records, summary) = map_logs(&export("claude-code"));
    assert_eq!(summary.records, 15);
    assert_eq!(summary.results["claude-code"], 6);
    assert_eq!(summary.decisions, 7);
    assert_eq!(summary.malformed, 0);
    assert_eq!(summary.ignored["claude_code.user_prompt"], 1);
    assert_eq!(summary.ignored["claude_code.api_request"], 1);
    let session = "2d66b4e6-1f92-4999-960d-8c0e65c24600";
    let rs = results(&records);
    for r in &rs {
        assert_eq!(r.agent, Agent::ClaudeCode);
        assert_eq!(r.session, session);
        assert!(matches!(&r.call, CallName::Id(c) if c.starts_with("toolu_")));
    }

    let bash = json(&by_tool(&rs, "Bash")[0].event);
    assert_eq!(bash["category"], "shell");
    assert_eq!(bash["lane"], session);
    assert_eq!(
        bash["intent"]["args"],
        json!({"command": "echo hello-from-shell | tee shell-out.txt", "description": "scripted shell command"})
    );
    assert_eq!(
        bash["execution"]["command"],
        "echo hello-from-shell | tee shell-out.txt"
    );
    assert!(bash["effects"].get("error").is_none(), "{bash}");
    assert_eq!(
        bash["effects"]["external_response"],
        json!({"duration_ms": 46, "result_bytes": 16})
    );
    // The record is made at the end: the event is timed at the start.
    assert_eq!(bash["timestamp_us"], 1_796_186_844_732_000_u64 - 46_000);
    assert_eq!(
        bash["code_provenance"],
        json!({"agent": "claude-code", "agent_version": "2.1.332",
               "capture": {"strength": "self_reported", "via": "otlp:logs"}})
    );
    let src = sources(&bash);
    assert_eq!(
        src[0],
        (
            "otlp:claude-code (com.anthropic.claude_code.events 2.1.332)".into(),
            "self_reported_log".into()
        )
    );
    assert!(src.contains(&(
        "tool_call:toolu_51a7a419c14a4d13971d58a2".into(),
        "tool_call_id".into()
    )));
    assert!(src.contains(&(
        "prompt:aefd5caa-1a07-419f-9d4b-133deabce004".into(),
        "prompt_id".into()
    )));
    // With traces on, a result carries the turn's span: the TRACEPARENT its hooks get.
    assert!(src.contains(&(
        "traceparent:00-2e304a7773a3fd03fef79e6d07aff5a3-51a3a8b81d17c035-01".into(),
        "otel_log".into()
    )));

    // An MCP call is logged as `mcp_tool`: named as the hook names it.
    let mcp = json(&by_tool(&rs, "mcp__fs__read_text_file")[0].event);
    assert_eq!(mcp["category"], "api");
    assert_eq!(mcp["execution"]["command"], "tools/call read_text_file");
    assert_eq!(mcp["execution"]["target"], "mcp server fs");
    assert_eq!(
        mcp["intent"]["args"]["path"],
        "/tmp/afr-agents-capture/claude-code/full/project/notes.txt"
    );
    assert!(rs.iter().all(|r| r.event.intent.tool != "mcp_tool"));

    let write = json(&by_tool(&rs, "Write")[0].event);
    let path = "/tmp/afr-agents-capture/claude-code/full/project/notes.txt";
    assert_eq!(write["category"], "file");
    assert_eq!(write["execution"]["command"], format!("write {path}"));
    assert_eq!(
        write["execution"]["mutation"]["requested"]["content"],
        "alpha\nbeta\n"
    );
    assert_eq!(
        write["effects"]["state_changes"],
        json!([format!("wrote {path}")])
    );
    let edit = json(&by_tool(&rs, "Edit")[0].event);
    assert_eq!(edit["execution"]["command"], format!("edit {path}"));

    let failed = json(&by_tool(&rs, "Bash")[1].event);
    assert_eq!(
        failed["effects"]["error"],
        "ShellError: Shell command failed"
    );
    assert_eq!(
        failed["execution"]["command"],
        "echo failing-out; echo failing-err >&2; exit 1"
    );

    // Decisions: six accepted by the configuration, the blocked call rejected by the hook.
    let ds = decisions(&records);
    assert_eq!(ds.iter().filter(|d| !d.rejects()).count(), 6);
    let rejected: Vec<_> = ds.iter().filter(|d| d.rejects()).collect();
    assert_eq!(rejected.len(), 1);
    let d = rejected[0];
    assert_eq!(d.evaluation.guardrail, "claude-code:hook");
    assert_eq!(d.call, "toolu_39fcfafb4d044807b73e23aa");
    assert!(
        rs.iter().all(|r| r.call != CallName::Id(d.call.clone())),
        "no result follows"
    );
    let ev = json(&d.event);
    assert!(ev.get("execution").is_none(), "{ev}");
    assert_eq!(
        ev["intent"]["args"],
        json!({"command": "touch blocked.txt # AFR_BLOCK_EXIT2"})
    );
    assert_eq!(ev["policy_evaluation"][0]["verdict"], "deny");
    assert!(
        ev["effects"]["error"]
            .as_str()
            .unwrap()
            .starts_with("rejected by hook (claude-code tool_decision: reject (hook"),
        "{ev}"
    );
}

#[test]
fn decisions_fold_into_their_results() {
    let (records, _) = map_logs(&export("claude-code"));
    let rs = results(&records);
    let ds = decisions(&records);
    let bash = by_tool(&rs, "Bash")[0];
    let CallName::Id(id) = &bash.call else {
        panic!("an id")
    };
    let allow = ds.iter().find(|d| &d.call == id).unwrap();
    let mut ev = bash.event.clone();
    fold(&mut ev, allow);
    fold(&mut ev, allow);
    let v = json(&ev);
    assert_eq!(
        v["policy_evaluation"],
        json!([{"guardrail": "claude-code:config", "verdict": "allow",
                "reason": "accept (config, permission mode bypassPermissions)"}])
    );
    assert!(v["execution"].is_object());
    // A rejection: the call did not run, whatever the result said.
    let mut deny = (*allow).clone();
    deny.evaluation.verdict = GuardrailVerdict::Deny;
    let mut ev = bash.event.clone();
    fold(&mut ev, &deny);
    let v = json(&ev);
    assert!(v.get("execution").is_none(), "{v}");
    assert!(
        v["effects"]["error"]
            .as_str()
            .unwrap()
            .contains("the call did not run")
    );
}

#[test]
fn codex_tool_records_of_a_real_session() {
    let (records, summary) = map_logs(&export("codex"));
    assert_eq!(summary.records, 12);
    assert_eq!(summary.results["codex"], 6);
    assert_eq!(summary.decisions, 4);
    assert_eq!(summary.malformed, 0);
    assert_eq!(summary.ignored.values().sum::<u64>(), 2, "{summary:?}");
    let rs = results(&records);
    for r in &rs {
        assert_eq!(r.session, "01a23514-82f7-79e2-9e09-f0c49abfaae5");
        assert!(matches!(&r.call, CallName::Id(c) if c.starts_with("call_")));
    }
    let shell = json(&by_tool(&rs, "exec_command")[0].event);
    assert_eq!(shell["category"], "shell");
    assert_eq!(
        shell["intent"]["args"],
        json!({"cmd": "echo hello-from-shell | tee shell-out.txt"})
    );
    assert_eq!(
        shell["execution"]["command"],
        "echo hello-from-shell | tee shell-out.txt"
    );
    assert!(
        shell["effects"]["return_value"]
            .as_str()
            .unwrap()
            .ends_with("hello-from-shell\n")
    );
    assert!(shell["effects"].get("error").is_none());
    // `timeUnixNano` is 0: the observed time, less the duration.
    assert_eq!(shell["timestamp_us"], 1_796_186_866_900_495_u64 - 47_000);
    assert_eq!(shell["code_provenance"]["model"], "gpt-5.5");
    assert_eq!(shell["code_provenance"]["agent_version"], "0.171.0");
    // Codex says `success: true` of a command that exited 1.
    let failed = json(&by_tool(&rs, "exec_command")[1].event);
    assert_eq!(failed["effects"]["error"], "exit status 1");
    let patch = json(&by_tool(&rs, "apply_patch")[0].event);
    assert_eq!(patch["category"], "file");
    assert_eq!(patch["execution"]["command"], "apply_patch");
    assert!(
        patch["execution"]["mutation"]["patch"]
            .as_str()
            .unwrap()
            .starts_with("*** Begin Patch\n*** Add File: notes.txt")
    );
    assert_eq!(
        patch["effects"]["state_changes"],
        json!(["applied a patch"])
    );
    // The MCP call as the hook names it: namespace `mcp__fs`, tool `read_text_file`.
    let mcp = json(&by_tool(&rs, "mcp__fs__read_text_file")[0].event);
    assert_eq!(mcp["execution"]["target"], "mcp server fs");
    assert_eq!(by_tool(&rs, "tool_search").len(), 1);
    let ds = decisions(&records);
    assert!(
        ds.iter()
            .all(|d| !d.rejects() && d.evaluation.guardrail == "codex:config")
    );
    assert!(
        ds.iter()
            .all(|d| rs.iter().any(|r| r.call == CallName::Id(d.call.clone())))
    );
}

#[test]
fn gemini_cli_tool_records_of_a_real_session() {
    let (records, summary) = map_logs(&export("gemini"));
    assert_eq!(summary.records, 8);
    assert_eq!(summary.results["gemini"], 6);
    assert_eq!(summary.decisions, 0);
    assert_eq!(summary.ignored["gemini_cli.hook_call"], 1);
    assert_eq!(summary.ignored["gemini_cli.user_prompt"], 1);
    let rs = results(&records);
    // The arguments as the hook got them (BeforeTool `tool_input`), so the same content id.
    let hook_args = json!({"command": "echo hello-from-shell | tee shell-out.txt",
                           "description": "scripted shell command"});
    let shell = by_tool(&rs, "run_shell_command")[0];
    assert_eq!(shell.event.intent.args, hook_args);
    let CallName::Unnamed { content, record } = &shell.call else {
        panic!("no id")
    };
    assert_eq!(
        content,
        &afr_core::agent::content_id("run_shell_command", &hook_args)
    );
    assert_eq!(record.len(), 32);
    let v = json(&shell.event);
    assert_eq!(
        v["execution"]["command"],
        "echo hello-from-shell | tee shell-out.txt"
    );
    assert_eq!(v["policy_evaluation"][0]["guardrail"], "gemini:approval");
    // Gemini CLI's `service.version` is Node's.
    assert!(v["code_provenance"].get("agent_version").is_none(), "{v}");
    let names: HashSet<&String> = rs
        .iter()
        .map(|r| match &r.call {
            CallName::Unnamed { record, .. } => record,
            CallName::Id(_) => panic!("no id"),
        })
        .collect();
    assert_eq!(names.len(), 6, "each record its own hash");
    let failed = json(&by_tool(&rs, "run_shell_command")[1].event);
    assert_eq!(failed["effects"]["error"], "exit status 1");
    // The call the hook blocked: logged, not run.
    let blocked = json(&by_tool(&rs, "run_shell_command")[2].event);
    assert!(blocked.get("execution").is_none(), "{blocked}");
    assert_eq!(
        blocked["policy_evaluation"][0]["guardrail"],
        "gemini:policy"
    );
    assert_eq!(blocked["policy_evaluation"][0]["verdict"], "deny");
    assert_eq!(
        blocked["effects"]["error"],
        "policy_violation: Tool execution blocked: blocked by the capture hook (AFR_BLOCK_EXIT2); the call did not run"
    );
    let mcp = json(&by_tool(&rs, "mcp_fs_read_text_file")[0].event);
    assert_eq!(mcp["category"], "api");
    assert_eq!(mcp["execution"]["command"], "tools/call read_text_file");
}

fn one(resource: Vec<KeyValue>, r: LogRecord) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource {
                attributes: resource,
                ..Default::default()
            }),
            scope_logs: vec![ScopeLogs {
                log_records: vec![r],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn record(body: Option<&str>, attrs: &[(&str, &str)]) -> LogRecord {
    LogRecord {
        time_unix_nano: 1_700_000_000_000_000_000,
        body: body.map(|b| AnyValue {
            value: Some(Av::StringValue(b.into())),
        }),
        attributes: attrs.iter().map(|(k, v)| string_attr(k, v)).collect(),
        ..Default::default()
    }
}

#[test]
fn names_unknown_records_and_records_that_cannot_be_mapped() {
    let claude = vec![string_attr("service.name", "claude-code")];
    let result = [
        ("event.name", "tool_result"),
        ("session.id", "s"),
        ("tool_use_id", "t1"),
        ("tool_name", "Bash"),
        ("success", "true"),
    ];
    // An unprefixed `event.name` and no body: the resource names the CLI.
    let (rs, s) = map_logs(&one(claude.clone(), record(None, &result)));
    assert_eq!((rs.len(), s.results["claude-code"]), (1, 1));
    // No session id: rejected, counted.
    let (rs, s) = map_logs(&one(claude.clone(), record(None, &result[..1])));
    assert_eq!((rs.len(), s.malformed), (0, 1));
    // No CLI: other.
    let (rs, s) = map_logs(&one(Vec::new(), record(Some("hello"), &[])));
    assert_eq!((rs.len(), s.ignored["other"]), (0, 1));
    // A decision of no known meaning: counted, not evidence either way.
    let d = [
        ("event.name", "codex.tool_decision"),
        ("conversation.id", "s"),
        ("call_id", "c"),
        ("tool_name", "exec_command"),
        ("decision", "maybe"),
    ];
    let (rs, s) = map_logs(&one(Vec::new(), record(None, &d)));
    assert_eq!(rs.len(), 0);
    assert_eq!(s.ignored["codex.tool_decision (unknown decision)"], 1);
    // A hostile size: arguments over the cap are their hash, strings are cut.
    let big = format!("{{\"command\": \"{}\"}}", "x".repeat(400_000));
    let mut r = record(None, &result[..4]);
    r.attributes.push(string_attr("tool_input", &big));
    r.attributes
        .push(string_attr("error", &"e".repeat(100_000)));
    r.attributes.push(string_attr("success", "false"));
    let (rs, _) = map_logs(&one(claude, r));
    let v = json(&results(&rs)[0].event);
    assert_eq!(v["intent"]["args"]["truncated"], true);
    assert!(v["execution"]["command"].as_str().unwrap().len() < 5000);
}
