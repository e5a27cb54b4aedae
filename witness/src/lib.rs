//! `afr witness serve`: a `c2sp.org/tlog-witness` others can run, so two organisations can
//! witness each other's recorders.
//!
//! A thin shell over [`afr_tlog::witness::add_checkpoint`] (the protocol's checks, pure): this
//! crate holds the per-origin head, makes the check and the update one atomic step per origin,
//! persists the new head before answering 200 ([`store`]), keeps refused but validly signed
//! checkpoints as evidence, and speaks HTTP/1.1 ([`http`]).
//!
//! ```text
//! POST /add-checkpoint   ─▶ parse ─▶ lock origin ─▶ checks ─▶ save (fsync) ─▶ 200 cosignature
//!                                              └─▶ refusal (+ refused.log if validly signed)
//! GET /<hex SHA-256(origin)>/checkpoint ─▶ the latest cosigned checkpoint, or 404
//! ```
//!
//! The race the spec warns of (request A for size N checked, request B for N+K checked and
//! stored, then A stored: K leaves rolled back) cannot happen: each origin's head sits behind
//! its own mutex, held from the check until the new head is on disk.

pub mod http;
pub mod store;

use std::{
    collections::HashMap,
    path::Path,
    sync::{Arc, Mutex, MutexGuard},
};

use afr_tlog::{
    Note, NoteSigner, VerifierKey,
    note::{TYPE_COSIGNATURE, TYPE_ED25519},
    witness::{self, AddCheckpoint, Head},
};

pub use store::{Store, StoreError, origin_hash};

/// A clock giving POSIX seconds (the cosignatures' timestamps).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    })
}

/// The content type of every text answer but a 409's.
pub const TEXT: &str = "text/plain; charset=utf-8";

/// Why a witness could not start.
#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    /// The state directory.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A log key that is not a plain Ed25519 note key.
    #[error(
        "log key {0}: a log's key must be of signature type 0x01 (Ed25519), named by its origin"
    )]
    NotALogKey(String),
    /// The witness's own key is not a cosigning key.
    #[error("the witness key must be of signature type 0x04 (cosignature/v1)")]
    NotACosigner,
    /// No log to witness.
    #[error("no log key given: the witness would refuse every checkpoint")]
    NoLogs,
}

/// An answer: status, content type and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// Body.
    pub body: String,
}

fn text(status: u16, body: impl Into<String>) -> Answer {
    Answer {
        status,
        content_type: TEXT,
        body: body.into(),
    }
}

impl From<witness::Refusal> for Answer {
    fn from(r: witness::Refusal) -> Answer {
        Answer {
            status: r.status,
            content_type: r.content_type,
            body: r.body,
        }
    }
}

#[derive(Debug)]
struct LogState {
    head: Option<Head>,
    /// The head on disk could not be written nor read back: refuse until restarted.
    broken: bool,
}

#[derive(Debug)]
struct Log {
    keys: Vec<VerifierKey>,
    state: Mutex<LogState>,
}

/// A witness: its key, the logs it accepts with their heads, and its state directory.
pub struct Witness {
    signer: NoteSigner,
    logs: HashMap<String, Log>,
    by_hash: HashMap<String, String>,
    store: Store,
    clock: Clock,
}

impl std::fmt::Debug for Witness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Witness")
            .field("vkey", &self.signer.verifier().to_string())
            .field("origins", &self.by_hash.len())
            .finish_non_exhaustive()
    }
}

impl Witness {
    /// Opens the state in `dir` (locked for this process) for the logs whose keys are
    /// `log_keys` (type 0x01, each named by its log's origin; several keys may share one).
    pub fn open(
        signer: NoteSigner,
        log_keys: Vec<VerifierKey>,
        dir: &Path,
        clock: Clock,
    ) -> Result<Witness, WitnessError> {
        if signer.verifier().kind != TYPE_COSIGNATURE {
            return Err(WitnessError::NotACosigner);
        }
        if log_keys.is_empty() {
            return Err(WitnessError::NoLogs);
        }
        let store = Store::open(dir)?;
        let mut keys: HashMap<String, Vec<VerifierKey>> = HashMap::new();
        for k in log_keys {
            if k.kind != TYPE_ED25519 {
                return Err(WitnessError::NotALogKey(k.to_string()));
            }
            let same = keys.entry(k.name.clone()).or_default();
            if !same.contains(&k) {
                same.push(k);
            }
        }
        let mut logs = HashMap::new();
        let mut by_hash = HashMap::new();
        for (origin, keys) in keys {
            let head = store.load(&origin)?;
            by_hash.insert(origin_hash(&origin), origin.clone());
            let state = Mutex::new(LogState {
                head,
                broken: false,
            });
            logs.insert(origin, Log { keys, state });
        }
        Ok(Witness {
            signer,
            logs,
            by_hash,
            store,
            clock,
        })
    }

