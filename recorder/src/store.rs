//! The RocksDB store: typed column families with big-endian `u64` keys.
//!
//! | column family | key            | value                                   |
//! |---------------|----------------|-----------------------------------------|
//! | `records`     | `u64be(seq)`   | record, canonical CBOR                  |
//! | `payloads`    | `u64be(seq)`   | sealed payload, canonical CBOR          |
//! | `epochs`      | `u64be(epoch)` | sealed epoch header, canonical CBOR     |
//! | `anchors`     | `u64be(epoch)` | anchor receipt (written by the anchorer)|
//! | `keys`        | `u64be(epoch)` | 32-byte epoch salt (erasable)           |
//! | `meta`        | ASCII name     | format version, recorder id, erasures, fork alarm, anchoring marker, archived receipts |
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
/// Column family of anchor receipts.
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

/// Metadata key of the fork alarm (see [`ForkAlarm`]); absent when there is none.
pub const META_FORK_ALARM: &[u8] = b"fork-alarm";
/// Metadata key of the anchorer's verification marker (see [`AnchorMarker`]).
pub const META_ANCHOR_MARKER: &[u8] = b"anchor-marker";
/// Metadata key prefix of receipts kept from an earlier chain or contract (see
/// [`Store::archive_anchors`]): `archived-anchor/ ‖ u64be(chain_id) ‖ contract(20) ‖
/// u64be(epoch)`.
pub const META_ARCHIVED_ANCHOR: &[u8] = b"archived-anchor/";

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

