//! Delegation receipts: evidence, held by each side of a cross-recorder delegation, of the
//! other side's event (`docs/spec/delegation.md`).
//!
//! A receipt names an event in a recorder's log by `(recorder, seq, leaf_hash)` and is signed
//! by that recorder's key (the key that anchors its epochs, whose address is the recorder id),
//! over EIP-712 typed data:
//!
//! ```text
//! domain       EIP712Domain(string name,string version)  "Agent Flight Recorder", "1"
//! primaryType  AfrReceipt(address recorder,uint64 seq,bytes32 leafHash)
//! ```
//!
//! The delegating side records the receiving side's receipt in
//! `delegation_provenance.delegated_to`; the receiving side records the delegating side's in
//! `delegation_provenance.parent_event`. A receipt signed by a recorder is that recorder's
//! word that the leaf sits at that position of its log: if its anchored log says otherwise,
//! the recorder rewrote its history; if a receipt does not verify, whoever cites it invented it.

use alloy_primitives::{Address, B256};
use alloy_sol_types::{SolStruct, eip712_domain, sol};
use serde::{Deserialize, Serialize};

use crate::{
    Hash32, RecorderId,
    approval::{EIP712_NAME, EIP712_VERSION, recover},
    event::EventRef,
};

sol! {
    /// The EIP-712 struct a recorder signs for each receipt it issues.
    #[derive(Debug)]
    struct AfrReceipt {
        address recorder;
        uint64 seq;
        bytes32 leafHash;
    }
}

/// A signed receipt: where an event landed in a recorder's log, in the recorder's word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// The recorder, `0x` + 40 lower-case hex digits.
    pub recorder: String,
    /// The event's sequence number.
    pub seq: u64,
    /// Its record's leaf hash, 64 lower-case hex digits.
    pub leaf_hash: String,
    /// The recorder's EIP-712 signature over the three, `0x` + 130 hex digits.
    pub signature: String,
}

/// The digest a recorder signs for a receipt of `(recorder, seq, leaf)`.
pub fn signing_hash(recorder: &RecorderId, seq: u64, leaf: &Hash32) -> [u8; 32] {
    let domain = eip712_domain! { name: EIP712_NAME, version: EIP712_VERSION, };
    AfrReceipt {
        recorder: Address::from(*recorder),
        seq,
        leafHash: B256::from(leaf.0),
    }
    .eip712_signing_hash(&domain)
    .0
}

/// 40 hex digits, `0x` optional (as `EventRef.recorder` allows), as a recorder id.
pub fn parse_recorder(s: &str) -> Option<RecorderId> {
    let mut r = [0u8; 20];
    hex::decode_to_slice(s.strip_prefix("0x").unwrap_or(s), &mut r).ok()?;
    Some(r)
}

impl Receipt {
    /// The receipt of `(recorder, seq, leaf)` with `signature` (from [`signing_hash`]).
    pub fn new(recorder: &RecorderId, seq: u64, leaf: &Hash32, signature: &[u8; 65]) -> Receipt {
        Receipt {
            recorder: format!("0x{}", hex::encode(recorder)),
            seq,
            leaf_hash: leaf.to_hex(),
            signature: format!("0x{}", hex::encode(signature)),
        }
    }

    /// The recorder and leaf hash, if well formed.
    pub fn parts(&self) -> Result<(RecorderId, Hash32), String> {
        let r = parse_recorder(&self.recorder.to_ascii_lowercase())
            .ok_or_else(|| format!("receipt recorder `{}` is not 40 hex digits", self.recorder))?;
        let l = Hash32::from_hex(&self.leaf_hash)
            .ok_or_else(|| format!("receipt leaf_hash `{}` is not 64 hex", self.leaf_hash))?;
        Ok((r, l))
    }

    /// Whether the named recorder's key signed it: `Err` says why not.
    pub fn verify(&self) -> Result<(), String> {
        let (r, l) = self.parts()?;
        let who = recover(&signing_hash(&r, self.seq, &l), &self.signature)?;
        if who != r {
            return Err(format!(
                "the receipt is signed by 0x{}, not by recorder 0x{}",
                hex::encode(who),
                hex::encode(r)
            ));
        }
        Ok(())
    }

    /// As an [`EventRef`] to record (`parent_event` or an entry of `delegated_to`).
    pub fn to_ref(&self) -> EventRef {
        EventRef {
            recorder: Some(self.recorder.to_ascii_lowercase()),
            seq: self.seq,
            leaf_hash: Some(self.leaf_hash.clone()),
            signature: Some(self.signature.clone()),
        }
    }
}

/// What a reference in an event says, checked on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefProof {
    /// No leaf hash: a claim about the position only.
    Unbound,
    /// A leaf hash, unsigned (or the citing recorder's own log).
    Bound(Hash32),
    /// A leaf hash signed by the referenced recorder's key.
    Signed(Hash32),
    /// A leaf hash with a signature that does not verify: why.
    BadSignature(Hash32, String),
}

/// Checks `r`, a reference made by recorder `own` (a reference without `recorder` is to
/// `own`'s log): the referenced recorder and what proves the leaf.
pub fn check_ref(r: &EventRef, own: &RecorderId) -> Result<(RecorderId, RefProof), String> {
    let rec = match &r.recorder {
        Some(s) => parse_recorder(&s.to_ascii_lowercase())
            .ok_or_else(|| format!("recorder `{s}` is not 40 hex digits"))?,
        None => *own,
    };
    let Some(l) = &r.leaf_hash else {
        return Ok((rec, RefProof::Unbound));
    };
    let leaf = Hash32::from_hex(l).ok_or_else(|| format!("leaf_hash `{l}` is not 64 hex"))?;
    let Some(sig) = &r.signature else {
        return Ok((rec, RefProof::Bound(leaf)));
    };
    let proof = match recover(&signing_hash(&rec, r.seq, &leaf), sig) {
        Ok(who) if who == rec => RefProof::Signed(leaf),
        Ok(who) => RefProof::BadSignature(
            leaf,
            format!(
                "signed by 0x{}, not by recorder 0x{}",
                hex::encode(who),
                hex::encode(rec)
            ),
        ),
        Err(e) => RefProof::BadSignature(leaf, e),
    };
    Ok((rec, proof))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_their_recorder_with_or_without_0x() {
        let own = [1u8; 20];
        let r = |recorder: Option<&str>| EventRef {
            recorder: recorder.map(str::to_owned),
            seq: 3,
            leaf_hash: Some("ab".repeat(32)),
            signature: None,
        };
        let other = "f39fd6e51aad88f6f4ce6ab8827279cfffb92266";
        let (a, _) = check_ref(&r(Some(other)), &own).unwrap();
        let (b, p) = check_ref(&r(Some(&format!("0x{}", other.to_uppercase()))), &own).unwrap();
        assert_eq!(a, b);
        assert_eq!(p, RefProof::Bound(Hash32([0xab; 32])));
        assert_eq!(check_ref(&r(None), &own).unwrap().0, own);
        assert!(check_ref(&r(Some("0x12")), &own).is_err());
    }
}
