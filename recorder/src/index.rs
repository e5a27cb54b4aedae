//! Secondary indexes for forensic queries: a *blind* index of the terms derived from each
//! event, kept in the `index` column family, in which no term value is stored in plaintext.
//!
//! Every event contributes a few *terms* (field, value): its tool, category, guardrail names
//! and verdicts, approver, environment, agent, organisation, parent event and retrieved
//! sources. On disk a term is its field tag and a keyed hash of its value, under the store's
//! index key ([`MasterKey::index_key`]: HKDF from the master key with the label
//! `"afr/v1/index-key"`). The index is a set of posting blocks, one per term, epoch and write
//! batch:
//!
//! ```text
//!  term  = tag: u8 ‖ HMAC-SHA-256(index_key, tag ‖ value)                  (33 bytes)
//!  key   = term ‖ u64be(epoch) ‖ u64be(first_seq)                          (49 bytes)
//!          └─┬─┘
//!            └ prefix of every block of the term
//!  value = LEB128(seq₂ − seq₁) ‖ LEB128(seq₃ − seq₂) ‖ …     (seq₁ = first_seq)
//! ```
//!
//! All blocks of a term share its prefix, in epoch and sequence order, so a lookup hashes its
//! literal the same way and makes one prefix scan that yields ascending sequence numbers.
//! Every term has the same length, so no prefix can be mistaken for the start of another. The
//! tag is inside the MAC too: equal values in two fields (an approver who is also an agent)
//! give unrelated terms.
//!
//! What a reader of the store without the master key learns from the index: which kinds of
//! terms exist, and for each term, which events share it (its postings, per epoch), so
//! equality patterns and frequencies; not the value, not its length, and no way to test a
//! guess, since the hash is keyed (`docs/threat-model.md`). The index can only answer
//! equality: it cannot list values or match a prefix or range, and queries that need those
//! decrypt payloads instead (`docs/query.md`).
//!
//! Why blocks: a batch of a few hundred events holds a few dozen distinct terms, so writing
//! one key per term and batch costs the writer a few dozen memtable inserts and HMACs where
//! one key per term and event cost several per event (that version halved group-commit
//! throughput). Splitting blocks at epoch boundaries lets erasure delete exactly one epoch's
//! postings.
//!
//! ```
//! use afr_core::crypto::MasterKey;
//! use afr_recorder::index::{Field, TERM_LEN, term_key};
//!
//! let key = MasterKey::from_bytes([7; 32]).index_key(&[0x5a; 20]);
//! let t = term_key(&key, Field::Tool, b"psql");
//! assert_eq!((t.len(), t[0]), (TERM_LEN, Field::Tool as u8));
//! assert!(!t.windows(4).any(|w| w == b"psql"));
//! // The same literal gives the same term: lookups find what the writer stored.
//! assert_eq!(t, term_key(&key, Field::Tool, b"psql"));
//! // Another field, or another store's key: an unrelated term.
//! assert_ne!(t[1..], term_key(&key, Field::Agent, b"psql")[1..]);
//! let other = MasterKey::from_bytes([8; 32]).index_key(&[0x5a; 20]);
//! assert_ne!(t, term_key(&other, Field::Tool, b"psql"));
//! ```
//!
//! # Freshness
//!
//! The recorder extracts an event's terms on the caller's thread from the payload it is about
//! to seal (a few short copies, no I/O; they stay in memory, in plaintext), and the thread that
//! writes the event's batch groups them into blocks, hashes each distinct term once and adds
//! the blocks to that same atomic `WriteBatch`. The index therefore never lags the stored
//! records: an event is in the index exactly when its record is on disk. The meta key
//! `index/watermark` (u64be) counts the events indexed; it moves with every batch. A store
//! written by an older build (or with an older [`INDEX_VERSION`]) is indexed from its
//! watermark when the recorder opens it ([`catch_up`]), and queries treat any event at or past
//! the watermark as un-indexed and examine it directly, so answers are never stale.
//!
//! # Upgrade
//!
//! Version 1 of the layout kept term values in plaintext. A store indexed under another
//! version has its whole index deleted when it opens, and the deletion is pushed through to
//! the SST and WAL files ([`crate::Store::scrub_keys`]: flush, then compaction of this column
//! family) before the new version is recorded, so a crash in between repeats it; the index is
//! then rebuilt from the payloads. RocksDB's MANIFEST names the first and last key of every
//! SST file that was live when the store opened, so [`crate::Recorder::open`] opens the store
//! once more after a re-initialisation: the fresh MANIFEST names only live files, and the old
//! one is deleted.
//!
//! # Erasure
//!
//! The postings of an erased epoch would still link its events to those of other epochs (same
//! tool, same approver), so erasing an epoch deletes them in the same batch that destroys the
//! epoch's salt, and [`crate::Store::scrub_keys`] compacts this column family so no file keeps
//! them.

