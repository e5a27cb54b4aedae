//! A tool call seen by a hook, as an AFR event: what each field holds for the CLIs' native
//! tools (`docs/coding-agents.md` has the table).

use std::path::{Path, PathBuf};

use afr_core::{
    Category, EventInput,
    event::{
        Capture, CodeProvenance, ContextProvenance, ContextSource, DelegationProvenance, Effects,
        Execution, GuardrailEvaluation,
    },
};
use afr_gateway::policy::Evaluation;
use serde_json::{Value, json};

use afr_core::agent::{Agent, category, lane};

use crate::{HookInput, session::State};

/// Arguments, diffs and results larger than this are recorded as their size and hash.
pub const MAX_RECORDED: usize = 256 * 1024;
/// Files larger than this are not read to compute a write's or an edit's diff.
pub const MAX_DIFFED_FILE: u64 = 4 << 20;

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// `v` itself, or `{truncated, bytes, sha256}` when its JSON text is over [`MAX_RECORDED`].
pub fn capped(v: Value) -> Value {
    let text = v.to_string();
    if text.len() > MAX_RECORDED {
        json!({"truncated": true, "bytes": text.len(), "sha256": sha256(text.as_bytes())})
    } else {
        v
    }
}

fn str_at<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| v.get(*k).and_then(Value::as_str))
}

fn resolve(cwd: Option<&str>, path: &str) -> PathBuf {
    let p = Path::new(path);
    match cwd {
        Some(c) if p.is_relative() => Path::new(c).join(p),
        _ => p.to_owned(),
    }
}

/// The file as it is now (before the write), if small enough to diff; `Some("")` for a file
/// that does not exist.
fn current(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(String::new()),
        Err(_) => None,
        Ok(m) if m.len() > MAX_DIFFED_FILE => None,
        Ok(_) => std::fs::read_to_string(path).ok(),
    }
}

/// A unified diff of `old` to `new` for `path`: the lines between their common first and last
/// lines, as one hunk (no context lines). Empty when they are equal.
pub fn diff(path: &str, old: &str, new: &str) -> String {
    use std::fmt::Write as _;
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (gone, came) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    if gone.is_empty() && came.is_empty() {
        return String::new();
    }
    let start = |n: usize| if n == 0 { prefix } else { prefix + 1 };
    let mut s = format!(
        "--- a/{path}\n+++ b/{path}\n@@ -{},{} +{},{} @@\n",
        start(gone.len()),
        gone.len(),
        start(came.len()),
        came.len()
    );
    for l in gone {
        let _ = writeln!(s, "-{l}");
    }
    for l in came {
        let _ = writeln!(s, "+{l}");
    }
    s
}

/// `file` with `old` replaced by `new` (every occurrence with `all`), if the edit can be
/// replayed within bounds: `old` not empty and present, and the result no larger than
/// [`MAX_DIFFED_FILE`] (a hostile edit must not make the hook, or `afr serve`, build gigabytes).
fn replaced(file: &str, old: &str, new: &str, all: bool) -> Option<String> {
    if old.is_empty() || !file.contains(old) {
        return None;
    }
    let n = if all { file.matches(old).count() } else { 1 };
    let size = file.len() - n * old.len() + n.checked_mul(new.len())?;
    if u64::try_from(size).ok()? > MAX_DIFFED_FILE {
        return None;
    }
    Some(if all {
        file.replace(old, new)
    } else {
        file.replacen(old, new, 1)
    })
}

/// A file change's mutation: its path and diff (capped), or its size and hash when the file
/// could not be read.
fn file_mutation(path: &str, before: Option<&str>, after: Option<String>) -> Value {
    match (before, after) {
        (Some(b), Some(a)) => {
            let d = diff(path, b, &a);
            if d.len() > MAX_RECORDED {
                json!({"path": path, "diff": {"truncated": true, "bytes": d.len(), "sha256": sha256(d.as_bytes())}})
            } else {
                json!({"path": path, "diff": d})
            }
        }
        (_, Some(a)) => {
            json!({"path": path, "content_bytes": a.len(), "content_sha256": sha256(a.as_bytes())})
        }
        _ => json!({"path": path}),
    }
}