/// The stored receipt of `epoch`, decoded.
fn decode_anchor(epoch: u64, b: &[u8]) -> Result<AnchorReceipt, RecordError> {
    AnchorReceipt::decode(epoch, b).map_err(|e| corrupt(format!("anchor of epoch {epoch}: {e}")))
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

    /// Removes a metadata value, synced.
    fn delete_meta(&self, key: &[u8]) -> Result<(), RecordError> {
        let mut b = WriteBatch::default();
        b.delete_cf(self.cf(CF_META)?, key);
        self.write(b, true)
    }

    /// A metadata value read with `decode`; one that does not decode is corruption of `what`.
    fn meta_decoded<T>(
        &self,
        key: &[u8],
        what: &str,
        decode: impl FnOnce(&[u8]) -> Result<T, afr_core::cbor::CborError>,
    ) -> Result<Option<T>, RecordError> {
        self.meta(key)?
            .map(|b| decode(&b).map_err(|e| corrupt(format!("{what}: {e}"))))
            .transpose()
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

    /// Stores the receipt of the transaction that anchored `receipt.epoch` (synced).
    pub fn put_anchor(&self, receipt: &AnchorReceipt) -> Result<(), RecordError> {
        let mut b = WriteBatch::default();
        b.put_cf(
            self.cf(CF_ANCHORS)?,
            receipt.epoch.to_be_bytes(),
            receipt.encode(),
        );
        self.write(b, true)
    }

    /// Forgets the anchor receipt of `epoch` (its transaction left the canonical chain).
    pub fn delete_anchor(&self, epoch: u64) -> Result<(), RecordError> {
        let mut b = WriteBatch::default();
        b.delete_cf(self.cf(CF_ANCHORS)?, epoch.to_be_bytes());
        self.write(b, true)
    }

    /// The anchor receipt of `epoch`, if it was anchored.
    pub fn anchor(&self, epoch: u64) -> Result<Option<AnchorReceipt>, RecordError> {
        self.get_u64_key(CF_ANCHORS, epoch)?
            .map(|b| decode_anchor(epoch, &b))
            .transpose()
    }

    /// The receipt with the highest epoch, if any.
    pub fn last_anchor(&self) -> Result<Option<AnchorReceipt>, RecordError> {
        self.last_entry(CF_ANCHORS)?
            .map(|(k, v)| decode_anchor(u64_key(&k)?, &v))
            .transpose()
    }

    /// Iterates the receipts from `epoch` upwards, in order.
    pub fn anchors_from(
        &self,
        epoch: u64,
    ) -> Result<impl Iterator<Item = Result<AnchorReceipt, RecordError>> + '_, RecordError> {
        Ok(self.iter_u64(CF_ANCHORS, epoch)?.map(|kv| {
            let (e, b) = kv?;
            decode_anchor(e, &b)
        }))
    }

    /// Moves every receipt out of `anchors` into the archive in `meta` (one synced batch), and
    /// drops the anchoring marker: what an operator's switch to another chain or contract
    /// keeps of the old one. Returns how many receipts were archived.
    pub fn archive_anchors(&self) -> Result<u64, RecordError> {
        let mut b = WriteBatch::default();
        let mut n = 0;
        for r in self.anchors_from(0)? {
            let r = r?;
            let mut key = META_ARCHIVED_ANCHOR.to_vec();
            key.extend_from_slice(&r.chain_id.to_be_bytes());
            key.extend_from_slice(&r.contract);
            key.extend_from_slice(&r.epoch.to_be_bytes());
            b.put_cf(self.cf(CF_META)?, key, r.encode());
            b.delete_cf(self.cf(CF_ANCHORS)?, r.epoch.to_be_bytes());
            n += 1;
        }
        b.delete_cf(self.cf(CF_META)?, META_ANCHOR_MARKER);
        self.write(b, true)?;
        Ok(n)
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

    /// The archived receipts (from chains or contracts anchored to before a switch).
    pub fn archived_anchors(&self) -> Result<Vec<AnchorReceipt>, RecordError> {
        let mut out = Vec::new();
        for kv in self.meta_prefixed(META_ARCHIVED_ANCHOR)? {
            let (rest, v) = kv?;
            let epoch = rest
                .get(28..36)
                .and_then(|e| <[u8; 8]>::try_from(e).ok())
                .map(u64::from_be_bytes)
                .ok_or_else(|| corrupt("archived anchor key is not 52 bytes"))?;
            out.push(
                AnchorReceipt::decode(epoch, &v)
                    .map_err(|e| corrupt(format!("archived anchor of epoch {epoch}: {e}")))?,
            );
        }
        Ok(out)
    }

    /// Writes the anchoring marker (synced).
    pub fn put_anchor_marker(&self, m: &AnchorMarker) -> Result<(), RecordError> {
        self.put_meta(META_ANCHOR_MARKER, &m.encode())
    }

    /// The anchoring marker, if the anchorer wrote one.
    pub fn anchor_marker(&self) -> Result<Option<AnchorMarker>, RecordError> {
        self.meta_decoded(META_ANCHOR_MARKER, "anchor marker", AnchorMarker::decode)
    }

    /// Removes the anchoring marker (synced): the next pass verifies from epoch 0.
    pub fn clear_anchor_marker(&self) -> Result<(), RecordError> {
        self.delete_meta(META_ANCHOR_MARKER)
    }

    /// Raises the fork alarm (synced). An existing alarm is kept: the first fork seen is the
    /// one to investigate.
    pub fn put_fork_alarm(&self, alarm: &ForkAlarm) -> Result<(), RecordError> {
        if self.fork_alarm()?.is_some() {
            return Ok(());
        }
        self.put_meta(META_FORK_ALARM, &alarm.encode())
    }

    /// The fork alarm, if one is raised.
    pub fn fork_alarm(&self) -> Result<Option<ForkAlarm>, RecordError> {
        self.meta_decoded(META_FORK_ALARM, "fork alarm", ForkAlarm::decode)
    }

    /// Clears the fork alarm (synced): an operator's decision after investigating it.
    pub fn clear_fork_alarm(&self) -> Result<(), RecordError> {
        self.delete_meta(META_FORK_ALARM)
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

/// How far an anchoring transaction has got, as the anchorer last saw it under its
/// finality policy. Only `Confirmed` and `Finalized` count as covering an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReceiptState {
    /// Sent (or its transaction left the canonical chain and the epoch is being re-posted):
    /// not in any block the anchorer trusts.
    Pending,
    /// In a block, with fewer confirmations than the policy asks for.
    Included,
    /// In a block with at least the policy's confirmations.
    Confirmed,
    /// In a block at or below the chain's `finalized` block.
    Finalized,
}

impl ReceiptState {
    /// Every state, in order.
    pub const ALL: [ReceiptState; 4] = [
        ReceiptState::Pending,
        ReceiptState::Included,
        ReceiptState::Confirmed,
        ReceiptState::Finalized,
    ];

    /// Lower-case name (`pending`, `included`, `confirmed`, `finalized`).
    pub fn name(self) -> &'static str {
        match self {
            ReceiptState::Pending => "pending",
            ReceiptState::Included => "included",
            ReceiptState::Confirmed => "confirmed",
            ReceiptState::Finalized => "finalized",
        }
    }

    /// Whether an epoch with this receipt counts as covered by an anchored root.
    pub fn covers(self) -> bool {
        self >= ReceiptState::Confirmed
    }

    fn code(self) -> u64 {
        match self {
            ReceiptState::Pending => 0,
            ReceiptState::Included => 1,
            ReceiptState::Confirmed => 2,
            ReceiptState::Finalized => 3,
        }
    }

    fn from_code(c: u64) -> Result<ReceiptState, afr_core::cbor::CborError> {
        ReceiptState::ALL
            .get(usize::try_from(c).unwrap_or(usize::MAX))
            .copied()
            .ok_or_else(|| afr_core::cbor::CborError::Malformed(format!("receipt state {c}")))
    }
}

impl std::fmt::Display for ReceiptState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the anchorer keeps of an anchoring transaction's receipt. Stored in `anchors` as
/// canonical CBOR `[chain_id, contract: bstr(20), tx: bstr(32), block: uint, block_hash:
/// bstr(32), gas_used: uint, effective_gas_price: uint, state: uint, l1_fee: uint, replaced:
/// [bstr(32)*]]`, keyed by `u64be(epoch)`. Receipts written before the last three fields
/// existed (an array of 7) decode with state `included`, no L1 fee and no replaced
/// transactions; the next anchoring pass re-checks them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchorReceipt {
    /// The anchored epoch.
    pub epoch: u64,
    /// EVM chain id.
    pub chain_id: u64,
    /// Anchor contract.
    pub contract: [u8; 20],
    /// Transaction hash.
    pub tx: [u8; 32],
    /// Block number (0 while pending).
    pub block: u64,
    /// Block hash (to detect reorgs).
    pub block_hash: [u8; 32],
    /// Gas used by the transaction.
    pub gas_used: u64,
    /// Effective gas price, in wei.
    pub effective_gas_price: u64,
    /// How far the transaction has got.
    pub state: ReceiptState,
    /// OP-stack L1 data fee of the transaction, in wei (0 elsewhere).
    pub l1_fee: u64,
    /// Earlier transactions at the same nonce that this one replaced (fee bumps), oldest first.
    pub replaced: Vec<[u8; 32]>,
}