use std::collections::HashMap;

use afr_core::{
    Category, EpochHeader, Record, RecorderId,
    crypto::{EpochKey, IndexKey, MasterKey, Slot},
    event::Payload,
};
use hmac::{Hmac, KeyInit, Mac};
use rocksdb::WriteBatch;
use sha2::Sha256;

use crate::{CF_INDEX, CF_META, Corruption, Entry, RecordError, Store};

/// Version of the term layout; a store indexed under another version is re-indexed on open.
/// Version 1 stored term values in plaintext; version 2 stores their HMAC.
pub const INDEX_VERSION: u64 = 2;
/// Meta key of the index version (u64be).
pub const META_INDEX_VERSION: &[u8] = b"index/version";
/// Meta key of the number of events indexed (u64be).
pub const META_INDEX_WATERMARK: &[u8] = b"index/watermark";
/// Bytes of a term on disk: the field tag and the HMAC-SHA-256 of the value.
pub const TERM_LEN: usize = 1 + 32;
/// Bytes of an index key: the term, the epoch and the block's first sequence number.
pub const KEY_LEN: usize = TERM_LEN + 16;
/// Bytes of the in-memory header of a plaintext term: `tag ‖ u32be(len)`.
const TERM_HEADER: usize = 5;
/// URI scheme by which a context source names another event's output: `afr:event/<seq>`.
pub const EVENT_URI_PREFIX: &str = "afr:event/";

/// An indexed field. The tag is the first byte of every key of the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Field {
    /// `intent.tool`.
    Tool = 1,
    /// `category` (from the record).
    Category = 2,
    /// `policy_evaluation[].verdict`.
    Verdict = 3,
    /// `policy_evaluation[].guardrail`.
    Guardrail = 4,
    /// `human_approval.approver`.
    Approver = 5,
    /// `context_provenance.environment`.
    Environment = 6,
    /// `delegation_provenance.parent_event.seq`, whatever recorder it names (u64be).
    ParentSeq = 7,
    /// Parent event in this recorder's own log (u64be): the edges `descendants()` follows.
    LocalParent = 8,
    /// `context_provenance.sources[].uri`.
    SourceUri = 9,
    /// `context_provenance.sources[].content_hash`.
    SourceHash = 10,
    /// `code_provenance.agent`.
    Agent = 11,
    /// `delegation_provenance.organisation`.
    Organisation = 12,
}

impl Field {
    /// Every indexed field.
    pub const ALL: [Field; 12] = [
        Field::Tool,
        Field::Category,
        Field::Verdict,
        Field::Guardrail,
        Field::Approver,
        Field::Environment,
        Field::ParentSeq,
        Field::LocalParent,
        Field::SourceUri,
        Field::SourceHash,
        Field::Agent,
        Field::Organisation,
    ];

    /// The query path an equality on which this field answers (none for `LocalParent`).
    pub fn path(self) -> Option<&'static str> {
        Some(match self {
            Field::Tool => "intent.tool",
            Field::Category => "category",
            Field::Verdict => "policy_evaluation[].verdict",
            Field::Guardrail => "policy_evaluation[].guardrail",
            Field::Approver => "human_approval.approver",
            Field::Environment => "context_provenance.environment",
            Field::ParentSeq => "delegation_provenance.parent_event.seq",
            Field::LocalParent => return None,
            Field::SourceUri => "context_provenance.sources[].uri",
            Field::SourceHash => "context_provenance.sources[].content_hash",
            Field::Agent => "code_provenance.agent",
            Field::Organisation => "delegation_provenance.organisation",
        })
    }

    /// The field that indexes `path`, if any.
    pub fn for_path(path: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.path() == Some(path))
    }
}

/// The on-disk term of `(field, value)`: the prefix shared by every key of the term.
pub fn term_key(key: &IndexKey, field: Field, value: &[u8]) -> [u8; TERM_LEN] {
    TermHasher::new(key).term(field as u8, value)
}

/// HMAC-SHA-256 under the index key, keyed once and cloned for each term.
struct TermHasher(Hmac<Sha256>);

