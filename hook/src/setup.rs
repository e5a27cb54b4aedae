//! `afr setup <agent>`: writes a CLI's hook configuration and routes its MCP servers through
//! `afr mcp wrap`, idempotently, with a backup that `--undo` restores.
//!
//! | CLI | hooks | MCP servers | gate that would silently ignore the hooks |
//! |---|---|---|---|
//! | Claude Code | `.claude/settings.json` (project) or `~/.claude/settings.json` | `.mcp.json` or `~/.claude.json` `mcpServers` | none in `-p`; a project `.mcp.json` server needs approval in the TUI (or `enableAllProjectMcpServers`) |
//! | Codex | `$CODEX_HOME/hooks.json` (`~/.codex`), or `<project>/.codex/hooks.json` | `config.toml` `[mcp_servers.NAME]` | hook trust (`[hooks.state]` in config.toml, or `--dangerously-bypass-hook-trust`); a project `.codex/` layer loads only in a trusted project |
//! | Gemini CLI | `~/.gemini/settings.json` or `<project>/.gemini/settings.json` (`hooksConfig.enabled`, `hooks`) | `settings.json` `mcpServers` | folder trust (`~/.gemini/trustedFolders.json`): an untrusted folder's settings are ignored |
//!
//! A hook entry is AFR's when its command runs ` hook <agent>`; setup replaces AFR's entries
//! and keeps every other hook. Before it first changes a file it copies it to
//! `<file>.afr-backup` (or notes that it did not exist, `<file>.afr-absent`); `--undo` puts
//! that back and removes the backup.

use std::path::{Path, PathBuf};

use afr_core::agent::Agent;
use serde_json::{Map, Value, json};

/// Where the configuration goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The project at this directory.
    Project(PathBuf),
    /// The user's own configuration (under `home`).
    User {
        /// The home directory (`$HOME`).
        home: PathBuf,
        /// Codex's home (`$CODEX_HOME`), if set.
        codex_home: Option<PathBuf>,
    },
}

/// What setup writes into the hook commands.
#[derive(Debug, Clone)]
pub struct SetupOptions {
    /// The CLI.
    pub agent: Agent,
    /// Project or user.
    pub scope: Scope,
    /// The `afr` binary (absolute): the wrapped MCP servers run it, and the hooks when there is
    /// no `hook_program`.
    pub afr: PathBuf,
    /// The hooks' thin client `afr-hook` beside `afr` (absolute), if installed: it takes the
    /// same arguments, hands the call to `afr serve`, and runs `afr` when none answers.
    pub hook_program: Option<PathBuf>,
    /// The recorder directory (absolute).
    pub dir: PathBuf,
    /// A policy file (absolute) for the hooks and the wrapped MCP servers.
    pub policy: Option<PathBuf>,
    /// `--fail-open` for the hooks and the wrapped servers.
    pub fail_open: bool,
    /// Route the MCP servers through `afr mcp wrap`.
    pub wrap_mcp: bool,
    /// The user's home, for trust files.
    pub home: PathBuf,
}

/// One file setup would change: its path, its content now (None: absent), its new content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The file.
    pub path: PathBuf,
    /// Its content now.
    pub before: Option<String>,
    /// What setup writes.
    pub after: String,
    /// What it changes, for the user.
    pub summary: Vec<String>,
}

/// Everything setup would do, and what it could not.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The files.
    pub changes: Vec<Change>,
    /// What the user must know (servers not routed, …).
    pub notes: Vec<String>,
    /// Why the CLI would ignore the hooks as configured, and what to do; setup refuses to
    /// write while this is not empty.
    pub refusals: Vec<String>,
    /// The MCP servers now behind `afr mcp wrap`, listed in `<dir>/mcp-wrapped` for the OTLP
    /// receiver (their calls' log records are the gateway's), and the recorder directory.
    pub wrapped: Vec<String>,
    /// The recorder directory.
    pub dir: PathBuf,
}

/// Errors of setup.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A configuration file is not what the CLI reads.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> SetupError + '_ {
    move |source| SetupError::Io {
        path: path.to_owned(),
        source,
    }
}

