//! The queue of calls held for a human decision (`escalate`), shared by every gateway of a
//! recorder directory and by `afr approvals` / `afr approve` / `afr reject`.
//!
//! A plain directory, `<dir>/approvals/` (mode 0700), so that it works with or without
//! `afr serve` and across the one wrapper per server that an MCP client starts:
//!
//! ```text
//!  gateway                                   afr approve 3f9c0b1d
//!  ── writes 3f9c0b1d.pending.json ──►  reads it, shows the prompt
//!  ◄─ polls for 3f9c0b1d.decision.json ──── writes it (create_new: one decision only)
//!  ── removes both when it acts on it
//! ```
//!
//! Files are written to a temporary name and renamed, so a reader never sees half a file;
//! both are created 0600 (the arguments of a held call may be sensitive).

use std::{
    fs::{File, OpenOptions},
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The queue's directory under a recorder directory.
pub fn queue_dir(dir: &Path) -> PathBuf {
    dir.join("approvals")
}

/// A call waiting for a decision, as `afr approvals` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PendingCall {
    /// 8 hex digits, unique in the queue.
    pub id: String,
    /// The exact prompt shown to the approver (the same text goes into `human_approval.prompt`).
    pub prompt: String,
    /// The tool.
    pub tool: String,
    /// Its arguments, exactly as the call carries them.
    pub arguments: Value,
    /// The server (name and version, and its command line or URL).
    pub server: String,
    /// The session's lane.
    pub lane: String,
    /// The policy rule that escalated the call.
    pub rule: String,
    /// When the gateway queued it (µs since the Unix epoch).
    pub created_at_us: u64,
    /// When it is rejected unless decided (µs since the Unix epoch).
    pub expires_at_us: u64,
    /// The gateway's process id (a queue entry whose gateway is gone is stale).
    pub pid: u32,
    /// The event's `intent` as it will be recorded if the call runs: what an approval signs.
    #[serde(default)]
    pub intent: Value,
    /// The event's `execution` as it will be recorded if the call runs.
    #[serde(default)]
    pub execution: Value,
    /// The action digest of `intent` and `execution` (`docs/spec/approvals.md` §1), as the
    /// gateway computed it; `afr approve` recomputes it from what it shows.
    #[serde(default)]
    pub action: String,
    /// The recorder id (`0x` + 40 hex digits) a signed statement names.
    #[serde(default)]
    pub recorder: String,
    /// The approvers one of whom must sign (names from the policy); empty when an unsigned
    /// decision is enough.
    #[serde(default)]
    pub signed_by: Vec<String>,
}

/// `approved` or `rejected`: the event schema's decision.
pub use afr_core::event::Decision;

/// A decision, as written by `afr approve` / `afr reject` (or made by the gateway itself: an
/// elicitation answer, a timeout).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Ruling {
    /// The decision.
    pub decision: Decision,
    /// Who decided (self-asserted: `afr approve --as`, or the login name).
    pub approver: String,
    /// When (µs since the Unix epoch).
    pub decided_at_us: u64,
    /// Why, if given.
    pub reason: Option<String>,
    /// The approver's signature over the call (`afr approve --ssh-key|--eth-key|--signature`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<afr_core::event::ApprovalSignature>,
}

/// The approver a client's cancellation is recorded under, before any person decided.
pub const CANCELLED_BY_CLIENT: &str = "afr-gateway: the client cancelled the call";

/// The ruling of a held call whose client cancelled it (`notifications/cancelled`, or its
/// connection closed): it never runs.
pub fn cancelled_by_client(reason: Option<&str>) -> Ruling {
    Ruling {
        decision: Decision::Rejected,
        approver: CANCELLED_BY_CLIENT.into(),
        decided_at_us: afr_recorder::now_us(),
        reason: reason.map(str::to_owned),
        signature: None,
    }
}

/// Whether `r` is a client's cancellation ([`cancelled_by_client`]).
pub fn is_cancelled_by_client(r: &Ruling) -> bool {
    r.approver == CANCELLED_BY_CLIENT && r.decision == Decision::Rejected
}

/// Errors of the queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The file system failed.
    #[error("approval queue {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No call with that id is waiting.
    #[error("no pending call `{0}` (list them with `afr approvals`)")]
    NotPending(String),
    /// The call was decided already.
    #[error("call `{0}` was already decided")]
    AlreadyDecided(String),
    /// The id is not 8 hex digits.
    #[error("`{0}` is not an approval id (8 hex digits, from `afr approvals`)")]
    BadId(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> QueueError + '_ {
    move |source| QueueError::Io {
        path: path.to_owned(),
        source,
    }
}

fn valid_id(id: &str) -> bool {
    id.len() == 8
        && id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

fn pending_path(q: &Path, id: &str) -> PathBuf {
    q.join(format!("{id}.pending.json"))
}

fn decision_path(q: &Path, id: &str) -> PathBuf {
    q.join(format!("{id}.decision.json"))
}

fn ensure_dir(q: &Path) -> Result<(), QueueError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(q)
        .map_err(io(q))
}

