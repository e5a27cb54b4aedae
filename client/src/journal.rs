//! The producers' write-ahead journals: how one event per `tools/call` can be written after the
//! call, while nothing runs unrecorded.
//!
//! A call's event needs its effects, which exist only once the server has answered; the call
//! may not reach the server before it is recorded. So the gateway first appends the call's
//! event as known so far (intent, execution, evaluation, provenance) to its journal and syncs
//! the journal; only then does it forward the call. When the answer comes, the complete event
//! goes to the recorder under the call's idempotency key, and the journal notes the call done.
//!
//! ```text
//!  <dir>/gateway-journal/<pid>.<nonce>.jsonl      (0600, one file per gateway process)
//!  {"key":"mcp:…","event":{…intent, execution…}}   appended, synced before forwarding
//!  {"done":"mcp:…"}                               appended once its event is durable
//! ```
//!
//! If the gateway dies (`kill -9`), its journal outlives it: [`recover`] records each call it
//! holds without a `done` line as one event with `effects.error` = `outcome unknown: …`, under
//! the same idempotency key (so a call whose event was written just before the crash is not
//! recorded twice), then deletes the journal. Writers run it when they start (`afr serve`, a
//! gateway, the OTLP receiver), and so does `afr recover`; commands that only read the log
//! (`afr status`, `afr query`, `afr export`) never do: they say how many entries wait
//! ([`waiting`]).
//!
//! Syncs are shared: [`Journal::append`] writes without syncing and returns the end offset;
//! [`Journal::sync_to`] syncs once for every append made so far, so calls in flight together
//! share one `fdatasync`.
//!
//! The file is preallocated: it is created as [`PREALLOC_BYTES`] of zeros, synced with its
//! name, and lines are written over the zeros. An `fdatasync` then flushes the line's data
//! only: the file's size and block map do not change, so the sync needs no commit of the file
//! system's own journal (on ext4 about a third of an appending sync's time, and it does not
//! queue behind another process's commit, such as the recorder's). The zeros after the last
//! line read as one line that is not JSON, which recovery skips like a torn last line.

use std::{
    collections::BTreeMap,
    fs::{File, OpenOptions},
    io::{BufRead, BufReader, Write},
    os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt},
    path::{Path, PathBuf},
    sync::{Mutex, MutexGuard},
};

use serde_json::{Value, json};

/// The MCP gateway's journals: calls waiting for their answers.
pub const GATEWAY: &str = "gateway-journal";
/// The OTLP receiver's journals: tool spans held for a parent span that has not arrived yet.
pub const OTLP: &str = "otlp-journal";
/// The coding-agent hooks' journal: one file per tool call between its pre-tool hook (which
/// writes it before the call may run) and its post-tool hook (which records the complete event
/// and removes it). The file is named after the *agent's* process, not the hook's: its entry is
/// an orphan once the agent is gone ([`write_one`]).
pub const HOOK: &str = "hook-journal";
/// Every producer journal, in the order recovery reads them.
pub const ALL: [&str; 3] = [GATEWAY, OTLP, HOOK];

/// The directory of the journals called `name` ([`GATEWAY`], [`OTLP`]) under a recorder
/// directory.
pub fn journal_dir(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// A journal file grows until no call is pending, then is emptied once over this size.
const ROTATE_BYTES: u64 = 16 * 1024 * 1024;
/// Zeros written ahead of the journal's lines, at creation and whenever the lines reach them.
pub const PREALLOC_BYTES: u64 = 1024 * 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Debug)]
struct Writer {
    /// Bytes of lines written (where the next line goes).
    len: u64,
    /// The file's size: lines, then zeros.
    allocated: u64,
    /// Keys appended and not yet done (a `done` for any other key is ignored).
    pending: std::collections::HashSet<String>,
}

/// This process's journal.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    /// Written at offsets under `w`'s lock; synced without it.
    file: File,
    w: Mutex<Writer>,
    /// Bytes known to be on stable storage.
    synced: Mutex<u64>,
}

