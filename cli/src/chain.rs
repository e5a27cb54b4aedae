//! The events that make up one delegation chain in this recorder's log, for `afr disclose
//! --chain SEQ`: SEQ, its ancestors and descendants (by `parent_event`), and the recorder's
//! `afr.delegated` events holding the other side's receipts for any of them. Disclosed with
//! keys, they are this recorder's half of a cross-party case (`docs/spec/delegation.md`).

use std::{collections::BTreeSet, path::Path};

use afr_recorder::{LogReader, query::Query};
use afr_server::client::Client;
use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Where events are read: the store, or the server running on it.
pub(crate) enum Events {
    Local(LogReader),
    Served(Client),
}

impl Events {
    /// The log of `dir`: through `afr serve` when it runs, else the store read-only.
    pub(crate) fn open(dir: &Path) -> Result<Events> {
        Ok(match Client::running(dir) {
            Some(c) => Events::Served(c),
            None => Events::Local(LogReader::open(dir)?),
        })
    }

    /// `(seq, event)` of every event matching `expr` (the event `None` if erased).
    pub(crate) fn find(&mut self, expr: &str) -> Result<Vec<(u64, Option<Value>)>> {
        match self {
            Events::Local(r) => {
                let q = Query::parse(expr).map_err(|e| anyhow::anyhow!("{e}"))?;
                let res = r.query(&q)?;
                r.load_events(&res.matches)
                    .zip(&res.matches)
                    .map(|(e, &s)| Ok((s, e?.event_json())))
                    .collect()
            }
            Events::Served(c) => {
                let target = format!(
                    "/v1/events?query={}&limit=1000000",
                    afr_gateway::sink::url_encode(expr)
                );
                let r = c.request("GET", &target, None, b"")?;
                if r.status != 200 {
                    bail!("afr serve answered {}: {}", r.status, r.error_message());
                }
                r.body
                    .split(|b| *b == b'\n')
                    .filter(|l| !l.is_empty())
                    .map(|l| {
                        let v: Value = serde_json::from_slice(l).context("afr serve: query")?;
                        let seq = v["seq"].as_u64().context("afr serve: a line without seq")?;
                        Ok((seq, v.get("event").filter(|e| !e.is_null()).cloned()))
                    })
                    .collect()
            }
        }
    }
}

/// The chain of `seq` in the log of `dir`, ascending.
pub fn seqs(dir: &Path, seq: u64) -> Result<Vec<u64>> {
    let mut events = Events::open(dir)?;
    let chain_of = |events: &mut Events, seq: u64| -> Result<Vec<(u64, Option<Value>)>> {
        events.find(&format!(
            "seq = {seq} or ancestors({seq}) or descendants({seq})"
        ))
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
    for (s, ev) in events.find(&format!(
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