/// What a tool call does, concretely: the exact shell command; for a file write or edit, the
/// path and the diff against the file as it is when the hook runs (before the call); for an
/// MCP tool, `tools/call` on the server; otherwise the tool with its arguments.
pub fn execution(agent: Agent, tool: &str, input: &Value, cwd: Option<&str>) -> Execution {
    let target = cwd.map(str::to_owned);
    if let Some((server, t)) = agent.mcp_tool(tool) {
        return Execution {
            command: format!("tools/call {t}"),
            target: Some(format!("mcp server {server}")),
            mutation: capped(input.clone()),
        };
    }
    match category(agent, tool) {
        Category::Shell => {
            if let Some(c) = afr_core::agent::shell_command(input) {
                let dir = str_at(input, &["workdir", "dir_path", "directory", "cwd"])
                    .map(|d| resolve(cwd, d).display().to_string());
                return Execution {
                    command: c,
                    target: dir.or(target),
                    mutation: Value::Null,
                };
            }
        }
        Category::File => {
            if let Some(path) = str_at(input, &["file_path", "path", "absolute_path"]) {
                let full = resolve(cwd, path);
                let shown = full.display().to_string();
                let before = current(&full);
                let after = match tool {
                    "Write" | "write_file" => str_at(input, &["content"]).map(str::to_owned),
                    "Edit" | "replace" | "edit" => {
                        let old = str_at(input, &["old_string", "old_str"]);
                        let new = str_at(input, &["new_string", "new_str"]);
                        let all = input.get("replace_all").and_then(Value::as_bool) == Some(true)
                            || input
                                .get("expected_replacements")
                                .and_then(Value::as_u64)
                                .is_some_and(|n| n > 1);
                        match (before.as_deref(), old, new) {
                            (Some(b), Some(o), Some(n)) if !o.is_empty() && b.contains(o) => {
                                replaced(b, o, n, all)
                            }
                            (Some(""), Some(""), Some(n)) => Some(n.to_owned()),
                            _ => None,
                        }
                    }
                    "MultiEdit" => before.as_deref().and_then(|b| {
                        let mut s = b.to_owned();
                        for e in input
                            .get("edits")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                        {
                            let (Some(o), Some(n)) =
                                (str_at(e, &["old_string"]), str_at(e, &["new_string"]))
                            else {
                                return None;
                            };
                            let all = e.get("replace_all").and_then(Value::as_bool) == Some(true);
                            s = replaced(&s, o, n, all)?;
                        }
                        Some(s)
                    }),
                    _ => None,
                };
                let verb = if matches!(tool, "Write" | "write_file") {
                    "write"
                } else {
                    "edit"
                };
                let mutation = if after.is_some() {
                    file_mutation(&shown, before.as_deref(), after)
                } else {
                    // The edit cannot be replayed on the file (it changed, or it is too big):
                    // what the tool was asked to do.
                    json!({"path": shown, "requested": capped(input.clone())})
                };
                return Execution {
                    command: format!("{verb} {shown}"),
                    target: Some(shown),
                    mutation,
                };
            }
            if tool == "apply_patch" {
                // Codex: a freeform patch (the envelope `*** Begin Patch` … `*** End Patch`).
                let patch = match input {
                    Value::String(s) => Some(s.as_str()),
                    v => str_at(v, &["command", "input", "patch"]),
                };
                return Execution {
                    command: "apply_patch".into(),
                    target,
                    mutation: match patch {
                        Some(p) => capped(json!({"patch": p})),
                        None => capped(input.clone()),
                    },
                };
            }
        }
        _ => {}
    }
    Execution {
        command: tool.to_owned(),
        target,
        mutation: capped(input.clone()),
    }
}

