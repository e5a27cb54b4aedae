//! `afr-verify`: the tool the other side of a dispute runs on its own machine.
//!
//! It needs nothing from the operator but the file: a whole-log export or a disclosure bundle.
//! What it trusts is pinned by the user, never taken from the file: the chain (`--chain-id`),
//! the contract (the canonical AfrAnchor address unless `--contract` names another) and the
//! recorder (`--recorder`, or the parties of a `--trust` file). Anchored roots come from the
//! chain (`--rpc`), each proven by a successful transaction the recorder itself sent, or, on an
//! air-gapped machine, from a file fetched once with `afr-verify anchors` (`--anchors`), which
//! the report then says it trusted. In a bundle with keys, each signed human approval is checked
//! against the approvers a trust file pins. `afr-verify case` verifies several parties' bundles
//! together with the delegation links between their recorders (`afr_verify::case`). With
//! `--html FILE` (and `--pdf FILE`, printed by a headless Chromium) `log`, `bundle` and `case`
//! also write the evidence report for people (`afr_verify::report`); what they print does not
//! change. The answer is one of verified (exit 0), tampered (1) or incomplete (2); usage errors
//! exit 64, I/O and RPC errors 74 (a report that cannot be written included).

#![warn(clippy::indexing_slicing)]

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use afr_core::verify::Outcome;
use afr_verify::{Kind, Origin, PinnedSource, Source, Trust, VerifyError, anchors::Rpc};
use clap::{Args, Parser, Subcommand};

/// mimalloc instead of the system allocator: the log verifier is a pipeline whose reading
/// thread allocates what the hashing and checking threads free, and glibc's malloc makes
/// those frees wait on the reader's arena lock (a quarter of the run on a 1M-event log, in
/// futex calls; docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PINNED: &str = "\
Pin what you trust, then verify:
  afr-verify log log.afr --rpc URL --chain-id 10 --recorder 0xREC
  afr-verify bundle case.bundle --rpc URL --chain-id 10 --recorder 0xREC
  afr-verify bundle case.bundle --trust trust.toml --rpc URL
  afr-verify anchors --rpc URL --chain-id 10 --recorder 0xREC --out anchors.json   # online, once
  afr-verify bundle case.bundle --anchors anchors.json --chain-id 10 --recorder 0xREC   # air-gapped
  afr-verify case case.toml --rpc URL        # several parties' bundles and the links between them
  afr-verify bundle case.bundle ... --html report.html [--pdf report.pdf]   # a report to read or print

The contract is the canonical AfrAnchor address unless --contract names another (the report
says so). Exit codes: 0 verified, 1 tampered, 2 incomplete, 64 usage error, 74 I/O or RPC error.
Without a pinned recorder the best answer is incomplete.";

/// Verify AFR evidence offline: verified, tampered or incomplete.
#[derive(Parser, Debug)]
#[command(name = "afr-verify", version, about, before_help = PINNED)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Verify a whole-log export (`afr export`).
    #[command(before_help = PINNED, mut_arg("file", |a| a.help("The export file")))]
    Log(CheckArgs),
    /// Verify a disclosure bundle (`afr disclose`).
    #[command(before_help = PINNED, mut_arg("file", |a| a.help("The bundle file")))]
    Bundle(CheckArgs),
    /// Verify a case: several parties' bundles, and every delegation link between their
    /// recorders (docs/spec/delegation.md). Give a case file, or --trust and the bundles.
    ///
    /// Without --trust the first file must be the case file: bundles alone (afr-verify case
    /// A.bundle B.bundle) are a usage error (exit 64), since nothing would pin whose recorders
    /// they are. Give them with --trust TRUST.toml, or after a case file.
    Case(CaseArgs),
    /// Fetch a recorder's proven anchored roots once, for air-gapped verification.
    ///
    /// What is written is a proof archive: for every anchoring transaction its block header,
    /// the transaction and receipt with their Merkle-Patricia proofs, and the contract's
    /// account proof, so that verifying against it offline re-checks every proof.
    Anchors {
        /// JSON-RPC endpoint; several for independent providers, which must agree (--agree).
        #[arg(long, required = true)]
        rpc: Vec<String>,
        /// How many providers must agree: `all` (default) or a number K.
        #[arg(long, value_name = "all|K")]
        agree: Option<afr_verify::Agree>,
        #[command(flatten)]
        pins: Pins,
        /// Block to read at (default: the lowest latest block of the providers).
        #[arg(long)]
        block: Option<u64>,
        /// First block searched for anchoring transactions (default: 0).
        #[arg(long, default_value_t = 0)]
        from_block: u64,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
    },
}

