//! Signed human approvals in a bundle's opened events, checked against the approvers pinned in
//! the trust file (`docs/spec/approvals.md` §4).
//!
//! The core crate answers for one event whether its approval is bound to that event's action,
//! issued for its recorder, validly signed and within its window ([`approval::check`]). What
//! depends on more than the event is decided here:
//!
//! - **who signed**: with approvers pinned, a signer none of them holds is tampered
//!   (`approval-signer`); with none pinned, a signed approval is attributed to no one: a note
//!   (the signature is valid and bound to the event, whoever's key it is), or missing when the
//!   trust file sets `require_signed_approvals` (attribution is then required);
//! - **replay**: a nonce already used by another opened event of the same bundle is tampered
//!   (`approval-nonce`, reported on the later event);
//! - **unsigned approvals**: the operator's word only; a note, or missing when the trust file
//!   sets `require_signed_approvals`.
//!
//! Every event with a `human_approval` gets one [`Approval`] in the verdict, failed or not; the
//! first failure (by sequence number) is the verdict's. Each check a signed approval passes
//! counts under the verdict's checks: `approval-digest`, `-statement`, `-signature` and
//! `-window` once [`approval::check`] accepts it, then `approval-signer` (only with approvers
//! pinned, its signer one of them) and `approval-nonce`. A whole-log export carries no keys, so
//! none of its payloads is opened and nothing here applies to it.

use std::collections::BTreeMap;

use afr_core::{
    approval::{self, Signed},
    bundle::BundleReport,
    event::{Decision, HumanApproval},
    text::escape,
    verify::{Check, Location, Outcome},
};

use crate::{Trust, Verdict, verdict::bump};

/// What became of one event's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Signed over this event's action, within its window, with a fresh nonce, by a pinned
    /// approver (or by a key no one is pinned for, when no approver is pinned at all: see
    /// [`Approval::detail`]; a note, or missing under `require_signed_approvals`).
    Signed,
    /// No signature: the operator's word only.
    Unsigned,
    /// A check failed ([`Approval::check`]): tampered.
    Invalid,
}

impl Status {
    /// `signed`, `unsigned` or `invalid`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Signed => "signed",
            Status::Unsigned => "unsigned",
            Status::Invalid => "invalid",
        }
    }
}

/// One opened event's approval, as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// The event.
    pub seq: u64,
    /// `human_approval.approver`, as recorded (the operator's text).
    pub approver: String,
    /// `human_approval.decision`.
    pub decision: Decision,
    /// The outcome.
    pub status: Status,
    /// The signature scheme as the event names it (`None` when unsigned).
    pub scheme: Option<String>,
    /// The signer proven by the signature, canonical; `None` when unsigned or when the
    /// signature does not verify. For an invalid approval whose signature verifies over its
    /// own statement (a different action, an expired window, a replay), the key that signed.
    pub signer: Option<String>,
    /// The party of the pinned approver holding [`Approval::signer`].
    pub party: Option<String>,
    /// The pinned approver's name.
    pub pinned_name: Option<String>,
    /// The failed check, when invalid.
    pub check: Option<Check>,
    /// Why it failed, or what limits a signed approval.
    pub detail: Option<String>,
    /// The signed statement's nonce, once its signature is accepted: single-use per recorder,
    /// also across the bundles of a case ([`crate::case`]).
    pub nonce: Option<String>,
    /// When the approver signed (the statement's `issued_at`, Unix seconds), once its
    /// signature is accepted: the signed time, unlike `human_approval.decided_at_us`.
    pub signed_at: Option<u64>,
    /// A rejection on a call that ran anyway (the event records its execution): the
    /// operator's own log shows the call went ahead against the decision.
    pub ran_against_rejection: bool,
}

impl Approval {
    fn new(seq: u64, h: &HumanApproval, status: Status) -> Approval {
        Approval {
            seq,
            approver: h.approver.clone(),
            decision: h.decision,
            status,
            scheme: h.signature.as_ref().map(|s| s.scheme.clone()),
            signer: None,
            party: None,
            pinned_name: None,
            check: None,
            detail: None,
            nonce: None,
            signed_at: None,
            ran_against_rejection: false,
        }
    }