/// The effects of a finished call: the CLI's report of its result (capped), its error, the
/// files it changed.
pub fn effects(input: &HookInput, execution: Option<&Execution>) -> Effects {
    let r = &input.response;
    let mut error = input.error.clone();
    // Codex and Gemini report a command's status inside its output text only.
    if error.is_none()
        && let Some(c) = exit_status_in_text(r).filter(|c| *c != 0)
    {
        error = Some(format!("exit status {c}"));
    }
    if error.is_none() {
        let code = r
            .get("exit_code")
            .or_else(|| r.get("exitCode"))
            .and_then(Value::as_i64);
        if let Some(c) = code.filter(|c| *c != 0) {
            error = Some(format!("exit status {c}"));
        } else if r.get("success").and_then(Value::as_bool) == Some(false)
            || r.get("is_error").and_then(Value::as_bool) == Some(true)
            || r.get("isError").and_then(Value::as_bool) == Some(true)
        {
            error = Some("the tool reported a failure".into());
        } else if let Some(e) = r.get("error").filter(|e| !e.is_null()) {
            error = Some(match e {
                Value::String(s) => s.clone(),
                v => v
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| v.to_string(), str::to_owned),
            });
        }
    }
    if input.interrupted {
        error = Some(match error {
            Some(e) => format!("interrupted by the user: {e}"),
            None => "interrupted by the user".into(),
        });
    }
    if input.phase == crate::Phase::AfterToolFailure && error.is_none() {
        error = Some("the tool failed".into());
    }
    let mut state_changes = Vec::new();
    if error.is_none()
        && let Some(e) = execution
        && let Some(verb) = ["write ", "edit "]
            .iter()
            .find(|v| e.command.starts_with(**v))
    {
        let path = &e.command[verb.len()..];
        state_changes.push(match *verb {
            "write " => format!("wrote {path}"),
            _ => format!("edited {path}"),
        });
    }
    if error.is_none() && input.tool.as_deref() == Some("apply_patch") {
        state_changes.push("applied a patch".into());
    }
    Effects {
        return_value: capped(r.clone()),
        state_changes,
        external_response: match input.duration_ms {
            Some(ms) => json!({"duration_ms": ms}),
            None => Value::Null,
        },
        error,
    }
}

/// The exit status a CLI wrote into a result's text: a line `Exit code: N` (Codex) or `Exit
/// Code: N` (Gemini CLI, inside `llmContent`).
fn exit_status_in_text(r: &Value) -> Option<i64> {
    let text = match r {
        Value::String(s) => s.as_str(),
        v => v.get("llmContent").and_then(Value::as_str)?,
    };
    afr_core::agent::exit_status_line(text, &["Exit code:", "Exit Code:"])
}

/// The policy's evaluation as recorded.
pub fn evaluation(e: &Evaluation) -> GuardrailEvaluation {
    GuardrailEvaluation {
        guardrail: e.guardrail.clone(),
        version: Some(e.version.clone()),
        verdict: e.verdict,
        reason: e.reason.clone(),
    }
}

/// The event of a tool call as known before it runs (no effects): intent, the concrete
/// execution (when `runs`: a call held for a decision has none yet), the evaluation, the
/// session as lane, provenance and how it was captured.
pub fn call_event(
    agent: Agent,
    input: &HookInput,
    state: &State,
    eval: Option<&Evaluation>,
    runs: bool,
    capture: Capture,
) -> EventInput {
    let tool = input.tool.clone().unwrap_or_default();
    let mut ev = EventInput::intent_only(
        category(agent, &tool),
        &tool,
        capped(input.tool_input.clone()),
    );
    ev.lane = Some(lane(&input.session, input.agent_id.as_deref()));
    ev.timestamp_us = Some(afr_recorder::now_us());
    if let Some(e) = eval {
        ev.policy_evaluation = vec![evaluation(e)];
    }
    if runs {
        let mut x = execution(agent, &tool, &input.tool_input, input.cwd.as_deref());
        // The payload's own name for an MCP tool's server, where it gives one.
        if let (Some(server), Some(_)) = (&input.mcp_server, agent.mcp_tool(&tool)) {
            x.target = Some(format!("mcp server {server}"));
        }
        ev.execution = Some(x);
    }
    provenance(agent, input, state, &mut ev, capture);
    ev
}