/// `afr-verify log` and `afr-verify bundle`: one file, checked against what is pinned. Each
/// subcommand names its own kind of `file` in its help.
#[derive(Args, Debug)]
struct CheckArgs {
    /// The file to verify.
    file: PathBuf,
    #[command(flatten)]
    pins: Pins,
    #[command(flatten)]
    src: AnchorSource,
    #[command(flatten)]
    report: ReportArgs,
}

/// What the verifier trusts, pinned by the user.
#[derive(Args, Debug)]
struct Pins {
    /// The chain you trust, by id; compared with the endpoint's `eth_chainId` and with an
    /// anchors file. Required with --rpc and --anchors unless --trust gives it.
    #[arg(long)]
    chain_id: Option<u64>,
    /// The anchor contract (default: the canonical AfrAnchor address). Any other address is
    /// reported as named explicitly.
    #[arg(long)]
    contract: Option<String>,
    /// The recorder you expect (0x + 40 hex): evidence from any other recorder is tampered.
    /// Without it (or --trust) the best answer is incomplete.
    #[arg(long)]
    recorder: Option<String>,
    /// A trust file (TOML) naming the chain, the contract, the parties' recorders and the
    /// approvers whose keys sign approvals (`[[party.approver]]`).
    #[arg(long)]
    trust: Option<PathBuf>,
}

/// A chain to read the anchored roots from (or none).
#[derive(Args, Debug)]
struct Endpoint {
    /// JSON-RPC endpoint of the chain holding the anchors; give it several times for
    /// independent providers, which must agree (--agree). Default: the trust file's
    /// `[chain] rpc`.
    #[arg(long, conflicts_with = "anchors")]
    rpc: Vec<String>,
    /// How many providers must agree on the chain id, the block hashes relied upon and the
    /// anchoring logs: `all` (default) or a number K (K of those given).
    #[arg(long, value_name = "all|K")]
    agree: Option<afr_verify::Agree>,
    /// Least confirmations of an anchoring block for its roots to count (default: the trust
    /// file's `[chain] min_confirmations`, else 0).
    #[arg(long)]
    min_confirmations: Option<u64>,
    /// Block to read at (default: the lowest latest block of the providers).
    #[arg(long)]
    block: Option<u64>,
    /// First block searched for anchoring transactions (default: 0).
    #[arg(long, default_value_t = 0)]
    from_block: u64,
}

impl Endpoint {
    /// The chain as the source of anchored roots: `--rpc`, else the trust file's providers.
    fn source<'a>(&'a self, trust: &'a Trust) -> Option<Source<'a>> {
        let urls: &[String] = if self.rpc.is_empty() {
            &trust.chain.rpc
        } else {
            &self.rpc
        };
        (!urls.is_empty()).then(|| Source::Rpc {
            urls,
            agree: self.agree.or(trust.chain.agree).unwrap_or_default(),
            block: self.block,
            from_block: self.from_block,
        })
    }

    /// `trust` with this command line's overrides of its `[chain]` table.
    fn apply(&self, trust: &mut Trust, unproven_anchors: bool) {
        if let Some(m) = self.min_confirmations {
            trust.chain.min_confirmations = m;
        }
        trust.chain.unproven_anchors |= unproven_anchors;
    }
}

