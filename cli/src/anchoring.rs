//! `afr init`'s anchoring identity, `afr deploy` and `afr anchor`.

use std::{path::Path, process::ExitCode, time::Duration};

use afr_anchorer::Address;
use afr_anchorer::{
    AnchorError, Settings, signer_from_bytes, signer_from_hex, signer_from_keystore, write_keystore,
};
use afr_recorder::{Config, Recorder, read_key_file, write_key_file};
use anyhow::{Context, Result};
use zeroize::Zeroizing;

/// File holding the anchoring key, inside the recorder directory.
pub const ANCHOR_KEY_FILE: &str = "anchor.key";
/// Encrypted (V3) keystore of the anchoring key, inside the recorder directory.
pub const KEYSTORE_FILE: &str = "anchor.keystore.json";
/// Environment variable that may hold the anchoring key (hex) instead of the file.
pub const ANCHOR_KEY_ENV: &str = "AFR_ANCHOR_KEY";
/// Environment variable that may hold the keystore passphrase (else `--password-file`).
pub const KEYSTORE_PASSWORD_ENV: &str = "AFR_KEYSTORE_PASSWORD";

/// The keystore passphrase: the first line of `--password-file` if given, else
/// AFR_KEYSTORE_PASSWORD, else none.
fn passphrase(password_file: Option<&Path>) -> Result<Option<Zeroizing<String>>> {
    let p = match password_file {
        Some(f) => {
            let text = Zeroizing::new(
                std::fs::read_to_string(f)
                    .with_context(|| format!("cannot read the password file {}", f.display()))?,
            );
            Zeroizing::new(text.lines().next().unwrap_or_default().to_owned())
        }
        None => match std::env::var(KEYSTORE_PASSWORD_ENV) {
            Ok(v) => Zeroizing::new(v),
            Err(_) => return Ok(None),
        },
    };
    if p.is_empty() {
        anyhow::bail!("the keystore passphrase is empty");
    }
    Ok(Some(p))
}

/// The anchoring signer, looked up in this order: AFR_ANCHOR_KEY (hex secret), the encrypted
/// keystore `anchor.keystore.json` (needs the passphrase), the plain key file `anchor.key`.
pub fn signer(dir: &Path, password_file: Option<&Path>) -> Result<afr_anchorer::PrivateKeySigner> {
    if let Ok(hexkey) = std::env::var(ANCHOR_KEY_ENV) {
        let hexkey = Zeroizing::new(hexkey);
        return Ok(signer_from_hex(&hexkey)?);
    }
    let keystore = dir.join(KEYSTORE_FILE);
    if keystore.exists() {
        let Some(p) = passphrase(password_file)? else {
            anyhow::bail!(
                "{} is encrypted: give its passphrase with --password-file FILE or {KEYSTORE_PASSWORD_ENV}",
                keystore.display()
            );
        };
        return Ok(signer_from_keystore(&keystore, p.as_bytes())?);
    }
    let path = dir.join(ANCHOR_KEY_FILE);
    let k = read_key_file(&path)?;
    Ok(signer_from_bytes(&k)?)
}

