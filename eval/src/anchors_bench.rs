//! `afr bench anchors`: what the anchor proofs of issue #33 cost a verifier per anchored epoch,
//! against a real anvil, with both batch sizes in one run.
//!
//! ```text
//! anvil ─▶ deploy AfrAnchor (cast) ─▶ per configuration B (epochs per transaction):
//!            E epochs in ⌈E/B⌉ transactions, one per block, each block also holding
//!            --others unrelated transfers (legacy and EIP-1559, from other accounts)
//!        ─▶ (a) proven fetch: afr_verify::anchors::Rpc::fetch (headers, tries, signatures)
//!        ─▶ (b) bare answers: eth_getLogs + eth_getTransactionReceipt per anchoring tx
//!               (batched), as the verifier read before #33; (b') the same plus its per-block
//!               eth_getCode and eth_getBlockByNumber
//!        ─▶ (c) bytes: the proof archive (version 3) vs a version-2 file of the same roots
//!        ─▶ (d) Archive::check, the offline re-check of the archive
//! ```
//!
//! Each timing is the median (and min/max) of `--runs` runs, (a) and (b) interleaved so drift
//! on the machine falls on both. Added time per anchored epoch is (a − b) / E.

use std::{process::ExitCode, time::Instant};

use afr_core::{Hash32, RecorderId, deployment::ANCHORED_TOPIC, epoch::back_pointer, hash::sha256};
use afr_verify::anchors::Rpc;
use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use serde::Serialize;
use serde_json::{Value, json};

use crate::bench::percentile;

/// Options of `afr bench anchors`.
#[derive(Args, Debug)]
pub struct AnchorsBench {
    /// Anchored epochs per configuration.
    #[arg(long, default_value_t = 1000)]
    epochs: u64,
    /// Epochs per anchoring transaction; 1 and 100 when not given (both run).
    #[arg(long)]
    batch: Vec<u64>,
    /// Unrelated transfers in each block beside its anchoring transaction.
    #[arg(long, default_value_t = 3)]
    others: u64,
    /// Runs of each measurement (median, min, max).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

/// Median, min and max of one measurement, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
struct Ms {
    median_ms: f64,
    min_ms: f64,
    max_ms: f64,
}

fn ms(samples: &[f64]) -> Ms {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let r = |x: f64| (x * 1000.0).round() / 1000.0;
    Ms {
        median_ms: r(percentile(&s, 0.5)),
        min_ms: r(s.first().copied().unwrap_or(0.0)),
        max_ms: r(s.last().copied().unwrap_or(0.0)),
    }
}

fn elapsed_ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Sizes of one file, compact and pretty.
#[derive(Debug, Clone, Copy, Serialize)]
struct Bytes {
    compact: usize,
    pretty: usize,
    compact_per_epoch: f64,
    pretty_per_epoch: f64,
    compact_per_1000_epochs: f64,
    pretty_per_1000_epochs: f64,
}

fn bytes(v: &impl Serialize, epochs: u64) -> Result<Bytes> {
    let compact = serde_json::to_string(v)?.len();
    let pretty = serde_json::to_string_pretty(v)?.len();
    let e = epochs as f64;
    let r = |x: f64| (x * 10.0).round() / 10.0;
    Ok(Bytes {
        compact,
        pretty,
        compact_per_epoch: r(compact as f64 / e),
        pretty_per_epoch: r(pretty as f64 / e),
        compact_per_1000_epochs: (compact as f64 * 1000.0 / e).round(),
        pretty_per_1000_epochs: (pretty as f64 * 1000.0 / e).round(),
    })
}

/// The figures of one configuration (epochs per transaction).
#[derive(Debug, Serialize)]
struct Config {
    batch: u64,
    epochs: u64,
    anchoring_txs: u64,
    blocks_with_anchors: usize,
    txs_per_block: u64,
    anchor_s: f64,
    proven_fetch: Ms,
    bare_logs_receipts: Ms,
    bare_pre33: Ms,
    added_us_per_epoch: f64,
    added_us_per_epoch_vs_pre33: f64,
    proven_over_bare: f64,
    archive: Bytes,
    v2_file: Bytes,
    archive_over_v2: f64,
    archive_check: Ms,
    archive_check_ms_per_1000_epochs: f64,
}

/// Plain JSON-RPC over ureq: the bare answers, and the chain set-up.
struct Plain {
    url: String,
    agent: ureq::Agent,
}

impl Plain {
    fn new(url: &str) -> Plain {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(std::time::Duration::from_secs(60)))
            .build()
            .into();
        Plain {
            url: url.to_owned(),
            agent,
        }
    }

