//! `afr init`'s anchoring identity, `afr deploy` and `afr anchor`.

use std::{path::Path, process::ExitCode, time::Duration};

use afr_anchorer::{
    Address, AnchorError, AnchorStore, Event, Options, Settings, reconcile::Wait,
    signer_from_bytes, signer_from_hex, signer_from_keystore, write_keystore,
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
/// Environment variable that may hold the JSON-RPC endpoint (else `--rpc` or [`RPC_FILE`]).
pub const RPC_ENV: &str = "AFR_RPC_URL";
/// File inside the recorder directory that may hold the JSON-RPC endpoint (first line; mode
/// 0600, since hosted endpoints carry an API key in the URL).
pub const RPC_FILE: &str = "rpc.url";

/// The JSON-RPC endpoint: `--rpc`, else AFR_RPC_URL (clap reads both into `given`), else the
/// first line of `<dir>/rpc.url`, which must not be readable by group or others.
pub fn rpc_url(dir: &Path, given: Option<&str>) -> Result<String> {
    if let Some(u) = given.filter(|u| !u.trim().is_empty()) {
        return Ok(u.trim().to_owned());
    }
    let path = dir.join(RPC_FILE);
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
            "no JSON-RPC endpoint: pass --rpc URL, set {RPC_ENV}, or write it to {} (mode 0600)",
            path.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            anyhow::bail!(
                "{}: mode is {mode:o}; it must be 600 (it holds the endpoint's API key)",
                path.display()
            );
        }
    }
    let text = Zeroizing::new(
        std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?,
    );
    let url = text.lines().next().unwrap_or_default().trim().to_owned();
    if url.is_empty() {
        anyhow::bail!("{} is empty", path.display());
    }
    Ok(url)
}

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

/// `--confirmations`: a depth, `auto` (the chain's default) or `finalized`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmations {
    /// The chain's default ([`afr_anchorer::default_confirmations`]).
    Auto,
    /// This many.
    Depth(u64),
    /// The chain's `finalized` block.
    Finalized,
}

impl std::str::FromStr for Confirmations {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Confirmations::Auto),
            "finalized" => Ok(Confirmations::Finalized),
            n => match n.parse::<u64>() {
                Ok(0) | Err(_) => Err(format!(
                    "{n:?}: expected a number of confirmations (1 or more), auto or finalized"
                )),
                Ok(d) => Ok(Confirmations::Depth(d)),
            },
        }
    }
}

/// The flags of `afr anchor`.
#[derive(clap::Args, Debug)]
pub struct AnchorArgs {
    /// JSON-RPC endpoint (else AFR_RPC_URL, else the first line of <dir>/rpc.url, mode 0600).
    #[arg(long, env = RPC_ENV, hide_env_values = true)]
    pub rpc: Option<String>,
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
    /// Cap on max_fee_per_gas, in gwei: no transaction is signed above it (replacements of a
    /// stuck one included), and nothing is sent while the base fee is over it.
    #[arg(long, default_value_t = 200)]
    pub max_gas_price_gwei: u64,
    /// Cap on the OP-stack L1 data fee of one transaction, in gwei (read from the
    /// GasPriceOracle before sending; ignored on chains without it).
    #[arg(long, default_value_t = 1_000_000)]
    pub max_l1_fee_gwei: u64,
    /// When an anchor counts as covering its epoch: a number of confirmations, `auto` (1 on
    /// anvil, 12 on Ethereum, 10 on OP-stack L2s, ...: docs/anchoring.md) or `finalized` (the
    /// chain's finalized block; on an OP-stack chain, L1 finality).
    #[arg(long, default_value = "auto")]
    pub confirmations: Confirmations,
    /// Replace a transaction still unmined after this many seconds, at the same nonce with
    /// fees 12.5 % higher (never above the cap).
    #[arg(long, default_value_t = 30)]
    pub replace_after_s: u64,
    /// The store's receipts were made on another chain or contract: archive them (they are
    /// kept in the store) and anchor the whole log anew on this one.
    #[arg(long)]
    pub switch_chain: bool,
    /// Clear the fork alarm of this epoch (after investigating it), then anchor: the pass
    /// checks the chain again and raises the alarm again if the fork is still there.
    #[arg(long, value_name = "EPOCH")]
    pub clear_fork_alarm: Option<u64>,
}

/// The one-line, loud description of a fork alarm.
pub fn fork_alarm_line(a: &afr_anchorer::ForkAlarm) -> String {
    afr_server::status::fork_alarm_line(&afr_server::status::fork_alarm_json(a))
}

