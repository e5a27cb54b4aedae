//! Delegation receipts: evidence, held by each side of a cross-recorder delegation, of the
//! other side's event (`docs/spec/delegation.md`).
//!
//! A receipt names an event in a recorder's log by `(recorder, seq, leaf_hash)` and is signed
//! by that recorder's key (the key that anchors its epochs, whose address is the recorder id),
//! over EIP-712 typed data. A delegation's two receipts also bind its other end:
//!
//! ```text
//! domain       EIP712Domain(string name,string version)  "Agent Flight Recorder", "1"
//! offer        AfrOffer(address recorder,uint64 seq,bytes32 leafHash,address to)
//! accept       AfrAccept(address recorder,uint64 seq,bytes32 leafHash,address offerRecorder,uint64 offerSeq,bytes32 offerLeafHash)
//! plain        AfrReceipt(address recorder,uint64 seq,bytes32 leafHash)
//! ```
//!
//! The delegating side's receipt of its offer names the recorder it is offered to (`to`); the
//! receiving side's receipt of its accepting event names the offer it answers (`answers`). So
//! an offer cannot be cited by a recorder it was not made to, and an accept cannot be paired
//! with another offer than the one it accepted. Plain receipts (no `to`, no `answers`) are what
//! recorders issued before the roles existed, and still issue for the `afr.delegated` event;
//! they bind the position only.
//!
//! The delegating side records the receiving side's receipt in
//! `delegation_provenance.delegated_to`; the receiving side records the delegating side's in
//! `delegation_provenance.parent_event`. A receipt signed by a recorder is that recorder's
//! word that the leaf sits at that position of its log: if its anchored log says otherwise,
//! the recorder rewrote its history; if a receipt does not verify, whoever cites it invented it.

use serde::{Deserialize, Serialize};

use crate::{
    Hash32, RecorderId,
    approval::{eip712_domain, recover},
    eip712::{self, Field},
    event::{EventRef, OfferRef},
};

/// The `encodeType` of a plain receipt: a position only.
pub const RECEIPT_TYPE: &str = "AfrReceipt(address recorder,uint64 seq,bytes32 leafHash)";
/// The `encodeType` of a delegating event's receipt: offered to recorder `to`.
pub const OFFER_TYPE: &str = "AfrOffer(address recorder,uint64 seq,bytes32 leafHash,address to)";
/// The `encodeType` of a receiving event's receipt: it accepts the offer named.
pub const ACCEPT_TYPE: &str = "AfrAccept(address recorder,uint64 seq,bytes32 leafHash,\
     address offerRecorder,uint64 offerSeq,bytes32 offerLeafHash)";

/// What a receipt says beyond the position, bound by its signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A plain receipt (`AfrReceipt`): the position only.
    Plain,
    /// An offer's receipt (`AfrOffer`): offered to this recorder.
    Offer {
        /// The receiving recorder.
        to: RecorderId,
    },
    /// An accept's receipt (`AfrAccept`): it accepts this offer.
    Accept {
        /// The delegating recorder.
        recorder: RecorderId,
        /// The offer's sequence number.
        seq: u64,
        /// The offer's leaf hash.
        leaf: Hash32,
    },
}

impl Role {
    /// `plain`, `offer` or `accept`.
    pub fn name(&self) -> &'static str {
        match self {
            Role::Plain => "plain",
            Role::Offer { .. } => "offer",
            Role::Accept { .. } => "accept",
        }
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
    /// The recorder's EIP-712 signature, `0x` + 130 hex digits.
    pub signature: String,
    /// For an offer: the recorder it is made to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// For an accept: the offer it accepts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<OfferRef>,
}

