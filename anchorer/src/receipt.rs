//! What the anchorer keeps of its work, and how it is encoded: the receipt of each epoch's
//! anchoring transaction, the marker of how far the chain was read back, and the fork alarm.
//!
//! The recorder's store keeps these values without knowing their fields (see
//! [`afr_recorder::Kept`]); where each one lives is [`crate::store`]'s business. Every
//! encoding is canonical CBOR, and every decoder refuses trailing bytes and other arities.

use afr_core::cbor;

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

    fn from_code(c: u64) -> Result<ReceiptState, cbor::CborError> {
        ReceiptState::ALL
            .get(usize::try_from(c).unwrap_or(usize::MAX))
            .copied()
            .ok_or_else(|| cbor::CborError::Malformed(format!("receipt state {c}")))
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
    /// A receipt with made-up but well-formed values for `epoch` on `chain_id`, for tests.
    #[cfg(test)]
    pub(crate) fn for_tests(epoch: u64, chain_id: u64) -> AnchorReceipt {
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
    pub(crate) fn write_seven_fields(&self, w: &mut cbor::Writer) {
        w.uint(self.chain_id);
        w.bytes(&self.contract);
        w.bytes(&self.tx);
        w.uint(self.block);
        w.bytes(&self.block_hash);
        w.uint(self.gas_used);
        w.uint(self.effective_gas_price);
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = cbor::Writer::with_capacity(160 + 34 * self.replaced.len());
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

    pub(crate) fn decode(epoch: u64, b: &[u8]) -> Result<AnchorReceipt, cbor::CborError> {
        let mut r = cbor::Reader::new(b);
        let n = r.array()?;
        if n != 7 && n != 10 {
            return Err(cbor::CborError::Malformed(format!(
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
                return Err(cbor::CborError::Malformed(
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
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = cbor::Writer::with_capacity(96);
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

    pub(crate) fn decode(b: &[u8]) -> Result<AnchorMarker, cbor::CborError> {
        let mut r = cbor::Reader::new(b);
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
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = cbor::Writer::with_capacity(160);
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

    pub(crate) fn decode(b: &[u8]) -> Result<ForkAlarm, cbor::CborError> {
        let mut r = cbor::Reader::new(b);
        r.array_of(8, "fork alarm")?;
        let epoch = r.uint()?;
        let local = r.fixed()?;
        let onchain = r.fixed()?;
        let chain_id = r.uint()?;
        let contract = r.fixed()?;
        let tx = match r.bytes()? {
            [] => None,
            t => Some(<[u8; 32]>::try_from(t).map_err(|_| {
                cbor::CborError::Malformed("fork alarm tx is not 0 or 32 bytes".into())
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

/// A finalized receipt of epoch 4 with an L1 fee and two replaced transactions (tests).
#[cfg(test)]
pub(crate) fn sample_receipt() -> AnchorReceipt {
    AnchorReceipt {
        state: ReceiptState::Finalized,
        l1_fee: 1234,
        replaced: vec![[1; 32], [2; 32]],
        ..AnchorReceipt::for_tests(4, 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt() -> AnchorReceipt {
        sample_receipt()
    }

    #[test]
    fn receipts_round_trip_and_old_receipts_still_decode() {
        let r = receipt();
        assert_eq!(AnchorReceipt::decode(4, &r.encode()).unwrap(), r);
        assert_eq!(r.cost_wei(), 49_808 * 1_000_000_000 + 1234);
        // The seven-field receipt of earlier versions.
        let mut w = cbor::Writer::with_capacity(128);
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
        let mut w = cbor::Writer::with_capacity(8);
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
}
