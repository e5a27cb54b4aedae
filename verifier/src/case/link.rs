//! One link, judged: a reference an opened event makes to another recorder's event, by the
//! rows of `docs/spec/delegation.md` §4 in their order (the module table of [`super`]); the
//! time rows are [`super::time`]'s.

use std::collections::{BTreeMap, BTreeSet};

use afr_core::{
    Hash32, RecorderId,
    delegation::{CheckedRef, RefProof, Role, check_ref},
    event::EventRef,
    verify::{Check, Outcome},
};

use super::{
    Backing, Blame, Known, Link, LinkKind, hex_id,
    time::{AnchoredAt, TimeFinding, judge_times},
};
use crate::{Trust, trust::Party};

/// The event that makes a reference.
pub(super) struct Site {
    pub(super) party: usize,
    pub(super) recorder: RecorderId,
    pub(super) seq: u64,
}

/// What links are judged against.
pub(super) struct Ctx<'a> {
    pub(super) trust: &'a Trust,
    pub(super) known: &'a BTreeMap<(RecorderId, u64), Known>,
    pub(super) anchored_at: &'a AnchoredAt,
    pub(super) with_bundle: &'a BTreeSet<RecorderId>,
    pub(super) failed: &'a BTreeSet<RecorderId>,
    /// For each delegating event (recorder, seq): the accepting events its own log records
    /// receipts of (`delegated_to` of its opened `afr.delegated` events).
    pub(super) acks: &'a BTreeMap<(RecorderId, u64), BTreeSet<(RecorderId, u64)>>,
}