/// The digest a recorder signs for a receipt of `(recorder, seq, leaf)` in `role`.
pub fn signing_hash(recorder: &RecorderId, seq: u64, leaf: &Hash32, role: &Role) -> [u8; 32] {
    let (r, n, l) = (
        Field::Address(recorder),
        Field::Uint(seq),
        Field::Bytes32(&leaf.0),
    );
    let message = match role {
        Role::Plain => eip712::hash_struct(RECEIPT_TYPE, &[r, n, l]),
        Role::Offer { to } => eip712::hash_struct(OFFER_TYPE, &[r, n, l, Field::Address(to)]),
        Role::Accept {
            recorder: offer_recorder,
            seq: offer_seq,
            leaf: offer_leaf,
        } => eip712::hash_struct(
            ACCEPT_TYPE,
            &[
                r,
                n,
                l,
                Field::Address(offer_recorder),
                Field::Uint(*offer_seq),
                Field::Bytes32(&offer_leaf.0),
            ],
        ),
    };
    eip712::signing_hash(&eip712_domain(), &message)
}

/// 40 hex digits, `0x` optional (as `EventRef.recorder` allows), as a recorder id.
pub fn parse_recorder(s: &str) -> Option<RecorderId> {
    let mut r = [0u8; 20];
    hex::decode_to_slice(s.strip_prefix("0x").unwrap_or(s), &mut r).ok()?;
    Some(r)
}

fn hex_id(r: &RecorderId) -> String {
    format!("0x{}", hex::encode(r))
}

/// The role a reference's `to` / `answers` state (not yet checked against a signature).
fn role_of(to: Option<&str>, answers: Option<&OfferRef>) -> Result<Role, String> {
    match (to, answers) {
        (None, None) => Ok(Role::Plain),
        (Some(_), Some(_)) => Err("a receipt names either `to` or `answers`, not both".into()),
        (Some(t), None) => {
            let to = parse_recorder(&t.to_ascii_lowercase())
                .ok_or_else(|| format!("receipt `to` `{t}` is not 40 hex digits"))?;
            Ok(Role::Offer { to })
        }
        (None, Some(a)) => {
            let recorder = parse_recorder(&a.recorder.to_ascii_lowercase()).ok_or_else(|| {
                format!(
                    "receipt answers.recorder `{}` is not 40 hex digits",
                    a.recorder
                )
            })?;
            let leaf = Hash32::from_hex(&a.leaf_hash.to_ascii_lowercase()).ok_or_else(|| {
                format!("receipt answers.leaf_hash `{}` is not 64 hex", a.leaf_hash)
            })?;
            Ok(Role::Accept {
                recorder,
                seq: a.seq,
                leaf,
            })
        }
    }
}

/// `role` as the `to` / `answers` fields of a receipt or reference.
fn role_fields(role: &Role) -> (Option<String>, Option<OfferRef>) {
    match role {
        Role::Plain => (None, None),
        Role::Offer { to } => (Some(hex_id(to)), None),
        Role::Accept {
            recorder,
            seq,
            leaf,
        } => (
            None,
            Some(OfferRef {
                recorder: hex_id(recorder),
                seq: *seq,
                leaf_hash: leaf.to_hex(),
            }),
        ),
    }
}

