//! `afr approve`: shows an action, recomputes the digest of what it shows, and decides on it,
//! signed with the approver's own key when asked (`docs/spec/approvals.md`).
//!
//! The action comes from the MCP gateway's queue (`afr approve ID`) or from an event file
//! (`afr approve --file action.json --recorder 0x…`, which prints the `human_approval` object
//! to put into the event). Signing:
//!
//! - `--ssh-key PATH`: `ssh-keygen -Y sign -n afr-approval-v1 -f PATH` (a private key file, or a
//!   public key whose private half is in ssh-agent; FIDO keys ask for their touch);
//! - `--eth-key PATH`: an Ethereum key, as a V3 keystore (passphrase from `--password-file` or
//!   `AFR_APPROVER_PASSWORD`) or a 0600 file holding the 32-byte secret in hex;
//! - `--print ssh|eip712`, then `--signature SIG`: an external signer (a wallet's
//!   `eth_signTypedData_v4`, `ssh-keygen` on another machine). The printed statement is kept
//!   until the signature comes back.

use std::{
    io::Write,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
};

use afr_core::{
    approval::{self, Scheme, Statement},
    event::{ApprovalSignature, Decision, EventInput, Execution, Intent},
    text::escape,
};
use afr_gateway::approvals::{self, PendingCall, Ruling};
use afr_recorder::now_us;
use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use zeroize::Zeroizing;

/// Environment variable that may hold the passphrase of an `--eth-key` keystore.
pub const APPROVER_PASSWORD_ENV: &str = "AFR_APPROVER_PASSWORD";

/// What to approve and how to sign.
#[derive(Args, Debug)]
pub struct ApproveArgs {
    /// The held call's id, from `afr approvals`.
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    id: Option<String>,
    /// Approve the action of an event file (JSON of docs/event.schema.json) instead of a held
    /// call; prints the `human_approval` object for the event.
    #[arg(long, value_name = "EVENT.json", requires = "recorder")]
    file: Option<PathBuf>,
    /// The recorder the event goes to (`0x` + 40 hex digits), with `--file`.
    #[arg(long, value_name = "ADDRESS")]
    recorder: Option<String>,
    /// Who approves, as recorded in `human_approval.approver` (default: the login name). With
    /// a signature, the gateway records the name its policy gives the signing key.
    #[arg(long = "as", value_name = "APPROVER")]
    approver: Option<String>,
    /// Sign with this SSH key (`ssh-keygen -Y sign`): a private key, or a public key whose
    /// private half is in ssh-agent.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["eth_key", "print", "signature"])]
    ssh_key: Option<PathBuf>,
    /// Sign with this Ethereum key (EIP-712): a V3 keystore, or a 0600 file with the secret
    /// in hex.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["print", "signature"])]
    eth_key: Option<PathBuf>,
    /// The keystore passphrase of `--eth-key` (first line); else AFR_APPROVER_PASSWORD.
    #[arg(long, value_name = "FILE")]
    password_file: Option<PathBuf>,
    /// Print what an external signer must sign (the SSH message, or the EIP-712 typed data a
    /// wallet takes) and keep it for `--signature`; decides nothing.
    #[arg(long, value_name = "SCHEME", conflicts_with = "signature")]
    print: Option<PrintScheme>,
    /// The external signer's signature over what `--print` printed: `0x…` (EIP-712), the
    /// armored SSH signature, or `@FILE` holding either.
    #[arg(long, value_name = "SIG")]
    signature: Option<String>,
    /// How long the signed approval stays valid, in seconds.
    #[arg(long, default_value_t = 600, value_name = "SECONDS")]
    valid_for: u64,
    /// The prompt recorded with `--file` (default: `Approve TOOL?`).
    #[arg(long)]
    prompt: Option<String>,
}

/// An external signer's scheme.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PrintScheme {
    /// The text `ssh-keygen -Y sign -n afr-approval-v1` signs.
    Ssh,
    /// EIP-712 typed data (`eth_signTypedData_v4`).
    Eip712,
}

/// The action shown and signed.
struct Action {
    intent: Intent,
    execution: Option<Execution>,
    recorder: [u8; 20],
    /// The held call, when it came from the queue.
    call: Option<PendingCall>,
}