/// Writes `value` to `path` through a temporary file and a rename (0600). With `exclusive`,
/// fails with `AlreadyExists` when `path` exists.
fn write_json(path: &Path, value: &impl Serialize, exclusive: bool) -> Result<(), QueueError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| QueueError::Io {
        path: path.to_owned(),
        source: std::io::Error::other(e),
    })?;
    let tmp = path.with_extension(format!("tmp{}", rand::random::<u32>()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io(&tmp))?;
    f.write_all(&bytes)
        .and_then(|()| f.sync_all())
        .map_err(io(&tmp))?;
    drop(f);
    let r = if exclusive {
        // A hard link fails if the name exists: the first decision wins, atomically.
        std::fs::hard_link(&tmp, path)
    } else {
        std::fs::rename(&tmp, path)
    };
    let _ = std::fs::remove_file(&tmp);
    r.map_err(io(path))
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, QueueError> {
    match File::open(path) {
        Ok(f) => serde_json::from_reader(std::io::BufReader::new(f))
            .map(Some)
            .map_err(|e| QueueError::Io {
                path: path.to_owned(),
                source: std::io::Error::other(e),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(path)(e)),
    }
}

/// A new queue id.
pub fn new_id() -> String {
    format!("{:08x}", rand::random::<u32>())
}

/// Queues `call` (gateway side).
pub fn submit(dir: &Path, call: &PendingCall) -> Result<(), QueueError> {
    let q = queue_dir(dir);
    ensure_dir(&q)?;
    write_json(&pending_path(&q, &call.id), call, true)
}

/// The decision on `id`, if one was written (gateway side).
pub fn decision(dir: &Path, id: &str) -> Result<Option<Ruling>, QueueError> {
    read_json(&decision_path(&queue_dir(dir), id))
}

/// The used-nonce ledger: one empty file per signed approval nonce a gateway of this
/// recorder accepted (`<dir>/approval-nonces/<nonce>`, directory 0700, files 0600).
pub fn nonce_dir(dir: &Path) -> PathBuf {
    dir.join("approval-nonces")
}

/// Claims `nonce` (64 lower-case hex digits, as a signed statement's) for one call, durably
/// and once: `Ok(true)` the first time it is claimed by any gateway process of this recorder,
/// ever (the claim is synced, with its directory, before this returns); `Ok(false)` when it
/// was claimed before, by this process or another one, before or after a restart: a
/// replayed approval. A call MUST NOT be forwarded on an approval whose nonce this did not
/// return `Ok(true)` for; a nonce claimed by a call that then fails to run stays used (the
/// approver signs again).
pub fn claim_nonce(dir: &Path, nonce: &str) -> Result<bool, QueueError> {
    if nonce.len() != 64
        || !nonce
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(QueueError::Io {
            path: nonce_dir(dir),
            source: std::io::Error::other("an approval nonce is 64 lower-case hex digits"),
        });
    }
    let d = nonce_dir(dir);
    ensure_dir(&d)?;
    let path = d.join(nonce);
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(f) => {
            f.sync_all().map_err(io(&path))?;
            File::open(&d).and_then(|d| d.sync_all()).map_err(io(&d))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(QueueError::Io { path, source: e }),
    }
}

/// Removes `id` from the queue once the gateway has acted on it.
pub fn remove(dir: &Path, id: &str) {
    let q = queue_dir(dir);
    let _ = std::fs::remove_file(pending_path(&q, id));
    let _ = std::fs::remove_file(decision_path(&q, id));
    let _ = std::fs::remove_file(q.join(format!("{id}.statement.json")));
}

/// Every call waiting in the queue, oldest first, with whether a decision was already written
/// (and is waiting for the gateway to act on it).
pub fn list(dir: &Path) -> Result<Vec<(PendingCall, bool)>, QueueError> {
    let q = queue_dir(dir);
    let entries = match std::fs::read_dir(&q) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&q)(e)),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(io(&q))?;
        let name = e.file_name();
        let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".pending.json")) else {
            continue;
        };
        if !valid_id(id) {
            continue;
        }
        // Removed meanwhile: the gateway acted on it.
        if let Some(call) = read_json::<PendingCall>(&e.path())? {
            let decided = decision_path(&q, id).exists();
            out.push((call, decided));
        }
    }
    out.sort_by_key(|(c, _)| (c.created_at_us, c.id.clone()));
    Ok(out)
}

/// The call `id` waiting in the queue (`afr approve` shows it before deciding).
pub fn pending(dir: &Path, id: &str) -> Result<PendingCall, QueueError> {
    if !valid_id(id) {
        return Err(QueueError::BadId(id.to_owned()));
    }
    read_json::<PendingCall>(&pending_path(&queue_dir(dir), id))?
        .ok_or_else(|| QueueError::NotPending(id.to_owned()))
}

