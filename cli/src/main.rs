//! `afr`: the Agent Flight Recorder command line.

use std::{
    ffi::OsString,
    io::{BufRead, BufWriter, IsTerminal, Write},
    path::{Path, PathBuf},
    process::ExitCode,
    time::{Duration, Instant},
};

use afr_core::{EventInput, text::escape, verify};
use afr_recorder::{Config, Durability, LogReader, Recorder};
use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

/// mimalloc instead of the system allocator. With glibc's malloc, a producer on the main
/// thread and the recorder's writer thread contend in the allocator (the writer frees the
/// batches and index terms the producer allocated): `record()` in buffered mode had a P99 of
/// 41-52 µs against 10-12 µs with mimalloc, medians equal (10,000 events, six runs each,
/// 2026-11-30; docs/performance.md). Programs embedding `afr-recorder` should do the same.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod anchoring;
mod import;
mod query;

/// The commands `afr` hands to `afr-eval`.
const RESEARCH: [&str; 6] = ["eval", "cost", "eval-rq4", "gen", "bench", "matrix"];

/// Runs `afr-eval ARGS...` in place of this process: the `afr-eval` beside this executable
/// if there is one, else the one on `PATH`.
fn research(args: &[OsString]) -> Result<ExitCode> {
    use std::os::unix::process::CommandExt as _;
    let name = args.first().and_then(|a| a.to_str()).unwrap_or_default();
    if !RESEARCH.contains(&name) {
        eprintln!(
            "afr: error: unknown command `{}` (see `afr --help`)",
            esc(name)
        );
        return Ok(ExitCode::from(2));
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("afr-eval")))
        .filter(|p| p.exists());
    let bin = beside.unwrap_or_else(|| PathBuf::from("afr-eval"));
    let err = std::process::Command::new(&bin).args(args).exec();
    anyhow::bail!(
        "`afr {name}` is run by the research harness afr-eval, which could not be started \
         ({err}); build it with `cargo build --release -p afr-eval`"
    )
}

