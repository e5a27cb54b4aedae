//! The receiver's memory of the coding-agent CLIs' tool calls: decisions held for the result
//! of their call, Gemini CLI's calls named by rank, and the hook journal consulted so that a
//! call `afr hook` records is never recorded twice.
//!
//! ```text
//!  tool_decision ──► held (memory; a rejection also in <dir>/otlp-journal/, synced)
//!                      │ the call's result arrives within the wait: folded into its event
//!                      │ a rejection with no result when the wait is over: its own event
//!  tool_result ──► key = afr_core::agent::key(agent, session, call)
//!                      │ <dir>/hook-journal/*.<tag>.jsonl exists: the hook will record it
//!                      ▼ else submitted under the key (a call the hook recorded: duplicate)
//! ```
//!
//! **Gemini CLI ranks.** Gemini CLI gives no call id, so `afr hook gemini` names a call
//! `ranked(content_id(tool, args), k)`, where `k` counts the session's earlier `BeforeTool`
//! hooks of the same tool and arguments. The receiver counts the session's `tool_call` records
//! of the same content the same way, in the order they arrive, and keeps the count in
//! `<dir>/otlp-sessions/gemini.<tag>.json` (0600, synced before the call's event is
//! submitted) so that a restart does not count again from 0. Each counted record is kept by a
//! hash of its bytes: the same record sent again (an exporter's retry) gets the same rank.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fs::{File, OpenOptions},
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use afr_client::journal::{self, Journal};
use afr_core::agent::{Agent, key, ranked, tag};

use crate::{
    logs::{CallName, Decision, ToolRecord, fold},
    map::ToolEvent,
};

/// How long a decision that allowed a call waits for the call's result (a shell command may
/// run for minutes); it only adds a policy evaluation to the result's event, and is held in
/// memory only.
pub const ALLOW_WAIT: Duration = Duration::from_secs(600);

/// The directory of the Gemini CLI rank files under a recorder directory.
pub const SESSIONS_DIR: &str = "otlp-sessions";

/// Sessions whose ranks are kept in memory at once (the others are read again when needed).
const CACHED_SESSIONS: usize = 256;

/// A decision waiting for its call's result.
struct Held {
    decision: Decision,
    /// The call's hook-journal tag.
    tag: String,
    since: Instant,
    /// Its rejection event is in the journal (recorded when no result comes).
    journaled: bool,
}

/// What one export's tool records come to.
#[derive(Default)]
pub(crate) struct Plan {
    /// The events to record, under their keys.
    pub(crate) write: Vec<ToolEvent>,
    /// Results of calls a hook is recording (its journal holds them): nothing recorded.
    pub(crate) linked: u64,
    /// Decisions this export holds (new or again).
    pub(crate) holding: u64,
    consumed: Vec<String>,
    hold: Vec<(String, String, Decision, bool)>,
}

/// The held decisions and the ranks.
pub(crate) struct Calls {
    dir: PathBuf,
    /// `--mcp-wrapped`: MCP servers whose calls the gateway records.
    pub(crate) mcp_wrapped: Vec<String>,
    held: HashMap<String, Held>,
    journal: Option<Arc<Journal>>,
    ranks: Ranks,
}

/// Whether a hook holds the call `tag` in its journal (it runs, and its hook records it).
pub fn hook_pending(dir: &Path, tag: &str) -> bool {
    journal::find_one(dir, journal::HOOK, tag).is_some()
}

impl Calls {
    pub(crate) fn new(dir: &Path) -> Calls {
        Calls {
            dir: dir.to_owned(),
            mcp_wrapped: Vec::new(),
            held: HashMap::new(),
            journal: None,
            ranks: Ranks::new(dir),
        }
    }

    /// Decisions held now.
    pub(crate) fn held(&self) -> usize {
        self.held.len()
    }

