//! Importers: other agents' run logs turned into AFR events, as pure functions (no I/O, no
//! recorder): a caller gets events that `afr record` would accept, and records or prints them.
//!
//! One format so far, SWE-agent trajectories (`*.traj`). [`swe_agent_events`] maps a
//! trajectory's JSON text to the events of its steps, one event per step, in order; the
//! `afr import swe-agent` command records them (or prints them as JSON lines) and the
//! evaluation harness calls the function directly. The field-by-field mapping and its
//! reasons are in `docs/import-swe-agent.md`.
//!
//! ```text
//!  trajectory[i].action      ──► intent (tool + parsed arguments), execution.command
//!  trajectory[i].observation ──► effects.return_value {output (≤ cap), output_bytes, output_sha256}
//!  trajectory[i].state       ──► execution.target (working dir), context source (open file)
//!  replay_config / info      ──► context provenance (problem, image), code provenance, lane
//!  trajectory[i-1]           ──► delegation_provenance.parent_event (when seqs are known)
//!  trajectory[i].thought, .response, history  ──► nothing (model reasoning is never recorded)
//! ```
//!
//! A trajectory is converted whole or not at all: any malformed step is an error naming the
//! step, and every produced event has already passed the checks `afr record` applies (schema,
//! size caps), so a caller can record the list without a half-recorded file.

use afr_core::{
    Category, EventInput,
    event::{
        CodeProvenance, ContextProvenance, ContextSource, DelegationProvenance, Effects, EventRef,
        Execution, Intent,
    },
    record::MAX_LANE_LEN,
};
use serde_json::{Map, Value as Json, json};

/// Default number of observation bytes kept in an event (the full output's length and
/// SHA-256 are recorded regardless). Every observation of the bundled real trajectories fits.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 16 * 1024;

/// The agent name written into code provenance.
pub const SWE_AGENT: &str = "swe-agent";

/// How [`swe_agent_events`] maps a trajectory.
#[derive(Debug, Clone)]
pub struct SweAgentOptions {
    /// The sequence number the first event will get when recorded. With it, each step after
    /// the first names the previous step as its parent event; without it, no parent links.
    pub first_seq: Option<u64>,
    /// Observation bytes kept per event; longer outputs are cut at a character boundary.
    pub max_output_bytes: usize,
    /// The cap `afr record` applies to one event (JSON and canonical CBOR).
    pub max_event_bytes: usize,
    /// The problem instance id when the trajectory names none (older trajectories carry no
    /// `replay_config`); the command passes the file name without `.traj`.
    pub instance_hint: Option<String>,
}

impl Default for SweAgentOptions {
    fn default() -> SweAgentOptions {
        SweAgentOptions {
            first_seq: None,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_event_bytes: afr_core::event::DEFAULT_MAX_EVENT_BYTES,
            instance_hint: None,
        }
    }
}

/// Why a trajectory cannot be imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// The text is not JSON.
    #[error("not JSON: {0}")]
    Json(String),
    /// A run-level field is missing or has the wrong type.
    #[error("field `{path}`: {message}")]
    Field {
        /// Dotted path of the field.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// One step is malformed or its event would be rejected by the recorder.
    #[error("step {step} (trajectory[{step}]): {message}")]
    Step {
        /// Index in the `trajectory` array, from 0.
        step: usize,
        /// What is wrong.
        message: String,
    },
}

fn field_err(path: &str, message: impl Into<String>) -> ImportError {
    ImportError::Field {
        path: path.into(),
        message: message.into(),
    }
}

fn step_err(step: usize, message: impl Into<String>) -> ImportError {
    ImportError::Step {
        step,
        message: message.into(),
    }
}

/// Run-level facts shared by every step's event.
#[derive(Debug, Default)]
struct Run {
    instance: Option<String>,
    problem: Option<ContextSource>,
    environment: Option<String>,
    image: Option<String>,
    code: CodeProvenance,
    exit_status: Option<String>,
}

/// Converts one SWE-agent trajectory (the JSON text of a `.traj` file) into one event per
/// step, in order. Never reads `thought`, `response` or `history`.
pub fn swe_agent_events(
    json: &str,
    opts: &SweAgentOptions,
) -> Result<Vec<EventInput>, ImportError> {
    let root: Json = serde_json::from_str(json).map_err(|e| ImportError::Json(e.to_string()))?;
    let Some(top) = root.as_object() else {
        return Err(field_err(".", "a trajectory is a JSON object"));
    };
    let steps = match top.get("trajectory") {
        Some(Json::Array(a)) => a,
        Some(_) => return Err(field_err("trajectory", "not an array")),
        None => return Err(field_err("trajectory", "missing")),
    };
    if steps.is_empty() {
        return Err(field_err("trajectory", "empty: no steps to import"));
    }
    let run = run_facts(top, opts)?;
    let lane = run.instance.as_deref().map(lane_for);
    let mut out = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let ev = step_event(i, step, steps.len(), &run, lane.as_deref(), opts)?;
        check_recordable(&ev, opts.max_event_bytes).map_err(|m| step_err(i, m))?;
        out.push(ev);
    }
    Ok(out)
}

