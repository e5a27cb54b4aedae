//! The verdict: a file's own checks combined with the pinned trust and the anchored roots.
//!
//! The core crate checks a log or a bundle on its own and lists the epoch roots the file
//! commits to; this module pins the recorder, compares those roots with the anchored ones and
//! settles the one outcome: tampered if any check failed, incomplete if something could not be
//! checked (no recorder pinned, an epoch not yet anchored, a withheld payload, a log that ends
//! before the anchored head, an approval required signed and unsigned or not attributable to
//! a pinned approver: [`crate::approvals`]), verified otherwise.

use crate::{
    anchors::Anchors,
    approvals::Approval,
    error::{UsageError, VerifyError},
    trust::Trust,
};
use afr_core::{
    Hash32, RecorderId,
    bundle::BundleReport,
    event::CaptureStrength,
    verify::{Check, Failure, Location, Outcome, Report},
};

/// What the tool reports about one file.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The answer so far.
    pub outcome: Outcome,
    /// Recorder of the file, once read.
    pub recorder: Option<RecorderId>,
    /// Events in the file: a count for a log, the disclosed sequence numbers for a bundle.
    pub events: serde_json::Value,
    /// Sealed epochs in a log (`None` for a bundle).
    pub epochs: Option<u64>,
    /// Events of a bundle whose payloads were crypto-erased.
    pub erased: Vec<u64>,
    /// Passed checks by name, with counts.
    pub checks: Vec<(String, u64)>,
    /// The first failure, if tampered.
    pub first_failure: Option<Failure>,
    /// What is missing, if incomplete.
    pub missing: Vec<String>,
    /// Free-form lines for the human report.
    pub notes: Vec<String>,
    /// `(epoch, root)` of every epoch the file commits to.
    pub epoch_roots: Vec<(u64, Hash32)>,
    /// Opened payloads (bundles with keys), as JSON.
    pub opened: Vec<serde_json::Value>,
    /// The party whose pinned recorder made the file, once matched.
    pub party: Option<String>,
    /// The proven anchors of the file's epochs: `(epoch, tx, block, log index)`.
    pub anchors: Vec<(u64, String, u64, u64)>,
    /// Where [`Verdict::anchors`] came from, if anchors were compared.
    pub anchors_from: Option<AnchorsFrom>,
    /// The approval of every opened event that carries one ([`crate::approvals`]).
    pub approvals: Vec<Approval>,
    /// Every disclosed record whose inclusion proof checked out, by sequence number: its leaf
    /// hash, time, epoch, category and lane (empty for a log, whose payloads are never opened).
    pub records: std::collections::BTreeMap<u64, afr_core::bundle::DisclosedLeaf>,
    /// Which roots held for each epoch, under the trust policy's rule ([`crate::roots`]).
    pub roots: Option<serde_json::Value>,
    /// What the anchored roots rest on: the providers and whether they agreed, the header
    /// hash of every block relied upon, each anchoring block's depth
    /// ([`crate::archive::Archive::chain_json`]).
    pub chain: Option<serde_json::Value>,
}

/// Where a verdict's anchored roots came from, and so what they rest on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorsFrom {
    /// Read from the pinned chain through a JSON-RPC endpoint, at `block`: each root proven
    /// by a successful transaction the recorder sent (as that endpoint answers).
    Chain {
        /// The block read at.
        block: u64,
    },
    /// A proof archive (`afr-verify anchors`, version 3): every root re-proven offline from
    /// the headers and proofs it holds; what is left to trust is the header hashes, listed.
    Archive {
        /// The file, as named.
        path: String,
        /// The verification block it was written at.
        block: u64,
    },
    /// An anchors file without proofs (version 2), taken as it is because the user said so
    /// (`--unproven-anchors`): its transactions, blocks and times were not checked.
    File {
        /// The file, as named.
        path: String,
        /// The block it says it was read at.
        block: u64,
    },
}