    /// Names the calls of `records`, pairs results with decisions, and leaves to the hook the
    /// calls its journal holds. Nothing is held until [`Calls::commit`]; Gemini ranks are
    /// synced here. `Err(None)`: more than `max_held` decisions would be held.
    pub(crate) fn plan(
        &mut self,
        records: Vec<ToolRecord>,
        max_held: usize,
    ) -> Result<Plan, Option<std::io::Error>> {
        let mut named = Vec::with_capacity(records.len());
        for r in records {
            let (agent, session, call) = match &r {
                ToolRecord::Decision(d) => (d.agent, d.session.clone(), d.call.clone()),
                ToolRecord::Result(t) => {
                    let call = match &t.call {
                        CallName::Id(c) => c.clone(),
                        CallName::Unnamed { content, record } => {
                            let k = self.ranks.rank(t.agent, &t.session, content, record)?;
                            ranked(content, k)
                        }
                    };
                    (t.agent, t.session.clone(), call)
                }
            };
            named.push((key(agent, &session, &call), tag(&session, &call), r));
        }
        self.ranks.save()?;
        let mut plan = Plan::default();
        // Calls of wrapped MCP servers are the gateway's: neither their results nor their
        // decisions are recorded from the log (else each would be recorded twice).
        let mut wrapped = self.mcp_wrapped.clone();
        wrapped.extend(afr_client::wrapped::read(&self.dir));
        let gateways = |r: &ToolRecord| {
            let (agent, tool) = match r {
                ToolRecord::Decision(d) => (d.agent, d.event.intent.tool.as_str()),
                ToolRecord::Result(t) => (t.agent, t.event.intent.tool.as_str()),
            };
            agent.mcp_tool(tool).is_some_and(|(server, _)| {
                wrapped.iter().any(|w| {
                    w == "*"
                        || w == server
                        || tool.starts_with(&format!("mcp__{w}__"))
                        || tool.starts_with(&format!("mcp_{w}_"))
                })
            })
        };
        let before = named.len();
        named.retain(|(_, _, r)| !gateways(r));
        plan.linked += (before - named.len()) as u64;
        let mut decisions: HashMap<String, (String, Decision)> = HashMap::new();
        let mut results = HashSet::new();
        for (k, t, r) in &named {
            match r {
                ToolRecord::Decision(d) => {
                    decisions.insert(k.clone(), (t.clone(), (**d).clone()));
                }
                ToolRecord::Result(_) => {
                    results.insert(k.clone());
                }
            }
        }
        for (k, t, r) in named {
            let ToolRecord::Result(res) = r else { continue };
            let mut event = res.event;
            if let Some(d) = decisions
                .get(&k)
                .map(|(_, d)| d)
                .or_else(|| self.held.get(&k).map(|h| &h.decision))
            {
                fold(&mut event, d);
            }
            if self.held.contains_key(&k) && !plan.consumed.contains(&k) {
                plan.consumed.push(k.clone());
            }
            if hook_pending(&self.dir, &t) {
                plan.linked += 1;
                continue;
            }
            plan.write.push(ToolEvent {
                key: k,
                event,
                parent: None,
                missing_parent: None,
                joins: Vec::new(),
            });
        }
        for (k, (t, d)) in decisions {
            if results.contains(&k) {
                continue;
            }
            // A rejection is recorded unless the hook holds the call (then it records it).
            let journaled = d.rejects() && !hook_pending(&self.dir, &t);
            plan.hold.push((k, t, d, journaled));
        }
        plan.holding = plan.hold.len() as u64;
        let new = plan
            .hold
            .iter()
            .filter(|(k, ..)| !self.held.contains_key(k))
            .count();
        // Every consumed key is held: what stays held once the plan is committed.
        let after = |held: &HashMap<String, Held>| {
            let gone = plan
                .consumed
                .iter()
                .filter(|k| held.contains_key(*k))
                .count();
            held.len() + new - gone
        };
        if after(&self.held) > max_held {
            // Allowing decisions only annotate an event: the oldest make room.
            let mut allows: Vec<(Instant, String)> = self
                .held
                .iter()
                .filter(|(k, h)| !h.journaled && !plan.consumed.contains(k))
                .map(|(k, h)| (h.since, k.clone()))
                .collect();
            allows.sort();
            for (_, k) in allows {
                if after(&self.held) <= max_held {
                    break;
                }
                self.held.remove(&k);
            }
            if after(&self.held) > max_held {
                return Err(None);
            }
        }
        Ok(plan)
    }