    /// The witness's verifier key (publish it).
    pub fn vkey(&self) -> &VerifierKey {
        self.signer.verifier()
    }

    /// The origins witnessed and the size last cosigned for each (0: never), sorted.
    pub fn origins(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self
            .logs
            .iter()
            .map(|(o, l)| {
                (
                    o.clone(),
                    self.lock(o, l).head.as_ref().map_or(0, |h| h.size),
                )
            })
            .collect();
        v.sort();
        v
    }

    /// Locks an origin's state. A poisoned lock (a panic while held) is recovered by reading
    /// the head back from disk, the only copy that was ever acknowledged.
    fn lock<'a>(&self, origin: &str, log: &'a Log) -> MutexGuard<'a, LogState> {
        match log.state.lock() {
            Ok(g) => g,
            Err(p) => {
                let mut g = p.into_inner();
                self.reload(origin, &mut g);
                log.state.clear_poison();
                g
            }
        }
    }

    fn reload(&self, origin: &str, state: &mut LogState) {
        match self.store.load(origin) {
            Ok(h) => state.head = h,
            Err(e) => {
                eprintln!("afr witness serve: {e}; refusing {origin:?} until restarted");
                state.broken = true;
            }
        }
    }

    /// `POST /add-checkpoint`: the answer to a request body. A 200 means the new head is on
    /// disk (see [`Store::save`]).
    pub fn add_checkpoint(&self, body: &[u8]) -> Answer {
        let req = match AddCheckpoint::parse(body) {
            Ok(r) => r,
            Err(why) => return text(400, why + "\n"),
        };
        let now = (self.clock)();
        let origin = witness::origin_of(&req);
        let Some((origin, log)) = origin.as_deref().and_then(|o| self.logs.get_key_value(o)) else {
            // A note that does not parse (400) or an unknown origin (404): the library's
            // checks say which, with nothing to lock.
            return match witness::add_checkpoint(&req, &[], None, &self.signer, now) {
                Err(r) => r.into(),
                Ok(_) => text(500, "unexpected cosignature of an unknown log\n"),
            };
        };
        if now == 0 {
            // The spec forbids a zero timestamp: the clock is not set.
            return text(503, "the witness's clock is not set\n");
        }
        let mut state = self.lock(origin, log);
        if state.broken {
            return text(503, "the witness cannot write its state for this log\n");
        }
        match witness::add_checkpoint(&req, &log.keys, state.head.as_ref(), &self.signer, now) {
            Ok((head, sig)) => match self.store.save(origin, &head) {
                Ok(()) => {
                    state.head = Some(head);
                    text(200, sig.line())
                }
                Err(e) => {
                    eprintln!("afr witness serve: {e}");
                    // The file holds the old head or the new one: believe the disk.
                    self.reload(origin, &mut state);
                    text(503, "the witness could not persist its state\n")
                }
            },
            Err(r) => {
                drop(state);
                // Validly signed by the log yet refused: possible proof of misbehaviour.
                let signed = Note::parse(req.checkpoint.as_bytes())
                    .is_ok_and(|n| n.verify(&log.keys).is_ok());
                if signed {
                    let reason = match r.status {
                        409 => format!(
                            "old size {} is not the size last cosigned, {}",
                            req.old,
                            r.body.trim_end()
                        ),
                        _ => r.body.clone(),
                    };
                    let body = String::from_utf8_lossy(body);
                    if let Err(e) = self.store.refused(origin, now, r.status, &reason, &body) {
                        eprintln!("afr witness serve: {e}");
                    }
                }
                r.into()
            }
        }
    }

    /// `GET /<origin hash>/checkpoint`: the latest cosigned checkpoint, if any.
    pub fn checkpoint(&self, origin_hash: &str) -> Option<String> {
        let origin = self.by_hash.get(origin_hash)?;
        let log = self.logs.get(origin)?;
        self.lock(origin, log).head.as_ref().map(|h| h.note.clone())
    }
}