impl AnchorsFrom {
    /// `chain` or `file`.
    pub fn name(&self) -> &'static str {
        match self {
            AnchorsFrom::Chain { .. } => "chain",
            AnchorsFrom::Archive { .. } => "archive",
            AnchorsFrom::File { .. } => "file",
        }
    }

    /// What the anchors rest on, in one sentence (strings from the command line unescaped).
    pub fn describe(&self) -> String {
        match self {
            AnchorsFrom::Chain { block } => format!(
                "anchored roots read from the pinned chain at block {block}, each proven against its block header: the recorder's signed transaction, its receipt and the contract's code (the header hashes are listed; the providers had to agree on them)"
            ),
            AnchorsFrom::Archive { path, block } => format!(
                "anchored roots re-proven offline from the proof archive {path} (written at block {block}): each transaction, receipt and code hash checked against its header; the header hashes relied upon are listed, compare them with any node or explorer"
            ),
            AnchorsFrom::File { path, block } => format!(
                "anchored roots taken AS IS from the anchors file {path} (it says block {block}): its transactions, blocks and times were NOT checked against any chain; a forged file would give the same verdict"
            ),
        }
    }
}

fn checks_vec(checks: &std::collections::BTreeMap<&'static str, u64>) -> Vec<(String, u64)> {
    checks.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

impl Verdict {
    /// The verdict of a whole-log report, before anchors are compared.
    pub fn from_log(rep: &Report) -> Verdict {
        Verdict {
            outcome: rep.outcome,
            recorder: rep.recorder,
            events: rep.events.into(),
            epochs: Some(rep.epochs),
            erased: Vec::new(),
            checks: checks_vec(&rep.checks),
            first_failure: rep.first_failure.clone(),
            missing: rep.missing.clone(),
            notes: vec![format!(
                "{} events in {} sealed epochs",
                rep.events, rep.epochs
            )],
            epoch_roots: rep.epoch_roots.clone(),
            opened: Vec::new(),
            party: None,
            anchors: Vec::new(),
            anchors_from: None,
            approvals: Vec::new(),
            records: Default::default(),
            roots: None,
            chain: None,
        }
    }

    /// The verdict of a bundle report, before anchors are compared.
    pub fn from_bundle(rep: &BundleReport) -> Verdict {
        let mut notes = vec![format!(
            "{} disclosed events: {:?}",
            rep.events.len(),
            rep.events
        )];
        for (seq, p) in &rep.opened {
            let captured = match p.code_provenance.as_ref().and_then(|c| c.capture.as_ref()) {
                Some(c) => match c.strength {
                    CaptureStrength::Inline => format!(" (captured inline by {})", c.via),
                    CaptureStrength::SelfReported => format!(" (self-reported, via {})", c.via),
                },
                None => String::new(),
            };
            notes.push(match &p.execution {
                Some(e) => format!(
                    "event {seq} opened: {}: {}{captured}",
                    p.intent.tool, e.command
                ),
                None => format!("event {seq} opened: {}{captured}", p.intent.tool),
            });
        }
        for (epoch, seq) in &rep.erasures {
            notes.push(format!(
                "epoch {epoch} was crypto-erased, proven by its afr.erase event {seq}"
            ));
        }
        if !rep.erased.is_empty() {
            notes.push(format!(
                "payloads of events {:?} were crypto-erased (not tampering)",
                rep.erased
            ));
        }
        Verdict {
            outcome: rep.outcome,
            recorder: rep.recorder,
            events: rep.events.clone().into(),
            epochs: None,
            erased: rep.erased.clone(),
            checks: checks_vec(&rep.checks),
            first_failure: rep.first_failure.clone(),
            missing: rep.missing.clone(),
            notes,
            epoch_roots: rep.epoch_roots.clone(),
            opened: rep
                .opened
                .iter()
                .map(|(s, p)| serde_json::json!({"seq": s, "payload": p}))
                .collect(),
            party: None,
            anchors: Vec::new(),
            anchors_from: None,
            approvals: Vec::new(),
            records: rep.leaves.clone(),
            roots: None,
            chain: None,
        }
    }

    /// The opened events by how they were captured (`code_provenance.capture.strength`):
    /// `{"inline": [seq…], "self_reported": [seq…], "unstated": [seq…]}`.
    fn capture_json(&self) -> serde_json::Value {
        let mut by = serde_json::Map::new();
        for name in CaptureStrength::NAMES.iter().chain(&["unstated"]) {
            by.insert((*name).to_owned(), serde_json::json!([]));
        }
        for o in &self.opened {
            let strength = o
                .pointer("/payload/code_provenance/capture/strength")
                .and_then(serde_json::Value::as_str)
                .filter(|s| CaptureStrength::NAMES.contains(s))
                .unwrap_or("unstated");
            if let Some(serde_json::Value::Array(a)) = by.get_mut(strength) {
                a.push(o["seq"].clone());
            }
        }
        serde_json::Value::Object(by)
    }

    /// Settles the outcome once every check has run: tampered stays tampered, otherwise
    /// incomplete if anything is missing, else verified.
    pub fn settle(&mut self) {
        if self.outcome != Outcome::Tampered {
            self.outcome = if self.missing.is_empty() {
                Outcome::Verified
            } else {
                Outcome::Incomplete
            };
        }
    }

    /// The report as one JSON object (what `--json` prints, in `afr-verify` and in `afr
    /// verify-export` / `verify-bundle`). `trust` is `None` for an integrity-only check (the
    /// file alone, no pins, no anchors): `"trust": null`.
    pub fn to_json(&self, trust: Option<&Trust>) -> serde_json::Value {
        serde_json::json!({
            "outcome": self.outcome.name(),
            "recorder": self.recorder.map(|r| format!("0x{}", hex::encode(r))),
            "events": self.events,
            "epochs": self.epochs,
            "erased": self.erased,
            "trust": trust.map(|trust| serde_json::json!({
                "chain_id": trust.chain_id,
                "contract": trust.contract_hex(),
                "canonical_contract": trust.canonical(),
                "recorder_pinned": !trust.parties.is_empty(),
                "party": self.party,
                "approvers_pinned": trust.approvers.len(),
                "require_signed_approvals": trust.require_signed_approvals,
            })),
            "checks": self.checks.iter().map(|(k, n)| (k.clone(), serde_json::json!(n))).collect::<serde_json::Map<_, _>>(),
            "first_failure": self.first_failure.as_ref().map(Failure::to_json),
            "missing": self.missing,
            "notes": self.notes,
            "epoch_roots": afr_core::verify::epoch_roots_json(&self.epoch_roots),
            "anchors": self.anchors.iter().map(|(e, tx, b, i)| serde_json::json!({"epoch": e, "tx": tx, "block": b, "log_index": i})).collect::<Vec<_>>(),
            "anchors_from": self.anchors_from.as_ref().map(|a| match a {
                AnchorsFrom::Chain { block } => serde_json::json!({"source": "chain", "block": block}),
                AnchorsFrom::Archive { path, block } => serde_json::json!({"source": "archive", "path": path, "block": block, "checked_against_chain": false, "proofs_checked": true}),
                AnchorsFrom::File { path, block } => serde_json::json!({"source": "file", "path": path, "block": block, "checked_against_chain": false}),
            }),
            "ran_against_rejection": self.approvals.iter().filter(|a| a.ran_against_rejection).map(|a| a.seq).collect::<Vec<_>>(),
            "opened": self.opened,
            "capture": self.capture_json(),
            "approvals": self.approvals.iter().map(Approval::to_json).collect::<Vec<_>>(),
            "roots": self.roots,
            "chain": self.chain,
            "records": self.records.iter().map(|(seq, r)| serde_json::json!({
                "seq": seq,
                "epoch": r.epoch,
                "timestamp_us": r.timestamp_us,
                "category": r.category.name(),
                "lane": r.lane,
                "leaf_hash": r.leaf.to_hex(),
            })).collect::<Vec<_>>(),
        })
    }

    /// The report for a terminal (`trust` as in [`Verdict::to_json`]). Every string that
    /// comes from the file or an RPC answer is escaped ([`afr_core::text::escape`]): a recorded
    /// tool name cannot redraw the verdict.
    pub fn to_text(&self, trust: Option<&Trust>) -> String {
        use afr_core::text::escape;
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{}{}",
            self.outcome.name().to_uppercase(),
            self.headline_warning()
        );
        if let Some(a) = &self.anchors_from {
            let _ = writeln!(out, "  {}", escape(&a.describe()));
        }
        let Some(trust) = trust else {
            let _ = writeln!(
                out,
                "  integrity only: the file's own checks, no recorder pinned and no anchored \
                 root compared (afr-verify does both)"
            );
            self.body(&mut out);
            return out;
        };
        let pinned = match (&self.party, trust.parties.is_empty()) {
            (Some(p), _) if p == "--recorder" => "recorder pinned by --recorder".into(),
            (Some(p), _) => format!("recorder of {}", escape(p)),
            (None, true) => "no recorder pinned".into(),
            (None, false) => "recorder pinned".into(),
        };
        let chain = trust
            .chain_id
            .map_or_else(|| "no chain pinned".to_owned(), |c| format!("chain {c}"));
        let approvers = match (trust.approvers.len(), trust.require_signed_approvals) {
            (0, false) => String::new(),
            (n, required) => format!(
                ", {n} approver{} pinned{}",
                if n == 1 { "" } else { "s" },
                if required {
                    ", signed approvals required"
                } else {
                    ""
                }
            ),
        };
        let _ = writeln!(
            out,
            "  trust: {chain}, contract {}{}, {pinned}{approvers}",
            trust.contract_hex(),
            if trust.canonical() {
                " (canonical)"
            } else {
                " (named explicitly, not canonical)"
            }
        );
        self.body(&mut out);
        out
    }

    /// What the verdict word alone would hide: calls that ran against a rejection.
    pub fn headline_warning(&self) -> String {
        let ran: Vec<String> = self
            .approvals
            .iter()
            .filter(|a| a.ran_against_rejection)
            .map(|a| a.seq.to_string())
            .collect();
        match ran.as_slice() {
            [] => String::new(),
            [one] => format!(", but event {one} RAN AGAINST A REJECTION"),
            many => format!(", but events {} RAN AGAINST A REJECTION", many.join(", ")),
        }
    }

    /// Notes, checks, what is missing and the first failure.
    fn body(&self, out: &mut String) {
        use afr_core::text::escape;
        use std::fmt::Write as _;
        for n in &self.notes {
            let _ = writeln!(out, "  {}", escape(n));
        }
        if let Some(c) = &self.chain {
            for p in c["providers"].as_array().into_iter().flatten() {
                if p["agreed"].as_bool() != Some(true) {
                    let _ = writeln!(
                        out,
                        "  provider {} did not agree: {}",
                        escape(p["endpoint"].as_str().unwrap_or("?")),
                        escape(p["detail"].as_str().unwrap_or("no detail"))
                    );
                }
            }
            for (n, h) in c["headers"].as_object().into_iter().flatten() {
                let _ = writeln!(
                    out,
                    "  header relied upon: block {} hash {} (compare with any node or explorer)",
                    escape(n),
                    escape(h.as_str().unwrap_or("?"))
                );
            }
        }
        for a in &self.approvals {
            let _ = writeln!(out, "  {}", a.to_text());
        }
        for (c, n) in &self.checks {
            let _ = writeln!(out, "  {c:<20} {n} passed");
        }
        for m in &self.missing {
            let _ = writeln!(out, "  missing: {}", escape(m));
        }
        if let Some(f) = &self.first_failure {
            let _ = writeln!(
                out,
                "  first failure at {}: {} ({})",
                f.location,
                f.check,
                escape(&f.detail)
            );
            let _ = writeln!(out, "  consistent with: {}", f.consistent_with());
        }
    }

    pub(crate) fn tamper(&mut self, location: Location, check: Check, detail: String) {
        self.outcome = Outcome::Tampered;
        self.first_failure = Some(Failure {
            check,
            location,
            detail,
        });
    }
}