    fn post(&self, body: &Value) -> Result<Value> {
        let text = self
            .agent
            .post(&self.url)
            .header("content-type", "application/json")
            .send(body.to_string().as_bytes())
            .map_err(|e| anyhow::anyhow!("rpc: {e}"))?
            .body_mut()
            .with_config()
            .limit(afr_verify::anchors::MAX_RESPONSE)
            .read_to_string()
            .map_err(|e| anyhow::anyhow!("rpc answer: {e}"))?;
        Ok(serde_json::from_str(&text)?)
    }

    fn call(&self, method: &str, params: Value) -> Result<Value> {
        let v =
            self.post(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))?;
        if let Some(e) = v.get("error") {
            bail!("{method}: {e}");
        }
        Ok(v["result"].clone())
    }

    /// Calls in JSON-RPC batches of at most 256 (as the verifier sends them); results in
    /// request order.
    fn batch(&self, calls: &[(&str, Value)]) -> Result<Vec<Value>> {
        let mut out = Vec::with_capacity(calls.len());
        for chunk in calls.chunks(256) {
            let body: Vec<Value> = chunk
                .iter()
                .enumerate()
                .map(|(i, (m, p))| json!({"jsonrpc": "2.0", "id": i, "method": m, "params": p}))
                .collect();
            let v = self.post(&Value::Array(body))?;
            let items = v.as_array().context("not a batch answer")?;
            let mut results = vec![Value::Null; chunk.len()];
            for item in items {
                if let Some(e) = item.get("error") {
                    bail!("batch: {e}");
                }
                let i = item["id"].as_u64().context("no id")? as usize;
                *results.get_mut(i).context("unknown id")? = item["result"].clone();
            }
            out.extend(results);
        }
        Ok(out)
    }
}

/// What the verifier read before #33: the `Anchored` logs, then one receipt per anchoring
/// transaction; with `pre33`, also the code and the header of each anchoring block. Returns
/// the number of logs read.
fn bare(
    p: &Plain,
    contract: &str,
    recorder: &RecorderId,
    block: u64,
    pre33: bool,
) -> Result<usize> {
    let topic = format!("0x{}{}", "0".repeat(24), hex::encode(recorder));
    let logs = p.call(
        "eth_getLogs",
        json!([{
            "address": contract,
            "topics": [ANCHORED_TOPIC, topic],
            "fromBlock": "0x0",
            "toBlock": format!("0x{block:x}"),
        }]),
    )?;
    let logs = logs.as_array().context("eth_getLogs: not a list")?;
    let mut txs: Vec<&str> = logs
        .iter()
        .filter_map(|l| l["transactionHash"].as_str())
        .collect();
    txs.sort_unstable();
    txs.dedup();
    let calls: Vec<(&str, Value)> = txs
        .iter()
        .map(|t| ("eth_getTransactionReceipt", json!([t])))
        .collect();
    let receipts = p.batch(&calls)?;
    ensure!(
        receipts.iter().all(|r| r["status"] == "0x1"),
        "a receipt is missing or failed"
    );
    if pre33 {
        let mut blocks: Vec<&str> = logs
            .iter()
            .filter_map(|l| l["blockNumber"].as_str())
            .collect();
        blocks.sort_unstable();
        blocks.dedup();
        let calls: Vec<(&str, Value)> = blocks
            .iter()
            .flat_map(|b| {
                [
                    ("eth_getCode", json!([contract, b])),
                    ("eth_getBlockByNumber", json!([b, false])),
                ]
            })
            .collect();
        let answers = p.batch(&calls)?;
        ensure!(answers.len() == 2 * blocks.len(), "short batch");
    }
    Ok(logs.len())
}

