//! The anchorer against a real anvil started by the test, with the real contract artifact.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on purpose"
)]

use std::{
    path::Path,
    process::{Child, Command},
    time::{Duration, Instant},
};

use afr_anchorer::{AnchorError, AnchorStore, Settings, anchor_pending, deploy, signer_from_hex};
use afr_recorder::{Config, Recorder, init};
use afr_testkit::{anvil, anvil_on, shell_event};

mod canonical;
mod chain;
mod proxy;
mod recheck;

const KEY: &str = afr_testkit::DEV_KEY;

fn rpc(url: &str, method: &str, params: serde_json::Value) -> serde_json::Value {
    let out = Command::new("curl")
        .args([
            "-s",
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            "--data",
        ])
        .arg(
            serde_json::json!({"jsonrpc":"2.0","id":1,"method":method,"params":params}).to_string(),
        )
        .arg(url)
        .output()
        .unwrap();
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["result"].clone()
}

/// A fresh recorder for [`KEY`] with `events` events, ten to an epoch.
fn recorder(dir: &Path, events: u64) -> Recorder {
    recorder_with(dir, 10, events)
}

/// A fresh recorder for [`KEY`] with `events` events, `epoch_size` to an epoch.
fn recorder_with(dir: &Path, epoch_size: u64, events: u64) -> Recorder {
    let s = signer_from_hex(KEY).unwrap();
    init(dir, s.address().0.0).unwrap();
    let r = Recorder::open(dir, Config::with_epoch_size(epoch_size)).unwrap();
    record(&r, events, 1);
    r
}

fn record(r: &Recorder, n: u64, seed: u64) {
    for i in 0..n {
        r.record(shell_event(&format!("step-{seed}-{i}"))).unwrap();
    }
}

/// A runtime, and settings for a freshly deployed contract on `url` posting at most
/// `max_batch` epochs per transaction.
fn deployed(url: &str, max_batch: usize) -> (tokio::runtime::Runtime, Settings) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let contract = rt
        .block_on(deploy(url, signer_from_hex(KEY).unwrap()))
        .unwrap();
    let settings = Settings {
        rpc_url: url.to_owned(),
        contract,
        max_batch,
        max_gas_price_wei: 100_000_000_000,
        confirmations: 1,
    };
    (rt, settings)
}

#[test]
fn anchors_exactly_once_through_restarts_reorgs_and_forks() {
    let chain = anvil();
    let (rt, settings) = deployed(&chain.url, 4);
    let contract = settings.contract;
    let tmp = tempfile::tempdir().unwrap();
    let r = recorder(&tmp.path().join("a"), 95); // 9 sealed epochs, 5 events open
    let run = |r: &Recorder| {
        rt.block_on(anchor_pending(
            r.store(),
            signer_from_hex(KEY).unwrap(),
            &settings,
        ))
    };

    // A backlog goes out in batches of at most 4: 3 transactions for 9 epochs.
    let p = run(&r).unwrap();
    assert_eq!(p.posted, (0..9).collect::<Vec<_>>());
    assert_eq!(p.transactions, 3);
    for e in 0..9 {
        let a = r.store().anchor(e).unwrap().expect("receipt stored");
        assert_eq!(a.chain_id, 31337);
        assert!(a.gas_used > 21_000);
    }
    // A restart finds everything anchored and posts nothing.
    let p = run(&r).unwrap();
    assert_eq!((p.already, p.transactions), (9, 0));

    // Crash after sending, before the receipt was stored: the next pass reconciles.
    record(&r, 5, 2); // epoch 9 seals
    let snapshot = rpc(&chain.url, "evm_snapshot", serde_json::json!([]));
    run(&r).unwrap();
    let lost = r.store().anchor(9).unwrap().unwrap();
    r.store().delete_anchor(9).unwrap(); // the crash lost the receipt
    let p = run(&r).unwrap();
    assert_eq!(
        (p.already, p.transactions),
        (10, 0),
        "no duplicate transaction"
    );
    assert_eq!(p.recovered, vec![9]);
    assert_eq!(
        r.store().anchor(9).unwrap(),
        Some(lost),
        "receipt recovered"
    );

    // A reorg drops the anchoring transaction: the receipt is dropped and the epoch re-posted.
    run(&r).unwrap();
    r.store()
        .put_anchor(&afr_anchorer::AnchorReceipt {
            epoch: 9,
            ..r.store().anchor(8).unwrap().unwrap()
        })
        .unwrap();
    assert_eq!(
        rpc(&chain.url, "evm_revert", serde_json::json!([snapshot])),
        serde_json::json!(true)
    );
    let p = run(&r).unwrap();
    assert_eq!(p.reorged, vec![9]);
    assert_eq!(p.posted, vec![9]);

    // A different history from the same key (a host attacker re-sealing) cannot be anchored:
    // the anchorer reports a fork and posts nothing.
    let forked = recorder(&tmp.path().join("b"), 100);
    let (onchain0, local0) = match run(&forked) {
        Err(AnchorError::Fork {
            epoch: 0,
            onchain,
            local,
        }) => (onchain, local),
        other => panic!("expected a fork alarm, got {other:?}"),
    };
    assert_ne!(onchain0, local0);
    assert_eq!(onchain0, r.store().epoch(0).unwrap().unwrap().root());
    // The alarm is persisted with the evidence, including the transaction that anchored the
    // other root (found through its Anchored event).
    let alarm = forked
        .store()
        .fork_alarm()
        .unwrap()
        .expect("alarm persisted");
    assert_eq!(
        (alarm.epoch, alarm.onchain, alarm.local, alarm.chain_id),
        (0, onchain0.0, local0.0, 31337)
    );
    assert_eq!(alarm.contract, contract.0.0);
    assert_eq!(alarm.tx, Some(r.store().anchor(0).unwrap().unwrap().tx));
    assert!(alarm.block.is_some() && alarm.seen_at_us > 0);
    // While it is set the anchorer refuses to do anything, even with a healthy chain.
    match run(&forked) {
        Err(AnchorError::ForkAlarmSet { epoch: 0, .. }) => {}
        other => panic!("expected the standing alarm, got {other:?}"),
    }
    // Clearing it without fixing anything only raises it again on the next pass.
    forked.store().clear_fork_alarm().unwrap();
    assert!(matches!(
        run(&forked),
        Err(AnchorError::Fork { epoch: 0, .. })
    ));
    assert!(forked.store().fork_alarm().unwrap().is_some());
    assert!(
        forked.store().anchor(0).unwrap().is_none(),
        "nothing posted"
    );

    // RPC down: a clear error after retries, nothing stored.
    drop(chain);
    record(&r, 10, 3);
    let e = run(&r).unwrap_err();
    assert!(matches!(e, AnchorError::Rpc(_)), "{e}");
    assert!(r.store().anchor(10).unwrap().is_none());
}