/// A string at `path` under `v`: absent and `null` are `None`, any other non-string is an error.
fn opt_str<'a>(v: &'a Json, path: &[&str], name: &str) -> Result<Option<&'a str>, ImportError> {
    let mut cur = v;
    for (k, key) in path.iter().enumerate() {
        match cur.get(key) {
            None | Some(Json::Null) => return Ok(None),
            Some(next) => {
                if k + 1 < path.len() && !next.is_object() {
                    return Ok(None);
                }
                cur = next;
            }
        }
    }
    match cur {
        Json::String(s) => Ok(Some(s)),
        _ => Err(field_err(name, "not a string")),
    }
}

fn run_facts(top: &Map<String, Json>, opts: &SweAgentOptions) -> Result<Run, ImportError> {
    let top_v = Json::Object(top.clone());
    let parsed_rc;
    let rc = match top.get("replay_config") {
        None | Some(Json::Null) => None,
        Some(Json::Object(_)) => top.get("replay_config"),
        // Some SWE-agent versions store the replay config as a JSON-encoded string.
        Some(Json::String(s)) => {
            parsed_rc = serde_json::from_str::<Json>(s)
                .map_err(|e| field_err("replay_config", format!("a string but not JSON: {e}")))?;
            if !parsed_rc.is_object() {
                return Err(field_err("replay_config", "not an object"));
            }
            Some(&parsed_rc)
        }
        Some(_) => return Err(field_err("replay_config", "not an object")),
    };
    let mut run = Run {
        environment: opt_str(&top_v, &["environment"], "environment")?.map(str::to_owned),
        exit_status: opt_str(&top_v, &["info", "exit_status"], "info.exit_status")?
            .map(str::to_owned),
        ..Run::default()
    };
    run.code.agent = Some(SWE_AGENT.into());
    let null = Json::Null;
    let rc = rc.unwrap_or(&null);
    let s = |path: &[&str], name: &str| opt_str(rc, path, name).map(|o| o.map(str::to_owned));
    run.instance = s(
        &["problem_statement", "id"],
        "replay_config.problem_statement.id",
    )?
    .or_else(|| opts.instance_hint.clone())
    .filter(|s| !s.is_empty());
    let issue_url = s(
        &["problem_statement", "github_url"],
        "replay_config.problem_statement.github_url",
    )?;
    let text = s(
        &["problem_statement", "text"],
        "replay_config.problem_statement.text",
    )?;
    let problem_uri = issue_url.or_else(|| {
        run.instance
            .as_ref()
            .map(|id| format!("swe-agent:problem/{id}"))
    });
    run.problem = problem_uri.map(|uri| ContextSource {
        uri,
        content_hash: text.as_deref().map(sha256_tag),
        kind: Some("task".into()),
    });
    run.image = s(
        &["env", "deployment", "image"],
        "replay_config.env.deployment.image",
    )?;
    run.code.model = s(
        &["agent", "model", "name"],
        "replay_config.agent.model.name",
    )?;
    run.code.repository = match s(
        &["env", "repo", "github_url"],
        "replay_config.env.repo.github_url",
    )? {
        Some(u) => Some(u),
        None => s(
            &["env", "repo", "repo_name"],
            "replay_config.env.repo.repo_name",
        )?,
    };
    // A symbolic ref such as `HEAD` names no fixed code; only commit ids are recorded.
    run.code.commit = s(
        &["env", "repo", "base_commit"],
        "replay_config.env.repo.base_commit",
    )?
    .filter(|c| (7..=64).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_hexdigit()));
    Ok(run)
}

/// The lane: the instance id if it fits, otherwise a short hash of it.
fn lane_for(instance: &str) -> String {
    if instance.len() <= MAX_LANE_LEN {
        instance.to_owned()
    } else {
        let h = afr_core::hash::sha256(&[instance.as_bytes()]).to_hex();
        format!("swe-agent:{}", &h[..16])
    }
}

fn sha256_tag(s: &str) -> String {
    format!(
        "sha256:{}",
        afr_core::hash::sha256(&[s.as_bytes()]).to_hex()
    )
}

