//! `<dir>/mcp-wrapped`: the MCP servers (by the coding-agent CLI's name for them, one a line)
//! that run behind `afr mcp wrap`. `afr setup` adds the servers it wraps; the OTLP receiver
//! leaves their calls' log records to the gateway, which records them in the call's path with
//! the server's real answer.

use std::path::Path;

/// The file's name under a recorder directory.
pub const FILE: &str = "mcp-wrapped";

/// The servers listed under `dir` (none when the file is missing).
pub fn read(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join(FILE))
        .map(|t| {
            t.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Adds `servers` to the list under `dir` (each once), creating the directory and the file.
pub fn add(dir: &Path, servers: &[String]) -> std::io::Result<()> {
    let mut names = read(dir);
    for w in servers {
        if !names.contains(w) {
            names.push(w.clone());
        }
    }
    std::fs::create_dir_all(dir)?;
    let text = format!(
        "# MCP servers behind `afr mcp wrap` (written by `afr setup`): `afr otlp` leaves their calls to the gateway\n{}\n",
        names.join("\n")
    );
    std::fs::write(dir.join(FILE), text)
}
