//! The RocksDB store: typed column families with big-endian `u64` keys.
//!
//! | column family | key            | value                                   |
//! |---------------|----------------|-----------------------------------------|
//! | `records`     | `u64be(seq)`   | record, canonical CBOR                  |
//! | `payloads`    | `u64be(seq)`   | sealed payload, canonical CBOR          |
//! | `epochs`      | `u64be(epoch)` | sealed epoch header, canonical CBOR     |
//! | `anchors`     | `u64be(epoch)` | kept for the anchorer (see [`Kept`])    |
//! | `keys`        | `u64be(epoch)` | 32-byte epoch salt (erasable)           |
//! | `meta`        | ASCII name     | format version, recorder id, erasures; entries kept for the anchorer |
//! | `index`       | see [`crate::index`] | query index terms (keyed hashes, erasable) |
//!
//! Every write the recorder makes is
//! one atomic `WriteBatch`, appended in sequence order, so after a crash the store holds a
//! prefix of what was submitted: never a gap, never half an event.

use std::path::{Path, PathBuf};

use afr_core::{EpochHeader, Record, RecorderId, crypto::EncryptedPayload};
use rocksdb::{ColumnFamily, DB, Direction, IteratorMode, WriteBatch, WriteOptions};

use crate::{Corruption, Entry, RecordError};

mod kept;
mod tuning;

pub use kept::{Kept, KeptOp};
pub use tuning::WriteStalls;
use tuning::{cf_descriptors, db_options};

/// Column family of records.
pub(crate) const CF_RECORDS: &str = "records";
/// Column family of sealed payloads.
pub(crate) const CF_PAYLOADS: &str = "payloads";
/// Column family of epoch headers.
pub(crate) const CF_EPOCHS: &str = "epochs";
/// Column family of values kept per epoch for the anchorer (its receipts).
pub(crate) const CF_ANCHORS: &str = "anchors";
/// Column family of epoch salts (key material).
pub(crate) const CF_KEYS: &str = "keys";
/// Column family of metadata.
pub(crate) const CF_META: &str = "meta";
/// Column family of query index terms (see [`crate::index`]).
pub(crate) const CF_INDEX: &str = "index";

const ALL_CFS: [&str; 7] = [
    CF_RECORDS,
    CF_PAYLOADS,
    CF_EPOCHS,
    CF_ANCHORS,
    CF_KEYS,
    CF_META,
    CF_INDEX,
];

/// A column family, named for [`Store::raw_write`] (feature `raw-store`).
#[cfg(feature = "raw-store")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// Records.
    Records,
    /// Sealed payloads.
    Payloads,
    /// Epoch headers.
    Epochs,
    /// Anchor receipts.
    Anchors,
    /// Epoch salts (key material).
    Keys,
    /// Metadata.
    Meta,
    /// Query index terms.
    Index,
}

#[cfg(feature = "raw-store")]
impl Column {
    /// The RocksDB column family's name.
    pub fn name(self) -> &'static str {
        match self {
            Column::Records => CF_RECORDS,
            Column::Payloads => CF_PAYLOADS,
            Column::Epochs => CF_EPOCHS,
            Column::Anchors => CF_ANCHORS,
            Column::Keys => CF_KEYS,
            Column::Meta => CF_META,
            Column::Index => CF_INDEX,
        }
    }
}

/// One raw write: a put or a delete of a key in a column family.
#[cfg(feature = "raw-store")]
#[derive(Debug, Clone, Copy)]
pub enum RawOp<'a> {
    /// Writes `value` under `key`.
    Put(Column, &'a [u8], &'a [u8]),
    /// Deletes `key`.
    Delete(Column, &'a [u8]),
}

/// Metadata key of the store format version.
pub const META_FORMAT: &[u8] = b"format";
/// Metadata key of the recorder id.
pub const META_RECORDER: &[u8] = b"recorder";

/// Store format version written at creation and checked at open.
pub const STORE_FORMAT: u64 = 1;

/// An open store.
#[derive(Debug)]
pub struct Store {
    db: DB,
    path: PathBuf,
}

fn db_err(e: rocksdb::Error) -> RecordError {
    RecordError::Storage(e.into_string())
}

/// A key and its value, as RocksDB's iterators return them.
type Kv = (Box<[u8]>, Box<[u8]>);

/// The rest of a key after a prefix, and its value ([`Store::meta_prefixed`]).
type KeyRest = (Vec<u8>, Box<[u8]>);

/// A key of `table`, one of the column families keyed by sequence number or epoch: 8 bytes,
/// big-endian.
fn u64_key(table: &'static str, k: &[u8]) -> Result<u64, RecordError> {
    <[u8; 8]>::try_from(k).map(u64::from_be_bytes).map_err(|_| {
        RecordError::Corrupt(Corruption::KeyLength {
            table,
            key: k.to_vec(),
            expected: 8,
        })
    })
}

