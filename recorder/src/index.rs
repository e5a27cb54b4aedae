//! Secondary indexes for forensic queries: plaintext terms derived from each event, kept in
//! the `index` column family.
//!
//! Every event contributes a few *terms* (field, value): its tool, category, guardrail names
//! and verdicts, approver, environment, agent, organisation, parent event and retrieved
//! sources. The index is a set of posting blocks, one per term, epoch and write batch:
//!
//! ```text
//!  key   = tag: u8 ‖ u16be(len) ‖ value ‖ u64be(epoch) ‖ u64be(first_seq)
//!          └──── term prefix ───────┘
//!  value = LEB128(seq₂ − seq₁) ‖ LEB128(seq₃ − seq₂) ‖ …     (seq₁ = first_seq)
//! ```
//!
//! All blocks of a term share its prefix, in epoch and sequence order, so a lookup is one
//! prefix scan that yields ascending sequence numbers. The length field makes prefixes
//! prefix-free (no value can be mistaken for the start of a longer one). Values longer than
//! [`MAX_VALUE_LEN`] bytes are replaced by their SHA-256 under the length marker `0xffff`; a
//! lookup of a long literal hashes it the same way, so lookups stay exact.
//!
//! Why blocks: a batch of a few hundred events holds a few dozen distinct terms, so writing
//! one key per term and batch costs the writer a few dozen memtable inserts where one key per
//! term and event cost several per event (that version halved group-commit throughput).
//! Splitting blocks at epoch boundaries lets erasure delete exactly one epoch's postings.
//!
//! # Freshness
//!
//! The recorder extracts an event's terms on the caller's thread from the payload it is about
//! to seal (a few short copies, no I/O), and the thread that writes the event's batch groups
//! them into blocks and adds those to that same atomic `WriteBatch`. The index therefore never
//! lags the stored records: an event is in the index exactly when its record is on disk. The
//! meta key
//! `index/watermark` (u64be) counts the events indexed; it moves with every batch. A store
//! written by an older build (or with an older [`INDEX_VERSION`]) is indexed from its
//! watermark when the recorder opens it ([`catch_up`]), and queries treat any event at or past
//! the watermark as un-indexed and examine it directly, so answers are never stale.
//!
//! # Erasure
//!
//! Terms are plaintext taken from payloads, so they are key material in effect: erasing an
//! epoch deletes its events' terms in the same batch that destroys the epoch's salt, and
//! [`crate::Store::scrub_keys`] compacts this column family so no file keeps them.

use std::collections::HashMap;

use afr_core::{
    Category, EpochHeader, Record, RecorderId,
    crypto::{EpochKey, MasterKey, Slot},
    event::Payload,
};
use rocksdb::WriteBatch;

use crate::{CF_INDEX, CF_META, RecordError, Store};

/// Version of the term layout; a store indexed under another version is re-indexed on open.
pub const INDEX_VERSION: u64 = 1;
/// Meta key of the index version (u64be).
pub const META_INDEX_VERSION: &[u8] = b"index/version";
/// Meta key of the number of events indexed (u64be).
pub const META_INDEX_WATERMARK: &[u8] = b"index/watermark";
/// Values longer than this are indexed by their SHA-256.
pub const MAX_VALUE_LEN: usize = 128;
/// Length marker of a hashed (long) value.
const HASHED_LEN: u16 = 0xffff;
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

/// The prefix shared by every key of term `(field, value)`.
pub fn term_prefix(field: Field, value: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(3 + value.len().min(MAX_VALUE_LEN + 1) + 16);
    push_term(&mut k, field, value);
    k
}

fn push_term(buf: &mut Vec<u8>, field: Field, value: &[u8]) {
    buf.push(field as u8);
    if value.len() > MAX_VALUE_LEN {
        buf.extend_from_slice(&HASHED_LEN.to_be_bytes());
        buf.extend_from_slice(&afr_core::hash::sha256(&[value]).0);
    } else {
        // MAX_VALUE_LEN < 0xffff, so the length fits and never equals the hash marker.
        buf.extend_from_slice(&(value.len() as u16).to_be_bytes());
        buf.extend_from_slice(value);
    }
}

