//! The library behind `afr-verify`: what is trusted ([`trust`]), anchored roots proven by the
//! recorder's own transactions ([`anchors`]), the verdict that combines a file's own checks
//! with both ([`verdict`]), and the signed human approvals of a bundle's opened events checked
//! against the pinned approvers ([`approvals`]); what stops it deciding is a [`VerifyError`]
//! ([`error`]). A case file ([`case`]) verifies the bundles of several parties together, with
//! the delegation links between their recorders. A verdict or a case is also written as one
//! self-contained HTML document for people, or printed to PDF ([`report`]).
//!
//! The binary, the named negative vectors (`testdata/`) and the evaluation's tamper matrix
//! (`afr-eval`, not shipped here) share one implementation ([`verify`]), so what is tested is
//! exactly what the tool decides.

#![warn(clippy::indexing_slicing)]

pub mod anchors;
pub mod approvals;
pub mod archive;
pub mod case;
pub mod error;
pub mod eth;
pub mod providers;
pub mod report;
pub mod roots;
mod source;
pub mod trust;
pub mod verdict;

use std::path::Path;

use afr_core::{bundle::verify_bundle, verify::Outcome, verify::verify_log};

use crate::anchors::{Anchors, Rpc};
pub use crate::providers::Agree;
pub use error::{ApproverName, Malformed, RedactedUrl, UsageError, VerifyError};
pub use source::{Origin, PinnedSource, Source};
pub use trust::Trust;
pub use verdict::{AnchorsFrom, Verdict, check_anchors, check_recorder, parse_addr};

/// What kind of file is verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole-log export (`afr export`).
    Log,
    /// A disclosure bundle (`afr disclose`).
    Bundle,
}

/// Verifies `bytes` under `trust` with anchors from `src`: the whole decision of `afr-verify`
/// (for a bundle, its opened events' approvals included: [`approvals::check`]).
/// Errors are I/O, RPC or usage errors (nothing was decided); every property of the file is
/// in the verdict. Usage is checked first: a source of anchors without a pinned chain is
/// [`UsageError::ChainNotPinned`] before anything is read ([`PinnedSource`]).
pub fn verify(
    kind: Kind,
    bytes: &[u8],
    trust: &Trust,
    src: Source<'_>,
) -> Result<Verdict, VerifyError> {
    let src = PinnedSource::of(src, trust.chain_id)?;
    verify_pinned(kind, bytes, trust, src)
}

/// [`verify`] with the source of anchors already pinned to its chain (`None`: no source).
pub fn verify_pinned(
    kind: Kind,
    bytes: &[u8],
    trust: &Trust,
    src: Option<PinnedSource<'_>>,
) -> Result<Verdict, VerifyError> {
    verify_full(kind, bytes, trust, src).map(|c| c.verdict)
}

/// What [`examine`] decided, and what the evidence report is built from beside the verdict
/// ([`report::verdict_html`]): for a whole-log export, where each of its event frames is.
#[derive(Debug)]
pub struct Examined<'a> {
    /// What kind of file it is.
    pub kind: Kind,
    /// The verdict, as [`verify`] returns it.
    pub verdict: Verdict,
    /// A whole log's event frames, noted as verification read them.
    pub(crate) log: Option<report::LogFrames<'a>>,
}

/// [`verify_pinned`], keeping what the evidence report needs ([`Examined`]). A whole-log
/// export is read once: its event frames are noted in the same pass as the checks, so the
/// report does not parse the export again (after a failure, that pass reads on to the end
/// without checking, for the report's timeline and cards).
pub fn examine<'a>(
    kind: Kind,
    bytes: &'a [u8],
    trust: &Trust,
    src: Option<PinnedSource<'_>>,
) -> Result<Examined<'a>, VerifyError> {
    let (checked, log) = match kind {
        Kind::Bundle => (verify_full(kind, bytes, trust, src)?, None),
        Kind::Log => {
            let (rep, log) = report::verify_log_noting(bytes);
            let v = Verdict::from_log(&rep);
            (finish(kind, v, None, trust, src)?, Some(log))
        }
    };
    Ok(Examined {
        kind,
        verdict: checked.verdict,
        log,
    })
}

