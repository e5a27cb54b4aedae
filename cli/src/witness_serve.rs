//! `afr witness serve`: runs a `c2sp.org/tlog-witness` (the `afr-witness` crate) with a key
//! file, the logs it accepts, and a state directory (docs/witness.md).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Arc,
};

use afr_core::text::escape;
use afr_recorder::{read_key_file, write_key_file};
use afr_tlog::{NoteSigner, VerifierKey, note::TYPE_COSIGNATURE};
use clap::{Args, Subcommand};
use zeroize::Zeroizing;

/// Exit code of a usage error (a bad key, log list or address).
const EXIT_USAGE: u8 = 64;
/// Exit code of an I/O error (the key file, the state, the socket).
const EXIT_IO: u8 = 74;

/// `afr witness ...`.
#[derive(Subcommand, Debug)]
pub enum WitnessCmd {
    /// Run a tlog-witness (c2sp.org/tlog-witness) that cosigns other logs' checkpoints.
    Serve(ServeArgs),
}

/// `afr witness serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The witness's Ed25519 seed: 32 bytes, mode 0600.
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Create the key file (mode 0600) if it does not exist; an existing one is kept.
    #[arg(long)]
    pub init: bool,
    /// The witness's key name (its identity in cosignatures and trust policies).
    #[arg(long)]
    pub name: String,
    /// Print the witness's vkey and exit.
    #[arg(long)]
    pub print_vkey: bool,
    /// A log's verifier key (signature type 0x01, named by the log's origin); repeatable.
    #[arg(long = "log", value_name = "VKEY")]
    pub logs: Vec<String>,
    /// A file of log verifier keys, one a line (`#` starts a comment).
    #[arg(long = "logs", value_name = "FILE")]
    pub logs_file: Option<PathBuf>,
    /// State directory: each origin's latest cosigned checkpoint and its refused checkpoints.
    #[arg(long, value_name = "DIR", required_unless_present = "print_vkey")]
    pub state: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7380", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Allow a non-loopback --listen address.
    #[arg(long)]
    pub allow_remote: bool,
}

/// Runs `afr witness CMD`.
pub fn run(cmd: WitnessCmd) -> ExitCode {
    match cmd {
        WitnessCmd::Serve(a) => run_serve(&a),
    }
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("afr witness serve: error: {msg}");
    ExitCode::from(code)
}

/// Reads (with `init`: creates, if absent) the witness's seed.
fn seed(path: &Path, init: bool) -> Result<Zeroizing<[u8; 32]>, (u8, String)> {
    if init && !path.exists() {
        let mut k = Zeroizing::new([0u8; 32]);
        rand::fill(&mut k[..]);
        write_key_file(path, &k[..]).map_err(|e| (EXIT_IO, e.to_string()))?;
        eprintln!(
            "afr witness serve: created the witness key {}",
            escape(&path.display().to_string())
        );
        return Ok(k);
    }
    if !path.exists() {
        return Err((
            EXIT_USAGE,
            format!(
                "no key file {} (pass --init to create one)",
                escape(&path.display().to_string())
            ),
        ));
    }
    read_key_file(path).map_err(|e| (EXIT_IO, e.to_string()))
}

/// Log keys from `--log` and `--logs FILE` (one a line, `#` comments, blank lines ignored).
fn log_keys(args: &ServeArgs) -> Result<Vec<VerifierKey>, (u8, String)> {
    let mut keys = Vec::new();
    for k in &args.logs {
        keys.push(VerifierKey::parse(k).map_err(|e| (EXIT_USAGE, e.to_string()))?);
    }
    if let Some(file) = &args.logs_file {
        let shown = escape(&file.display().to_string()).into_owned();
        let text = std::fs::read_to_string(file)
            .map_err(|e| (EXIT_IO, format!("cannot read {shown}: {e}")))?;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            keys.push(
                VerifierKey::parse(line)
                    .map_err(|e| (EXIT_USAGE, format!("{shown} line {}: {e}", i + 1)))?,
            );
        }
    }
    Ok(keys)
}

/// Runs `afr witness serve`: prints the vkey, then serves until SIGINT or SIGTERM.
pub fn run_serve(args: &ServeArgs) -> ExitCode {
    let seed = match seed(&args.key, args.init) {
        Ok(s) => s,
        Err((code, m)) => return fail(code, m),
    };
    let signer = match NoteSigner::new(&args.name, TYPE_COSIGNATURE, &seed) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    drop(seed);
    let vkey = signer.verifier().to_string();
    if args.print_vkey {
        println!("{vkey}");
        return ExitCode::SUCCESS;
    }
    let keys = match log_keys(args) {
        Ok(k) => k,
        Err((code, m)) => return fail(code, m),
    };
    let Some(state) = &args.state else {
        return fail(EXIT_USAGE, "--state DIR is required");
    };
    let witness = match afr_witness::Witness::open(signer, keys, state, afr_witness::system_clock())
    {
        Ok(w) => Arc::new(w),
        Err(e @ afr_witness::WitnessError::Store(_)) => return fail(EXIT_IO, e),
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let rt = match afr_client::runtime::runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(EXIT_IO, e),
    };
    rt.block_on(async {
        let listener = match afr_witness::http::bind(args.listen, args.allow_remote) {
            Ok(l) => l,
            Err(e @ afr_witness::http::ListenError::NotLoopback(_)) => {
                return fail(EXIT_USAGE, e);
            }
            Err(e) => return fail(EXIT_IO, e),
        };
        let addr = listener.local_addr().unwrap_or(args.listen);
        println!("{vkey}");
        eprintln!("afr witness serve: witness vkey {vkey}");
        for (origin, size) in witness.origins() {
            eprintln!(
                "afr witness serve: log {} (hash {}), size {size} cosigned",
                escape(&origin),
                afr_witness::origin_hash(&origin)
            );
        }
        eprintln!("afr witness serve: listening on http://{addr}");
        afr_witness::http::serve(witness, listener, afr_server::shutdown_signal()).await;
        eprintln!("afr witness serve: stopped");
        ExitCode::SUCCESS
    })
}
