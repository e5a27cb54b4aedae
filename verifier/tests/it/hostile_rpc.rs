//! `afr-verify` against hostile JSON-RPC providers (issue #33): a proxy ([`Proxy`]) in front of
//! a real anvil rewrites what the node answers. One invents `Anchored` logs and receipts for a
//! victim, one names another sender, one claims the pinned chain id for another chain, one
//! serves headers whose hash does not match; a second, consistent fake chain outvoted or
//! refused under `--agree`; forged and truncated proof archives; too few confirmations. None
//! may give *verified*. Honest runs with several providers and the proof archive (offline too)
//! verify.

use std::path::{Path, PathBuf};

use afr_core::{Hash32, deployment::ANCHORED_TOPIC, epoch::back_pointer};
use afr_eval::tamper::{History, Rng};
use afr_testkit::{Anvil, anvil, anvil_on};
use serde_json::{Value, json};

use super::anvil::{
    ADDR, VICTIM, addr, anchor_batch, cast, deploy, history, hx, os, run, send, verify_cli,
};
use super::rpc_proxy::{Proxy, call};

/// The pinned chain: anvil's default.
const CHAIN: &str = "31337";

/// An address as a 32-byte log topic, lower case.
fn topic(a: &str) -> String {
    format!("0x{:0>64}", a.trim_start_matches("0x").to_ascii_lowercase())
}

/// `--rpc U ...` for each endpoint, then the pinned chain, contract and recorder, `--json`,
/// then `extra`.
fn pinned<'a>(
    rpcs: &[&'a str],
    contract: &'a str,
    recorder: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut a = Vec::new();
    for r in rpcs {
        a.extend(["--rpc", *r]);
    }
    a.extend([
        "--chain-id",
        CHAIN,
        "--contract",
        contract,
        "--recorder",
        recorder,
        "--json",
    ]);
    a.extend_from_slice(extra);
    a
}

/// Asserts a hostile run did not verify: exit 1, 2 or 74 (a verdict that is not *verified*,
/// or a refusal to answer), and the output names one of `reasons` (lower case).
fn refused(what: &str, out: &(i32, Value, String), reasons: &[&str]) {
    if let Err(e) = refusal(what, out, reasons) {
        panic!("{e}");
    }
}

/// [`refused`]'s check, as a result: several forgeries of one test are all tried, then the
/// failures reported together.
fn refusal(
    what: &str,
    (code, v, text): &(i32, Value, String),
    reasons: &[&str],
) -> Result<(), String> {
    // Shown with --nocapture: what each hostile run was answered.
    let short: String = text.chars().take(4000).collect();
    eprintln!("{what}: exit {code}: {short}");
    if !matches!(code, 1 | 2 | 74) || v["outcome"] == "verified" {
        return Err(format!(
            "{what}: exit {code}, wanted not verified (1, 2 or 74): {short}"
        ));
    }
    let lower = text.to_lowercase();
    if !reasons.iter().any(|r| lower.contains(r)) {
        return Err(format!(
            "{what}: exit {code}, but no reason among {reasons:?} in: {short}"
        ));
    }
    Ok(())
}

/// Reasons a forged answer or file may be refused for; loose on purpose.
const PROOF_REASONS: &[&str] = &[
    "proof",
    "proven",
    "header",
    "hash",
    "root",
    "trie",
    "sender",
    "signature",
    "signer",
    "recover",
    "not by the recorder",
    "not counted",
];

/// The methods whose answers are raw bytes a proxy cannot rewrite without breaking them: left
/// alone by the string-replacing rewrites.
fn raw(method: &str) -> bool {
    method.starts_with("eth_getRaw") || method.starts_with("debug_") || method == "eth_getProof"
}