fn parse_recorder(s: &str) -> Result<[u8; 20]> {
    let mut r = [0u8; 20];
    hex::decode_to_slice(s.trim().trim_start_matches("0x"), &mut r)
        .map_err(|_| anyhow::anyhow!("`{s}` is not a recorder id (0x + 40 hex digits)"))?;
    Ok(r)
}

fn load(dir: &Path, a: &ApproveArgs) -> Result<Action> {
    if let Some(file) = &a.file {
        let bytes =
            std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
        let ev = EventInput::from_json(&bytes, afr_core::event::DEFAULT_MAX_EVENT_BYTES)
            .with_context(|| format!("{} is not an event", file.display()))?;
        let recorder = parse_recorder(a.recorder.as_deref().unwrap_or_default())?;
        let (_, p) = ev.into_payload();
        return Ok(Action {
            intent: p.intent,
            execution: p.execution,
            recorder,
            call: None,
        });
    }
    let id = a.id.as_deref().unwrap_or_default();
    let call = approvals::pending(dir, id)?;
    if call.intent.is_null() {
        bail!("held call {id} was queued by a gateway that predates signed approvals");
    }
    let intent: Intent = serde_json::from_value(call.intent.clone())
        .with_context(|| format!("held call {id}: its intent is malformed"))?;
    let execution: Option<Execution> = serde_json::from_value(call.execution.clone())
        .with_context(|| format!("held call {id}: its execution is malformed"))?;
    let recorder = parse_recorder(&call.recorder)
        .with_context(|| format!("held call {id}: the gateway did not name its recorder"))?;
    Ok(Action {
        intent,
        execution,
        recorder,
        call: Some(call),
    })
}

/// Shows the action on stderr (stdout is for what `--print` and `--file` print), with the
/// digest recomputed from exactly what is shown.
fn show(a: &Action, digest: &str) -> Result<()> {
    let mut e = std::io::stderr().lock();
    let args = serde_json::to_string_pretty(&a.intent.args).unwrap_or_default();
    writeln!(e, "tool:      {}", escape(&a.intent.tool))?;
    if let Some(x) = &a.execution {
        writeln!(e, "command:   {}", escape(&x.command))?;
        writeln!(
            e,
            "target:    {}",
            escape(x.target.as_deref().unwrap_or(""))
        )?;
    }
    // Arguments over the gateway's cap are recorded (and signed) as their size and SHA-256:
    // show the approver the full arguments the held call carries, and whether they are the
    // ones that hash is of, so what is signed can be reviewed.
    let capped = a.intent.args.get("truncated") == Some(&serde_json::Value::Bool(true));
    match (&a.call, capped) {
        (Some(c), true) => {
            let full = c.arguments.to_string();
            let hash = afr_gateway::session::sha256(full.as_bytes());
            let bound = a.intent.args.get("sha256").and_then(|v| v.as_str()) == Some(&hash);
            writeln!(
                e,
                "arguments: {} bytes, over the recording cap: the event records (and this approval signs) their size and {}; {}",
                full.len(),
                escape(&hash),
                if bound {
                    "the full arguments below are the ones that hash is of"
                } else {
                    "WARNING: the full arguments below do NOT match the recorded hash"
                }
            )?;
            let full = serde_json::to_string_pretty(&c.arguments).unwrap_or_default();
            for line in full.lines() {
                writeln!(e, "    {}", escape(line))?;
            }
        }
        _ => {
            writeln!(e, "arguments:")?;
            for line in args.lines() {
                writeln!(e, "    {}", escape(line))?;
            }
        }
    }
    writeln!(e, "recorder:  0x{}", hex::encode(a.recorder))?;
    writeln!(
        e,
        "action:    {digest} (SHA-256 of the intent and execution above)"
    )?;
    if let Some(c) = &a.call {
        writeln!(e, "policy rule: {}", escape(&c.rule))?;
        if !c.signed_by.is_empty() {
            writeln!(
                e,
                "needs a signature by one of: {}",
                escape(&c.signed_by.join(", "))
            )?;
        }
    }
    Ok(())
}

fn approver_name(a: &ApproveArgs) -> String {
    a.approver
        .clone()
        .or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok())
        .filter(|a| !a.trim().is_empty())
        .unwrap_or_else(|| "unknown user".into())
}

