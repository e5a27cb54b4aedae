//! `afr delegate offer|accept|receipt`: the delegation handshake between two recorders
//! (`docs/spec/delegation.md`), through `afr serve` when it runs, else on the store directly.
//! Each step prints this recorder's signed receipt (JSON) to hand to the other side.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use afr_core::{EventInput, delegation::Receipt};
use afr_recorder::{
    Config, Recorder,
    delegation::{DelegationError, SignFn},
};
use anyhow::{Context, Result, bail};
use clap::Subcommand;
use serde_json::{Value, json};

use crate::anchoring;

#[derive(Subcommand, Debug)]
pub enum DelegateCmd {
    /// The delegating side, first: record EVENT (the call that hands work to another
    /// organisation's agent) and print its signed receipt, the offer to send with the work.
    Offer {
        /// The event (JSON of docs/event.schema.json), or `-` for standard input.
        event: PathBuf,
        /// The receiving recorder the work is offered to (its id, 0x and 40 hex digits): the
        /// receipt names it, so no other recorder can cite the offer as accepted.
        #[arg(long, value_name = "RECORDER")]
        to: String,
        /// Records the event once under this key; a retry returns the first receipt.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// The receiving side: check the delegating side's offer, record EVENT (accepting the
    /// work) with the offer as its `delegation_provenance.parent_event`, and print this
    /// recorder's signed receipt to send back.
    Accept {
        /// The accepting event (JSON), or `-` for standard input.
        event: PathBuf,
        /// The delegating side's offer (a file, or the JSON itself).
        #[arg(long, value_name = "OFFER")]
        parent: String,
        /// Records the event once under this key.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// The delegating side, last: record the receiving side's receipt for this recorder's
    /// offer (an `afr.delegated` event with `delegation_provenance.delegated_to`).
    Receipt {
        /// This recorder's offer (a file, or the JSON itself).
        #[arg(long)]
        offer: String,
        /// The receiving side's receipt (a file, or the JSON itself).
        #[arg(long)]
        receipt: String,
    },
}

fn read_text(p: &Path) -> Result<String> {
    if p.as_os_str() == "-" {
        return std::io::read_to_string(std::io::stdin()).context("cannot read standard input");
    }
    std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))
}

/// A receipt given as a file or as its JSON.
fn receipt_arg(s: &str, what: &str) -> Result<Receipt> {
    let text = if s.trim_start().starts_with('{') {
        s.to_owned()
    } else {
        read_text(Path::new(s))?
    };
    serde_json::from_str(&text).with_context(|| format!("the {what} is not a receipt"))
}

fn event_arg(p: &Path) -> Result<(Value, EventInput)> {
    let text = read_text(p)?;
    let ev = EventInput::from_json(text.as_bytes(), afr_core::event::DEFAULT_MAX_EVENT_BYTES)
        .with_context(|| format!("{} is not an acceptable event", p.display()))?;
    Ok((serde_json::from_str(&text)?, ev))
}

/// One step run on the store opened here.
type Step = dyn FnOnce(&Recorder, SignFn<'_>) -> Result<Receipt, DelegationError>;

/// Runs one step.
pub fn run(dir: &Path, password_file: Option<&Path>, cmd: DelegateCmd) -> Result<ExitCode> {
    let (step, body, local): (&str, Value, Box<Step>) = match cmd {
        DelegateCmd::Offer {
            event,
            to,
            idempotency_key,
        } => {
            let (json, ev) = event_arg(&event)?;
            let key = idempotency_key.clone();
            let to_id = afr_core::delegation::parse_recorder(&to.to_ascii_lowercase())
                .with_context(|| {
                    format!("--to `{to}` is not a recorder id (0x and 40 hex digits)")
                })?;
            (
                "offer",
                json!({"event": json, "to": to, "idempotency_key": idempotency_key}),
                Box::new(
                    move |r: &Recorder, sign: afr_recorder::delegation::SignFn<'_>| {
                        r.delegate_offer(ev, &to_id, key.as_deref(), sign)
                    },
                ),
            )
        }
        DelegateCmd::Accept {
            event,
            parent,
            idempotency_key,
        } => {
            let (json, ev) = event_arg(&event)?;
            let parent = receipt_arg(&parent, "offer")?;
            let key = idempotency_key.clone();
            (
                "accept",
                json!({"event": json, "parent": parent, "idempotency_key": idempotency_key}),
                Box::new(
                    move |r: &Recorder, sign: afr_recorder::delegation::SignFn<'_>| {
                        r.delegate_accept(ev, &parent, key.as_deref(), sign)
                    },
                ),
            )
        }
        DelegateCmd::Receipt { offer, receipt } => {
            let ours = receipt_arg(&offer, "offer")?;
            let theirs = receipt_arg(&receipt, "receipt")?;
            (
                "receipt",
                json!({"offer": ours, "receipt": theirs}),
                Box::new(
                    move |r: &Recorder, sign: afr_recorder::delegation::SignFn<'_>| {
                        r.delegate_receipt(&ours, &theirs, sign)
                    },
                ),
            )
        }
    };
    // A server started on demand holds no receipt key: it hands the store over first.
    let _takeover = afr_client::take_over(dir)?;
    let receipt: Receipt = if let Some(mut c) = afr_client::socket::Client::running(dir) {
        let mut body = body;
        if let Value::Object(m) = &mut body {
            m.retain(|_, v| !v.is_null());
        }
        let r = c.request(
            "POST",
            &format!("/v1/delegations/{step}"),
            Some("application/json"),
            &serde_json::to_vec(&body)?,
        )?;
        if r.status != 200 {
            bail!("afr serve answered {}: {}", r.status, r.error_message());
        }
        serde_json::from_value(r.json()["receipt"].clone())
            .context("afr serve answered without a receipt")?
    } else {
        let key = anchoring::signer(dir, password_file)?;
        let sign =
            move |d: &[u8; 32]| afr_anchorer::sign_digest(&key, *d).map_err(|e| e.to_string());
        let r = Recorder::open(dir, Config::default())?;
        local(&r, &sign).map_err(|e| match e {
            DelegationError::Record(e) => anyhow::Error::new(e),
            e => anyhow::anyhow!("{e}"),
        })?
    };
    println!("{}", serde_json::to_string_pretty(&receipt)?);
    Ok(ExitCode::SUCCESS)
}
