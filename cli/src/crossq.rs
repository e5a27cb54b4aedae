//! `afr query … --bundle FILE` (other recorders' disclosure bundles, with keys): the
//! `ancestors(N)` and `descendants(N)` of the query are followed across recorders, through
//! `parent_event` references into the bundles and through this recorder's `afr.delegated`
//! receipts (`docs/spec/delegation.md`). Each bundle is checked on its own first; whether the
//! evidence holds against the chain is `afr-verify case`'s question, not this one's.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use afr_core::{
    Hash32, Payload, RecorderId,
    bundle::{DisclosedLeaf, verify_bundle},
    delegation::parse_recorder,
    event::EventRef,
    text::escape,
    verify::Outcome,
};
use afr_recorder::query::{Query, Relation};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use afr_client::Door;

/// One other recorder's disclosed events.
struct Foreign {
    recorder: RecorderId,
    events: BTreeMap<u64, Payload>,
    leaves: BTreeMap<u64, DisclosedLeaf>,
}

/// An event of another recorder reached from the query's relations.
struct Row {
    recorder: RecorderId,
    seq: u64,
    event: Option<Payload>,
    /// How it was reached.
    via: String,
    /// Whether the reference's leaf hash matches the disclosed record.
    link: &'static str,
}

fn hexr(r: &RecorderId) -> String {
    format!("0x{}", hex::encode(r))
}

fn load(files: &[PathBuf]) -> Result<Vec<Foreign>> {
    let mut out: Vec<Foreign> = Vec::new();
    for f in files {
        let bytes = std::fs::read(f).with_context(|| format!("cannot read {}", f.display()))?;
        let rep = verify_bundle(&bytes);
        if rep.outcome == Outcome::Tampered {
            bail!(
                "{} does not verify on its own ({}); not followed",
                f.display(),
                rep.first_failure
                    .map(|x| format!("{}: {}", x.check, x.detail))
                    .unwrap_or_default()
            );
        }
        let recorder = rep.recorder.context("a bundle without a recorder")?;
        let fr = match out.iter_mut().find(|x| x.recorder == recorder) {
            Some(x) => x,
            None => {
                out.push(Foreign {
                    recorder,
                    events: BTreeMap::new(),
                    leaves: BTreeMap::new(),
                });
                out.last_mut().context("just pushed")?
            }
        };
        fr.events.extend(rep.opened);
        fr.leaves.extend(rep.leaves);
    }
    Ok(out)
}

/// A reference from one event to another: the reference, its parent and its child, each as
/// `(recorder, seq)`.
type Edge = (EventRef, (RecorderId, u64), (RecorderId, u64));

/// Where `r`, made in `own`'s log, points: `(recorder, seq)`.
fn target(r: &EventRef, own: &RecorderId) -> Option<(RecorderId, u64)> {
    let rec = match &r.recorder {
        Some(s) => parse_recorder(&s.to_ascii_lowercase())?,
        None => *own,
    };
    Some((rec, r.seq))
}

/// Compares a reference's leaf hash with the record it names, when both are known.
fn link(r: &EventRef, leaf: Option<&Hash32>) -> &'static str {
    if r.recorder.is_none() {
        return "same log";
    }
    match (r.leaf_hash.as_deref().and_then(Hash32::from_hex), leaf) {
        (None, _) => "not bound to a leaf hash",
        (Some(_), None) => "record not disclosed",
        (Some(a), Some(b)) if a == *b => "leaf hash matches",
        _ => "LEAF HASH DIFFERS",
    }
}

/// The payload of an event as `afr query --json` prints it.
fn payload_of(v: &Value) -> Option<Payload> {
    serde_json::from_value::<afr_core::EventInput>(v.clone())
        .ok()
        .map(|e| e.into_payload().1)
}

