//! The delegation handshake (`docs/spec/delegation.md`): each side of a cross-recorder
//! delegation records the other side's signed receipt.
//!
//! ```text
//!  delegating recorder A                                receiving recorder B
//!  offer(event)      ── records E_A, returns A's signed receipt ──►
//!                                                       accept(event, A's receipt)
//!                    ◄── records E_B with parent_event = A's receipt, returns B's ──
//!  receipt(A's, B's) ── records afr.delegated with delegated_to = [B's receipt]
//! ```
//!
//! A receipt is signed by the recorder's anchoring key (its address is the recorder id), so
//! neither side can later deny the leaf it vouched for. The offer's receipt names the
//! receiving recorder, the accept's names the offer it accepts: each step refuses a receipt
//! that is not addressed to it or does not answer its own offer, so no step pairs the evidence
//! of two different delegations.

use afr_core::{
    Category, EventInput, Hash32, RecorderId,
    delegation::{Receipt, Role},
    event::DelegationProvenance,
};

use crate::{RecordError, Recorder};

/// The recorder's own event that holds the counterpart's receipt.
pub const DELEGATED_TOOL: &str = "afr.delegated";

/// Signs a 32-byte digest with the recorder's anchoring key: `r ‖ s ‖ v`.
pub type SignFn<'a> = &'a (dyn Fn(&[u8; 32]) -> Result<[u8; 65], String> + Sync);

/// Why a handshake step failed; nothing was recorded unless it says so.
#[derive(Debug, thiserror::Error)]
pub enum DelegationError {
    /// The event or a receipt is not acceptable.
    #[error("{0}")]
    Invalid(String),
    /// The store failed.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The key could not sign, or is not this recorder's.
    #[error("cannot sign the receipt: {0}")]
    Sign(String),
}

fn invalid(m: impl Into<String>) -> DelegationError {
    DelegationError::Invalid(m.into())
}

impl Recorder {
    /// This recorder's signed receipt of its event `seq` with leaf hash `leaf`, in `role`.
    pub fn sign_receipt(
        &self,
        seq: u64,
        leaf: &Hash32,
        role: &Role,
        sign: SignFn<'_>,
    ) -> Result<Receipt, DelegationError> {
        let me = self.recorder_id();
        let digest = afr_core::delegation::signing_hash(&me, seq, leaf, role);
        let sig = sign(&digest).map_err(DelegationError::Sign)?;
        let r = Receipt::new(&me, seq, leaf, role, &sig);
        r.verify().map_err(|e| {
            DelegationError::Sign(format!(
                "the key given is not this recorder's anchoring key ({e})"
            ))
        })?;
        Ok(r)
    }

    fn record_keyed(
        &self,
        event: EventInput,
        key: Option<&str>,
    ) -> Result<crate::Receipt, RecordError> {
        match key {
            Some(k) => self
                .record_idempotent(k.as_bytes(), event)
                .map(|r| r.receipt),
            None => self.record(event),
        }
    }

    /// The delegating side's first step: records `event` (the call that hands work to another
    /// recorder's agent) and returns its signed receipt, addressed to recorder `to`, to give
    /// to the receiving side.
    pub fn delegate_offer(
        &self,
        event: EventInput,
        to: &RecorderId,
        idempotency_key: Option<&str>,
        sign: SignFn<'_>,
    ) -> Result<Receipt, DelegationError> {
        if *to == self.recorder_id() {
            return Err(invalid(
                "the offer is to this recorder itself: a delegation is between two recorders",
            ));
        }
        let r = self.record_keyed(event, idempotency_key)?;
        self.sign_receipt(r.seq, &r.leaf_hash, &Role::Offer { to: *to }, sign)
    }

    /// The receiving side's one step: checks `parent` (the delegating recorder's signed
    /// receipt), records `event` with `delegation_provenance.parent_event` = `parent`, and
    /// returns this recorder's signed receipt of it, to give back.
    pub fn delegate_accept(
        &self,
        mut event: EventInput,
        parent: &Receipt,
        idempotency_key: Option<&str>,
        sign: SignFn<'_>,
    ) -> Result<Receipt, DelegationError> {
        parent
            .verify()
            .map_err(|e| invalid(format!("the delegating side's receipt does not hold: {e}")))?;
        let (from, from_leaf) = parent.parts().map_err(invalid)?;
        if from == self.recorder_id() {
            return Err(invalid(
                "the receipt is this recorder's own: a delegation is between two recorders",
            ));
        }
        match parent.role().map_err(invalid)? {
            Role::Offer { to } if to == self.recorder_id() => {}
            Role::Offer { to } => {
                return Err(invalid(format!(
                    "the offer is made to recorder 0x{}, not to this recorder (0x{})",
                    hex::encode(to),
                    hex::encode(self.recorder_id())
                )));
            }
            other => {
                return Err(invalid(format!(
                    "the delegating side's receipt is a {} receipt, not an offer: it names no receiving recorder (an offer from `afr delegate offer --to`)",
                    other.name()
                )));
            }
        }
        let d = event
            .delegation_provenance
            .get_or_insert_with(DelegationProvenance::default);
        if d.parent_event.as_ref().is_some_and(|p| {
            p.seq != parent.seq
                || p.recorder
                    .as_deref()
                    .and_then(afr_core::delegation::parse_recorder)
                    != Some(from)
        }) {
            return Err(invalid(
                "the event's delegation_provenance.parent_event names another event than the receipt",
            ));
        }
        d.parent_event = Some(parent.to_ref());
        let r = self.record_keyed(event, idempotency_key)?;
        let answers = Role::Accept {
            recorder: from,
            seq: parent.seq,
            leaf: from_leaf,
        };
        self.sign_receipt(r.seq, &r.leaf_hash, &answers, sign)
    }