    /// Names the pinned approver who holds `signer`, if any.
    fn attribute(&mut self, signer: String, trust: &Trust) {
        if let Some(a) = trust.approver_of(&signer) {
            self.party = Some(a.party.clone());
            self.pinned_name = Some(a.name.clone());
        }
        self.signer = Some(signer);
    }

    /// `{seq, approver, decision, status, scheme, signer, party, pinned_name, check, detail}`,
    /// absent members `null`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "seq": self.seq,
            "approver": self.approver,
            "decision": self.decision.name(),
            "status": self.status.name(),
            "scheme": self.scheme,
            "signer": self.signer,
            "party": self.party,
            "pinned_name": self.pinned_name,
            "check": self.check.map(Check::name),
            "detail": self.detail,
            "nonce": self.nonce,
            "signed_at": self.signed_at,
            "ran_against_rejection": self.ran_against_rejection,
        })
    }

    /// One line for a terminal, every string from the file escapes
    /// ([`afr_core::text::escape`]).
    pub fn to_text(&self) -> String {
        let head = format!(
            "approval at event {}: {} by '{}'",
            self.seq,
            self.decision.name(),
            escape(&self.approver)
        );
        let scheme = self.scheme.as_deref().map(escape).unwrap_or_default();
        let signer = self.signer.as_deref().map(escape).unwrap_or_default();
        let detail = self.detail.as_deref().map(escape).unwrap_or_default();
        match (self.status, &self.pinned_name, &self.party) {
            (Status::Signed, Some(name), Some(party)) => format!(
                "{head}: signed ({scheme}) by {signer}, pinned approver '{}' of {}",
                escape(name),
                escape(party)
            ),
            (Status::Signed, _, _) => format!("{head}: signed ({scheme}) by {signer}, {detail}"),
            (Status::Unsigned, _, _) => format!("{head}: unsigned, the operator's word only"),
            (Status::Invalid, name, party) => {
                let by = match (&self.signer, name, party) {
                    (None, _, _) => String::new(),
                    (Some(_), Some(name), Some(party)) => format!(
                        ", signed by {signer} (pinned approver '{}' of {})",
                        escape(name),
                        escape(party)
                    ),
                    (Some(_), _, _) => format!(", signed by {signer}"),
                };
                format!(
                    "{head}: INVALID, {}{by} ({detail})",
                    self.check.map_or("?", Check::name)
                )
            }
        }
    }
}

/// Checks the approval of every opened event of a bundle whose own checks and recorder check
/// passed (`v` not tampered; `rep` the bundle's report), records one [`Approval`] per event
/// with a `human_approval`, and settles nothing: failures tamper `v` (the first one is kept),
/// what `require_signed_approvals` requires and is absent (a signature, or its attribution to
/// a pinned approver) goes to `missing`.
pub fn check(v: &mut Verdict, rep: &BundleReport, trust: &Trust) {
    let Some(recorder) = rep.recorder else { return };
    let pinned = !trust.approvers.is_empty();
    // Nonce → the first opened event whose valid signature used it.
    let mut nonces: BTreeMap<String, u64> = BTreeMap::new();
    for (seq, p) in &rep.opened {
        let seq = *seq;
        let Some(h) = &p.human_approval else { continue };
        let Some(&at_us) = rep.opened_at.get(&seq) else {
            // `verify_bundle` records the time of every event it opens; without it there is
            // no window to compare with.
            v.missing.push(format!(
                "event {seq}: its record's time is unknown, so its approval was not checked"
            ));
            continue;
        };
        let a = match approval::check(p, &recorder, at_us) {
            Err(problem) => {
                let mut a = Approval::new(seq, h, Status::Invalid);
                if let Some(signer) = h
                    .signature
                    .as_ref()
                    .and_then(|s| approval::verify_signature(s).ok())
                {
                    a.attribute(signer, trust);
                }
                a.check = Some(problem.check);
                a.detail = Some(problem.detail);
                a
            }
            Ok(None) => {
                if trust.require_signed_approvals {
                    v.missing.push(format!(
                        "event {seq}: the approval by '{}' is unsigned, and the trust file requires signed approvals",
                        h.approver
                    ));
                } else {
                    v.notes.push(format!(
                        "event {seq}: approval by '{}' is unsigned: the operator's word only",
                        h.approver
                    ));
                }
                Approval::new(seq, h, Status::Unsigned)
            }
            Ok(Some(s)) => {
                // Bound to the event's action and statement, validly signed, in its window.
                for c in [
                    Check::ApprovalDigest,
                    Check::ApprovalStatement,
                    Check::ApprovalSignature,
                    Check::ApprovalWindow,
                ] {
                    bump(&mut v.checks, c.name());
                }
                signed(v, seq, h, s, trust, pinned, &mut nonces)
            }
        };
        let mut a = a;
        if let (Status::Invalid, Some(check), Some(detail)) = (a.status, a.check, &a.detail)
            && v.outcome != Outcome::Tampered
        {
            v.tamper(Location::Event(seq), check, detail.clone());
        }
        // The record is intact, and it shows the call executed although the decision was a
        // rejection: not tampering, but the first thing a reader must be told.
        if h.decision == Decision::Rejected && p.execution.is_some() {
            a.ran_against_rejection = true;
            v.notes.push(format!(
                "event {seq}: the call RAN AGAINST A {} REJECTION by '{}': its record holds the execution",
                if a.status == Status::Signed { "SIGNED" } else { "recorded" },
                h.approver
            ));
        }
        v.approvals.push(a);
    }
}

