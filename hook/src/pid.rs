//! Which process a hook works for. Standard library only: the thin client `afr-hook`
//! (cli/src/bin/afr-hook.rs) includes this very file, so that both name a call's journal entry
//! after the same process.

/// The process whose end makes a journaled call an orphan: the agent CLI, the first ancestor
/// of this hook that is not a shell or a wrapper the CLI ran it through (Claude Code names
/// itself in `CLAUDE_PID`).
pub fn agent_pid() -> u32 {
    if let Some(p) = std::env::var("CLAUDE_PID")
        .ok()
        .and_then(|p| p.parse().ok())
        && std::path::Path::new(&format!("/proc/{p}")).exists()
    {
        return p;
    }
    const WRAPPERS: [&str; 10] = [
        "sh", "bash", "dash", "zsh", "fish", "env", "timeout", "nice", "afr", "afr-hook",
    ];
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..8 {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if !WRAPPERS.contains(&comm.trim()) {
            return pid;
        }
        match parent_of(pid) {
            Some(p) if p > 1 => pid = p,
            _ => return pid,
        }
    }
    pid
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses: after the last `)`.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    rest.split_whitespace().nth(1)?.parse().ok()
}
