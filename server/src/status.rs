//! What `afr status --json` prints and `GET /v1/status` answers: one JSON object computed from
//! the store, in one place, so the CLI and the server cannot drift apart.
//!
//! The object is read from a [`Store`] as written: a server in buffered mode may hold a few
//! events that are not counted yet.

use afr_anchorer::{AnchorStore, ForkAlarm, ReceiptState};
use afr_recorder::{
    RecordError, Store, now_us,
    roots::{Roots, RootsError},
};
use serde_json::{Value, json};

/// The status object of the recorder whose store is `store` (fields: `docs/api.md`).
///
/// An epoch counts as anchored once its anchor is confirmed as the anchorer's policy asks (a
/// depth, or the finalized block) and every earlier epoch is too: included or pending anchors
/// do not shrink the compromise window.
pub fn status_json(store: &Store) -> Result<Value, RecordError> {
    let recorder = store.recorder_id()?;
    let events = store.record_count()?;
    let last = store.last_epoch()?;
    let (open_epoch, open_count) = match &last {
        Some(h) => (h.epoch + 1, events.saturating_sub(h.end_seq())),
        None => (0, events),
    };
    let sealed = last.as_ref().map_or(0, |h| h.epoch + 1);
    let mut anchored = 0u64;
    let mut states = [0u64; 4];
    let mut first_unanchored_seq = None;
    let mut last_receipt = None;
    for e in 0..sealed {
        let receipt = store.anchor(e)?;
        if let Some(a) = &receipt {
            states[ReceiptState::ALL
                .iter()
                .position(|s| *s == a.state)
                .unwrap_or(0)] += 1;
        }
        match receipt {
            Some(a) if first_unanchored_seq.is_none() && a.state.covers() => {
                anchored += 1;
                last_receipt = Some(a);
            }
            _ => {
                if first_unanchored_seq.is_none() {
                    first_unanchored_seq = store.epoch(e)?.map(|h| h.first_seq);
                }
            }
        }
    }
    let marker = store.anchor_marker()?;
    let finality = marker
        .as_ref()
        .map(|m| afr_anchorer::Finality::from_code(m.finality).to_string());
    let archived = store.archived_anchors()?.len();
    if first_unanchored_seq.is_none() && open_count > 0 {
        first_unanchored_seq = Some(events - open_count);
    }
    // The compromise window: how long the oldest event not yet covered by a confirmed anchored
    // root has been open to rewriting by whoever controls this host.
    let window_s = match first_unanchored_seq {
        Some(seq) => store
            .record(seq)?
            .map(|rec| now_us().saturating_sub(rec.timestamp_us) as f64 / 1e6),
        None => None,
    };
    let alarm = store.fork_alarm()?;
    let chain_in_use = marker.is_some() || states.iter().any(|&n| n > 0);
    let roots = roots_json(
        store,
        sealed,
        open_count,
        events,
        chain_in_use.then_some(anchored),
    )?;
    Ok(json!({
        "recorder": format!("0x{}", hex::encode(recorder)),
        "events": events,
        "sealed_epochs": sealed,
        "anchored_epochs": anchored,
        "pending_epochs": sealed - anchored,
        "receipt_states": {
            "pending": states[0], "included": states[1],
            "confirmed": states[2], "finalized": states[3],
        },
        "covered_when": finality,
        "verified_upto": marker.as_ref().and_then(|m| m.epoch),
        "archived_receipts": archived,
        "open_epoch": open_epoch,
        "open_epoch_events": open_count,
        "last_epoch_root": last.as_ref().map(|h| h.root().to_hex()),
        "last_sealed_at_us": last.as_ref().map(|h| h.sealed_at_us),
        "compromise_window_s": window_s,
        "last_anchor": last_receipt.as_ref().map(|a| json!({
            "epoch": a.epoch, "chain_id": a.chain_id, "tx": format!("0x{}", hex::encode(a.tx)),
            "block": a.block, "gas_used": a.gas_used, "effective_gas_price": a.effective_gas_price,
            "l1_fee": a.l1_fee, "cost_wei": a.cost_wei().to_string(), "state": a.state.name(),
            "replaced": a.replaced.len(),
        })),
        "fork_alarm": alarm.as_ref().map(fork_alarm_json),
        "roots": roots,
    }))
}