/// Every string in `v` equal (ignoring case) to one of `map`'s keys replaced by its value.
fn replace_strings(v: &mut Value, map: &[(String, String)]) {
    match v {
        Value::String(s) => {
            if let Some((_, to)) = map.iter().find(|(from, _)| s.eq_ignore_ascii_case(from)) {
                *s = to.clone();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| replace_strings(i, map)),
        Value::Object(m) => m.values_mut().for_each(|i| replace_strings(i, map)),
        _ => {}
    }
}

/// Calls `f` on every object inside `v` (outermost first).
fn each_object(v: &mut Value, f: &dyn Fn(&mut serde_json::Map<String, Value>)) {
    match v {
        Value::Object(m) => {
            f(m);
            m.values_mut().for_each(|i| each_object(i, f));
        }
        Value::Array(items) => items.iter_mut().for_each(|i| each_object(i, f)),
        _ => {}
    }
}

fn lower(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_ascii_lowercase()
}

fn quantity(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// A chain with the genuine contract and `recorder`'s history of `epochs` epochs anchored in
/// one batch by the dev key (whoever `recorder` is).
struct Anchored {
    chain: Anvil,
    contract: String,
    tmp: tempfile::TempDir,
    /// The honest export.
    file: PathBuf,
    roots: Vec<Hash32>,
    seed: u64,
    /// The receipt of the anchoring transaction, as `cast` read it.
    receipt: Value,
}

///
/// With `then_mine`, one empty block is mined after the anchor, so the verification block
/// (latest) is not the anchoring block; without, they are the same block.
fn anchored(chain: Anvil, recorder: &str, epochs: usize, then_mine: bool) -> Anchored {
    let contract = deploy(&chain.url);
    let (mut h, seed) = history(addr(recorder), epochs);
    let log = h.seal();
    let roots = log.roots();
    anchor_batch(&chain.url, &contract, &roots, 0);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("log.afr");
    std::fs::write(&file, log.export()).unwrap();
    let receipt = latest_receipt(&chain.url);
    if then_mine {
        call(&chain.url, "evm_mine", json!([]));
    }
    Anchored {
        chain,
        contract,
        tmp,
        file,
        roots,
        seed,
        receipt,
    }
}

/// The receipt of the one transaction in the latest block.
fn latest_receipt(url: &str) -> Value {
    let block = call(url, "eth_getBlockByNumber", json!(["latest", false]));
    let tx = block["transactions"][0].as_str().unwrap().to_owned();
    call(url, "eth_getTransactionReceipt", json!([tx]))
}

/// `verify_cli` with `&str` paths.
fn check(kind: &str, file: &Path, args: &[&str]) -> (i32, Value, String) {
    verify_cli(kind, file, args)
}

/// Case a: the victim never sent a transaction. A proxy invents `Anchored(victim, …)` logs in
/// a real block, inside a real transaction (a plain transfer by someone else), with a forged
/// receipt (sent by the victim to the contract, carrying the logs) in `eth_getLogs`,
/// `eth_getTransactionReceipt` and `eth_getBlockReceipts`, and the transaction's `from`, `to`
/// and input rewritten wherever it is shown as JSON. Only the header's tries and the signature
/// tell the truth: not verified.
#[test]
fn invented_logs_and_receipts_never_frame_a_victim() {
    let chain = anvil();
    let url = chain.url.clone();
    let contract = deploy(&url);
    let (mut h, _) = history(addr(VICTIM), 2);
    let log = h.seal();
    let roots = log.roots();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("victim.afr");
    std::fs::write(&file, log.export()).unwrap();

    // The real transaction the forgery is hung on: the attacker pays someone.
    let sent = send(
        &url,
        &["0x000000000000000000000000000000000000dEaD", "--value", "1"],
    );
    let tx = lower(&sent["transactionHash"]);
    let real = call(&url, "eth_getTransactionReceipt", json!([tx]));
    let forged_logs: Vec<Value> = roots
        .iter()
        .enumerate()
        .map(|(e, r)| {
            let prev = if e == 0 {
                Hash32::ZERO
            } else {
                back_pointer(e as u64, &roots[e - 1])
            };
            json!({
                "address": contract.to_ascii_lowercase(),
                "topics": [ANCHORED_TOPIC, topic(VICTIM), format!("0x{e:064x}")],
                "data": format!("0x{r}{prev}"),
                "blockNumber": real["blockNumber"],
                "blockHash": real["blockHash"],
                "blockTimestamp": real["blockTimestamp"],
                "transactionHash": tx,
                "transactionIndex": real["transactionIndex"],
                "logIndex": format!("0x{e:x}"),
                "removed": false,
            })
        })
        .collect();
    let mut forged_receipt = call(&url, "eth_getTransactionReceipt", json!([tx]));
    forged_receipt["from"] = VICTIM.into();
    forged_receipt["to"] = contract.to_ascii_lowercase().into();
    forged_receipt["contractAddress"] = Value::Null;
    forged_receipt["status"] = "0x1".into();
    forged_receipt["logs"] = forged_logs.clone().into();
    let list: Vec<String> = roots.iter().map(hx).collect();
    let input = cast(&[
        "calldata",
        "anchorBatch(uint64,bytes32[],bytes32)",
        "0",
        &format!("[{}]", list.join(",")),
        &hx(&Hash32::ZERO),
    ]);
    let input = input.as_str().unwrap().to_owned();
    let block = quantity(&real["blockNumber"]);
    let c = contract.to_ascii_lowercase();
    let forged_tx = tx.clone();
    let proxy = Proxy::start(&url, move |req, mut resp| {
        let tx = &forged_tx;
        let method = req["method"].as_str().unwrap_or_default();
        if raw(method) {
            return resp;
        }
        if method == "eth_getLogs"
            && req["params"][0]["topics"]
                .to_string()
                .to_ascii_lowercase()
                .contains(&VICTIM[2..])
        {
            let f = &req["params"][0];
            let in_range = |k: &str, ok: &dyn Fn(u64) -> bool| {
                f[k].as_str()
                    .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
                    .is_none_or(ok)
            };
            let hit =
                in_range("fromBlock", &|b| b <= block) && in_range("toBlock", &|b| b >= block);
            resp["result"] = if hit {
                forged_logs.clone().into()
            } else {
                json!([])
            };
            return resp;
        }
        let (receipt, c, input) = (&forged_receipt, &c, &input);
        each_object(&mut resp, &|m| {
            let is = |k: &str| m.get(k).is_some_and(|v| lower(v) == *tx);
            let (is_receipt, is_tx) = (
                m.contains_key("logs") && is("transactionHash"),
                m.contains_key("input") && is("hash"),
            );
            if is_receipt {
                *m = receipt.as_object().unwrap().clone();
            } else if is_tx {
                m.insert("from".into(), VICTIM.into());
                m.insert("to".into(), c.clone().into());
                m.insert("input".into(), input.clone().into());
                m.remove("value");
                m.insert("value".into(), "0x0".into());
            }
        });
        resp
    });
    let purl = proxy.url();
    // The forged view is what a verifier without proofs would accept: the receipt, alone and
    // in its block's list, says the victim sent the logs to the contract.
    let shown = call(&purl, "eth_getTransactionReceipt", json!([tx]));
    assert_eq!(
        (shown["from"].as_str(), shown["status"].as_str()),
        (Some(VICTIM), Some("0x1"))
    );
    assert_eq!(
        shown["logs"].as_array().map(Vec::len),
        Some(roots.len()),
        "{shown}"
    );
    let listed = call(&purl, "eth_getBlockReceipts", json!([real["blockNumber"]]));
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["from"] == VICTIM && r["logs"] == shown["logs"]),
        "{listed}"
    );
    let shown_tx = call(&purl, "eth_getTransactionByHash", json!([tx]));
    assert_eq!(shown_tx["from"], VICTIM, "{shown_tx}");
    let out = check("log", &file, &pinned(&[&purl], &contract, VICTIM, &[]));
    refused("invented logs for the victim", &out, PROOF_REASONS);
    // The forgery was served: the verifier asked for the logs through the proxy.
    assert!(
        proxy.methods().iter().any(|m| m == "eth_getLogs"),
        "{:?}",
        proxy.methods()
    );
    // Under two endpoints that both lie the same way, still not verified.
    let p2 = Proxy::honest(&purl);
    let out = check(
        "log",
        &file,
        &pinned(&[&purl, &p2.url()], &contract, VICTIM, &[]),
    );
    refused("invented logs, two endpoints", &out, PROOF_REASONS);
    drop(chain);
}