impl TermHasher {
    fn new(key: &IndexKey) -> TermHasher {
        match Hmac::<Sha256>::new_from_slice(key.expose()) {
            Ok(m) => TermHasher(m),
            // HMAC takes keys of any length.
            Err(_) => unreachable!("hmac accepts a 32-byte key"),
        }
    }

    /// `tag ‖ HMAC-SHA-256(index_key, tag ‖ value)`.
    fn term(&self, tag: u8, value: &[u8]) -> [u8; TERM_LEN] {
        let mut m = self.0.clone();
        m.update(&[tag]);
        m.update(value);
        let mut out = [0u8; TERM_LEN];
        out[0] = tag;
        out[1..].copy_from_slice(&m.finalize().into_bytes());
        out
    }

    /// The on-disk term of a plaintext term as [`Terms`] holds it (`tag ‖ u32be(len) ‖ value`).
    fn plain(&self, plain: &[u8]) -> [u8; TERM_LEN] {
        let tag = plain.first().copied().unwrap_or_default();
        self.term(tag, plain.get(TERM_HEADER..).unwrap_or_default())
    }
}

/// The plaintext terms of one event, encoded back to back as `tag ‖ u32be(len) ‖ value`.
/// They stay in memory: [`Blocks::put`] hashes them on their way to disk.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Terms(Vec<u8>);

impl std::fmt::Debug for Terms {
    /// Term values come from payloads: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Terms(<{} terms>)", self.plain().count())
    }
}

impl Terms {
    /// The terms of an event of `category` with `payload`, recorded by `recorder`.
    pub fn of(category: Category, payload: &Payload, recorder: &RecorderId) -> Terms {
        let mut t = Terms(Vec::with_capacity(160));
        t.fill(category, payload, recorder);
        t
    }

    /// Replaces the terms with those of an event (reusing the buffer).
    pub fn fill(&mut self, category: Category, payload: &Payload, recorder: &RecorderId) {
        let t = self;
        t.0.clear();
        t.add(Field::Category, category.name().as_bytes());
        t.add(Field::Tool, payload.intent.tool.as_bytes());
        for g in &payload.policy_evaluation {
            t.add(Field::Guardrail, g.guardrail.as_bytes());
            t.add(Field::Verdict, g.verdict.name().as_bytes());
        }
        if let Some(a) = &payload.human_approval {
            t.add(Field::Approver, a.approver.as_bytes());
        }
        if let Some(c) = &payload.context_provenance {
            if let Some(e) = &c.environment {
                t.add(Field::Environment, e.as_bytes());
            }
            for s in &c.sources {
                t.add(Field::SourceUri, s.uri.as_bytes());
                if let Some(h) = &s.content_hash {
                    t.add(Field::SourceHash, h.as_bytes());
                }
            }
        }
        if let Some(a) = payload
            .code_provenance
            .as_ref()
            .and_then(|c| c.agent.as_ref())
        {
            t.add(Field::Agent, a.as_bytes());
        }
        if let Some(d) = &payload.delegation_provenance {
            if let Some(o) = &d.organisation {
                t.add(Field::Organisation, o.as_bytes());
            }
            if let Some(p) = &d.parent_event {
                t.add(Field::ParentSeq, &p.seq.to_be_bytes());
                if is_local(p.recorder.as_deref(), recorder) {
                    t.add(Field::LocalParent, &p.seq.to_be_bytes());
                }
            }
        }
    }

    fn add(&mut self, field: Field, value: &[u8]) {
        let start = self.0.len();
        // Payloads are capped far below 4 GiB, so the length fits.
        let len = u32::try_from(value.len()).unwrap_or(u32::MAX);
        self.0.push(field as u8);
        self.0.extend_from_slice(&len.to_be_bytes());
        self.0.extend_from_slice(value);
        // An event with two guardrails of the same verdict has that term once.
        let new = &self.0[start..];
        if self.plain_before(start).any(|p| p == new) {
            self.0.truncate(start);
        }
    }

    fn plain_before(&self, end: usize) -> impl Iterator<Item = &[u8]> {
        let buf = &self.0[..end];
        let mut at = 0;
        std::iter::from_fn(move || {
            let h = buf.get(at..at + TERM_HEADER)?;
            let len = u32::from_be_bytes([h[1], h[2], h[3], h[4]]) as usize;
            let p = buf.get(at..at + TERM_HEADER + len)?;
            at += p.len();
            Some(p)
        })
    }

    /// The plaintext terms, one per distinct term.
    fn plain(&self) -> impl Iterator<Item = &[u8]> {
        self.plain_before(self.0.len())
    }

