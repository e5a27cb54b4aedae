//! The events that make up one delegation chain in this recorder's log, for `afr disclose
//! --chain SEQ`: SEQ, its ancestors and descendants (by `parent_event`), and the recorder's
//! `afr.delegated` events holding the other side's receipts for any of them. Disclosed with
//! keys, they are this recorder's half of a cross-party case (`docs/spec/delegation.md`).

use std::{collections::BTreeSet, path::Path};

use afr_client::Door;
use anyhow::{Result, bail};
use serde_json::Value;

/// The chain of `seq` in the log of `dir`, ascending.
pub fn seqs(dir: &Path, seq: u64) -> Result<Vec<u64>> {
    let mut events = Door::reader(dir)?;
    let chain_of = |events: &mut Door, seq: u64| -> Result<Vec<(u64, Option<Value>)>> {
        Ok(events.events(&format!(
            "seq = {seq} or ancestors({seq}) or descendants({seq})"
        ))?)
    };
    let found = chain_of(&mut events, seq)?;
    let Some((_, first)) = found.iter().find(|(s, _)| *s == seq) else {
        bail!("no event {seq} in the log");
    };
    // An afr.delegated event belongs to the chain of the offer it answers.
    let offer = first
        .as_ref()
        .filter(|e| {
            e.pointer("/intent/tool").and_then(Value::as_str)
                == Some(afr_recorder::delegation::DELEGATED_TOOL)
        })
        .and_then(|e| e.pointer("/intent/args/offer/seq"))
        .and_then(Value::as_u64);
    let mut chain: BTreeSet<u64> = found.into_iter().map(|(s, _)| s).collect();
    if let Some(o) = offer {
        chain.extend(chain_of(&mut events, o)?.into_iter().map(|(s, _)| s));
    }
    let mut out = chain.clone();
    for (s, ev) in events.events(&format!(
        "intent.tool = \"{}\"",
        afr_recorder::delegation::DELEGATED_TOOL
    ))? {
        let offer = ev
            .as_ref()
            .and_then(|e| e.pointer("/intent/args/offer/seq"))
            .and_then(Value::as_u64);
        if offer.is_some_and(|o| chain.contains(&o)) {
            out.insert(s);
        }
    }
    Ok(out.into_iter().collect())
}