/// Writes zeros over `from..to` of `file`.
fn zero(file: &File, from: u64, to: u64) -> std::io::Result<()> {
    const CHUNK: usize = 64 * 1024;
    let zeros = [0u8; CHUNK];
    let mut at = from;
    while at < to {
        let n = usize::try_from(to - at).map_or(CHUNK, |n| n.min(CHUNK));
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

impl Journal {
    /// Creates this process's journal `name` ([`GATEWAY`], [`OTLP`]) under `dir`.
    pub fn create(dir: &Path, name: &str) -> std::io::Result<Journal> {
        let jd = journal_dir(dir, name);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&jd)?;
        let path = jd.join(format!(
            "{}.{:016x}.jsonl",
            std::process::id(),
            rand::random::<u64>()
        ));
        // Not `append`: lines are written at their offsets, over the preallocated zeros.
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        zero(&file, 0, PREALLOC_BYTES)?;
        file.sync_all()?;
        // The file's name must survive a crash too.
        File::open(&jd)?.sync_all()?;
        Ok(Journal {
            path,
            file,
            w: Mutex::new(Writer {
                len: 0,
                allocated: PREALLOC_BYTES,
                pending: std::collections::HashSet::new(),
            }),
            synced: Mutex::new(0),
        })
    }

    /// Writes `b` after the last line, first extending the zeros if it does not fit (the next
    /// sync then also commits the new size, once per [`PREALLOC_BYTES`]); the new end.
    fn write_locked(&self, w: &mut Writer, b: &[u8]) -> std::io::Result<u64> {
        let end = w.len + b.len() as u64;
        if end > w.allocated {
            let to = end + PREALLOC_BYTES;
            zero(&self.file, w.allocated, to)?;
            w.allocated = to;
        }
        self.file.write_all_at(b, w.len)?;
        w.len = end;
        Ok(end)
    }

    fn write(&self, line: &Value) -> std::io::Result<u64> {
        let mut b = line.to_string().into_bytes();
        b.push(b'\n');
        let mut w = lock(&self.w);
        self.write_locked(&mut w, &b)
    }

    /// Appends a call's event under `key` (again, to replace what an earlier append said, e.g.
    /// after an approval); returns the offset to [`Journal::sync_to`] before forwarding.
    pub fn append(&self, key: &str, event: &impl serde::Serialize) -> std::io::Result<u64> {
        let offset = self.write(&json!({"key": key, "event": event}))?;
        lock(&self.w).pending.insert(key.to_owned());
        Ok(offset)
    }

    /// Notes the call `key` done: its event is durable in the recorder. Not synced (a lost
    /// `done` line makes [`recover`] record the call again under its key, which the recorder
    /// answers as a duplicate). A key that was never appended is ignored.
    pub fn done(&self, key: &str) {
        let mut w = lock(&self.w);
        if !w.pending.remove(key) {
            return;
        }
        if w.pending.is_empty() && w.len > ROTATE_BYTES {
            // The last pending call is done: start the file afresh, zeros again. (Lock order:
            // `w`, then `synced`, as in `sync_to`.)
            let fresh = self.file.set_len(0).and_then(|()| {
                zero(&self.file, 0, PREALLOC_BYTES)?;
                self.file.sync_data()
            });
            if fresh.is_ok() {
                w.len = 0;
                w.allocated = PREALLOC_BYTES;
                *lock(&self.synced) = 0;
            }
            return;
        }
        let mut b = json!({ "done": key }).to_string().into_bytes();
        b.push(b'\n');
        // A lost `done` line only makes recovery record the call again under its key.
        let _ = self.write_locked(&mut w, &b);
    }

    /// Makes everything appended up to `offset` durable, sharing one sync among callers.
    pub fn sync_to(&self, offset: u64) -> std::io::Result<()> {
        // Lock order: `w`, then `synced` (as in `done`'s rotation).
        let len = lock(&self.w).len;
        let mut synced = lock(&self.synced);
        if *synced >= offset {
            return Ok(());
        }
        // Everything written before `len` is covered by this sync.
        self.file.sync_data()?;
        *synced = (*synced).max(len);
        Ok(())
    }

    /// Removes the journal if every call in it is done (else it stays, for [`recover`]);
    /// whether it was removed.
    pub fn remove_if_done(&self) -> bool {
        let w = lock(&self.w);
        w.pending.is_empty() && std::fs::remove_file(&self.path).is_ok()
    }
}

/// Writes a journal `name` of one entry, `{"key": key, "event": event}` (with `"complete":
/// true` when `complete`: recovered as it is, not as an unknown outcome), as the file
/// `<owner>.<tag>.jsonl`, replacing any file of that name, synced with its name before it
/// returns. `owner` is the process whose death makes the entry an orphan; `tag` (hex) names
/// the entry for [`find_one`]. Used by the hooks, whose processes live for one call each.
pub fn write_one(
    dir: &Path,
    name: &str,
    owner: u32,
    tag: &str,
    key: &str,
    event: &impl serde::Serialize,
    complete: bool,
) -> std::io::Result<PathBuf> {
    let jd = journal_dir(dir, name);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&jd)?;
    let mut line = if complete {
        json!({"key": key, "event": event, "complete": true})
    } else {
        json!({"key": key, "event": event})
    }
    .to_string()
    .into_bytes();
    line.push(b'\n');
    // Written aside and renamed: a reader (recovery, the post-tool hook) sees the old entry or
    // the new one, never half of one. A temporary name does not end in `.jsonl`.
    let tmp = jd.join(format!(".{tag}.{}.tmp", std::process::id()));
    let path = jd.join(format!("{owner}.{tag}.jsonl"));
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(&line)?;
    f.sync_data()?;
    drop(f);
    if let Some(old) = find_one(dir, name, tag).map(|(p, ..)| p)
        && old != path
    {
        let _ = std::fs::remove_file(old);
    }
    std::fs::rename(&tmp, &path)?;
    File::open(&jd)?.sync_all()?;
    Ok(path)
}