/// Judges reference `r` of kind `kind` made by `citing` (whose delegation `origin` names, for
/// a `delegated_to` reference: the offer's sequence number and leaf hash); `None` for a
/// reference to the citing recorder's own log. The rows of the module table, in order.
pub(super) fn link(
    citing: &Site,
    kind: LinkKind,
    r: &EventRef,
    origin: (u64, Option<Hash32>),
    cx: &Ctx<'_>,
) -> Option<Link> {
    let mut l = Link {
        from_party: citing.party,
        from_recorder: citing.recorder,
        from_seq: citing.seq,
        to_party: None,
        to_recorder: None,
        to_seq: r.seq,
        kind,
        backing: Backing::Unsigned,
        role: None,
        leaf_hash: None,
        status: Outcome::Incomplete,
        blame: None,
        check: None,
        why: String::new(),
    };
    let name = |i: Option<usize>| -> String {
        match i.and_then(|i| cx.trust.parties.get(i)) {
            Some(Party { name, .. }) => format!("party \"{name}\""),
            None => "no party".into(),
        }
    };
    let from = format!(
        "event {} of recorder {}",
        citing.seq,
        hex_id(&citing.recorder)
    );
    let own_known = cx.known.get(&(citing.recorder, citing.seq));
    let own_anchored = own_known.is_some_and(|k| k.anchored);
    let CheckedRef {
        recorder: rec,
        proof,
        role,
    } = match check_ref(r, &citing.recorder) {
        Ok(x) => x,
        Err(why) => {
            // A reference that names no event cites nothing; whether it is the citing party's
            // word depends on its event being anchored.
            l.backing = Backing::Malformed(why.clone());
            l.blame = Some(Blame::Citing);
            let reference = format!("{from} makes a {} reference", kind.name());
            if own_anchored {
                l.status = Outcome::Tampered;
                l.check = Some(Check::DelegationLink);
                l.why = format!("{reference} that names no event: {why}");
            } else {
                l.why = format!(
                    "{reference} that does not parse ({why}), and its epoch is not anchored"
                );
            }
            return Some(l);
        }
    };
    if rec == citing.recorder {
        return None;
    }
    l.to_recorder = Some(rec);
    l.role = Some(role.name());
    let to = format!("event {} of recorder {}", r.seq, hex_id(&rec));
    let leaf = match &proof {
        RefProof::Unbound => None,
        RefProof::Bound(h) | RefProof::Signed(h) | RefProof::BadSignature(h, _) => Some(*h),
    };
    let signed = matches!(proof, RefProof::Signed(_));
    l.leaf_hash = leaf;
    l.backing = match &proof {
        RefProof::Unbound => Backing::NoLeafHash,
        RefProof::Bound(_) => Backing::Unsigned,
        RefProof::Signed(_) => Backing::Signed,
        RefProof::BadSignature(_, why) => Backing::BadSignature(why.clone()),
    };
    let Some(to_party) = cx
        .trust
        .parties
        .iter()
        .position(|p| p.recorders.contains(&rec))
    else {
        l.blame = Some(Blame::Case);
        l.why = format!(
            "{from} cites {to}, and recorder {} is no party of the case",
            hex_id(&rec)
        );
        return Some(l);
    };
    l.to_party = Some(to_party);
    let incomplete = |mut l: Link, blame, why: String| {
        l.status = Outcome::Incomplete;
        l.blame = Some(blame);
        l.why = why;
        Some(l)
    };
    let tampered = |mut l: Link, blame, check, why: String| {
        l.status = Outcome::Tampered;
        l.blame = Some(blame);
        l.check = Some(check);
        l.why = why;
        Some(l)
    };
    // The citing side's own claim is false: tampered once its event is anchored (it can no
    // longer be taken back), incomplete before.
    let citing_fault = |l: Link, why: String| {
        if own_anchored {
            tampered(l, Blame::Citing, Check::DelegationLink, why)
        } else {
            incomplete(
                l,
                Blame::Citing,
                format!("{why}; the citing event's epoch is not anchored"),
            )
        }
    };
    let Some(leaf) = leaf else {
        return incomplete(
            l,
            Blame::Citing,
            format!("{from} cites {to} without a leaf hash: a position, not an event"),
        );
    };
    // What the reference says of the delegation's other end, before anything is looked up.
    let (origin_seq, origin_leaf) = origin;
    let offer_of = |rec: &RecorderId, seq: u64, leaf: &Hash32| {
        format!("offer {seq} of recorder {} (leaf {leaf})", hex_id(rec))
    };
    match (kind, &role) {
        (LinkKind::ParentEvent, Role::Accept { .. }) => {
            return citing_fault(
                l,
                format!(
                    "{from} names as the offer it accepted a receipt of {to} that is itself an accept, not an offer"
                ),
            );
        }
        (LinkKind::ParentEvent, Role::Offer { to: offered }) if *offered != citing.recorder => {
            return citing_fault(
                l,
                format!(
                    "{from} accepts {to}, which {} offered to recorder {}, not to it",
                    if signed {
                        "its receipt (signed by its recorder) says was"
                    } else {
                        "the reference (not signed by its recorder) says was"
                    },
                    hex_id(offered)
                ),
            );
        }
        (LinkKind::DelegatedTo, Role::Offer { .. }) => {
            return citing_fault(
                l,
                format!(
                    "{from} names as the accept of its delegation a receipt of {to} that is an offer"
                ),
            );
        }
        (
            LinkKind::DelegatedTo,
            Role::Accept {
                recorder: ar,
                seq: aseq,
                leaf: aleaf,
            },
        ) => {
            let same = *ar == citing.recorder
                && *aseq == origin_seq
                && origin_leaf.is_none_or(|o| o == *aleaf);
            if !same {
                return citing_fault(
                    l,
                    format!(
                        "{from} pairs its offer {origin_seq} with {to}, whose receipt{} accepts {}",
                        if signed {
                            " (signed by its recorder)"
                        } else {
                            ""
                        },
                        offer_of(ar, *aseq, aleaf)
                    ),
                );
            }
        }
        _ => {}
    }
    // The afr.delegated event's own claim about its offer, against its own log.
    if kind == LinkKind::DelegatedTo
        && let (Some(o), Some(k)) = (origin_leaf, cx.known.get(&(citing.recorder, origin_seq)))
        && k.leaf != o
    {
        return citing_fault(
            l,
            format!(
                "{from} names its offer {origin_seq} with leaf {o}, and its own log holds leaf {} there",
                k.leaf
            ),
        );
    }
    // Whose word the cited event is: the linked recorder's, if it signed the receipt; else
    // only the citing side's, whose problem it is if the event cannot be found.
    let vouched = if signed { Blame::Linked } else { Blame::Citing };
    let Some(target) = cx.known.get(&(rec, r.seq)) else {
        let why = if cx.with_bundle.contains(&rec) {
            format!("{to}, cited by {from}, is not disclosed")
        } else if cx.failed.contains(&rec) {
            format!("{to}, cited by {from}: the bundle of its recorder did not verify")
        } else {
            format!(
                "{to}, cited by {from}: no bundle of recorder {} was given ({})",
                hex_id(&rec),
                name(Some(to_party))
            )
        };
        let why = if signed {
            why
        } else {
            format!(
                "{why}; the reference is not signed by recorder {}, so it is {from}'s claim alone",
                hex_id(&rec)
            )
        };
        return incomplete(l, vouched, why);
    };
    if !target.anchored {
        return incomplete(
            l,
            vouched,
            format!(
                "{to}, cited by {from}, is in epoch {} whose anchored root was not checked",
                target.epoch
            ),
        );
    }
    if leaf != target.leaf && signed {
        return tampered(
            l,
            Blame::Linked,
            Check::DelegationLink,
            format!(
                "recorder {} signed a receipt for leaf {leaf} at seq {} (held by {from}) and anchored leaf {} there",
                hex_id(&rec),
                r.seq,
                target.leaf
            ),
        );
    }
    let Some(own) = own_known.filter(|k| k.anchored) else {
        return incomplete(
            l,
            Blame::Citing,
            format!("{from} cites {to}, and the citing event's epoch is not anchored"),
        );
    };
    if leaf != target.leaf {
        let backing = match &proof {
            RefProof::BadSignature(_, why) => {
                format!("with a receipt signature that does not verify ({why})")
            }
            _ => "without a receipt signature".into(),
        };
        return tampered(
            l,
            Blame::Citing,
            Check::DelegationLink,
            format!(
                "{from} cites leaf {leaf} at {to}, {backing}; recorder {} anchored leaf {} there",
                hex_id(&rec),
                target.leaf
            ),
        );
    }
    // Both ends: the other side's word that this delegation is the one it took part in.
    let mut notes: Vec<String> = Vec::new();
    match kind {
        LinkKind::DelegatedTo => {
            // The accepting event names its parent: it must be this offer.
            if let Some(p) = &target.parent {
                let names_offer = check_ref(p, &rec).is_ok_and(|c| {
                    c.recorder == citing.recorder
                        && p.seq == origin_seq
                        && match (&c.proof, origin_leaf) {
                            (
                                RefProof::Bound(h)
                                | RefProof::Signed(h)
                                | RefProof::BadSignature(h, _),
                                Some(o),
                            ) => *h == o,
                            (RefProof::Unbound, _) => false,
                            (_, None) => true,
                        }
                });
                if !names_offer {
                    let named = format!(
                        "its parent_event is event {} of recorder {}",
                        p.seq,
                        p.recorder.as_deref().unwrap_or("(its own)")
                    );
                    return if signed && matches!(role, Role::Accept { .. }) {
                        tampered(
                            l,
                            Blame::Linked,
                            Check::DelegationLink,
                            format!(
                                "recorder {} signed a receipt saying {to} accepts offer {origin_seq} of recorder {}, and {named}",
                                hex_id(&rec),
                                hex_id(&citing.recorder)
                            ),
                        )
                    } else {
                        tampered(
                            l,
                            Blame::Citing,
                            Check::DelegationLink,
                            format!(
                                "{from} says {to} accepted its offer {origin_seq}, and {named}: it accepted another delegation"
                            ),
                        )
                    };
                }
            } else if target.opened {
                // A signed accept of this very offer on an event that names no parent: the
                // receiving recorder signed one thing and recorded another.
                let blame = if signed && matches!(role, Role::Accept { .. }) {
                    Blame::Linked
                } else {
                    Blame::Citing
                };
                return tampered(
                    l,
                    blame,
                    Check::DelegationLink,
                    format!(
                        "{from} says {to} accepted its offer {origin_seq}, and {to} names no parent_event: it accepted no delegation"
                    ),
                );
            } else if !(signed && matches!(role, Role::Accept { .. })) {
                // Not opened (withheld or erased): only a signed accept of this offer binds it.
                return incomplete(
                    l,
                    Blame::Citing,
                    format!(
                        "{to} is not opened, and the reference is not a validly signed accept of offer {origin_seq}: nothing shows {to} accepted this delegation"
                    ),
                );
            }
            if !matches!(role, Role::Accept { .. }) || !signed {
                notes.push(format!(
                    "the receipt is {} and does not bind the offer it answers{}",
                    if signed {
                        "a plain receipt (made before receipts named their roles)"
                    } else {
                        "not signed by the receiving recorder"
                    },
                    if target.opened {
                        "; the accepting event's own parent_event names this offer"
                    } else {
                        ""
                    }
                ));
            }
        }
        LinkKind::ParentEvent => {
            let addressed = signed && matches!(role, Role::Offer { .. });
            let acknowledged = cx
                .acks
                .get(&(rec, r.seq))
                .is_some_and(|s| s.contains(&(citing.recorder, citing.seq)));
            if !addressed && !acknowledged {
                if signed {
                    notes.push(
                        "a plain receipt (made before receipts named their roles): it does not name the recorder the offer was made to".into(),
                    );
                } else {
                    return incomplete(
                        l,
                        Blame::Citing,
                        format!(
                            "{from} accepts {to}, but nothing of recorder {} says the offer was made to it: the reference is not signed by that recorder ({}), and its log records no receipt of this accept",
                            hex_id(&rec),
                            match &proof {
                                RefProof::BadSignature(_, why) => why.clone(),
                                _ => "no signature".into(),
                            }
                        ),
                    );
                }
            } else if !addressed {
                notes.push(format!(
                    "the offer's reference is not an addressed, signed offer; recorder {}'s own log records the receipt of this accept",
                    hex_id(&rec)
                ));
            }
        }
    }
    // Time: the rules of `time`, dated from the anchoring.
    match judge_times(
        cx.anchored_at,
        (&to, target, &rec),
        (&from, own, &citing.recorder),
    ) {
        Some(TimeFinding::Impossible(blame, why)) => {
            return tampered(l, blame, Check::DelegationTime, why);
        }
        Some(TimeFinding::Disagree(why)) => return incomplete(l, Blame::Case, why),
        None => {}
    }
    if !(target.opened || target.erased) {
        return incomplete(
            l,
            Blame::Linked,
            format!(
                "{to}, cited by {from}, matches the leaf hash, but its payload is withheld and no erasure of it is proven"
            ),
        );
    }
    if let RefProof::BadSignature(_, why) = &proof {
        notes.push(format!("the receipt's signature does not verify ({why})"));
    }
    l.status = Outcome::Verified;
    l.why = format!(
        "{to} is disclosed under an anchored root, with the leaf hash that {from} cites{}{}",
        if target.erased {
            " (its payload was erased, proven by its recorder's afr.erase event)"
        } else {
            ""
        },
        notes.iter().map(|n| format!("; {n}")).collect::<String>()
    );
    Some(l)
}