    /// The on-disk terms under `key` (see [`term_key`]), one per distinct term.
    pub fn keys(&self, key: &IndexKey) -> Vec<[u8; TERM_LEN]> {
        let h = TermHasher::new(key);
        self.plain().map(|p| h.plain(p)).collect()
    }
}

/// FNV-1a: the posting map hashes short term prefixes on the writer thread, where SipHash's
/// flooding resistance buys nothing (the terms come from the operator's own agents).
#[derive(Debug, Clone, Copy)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

type FnvMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fnv>>;

/// Groups the terms of a run of events (in sequence order) into posting blocks.
#[derive(Default)]
pub struct Blocks {
    /// Per epoch: plaintext term → ascending sequence numbers.
    postings: FnvMap<u64, FnvMap<Vec<u8>, Vec<u64>>>,
}

impl std::fmt::Debug for Blocks {
    /// The terms are plaintext: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blocks")
            .field("epochs", &self.postings.len())
            .finish_non_exhaustive()
    }
}

impl Blocks {
    /// Adds event `seq` of `epoch` with `terms`. Events must come in ascending order.
    pub fn add(&mut self, seq: u64, epoch: u64, terms: &Terms) {
        let m = self.postings.entry(epoch).or_default();
        for p in terms.plain() {
            match m.get_mut(p) {
                Some(v) => v.push(seq),
                None => {
                    m.insert(p.to_vec(), vec![seq]);
                }
            }
        }
    }

    /// Writes the blocks into `batch`, each term hashed under `key` (the store's
    /// [`MasterKey::index_key`]): nothing in plaintext reaches the batch.
    pub fn put(self, batch: &mut WriteBatch, cf: &rocksdb::ColumnFamily, key: &IndexKey) {
        let hasher = TermHasher::new(key);
        let mut k = [0u8; KEY_LEN];
        let mut value = Vec::new();
        for (epoch, m) in self.postings {
            for (plain, seqs) in m {
                let Some(&first) = seqs.first() else {
                    continue;
                };
                k[..TERM_LEN].copy_from_slice(&hasher.plain(&plain));
                k[TERM_LEN..TERM_LEN + 8].copy_from_slice(&epoch.to_be_bytes());
                k[TERM_LEN + 8..].copy_from_slice(&first.to_be_bytes());
                value.clear();
                for w in seqs.windows(2) {
                    push_varint(&mut value, w[1] - w[0]);
                }
                batch.put_cf(cf, k, &value);
            }
        }
    }
}

fn push_varint(buf: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        buf.push((n as u8) | 0x80);
        n >>= 7;
    }
    buf.push(n as u8);
}

/// Decodes a block's postings (ascending sequence numbers) into `out`.
fn read_block(first: u64, value: &[u8], out: &mut Vec<u64>) -> Result<(), &'static str> {
    let bad = || "malformed posting block";
    let mut seq = first;
    out.push(seq);
    let (mut n, mut shift) = (0u64, 0u32);
    for &b in value {
        if shift > 63 {
            return Err(bad());
        }
        n |= u64::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            seq = seq.checked_add(n).ok_or_else(bad)?;
            out.push(seq);
            (n, shift) = (0, 0);
        }
    }
    if shift != 0 {
        return Err(bad());
    }
    Ok(())
}

/// The epoch and first sequence number of an index key (`term ‖ u64be(epoch) ‖
/// u64be(first_seq)`); any other length is corruption.
fn block_key_tail(key: &[u8]) -> Result<(u64, u64), RecordError> {
    let k = <&[u8; KEY_LEN]>::try_from(key).map_err(|_| {
        RecordError::Corrupt(Corruption::KeyLength {
            table: CF_INDEX,
            key: key.to_vec(),
            expected: KEY_LEN,
        })
    })?;
    let mut e = [0u8; 8];
    let mut f = [0u8; 8];
    e.copy_from_slice(&k[TERM_LEN..TERM_LEN + 8]);
    f.copy_from_slice(&k[TERM_LEN + 8..]);
    Ok((u64::from_be_bytes(e), u64::from_be_bytes(f)))
}

/// Whether an event reference's recorder (`0x` + 40 hex, or absent) is `own`.
pub fn is_local(recorder: Option<&str>, own: &RecorderId) -> bool {
    match recorder {
        None => true,
        Some(r) => {
            let h = r.strip_prefix("0x").unwrap_or(r);
            hex::decode(h).is_ok_and(|b| b.as_slice() == own.as_slice())
        }
    }
}