/// Case b: the attacker (the dev account) anchors the victim's roots on the genuine contract
/// under its own name; the proxy turns every `Anchored(attacker, …)` into `Anchored(victim,
/// …)` and every `from` of the attacker into the victim, in logs, receipts and transactions.
/// The signature still recovers to the attacker: not verified for the victim.
#[test]
fn another_sender_is_not_the_recorder() {
    let a = anchored(anvil(), VICTIM, 2, true);
    let url = a.chain.url.clone();
    let map = vec![
        (ADDR.to_owned(), VICTIM.to_owned()),
        (topic(ADDR), topic(VICTIM)),
    ];
    let up = url.clone();
    let proxy = Proxy::start(&url, move |req, mut resp| {
        let method = req["method"].as_str().unwrap_or_default();
        if raw(method) {
            return resp;
        }
        if method == "eth_getLogs" {
            // Asked for the victim's logs: the attacker's, renamed.
            let mut params = req["params"].clone();
            replace_strings(&mut params, &[(topic(VICTIM), topic(ADDR))]);
            resp["result"] = call(&up, "eth_getLogs", params);
        }
        replace_strings(&mut resp, &map);
        resp
    });
    // The rewrite works: the attacker's log now names the victim.
    let logs = call(
        &proxy.url(),
        "eth_getLogs",
        json!([{"fromBlock": "0x0", "address": a.contract, "topics": [ANCHORED_TOPIC, topic(VICTIM)]}]),
    );
    assert_eq!(logs.as_array().unwrap().len(), a.roots.len(), "{logs}");
    let tx = lower(&a.receipt["transactionHash"]);
    assert_eq!(
        call(&proxy.url(), "eth_getTransactionByHash", json!([tx]))["from"],
        VICTIM
    );

    let purl = proxy.url();
    let out = check("log", &a.file, &pinned(&[&purl], &a.contract, VICTIM, &[]));
    refused("another sender", &out, PROOF_REASONS);
    // The honest control: the same chain, read directly, does not frame the victim either, and
    // verifies nothing for the attacker (another recorder's history): never exit 0.
    let (code, v, _) = check("log", &a.file, &pinned(&[&url], &a.contract, VICTIM, &[]));
    assert_eq!(code, 2, "{v}");
}

