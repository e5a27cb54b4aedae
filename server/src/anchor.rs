//! Anchoring inside the server: a task that runs [`afr_anchorer::anchor_pass`] when an epoch
//! seals and on a timer, never on the ingest path. A failed pass is reported (URLs redacted)
//! and retried at the next tick; it never blocks or fails a request.

use std::{sync::Arc, time::Duration};

use afr_anchorer::{AnchorError, Event, Options, PrivateKeySigner, Settings};
use tokio::sync::watch;

use crate::{AppState, Counters};

/// What one anchoring pass came to.
pub type PassResult = Result<afr_anchorer::Pass, AnchorError>;

/// What the anchoring task needs.
pub struct AnchorConfig {
    /// Endpoint, contract, batch size, fee cap, confirmations.
    pub settings: Settings,
    /// Finality, L1 fee cap, replacement policy.
    pub options: Options,
    /// The anchoring key.
    pub signer: PrivateKeySigner,
    /// Longest time between two passes (a pass also starts when an epoch seals).
    pub interval: Duration,
    /// Called with each event of a pass (the CLI prints them).
    pub on_event: Arc<dyn Fn(&Event) + Send + Sync>,
    /// Called with the outcome of each pass (the CLI prints it).
    pub on_pass: Arc<dyn Fn(&PassResult) + Send + Sync>,
}

impl std::fmt::Debug for AnchorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnchorConfig")
            .field("contract", &self.settings.contract)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// How often the task looks for a newly sealed epoch.
const SEAL_POLL: Duration = Duration::from_millis(250);

/// Starts the anchoring thread: its own single-threaded runtime, so a pass (and its RPC
/// retries) can never take a worker from the request handlers. It stops when `stop` turns
/// true, abandoning a pass in flight: each receipt is written atomically, and the next pass
/// recovers anything that was sent.
pub(crate) fn start(
    cfg: AnchorConfig,
    state: Arc<AppState>,
    stop: watch::Receiver<bool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("afr-anchor".into())
        .spawn(move || rt.block_on(run(cfg, state, stop)))
}

async fn run(cfg: AnchorConfig, state: Arc<AppState>, mut stop: watch::Receiver<bool>) {
    let mut seen_sealed: Option<u64> = None;
    let mut last_pass = tokio::time::Instant::now();
    let mut first = true;
    loop {
        if *stop.borrow() {
            return;
        }
        let sealed = state.recorder.last_sealed().map(|h| h.epoch);
        if first || last_pass.elapsed() >= cfg.interval || sealed > seen_sealed {
            first = false;
            // A failed pass is retried at the next tick or seal, not at once.
            seen_sealed = sealed;
            last_pass = tokio::time::Instant::now();
            Counters::bump(&state.counters.anchor_passes);
            let on = cfg.on_event.clone();
            let on = move |e: &Event| on(e);
            let pass = afr_anchorer::anchor_pass(
                state.recorder.store(),
                cfg.signer.clone(),
                &cfg.settings,
                &cfg.options,
                &on,
            );
            let res = tokio::select! {
                r = pass => r,
                _ = stop.changed() => return,
            };
            if res.is_err() {
                Counters::bump(&state.counters.anchor_failures);
            }
            (cfg.on_pass)(&res);
        }
        tokio::select! {
            _ = tokio::time::sleep(SEAL_POLL) => {}
            _ = stop.changed() => return,
        }
    }
}