/// The report of a signature [`approval::check`] accepted: attributed to a pinned approver, or
/// to no one; invalid if its signer is not pinned or its nonce was used before.
fn signed(
    v: &mut Verdict,
    seq: u64,
    h: &HumanApproval,
    s: Signed,
    trust: &Trust,
    pinned: bool,
    nonces: &mut BTreeMap<String, u64>,
) -> Approval {
    let mut a = Approval::new(seq, h, Status::Signed);
    a.scheme = Some(s.scheme.name().to_owned());
    a.attribute(s.signer.clone(), trust);
    a.nonce = Some(s.nonce.clone());
    a.signed_at = Some(s.issued_at);

    let earlier = *nonces.entry(s.nonce.clone()).or_insert(seq);
    let failure = if pinned && a.pinned_name.is_none() {
        Some((
            Check::ApprovalSigner,
            format!(
                "the approval is signed by {}, a key no pinned approver holds",
                s.signer
            ),
        ))
    } else {
        // Only a signer checked against pinned approvers counts as `approval-signer`.
        if pinned {
            bump(&mut v.checks, Check::ApprovalSigner.name());
        }
        (earlier != seq).then(|| {
            (
                Check::ApprovalNonce,
                format!(
                    "the approval's nonce {} was already used by event {earlier}: the same approval replayed",
                    s.nonce
                ),
            )
        })
    };
    if let Some((check, detail)) = failure {
        a.status = Status::Invalid;
        a.check = Some(check);
        a.detail = Some(detail);
        return a;
    }
    bump(&mut v.checks, Check::ApprovalNonce.name());
    match &a.pinned_name {
        // Attribution is required when signed approvals are; otherwise a valid signature by
        // an unknown key is worth what an unsigned approval is, and more: a note.
        None if trust.require_signed_approvals => {
            v.missing.push(format!(
                "event {seq}: approval signed by {}, but no approvers are pinned (trust file [[party.approver]]), so it is not attributed to anyone, and the trust file requires signed approvals",
                s.signer
            ));
            a.detail = Some("not attributed: no approvers are pinned".into());
        }
        None => {
            v.notes.push(format!(
                "event {seq}: approval by '{}': signature valid and bound to the event; signer {} not attributed: no approvers pinned",
                h.approver, s.signer
            ));
            a.detail = Some("not attributed: no approvers are pinned".into());
        }
        Some(name) if *name != h.approver => v.notes.push(format!(
            "event {seq}: the approval recorded as by '{}' is signed by the key of pinned approver '{name}'{}",
            h.approver,
            a.party
                .as_deref()
                .map(|p| format!(" of {p}"))
                .unwrap_or_default()
        )),
        Some(_) => {}
    }
    a
}