/// What [`verify`] decided, with what it decided from: a bundle's own report and the anchors
/// it compared (what a case file's links are checked against: [`case`]).
#[derive(Debug)]
pub(crate) struct Checked {
    /// The verdict, as [`verify`] returns it.
    pub verdict: Verdict,
    /// A bundle's report (`None` for a log).
    pub bundle: Option<afr_core::bundle::BundleReport>,
    /// The anchors compared with the file's roots, if any were.
    pub anchors: Option<Anchors>,
}

/// [`verify`], keeping the bundle's report and the anchors.
pub(crate) fn verify_full(
    kind: Kind,
    bytes: &[u8],
    trust: &Trust,
    src: Option<PinnedSource<'_>>,
) -> Result<Checked, VerifyError> {
    // A bundle's report is kept for its opened payloads: their approvals are checked last.
    let bundle = (kind == Kind::Bundle).then(|| verify_bundle(bytes));
    let v = match &bundle {
        None => Verdict::from_log(&verify_log(bytes)),
        Some(rep) => Verdict::from_bundle(rep),
    };
    finish(kind, v, bundle, trust, src)
}

/// [`verify_pinned`] of a whole-log export read as a stream
/// (`afr_core::verify::verify_log_stream`): memory bounded by one epoch whatever the log's
/// size. A read error is [`VerifyError::Read`] (nothing was decided).
pub fn verify_log_file(
    path: &Path,
    trust: &Trust,
    src: Option<PinnedSource<'_>>,
) -> Result<Verdict, VerifyError> {
    let read = |source| VerifyError::Read {
        path: path.to_owned(),
        source,
    };
    let f = std::fs::File::open(path).map_err(read)?;
    let len = f.metadata().map_err(read)?.len();
    let rep = afr_core::verify::verify_log_stream(std::io::BufReader::new(f), len).map_err(read)?;
    finish(Kind::Log, Verdict::from_log(&rep), None, trust, src).map(|c| c.verdict)
}

/// What a proof archive is checked against: the pins, and how the contract was named.
struct ArchivePins<'a> {
    chain_id: u64,
    contract: &'a str,
    recorder: afr_core::RecorderId,
    which: &'a str,
    min_confirmations: u64,
}

impl ArchivePins<'_> {
    /// Whether evidence named `name` is for another chain or contract than the pinned ones
    /// (said in `v.missing`).
    fn mismatch(&self, v: &mut Verdict, name: &str, chain_id: u64, contract: &str) -> bool {
        if chain_id != self.chain_id {
            v.missing.push(format!(
                "{name} is for chain {chain_id}, not the pinned chain {}: anchored roots not checked",
                self.chain_id
            ));
            true
        } else if !contract.eq_ignore_ascii_case(self.contract) {
            v.missing.push(format!(
                "{name} is for contract {}, not the pinned {}: anchored roots not checked",
                afr_core::text::escape(contract),
                self.contract
            ));
            true
        } else {
            false
        }
    }
}

/// The roots proof archive `a` (named `name`, shown as `path`) proves under `pins`, re-proven
/// offline ([`archive::Archive::check`]); what it rests on goes into `v`.
fn from_archive(
    v: &mut Verdict,
    a: &archive::Archive,
    name: &str,
    path: String,
    pins: &ArchivePins<'_>,
) -> Option<Anchors> {
    if pins.mismatch(v, name, a.chain_id, &a.contract) {
        return None;
    }
    match a.check(
        pins.chain_id,
        pins.contract,
        &pins.recorder,
        pins.min_confirmations,
    ) {
        Ok(p) => {
            v.notes.push(format!(
                "anchors: re-proven offline from {name} (chain {}, contract {} ({}), written at block {} with hash {}, {} provider(s), rule {}); the header hashes relied upon are listed",
                pins.chain_id,
                pins.contract,
                pins.which,
                a.block,
                afr_core::text::escape(&a.block_hash),
                a.providers.len(),
                afr_core::text::escape(&a.rule)
            ));
            if a.providers.iter().any(|r| !r.agreed) {
                v.notes.push(format!(
                    "the archive records {} provider(s) that did not agree when it was written",
                    a.providers.iter().filter(|r| !r.agreed).count()
                ));
            }
            v.anchors_from = Some(verdict::AnchorsFrom::Archive {
                path,
                block: a.block,
            });
            v.chain = Some(a.chain_json(&p.headers, &p.depth, "archive"));
            push_ignored(v, &p.problems);
            Some(p.anchors)
        }
        Err(why) => {
            v.missing.push(format!(
                "{name} contradicts itself ({why}): no anchored root counted"
            ));
            None
        }
    }
}