impl Store {
    /// Opens (or with `create`, creates) the store at `path`.
    pub fn open(path: &Path, create: bool) -> Result<Store, RecordError> {
        let mut opts = db_options();
        opts.create_if_missing(create);
        // Always: a store created before the query index gains its column family on open
        // (the recorder then builds the index; see `crate::index::catch_up`).
        opts.create_missing_column_families(true);
        let db = DB::open_cf_descriptors(&opts, path, cf_descriptors()).map_err(db_err)?;
        Ok(Store {
            db,
            path: path.to_owned(),
        })
    }

    /// Opens an existing store read-only, as it is on disk now (the write-ahead log is read,
    /// nothing is written). It does not take RocksDB's lock: a writer may hold the store, and
    /// this view does not see what the writer adds after it opened.
    pub fn open_read_only(path: &Path) -> Result<Store, RecordError> {
        let db = DB::open_cf_descriptors_read_only(&db_options(), path, cf_descriptors(), false)
            .map_err(db_err)?;
        Ok(Store {
            db,
            path: path.to_owned(),
        })
    }

    /// Where the store lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn db(&self) -> &DB {
        &self.db
    }

    /// A column family handle by name (`CF_*`), for batches passed to [`Store::write`].
    pub(crate) fn cf(&self, name: &'static str) -> Result<&ColumnFamily, RecordError> {
        self.db
            .cf_handle(name)
            .ok_or_else(|| Entry::ColumnFamily(name).missing())
    }

    /// Writes a batch; with `sync`, returns only once it is on stable storage.
    pub(crate) fn write(&self, batch: WriteBatch, sync: bool) -> Result<(), RecordError> {
        let mut wo = WriteOptions::default();
        wo.set_sync(sync);
        self.db.write_opt(batch, &wo).map_err(db_err)
    }

    /// Applies `ops` in one synced batch, bypassing every check the recorder makes: for tests
    /// that play an attacker (or a crash) with write access to the disk. Only with the
    /// `raw-store` feature, which no shipped binary enables.
    #[cfg(feature = "raw-store")]
    pub fn raw_write(&self, ops: &[RawOp<'_>]) -> Result<(), RecordError> {
        let mut b = WriteBatch::default();
        for op in ops {
            match *op {
                RawOp::Put(c, k, v) => b.put_cf(self.cf(c.name())?, k, v),
                RawOp::Delete(c, k) => b.delete_cf(self.cf(c.name())?, k),
            }
        }
        self.write(b, true)
    }

    /// Reads a metadata value.
    pub fn meta(&self, key: &[u8]) -> Result<Option<Vec<u8>>, RecordError> {
        self.db.get_cf(self.cf(CF_META)?, key).map_err(db_err)
    }

    /// Writes a metadata value, synced.
    pub fn put_meta(&self, key: &[u8], value: &[u8]) -> Result<(), RecordError> {
        let mut b = WriteBatch::default();
        b.put_cf(self.cf(CF_META)?, key, value);
        self.write(b, true)
    }

    /// The recorder id stored at creation.
    pub fn recorder_id(&self) -> Result<RecorderId, RecordError> {
        let v = self
            .meta(META_RECORDER)?
            .ok_or_else(|| Entry::Meta(META_RECORDER.to_vec()).missing())?;
        RecorderId::try_from(v.as_slice()).map_err(|_| {
            Entry::Meta(META_RECORDER.to_vec()).malformed(format!("is {} bytes, not 20", v.len()))
        })
    }

    fn get_u64_key(&self, cf: &'static str, k: u64) -> Result<Option<Vec<u8>>, RecordError> {
        self.db
            .get_cf(self.cf(cf)?, k.to_be_bytes())
            .map_err(db_err)
    }

    /// The record at `seq`, raw bytes.
    pub fn record_bytes(&self, seq: u64) -> Result<Option<Vec<u8>>, RecordError> {
        self.get_u64_key(CF_RECORDS, seq)
    }

    /// The record at `seq`.
    pub fn record(&self, seq: u64) -> Result<Option<Record>, RecordError> {
        self.record_bytes(seq)?
            .map(|b| Record::decode(&b).map_err(|e| Entry::Record(seq).malformed(e)))
            .transpose()
    }

    /// The sealed payload of `seq`, raw bytes.
    pub fn payload_bytes(&self, seq: u64) -> Result<Option<Vec<u8>>, RecordError> {
        self.get_u64_key(CF_PAYLOADS, seq)
    }

    /// The sealed payload of `seq`.
    pub fn payload(&self, seq: u64) -> Result<Option<EncryptedPayload>, RecordError> {
        self.get_u64_key(CF_PAYLOADS, seq)?
            .map(|b| EncryptedPayload::decode(&b).map_err(|e| Entry::Payload(seq).malformed(e)))
            .transpose()
    }

    /// The header of sealed epoch `epoch`.
    pub fn epoch(&self, epoch: u64) -> Result<Option<EpochHeader>, RecordError> {
        self.get_u64_key(CF_EPOCHS, epoch)?
            .map(|b| EpochHeader::decode(&b).map_err(|e| Entry::Header(epoch).malformed(e)))
            .transpose()
    }

    /// The salt of epoch `epoch`, if not erased.
    pub fn epoch_salt(&self, epoch: u64) -> Result<Option<[u8; 32]>, RecordError> {
        self.get_u64_key(CF_KEYS, epoch)?
            .map(|b| {
                <[u8; 32]>::try_from(b.as_slice()).map_err(|_| {
                    Entry::Salt(epoch).malformed(format!("is {} bytes, not 32", b.len()))
                })
            })
            .transpose()
    }

    /// The entry with the highest key in column family `cf`, if any.
    fn last_entry(&self, cf: &'static str) -> Result<Option<Kv>, RecordError> {
        self.db
            .iterator_cf(self.cf(cf)?, IteratorMode::End)
            .next()
            .transpose()
            .map_err(db_err)
    }

    /// The last sealed epoch header, if any.
    pub fn last_epoch(&self) -> Result<Option<EpochHeader>, RecordError> {
        self.last_entry(CF_EPOCHS)?
            .map(|(k, v)| {
                let epoch = u64_key(CF_EPOCHS, &k)?;
                EpochHeader::decode(&v).map_err(|e| Entry::Header(epoch).malformed(e))
            })
            .transpose()
    }

    /// Number of records (one past the highest sequence number).
    pub fn record_count(&self) -> Result<u64, RecordError> {
        match self.last_entry(CF_RECORDS)? {
            None => Ok(0),
            Some((k, _)) => Ok(u64_key(CF_RECORDS, &k)? + 1),
        }
    }

    /// Iterates `(seq, record bytes)` from `seq` upwards, in order.
    pub fn records_from(
        &self,
        seq: u64,
    ) -> Result<impl Iterator<Item = Result<(u64, Vec<u8>), RecordError>> + '_, RecordError> {
        self.iter_u64(CF_RECORDS, seq)
    }

    /// Iterates `(epoch, header bytes)` from `epoch` upwards, in order.
    pub fn epochs_from(
        &self,
        epoch: u64,
    ) -> Result<impl Iterator<Item = Result<(u64, Vec<u8>), RecordError>> + '_, RecordError> {
        self.iter_u64(CF_EPOCHS, epoch)
    }

    /// Iterates `(seq, payload bytes)` from `seq` upwards, in order.
    pub fn payloads_from(
        &self,
        seq: u64,
    ) -> Result<impl Iterator<Item = Result<(u64, Vec<u8>), RecordError>> + '_, RecordError> {
        self.iter_u64(CF_PAYLOADS, seq)
    }

    fn iter_u64(
        &self,
        cf: &'static str,
        from: u64,
    ) -> Result<impl Iterator<Item = Result<(u64, Vec<u8>), RecordError>> + '_, RecordError> {
        let key = from.to_be_bytes();
        // A sequential read of the log: large readahead, and the blocks it passes are not
        // kept in the block cache (a full scan would only evict what lookups need).
        let mut ro = rocksdb::ReadOptions::default();
        ro.fill_cache(false);
        ro.set_readahead_size(2 << 20);
        let it = self.db.iterator_cf_opt(
            self.cf(cf)?,
            ro,
            IteratorMode::From(&key, Direction::Forward),
        );
        Ok(it.map(move |kv| {
            let (k, v) = kv.map_err(db_err)?;
            Ok((u64_key(cf, &k)?, v.into_vec()))
        }))
    }

    /// Flushes memtables to SST files (used before measuring disk size).
    pub fn flush(&self) -> Result<(), RecordError> {
        self.db.flush_wal(true).map_err(db_err)?;
        for n in ALL_CFS {
            self.db.flush_cf(self.cf(n)?).map_err(db_err)?;
        }
        Ok(())
    }

    /// Flushes every column family and compacts the key and index column families to the
    /// bottom level, so deleted key material and index terms survive in no WAL or SST file
    /// (crypto-erasure).
    pub fn scrub_keys(&self) -> Result<(), RecordError> {
        self.flush()?;
        let mut co = rocksdb::CompactOptions::default();
        co.set_bottommost_level_compaction(rocksdb::BottommostLevelCompaction::Force);
        for cf in [CF_KEYS, CF_INDEX] {
            self.db
                .compact_range_cf_opt(self.cf(cf)?, None::<&[u8]>, None::<&[u8]>, &co);
        }
        Ok(())
    }

    /// The metadata entries whose key starts with `prefix`, in key order, as (the rest of
    /// the key, value).
    pub(crate) fn meta_prefixed<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> Result<impl Iterator<Item = Result<KeyRest, RecordError>> + 'a, RecordError> {
        let it = self.db.iterator_cf(
            self.cf(CF_META)?,
            IteratorMode::From(prefix, Direction::Forward),
        );
        Ok(it
            .map(|kv| kv.map_err(db_err))
            .take_while(move |kv| kv.as_ref().map_or(true, |(k, _)| k.starts_with(prefix)))
            .map(move |kv| kv.map(|(k, v)| (k[prefix.len()..].to_vec(), v))))
    }
}