/// Age in seconds of the oldest event not under the first `covered` sealed epochs (the first
/// event of epoch `covered`, or of the open epoch); 0 when every event is covered.
fn uncovered_age(
    store: &Store,
    covered: u64,
    sealed: u64,
    open_count: u64,
    events: u64,
    now: u64,
) -> Result<f64, RecordError> {
    let seq = if covered < sealed {
        store.epoch(covered)?.map(|h| h.first_seq)
    } else if open_count > 0 {
        Some(events - open_count)
    } else {
        None
    };
    Ok(match seq {
        Some(seq) => store
            .record(seq)?
            .map_or(0.0, |rec| now.saturating_sub(rec.timestamp_us) as f64 / 1e6),
        None => 0.0,
    })
}

/// The independent roots of `<dir>/roots/` (docs/spec/roots.md), read only: the latest signed
/// checkpoint, the size each witness last cosigned, the timestamp tokens, and the compromise
/// window per root. A root's window is the age of the oldest event not under it (0: every
/// event is; `null`: the root is not in use here): `chain`, epochs covered by a confirmed
/// anchor (`anchored`, `None` when nothing was ever anchored); `witnesses`, epochs under a
/// checkpoint some witness cosigned; `witnesses_all`, one every witness cosigned; `tsa`, one
/// with a timestamp token. An unreadable roots directory is reported in `error`, not fatal.
fn roots_json(
    store: &Store,
    sealed: u64,
    open_count: u64,
    events: u64,
    anchored: Option<u64>,
) -> Result<Value, RecordError> {
    // One clock reading, so that roots covering the same epochs show the same window.
    let now = now_us();
    let age =
        |covered: u64| uncovered_age(store, covered.min(sealed), sealed, open_count, events, now);
    let chain = anchored.map(age).transpose()?;
    let Some(dir) = store.path().parent() else {
        return Ok(json!({ "window_s": { "chain": chain } }));
    };
    let roots = match Roots::open(dir, false) {
        Ok(r) => r,
        Err(e) => return Ok(json!({ "error": e.to_string(), "window_s": { "chain": chain } })),
    };
    let read = || -> Result<_, RootsError> {
        let latest = roots.latest()?;
        let witnesses = roots.witness_sizes()?;
        // Tokens: `<size:020>.<tsa>.tsr`, listed without reading them.
        let mut tokens: Vec<(u64, String)> = Vec::new();
        if let Ok(rd) = std::fs::read_dir(roots.dir()) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some((size, tsa)) = name
                    .strip_suffix(".tsr")
                    .and_then(|r| r.split_once('.'))
                    .and_then(|(n, t)| Some((n.parse::<u64>().ok()?, t.to_owned())))
                {
                    tokens.push((size, tsa));
                }
            }
        }
        Ok((latest, witnesses, tokens))
    };
    let (latest, witnesses, tokens) = match read() {
        Ok(x) => x,
        Err(e) => return Ok(json!({ "error": e.to_string(), "window_s": { "chain": chain } })),
    };
    let mut per_witness = serde_json::Map::new();
    for (name, &size) in &witnesses {
        per_witness.insert(
            name.clone(),
            json!({ "cosigned_size": size, "window_s": age(size)? }),
        );
    }
    let any = witnesses.values().copied().max();
    let all = witnesses.values().copied().min();
    let timestamped = tokens.iter().map(|(s, _)| *s).max();
    let mut tsas: Vec<&str> = tokens.iter().map(|(_, t)| t.as_str()).collect();
    tsas.sort_unstable();
    tsas.dedup();
    Ok(json!({
        "latest_checkpoint": latest.as_ref().map(|c| json!({
            "size": c.checkpoint.size,
            "root": c.checkpoint.root.to_hex(),
            "signatures": c.note.signatures.len(),
            "tokens": c.tokens.len(),
        })),
        "witnesses": per_witness,
        "timestamp_tokens": tokens.len(),
        "tsas": tsas,
        "timestamped_size": timestamped,
        "window_s": {
            "chain": chain,
            "witnesses": any.map(age).transpose()?,
            "witnesses_all": all.map(age).transpose()?,
            "tsa": timestamped.map(age).transpose()?,
        },
    }))
}

