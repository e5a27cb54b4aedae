//! `afr witness`: signs a checkpoint of the sealed epochs, has the witnesses cosign it and the
//! TSAs timestamp it, and never lets them see a history that does not extend the one they
//! cosigned.
//!
//! A pass:
//! 1. reads the sealed epoch headers (read-only: recording goes on), and builds the tree of
//!    their roots (docs/spec/roots.md);
//! 2. checks the tree against the largest checkpoint it signed before: fewer epochs, or the
//!    same first epochs with another root, is a rollback or a fork of the store: nothing is
//!    signed or sent, both heads are printed, and the exit code is 4;
//! 3. signs the checkpoint of all sealed epochs (or reuses the one of that size);
//! 4. submits it to each witness of the policy file with a consistency proof from the size
//!    that witness last cosigned (`409`: resync once to the size it reports, refusing a size
//!    above ours; `429`/`503`: waits `Retry-After`, up to 30 s, then leaves it to the next
//!    pass; `422`: the witness holds another history: a fork, printed with the witness's head);
//! 5. keeps each cosignature that verifies under the witness's pinned key;
//! 6. asks each `--tsa` for a token over `SHA-256(checkpoint text)`.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use afr_core::{EpochHeader, Hash32, hash::sha256};
use afr_recorder::{
    LogReader,
    roots::{self, Roots, StoredCheckpoint},
};
use afr_tlog::{
    Checkpoint, Note, NoteSignature, Policy,
    note::VerifierKey,
    policy::Witness,
    tree,
    witness::{AddCheckpoint, SIZE_CONTENT_TYPE},
};
use anyhow::{Context, Result};

/// Exit code of a refused history (rollback or fork).
pub const EXIT_FORK: u8 = 4;
/// Longest wait honoured from a `Retry-After`.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// The flags of `afr witness` (submitting).
#[derive(clap::Args, Debug, Default)]
pub struct SubmitArgs {
    /// A tlog-policy file naming the witnesses to ask: `witness NAME VKEY URL` lines (URL:
    /// the submission prefix). The same file a relying party can pin.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// An RFC 3161 time-stamping authority to timestamp each new checkpoint (repeatable):
    /// `URL` or `NAME=URL`.
    #[arg(long = "tsa", value_name = "[NAME=]URL")]
    pub tsa: Vec<String>,
    /// Keep running: a pass every --interval-ms.
    #[arg(long)]
    pub watch: bool,
    /// With --watch, the time between passes.
    #[arg(long, default_value_t = 10_000)]
    pub interval_ms: u64,
    /// Print the log's verifier key (creating the key on first use) and exit.
    #[arg(long)]
    pub print_vkey: bool,
}

/// A fork or rollback found by a pass.
#[derive(Debug)]
struct Fork(String);

fn esc(s: &str) -> String {
    crate::esc(afr_core::redact_urls_in(s))
}

/// Reads every sealed epoch header, in order.
fn headers(dir: &Path) -> Result<(afr_core::RecorderId, Vec<EpochHeader>)> {
    let reader = LogReader::open(dir)?;
    let mut out = Vec::new();
    for item in reader.store().epochs_from(0)? {
        let (e, bytes) = item?;
        let h = EpochHeader::decode(&bytes)
            .with_context(|| format!("epoch {e}: header does not decode"))?;
        anyhow::ensure!(
            h.epoch == out.len() as u64,
            "epoch {e} out of order in the store"
        );
        out.push(h);
    }
    Ok((reader.recorder_id(), out))
}

fn parse_tsa(s: &str) -> (String, String) {
    match s.split_once('=') {
        Some((n, u)) if !n.contains('/') && !n.contains(':') => (n.to_owned(), u.to_owned()),
        _ => {
            let host = s
                .split("://")
                .nth(1)
                .unwrap_or(s)
                .split(['/', ':'])
                .next()
                .unwrap_or("tsa");
            (host.to_owned(), s.to_owned())
        }
    }
}