fn read(path: &Path) -> Result<Option<String>, SetupError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(path)(e)),
    }
}

fn read_json(path: &Path, text: Option<&str>) -> Result<Map<String, Value>, SetupError> {
    match text.map(str::trim) {
        None | Some("") => Ok(Map::new()),
        Some(t) => match serde_json::from_str(t) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(SetupError::Invalid {
                path: path.to_owned(),
                message: "not a JSON object".into(),
            }),
            Err(e) => Err(SetupError::Invalid {
                path: path.to_owned(),
                message: format!("not JSON: {e}"),
            }),
        },
    }
}

/// `s` quoted for a POSIX shell when it needs it.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@%+,".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The events each CLI runs `afr hook` on; tool events take the matcher `*`.
fn events(agent: Agent) -> &'static [(&'static str, bool)] {
    match agent {
        Agent::ClaudeCode => &[
            ("PreToolUse", true),
            ("PostToolUse", true),
            ("PostToolUseFailure", true),
            ("PermissionRequest", true),
            ("PermissionDenied", true),
            ("UserPromptSubmit", false),
            ("SessionStart", false),
            ("SubagentStart", false),
        ],
        Agent::Codex => &[
            ("PreToolUse", true),
            ("PostToolUse", true),
            ("UserPromptSubmit", false),
            ("SessionStart", false),
            ("SubagentStart", false),
        ],
        Agent::Gemini => &[
            ("BeforeTool", true),
            ("AfterTool", true),
            ("BeforeAgent", false),
            ("SessionStart", false),
        ],
    }
}

impl SetupOptions {
    /// The hook command line (a shell command, as all three CLIs take it).
    pub fn hook_command(&self, wrapped: &[String]) -> String {
        let program = self.hook_program.as_ref().unwrap_or(&self.afr);
        let mut c = format!(
            "{} --dir {} hook {}",
            shell_quote(&program.display().to_string()),
            shell_quote(&self.dir.display().to_string()),
            self.agent.name()
        );
        if let Some(p) = &self.policy {
            c.push_str(&format!(
                " --policy {}",
                shell_quote(&p.display().to_string())
            ));
        }
        if self.fail_open {
            c.push_str(" --fail-open");
        }
        if !wrapped.is_empty() {
            c.push_str(&format!(
                " --mcp-wrapped {}",
                shell_quote(&wrapped.join(","))
            ));
        }
        c
    }

    fn is_ours(&self, command: &str) -> bool {
        command.contains(&format!(" hook {}", self.agent.name()))
    }

    /// The `afr mcp wrap` argv (after the program) in front of `command args`.
    fn wrap_args(&self, command: &str, args: &[String]) -> Vec<String> {
        let mut a = vec![
            "--dir".to_owned(),
            self.dir.display().to_string(),
            "mcp".into(),
            "wrap".into(),
        ];
        if let Some(p) = &self.policy {
            a.push("--policy".into());
            a.push(p.display().to_string());
        }
        if self.fail_open {
            a.push("--fail-open".into());
        }
        a.push("--".into());
        a.push(command.to_owned());
        a.extend(args.iter().cloned());
        a
    }

    /// The arguments of `afr` that run the server `command args` behind `afr mcp wrap` with
    /// these options, or `None` when it already runs so. A server wrapped by an earlier setup is
    /// wrapped again around its own command, so a changed `--policy`, `--fail-open` or `--dir`
    /// reaches the gateway too, and no server is wrapped twice.
    fn rewrap(&self, command: &str, args: &[String]) -> Option<Vec<String>> {
        let new = match self.unwrapped(command, args) {
            Some((c, a)) => self.wrap_args(&c, &a),
            None => self.wrap_args(command, args),
        };
        (!(self.is_wrapped(command, args) && args == new.as_slice())).then_some(new)
    }

    /// The server's own command and arguments, when `command args` runs it behind `afr mcp
    /// wrap` (everything after the `--` that follows `wrap`).
    fn unwrapped(&self, command: &str, args: &[String]) -> Option<(String, Vec<String>)> {
        if !self.is_wrapped(command, args) {
            return None;
        }
        let wrap = args.iter().position(|a| a == "wrap")?;
        let dash = wrap + args.get(wrap..)?.iter().position(|a| a == "--")?;
        let inner = args.get(dash + 1..)?;
        let (c, rest) = inner.split_first()?;
        Some((c.clone(), rest.to_vec()))
    }