/// Parses `0x` followed by 40 hex digits; `what` names the address in the error, a
/// [`UsageError::BadAddress`].
pub fn parse_addr(s: &str, what: &str) -> Result<[u8; 20], VerifyError> {
    decode_addr(s).map_err(|source| {
        UsageError::BadAddress {
            what: what.to_owned(),
            source,
        }
        .into()
    })
}

fn decode_addr(s: &str) -> Result<[u8; 20], hex::FromHexError> {
    let mut a = [0u8; 20];
    hex::decode_to_slice(s.trim_start_matches("0x"), &mut a)?;
    Ok(a)
}

/// Pins the recorder: evidence from a recorder no pinned party answers for is tampered (a
/// fresh recorder can anchor an invented history of its own, so who recorded is part of what
/// is verified); with no recorder pinned at all, the answer can be at best incomplete.
pub fn check_recorder(v: &mut Verdict, trust: &Trust) {
    let Some(r) = v.recorder else { return };
    if trust.parties.is_empty() {
        v.missing.push(format!(
            "no recorder is pinned: the file's recorder 0x{} is unknown to you, and any key can \
             anchor an invented history of its own (give --recorder or --trust)",
            hex::encode(r)
        ));
        return;
    }
    match trust.party_of(&r) {
        Some(p) => {
            v.party = Some(p.name.clone());
            bump(&mut v.checks, "recorder-id");
        }
        None => {
            let pinned: Vec<String> = trust
                .parties
                .iter()
                .flat_map(|p| p.recorders.iter().map(|r| format!("0x{}", hex::encode(r))))
                .collect();
            v.tamper(
                Location::File,
                Check::UnpinnedRecorder,
                format!(
                    "the file is from recorder 0x{}, not a pinned one ({})",
                    hex::encode(r),
                    pinned.join(", ")
                ),
            );
        }
    }
}