/// The event a context source's URI names directly (`afr:event/<seq>`), if any.
pub fn event_uri_seq(uri: &str) -> Option<u64> {
    uri.strip_prefix(EVENT_URI_PREFIX)?.parse().ok()
}

/// Sequence numbers of the events holding term `(field, value)`, ascending. `key` is the
/// store's [`MasterKey::index_key`]: the literal is hashed as the writer hashed it.
pub fn lookup(
    store: &Store,
    key: &IndexKey,
    field: Field,
    value: &[u8],
) -> Result<Vec<u64>, RecordError> {
    let prefix = term_key(key, field, value);
    let mut it = store.db().raw_iterator_cf(store.cf(CF_INDEX)?);
    it.seek(prefix);
    let mut out = Vec::new();
    while let (Some(k), Some(v)) = (it.key(), it.value()) {
        if !k.starts_with(&prefix) {
            break;
        }
        let (_, first) = block_key_tail(k)?;
        read_block(first, v, &mut out).map_err(|r| Entry::Index(k.to_vec()).malformed(r))?;
        it.next();
    }
    it.status()
        .map_err(|e| RecordError::Storage(e.into_string()))?;
    // Blocks of one epoch are in order; a catch-up after a lagging watermark may have
    // indexed an event twice, in blocks grouped differently.
    if out.windows(2).any(|w| w[0] >= w[1]) {
        out.sort_unstable();
        out.dedup();
    }
    Ok(out)
}

/// Every sequence number that has at least one index term, ascending (a full scan of the
/// index, for audits such as checking that erasure left nothing behind).
pub fn indexed_seqs(store: &Store) -> Result<Vec<u64>, RecordError> {
    let mut it = store.db().raw_iterator_cf(store.cf(CF_INDEX)?);
    it.seek_to_first();
    let mut out = std::collections::BTreeSet::new();
    let mut block = Vec::new();
    while let (Some(k), Some(v)) = (it.key(), it.value()) {
        let (_, first) = block_key_tail(k)?;
        block.clear();
        read_block(first, v, &mut block).map_err(|r| Entry::Index(k.to_vec()).malformed(r))?;
        out.extend(block.iter().copied());
        it.next();
    }
    it.status()
        .map_err(|e| RecordError::Storage(e.into_string()))?;
    Ok(out.into_iter().collect())
}

/// Number of events the index covers (all `seq <` this).
pub fn watermark(store: &Store) -> Result<u64, RecordError> {
    Ok(match store.meta(META_INDEX_WATERMARK)? {
        Some(v) => u64::from_be_bytes(<[u8; 8]>::try_from(v.as_slice()).map_err(|_| {
            Entry::Meta(META_INDEX_WATERMARK.to_vec())
                .malformed(format!("is {} bytes, not 8", v.len()))
        })?),
        None => 0,
    })
}

pub(crate) fn put_watermark(
    store: &Store,
    batch: &mut WriteBatch,
    n: u64,
) -> Result<(), RecordError> {
    batch.put_cf(store.cf(CF_META)?, META_INDEX_WATERMARK, n.to_be_bytes());
    Ok(())
}

/// Decrypts events of one store, caching epoch keys. Erased epochs yield `None`.
pub struct Opener<'a> {
    store: &'a Store,
    master: &'a MasterKey,
    recorder: RecorderId,
    keys: HashMap<u64, Option<EpochKey>>,
}

impl std::fmt::Debug for Opener<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener").finish_non_exhaustive()
    }
}