/// The entry [`write_one`] wrote under `tag`, by any owner: its file, key and event.
pub fn find_one(dir: &Path, name: &str, tag: &str) -> Option<(PathBuf, String, Value)> {
    let suffix = format!(".{tag}.jsonl");
    let entries = std::fs::read_dir(journal_dir(dir, name)).ok()?;
    for e in entries.flatten() {
        if !e.file_name().to_str().is_some_and(|n| n.ends_with(&suffix)) {
            continue;
        }
        let path = e.path();
        let text = std::fs::read_to_string(&path).ok()?;
        let Ok(Value::Object(mut m)) = serde_json::from_str(text.lines().last()?) else {
            continue;
        };
        let key = m.get("key").and_then(Value::as_str)?.to_owned();
        let event = m.remove("event")?;
        return Some((path, key, event));
    }
    None
}

/// Removes the entry at `path` (its event is durable in the recorder); the name's removal is
/// not synced (a surviving entry is recorded again under its key, which the recorder answers as
/// a duplicate).
pub fn remove_one(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// A call left pending in a dead gateway's journal.
#[derive(Debug, Clone, PartialEq)]
pub struct Orphan {
    /// Its idempotency key.
    pub key: String,
    /// Its event as journaled, with `effects.error` = `outcome unknown: …` added.
    pub event: Value,
}

/// Whether the process a journal is named after still runs: a killed agent its parent has not
/// reaped yet (a zombie) has stopped, and its calls are orphans.
fn alive(pid: &str) -> bool {
    pid.parse::<u32>()
        .is_ok_and(|p| p == std::process::id() || crate::writer::alive(u64::from(p)))
}

/// The journals `name` of processes that are gone, and the entries each left pending: for the
/// gateway, each call's event completed with why its outcome is unknown; for the OTLP
/// receiver, each held span's event as it was journaled.
pub fn orphans(dir: &Path, journal: &str) -> Vec<(PathBuf, Vec<Orphan>)> {
    let Ok(entries) = std::fs::read_dir(journal_dir(dir, journal)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.ends_with(".jsonl"))
            .and_then(|n| n.split('.').next())
        else {
            continue;
        };
        if alive(pid) {
            continue;
        }
        let Ok(f) = File::open(&path) else { continue };
        // The last journaled form of each call, in order of first appearance.
        let mut calls: BTreeMap<usize, (String, (Value, bool))> = BTreeMap::new();
        let mut index: BTreeMap<String, usize> = BTreeMap::new();
        for (n, line) in BufReader::new(f).lines().enumerate() {
            // A torn last line (the crash) is skipped: its call was never forwarded.
            let Ok(Value::Object(m)) = line.map(|l| serde_json::from_str(&l).unwrap_or_default())
            else {
                continue;
            };
            if let Some(k) = m.get("done").and_then(Value::as_str) {
                if let Some(i) = index.remove(k) {
                    calls.remove(&i);
                }
            } else if let (Some(k), Some(ev)) =
                (m.get("key").and_then(Value::as_str), m.get("event"))
            {
                let i = *index.entry(k.to_owned()).or_insert(n);
                // `complete`: the event is whole (its producer could not deliver it).
                let complete = m.get("complete").and_then(Value::as_bool) == Some(true);
                calls.insert(i, (k.to_owned(), (ev.clone(), complete)));
            }
        }
        let left = calls
            .into_values()
            .map(|(key, (mut event, complete))| {
                if journal == OTLP || complete {
                    return Orphan { key, event };
                }
                // Without `execution` the call was held for a decision: never forwarded.
                let why = if journal == HOOK {
                    if event.get("execution").is_some() {
                        format!(
                            "outcome unknown: the agent (pid {pid}) stopped before the call's result reached its hook; recovered from the hook journal"
                        )
                    } else {
                        format!(
                            "not run: the agent (pid {pid}) stopped while the call waited for a decision; recovered from the hook journal"
                        )
                    }
                } else if event.get("execution").is_some() {
                    format!(
                        "outcome unknown: the gateway (pid {pid}) stopped before the answer; recovered from its journal"
                    )
                } else {
                    format!(
                        "not forwarded: the gateway (pid {pid}) stopped before a decision; recovered from its journal"
                    )
                };
                event["effects"] = json!({ "error": why });
                Orphan { key, event }
            })
            .collect();
        out.push((path, left));
    }
    out
}

