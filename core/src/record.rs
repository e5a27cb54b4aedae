//! The record: the small, fixed-shape envelope of one event that the integrity structures
//! operate on. The payload (the semantic fields) lives apart, encrypted, and the record holds
//! only a commitment to it.
//!
//! Wire form: a canonical CBOR array of 10 items (see `docs/spec/format.md`):
//!
//! ```text
//! [ version=1, recorder: bstr(20), seq: uint, epoch: uint, timestamp_us: uint,
//!   category: uint, lane: tstr / null, concurrent_with: [* uint], prev_hash: bstr(32),
//!   payload_commitment: bstr(32) ]
//! ```

use serde::{Deserialize, Serialize};

use crate::{
    FORMAT_VERSION, RecorderId,
    cbor::{CborError, Reader, Writer},
    hash::{Hash32, leaf_hash},
};

/// Longest lane (task) identifier, in bytes.
pub const MAX_LANE_LEN: usize = 64;
/// Most earlier events one event may name as concurrent with it.
pub const MAX_CONCURRENT: usize = 16;

/// What kind of action an event is. The wire value is the index in this list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// File reads and writes.
    File = 0,
    /// Shell commands.
    Shell = 1,
    /// Calls to external APIs.
    Api = 2,
    /// Database queries and mutations.
    Database = 3,
    /// Retrieval of context (search, RAG, web pages).
    Retrieval = 4,
    /// Code generation, edits, execution.
    Code = 5,
    /// A human approval step.
    Approval = 6,
    /// Handing work to another agent.
    Delegation = 7,
    /// Anything else.
    Other = 8,
}

impl Category {
    /// All categories in wire order.
    pub const ALL: [Category; 9] = [
        Category::File,
        Category::Shell,
        Category::Api,
        Category::Database,
        Category::Retrieval,
        Category::Code,
        Category::Approval,
        Category::Delegation,
        Category::Other,
    ];

    /// The category with wire value `n`.
    pub fn from_wire(n: u64) -> Option<Category> {
        Category::ALL.get(usize::try_from(n).ok()?).copied()
    }

    /// The lower-case names used in JSON, in wire order.
    pub const NAMES: [&'static str; 9] = [
        Category::File.name(),
        Category::Shell.name(),
        Category::Api.name(),
        Category::Database.name(),
        Category::Retrieval.name(),
        Category::Code.name(),
        Category::Approval.name(),
        Category::Delegation.name(),
        Category::Other.name(),
    ];

    /// The lower-case name used in JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Category::File => "file",
            Category::Shell => "shell",
            Category::Api => "api",
            Category::Database => "database",
            Category::Retrieval => "retrieval",
            Category::Code => "code",
            Category::Approval => "approval",
            Category::Delegation => "delegation",
            Category::Other => "other",
        }
    }

    /// The category with JSON name `s`.
    pub fn from_name(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// One event's envelope, as hashed into the chain and the epoch tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The recorder that wrote it.
    pub recorder: RecorderId,
    /// Position in the recorder's log, from 0, gapless.
    pub seq: u64,
    /// Epoch the record belongs to, from 0.
    pub epoch: u64,
    /// Microseconds since the Unix epoch, as stated by the caller or the recorder's clock.
    pub timestamp_us: u64,
    /// Kind of action.
    pub category: Category,
    /// Lane or task the event ran in, for concurrent agents.
    pub lane: Option<String>,
    /// Earlier events (by sequence number) this one ran concurrently with; strictly increasing.
    pub concurrent_with: Vec<u64>,
    /// Leaf hash of the record at `seq - 1`; zero for `seq == 0`.
    pub prev_hash: Hash32,
    /// Commitment to the sealed payload (see [`crate::crypto`]).
    pub payload_commitment: Hash32,
}