/// Case c: roots anchored by the recorder on chain 31338; the proxy says 31337 (the pinned
/// id) for `eth_chainId`, `net_version` and every `chainId` field. The signed transactions say
/// 31338: not verified.
#[test]
fn another_chain_claiming_the_pinned_id_is_refused() {
    let a = anchored(anvil_on(0, &["--chain-id", "31338"]), ADDR, 2, true);
    let url = a.chain.url.clone();
    assert_eq!(call(&url, "eth_chainId", json!([])), "0x7a6a");
    let proxy = Proxy::start(&url, |req, mut resp| {
        let method = req["method"].as_str().unwrap_or_default();
        if method == "net_version" {
            resp["result"] = "31337".into();
        } else if !raw(method) {
            replace_strings(&mut resp, &[("0x7a6a".into(), "0x7a69".into())]);
        }
        resp
    });
    assert_eq!(call(&proxy.url(), "eth_chainId", json!([])), "0x7a69");
    let tx = lower(&a.receipt["transactionHash"]);
    assert_eq!(
        call(&proxy.url(), "eth_getTransactionByHash", json!([tx]))["chainId"],
        "0x7a69"
    );
    let purl = proxy.url();
    let mut reasons = PROOF_REASONS.to_vec();
    reasons.extend(["chain", "31338"]);
    let out = check("log", &a.file, &pinned(&[&purl], &a.contract, ADDR, &[]));
    refused("another chain id", &out, &reasons);
}

/// Case d: headers whose hash does not match their fields. One proxy moves `receiptsRoot`, one
/// `timestamp`; both keep `hash`. Not verified.
#[test]
fn headers_that_do_not_hash_to_their_hash_are_refused() {
    let a = anchored(anvil(), ADDR, 2, true);
    let url = a.chain.url.clone();
    // The honest control first: this chain and log verify.
    let (code, v, _) = check("log", &a.file, &pinned(&[&url], &a.contract, ADDR, &[]));
    assert_eq!(code, 0, "{v}");
    for field in ["receiptsRoot", "timestamp"] {
        let proxy = Proxy::start(&url, move |req, mut resp| {
            if raw(req["method"].as_str().unwrap_or_default()) {
                return resp;
            }
            each_object(&mut resp, &|m| {
                if !(m.contains_key("receiptsRoot") && m.contains_key("hash")) {
                    return;
                }
                let old = m[field].as_str().unwrap_or_default().to_owned();
                let new = if field == "timestamp" {
                    format!("0x{:x}", quantity(&m[field]) + 1)
                } else {
                    // The last digit changed: another 32-byte root.
                    let last = if old.ends_with('0') { '1' } else { '0' };
                    format!("{}{last}", &old[..old.len() - 1])
                };
                m.insert(field.into(), new.into());
            });
            resp
        });
        let b = call(
            &proxy.url(),
            "eth_getBlockByNumber",
            json!(["latest", false]),
        );
        assert_ne!(
            b[field],
            call(&url, "eth_getBlockByNumber", json!(["latest", false]))[field]
        );
        let purl = proxy.url();
        let out = check("log", &a.file, &pinned(&[&purl], &a.contract, ADDR, &[]));
        refused(&format!("altered {field}"), &out, PROOF_REASONS);
    }
}