    /// Once the plan's events are durable: forgets the decisions folded into them, holds the
    /// others (a rejection journaled and synced before this returns).
    pub(crate) fn commit(&mut self, plan: Plan) -> std::io::Result<()> {
        for k in &plan.consumed {
            if let Some(h) = self.held.remove(k)
                && h.journaled
                && let Some(j) = &self.journal
            {
                j.done(k);
            }
        }
        let now = Instant::now();
        let mut synced_to = None;
        for (k, t, d, journaled) in plan.hold {
            if journaled {
                let j = match &self.journal {
                    Some(j) => j.clone(),
                    None => {
                        let j = Arc::new(Journal::create(&self.dir, journal::OTLP)?);
                        self.journal = Some(j.clone());
                        j
                    }
                };
                synced_to = Some((j.clone(), j.append(&k, &d.event)?));
            }
            self.held
                .entry(k)
                .and_modify(|h| {
                    h.journaled |= journaled;
                    h.decision = d.clone();
                })
                .or_insert(Held {
                    decision: d,
                    tag: t,
                    since: now,
                    journaled,
                });
        }
        if let Some((j, offset)) = synced_to {
            j.sync_to(offset)?;
        }
        Ok(())
    }

    /// The decisions whose wait is over (all of them with `all`): the rejections to record
    /// now, and how many allowing decisions are let go without a result.
    pub(crate) fn due(&mut self, wait: Duration, all: bool) -> (Vec<ToolEvent>, u64) {
        let now = Instant::now();
        let mut record = Vec::new();
        let mut dropped = 0;
        let keys: Vec<String> = self.held.keys().cloned().collect();
        for k in keys {
            let Some(h) = self.held.get(&k) else { continue };
            let age = now.duration_since(h.since);
            if h.journaled {
                if !all && age < wait {
                    continue;
                }
                if hook_pending(&self.dir, &h.tag) {
                    // The hook saw the call after all: it records it.
                    self.forget(&k);
                    continue;
                }
                record.push(ToolEvent {
                    key: k.clone(),
                    event: h.decision.event.clone(),
                    parent: None,
                    missing_parent: None,
                    joins: Vec::new(),
                });
            } else if all || age >= ALLOW_WAIT {
                self.held.remove(&k);
                dropped += 1;
            }
        }
        (record, dropped)
    }

    /// Forgets a held decision (its event is durable, or a hook records the call).
    pub(crate) fn forget(&mut self, k: &str) {
        if let Some(h) = self.held.remove(k)
            && h.journaled
            && let Some(j) = &self.journal
        {
            j.done(k);
        }
    }

    /// Removes this process's journal if nothing in it is pending.
    pub(crate) fn close(&mut self) {
        if let Some(j) = self.journal.take()
            && !j.remove_if_done()
        {
            self.journal = Some(j);
        }
    }
}

/// One session's counted records: content id -> the hashes of its records, in rank order.
type Session = BTreeMap<String, Vec<String>>;

/// Gemini CLI's call ranks per session, on disk.
struct Ranks {
    dir: PathBuf,
    sessions: HashMap<String, Session>,
    dirty: HashSet<String>,
}

impl Ranks {
    fn new(dir: &Path) -> Ranks {
        Ranks {
            dir: dir.join(SESSIONS_DIR),
            sessions: HashMap::new(),
            dirty: HashSet::new(),
        }
    }

    fn file(agent: Agent, session: &str) -> String {
        format!("{}.{}.json", agent.name(), tag(session, ""))
    }