impl<'a> Opener<'a> {
    /// An opener over `store` with its master key.
    pub fn new(store: &'a Store, master: &'a MasterKey) -> Result<Opener<'a>, RecordError> {
        Ok(Opener {
            store,
            master,
            recorder: store.recorder_id()?,
            keys: HashMap::new(),
        })
    }

    /// An opener for a store whose recorder id the caller already read.
    pub fn with_recorder(
        store: &'a Store,
        master: &'a MasterKey,
        recorder: RecorderId,
    ) -> Opener<'a> {
        Opener {
            store,
            master,
            recorder,
            keys: HashMap::new(),
        }
    }

    /// The store's recorder id.
    pub fn recorder(&self) -> &RecorderId {
        &self.recorder
    }

    /// Whether the payloads of `epoch` can no longer be decrypted (its salt is gone).
    pub fn is_erased(&mut self, epoch: u64) -> Result<bool, RecordError> {
        Ok(self.epoch_key(epoch)?.is_none())
    }

    fn epoch_key(&mut self, epoch: u64) -> Result<Option<&EpochKey>, RecordError> {
        if !self.keys.contains_key(&epoch) {
            let k = match self.store.epoch_salt(epoch)? {
                Some(salt) if !self.store.is_erased(epoch)? => {
                    Some(self.master.epoch_key(&salt, &self.recorder, epoch))
                }
                _ => None,
            };
            self.keys.insert(epoch, k);
        }
        Ok(self.keys.get(&epoch).and_then(Option::as_ref))
    }

    /// The payload of `record`, or `None` if its epoch was erased.
    pub fn payload(&mut self, record: &Record) -> Result<Option<Payload>, RecordError> {
        self.decode(record)
    }

    /// The payload of `record` as JSON (the shape `serde_json::to_value` gives a [`Payload`]),
    /// or `None` if its epoch was erased. Full scans use this: the plaintext goes straight
    /// from CBOR to JSON ([`afr_core::cbor::to_json`]), with no typed payload built, and a
    /// scan that iterates the payload column itself passes the `sealed` bytes it read
    /// (otherwise the payload is looked up). With `fields`, only those top-level fields are
    /// decoded.
    pub fn payload_json(
        &mut self,
        record: &Record,
        sealed: Option<&[u8]>,
        fields: Option<&[String]>,
    ) -> Result<Option<serde_json::Value>, RecordError> {
        let seq = record.seq;
        let sealed = match sealed {
            Some(b) => Some(
                afr_core::crypto::EncryptedPayload::decode(b)
                    .map_err(|e| Entry::Payload(seq).malformed(e))?,
            ),
            None => None,
        };
        let Some(plain) = self.plaintext(record, sealed)? else {
            return Ok(None);
        };
        // The plaintext passed the AEAD and its key commitment: it is what was sealed, so
        // the fast decoder suffices (no canonical-form check).
        match fields {
            Some(f) => afr_core::cbor::to_json_fields(&plain, f),
            None => afr_core::cbor::to_json(&plain),
        }
        .map(Some)
        .map_err(|e| Entry::Payload(seq).malformed(e))
    }

    fn decode<T: serde::de::DeserializeOwned>(
        &mut self,
        record: &Record,
    ) -> Result<Option<T>, RecordError> {
        let Some(plain) = self.plaintext(record, None)? else {
            return Ok(None);
        };
        afr_core::cbor::from_slice::<T>(&plain)
            .map(Some)
            .map_err(|e| Entry::Payload(record.seq).malformed(e))
    }

    /// The opened plaintext of `record`'s payload (`sealed`, or looked up), or `None` if its
    /// epoch was erased.
    fn plaintext(
        &mut self,
        record: &Record,
        sealed: Option<afr_core::crypto::EncryptedPayload>,
    ) -> Result<Option<zeroize::Zeroizing<Vec<u8>>>, RecordError> {
        let seq = record.seq;
        let sealed = match sealed {
            Some(s) => s,
            None => self
                .store
                .payload(seq)?
                .ok_or_else(|| Entry::Payload(seq).missing())?,
        };
        let recorder = self.recorder;
        let Some(ek) = self.epoch_key(record.epoch)? else {
            return Ok(None);
        };
        let slot = Slot {
            recorder,
            epoch: record.epoch,
            seq,
        };
        afr_core::crypto::decrypt(&ek.event_key(seq), &slot, &sealed)
            .map(|p| Some(zeroize::Zeroizing::new(p)))
            .map_err(|_| RecordError::Corrupt(Corruption::Undecryptable { seq }))
    }
}

/// Whether the store's index was built under an older [`INDEX_VERSION`] (so [`catch_up`] will
/// delete and rebuild it). A store that never had an index does not need it.
pub fn needs_reinit(store: &Store) -> Result<bool, RecordError> {
    Ok(store
        .meta(META_INDEX_VERSION)?
        .is_some_and(|v| v != INDEX_VERSION.to_be_bytes()))
}