/// Case e: a second anvil with the same chain id and the same deployment holds a consistent
/// fake chain, the forged roots anchored by the recorder's key. Under `all`, the forged log is
/// at best incomplete and the fake is named; under `--agree 2` of three (two honest, one of
/// them through a proxy) the honest log verifies and the dissent is listed.
#[test]
fn a_consistent_fake_chain_is_outvoted_or_blocks_the_verdict() {
    let honest = anchored(anvil(), ADDR, 3, true);
    let fake = anvil();
    let fake_contract = deploy(&fake.url);
    assert_eq!(fake_contract, honest.contract, "the same deployment");
    // The forged history: a common prefix, the last epoch rewritten.
    let mut h2 = History::random(&mut Rng::new(honest.seed), addr(ADDR));
    h2.epochs.last_mut().unwrap().pop();
    let forged = h2.seal();
    assert_ne!(forged.roots(), honest.roots);
    anchor_batch(&fake.url, &fake_contract, &forged.roots(), 0);
    call(&fake.url, "evm_mine", json!([]));
    let forged_file = honest.tmp.path().join("forged.afr");
    std::fs::write(&forged_file, forged.export()).unwrap();
    // Each chain on its own is consistent: the forged log verifies against the fake alone.
    let (code, v, _) = check(
        "log",
        &forged_file,
        &pinned(&[&fake.url], &fake_contract, ADDR, &[]),
    );
    assert_eq!(code, 0, "the fake chain alone is consistent: {v}");

    let c = honest.contract.as_str();
    let (hurl, furl) = (honest.chain.url.as_str(), fake.url.as_str());
    let port = |u: &str| u.rsplit(':').next().unwrap().to_owned();
    let fake_port = port(furl);
    let dissent = |v: &Value| -> Vec<Value> {
        v["chain"]["providers"]
            .as_array()
            .unwrap_or_else(|| panic!("no chain.providers: {v}"))
            .iter()
            .filter(|p| p["agreed"] == false)
            .cloned()
            .collect()
    };

    // All must agree: the forged log and the honest log are both at best incomplete.
    for (what, f) in [("forged", &forged_file), ("honest", &honest.file)] {
        let out = check("log", f, &pinned(&[furl, hurl], c, ADDR, &[]));
        let (code, v, text) = &out;
        assert_eq!(*code, 2, "{what} log under all: {text}");
        assert_eq!(v["chain"]["rule"], "all", "{v}");
        let d = dissent(v);
        assert!(
            !d.is_empty(),
            "{what}: no provider listed as disagreeing: {v}"
        );
        assert!(
            text.to_lowercase().contains("disagree")
                || text.to_lowercase().contains("agree")
                || d.iter().any(|p| !p["detail"].is_null()),
            "{what}: the disagreement is not described: {text}"
        );
        // Redacted, but the host and port of a local endpoint stay.
        let endpoints: Vec<String> = v["chain"]["providers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["endpoint"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert!(
            endpoints.iter().any(|e| e.contains(&fake_port)),
            "the fake endpoint is not named: {endpoints:?}"
        );
    }

    // Two honest endpoints of three agree: the honest log verifies, the fake listed as the
    // dissent.
    let via = Proxy::honest(hurl);
    let vurl = via.url();
    let (code, v, text) = check(
        "log",
        &honest.file,
        &pinned(&[hurl, furl, &vurl], c, ADDR, &["--agree", "2"]),
    );
    assert_eq!(code, 0, "{text}");
    assert_eq!(v["chain"]["rule"], "2 of 3", "{v}");
    let providers = v["chain"]["providers"].as_array().unwrap();
    assert_eq!(providers.len(), 3, "{v}");
    let d = dissent(&v);
    assert_eq!(d.len(), 1, "exactly the fake dissents: {v}");
    assert!(
        d[0]["endpoint"]
            .as_str()
            .unwrap_or_default()
            .contains(&fake_port),
        "the dissent is not the fake: {v}"
    );
    assert!(!d[0]["detail"].is_null(), "{v}");
    // And the forged log under the same rule: the honest majority's roots, not the fake's.
    let out = check(
        "log",
        &forged_file,
        &pinned(&[hurl, furl, &vurl], c, ADDR, &["--agree", "2"]),
    );
    refused(
        "forged log, 2 of 3",
        &out,
        &["anchored-root", "tampered", "root"],
    );
    // Three of three required, one honest endpoint against the fake and its proxy: the rule is
    // not met, whatever the majority says.
    let fvia = Proxy::honest(furl);
    let fvurl = fvia.url();
    let (code, v, text) = check(
        "log",
        &honest.file,
        &pinned(&[hurl, furl, &fvurl], c, ADDR, &["--agree", "3"]),
    );
    assert_eq!(code, 2, "3 of 3 with one honest: {text}");
    assert!(!dissent(&v).is_empty(), "{v}");
    // `bundle` takes the same flags.
    let bundle = honest.tmp.path().join("case.bundle");
    let mut h1 = History::random(&mut Rng::new(honest.seed), addr(ADDR));
    let sealed = h1.seal();
    assert_eq!(sealed.roots(), honest.roots);
    std::fs::write(&bundle, sealed.bundle(&sealed.positions()[..1]).encode()).unwrap();
    let (code, v, _) = check("bundle", &bundle, &pinned(&[hurl, &vurl], c, ADDR, &[]));
    assert_eq!(code, 0, "bundle, two honest endpoints: {v}");
    let (code, v, _) = check("bundle", &bundle, &pinned(&[hurl, furl], c, ADDR, &[]));
    assert_eq!(code, 2, "bundle, one fake under all: {v}");
}

/// The honest archive of [`archived`]: the chain, the honest and the forged log, and what the
/// chain said about the anchoring block.
struct Archived {
    a: Anchored,
    proxy: Proxy,
    /// The archive `afr-verify anchors` wrote from two endpoints.
    archive: PathBuf,
    /// The forged export (the last epoch rewritten after anchoring).
    forged: PathBuf,
    forged_roots: Vec<Hash32>,
    /// The anchoring block: number, hash, receiptsRoot.
    block: (u64, String, String),
}

