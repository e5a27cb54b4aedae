//! `afr init`'s anchoring identity, `afr deploy` and `afr anchor`.

use std::{path::Path, process::ExitCode, time::Duration};

use afr_anchorer::Address;
use afr_anchorer::{AnchorError, Settings, signer_from_bytes, signer_from_hex};
use afr_recorder::{Config, Recorder, read_key_file, write_key_file};
use anyhow::{Context, Result};

/// File holding the anchoring key, inside the recorder directory.
pub const ANCHOR_KEY_FILE: &str = "anchor.key";
/// Environment variable that may hold the anchoring key (hex) instead of the file.
pub const ANCHOR_KEY_ENV: &str = "AFR_ANCHOR_KEY";

fn signer(dir: &Path) -> Result<afr_anchorer::PrivateKeySigner> {
    if let Ok(hexkey) = std::env::var(ANCHOR_KEY_ENV) {
        return Ok(signer_from_hex(&hexkey)?);
    }
    let path = dir.join(ANCHOR_KEY_FILE);
    let k = read_key_file(&path)?;
    Ok(signer_from_bytes(&k)?)
}

/// Makes sure an anchoring key exists (AFR_ANCHOR_KEY, or a new 0600 file) and returns its
/// address, which becomes the recorder id.
pub fn prepare_identity(dir: &Path) -> Result<[u8; 20]> {
    let s = if std::env::var(ANCHOR_KEY_ENV).is_ok() {
        signer(dir)?
    } else {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join(ANCHOR_KEY_FILE);
        if path.exists() {
            anyhow::bail!("{} already exists", path.display());
        }
        let mut k = zeroize::Zeroizing::new([0u8; 32]);
        // Retry the (astronomically unlikely) draw of an invalid secp256k1 scalar.
        loop {
            rand::fill(&mut k[..]);
            if signer_from_bytes(&k).is_ok() {
                break;
            }
        }
        write_key_file(&path, &k[..])?;
        signer_from_bytes(&k)?
    };
    Ok(s.address().0.0)
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// `afr deploy`.
pub fn deploy(dir: &Path, rpc: &str, json: bool) -> Result<ExitCode> {
    let s = signer(dir)?;
    let addr = runtime()?.block_on(afr_anchorer::deploy(rpc, s))?;
    if json {
        println!("{}", serde_json::json!({ "contract": addr.to_string() }));
    } else {
        println!("deployed AfrAnchor at {addr}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `afr anchor`.
#[expect(clippy::too_many_arguments, reason = "one per command-line flag")]
pub fn anchor(
    dir: &Path,
    rpc: &str,
    contract: &str,
    watch: bool,
    interval_ms: u64,
    max_batch: usize,
    max_gas_price_gwei: u64,
    confirmations: u64,
) -> Result<ExitCode> {
    let contract: Address = contract
        .parse()
        .context("--contract must be a 0x address")?;
    let settings = Settings {
        rpc_url: rpc.to_owned(),
        contract,
        max_batch,
        max_gas_price_wei: u128::from(max_gas_price_gwei) * 1_000_000_000,
        confirmations,
    };
    let rt = runtime()?;
    loop {
        // Open the store per pass: the recorder may be running in another process between
        // passes (RocksDB allows one writer), and anchoring never blocks recording.
        let result = {
            let r = Recorder::open(dir, Config::default())?;
            let s = signer(dir)?;
            rt.block_on(afr_anchorer::anchor_pending(r.store(), s, &settings))
        };
        match result {
            Ok(p) => {
                for e in &p.reorged {
                    println!(
                        "epoch {e}: anchoring transaction left the canonical chain; re-posting"
                    );
                }
                println!(
                    "anchored {} new epochs in {} transactions ({} already anchored){}",
                    p.posted.len(),
                    p.transactions,
                    p.already,
                    p.posted
                        .last()
                        .map(|e| format!("; head is now epoch {e}"))
                        .unwrap_or_default()
                );
            }
            Err(e @ AnchorError::Fork { .. }) => {
                eprintln!("afr: {e}");
                return Ok(ExitCode::from(3));
            }
            Err(e) if watch => eprintln!("afr: anchoring pass failed, will retry: {e}"),
            Err(e) => return Err(e.into()),
        }
        if !watch {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(interval_ms));
    }
}