/// Makes sure an anchoring key exists (AFR_ANCHOR_KEY, or a new 0600 key file or encrypted
/// keystore) and returns its address, which becomes the recorder id.
pub fn prepare_identity(
    dir: &Path,
    keystore: bool,
    password_file: Option<&Path>,
) -> Result<[u8; 20]> {
    let from_env = std::env::var(ANCHOR_KEY_ENV).is_ok();
    if from_env && !keystore {
        return Ok(signer(dir, password_file)?.address().0.0);
    }
    // Check the passphrase before creating anything.
    let pass = if keystore {
        Some(passphrase(password_file)?.ok_or_else(|| {
            anyhow::anyhow!(
                "afr init --keystore needs a passphrase: --password-file FILE or {KEYSTORE_PASSWORD_ENV}"
            )
        })?)
    } else {
        None
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for f in [ANCHOR_KEY_FILE, KEYSTORE_FILE] {
        let path = dir.join(f);
        if path.exists() {
            anyhow::bail!("{} already exists", path.display());
        }
    }
    let mut k = Zeroizing::new([0u8; 32]);
    if from_env {
        let s = Zeroizing::new(std::env::var(ANCHOR_KEY_ENV).unwrap_or_default());
        hex::decode_to_slice(s.trim().trim_start_matches("0x"), &mut k[..])
            .map_err(|_| anyhow::anyhow!("{ANCHOR_KEY_ENV} must be 32 bytes of hex"))?;
    } else {
        // Retry the (astronomically unlikely) draw of an invalid secp256k1 scalar.
        loop {
            rand::fill(&mut k[..]);
            if signer_from_bytes(&k).is_ok() {
                break;
            }
        }
    }
    let s = signer_from_bytes(&k)?;
    match pass {
        Some(p) => write_keystore(&dir.join(KEYSTORE_FILE), &k, p.as_bytes())?,
        None => write_key_file(&dir.join(ANCHOR_KEY_FILE), &k[..])?,
    }
    Ok(s.address().0.0)
}

/// The single-threaded runtime every anchoring call runs on.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// `afr deploy`: AfrAnchor at its canonical address through the CREATE2 deployer (nothing is
/// sent if it is already there), or with `no_canonical` a fresh copy by plain CREATE.
pub fn deploy(
    dir: &Path,
    password_file: Option<&Path>,
    rpc: &str,
    json: bool,
    no_canonical: bool,
) -> Result<ExitCode> {
    let s = signer(dir, password_file)?;
    let rt = runtime()?;
    let (addr, tx) = if no_canonical {
        (rt.block_on(afr_anchorer::deploy(rpc, s))?, None)
    } else {
        let d = rt.block_on(afr_anchorer::deploy_canonical(rpc, s))?;
        (d.address, d.tx)
    };
    let already = !no_canonical && tx.is_none();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "contract": addr.to_string(),
                "canonical": !no_canonical,
                "already_deployed": already,
                "tx": tx.map(|t| t.to_string()),
            })
        );
    } else if already {
        println!("AfrAnchor is already deployed at its canonical address {addr}; nothing sent");
    } else if no_canonical {
        println!("deployed a non-canonical AfrAnchor at {addr}");
    } else {
        println!("deployed AfrAnchor at its canonical address {addr}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Exit code of `afr anchor` and `afr status` while a fork alarm is raised.
pub const EXIT_FORK: u8 = 3;

/// The flags of `afr anchor`.
#[derive(clap::Args, Debug)]
pub struct AnchorArgs {
    /// JSON-RPC endpoint.
    #[arg(long)]
    pub rpc: String,
    /// Contract address.
    #[arg(long)]
    pub contract: String,
    /// Keep running and anchor epochs as they seal.
    #[arg(long)]
    pub watch: bool,
    /// With --watch, how often to look for sealed epochs.
    #[arg(long, default_value_t = 5_000)]
    pub interval_ms: u64,
    /// Most epochs per transaction (a backlog goes out through anchorBatch).
    #[arg(long, default_value_t = 64)]
    pub max_batch: usize,
    /// Do not send while the gas price is above this many gwei.
    #[arg(long, default_value_t = 200)]
    pub max_gas_price_gwei: u64,
    /// Confirmations to wait for.
    #[arg(long, default_value_t = 1)]
    pub confirmations: u64,
    /// Clear the fork alarm of this epoch (after investigating it), then anchor: the pass
    /// checks the chain again and raises the alarm again if the fork is still there.
    #[arg(long, value_name = "EPOCH")]
    pub clear_fork_alarm: Option<u64>,
}

/// The one-line, loud description of a fork alarm.
pub fn fork_alarm_line(a: &afr_recorder::ForkAlarm) -> String {
    format!(
        "FORK ALARM: epoch {} is anchored on chain {} (contract 0x{}) as 0x{}, but the local root \
         is 0x{}{}; seen at {} µs since the Unix epoch. The anchorer posts nothing until this \
         is investigated and cleared (afr anchor --clear-fork-alarm {}).",
        a.epoch,
        a.chain_id,
        hex::encode(a.contract),
        hex::encode(a.onchain),
        hex::encode(a.local),
        match (a.tx, a.block) {
            (Some(tx), Some(b)) => format!(" (anchored by tx 0x{} in block {b})", hex::encode(tx)),
            (Some(tx), None) => format!(" (anchored by tx 0x{})", hex::encode(tx)),
            _ => String::new(),
        },
        a.seen_at_us,
        a.epoch
    )
}

/// A fork alarm as JSON.
pub fn fork_alarm_json(a: &afr_recorder::ForkAlarm) -> serde_json::Value {
    serde_json::json!({
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

/// `afr anchor`.
pub fn anchor(dir: &Path, password_file: Option<&Path>, args: &AnchorArgs) -> Result<ExitCode> {
    let contract: Address = args
        .contract
        .parse()
        .context("--contract must be a 0x address")?;
    let settings = Settings {
        rpc_url: args.rpc.clone(),
        contract,
        max_batch: args.max_batch,
        max_gas_price_wei: u128::from(args.max_gas_price_gwei) * 1_000_000_000,
        confirmations: args.confirmations,
    };
    if let Some(epoch) = args.clear_fork_alarm {
        let r = Recorder::open(dir, Config::default())?;
        match r.store().fork_alarm()? {
            Some(a) if a.epoch == epoch => {
                r.store().clear_fork_alarm()?;
                println!("cleared the fork alarm of epoch {epoch}; checking the chain again");
            }
            Some(a) => anyhow::bail!(
                "--clear-fork-alarm {epoch}: the raised alarm is about epoch {}, not {epoch}",
                a.epoch
            ),
            None => anyhow::bail!("--clear-fork-alarm {epoch}: no fork alarm is raised"),
        }
    }
    let rt = runtime()?;
    loop {
        // Open the store per pass: the recorder may be running in another process between
        // passes (RocksDB allows one writer), and anchoring never blocks recording.
        let result = {
            let r = Recorder::open(dir, Config::default())?;
            let s = signer(dir, password_file)?;
            rt.block_on(afr_anchorer::anchor_pending(r.store(), s, &settings))
        };
        match result {
            Ok(p) => {
                for e in &p.recovered {
                    println!(
                        "epoch {e}: found anchored on chain without a local receipt; receipt recovered"
                    );
                }
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
            Err(AnchorError::Fork { .. } | AnchorError::ForkAlarmSet { .. }) => {
                let r = Recorder::open(dir, Config::default())?;
                match r.store().fork_alarm()? {
                    Some(a) => eprintln!("afr: {}", fork_alarm_line(&a)),
                    None => eprintln!("afr: FORK ALARM (not recorded in the store)"),
                }
                return Ok(ExitCode::from(EXIT_FORK));
            }
            Err(e) if args.watch => eprintln!(
                "afr: anchoring pass failed, will retry: {}",
                crate::esc(afr_core::redact_urls_in(&e.to_string()))
            ),
            Err(e) => return Err(e.into()),
        }
        if !args.watch {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(args.interval_ms));
    }
}
