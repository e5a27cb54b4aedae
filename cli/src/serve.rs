//! `afr serve`: the recorder as a long-running server (`afr_server`), with anchoring inside it.

use std::{
    net::SocketAddr, path::Path, path::PathBuf, process::ExitCode, sync::Arc, time::Duration,
};

use afr_anchorer::{AnchorError, Event, Options, Settings};
use afr_recorder::Recorder;
use afr_server::{AnchorConfig, Limits, Server, ServerConfig, TcpConfig};
use anyhow::{Context, Result};

use crate::{RecordOpts, anchoring, esc};

/// The flags of `afr serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Also listen on TCP at this address (loopback only, unless --allow-remote); every request
    /// must then carry `Authorization: Bearer <token>` with the token of --token-file.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// File whose first line is the bearer token (at least 16 printable bytes; mode 0600).
    #[arg(long, requires = "listen")]
    pub token_file: Option<PathBuf>,
    /// Allow --listen on a non-loopback address.
    #[arg(long, requires = "listen")]
    pub allow_remote: bool,
    /// Anchor sealed epochs from inside the server through this JSON-RPC endpoint (else
    /// AFR_RPC_URL, else <dir>/rpc.url); needs --contract. The key is found as `afr anchor`
    /// finds it.
    #[arg(long, value_name = "URL", requires = "contract")]
    pub anchor_rpc: Option<String>,
    /// The AfrAnchor contract: turns anchoring inside the server on.
    #[arg(long, value_name = "ADDR")]
    pub contract: Option<String>,
    /// Longest time between two anchoring passes (a pass also starts when an epoch seals).
    #[arg(long, default_value_t = 30_000)]
    pub anchor_interval_ms: u64,
    /// Most event lines in one POST /v1/events.
    #[arg(long, default_value_t = 1_000)]
    pub max_batch_lines: usize,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 16 << 20)]
    pub max_body_bytes: usize,
    /// Ingest requests processed at once; more are answered 503 with Retry-After.
    #[arg(long, default_value_t = 16)]
    pub max_inflight: usize,
    /// Started by a producer that found no server (`afr_client::writer`): no anchoring, no
    /// receipt key; stops once no client has been connected for a few seconds, and hands the
    /// store over to a long-running `afr serve` that asks.
    #[arg(long, hide = true, conflicts_with_all = ["listen", "contract"])]
    pub on_demand: bool,
    #[command(flatten)]
    pub opts: RecordOpts,
}

/// Runs `afr serve` until SIGTERM or SIGINT.
pub fn run(dir: &Path, password_file: Option<&Path>, a: &ServeArgs) -> Result<ExitCode> {
    // A server a producer started on demand hands the store over; producers wait for this
    // one's socket meanwhile (the guard drops once it listens).
    let takeover = if a.on_demand {
        None
    } else {
        Some(afr_client::take_over(dir)?)
    };
    if afr_client::socket::Client::running(dir).is_some() {
        anyhow::bail!(
            "a server is already running on {}",
            dir.join(afr_server::SOCKET_FILE).display()
        );
    }
    let tcp = match a.listen {
        None => None,
        Some(addr) => {
            let tf = a
                .token_file
                .as_deref()
                .context("--listen needs --token-file FILE (mode 0600) with the bearer token")?;
            Some(TcpConfig {
                addr,
                token: afr_server::read_token_file(tf)?,
                allow_remote: a.allow_remote,
            })
        }
    };
    // The anchoring key, read (and a keystore decrypted) once: it anchors with --contract and
    // signs delegation receipts (the recorder id is its address). Without it (an encrypted
    // keystore and no passphrase) the delegation routes answer 503, and --contract fails.
    let key = if a.on_demand {
        Err(anyhow::anyhow!("started on demand"))
    } else {
        anchoring::signer(dir, password_file)
    };
    let receipt_signer = match &key {
        Ok(k) => {
            let k = k.clone();
            Some(afr_server::ReceiptSigner(Arc::new(move |d: &[u8; 32]| {
                afr_anchorer::sign_digest(&k, *d).map_err(|e| e.to_string())
            })))
        }
        // With --contract the missing key is the error below; on demand there is none.
        Err(_) if a.contract.is_some() || a.on_demand => None,
        Err(e) => {
            eprintln!(
                "afr serve: no receipt key, so /v1/delegations/* is off: {}",
                esc(e.to_string())
            );
            None
        }
    };
    let anchor = match &a.contract {
        None => None,
        Some(contract) => Some(AnchorConfig {
            settings: Settings {
                rpc_url: anchoring::rpc_url(dir, a.anchor_rpc.as_deref())?,
                contract: contract
                    .parse()
                    .context("--contract must be a 0x address")?,
                max_batch: 64,
                max_gas_price_wei: 200 * 1_000_000_000,
                confirmations: 0,
            },
            options: Options::default(),
            signer: key?,
            interval: Duration::from_millis(a.anchor_interval_ms.max(100)),
            on_event: Arc::new(|e: &Event| {
                if let Some(line) = anchoring::event_line(e) {
                    eprintln!("afr serve: {}", esc(afr_core::redact_urls_in(&line)));
                }
            }),
            on_pass: Arc::new(|r: &afr_server::PassResult| match r {
                Ok(p) if !p.posted.is_empty() => eprintln!(
                    "afr serve: anchored {} new epochs in {} transactions",
                    p.posted.len(),
                    p.transactions
                ),
                Ok(_) => {}
                Err(AnchorError::Fork { .. } | AnchorError::ForkAlarmSet { .. }) => {
                    eprintln!("afr serve: FORK ALARM: anchoring stopped (see `afr status`)")
                }
                Err(e) => eprintln!(
                    "afr serve: anchoring pass failed, will retry: {}",
                    esc(afr_core::redact_urls_in(&e.to_string()))
                ),
            }),
        }),
    };
    let limits = Limits {
        max_batch_lines: a.max_batch_lines.max(1),
        max_body_bytes: a.max_body_bytes.max(1),
        max_inflight: a.max_inflight.max(1),
        ..Limits::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let config = a.opts.config();
    rt.block_on(async {
        let r = Recorder::open(dir, config)?;
        // A writer starting records what stopped gateways and receivers left in journals.
        let recovered = afr_client::journal::recover_through(
            dir,
            &mut afr_client::Door::of_recorder(dir, Arc::new(r.clone())),
        );
        if recovered > 0 {
            eprintln!("afr serve: recorded {recovered} journaled calls left by stopped producers");
        }
        let s = Server::bind(
            r,
            ServerConfig {
                dir: dir.to_owned(),
                tcp,
                limits,
                anchor,
                receipt_signer,
                on_demand: a.on_demand.then_some(afr_client::writer::ON_DEMAND_IDLE),
                // The coding-agent hooks' thin client (`afr-hook`) hands its calls over here.
                hooks: Some(afr_server::HookHandler(std::sync::Arc::new(
                    afr_hook::remote::serve,
                ))),
            },
        )?;
        drop(takeover);
        let b = s.bound();
        eprintln!(
            "afr serve{}: listening on {}{}",
            if a.on_demand { " (on demand)" } else { "" },
            esc(b.socket.display()),
            b.tcp
                .map(|t| format!(" and http://{t}"))
                .unwrap_or_default()
        );
        s.run(afr_server::shutdown_signal()).await?;
        eprintln!("afr serve: stopped; everything acknowledged is on disk");
        Ok(ExitCode::SUCCESS)
    })
}