/// `afr witness`.
pub fn run(dir: &Path, args: &SubmitArgs) -> Result<ExitCode> {
    let roots = Roots::open(dir, true)?;
    if args.print_vkey {
        let (recorder, _) = headers(dir)?;
        println!("{}", roots.log_signer(&recorder)?.verifier());
        return Ok(ExitCode::SUCCESS);
    }
    let policy = match &args.policy {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("--policy {}", p.display()))?;
            Policy::parse(&text).with_context(|| format!("--policy {}", p.display()))?
        }
        None => Policy::default(),
    };
    let witnesses: Vec<&Witness> = policy
        .witnesses
        .iter()
        .filter(|w| w.url.is_some())
        .collect();
    let tsas: Vec<(String, String)> = args.tsa.iter().map(|s| parse_tsa(s)).collect();
    anyhow::ensure!(
        !witnesses.is_empty() || !tsas.is_empty(),
        "nothing to do: give --policy with `witness NAME VKEY URL` lines, or --tsa URL"
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(20)))
        .http_status_as_error(false)
        .build()
        .into();
    loop {
        match pass(dir, &roots, &witnesses, &tsas, &agent) {
            Ok(()) => {}
            Err(e) if e.downcast_ref::<Fork>().is_some() => {
                if let Some(Fork(m)) = e.downcast_ref::<Fork>() {
                    eprintln!("afr witness: REFUSED: {m}");
                }
                return Ok(ExitCode::from(EXIT_FORK));
            }
            Err(e) if args.watch => eprintln!(
                "afr witness: pass failed, will retry: {}",
                esc(&format!("{e:#}"))
            ),
            Err(e) => return Err(e),
        }
        if !args.watch {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(args.interval_ms));
    }
}

impl std::fmt::Display for Fork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Fork {}

fn head_line(c: &Checkpoint) -> String {
    format!("size {} root {}", c.size, c.root.to_hex())
}

fn pass(
    dir: &Path,
    roots: &Roots,
    witnesses: &[&Witness],
    tsas: &[(String, String)],
    agent: &ureq::Agent,
) -> Result<()> {
    let (recorder, headers) = headers(dir)?;
    let n = headers.len() as u64;
    if n == 0 {
        println!("no sealed epoch yet; nothing to witness");
        return Ok(());
    }
    let leaves = tree::leaves(&roots::epoch_roots(&headers));
    let signer = roots.log_signer(&recorder)?;
    // The store must extend every checkpoint already signed.
    if let Some(last) = roots.latest()? {
        let prev = &last.checkpoint;
        if prev.size > n {
            return Err(Fork(format!(
                "the store holds {n} sealed epochs but checkpoint {} was signed (a rollback): signed head {}",
                prev.size,
                head_line(prev)
            ))
            .into());
        }
        let ours = tree::root(&leaves[..prev.size as usize]);
        if ours != prev.root {
            return Err(Fork(format!(
                "the store's first {} epochs have root {} but the signed checkpoint has {} (a fork): signed head {}; store head size {n} root {}",
                prev.size,
                ours.to_hex(),
                prev.root.to_hex(),
                head_line(prev),
                tree::root(&leaves).to_hex()
            ))
            .into());
        }
    }
    let stored = match roots.get(n)? {
        Some(s) => s,
        None => {
            let cp = Checkpoint {
                origin: roots::origin(&recorder),
                size: n,
                root: tree::root(&leaves),
                extensions: vec![],
            };
            let text = cp.text();
            let note = Note {
                signatures: vec![signer.sign(&text)],
                text,
            };
            roots.save(&note)?;
            println!("signed checkpoint {}", head_line(&cp));
            roots
                .get(n)?
                .context("the checkpoint just written is gone")?
        }
    };
    let sizes = roots.witness_sizes()?;
    let mut failed = 0;
    for w in witnesses {
        let old = sizes.get(&w.name).copied().unwrap_or(0);
        if old == n {
            continue;
        }
        match submit(agent, w, &stored, old, &leaves) {
            Ok(sigs) => {
                roots.add_cosignatures(n, &sigs)?;
                roots.set_witness_size(&w.name, n)?;
                println!("witness {} cosigned size {n}", w.name);
            }
            Err(e) if e.downcast_ref::<Fork>().is_some() => return Err(e),
            Err(e) => {
                failed += 1;
                eprintln!(
                    "afr witness: witness {}: {}",
                    w.name,
                    esc(&format!("{e:#}"))
                );
            }
        }
    }
    let have = roots.get(n)?.map(|s| s.tokens).unwrap_or_default();
    for (name, url) in tsas {
        if have.contains_key(name) {
            continue;
        }
        let digest = sha256(&[stored.note.text.as_bytes()]);
        match afr_tsa::timestamp(url, &digest.0) {
            Ok(token) => {
                roots.add_token(n, name, token.as_der())?;
                println!("tsa {name} timestamped size {n}");
            }
            Err(e) => {
                failed += 1;
                eprintln!("afr witness: tsa {name}: {}", esc(&e.to_string()));
            }
        }
    }
    anyhow::ensure!(
        failed == 0,
        "{failed} witness or TSA request(s) failed; the next pass tries again"
    );
    Ok(())
}

