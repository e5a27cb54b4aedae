//! Disclosure bundles and crypto-erasure over the store.
use afr_core::{
    Category, EventInput, Hash32,
    bundle::{Bundle, DisclosedEvent},
    crypto::MasterKey,
    hash::leaf_hash,
    merkle,
};
use rocksdb::WriteBatch;

use crate::{CF_KEYS, CF_META, Corruption, Entry, RecordError, Recorder, Store, now_us};

/// Metadata key prefix marking an erased epoch: `erased/` ‖ u64be(epoch).
pub const META_ERASED: &[u8] = b"erased/";

/// Metadata key set in the same batch as an erasure and cleared once the store's files have
/// been rewritten without the destroyed material; while it is set, opening the store scrubs.
pub const META_SCRUB_PENDING: &[u8] = b"scrub-pending";

/// Finishes an erasure that a crash or an error interrupted after its batch was written:
/// rewrites the store's files (see [`Store::scrub_keys`]) and clears the flag. Returns whether
/// there was one to finish.
pub(crate) fn finish_pending_scrub(store: &Store) -> Result<bool, RecordError> {
    if store.meta(META_SCRUB_PENDING)?.is_none() {
        return Ok(false);
    }
    store.scrub_keys()?;
    let mut b = WriteBatch::default();
    b.delete_cf(store.cf(CF_META)?, META_SCRUB_PENDING);
    store.write(b, true)?;
    Ok(true)
}

/// Metadata key prefix of the sequence number of an epoch's `afr.erase` event:
/// `erase-event/` ‖ u64be(epoch) → u64be(seq).
pub const META_ERASE_EVENT: &[u8] = b"erase-event/";

fn erased_key(epoch: u64) -> Vec<u8> {
    [META_ERASED, &epoch.to_be_bytes()].concat()
}

fn erase_event_key(epoch: u64) -> Vec<u8> {
    [META_ERASE_EVENT, &epoch.to_be_bytes()].concat()
}

impl Store {
    /// The epochs whose key material was destroyed, in order: one prefix read of the
    /// metadata, whatever the number of epochs.
    pub fn erased_epochs(&self) -> Result<Vec<u64>, RecordError> {
        self.meta_prefixed(META_ERASED)?
            .map(|kv| {
                let (rest, _) = kv?;
                <[u8; 8]>::try_from(rest.as_slice())
                    .map(u64::from_be_bytes)
                    .map_err(|_| {
                        RecordError::Corrupt(Corruption::KeyLength {
                            table: CF_META,
                            key: [META_ERASED, &rest].concat(),
                            expected: META_ERASED.len() + 8,
                        })
                    })
            })
            .collect()
    }

    /// Whether epoch `epoch`'s key material was destroyed.
    pub fn is_erased(&self, epoch: u64) -> Result<bool, RecordError> {
        Ok(self.meta(&erased_key(epoch))?.is_some())
    }

    /// The sequence number of the `afr.erase` event that records epoch `epoch`'s erasure.
    pub fn erase_event(&self, epoch: u64) -> Result<Option<u64>, RecordError> {
        match self.meta(&erase_event_key(epoch))? {
            None => Ok(None),
            Some(v) => {
                let b: [u8; 8] = v.as_slice().try_into().map_err(|_| {
                    Entry::Meta(erase_event_key(epoch))
                        .malformed(format!("is {} bytes, not 8", v.len()))
                })?;
                Ok(Some(u64::from_be_bytes(b)))
            }
        }
    }
}

