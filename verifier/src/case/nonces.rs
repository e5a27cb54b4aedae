//! Approval nonces pooled over a case: a signed approval counts once per recorder, across
//! every bundle.

use std::collections::{BTreeMap, BTreeSet};

use afr_core::{
    RecorderId,
    verify::{Check, Failure, Location, Outcome},
};

use super::Checked;

/// A signed approval's nonce is single-use per recorder across every bundle of the case: the
/// same approval disclosed for two events in two bundles (each of which alone verifies) is a
/// replay. The first event by sequence number keeps it; each later one is marked invalid
/// (`approval-nonce`) in its bundle's verdict, and returned as a failure of its party, with
/// the bundle. The same event disclosed in two bundles is not a replay.
pub(super) fn pool_nonces(checked: &mut [Checked], stray: usize) -> Vec<(usize, Failure, String)> {
    use crate::approvals::Status;
    // (recorder, nonce) -> every (seq, bundle index) whose accepted signature used it.
    let mut uses: BTreeMap<(RecorderId, String), BTreeSet<(u64, usize)>> = BTreeMap::new();
    for (b, c) in checked.iter().enumerate() {
        let Some(rec) = c.verdict.recorder else {
            continue;
        };
        if c.verdict.outcome == Outcome::Tampered {
            continue;
        }
        for a in &c.verdict.approvals {
            if let (Status::Signed, Some(nonce)) = (a.status, &a.nonce) {
                uses.entry((rec, nonce.clone()))
                    .or_default()
                    .insert((a.seq, b));
            }
        }
    }
    let mut out = Vec::new();
    for ((_, nonce), used) in uses {
        let Some(&(first, first_b)) = used.first() else {
            continue;
        };
        for &(seq, b) in used.iter().filter(|(s, _)| *s != first) {
            let first_file = checked
                .get(first_b)
                .map(|c| c.file.clone())
                .unwrap_or_default();
            let Some(c) = checked.get_mut(b) else {
                continue;
            };
            let detail = format!(
                "the approval's nonce {nonce} was already used by event {first} (bundle {first_file}): the same approval replayed across bundles"
            );
            for a in c.verdict.approvals.iter_mut().filter(|a| a.seq == seq) {
                a.status = Status::Invalid;
                a.check = Some(Check::ApprovalNonce);
                a.detail = Some(detail.clone());
            }
            out.push((
                c.party.unwrap_or(stray),
                Failure {
                    check: Check::ApprovalNonce,
                    location: Location::Event(seq),
                    detail,
                },
                c.file.clone(),
            ));
        }
    }
    out
}
