//! Epoch headers, epoch roots and back-pointers.
//!
//! An epoch is a run of consecutive records sealed together. Its header commits to the Merkle
//! root of its records, their number, the first sequence number, the hash-chain head (the leaf
//! hash of its last record) and the previous epoch's root. The epoch root, the 32 bytes that
//! get anchored, is SHA-256 over a fixed packed layout of the whole header, so the anchor
//! contract can recompute it with `abi.encodePacked` and truncation, gaps and splices show from
//! the root alone:
//!
//! ```text
//! epoch_root = SHA-256("afr/v1/epoch-root" ‖ recorder[20] ‖ u64be(epoch) ‖ u64be(first_seq)
//!                      ‖ u64be(count) ‖ merkle_root[32] ‖ chain_head[32]
//!                      ‖ prev_epoch_root[32] ‖ u64be(sealed_at_us))
//! back_pointer(0) = 0^32;  back_pointer(e) = SHA-256("afr/v1/backptr" ‖ epoch_root(e - 1))
//! ```

use crate::{
    FORMAT_VERSION, RecorderId,
    cbor::{CborError, Reader, Writer},
    hash::{Hash32, sha256},
};

/// Domain label of the epoch root.
pub const EPOCH_ROOT_LABEL: &[u8] = b"afr/v1/epoch-root";
/// Domain label of the back-pointer.
pub const BACKPTR_LABEL: &[u8] = b"afr/v1/backptr";

/// The sealed summary of one epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochHeader {
    /// The recorder whose epoch this is.
    pub recorder: RecorderId,
    /// Epoch number, from 0, gapless.
    pub epoch: u64,
    /// Sequence number of the epoch's first record.
    pub first_seq: u64,
    /// Records in the epoch (at least 1).
    pub count: u64,
    /// RFC 6962 root over the records' leaf hashes.
    pub merkle_root: Hash32,
    /// Leaf hash of the epoch's last record.
    pub chain_head: Hash32,
    /// Root of epoch `epoch - 1`; zero for epoch 0.
    pub prev_epoch_root: Hash32,
    /// When the epoch was sealed, microseconds since the Unix epoch.
    pub sealed_at_us: u64,
}

impl EpochHeader {
    /// The 32-byte epoch root that is anchored.
    pub fn root(&self) -> Hash32 {
        sha256(&[
            EPOCH_ROOT_LABEL,
            &self.recorder,
            &self.epoch.to_be_bytes(),
            &self.first_seq.to_be_bytes(),
            &self.count.to_be_bytes(),
            &self.merkle_root.0,
            &self.chain_head.0,
            &self.prev_epoch_root.0,
            &self.sealed_at_us.to_be_bytes(),
        ])
    }

    /// Sequence number one past the epoch's last record.
    pub fn end_seq(&self) -> u64 {
        self.first_seq.saturating_add(self.count)
    }

    /// Canonical CBOR: `[1, recorder, epoch, first_seq, count, merkle_root, chain_head,
    /// prev_epoch_root, sealed_at_us]`.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(160);
        w.array(9);
        w.uint(FORMAT_VERSION);
        w.bytes(&self.recorder);
        w.uint(self.epoch);
        w.uint(self.first_seq);
        w.uint(self.count);
        w.bytes(&self.merkle_root.0);
        w.bytes(&self.chain_head.0);
        w.bytes(&self.prev_epoch_root.0);
        w.uint(self.sealed_at_us);
        w.buf
    }

    /// Parses the canonical CBOR form; rejects anything else.
    pub fn decode(bytes: &[u8]) -> Result<EpochHeader, CborError> {
        Reader::read_all(bytes, EpochHeader::read)
    }

    /// Reads one header from a reader positioned at it.
    pub fn read(r: &mut Reader<'_>) -> Result<EpochHeader, CborError> {
        r.array_of(9, "epoch header")?;
        let version = r.uint()?;
        if version != FORMAT_VERSION {
            return Err(CborError::Malformed(format!(
                "header version {version} unsupported"
            )));
        }
        let h = EpochHeader {
            recorder: r.fixed()?,
            epoch: r.uint()?,
            first_seq: r.uint()?,
            count: r.uint()?,
            merkle_root: Hash32(r.fixed()?),
            chain_head: Hash32(r.fixed()?),
            prev_epoch_root: Hash32(r.fixed()?),
            sealed_at_us: r.uint()?,
        };
        if h.count == 0 {
            return Err(CborError::Malformed(
                "epoch header with zero records".into(),
            ));
        }
        Ok(h)
    }
}

/// The back-pointer the anchor contract expects with epoch `epoch`, given the previous root.
pub fn back_pointer(epoch: u64, prev_root: &Hash32) -> Hash32 {
    if epoch == 0 {
        Hash32::ZERO
    } else {
        sha256(&[BACKPTR_LABEL, &prev_root.0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_root_covers_every_field() {
        let h = EpochHeader {
            recorder: [0x11; 20],
            epoch: 3,
            first_seq: 300,
            count: 100,
            merkle_root: Hash32([1; 32]),
            chain_head: Hash32([2; 32]),
            prev_epoch_root: Hash32([3; 32]),
            sealed_at_us: 42,
        };
        assert_eq!(EpochHeader::decode(&h.encode()).unwrap(), h);
        let base = h.root();
        let variants = [
            EpochHeader {
                recorder: [0x12; 20],
                ..h.clone()
            },
            EpochHeader {
                epoch: 4,
                ..h.clone()
            },
            EpochHeader {
                first_seq: 301,
                ..h.clone()
            },
            EpochHeader {
                count: 99,
                ..h.clone()
            },
            EpochHeader {
                merkle_root: Hash32([9; 32]),
                ..h.clone()
            },
            EpochHeader {
                chain_head: Hash32([9; 32]),
                ..h.clone()
            },
            EpochHeader {
                prev_epoch_root: Hash32([9; 32]),
                ..h.clone()
            },
            EpochHeader {
                sealed_at_us: 43,
                ..h.clone()
            },
        ];
        for v in variants {
            assert_ne!(v.root(), base);
        }
        assert_eq!(back_pointer(0, &base), Hash32::ZERO);
        assert_ne!(back_pointer(1, &base), base);
    }
}
