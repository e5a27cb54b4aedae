//! The full recorder with the anchorer running beside it: does anchoring reach the record path?
//!
//! A fresh contract on a local anvil per run; the recorder records in buffered durability while
//! another thread runs anchor passes (`afr anchor --watch`'s loop, every 50 ms) on the same
//! store, signing and posting every epoch as it seals. Events arrive paced (a gap between
//! calls, outside the timing) so that recording lasts long enough for anchoring to overlap it;
//! the same paced run without an anchorer is the control, since pacing itself changes
//! latencies (caches go cold between calls).

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use afr_anchorer::{AnchorStore, anchor_pending, deploy, signer_from_hex};
use afr_recorder::{Config, Recorder};
use anyhow::{Context, Result};

use crate::rq1::{EPOCH_SIZE, Run};

/// One run: `events` recorded while the anchorer posts epochs to `rpc`. Returns the run and
/// the number of epochs anchored while recording, plus the transactions sent.
pub fn run(
    rpc: Option<&str>,
    events: Vec<afr_core::EventInput>,
    gap: Duration,
    dir: &std::path::Path,
) -> Result<(Run, usize, u64)> {
    let signer = signer_from_hex(crate::cost::DEV_KEY)?;
    let store = dir.join("afr");
    afr_recorder::init(&store, signer.address().0.0)?;
    let rec = Recorder::open(&store, Config::buffered(EPOCH_SIZE))?;
    let stop = Arc::new(AtomicBool::new(false));
    let anchorer = rpc.map(|rpc| {
        let (rec, stop, rpc, signer) = (rec.clone(), stop.clone(), rpc.to_owned(), signer.clone());
        std::thread::spawn(move || -> Result<(usize, u64)> {
            let rt = crate::runtime()?;
            let contract = rt.block_on(deploy(&rpc, signer.clone()))?;
            let settings = crate::cost::dev_settings(&rpc, contract, 64);
            let (mut posted, mut txs) = (0, 0);
            loop {
                let done = stop.load(Ordering::Acquire);
                let p = rt.block_on(anchor_pending(rec.store(), signer.clone(), &settings))?;
                posted += p.posted.len();
                txs += p.transactions;
                if done {
                    return Ok((posted, txs));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    });
    let mut lat = Vec::with_capacity(events.len());
    let mut anchored_while_recording = 0;
    for ev in events {
        let t = Instant::now();
        rec.record(ev)?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        std::thread::sleep(gap);
    }
    rec.flush()?;
    // What the chain held when recording ended: epochs the anchorer posted in flight.
    for kv in rec.store().epochs_from(0)? {
        let (e, _) = kv?;
        if rec.store().anchor(e)?.is_some() {
            anchored_while_recording += 1;
        }
    }
    stop.store(true, Ordering::Release);
    let txs = match anchorer {
        Some(a) => {
            a.join()
                .map_err(|_| anyhow::anyhow!("anchorer thread panicked"))?
                .context("anchorer")?
                .1
        }
        None => 0,
    };
    Ok((
        Run {
            latencies_us: lat,
            bytes: 0,
        },
        anchored_while_recording,
        txs,
    ))
}