/// Records, with `record`, every entry that dead processes left in their journals `name`, and
/// deletes each journal whose entries were all recorded; the number recorded. Failures are
/// reported on stderr (the journal then stays, for the next try).
pub fn recover(
    dir: &Path,
    name: &str,
    mut record: impl FnMut(&Orphan) -> Result<(), String>,
) -> usize {
    let mut n = 0;
    for (path, left) in orphans(dir, name) {
        let mut all = true;
        for o in &left {
            match record(o) {
                Ok(()) => n += 1,
                Err(e) => {
                    eprintln!(
                        "afr: a call left in the gateway journal {} was not recorded: {e}",
                        path.display()
                    );
                    all = false;
                }
            }
        }
        if all {
            let _ = std::fs::remove_file(&path);
        }
    }
    n
}

/// The calls and spans that dead processes left in the journals of `dir`, not recorded yet:
/// what a command that only reads reports (it never records them itself).
pub fn waiting(dir: &Path) -> usize {
    ALL.iter()
        .flat_map(|n| orphans(dir, n))
        .map(|(_, left)| left.len())
        .sum()
}

/// [`recover`] of both journals into the recorder of `dir` (through `afr serve` when it
/// runs, else the store opened as its writer): what `afr recover` and a writer starting run,
/// so that a gateway or a receiver killed mid-call shows.
pub fn recover_into(dir: &Path) -> Result<usize, crate::DoorError> {
    if ALL.iter().all(|n| orphans(dir, n).is_empty()) {
        return Ok(0);
    }
    let mut door = crate::Door::writer(dir, afr_recorder::Config::default())?;
    Ok(recover_through(dir, &mut door))
}