/// Compares the file's epoch roots with the proven anchored ones: a differing root is
/// tampering; roots not yet anchored are missing (the compromise window), and so is, for a
/// whole log, an anchored head beyond the log's last epoch (a stale export, or a truncated
/// one: either way the file does not show those epochs, and nothing in it was altered).
///
/// The only error is [`VerifyError::AnchorsRecorder`]: `a.recorder` is not an address (an
/// anchors file is read as it is; its recorder is parsed here).
pub fn check_anchors(v: &mut Verdict, a: &Anchors, whole_log: bool) -> Result<(), VerifyError> {
    if let Some(rec) = v.recorder
        && decode_addr(&a.recorder).map_err(|source| VerifyError::AnchorsRecorder { source })?
            != rec
    {
        v.missing.push(format!(
            "the anchors are for recorder {}, the file is from 0x{}: anchored roots not checked",
            a.recorder,
            hex::encode(rec)
        ));
        return Ok(());
    }
    let mut unanchored = Vec::new();
    for (e, root) in v.epoch_roots.clone() {
        match (a.root(e), a.roots.get(&e)) {
            (Some(r), Some(p)) if r == root => {
                bump(&mut v.checks, "anchored-root");
                v.anchors.push((e, p.tx.clone(), p.block, p.log_index));
            }
            (Some(r), _) => {
                v.tamper(
                    Location::Epoch(e),
                    Check::AnchoredRoot,
                    format!("file commits to root {root}, the recorder anchored {r}"),
                );
                return Ok(());
            }
            _ => unanchored.push(e),
        }
    }
    if !unanchored.is_empty() {
        v.missing.push(format!(
            "epochs {} are not anchored yet (inside the compromise window)",
            ranges(&unanchored)
        ));
    }
    if whole_log {
        let last = v.epoch_roots.last().map(|(e, _)| *e);
        if let Some(h) = a.head
            && last.is_none_or(|l| l < h)
        {
            v.missing.push(match last {
                Some(k) => format!(
                    "the log ends at epoch {k}; the chain holds anchored epochs up to at least {h} (a stale or truncated export: epochs {}..={h} are not in this file)",
                    k + 1
                ),
                None => format!(
                    "the log has no sealed epoch; the chain holds anchored epochs up to at least {h}"
                ),
            });
        }
    }
    Ok(())
}

/// `[0..=3, 7]` style list of sorted epochs.
fn ranges(epochs: &[u64]) -> String {
    format!("[{}]", afr_core::text::runs(epochs, "..="))
}

pub(crate) fn bump(checks: &mut Vec<(String, u64)>, name: &str) {
    match checks.iter_mut().find(|c| c.0 == name) {
        Some(c) => c.1 += 1,
        None => checks.push((name.to_owned(), 1)),
    }
}
