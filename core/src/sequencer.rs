//! The sequencer: how records are numbered, chained and sealed into epochs. The one place this
//! logic lives; the recorder, the evaluation's synthetic histories and the tests all append
//! through it, so what they produce is by construction what a verifier checks.
//!
//! Two layers. [`Links`] numbers records and chains each to the leaf hash of the one before
//! (`prev_hash`). [`Sequencer`] adds epochs on top: a Merkle tree over the open epoch's leaves
//! ([`CompactRange`], `O(log n)` state) and, when sealed, an [`EpochHeader`] whose root points
//! back to the previous epoch's. The stages of an epoch are types:
//!
//! ```text
//! OpenEpoch --Sequencer::seal--> SealedEpoch --SealedEpoch::anchored--> AnchoredEpoch
//! ```
//!
//! When to seal (a size or an age) is the caller's policy; what sealing means is decided here.
//! Nothing in this module does I/O or reads a clock.

use crate::{
    EpochHeader, Hash32, Record, RecorderId, crypto::Slot, event::Envelope, hash::leaf_hash,
    merkle::CompactRange, record::check_concurrent,
};

/// Why a record could not be appended or replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    /// `concurrent_with` names an event that is not earlier, or too many.
    #[error("field `concurrent_with`: {0}")]
    Concurrent(String),
    /// A replayed record is not the next one.
    #[error("gap: record {expected} missing before {found}")]
    Gap {
        /// The sequence number that should come next.
        expected: u64,
        /// The one that came.
        found: u64,
    },
    /// A replayed record does not follow on from the chain (epoch, `prev_hash` or recorder).
    #[error("record {seq} does not continue the chain")]
    Broken {
        /// Its sequence number.
        seq: u64,
    },
    /// A replayed record or header does not decode.
    #[error("record {seq}: {reason}")]
    Malformed {
        /// Its sequence number.
        seq: u64,
        /// What is wrong.
        reason: String,
    },
    /// The last sealed epoch belongs to another recorder.
    #[error("epoch {epoch} belongs to another recorder")]
    ForeignEpoch {
        /// The epoch.
        epoch: u64,
    },
}

/// A record just appended: the record, its canonical bytes and its leaf hash.
#[derive(Debug, Clone)]
pub struct Appended {
    /// The record.
    pub record: Record,
    /// Its canonical CBOR encoding (what is stored and hashed).
    pub bytes: Vec<u8>,
    /// `leaf_hash(bytes)`: the next record's `prev_hash`.
    pub leaf: Hash32,
}

/// The hash chain alone: sequence numbers and `prev_hash` links, no epochs.
#[derive(Debug, Clone)]
pub struct Links {
    recorder: RecorderId,
    next_seq: u64,
    head: Hash32,
}

impl Links {
    /// An empty chain for `recorder`: the first record is seq 0 with a zero `prev_hash`.
    pub fn new(recorder: RecorderId) -> Links {
        Links::after(recorder, 0, Hash32::ZERO)
    }

    /// A chain whose next record is `next_seq`, linking to `head`.
    pub fn after(recorder: RecorderId, next_seq: u64, head: Hash32) -> Links {
        Links {
            recorder,
            next_seq,
            head,
        }
    }

    /// The recorder.
    pub fn recorder(&self) -> RecorderId {
        self.recorder
    }

    /// The sequence number the next record gets (= records so far).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The leaf hash of the last record (zero before the first).
    pub fn head(&self) -> Hash32 {
        self.head
    }

    /// Appends the record of `env` in `epoch`, committing to a payload by `commitment`;
    /// `timestamp_us` is used where the envelope carries none.
    pub fn link(
        &mut self,
        env: Envelope,
        epoch: u64,
        timestamp_us: u64,
        commitment: Hash32,
    ) -> Result<Appended, SequenceError> {
        let seq = self.next_seq;
        check_concurrent(seq, &env.concurrent_with).map_err(SequenceError::Concurrent)?;
        let record = Record {
            recorder: self.recorder,
            seq,
            epoch,
            timestamp_us: env.timestamp_us.unwrap_or(timestamp_us),
            category: env.category,
            lane: env.lane,
            concurrent_with: env.concurrent_with,
            prev_hash: self.head,
            payload_commitment: commitment,
        };
        let bytes = record.encode();
        let leaf = leaf_hash(&bytes);
        self.head = leaf;
        self.next_seq = seq + 1;
        Ok(Appended {
            record,
            bytes,
            leaf,
        })
    }
}

/// The epoch being filled: its number, first sequence number and Merkle state.
#[derive(Debug, Clone)]
pub struct OpenEpoch {
    number: u64,
    first_seq: u64,
    tree: CompactRange,
}

impl OpenEpoch {
    /// Its number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The sequence number of its first record.
    pub fn first_seq(&self) -> u64 {
        self.first_seq
    }