/// The editor and shell state a step reports: `{open_file, working_dir}`, as an object or, in
/// older trajectories, as a JSON-encoded string.
fn step_state(i: usize, step: &Json) -> Result<(Option<String>, Option<String>), ImportError> {
    let parsed;
    let st = match step.get("state") {
        None | Some(Json::Null) => return Ok((None, None)),
        Some(Json::String(s)) => {
            parsed = serde_json::from_str::<Json>(s)
                .map_err(|e| step_err(i, format!("`state` is a string but not JSON: {e}")))?;
            &parsed
        }
        Some(v) => v,
    };
    if !st.is_object() {
        return Err(step_err(i, "`state` is not an object"));
    }
    let get = |k: &str| match st.get(k) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) if s.is_empty() || s == "n/a" => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(step_err(i, format!("`state.{k}` is not a string"))),
    };
    Ok((get("open_file")?, get("working_dir")?))
}

fn step_event(
    i: usize,
    step: &Json,
    n_steps: usize,
    run: &Run,
    lane: Option<&str>,
    opts: &SweAgentOptions,
) -> Result<EventInput, ImportError> {
    if !step.is_object() {
        return Err(step_err(i, "not a JSON object"));
    }
    let action = match step.get("action") {
        Some(Json::String(s)) => s.trim_end(),
        Some(_) => return Err(step_err(i, "`action` is not a string")),
        None => return Err(step_err(i, "`action` is missing")),
    };
    if action.trim().is_empty() {
        return Err(step_err(i, "`action` is empty"));
    }
    let observation = match step.get("observation") {
        Some(Json::String(s)) => Some(s.as_str()),
        None | Some(Json::Null) => None,
        Some(_) => return Err(step_err(i, "`observation` is not a string")),
    };
    let execution_time = match step.get("execution_time") {
        None | Some(Json::Null) => None,
        Some(Json::Number(n)) => n.as_f64(),
        Some(_) => return Err(step_err(i, "`execution_time` is not a number")),
    };
    let (open_file, working_dir) = step_state(i, step)?;
    let (category, tool, args) = parse_action(action);

    let effects = observation.map(|o| {
        let (kept, truncated) = cut(o, opts.max_output_bytes);
        let mut rv = json!({
            "output": kept,
            "output_bytes": o.len(),
            "output_sha256": sha256_tag(o),
            "truncated": truncated,
        });
        if let (Some(t), Some(m)) = (execution_time, rv.as_object_mut()) {
            m.insert("execution_time_s".into(), json!(t));
        }
        Effects {
            return_value: rv,
            state_changes: Vec::new(),
            external_response: match &run.exit_status {
                Some(s) if i + 1 == n_steps => json!({ "exit_status": s }),
                _ => Json::Null,
            },
            error: None,
        }
    });

    let mut sources = Vec::new();
    if let Some(p) = &run.problem {
        sources.push(p.clone());
    }
    if let Some(img) = &run.image {
        sources.push(ContextSource {
            uri: format!("docker://{img}"),
            content_hash: None,
            kind: Some("container_image".into()),
        });
    }
    if let Some(f) = open_file {
        sources.push(ContextSource {
            uri: format!("file://{f}"),
            content_hash: None,
            kind: Some("file".into()),
        });
    }
    let context = (!sources.is_empty() || run.environment.is_some()).then(|| ContextProvenance {
        sources,
        environment: run.environment.clone(),
    });

    let parent = match (opts.first_seq, i) {
        (Some(first), 1..) => Some(EventRef::same_log(
            first
                .checked_add(i as u64 - 1)
                .ok_or_else(|| step_err(i, "sequence numbers past 2^64 - 1 (--first-seq)"))?,
        )),
        _ => None,
    };
    let delegation = (parent.is_some() || run.instance.is_some()).then(|| DelegationProvenance {
        parent_event: parent,
        delegating_agent: None,
        organisation: None,
        on_behalf_of: run.problem.as_ref().map(|p| p.uri.clone()),
        delegated_to: Vec::new(),
    });

    Ok(EventInput {
        category,
        timestamp_us: None,
        lane: lane.map(str::to_owned),
        concurrent_with: Vec::new(),
        intent: Intent {
            tool: tool.to_owned(),
            args,
        },
        policy_evaluation: Vec::new(),
        human_approval: None,
        execution: Some(Execution {
            command: action.to_owned(),
            target: working_dir,
            mutation: Json::Null,
        }),
        effects,
        context_provenance: context,
        code_provenance: Some(CodeProvenance {
            capture: Some(afr_core::event::Capture::self_reported("import:swe-agent")),
            ..run.code.clone()
        }),
        delegation_provenance: delegation,
    })
}