    fn is_wrapped(&self, command: &str, args: &[String]) -> bool {
        let afr = self.afr.display().to_string();
        (command == afr || command.ends_with("/afr") || command == "afr")
            && args.windows(2).any(|w| w[0] == "mcp" && w[1] == "wrap")
    }

    /// The files this CLI reads, for this scope: (hooks file, MCP servers file).
    fn files(&self) -> (PathBuf, PathBuf) {
        match (&self.scope, self.agent) {
            (Scope::Project(d), Agent::ClaudeCode) => {
                (d.join(".claude/settings.json"), d.join(".mcp.json"))
            }
            (Scope::User { home, .. }, Agent::ClaudeCode) => (
                home.join(".claude/settings.json"),
                home.join(".claude.json"),
            ),
            (Scope::Project(d), Agent::Codex) => {
                (d.join(".codex/hooks.json"), d.join(".codex/config.toml"))
            }
            (Scope::User { home, codex_home }, Agent::Codex) => {
                let h = codex_home.clone().unwrap_or_else(|| home.join(".codex"));
                (h.join("hooks.json"), h.join("config.toml"))
            }
            (Scope::Project(d), Agent::Gemini) => {
                let f = d.join(".gemini/settings.json");
                (f.clone(), f)
            }
            (Scope::User { home, .. }, Agent::Gemini) => {
                let f = home.join(".gemini/settings.json");
                (f.clone(), f)
            }
        }
    }
}

/// The hooks object with AFR's entries for `agent` replaced by `command`, every other entry
/// kept; and whether anything changed.
fn merge_hooks(o: &SetupOptions, hooks: &mut Map<String, Value>, command: &str) {
    let timeout = |pre: bool| {
        let s = if pre { crate::run::HOOK_TIMEOUT } else { 60 };
        // Gemini CLI counts milliseconds, the others seconds.
        if o.agent == Agent::Gemini {
            json!(s * 1000)
        } else {
            json!(s)
        }
    };
    for (event, tool) in events(o.agent) {
        let groups = hooks
            .entry((*event).to_owned())
            .or_insert_with(|| json!([]));
        if !groups.is_array() {
            *groups = json!([]);
        }
        let Some(list) = groups.as_array_mut() else {
            continue;
        };
        // Drop AFR's own entries (any earlier setup's), keep everyone else's.
        for g in list.iter_mut() {
            if let Some(hs) = g.get_mut("hooks").and_then(Value::as_array_mut) {
                hs.retain(|h| {
                    !h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(|c| o.is_ours(c))
                });
            }
        }
        list.retain(|g| {
            g.get("hooks")
                .and_then(Value::as_array)
                .is_none_or(|h| !h.is_empty())
        });
        let pre = matches!(*event, "PreToolUse" | "BeforeTool" | "PermissionRequest");
        let mut group =
            json!({"hooks": [{"type": "command", "command": command, "timeout": timeout(pre)}]});
        if *tool {
            group["matcher"] = json!("*");
        }
        // First, so that AFR sees a call before any other hook changes it.
        list.insert(0, group);
    }
}

/// Rewrites the stdio servers of a JSON `mcpServers` object to run behind `afr mcp wrap`;
/// returns the names of the servers now wrapped and notes on the others.
fn wrap_json_servers(
    o: &SetupOptions,
    servers: &mut Map<String, Value>,
    notes: &mut Vec<String>,
    summary: &mut Vec<String>,
) -> Vec<String> {
    let mut wrapped = Vec::new();
    for (name, s) in servers.iter_mut() {
        let Some(obj) = s.as_object_mut() else {
            continue;
        };
        let Some(command) = obj
            .get("command")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            let url = obj
                .get("url")
                .or_else(|| obj.get("httpUrl"))
                .and_then(Value::as_str)
                .unwrap_or("?");
            notes.push(format!(
                "MCP server `{name}` ({url}) is not a stdio server and was not routed: put `afr mcp proxy --upstream {url}` in front of it and point the configuration at the proxy"
            ));
            continue;
        };
        let args: Vec<String> = obj
            .get("args")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(new_args) = o.rewrap(&command, &args) {
            obj.insert("command".into(), json!(o.afr.display().to_string()));
            obj.insert("args".into(), json!(new_args));
            summary.push(format!(
                "MCP server `{name}` now runs behind `afr mcp wrap`"
            ));
        }
        wrapped.push(name.clone());
    }
    wrapped
}