/// The root of epoch `e` (any 32 bytes do: the contract checks the chain of back-pointers).
fn root(e: u64) -> Hash32 {
    sha256(&[b"afr/bench/anchors", &e.to_be_bytes()])
}

fn word(x: u64) -> String {
    format!("{x:064x}")
}

fn selector(sig: &str) -> String {
    hex::encode(&afr_core::eip712::keccak256(sig.as_bytes())[..4])
}

/// Calldata anchoring epochs `first..first + n`: `anchor` for one, `anchorBatch` for more,
/// as the anchorer sends them.
fn calldata(first: u64, n: u64) -> String {
    let prev = if first == 0 {
        Hash32::ZERO
    } else {
        back_pointer(first, &root(first - 1))
    };
    if n == 1 {
        return format!(
            "0x{}{}{}{}",
            selector("anchor(uint64,bytes32,bytes32)"),
            word(first),
            root(first),
            prev
        );
    }
    let mut s = format!(
        "0x{}{}{}{}{}",
        selector("anchorBatch(uint64,bytes32[],bytes32)"),
        word(first),
        word(0x60),
        prev,
        word(n)
    );
    for e in first..first + n {
        s += &root(e).to_string();
    }
    s
}

/// Starts an anvil, deploys AfrAnchor and anchors `epochs` epochs `batch` at a time, one
/// transaction per block beside `others` transfers; measures the configuration.
fn configuration(b: &AnchorsBench, batch: u64) -> Result<Config> {
    let chain = afr_testkit::anvil();
    let url = chain.url.as_str();
    let p = Plain::new(url);
    let artifact: Value = serde_json::from_str(afr_core::deployment::ARTIFACT)?;
    let code = artifact["bytecode"]["object"]
        .as_str()
        .context("the artifact has no bytecode")?;
    let deployed: Value = serde_json::from_str(&afr_testkit::cast(&[
        "send",
        "--json",
        "--rpc-url",
        url,
        "--private-key",
        afr_testkit::DEV_KEY,
        "--create",
        code,
    ]))?;
    ensure!(
        deployed["status"] == "0x1",
        "deploying AfrAnchor failed: {deployed}"
    );
    let contract = deployed["contractAddress"]
        .as_str()
        .context("no contract address")?
        .to_ascii_lowercase();
    let accounts = p.call("eth_accounts", json!([]))?;
    let accounts: Vec<String> = accounts
        .as_array()
        .context("eth_accounts")?
        .iter()
        .filter_map(|a| a.as_str().map(str::to_ascii_lowercase))
        .collect();
    ensure!(
        accounts.first().map(String::as_str) == Some(afr_testkit::DEV_ADDR) && accounts.len() >= 6,
        "anvil's dev accounts are not the expected ones"
    );
    let gas_price = p.call("eth_gasPrice", json!([]))?;
    p.call("evm_setAutomine", json!([false]))?;
    let t = Instant::now();
    let mut first = 0;
    let mut k = 0u64;
    let mut anchoring = Vec::new();
    while first < b.epochs {
        let n = batch.min(b.epochs - first);
        let tx = p.call(
            "eth_sendTransaction",
            json!([{"from": accounts[0], "to": contract, "data": calldata(first, n)}]),
        )?;
        anchoring.push(("eth_getTransactionReceipt", json!([tx])));
        for _ in 0..b.others {
            k += 1;
            let from = &accounts[1 + (k % 3) as usize];
            let to = format!("0x{}", hex::encode(&sha256(&[&k.to_be_bytes()]).0[..20]));
            let mut tx = json!({"from": from, "to": to, "value": format!("0x{k:x}")});
            if k.is_multiple_of(2) {
                // Every other transfer a legacy transaction, so the tries hold both kinds.
                tx["gasPrice"] = gas_price.clone();
            }
            p.call("eth_sendTransaction", json!([tx]))?;
        }
        p.call("evm_mine", json!([]))?;
        first += n;
    }
    // One more block of transfers only, so the block read at is not an anchoring block: the
    // verifier at e246011 rejects a pinned block that holds an anchoring transaction ("0 of 1
    // agree": providers::prove drops that block's hash from its own view).
    for to in &accounts[4..6] {
        p.call(
            "eth_sendTransaction",
            json!([{"from": accounts[1], "to": to, "value": "0x1"}]),
        )?;
    }
    p.call("evm_mine", json!([]))?;
    let anchor_s = t.elapsed().as_secs_f64();
    for r in p.batch(&anchoring)? {
        ensure!(r["status"] == "0x1", "an anchoring transaction failed: {r}");
        ensure!(
            r["logs"].as_array().is_some_and(|l| !l.is_empty()),
            "an anchoring transaction logged nothing: {r}"
        );
    }
    let block = p.call("eth_blockNumber", json!([]))?;
    let block = u64::from_str_radix(block.as_str().unwrap_or("").trim_start_matches("0x"), 16)?;
    let recorder = afr_verify::parse_addr(afr_testkit::DEV_ADDR, "the recorder")
        .map_err(|e| anyhow::anyhow!("recorder address: {e}"))?;
    let rpc = Rpc::new(url);

    let (mut proven, mut plain, mut pre33) = (vec![], vec![], vec![]);
    let mut fetched = None;
    for _ in 0..b.runs.max(1) {
        let t = Instant::now();
        let f = rpc
            .fetch(31337, &contract, &recorder, (0, block), None)
            .map_err(|e| anyhow::anyhow!("proven fetch: {e}"))?;
        proven.push(elapsed_ms(t));
        ensure!(
            f.anchors.roots.len() as u64 == b.epochs && f.unmet.is_none(),
            "the proven fetch found {} of {} anchored epochs ({} in the archive; {:?}; {:?})",
            f.anchors.roots.len(),
            b.epochs,
            f.archive.roots.len(),
            f.ignored.first(),
            f.unmet
        );
        fetched = Some(f);
        let t = Instant::now();
        let logs = bare(&p, &contract, &recorder, block, false)?;
        plain.push(elapsed_ms(t));
        ensure!(logs as u64 == b.epochs, "eth_getLogs returned {logs} logs");
        let t = Instant::now();
        bare(&p, &contract, &recorder, block, true)?;
        pre33.push(elapsed_ms(t));
    }
    let f = fetched.context("no run")?;
    let mut check = vec![];
    for _ in 0..b.runs.max(1) {
        let t = Instant::now();
        let pv = f
            .archive
            .check(31337, &contract, &recorder, 0)
            .map_err(|e| anyhow::anyhow!("Archive::check: {e}"))?;
        check.push(elapsed_ms(t));
        ensure!(
            pv.anchors.roots.len() as u64 == b.epochs,
            "the archive re-checks {} of {} epochs",
            pv.anchors.roots.len(),
            b.epochs
        );
    }
    let (proven, plain, pre33, check) = (ms(&proven), ms(&plain), ms(&pre33), ms(&check));
    let archive = bytes(&f.archive, b.epochs)?;
    let v2_file = bytes(&f.anchors, b.epochs)?;
    let e = b.epochs as f64;
    let r1 = |x: f64| (x * 10.0).round() / 10.0;
    let r2 = |x: f64| (x * 100.0).round() / 100.0;
    Ok(Config {
        batch,
        epochs: b.epochs,
        anchoring_txs: b.epochs.div_ceil(batch),
        blocks_with_anchors: f.archive.blocks.len(),
        txs_per_block: 1 + b.others,
        anchor_s: r2(anchor_s),
        added_us_per_epoch: r1((proven.median_ms - plain.median_ms) * 1e3 / e),
        added_us_per_epoch_vs_pre33: r1((proven.median_ms - pre33.median_ms) * 1e3 / e),
        proven_over_bare: r2(proven.median_ms / plain.median_ms),
        proven_fetch: proven,
        bare_logs_receipts: plain,
        bare_pre33: pre33,
        archive_over_v2: r2(archive.compact as f64 / v2_file.compact as f64),
        archive,
        v2_file,
        archive_check_ms_per_1000_epochs: r2(check.median_ms * 1000.0 / e),
        archive_check: check,
    })
}

