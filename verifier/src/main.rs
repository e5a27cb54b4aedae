//! `afr-verify`: the tool the other side of a dispute runs on its own machine.
//!
//! It needs nothing from the operator but the file: a whole-log export or a disclosure bundle.
//! Anchored roots come from the chain by plain `eth_call` (`--rpc`, `--contract`), or, on an
//! air-gapped machine, from a file fetched once with `afr-verify anchors` (`--anchors`), which
//! the report then says it trusted. The answer is one of verified (exit 0), tampered (1) or
//! incomplete (2); usage and I/O errors exit with 64 and up.

use std::{path::PathBuf, process::ExitCode};

use afr_core::{bundle::verify_bundle, verify::Outcome, verify::verify_log};
use afr_verify::{
    Verdict,
    anchors::{Anchors, Rpc},
    check_anchors, check_recorder, matrix, parse_addr,
};
use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

/// Verify AFR evidence offline: verified, tampered or incomplete.
#[derive(Parser, Debug)]
#[command(name = "afr-verify", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Verify a whole-log export (`afr export`).
    Log {
        /// The export file.
        file: PathBuf,
        #[command(flatten)]
        src: AnchorSource,
    },
    /// Verify a disclosure bundle (`afr disclose`).
    Bundle {
        /// The bundle file.
        file: PathBuf,
        #[command(flatten)]
        src: AnchorSource,
    },
    /// Fetch a recorder's anchored roots once, for air-gapped verification.
    Anchors {
        /// JSON-RPC endpoint.
        #[arg(long)]
        rpc: String,
        /// Anchor contract address.
        #[arg(long)]
        contract: String,
        /// Recorder address (0x + 40 hex).
        #[arg(long)]
        recorder: String,
        /// Block to read at (default: latest).
        #[arg(long)]
        block: Option<u64>,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
    },
    /// Run the tamper matrix: attack classes against cumulative verifier configurations.
    Matrix {
        /// Number of random honest logs to attack (one case per attack class each).
        #[arg(long, default_value_t = matrix::DEFAULT_SEEDS)]
        seeds: u64,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
struct AnchorSource {
    /// JSON-RPC endpoint of the chain holding the anchors.
    #[arg(long, requires = "contract", conflicts_with = "anchors")]
    rpc: Option<String>,
    /// Anchor contract address.
    #[arg(long)]
    contract: Option<String>,
    /// Block to read at (default: latest).
    #[arg(long)]
    block: Option<u64>,
    /// A file written by `afr-verify anchors`, trusted as is.
    #[arg(long)]
    anchors: Option<PathBuf>,
    /// The recorder you expect (0x + 40 hex): evidence from any other recorder is tampered.
    /// Without it the recorder named in the file is taken as is, and the report says so.
    #[arg(long)]
    recorder: Option<String>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Exit code of usage errors (sysexits `EX_USAGE`).
const EXIT_USAGE: u8 = 64;
/// Exit code of I/O and RPC errors (sysexits `EX_IOERR`).
const EXIT_IO: u8 = 74;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "afr-verify: error: {}",
                afr_core::redact_urls_in(&format!("{e:#}"))
            );
            ExitCode::from(EXIT_IO)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.cmd {
        Cmd::Anchors {
            rpc,
            contract,
            recorder,
            block,
            out,
        } => {
            parse_addr(&contract, "--contract")?;
            let rec = parse_addr(&recorder, "--recorder")?;
            let rpc = Rpc::new(&rpc);
            let block = match block {
                Some(b) => b,
                None => rpc.latest_block()?,
            };
            if !rpc.code_is_afr_anchor(&contract, block)? {
                anyhow::bail!(
                    "the code at {contract} (block {block}) is not the AfrAnchor contract; refusing to write anchors from it"
                );
            }
            let a = rpc.fetch(&contract, &rec, Some(block), None)?;
            std::fs::write(&out, serde_json::to_string_pretty(&a)?)
                .with_context(|| format!("cannot write {}", out.display()))?;
            println!(
                "{} anchored roots of recorder {} (head {:?}) at block {} of chain {} written to {}",
                a.roots.len(),
                a.recorder,
                a.head,
                a.block,
                a.chain_id,
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Matrix { seeds, json } => {
            let m = matrix::run(seeds)?;
            if json {
                println!("{}", m.to_json());
            } else {
                print!("{}", m.table(seeds));
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Log { file, src } => {
            let bytes =
                std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            finish(Verdict::from_log(&verify_log(&bytes)), &src, true)
        }
        Cmd::Bundle { file, src } => {
            let bytes =
                std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            finish(Verdict::from_bundle(&verify_bundle(&bytes)), &src, false)
        }
    }
}

/// Compares the file's epoch roots with the anchored ones, then prints the report.
fn finish(mut v: Verdict, src: &AnchorSource, whole_log: bool) -> Result<ExitCode> {
    match (&src.recorder, v.recorder) {
        (Some(r), _) => check_recorder(&mut v, &parse_addr(r, "--recorder")?),
        (None, Some(r)) => v.notes.push(format!(
            "recorder 0x{} is taken from the file (give --recorder to pin the one you expect)",
            hex::encode(r)
        )),
        (None, None) => {}
    }
    if v.outcome != Outcome::Tampered {
        let anchors: Option<Anchors> = match (&src.rpc, &src.anchors, &v.recorder) {
            (Some(rpc), _, Some(rec)) => {
                let contract = src.contract.clone().context("--rpc needs --contract")?;
                parse_addr(&contract, "--contract")?;
                let epochs: Vec<u64> = v.epoch_roots.iter().map(|(e, _)| *e).collect();
                let rpc = Rpc::new(rpc);
                let block = match src.block {
                    Some(b) => b,
                    None => rpc.latest_block()?,
                };
                if rpc.code_is_afr_anchor(&contract, block)? {
                    let a = rpc.fetch(&contract, rec, Some(block), Some(&epochs))?;
                    v.notes.push(format!(
                        "anchors read from chain {} contract {} (AfrAnchor code checked) at block {}",
                        a.chain_id, a.contract, a.block
                    ));
                    Some(a)
                } else {
                    v.missing.push(format!(
                        "anchored roots not checked: the code at {contract} (block {block}) is not the AfrAnchor contract, so its answers prove nothing"
                    ));
                    None
                }
            }
            (None, Some(path), _) => {
                let a = Anchors::load(path)?;
                v.notes.push(format!(
                    "TRUSTED the anchors file {} (chain {}, contract {}, block {}) without contacting the chain",
                    path.display(),
                    a.chain_id,
                    a.contract,
                    a.block
                ));
                Some(a)
            }
            _ => None,
        };
        match anchors {
            None if src.rpc.is_some() => {}
            None => v.missing.push(
                "anchored roots not checked (give --rpc and --contract, or --anchors)".into(),
            ),
            Some(a) => check_anchors(&mut v, &a, whole_log)?,
        }
        v.settle();
    }
    print_report(&v, src.json);
    Ok(ExitCode::from(match v.outcome {
        Outcome::Verified => 0,
        Outcome::Tampered => 1,
        Outcome::Incomplete => 2,
    }))
}

fn print_report(v: &Verdict, json: bool) {
    if json {
        let out = serde_json::json!({
            "outcome": v.outcome.name(),
            "recorder": v.recorder.map(|r| format!("0x{}", hex::encode(r))),
            "checks": v.checks.iter().map(|(k, n)| (k.clone(), serde_json::json!(n))).collect::<serde_json::Map<_, _>>(),
            "first_failure": v.first_failure.as_ref().map(afr_core::verify::Failure::to_json),
            "missing": v.missing,
            "notes": v.notes,
            "epoch_roots": afr_core::verify::epoch_roots_json(&v.epoch_roots),
            "opened": v.opened,
        });
        println!("{out}");
        return;
    }
    println!("{}", v.outcome.name().to_uppercase());
    for n in &v.notes {
        println!("  {n}");
    }
    for (c, n) in &v.checks {
        println!("  {c:<20} {n} passed");
    }
    for m in &v.missing {
        println!("  missing: {m}");
    }
    if let Some(f) = &v.first_failure {
        println!(
            "  first failure at {}: {} ({})",
            f.location, f.check, f.detail
        );
        println!("  consistent with: {}", f.consistent_with);
    }
}