/// Sets `key` of a TOML table to `v`, keeping the comments and spacing around the old value.
fn set_keeping_comments(t: &mut dyn toml_edit::TableLike, key: &str, mut v: toml_edit::Value) {
    match t.get_mut(key).and_then(toml_edit::Item::as_value_mut) {
        Some(old) => {
            *v.decor_mut() = old.decor().clone();
            *old = v;
        }
        None => {
            t.insert(key, toml_edit::Item::Value(v));
        }
    }
}

/// What setup would write (nothing is written).
pub fn plan(o: &SetupOptions) -> Result<Plan, SetupError> {
    let mut p = Plan::default();
    let (hooks_path, mcp_path) = o.files();
    // 1. MCP servers first: the hooks must know which servers the gateway covers.
    let mut wrapped = Vec::new();
    let mut mcp_change: Option<Change> = None;
    if o.wrap_mcp {
        let before = read(&mcp_path)?;
        let mut summary = Vec::new();
        let after = if o.agent == Agent::Codex {
            let text = before.clone().unwrap_or_default();
            let mut doc: toml_edit::DocumentMut =
                text.parse()
                    .map_err(|e: toml_edit::TomlError| SetupError::Invalid {
                        path: mcp_path.clone(),
                        message: e.to_string(),
                    })?;
            if let Some(servers) = doc
                .get_mut("mcp_servers")
                .and_then(|s| s.as_table_like_mut())
            {
                let names: Vec<String> = servers.iter().map(|(k, _)| k.to_owned()).collect();
                for name in names {
                    let Some(t) = servers.get_mut(&name).and_then(|s| s.as_table_like_mut()) else {
                        continue;
                    };
                    let Some(command) =
                        t.get("command").and_then(|c| c.as_str()).map(str::to_owned)
                    else {
                        let url = t
                            .get("url")
                            .and_then(|c| c.as_str())
                            .unwrap_or("?")
                            .to_owned();
                        p.notes.push(format!(
                            "MCP server `{name}` ({url}) is not a stdio server and was not routed: put `afr mcp proxy --upstream {url}` in front of it"
                        ));
                        continue;
                    };
                    let args: Vec<String> = t
                        .get("args")
                        .and_then(|a| a.as_array())
                        .map(|a| {
                            a.iter()
                                .filter_map(|v| v.as_str())
                                .map(str::to_owned)
                                .collect()
                        })
                        .unwrap_or_default();
                    if let Some(new_args) = o.rewrap(&command, &args) {
                        let mut arr = toml_edit::Array::new();
                        for a in new_args {
                            arr.push(a);
                        }
                        set_keeping_comments(t, "command", o.afr.display().to_string().into());
                        set_keeping_comments(t, "args", arr.into());
                        summary.push(format!(
                            "MCP server `{name}` now runs behind `afr mcp wrap`"
                        ));
                    }
                    wrapped.push(name);
                }
            }
            doc.to_string()
        } else {
            let mut m = read_json(&mcp_path, before.as_deref())?;
            if let Some(Value::Object(servers)) = m.get_mut("mcpServers") {
                wrapped = wrap_json_servers(o, servers, &mut p.notes, &mut summary);
            }
            let mut s = serde_json::to_string_pretty(&Value::Object(m)).unwrap_or_default();
            s.push('\n');
            s
        };
        if !summary.is_empty() {
            mcp_change = Some(Change {
                path: mcp_path.clone(),
                before,
                after,
                summary,
            });
        }
    }
    // 2. The hooks.
    let command = o.hook_command(&wrapped);
    p.wrapped.clone_from(&wrapped);
    p.dir.clone_from(&o.dir);
    let before = if mcp_change.as_ref().is_some_and(|c| c.path == hooks_path) {
        mcp_change.as_ref().map(|c| c.after.clone())
    } else {
        read(&hooks_path)?
    };
    let mut m = read_json(&hooks_path, before.as_deref())?;
    let hooks = m.entry("hooks").or_insert_with(|| json!({}));
    if !hooks.is_object() {
        return Err(SetupError::Invalid {
            path: hooks_path,
            message: "`hooks` is not an object".into(),
        });
    }
    if let Some(h) = hooks.as_object_mut() {
        merge_hooks(o, h, &command);
    }
    let mut summary = vec![format!(
        "hooks {} run `{command}`",
        events(o.agent)
            .iter()
            .map(|(e, _)| *e)
            .collect::<Vec<_>>()
            .join(", ")
    )];
    if o.agent == Agent::Gemini {
        let hc = m.entry("hooksConfig").or_insert_with(|| json!({}));
        if let Some(h) = hc.as_object_mut() {
            if h.get("enabled") != Some(&json!(true)) {
                summary.push("hooksConfig.enabled = true".into());
            }
            h.insert("enabled".into(), json!(true));
        }
    }
    let mut after = serde_json::to_string_pretty(&Value::Object(m)).unwrap_or_default();
    after.push('\n');
    match mcp_change {
        Some(mut c) if c.path == hooks_path => {
            c.after = after;
            c.summary.extend(summary);
            p.changes.push(c);
        }
        other => {
            let original = read(&hooks_path)?;
            p.changes.extend(other);
            p.changes.push(Change {
                path: hooks_path,
                before: original,
                after,
                summary,
            });
        }
    }
    p.changes
        .retain(|c| c.before.as_deref() != Some(c.after.as_str()));
    trust(o, &mut p)?;
    Ok(p)
}