/// Runs `afr bench anchors` and prints its figures.
pub fn run(b: &AnchorsBench) -> Result<ExitCode> {
    ensure!(b.epochs >= 1, "--epochs must be at least 1");
    let batches = if b.batch.is_empty() {
        vec![1, 100]
    } else {
        b.batch.clone()
    };
    ensure!(
        batches.iter().all(|&x| x >= 1),
        "--batch must be at least 1"
    );
    let mut configs = Vec::new();
    for &batch in &batches {
        configs.push(configuration(b, batch)?);
    }
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    if b.json {
        println!(
            "{}",
            json!({
                "epochs": b.epochs,
                "others_per_block": b.others,
                "runs": b.runs,
                "build": build,
                "configurations": configs,
            })
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "afr bench anchors: {} anchored epochs per configuration on a local anvil, one anchoring \
         transaction per block beside {} transfers; median (min-max) of {} runs; {build} build",
        b.epochs, b.others, b.runs
    );
    let t = |m: &Ms| format!("{:>10.2} ms ({:.2}-{:.2})", m.median_ms, m.min_ms, m.max_ms);
    for c in &configs {
        println!(
            " batch {} ({} anchoring transactions in {} blocks, anchored in {:.1} s)",
            c.batch, c.anchoring_txs, c.blocks_with_anchors, c.anchor_s
        );
        println!(
            "  {:<52} {}",
            "(a) proven fetch (Rpc::fetch)",
            t(&c.proven_fetch)
        );
        println!(
            "  {:<52} {}",
            "(b) bare: eth_getLogs + receipts, batched",
            t(&c.bare_logs_receipts)
        );
        println!(
            "  {:<52} {}",
            "(b') bare as before #33: + eth_getCode, header/block",
            t(&c.bare_pre33)
        );
        println!(
            "  {:<52} {:>10.1} µs  (vs b': {:.1} µs; a/b = {:.2}x)",
            "added time per anchored epoch (a-b)/E",
            c.added_us_per_epoch,
            c.added_us_per_epoch_vs_pre33,
            c.proven_over_bare
        );
        let row = |name: &str, x: &Bytes| {
            println!(
                "  {name:<52} {:>10.1} B/epoch  {:>9.0} B per 1,000 epochs  (pretty {:.1} B/epoch, {:.0} per 1,000)",
                x.compact_per_epoch,
                x.compact_per_1000_epochs,
                x.pretty_per_epoch,
                x.pretty_per_1000_epochs
            );
        };
        row("archive (version 3), compact JSON", &c.archive);
        row("version-2 file of the same roots", &c.v2_file);
        println!(
            "  {:<52} {:>10.1} B/epoch  ({:.2}x the version-2 file)",
            "added bytes per anchored epoch",
            c.archive.compact_per_epoch - c.v2_file.compact_per_epoch,
            c.archive_over_v2
        );
        println!(
            "  {:<52} {}  = {:.2} ms per 1,000 epochs",
            "(d) Archive::check (offline)",
            t(&c.archive_check),
            c.archive_check_ms_per_1000_epochs
        );
    }
    Ok(ExitCode::SUCCESS)
}
