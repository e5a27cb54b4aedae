//! The case's answer once its bundles are verified: each party's verdict, the links between
//! their recorders, the chains, and the case's outcome.

use std::collections::{BTreeMap, BTreeSet};

use afr_core::{
    Hash32, RecorderId,
    delegation::check_ref,
    verify::{Check, Failure, Location, Outcome},
};

use super::{
    Blame, BundleVerdict, Case, CaseReport, Checked, DELEGATED_TOOL, Known, Link, LinkKind,
    PartyVerdict,
    chains::{Edges, chains},
    hex_id,
    link::{Ctx, Site, link},
    nonces::pool_nonces,
    time::AnchoredAt,
};

/// Everything after the bundles are verified: parties, links, chains, the case's answer.
pub(super) fn judge(case: &Case, mut checked: Vec<Checked>, notes: Vec<String>) -> CaseReport {
    let trust = &case.trust;
    let n = trust.parties.len();
    let replays = pool_nonces(&mut checked, n);
    let mut parties: Vec<PartyVerdict> = trust
        .parties
        .iter()
        .enumerate()
        .map(|(i, p)| PartyVerdict {
            name: Some(p.name.clone()),
            recorders: p.recorders.clone(),
            outcome: Outcome::Verified,
            first_failure: None,
            missing: Vec::new(),
            bundles: Vec::new(),
            in_case: case.listed || case.bundles.get(i).is_some_and(|b| !b.is_empty()),
        })
        .collect();
    parties.push(PartyVerdict {
        name: None,
        recorders: Vec::new(),
        outcome: Outcome::Verified,
        first_failure: None,
        missing: Vec::new(),
        bundles: Vec::new(),
        in_case: false,
    });
    // What the bundles that did not fail disclose, by recorder and sequence number.
    let mut known: BTreeMap<(RecorderId, u64), Known> = BTreeMap::new();
    // When each anchored epoch was anchored: (block, block time, where the time came from).
    let mut anchored_at: AnchoredAt = BTreeMap::new();
    // Epoch roots by recorder, to find two bundles of one recorder that fork.
    let mut roots: BTreeMap<(RecorderId, u64), (Hash32, String)> = BTreeMap::new();
    let mut failed: BTreeSet<RecorderId> = BTreeSet::new();
    for c in &checked {
        // Always there: a bundle's party is one of the trust's `n`, else the last entry.
        let Some(p) = parties.get_mut(c.party.unwrap_or(n)) else {
            continue;
        };
        p.in_case = true;
        let v = &c.verdict;
        match v.outcome {
            Outcome::Tampered => {
                if let Some(f) = &v.first_failure {
                    p.tamper(f.clone(), Some(c.file.clone()));
                }
                if let Some(r) = v.recorder {
                    failed.insert(r);
                }
            }
            _ => p
                .missing
                .extend(v.missing.iter().map(|m| format!("{}: {m}", c.file))),
        }
        let Some(rec) = v.recorder else { continue };
        // A bundle whose only failure is a root other than the anchored one still commits to
        // its roots: compared with the recorder's other bundles, it shows the fork.
        let roots_hold = matches!(v.outcome, Outcome::Verified | Outcome::Incomplete)
            || v.first_failure
                .as_ref()
                .is_some_and(|f| f.check == Check::AnchoredRoot);
        for (e, root) in v.epoch_roots.iter().filter(|_| roots_hold) {
            match roots.get(&(rec, *e)) {
                Some((r, other)) if r != root => p.tamper(
                    Failure {
                        check: Check::Fork,
                        location: Location::Epoch(*e),
                        detail: format!(
                            "bundles {other} and {} of recorder {} commit to different roots for epoch {e} ({r} and {root})",
                            c.file,
                            hex_id(&rec)
                        ),
                    },
                    Some(c.file.clone()),
                ),
                Some(_) => {}
                None => {
                    roots.insert((rec, *e), (*root, c.file.clone()));
                }
            }
        }
        let (Some(rep), Outcome::Verified | Outcome::Incomplete) = (&c.report, v.outcome) else {
            continue;
        };
        let anchored: BTreeSet<u64> = v.anchors.iter().map(|a| a.0).collect();
        for &(e, _, block, _) in &v.anchors {
            let time = c
                .anchors
                .as_ref()
                .and_then(|a| a.roots.get(&e))
                .and_then(|p| p.block_time);
            anchored_at
                .entry((rec, e))
                .or_insert((block, time, c.time_src));
        }
        let payloads: BTreeMap<u64, &afr_core::event::Payload> =
            rep.opened.iter().map(|(s, p)| (*s, p)).collect();
        for (seq, l) in &rep.leaves {
            let opened = payloads.get(seq);
            known.entry((rec, *seq)).or_insert_with(|| Known {
                leaf: l.leaf,
                timestamp_us: l.timestamp_us,
                epoch: l.epoch,
                anchored: anchored.contains(&l.epoch),
                opened: opened.is_some(),
                erased: rep.erased.contains(seq),
                tool: opened.map(|p| p.intent.tool.clone()),
                parent: opened
                    .and_then(|p| p.delegation_provenance.as_ref())
                    .and_then(|d| d.parent_event.clone()),
            });
        }
    }
    for (i, f, file) in replays {
        if let Some(p) = parties.get_mut(i) {
            p.in_case = true;
            p.tamper(f, Some(file));
        }
    }
    // Recorders with a bundle that did not fail.
    let mut with_bundle: BTreeSet<RecorderId> = BTreeSet::new();
    for c in &checked {
        if let (Some(r), Outcome::Verified | Outcome::Incomplete) =
            (c.verdict.recorder, c.verdict.outcome)
        {
            with_bundle.insert(r);
        }
    }

    // What each delegating side's own log records of the accepts of its offers.
    let mut acks: BTreeMap<(RecorderId, u64), BTreeSet<(RecorderId, u64)>> = BTreeMap::new();
    for c in &checked {
        let (Some(own), Some(rep), Outcome::Verified | Outcome::Incomplete) =
            (c.verdict.recorder, &c.report, c.verdict.outcome)
        else {
            continue;
        };
        for (seq, payload) in &rep.opened {
            let Some(d) = &payload.delegation_provenance else {
                continue;
            };
            let (offer, _) = origin_of(payload, *seq);
            for r in &d.delegated_to {
                if let Ok(c) = check_ref(r, &own) {
                    acks.entry((own, offer))
                        .or_default()
                        .insert((c.recorder, r.seq));
                }
            }
        }
    }
    // Every cross-recorder reference of an opened event of a bundle that did not fail.
    let mut links: Vec<Link> = Vec::new();
    let mut edges: Edges = BTreeMap::new();
    // An event disclosed in two bundles is read once.
    let mut read: BTreeSet<(RecorderId, u64)> = BTreeSet::new();
    for c in &checked {
        let (Some(own), Some(rep), Some(from_party), Outcome::Verified | Outcome::Incomplete) =
            (c.verdict.recorder, &c.report, c.party, c.verdict.outcome)
        else {
            continue;
        };
        for (seq, payload) in &rep.opened {
            let Some(d) = &payload.delegation_provenance else {
                continue;
            };
            if !read.insert((own, *seq)) {
                continue;
            }
            let refs = d
                .parent_event
                .iter()
                .map(|r| (LinkKind::ParentEvent, r))
                .chain(d.delegated_to.iter().map(|r| (LinkKind::DelegatedTo, r)));
            let (origin, origin_leaf) = origin_of(payload, *seq);
            let origin_leaf = origin_leaf.or_else(|| {
                (origin != *seq)
                    .then(|| known.get(&(own, origin)).map(|k| k.leaf))
                    .flatten()
            });
            for (kind, r) in refs {
                let citing = Site {
                    party: from_party,
                    recorder: own,
                    seq: *seq,
                };
                let link = link(
                    &citing,
                    kind,
                    r,
                    (origin, origin_leaf),
                    &Ctx {
                        trust,
                        known: &known,
                        anchored_at: &anchored_at,
                        with_bundle: &with_bundle,
                        failed: &failed,
                        acks: &acks,
                    },
                );
                let Some(link) = link else {
                    // A reference inside this log: part of the chain if it holds.
                    if kind == LinkKind::ParentEvent
                        && let Some(k) = known.get(&(own, r.seq))
                        && r.leaf_hash
                            .as_deref()
                            .is_none_or(|h| Hash32::from_hex(h) == Some(k.leaf))
                    {
                        edges
                            .entry(((own, r.seq), (own, *seq)))
                            .or_default()
                            .0
                            .insert("same-log");
                    }
                    continue;
                };
                if let Some(to) = link.to_recorder {
                    let (from, to) = match kind {
                        LinkKind::ParentEvent => ((to, link.to_seq), (own, *seq)),
                        LinkKind::DelegatedTo => ((own, origin), (to, link.to_seq)),
                    };
                    let e = edges.entry((from, to)).or_default();
                    e.0.insert(kind.name());
                    e.1 = Some(worst(e.1, link.status));
                }
                links.push(link);
            }
        }
    }
    // The links' findings, on the parties they are about.
    let mut missing = Vec::new();
    for l in &links {
        let who = match l.blame {
            Some(Blame::Citing) => Some(l.from_party),
            Some(Blame::Linked) => l.to_party,
            _ => None,
        };
        match (l.status, who) {
            (Outcome::Verified, _) => {}
            (Outcome::Tampered, Some(i)) => {
                let at = if l.blame == Some(Blame::Linked) {
                    l.to_seq
                } else {
                    l.from_seq
                };
                if let Some(p) = parties.get_mut(i) {
                    p.in_case = true;
                    p.tamper(
                        Failure {
                            check: l.check.unwrap_or(Check::DelegationLink),
                            location: Location::Event(at),
                            detail: l.why.clone(),
                        },
                        None,
                    );
                }
            }
            (_, Some(i)) => {
                if let Some(p) = parties.get_mut(i) {
                    p.in_case = true;
                    p.missing.push(l.why.clone());
                }
            }
            (_, None) => missing.push(l.why.clone()),
        }
    }
    for (i, p) in parties.iter_mut().enumerate() {
        let has = checked.iter().any(|c| c.party.unwrap_or(n) == i);
        if p.in_case && !has && p.name.is_some() {
            p.missing.push("no bundle of this party was given".into());
        }
        if p.outcome != Outcome::Tampered {
            p.outcome = if p.missing.is_empty() {
                Outcome::Verified
            } else {
                Outcome::Incomplete
            };
        }
    }
    for c in checked {
        if let Some(p) = parties.get_mut(c.party.unwrap_or(n)) {
            p.bundles.push(BundleVerdict {
                file: c.file,
                size: c.size,
                sha256: c.sha256,
                trust: c.trust,
                verdict: c.verdict,
            });
        }
    }
    let involved = parties.iter().filter(|p| p.in_case);
    let outcome = if involved.clone().any(|p| p.outcome == Outcome::Tampered) {
        Outcome::Tampered
    } else if !missing.is_empty() || involved.clone().any(|p| p.outcome == Outcome::Incomplete) {
        Outcome::Incomplete
    } else {
        Outcome::Verified
    };
    let chains = chains(&edges, &known, trust);
    CaseReport {
        outcome,
        trust: trust.clone(),
        parties,
        links,
        chains,
        missing,
        notes,
    }
}

/// The delegating event an opened event at `seq` stands for, and its leaf hash if named: for
/// `afr.delegated`, the offer its `intent.args.offer` names; else the event itself.
fn origin_of(payload: &afr_core::event::Payload, seq: u64) -> (u64, Option<Hash32>) {
    if payload.intent.tool != DELEGATED_TOOL {
        return (seq, None);
    }
    let offer = |key: &str| payload.intent.args.get("offer").and_then(|o| o.get(key));
    (
        offer("seq").and_then(|s| s.as_u64()).unwrap_or(seq),
        offer("leaf_hash")
            .and_then(|h| h.as_str())
            .and_then(|h| Hash32::from_hex(&h.to_ascii_lowercase())),
    )
}

/// The worse of two answers: tampered, then incomplete, then verified.
fn worst(a: Option<Outcome>, b: Outcome) -> Outcome {
    let rank = |o: Outcome| match o {
        Outcome::Verified => 0,
        Outcome::Incomplete => 1,
        Outcome::Tampered => 2,
    };
    match a {
        Some(a) if rank(a) >= rank(b) => a,
        _ => b,
    }
}