/// [`recover`] of both journals through `door`.
pub fn recover_through(dir: &Path, door: &mut crate::Door) -> usize {
    ALL.iter()
        .map(|name| {
            recover(dir, name, |o| {
                let event = orphan_input(o)?;
                door.submit(&event, &o.key)
                    .and_then(crate::Ticket::settle)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
        })
        .sum()
}

/// An orphan's event as the recorder takes it: the journaled JSON parsed strictly and
/// validated (schema, limits, reserved names), as the recorder would on ingest.
pub fn orphan_input(o: &Orphan) -> Result<afr_core::EventInput, String> {
    let bad = |e: &dyn std::fmt::Display| format!("journaled event {}: {e}", o.key);
    let bytes = serde_json::to_vec(&o.event).map_err(|e| bad(&e))?;
    let input = afr_core::EventInput::from_json(&bytes, afr_core::event::DEFAULT_MAX_EVENT_BYTES)
        .map_err(|e| bad(&e))?;
    input.validate().map_err(|e| bad(&e))?;
    Ok(input)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn pending_calls_of_a_dead_gateway_are_orphans() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::create(d.path(), GATEWAY).unwrap();
        let o1 = j.append("k1", &json!({"intent": {"tool": "a"}})).unwrap();
        let b = json!({"intent": {"tool": "b"}, "execution": {}});
        let o2 = j.append("k2", &b).unwrap();
        j.sync_to(o1).unwrap();
        assert!(*lock(&j.synced) >= o2, "one sync covers both");
        let b2 = json!({"intent": {"tool": "b2"}, "execution": {}});
        j.append("k2", &b2).unwrap();
        j.append("k3", &json!({"intent": {"tool": "held"}}))
            .unwrap();
        j.done("k1");
        // Our own journal is alive: not an orphan.
        assert!(orphans(d.path(), GATEWAY).is_empty());
        // The same file under a dead pid.
        let dead = journal_dir(d.path(), GATEWAY).join("999999999.0.jsonl");
        std::fs::copy(&j.path, &dead).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&dead)
            .unwrap()
            .write_all(b"{\"key\":\"torn")
            .unwrap();
        let got = orphans(d.path(), GATEWAY);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1.len(), 2);
        assert_eq!(got[0].1[0].key, "k2");
        assert_eq!(got[0].1[0].event["intent"]["tool"], "b2");
        let why = |i: usize| {
            got[0].1[i].event["effects"]["error"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert!(why(0).starts_with("outcome unknown: the gateway (pid 999999999)"));
        assert!(why(1).starts_with("not forwarded: the gateway (pid 999999999)"));
        assert!(!j.remove_if_done(), "k2 and k3 are pending");
        j.done("k2");
        j.done("k3");
        assert!(j.remove_if_done());
    }

    #[test]
    fn lines_are_written_over_preallocated_zeros_which_recovery_skips() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::create(d.path(), GATEWAY).unwrap();
        assert_eq!(std::fs::metadata(&j.path).unwrap().len(), PREALLOC_BYTES);
        // Past the preallocated zeros: the file grows ahead of the lines.
        let big =
            json!({"intent": {"tool": "big", "args": "x".repeat(300 * 1024)}, "execution": {}});
        let mut end = 0;
        for i in 0..5 {
            end = j.append(&format!("k{i}"), &big).unwrap();
        }
        j.sync_to(end).unwrap();
        let size = std::fs::metadata(&j.path).unwrap().len();
        assert!(size > end, "zeros after the last line ({size} > {end})");
        for i in 0..4 {
            j.done(&format!("k{i}"));
        }
        let bytes = std::fs::read(&j.path).unwrap();
        assert!(bytes[lock(&j.w).len as usize..].iter().all(|b| *b == 0));
        let dead = journal_dir(d.path(), GATEWAY).join("999999999.0.jsonl");
        std::fs::copy(&j.path, &dead).unwrap();
        // A torn line written over the zeros (a crash mid-write) is skipped too.
        let f = std::fs::OpenOptions::new().write(true).open(&dead).unwrap();
        f.write_all_at(b"{\"key\":\"torn", lock(&j.w).len).unwrap();
        let got = orphans(d.path(), GATEWAY);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1.len(), 1, "k4 only");
        assert_eq!(got[0].1[0].key, "k4");
        assert_eq!(got[0].1[0].event["intent"]["tool"], "big");
    }
}