/// The trust gates under which the CLI would not run the hooks.
fn trust(o: &SetupOptions, p: &mut Plan) -> Result<(), SetupError> {
    match (o.agent, &o.scope) {
        (Agent::Gemini, Scope::Project(dir)) => {
            let settings = o.home.join(".gemini/settings.json");
            let user = read_json(&settings, read(&settings)?.as_deref())?;
            let enabled = user
                .get("security")
                .and_then(|s| s.get("folderTrust"))
                .and_then(|f| f.get("enabled"))
                .and_then(Value::as_bool)
                .unwrap_or(true);
            if enabled
                && !gemini_trusted(&o.home, dir)?
                && std::env::var("GEMINI_CLI_TRUST_WORKSPACE").as_deref() != Ok("true")
            {
                p.refusals.push(format!(
                    "Gemini CLI ignores the settings (and so the hooks) of a folder it does not trust, silently, and `gemini -p` exits in one. Trust {} first: run `gemini` there and choose \"Trust folder\" (it is written to {}), or use `afr setup gemini --user`",
                    dir.display(),
                    o.home.join(".gemini/trustedFolders.json").display()
                ));
            }
        }
        (Agent::Codex, scope) => {
            if let Scope::Project(dir) = scope {
                // Codex reads its user configuration from $CODEX_HOME (else ~/.codex).
                let cfg = std::env::var_os("CODEX_HOME")
                    .map_or_else(|| o.home.join(".codex"), PathBuf::from)
                    .join("config.toml");
                let text = read(&cfg)?.unwrap_or_default();
                let trusted = text
                    .parse::<toml_edit::DocumentMut>()
                    .ok()
                    .is_some_and(|d| {
                        d.get("projects")
                            .and_then(|ps| ps.get(dir.display().to_string()))
                            .and_then(|pr| pr.get("trust_level"))
                            .and_then(|t| t.as_str())
                            == Some("trusted")
                    });
                if !trusted {
                    p.refusals.push(format!(
                        "Codex loads a project's .codex/ only in a trusted project, silently: add `[projects.\"{}\"] trust_level = \"trusted\"` to {} (or trust it when `codex` asks), or use `afr setup codex --user`",
                        dir.display(),
                        cfg.display()
                    ));
                }
            }
            p.notes.push(
                "Codex runs a new or changed hook only once you trust it, and otherwise skips it silently: open `codex`, review the AFR hooks and trust them (/hooks), or run `codex exec --dangerously-bypass-hook-trust`".into(),
            );
        }
        (Agent::ClaudeCode, Scope::Project(_)) if o.wrap_mcp => {
            p.notes.push("Claude Code asks once before it starts the servers of a project's .mcp.json (or set `enableAllProjectMcpServers`): approve the wrapped servers".into());
        }
        _ => {}
    }
    Ok(())
}