/// The rows reached from `q`'s relations in the log of `dir` (recorder `own`).
fn follow(dir: &Path, own: RecorderId, q: &Query, foreign: &[Foreign]) -> Result<Vec<Row>> {
    let mut events = Door::reader(dir)?;
    let mut rows = Vec::new();
    let mut reached: BTreeSet<(RecorderId, u64)> = BTreeSet::new();
    let find = |recorder: &RecorderId| foreign.iter().find(|f| f.recorder == *recorder);
    for (rel, seq) in q.relations() {
        match rel {
            Relation::Ancestors => {
                // The local chain's top: the event whose parent is in another log.
                let local = events.events(&format!("seq = {seq} or ancestors({seq})"))?;
                let mut next = local.iter().find_map(|(s, e)| {
                    let p = payload_of(e.as_ref()?)?;
                    let r = p.delegation_provenance?.parent_event?;
                    let t = target(&r, &own)?;
                    (t.0 != own).then(|| (r, t, format!("parent_event of {} {s}", hexr(&own))))
                });
                while let Some((r, (rec, s), via)) = next.take() {
                    let Some(f) = find(&rec) else { break };
                    if !reached.insert((rec, s)) {
                        break;
                    }
                    let ev = f.events.get(&s).cloned();
                    next = ev.as_ref().and_then(|p| {
                        let pr = p.delegation_provenance.clone()?.parent_event?;
                        let t = target(&pr, &rec)?;
                        (t.0 != own).then(|| (pr, t, format!("parent_event of {} {s}", hexr(&rec))))
                    });
                    rows.push(Row {
                        recorder: rec,
                        seq: s,
                        link: link(&r, f.leaves.get(&s).map(|l| &l.leaf)),
                        event: ev,
                        via,
                    });
                }
            }
            Relation::Descendants => {
                let local: BTreeSet<u64> = events
                    .events(&format!("seq = {seq} or descendants({seq})"))?
                    .into_iter()
                    .map(|(s, _)| s)
                    .collect();
                let mut frontier: BTreeSet<(RecorderId, u64)> =
                    local.iter().map(|s| (own, *s)).collect();
                // This recorder's receipts of the other side's accepting events.
                let mut edges: Vec<Edge> = Vec::new();
                for (s, e) in events.events(&format!(
                    "intent.tool = \"{}\"",
                    afr_recorder::delegation::DELEGATED_TOOL
                ))? {
                    let Some(e) = e else { continue };
                    let Some(offer) = e.pointer("/intent/args/offer/seq").and_then(Value::as_u64)
                    else {
                        continue;
                    };
                    let Some(p) = payload_of(&e) else { continue };
                    if !local.contains(&offer) && !local.contains(&s) {
                        continue;
                    }
                    for r in p
                        .delegation_provenance
                        .map(|d| d.delegated_to)
                        .unwrap_or_default()
                    {
                        if let Some(t) = target(&r, &own) {
                            edges.push((r, (own, offer), t));
                        }
                    }
                }
                // Every disclosed event with its parent, across the bundles.
                for f in foreign {
                    for (s, p) in &f.events {
                        if let Some(r) =
                            p.delegation_provenance.clone().and_then(|d| d.parent_event)
                            && let Some(t) = target(&r, &f.recorder)
                        {
                            edges.push((r, t, (f.recorder, *s)));
                        }
                    }
                }
                loop {
                    let mut grew = false;
                    for (r, from, to) in &edges {
                        if frontier.contains(from) && to.0 != own && !frontier.contains(to) {
                            frontier.insert(*to);
                            grew = true;
                            if reached.insert(*to)
                                && let Some(f) = find(&to.0)
                            {
                                rows.push(Row {
                                    recorder: to.0,
                                    seq: to.1,
                                    event: f.events.get(&to.1).cloned(),
                                    via: format!("child of {} {}", hexr(&from.0), from.1),
                                    link: link(r, f.leaves.get(&to.1).map(|l| &l.leaf)),
                                });
                            }
                        }
                    }
                    if !grew {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(rows)
}

/// Prints what `q`'s relations reach in the `bundles` (after the local answer).
pub fn print(
    dir: &Path,
    own: RecorderId,
    q: &Query,
    bundles: &[PathBuf],
    json: bool,
) -> Result<()> {
    let foreign = load(bundles)?;
    let rows = follow(dir, own, q, &foreign)?;
    if json {
        for r in &rows {
            println!(
                "{}",
                afr_core::text::escape_json(
                    &json!({
                        "recorder": hexr(&r.recorder),
                        "seq": r.seq,
                        "event": r.event,
                        "via": r.via,
                        "link": r.link,
                    })
                    .to_string()
                )
            );
        }
        return Ok(());
    }
    println!(
        "across recorders ({} bundle{}): {} event{}",
        bundles.len(),
        if bundles.len() == 1 { "" } else { "s" },
        rows.len(),
        if rows.len() == 1 { "" } else { "s" }
    );
    for r in &rows {
        let tool = r
            .event
            .as_ref()
            .map_or("(payload not disclosed)".to_owned(), |p| {
                p.intent.tool.clone()
            });
        println!(
            "  {} seq {:<6} {:<24} {}; {}",
            hexr(&r.recorder),
            r.seq,
            escape(&tool),
            escape(&r.via),
            r.link
        );
    }
    Ok(())
}