/// Notes of what was not counted, at most ten and a count of the rest.
fn push_ignored(v: &mut Verdict, ignored: &[String]) {
    for why in ignored.iter().take(10) {
        v.notes.push(why.clone());
    }
    if ignored.len() > 10 {
        v.notes
            .push(format!("... and {} more ignored logs", ignored.len() - 10));
    }
}

/// The rest of [`verify`] once the file's own checks ran: the pinned recorder, the anchored
/// roots, a bundle's approvals.
fn finish(
    kind: Kind,
    mut v: Verdict,
    bundle: Option<afr_core::bundle::BundleReport>,
    trust: &Trust,
    src: Option<PinnedSource<'_>>,
) -> Result<Checked, VerifyError> {
    check_recorder(&mut v, trust);
    if v.outcome == Outcome::Tampered {
        return Ok(Checked {
            verdict: v,
            bundle,
            anchors: None,
        });
    }
    if v.epochs == Some(0) {
        v.missing
            .push("the log holds no sealed epoch: nothing in it can be anchored".into());
    }
    // What the chain check cannot confirm is judged with the other roots, by the trust
    // policy's rule ([`roots::check`]).
    let before = v.missing.len();
    let contract = trust.contract_hex();
    let which = if trust.canonical() {
        "the canonical AfrAnchor address".to_owned()
    } else {
        format!(
            "NOT the canonical AfrAnchor address {}; named explicitly",
            afr_core::deployment::ANCHOR_ADDRESS
        )
    };
    let anchors: Option<Anchors> = match (src, v.recorder) {
        (_, None) => None,
        (Some(src), Some(rec)) => {
            let chain_id = src.chain_id();
            let pins = ArchivePins {
                chain_id,
                contract: &contract,
                recorder: rec,
                which: &which,
                min_confirmations: trust.chain.min_confirmations,
            };
            if bundle.as_ref().is_some_and(|b| b.anchor_proofs.is_some()) {
                v.notes.push(
                    "the bundle's embedded anchor proofs were not used: the anchored roots were read from the source named".into(),
                );
            }
            match src.origin() {
                Origin::Rpc {
                    urls,
                    agree,
                    block,
                    from_block,
                } => {
                    let rpcs: Vec<Rpc> = urls.iter().map(|u| Rpc::new(u)).collect();
                    let refs: Vec<&Rpc> = rpcs.iter().collect();
                    let block = providers::pinned_block(&refs, chain_id, block)?;
                    // One endpoint: its code is checked first, for a clear answer (each
                    // anchoring block's code is proven below in any case).
                    let code_ok = match refs.as_slice() {
                        [one] => one.code_is_afr_anchor(&contract, block)?,
                        _ => true,
                    };
                    if code_ok {
                        // The file's epochs, and for a whole log the next one (a stale export
                        // shows).
                        let mut epochs: std::collections::BTreeSet<u64> =
                            v.epoch_roots.iter().map(|(e, _)| *e).collect();
                        if kind == Kind::Log {
                            epochs.insert(epochs.last().map_or(0, |l| l.saturating_add(1)));
                        }
                        let f = providers::fetch(
                            &refs,
                            agree,
                            chain_id,
                            &contract,
                            &rec,
                            (from_block, block),
                            Some(&epochs),
                            trust.chain.min_confirmations,
                        )?;
                        v.notes.push(format!(
                            "anchors: chain {chain_id}, contract {contract} ({which}), block {block} (hash {}); each root proven against its block header (the recorder's signed transaction, its receipt, the contract's code); providers: {} ({} must agree)",
                            f.archive.block_hash,
                            refs.len(),
                            f.archive.rule
                        ));
                        v.anchors_from = Some(verdict::AnchorsFrom::Chain { block });
                        v.chain = Some(f.archive.chain_json(&f.headers, &f.depth, "chain"));
                        if let Some(why) = &f.unmet {
                            v.missing.push(why.clone());
                        }
                        push_ignored(&mut v, &f.ignored);
                        Some(f.anchors)
                    } else {
                        v.missing.push(format!(
                            "anchored roots not checked: the code at {contract} (block {block}) is not the AfrAnchor contract, so its logs prove nothing"
                        ));
                        None
                    }
                }
                Origin::File(path) => {
                    let name = format!("the anchors file {}", path.display());
                    match archive::Loaded::read(path)? {
                        archive::Loaded::Archive(a) => from_archive(
                            &mut v,
                            &a,
                            &format!("the proof archive {}", path.display()),
                            path.display().to_string(),
                            &pins,
                        ),
                        archive::Loaded::Unproven(a)
                            if pins.mismatch(&mut v, &name, a.chain_id, &a.contract) =>
                        {
                            None
                        }
                        archive::Loaded::Unproven(a) if trust.chain.unproven_anchors => {
                            v.notes.push(format!(
                                "TRUSTED the anchors file {} (chain {}, contract {} ({which}), block {}) without proofs and without contacting the chain (--unproven-anchors)",
                                path.display(),
                                a.chain_id,
                                a.contract,
                                a.block
                            ));
                            v.anchors_from = Some(verdict::AnchorsFrom::File {
                                path: path.display().to_string(),
                                block: a.block,
                            });
                            Some(a)
                        }
                        archive::Loaded::Unproven(_) => {
                            v.missing.push(format!(
                                "the anchors file {} holds no proofs (version 2: bare RPC answers, which anyone can write): its roots do not count; write a proof archive with afr-verify anchors, or pass --unproven-anchors to trust it as it is",
                                path.display()
                            ));
                            None
                        }
                    }
                }
            }
        }
        // No chain and no file named: the bundle's own anchor proofs, if it carries them and a
        // chain is pinned; they are re-proven as an archive file is.
        (None, Some(rec)) if bundle.as_ref().is_some_and(|b| b.anchor_proofs.is_some()) => {
            match trust.chain_id {
                None => {
                    v.missing.push(
                        "anchored roots not checked: the bundle carries anchor proofs, but no chain is pinned (give --chain-id or a trust file with chain_id)".into(),
                    );
                    None
                }
                Some(chain_id) => {
                    let bytes = bundle
                        .as_ref()
                        .and_then(|b| b.anchor_proofs.as_deref())
                        .unwrap_or_default();
                    let pins = ArchivePins {
                        chain_id,
                        contract: &contract,
                        recorder: rec,
                        which: &which,
                        min_confirmations: trust.chain.min_confirmations,
                    };
                    match std::str::from_utf8(bytes)
                        .ok()
                        .and_then(|t| archive::Archive::parse(t).ok())
                    {
                        Some(a) => from_archive(
                            &mut v,
                            &a,
                            "the proof archive embedded in the bundle",
                            "embedded in the bundle".into(),
                            &pins,
                        ),
                        None => {
                            v.missing.push(
                                "the bundle's anchor-proofs frame is not a proof archive (version 3 JSON): no anchored root counted".into(),
                            );
                            None
                        }
                    }
                }
            }
        }
        (None, Some(_)) => {
            v.missing.push(
                "anchored roots not checked (give --rpc with --chain-id, or --anchors)".into(),
            );
            None
        }
    };
    if let Some(a) = &anchors {
        check_anchors(&mut v, a, kind == Kind::Log)?;
    }
    let chain_missing = v.missing.split_off(before.min(v.missing.len()));
    let frames = bundle
        .as_ref()
        .map(|b| b.checkpoints.as_slice())
        .unwrap_or_default();
    roots::check(&mut v, frames, &trust.roots, chain_missing);
    // Approvals are judged on content the file's own checks, the recorder and the anchored
    // roots have let through: a failure here is about the approval, not the file.
    if let Some(rep) = &bundle
        && v.outcome != Outcome::Tampered
    {
        approvals::check(&mut v, rep, trust);
    }
    v.settle();
    Ok(Checked {
        verdict: v,
        bundle,
        anchors,
    })
}
