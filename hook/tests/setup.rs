//! `afr setup`: the files it writes for each CLI, idempotence, other hooks kept, MCP servers
//! wrapped, backups and undo, and the trust gates it refuses under.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use std::path::{Path, PathBuf};

use afr_core::agent::Agent;
use afr_hook::setup::{Scope, SetupOptions, apply, plan, undo};
use serde_json::{Value, json};

fn options(agent: Agent, scope: Scope, home: &Path) -> SetupOptions {
    SetupOptions {
        agent,
        scope,
        afr: PathBuf::from("/opt/afr/bin/afr"),
        hook_program: None,
        // Beside the home, with a space to quote.
        dir: home.with_file_name("afr rec"),
        policy: Some(PathBuf::from("/etc/afr/policy.toml")),
        fail_open: false,
        wrap_mcp: true,
        home: home.to_owned(),
    }
}

fn json_at(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn claude_code_project_setup_is_idempotent_keeps_other_hooks_and_undoes() {
    let t = tempfile::tempdir().unwrap();
    let (home, proj) = (t.path().join("home"), t.path().join("proj"));
    std::fs::create_dir_all(proj.join(".claude")).unwrap();
    let settings = proj.join(".claude/settings.json");
    let original = r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"my-linter"}]}]},"model":"opus"}"#;
    std::fs::write(&settings, original).unwrap();
    let mcp = proj.join(".mcp.json");
    let mcp_original = r#"{"mcpServers":{"fs":{"command":"npx","args":["-y","server-filesystem","/srv"],"env":{"A":"1"}},"web":{"type":"http","url":"https://x.example/mcp"}}}"#;
    std::fs::write(&mcp, mcp_original).unwrap();
    // It holds tokens (`env`): its mode is kept, and so is its backup's.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&mcp, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let o = options(Agent::ClaudeCode, Scope::Project(proj.clone()), &home);

    let p = plan(&o).unwrap();
    assert!(p.refusals.is_empty());
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("`web`") && n.contains("afr mcp proxy")),
        "{:?}",
        p.notes
    );
    apply(&p).unwrap();
    let s = json_at(&settings);
    assert_eq!(s["model"], "opus");
    let pre = s["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "AFR's entry first, the user's kept: {pre:?}");
    let cmd = pre[0]["hooks"][0]["command"].as_str().unwrap();
    assert_eq!(
        cmd,
        format!(
            "/opt/afr/bin/afr --dir '{}' hook claude-code --policy /etc/afr/policy.toml --mcp-wrapped fs",
            t.path().join("afr rec").display()
        )
    );
    // The wrapped servers, for `afr otlp`.
    let listed = std::fs::read_to_string(t.path().join("afr rec/mcp-wrapped")).unwrap();
    assert!(listed.lines().any(|l| l == "fs"), "{listed}");
    assert_eq!(pre[0]["matcher"], "*");
    assert_eq!(pre[0]["hooks"][0]["timeout"], 300);
    assert_eq!(pre[1]["hooks"][0]["command"], "my-linter");
    for e in [
        "PostToolUse",
        "PostToolUseFailure",
        "UserPromptSubmit",
        "SessionStart",
    ] {
        assert_eq!(s["hooks"][e][0]["hooks"][0]["command"], cmd, "{e}");
    }
    let m = json_at(&mcp);
    assert_eq!(mode(&mcp), 0o600);
    assert_eq!(mode(&proj.join(".mcp.json.afr-backup")), 0o600);
    assert_eq!(m["mcpServers"]["fs"]["command"], "/opt/afr/bin/afr");
    assert_eq!(
        m["mcpServers"]["fs"]["args"],
        json!([
            "--dir",
            t.path().join("afr rec").to_str().unwrap(),
            "mcp",
            "wrap",
            "--policy",
            "/etc/afr/policy.toml",
            "--",
            "npx",
            "-y",
            "server-filesystem",
            "/srv"
        ])
    );
    assert_eq!(m["mcpServers"]["fs"]["env"]["A"], "1");
    assert_eq!(m["mcpServers"]["web"]["url"], "https://x.example/mcp");

    // Again: nothing to change, the backup of the original is kept.
    let again = plan(&o).unwrap();
    assert!(again.changes.is_empty(), "{:?}", again.changes);
    // A changed option replaces AFR's entries, never duplicates them.
    let mut o2 = o.clone();
    o2.fail_open = true;
    apply(&plan(&o2).unwrap()).unwrap();
    let s = json_at(&settings);
    assert_eq!(s["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
    assert!(
        s["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .contains("--fail-open")
    );
    // The wrapped server follows the new options, and is not wrapped twice.
    let args: Vec<String> =
        serde_json::from_value(json_at(&mcp)["mcpServers"]["fs"]["args"].clone()).unwrap();
    assert_eq!(args.iter().filter(|a| *a == "wrap").count(), 1, "{args:?}");
    assert!(args.contains(&"--fail-open".to_owned()), "{args:?}");
    let dash = args.iter().position(|a| a == "--").unwrap();
    assert_eq!(
        args[dash + 1..],
        ["npx", "-y", "server-filesystem", "/srv"],
        "{args:?}"
    );

    let done = undo(&o).unwrap();
    assert_eq!(done.len(), 2);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), original);
    assert_eq!(std::fs::read_to_string(&mcp).unwrap(), mcp_original);
    assert!(undo(&o).unwrap().is_empty());
}

#[test]
fn codex_user_setup_wraps_toml_servers_keeping_comments() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let codex = t.path().join("codex-home");
    std::fs::create_dir_all(&codex).unwrap();
    let cfg = codex.join("config.toml");
    std::fs::write(&cfg, "# my settings\nmodel = \"gpt-5.5\"\n\n[mcp_servers.fs]\n# the files\ncommand = \"node\"\nargs = [\"server.js\", \"/srv\"]\n").unwrap();
    let o = options(
        Agent::Codex,
        Scope::User {
            home: home.clone(),
            codex_home: Some(codex.clone()),
        },
        &home,
    );
    let p = plan(&o).unwrap();
    assert!(p.refusals.is_empty());
    assert!(p.notes.iter().any(|n| n.contains("trust")), "{:?}", p.notes);
    apply(&p).unwrap();
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        text.starts_with("# my settings\nmodel = \"gpt-5.5\""),
        "{text}"
    );
    assert!(text.contains("# the files"), "{text}");
    let doc: toml_edit::DocumentMut = text.parse().unwrap();
    assert_eq!(
        doc["mcp_servers"]["fs"]["command"].as_str(),
        Some("/opt/afr/bin/afr")
    );
    let hooks = json_at(&codex.join("hooks.json"));
    assert!(
        hooks["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .ends_with("hook codex --policy /etc/afr/policy.toml --mcp-wrapped fs")
    );
    assert!(
        hooks["hooks"]["PostToolUseFailure"].is_null(),
        "Codex has no such event"
    );
    undo(&o).unwrap();
    assert!(
        !codex.join("hooks.json").exists(),
        "a file setup created is removed by undo"
    );
    assert!(
        std::fs::read_to_string(&cfg)
            .unwrap()
            .contains("command = \"node\"")
    );
}

