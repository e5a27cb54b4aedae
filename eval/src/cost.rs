//! `afr cost`: the paper's RQ2 cost table beside ours, from gas measured on real receipts.
//!
//! The gas figures are not constants: `afr cost` deploys the real contract (on an anvil it
//! starts itself, or on `--rpc`), anchors epochs one per transaction and a backlog with one
//! `anchorBatch`, and reads `gasUsed` from the receipts the anchorer stores, and the signed
//! transaction bytes with `eth_getRawTransactionByHash`. Gas does not depend on the epoch size
//! (an anchor carries a 32-byte root however many events it covers), so one measurement prices
//! every row:
//!
//! ```text
//! anchors per 100K events = ceil(100,000 / epoch size)
//! L1  $/anchor = gas × gas price × ETH price
//! L2  $/anchor = (gas × L2 gas price + L1 data fee) × ETH price
//!     L1 data fee = size × (16 × base fee scalar × L1 base fee
//!                           + blob base fee scalar × blob base fee) / 10^6     (OP Ecotone)
//!     size = (4 × zero bytes + 16 × nonzero bytes) / 16 of the signed transaction
//! batch: gas, size and so fees of one anchorBatch of B epochs, divided by B
//! compromise window = epoch size / event rate (× B when epochs wait to be batched)
//! ```

use std::{
    path::PathBuf,
    process::{Child, Command, ExitCode, Stdio},
    time::{Duration, Instant},
};

use afr_anchorer::{
    Address, AnchorStore, Settings, anchor_pending, deploy, raw_transaction, signer_from_hex,
};
use afr_recorder::{Config, Durability, Recorder};
use anyhow::{Context, Result};
use clap::Args;
use zeroize::Zeroizing;

/// Anvil's first dev account: test ether on local development chains only.
pub(crate) const DEV_KEY: &str =
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

/// Anchoring settings for a local development chain (the measurements here, `afr eval`):
/// no gas-price cap, one confirmation.
pub(crate) fn dev_settings(rpc: &str, contract: Address, max_batch: usize) -> Settings {
    Settings {
        rpc_url: rpc.to_owned(),
        contract,
        max_batch,
        max_gas_price_wei: u128::MAX,
        confirmations: 1,
    }
}

/// Epoch sizes of the paper's RQ2 table.
const EPOCH_SIZES: [u64; 5] = [10, 50, 100, 500, 1000];

/// Events the dollar figures are given per.
const PER_EVENTS: u64 = 100_000;

/// Single `anchor` transactions measured after epoch 0 (the steady state).
const STEADY_ANCHORS: u64 = 5;

/// The paper's figures: (epoch size, chain, dollars per 100K events).
const PAPER: [(u64, &str, f64); 3] = [(10, "L2", 22.95), (100, "L2", 2.30), (1000, "L1", 689.0)];

