//! The anchorer against what real endpoints do: a provider one block behind, a long history
//! (calls counted), a base-fee spike, a reorg that moves the transaction, a switch of chain
//! or contract, a contract that is not AfrAnchor, and an OP-stack L1 data fee.

use std::time::Duration;

use afr_anchorer::{
    AnchorError, AnchorStore, Event, Options, Pass, ReceiptState, Settings, anchor_pass, deploy,
    signer_from_hex,
};
use afr_recorder::Recorder;
use afr_testkit::{Anvil, DEV_ADDR, anvil, anvil_on, cast_at as cast};
use serde_json::json;
use tempfile::TempDir;

use super::{KEY, deployed, record, recorder, recorder_with, rpc};
use crate::proxy::Proxy;

fn pass(
    rt: &tokio::runtime::Runtime,
    r: &Recorder,
    s: &Settings,
    o: &Options,
) -> Result<Pass, AnchorError> {
    rt.block_on(anchor_pass(
        r.store(),
        signer_from_hex(KEY).unwrap(),
        s,
        o,
        &|_| {},
    ))
}

/// A fresh anvil with AfrAnchor deployed (64 epochs to a transaction), the runtime and
/// settings to anchor on it, and a fresh recorder in a temporary directory with `events` events.
fn anchoring(events: u64) -> (Anvil, tokio::runtime::Runtime, Settings, TempDir, Recorder) {
    let chain = anvil();
    let (rt, settings) = deployed(&chain.url, 64);
    let tmp = tempfile::tempdir().unwrap();
    let r = recorder(&tmp.path().join("a"), events);
    (chain, rt, settings, tmp, r)
}

fn with_url(s: &Settings, url: &str) -> Settings {
    Settings {
        rpc_url: url.to_owned(),
        ..s.clone()
    }
}

fn nonce(url: &str) -> String {
    cast(url, &["nonce", DEV_ADDR])
}

/// Through a provider whose reads lag one block behind, the newest anchor reads as root 0:
/// that is "not visible yet", never a reorg, a deletion, a re-send or a fork. A lost receipt
/// whose epoch the chain already holds ends in AlreadyAnchored with our root: success.
#[test]
fn a_lagging_provider_never_corrupts_local_state() {
    let (chain, rt, settings, _tmp, r) = anchoring(25); // epochs 0, 1
    let proxy = Proxy::start(&chain.url);
    let lagging = with_url(&settings, &proxy.url);
    let o = Options::default();
    assert_eq!(pass(&rt, &r, &settings, &o).unwrap().posted, [0, 1]);
    record(&r, 10, 2); // epoch 2
    assert_eq!(pass(&rt, &r, &settings, &o).unwrap().posted, [2]);
    let receipt2 = r.store().anchor(2).unwrap().unwrap();

    proxy.lag(true);
    let before = nonce(&chain.url);
    let p = pass(&rt, &r, &lagging, &o).unwrap();
    assert_eq!(p.waiting, [2], "{p:?}");
    assert!(p.posted.is_empty() && p.reorged.is_empty() && p.transactions == 0);
    assert_eq!(r.store().anchor(2).unwrap(), Some(receipt2.clone()), "kept");
    assert!(r.store().fork_alarm().unwrap().is_none());
    assert_eq!(nonce(&chain.url), before, "nothing sent");

    // The receipt lost in a crash, and the lagging read shows no root: the pass tries to post,
    // the contract answers AlreadyAnchored with our root, and that is success.
    r.store().delete_anchor(2).unwrap();
    let events = std::cell::RefCell::new(Vec::new());
    let p = rt
        .block_on(anchor_pass(
            r.store(),
            signer_from_hex(KEY).unwrap(),
            &lagging,
            &o,
            &|e| events.borrow_mut().push(e.clone()),
        ))
        .unwrap();
    assert!(
        events
            .borrow()
            .contains(&Event::AlreadyAnchored { epoch: 2 }),
        "{:?}",
        events.borrow()
    );
    assert_eq!(p.recovered, [2]);
    assert_eq!(nonce(&chain.url), before, "nothing sent");
    let recovered = r.store().anchor(2).unwrap().unwrap();
    assert_eq!(
        (recovered.tx, recovered.block),
        (receipt2.tx, receipt2.block)
    );

    // Once the provider has caught up, the epoch is confirmed and the marker passes it.
    rpc(&chain.url, "evm_mine", json!([]));
    let p = pass(&rt, &r, &lagging, &o).unwrap();
    assert!(p.waiting.is_empty(), "{p:?}");
    assert_eq!(p.verified_upto, Some(2));
    assert_eq!(receipt_state(&r, 2), ReceiptState::Confirmed);
}

