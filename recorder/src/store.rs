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

use afr_core::{EpochHeader, Record, RecorderId, crypto::SealedPayload};
use rocksdb::{
    ColumnFamily, ColumnFamilyDescriptor, DB, DBCompressionType, Direction, IteratorMode, Options,
    WriteBatch, WriteOptions,
};

use crate::RecordError;

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

fn corrupt(what: impl Into<String>) -> RecordError {
    RecordError::Corrupt(what.into())
}

/// A key and its value, as RocksDB's iterators return them.
type Entry = (Box<[u8]>, Box<[u8]>);

/// The rest of a key after a prefix, and its value ([`Store::meta_prefixed`]).
type KeyRest = (Vec<u8>, Box<[u8]>);

/// A key of the column families keyed by sequence number or epoch: 8 bytes, big-endian.
fn u64_key(k: &[u8]) -> Result<u64, RecordError> {
    <[u8; 8]>::try_from(k)
        .map(u64::from_be_bytes)
        .map_err(|_| corrupt("key is not 8 bytes"))
}

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
fn kept_corrupt(at: Kept<'_>, e: &dyn std::fmt::Display) -> RecordError {
    match at {
        Kept::Epoch(epoch) => corrupt(format!("anchor of epoch {epoch}: {e}")),
        Kept::Named(name) => corrupt(format!("{}: {e}", String::from_utf8_lossy(name))),
    }
}

/// RocksDB settings of the whole store, chosen for an append-only log (see
/// `docs/performance.md`, "Store settings"): two background jobs for flushes and two for
/// compactions, so a flush never queues behind a compaction, and writes to disk smoothed in
/// 1 MiB steps instead of bursts at each file's end.
///
/// The write-ahead log is capped at 256 MiB: the small column families (epochs, keys,
/// metadata) rarely fill a memtable, and each of their unflushed entries would otherwise pin
/// every WAL file written since (RocksDB's default cap is four times all memtables, here
/// about 7 GiB: 4.9 GB of WAL beside 4.5 GB of tables, seen 7M events into a 10M ingest).
/// Past the cap, the column families holding the oldest WAL are flushed and it is deleted.
fn db_options() -> Options {
    let mut o = Options::default();
    o.increase_parallelism(2);
    o.set_max_background_jobs(4);
    o.set_bytes_per_sync(1 << 20);
    o.set_max_total_wal_size(256 << 20);
    // Memtables of all column families together: at most 256 MiB, so a recorder's memory
    // does not grow with the ingest rate (each family may keep four, see `cf_options`).
    o.set_db_write_buffer_size(256 << 20);
    o
}

/// The block cache every column family of one store shares: index and filter blocks live in
/// it too, so a reader's memory is bounded by it whatever the size of the log.
const BLOCK_CACHE_BYTES: usize = 32 << 20;

/// Per column family. Records, payloads and epochs are keyed by a big-endian sequence
/// number: every write appends at the end of the key space, so flushed files never overlap
/// and compaction moves them down without rewriting (level compaction with dynamic level
/// sizes keeps it so as the log grows). Four 64 MiB memtables let writes continue while one
/// is flushed; the L0 stall triggers are raised above what a flush backlog reaches at full
/// ingest speed on two cores. Payloads are ciphertext, which does not compress.
fn cf_options(name: &str, cache: &rocksdb::Cache) -> Options {
    let mut o = Options::default();
    o.set_write_buffer_size(64 << 20);
    o.set_max_write_buffer_number(4);
    o.set_level_zero_file_num_compaction_trigger(4);
    o.set_level_zero_slowdown_writes_trigger(40);
    o.set_level_zero_stop_writes_trigger(64);
    o.set_target_file_size_base(64 << 20);
    o.set_max_bytes_for_level_base(256 << 20);
    o.set_level_compaction_dynamic_level_bytes(true);
    o.set_compression_type(if name == CF_PAYLOADS {
        DBCompressionType::None
    } else {
        DBCompressionType::Lz4
    });
    let mut t = rocksdb::BlockBasedOptions::default();
    t.set_block_cache(cache);
    t.set_cache_index_and_filter_blocks(true);
    t.set_pin_l0_filter_and_index_blocks_in_cache(true);
    t.set_block_size(16 << 10);
    o.set_block_based_table_factory(&t);
    o
}

