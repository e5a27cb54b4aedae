//! The recorder: turns tool calls into sealed, chained, Merkle-batched records in RocksDB.
//!
//! A [`Recorder`] is a cloneable handle; any number of threads may call [`Recorder::record`]
//! at once. Under one mutex it seals the payload under its per-event key and appends the
//! record through the core's sequencer ([`afr_core::sequencer::Sequencer`]: gapless sequence
//! numbers, the link to the predecessor, the open epoch's Merkle state, sealing); this crate
//! decides when to seal and makes it durable. Everything slow happens elsewhere: payload
//! encoding before the lock, storage writes and syncs on a writer thread, anchoring in another
//! process altogether.
//!
//! The allocator matters to the tail: the writer thread frees what callers allocated, and
//! with glibc's malloc that contention put buffered `record()`'s P99 at 41-52 µs when called
//! from the main thread, against 10-12 µs with mimalloc (`docs/performance.md`). The `afr`
//! binary uses mimalloc; programs embedding this crate should set a global allocator too.
//!
//! ```text
//!  callers ──encode payload──► [sequencer: seq, seal, chain, leaf] ──pending batch──► writer
//!                                   │ epoch full or too old                         │ WriteBatch
//!                                   ▼                                               ▼ (sync?)
//!                               EpochHeader ───────────────────────────────────► RocksDB
//! ```
//!
//! # Durability contract
//!
//! What a returned [`Receipt`] promises depends on [`Durability`]:
//!
//! - [`Durability::Sync`]: the event MUST be on stable storage (its own synced write) before
//!   `record()` returns.
//! - [`Durability::Group`] (default): the event MUST be on stable storage before `record()`
//!   returns; it shares one synced write with the events submitted alongside it.
//! - [`Durability::Buffered`]: the event is sequenced and chained but MAY be lost in a crash
//!   until [`Recorder::flush`] returns (the writer writes every `flush_interval`, without sync).
//!
//! In every mode a crash loses at most a suffix: the store MUST NOT hold a gap, a record
//! without its payload, or a payload without its record, and reopening it MUST yield a chain
//! that verifies end to end. A sealed epoch header is written after the records it covers.

mod corrupt;
mod store;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Condvar, Mutex, MutexGuard},
    thread::JoinHandle,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use afr_core::{
    EpochHeader, EventInput, Hash32, RecorderId,
    crypto::{self, EpochKey, MasterKey},
    event::{InputError, Payload},
    sequencer::{SequenceError, Sequencer},
};
pub use corrupt::{Corruption, Entry};
use rocksdb::WriteBatch;
use store::{CF_EPOCHS, CF_INDEX, CF_KEYS, CF_META, CF_PAYLOADS, CF_RECORDS};
#[cfg(feature = "raw-store")]
pub use store::{Column, RawOp};
pub use store::{Kept, KeptOp, Store, WriteStalls};

pub mod delegation;
mod disclose;
mod export;
pub mod index;
mod keyfile;
pub mod query;
mod reader;
pub mod roots;
pub use disclose::{META_ERASED, META_SCRUB_PENDING};
pub use export::{ExportSummary, export_log};
pub use keyfile::{check_private, read_key_file, write_key_file};
pub use reader::LogReader;

/// Name of the master key file inside a recorder directory.
pub const MASTER_KEY_FILE: &str = "master.key";
/// Name of the RocksDB directory inside a recorder directory.
pub const DB_DIR: &str = "db";