/// A pass with nothing to do makes the same few calls over 2,000 epochs as over 10.
#[test]
fn an_idle_pass_costs_a_constant_number_of_calls() {
    let chain = anvil();
    let proxy = Proxy::start(&chain.url);
    let o = Options::default();
    let tmp = tempfile::tempdir().unwrap();
    let mut idle = Vec::new();
    for n in [10u64, 2_000] {
        // The same key on a fresh contract per size.
        let (rt, settings) = deployed(&chain.url, 250);
        let counted = with_url(&settings, &proxy.url);
        // `n` one-event epochs.
        let r = recorder_with(&tmp.path().join(format!("r{n}")), 1, n);
        let p = pass(&rt, &r, &settings, &o).unwrap();
        assert_eq!(p.posted.len() as u64, n);
        // The first pass after posting reads the new roots back, batched, and advances the
        // marker; the next one has nothing to do.
        proxy.reset();
        let p = pass(&rt, &r, &counted, &o).unwrap();
        assert_eq!(p.verified_upto, Some(n - 1));
        let verify_calls = proxy.calls().len();
        let verify_requests = proxy.requests();
        proxy.reset();
        let p = pass(&rt, &r, &counted, &o).unwrap();
        assert_eq!((p.already, p.transactions), (n, 0));
        let calls = proxy.calls();
        eprintln!(
            "{n} epochs: verifying pass {verify_calls} calls in {verify_requests} HTTP \
             requests; idle pass {} calls in {} requests: {calls:?}",
            calls.len(),
            proxy.requests()
        );
        assert!(calls.len() <= 20, "{calls:?}");
        assert!(
            verify_requests <= 12,
            "{n} epochs read back in {verify_requests} requests"
        );
        idle.push(calls);
    }
    assert_eq!(idle[0], idle[1], "the same calls whatever the history");
}

/// The state of the stored receipt of `epoch`, which must exist.
fn receipt_state(r: &Recorder, epoch: u64) -> ReceiptState {
    r.store().anchor(epoch).unwrap().unwrap().state
}

