//! `afr`: the Agent Flight Recorder command line.

use std::{
    ffi::OsString,
    io::{BufRead, BufWriter, Write},
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use afr_client::Door;
use afr_core::{EventInput, text::escape, verify};
use afr_recorder::{Config, Durability, Recorder};
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
mod approve;
mod chain;
mod crossq;
mod delegate;
mod hook;
mod import;
mod mcp;
mod query;
mod serve;
mod served;
mod tally;
mod witness;
mod witness_serve;

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
    /// Sign a checkpoint of the sealed epochs (c2sp.org/tlog-checkpoint), have the policy's
    /// witnesses cosign it and --tsa authorities timestamp it (docs/witness.md).
    Witness(witness::WitnessArgs),
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
    /// Run the recorder as a server: HTTP/1.1 on <dir>/afr.sock (mode 0600) and optionally
    /// TCP with a bearer token (API: docs/api.md). While it runs, record, status, query,
    /// disclose, export and seal go through it. Stops on SIGTERM or SIGINT, keeping the open
    /// epoch open.
    Serve(serve::ServeArgs),
    /// MCP gateway: record every tool call of an MCP client, enforce a policy (docs/gateway.md).
    #[command(subcommand)]
    Mcp(mcp::McpCmd),
    /// Receive OpenTelemetry traces and logs (OTLP over HTTP and gRPC): every tool-execution
    /// span of an agent framework, and every tool record of Claude Code, Codex and Gemini CLI,
    /// as an event (docs/otlp.md). Records through `afr serve` when it runs, else into the
    /// store.
    Otlp(mcp::OtlpArgs),
    /// The hook command of a coding-agent CLI (claude-code, codex, gemini): reads the CLI's
    /// hook JSON on standard input; before a tool runs it evaluates the policy, makes the
    /// call's intent durable and answers allow, deny (exit 2) or holds it for `afr approve`;
    /// after it ran it records the call as one event (docs/coding-agents.md). `afr setup`
    /// configures it.
    Hook(hook::HookArgs),
    /// Configure a coding-agent CLI (claude-code, codex, gemini) to run `afr hook` on every
    /// tool call and its MCP servers behind `afr mcp wrap`: idempotent, with a backup that
    /// --undo restores; --print shows it without writing. Refuses (exit 3) where the CLI would
    /// silently ignore the hooks, and says what to do.
    Setup(hook::SetupArgs),
    /// List the tool calls an MCP gateway holds for a human decision (policy `escalate`).
    Approvals {
        /// One JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Approve a held tool call (or the action of an event file): shows it, recomputes the
    /// digest of what it shows, and signs it with --ssh-key, --eth-key or an external signer
    /// (--print, then --signature) when asked; the gateway checks a signature, records the
    /// approval, then forwards the call.
    Approve(approve::ApproveArgs),
    /// Reject a held tool call: the gateway records the rejection; the call never runs.
    Reject(mcp::DecideArgs),
    /// Delegate work to another organisation's recorder, or accept it from one, recording the
    /// other side's signed receipt (docs/spec/delegation.md).
    #[command(subcommand)]
    Delegate(delegate::DelegateCmd),
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
    /// Record what stopped gateways and OTLP receivers left in their journals (calls whose
    /// outcome is unknown, held spans). Writers do this when they start; reading commands
    /// never do, they only say how many wait.
    Recover,
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
        #[arg(long, required_unless_present = "chain", conflicts_with = "chain")]
        seq: Option<String>,
        /// Disclose the delegation chain of this event instead: it, its ancestors and
        /// descendants, and the afr.delegated events holding the other recorders' receipts
        /// for them (this recorder's half of a cross-party case).
        #[arg(long, value_name = "SEQ")]
        chain: Option<u64>,
        /// Include the sealed payloads and per-event keys (never epoch or master keys).
        #[arg(long)]
        with_keys: bool,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
        /// Also write each disclosed event's proof as a c2sp.org/tlog-proof@v1 file
        /// (`<seq>.tlog-proof`) into this directory: the epoch's inclusion in the smallest
        /// witnessed checkpoint covering it (docs/spec/roots.md). Needs `afr witness` first.
        #[arg(long, value_name = "DIR")]
        tlog_proof: Option<PathBuf>,
        /// Embed this proof archive (`afr-verify anchors --out FILE`: block headers and the
        /// Merkle-Patricia proofs of the anchoring transactions) in the bundle, so that it can
        /// be verified offline with no anchors file; the verifier re-proves it byte by byte.
        #[arg(long, value_name = "FILE")]
        anchor_proofs: Option<PathBuf>,
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

/// Settings of an open recorder (a running `afr serve` uses its own).
#[derive(Args, Debug, Clone)]
pub(crate) struct RecordOpts {
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
    pub(crate) fn config(&self) -> Config {
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
/// the store, an RPC answer or the command line. JSON output is escaped by serde_json (C0
/// controls) and, where printed through [`afr_core::text::escape_json`] (`afr status --json`
/// among others), entirely.
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
    afr_core::pipe::quiet_on_broken_pipe();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) if e.chain().any(afr_core::pipe::is_broken_pipe) => {
            ExitCode::from(afr_core::pipe::EXIT_BROKEN_PIPE)
        }
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
        Cmd::Witness(a) => witness::dispatch(&cli.dir, a),
        Cmd::Record {
            file,
            receipts,
            opts,
        } => record(&cli.dir, file.as_deref(), receipts, &opts),
        Cmd::Serve(a) => serve::run(&cli.dir, cli.password_file.as_deref(), &a),
        Cmd::Mcp(m) => mcp::run(&cli.dir, m),
        Cmd::Otlp(a) => mcp::otlp(&cli.dir, a),
        Cmd::Hook(a) => Ok(hook::hook(&cli.dir, &a)),
        Cmd::Setup(a) => hook::setup(&cli.dir, &a),
        Cmd::Approvals { json } => mcp::list(&cli.dir, json),
        Cmd::Approve(a) => approve::approve(&cli.dir, a),
        Cmd::Reject(a) => mcp::decide(&cli.dir, a, afr_gateway::approvals::Decision::Rejected),
        Cmd::Delegate(d) => delegate::run(&cli.dir, cli.password_file.as_deref(), d),
        Cmd::Seal { opts } => {
            match Door::writer(&cli.dir, opts.config())?.seal()? {
                Some(h) => println!(
                    "sealed epoch {} ({} events), root {}",
                    h.epoch, h.count, h.root
                ),
                None => println!("nothing to seal: the open epoch is empty"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Status { json } => {
            note_waiting(&cli.dir);
            status(&cli.dir, json)
        }
        Cmd::Export { out } => {
            note_waiting(&cli.dir);
            export(&cli.dir, &out)
        }
        Cmd::Recover => recover(&cli.dir),
        Cmd::VerifyExport { file, json } => verify_export(&file, json),
        Cmd::Disclose {
            seq,
            chain,
            with_keys,
            out,
            tlog_proof,
            anchor_proofs,
        } => {
            let seqs = match (seq, chain) {
                (Some(spec), _) => parse_seqs(&spec)?,
                (None, Some(c)) => chain::seqs(&cli.dir, c)?,
                (None, None) => anyhow::bail!("give --seq or --chain"),
            };
            let code = disclose(&cli.dir, &seqs, with_keys, &out, anchor_proofs.as_deref())?;
            if let Some(d) = tlog_proof {
                write_tlog_proofs(&cli.dir, &seqs, &d)?;
            }
            Ok(code)
        }
        Cmd::Erase { epoch, by } => {
            let _takeover = afr_client::take_over(&cli.dir)?;
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
        Cmd::Query(a) => {
            note_waiting(&cli.dir);
            query::run(&cli.dir, &a)
        }
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
    let raw: Box<dyn std::io::Read> = match file {
        None => Box::new(std::io::stdin()),
        Some(p) if p == Path::new("-") => Box::new(std::io::stdin()),
        Some(p) => Box::new(
            std::fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?,
        ),
    };
    let input = std::io::BufReader::with_capacity(1 << 20, raw);
    let mut door = Door::writer(dir, opts.config())?;
    if let Some(c) = door.socket() {
        return served::record(c, input, receipts, opts.max_event_bytes);
    }
    let r = door.recorder().context("the store, as its writer")?.clone();
    let mut tally = tally::Tally::new(receipts);
    // Submissions are pipelined: each line is sequenced at once, and its receipt is printed
    // once the group commit holding it is written (so a printed receipt still means durable),
    // with at most WINDOW receipts waiting. One synced write then covers many lines.
    const WINDOW: usize = 8192;
    let durable_now = opts.durability == Durability::Buffered;
    let mut waiting: std::collections::VecDeque<Waiting> = std::collections::VecDeque::new();
    let mut line_no = 0u64;
    let cap = opts.max_event_bytes;
    let mut input = input;
    let mut buf = Vec::new();
    loop {
        // Nothing more buffered: a live pipe may be waiting for these receipts before it
        // writes more, so they are printed once durable before the next read blocks.
        if input.buffer().is_empty() && !waiting.is_empty() {
            if let Some(last) = waiting.iter().map(|w| w.receipt.seq).max()
                && !durable_now
            {
                r.wait_written(last)?;
            }
            release(&r, &mut waiting, &mut tally, Release::All)?;
        }
        buf.clear();
        if input
            .read_until(b'\n', &mut buf)
            .context("cannot read input")?
            == 0
        {
            break;
        }
        line_no += 1;
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // An `idempotency_key` member is handled as `afr serve` handles it.
        let parsed = afr_server::split_idempotency_key(line)
            .and_then(|(key, ev)| Ok((key, EventInput::from_json(&ev, cap)?)));
        let (key, ev) = match parsed {
            Ok(p) => p,
            Err(e) => {
                tally.rejected(line_no, e);
                continue;
            }
        };
        let submitted = match key {
            Some(k) => r
                .submit_idempotent(k.as_bytes(), ev)
                .map(|ir| (ir.receipt, ir.duplicate)),
            None => r.submit(ev).map(|rc| (rc, false)),
        };
        match submitted {
            Ok((receipt, duplicate)) => waiting.push_back(Waiting {
                line: line_no,
                receipt,
                duplicate,
            }),
            Err(afr_recorder::RecordError::Invalid(e)) => tally.rejected(line_no, e),
            Err(e) => {
                // What was acknowledged before stays acknowledged: print it first.
                let _ = release(&r, &mut waiting, &mut tally, Release::Written);
                return Err(e).context(format!("line {line_no}"));
            }
        }
        let how = if durable_now {
            Release::All
        } else if waiting.len() >= WINDOW {
            Release::WaitForOldest
        } else {
            Release::Written
        };
        release(&r, &mut waiting, &mut tally, how)?;
        tally.tick();
    }
    r.flush()?;
    release(&r, &mut waiting, &mut tally, Release::All)?;
    let (epoch, open) = r.open_epoch();
    tally.finish(r.next_seq(), epoch, open)
}

/// A line sequenced by `afr record` whose receipt is not printed yet.
struct Waiting {
    line: u64,
    receipt: afr_recorder::Receipt,
    duplicate: bool,
}

/// Which waiting receipts [`release`] prints.
#[derive(Clone, Copy, PartialEq)]
enum Release {
    /// Those already written.
    Written,
    /// Waits for the oldest to be written, then prints every written one.
    WaitForOldest,
    /// All of them (they are written, or the durability mode does not wait).
    All,
}

/// Prints the receipts of `waiting` that `how` allows, oldest first.
fn release(
    r: &Recorder,
    waiting: &mut std::collections::VecDeque<Waiting>,
    tally: &mut tally::Tally,
    how: Release,
) -> Result<()> {
    if how == Release::WaitForOldest
        && let Some(w) = waiting.front()
    {
        r.wait_written(w.receipt.seq)?;
    }
    let written = r.written();
    let mut printed = false;
    while let Some(w) = waiting.front() {
        if how != Release::All && w.receipt.seq >= written {
            break;
        }
        let rc = &w.receipt;
        tally.recorded(&tally::ReceiptLine {
            line: w.line,
            seq: rc.seq,
            epoch: rc.epoch,
            leaf_hash: &rc.leaf_hash.to_string(),
            timestamp_us: rc.timestamp_us,
            duplicate: w.duplicate,
        })?;
        waiting.pop_front();
        printed = true;
    }
    if printed {
        tally.flush()?;
    }
    Ok(())
}

fn status(dir: &Path, json: bool) -> Result<ExitCode> {
    let v = Door::reader(dir)?.status(afr_server::status::status_json)?;
    print_status(&v, json)
}

/// A command that only reads says what dead gateways and receivers left unrecorded in their
/// journals (it never records it: `afr recover` or a writer starting does).
fn note_waiting(dir: &Path) {
    let n = afr_client::journal::waiting(dir);
    if n > 0 {
        eprintln!(
            "afr: {n} call{} wait in a journal left by a stopped gateway or receiver; \
             `afr recover` records {} (so does the next `afr serve`, `afr mcp` or `afr otlp`)",
            if n == 1 { "" } else { "s" },
            if n == 1 { "it" } else { "them" },
        );
    }
}

/// `afr recover`: records what dead gateways and receivers left in their journals.
fn recover(dir: &Path) -> Result<ExitCode> {
    let waiting = afr_client::journal::waiting(dir);
    let n = afr_client::journal::recover_into(dir)?;
    println!(
        "recovered {n} journaled call{} into the log",
        if n == 1 { "" } else { "s" }
    );
    Ok(if n < waiting {
        eprintln!(
            "afr: {} could not be recorded (see above); they stay in the journal",
            waiting - n
        );
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Prints a status object (`afr_server::status::status_json`) as `afr status` does. The
/// object comes from the store or from the server's socket: every string in it is escaped
/// before it reaches the terminal (`--json` as `afr-verify --json` is,
/// [`afr_core::text::escape_json`]).
fn print_status(v: &serde_json::Value, json: bool) -> Result<ExitCode> {
    let n = |k: &str| v[k].as_u64().unwrap_or_default();
    let alarm = v["fork_alarm"].as_object().map(|_| &v["fork_alarm"]);
    if json {
        println!("{}", afr_core::text::escape_json(&v.to_string()));
    } else {
        if let Some(a) = alarm {
            println!("{}", esc(afr_server::status::fork_alarm_line(a)));
        }
        let rs = &v["receipt_states"];
        let state = |k: &str| rs[k].as_u64().unwrap_or_default();
        let (sealed, anchored) = (n("sealed_epochs"), n("anchored_epochs"));
        println!(
            "recorder          {}",
            esc(v["recorder"].as_str().unwrap_or_default())
        );
        println!("events            {}", n("events"));
        println!(
            "sealed epochs     {sealed} ({anchored} anchored and confirmed, {} not yet)",
            n("pending_epochs")
        );
        println!(
            "anchor receipts   {} pending, {} included, {} confirmed, {} finalized; covered when \
             confirmed by {}",
            state("pending"),
            state("included"),
            state("confirmed"),
            state("finalized"),
            esc(v["covered_when"]
                .as_str()
                .unwrap_or("the anchorer's policy (no pass yet)"))
        );
        let archived = n("archived_receipts");
        if archived > 0 {
            println!(
                "archived receipts {archived} (from a chain or contract anchored to before a switch)"
            );
        }
        println!(
            "open epoch        {} ({} events not yet sealed)",
            n("open_epoch"),
            n("open_epoch_events")
        );
        if let Some(root) = v["last_epoch_root"].as_str() {
            println!(
                "last root         {} (epoch {})",
                esc(root),
                sealed.saturating_sub(1)
            );
        }
        let a = &v["last_anchor"];
        if a.is_object() {
            let an = |k: &str| a[k].as_u64().unwrap_or_default();
            let at = |k: &str| esc(a[k].as_str().unwrap_or_default());
            println!(
                "last anchor       epoch {} in tx {} (block {}, chain {}, {} gas, {} wei, {})",
                an("epoch"),
                at("tx"),
                an("block"),
                an("chain_id"),
                an("gas_used"),
                at("cost_wei"),
                at("state")
            );
        }
        match v["compromise_window_s"].as_f64() {
            Some(w) => println!(
                "compromise window {w:.1} s (age of the oldest event not covered by a confirmed anchored root)"
            ),
            None => println!(
                "compromise window none: every event is covered by a confirmed anchored root"
            ),
        }
        print_roots(&v["roots"]);
    }
    Ok(match alarm {
        Some(a) => {
            eprintln!("afr: {}", esc(afr_server::status::fork_alarm_line(a)));
            ExitCode::from(anchoring::EXIT_FORK)
        }
        None => ExitCode::SUCCESS,
    })
}

/// The `roots` lines of `afr status` (`afr_server::status`: checkpoints, witnesses, tokens,
/// the window per root).
fn print_roots(r: &serde_json::Value) {
    if let Some(e) = r["error"].as_str() {
        println!("roots             unreadable: {}", esc(e));
    }
    let cp = &r["latest_checkpoint"];
    match cp["size"].as_u64() {
        Some(size) => println!(
            "checkpoint        size {size} signed ({} signature lines); timestamp tokens {}{}",
            cp["signatures"].as_u64().unwrap_or_default(),
            r["timestamp_tokens"].as_u64().unwrap_or_default(),
            r["timestamped_size"]
                .as_u64()
                .map(|s| format!(", latest over size {s}"))
                .unwrap_or_default()
        ),
        None => println!("checkpoint        none signed (afr witness has not run)"),
    }
    if let Some(ws) = r["witnesses"].as_object() {
        for (name, w) in ws {
            println!(
                "witness           {} cosigned size {}",
                esc(name),
                w["cosigned_size"].as_u64().unwrap_or_default()
            );
        }
    }
    let win = &r["window_s"];
    let one = |k: &str| match win[k].as_f64() {
        Some(s) => format!("{s:.1} s"),
        None => "not in use".to_owned(),
    };
    println!(
        "window per root   chain {}, witnesses {} (every witness: {}), tsa {} \
         (age of the oldest event not under that root)",
        one("chain"),
        one("witnesses"),
        one("witnesses_all"),
        one("tsa")
    );
}

fn export(dir: &Path, out: &Path) -> Result<ExitCode> {
    let mut door = Door::reader(dir)?;
    if let Some(c) = door.socket() {
        return served::export(c, out);
    }
    let r = door.log().context("the store, read-only")?;
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
    // Streamed: memory stays bounded whatever the size of the log.
    let cannot = || format!("cannot read {}", file.display());
    let f = std::fs::File::open(file).with_context(cannot)?;
    let len = f.metadata().with_context(cannot)?.len();
    let rep = verify::verify_log_stream(std::io::BufReader::new(f), len).with_context(cannot)?;
    print_verdict(&afr_verify::Verdict::from_log(&rep), json)
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

fn disclose(
    dir: &Path,
    seqs: &[u64],
    with_keys: bool,
    out: &Path,
    anchor_proofs: Option<&Path>,
) -> Result<ExitCode> {
    // Read and parsed before anything is disclosed: a bad file writes nothing.
    let archive = anchor_proofs.map(read_proof_archive).transpose()?;
    let seqs = seqs.to_vec();
    let mut door = Door::reader(dir)?;
    let (bytes, counts, erased) = match door.socket() {
        Some(c) => {
            let (bytes, events, headers, erased) = served::disclose_bundle(c, &seqs, with_keys)?;
            (bytes, (events, headers), erased)
        }
        None => {
            let r = door.log().context("the store, read-only")?;
            let bundle = r.disclose(&seqs, with_keys)?;
            let counts = (bundle.events.len() as u64, bundle.headers.len() as u64);
            (bundle.encode(), counts, bundle.erased)
        }
    };
    let bytes = match &archive {
        Some((raw, a)) => embed_proof_archive(&bytes, raw, a)?,
        None => bytes,
    };
    write_disclosed(out, &bytes, counts, &erased, with_keys)
}

/// A proof archive file (version 3), its bytes and what it says.
fn read_proof_archive(path: &Path) -> Result<(Vec<u8>, afr_verify::archive::Archive)> {
    let raw = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let a = std::str::from_utf8(&raw)
        .ok()
        .and_then(|t| afr_verify::archive::Archive::parse(t).ok())
        .with_context(|| {
            format!(
                "--anchor-proofs {}: not a proof archive (version 3, written by `afr-verify anchors --out`)",
                esc(path.display())
            )
        })?;
    Ok((raw, a))
}

/// `bundle` with the proof archive `raw` embedded, once the archive is for the bundle's
/// recorder and proves at least one root of it (checked as the verifier will, against the
/// archive's own chain and contract).
fn embed_proof_archive(
    bundle: &[u8],
    raw: &[u8],
    a: &afr_verify::archive::Archive,
) -> Result<Vec<u8>> {
    let recorder = afr_core::bundle::verify_bundle(bundle)
        .recorder
        .context("the bundle names no recorder")?;
    if !a
        .recorder
        .eq_ignore_ascii_case(&format!("0x{}", hex::encode(recorder)))
    {
        anyhow::bail!(
            "--anchor-proofs: the archive is for recorder {}, not this store's 0x{}",
            esc(&a.recorder),
            hex::encode(recorder)
        );
    }
    let proven = a
        .check(a.chain_id, &a.contract, &recorder, 0)
        .map_err(|why| anyhow::anyhow!("--anchor-proofs: the archive contradicts itself: {why}"))?;
    for why in proven.problems.iter().take(10) {
        eprintln!("afr disclose: anchor proofs: {}", esc(why));
    }
    println!(
        "embedded anchor proofs of {} epochs (chain {}, block {}, {} block headers)",
        proven.anchors.roots.len(),
        a.chain_id,
        a.block,
        a.blocks.len()
    );
    Ok(afr_core::bundle::embed_anchor_proofs(bundle, raw)?)
}

/// `afr disclose --tlog-proof DIR`: one `c2sp.org/tlog-proof@v1` per disclosed event that a
/// stored checkpoint covers (read-only: the store may be served meanwhile).
fn write_tlog_proofs(dir: &Path, seqs: &[u64], out: &Path) -> Result<()> {
    let r = afr_recorder::LogReader::open(dir)?;
    let bundle = r.disclose(seqs, false)?;
    let mut roots = Vec::new();
    for item in r.store().epochs_from(0)? {
        let (_, bytes) = item?;
        roots.push(afr_core::EpochHeader::decode(&bytes)?.root());
    }
    if bundle.checkpoints.is_empty() {
        anyhow::bail!("--tlog-proof: no checkpoint is stored yet (run `afr witness` first)");
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let proofs = afr_recorder::roots::tlog_proofs(&bundle, &roots);
    for (seq, text) in &proofs {
        let p = out.join(format!("{seq}.tlog-proof"));
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
    }
    let left = seqs.len() - proofs.len().min(seqs.len());
    println!(
        "wrote {} tlog-proof file(s) to {}{}",
        proofs.len(),
        out.display(),
        if left > 0 {
            format!("; {left} event(s) are in epochs no checkpoint covers yet")
        } else {
            String::new()
        }
    );
    Ok(())
}

/// Writes a disclosure bundle's `bytes` to `out` and says what went in (both modes of
/// `afr disclose`): `(events, headers)` counted, the erased epochs named.
pub(crate) fn write_disclosed(
    out: &Path,
    bytes: &[u8],
    (events, headers): (u64, u64),
    erased: &[u64],
    with_keys: bool,
) -> Result<ExitCode> {
    std::fs::write(out, bytes).with_context(|| format!("cannot write {}", out.display()))?;
    println!(
        "disclosed {events} events ({headers} epoch headers{}) in {} bytes to {}",
        if with_keys {
            ", with per-event keys"
        } else {
            ", no keys"
        },
        bytes.len(),
        esc(out.display())
    );
    if !erased.is_empty() {
        println!("epochs {erased:?} are erased: their payloads cannot be disclosed");
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