fn archived() -> Archived {
    let a = anchored(anvil(), ADDR, 3, true);
    let url = a.chain.url.clone();
    let proxy = Proxy::honest(&url);
    let purl = proxy.url();
    let b = quantity(&a.receipt["blockNumber"]);
    let header = call(
        &url,
        "eth_getBlockByNumber",
        json!([format!("0x{b:x}"), false]),
    );
    let archive = a.tmp.path().join("archive.json");
    let mut args = vec!["anchors"];
    args.extend(pinned(&[&url, &purl], &a.contract, ADDR, &[]));
    args.retain(|x| *x != "--json");
    args.extend(["--out", archive.to_str().unwrap()]);
    let args = os(&args);
    let (code, _, text) = run(&args.iter().map(|s| s.as_os_str()).collect::<Vec<_>>());
    assert_eq!(code, 0, "afr-verify anchors with two endpoints: {text}");
    let mut h2 = History::random(&mut Rng::new(a.seed), addr(ADDR));
    h2.epochs.last_mut().unwrap().pop();
    let forged_log = h2.seal();
    let forged = a.tmp.path().join("forged.afr");
    std::fs::write(&forged, forged_log.export()).unwrap();
    Archived {
        block: (b, lower(&header["hash"]), lower(&header["receiptsRoot"])),
        forged_roots: forged_log.roots(),
        a,
        proxy,
        archive,
        forged,
    }
}

/// `log FILE --anchors ARCHIVE` pinned, `--json`, plus `extra`.
fn offline(file: &Path, archive: &Path, contract: &str, extra: &[&str]) -> (i32, Value, String) {
    let mut a = vec![
        "--anchors",
        archive.to_str().unwrap(),
        "--chain-id",
        CHAIN,
        "--contract",
        contract,
        "--recorder",
        ADDR,
        "--json",
    ];
    a.extend_from_slice(extra);
    check("log", file, &a)
}

