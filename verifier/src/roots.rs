//! Independent roots under one trust policy: the chain's anchors, witness-cosigned
//! checkpoints (`c2sp.org/tlog-checkpoint`, `tlog-cosignature`, `tlog-policy`) and RFC 3161
//! timestamps, each judged per epoch, and the relying party's rule for which must hold.
//!
//! ```toml
//! [roots]
//! require = ["chain"]               # default; or e.g. ["witnesses"], ["chain", "tsa"]
//! # require_any = 2                 # instead: any two of chain, witnesses and tsa
//! witness_policy = """              # c2sp.org/tlog-policy; `log` lines optional
//! witness w1 w1.example/witness+1a2b3c4d+BN…
//! witness w2 w2.example/witness+5e6f7a8b+BF…
//! group both all w1 w2
//! quorum both
//! """
//!
//! [[roots.tsa]]
//! name = "acme-tsa"
//! certificates = """-----BEGIN CERTIFICATE-----…"""   # the TSA's, or its CA's (PEM)
//!
//! [[party]]
//! name = "Acme"
//! recorders = ["0x…"]
//! log_keys = ["afr.recorder/0x…+abcd0123+AQ…"]      # `afr witness --print-vkey`
//! ```
//!
//! A checkpoint counts only when signed by a pinned log key for the file's recorder; its tree
//! must be the file's epochs (the root over the first `size` epoch roots, or a consistency
//! proof from the file's tree to it): otherwise the file is **tampered** (`checkpoint`), as it
//! is for a pinned witness's cosignature that does not verify (`cosignature`) or a pinned
//! TSA's token over another checkpoint (`timestamp`). Two checkpoints of one log that are not
//! consistent are equivocation: tampered. An epoch is *witnessed* when a checkpoint covering
//! it meets the witness quorum, *timestamped* when one covering it has a valid token of a
//! pinned TSA, *anchored* as the chain says. An epoch without the roots the rule requires
//! leaves the verdict **incomplete**, naming which failed and why.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use afr_core::{
    Hash32,
    bundle::CheckpointFrame,
    hash::sha256,
    merkle,
    verify::{Check, Location, Outcome},
};
use afr_tlog::{CheckError, Policy, VerifierKey, tree};

use crate::verdict::Verdict;

/// The three kinds of root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RootKind {
    /// Anchored by the recorder's transaction on the pinned chain.
    Chain,
    /// Under a checkpoint cosigned by a quorum of pinned witnesses.
    Witnesses,
    /// Under a checkpoint timestamped by a pinned TSA.
    Tsa,
}

impl RootKind {
    /// Its name in trust files and reports.
    pub fn name(self) -> &'static str {
        match self {
            RootKind::Chain => "chain",
            RootKind::Witnesses => "witnesses",
            RootKind::Tsa => "tsa",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<RootKind> {
        [RootKind::Chain, RootKind::Witnesses, RootKind::Tsa]
            .into_iter()
            .find(|k| k.name() == s)
    }
}

/// What must hold for each epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Require {
    /// Every listed root.
    All(Vec<RootKind>),
    /// At least this many of the three.
    AtLeast(usize),
}

impl Require {
    fn describe(&self) -> String {
        match self {
            Require::All(ks) => ks
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(" and "),
            Require::AtLeast(k) => format!("any {k} of chain, witnesses and tsa"),
        }
    }

    fn met(&self, held: &BTreeSet<RootKind>) -> bool {
        match self {
            Require::All(ks) => ks.iter().all(|k| held.contains(k)),
            Require::AtLeast(k) => held.len() >= *k,
        }
    }

    /// Whether the chain is required whatever else holds.
    pub fn needs_chain(&self) -> bool {
        matches!(self, Require::All(ks) if ks.contains(&RootKind::Chain))
    }
}

/// A pinned TSA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedTsa {
    /// Its name in the trust file.
    pub name: String,
    /// Its certificates (or its CA's), PEM or DER as given.
    pub certificates: Vec<u8>,
}

/// The roots part of a trust file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootsPolicy {
    /// The rule.
    pub require: Require,
    /// Witnesses, groups and quorum; `None` when no witness is pinned.
    pub witnesses: Option<Policy>,
    /// Pinned TSAs.
    pub tsas: Vec<PinnedTsa>,
    /// Pinned checkpoint log keys (every party's).
    pub log_keys: Vec<VerifierKey>,
}

impl Default for RootsPolicy {
    fn default() -> RootsPolicy {
        RootsPolicy {
            require: Require::All(vec![RootKind::Chain]),
            witnesses: None,
            tsas: Vec::new(),
            log_keys: Vec::new(),
        }
    }
}