/// The code the agent works on: the git work tree holding `cwd` (its top directory) and the
/// commit checked out, read from `.git` without running git; else the working directory
/// itself, no commit.
pub fn workspace(cwd: &Path) -> (Option<String>, Option<String>) {
    let shown = |p: &Path| Some(p.display().to_string());
    let Some(top) = cwd.ancestors().take(32).find(|d| d.join(".git").exists()) else {
        return (shown(cwd), None);
    };
    let git = top.join(".git");
    // A worktree or submodule: `.git` is a file naming the real directory.
    let git = match std::fs::read_to_string(&git) {
        Ok(t) => match t.strip_prefix("gitdir:") {
            Some(d) => top.join(d.trim()),
            None => git,
        },
        Err(_) => git,
    };
    let head = std::fs::read_to_string(git.join("HEAD")).unwrap_or_default();
    let head = head.trim();
    let commit = match head.strip_prefix("ref:").map(str::trim) {
        None => Some(head.to_owned()),
        Some(r) => std::fs::read_to_string(git.join(r))
            .ok()
            .map(|c| c.trim().to_owned())
            .or_else(|| {
                // Packed refs: `<hash> <ref>` lines.
                std::fs::read_to_string(git.join("packed-refs"))
                    .ok()
                    .and_then(|p| {
                        p.lines()
                            .find_map(|l| l.strip_suffix(r).map(|h| h.trim().to_owned()))
                    })
            }),
    }
    .filter(|c| (7..=64).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_hexdigit()));
    (shown(top), commit)
}