fn statement(a: &Action, valid_for: u64) -> Statement {
    let now = now_us() / 1_000_000;
    Statement::new(
        &a.intent,
        a.execution.as_ref(),
        Decision::Approved,
        &a.recorder,
        now,
        now.saturating_add(valid_for),
        rand::random(),
    )
}

/// `ssh-keygen -Y sign` over the statement's text: the armored signature.
fn ssh_sign(key: &Path, st: &Statement) -> Result<String> {
    let mut child = Command::new("ssh-keygen")
        .args(["-q", "-Y", "sign", "-n", approval::SSH_NAMESPACE, "-f"])
        .arg(key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot run ssh-keygen (OpenSSH ≥ 8.1 signs approvals; install openssh-client)")?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(st.ssh_message().as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "ssh-keygen could not sign with {} ({})",
            key.display(),
            out.status
        );
    }
    String::from_utf8(out.stdout).context("ssh-keygen wrote a signature that is not text")
}

/// The EIP-712 signature of the statement by the key in `path`.
fn eth_sign(path: &Path, password_file: Option<&Path>, st: &Statement) -> Result<String> {
    let text = Zeroizing::new(
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?,
    );
    let signer = if text.trim_start().starts_with('{') {
        let pass = match password_file {
            Some(f) => Zeroizing::new(
                std::fs::read_to_string(f)
                    .with_context(|| format!("cannot read the password file {}", f.display()))?
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            ),
            None => Zeroizing::new(std::env::var(APPROVER_PASSWORD_ENV).map_err(|_| {
                anyhow::anyhow!(
                    "{} is a keystore: give its passphrase with --password-file FILE or {APPROVER_PASSWORD_ENV}",
                    path.display()
                )
            })?),
        };
        afr_anchorer::signer_from_keystore(path, pass.as_bytes())?
    } else {
        let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            bail!(
                "{}: mode is {mode:o}; a key file must be 600 (chmod 600 it)",
                path.display()
            );
        }
        afr_anchorer::signer_from_hex(&text)
            .map_err(|_| anyhow::anyhow!("{} does not hold a 32-byte hex secret", path.display()))?
    };
    let hash = st
        .eip712_signing_hash()
        .map_err(|p| anyhow::anyhow!("{}", p.detail))?;
    let sig = afr_anchorer::sign_digest(&signer, hash)?;
    Ok(format!("0x{}", hex::encode(sig)))
}

/// The signer a signature names: recovered (EIP-712) or read from it (SSH).
fn signature_of(st: &Statement, sig: &str) -> Result<ApprovalSignature> {
    let sig = sig.trim();
    let (scheme, signer) = if sig.starts_with("0x") {
        // Recovered below by verify_signature; named by itself first.
        (Scheme::Eip712, String::new())
    } else if sig.starts_with("-----BEGIN SSH SIGNATURE-----") {
        (Scheme::Ssh, String::new())
    } else {
        bail!("the signature is neither 0x… (EIP-712) nor an armored SSH signature");
    };
    let mut s = ApprovalSignature {
        scheme: scheme.name().into(),
        signer,
        statement: st.clone(),
        signature: if scheme == Scheme::Ssh {
            format!("{sig}\n")
        } else {
            sig.to_owned()
        },
    };
    s.signer = approval::signer_of(&s).map_err(|p| anyhow::anyhow!("{}", p.detail))?;
    Ok(s)
}