impl AnchorReceipt {
    /// A receipt with made-up but well-formed values for `epoch` on `chain_id`, for tests
    /// (the recorder's own and, with the `raw-store` feature, other crates').
    #[cfg(any(test, feature = "raw-store"))]
    pub fn for_tests(epoch: u64, chain_id: u64) -> AnchorReceipt {
        AnchorReceipt {
            epoch,
            chain_id,
            contract: [0x5f; 20],
            tx: [0xab; 32],
            block: 12,
            block_hash: [0xcd; 32],
            gas_used: 49_808,
            effective_gas_price: 1_000_000_000,
            state: ReceiptState::Confirmed,
            l1_fee: 0,
            replaced: Vec::new(),
        }
    }

    /// What the transaction cost, in wei: L2 (or L1) execution plus the L1 data fee. A batch
    /// transaction's receipt is stored for each of its epochs with the whole cost.
    pub fn cost_wei(&self) -> u128 {
        u128::from(self.gas_used) * u128::from(self.effective_gas_price) + u128::from(self.l1_fee)
    }

    /// The seven fields of the first receipt format, which the current ten-field one extends.
    fn write_seven_fields(&self, w: &mut afr_core::cbor::Writer) {
        w.uint(self.chain_id);
        w.bytes(&self.contract);
        w.bytes(&self.tx);
        w.uint(self.block);
        w.bytes(&self.block_hash);
        w.uint(self.gas_used);
        w.uint(self.effective_gas_price);
    }

    fn encode(&self) -> Vec<u8> {
        let mut w = afr_core::cbor::Writer::with_capacity(160 + 34 * self.replaced.len());
        w.array(10);
        self.write_seven_fields(&mut w);
        w.uint(self.state.code());
        w.uint(self.l1_fee);
        w.array(self.replaced.len() as u64);
        for t in &self.replaced {
            w.bytes(t);
        }
        w.buf
    }