/// Indexes the events the index does not cover yet (from the watermark up to `end`), after
/// re-initialising the index if it was built under another [`INDEX_VERSION`]. Erased epochs
/// are skipped: they have no plaintext left to index. Called by [`crate::Recorder::open`]
/// before the writer starts; a fresh or up-to-date store costs two metadata reads.
///
/// Re-initialising MUST leave no posting of the old layout in any SST or WAL file (version 1
/// held plaintext terms): the old postings are deleted, the deletion is flushed and compacted
/// through ([`Store::scrub_keys`]), and only then is the new version recorded, so a crash in
/// between repeats the whole step on the next open. The MANIFEST still names the old files'
/// first and last keys; [`crate::Recorder::open`] reopens the store to replace it.
pub fn catch_up(store: &Store, master: &MasterKey, end: u64) -> Result<u64, RecordError> {
    let version = store.meta(META_INDEX_VERSION)?;
    let mut from = watermark(store)?;
    if version.as_deref() != Some(&INDEX_VERSION.to_be_bytes()[..]) {
        let mut b = WriteBatch::default();
        // Every key starts with a field tag (1..=12), in every layout so far.
        b.delete_range_cf(
            store.cf(CF_INDEX)?,
            [0u8].as_slice(),
            [0xffu8; 4].as_slice(),
        );
        put_watermark(store, &mut b, 0)?;
        store.write(b, true)?;
        // A store without a version never had an index (a fresh store, or one written before
        // the index existed): nothing to scrub.
        if version.is_some() {
            store.scrub_keys()?;
        }
        store.put_meta(META_INDEX_VERSION, &INDEX_VERSION.to_be_bytes())?;
        from = 0;
    }
    if from >= end {
        return Ok(0);
    }
    let mut opener = Opener::new(store, master)?;
    let key = master.index_key(opener.recorder());
    let cf = store.cf(CF_INDEX)?;
    let flush = |chunk: &mut Vec<(u64, u64, Terms)>, upto: u64| -> Result<(), RecordError> {
        let mut b = WriteBatch::default();
        let mut blocks = Blocks::default();
        for (seq, epoch, t) in chunk.iter() {
            blocks.add(*seq, *epoch, t);
        }
        blocks.put(&mut b, cf, &key);
        put_watermark(store, &mut b, upto)?;
        store.write(b, true)?;
        chunk.clear();
        Ok(())
    };
    let mut chunk: Vec<(u64, u64, Terms)> = Vec::new();
    let mut done = 0u64;
    for kv in store.records_from(from)? {
        let (seq, bytes) = kv?;
        if seq >= end {
            break;
        }
        let r = Record::decode(&bytes).map_err(|e| Entry::Record(seq).malformed(e))?;
        if let Some(p) = opener.payload(&r)? {
            chunk.push((seq, r.epoch, Terms::of(r.category, &p, &opener.recorder)));
        }
        done += 1;
        if chunk.len() >= 10_000 {
            flush(&mut chunk, seq + 1)?;
        }
    }
    flush(&mut chunk, end)?;
    Ok(done)
}

