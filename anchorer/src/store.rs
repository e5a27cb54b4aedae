//! Where the anchorer's values live in the recorder's store: [`AnchorStore`], read and written
//! through the store's kept tables ([`afr_recorder::Kept`]), which hold them as opaque bytes.
//!
//! | value                        | where                                                        |
//! |------------------------------|--------------------------------------------------------------|
//! | [`AnchorReceipt`] of epoch e | `anchors` under `u64be(e)`                                   |
//! | [`AnchorMarker`]             | `meta` under `anchor-marker`                                 |
//! | [`ForkAlarm`]                | `meta` under `fork-alarm` (absent when there is none)        |
//! | archived [`AnchorReceipt`]   | `meta` under `archived-anchor/ ‖ u64be(chain_id) ‖ contract(20) ‖ u64be(epoch)` |
//!
//! These are the places and encodings earlier versions wrote from inside the recorder, so
//! stores written by them read unchanged.

use afr_recorder::{Kept, KeptOp, RecordError, Store};

use crate::receipt::{AnchorMarker, AnchorReceipt, ForkAlarm};

/// Metadata name of the fork alarm (see [`ForkAlarm`]); absent when there is none.
pub const META_FORK_ALARM: &[u8] = b"fork-alarm";
/// Metadata name of the anchorer's verification marker (see [`AnchorMarker`]).
pub const META_ANCHOR_MARKER: &[u8] = b"anchor-marker";
/// Metadata name prefix of receipts kept from an earlier chain or contract (see
/// [`AnchorStore::archive_anchors`]): `archived-anchor/ ‖ u64be(chain_id) ‖ contract(20) ‖
/// u64be(epoch)`.
pub const META_ARCHIVED_ANCHOR: &[u8] = b"archived-anchor/";

/// Length of an archived receipt's name after [`META_ARCHIVED_ANCHOR`]: chain id, contract,
/// epoch.
const ARCHIVED_NAME_LEN: usize = 8 + 20 + 8;

/// The archive name of `r`.
fn archived_name(r: &AnchorReceipt) -> Vec<u8> {
    let mut key = META_ARCHIVED_ANCHOR.to_vec();
    key.extend_from_slice(&r.chain_id.to_be_bytes());
    key.extend_from_slice(&r.contract);
    key.extend_from_slice(&r.epoch.to_be_bytes());
    key
}

/// The anchorer's values in a recorder's store. Every write is synced before it returns.
pub trait AnchorStore {
    /// Stores the receipt of the transaction that anchored `receipt.epoch`.
    fn put_anchor(&self, receipt: &AnchorReceipt) -> Result<(), RecordError>;
    /// Forgets the anchor receipt of `epoch` (its transaction left the canonical chain).
    fn delete_anchor(&self, epoch: u64) -> Result<(), RecordError>;
    /// The anchor receipt of `epoch`, if it was anchored.
    fn anchor(&self, epoch: u64) -> Result<Option<AnchorReceipt>, RecordError>;
    /// The receipt with the highest epoch, if any.
    fn last_anchor(&self) -> Result<Option<AnchorReceipt>, RecordError>;
    /// The receipts from `epoch` upwards, in order.
    fn anchors_from(
        &self,
        epoch: u64,
    ) -> Result<impl Iterator<Item = Result<AnchorReceipt, RecordError>> + '_, RecordError>;
    /// Moves every receipt into the archive and drops the marker, in one synced batch: what
    /// an operator's switch to another chain or contract keeps of the old one. Returns how
    /// many receipts were archived.
    fn archive_anchors(&self) -> Result<u64, RecordError>;
    /// The archived receipts (from chains or contracts anchored to before a switch).
    fn archived_anchors(&self) -> Result<Vec<AnchorReceipt>, RecordError>;
    /// Writes the anchoring marker.
    fn put_anchor_marker(&self, m: &AnchorMarker) -> Result<(), RecordError>;
    /// The anchoring marker, if the anchorer wrote one.
    fn anchor_marker(&self) -> Result<Option<AnchorMarker>, RecordError>;
    /// Removes the anchoring marker: the next pass verifies from epoch 0.
    fn clear_anchor_marker(&self) -> Result<(), RecordError>;
    /// Raises the fork alarm. An existing alarm is kept: the first fork seen is the one to
    /// investigate.
    fn put_fork_alarm(&self, alarm: &ForkAlarm) -> Result<(), RecordError>;
    /// The fork alarm, if one is raised.
    fn fork_alarm(&self) -> Result<Option<ForkAlarm>, RecordError>;
    /// Clears the fork alarm: an operator's decision after investigating it.
    fn clear_fork_alarm(&self) -> Result<(), RecordError>;
}

impl AnchorStore for Store {
    fn put_anchor(&self, receipt: &AnchorReceipt) -> Result<(), RecordError> {
        self.write_kept(&[KeptOp::Put(Kept::Epoch(receipt.epoch), &receipt.encode())])
    }