    /// How many records it holds.
    pub fn len(&self) -> u64 {
        self.tree.size()
    }

    /// Whether it holds no record yet.
    pub fn is_empty(&self) -> bool {
        self.tree.size() == 0
    }
}

/// A sealed epoch: its header is final and its root can be anchored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedEpoch(EpochHeader);

impl SealedEpoch {
    /// Takes a header read back from storage as sealed.
    pub fn from_header(header: EpochHeader) -> SealedEpoch {
        SealedEpoch(header)
    }

    /// The header.
    pub fn header(&self) -> &EpochHeader {
        &self.0
    }

    /// The header, by value.
    pub fn into_header(self) -> EpochHeader {
        self.0
    }

    /// The epoch root that is anchored (`EpochHeader::root`).
    pub fn root(&self) -> Hash32 {
        self.0.root()
    }

    /// The next stage: this epoch's root seen on a chain.
    pub fn anchored(self, at: AnchorRef) -> AnchoredEpoch {
        AnchoredEpoch { sealed: self, at }
    }
}

/// Where an epoch root was posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchorRef {
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// The anchor contract.
    pub contract: [u8; 20],
    /// The transaction that posted the root.
    pub tx: [u8; 32],
    /// The block that included it.
    pub block: u64,
}

/// A sealed epoch whose root a chain holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchoredEpoch {
    /// The epoch.
    pub sealed: SealedEpoch,
    /// Where it was anchored.
    pub at: AnchorRef,
}

/// The full sequencer: [`Links`] plus epochs.
#[derive(Debug, Clone)]
pub struct Sequencer {
    links: Links,
    open: OpenEpoch,
    /// Root of the last sealed epoch (zero before the first).
    prev_root: Hash32,
    last_sealed: Option<SealedEpoch>,
}

impl Sequencer {
    /// An empty log for `recorder`.
    pub fn new(recorder: RecorderId) -> Sequencer {
        Sequencer {
            links: Links::new(recorder),
            open: OpenEpoch {
                number: 0,
                first_seq: 0,
                tree: CompactRange::new(),
            },
            prev_root: Hash32::ZERO,
            last_sealed: None,
        }
    }

    /// The state right after `last` was sealed (or an empty log): the open epoch is empty and
    /// its records, if any are stored, are replayed with [`Sequencer::replay`].
    pub fn after(
        recorder: RecorderId,
        last: Option<EpochHeader>,
    ) -> Result<Sequencer, SequenceError> {
        let Some(h) = last else {
            return Ok(Sequencer::new(recorder));
        };
        if h.recorder != recorder {
            return Err(SequenceError::ForeignEpoch { epoch: h.epoch });
        }
        Ok(Sequencer {
            links: Links::after(recorder, h.end_seq(), h.chain_head),
            open: OpenEpoch {
                number: h.epoch + 1,
                first_seq: h.end_seq(),
                tree: CompactRange::new(),
            },
            prev_root: h.root(),
            last_sealed: Some(SealedEpoch(h)),
        })
    }

    /// The recorder.
    pub fn recorder(&self) -> RecorderId {
        self.links.recorder()
    }

    /// The sequence number the next record gets.
    pub fn next_seq(&self) -> u64 {
        self.links.next_seq()
    }

    /// The leaf hash of the last record.
    pub fn head(&self) -> Hash32 {
        self.links.head()
    }

    /// The open epoch.
    pub fn open(&self) -> &OpenEpoch {
        &self.open
    }

    /// The last sealed epoch.
    pub fn last_sealed(&self) -> Option<&SealedEpoch> {
        self.last_sealed.as_ref()
    }

    /// Where the next record goes: what its payload is sealed to.
    pub fn slot(&self) -> Slot {
        Slot {
            recorder: self.recorder(),
            epoch: self.open.number,
            seq: self.next_seq(),
        }
    }

    /// Appends the record of `env` to the open epoch (see [`Links::link`]).
    pub fn append(
        &mut self,
        env: Envelope,
        timestamp_us: u64,
        commitment: Hash32,
    ) -> Result<Appended, SequenceError> {
        let a = self
            .links
            .link(env, self.open.number, timestamp_us, commitment)?;
        self.open.tree.push(a.leaf);
        Ok(a)
    }

    /// Replays a stored record of the open epoch (after [`Sequencer::after`]), checking that it
    /// is the next one and continues the chain; returns its leaf hash.
    pub fn replay(&mut self, seq: u64, bytes: &[u8]) -> Result<Hash32, SequenceError> {
        let expected = self.next_seq();
        if seq != expected {
            return Err(SequenceError::Gap {
                expected,
                found: seq,
            });
        }
        let r = Record::decode(bytes).map_err(|e| SequenceError::Malformed {
            seq,
            reason: e.to_string(),
        })?;
        if r.seq != seq
            || r.epoch != self.open.number
            || r.prev_hash != self.head()
            || r.recorder != self.recorder()
        {
            return Err(SequenceError::Broken { seq });
        }
        let leaf = leaf_hash(bytes);
        self.links = Links::after(self.recorder(), seq + 1, leaf);
        self.open.tree.push(leaf);
        Ok(leaf)
    }