/// Errors of the recorder. Messages are lower-case and never contain key material.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The event is not acceptable; nothing was recorded. The error names the field.
    #[error("invalid event: {0}")]
    Invalid(#[from] InputError),
    /// RocksDB failed.
    #[error("storage error: {0}")]
    Storage(String),
    /// The store holds something it should not (which entry, and what is wrong with it);
    /// nothing is written until this is resolved.
    #[error("store is inconsistent: {0}")]
    Corrupt(#[from] Corruption),
    /// The stored records do not form one chain (a gap, a broken link, another recorder's
    /// epoch); found when the store is opened.
    #[error("store is inconsistent: {0}")]
    Sequence(#[from] SequenceError),
    /// A key file problem.
    #[error("key file {path}: {message}")]
    KeyFile {
        /// Which file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// `init` on a directory that already holds a recorder.
    #[error("{} is already initialised", .0.display())]
    AlreadyInitialised(PathBuf),
    /// `open` on a directory without a recorder.
    #[error("no recorder in {} (run `afr init` first)", .0.display())]
    NotInitialised(PathBuf),
    /// A setting that cannot work.
    #[error("invalid setting: {0}")]
    Config(&'static str),
    /// The operating system refused something the recorder needs (a directory, a thread).
    #[error("cannot {what}: {source}")]
    Os {
        /// What was attempted.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A request names an event the log does not hold.
    #[error("no event {0} in the log")]
    UnknownEvent(u64),
    /// A disclosure asks for an event of the open epoch.
    #[error("event {seq} is in epoch {epoch}, which is not sealed yet (run `afr seal`)")]
    Unsealed {
        /// The event.
        seq: u64,
        /// Its epoch.
        epoch: u64,
    },
    /// An erasure names an epoch that is not sealed.
    #[error("epoch {0} is not sealed; only sealed epochs can be erased")]
    EpochNotSealed(u64),
    /// An erasure names an epoch already erased.
    #[error("epoch {0} is already erased")]
    AlreadyErased(u64),
    /// A read-only view cannot serve this store until the writer has opened it once.
    #[error("{0}; open it once with the writer (for example `afr seal`) and try again")]
    NeedsWriter(String),
    /// The recorder is shutting down (its last handle is being dropped).
    #[error("recorder is shutting down")]
    ShuttingDown,
    /// The writer thread failed earlier; the recorder accepts no more events.
    #[error("recorder stopped after a storage failure: {0}")]
    Stopped(String),
    /// A value kept for another component ([`Kept::Named`]) names one of the store's own
    /// metadata entries; nothing was written.
    #[error(
        "metadata entry {} is the store's own; a value kept for another component cannot \
         take its name",
        corrupt::show_key(.0)
    )]
    ReservedName(Vec<u8>),
    /// An invariant of the recorder's own state failed (a bug, not the store's contents).
    #[error("internal error: {0}")]
    Internal(&'static str),
}

/// When `record()` may return, relative to the event reaching stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// One synced write per event.
    Sync,
    /// Events share synced writes; each returns once its write is synced.
    Group,
    /// Returns before the event is written; see the module docs.
    Buffered,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Durability, String> {
        match s {
            "sync" => Ok(Durability::Sync),
            "group" => Ok(Durability::Group),
            "buffered" => Ok(Durability::Buffered),
            other => Err(format!(
                "unknown durability mode `{other}` (sync, group, buffered)"
            )),
        }
    }
}

/// Recorder settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Seal an epoch once it holds this many events.
    pub epoch_size: u64,
    /// Seal a non-empty epoch once its first event is this old.
    pub max_epoch_age: Duration,
    /// Durability mode.
    pub durability: Durability,
    /// Cap on one event's canonical payload, in bytes.
    pub max_event_bytes: usize,
    /// In buffered mode, how often the writer writes.
    pub flush_interval: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            epoch_size: 100,
            max_epoch_age: Duration::from_secs(60),
            durability: Durability::Group,
            max_event_bytes: afr_core::event::DEFAULT_MAX_EVENT_BYTES,
            flush_interval: Duration::from_millis(2),
        }
    }
}

impl Config {
    /// The defaults, with `epoch_size` events to an epoch.
    pub fn with_epoch_size(epoch_size: u64) -> Config {
        Config {
            epoch_size,
            ..Config::default()
        }
    }

    /// `epoch_size` events to an epoch, written in [`Durability::Buffered`] mode: for loading
    /// many events fast (benchmarks, the research harness, tests), where a crash may lose the
    /// last few milliseconds of events.
    pub fn buffered(epoch_size: u64) -> Config {
        Config {
            durability: Durability::Buffered,
            ..Config::with_epoch_size(epoch_size)
        }
    }
}