#[derive(Args, Debug)]
struct AnchorSource {
    #[command(flatten)]
    chain: Endpoint,
    /// A proof archive written by `afr-verify anchors`: every root is re-proven from the
    /// headers and proofs it holds, offline.
    #[arg(long)]
    anchors: Option<PathBuf>,
    /// Take an anchors file without proofs (version 2, bare RPC answers) as it is. Without
    /// this flag its roots do not count: anyone can write such a file.
    #[arg(long)]
    unproven_anchors: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

// `afr-verify case`: its help opens with PINNED, and its --rpc reads every bundle at one block.
#[derive(Args, Debug)]
#[command(
    before_help = PINNED,
    mut_arg("rpc", |a| a.help(
        "JSON-RPC endpoint of the chain holding the anchors; every bundle is read at one block"
    )),
)]
struct CaseArgs {
    /// A case file (a trust file whose parties list their `bundles`), then any more bundles;
    /// with --trust, bundles only (without it, a bundle first is refused). Each bundle given
    /// here counts for the party of its recorder.
    #[arg(required = true, value_name = "CASE_OR_BUNDLE")]
    files: Vec<PathBuf>,
    /// A trust file: the files are then bundles, each assigned to its recorder's party.
    #[arg(long)]
    trust: Option<PathBuf>,
    /// The chain you trust, by id (else the case or trust file's chain_id).
    #[arg(long)]
    chain_id: Option<u64>,
    /// The anchor contract (default: the canonical AfrAnchor address).
    #[arg(long)]
    contract: Option<String>,
    #[command(flatten)]
    chain: Endpoint,
    /// A proof archive written by `afr-verify anchors`, re-proven offline; one per recorder,
    /// as many times as needed (beside the case file's `anchors`).
    #[arg(long)]
    anchors: Vec<PathBuf>,
    /// Take anchors files without proofs (version 2) as they are.
    #[arg(long)]
    unproven_anchors: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    report: ReportArgs,
}

/// The evidence report, beside what is printed (`afr_verify::report`).
#[derive(Args, Debug)]
struct ReportArgs {
    /// Also write the evidence report to FILE: one self-contained HTML document (inline CSS
    /// and SVG, no script, nothing loaded), readable on screen and in print.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Also write the evidence report to FILE as PDF, printed by a headless Chromium
    /// (AFR_CHROMIUM, else chromium, chromium-browser or google-chrome on PATH).
    #[arg(long, value_name = "FILE")]
    pdf: Option<PathBuf>,
}

impl ReportArgs {
    /// Writes the requested reports of `html()` and says where on stderr.
    fn write(&self, html: impl FnOnce() -> String) -> Result<()> {
        if self.html.is_none() && self.pdf.is_none() {
            return Ok(());
        }
        let doc = html();
        if let Some(path) = &self.html {
            std::fs::write(path, &doc).map_err(|source| Error::Write {
                path: path.clone(),
                source,
            })?;
            eprintln!("afr-verify: report written to {}", path.display());
        }
        if let Some(path) = &self.pdf {
            afr_verify::report::print_pdf(&doc, path)?.map_err(|source| Error::Write {
                path: path.clone(),
                source,
            })?;
            eprintln!("afr-verify: report written to {}", path.display());
        }
        Ok(())
    }
}

/// Now, in µs since the Unix epoch: when the report says the evidence was checked.
fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

impl Pins {
    fn trust(&self) -> Result<Trust> {
        let text = match &self.trust {
            Some(p) => Some((
                p.display().to_string(),
                std::fs::read_to_string(p).map_err(|source| Error::Read {
                    path: p.clone(),
                    source,
                })?,
            )),
            None => None,
        };
        Ok(Trust::new(
            text.as_ref().map(|(n, t)| (n.as_str(), t.as_str())),
            self.chain_id,
            self.contract.as_deref(),
            self.recorder.as_deref(),
        )?)
    }
}

/// Why the command failed: the library's [`VerifyError`], or one of this binary's own.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// A usage error found after parsing (exit 64, as is [`VerifyError::Usage`]).
    #[error("{0}")]
    Usage(&'static str),
    /// The library's.
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// A file cannot be read.
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file cannot be written.
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The PDF report could not be printed.
    #[error(transparent)]
    Pdf(#[from] afr_verify::report::PdfError),
    /// `afr-verify anchors` was pointed at code that is not AfrAnchor's.
    #[error(
        "the code at {contract} (block {block}) is not the AfrAnchor contract; refusing to write anchors from it"
    )]
    NotAfrAnchor { contract: String, block: u64 },
    /// `afr-verify anchors` with providers that do not agree as the rule requires.
    #[error("the providers do not agree as --agree requires; refusing to write an archive")]
    Disagree,
}

impl Error {
    /// The exit code: 64 for usage errors, 74 for I/O and RPC errors.
    fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::Verify(VerifyError::Usage(_)) => EXIT_USAGE,
            // As an incomplete verdict: nothing proven could be written.
            Error::Disagree => 2,
            _ => EXIT_IO,
        }
    }

    /// The message with its chain of causes, `outer: inner: ...`.
    fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            text.push_str(": ");
            text.push_str(&c.to_string());
            cause = c.source();
        }
        text
    }
}