    fn delete_anchor(&self, epoch: u64) -> Result<(), RecordError> {
        self.write_kept(&[KeptOp::Delete(Kept::Epoch(epoch))])
    }

    fn anchor(&self, epoch: u64) -> Result<Option<AnchorReceipt>, RecordError> {
        self.kept(Kept::Epoch(epoch), |b| AnchorReceipt::decode(epoch, b))
    }

    fn last_anchor(&self) -> Result<Option<AnchorReceipt>, RecordError> {
        self.last_kept(AnchorReceipt::decode)
    }

    fn anchors_from(
        &self,
        epoch: u64,
    ) -> Result<impl Iterator<Item = Result<AnchorReceipt, RecordError>> + '_, RecordError> {
        self.kept_from(epoch, AnchorReceipt::decode)
    }

    fn archive_anchors(&self) -> Result<u64, RecordError> {
        let receipts = self.anchors_from(0)?.collect::<Result<Vec<_>, _>>()?;
        let archived: Vec<(Vec<u8>, Vec<u8>)> = receipts
            .iter()
            .map(|r| (archived_name(r), r.encode()))
            .collect();
        let mut ops = Vec::with_capacity(2 * receipts.len() + 1);
        for (r, (name, value)) in receipts.iter().zip(&archived) {
            ops.push(KeptOp::Put(Kept::Named(name), value));
            ops.push(KeptOp::Delete(Kept::Epoch(r.epoch)));
        }
        ops.push(KeptOp::Delete(Kept::Named(META_ANCHOR_MARKER)));
        self.write_kept(&ops)?;
        Ok(receipts.len() as u64)
    }

    fn archived_anchors(&self) -> Result<Vec<AnchorReceipt>, RecordError> {
        self.kept_prefixed(META_ARCHIVED_ANCHOR, |rest, v| {
            let epoch = <[u8; ARCHIVED_NAME_LEN]>::try_from(rest)
                .ok()
                .and_then(|r| <[u8; 8]>::try_from(&r[28..]).ok())
                .map(u64::from_be_bytes)
                .ok_or_else(|| {
                    afr_core::cbor::CborError::Malformed(format!(
                        "archived anchor name is {} bytes, not {}",
                        META_ARCHIVED_ANCHOR.len() + rest.len(),
                        META_ARCHIVED_ANCHOR.len() + ARCHIVED_NAME_LEN
                    ))
                })?;
            AnchorReceipt::decode(epoch, v)
        })
    }

    fn put_anchor_marker(&self, m: &AnchorMarker) -> Result<(), RecordError> {
        self.write_kept(&[KeptOp::Put(Kept::Named(META_ANCHOR_MARKER), &m.encode())])
    }

    fn anchor_marker(&self) -> Result<Option<AnchorMarker>, RecordError> {
        self.kept(Kept::Named(META_ANCHOR_MARKER), AnchorMarker::decode)
    }

    fn clear_anchor_marker(&self) -> Result<(), RecordError> {
        self.write_kept(&[KeptOp::Delete(Kept::Named(META_ANCHOR_MARKER))])
    }

    fn put_fork_alarm(&self, alarm: &ForkAlarm) -> Result<(), RecordError> {
        if self.fork_alarm()?.is_some() {
            return Ok(());
        }
        self.write_kept(&[KeptOp::Put(Kept::Named(META_FORK_ALARM), &alarm.encode())])
    }

    fn fork_alarm(&self) -> Result<Option<ForkAlarm>, RecordError> {
        self.kept(Kept::Named(META_FORK_ALARM), ForkAlarm::decode)
    }

    fn clear_fork_alarm(&self) -> Result<(), RecordError> {
        self.write_kept(&[KeptOp::Delete(Kept::Named(META_FORK_ALARM))])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::sample_receipt as receipt;

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

    /// The places and encodings are the ones the recorder used to write itself: a store
    /// written before the types moved reads the same.
    #[test]
    fn values_sit_where_earlier_versions_wrote_them() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(&tmp.path().join("db"), true).unwrap();
        let a = receipt();
        s.put_anchor(&a).unwrap();
        let raw = s
            .kept(Kept::Epoch(4), |b| {
                Ok::<_, std::convert::Infallible>(b.to_vec())
            })
            .unwrap();
        assert_eq!(raw, Some(a.encode()));
        assert_eq!(
            s.meta(b"anchor-marker").unwrap(),
            None,
            "no marker written yet"
        );
        s.put_fork_alarm(&ForkAlarm {
            epoch: 1,
            local: [1; 32],
            onchain: [2; 32],
            chain_id: 10,
            contract: [3; 20],
            tx: None,
            block: None,
            seen_at_us: 7,
        })
        .unwrap();
        let alarm = s.meta(b"fork-alarm").unwrap().unwrap();
        assert_eq!(ForkAlarm::decode(&alarm).unwrap().seen_at_us, 7);
    }
}
