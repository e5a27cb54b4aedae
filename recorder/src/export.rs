//! Writes the whole-log export (format in `afr_core::export`) from the store.

use std::io::Write;

use afr_core::{EpochHeader, export::LogWriter};

use crate::{Entry, RecordError, Store, now_us};

/// What an export wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportSummary {
    /// Events written.
    pub events: u64,
    /// Sealed epochs written.
    pub epochs: u64,
    /// Events written after the last sealed epoch.
    pub unsealed: u64,
    /// Bytes written.
    pub bytes: u64,
}

fn io_err(e: std::io::Error) -> RecordError {
    RecordError::Storage(format!("cannot write export: {e}"))
}

/// Streams the store's log into `out`. The recorder must be flushed first (or closed).
pub fn export_log(store: &Store, out: &mut impl Write) -> Result<ExportSummary, RecordError> {
    let recorder = store.recorder_id()?;
    let total = store.record_count()?;
    let mut w = LogWriter::start(&recorder, now_us());
    let mut s = ExportSummary {
        events: 0,
        epochs: 0,
        unsealed: 0,
        bytes: 0,
    };
    let mut records = store.records_from(0)?;
    let mut payloads = store.payloads_from(0)?;
    let mut seq = 0u64;
    let mut event = |w: &mut LogWriter, seq: u64| -> Result<(), RecordError> {
        let (rs, rb) = records
            .next()
            .transpose()?
            .ok_or_else(|| Entry::Record(seq).missing())?;
        if rs != seq {
            return Err(Entry::Record(rs).instead_of(Entry::Record(seq)));
        }
        let (ps, pb) = payloads
            .next()
            .transpose()?
            .ok_or_else(|| Entry::Payload(seq).missing())?;
        if ps != seq {
            return Err(Entry::Payload(ps).instead_of(Entry::Payload(seq)));
        }
        w.event(&rb, Some(&pb));
        Ok(())
    };
    let mut emit = |w: &mut LogWriter, s: &mut ExportSummary| -> Result<(), RecordError> {
        let b = w.take();
        s.bytes += b.len() as u64;
        out.write_all(&b).map_err(io_err)
    };
    for kv in store.epochs_from(0)? {
        let (e, hb) = kv?;
        let h = EpochHeader::decode(&hb).map_err(|err| Entry::Header(e).malformed(err))?;
        w.epoch(&hb);
        for _ in 0..h.count {
            event(&mut w, seq)?;
            seq += 1;
        }
        s.epochs += 1;
        emit(&mut w, &mut s)?;
    }
    s.unsealed = total.saturating_sub(seq);
    w.tail(s.unsealed);
    while seq < total {
        event(&mut w, seq)?;
        seq += 1;
    }
    s.events = seq;
    w.end(s.events, s.epochs);
    emit(&mut w, &mut s)?;
    Ok(s)
}