type Result<T, E = Error> = std::result::Result<T, E>;

/// Exit code of usage errors (sysexits `EX_USAGE`).
const EXIT_USAGE: u8 = 64;
/// Exit code of I/O and RPC errors (sysexits `EX_IOERR`).
const EXIT_IO: u8 = 74;

fn main() -> ExitCode {
    afr_core::pipe::quiet_on_broken_pipe();
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
        Err(e) if afr_core::pipe::is_broken_pipe(&e) => {
            ExitCode::from(afr_core::pipe::EXIT_BROKEN_PIPE)
        }
        Err(e) => {
            let text = afr_core::text::escape(&afr_core::redact_urls_in(&e.chain())).into_owned();
            eprintln!("afr-verify: error: {text}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.cmd {
        Cmd::Anchors {
            rpc,
            agree,
            pins,
            block,
            from_block,
            out,
        } => {
            let trust = pins.trust()?;
            let agree = agree.or(trust.chain.agree).unwrap_or_default();
            let origin = Origin::Rpc {
                urls: &rpc,
                agree,
                block,
                from_block,
            };
            let chain_id = PinnedSource::new(origin, trust.chain_id)
                .map_err(VerifyError::from)?
                .chain_id();
            let [party] = trust.parties.as_slice() else {
                return Err(Error::Usage("afr-verify anchors needs one --recorder"));
            };
            let [rec] = party.recorders.as_slice() else {
                return Err(Error::Usage("afr-verify anchors needs one --recorder"));
            };
            let contract = trust.contract_hex();
            let rpcs: Vec<Rpc> = rpc.iter().map(|u| Rpc::new(u)).collect();
            let refs: Vec<&Rpc> = rpcs.iter().collect();
            let block = afr_verify::providers::pinned_block(&refs, chain_id, block)?;
            if let [one] = refs.as_slice()
                && !one.code_is_afr_anchor(&contract, block)?
            {
                return Err(Error::NotAfrAnchor { contract, block });
            }
            let f = afr_verify::providers::fetch(
                &refs,
                agree,
                chain_id,
                &contract,
                rec,
                (from_block, block),
                None,
                0,
            )?;
            for why in &f.ignored {
                eprintln!("afr-verify: {}", afr_core::text::escape(why));
            }
            if let Some(why) = &f.unmet {
                eprintln!("afr-verify: {}", afr_core::text::escape(why));
                return Err(Error::Disagree);
            }
            let a = &f.archive;
            serde_json::to_string_pretty(a)
                .map_err(std::io::Error::from)
                .and_then(|text| std::fs::write(&out, text))
                .map_err(|source| Error::Write {
                    path: out.clone(),
                    source,
                })?;
            println!(
                "{} proven anchored roots of recorder {} (head {}) at block {} ({}) of chain {}, with {} block header(s) and their proofs, written to {}",
                a.roots.len(),
                a.recorder,
                a.roots
                    .keys()
                    .next_back()
                    .map_or("none".into(), |h| format!("epoch {h}")),
                a.block,
                a.block_hash,
                a.chain_id,
                a.blocks.len(),
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Log(a) => check(Kind::Log, &a),
        Cmd::Bundle(a) => check(Kind::Bundle, &a),
        Cmd::Case(a) => case(a),
    }
}

fn case(a: CaseArgs) -> Result<ExitCode> {
    use afr_verify::case::{Case, verify_case};
    let given: Vec<PathBuf> = a.files.clone();
    let mut files = a.files.into_iter();
    let mut c = match &a.trust {
        Some(_) => {
            let pins = Pins {
                chain_id: a.chain_id,
                contract: a.contract.clone(),
                recorder: None,
                trust: a.trust.clone(),
            };
            Case::with_bundles(pins.trust()?, Vec::new())
        }
        None => match files.next() {
            Some(f) => Case::load(&f, a.chain_id, a.contract.as_deref())?,
            None => {
                return Err(Error::Usage(
                    "afr-verify case needs a case file, or --trust and bundles",
                ));
            }
        },
    };
    c.loose.extend(files);
    c.anchors.extend(a.anchors.iter().cloned());
    a.chain.apply(&mut c.trust, a.unproven_anchors);
    // Anchors files on the command line win over the trust file's providers, as in `check`.
    let src = if a.anchors.is_empty() || !a.chain.rpc.is_empty() {
        a.chain.source(&c.trust)
    } else {
        None
    };
    let r = verify_case(&c, src.unwrap_or(Source::None))?;
    let checked_at = now_us();
    if a.json {
        println!("{}", afr_core::text::escape_json(&r.to_json().to_string()));
    } else {
        print!("{}", r.to_text());
    }
    a.report.write(|| {
        let show = |p: &Path| p.display().to_string();
        // The bytes that were verified, hashed as they were read (not read again).
        let mut digests: Vec<(String, u64, afr_core::Hash32)> = c.digest.iter().cloned().collect();
        for p in &r.parties {
            for b in &p.bundles {
                digests.push((b.file.clone(), b.size, b.sha256));
            }
        }
        let inv = afr_verify::report::Invocation {
            command: "case",
            files: given.iter().map(|p| show(p)).collect(),
            trust: a.trust.as_deref().map(show),
            chain_id: a.chain_id,
            contract: a.contract.clone(),
            recorder: None,
            rpc: a.chain.rpc.clone(),
            block: a.chain.block,
            from_block: a.chain.from_block,
            anchors: a.anchors.iter().map(|p| show(p)).collect(),
            unproven_anchors: a.unproven_anchors,
            digests,
        };
        afr_verify::report::case_html(&r, &inv, checked_at)
    })?;
    Ok(exit(r.outcome))
}

fn exit(o: Outcome) -> ExitCode {
    ExitCode::from(match o {
        Outcome::Verified => 0,
        Outcome::Tampered => 1,
        Outcome::Incomplete => 2,
    })
}

/// The verdict on stdout: JSON with `--json`, else the text report.
fn print_verdict(v: &afr_verify::Verdict, trust: &Trust, json: bool) {
    if json {
        println!(
            "{}",
            afr_core::text::escape_json(&v.to_json(Some(trust)).to_string())
        );
    } else {
        print!("{}", v.to_text(Some(trust)));
    }
}

fn check(kind: Kind, a: &CheckArgs) -> Result<ExitCode> {
    let CheckArgs {
        file,
        pins,
        src,
        report,
    } = a;
    let mut trust = pins.trust()?;
    src.chain.apply(&mut trust, src.unproven_anchors);
    let trust = trust;
    // An anchors file given on the command line wins over the trust file's providers (the
    // flag `--rpc` conflicts with it): an offline run stays offline.
    let source = match (&src.anchors, src.chain.source(&trust)) {
        (Some(p), _) => Source::File(p),
        (None, Some(chain)) => chain,
        (None, None) => Source::None,
    };
    // Refused before the file is read: a source of anchors without a pinned chain.
    let pinned = PinnedSource::of(source, trust.chain_id).map_err(VerifyError::from)?;
    // A log without a report is read as a stream: memory stays bounded whatever its size.
    if kind == Kind::Log && report.html.is_none() && report.pdf.is_none() {
        let v = afr_verify::verify_log_file(file, &trust, pinned)?;
        print_verdict(&v, &trust, src.json);
        return Ok(exit(v.outcome));
    }
    let bytes = std::fs::read(file).map_err(|source| Error::Read {
        path: file.to_owned(),
        source,
    })?;
    let e = afr_verify::examine(kind, &bytes, &trust, pinned)?;
    let v = &e.verdict;
    let checked_at = now_us();
    print_verdict(v, &trust, src.json);
    report.write(|| {
        let name = file.display().to_string();
        let inv = afr_verify::report::Invocation {
            command: match kind {
                Kind::Log => "log",
                Kind::Bundle => "bundle",
            },
            files: vec![name.clone()],
            trust: pins.trust.as_ref().map(|p| p.display().to_string()),
            chain_id: pins.chain_id,
            contract: pins.contract.clone(),
            recorder: pins.recorder.clone(),
            // The endpoints actually read (the command line's, else the trust file's).
            rpc: match source {
                Source::Rpc { urls, .. } => urls.to_vec(),
                _ => Vec::new(),
            },
            block: src.chain.block,
            from_block: src.chain.from_block,
            anchors: src
                .anchors
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            unproven_anchors: src.unproven_anchors,
            digests: vec![(name, bytes.len() as u64, afr_core::hash::sha256(&[&bytes]))],
        };
        afr_verify::report::verdict_html(&e, &trust, &inv, checked_at)
    })?;
    Ok(exit(v.outcome))
}