/// Submits `stored` to `w`, starting from `old`; the verified cosignature lines.
fn submit(
    agent: &ureq::Agent,
    w: &Witness,
    stored: &StoredCheckpoint,
    mut old: u64,
    leaves: &[Hash32],
) -> Result<Vec<NoteSignature>> {
    let n = stored.checkpoint.size;
    let url = format!(
        "{}/add-checkpoint",
        w.url.as_deref().unwrap_or("").trim_end_matches('/')
    );
    // The log's own signature only: the witness needs no one else's.
    let log_only = Note {
        text: stored.note.text.clone(),
        signatures: stored.note.signatures.iter().take(1).cloned().collect(),
    };
    let mut resynced = false;
    let mut waited = Duration::ZERO;
    loop {
        let proof = tree::consistency_proof(leaves, old, n).context("no consistency proof")?;
        let body = AddCheckpoint {
            old,
            proof,
            checkpoint: log_only.to_text(),
        }
        .body();
        let mut resp = agent
            .post(&url)
            .header("Content-Type", "text/plain")
            .send(body.as_bytes())
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let ctype = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let text = resp
            .body_mut()
            .with_config()
            .limit(64 * 1024)
            .read_to_string()
            .unwrap_or_default();
        match status {
            200 => return verify_cosignatures(w, &log_only, &text),
            409 if !resynced => {
                anyhow::ensure!(
                    ctype.starts_with(SIZE_CONTENT_TYPE),
                    "409 without a {SIZE_CONTENT_TYPE} body"
                );
                let theirs: u64 = text.trim().parse().context("409 body is not a size")?;
                if theirs > n {
                    return Err(Fork(format!(
                        "witness {} cosigned size {theirs} of this log, but the store has only {n} epochs (a rollback); our head {}",
                        w.name,
                        head_line(&stored.checkpoint)
                    ))
                    .into());
                }
                old = theirs;
                resynced = true;
            }
            429 | 503 => {
                let wait = Duration::from_secs(retry_after.unwrap_or(1).max(1));
                if waited + wait > MAX_RETRY_AFTER {
                    anyhow::bail!(
                        "busy ({status}); retry after {}s exceeds what a pass waits",
                        wait.as_secs()
                    );
                }
                waited += wait;
                std::thread::sleep(wait);
            }
            422 => {
                return Err(Fork(format!(
                    "witness {} refused size {n} from size {old} as inconsistent ({}): it holds another history of this log; our head {}{}",
                    w.name,
                    esc(text.trim()),
                    head_line(&stored.checkpoint),
                    their_head(agent, w, &stored.checkpoint.origin)
                        .map(|h| format!("; its head {h}"))
                        .unwrap_or_default()
                ))
                .into());
            }
            s => anyhow::bail!(
                "HTTP {s}: {}",
                esc(text.trim()).chars().take(300).collect::<String>()
            ),
        }
    }
}

/// The witness's latest cosigned checkpoint of `origin` (its monitoring endpoint).
fn their_head(agent: &ureq::Agent, w: &Witness, origin: &str) -> Option<String> {
    let url = format!(
        "{}/{}/checkpoint",
        w.url.as_deref()?.trim_end_matches('/'),
        sha256(&[origin.as_bytes()]).to_hex()
    );
    let mut resp = agent.get(&url).call().ok()?;
    if resp.status().as_u16() != 200 {
        return None;
    }
    let body = resp
        .body_mut()
        .with_config()
        .limit(64 * 1024)
        .read_to_string()
        .ok()?;
    let (cp, _) = Checkpoint::parse_note(body.as_bytes()).ok()?;
    Some(head_line(&cp))
}

/// The cosignature lines of `w` in a 200 body that verify over `note`.
fn verify_cosignatures(w: &Witness, note: &Note, body: &str) -> Result<Vec<NoteSignature>> {
    let joined = format!("{}\n{body}", note.text);
    let parsed =
        Note::parse(joined.as_bytes()).context("the witness's answer is not signature lines")?;
    let keys: Vec<VerifierKey> = vec![w.key.clone()];
    parsed.verify(&keys).with_context(|| {
        format!(
            "witness {}: its cosignature does not verify under its pinned key",
            w.name
        )
    })?;
    Ok(parsed
        .signatures
        .into_iter()
        .filter(|s| s.name == w.key.name && s.id == w.key.id)
        .collect())
}

/// `afr witness`: submitting, or `afr witness serve`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct WitnessArgs {
    /// `serve`: run a witness for other logs.
    #[command(subcommand)]
    pub cmd: Option<crate::witness_serve::WitnessCmd>,
    #[command(flatten)]
    pub submit: SubmitArgs,
}

/// `afr witness [serve ...]`.
pub fn dispatch(dir: &Path, a: WitnessArgs) -> Result<ExitCode> {
    match a.cmd {
        Some(cmd) => Ok(crate::witness_serve::run(cmd)),
        None => run(dir, &a.submit),
    }
}