/// Code, context and delegation provenance of an event of the session.
pub fn provenance(
    agent: Agent,
    input: &HookInput,
    state: &State,
    ev: &mut EventInput,
    capture: Capture,
) {
    let (repository, commit) = input
        .cwd
        .as_deref()
        .map_or((None, None), |c| workspace(Path::new(c)));
    ev.code_provenance = Some(CodeProvenance {
        agent: Some(agent.name().to_owned()),
        agent_version: input.context.agent_version.clone(),
        model: input.model.clone().or_else(|| state.model.clone()),
        repository,
        commit,
        capture: Some(capture),
        ..CodeProvenance::default()
    });
    let mut sources = Vec::new();
    if let Some(p) = &state.prompt {
        sources.push(ContextSource {
            uri: format!("afr:seq/{}", p.seq),
            content_hash: Some(p.sha256.clone()),
            kind: Some("user_prompt".into()),
        });
    }
    if let Some(tp) = &input.context.traceparent {
        sources.push(ContextSource {
            uri: format!("traceparent:{tp}"),
            content_hash: None,
            kind: Some("traceparent".into()),
        });
    }
    let environment = input.cwd.as_ref().map(|c| format!("cwd={c}"));
    if !sources.is_empty() || environment.is_some() {
        ev.context_provenance = Some(ContextProvenance {
            sources,
            environment,
        });
    }
    if let Some(id) = &input.agent_id {
        let kind = input
            .agent_type
            .clone()
            .or_else(|| state.subagents.get(id).cloned());
        let by = state
            .delegated_by
            .get(id)
            .map_or(String::new(), |c| format!(", call {c}"));
        ev.delegation_provenance = Some(DelegationProvenance {
            delegating_agent: Some(format!("{} session {}{by}", agent.name(), input.session)),
            on_behalf_of: Some(match kind {
                Some(k) => format!("subagent {id} ({k})"),
                None => format!("subagent {id}"),
            }),
            ..DelegationProvenance::default()
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn the_workspace_is_the_git_work_tree_and_its_commit() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("src/deep");
        std::fs::create_dir_all(&sub).unwrap();
        assert_eq!(workspace(&sub), (Some(sub.display().to_string()), None));
        std::fs::create_dir_all(d.path().join(".git/refs/heads")).unwrap();
        std::fs::write(d.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let c = "0123456789abcdef0123456789abcdef01234567";
        std::fs::write(
            d.path().join(".git/packed-refs"),
            format!("# pack-refs\n{c} refs/heads/main\n"),
        )
        .unwrap();
        assert_eq!(
            workspace(&sub),
            (Some(d.path().display().to_string()), Some(c.to_owned()))
        );
        std::fs::write(
            d.path().join(".git/refs/heads/main"),
            "fedcba9876543210fedcba9876543210fedcba98\n",
        )
        .unwrap();
        assert_eq!(
            workspace(&sub).1.as_deref(),
            Some("fedcba9876543210fedcba9876543210fedcba98")
        );
    }

    #[test]
    fn a_hostile_edit_is_not_replayed() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("src.rs");
        std::fs::write(&f, "e".repeat(100_000)).unwrap();
        let path = f.to_str().unwrap();
        // 100,000 matches times 100 KB: 10 GB if replayed.
        let e = execution(
            Agent::ClaudeCode,
            "Edit",
            &json!({"file_path": path, "old_string": "e", "new_string": "x".repeat(100_000), "replace_all": true}),
            None,
        );
        assert!(e.mutation.get("diff").is_none() && e.mutation.get("requested").is_some());
        let e = execution(
            Agent::ClaudeCode,
            "MultiEdit",
            &json!({"file_path": path, "edits": [{"old_string": "", "new_string": "y", "replace_all": true}]}),
            None,
        );
        assert!(e.mutation.get("requested").is_some(), "{}", e.mutation);
        assert_eq!(replaced("abc", "b", "B", false).as_deref(), Some("aBc"));
    }

    #[test]
    fn diffs_are_one_hunk_of_what_changed() {
        assert_eq!(diff("f", "a\nb\nc\n", "a\nb\nc\n"), "");
        assert_eq!(
            diff("f", "a\nb\nc\n", "a\nB\nc\n"),
            "--- a/f\n+++ b/f\n@@ -2,1 +2,1 @@\n-b\n+B\n"
        );
        assert_eq!(
            diff("f", "", "x\ny\n"),
            "--- a/f\n+++ b/f\n@@ -0,0 +1,2 @@\n+x\n+y\n"
        );
        assert_eq!(
            diff("f", "x\n", ""),
            "--- a/f\n+++ b/f\n@@ -1,1 +0,0 @@\n-x\n"
        );
    }

    #[test]
    fn executions_of_native_tools() {
        let d = tempfile::tempdir().unwrap();
        let cwd = d.path().to_str().unwrap();
        std::fs::write(d.path().join("a.txt"), "one\ntwo\n").unwrap();
        let e = execution(
            Agent::ClaudeCode,
            "Bash",
            &json!({"command": "psql -c 'DROP SCHEMA x'"}),
            Some(cwd),
        );
        assert_eq!(e.command, "psql -c 'DROP SCHEMA x'");
        assert_eq!(e.target.as_deref(), Some(cwd));
        let e = execution(
            Agent::ClaudeCode,
            "Edit",
            &json!({"file_path": "a.txt", "old_string": "two", "new_string": "2"}),
            Some(cwd),
        );
        let path = format!("{cwd}/a.txt");
        assert_eq!(e.command, format!("edit {path}"));
        assert_eq!(
            e.mutation["diff"],
            format!("--- a/{path}\n+++ b/{path}\n@@ -2,1 +2,1 @@\n-two\n+2\n")
        );
        let e = execution(
            Agent::Gemini,
            "write_file",
            &json!({"file_path": format!("{cwd}/new.txt"), "content": "hi\n"}),
            None,
        );
        assert_eq!(e.command, format!("write {cwd}/new.txt"));
        assert!(e.mutation["diff"].as_str().unwrap().ends_with("+hi\n"));
        let e = execution(
            Agent::Codex,
            "Bash",
            &json!({"command": ["bash", "-lc", "ls -la"]}),
            None,
        );
        assert_eq!(e.command, "ls -la");
        let e = execution(
            Agent::Codex,
            "apply_patch",
            &json!({"input": "*** Begin Patch\n*** End Patch\n"}),
            None,
        );
        assert_eq!(e.command, "apply_patch");
        assert!(
            e.mutation["patch"]
                .as_str()
                .unwrap()
                .starts_with("*** Begin Patch")
        );
        let e = execution(
            Agent::ClaudeCode,
            "mcp__fs__read_file",
            &json!({"path": "/x"}),
            None,
        );
        assert_eq!(e.command, "tools/call read_file");
        assert_eq!(
            category(Agent::ClaudeCode, "mcp__fs__read_file"),
            Category::Api
        );
    }
}