#[derive(Debug, Default)]
struct Held {
    /// Epoch → the earliest time it was witnessed (POSIX seconds of a counted cosignature).
    witnessed: BTreeMap<u64, u64>,
    /// Epoch → the earliest TSA time (RFC 3339).
    timestamped: BTreeMap<u64, String>,
    why_not_witnessed: Vec<String>,
    why_not_timestamped: Vec<String>,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn ranges(epochs: &[u64]) -> String {
    format!("[{}]", afr_core::text::runs(epochs, "..="))
}

/// Judges the roots of `v`'s epochs: the checkpoint frames, then the rule. `chain_missing`
/// are the reasons the chain check gave for what it could not confirm: kept as missing when
/// the rule needs the chain, else as notes.
pub fn check(
    v: &mut Verdict,
    frames: &[CheckpointFrame],
    policy: &RootsPolicy,
    chain_missing: Vec<String>,
) {
    let mut held = Held::default();
    if frames.is_empty() {
        held.why_not_witnessed
            .push("the file carries no checkpoint (disclose after `afr witness`)".into());
        held.why_not_timestamped
            .push("the file carries no checkpoint".into());
    }
    if v.outcome != Outcome::Tampered && !frames.is_empty() {
        checkpoints(v, frames, policy, &mut held);
    }
    if v.outcome == Outcome::Tampered {
        v.missing.extend(chain_missing);
        return;
    }
    let anchored: HashSet<u64> = v.anchors.iter().map(|a| a.0).collect();
    let epochs: Vec<u64> = v.epoch_roots.iter().map(|(e, _)| *e).collect();
    let mut unmet = Vec::new();
    let mut table = Vec::new();
    for &e in &epochs {
        let mut h = BTreeSet::new();
        if anchored.contains(&e) {
            h.insert(RootKind::Chain);
        }
        if held.witnessed.contains_key(&e) {
            h.insert(RootKind::Witnesses);
        }
        if held.timestamped.contains_key(&e) {
            h.insert(RootKind::Tsa);
        }
        if !policy.require.met(&h) {
            unmet.push(e);
        }
        table.push(serde_json::json!({
            "epoch": e,
            "chain": anchored.contains(&e),
            "witnessed_at": held.witnessed.get(&e),
            "timestamped_at": held.timestamped.get(&e),
            "required_met": policy.require.met(&h),
        }));
    }
    let count = |f: &dyn Fn(&u64) -> bool| epochs.iter().filter(|e| f(e)).count();
    let summary = format!(
        "roots (require {}): {} of {} epochs anchored on the chain, {} witnessed by the quorum, {} timestamped by a pinned TSA",
        policy.require.describe(),
        count(&|e| anchored.contains(e)),
        epochs.len(),
        count(&|e| held.witnessed.contains_key(e)),
        count(&|e| held.timestamped.contains_key(e)),
    );
    v.notes.push(summary);
    if policy.require.needs_chain() {
        v.missing.extend(chain_missing);
    } else {
        v.notes.extend(
            chain_missing
                .into_iter()
                .map(|m| format!("chain (not required alone): {m}")),
        );
    }
    if !unmet.is_empty() {
        let mut why = Vec::new();
        if !anchored.len().eq(&epochs.len()) {
            why.push("chain: not every epoch is proven anchored".to_owned());
        }
        why.extend(
            held.why_not_witnessed
                .iter()
                .map(|w| format!("witnesses: {w}")),
        );
        why.extend(held.why_not_timestamped.iter().map(|w| format!("tsa: {w}")));
        v.missing.push(format!(
            "epochs {} lack the roots the trust policy requires ({}){}",
            ranges(&unmet),
            policy.require.describe(),
            if why.is_empty() {
                String::new()
            } else {
                format!(": {}", why.join("; "))
            }
        ));
    }
    v.roots = Some(serde_json::json!({
        "require": policy.require.describe(),
        "epochs": table,
    }));
}

fn checkpoints(v: &mut Verdict, frames: &[CheckpointFrame], policy: &RootsPolicy, held: &mut Held) {
    let Some(recorder) = v.recorder else { return };
    let origin = afr_tlog::origin(&format!("0x{}", hex::encode(recorder)));
    let roots: Vec<Hash32> = v.epoch_roots.iter().map(|(_, r)| *r).collect();
    let leaves = tree::leaves(&roots);
    let h = leaves.len() as u64;
    let mut tlog = policy.witnesses.clone().unwrap_or_default();
    for k in &policy.log_keys {
        if !tlog.logs.iter().any(|l| l.public == k.public) {
            tlog.logs.push(k.clone());
        }
    }
    if !tlog.has_quorum() {
        let _ = tlog.set_quorum(None, 0);
    }
    let witnesses_pinned = policy.witnesses.is_some();
    let tsas: Vec<(String, Vec<afr_tsa::TrustedCert>)> = policy
        .tsas
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                afr_tsa::TrustedCert::parse(&t.certificates).unwrap_or_default(),
            )
        })
        .collect();
    // The base every larger checkpoint must extend: the file's own tree, then each larger
    // checkpoint in turn.
    let mut base = (h, tree::root(&leaves));
    let mut last_size = 0u64;
    let now = now();
    for (i, f) in frames.iter().enumerate() {
        let at = Location::File;
        let checked = match afr_tlog::check_checkpoint(f.note.as_bytes(), &tlog, &origin, now) {
            Ok(c) => c,
            Err(CheckError::LogSignature(e))
                if !matches!(e, afr_tlog::NoteError::BadSignature { .. }) =>
            {
                let m = format!(
                    "checkpoint frame {i}: not signed by a pinned log key of this recorder ({e})"
                );
                held.why_not_witnessed.push(m.clone());
                held.why_not_timestamped.push(m);
                continue;
            }
            Err(CheckError::BadCosignature(w)) => {
                v.tamper(at, Check::Cosignature, format!("checkpoint frame {i}: the cosignature of pinned witness {w} does not verify"));
                return;
            }
            Err(e) => {
                v.tamper(at, Check::Checkpoint, format!("checkpoint frame {i}: {e}"));
                return;
            }
        };
        let cp = &checked.checkpoint;
        if cp.size <= last_size {
            v.tamper(
                at,
                Check::Checkpoint,
                format!(
                    "checkpoint frame {i}: sizes must ascend ({} after {last_size})",
                    cp.size
                ),
            );
            return;
        }
        last_size = cp.size;
        if cp.size <= h {
            let ours = tree::root(leaves.get(..cp.size as usize).unwrap_or_default());
            if !f.proof.is_empty() || ours != cp.root {
                v.tamper(
                    at,
                    Check::Checkpoint,
                    format!(
                        "checkpoint of size {} has root {}, the file's first {} epochs have {}",
                        cp.size, cp.root, cp.size, ours
                    ),
                );
                return;
            }
        } else {
            if merkle::verify_consistency(base.0, cp.size, &base.1, &cp.root, &f.proof).is_err() {
                v.tamper(
                    at,
                    Check::Checkpoint,
                    format!(
                        "checkpoint of size {} does not extend the tree of size {} ({}): a fork or equivocation of the log",
                        cp.size, base.0, base.1
                    ),
                );
                return;
            }
            base = (cp.size, cp.root);
        }
        crate::verdict::bump(&mut v.checks, "checkpoint");
        let covered = cp.size.min(h);
        for (w, why) in &checked.not_counted {
            held.why_not_witnessed.push(format!(
                "checkpoint of size {}: witness {w} not counted: {why}",
                cp.size
            ));
        }
        if witnesses_pinned {
            if checked.quorum_met {
                crate::verdict::bump(&mut v.checks, "witness-quorum");
                let t = checked.cosigned.iter().map(|(_, t)| *t).max().unwrap_or(0);
                for e in 0..covered {
                    let slot = held.witnessed.entry(e).or_insert(t);
                    *slot = (*slot).min(t);
                }
            } else {
                let names: Vec<&str> = checked.cosigned.iter().map(|(n, _)| n.as_str()).collect();
                held.why_not_witnessed.push(format!(
                    "checkpoint of size {} is cosigned by [{}], short of the quorum {}",
                    cp.size,
                    names.join(", "),
                    tlog.quorum_name()
                ));
            }
        }
        let digest = sha256(&[checked.text.as_bytes()]);
        for (name, der) in &f.tokens {
            let mut counted = false;
            for (tsa, certs) in &tsas {
                match afr_tsa::verify(der, &digest.0, certs) {
                    Ok(ts) => {
                        crate::verdict::bump(&mut v.checks, "timestamp");
                        let when = ts.gen_time_rfc3339();
                        for e in 0..covered {
                            let slot = held.timestamped.entry(e).or_insert_with(|| when.clone());
                            if when < *slot {
                                *slot = when.clone();
                            }
                        }
                        counted = true;
                        break;
                    }
                    Err(
                        afr_tsa::TsaError::Untrusted { .. } | afr_tsa::TsaError::SignerNotFound,
                    ) => {}
                    Err(e) => {
                        v.tamper(
                            at,
                            Check::Timestamp,
                            format!("the token {name:?} on checkpoint of size {} does not verify under pinned TSA {tsa}: {e}", cp.size),
                        );
                        return;
                    }
                }
            }
            if !counted {
                held.why_not_timestamped
                    .push(format!("token {name:?} is from no pinned TSA"));
            }
        }
    }
    if !witnesses_pinned && frames.iter().any(|f| f.note.contains('\u{2014}')) {
        held.why_not_witnessed
            .push("no witness is pinned in the trust file".into());
    }
    if policy.tsas.is_empty() && frames.iter().any(|f| !f.tokens.is_empty()) {
        held.why_not_timestamped
            .push("no TSA is pinned in the trust file".into());
    }
}