/// Whether Gemini CLI's trusted folders file trusts `dir` (`TRUST_FOLDER` on it or an
/// ancestor, `TRUST_PARENT` on a child of an ancestor; the nearest entry decides).
fn gemini_trusted(home: &Path, dir: &Path) -> Result<bool, SetupError> {
    let path = home.join(".gemini/trustedFolders.json");
    let m = read_json(&path, read(&path)?.as_deref())?;
    let mut best: Option<(usize, bool)> = None;
    for (p, level) in &m {
        let p = Path::new(p);
        let (root, trusted) = match level.as_str() {
            Some("TRUST_FOLDER") => (p, true),
            Some("TRUST_PARENT") => (p.parent().unwrap_or(p), true),
            Some("DO_NOT_TRUST") => (p, false),
            _ => continue,
        };
        if dir.starts_with(root) {
            let depth = root.components().count();
            if best.is_none_or(|(d, _)| depth > d) {
                best = Some((depth, trusted));
            }
        }
    }
    Ok(best.is_some_and(|(_, t)| t))
}

fn backup_paths(path: &Path) -> (PathBuf, PathBuf) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    (
        path.with_file_name(format!("{name}.afr-backup")),
        path.with_file_name(format!("{name}.afr-absent")),
    )
}

/// Writes the plan's files, each after a backup of the original (kept from the first setup).
pub fn apply(p: &Plan) -> Result<(), SetupError> {
    use std::os::unix::fs::PermissionsExt;
    for c in &p.changes {
        // A symlinked configuration (dotfiles) is written through its link.
        let path = std::fs::canonicalize(&c.path).unwrap_or_else(|_| c.path.clone());
        let (backup, absent) = backup_paths(&c.path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        // The file's own mode, kept (these files hold tokens: `~/.claude.json`, MCP `env`);
        // a new one is private.
        let mode = std::fs::metadata(&path).map_or(0o600, |m| m.permissions().mode() & 0o777);
        if !backup.exists() && !absent.exists() {
            match &c.before {
                Some(b) => write_private(&backup, b.as_bytes(), mode)?,
                None => write_private(&absent, b"", 0o600)?,
            }
        }
        let tmp = path.with_extension("afr-tmp");
        write_private(&tmp, c.after.as_bytes(), mode)?;
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
    }
    if !p.wrapped.is_empty() {
        // The servers of every setup, for `afr otlp` (the names only, no commands).
        afr_client::wrapped::add(&p.dir, &p.wrapped)
            .map_err(io(&p.dir.join(afr_client::wrapped::FILE)))?;
    }
    Ok(())
}

/// Writes `bytes` to a new `path` with `mode` (whatever the umask), synced.
fn write_private(path: &Path, bytes: &[u8], mode: u32) -> Result<(), SetupError> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io(path))?;
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(io(path))?;
    f.write_all(bytes).map_err(io(path))?;
    f.sync_all().map_err(io(path))
}

/// Puts back what setup changed for `o`'s files; the files restored.
pub fn undo(o: &SetupOptions) -> Result<Vec<String>, SetupError> {
    let (a, b) = o.files();
    let mut done = Vec::new();
    for path in [a, b] {
        let (backup, absent) = backup_paths(&path);
        if backup.exists() {
            std::fs::rename(&backup, &path).map_err(io(&path))?;
            done.push(format!("restored {}", path.display()));
        } else if absent.exists() {
            if path.exists() {
                std::fs::remove_file(&path).map_err(io(&path))?;
            }
            std::fs::remove_file(&absent).map_err(io(&absent))?;
            done.push(format!(
                "removed {} (it did not exist before)",
                path.display()
            ));
        }
    }
    Ok(done)
}
