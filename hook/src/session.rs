//! What a session's hooks share across their processes: the prompt the calls that follow
//! answer, the model and version where a payload named them, subagents, and Gemini CLI's call
//! counters.
//!
//! ```text
//! <dir>/hook-sessions/<agent>.<tag>.json   (0600; tag = crate::tag(session, ""))
//! ```
//!
//! Each hook process reads and rewrites the file under an exclusive lock (hooks of one session
//! may run in parallel). **Gemini CLI pairing.** Gemini's hook payloads carry no tool-call id,
//! so a call is named by its content and its rank among identical calls of the session:
//! `#<sha256 of tool and arguments, 16 hex>/<k>`, where `k` counts the `BeforeTool` hooks of
//! the same tool and arguments before it. Its `AfterTool` hook takes the lowest `k` whose
//! journal entry is still there: identical calls finish in the order they started, which is
//! how Gemini runs them (one at a time). The counter is synced before the call's journal entry
//! is written, so a crash never hands out the same `k` twice.

use std::{
    collections::BTreeMap,
    fs::{File, OpenOptions},
    io::{Read, Seek, SeekFrom, Write},
    os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use afr_core::agent::Agent;
pub use afr_core::agent::{content_id, ranked};

/// The directory of the sessions' files under a recorder directory.
pub const SESSIONS_DIR: &str = "hook-sessions";

/// A prompt event the calls that follow name as a context source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptRef {
    /// Its sequence number.
    pub seq: u64,
    /// `sha256:<hex>` of the prompt's text.
    pub sha256: String,
}

/// The state of one session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The latest prompt.
    #[serde(default)]
    pub prompt: Option<PromptRef>,
    /// The model, once a payload named it.
    #[serde(default)]
    pub model: Option<String>,
    /// Subagents started in the session: id -> type.
    #[serde(default)]
    pub subagents: BTreeMap<String, String>,
    /// The call that is starting a subagent now (Claude Code `Agent`/`Task`, Codex
    /// `spawn_agent`): its tool and call id, taken by the next `SubagentStart`.
    #[serde(default)]
    pub delegating: Option<(String, String)>,
    /// Subagents started in the session: id -> the delegating call, `<tool> <call id>`.
    #[serde(default)]
    pub delegated_by: BTreeMap<String, String>,
    /// Gemini CLI: `BeforeTool` hooks seen per call content ([`content_id`]).
    #[serde(default)]
    pub started: BTreeMap<String, u64>,
}

/// A session's file, locked while it is open.
#[derive(Debug)]
pub struct Locked {
    file: File,
    /// The state read.
    pub state: State,
}

fn path(dir: &Path, agent: Agent, session: &str) -> PathBuf {
    dir.join(SESSIONS_DIR)
        .join(format!("{}.{}.json", agent.name(), crate::tag(session, "")))
}

/// Opens and locks the file of `session` (creating it).
pub fn lock(dir: &Path, agent: Agent, session: &str) -> std::io::Result<Locked> {
    let p = path(dir, agent, session);
    if let Some(parent) = p.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&p)?;
    file.lock()?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    // A file cut short by a crash is a fresh state: losing a prompt reference or a model name
    // is harmless; Gemini's counters are synced before use.
    let state = serde_json::from_str(&text).unwrap_or_default();
    Ok(Locked { file, state })
}

impl Locked {
    /// Writes the state back (synced when `sync`); the lock is released on drop.
    pub fn save(&mut self, sync: bool) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(&self.state).map_err(std::io::Error::other)?;
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.file.write_all(&bytes)?;
        if sync {
            self.file.sync_data()?;
        }
        Ok(())
    }
}

/// Reads the state of `session` without keeping the lock (a missing file is a fresh state).
pub fn read(dir: &Path, agent: Agent, session: &str) -> State {
    std::fs::read(path(dir, agent, session))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn state_round_trips_under_the_lock() {
        let d = tempfile::tempdir().unwrap();
        {
            let mut l = lock(d.path(), Agent::Gemini, "s").unwrap();
            *l.state.started.entry("abc".into()).or_default() += 1;
            l.state.model = Some("m".into());
            l.save(true).unwrap();
        }
        let s = read(d.path(), Agent::Gemini, "s");
        assert_eq!(s.started["abc"], 1);
        assert_eq!(s.model.as_deref(), Some("m"));
        assert_eq!(read(d.path(), Agent::Codex, "s"), State::default());
        let l = lock(d.path(), Agent::Gemini, "s").unwrap();
        assert_eq!(l.state.started["abc"], 1);
    }
}