impl Record {
    /// Canonical CBOR bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(128);
        w.array(10);
        w.uint(FORMAT_VERSION);
        w.bytes(&self.recorder);
        w.uint(self.seq);
        w.uint(self.epoch);
        w.uint(self.timestamp_us);
        w.uint(self.category as u64);
        match &self.lane {
            Some(l) => w.text(l),
            None => w.null(),
        }
        w.array(self.concurrent_with.len() as u64);
        for s in &self.concurrent_with {
            w.uint(*s);
        }
        w.bytes(&self.prev_hash.0);
        w.bytes(&self.payload_commitment.0);
        w.buf
    }

    /// Parses canonical CBOR bytes; rejects anything else, including trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<Record, CborError> {
        let mut r = Reader::new(bytes);
        r.array_of(10, "record")?;
        let version = r.uint()?;
        if version != FORMAT_VERSION {
            return Err(CborError::Malformed(format!(
                "record version {version} unsupported"
            )));
        }
        let recorder = r.fixed::<20>()?;
        let seq = r.uint()?;
        let epoch = r.uint()?;
        let timestamp_us = r.uint()?;
        let cat = r.uint()?;
        let category = Category::from_wire(cat)
            .ok_or_else(|| CborError::Malformed(format!("unknown category {cat}")))?;
        let lane = if r.null()? {
            None
        } else {
            Some(r.text()?.to_owned())
        };
        if lane.as_ref().is_some_and(|l| l.len() > MAX_LANE_LEN) {
            return Err(CborError::Malformed("lane longer than 64 bytes".into()));
        }
        let n = r.array()?;
        if n > MAX_CONCURRENT as u64 {
            return Err(CborError::Malformed(format!(
                "{n} concurrent events, at most 16"
            )));
        }
        let mut concurrent_with = Vec::with_capacity(n as usize);
        for _ in 0..n {
            concurrent_with.push(r.uint()?);
        }
        check_concurrent(seq, &concurrent_with).map_err(CborError::Malformed)?;
        let prev_hash = Hash32(r.fixed::<32>()?);
        let payload_commitment = Hash32(r.fixed::<32>()?);
        r.finish()?;
        Ok(Record {
            recorder,
            seq,
            epoch,
            timestamp_us,
            category,
            lane,
            concurrent_with,
            prev_hash,
            payload_commitment,
        })
    }

    /// The record's leaf hash: its Merkle leaf and its successor's `prev_hash`.
    pub fn leaf_hash(&self) -> Hash32 {
        leaf_hash(&self.encode())
    }
}

/// Checks that `earlier` names at most [`MAX_CONCURRENT`] strictly increasing sequence
/// numbers, all below `seq`.
pub fn check_concurrent(seq: u64, earlier: &[u64]) -> Result<(), String> {
    if earlier.len() > MAX_CONCURRENT {
        return Err(format!(
            "{} concurrent events, at most {MAX_CONCURRENT}",
            earlier.len()
        ));
    }
    if earlier
        .iter()
        .zip(earlier.iter().skip(1))
        .any(|(a, b)| a >= b)
    {
        return Err("concurrent_with must be strictly increasing".into());
    }
    if earlier.last().is_some_and(|&s| s >= seq) {
        return Err(format!("concurrent_with names an event not before {seq}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn sample(seq: u64) -> Record {
        Record {
            recorder: [7; 20],
            seq,
            epoch: seq / 100,
            timestamp_us: 1_764_000_000_000_000_u64.wrapping_add(seq),
            category: Category::Database,
            lane: Some("task-3".into()),
            concurrent_with: if seq > 2 {
                vec![seq - 2, seq - 1]
            } else {
                vec![]
            },
            prev_hash: Hash32([1; 32]),
            payload_commitment: Hash32([2; 32]),
        }
    }

    #[test]
    fn record_is_small() {
        // The integrity overhead budget is 128 bytes per event.
        let r = sample(12_345);
        assert!(r.encode().len() <= 128, "{} bytes", r.encode().len());
    }

    proptest! {
        #[test]
        fn round_trip(seq in 0u64..u64::MAX, epoch: u64, ts: u64, cat in 0u64..9, lane in proptest::option::of("[a-z0-9-]{0,64}")) {
            let mut r = sample(seq);
            r.epoch = epoch;
            r.timestamp_us = ts;
            r.category = Category::from_wire(cat).unwrap();
            r.lane = lane;
            r.concurrent_with = if seq > 5 { vec![1, 3, seq - 1] } else { vec![] };
            let b = r.encode();
            prop_assert_eq!(Record::decode(&b).unwrap(), r.clone());
            // The generic canonical decoder accepts the same bytes: the strict writer is canonical.
            prop_assert!(crate::cbor::from_slice::<ciborium::Value>(&b).is_ok());
        }

        #[test]
        fn decoder_never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(r) = Record::decode(&b) {
                prop_assert_eq!(r.encode(), b);
            }
        }
    }

    #[test]
    fn rejects_trailing_bytes_and_bad_fields() {
        let mut b = sample(9).encode();
        b.push(0);
        assert_eq!(Record::decode(&b), Err(CborError::Trailing(1)));
        let mut r = sample(9);
        r.concurrent_with = vec![8, 7];
        assert!(Record::decode(&r.encode()).is_err());
        r.concurrent_with = vec![9];
        assert!(Record::decode(&r.encode()).is_err());
    }
}