/// Every column family with its settings, sharing one block cache.
fn cf_descriptors() -> Vec<ColumnFamilyDescriptor> {
    let cache = rocksdb::Cache::new_lru_cache(BLOCK_CACHE_BYTES);
    ALL_CFS
        .iter()
        .map(|n| ColumnFamilyDescriptor::new(*n, cf_options(n, &cache)))
        .collect()
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
    pub(crate) fn cf(&self, name: &str) -> Result<&ColumnFamily, RecordError> {
        self.db
            .cf_handle(name)
            .ok_or_else(|| corrupt(format!("column family {name} missing")))
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
            .ok_or_else(|| corrupt("no recorder id in metadata"))?;
        RecorderId::try_from(v.as_slice()).map_err(|_| corrupt("recorder id is not 20 bytes"))
    }

    fn get_u64_key(&self, cf: &str, k: u64) -> Result<Option<Vec<u8>>, RecordError> {
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
            .map(|b| Record::decode(&b).map_err(|e| corrupt(format!("record {seq}: {e}"))))
            .transpose()
    }

    /// The sealed payload of `seq`, raw bytes.
    pub fn payload_bytes(&self, seq: u64) -> Result<Option<Vec<u8>>, RecordError> {
        self.get_u64_key(CF_PAYLOADS, seq)
    }

    /// The sealed payload of `seq`.
    pub fn payload(&self, seq: u64) -> Result<Option<SealedPayload>, RecordError> {
        self.get_u64_key(CF_PAYLOADS, seq)?
            .map(|b| SealedPayload::decode(&b).map_err(|e| corrupt(format!("payload {seq}: {e}"))))
            .transpose()
    }

    /// The header of sealed epoch `epoch`.
    pub fn epoch(&self, epoch: u64) -> Result<Option<EpochHeader>, RecordError> {
        self.get_u64_key(CF_EPOCHS, epoch)?
            .map(|b| EpochHeader::decode(&b).map_err(|e| corrupt(format!("epoch {epoch}: {e}"))))
            .transpose()
    }

    /// The salt of epoch `epoch`, if not erased.
    pub fn epoch_salt(&self, epoch: u64) -> Result<Option<[u8; 32]>, RecordError> {
        self.get_u64_key(CF_KEYS, epoch)?
            .map(|b| {
                <[u8; 32]>::try_from(b.as_slice())
                    .map_err(|_| corrupt(format!("salt of epoch {epoch}")))
            })
            .transpose()
    }

    /// The entry with the highest key in column family `cf`, if any.
    fn last_entry(&self, cf: &str) -> Result<Option<Entry>, RecordError> {
        self.db
            .iterator_cf(self.cf(cf)?, IteratorMode::End)
            .next()
            .transpose()
            .map_err(db_err)
    }

    /// The last sealed epoch header, if any.
    pub fn last_epoch(&self) -> Result<Option<EpochHeader>, RecordError> {
        self.last_entry(CF_EPOCHS)?
            .map(|(_, v)| EpochHeader::decode(&v).map_err(|e| corrupt(format!("last epoch: {e}"))))
            .transpose()
    }

    /// Number of records (one past the highest sequence number).
    pub fn record_count(&self) -> Result<u64, RecordError> {
        match self.last_entry(CF_RECORDS)? {
            None => Ok(0),
            Some((k, _)) => Ok(u64_key(&k)? + 1),
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
        cf: &str,
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
        Ok(it.map(|kv| {
            let (k, v) = kv.map_err(db_err)?;
            Ok((u64_key(&k)?, v.into_vec()))
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

    /// The value kept at `at`, read with `decode`; one that does not decode is corruption of
    /// that entry.
    pub fn kept<T, E: std::fmt::Display>(
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
    pub fn last_kept<T, E: std::fmt::Display>(
        &self,
        decode: impl FnOnce(u64, &[u8]) -> Result<T, E>,
    ) -> Result<Option<T>, RecordError> {
        let Some((k, v)) = self.last_entry(CF_ANCHORS)? else {
            return Ok(None);
        };
        let epoch = u64_key(&k)?;
        decode(epoch, &v)
            .map(Some)
            .map_err(|e| kept_corrupt(Kept::Epoch(epoch), &e))
    }

    /// The values kept per epoch from `epoch` upwards, in order, each read with `decode`
    /// (given its epoch).
    pub fn kept_from<'a, T, E: std::fmt::Display>(
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
    pub fn kept_prefixed<T, E: std::fmt::Display>(
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
                    return Err(RecordError::Corrupt(format!(
                        "metadata entry {} is the store's own",
                        String::from_utf8_lossy(name)
                    )));
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

    /// Total bytes of the store's files on disk.
    pub fn disk_bytes(&self) -> u64 {
        dir_size(&self.path)
    }

    /// The write stalls RocksDB imposed since the store was opened (its `dbstats` and
    /// per-column-family `cfstats` properties), for benchmarks of sustained ingest.
    pub fn write_stalls(&self) -> WriteStalls {
        let mut out = WriteStalls::default();
        if let Ok(Some(s)) = self.db.property_value("rocksdb.dbstats") {
            out.stall_secs = parse_cumulative_stall(&s).unwrap_or(0.0);
        }
        for n in ALL_CFS {
            let Ok(cf) = self.cf(n) else { continue };
            if let Ok(Some(s)) = self.db.property_value_cf(cf, "rocksdb.cfstats") {
                for line in s.lines().filter_map(|l| l.strip_prefix("Stalls(count):")) {
                    for part in line.split(',') {
                        let mut w = part.split_whitespace();
                        if let (Some(Ok(k)), Some(name)) =
                            (w.next().map(str::parse::<u64>), w.next())
                        {
                            *out.counts.entry(name.to_owned()).or_default() += k;
                        }
                    }
                }
            }
        }
        out
    }

    /// RocksDB's memory by use, in bytes, summed over column families: memtables
    /// (`size-all-mem-tables`), table readers outside the block cache
    /// (`estimate-table-readers-mem`) and the block cache (`block-cache-usage`, shared).
    pub fn memory_usage(&self) -> std::collections::BTreeMap<&'static str, u64> {
        let mut out = std::collections::BTreeMap::new();
        for (name, prop, shared) in [
            ("memtables", "rocksdb.size-all-mem-tables", false),
            ("table_readers", "rocksdb.estimate-table-readers-mem", false),
            ("block_cache", "rocksdb.block-cache-usage", true),
        ] {
            let mut total = 0;
            for n in ALL_CFS {
                let Ok(cf) = self.cf(n) else { continue };
                if let Ok(Some(v)) = self.db.property_int_value_cf(cf, prop) {
                    if shared {
                        total = total.max(v);
                    } else {
                        total += v;
                    }
                }
            }
            out.insert(name, total);
        }
        out
    }
}

/// Write stalls of a store (see [`Store::write_stalls`]).
#[derive(Debug, Clone, Default)]
pub struct WriteStalls {
    /// Time writers were delayed or stopped, in seconds (`Cumulative stall` of `dbstats`).
    pub stall_secs: f64,
    /// Stall events by cause, summed over column families (`Stalls(count)` of `cfstats`).
    pub counts: std::collections::BTreeMap<String, u64>,
}

/// The seconds of `Cumulative stall: HH:MM:SS.sss H:M:S` in RocksDB's `dbstats` text.
fn parse_cumulative_stall(s: &str) -> Option<f64> {
    let rest = s.split("Cumulative stall:").nth(1)?;
    let hms = rest.split_whitespace().next()?;
    let mut secs = 0.0;
    for part in hms.split(':') {
        secs = secs * 60.0 + part.parse::<f64>().ok()?;
    }
    Some(secs)
}

fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