    /// The delegating side's last step: checks that `ours` is this recorder's signed offer of
    /// an event in its log, and `theirs` the signed receipt of the recorder it was offered to,
    /// accepting exactly that offer; records them as this recorder's own `afr.delegated` event
    /// (once: a retry returns the first). A receipt that answers another offer, or comes from
    /// another recorder than the offer names, is refused.
    pub fn delegate_receipt(
        &self,
        ours: &Receipt,
        theirs: &Receipt,
        sign: SignFn<'_>,
    ) -> Result<Receipt, DelegationError> {
        let (me, leaf) = ours.parts().map_err(invalid)?;
        if me != self.recorder_id() {
            return Err(invalid(format!(
                "the offer is recorder {}'s, not this recorder's (0x{})",
                ours.recorder,
                hex::encode(self.recorder_id())
            )));
        }
        let stored = self
            .store()
            .record(ours.seq)?
            .ok_or_else(|| invalid(format!("no event {} in this log", ours.seq)))?;
        if stored.leaf_hash() != leaf {
            return Err(invalid(format!(
                "event {} of this log has another leaf hash than the offer",
                ours.seq
            )));
        }
        ours.verify()
            .map_err(|e| invalid(format!("the offer's receipt does not hold: {e}")))?;
        theirs
            .verify()
            .map_err(|e| invalid(format!("the receiving side's receipt does not hold: {e}")))?;
        let (them, _) = theirs.parts().map_err(invalid)?;
        if them == me {
            return Err(invalid(
                "the receipt is this recorder's own: a delegation is between two recorders",
            ));
        }
        match ours.role().map_err(invalid)? {
            Role::Offer { to } if to == them => {}
            Role::Offer { to } => {
                return Err(invalid(format!(
                    "offer {} was made to recorder 0x{}, but the receipt is recorder {}'s",
                    ours.seq,
                    hex::encode(to),
                    theirs.recorder
                )));
            }
            other => {
                return Err(invalid(format!(
                    "the offer's receipt is a {} receipt: it names no receiving recorder",
                    other.name()
                )));
            }
        }
        match theirs.role().map_err(invalid)? {
            Role::Accept {
                recorder,
                seq,
                leaf: answered,
            } if recorder == me && seq == ours.seq && answered == leaf => {}
            Role::Accept {
                recorder,
                seq,
                leaf: answered,
            } => {
                return Err(invalid(format!(
                    "the receipt accepts event {seq} (leaf {answered}) of recorder 0x{}, not this offer (event {} of this recorder, leaf {leaf})",
                    hex::encode(recorder),
                    ours.seq
                )));
            }
            other => {
                return Err(invalid(format!(
                    "the receiving side's receipt is a {} receipt: it does not name the offer it accepts",
                    other.name()
                )));
            }
        }
        let event = EventInput {
            lane: stored.lane.clone(),
            delegation_provenance: Some(DelegationProvenance {
                delegated_to: vec![theirs.to_ref()],
                ..DelegationProvenance::default()
            }),
            ..EventInput::intent_only(
                Category::Delegation,
                DELEGATED_TOOL,
                serde_json::json!({ "offer": { "seq": ours.seq, "leaf_hash": ours.leaf_hash } }),
            )
        };
        // Once per (offer, receipt): a second, different receipt for the same event of the
        // other side (it signed two leaves for one position) is recorded too, as evidence.
        let pair = format!(
            "{}:{}:{}:{}",
            ours.seq,
            theirs.recorder.to_ascii_lowercase(),
            theirs.seq,
            theirs.leaf_hash.to_ascii_lowercase()
        );
        let key = format!(
            "{DELEGATED_TOOL}:{}",
            afr_core::hash::sha256(&[pair.as_bytes()]).to_hex()
        );
        let r = self.record_own_keyed(key.as_bytes(), event)?;
        self.sign_receipt(r.seq, &r.leaf_hash, &Role::Plain, sign)
    }
}