/// What `record()` returns: where the event landed and the hash that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    /// Sequence number.
    pub seq: u64,
    /// Epoch.
    pub epoch: u64,
    /// The record's leaf hash.
    pub leaf_hash: Hash32,
    /// The record's timestamp.
    pub timestamp_us: u64,
}

/// Longest accepted idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 128;
/// Prefix of the `meta` keys that map an idempotency key to its receipt.
const META_IDEMPOTENCY: &[u8] = b"idempotency/";

impl Receipt {
    /// Length of [`Receipt::encode`].
    const ENCODED_LEN: usize = 8 + 8 + 32 + 8;

    /// `seq ‖ epoch ‖ leaf_hash ‖ timestamp_us`, integers big-endian.
    fn encode(&self) -> [u8; Receipt::ENCODED_LEN] {
        let mut b = [0u8; Receipt::ENCODED_LEN];
        b[..8].copy_from_slice(&self.seq.to_be_bytes());
        b[8..16].copy_from_slice(&self.epoch.to_be_bytes());
        b[16..48].copy_from_slice(&self.leaf_hash.0);
        b[48..].copy_from_slice(&self.timestamp_us.to_be_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Receipt> {
        if b.len() != Receipt::ENCODED_LEN {
            return None;
        }
        let u = |r: std::ops::Range<usize>| b.get(r)?.try_into().ok().map(u64::from_be_bytes);
        Some(Receipt {
            seq: u(0..8)?,
            epoch: u(8..16)?,
            leaf_hash: Hash32(b.get(16..48)?.try_into().ok()?),
            timestamp_us: u(48..56)?,
        })
    }
}

/// What [`Recorder::submit_idempotent`] did with an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdempotentReceipt {
    /// The event's receipt: a new one, or the one its key got the first time.
    pub receipt: Receipt,
    /// The key had been recorded before: nothing was recorded now.
    pub duplicate: bool,
}

/// Microseconds since the Unix epoch.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// The sequencer's state: everything needed to append the next record.
struct State {
    /// Sequence numbers, links and epochs (the core's sequencer).
    chain: Sequencer,
    epoch_opened_at: std::time::Instant,
    epoch_key: Option<EpochKey>,
    pending: WriteBatch,
    /// `(seq, epoch, category, payload)` of the events in `pending`: the thread that writes
    /// the batch derives their index terms (off the caller's thread; see [`index`]).
    pending_terms: Vec<(u64, u64, afr_core::Category, Payload)>,
    /// Highest sequence number in `pending`, if any event is in it.
    pending_last: Option<u64>,
    /// Whether `pending` holds anything (events, headers, salts).
    pending_dirty: bool,
    /// Idempotency keys recorded but possibly not yet on disk, with their receipts; an entry
    /// is dropped once its event is written (the store answers for it from then on).
    idem_inflight: HashMap<Vec<u8>, Receipt>,
    shutdown: bool,
}

struct Durable {
    /// Number of events known written (and synced, in synced modes): all seq < this.
    written: u64,
    error: Option<String>,
}

struct Shared {
    store: Store,
    recorder: RecorderId,
    master: MasterKey,
    config: Config,
    state: Mutex<State>,
    /// Held across taking and writing a batch, so batches reach disk in order.
    io: Mutex<()>,
    work: Condvar,
    durable: Mutex<Durable>,
    durable_cv: Condvar,
}

/// A handle on an open recorder. Clone it freely; the writer stops when the last handle drops.
#[derive(Clone)]
pub struct Recorder {
    shared: Arc<Shared>,
    _writer: Arc<WriterGuard>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("recorder", &hex::encode(self.shared.recorder))
            .finish()
    }
}