/// `afr approve`.
pub fn approve(dir: &Path, a: ApproveArgs) -> Result<ExitCode> {
    let action = load(dir, &a)?;
    let digest = approval::action_digest(&action.intent, action.execution.as_ref()).to_hex();
    show(&action, &digest)?;
    if let Some(c) = &action.call
        && c.action != digest
    {
        bail!(
            "held call {}: the gateway's digest {} is not the digest {digest} of the arguments shown; not approved",
            c.id,
            c.action
        );
    }
    let kept = match &action.call {
        Some(c) => approvals::statement_path(dir, &c.id)?,
        None => {
            let f = a.file.clone().unwrap_or_default();
            PathBuf::from(format!("{}.statement.json", f.display()))
        }
    };
    if let Some(p) = a.print {
        let st = statement(&action, a.valid_for);
        approvals::write_private(&kept, &st)?;
        match p {
            PrintScheme::Ssh => print!("{}", st.ssh_message()),
            PrintScheme::Eip712 => println!("{:#}", st.eip712_typed_data()),
        }
        eprintln!(
            "sign the above (ssh-keygen -Y sign -n {} -f KEY, or a wallet's eth_signTypedData_v4), then: afr approve {} --signature SIG|@FILE",
            approval::SSH_NAMESPACE,
            match &action.call {
                Some(c) => c.id.clone(),
                None => format!(
                    "--file {} --recorder 0x{}",
                    a.file
                        .as_deref()
                        .unwrap_or(Path::new("EVENT.json"))
                        .display(),
                    hex::encode(action.recorder)
                ),
            }
        );
        return Ok(ExitCode::SUCCESS);
    }
    let signature = if let Some(key) = &a.ssh_key {
        let st = statement(&action, a.valid_for);
        Some(signature_of(&st, &ssh_sign(key, &st)?)?)
    } else if let Some(key) = &a.eth_key {
        let st = statement(&action, a.valid_for);
        Some(signature_of(
            &st,
            &eth_sign(key, a.password_file.as_deref(), &st)?,
        )?)
    } else if let Some(sig) = &a.signature {
        let sig = match sig.strip_prefix('@') {
            Some(f) => std::fs::read_to_string(f).with_context(|| format!("cannot read {f}"))?,
            None => sig.clone(),
        };
        let text = std::fs::read_to_string(&kept).with_context(|| {
            format!(
                "no statement was printed for this action ({} is missing): run afr approve with --print first",
                kept.display()
            )
        })?;
        let st: Statement = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a statement", kept.display()))?;
        Some(signature_of(&st, &sig)?)
    } else {
        None
    };
    if let Some(s) = &signature {
        // The same checks as the gateway's and the verifier's, over the action shown.
        let mut p =
            afr_core::Payload::intent_only(action.intent.tool.clone(), action.intent.args.clone());
        p.execution = action.execution.clone();
        p.human_approval = Some(afr_core::event::HumanApproval {
            approver: String::new(),
            prompt: String::new(),
            decision: Decision::Approved,
            decided_at_us: now_us(),
            signature: Some(s.clone()),
        });
        match approval::check(&p, &action.recorder, now_us()) {
            Ok(_) => eprintln!("signed by {} ({})", escape(&s.signer), s.scheme),
            // An event file gets no approval that would not hold.
            Err(e) if action.call.is_none() => {
                bail!(
                    "the signed approval does not hold for this action: {}: {}",
                    e.check,
                    e.detail
                )
            }
            // A held call: the gateway judges it, refuses the call and records why.
            Err(e) => eprintln!(
                "afr approve: warning: the signed approval does not hold for this call ({}: {}); the gateway will refuse it",
                e.check, e.detail
            ),
        }
    }
    let approver = approver_name(&a);
    let Some(call) = action.call else {
        // An event file: the human_approval object to record with it.
        let mut h = serde_json::json!({
            "approver": approver,
            "prompt": a.prompt.unwrap_or_else(|| format!("Approve {}?", action.intent.tool)),
            "decision": "approved",
            "decided_at_us": now_us(),
        });
        if let Some(s) = &signature {
            h["signature"] = serde_json::to_value(s)?;
        }
        println!("{h:#}");
        return Ok(ExitCode::SUCCESS);
    };
    if signature.is_none() && !call.signed_by.is_empty() {
        bail!(
            "held call {} needs an approval signed by one of: {}; sign with --ssh-key PATH, --eth-key PATH, or --print ssh|eip712 then --signature SIG. Nothing was decided",
            call.id,
            call.signed_by.join(", ")
        );
    }
    let ruling = Ruling {
        decision: Decision::Approved,
        approver: approver.clone(),
        decided_at_us: now_us(),
        reason: None,
        signature,
    };
    let signed = ruling.signature.is_some();
    approvals::decide(dir, &call.id, &ruling)?;
    println!(
        "approved {} as {}{}{}",
        call.id,
        escape(&approver),
        if signed {
            " (signed; the gateway checks the signature before it forwards the call)"
        } else {
            ""
        },
        if super::mcp::stale(call.pid) {
            " (but its gateway is gone: nothing will run)"
        } else {
            ""
        }
    );
    Ok(ExitCode::SUCCESS)
}