/// The first `max` bytes of `s`, cut back to a character boundary, and whether it was cut.
fn cut(s: &str, max: usize) -> (&str, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (&s[..end], true)
}

/// Runs the checks `afr record` applies, so what is returned can be recorded whole.
fn check_recordable(ev: &EventInput, cap: usize) -> Result<(), String> {
    let line = serde_json::to_vec(ev).map_err(|e| format!("cannot encode the event: {e}"))?;
    let back = EventInput::from_json(&line, cap).map_err(|e| format!("event rejected: {e}"))?;
    let (_, payload) = back.into_payload();
    let n = payload
        .encode()
        .map_err(|e| format!("cannot encode the payload: {e}"))?
        .len();
    if n > cap {
        return Err(format!(
            "event rejected: payload is {n} bytes as canonical CBOR, over the cap of {cap} \
             (lower --max-output-bytes or raise --max-event-bytes)"
        ));
    }
    Ok(())
}

/// Splits an action into category, tool name and structured arguments.
///
/// SWE-agent's own tools (`open`, `goto`, `scroll_up`, `scroll_down`, `create`, `find_file`,
/// `search_dir`, `search_file`, `edit`, `insert`, `submit`) get their documented argument
/// names; anything else ran in the shell and becomes the `bash` tool with the program and its
/// words. Arguments that do not match a tool's signature are kept as `argv` words.
pub fn parse_action(action: &str) -> (Category, &'static str, Json) {
    let action = action.trim();
    let first_line = action.lines().next().unwrap_or("");
    let name = first_line.split_whitespace().next().unwrap_or("");
    let rest = action[name.len()..].trim_start_matches([' ', '\t']);
    let known: Option<(Category, &'static str)> = match name {
        "open" => Some((Category::File, "open")),
        "goto" => Some((Category::File, "goto")),
        "scroll_up" => Some((Category::File, "scroll_up")),
        "scroll_down" => Some((Category::File, "scroll_down")),
        "create" => Some((Category::Code, "create")),
        "edit" => Some((Category::Code, "edit")),
        "insert" => Some((Category::Code, "insert")),
        "submit" => Some((Category::Code, "submit")),
        "find_file" => Some((Category::Retrieval, "find_file")),
        "search_dir" => Some((Category::Retrieval, "search_dir")),
        "search_file" => Some((Category::Retrieval, "search_file")),
        _ => None,
    };
    let Some((category, tool)) = known else {
        return (Category::Shell, "bash", bash_args(action));
    };
    if tool == "edit"
        && let Some(args) = edit_range_args(rest)
    {
        return (category, tool, args);
    }
    let Some(words) = shell_words(rest) else {
        // Pipes, redirections or a second command: it ran as a shell line.
        return (Category::Shell, "bash", bash_args(action));
    };
    let args = tool_args(tool, &words).unwrap_or_else(|| json!({ "argv": words }));
    (category, tool, args)
}

/// Named arguments of a SWE-agent tool, or `None` if the words do not fit its signature.
fn tool_args(tool: &str, w: &[String]) -> Option<Json> {
    let int = |s: &String| s.parse::<u64>().ok().map(Json::from);
    let named = |names: &[&str], w: &[String]| {
        let m: Map<String, Json> = names
            .iter()
            .zip(w)
            .map(|(n, v)| ((*n).to_owned(), Json::from(v.as_str())))
            .collect();
        Json::Object(m)
    };
    match (tool, w.len()) {
        ("scroll_up" | "scroll_down" | "submit", 0) => Some(Json::Null),
        ("open", 1) => Some(json!({ "path": w[0] })),
        ("open", 2) => Some(json!({ "path": w[0], "line_number": int(&w[1])? })),
        ("goto", 1) => Some(json!({ "line_number": int(&w[0])? })),
        ("create", 1) => Some(json!({ "filename": w[0] })),
        ("find_file", 1 | 2) => Some(named(&["file_name", "dir"], w)),
        ("search_dir", 1 | 2) => Some(named(&["search_term", "dir"], w)),
        ("search_file", 1 | 2) => Some(named(&["search_term", "file"], w)),
        ("insert", 1) => Some(json!({ "text": w[0] })),
        ("insert", 3) if w[1] == "--line" => Some(json!({ "text": w[0], "line": int(&w[2])? })),
        ("edit", 2) => Some(json!({ "search": w[0], "replace": w[1] })),
        ("edit", 3) => {
            let all = match w[2].as_str() {
                "True" | "true" | "--replace-all" => true,
                "False" | "false" => false,
                _ => return None,
            };
            Some(json!({ "search": w[0], "replace": w[1], "replace_all": all }))
        }
        _ => None,
    }
}

