//! How the store sits on RocksDB: the settings chosen for an append-only log (see
//! `docs/performance.md`, "Store settings"), and what RocksDB reports back about them (write
//! stalls, memory, bytes on disk) for the benchmarks of sustained ingest.

use std::path::Path;

use rocksdb::{ColumnFamilyDescriptor, DBCompressionType, Options};

use super::{ALL_CFS, CF_PAYLOADS, Store};

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
pub(super) fn db_options() -> Options {
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
pub(super) fn cf_options(name: &str, cache: &rocksdb::Cache) -> Options {
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
pub(super) fn cf_descriptors() -> Vec<ColumnFamilyDescriptor> {
    let cache = rocksdb::Cache::new_lru_cache(BLOCK_CACHE_BYTES);
    ALL_CFS
        .iter()
        .map(|n| ColumnFamilyDescriptor::new(*n, cf_options(n, &cache)))
        .collect()
}

impl Store {
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