/// Where `afr approve ID --print` keeps the statement it printed, until the signature comes
/// back with `afr approve ID --signature`.
pub fn statement_path(dir: &Path, id: &str) -> Result<PathBuf, QueueError> {
    if !valid_id(id) {
        return Err(QueueError::BadId(id.to_owned()));
    }
    Ok(queue_dir(dir).join(format!("{id}.statement.json")))
}

/// Writes `value` as JSON to `path` (0600, replacing it).
pub fn write_private(path: &Path, value: &impl Serialize) -> Result<(), QueueError> {
    write_json(path, value, false)
}

/// Decides on `id` (`afr approve` / `afr reject`); returns the call decided on.
pub fn decide(dir: &Path, id: &str, ruling: &Ruling) -> Result<PendingCall, QueueError> {
    if !valid_id(id) {
        return Err(QueueError::BadId(id.to_owned()));
    }
    let q = queue_dir(dir);
    let call = read_json::<PendingCall>(&pending_path(&q, id))?
        .ok_or_else(|| QueueError::NotPending(id.to_owned()))?;
    match write_json(&decision_path(&q, id), ruling, true) {
        Err(QueueError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::AlreadyExists =>
        {
            Err(QueueError::AlreadyDecided(id.to_owned()))
        }
        r => r.map(|()| call),
    }
}

/// Writes the gateway's own decision on `id` (a timeout, an elicitation answer) as
/// [`decide`] would; if a decision was written first (`afr approve` won the race), that one
/// stands and is returned. If the queue cannot be written, `ruling` stands.
pub fn claim(dir: &Path, id: &str, ruling: Ruling) -> Ruling {
    let path = decision_path(&queue_dir(dir), id);
    match write_json(&path, &ruling, true) {
        Err(QueueError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::AlreadyExists =>
        {
            read_json::<Ruling>(&path).ok().flatten().unwrap_or(ruling)
        }
        _ => ruling,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn call(id: &str, at: u64) -> PendingCall {
        PendingCall {
            id: id.into(),
            prompt: "p".into(),
            tool: "t".into(),
            arguments: serde_json::json!({"a": 1}),
            server: "s".into(),
            lane: "mcp-1".into(),
            rule: "r".into(),
            created_at_us: at,
            expires_at_us: at + 1,
            pid: 1,
            intent: Value::Null,
            execution: Value::Null,
            action: String::new(),
            recorder: String::new(),
            signed_by: Vec::new(),
        }
    }

    fn ruling(d: Decision) -> Ruling {
        Ruling {
            decision: d,
            approver: "alice".into(),
            decided_at_us: 9,
            reason: None,
            signature: None,
        }
    }

    #[test]
    fn a_nonce_is_claimed_once_across_processes_and_restarts() {
        let d = tempfile::tempdir().unwrap();
        let n = "ab".repeat(32);
        assert!(claim_nonce(d.path(), &n).unwrap());
        assert!(!claim_nonce(d.path(), &n).unwrap());
        assert!(claim_nonce(d.path(), &"cd".repeat(32)).unwrap());
        let mode = |p: PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(nonce_dir(d.path())), 0o700);
        assert_eq!(mode(nonce_dir(d.path()).join(&n)), 0o600);
        for bad in ["../x", "AB".repeat(32).as_str(), "ab"] {
            assert!(claim_nonce(d.path(), bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn one_decision_per_call_and_private_files() {
        let d = tempfile::tempdir().unwrap();
        submit(d.path(), &call("0000000b", 2)).unwrap();
        submit(d.path(), &call("0000000a", 1)).unwrap();
        assert!(submit(d.path(), &call("0000000a", 1)).is_err());
        let mode = |p: PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(queue_dir(d.path())), 0o700);
        assert_eq!(mode(pending_path(&queue_dir(d.path()), "0000000a")), 0o600);
        let ids: Vec<_> = list(d.path()).unwrap();
        assert_eq!(ids[0].0.id, "0000000a");
        assert_eq!(ids.len(), 2);

        assert!(decision(d.path(), "0000000a").unwrap().is_none());
        decide(d.path(), "0000000a", &ruling(Decision::Approved)).unwrap();
        assert!(matches!(
            decide(d.path(), "0000000a", &ruling(Decision::Rejected)),
            Err(QueueError::AlreadyDecided(_))
        ));
        assert_eq!(
            decision(d.path(), "0000000a").unwrap().unwrap().decision,
            Decision::Approved
        );
        assert!(list(d.path()).unwrap()[0].1);
        remove(d.path(), "0000000a");
        assert!(matches!(
            decide(d.path(), "0000000a", &ruling(Decision::Approved)),
            Err(QueueError::NotPending(_))
        ));
        assert!(matches!(
            decide(d.path(), "../x", &ruling(Decision::Approved)),
            Err(QueueError::BadId(_))
        ));
        assert_eq!(list(d.path()).unwrap().len(), 1);
    }
}