struct WriterGuard {
    shared: Arc<Shared>,
    handle: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for WriterGuard {
    fn drop(&mut self) {
        if let Ok(mut st) = self.shared.state.lock() {
            st.shutdown = true;
        }
        self.shared.work.notify_all();
        if let Some(h) = self.handle.lock().ok().and_then(|mut h| h.take()) {
            let _ = h.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock means a thread panicked while holding it; the state is still the
    // last consistent one because every mutation below is completed before unlocking.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Creates a recorder directory: the store and a fresh master key file (mode 0600).
pub fn init(dir: &Path, recorder: RecorderId) -> Result<(), RecordError> {
    let key_path = dir.join(MASTER_KEY_FILE);
    let db_path = dir.join(DB_DIR);
    if db_path.exists() || key_path.exists() {
        return Err(RecordError::AlreadyInitialised(dir.to_owned()));
    }
    std::fs::create_dir_all(dir).map_err(|source| RecordError::Os {
        what: format!("create {}", dir.display()),
        source,
    })?;
    let mut secret = zeroize::Zeroizing::new([0u8; 32]);
    rand::fill(&mut secret[..]);
    write_key_file(&key_path, &secret[..])?;
    let store = Store::open(&db_path, true)?;
    store.put_meta(store::META_FORMAT, &store::STORE_FORMAT.to_be_bytes())?;
    store.put_meta(store::META_RECORDER, &recorder)?;
    Ok(())
}

impl Recorder {
    /// Opens the recorder in `dir` (created by [`init`]) and recovers its state.
    pub fn open(dir: &Path, config: Config) -> Result<Recorder, RecordError> {
        if config.epoch_size == 0 {
            return Err(RecordError::Config("epoch size must be at least 1"));
        }
        let db_path = dir.join(DB_DIR);
        if !db_path.exists() {
            return Err(RecordError::NotInitialised(dir.to_owned()));
        }
        let secret = read_key_file(&dir.join(MASTER_KEY_FILE))?;
        let master = MasterKey::from_bytes(*secret);
        let store = Store::open(&db_path, false)?;
        match store.meta(store::META_FORMAT)? {
            Some(v) if v == store::STORE_FORMAT.to_be_bytes() => {}
            _ => return Err(RecordError::Corrupt(Corruption::UnknownFormat)),
        }
        let recorder = store.recorder_id()?;
        disclose::finish_pending_scrub(&store)?;
        let state = recover(&store, &master, &recorder)?;
        let reinit = index::needs_reinit(&store)?;
        index::catch_up(&store, &master, state.chain.next_seq())?;
        // A re-initialised index (an older layout held plaintext terms) left their first and
        // last keys in the MANIFEST that was current at open; opening again writes a fresh
        // MANIFEST that names only live files, and RocksDB deletes the old one.
        let store = if reinit {
            drop(store);
            Store::open(&db_path, false)?
        } else {
            store
        };
        let written = state.chain.next_seq();
        let shared = Arc::new(Shared {
            store,
            recorder,
            master,
            config,
            state: Mutex::new(state),
            io: Mutex::new(()),
            work: Condvar::new(),
            durable: Mutex::new(Durable {
                written,
                error: None,
            }),
            durable_cv: Condvar::new(),
        });
        let s2 = shared.clone();
        let handle = std::thread::Builder::new()
            .name("afr-writer".into())
            .spawn(move || writer_loop(s2))
            .map_err(|source| RecordError::Os {
                what: "start the writer thread".into(),
                source,
            })?;
        let guard = Arc::new(WriterGuard {
            shared: shared.clone(),
            handle: Mutex::new(Some(handle)),
        });
        let r = Recorder {
            shared,
            _writer: guard,
        };
        // An epoch that filled up just before a crash is sealed now.
        {
            let mut st = lock(&r.shared.state);
            if st.chain.open().len() >= r.shared.config.epoch_size {
                seal_locked(&r.shared, &mut st);
            }
        }
        Ok(r)
    }

    /// The recorder's id.
    pub fn recorder_id(&self) -> RecorderId {
        self.shared.recorder
    }

    /// The master key: only the recorder's own modules see it (queries and disclosures go
    /// through [`Recorder::query`] and [`Recorder::disclose`]).
    pub(crate) fn master_key(&self) -> &MasterKey {
        &self.shared.master
    }

    /// The underlying store (read access for export, status, disclosure).
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    /// The settings in use.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Records one event; see the module docs for what the receipt promises.
    pub fn record(&self, event: EventInput) -> Result<Receipt, RecordError> {
        let receipt = self.submit(event)?;
        if self.shared.config.durability == Durability::Group {
            self.wait_written(receipt.seq)?;
        }
        Ok(receipt)
    }

    /// Sequences an event without waiting for group commit; pair with [`Recorder::wait_written`].
    /// In `Sync` mode the event is already synced when this returns.
    pub fn submit(&self, event: EventInput) -> Result<Receipt, RecordError> {
        event.validate()?;
        self.submit_valid(event)
    }

    /// Records `event` under a key the client chose, durably (as [`Recorder::record`]), unless
    /// an event was already recorded under `key`: then nothing is recorded and the first
    /// receipt is returned with `duplicate` set. See [`Recorder::submit_idempotent`].
    pub fn record_idempotent(
        &self,
        key: &[u8],
        event: EventInput,
    ) -> Result<IdempotentReceipt, RecordError> {
        let r = self.submit_idempotent(key, event)?;
        if self.shared.config.durability == Durability::Group {
            self.wait_written(r.receipt.seq)?;
        }
        Ok(r)
    }

    /// [`Recorder::submit`] under an idempotency key (at most [`MAX_IDEMPOTENCY_KEY_BYTES`]
    /// bytes, not empty). The key and the receipt are written in the same atomic batch as the
    /// event, so after a crash either both are in the store or neither is: a key MUST NOT
    /// name a lost event, and an event recorded under a key MUST NOT be recorded again under
    /// it, across restarts too. The event of a retry is not compared with the first one; the
    /// key alone identifies it. A duplicate's receipt MAY still be waiting for its write: pair
    /// with [`Recorder::wait_written`] as for a new one.
    pub fn submit_idempotent(
        &self,
        key: &[u8],
        event: EventInput,
    ) -> Result<IdempotentReceipt, RecordError> {
        if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_BYTES {
            return Err(InputError {
                path: "idempotency_key".into(),
                message: format!("must be 1 to {MAX_IDEMPOTENCY_KEY_BYTES} bytes"),
            }
            .into());
        }
        event.validate()?;
        let receipt = self.submit_inner(event, Some(key))?;
        Ok(receipt)
    }

    /// The receipt recorded under an idempotency key, if the store or the pending batch
    /// holds one. Called with the sequencer lock held, so no other submit can race it.
    fn idempotent_lookup(
        &self,
        st: &mut State,
        key: &[u8],
    ) -> Result<Option<Receipt>, RecordError> {
        if let Some(r) = st.idem_inflight.get(key) {
            return Ok(Some(*r));
        }
        let mut meta_key = META_IDEMPOTENCY.to_vec();
        meta_key.extend_from_slice(key);
        match self.shared.store.meta(&meta_key)? {
            None => Ok(None),
            Some(v) => Receipt::decode(&v)
                .map(Some)
                .ok_or_else(|| Entry::Meta(meta_key).malformed("is not an idempotency receipt")),
        }
    }

    /// Records one of the recorder's own events (a reserved `afr.` tool name), durably.
    pub(crate) fn record_own(&self, event: EventInput) -> Result<Receipt, RecordError> {
        event.validate_limits()?;
        let receipt = self.submit_valid(event)?;
        if self.shared.config.durability == Durability::Group {
            self.wait_written(receipt.seq)?;
        }
        Ok(receipt)
    }

    /// [`Recorder::record_own`] under an idempotency key: once per key.
    pub(crate) fn record_own_keyed(
        &self,
        key: &[u8],
        event: EventInput,
    ) -> Result<Receipt, RecordError> {
        event.validate_limits()?;
        let r = self.submit_inner(event, Some(key))?.receipt;
        if self.shared.config.durability == Durability::Group {
            self.wait_written(r.seq)?;
        }
        Ok(r)
    }

    fn submit_valid(&self, event: EventInput) -> Result<Receipt, RecordError> {
        self.submit_inner(event, None).map(|r| r.receipt)
    }

    fn submit_inner(
        &self,
        event: EventInput,
        idempotency_key: Option<&[u8]>,
    ) -> Result<IdempotentReceipt, RecordError> {
        let (env, payload) = event.into_payload();
        let plaintext = encode_payload(&payload, self.shared.config.max_event_bytes)?;
        let mut nonce = [0u8; crypto::NONCE_LEN];
        rand::fill(&mut nonce[..]);
        let timestamp_us = env.timestamp_us.unwrap_or_else(now_us);

        let sh = &*self.shared;
        let mut st = lock(&sh.state);
        if st.shutdown {
            return Err(RecordError::ShuttingDown);
        }
        let written = {
            let d = lock(&sh.durable);
            if let Some(e) = &d.error {
                return Err(RecordError::Stopped(e.clone()));
            }
            d.written
        };
        if let Some(key) = idempotency_key {
            if let Some(receipt) = self.idempotent_lookup(&mut st, key)? {
                return Ok(IdempotentReceipt {
                    receipt,
                    duplicate: true,
                });
            }
            // Entries whose events are written are answered by the store from now on.
            if st.idem_inflight.len() >= 1024 {
                st.idem_inflight.retain(|_, r| r.seq >= written);
            }
        }
        if st.epoch_key.is_none() {
            self.open_epoch_key(&mut st)?;
        }
        let Some(epoch_key) = st.epoch_key.as_ref() else {
            return Err(RecordError::Internal(
                "the open epoch has no key after opening it",
            ));
        };
        let slot = st.chain.slot();
        let sealed = crypto::encrypt(&epoch_key.event_key(slot.seq), &slot, nonce, &plaintext);
        let appended = st
            .chain
            .append(env, timestamp_us, sealed.commitment())
            .map_err(|e| match e {
                SequenceError::Concurrent(m) => InputError {
                    path: "concurrent_with".into(),
                    message: m,
                },
                other => InputError {
                    path: String::new(),
                    message: other.to_string(),
                },
            })?;
        let (seq, record) = (slot.seq, appended.record);
        let key = seq.to_be_bytes();
        let (cf_r, cf_p) = (sh.store.cf(CF_RECORDS)?, sh.store.cf(CF_PAYLOADS)?);
        st.pending.put_cf(cf_r, key, &appended.bytes);
        st.pending.put_cf(cf_p, key, sealed.encode());
        st.pending_terms
            .push((seq, slot.epoch, record.category, payload));
        st.pending_last = Some(seq);
        st.pending_dirty = true;
        if st.chain.open().len() == 1 {
            st.epoch_opened_at = std::time::Instant::now();
        }
        let receipt = Receipt {
            seq,
            epoch: slot.epoch,
            leaf_hash: appended.leaf,
            timestamp_us: record.timestamp_us,
        };
        if let Some(key) = idempotency_key {
            let mut meta_key = META_IDEMPOTENCY.to_vec();
            meta_key.extend_from_slice(key);
            st.pending
                .put_cf(sh.store.cf(CF_META)?, meta_key, receipt.encode());
            st.idem_inflight.insert(key.to_vec(), receipt);
        }
        if st.chain.open().len() >= sh.config.epoch_size {
            seal_locked(&self.shared, &mut st);
        }
        drop(st);
        if sh.config.durability == Durability::Sync {
            write_pending(sh, true)?;
            self.wait_written(seq)?;
        } else {
            sh.work.notify_one();
        }
        Ok(IdempotentReceipt {
            receipt,
            duplicate: false,
        })
    }

    /// Blocks until every event up to and including `seq` is written (synced in synced modes).
    pub fn wait_written(&self, seq: u64) -> Result<(), RecordError> {
        let sh = &*self.shared;
        let mut d = lock(&sh.durable);
        loop {
            if d.written > seq {
                return Ok(());
            }
            if let Some(e) = &d.error {
                return Err(RecordError::Stopped(e.clone()));
            }
            d = sh.durable_cv.wait(d).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// How many events are written (synced in synced modes): every event numbered below it.
    /// Never blocks; [`Recorder::wait_written`] waits.
    pub fn written(&self) -> u64 {
        lock(&self.shared.durable).written
    }

    /// Writes and syncs everything submitted so far.
    pub fn flush(&self) -> Result<(), RecordError> {
        write_pending(&self.shared, true)
    }

    /// Seals the open epoch now if it holds any event, then flushes. Returns the new header.
    pub fn seal(&self) -> Result<Option<EpochHeader>, RecordError> {
        let h = {
            let mut st = lock(&self.shared.state);
            seal_locked(&self.shared, &mut st)
        };
        write_pending(&self.shared, true)?;
        Ok(h)
    }

    /// Sequence number the next event will get (= number of events recorded).
    pub fn next_seq(&self) -> u64 {
        lock(&self.shared.state).chain.next_seq()
    }

    /// The open epoch's number and how many events it holds.
    pub fn open_epoch(&self) -> (u64, u64) {
        let st = lock(&self.shared.state);
        (st.chain.open().number(), st.chain.open().len())
    }

    /// The last sealed epoch header.
    pub fn last_sealed(&self) -> Option<EpochHeader> {
        lock(&self.shared.state)
            .chain
            .last_sealed()
            .map(|s| s.header().clone())
    }

    /// A disclosure bundle of the events `seqs` (sorted and deduplicated): their records,
    /// inclusion proofs and the epoch headers back to epoch 0; with `keys`, each event's sealed
    /// payload and event key too, except for erased epochs, whose `afr.erase` event is added
    /// as the proof of the erasure. Only sealed events can be disclosed.
    pub fn disclose(
        &self,
        seqs: &[u64],
        keys: bool,
    ) -> Result<afr_core::bundle::Bundle, RecordError> {
        disclose::disclose(&self.shared.store, &self.shared.master, seqs, keys)
    }

    /// Answers `query` over the events in the store ([`query`] explains the language and
    /// the three-valued answer). It reads the store as written: events still queued for the
    /// writer ([`Durability::Buffered`] before [`Recorder::flush`]) are not seen.
    pub fn query(&self, query: &query::Query) -> Result<query::QueryResult, query::QueryError> {
        query::run(&self.shared.store, &self.shared.master, query)
    }

    /// Reads and decrypts the events `seqs` in their order, for showing a query's matches.
    /// An event of an erased epoch comes without its payload; a `seq` the store does not hold
    /// is an error.
    pub fn load_events(
        &self,
        seqs: &[u64],
    ) -> impl Iterator<Item = Result<query::LoadedEvent, RecordError>> {
        let sh = &*self.shared;
        query::load_all(&sh.store, &sh.master, sh.recorder, seqs)
    }

    fn open_epoch_key(&self, st: &mut State) -> Result<(), RecordError> {
        let sh = &*self.shared;
        // The open epoch may already have a salt (events recorded before a restart).
        let epoch = st.chain.open().number();
        let salt = match sh.store.epoch_salt(epoch)? {
            Some(s) => s,
            None => {
                let mut s = [0u8; 32];
                rand::fill(&mut s[..]);
                st.pending
                    .put_cf(sh.store.cf(CF_KEYS)?, epoch.to_be_bytes(), s);
                st.pending_dirty = true;
                s
            }
        };
        st.epoch_key = Some(sh.master.epoch_key(&salt, &sh.recorder, epoch));
        Ok(())
    }
}

/// Seals the open epoch, if it holds any event, into a header queued behind its records.
fn seal_locked(sh: &Shared, st: &mut State) -> Option<EpochHeader> {
    let header = st.chain.seal(now_us())?.into_header();
    if let Ok(cf) = sh.store.cf(CF_EPOCHS) {
        st.pending
            .put_cf(cf, header.epoch.to_be_bytes(), header.encode());
    }
    st.pending_dirty = true;
    st.epoch_key = None;
    Some(header)
}

/// Writes the pending batch; `io` keeps batches in submission order on disk.
fn write_pending(sh: &Shared, sync: bool) -> Result<(), RecordError> {
    let _io = lock(&sh.io);
    let (mut batch, terms, last) = {
        let mut st = lock(&sh.state);
        if !st.pending_dirty {
            return Ok(());
        }
        st.pending_dirty = false;
        (
            std::mem::take(&mut st.pending),
            std::mem::take(&mut st.pending_terms),
            st.pending_last.take(),
        )
    };
    let res =
        add_index_terms(sh, &mut batch, &terms, last).and_then(|()| sh.store.write(batch, sync));
    publish(sh, last, &res);
    res
}

/// Adds the index keys of the batch's events, and the new index watermark, to the batch, off
/// the sequencer lock (see [`index`] for why the index never lags the records).
fn add_index_terms(
    sh: &Shared,
    batch: &mut WriteBatch,
    events: &[(u64, u64, afr_core::Category, Payload)],
    last: Option<u64>,
) -> Result<(), RecordError> {
    let mut blocks = index::Blocks::default();
    let mut terms = index::Terms::default();
    for (seq, epoch, category, payload) in events {
        terms.fill(*category, payload, &sh.recorder);
        blocks.add(*seq, *epoch, &terms);
    }
    blocks.put(
        batch,
        sh.store.cf(CF_INDEX)?,
        &sh.master.index_key(&sh.recorder),
    );
    if let Some(l) = last {
        index::put_watermark(&sh.store, batch, l + 1)?;
    }
    Ok(())
}

fn publish(sh: &Shared, last: Option<u64>, res: &Result<(), RecordError>) {
    let mut d = lock(&sh.durable);
    match res {
        Ok(()) => {
            if let Some(l) = last {
                d.written = d.written.max(l + 1);
            }
        }
        Err(e) => d.error = Some(e.to_string()),
    }
    drop(d);
    sh.durable_cv.notify_all();
}

fn encode_payload(p: &Payload, cap: usize) -> Result<Vec<u8>, RecordError> {
    let invalid = |message: String| InputError {
        path: String::new(),
        message,
    };
    let b = p.encode().map_err(|e| invalid(format!("payload: {e}")))?;
    if b.len() > cap {
        return Err(invalid(format!(
            "payload is {} bytes as canonical CBOR, over the cap of {cap}",
            b.len()
        ))
        .into());
    }
    Ok(b)
}

/// The writer: writes the pending batch (synced unless buffered) and publishes progress;
/// also seals epochs that grew too old. Exits after a final synced write on shutdown.
fn writer_loop(sh: Arc<Shared>) {
    let buffered = sh.config.durability == Durability::Buffered;
    let tick = if buffered {
        sh.config.flush_interval
    } else {
        Duration::from_millis(50)
    };
    let age_tick = sh.config.max_epoch_age.min(Duration::from_millis(200));
    loop {
        let shutdown = {
            let mut st = lock(&sh.state);
            if !st.pending_dirty && !st.shutdown {
                let wait = if buffered { tick } else { age_tick };
                st = sh
                    .work
                    .wait_timeout(st, wait)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|p| p.into_inner().0);
            }
            if !st.chain.open().is_empty()
                && st.epoch_opened_at.elapsed() >= sh.config.max_epoch_age
            {
                seal_locked(&sh, &mut st);
            }
            st.shutdown
        };
        if buffered && !shutdown {
            // Let a buffered batch grow for one interval.
            std::thread::sleep(tick);
        }
        if write_pending(&sh, !buffered || shutdown).is_err() || shutdown {
            return;
        }
    }
}

/// Rebuilds the sequencer state from the store: the last sealed epoch, then the records of
/// the open epoch, which the sequencer replays (no gap, each continuing the chain).
fn recover(store: &Store, master: &MasterKey, recorder: &RecorderId) -> Result<State, RecordError> {
    let mut chain = Sequencer::after(*recorder, store.last_epoch()?)?;
    for kv in store.records_from(chain.next_seq())? {
        let (seq, bytes) = kv?;
        chain.replay(seq, &bytes)?;
        if store.payload(seq)?.is_none() {
            return Err(Entry::Payload(seq).missing());
        }
    }
    let open = chain.open();
    let epoch_key = match store.epoch_salt(open.number())? {
        Some(salt) if !open.is_empty() => Some(master.epoch_key(&salt, recorder, open.number())),
        None if !open.is_empty() => {
            return Err(Entry::Salt(open.number()).missing());
        }
        _ => None,
    };
    Ok(State {
        chain,
        epoch_opened_at: std::time::Instant::now(),
        epoch_key,
        pending: WriteBatch::default(),
        pending_terms: Vec::new(),
        pending_last: None,
        pending_dirty: false,
        idem_inflight: HashMap::new(),
        shutdown: false,
    })
}