    /// The rank of `record` among the session's records of `content` (counted now if new).
    fn rank(
        &mut self,
        agent: Agent,
        session: &str,
        content: &str,
        record: &str,
    ) -> std::io::Result<u64> {
        let name = Ranks::file(agent, session);
        if !self.sessions.contains_key(&name) {
            if self.sessions.len() >= CACHED_SESSIONS {
                let dirty = &self.dirty;
                self.sessions.retain(|n, _| dirty.contains(n));
            }
            let path = self.dir.join(&name);
            let s = match std::fs::read(&path) {
                Ok(b) => serde_json::from_slice(&b)
                    .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Session::new(),
                Err(e) => return Err(e),
            };
            self.sessions.insert(name.clone(), s);
        }
        let list = self
            .sessions
            .entry(name.clone())
            .or_default()
            .entry(content.to_owned())
            .or_default();
        let at = match list.iter().position(|r| r == record) {
            Some(i) => i,
            None => {
                list.push(record.to_owned());
                self.dirty.insert(name);
                list.len() - 1
            }
        };
        Ok(at as u64)
    }

    /// Writes the sessions counted since the last save, synced (file and name).
    fn save(&mut self) -> std::io::Result<()> {
        if self.dirty.is_empty() {
            return Ok(());
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        for name in self.dirty.clone() {
            let Some(s) = self.sessions.get(&name) else {
                continue;
            };
            let tmp = self.dir.join(format!(".{name}.{}.tmp", std::process::id()));
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&serde_json::to_vec(s).map_err(std::io::Error::other)?)?;
            f.sync_data()?;
            drop(f);
            std::fs::rename(&tmp, self.dir.join(&name))?;
            self.dirty.remove(&name);
        }
        File::open(&self.dir)?.sync_all()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
    use afr_core::event::GuardrailVerdict;

    use super::*;
    use crate::logs::map_logs;

    /// The tool records of the captured Claude Code session: decisions, then results.
    fn claude() -> (Vec<ToolRecord>, Vec<ToolRecord>) {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/claude-code-logs.json");
        let export = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        map_logs(&export)
            .0
            .into_iter()
            .partition(|r| matches!(r, ToolRecord::Decision(_)))
    }

    fn journaled(dir: &Path) -> usize {
        std::fs::read_dir(dir.join(journal::OTLP)).map_or(0, |d| d.count())
    }

    #[test]
    fn decisions_wait_for_their_results_and_a_rejection_without_one_is_recorded() {
        let d = tempfile::tempdir().unwrap();
        let mut c = Calls::new(d.path());
        let (decisions, results) = claude();
        let p = c.plan(decisions, 100).unwrap();
        assert!(p.write.is_empty());
        assert_eq!(p.holding, 7);
        c.commit(p).unwrap();
        assert_eq!(c.held(), 7);
        // Only the rejection is journaled (an allowing decision only annotates).
        assert_eq!(journaled(d.path()), 1);
        let p = c.plan(results, 100).unwrap();
        assert_eq!((p.write.len(), p.linked), (6, 0));
        for e in &p.write {
            assert!(e.key.starts_with("hook:claude-code:"), "{}", e.key);
            assert_eq!(e.event.policy_evaluation[0].guardrail, "claude-code:config");
        }
        c.commit(p).unwrap();
        assert_eq!(c.held(), 1);
        assert!(c.due(Duration::from_secs(3600), false).0.is_empty());
        let (due, dropped) = c.due(Duration::ZERO, false);
        assert_eq!((due.len(), dropped), (1, 0));
        let ev = &due[0].event;
        assert_eq!(ev.policy_evaluation[0].verdict, GuardrailVerdict::Deny);
        assert!(ev.execution.is_none());
        assert_eq!(
            due[0].key,
            key(
                Agent::ClaudeCode,
                "2d66b4e6-1f92-4999-960d-8c0e65c24600",
                "toolu_39fcfafb4d044807b73e23aa"
            )
        );
        c.forget(&due[0].key);
        assert_eq!(c.held(), 0);
        c.close();
        assert_eq!(
            journaled(d.path()),
            0,
            "the journal is removed once all is done"
        );
    }

    #[test]
    fn calls_a_hook_holds_are_left_to_it() {
        let d = tempfile::tempdir().unwrap();
        let mut c = Calls::new(d.path());
        let session = "2d66b4e6-1f92-4999-960d-8c0e65c24600";
        for call in [
            "toolu_51a7a419c14a4d13971d58a2",
            "toolu_39fcfafb4d044807b73e23aa",
        ] {
            let k = key(Agent::ClaudeCode, session, call);
            let t = tag(session, call);
            journal::write_one(
                d.path(),
                journal::HOOK,
                std::process::id(),
                &t,
                &k,
                &0,
                false,
            )
            .unwrap();
        }
        let (mut records, results) = claude();
        records.extend(results);
        let p = c.plan(records, 100).unwrap();
        assert_eq!((p.write.len(), p.linked, p.holding), (5, 1, 1));
        c.commit(p).unwrap();
        // The rejection of a call the hook holds is the hook's to record.
        assert_eq!(journaled(d.path()), 0);
        assert_eq!(c.due(Duration::ZERO, false), (Vec::new(), 0));
        assert_eq!(c.due(Duration::ZERO, true), (Vec::new(), 1));
    }

    #[test]
    fn held_decisions_are_bounded() {
        let d = tempfile::tempdir().unwrap();
        let mut c = Calls::new(d.path());
        let (decisions, _) = claude();
        assert!(matches!(c.plan(decisions.clone(), 3), Err(None)));
        let (allows, reject): (Vec<_>, Vec<_>) = decisions
            .into_iter()
            .partition(|r| matches!(r, ToolRecord::Decision(d) if !d.rejects()));
        let p = c.plan(allows, 6).unwrap();
        c.commit(p).unwrap();
        // Full: the oldest allowing decision makes room for the rejection.
        let p = c.plan(reject.clone(), 6).unwrap();
        c.commit(p).unwrap();
        assert_eq!(c.held(), 6);
        // Rejections never make room: refused (the exporter retries).
        let mut other = reject;
        if let ToolRecord::Decision(d) = &mut other[0] {
            d.call = "another".into();
        }
        let mut c2 = Calls::new(d.path());
        let p = c2.plan(other.clone(), 1).unwrap();
        c2.commit(p).unwrap();
        if let ToolRecord::Decision(d) = &mut other[0] {
            d.call = "a third".into();
        }
        assert!(matches!(c2.plan(other, 1), Err(None)));
    }

    #[test]
    fn ranks_count_new_records_and_survive_a_restart() {
        let d = tempfile::tempdir().unwrap();
        let mut r = Ranks::new(d.path());
        assert_eq!(r.rank(Agent::Gemini, "s", "c", "r1").unwrap(), 0);
        assert_eq!(r.rank(Agent::Gemini, "s", "c", "r2").unwrap(), 1);
        // The same record again (a retry): the same rank.
        assert_eq!(r.rank(Agent::Gemini, "s", "c", "r1").unwrap(), 0);
        assert_eq!(r.rank(Agent::Gemini, "s", "other", "r3").unwrap(), 0);
        assert_eq!(r.rank(Agent::Gemini, "t", "c", "r4").unwrap(), 0);
        r.save().unwrap();
        let mut again = Ranks::new(d.path());
        assert_eq!(again.rank(Agent::Gemini, "s", "c", "r2").unwrap(), 1);
        assert_eq!(again.rank(Agent::Gemini, "s", "c", "r5").unwrap(), 2);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(
                d.path()
                    .join(SESSIONS_DIR)
                    .join(Ranks::file(Agent::Gemini, "s")),
            )
            .unwrap()
            .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
    }
}