/// A fork alarm as JSON (the `fork_alarm` field of the status object).
pub fn fork_alarm_json(a: &ForkAlarm) -> Value {
    json!({
        "epoch": a.epoch,
        "local_root": format!("0x{}", hex::encode(a.local)),
        "onchain_root": format!("0x{}", hex::encode(a.onchain)),
        "chain_id": a.chain_id,
        "contract": format!("0x{}", hex::encode(a.contract)),
        "tx": a.tx.map(|t| format!("0x{}", hex::encode(t))),
        "block": a.block,
        "seen_at_us": a.seen_at_us,
    })
}

/// The one-line, loud description of a fork alarm, from its JSON ([`fork_alarm_json`]).
pub fn fork_alarm_line(a: &Value) -> String {
    let s = |k: &str| a[k].as_str().unwrap_or_default().trim_start_matches("0x");
    let n = |k: &str| a[k].as_u64().unwrap_or_default();
    let epoch = n("epoch");
    format!(
        "FORK ALARM: epoch {epoch} is anchored on chain {} (contract 0x{}) as 0x{}, but the local \
         root is 0x{}{}; seen at {} µs since the Unix epoch. The anchorer posts nothing until \
         this is investigated and cleared (afr anchor --clear-fork-alarm {epoch}).",
        n("chain_id"),
        s("contract"),
        s("onchain_root"),
        s("local_root"),
        match (a["tx"].as_str(), a["block"].as_u64()) {
            (Some(tx), Some(b)) => format!(" (anchored by tx {tx} in block {b})"),
            (Some(tx), None) => format!(" (anchored by tx {tx})"),
            _ => String::new(),
        },
        n("seen_at_us"),
    )
}

/// The Prometheus text exposition of a status object (`GET /metrics`), plus the server's own
/// `counters` (name, help, value; Prometheus type counter).
pub fn metrics_text(status: &Value, counters: &[(&str, &str, u64)]) -> String {
    let n = |k: &str| status[k].as_u64().unwrap_or_default().to_string();
    let window = status["compromise_window_s"].as_f64().unwrap_or(0.0);
    let fork = u8::from(!status["fork_alarm"].is_null());
    let from_status = [
        (
            "afr_events_total",
            "Events recorded (written to the store).",
            "counter",
            n("events"),
        ),
        (
            "afr_sealed_epochs_total",
            "Sealed epochs.",
            "counter",
            n("sealed_epochs"),
        ),
        (
            "afr_anchored_epochs",
            "Sealed epochs covered by a confirmed anchor (with every earlier epoch).",
            "gauge",
            n("anchored_epochs"),
        ),
        (
            "afr_pending_epochs",
            "Sealed epochs not yet covered by a confirmed anchor.",
            "gauge",
            n("pending_epochs"),
        ),
        (
            "afr_open_epoch_events",
            "Events in the open (unsealed) epoch.",
            "gauge",
            n("open_epoch_events"),
        ),
        (
            "afr_compromise_window_seconds",
            "Age of the oldest event not covered by a confirmed anchored root (0: none).",
            "gauge",
            window.to_string(),
        ),
        (
            "afr_fork_alarm",
            "1 while a fork alarm is raised, else 0.",
            "gauge",
            fork.to_string(),
        ),
    ];
    let counters = counters
        .iter()
        .map(|(name, help, v)| (*name, *help, "counter", v.to_string()));
    let mut out = String::new();
    for (name, help, kind, value) in from_status.into_iter().chain(counters) {
        out += &format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
    }
    out
}