    fn decode(epoch: u64, b: &[u8]) -> Result<AnchorReceipt, afr_core::cbor::CborError> {
        let mut r = afr_core::cbor::Reader::new(b);
        let n = r.array()?;
        if n != 7 && n != 10 {
            return Err(afr_core::cbor::CborError::Malformed(format!(
                "anchor receipt has {n} fields, not 7 or 10"
            )));
        }
        let mut a = AnchorReceipt {
            epoch,
            chain_id: r.uint()?,
            contract: r.fixed()?,
            tx: r.fixed()?,
            block: r.uint()?,
            block_hash: r.fixed()?,
            gas_used: r.uint()?,
            effective_gas_price: r.uint()?,
            state: ReceiptState::Included,
            l1_fee: 0,
            replaced: Vec::new(),
        };
        if n == 10 {
            a.state = ReceiptState::from_code(r.uint()?)?;
            a.l1_fee = r.uint()?;
            let k = r.array()?;
            // Each element is at least 33 bytes: a count beyond the input is malformed.
            if k > b.len() as u64 {
                return Err(afr_core::cbor::CborError::Malformed(
                    "anchor receipt replaced list longer than its encoding".into(),
                ));
            }
            for _ in 0..k {
                a.replaced.push(r.fixed()?);
            }
        }
        r.finish()?;
        Ok(a)
    }
}

/// The anchorer's verification marker: every epoch up to `epoch` was read back from `contract`
/// on `chain_id` with the local root, in a block at `block` (`block_hash`), and its receipt
/// was confirmed under `finality` (a confirmation depth, or 0 for the chain's `finalized`
/// block). A pass reads only the epochs after it. Stored in `meta` under `anchor-marker` as
/// canonical CBOR `[epoch: uint or null, block, block_hash: bstr(32), chain_id, contract:
/// bstr(20), finality: uint]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchorMarker {
    /// Last verified epoch (`None`: none yet, but the policy is recorded).
    pub epoch: Option<u64>,
    /// Block the verification read at.
    pub block: u64,
    /// Its hash.
    pub block_hash: [u8; 32],
    /// EVM chain id.
    pub chain_id: u64,
    /// Anchor contract.
    pub contract: [u8; 20],
    /// Confirmations the policy asks for; 0 means the chain's `finalized` block.
    pub finality: u64,
}

impl AnchorMarker {
    fn encode(&self) -> Vec<u8> {
        let mut w = afr_core::cbor::Writer::with_capacity(96);
        w.array(6);
        match self.epoch {
            Some(e) => w.uint(e),
            None => w.null(),
        }
        w.uint(self.block);
        w.bytes(&self.block_hash);
        w.uint(self.chain_id);
        w.bytes(&self.contract);
        w.uint(self.finality);
        w.buf
    }

    fn decode(b: &[u8]) -> Result<AnchorMarker, afr_core::cbor::CborError> {
        let mut r = afr_core::cbor::Reader::new(b);
        r.array_of(6, "anchor marker")?;
        let epoch = if r.null()? { None } else { Some(r.uint()?) };
        let m = AnchorMarker {
            epoch,
            block: r.uint()?,
            block_hash: r.fixed()?,
            chain_id: r.uint()?,
            contract: r.fixed()?,
            finality: r.uint()?,
        };
        r.finish()?;
        Ok(m)
    }
}

/// A fork seen by the anchorer: the chain holds, for one of this recorder's epochs, a root other
/// than the local log's. Either the local log was rewritten after anchoring or someone holding
/// the anchoring key anchored another history; both need a human. While the alarm is raised
/// the anchorer posts nothing and `afr status` exits non-zero. Stored in `meta` under
/// `fork-alarm` as canonical CBOR `[epoch, local: bstr(32), onchain: bstr(32), chain_id,
/// contract: bstr(20), tx: bstr(0 or 32), block: uint or null, seen_at_us]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkAlarm {
    /// The first epoch whose roots differ.
    pub epoch: u64,
    /// The local log's root of that epoch.
    pub local: [u8; 32],
    /// The root anchored on chain.
    pub onchain: [u8; 32],
    /// EVM chain id.
    pub chain_id: u64,
    /// Anchor contract.
    pub contract: [u8; 20],
    /// The transaction that anchored the on-chain root, when its `Anchored` event was found.
    pub tx: Option<[u8; 32]>,
    /// That transaction's block.
    pub block: Option<u64>,
    /// When the anchorer saw the fork, microseconds since the Unix epoch.
    pub seen_at_us: u64,
}

impl ForkAlarm {
    fn encode(&self) -> Vec<u8> {
        let mut w = afr_core::cbor::Writer::with_capacity(160);
        w.array(8);
        w.uint(self.epoch);
        w.bytes(&self.local);
        w.bytes(&self.onchain);
        w.uint(self.chain_id);
        w.bytes(&self.contract);
        w.bytes(self.tx.as_ref().map_or(&[][..], |t| &t[..]));
        match self.block {
            Some(b) => w.uint(b),
            None => w.null(),
        }
        w.uint(self.seen_at_us);
        w.buf
    }

