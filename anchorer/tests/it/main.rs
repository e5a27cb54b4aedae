//! The anchorer against a real anvil started by the test, with the real contract artifact.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on purpose"
)]

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use afr_anchorer::{AnchorError, Settings, anchor_pending, deploy, signer_from_hex};
use afr_core::EventInput;
use afr_recorder::{Config, Recorder, init};

/// Anvil's first dev account (test ether on a throwaway local chain only).
const KEY: &str = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

struct Anvil {
    child: Child,
    url: String,
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn anvil() -> Anvil {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin/anvil");
    assert!(
        bin.exists(),
        "{} missing: run scripts/install-tools.sh",
        bin.display()
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(bin)
        .args(["--port", &port.to_string(), "--silent"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "anvil did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Anvil {
        child,
        url: format!("http://127.0.0.1:{port}"),
    }
}

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

fn recorder(dir: &Path, events: u64) -> Recorder {
    let s = signer_from_hex(KEY).unwrap();
    init(dir, s.address().0.0).unwrap();
    let r = Recorder::open(
        dir,
        Config {
            epoch_size: 10,
            ..Config::default()
        },
    )
    .unwrap();
    record(&r, events, 1);
    r
}

fn record(r: &Recorder, n: u64, seed: u64) {
    let line = |i: u64| format!(r#"{{"category":"shell","intent":{{"tool":"step-{seed}-{i}"}}}}"#);
    for i in 0..n {
        r.record(EventInput::from_json(line(i).as_bytes(), 1 << 20).unwrap())
            .unwrap();
    }
}

#[test]
fn anchors_exactly_once_through_restarts_reorgs_and_forks() {
    let chain = anvil();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let contract = rt
        .block_on(deploy(&chain.url, signer_from_hex(KEY).unwrap()))
        .unwrap();
    let settings = Settings {
        rpc_url: chain.url.clone(),
        contract,
        max_batch: 4,
        max_gas_price_wei: 100_000_000_000,
        confirmations: 1,
    };
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
    r.store().delete_anchor(9).unwrap(); // the crash lost the receipt
    let p = run(&r).unwrap();
    assert_eq!(
        (p.already, p.transactions),
        (10, 0),
        "no duplicate transaction"
    );

    // A reorg drops the anchoring transaction: the receipt is dropped and the epoch re-posted.
    run(&r).unwrap();
    r.store()
        .put_anchor(&afr_recorder::AnchorReceipt {
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