/// Runs `f` while another thread mines a block every 300 ms with base fee `spike` (automine
/// off); the latest block when `f` starts still shows a base fee of 1 gwei, so a first attempt
/// is priced on it.
fn during_spike<T>(url: &str, spike: u128, f: impl FnOnce() -> T) -> T {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        // The miner: every block has the spiked base fee.
        sc.spawn(|| {
            while !stop.load(SeqCst) {
                rpc(
                    url,
                    "anvil_setNextBlockBaseFeePerGas",
                    json!([format!("{spike:#x}")]),
                );
                rpc(url, "evm_mine", json!([]));
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        std::thread::sleep(Duration::from_millis(400));
        rpc(
            url,
            "anvil_setNextBlockBaseFeePerGas",
            json!(["0x3b9aca00"]),
        );
        rpc(url, "evm_mine", json!([]));
        let out = f();
        stop.store(true, SeqCst);
        out
    })
}

/// A base-fee spike after sending (automine off): the transaction is replaced at the same
/// nonce with bumped fees and lands; under a cap below the spike it is never bumped past the
/// cap, and the pass says it is stuck.
#[test]
fn a_stuck_transaction_is_replaced_at_the_same_nonce_and_lands() {
    let (chain, rt, mut settings, _tmp, r) = anchoring(25);
    let spike: u128 = 50_000_000_000; // 50 gwei
    rpc(&chain.url, "evm_setAutomine", json!([false]));
    let o = Options {
        replace_after: Duration::from_millis(800),
        give_up_after: Duration::from_secs(8),
        ..Options::default()
    };
    let p = during_spike(&chain.url, spike, || pass(&rt, &r, &settings, &o).unwrap());
    assert_eq!(p.posted, [0, 1]);
    assert!(p.replacements >= 1, "{p:?}");
    let a = r.store().anchor(0).unwrap().unwrap();
    assert!(!a.replaced.is_empty());
    assert!(u128::from(a.effective_gas_price) >= spike, "{a:?}");
    assert_eq!(nonce(&chain.url), "2", "deploy + one anchoring nonce");

    // A cap below the spike: no attempt above it, and the pass reports the stuck transaction.
    record(&r, 10, 2);
    settings.max_gas_price_wei = 20_000_000_000;
    let sent = std::cell::RefCell::new(Vec::new());
    let e = during_spike(&chain.url, spike, || {
        rt.block_on(anchor_pass(
            r.store(),
            signer_from_hex(KEY).unwrap(),
            &settings,
            &o,
            &|e| {
                if let Event::Sent { fees, .. } = e {
                    sent.borrow_mut().push(*fees);
                }
            },
        ))
        .unwrap_err()
    });
    assert!(
        matches!(e, AnchorError::Stuck { cap, .. } if cap == 20_000_000_000),
        "{e}"
    );
    assert!(!sent.borrow().is_empty());
    assert!(
        sent.borrow()
            .iter()
            .all(|f| f.max_fee_per_gas <= 20_000_000_000),
        "{:?}",
        sent.borrow()
    );
    // The spike over, the epoch goes out (anvil evicted the capped transaction; a node that
    // kept it would mine it, and the pass would find it).
    rpc(&chain.url, "evm_setAutomine", json!([true]));
    settings.max_gas_price_wei = 100_000_000_000;
    let p = pass(&rt, &r, &settings, &o).unwrap();
    assert!(p.transactions <= 1, "{p:?}");
    assert_eq!(receipt_state(&r, 2), ReceiptState::Confirmed);
}

/// A reorg that drops the anchoring transaction and re-includes it in a later block: the
/// stored block and hash are corrected.
#[test]
fn a_transaction_re_included_in_a_later_block_corrects_the_stored_block() {
    let (chain, rt, settings, _tmp, r) = anchoring(15);
    let o = Options::default();
    let snapshot = rpc(&chain.url, "evm_snapshot", json!([]));
    assert_eq!(pass(&rt, &r, &settings, &o).unwrap().posted, [0]);
    let before = r.store().anchor(0).unwrap().unwrap();
    let tx = format!("0x{}", hex::encode(before.tx));
    let raw = rpc(&chain.url, "eth_getRawTransactionByHash", json!([tx]));
    assert_eq!(
        rpc(&chain.url, "evm_revert", json!([snapshot])),
        json!(true)
    );
    // Another branch: two empty blocks, then the same signed transaction.
    rpc(&chain.url, "evm_mine", json!([]));
    rpc(&chain.url, "evm_mine", json!([]));
    rpc(&chain.url, "eth_sendRawTransaction", json!([raw]));
    let block: u64 = cast(&chain.url, &["receipt", &tx, "blockNumber"])
        .parse()
        .unwrap();
    assert!(block > before.block);
    let p = pass(&rt, &r, &settings, &o).unwrap();
    assert_eq!(p.moved, [0], "{p:?}");
    assert_eq!(p.transactions, 0);
    let after = r.store().anchor(0).unwrap().unwrap();
    assert_eq!((after.tx, after.block), (before.tx, block));
    assert_ne!(after.block_hash, before.block_hash);
    assert_eq!(after.state, ReceiptState::Confirmed);
}

/// Receipts of one chain or contract are never deleted when --rpc or --contract change: the
/// switch is refused, and with the explicit option they are archived and the log anchored
/// anew. A contract that is not AfrAnchor (or no contract) is refused before anything is sent.
#[test]
fn a_switch_of_chain_or_contract_is_refused_unless_asked_for() {
    let (chain, rt, settings, tmp, r) = anchoring(25);
    let o = Options::default();
    assert_eq!(pass(&rt, &r, &settings, &o).unwrap().posted, [0, 1]);
    let kept = r.store().anchor(0).unwrap().unwrap();

    // Another contract on the same chain.
    let other = rt
        .block_on(deploy(&chain.url, signer_from_hex(KEY).unwrap()))
        .unwrap();
    let moved = Settings {
        contract: other,
        ..settings.clone()
    };
    match pass(&rt, &r, &moved, &o) {
        Err(AnchorError::Switch {
            stored_chain: 31337,
            stored_contract,
            chain: 31337,
            contract,
        }) if stored_contract == settings.contract && contract == other => {}
        x => panic!("expected a refused switch, got {x:?}"),
    }
    assert_eq!(r.store().anchor(0).unwrap(), Some(kept.clone()), "kept");

    // Another chain (another chain id).
    let chain2 = anvil_on(0, &["--chain-id", "4242"]);
    let c2 = rt
        .block_on(deploy(&chain2.url, signer_from_hex(KEY).unwrap()))
        .unwrap();
    let elsewhere = Settings {
        rpc_url: chain2.url.clone(),
        contract: c2,
        ..settings.clone()
    };
    assert!(matches!(
        pass(&rt, &r, &elsewhere, &o),
        Err(AnchorError::Switch {
            stored_chain: 31337,
            chain: 4242,
            ..
        })
    ));
    // Asked for: the old receipts are archived and the whole log is anchored there.
    let p = pass(
        &rt,
        &r,
        &elsewhere,
        &Options {
            allow_switch: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(p.posted, [0, 1]);
    assert_eq!(r.store().anchor(0).unwrap().unwrap().chain_id, 4242);
    let archived = r.store().archived_anchors().unwrap();
    assert_eq!(archived.len(), 2);
    assert_eq!(archived[0], kept);

    // A fresh log against an address with no code, then code that answers zeros: refused
    // before anything is sent (a zero-answering contract would make every pass re-post).
    let r2 = recorder(&tmp.path().join("b"), 15);
    let fake: afr_anchorer::Address = "0x00000000000000000000000000000000000a11ce"
        .parse()
        .unwrap();
    let fake_s = Settings {
        contract: fake,
        ..settings.clone()
    };
    let before = nonce(&chain.url);
    assert!(matches!(
        pass(&rt, &r2, &fake_s, &o),
        Err(AnchorError::NotAfrAnchor { address }) if address == fake
    ));
    // PUSH1 0x40 PUSH1 0 RETURN: 64 zero bytes for any call.
    cast(
        &chain.url,
        &["rpc", "anvil_setCode", &fake.to_string(), "0x60406000f3"],
    );
    assert!(matches!(
        pass(&rt, &r2, &fake_s, &o),
        Err(AnchorError::NotAfrAnchor { address }) if address == fake
    ));
    assert_eq!(nonce(&chain.url), before, "nothing sent");
}

/// On a chain with the OP-stack GasPriceOracle, the L1 data fee is quoted before sending,
/// capped, and lands in the receipt's cost.
#[test]
fn the_op_stack_l1_data_fee_is_capped_and_recorded() {
    let chain = anvil();
    let (rt, settings) = deployed(&chain.url, 64);
    // An oracle that quotes 10^15 wei for anything: PUSH7 10^15, PUSH1 0, MSTORE, PUSH1 32,
    // PUSH1 0, RETURN.
    cast(
        &chain.url,
        &[
            "rpc",
            "anvil_setCode",
            afr_anchorer::GAS_PRICE_ORACLE,
            "0x66038d7ea4c6800060005260206000f3",
        ],
    );
    let tmp = tempfile::tempdir().unwrap();
    let r = recorder(&tmp.path().join("a"), 15);
    let before = nonce(&chain.url);
    let e = pass(
        &rt,
        &r,
        &settings,
        &Options {
            max_l1_fee_wei: 100_000_000_000_000,
            ..Options::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            AnchorError::L1FeeCap {
                fee: 1_000_000_000_000_000,
                cap: 100_000_000_000_000
            }
        ),
        "{e}"
    );
    assert_eq!(nonce(&chain.url), before, "nothing sent");
    let p = pass(&rt, &r, &settings, &Options::default()).unwrap();
    assert_eq!(p.posted, [0]);
    let a = r.store().anchor(0).unwrap().unwrap();
    assert_eq!(a.l1_fee, 1_000_000_000_000_000);
    assert_eq!(
        a.cost_wei(),
        u128::from(a.gas_used) * u128::from(a.effective_gas_price) + 1_000_000_000_000_000
    );
    assert_eq!(p.cost_wei, a.cost_wei());
}
