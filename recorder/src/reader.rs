//! A read-only view of a recorder directory: what `afr status`, `export`, `query` and
//! `disclose` need, without the writer. Opening one replays nothing, starts no thread and takes
//! no lock, so it works beside a running `afr record` (it sees the store as it was when
//! opened). Writing (recording, sealing, erasing, anchoring) needs a [`crate::Recorder`].

use std::path::Path;

use afr_core::{EpochHeader, RecorderId, bundle::Bundle, crypto::MasterKey};

use crate::{
    Corruption, DB_DIR, MASTER_KEY_FILE, RecordError, Store, disclose, index, query, read_key_file,
    store,
};

/// A read-only recorder.
pub struct LogReader {
    store: Store,
    recorder: RecorderId,
    master: MasterKey,
}

impl std::fmt::Debug for LogReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader")
            .field("recorder", &hex::encode(self.recorder))
            .finish()
    }
}

impl LogReader {
    /// Opens the recorder in `dir` read-only. A store the writer must first bring up to date
    /// (an index of an older layout, a column family added since) is an error that says so.
    pub fn open(dir: &Path) -> Result<LogReader, RecordError> {
        let db_path = dir.join(DB_DIR);
        if !db_path.exists() {
            return Err(RecordError::NotInitialised(dir.to_owned()));
        }
        let secret = read_key_file(&dir.join(MASTER_KEY_FILE))?;
        let store = Store::open_read_only(&db_path).map_err(|e| {
            RecordError::NeedsWriter(format!("the store cannot be read as it is ({e})"))
        })?;
        match store.meta(store::META_FORMAT)? {
            Some(v) if v == store::STORE_FORMAT.to_be_bytes() => {}
            _ => return Err(RecordError::Corrupt(Corruption::UnknownFormat)),
        }
        if index::needs_reinit(&store)? {
            return Err(RecordError::NeedsWriter(
                "its query index has an older layout".into(),
            ));
        }
        let recorder = store.recorder_id()?;
        Ok(LogReader {
            store,
            recorder,
            master: MasterKey::from_bytes(*secret),
        })
    }

    /// The recorder's id.
    pub fn recorder_id(&self) -> RecorderId {
        self.recorder
    }

    /// The store, read-only.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Events recorded (= the next sequence number).
    pub fn next_seq(&self) -> Result<u64, RecordError> {
        self.store.record_count()
    }

    /// The last sealed epoch header.
    pub fn last_sealed(&self) -> Result<Option<EpochHeader>, RecordError> {
        self.store.last_epoch()
    }

    /// The open epoch's number and how many events it holds.
    pub fn open_epoch(&self) -> Result<(u64, u64), RecordError> {
        let (epoch, first) = match self.last_sealed()? {
            Some(h) => (h.epoch + 1, h.end_seq()),
            None => (0, 0),
        };
        Ok((epoch, self.next_seq()?.saturating_sub(first)))
    }

    /// See [`crate::Recorder::query`].
    pub fn query(&self, q: &query::Query) -> Result<query::QueryResult, query::QueryError> {
        query::run(&self.store, &self.master, q)
    }

    /// See [`crate::Recorder::load_events`].
    pub fn load_events(
        &self,
        seqs: &[u64],
    ) -> impl Iterator<Item = Result<query::LoadedEvent, RecordError>> {
        query::load_all(&self.store, &self.master, self.recorder, seqs)
    }

    /// See [`crate::Recorder::disclose`].
    pub fn disclose(&self, seqs: &[u64], keys: bool) -> Result<Bundle, RecordError> {
        disclose::disclose(&self.store, &self.master, seqs, keys)
    }
}