    /// Seals the open epoch, if it holds any record, into a header stamped `sealed_at_us`,
    /// and opens the next. `O(log n)` hashes.
    pub fn seal(&mut self, sealed_at_us: u64) -> Option<SealedEpoch> {
        if self.open.is_empty() {
            return None;
        }
        let header = EpochHeader {
            recorder: self.recorder(),
            epoch: self.open.number,
            first_seq: self.open.first_seq,
            count: self.open.tree.size(),
            merkle_root: self.open.tree.root(),
            chain_head: self.head(),
            prev_epoch_root: self.prev_root,
            sealed_at_us,
        };
        self.prev_root = header.root();
        self.open = OpenEpoch {
            number: header.epoch + 1,
            first_seq: self.next_seq(),
            tree: CompactRange::new(),
        };
        let sealed = SealedEpoch(header);
        self.last_sealed = Some(sealed.clone());
        Some(sealed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly on purpose")]

    use super::*;
    use crate::{Category, merkle};

    fn env(ts: u64) -> Envelope {
        Envelope {
            category: Category::Shell,
            timestamp_us: Some(ts),
            lane: None,
            concurrent_with: Vec::new(),
        }
    }

    #[test]
    fn sealed_epochs_chain_and_their_roots_match_a_tree_built_from_scratch() {
        let mut c = Sequencer::new([7; 20]);
        let mut leaves = Vec::new();
        let mut headers: Vec<EpochHeader> = Vec::new();
        for i in 0..10u64 {
            let a = c.append(env(i), 0, Hash32([i as u8; 32])).unwrap();
            assert_eq!(a.record.seq, i);
            leaves.push(a.leaf);
            if i % 4 == 3 {
                headers.push(c.seal(100 + i).unwrap().into_header());
            }
        }
        headers.push(c.seal(200).unwrap().into_header());
        assert!(c.seal(300).is_none(), "an empty epoch is never sealed");
        assert_eq!(headers.len(), 3);
        let mut prev_root = Hash32::ZERO;
        for (e, h) in headers.iter().enumerate() {
            let span = &leaves[h.first_seq as usize..h.end_seq() as usize];
            assert_eq!(h.epoch, e as u64);
            assert_eq!(h.merkle_root, merkle::root(span));
            assert_eq!(h.chain_head, *span.last().unwrap());
            assert_eq!(h.prev_epoch_root, prev_root);
            prev_root = h.root();
        }
        assert_eq!(c.slot().epoch, 3);
        assert_eq!(c.slot().seq, 10);
    }

    #[test]
    fn replay_after_a_sealed_epoch_rebuilds_the_same_state_and_refuses_gaps_and_breaks() {
        let mut live = Sequencer::new([1; 20]);
        let mut stored = Vec::new();
        for i in 0..3 {
            live.append(env(i), 0, Hash32::ZERO).unwrap();
        }
        let first = live.seal(1).unwrap();
        for i in 3..6 {
            stored.push(live.append(env(i), 0, Hash32::ZERO).unwrap());
        }
        let mut back = Sequencer::after([1; 20], Some(first.header().clone())).unwrap();
        for a in &stored {
            back.replay(a.record.seq, &a.bytes).unwrap();
        }
        assert_eq!(back.seal(9), live.seal(9));

        let mut gap = Sequencer::after([1; 20], Some(first.header().clone())).unwrap();
        assert_eq!(
            gap.replay(4, &stored[1].bytes),
            Err(SequenceError::Gap {
                expected: 3,
                found: 4
            })
        );
        let mut broken = Sequencer::after([1; 20], Some(first.header().clone())).unwrap();
        broken.replay(3, &stored[0].bytes).unwrap();
        assert_eq!(
            broken.replay(4, &stored[0].bytes),
            Err(SequenceError::Broken { seq: 4 })
        );
        assert_eq!(
            Sequencer::after([2; 20], Some(first.into_header())).err(),
            Some(SequenceError::ForeignEpoch { epoch: 0 })
        );
    }

    #[test]
    fn concurrent_with_must_name_earlier_events() {
        let mut c = Sequencer::new([0; 20]);
        let mut e = env(0);
        e.concurrent_with = vec![0];
        assert!(matches!(
            c.append(e, 0, Hash32::ZERO),
            Err(SequenceError::Concurrent(_))
        ));
        assert_eq!(c.next_seq(), 0, "a refused record takes no sequence number");
    }
}