#[test]
fn gemini_project_setup_refuses_an_untrusted_folder() {
    let t = tempfile::tempdir().unwrap();
    let (home, proj) = (t.path().join("home"), t.path().join("work/proj"));
    std::fs::create_dir_all(&proj).unwrap();
    let o = options(Agent::Gemini, Scope::Project(proj.clone()), &home);
    if std::env::var("GEMINI_CLI_TRUST_WORKSPACE").as_deref() == Ok("true") {
        return; // the environment trusts every folder
    }
    let p = plan(&o).unwrap();
    assert_eq!(p.refusals.len(), 1, "{p:?}");
    assert!(p.refusals[0].contains("trustedFolders.json"));
    // Trusting a parent folder is enough.
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(
        home.join(".gemini/trustedFolders.json"),
        json!({ t.path().join("work/x").to_str().unwrap(): "TRUST_PARENT" }).to_string(),
    )
    .unwrap();
    let p = plan(&o).unwrap();
    assert!(p.refusals.is_empty(), "{:?}", p.refusals);
    apply(&p).unwrap();
    let s = json_at(&proj.join(".gemini/settings.json"));
    assert_eq!(s["hooksConfig"]["enabled"], true);
    assert_eq!(
        s["hooks"]["BeforeTool"][0]["hooks"][0]["timeout"], 300_000,
        "milliseconds"
    );
    assert!(s["hooks"]["BeforeAgent"][0]["matcher"].is_null());
    // A folder the user refused stays refused, whatever its parent says.
    std::fs::write(
        home.join(".gemini/trustedFolders.json"),
        json!({ t.path().join("work/x").to_str().unwrap(): "TRUST_PARENT", proj.to_str().unwrap(): "DO_NOT_TRUST" }).to_string(),
    )
    .unwrap();
    assert_eq!(plan(&o).unwrap().refusals.len(), 1);
}

#[test]
fn codex_project_setup_needs_a_trusted_project() {
    let t = tempfile::tempdir().unwrap();
    let (home, proj) = (t.path().join("home"), t.path().join("proj"));
    std::fs::create_dir_all(&proj).unwrap();
    let o = options(Agent::Codex, Scope::Project(proj.clone()), &home);
    assert_eq!(plan(&o).unwrap().refusals.len(), 1);
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    std::fs::write(
        home.join(".codex/config.toml"),
        format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            proj.display()
        ),
    )
    .unwrap();
    assert!(plan(&o).unwrap().refusals.is_empty());
}

#[test]
fn a_malformed_settings_file_is_named_and_left_alone() {
    let t = tempfile::tempdir().unwrap();
    let proj = t.path().join("proj");
    std::fs::create_dir_all(proj.join(".claude")).unwrap();
    std::fs::write(proj.join(".claude/settings.json"), "{not json").unwrap();
    let o = options(Agent::ClaudeCode, Scope::Project(proj.clone()), t.path());
    let e = plan(&o).unwrap_err().to_string();
    assert!(e.contains("settings.json") && e.contains("not JSON"), "{e}");
    assert_eq!(
        std::fs::read_to_string(proj.join(".claude/settings.json")).unwrap(),
        "{not json"
    );
}
