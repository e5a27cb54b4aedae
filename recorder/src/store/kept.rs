//! Values the store keeps for a component above it, without knowing their fields: today the
//! anchorer's receipts (in `anchors`, per epoch) and its marker, fork alarm and archived
//! receipts (in `meta`, by name). The component brings its own encoding and decoder
//! (`afr_anchorer::AnchorStore`); the store gives a typed place, reads it back, and writes
//! batches of places atomically.

use std::fmt::Display;

use rocksdb::WriteBatch;

use super::{CF_ANCHORS, CF_META, META_FORMAT, META_RECORDER, Store, u64_key};
use crate::{Entry, RecordError};

/// Where a value kept for a component above the store lives (see [`Store::kept`]). The store
/// keeps such values in the component's own encoding and never reads their fields: today the
/// anchorer's receipts, its verification marker, its fork alarm and its archived receipts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept<'a> {
    /// In `anchors`, under `u64be(epoch)`.
    Epoch(u64),
    /// In `meta`, under this name. It MUST NOT be one of the store's own names (`format`,
    /// `recorder`, `scrub-pending`, `index/…`, `erased/…`, `erase-event/…`, `idempotency/…`):
    /// [`Store::write_kept`] refuses those.
    Named(&'a [u8]),
}

/// One write of a [`Store::write_kept`] batch.
#[derive(Debug, Clone, Copy)]
pub enum KeptOp<'a> {
    /// Writes the value at a place.
    Put(Kept<'a>, &'a [u8]),
    /// Removes the value at a place.
    Delete(Kept<'a>),
}

/// Whether `name` is a metadata key the store itself writes (or a key under one of its
/// prefixes).
fn is_own_meta(name: &[u8]) -> bool {
    [
        META_FORMAT,
        META_RECORDER,
        crate::disclose::META_SCRUB_PENDING,
        crate::index::META_INDEX_VERSION,
        crate::index::META_INDEX_WATERMARK,
    ]
    .contains(&name)
        || [
            crate::disclose::META_ERASED,
            crate::disclose::META_ERASE_EVENT,
            crate::META_IDEMPOTENCY,
            b"index/",
        ]
        .iter()
        .any(|p| name.starts_with(p))
}

/// A kept value that its owner's decoder refuses.
fn kept_corrupt(at: Kept<'_>, e: &dyn Display) -> RecordError {
    match at {
        Kept::Epoch(epoch) => Entry::Anchor(epoch).malformed(e),
        Kept::Named(name) => Entry::Meta(name.to_vec()).malformed(e),
    }
}

impl Store {
    /// The value kept at `at`, read with `decode`; one that does not decode is corruption of
    /// that entry.
    pub fn kept<T, E: Display>(
        &self,
        at: Kept<'_>,
        decode: impl FnOnce(&[u8]) -> Result<T, E>,
    ) -> Result<Option<T>, RecordError> {
        let v = match at {
            Kept::Epoch(e) => self.get_u64_key(CF_ANCHORS, e)?,
            Kept::Named(name) => self.meta(name)?,
        };
        v.map(|b| decode(&b).map_err(|e| kept_corrupt(at, &e)))
            .transpose()
    }

    /// The value kept under the highest epoch, read with `decode` (given the epoch).
    pub fn last_kept<T, E: Display>(
        &self,
        decode: impl FnOnce(u64, &[u8]) -> Result<T, E>,
    ) -> Result<Option<T>, RecordError> {
        let Some((k, v)) = self.last_entry(CF_ANCHORS)? else {
            return Ok(None);
        };
        let epoch = u64_key(CF_ANCHORS, &k)?;
        decode(epoch, &v)
            .map(Some)
            .map_err(|e| kept_corrupt(Kept::Epoch(epoch), &e))
    }

    /// The values kept per epoch from `epoch` upwards, in order, each read with `decode`
    /// (given its epoch).
    pub fn kept_from<'a, T, E: Display>(
        &'a self,
        epoch: u64,
        decode: impl Fn(u64, &[u8]) -> Result<T, E> + 'a,
    ) -> Result<impl Iterator<Item = Result<T, RecordError>> + 'a, RecordError> {
        Ok(self.iter_u64(CF_ANCHORS, epoch)?.map(move |kv| {
            let (e, b) = kv?;
            decode(e, &b).map_err(|err| kept_corrupt(Kept::Epoch(e), &err))
        }))
    }

    /// The named values whose name starts with `prefix`, in name order, each read with
    /// `decode` (given the rest of its name).
    pub fn kept_prefixed<T, E: Display>(
        &self,
        prefix: &[u8],
        decode: impl Fn(&[u8], &[u8]) -> Result<T, E>,
    ) -> Result<Vec<T>, RecordError> {
        let mut out = Vec::new();
        for kv in self.meta_prefixed(prefix)? {
            let (rest, v) = kv?;
            out.push(
                decode(&rest, &v).map_err(|e| {
                    kept_corrupt(Kept::Named(&[prefix, rest.as_slice()].concat()), &e)
                })?,
            );
        }
        Ok(out)
    }

    /// Applies `ops` in one synced batch: all of them or none. A name the store uses itself
    /// (see [`Kept::Named`]) is refused and nothing is written.
    pub fn write_kept(&self, ops: &[KeptOp<'_>]) -> Result<(), RecordError> {
        let mut b = WriteBatch::default();
        for op in ops {
            let (KeptOp::Put(at, _) | KeptOp::Delete(at)) = *op;
            let (cf, key) = match at {
                Kept::Epoch(e) => (self.cf(CF_ANCHORS)?, e.to_be_bytes().to_vec()),
                Kept::Named(name) if is_own_meta(name) => {
                    return Err(RecordError::ReservedName(name.to_vec()));
                }
                Kept::Named(name) => (self.cf(CF_META)?, name.to_vec()),
            };
            match *op {
                KeptOp::Put(_, v) => b.put_cf(cf, key, v),
                KeptOp::Delete(_) => b.delete_cf(cf, key),
            }
        }
        self.write(b, true)
    }
}