/// Builds a disclosure bundle of the events `seqs` (sorted, deduplicated here). With `keys`,
/// each event's sealed payload and event key go in, except for erased epochs; for those, the
/// `afr.erase` event that records the erasure is added with its key (when it is sealed), since
/// a verifier accepts an erasure claim only with that proof.
pub(crate) fn disclose(
    store: &Store,
    master: &MasterKey,
    seqs: &[u64],
    keys: bool,
) -> Result<Bundle, RecordError> {
    let mut seqs = seqs.to_vec();
    seqs.sort_unstable();
    seqs.dedup();
    if keys {
        let mut proofs = Vec::new();
        for &seq in &seqs {
            if let Some(record) = store.record(seq)?
                && let Some(e) = store.erase_event(record.epoch)?
                && store
                    .record(e)?
                    .is_some_and(|r| store.epoch(r.epoch).ok().flatten().is_some())
            {
                proofs.push(e);
            }
        }
        seqs.extend(proofs);
        seqs.sort_unstable();
        seqs.dedup();
    }
    let recorder = store.recorder_id()?;
    let mut headers = Vec::new();
    for kv in store.epochs_from(0)? {
        let (e, b) = kv?;
        headers.push(
            afr_core::EpochHeader::decode(&b).map_err(|err| Entry::Header(e).malformed(err))?,
        );
    }
    // The leaf hashes of one epoch at a time: `seqs` is sorted, so each epoch is read once
    // and memory stays bounded by one epoch whatever the size of the log.
    let mut leaves_of: Option<(u64, Vec<Hash32>)> = None;
    let mut events = Vec::with_capacity(seqs.len());
    let mut last_epoch = 0;
    let mut erased = Vec::new();
    for &seq in &seqs {
        let record = store.record(seq)?.ok_or(RecordError::UnknownEvent(seq))?;
        let h = headers
            .get(record.epoch as usize)
            .ok_or(RecordError::Unsealed {
                seq,
                epoch: record.epoch,
            })?;
        last_epoch = last_epoch.max(record.epoch);
        if leaves_of.as_ref().is_none_or(|(e, _)| *e != h.epoch) {
            // The header's count comes from disk: reserve no more than the log holds.
            let mut leaves = Vec::with_capacity(h.count.min(1 << 20) as usize);
            for kv in store.records_from(h.first_seq)?.take(h.count as usize) {
                let (s, b) = kv?;
                let due = h.first_seq + leaves.len() as u64;
                if s != due {
                    return Err(Entry::Record(s).instead_of(Entry::Record(due)));
                }
                leaves.push(leaf_hash(&b));
            }
            if (leaves.len() as u64) < h.count {
                return Err(RecordError::Corrupt(Corruption::ShortEpoch {
                    epoch: h.epoch,
                    found: leaves.len() as u64,
                    count: h.count,
                }));
            }
            leaves_of = Some((h.epoch, leaves));
        }
        let Some((_, leaves)) = &leaves_of else {
            return Err(RecordError::Internal(
                "an epoch's leaf hashes were not read",
            ));
        };
        let proof =
            merkle::inclusion_proof(leaves, (seq - h.first_seq) as usize).ok_or_else(|| {
                Entry::Record(seq).malformed(format!(
                    "names epoch {}, whose {} records from {} do not hold it",
                    h.epoch, h.count, h.first_seq
                ))
            })?;
        let is_erased = store.is_erased(record.epoch)?;
        if is_erased && !erased.contains(&record.epoch) {
            erased.push(record.epoch);
        }
        let (payload, key) = if keys {
            let payload = store.payload(seq)?;
            let key = match store.epoch_salt(record.epoch)? {
                Some(salt) if !is_erased => Some(
                    master
                        .epoch_key(&salt, &recorder, record.epoch)
                        .event_key(seq),
                ),
                _ => None,
            };
            (payload, key)
        } else {
            (None, None)
        };
        events.push(DisclosedEvent {
            record: record.encode(),
            proof,
            payload,
            key,
        });
    }
    let all_roots: Vec<afr_core::Hash32> =
        headers.iter().map(afr_core::EpochHeader::root).collect();
    headers.truncate(last_epoch as usize + 1);
    // Witnessed checkpoints kept beside the store, if any (`afr witness`).
    let checkpoints = match store.path().parent() {
        Some(dir) if dir.join("roots").is_dir() => crate::roots::Roots::open(dir, false)
            .and_then(|r| r.frames(&all_roots, headers.len() as u64))
            .map_err(|e| RecordError::Storage(format!("roots: {e}")))?,
        _ => Vec::new(),
    };
    Ok(Bundle {
        recorder,
        headers,
        erased,
        events,
        checkpoints,
    })
}

impl Recorder {
    /// Destroys the key material of sealed epoch `epoch` so its payloads can never be
    /// decrypted again, deletes the query-index terms derived from them (in the same batch as
    /// the salt), and rewrites the store's files so no file under the store still holds the
    /// material. Integrity verification is unaffected: records, ciphertexts and commitments
    /// stay.
    ///
    /// The erasure is first recorded as an event (`afr.erase`, args `{epoch, erased_at_us,
    /// by}`), durable before any key is touched: a disclosure bundle that omits the epoch's keys
    /// proves the erasure with that event, so a verifier never takes an erasure on the
    /// operator's word. A crash after the event and before the destruction leaves the keys in
    /// place (a retry erases them and records a second event). The salt's delete is synced,
    /// every column family flushed (so the write-ahead log that held the salt becomes obsolete
    /// and is deleted), and the key column family compacted to the bottom level (so no SST file
    /// keeps the old value).
    pub fn erase_epoch(&self, epoch: u64) -> Result<(), RecordError> {
        self.erase_epoch_by(epoch, None)
    }

    /// [`Recorder::erase_epoch`], naming who ordered the erasure (recorded in the event; the
    /// recorder's address when `None`).
    pub fn erase_epoch_by(&self, epoch: u64, by: Option<&str>) -> Result<(), RecordError> {
        let store = self.store();
        if store.epoch(epoch)?.is_none() {
            return Err(RecordError::EpochNotSealed(epoch));
        }
        if store.is_erased(epoch)? {
            return Err(RecordError::AlreadyErased(epoch));
        }
        let by = match by {
            Some(b) => b.to_owned(),
            None => format!("recorder 0x{}", hex::encode(self.recorder_id())),
        };
        let ev = EventInput {
            execution: Some(afr_core::event::Execution {
                command: format!("destroy key material of epoch {epoch}"),
                target: None,
                mutation: serde_json::Value::Null,
            }),
            ..EventInput::intent_only(
                Category::Other,
                afr_core::bundle::ERASE_TOOL,
                serde_json::json!({ "epoch": epoch, "erased_at_us": now_us(), "by": by }),
            )
        };
        let receipt = self.record_own(ev)?;
        self.flush()?;
        let mut b = WriteBatch::default();
        // The index holds terms of the epoch's payloads: they go with the salt.
        let header = store
            .epoch(epoch)?
            .ok_or_else(|| Entry::Header(epoch).missing())?;
        crate::index::delete_epoch_terms(store, self.master_key(), &header, &mut b)?;
        b.delete_cf(store.cf(CF_KEYS)?, epoch.to_be_bytes());
        b.put_cf(
            store.cf(CF_META)?,
            erased_key(epoch),
            now_us().to_be_bytes(),
        );
        b.put_cf(
            store.cf(CF_META)?,
            erase_event_key(epoch),
            receipt.seq.to_be_bytes(),
        );
        b.put_cf(store.cf(CF_META)?, META_SCRUB_PENDING, [1u8]);
        store.write(b, true)?;
        // From here the material is gone logically; the files still hold it until the scrub,
        // which runs now and, if anything below fails or the process dies, on the next open.
        finish_pending_scrub(store).map(|_| ())
    }
}