/// `afr cost` flags.
#[derive(Args, Debug)]
pub struct CostArgs {
    /// Measure on this JSON-RPC endpoint (signer: anvil's first dev account); by default on
    /// an anvil started for the purpose. It anchors synthetic epochs: with AFR_ANCHOR_KEY set,
    /// it refuses unless --with-anchor-key says to sign with that key on purpose.
    #[arg(long)]
    rpc: Option<String>,
    /// With --rpc: sign with AFR_ANCHOR_KEY (a funded key of your own on that chain). Never
    /// use the key that anchors your production recorder: the synthetic epochs would sit in its
    /// history on chain.
    #[arg(long, requires = "rpc")]
    with_anchor_key: bool,
    /// The anvil binary to start (default: .tools/bin/anvil if present, else anvil on PATH).
    #[arg(long)]
    pub(crate) anvil: Option<PathBuf>,
    /// Epochs in the measured anchorBatch (the amortised columns).
    #[arg(long, default_value_t = 10)]
    batch: u64,
    /// Event rate for the compromise window, events per second.
    #[arg(long, default_value_t = 100.0)]
    pub(crate) rate: f64,
    /// ETH price, US dollars.
    #[arg(long, default_value_t = 3000.0)]
    eth_usd: f64,
    /// L1 preset: gas price, gwei (also the L1 base fee in the L2 data fee).
    #[arg(long, default_value_t = 20.0)]
    l1_gas_gwei: f64,
    /// L2 preset: L2 execution gas price, gwei.
    #[arg(long, default_value_t = 0.001)]
    l2_gas_gwei: f64,
    /// L2 preset: the L1 fee's base fee scalar (OP Ecotone `baseFeeScalar`).
    #[arg(long, default_value_t = 5227)]
    base_fee_scalar: u64,
    /// L2 preset: the L1 fee's blob base fee scalar (OP Ecotone `blobBaseFeeScalar`).
    #[arg(long, default_value_t = 1_014_213)]
    blob_base_fee_scalar: u64,
    /// L2 preset: L1 blob base fee, gwei.
    #[arg(long, default_value_t = 1.0)]
    blob_base_fee_gwei: f64,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

/// Gas and signed bytes of one kind of anchoring transaction, per epoch anchored.
#[derive(Debug, Clone, Copy)]
struct Measured {
    /// Epochs per transaction.
    epochs: u64,
    /// Transactions measured.
    transactions: u64,
    /// Receipt gasUsed per epoch (mean over the transactions).
    gas: f64,
    /// Signed transaction bytes per epoch.
    tx_bytes: f64,
    /// Ecotone compressed-size estimate per epoch.
    l1_size: f64,
    /// What the chain charged per epoch, wei: execution plus the L1 data fee the receipt
    /// reports (zero on a chain without one, such as anvil).
    cost_wei: f64,
}

/// A child process killed when dropped (an anvil started for a measurement).
pub(crate) struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts anvil (`bin`, else `.tools/bin/anvil`, else `anvil` on PATH) on a free port; returns
/// it and its URL.
pub(crate) fn start_anvil(bin: Option<PathBuf>) -> Result<(Started, String)> {
    let bin = bin.unwrap_or_else(|| {
        let local = PathBuf::from(".tools/bin/anvil");
        if local.exists() {
            local
        } else {
            PathBuf::from("anvil")
        }
    });
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = Command::new(&bin)
        .args(["--port", &port.to_string(), "--silent"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| {
            format!(
                "cannot start {} (install it with scripts/install-tools.sh, or give --anvil or --rpc)",
                bin.display()
            )
        })?;
    let child = Started(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            anyhow::bail!("{} did not start listening on port {port}", bin.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((child, format!("http://127.0.0.1:{port}")))
}

/// OP Ecotone's compressed-size estimate of a transaction, in bytes.
fn ecotone_size(raw: &[u8]) -> f64 {
    let zeros = raw.iter().filter(|b| **b == 0).count() as f64;
    (4.0 * zeros + 16.0 * (raw.len() as f64 - zeros)) / 16.0
}

/// Deploys, anchors `STEADY_ANCHORS + 1` epochs singly and `batch` epochs in one
/// `anchorBatch`, and returns (chain id, contract, single, batch) from the receipts.
fn measure(rpc: &str, key: &str, batch: u64) -> Result<(u64, String, Measured, Measured)> {
    let rt = crate::runtime()?;
    let signer = signer_from_hex(key)?;
    let contract = rt.block_on(deploy(rpc, signer.clone()))?;
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("afr");
    afr_recorder::init(&dir, signer.address().0.0)?;
    let r = Recorder::open(
        &dir,
        Config {
            epoch_size: 1,
            durability: Durability::Buffered,
            ..Config::default()
        },
    )?;
    let mut events = crate::synth::generate(STEADY_ANCHORS + 1 + batch, 7).into_iter();
    let mut pass = |epochs: u64, max_batch: u64| -> Result<Vec<u64>> {
        for ev in events.by_ref().take(epochs as usize) {
            r.record(ev)?;
        }
        r.flush()?;
        let settings = dev_settings(rpc, contract, max_batch as usize);
        let p = rt.block_on(anchor_pending(r.store(), signer.clone(), &settings))?;
        if p.posted.len() as u64 != epochs {
            anyhow::bail!(
                "expected to anchor {epochs} epochs, anchored {:?}",
                p.posted
            );
        }
        Ok(p.posted)
    };
    let singles = pass(STEADY_ANCHORS + 1, 1)?;
    let batched = pass(batch, batch)?;
    let mut chain_id = 0;
    let mut sum = |epochs: &[u64], per_tx: u64| -> Result<Measured> {
        let (mut gas, mut bytes, mut size, mut cost, mut txs) = (0.0, 0.0, 0.0, 0.0, 0u64);
        for e in epochs.iter().step_by(per_tx as usize) {
            let a = r
                .store()
                .anchor(*e)?
                .with_context(|| format!("no receipt stored for epoch {e}"))?;
            chain_id = a.chain_id;
            let raw = rt.block_on(raw_transaction(rpc, a.tx))?;
            gas += a.gas_used as f64;
            cost += a.cost_wei() as f64;
            bytes += raw.len() as f64;
            size += ecotone_size(&raw);
            txs += 1;
        }
        let per = (txs * per_tx) as f64;
        Ok(Measured {
            epochs: per_tx,
            transactions: txs,
            gas: gas / per,
            tx_bytes: bytes / per,
            l1_size: size / per,
            cost_wei: cost / per,
        })
    };
    // Epoch 0 is cheaper (no previous root to read); the steady state is what recurs.
    let single = sum(&singles[1..], 1)?;
    let batch = sum(&batched, batch)?;
    Ok((chain_id, format!("{contract}"), single, batch))
}

/// Dollar prices of one epoch anchored, under the presets.
struct Prices<'a> {
    a: &'a CostArgs,
}

impl Prices<'_> {
    fn l1(&self, m: &Measured) -> f64 {
        m.gas * self.a.l1_gas_gwei * 1e-9 * self.a.eth_usd
    }

    /// L1 data fee in gwei per epoch (Ecotone formula).
    fn l1_data_fee_gwei(&self, m: &Measured) -> f64 {
        m.l1_size
            * (16.0 * self.a.base_fee_scalar as f64 * self.a.l1_gas_gwei
                + self.a.blob_base_fee_scalar as f64 * self.a.blob_base_fee_gwei)
            / 1e6
    }

    fn l2(&self, m: &Measured) -> f64 {
        (m.gas * self.a.l2_gas_gwei + self.l1_data_fee_gwei(m)) * 1e-9 * self.a.eth_usd
    }
}

fn usd(x: f64) -> String {
    if x >= 100.0 {
        format!("${x:.0}")
    } else if x >= 0.01 {
        format!("${x:.2}")
    } else {
        format!("${x:.4}")
    }
}

fn secs(s: f64) -> String {
    if s < 60.0 {
        format!("{s:.1} s")
    } else if s < 3600.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

/// `afr cost`.
pub fn run(a: &CostArgs) -> Result<ExitCode> {
    let v = report(a)?;
    if a.json {
        println!("{v}");
    } else {
        print_table(a, &v);
    }
    Ok(ExitCode::SUCCESS)
}

/// Measures gas on a real chain and prices the RQ2 table: one JSON object with `source`,
/// `chain_id`, `contract`, `single`, `batched`, `presets` and `rows` (one per epoch size).
pub fn report(a: &CostArgs) -> Result<serde_json::Value> {
    if a.batch < 2 {
        anyhow::bail!("--batch must be at least 2 (epochs in one anchorBatch)");
    }
    if !(a.rate > 0.0 && a.rate.is_finite()) {
        anyhow::bail!("--rate must be a positive number of events per second");
    }
    let (_anvil, rpc, key, source) = match &a.rpc {
        Some(url) => {
            let production = std::env::var(crate::ANCHOR_KEY_ENV)
                .ok()
                .map(Zeroizing::new);
            let key = match (production, a.with_anchor_key) {
                (Some(k), true) => k,
                (None, true) => {
                    anyhow::bail!("--with-anchor-key: {} is not set", crate::ANCHOR_KEY_ENV)
                }
                (Some(_), false) => anyhow::bail!(
                    "{} is set: afr cost would anchor synthetic epochs under that key on {}. \
                     Unset it to measure with anvil's dev account, or pass --with-anchor-key \
                     to sign with it on purpose (never your production recorder's key)",
                    crate::ANCHOR_KEY_ENV,
                    afr_core::redact_url(url)
                ),
                (None, false) => Zeroizing::new(DEV_KEY.to_owned()),
            };
            (
                None,
                url.clone(),
                key,
                format!("--rpc {}", afr_core::redact_url(url)),
            )
        }
        None => {
            let (child, url) = start_anvil(a.anvil.clone())?;
            (
                Some(child),
                url,
                Zeroizing::new(DEV_KEY.to_owned()),
                "an anvil started by afr cost".to_owned(),
            )
        }
    };
    let (chain_id, contract, single, batch) = measure(&rpc, &key, a.batch)?;
    let p = Prices { a };
    let rows: Vec<serde_json::Value> = EPOCH_SIZES
        .iter()
        .map(|&size| {
            let anchors = PER_EVENTS.div_ceil(size) as f64;
            let window = size as f64 / a.rate;
            let paper = PAPER.iter().find(|(s, _, _)| *s == size);
            serde_json::json!({
                "epoch_size": size,
                "anchors_per_100k_events": anchors,
                "gas_per_anchor": single.gas,
                "gas_per_epoch_batched": batch.gas,
                "window_s": window,
                "window_batched_s": window * a.batch as f64,
                "l1_usd_per_100k": anchors * p.l1(&single),
                "l1_batched_usd_per_100k": anchors * p.l1(&batch),
                "l2_usd_per_100k": anchors * p.l2(&single),
                "l2_batched_usd_per_100k": anchors * p.l2(&batch),
                "paper": paper.map(|(_, chain, usd)| serde_json::json!({"chain": chain, "usd_per_100k": usd})),
            })
        })
        .collect();
    let presets = serde_json::json!({
        "eth_usd": a.eth_usd,
        "l1_gas_gwei": a.l1_gas_gwei,
        "l2_gas_gwei": a.l2_gas_gwei,
        "l1_base_fee_gwei": a.l1_gas_gwei,
        "base_fee_scalar": a.base_fee_scalar,
        "blob_base_fee_scalar": a.blob_base_fee_scalar,
        "blob_base_fee_gwei": a.blob_base_fee_gwei,
        "rate_events_per_s": a.rate,
        "batch": a.batch,
    });
    let m = |m: &Measured| {
        serde_json::json!({
            "epochs_per_tx": m.epochs, "transactions": m.transactions, "gas_per_epoch": m.gas,
            "tx_bytes_per_epoch": m.tx_bytes, "l1_size_per_epoch": m.l1_size,
            "charged_wei_per_epoch": m.cost_wei,
            "l1_usd_per_epoch": p.l1(m), "l2_usd_per_epoch": p.l2(m),
            "l2_data_fee_gwei_per_epoch": p.l1_data_fee_gwei(m),
        })
    };
    Ok(serde_json::json!({
        "source": source, "chain_id": chain_id, "contract": contract,
        "single": m(&single), "batched": m(&batch), "presets": presets, "rows": rows,
    }))
}

/// The text form of [`report`]'s object.
fn print_table(a: &CostArgs, v: &serde_json::Value) {
    let num = |x: &serde_json::Value| x.as_f64().unwrap_or(f64::NAN);
    println!(
        "gas measured on chain {} ({}), contract {}, from receipts:",
        v["chain_id"],
        crate::esc(v["source"].as_str().unwrap_or_default()),
        crate::esc(v["contract"].as_str().unwrap_or_default())
    );
    for (what, x) in [
        (
            format!("anchor, steady state ({} txs)", v["single"]["transactions"]),
            &v["single"],
        ),
        (
            format!("anchorBatch of {}, per epoch", a.batch),
            &v["batched"],
        ),
    ] {
        println!(
            "  {what:<34} {:>7.0} gas  {:>5.1} signed bytes  L1 {}  L2 {} per epoch",
            num(&x["gas_per_epoch"]),
            num(&x["tx_bytes_per_epoch"]),
            usd(num(&x["l1_usd_per_epoch"])),
            usd(num(&x["l2_usd_per_epoch"]))
        );
    }
    println!(
        "presets: ETH ${}; L1 {} gwei; OP-stack L2 {} gwei execution + L1 data fee \
         (L1 base fee {} gwei × 16 × scalar {}, blob base fee {} gwei × scalar {}, / 10^6 per byte)",
        a.eth_usd,
        a.l1_gas_gwei,
        a.l2_gas_gwei,
        a.l1_gas_gwei,
        a.base_fee_scalar,
        a.blob_base_fee_gwei,
        a.blob_base_fee_scalar
    );
    println!(
        "compromise window at {} events/s: epoch fill time; batched: {} epochs wait for one anchorBatch",
        a.rate, a.batch
    );
    println!();
    println!(
        "{:>6} {:>9} {:>9} {:>9} | {:>10} {:>10} | {:>10} {:>10} | paper",
        "epoch", "window", "window", "anchors", "L1 $/100K", "L1 $/100K", "L2 $/100K", "L2 $/100K"
    );
    println!(
        "{:>6} {:>9} {:>9} {:>9} | {:>10} {:>10} | {:>10} {:>10} | $/100K",
        "size",
        "single",
        format!("batch {}", a.batch),
        "/100K",
        "single",
        "batched",
        "single",
        "batched"
    );
    for r in v["rows"].as_array().into_iter().flatten() {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let paper = match &r["paper"] {
            serde_json::Value::Null => String::new(),
            v => format!(
                "{} {}",
                v["chain"].as_str().unwrap_or_default(),
                usd(v["usd_per_100k"].as_f64().unwrap_or(f64::NAN))
            ),
        };
        println!(
            "{:>6} {:>9} {:>9} {:>9} | {:>10} {:>10} | {:>10} {:>10} | {paper}",
            f("epoch_size"),
            secs(f("window_s")),
            secs(f("window_batched_s")),
            f("anchors_per_100k_events"),
            usd(f("l1_usd_per_100k")),
            usd(f("l1_batched_usd_per_100k")),
            usd(f("l2_usd_per_100k")),
            usd(f("l2_batched_usd_per_100k")),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecotone_size_counts_zero_bytes_at_a_quarter() {
        assert_eq!(ecotone_size(&[0; 16]), 4.0);
        assert_eq!(ecotone_size(&[1; 16]), 16.0);
        assert_eq!(ecotone_size(&[0, 0, 0, 0, 9]), 2.0);
    }

    #[test]
    fn prices_follow_the_stated_formulas() {
        let a = CostArgs {
            rpc: None,
            with_anchor_key: false,
            anvil: None,
            batch: 10,
            rate: 100.0,
            eth_usd: 3000.0,
            l1_gas_gwei: 20.0,
            l2_gas_gwei: 0.001,
            base_fee_scalar: 5227,
            blob_base_fee_scalar: 1_014_213,
            blob_base_fee_gwei: 1.0,
            json: false,
        };
        let m = Measured {
            epochs: 1,
            transactions: 1,
            gas: 50_000.0,
            tx_bytes: 200.0,
            l1_size: 180.0,
            cost_wei: 0.0,
        };
        let p = Prices { a: &a };
        // 50,000 gas × 20 gwei = 0.001 ETH = $3.
        assert!((p.l1(&m) - 3.0).abs() < 1e-9);
        // 180 × (16 × 5227 × 20 + 1,014,213 × 1) / 1e6 gwei.
        let data = 180.0 * (16.0 * 5227.0 * 20.0 + 1_014_213.0) / 1e6;
        assert!((p.l1_data_fee_gwei(&m) - data).abs() < 1e-9);
        assert!((p.l2(&m) - (50.0 + data) * 1e-9 * 3000.0).abs() < 1e-12);
    }
}