/// Case f: an honest endpoint and an honest proxy of it verify; `afr-verify anchors` with both
/// writes a version-3 proof archive, which verifies offline with the node gone, and the
/// verdict lists the header hashes it relied upon.
#[test]
fn honest_providers_and_the_proof_archive_verify_offline() {
    let mut x = archived();
    let url = x.a.chain.url.clone();
    let purl = x.proxy.url();
    let c = x.a.contract.clone();
    let (b, hash, _) = x.block.clone();

    let (code, v, text) = check("log", &x.a.file, &pinned(&[&url, &purl], &c, ADDR, &[]));
    assert_eq!(code, 0, "{text}");
    assert_eq!(v["chain"]["rule"], "all", "{v}");
    let providers = v["chain"]["providers"].as_array().unwrap();
    assert_eq!(providers.len(), 2, "{v}");
    assert!(providers.iter().all(|p| p["agreed"] == true), "{v}");
    assert_eq!(v["chain"]["headers"][b.to_string()], hash, "{v}");
    assert!(
        v["chain"]["block_hash"]
            .as_str()
            .is_some_and(|h| h.len() == 66),
        "{v}"
    );
    // The second endpoint was asked too: for the logs and the block hashes it must agree on.
    let asked = x.proxy.methods();
    for m in ["eth_getLogs", "eth_getBlockByNumber"] {
        assert!(asked.iter().any(|a| a == m), "{m} never asked: {asked:?}");
    }

    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&x.archive).unwrap()).unwrap();
    assert_eq!(saved["version"], 3, "{saved}");
    assert_eq!(saved["chain_id"], 31337, "{saved}");
    assert!(
        saved["blocks"][b.to_string()]["header"].as_str().is_some(),
        "{saved}"
    );
    assert!(
        !saved["blocks"][b.to_string()]["account_proof"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let txs = saved["txs"].as_array().unwrap();
    assert_eq!(txs.len(), 1, "one anchoring transaction: {saved}");
    assert_eq!(txs[0]["block"], b, "{saved}");
    for r in saved["roots"].as_object().unwrap().values() {
        assert_eq!(r["block"], b, "{saved}");
    }

    x.a.chain.kill();
    drop(x.proxy);
    let (code, v, text) = offline(&x.a.file, &x.archive, &c, &[]);
    assert_eq!(code, 0, "offline: {text}");
    assert_eq!(v["checks"]["anchored-root"], x.a.roots.len(), "{v}");
    assert_eq!(v["chain"]["headers"][b.to_string()], hash, "{v}");
    // The forged log against the honest archive: tampered at the rewritten epoch.
    let (code, v, _) = offline(&x.forged, &x.archive, &c, &[]);
    assert_eq!(code, 1, "{v}");
}

/// An edit of a parsed archive.
type Edit<'a> = dyn Fn(&mut Value) + 'a;

/// Flips one hex digit in the middle of the longest hex string inside `v`.
fn flip(v: &mut Value) {
    fn longest(v: &mut Value) -> Option<&mut String> {
        match v {
            Value::String(s) if s.starts_with("0x") => Some(s),
            Value::Array(items) => items.iter_mut().filter_map(longest).max_by_key(|s| s.len()),
            Value::Object(m) => m.values_mut().filter_map(longest).max_by_key(|s| s.len()),
            _ => None,
        }
    }
    let s = longest(v).unwrap_or_else(|| panic!("no hex string to flip"));
    let i = 2 + (s.len() - 2) / 2;
    let c = if &s[i..=i] == "0" { "1" } else { "0" };
    s.replace_range(i..=i, c);
}

/// Case g: forged and truncated archives never verify; a version-2 file without proofs is not
/// counted unless `--unproven-anchors` is given.
#[test]
fn forged_and_truncated_archives_never_verify() {
    let mut x = archived();
    x.a.chain.kill();
    let mut fails: Vec<String> = Vec::new();
    let c = x.a.contract.clone();
    let (b, hash, receipts_root) = x.block.clone();
    let text = std::fs::read_to_string(&x.archive).unwrap();
    let honest: Value = serde_json::from_str(&text).unwrap();
    let dir = x.a.tmp.path().to_owned();
    let mut n = 0;
    let mut write = |body: String| {
        n += 1;
        let p = dir.join(format!("forged{n}.json"));
        std::fs::write(&p, body).unwrap();
        p
    };
    let edited = |f: &dyn Fn(&mut Value)| {
        let mut v = honest.clone();
        f(&mut v);
        v.to_string()
    };
    let bs = b.to_string();
    let last = (x.a.roots.len() - 1).to_string();

    // The honest archive, for contrast.
    let (code, v, _) = offline(&x.a.file, &x.archive, &c, &[]);
    assert_eq!(code, 0, "{v}");

    // One root changed, nothing else: the proofs hold the anchored one, and the file
    // contradicts itself.
    let mut other = x.a.roots[0];
    other.0[31] ^= 1;
    let p = write(edited(&|v| {
        v["roots"]["0"]["root"] = hx(&other).into();
    }));
    let out = offline(&x.a.file, &p, &c, &[]);
    fails.extend(refusal("one root changed", &out, &["root", "proof", "anchored"]).err());

    // The last epoch's root replaced by the forged one everywhere it occurs (the roots, the
    // receipt's log, the transaction's input, the trie nodes that hold them): only the header
    // still commits to the anchored one. The forged log must not verify.
    let (old, new) = (
        format!("{}", x.a.roots[x.a.roots.len() - 1]),
        format!("{}", x.forged_roots[x.forged_roots.len() - 1]),
    );
    let count = text.matches(&old).count();
    assert!(
        count >= 2,
        "the root occurs {count} times: in roots and in the receipt: {text}"
    );
    let p = write(text.replace(&old, &new));
    let out = offline(&x.forged, &p, &c, &[]);
    fails.extend(
        refusal(
            "a root forged consistently below the header",
            &out,
            PROOF_REASONS,
        )
        .err(),
    );
    if out.1["checks"]["anchored-root"].as_u64().unwrap_or(0) >= x.a.roots.len() as u64 {
        fails.push("the consistently forged root was counted as anchored".into());
    }

    // One byte inside the receipt, a receipt proof node, a transaction proof node, the
    // transaction, the account proof.
    let cases: [(&str, &Edit<'_>); 5] = [
        ("receipt", &|v: &mut Value| {
            flip(&mut v["txs"][0]["receipt"])
        }),
        ("receipt proof node", &|v: &mut Value| {
            flip(&mut v["txs"][0]["receipt_proof"])
        }),
        ("transaction proof node", &|v: &mut Value| {
            flip(&mut v["txs"][0]["tx_proof"])
        }),
        ("raw transaction", &|v: &mut Value| {
            flip(&mut v["txs"][0]["raw"])
        }),
        ("account proof node", &|v: &mut Value| {
            flip(&mut v["blocks"][&bs]["account_proof"])
        }),
    ];
    for (what, f) in cases {
        let p = write(edited(f));
        let out = offline(&x.a.file, &p, &c, &[]);
        fails.extend(refusal(what, &out, PROOF_REASONS).err());
    }

    // The header: its receiptsRoot moved (one digit), so the receipts no longer prove.
    let rr = receipts_root.trim_start_matches("0x").to_owned();
    let header = honest["blocks"][&bs]["header"].as_str().unwrap().to_owned();
    assert!(
        header.contains(&rr),
        "the header RLP holds its receiptsRoot"
    );
    let mut moved = rr.clone();
    let last_digit = if moved.ends_with('0') { "1" } else { "0" };
    moved.replace_range(63.., last_digit);
    let p = write(edited(&|v| {
        v["blocks"][&bs]["header"] = header.replace(&rr, &moved).into();
    }));
    let out = offline(&x.a.file, &p, &c, &[]);
    fails.extend(refusal("header receiptsRoot", &out, PROOF_REASONS).err());
    // Any other byte of the header: either refused, or the header hash listed is no longer
    // the chain's, for anyone comparing it with a node or an explorer.
    let p = write(edited(&|v| flip(&mut v["blocks"][&bs]["header"])));
    let (code, v, text) = offline(&x.a.file, &p, &c, &[]);
    if code == 0 && v["chain"]["headers"][&bs].as_str() == Some(hash.as_str()) {
        fails.push(format!(
            "a forged header passed with the chain's hash listed: {text}"
        ));
    }

    // Truncated: cut in half; a transaction removed; a block removed.
    let p = write(text[..text.len() / 2].to_owned());
    let (code, _, out) = offline(&x.a.file, &p, &c, &[]);
    if code == 0 {
        fails.push(format!("half an archive: exit 0: {out}"));
    }
    let p = write(edited(&|v| {
        v["txs"].as_array_mut().unwrap().remove(0);
    }));
    let out = offline(&x.a.file, &p, &c, &[]);
    fails.extend(refusal("a txs entry removed", &out, PROOF_REASONS).err());
    let p = write(edited(&|v| {
        v["blocks"].as_object_mut().unwrap().remove(&bs);
    }));
    let out = offline(&x.a.file, &p, &c, &[]);
    fails.extend(refusal("a blocks entry removed", &out, PROOF_REASONS).err());
    // An archive that proves fewer epochs than it lists: the last root without its proof
    // (another transaction, not in `txs`).
    // Refused, or the bogus reference is not what the verdict relies on.
    let bogus = format!("0x{:064x}", 1);
    let p = write(edited(&|v| {
        v["roots"][&last]["tx"] = bogus.clone().into();
    }));
    let out = offline(&x.a.file, &p, &c, &[]);
    if out.0 == 0 && out.1["anchors"].to_string().contains(&bogus) {
        fails.push(format!(
            "a root pointing to an unproven transaction relied upon: {}",
            out.2
        ));
    }

    // A version-2 style file (no proofs): not counted unless asked for.
    let p = write(edited(&|v| {
        // Only the fields of version 2 (`head`: the highest epoch).
        let m = v.as_object_mut().unwrap();
        m.retain(|k, _| {
            ["chain_id", "contract", "recorder", "block", "roots"].contains(&k.as_str())
        });
        for r in m["roots"].as_object_mut().unwrap().values_mut() {
            r.as_object_mut().unwrap().retain(|k, _| {
                ["root", "tx", "block", "log_index", "block_time"].contains(&k.as_str())
            });
        }
        let head = m["roots"]
            .as_object()
            .unwrap()
            .keys()
            .filter_map(|k| k.parse::<u64>().ok())
            .max();
        m.insert("head".into(), head.into());
        m.insert("version".into(), 2.into());
    }));
    let (code, v, text) = offline(&x.a.file, &p, &c, &[]);
    if code != 2 || !v["checks"]["anchored-root"].is_null() {
        fails.push(format!(
            "a version-2 file without --unproven-anchors: exit {code}: {text}"
        ));
    }
    let (code, v, text) = offline(&x.a.file, &p, &c, &["--unproven-anchors"]);
    if code != 0 || !v["notes"].to_string().contains("TRUSTED") {
        fails.push(format!(
            "a version-2 file with --unproven-anchors: exit {code}: {text}"
        ));
    }
    assert!(
        fails.is_empty(),
        "{} of the forged archives:\n{}",
        fails.len(),
        fails.join("\n\n")
    );
}

/// Case h: an anchoring block with fewer confirmations than required does not count; the
/// depth is reported either way.
#[test]
fn too_few_confirmations_do_not_count() {
    // The anchoring block is the latest: one confirmation, the edge of the range.
    let a = anchored(anvil(), ADDR, 2, false);
    let url = a.chain.url.clone();
    let c = a.contract.as_str();
    let b = quantity(&a.receipt["blockNumber"]);
    let (code, v, _) = check("log", &a.file, &pinned(&[&url], c, ADDR, &[]));
    assert_eq!(code, 0, "{v}");
    let depth = v["chain"]["depth"]
        .as_array()
        .unwrap_or_else(|| panic!("no chain.depth: {v}"));
    assert!(depth.iter().any(|d| d["block"] == b), "{v}");

    let (code, v, text) = check(
        "log",
        &a.file,
        &pinned(&[&url], c, ADDR, &["--min-confirmations", "1000"]),
    );
    assert_eq!(code, 2, "{text}");
    assert!(v["checks"]["anchored-root"].is_null(), "{v}");
    let lower = text.to_lowercase();
    assert!(lower.contains("confirmation"), "{text}");

    // The same minimum from a trust file.
    let trust = a.tmp.path().join("trust.toml");
    std::fs::write(
        &trust,
        format!(
            "chain_id = 31337\ncontract = \"{c}\"\n[chain]\nmin_confirmations = 1000\n[[party]]\nname = \"operator\"\nrecorders = [\"{ADDR}\"]\n"
        ),
    )
    .unwrap();
    let (code, v, text) = check(
        "log",
        &a.file,
        &["--trust", trust.to_str().unwrap(), "--rpc", &url, "--json"],
    );
    assert_eq!(code, 2, "{text}");
    assert!(v["checks"]["anchored-root"].is_null(), "{v}");
}