/// `edit <start>:<end>` followed by the replacement lines and a final `end_of_edit` line.
fn edit_range_args(rest: &str) -> Option<Json> {
    let (head, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let (a, b) = head.trim().split_once(':')?;
    let (start, end) = (a.parse::<u64>().ok()?, b.parse::<u64>().ok()?);
    let body = body.trim_end_matches(['\n', '\r']);
    let text = if body == "end_of_edit" {
        ""
    } else {
        body.strip_suffix("end_of_edit")?.strip_suffix('\n')?
    };
    Some(json!({ "start_line": start, "end_line": end, "replacement_text": text }))
}

/// The `bash` tool: the program and its words, or the whole line for compound commands.
fn bash_args(line: &str) -> Json {
    match shell_words(line) {
        Some(w) if !w.is_empty() => json!({ "program": w[0], "args": &w[1..] }),
        _ => json!({
            "program": line.split_whitespace().next().unwrap_or(""),
            "script": line,
        }),
    }
}

/// Splits a command line into words with POSIX shell quoting (`'…'`, `"…"`, `\`). Returns
/// `None` for anything a shell would treat as more than one simple command or would expand:
/// an unterminated quote, an unquoted `| & ; < > ( ) $` backquote or newline, or `$`/backquote
/// inside double quotes.
pub fn shell_words(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        x => cur.push(x),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '$' | '`' => return None,
                        '\\' => match chars.next()? {
                            x @ ('"' | '\\' | '$' | '`') => cur.push(x),
                            '\n' => {}
                            x => {
                                cur.push('\\');
                                cur.push(x);
                            }
                        },
                        x => cur.push(x),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next()? {
                    '\n' => {}
                    x => cur.push(x),
                }
            }
            '|' | '&' | ';' | '<' | '>' | '(' | ')' | '$' | '`' | '\n' | '\r' => return None,
            x => {
                in_word = true;
                cur.push(x);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly on purpose")]

    use super::*;

    #[test]
    fn shell_words_follow_posix_quoting_and_refuse_compound_lines() {
        assert_eq!(
            shell_words(r#"open "/a b/c.py" 12"#).unwrap(),
            ["open", "/a b/c.py", "12"]
        );
        assert_eq!(
            shell_words(r#"edit 'x -> y' "say \"hi\"" False"#).unwrap(),
            ["edit", "x -> y", r#"say "hi""#, "False"]
        );
        assert_eq!(shell_words(r"a\ b ''").unwrap(), ["a b", ""]);
        for s in [
            "ls | wc",
            "a; b",
            "cat <x",
            "echo $HOME",
            "a\nb",
            "'open",
            r#"echo "$x""#,
        ] {
            assert!(shell_words(s).is_none(), "{s}");
        }
    }

    #[test]
    fn actions_map_to_tools_with_named_arguments() {
        let (c, t, a) = parse_action("edit 1:2\nfoo\n  bar\nend_of_edit\n");
        assert_eq!((c, t), (Category::Code, "edit"));
        assert_eq!(
            a,
            json!({"start_line": 1, "end_line": 2, "replacement_text": "foo\n  bar"})
        );
        let (c, t, a) = parse_action("open \"src/x.py\" 1474");
        assert_eq!((c, t), (Category::File, "open"));
        assert_eq!(a, json!({"path": "src/x.py", "line_number": 1474}));
        let (_, t, a) = parse_action("find_file fields.py src");
        assert_eq!(t, "find_file");
        assert_eq!(a, json!({"file_name": "fields.py", "dir": "src"}));
        let (c, t, a) = parse_action("python3 /r/tests/missing_colon.py");
        assert_eq!((c, t), (Category::Shell, "bash"));
        assert_eq!(
            a,
            json!({"program": "python3", "args": ["/r/tests/missing_colon.py"]})
        );
        let (_, t, a) = parse_action("grep -n x a.py | head");
        assert_eq!(t, "bash");
        assert_eq!(
            a,
            json!({"program": "grep", "script": "grep -n x a.py | head"})
        );
        let (_, t, a) = parse_action("goto twelve");
        assert_eq!(t, "goto");
        assert_eq!(a, json!({"argv": ["twelve"]}));
        let (_, t, a) = parse_action("submit\n");
        assert_eq!((t, a), ("submit", Json::Null));
    }

    #[test]
    fn long_outputs_are_cut_at_a_character_boundary() {
        assert_eq!(cut("héllo", 2), ("h", true));
        assert_eq!(cut("héllo", 3), ("hé", true));
        assert_eq!(cut("abc", 3), ("abc", false));
    }
}