impl Receipt {
    /// The receipt of `(recorder, seq, leaf)` in `role` with `signature` (from
    /// [`signing_hash`]).
    pub fn new(
        recorder: &RecorderId,
        seq: u64,
        leaf: &Hash32,
        role: &Role,
        signature: &[u8; 65],
    ) -> Receipt {
        let (to, answers) = role_fields(role);
        Receipt {
            recorder: hex_id(recorder),
            seq,
            leaf_hash: leaf.to_hex(),
            signature: format!("0x{}", hex::encode(signature)),
            to,
            answers,
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

    /// What the receipt says beyond the position, if well formed.
    pub fn role(&self) -> Result<Role, String> {
        role_of(self.to.as_deref(), self.answers.as_ref())
    }

    /// Whether the named recorder's key signed it, role included: `Err` says why not.
    pub fn verify(&self) -> Result<(), String> {
        let (r, l) = self.parts()?;
        let role = self.role()?;
        let who = recover(&signing_hash(&r, self.seq, &l, &role), &self.signature)?;
        if who != r {
            return Err(format!(
                "the receipt is signed by {}, not by recorder {}",
                hex_id(&who),
                hex_id(&r)
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
            to: self.to.as_ref().map(|t| t.to_ascii_lowercase()),
            answers: self.answers.as_ref().map(|a| OfferRef {
                recorder: a.recorder.to_ascii_lowercase(),
                seq: a.seq,
                leaf_hash: a.leaf_hash.to_ascii_lowercase(),
            }),
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

/// A reference, checked: the referenced recorder, what proves the leaf, and the role its
/// `to` / `answers` state (bound by the signature only when the proof is
/// [`RefProof::Signed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedRef {
    /// The referenced recorder.
    pub recorder: RecorderId,
    /// What proves the leaf.
    pub proof: RefProof,
    /// The role stated.
    pub role: Role,
}

/// Checks `r`, a reference made by recorder `own` (a reference without `recorder` is to
/// `own`'s log): the referenced recorder, what proves the leaf, and the role it states.
pub fn check_ref(r: &EventRef, own: &RecorderId) -> Result<CheckedRef, String> {
    let recorder = match &r.recorder {
        Some(s) => parse_recorder(&s.to_ascii_lowercase())
            .ok_or_else(|| format!("recorder `{s}` is not 40 hex digits"))?,
        None => *own,
    };
    let role = role_of(r.to.as_deref(), r.answers.as_ref())?;
    let Some(l) = &r.leaf_hash else {
        return Ok(CheckedRef {
            recorder,
            proof: RefProof::Unbound,
            role,
        });
    };
    let leaf = Hash32::from_hex(&l.to_ascii_lowercase())
        .ok_or_else(|| format!("leaf_hash `{l}` is not 64 hex"))?;
    let Some(sig) = &r.signature else {
        return Ok(CheckedRef {
            recorder,
            proof: RefProof::Bound(leaf),
            role,
        });
    };
    let proof = match recover(&signing_hash(&recorder, r.seq, &leaf, &role), sig) {
        Ok(who) if who == recorder => RefProof::Signed(leaf),
        Ok(who) => RefProof::BadSignature(
            leaf,
            format!(
                "signed by {}, not by recorder {}",
                hex_id(&who),
                hex_id(&recorder)
            ),
        ),
        Err(e) => RefProof::BadSignature(leaf, e),
    };
    Ok(CheckedRef {
        recorder,
        proof,
        role,
    })
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
            to: None,
            answers: None,
        };
        let other = "f39fd6e51aad88f6f4ce6ab8827279cfffb92266";
        let a = check_ref(&r(Some(other)), &own).unwrap();
        let b = check_ref(&r(Some(&format!("0x{}", other.to_uppercase()))), &own).unwrap();
        assert_eq!(a.recorder, b.recorder);
        assert_eq!(b.proof, RefProof::Bound(Hash32([0xab; 32])));
        assert_eq!(b.role, Role::Plain);
        assert_eq!(check_ref(&r(None), &own).unwrap().recorder, own);
        assert!(check_ref(&r(Some("0x12")), &own).is_err());
    }

    /// The vector of `docs/spec/delegation.md` §1: each role signs its own digest, so a
    /// signature over one role never verifies as another.
    #[test]
    fn receipt_digests_bind_their_role() {
        let rec = parse_recorder("f39fd6e51aad88f6f4ce6ab8827279cfffb92266").unwrap();
        let other = parse_recorder("70997970c51812dc3a010c7d01b50e0d17dc79c8").unwrap();
        let leaf = Hash32([0xab; 32]);
        let digests = [
            Role::Plain,
            Role::Offer { to: other },
            Role::Accept {
                recorder: other,
                seq: 7,
                leaf: Hash32([0xcd; 32]),
            },
        ]
        .map(|role| hex::encode(signing_hash(&rec, 0, &leaf, &role)));
        assert_eq!(digests, VECTOR, "{digests:?}");
    }

    /// Also computed by Python's `eth-account` (`encode_typed_data`), independently.
    const VECTOR: [&str; 3] = [
        "05945f78ba47b52906e0b52d870c350f5d9936a6f820cd443c62b05044060bc3",
        "a7f9ffc4ffece767c73b4fbd64bf542edfd3f7e179c8bfeaa8db7fe7fd16197c",
        "e069f4f29d14d4d880d5ac1223e9950b0c35fc3efa9432e5b4ab34ff14df1a3a",
    ];
}