/// The line `afr anchor` prints for an event of a pass (None: not worth a line).
pub(crate) fn event_line(e: &Event) -> Option<String> {
    Some(match e {
        Event::Retry {
            what,
            attempt,
            error,
        } => format!("anchorer: {what}: attempt {attempt} failed: {error}; retrying"),
        Event::MarkerReset { epoch, block } => format!(
            "the chain no longer holds what was verified up to epoch {epoch} at block {block} \
             (a reorg deeper than the confirmation depth, or a reset chain); verifying again from epoch 0"
        ),
        Event::Switched { archived } => format!(
            "switched chain or contract: {archived} receipts of the old one archived in the store"
        ),
        Event::Recovered { epoch } => {
            format!(
                "epoch {epoch}: found anchored on chain without a local receipt; receipt recovered"
            )
        }
        Event::RecoverFailed { epoch, reason } => format!(
            "epoch {epoch}: anchored on chain, but its receipt cannot be recovered ({reason}); \
             it stays uncovered in `afr status` until a pass recovers it"
        ),
        Event::Reorged { epoch } => {
            format!("epoch {epoch}: anchoring transaction left the canonical chain; re-posting")
        }
        Event::Moved { epoch, from, to } => format!(
            "epoch {epoch}: anchoring transaction re-included in block {to} (was {from}); receipt corrected"
        ),
        Event::NotVisibleYet { epoch, wait } => match wait {
            Wait::TxAfterPinnedBlock { block } => format!(
                "epoch {epoch}: mined in block {block}, newer than the block the endpoint answers for; waiting"
            ),
            Wait::ProviderDisagrees { block } => format!(
                "epoch {epoch}: mined in block {block}, but the endpoint shows no root yet; waiting"
            ),
            Wait::OtherRootAtOlderBlock { block } => format!(
                "epoch {epoch}: the endpoint shows another root at a block older than ours ({block}); waiting"
            ),
            Wait::Earlier { .. } => return None,
        },
        Event::Sent {
            first,
            last,
            tx,
            nonce,
            fees,
            attempt,
        } => format!(
            "epochs {first}..={last}: {} {tx} (nonce {nonce}, max fee {} wei/gas, tip {} wei/gas)",
            if *attempt == 1 {
                "sent".to_owned()
            } else {
                format!("replacement {attempt} sent")
            },
            fees.max_fee_per_gas,
            fees.max_priority_fee_per_gas
        ),
        Event::Landed {
            first,
            last,
            tx,
            block,
            cost_wei,
        } => format!("epochs {first}..={last}: {tx} mined in block {block}, cost {cost_wei} wei"),
        Event::AlreadyAnchored { epoch } => format!(
            "epoch {epoch}: the contract already holds the local root (an earlier run's transaction); nothing sent"
        ),
    })
}

/// `afr anchor`.
pub fn anchor(dir: &Path, password_file: Option<&Path>, args: &AnchorArgs) -> Result<ExitCode> {
    let contract: Address = args
        .contract
        .parse()
        .context("--contract must be a 0x address")?;
    let settings = Settings {
        rpc_url: rpc_url(dir, args.rpc.as_deref())?,
        contract,
        max_batch: args.max_batch,
        max_gas_price_wei: u128::from(args.max_gas_price_gwei) * 1_000_000_000,
        confirmations: match args.confirmations {
            Confirmations::Depth(n) => n,
            Confirmations::Auto | Confirmations::Finalized => 0,
        },
    };
    let options = Options {
        finalized: args.confirmations == Confirmations::Finalized,
        max_l1_fee_wei: u128::from(args.max_l1_fee_gwei) * 1_000_000_000,
        allow_switch: args.switch_chain,
        replace_after: Duration::from_secs(args.replace_after_s.max(1)),
        ..Options::default()
    };
    if let Some(epoch) = args.clear_fork_alarm {
        let _takeover = afr_client::take_over(dir)?;
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
    let print = |e: &Event| {
        if let Some(line) = event_line(e) {
            let line = crate::esc(afr_core::redact_urls_in(&line));
            match e {
                Event::Retry { .. } | Event::RecoverFailed { .. } => eprintln!("{line}"),
                _ => println!("{line}"),
            }
        }
    };
    loop {
        // Open the store per pass: the recorder may be running in another process between
        // passes (RocksDB allows one writer), and anchoring never blocks recording.
        let result = {
            let _takeover = afr_client::take_over(dir)?;
            let r = Recorder::open(dir, Config::default())?;
            let s = signer(dir, password_file)?;
            rt.block_on(afr_anchorer::anchor_pass(
                r.store(),
                s,
                &settings,
                &options,
                &print,
            ))
        };
        match result {
            Ok(p) => {
                println!(
                    "anchored {} new epochs in {} transactions ({} already anchored){}; \
                     verified and confirmed ({}) up to {}",
                    p.posted.len(),
                    p.transactions,
                    p.already,
                    p.posted
                        .last()
                        .map(|e| format!("; head is now epoch {e}"))
                        .unwrap_or_default(),
                    p.finality.map(|f| f.to_string()).unwrap_or_default(),
                    p.verified_upto
                        .map_or("no epoch yet".to_owned(), |e| format!("epoch {e}")),
                );
            }
            Err(AnchorError::Fork { .. } | AnchorError::ForkAlarmSet { .. }) => {
                let _takeover = afr_client::take_over(dir)?;
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
