//! The verdict: a file's own checks combined with the anchored roots.
//!
//! The core crate checks a log or a bundle on its own and lists the epoch roots the file
//! commits to; this module compares those roots with the anchored ones and settles the one
//! outcome: tampered if any check failed, incomplete if something could not be checked (an
//! epoch not yet anchored, a withheld payload), verified otherwise.

use afr_core::{
    Hash32, RecorderId,
    bundle::BundleReport,
    verify::{Failure, Outcome, Report},
};
use anyhow::{Context, Result};

use crate::anchors::Anchors;

/// What the tool reports about one file.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The answer so far.
    pub outcome: Outcome,
    /// Recorder of the file, once read.
    pub recorder: Option<RecorderId>,
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
            checks: checks_vec(&rep.checks),
            first_failure: rep.first_failure.clone(),
            missing: rep.missing.clone(),
            notes: vec![format!(
                "{} events in {} sealed epochs",
                rep.events, rep.epochs
            )],
            epoch_roots: rep.epoch_roots.clone(),
            opened: Vec::new(),
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
            notes.push(match &p.execution {
                Some(e) => format!("event {seq} opened: {}: {}", p.intent.tool, e.command),
                None => format!("event {seq} opened: {}", p.intent.tool),
            });
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
        }
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

    fn tamper(
        &mut self,
        location: String,
        check: &'static str,
        detail: String,
        consistent_with: &'static str,
    ) {
        self.outcome = Outcome::Tampered;
        self.first_failure = Some(Failure {
            location,
            check,
            detail,
            consistent_with,
        });
    }
}

/// Parses `0x` followed by 40 hex digits.
pub fn parse_addr(s: &str, what: &str) -> Result<[u8; 20]> {
    let mut a = [0u8; 20];
    hex::decode_to_slice(s.trim_start_matches("0x"), &mut a)
        .with_context(|| format!("{what} must be 0x followed by 40 hex digits"))?;
    Ok(a)
}

/// Pins the recorder: evidence from any other recorder is tampered (a fresh recorder can
/// anchor an invented history of its own, so who recorded is part of what is verified).
pub fn check_recorder(v: &mut Verdict, expected: &RecorderId) {
    match v.recorder {
        Some(r) if r != *expected => v.tamper(
            "file".into(),
            "recorder-id",
            format!(
                "the file is from recorder 0x{}, not the expected 0x{}",
                hex::encode(r),
                hex::encode(expected)
            ),
            "evidence from another recorder",
        ),
        Some(_) => bump(&mut v.checks, "recorder-id"),
        None => {}
    }
}

/// Compares the file's epoch roots with the anchored ones: a differing root or, for a whole
/// log, an anchored head beyond the log's last epoch is tampering; roots not yet anchored are
/// missing (the compromise window).
pub fn check_anchors(v: &mut Verdict, a: &Anchors, whole_log: bool) -> Result<()> {
    if let Some(rec) = v.recorder
        && parse_addr(&a.recorder, "anchors file recorder")? != rec
    {
        let detail = format!(
            "anchors are for recorder {}, the file for 0x{}",
            a.recorder,
            hex::encode(rec)
        );
        v.tamper(
            "file".into(),
            "anchored-root",
            detail,
            "splice from another recorder",
        );
        return Ok(());
    }
    let mut unanchored = Vec::new();
    for (e, root) in v.epoch_roots.clone() {
        match a.root(e) {
            Some(r) if r == root => bump(&mut v.checks, "anchored-root"),
            Some(r) => {
                v.tamper(
                    format!("epoch {e}"),
                    "anchored-root",
                    format!("file commits to root {root}, the chain holds {r}"),
                    "edit, fork or equivocation after anchoring",
                );
                return Ok(());
            }
            None => unanchored.push(e),
        }
    }
    if !unanchored.is_empty() {
        v.missing.push(format!(
            "epochs {unanchored:?} are not anchored yet (inside the compromise window)"
        ));
    }
    if whole_log {
        let last = v.epoch_roots.last().map(|(e, _)| *e);
        if let Some(h) = a.head
            && last.is_none_or(|l| l < h)
        {
            let detail = format!("the chain holds epochs up to {h}, the log ends at {last:?}");
            v.tamper(
                "file".into(),
                "anchored-head",
                detail,
                "truncated tail or dropped epochs",
            );
        }
    }
    Ok(())
}

fn bump(checks: &mut Vec<(String, u64)>, name: &str) {
    match checks.iter_mut().find(|c| c.0 == name) {
        Some(c) => c.1 += 1,
        None => checks.push((name.to_owned(), 1)),
    }
}