use afr_testkit::cast_at as cast;

/// The chain holds exactly the local log's roots: head is the last sealed epoch, every root
/// matches, each epoch has exactly one `Anchored` event, and every epoch has a stored receipt
/// whose transaction is on the chain.
fn assert_chain_equals_local(url: &str, contract: &str, r: &Recorder) {
    let me = signer_from_hex(KEY).unwrap().address().to_string();
    let last = r.last_sealed().unwrap().epoch;
    let head = cast(url, &["call", contract, "head(address)(bool,uint64)", &me]);
    assert_eq!(
        head.split_whitespace().collect::<Vec<_>>(),
        ["true", &last.to_string()],
        "chain head"
    );
    let events = afr_testkit::anchored_logs(url, contract, &me);
    assert_eq!(
        events.len() as u64,
        last + 1,
        "one Anchored event per epoch"
    );
    for e in 0..=last {
        let local = format!("0x{}", r.store().epoch(e).unwrap().unwrap().root().to_hex());
        assert_eq!(events[e as usize], (e, local.clone()), "event of epoch {e}");
        let onchain = cast(
            url,
            &[
                "call",
                contract,
                "rootOf(address,uint64)(bytes32)",
                &me,
                &e.to_string(),
            ],
        );
        assert_eq!(onchain, local, "rootOf epoch {e}");
        let a = r.store().anchor(e).unwrap().expect("receipt stored");
        let tx = format!("0x{}", hex::encode(a.tx));
        assert_eq!(
            cast(url, &["receipt", &tx, "blockNumber"]),
            a.block.to_string(),
            "receipt of epoch {e} names a mined transaction"
        );
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig}");
}

#[test]
fn anvil_stopped_mid_flight_and_brought_back_ends_with_chain_equal_to_local() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("anvil-state.json");
    let state_arg = state.to_str().unwrap().to_owned();
    // --state: load at start, dump on exit; --state-interval 1: also dump every second, so a
    // hard kill loses at most the last second of blocks.
    let args = ["--state", &state_arg, "--state-interval", "1"];
    let mut chain = anvil_on(0, &args);
    let port: u16 = chain.url.rsplit(':').next().unwrap().parse().unwrap();
    // One transaction per epoch: a long pass to stop anvil in.
    let (rt, settings) = deployed(&chain.url, 1);
    let contract = settings.contract;
    let r = recorder(&tmp.path().join("a"), 400); // 40 sealed epochs
    let contract_s = contract.to_string();
    let mut reorged = 0;

    for (round, (sig, first_mark)) in [("-TERM", 5u64), ("-KILL", 45)].into_iter().enumerate() {
        // Anchor in the background; stop anvil once a few of this round's epochs are in.
        let result = std::thread::scope(|sc| {
            let pass = sc.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(anchor_pending(
                    r.store(),
                    signer_from_hex(KEY).unwrap(),
                    &settings,
                ))
            });
            let deadline = Instant::now() + Duration::from_secs(60);
            while r.store().anchor(first_mark).unwrap().is_none() {
                assert!(Instant::now() < deadline, "round {round}: no progress");
                std::thread::sleep(Duration::from_millis(5));
            }
            signal(&chain.child, sig);
            chain.child.wait().unwrap();
            std::thread::sleep(Duration::from_millis(300));
            // Bring it back on the same port from the saved state, while the pass retries.
            chain = anvil_on(port, &args);
            pass.join().unwrap()
        });
        // The interrupted pass either finished through its retries or failed cleanly;
        // further passes complete the job.
        let mut passes = 0;
        let mut outcome = result;
        loop {
            match outcome {
                Ok(p) => {
                    reorged += p.reorged.len();
                    if p.transactions == 0 {
                        break;
                    }
                }
                Err(
                    e @ (AnchorError::Rpc(_)
                    | AnchorError::Dropped { .. }
                    | AnchorError::PendingTransactions { .. }),
                ) => eprintln!("round {round}: pass failed: {e}"),
                Err(e) => panic!("round {round}: {e}"),
            }
            passes += 1;
            assert!(passes < 10, "round {round}: not converging");
            outcome = rt.block_on(anchor_pending(
                r.store(),
                signer_from_hex(KEY).unwrap(),
                &settings,
            ));
        }
        assert_chain_equals_local(&chain.url, &contract_s, &r);
        if round == 0 {
            // More epochs for the hard-kill round.
            record(&r, 200, 4);
        }
    }
    eprintln!("hard kill: {reorged} receipts pointed at blocks the restarted chain no longer had");
}