/// Adds deletions of every posting block of `header`'s epoch to `batch`. The epoch's key
/// material must still be present: its terms are recomputed from the payloads, hashed under
/// the index key derived from `master`, and each term's blocks for the epoch are found by the
/// prefix `term ‖ u64be(epoch)`.
pub(crate) fn delete_epoch_terms(
    store: &Store,
    master: &MasterKey,
    header: &EpochHeader,
    batch: &mut WriteBatch,
) -> Result<(), RecordError> {
    let mut opener = Opener::new(store, master)?;
    let key = master.index_key(opener.recorder());
    let cf = store.cf(CF_INDEX)?;
    let mut prefixes = std::collections::BTreeSet::new();
    for seq in header.first_seq..header.end_seq() {
        let r = store
            .record(seq)?
            .ok_or_else(|| Entry::Record(seq).missing())?;
        let p = opener
            .payload(&r)?
            .ok_or_else(|| Entry::Salt(header.epoch).missing())?;
        let t = Terms::of(r.category, &p, &opener.recorder);
        prefixes.extend(
            t.keys(&key)
                .into_iter()
                .map(|x| [&x[..], &header.epoch.to_be_bytes()].concat()),
        );
    }
    let mut it = store.db().raw_iterator_cf(cf);
    for prefix in prefixes {
        it.seek(&prefix);
        while let Some(k) = it.key() {
            if !k.starts_with(&prefix) {
                break;
            }
            batch.delete_cf(cf, k);
            it.next();
        }
    }
    it.status()
        .map_err(|e| RecordError::Storage(e.into_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> IndexKey {
        MasterKey::from_bytes([3; 32]).index_key(&[0; 20])
    }

    #[test]
    fn terms_are_deduplicated_and_hashed_whatever_their_length() {
        let ev = afr_testkit::synth::generate(40, 3)
            .into_iter()
            .find(|e| !e.policy_evaluation.is_empty())
            .unwrap();
        let (env, mut p) = ev.into_payload();
        p.policy_evaluation.push(p.policy_evaluation[0].clone());
        p.intent.tool = "t".repeat(70_000);
        let t = Terms::of(env.category, &p, &[0; 20]);
        let keys = t.keys(&key());
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), keys.len(), "duplicate terms");
        assert_eq!(keys.len(), t.plain().count());
        let tool = term_key(&key(), Field::Tool, "t".repeat(70_000).as_bytes());
        assert!(keys.contains(&tool));
        // A value one byte shorter is another term.
        assert!(!keys.contains(&term_key(
            &key(),
            Field::Tool,
            "t".repeat(69_999).as_bytes()
        )));
        assert!(!format!("{t:?}").contains("ttt"));
    }

    #[test]
    fn term_keys_follow_the_formula_and_blocks_hold_no_plaintext() {
        // term = tag ‖ HMAC-SHA-256(index_key, tag ‖ value), HMAC computed here from SHA-256
        // (RFC 2104) as an independent reference.
        let k = key();
        let hmac_ref = |msg: &[u8]| {
            let mut kb = [0u8; 64];
            kb[..32].copy_from_slice(k.expose());
            let pad = |b: u8| kb.iter().map(|x| x ^ b).collect::<Vec<u8>>();
            let inner = afr_core::hash::sha256(&[&pad(0x36), msg]);
            afr_core::hash::sha256(&[&pad(0x5c), &inner.0]).0
        };
        let t = term_key(&k, Field::Approver, b"alice@example.com");
        assert_eq!(t[0], Field::Approver as u8);
        assert_eq!(t[1..], hmac_ref(b"\x05alice@example.com"));
        // The vector of docs/spec/format.md.
        let mut recorder = [0u8; 20];
        recorder[15..].copy_from_slice(&[0x0a, 0xf2, 0xaf, 0x00, 0x01]);
        let spec = MasterKey::from_bytes([0x4d; 32]).index_key(&recorder);
        assert_eq!(
            hex::encode(term_key(&spec, Field::Tool, b"psql")),
            "01e210cbab04571ecd58ac2f23958137e8025fcecc772106c9823f304e3ca64e77"
        );
        let mut tampered = *b"\x05alice@example.com";
        tampered[1] ^= 1;
        assert_ne!(t[1..], hmac_ref(&tampered));

        let mut p = afr_testkit::synth::generate(1, 1)
            .remove(0)
            .into_payload()
            .1;
        p.intent.tool = "secret-tool-name".into();
        let terms = Terms::of(Category::Shell, &p, &[0; 20]);
        let mut blocks = Blocks::default();
        blocks.add(7, 0, &terms);
        blocks.add(9, 0, &terms);
        assert!(!format!("{blocks:?}").contains("secret"));
        let mut batch = WriteBatch::default();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), true).unwrap();
        blocks.put(&mut batch, store.cf(CF_INDEX).unwrap(), &k);
        let raw = batch.data().to_vec();
        assert!(!raw.windows(6).any(|w| w == b"secret"));
        assert!(!raw.windows(5).any(|w| w == b"shell"));
        store.write(batch, false).unwrap();
        assert_eq!(
            lookup(&store, &k, Field::Tool, b"secret-tool-name").unwrap(),
            [7, 9]
        );
        assert!(
            lookup(&store, &key_other(), Field::Tool, b"secret-tool-name")
                .unwrap()
                .is_empty()
        );
        assert_eq!(indexed_seqs(&store).unwrap(), [7, 9]);
    }

    fn key_other() -> IndexKey {
        MasterKey::from_bytes([4; 32]).index_key(&[0; 20])
    }

    #[test]
    fn posting_blocks_round_trip() {
        let seqs = [5u64, 6, 200, 201, 70_000, 1 << 40];
        let mut v = Vec::new();
        for w in seqs.windows(2) {
            push_varint(&mut v, w[1] - w[0]);
        }
        let mut out = Vec::new();
        read_block(5, &v, &mut out).unwrap();
        assert_eq!(out, seqs);
        v.push(0x80);
        assert!(read_block(5, &v, &mut Vec::new()).is_err());
    }

    #[test]
    fn local_parents_are_recognised() {
        let own = [0xab; 20];
        assert!(is_local(None, &own));
        assert!(is_local(Some(&format!("0x{}", hex::encode(own))), &own));
        assert!(is_local(
            Some(&format!("0x{}", hex::encode_upper(own))),
            &own
        ));
        assert!(!is_local(
            Some(&format!("0x{}", hex::encode([1; 20]))),
            &own
        ));
        assert_eq!(event_uri_seq("afr:event/17"), Some(17));
        assert_eq!(event_uri_seq("afr:event/x"), None);
    }
}