/// Agent Flight Recorder: tamper-evident, selectively disclosable records of what an AI agent did.
#[derive(Parser, Debug)]
#[command(name = "afr", version, about, long_about = None)]
struct Cli {
    /// Recorder directory (store and key files).
    #[arg(long, global = true, default_value = ".afr", env = "AFR_DIR")]
    dir: PathBuf,
    /// File holding the passphrase of the encrypted anchoring keystore (first line); without
    /// it, AFR_KEYSTORE_PASSWORD is used.
    #[arg(long, global = true, env = "AFR_KEYSTORE_PASSWORD_FILE")]
    password_file: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Create a recorder: an empty store, a fresh master key file and an anchoring key file
    /// (both mode 0600). The recorder id is the anchoring key's address; with AFR_ANCHOR_KEY
    /// set (hex secret), that key is used instead of a new file.
    Init {
        /// Keep the anchoring key in an encrypted V3 keystore (anchor.keystore.json, 0600)
        /// instead of the plain anchor.key; the passphrase comes from --password-file or
        /// AFR_KEYSTORE_PASSWORD. With AFR_ANCHOR_KEY set, that key is encrypted into it.
        #[arg(long)]
        keystore: bool,
    },
    /// Deploy the AfrAnchor contract (the artifact built from contracts/) at its canonical
    /// address through the CREATE2 deployer, and print its address; a no-op if it is there.
    Deploy {
        /// JSON-RPC endpoint (else AFR_RPC_URL, else the first line of <dir>/rpc.url, 0600).
        #[arg(long, env = anchoring::RPC_ENV, hide_env_values = true)]
        rpc: Option<String>,
        /// One JSON object.
        #[arg(long)]
        json: bool,
        /// Deploy a fresh copy with a plain CREATE instead (for chains without the CREATE2
        /// deployer); its address depends on the key and its nonce.
        #[arg(long)]
        no_canonical: bool,
    },
    /// Post every sealed, unanchored epoch root to the contract, in order, then exit.
    Anchor(anchoring::AnchorArgs),
    /// Record JSON-lines events from a file or stdin (one event per line).
    Record {
        /// Input file; stdin if absent or `-`.
        file: Option<PathBuf>,
        /// Print one JSON receipt per event (after it is durable in synced modes).
        #[arg(long)]
        receipts: bool,
        #[command(flatten)]
        opts: RecordOpts,
    },
    /// Seal the open epoch now (if it holds any event).
    Seal {
        #[command(flatten)]
        opts: RecordOpts,
    },
    /// Show events, epochs, anchoring and the compromise window. Exits 3 while a fork alarm
    /// is raised.
    Status {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Export the whole log to a file a verifier checks on its own.
    Export {
        /// Output file.
        #[arg(long)]
        out: PathBuf,
    },
    /// Check an exported log's integrity (no keys needed).
    VerifyExport {
        /// The export file.
        file: PathBuf,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Write a disclosure bundle of chosen events (records, proofs, headers; keys on request).
    Disclose {
        /// Sequence numbers and ranges, e.g. `17,42,100-120`.
        #[arg(long)]
        seq: String,
        /// Include the sealed payloads and per-event keys (never epoch or master keys).
        #[arg(long)]
        with_keys: bool,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
    },
    /// Destroy the key material of a sealed epoch: its payloads can never be decrypted again.
    Erase {
        /// The epoch.
        #[arg(long)]
        epoch: u64,
        /// Who ordered the erasure (recorded in the afr.erase event; default: the recorder).
        #[arg(long)]
        by: Option<String>,
    },
    /// Check a disclosure bundle on its own (keys optional).
    VerifyBundle {
        /// The bundle file.
        file: PathBuf,
        /// One JSON object, with the opened payloads.
        #[arg(long)]
        json: bool,
    },
    /// Import another agent's run log: one event per step, recorded (or printed with --print).
    Import {
        #[command(subcommand)]
        what: import::ImportCmd,
    },
    /// Forensic query over this recorder's events (syntax: docs/query.md): a table, JSON lines,
    /// or a disclosure bundle of the matches.
    Query(query::QueryArgs),
    /// Research commands, run by the `afr-eval` program installed beside `afr` (not needed
    /// to record, anchor or verify): `eval` (the paper's RQ1-RQ4 into docs/evaluation.md),
    /// `cost` (RQ2), `eval-rq4`, `gen` (a synthetic workload as JSON lines), `bench record`,
    /// `bench query`, `matrix` (RQ3). `afr eval --help` shows each one's options.
    #[command(external_subcommand)]
    Research(Vec<OsString>),
}

/// Settings of an open recorder.
#[derive(Args, Debug, Clone)]
struct RecordOpts {
    /// Seal an epoch after this many events.
    #[arg(long, default_value_t = 100)]
    epoch_size: u64,
    /// Seal a non-empty epoch after this many milliseconds.
    #[arg(long, default_value_t = 60_000)]
    max_epoch_age_ms: u64,
    /// sync (one synced write per event), group (shared synced writes) or buffered.
    #[arg(long, default_value = "group")]
    durability: Durability,
    /// Largest accepted event, in bytes (JSON line and canonical payload).
    #[arg(long, default_value_t = afr_core::event::DEFAULT_MAX_EVENT_BYTES)]
    max_event_bytes: usize,
}

impl RecordOpts {
    fn config(&self) -> Config {
        Config {
            epoch_size: self.epoch_size,
            max_epoch_age: Duration::from_millis(self.max_epoch_age_ms),
            durability: self.durability,
            max_event_bytes: self.max_event_bytes,
            ..Config::default()
        }
    }
}

/// `x` rendered for a terminal: every control, DEL and bidi character escaped (see
/// [`afr_core::text::escape`]). For any human-readable print of text that comes from a file,
/// the store, an RPC answer or the command line; JSON output is left to serde_json.
pub(crate) fn esc(x: impl std::fmt::Display) -> String {
    let s = x.to_string();
    match escape(&s) {
        std::borrow::Cow::Borrowed(_) => s,
        std::borrow::Cow::Owned(o) => o,
    }
}

/// Exit code for input that was rejected (sysexits `EX_DATAERR`).
const EXIT_DATAERR: u8 = 65;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "afr: error: {}",
                escape(&afr_core::redact_urls_in(&format!("{e:#}")))
            );
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.cmd {
        Cmd::Init { keystore } => init(&cli.dir, keystore, cli.password_file.as_deref()),
        Cmd::Deploy {
            rpc,
            json,
            no_canonical,
        } => anchoring::deploy(
            &cli.dir,
            cli.password_file.as_deref(),
            &anchoring::rpc_url(&cli.dir, rpc.as_deref())?,
            json,
            no_canonical,
        ),
        Cmd::Anchor(a) => anchoring::anchor(&cli.dir, cli.password_file.as_deref(), &a),
        Cmd::Record {
            file,
            receipts,
            opts,
        } => record(&cli.dir, file.as_deref(), receipts, &opts),
        Cmd::Seal { opts } => {
            let r = Recorder::open(&cli.dir, opts.config())?;
            match r.seal()? {
                Some(h) => println!(
                    "sealed epoch {} ({} events), root {}",
                    h.epoch,
                    h.count,
                    h.root()
                ),
                None => println!("nothing to seal: the open epoch is empty"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Status { json } => status(&cli.dir, json),
        Cmd::Export { out } => export(&cli.dir, &out),
        Cmd::VerifyExport { file, json } => verify_export(&file, json),
        Cmd::Disclose {
            seq,
            with_keys,
            out,
        } => disclose(&cli.dir, &seq, with_keys, &out),
        Cmd::Erase { epoch, by } => {
            let r = Recorder::open(&cli.dir, Config::default())?;
            r.erase_epoch_by(epoch, by.as_deref())?;
            let seq = r.store().erase_event(epoch)?.unwrap_or(r.next_seq() - 1);
            println!(
                "erased the key material of epoch {epoch}; the erasure is recorded as event {seq} \
                 (seal and anchor it so disclosures can prove the erasure)"
            );
            Ok(ExitCode::SUCCESS)
        }
        Cmd::VerifyBundle { file, json } => verify_bundle(&file, json),
        Cmd::Query(a) => query::run(&cli.dir, &a),
        Cmd::Import { what } => import::run(&cli.dir, what),
        Cmd::Research(args) => research(&args),
    }
}

fn init(dir: &Path, keystore: bool, password_file: Option<&Path>) -> Result<ExitCode> {
    let id = anchoring::prepare_identity(dir, keystore, password_file)?;
    afr_recorder::init(dir, id)?;
    println!(
        "initialised recorder 0x{} in {}",
        hex::encode(id),
        esc(dir.display())
    );
    println!(
        "master key: {} (mode 0600; back it up, never share it)",
        esc(dir.join(afr_recorder::MASTER_KEY_FILE).display())
    );
    Ok(ExitCode::SUCCESS)
}

fn record(dir: &Path, file: Option<&Path>, receipts: bool, opts: &RecordOpts) -> Result<ExitCode> {
    let r = Recorder::open(dir, opts.config())?;
    let input: Box<dyn BufRead> = match file {
        None => Box::new(std::io::stdin().lock()),
        Some(p) if p == Path::new("-") => Box::new(std::io::stdin().lock()),
        Some(p) => Box::new(std::io::BufReader::new(
            std::fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?,
        )),
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let progress = std::io::stderr().is_terminal();
    let (mut ok, mut bad, mut line_no) = (0u64, 0u64, 0u64);
    let mut last_progress = Instant::now();
    let start = Instant::now();
    let cap = opts.max_event_bytes;
    for line in input.split(b'\n') {
        let line = line.context("cannot read input")?;
        line_no += 1;
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let ev = match EventInput::from_json(line, cap) {
            Ok(ev) => ev,
            Err(e) => {
                eprintln!("afr: line {line_no}: {}; event not recorded", esc(e));
                bad += 1;
                continue;
            }
        };
        match r.record(ev) {
            Ok(rc) => {
                ok += 1;
                if receipts {
                    writeln!(
                        out,
                        r#"{{"line":{line_no},"seq":{},"epoch":{},"leaf_hash":"{}","timestamp_us":{}}}"#,
                        rc.seq, rc.epoch, rc.leaf_hash, rc.timestamp_us
                    )?;
                    if opts.durability != Durability::Buffered {
                        out.flush()?;
                    }
                }
            }
            Err(afr_recorder::RecordError::Invalid(e)) => {
                eprintln!("afr: line {line_no}: {}; event not recorded", esc(e));
                bad += 1;
            }
            Err(e) => return Err(e).context(format!("line {line_no}")),
        }
        if progress && last_progress.elapsed() > Duration::from_millis(250) {
            eprint!("\rrecorded {ok} events ({bad} rejected)");
            last_progress = Instant::now();
        }
    }
    r.flush()?;
    out.flush()?;
    if progress {
        eprint!("\r");
    }
    let (epoch, open) = r.open_epoch();
    eprintln!(
        "recorded {ok} events in {:.2?} ({bad} rejected); next seq {}, open epoch {epoch} holds {open}",
        start.elapsed(),
        r.next_seq()
    );
    Ok(if bad > 0 {
        ExitCode::from(EXIT_DATAERR)
    } else {
        ExitCode::SUCCESS
    })
}

fn status(dir: &Path, json: bool) -> Result<ExitCode> {
    let r = LogReader::open(dir)?;
    let (open_epoch, open_count) = r.open_epoch()?;
    let last = r.last_sealed()?;
    let events = r.next_seq()?;
    let sealed = last.as_ref().map_or(0, |h| h.epoch + 1);
    let store = r.store();
    // An epoch counts as covered once its anchor is confirmed as the anchorer's policy asks
    // (a depth, or the finalized block): included or pending anchors do not shrink the
    // compromise window.
    let mut anchored = 0u64;
    let mut states = [0u64; 4];
    let mut first_unanchored_seq = None;
    let mut last_receipt = None;
    for e in 0..sealed {
        let receipt = store.anchor(e)?;
        if let Some(a) = &receipt {
            states[afr_recorder::ReceiptState::ALL
                .iter()
                .position(|s| *s == a.state)
                .unwrap_or(0)] += 1;
        }
        match receipt {
            Some(a) if first_unanchored_seq.is_none() && a.state.covers() => {
                anchored += 1;
                last_receipt = Some(a);
            }
            _ => {
                if first_unanchored_seq.is_none() {
                    first_unanchored_seq = store.epoch(e)?.map(|h| h.first_seq);
                }
            }
        }
    }
    let marker = store.anchor_marker()?;
    let finality = marker
        .as_ref()
        .map(|m| afr_anchorer::Finality::from_code(m.finality).to_string());
    let archived = store.archived_anchors()?.len();
    if first_unanchored_seq.is_none() && open_count > 0 {
        first_unanchored_seq = Some(events - open_count);
    }
    // The compromise window: how long the oldest event not yet covered by a confirmed anchored
    // root has been open to rewriting by whoever controls this host.
    let window_s = match first_unanchored_seq {
        Some(seq) => store
            .record(seq)?
            .map(|rec| afr_recorder::now_us().saturating_sub(rec.timestamp_us) as f64 / 1e6),
        None => None,
    };
    let pending_epochs = sealed - anchored;
    let alarm = store.fork_alarm()?;
    if json {
        let v = serde_json::json!({
            "recorder": format!("0x{}", hex::encode(r.recorder_id())),
            "events": events,
            "sealed_epochs": sealed,
            "anchored_epochs": anchored,
            "pending_epochs": pending_epochs,
            "receipt_states": {
                "pending": states[0], "included": states[1],
                "confirmed": states[2], "finalized": states[3],
            },
            "covered_when": finality,
            "verified_upto": marker.as_ref().and_then(|m| m.epoch),
            "archived_receipts": archived,
            "open_epoch": open_epoch,
            "open_epoch_events": open_count,
            "last_epoch_root": last.as_ref().map(|h| h.root().to_hex()),
            "last_sealed_at_us": last.as_ref().map(|h| h.sealed_at_us),
            "compromise_window_s": window_s,
            "last_anchor": last_receipt.as_ref().map(|a| serde_json::json!({
                "epoch": a.epoch, "chain_id": a.chain_id, "tx": format!("0x{}", hex::encode(a.tx)),
                "block": a.block, "gas_used": a.gas_used, "effective_gas_price": a.effective_gas_price,
                "l1_fee": a.l1_fee, "cost_wei": a.cost_wei().to_string(), "state": a.state.name(),
                "replaced": a.replaced.len(),
            })),
            "fork_alarm": alarm.as_ref().map(anchoring::fork_alarm_json),
        });
        println!("{v}");
    } else {
        if let Some(a) = &alarm {
            println!("{}", anchoring::fork_alarm_line(a));
        }
        println!("recorder          0x{}", hex::encode(r.recorder_id()));
        println!("events            {events}");
        println!(
            "sealed epochs     {sealed} ({anchored} anchored and confirmed, {pending_epochs} not yet)"
        );
        println!(
            "anchor receipts   {} pending, {} included, {} confirmed, {} finalized; covered when \
             confirmed by {}",
            states[0],
            states[1],
            states[2],
            states[3],
            finality
                .as_deref()
                .unwrap_or("the anchorer's policy (no pass yet)")
        );
        if archived > 0 {
            println!(
                "archived receipts {archived} (from a chain or contract anchored to before a switch)"
            );
        }
        println!("open epoch        {open_epoch} ({open_count} events not yet sealed)");
        if let Some(h) = last {
            println!("last root         {} (epoch {})", h.root(), h.epoch);
        }
        if let Some(a) = last_receipt {
            println!(
                "last anchor       epoch {} in tx 0x{} (block {}, chain {}, {} gas, {} wei, {})",
                a.epoch,
                hex::encode(a.tx),
                a.block,
                a.chain_id,
                a.gas_used,
                a.cost_wei(),
                a.state
            );
        }
        match window_s {
            Some(w) => println!(
                "compromise window {w:.1} s (age of the oldest event not covered by a confirmed anchored root)"
            ),
            None => println!(
                "compromise window none: every event is covered by a confirmed anchored root"
            ),
        }
    }
    Ok(match alarm {
        Some(a) => {
            eprintln!("afr: {}", anchoring::fork_alarm_line(&a));
            ExitCode::from(anchoring::EXIT_FORK)
        }
        None => ExitCode::SUCCESS,
    })
}

fn export(dir: &Path, out: &Path) -> Result<ExitCode> {
    let r = LogReader::open(dir)?;
    let tmp = out.with_extension("partial");
    let f =
        std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut w = BufWriter::new(f);
    let s = afr_recorder::export_log(r.store(), &mut w)?;
    w.flush()?;
    w.get_ref().sync_all()?;
    std::fs::rename(&tmp, out)?;
    println!(
        "exported {} events in {} sealed epochs ({} not yet sealed), {} bytes, to {}",
        s.events,
        s.epochs,
        s.unsealed,
        s.bytes,
        esc(out.display())
    );
    Ok(ExitCode::SUCCESS)
}

fn verify_export(file: &Path, json: bool) -> Result<ExitCode> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    print_verdict(
        &afr_verify::Verdict::from_log(&verify::verify_log(&bytes)),
        json,
    )
}

/// Prints an integrity-only verdict with `afr-verify`'s renderer; its exit code.
fn print_verdict(v: &afr_verify::Verdict, json: bool) -> Result<ExitCode> {
    if json {
        println!(
            "{}",
            afr_core::text::escape_json(&v.to_json(None).to_string())
        );
    } else {
        print!("{}", v.to_text(None));
    }
    Ok(outcome_exit(v.outcome))
}

/// Parses `17,42,100-120` into sequence numbers (ranges inclusive, at most 1,000,000).
fn parse_seqs(spec: &str) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || anyhow::anyhow!("--seq: `{part}` is not a number or a range like 100-120");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u64, u64) = (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                );
                if a > b || b - a >= 1_000_000 {
                    anyhow::bail!("--seq: range `{part}` is empty or larger than 1,000,000 events");
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        anyhow::bail!("--seq: no events named");
    }
    Ok(out)
}

fn disclose(dir: &Path, spec: &str, with_keys: bool, out: &Path) -> Result<ExitCode> {
    let seqs = parse_seqs(spec)?;
    let r = LogReader::open(dir)?;
    let bundle = r.disclose(&seqs, with_keys)?;
    let bytes = bundle.encode();
    std::fs::write(out, &bytes).with_context(|| format!("cannot write {}", out.display()))?;
    println!(
        "disclosed {} events ({} epoch headers{}) in {} bytes to {}",
        bundle.events.len(),
        bundle.headers.len(),
        if with_keys {
            ", with per-event keys"
        } else {
            ", no keys"
        },
        bytes.len(),
        esc(out.display())
    );
    if !bundle.erased.is_empty() {
        println!(
            "epochs {:?} are erased: their payloads cannot be disclosed",
            bundle.erased
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn verify_bundle(file: &Path, json: bool) -> Result<ExitCode> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let rep = afr_core::bundle::verify_bundle(&bytes);
    print_verdict(&afr_verify::Verdict::from_bundle(&rep), json)
}

/// Exit code of a verification outcome: 0 verified, 1 tampered, 2 incomplete.
fn outcome_exit(o: verify::Outcome) -> ExitCode {
    ExitCode::from(match o {
        verify::Outcome::Verified => 0,
        verify::Outcome::Tampered => 1,
        verify::Outcome::Incomplete => 2,
    })
}