/// The terms of one event, encoded back to back as term prefixes (`tag ‖ len ‖ value`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Terms(Vec<u8>);

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
            t.add(Field::Verdict, verdict_name(g.verdict).as_bytes());
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
        push_term(&mut self.0, field, value);
        // An event with two guardrails of the same verdict has that term once.
        let new = &self.0[start..];
        if self.prefixes_before(start).any(|p| p == new) {
            self.0.truncate(start);
        }
    }

    fn prefixes_before(&self, end: usize) -> impl Iterator<Item = &[u8]> {
        let buf = &self.0[..end];
        let mut at = 0;
        std::iter::from_fn(move || {
            if at + 3 > buf.len() {
                return None;
            }
            let len = u16::from_be_bytes([buf[at + 1], buf[at + 2]]);
            let n = 3 + if len == HASHED_LEN { 32 } else { len as usize };
            let p = buf.get(at..at + n)?;
            at += n;
            Some(p)
        })
    }

    /// The term prefixes, one per distinct term.
    pub fn prefixes(&self) -> impl Iterator<Item = &[u8]> {
        self.prefixes_before(self.0.len())
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
#[derive(Debug, Default)]
pub struct Blocks {
    /// Per epoch: term prefix → ascending sequence numbers.
    postings: FnvMap<u64, FnvMap<Vec<u8>, Vec<u64>>>,
}

impl Blocks {
    /// Adds event `seq` of `epoch` with `terms`. Events must come in ascending order.
    pub fn add(&mut self, seq: u64, epoch: u64, terms: &Terms) {
        let m = self.postings.entry(epoch).or_default();
        for p in terms.prefixes() {
            match m.get_mut(p) {
                Some(v) => v.push(seq),
                None => {
                    m.insert(p.to_vec(), vec![seq]);
                }
            }
        }
    }

    /// Writes the blocks into `batch`.
    pub(crate) fn put(self, batch: &mut WriteBatch, cf: &rocksdb::ColumnFamily) {
        let mut value = Vec::new();
        let flat = self
            .postings
            .into_iter()
            .flat_map(|(epoch, m)| m.into_iter().map(move |(p, s)| ((p, epoch), s)));
        for ((prefix, epoch), seqs) in flat {
            let Some(&first) = seqs.first() else {
                continue;
            };
            let key = [&prefix[..], &epoch.to_be_bytes(), &first.to_be_bytes()].concat();
            value.clear();
            for w in seqs.windows(2) {
                push_varint(&mut value, w[1] - w[0]);
            }
            batch.put_cf(cf, key, &value);
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
fn read_block(first: u64, value: &[u8], out: &mut Vec<u64>) -> Result<(), RecordError> {
    let bad = || RecordError::Corrupt("malformed index block".into());
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

/// The epoch and first sequence number at the end of an index key.
fn block_key_tail(key: &[u8]) -> Result<(u64, u64), RecordError> {
    let n = key
        .len()
        .checked_sub(16)
        .ok_or_else(|| RecordError::Corrupt("index key too short".into()))?;
    let tail = &key[n..];
    let mut e = [0u8; 8];
    let mut f = [0u8; 8];
    e.copy_from_slice(&tail[..8]);
    f.copy_from_slice(&tail[8..]);
    Ok((u64::from_be_bytes(e), u64::from_be_bytes(f)))
}

fn verdict_name(v: afr_core::event::Verdict) -> &'static str {
    use afr_core::event::Verdict;
    match v {
        Verdict::Allow => "allow",
        Verdict::Deny => "deny",
        Verdict::Warn => "warn",
        Verdict::Escalate => "escalate",
    }
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

/// Sequence numbers of the events holding term `(field, value)`, ascending.
pub fn lookup(store: &Store, field: Field, value: &[u8]) -> Result<Vec<u64>, RecordError> {
    let prefix = term_prefix(field, value);
    let mut it = store.db().raw_iterator_cf(store.cf(CF_INDEX)?);
    it.seek(&prefix);
    let mut out = Vec::new();
    while let (Some(k), Some(v)) = (it.key(), it.value()) {
        if !k.starts_with(&prefix) {
            break;
        }
        if k.len() != prefix.len() + 16 {
            return Err(RecordError::Corrupt("index key of the wrong length".into()));
        }
        let (_, first) = block_key_tail(k)?;
        read_block(first, v, &mut out)?;
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
        read_block(first, v, &mut block)?;
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
        Some(v) => u64::from_be_bytes(
            <[u8; 8]>::try_from(v.as_slice())
                .map_err(|_| RecordError::Corrupt("index watermark is not 8 bytes".into()))?,
        ),
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
    /// decoded straight from CBOR, or `None` if its epoch was erased. Full scans use this: it
    /// skips building the typed payload.
    pub fn payload_json(
        &mut self,
        record: &Record,
    ) -> Result<Option<serde_json::Value>, RecordError> {
        self.decode(record)
    }

    fn decode<T: serde::de::DeserializeOwned>(
        &mut self,
        record: &Record,
    ) -> Result<Option<T>, RecordError> {
        let seq = record.seq;
        let sealed = self
            .store
            .payload(seq)?
            .ok_or_else(|| RecordError::Corrupt(format!("record {seq} has no payload")))?;
        let recorder = self.recorder;
        let Some(ek) = self.epoch_key(record.epoch)? else {
            return Ok(None);
        };
        let slot = Slot {
            recorder,
            epoch: record.epoch,
            seq,
        };
        let plain = afr_core::crypto::open(&ek.event_key(seq), &slot, &sealed)
            .map_err(|_| RecordError::Corrupt(format!("payload {seq}: decryption failed")))?;
        // Our own store: the commitment was checked when it was written, so the lenient
        // decoder suffices (the strict one re-encodes to compare, twice the cost).
        afr_core::cbor::from_slice::<T>(&plain)
            .map(Some)
            .map_err(|e| RecordError::Corrupt(format!("payload {seq}: {e}")))
    }
}

/// Indexes the events the index does not cover yet (from the watermark up to `end`), after
/// re-initialising the index if it was built under another [`INDEX_VERSION`]. Erased epochs
/// are skipped: they have no plaintext left to index. Called by [`crate::Recorder::open`]
/// before the writer starts; a fresh or up-to-date store costs two metadata reads.
pub fn catch_up(store: &Store, master: &MasterKey, end: u64) -> Result<u64, RecordError> {
    let version = store.meta(META_INDEX_VERSION)?;
    let mut from = watermark(store)?;
    if version.as_deref() != Some(&INDEX_VERSION.to_be_bytes()[..]) {
        let mut b = WriteBatch::default();
        let cf = store.cf(CF_INDEX)?;
        b.delete_range_cf(cf, [0u8].as_slice(), [0xffu8; 4].as_slice());
        b.put_cf(
            store.cf(CF_META)?,
            META_INDEX_VERSION,
            INDEX_VERSION.to_be_bytes(),
        );
        put_watermark(store, &mut b, 0)?;
        store.write(b, true)?;
        from = 0;
    }
    if from >= end {
        return Ok(0);
    }
    let mut opener = Opener::new(store, master)?;
    let cf = store.cf(CF_INDEX)?;
    let flush = |chunk: &mut Vec<(u64, u64, Terms)>, upto: u64| -> Result<(), RecordError> {
        let mut b = WriteBatch::default();
        let mut blocks = Blocks::default();
        for (seq, epoch, t) in chunk.iter() {
            blocks.add(*seq, *epoch, t);
        }
        blocks.put(&mut b, cf);
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
        let r = Record::decode(&bytes)
            .map_err(|e| RecordError::Corrupt(format!("record {seq}: {e}")))?;
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
/// material must still be present: its terms are recomputed from the payloads, and each
/// term's blocks for the epoch are found by the prefix `term ‖ u64be(epoch)`.
pub(crate) fn delete_epoch_terms(
    store: &Store,
    master: &MasterKey,
    header: &EpochHeader,
    batch: &mut WriteBatch,
) -> Result<(), RecordError> {
    let mut opener = Opener::new(store, master)?;
    let cf = store.cf(CF_INDEX)?;
    let mut prefixes = std::collections::BTreeSet::new();
    for seq in header.first_seq..header.end_seq() {
        let r = store
            .record(seq)?
            .ok_or_else(|| RecordError::Corrupt(format!("record {seq} missing")))?;
        let p = opener.payload(&r)?.ok_or_else(|| {
            RecordError::Corrupt(format!("epoch {} has no key material", header.epoch))
        })?;
        let t = Terms::of(r.category, &p, &opener.recorder);
        prefixes.extend(
            t.prefixes()
                .map(|x| [x, &header.epoch.to_be_bytes()].concat()),
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

    #[test]
    fn terms_are_deduplicated_and_long_values_hashed() {
        let ev = crate::synth::generate(40, 3)
            .into_iter()
            .find(|e| !e.policy_evaluation.is_empty())
            .unwrap();
        let (env, mut p) = ev.into_payload();
        p.policy_evaluation.push(p.policy_evaluation[0].clone());
        p.intent.tool = "t".repeat(500);
        let t = Terms::of(env.category, &p, &[0; 20]);
        let keys: Vec<&[u8]> = t.prefixes().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), keys.len(), "duplicate terms");
        let tool = term_prefix(Field::Tool, "t".repeat(500).as_bytes());
        assert_eq!(tool.len(), 3 + 32);
        assert!(keys.contains(&tool.as_slice()));
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