    fn decode(b: &[u8]) -> Result<ForkAlarm, afr_core::cbor::CborError> {
        let mut r = afr_core::cbor::Reader::new(b);
        r.array_of(8, "fork alarm")?;
        let epoch = r.uint()?;
        let local = r.fixed()?;
        let onchain = r.fixed()?;
        let chain_id = r.uint()?;
        let contract = r.fixed()?;
        let tx = match r.bytes()? {
            [] => None,
            t => Some(<[u8; 32]>::try_from(t).map_err(|_| {
                afr_core::cbor::CborError::Malformed("fork alarm tx is not 0 or 32 bytes".into())
            })?),
        };
        let block = if r.null()? { None } else { Some(r.uint()?) };
        let seen_at_us = r.uint()?;
        r.finish()?;
        Ok(ForkAlarm {
            epoch,
            local,
            onchain,
            chain_id,
            contract,
            tx,
            block,
            seen_at_us,
        })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt() -> AnchorReceipt {
        AnchorReceipt {
            state: ReceiptState::Finalized,
            l1_fee: 1234,
            replaced: vec![[1; 32], [2; 32]],
            ..AnchorReceipt::for_tests(4, 10)
        }
    }

    #[test]
    fn receipts_round_trip_and_old_receipts_still_decode() {
        let r = receipt();
        assert_eq!(AnchorReceipt::decode(4, &r.encode()).unwrap(), r);
        assert_eq!(r.cost_wei(), 49_808 * 1_000_000_000 + 1234);
        // The seven-field receipt of earlier versions.
        let mut w = afr_core::cbor::Writer::with_capacity(128);
        w.array(7);
        r.write_seven_fields(&mut w);
        let old = AnchorReceipt::decode(4, &w.buf).unwrap();
        assert_eq!(
            old,
            AnchorReceipt {
                state: ReceiptState::Included,
                l1_fee: 0,
                replaced: vec![],
                ..r.clone()
            }
        );
        // Trailing bytes, an unknown state and another arity are refused.
        let mut long = r.encode();
        long.push(0);
        assert!(AnchorReceipt::decode(4, &long).is_err());
        let bad = AnchorReceipt {
            replaced: vec![],
            ..r.clone()
        }
        .encode();
        let mut bad_state = bad.clone();
        // state sits just before `l1_fee` and the empty list: [.., 3, 0x19 0x04d2, 0x80]
        let at = bad_state.len() - 5;
        assert_eq!(bad_state[at], 3);
        bad_state[at] = 4;
        assert!(AnchorReceipt::decode(4, &bad_state).is_err());
        let mut w = afr_core::cbor::Writer::with_capacity(8);
        w.array(8);
        assert!(AnchorReceipt::decode(4, &w.buf).is_err());
    }

    #[test]
    fn markers_round_trip() {
        for epoch in [None, Some(0), Some(u64::MAX)] {
            let m = AnchorMarker {
                epoch,
                block: 99,
                block_hash: [3; 32],
                chain_id: 8453,
                contract: [4; 20],
                finality: 0,
            };
            assert_eq!(AnchorMarker::decode(&m.encode()).unwrap(), m);
        }
    }

    #[test]
    fn receipts_are_archived_not_deleted() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(&tmp.path().join("db"), true).unwrap();
        let mut a = receipt();
        s.put_anchor(&a).unwrap();
        a.epoch = 5;
        s.put_anchor(&a).unwrap();
        assert_eq!(s.last_anchor().unwrap().unwrap().epoch, 5);
        s.put_anchor_marker(&AnchorMarker {
            epoch: Some(5),
            block: 1,
            block_hash: [0; 32],
            chain_id: 10,
            contract: [0x5f; 20],
            finality: 1,
        })
        .unwrap();
        assert_eq!(s.archive_anchors().unwrap(), 2);
        assert!(s.anchor(4).unwrap().is_none() && s.last_anchor().unwrap().is_none());
        assert!(s.anchor_marker().unwrap().is_none());
        let kept = s.archived_anchors().unwrap();
        assert_eq!(kept.iter().map(|r| r.epoch).collect::<Vec<_>>(), [4, 5]);
        assert_eq!(kept[1], a);
    }
}
