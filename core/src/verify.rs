//! Integrity verification of a whole-log export, needing no key and no operator service.
//!
//! The verifier streams the file once: every record is decoded strictly, its leaf hash
//! recomputed from the bytes in the file, its link to the predecessor checked, its payload
//! commitment recomputed from the stored sealed payload; every epoch's Merkle root, chain head,
//! sequence range and previous-root link are recomputed and compared with its header; the end
//! frame's totals must match. The result is one [`Outcome`] and, when not verified, the first
//! failing check with the attack it is consistent with.
//!
//! Matching epoch roots against anchored ones is the caller's step: [`Report::epoch_roots`]
//! lists every root this file commits to.

use std::collections::BTreeMap;

use crate::{
    Hash32, RecorderId,
    cbor::CborError,
    export::{Frame, LogReader},
    hash::leaf_hash,
    merkle::CompactRange,
};

/// The verifier's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every check passed and nothing is missing.
    Verified,
    /// A check failed: the file is not what the recorder wrote.
    Tampered,
    /// Every check that could run passed, but something is missing (unsealed tail, withheld
    /// payloads, unanchored epochs).
    Incomplete,
}

impl Outcome {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Verified => "verified",
            Outcome::Tampered => "tampered",
            Outcome::Incomplete => "incomplete",
        }
    }
}

/// The first failing check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Where: `event 17`, `epoch 3`, `file`.
    pub location: String,
    /// Which check.
    pub check: &'static str,
    /// What differed.
    pub detail: String,
    /// The attack this failure is consistent with.
    pub consistent_with: &'static str,
}

impl Failure {
    /// `{location, check, detail, consistent_with}`, as the verifiers print it with `--json`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "location": self.location,
            "check": self.check,
            "detail": self.detail,
            "consistent_with": self.consistent_with,
        })
    }
}

/// `[{epoch, root: "0x…"}]`, as the verifiers print epoch roots with `--json`.
pub fn epoch_roots_json(roots: &[(u64, Hash32)]) -> serde_json::Value {
    roots
        .iter()
        .map(|(e, r)| serde_json::json!({ "epoch": e, "root": format!("0x{r}") }))
        .collect()
}

/// What verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The answer.
    pub outcome: Outcome,
    /// Recorder of the log, once read.
    pub recorder: Option<RecorderId>,
    /// Events read.
    pub events: u64,
    /// Sealed epochs read.
    pub epochs: u64,
    /// How many times each check passed.
    pub checks: BTreeMap<&'static str, u64>,
    /// The first failure, if tampered.
    pub first_failure: Option<Failure>,
    /// What is missing, if incomplete.
    pub missing: Vec<String>,
    /// `(epoch, root)` of every sealed epoch in the file.
    pub epoch_roots: Vec<(u64, Hash32)>,
}

struct Fail(Failure);

fn fail(
    location: String,
    check: &'static str,
    detail: String,
    consistent_with: &'static str,
) -> Fail {
    Fail(Failure {
        location,
        check,
        detail,
        consistent_with,
    })
}

fn malformed(at: usize, e: CborError) -> Fail {
    fail(
        format!("file offset {at}"),
        "encoding",
        e.to_string(),
        "edit or truncation of the file",
    )
}

/// Which integrity layers a verification uses, to show what each adds (the tamper matrix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layers {
    /// Epoch structure: Merkle roots, headers, back-pointers, sequence numbers, totals. Without
    /// it only the hash-chain links and payload commitments are checked, as a plain hash-chained
    /// log would.
    pub merkle: bool,
}

impl Layers {
    /// Every layer this crate checks (anchoring is the caller's).
    pub const ALL: Layers = Layers { merkle: true };
    /// The hash chain alone.
    pub const CHAIN_ONLY: Layers = Layers { merkle: false };
}

/// Verifies the integrity of an exported log.
pub fn verify_log(bytes: &[u8]) -> Report {
    verify_log_layers(bytes, Layers::ALL)
}

/// Verifies an exported log with only some integrity layers (see [`Layers`]).
pub fn verify_log_layers(bytes: &[u8], layers: Layers) -> Report {
    let mut rep = Report {
        outcome: Outcome::Verified,
        recorder: None,
        events: 0,
        epochs: 0,
        checks: BTreeMap::new(),
        first_failure: None,
        missing: Vec::new(),
        epoch_roots: Vec::new(),
    };
    match run(bytes, &mut rep, layers) {
        Ok(()) => {
            if !rep.missing.is_empty() {
                rep.outcome = Outcome::Incomplete;
            }
        }
        Err(Fail(f)) => {
            rep.outcome = Outcome::Tampered;
            rep.first_failure = Some(f);
        }
    }
    rep
}

struct Chain {
    merkle: bool,
    recorder: RecorderId,
    next_seq: u64,
    prev_leaf: Hash32,
    withheld: u64,
}

impl Chain {
    /// Checks one event frame at position `seq` of epoch `epoch`; returns its leaf hash.
    fn event(
        &mut self,
        frame: Option<Frame<'_>>,
        epoch: u64,
        rep: &mut Report,
    ) -> Result<Hash32, Fail> {
        let seq = self.next_seq;
        let at = || format!("event {seq}");
        let Some(Frame::Event {
            record_bytes,
            record,
            payload,
        }) = frame
        else {
            return Err(fail(
                at(),
                "event-count",
                "event frame missing".into(),
                "deletion or truncation",
            ));
        };
        if record.recorder != self.recorder {
            return Err(fail(
                at(),
                "recorder-id",
                "record names another recorder".into(),
                "splice from another recorder",
            ));
        }
        if self.merkle && record.seq != seq {
            return Err(fail(
                at(),
                "sequence",
                format!("found sequence number {}", record.seq),
                if record.seq > seq {
                    "deletion"
                } else {
                    "reordering, insertion or replay"
                },
            ));
        }
        if self.merkle && record.epoch != epoch {
            return Err(fail(
                at(),
                "epoch-membership",
                format!("record says epoch {}", record.epoch),
                "splice from another epoch",
            ));
        }
        if record.prev_hash != self.prev_leaf {
            return Err(fail(
                at(),
                "chain-link",
                "prev_hash is not the previous record's hash".into(),
                "edit, deletion, insertion or reordering",
            ));
        }
        *rep.checks.entry("chain-link").or_default() += 1;
        match payload {
            Some(p) => {
                if p.commitment() != record.payload_commitment {
                    return Err(fail(
                        at(),
                        "payload-commitment",
                        "sealed payload does not match the record".into(),
                        "payload edit or swapped ciphertext",
                    ));
                }
                *rep.checks.entry("payload-commitment").or_default() += 1;
            }
            None => self.withheld += 1,
        }
        let leaf = leaf_hash(record_bytes);
        self.prev_leaf = leaf;
        self.next_seq += 1;
        rep.events += 1;
        Ok(leaf)
    }
}

fn next<'a>(rd: &mut LogReader<'a>) -> Result<Option<Frame<'a>>, Fail> {
    let at = rd.offset();
    rd.next_frame().map_err(|e| malformed(at, e))
}

fn run(bytes: &[u8], rep: &mut Report, layers: Layers) -> Result<(), Fail> {
    let m = layers.merkle;
    let mut rd = LogReader::new(bytes);
    let recorder = match next(&mut rd)? {
        Some(Frame::Start { recorder, .. }) => recorder,
        _ => {
            return Err(fail(
                "file".into(),
                "start-frame",
                "no start frame".into(),
                "not an AFR log export",
            ));
        }
    };
    rep.recorder = Some(recorder);
    let mut chain = Chain {
        merkle: m,
        recorder,
        next_seq: 0,
        prev_leaf: Hash32::ZERO,
        withheld: 0,
    };
    let mut prev_root = Hash32::ZERO;
    let mut epoch_no = 0u64;
    loop {
        match next(&mut rd)? {
            Some(Frame::Epoch(h)) => {
                let at = format!("epoch {}", h.epoch);
                if m && h.recorder != recorder {
                    return Err(fail(
                        at,
                        "recorder-id",
                        "header names another recorder".into(),
                        "splice from another recorder",
                    ));
                }
                if m && h.epoch != epoch_no {
                    return Err(fail(
                        at,
                        "epoch-sequence",
                        format!("expected epoch {epoch_no}"),
                        if h.epoch > epoch_no {
                            "dropped epoch"
                        } else {
                            "reordered or replayed epoch"
                        },
                    ));
                }
                if m && h.first_seq != chain.next_seq {
                    return Err(fail(
                        at,
                        "epoch-range",
                        format!(
                            "first_seq {} but next event is {}",
                            h.first_seq, chain.next_seq
                        ),
                        "deletion or insertion across epochs",
                    ));
                }
                if m && h.prev_epoch_root != prev_root {
                    return Err(fail(
                        at,
                        "back-pointer",
                        "prev_epoch_root is not the previous epoch's root".into(),
                        "dropped epoch or fork",
                    ));
                }
                if m {
                    *rep.checks.entry("back-pointer").or_default() += 1;
                }
                if h.count > (bytes.len() as u64) / 40 {
                    return Err(fail(
                        at,
                        "event-count",
                        format!("{} events cannot fit in the file", h.count),
                        "edit of the header",
                    ));
                }
                let mut tree = CompactRange::new();
                for _ in 0..h.count {
                    let f = next(&mut rd)?;
                    tree.push(chain.event(f, h.epoch, rep)?);
                }
                if m && tree.root() != h.merkle_root {
                    return Err(fail(
                        at,
                        "merkle-root",
                        "recomputed Merkle root differs".into(),
                        "edit, deletion, insertion or reordering inside the epoch",
                    ));
                }
                if m {
                    *rep.checks.entry("merkle-root").or_default() += 1;
                }
                if m && h.chain_head != chain.prev_leaf {
                    return Err(fail(
                        at,
                        "chain-head",
                        "chain head is not the last record's hash".into(),
                        "truncation of the epoch",
                    ));
                }
                prev_root = h.root();
                rep.epoch_roots.push((h.epoch, prev_root));
                rep.epochs += 1;
                epoch_no += 1;
            }
            Some(Frame::Tail(n)) => {
                if n > (bytes.len() as u64) / 40 {
                    return Err(fail(
                        "tail".into(),
                        "event-count",
                        format!("{n} events cannot fit in the file"),
                        "edit of the file",
                    ));
                }
                for _ in 0..n {
                    let f = next(&mut rd)?;
                    chain.event(f, epoch_no, rep)?;
                }
                if n > 0 {
                    rep.missing.push(format!(
                        "{n} events (seq {}..{}) are not yet sealed into an epoch",
                        chain.next_seq - n,
                        chain.next_seq - 1
                    ));
                }
            }
            Some(Frame::End { events, epochs }) => {
                if m && (events != rep.events || epochs != rep.epochs) {
                    return Err(fail(
                        "file".into(),
                        "totals",
                        format!(
                            "end frame says {events} events in {epochs} epochs, file holds {} in {}",
                            rep.events, rep.epochs
                        ),
                        "deletion or truncation",
                    ));
                }
                if !rd.at_end() {
                    return Err(fail(
                        "file".into(),
                        "end-frame",
                        "bytes after the end frame".into(),
                        "insertion",
                    ));
                }
                if chain.withheld > 0 {
                    rep.missing
                        .push(format!("{} payloads withheld", chain.withheld));
                }
                return Ok(());
            }
            Some(Frame::Event { record, .. }) => {
                return Err(fail(
                    format!("event {}", record.seq),
                    "event-count",
                    "event outside any epoch".into(),
                    "insertion",
                ));
            }
            Some(Frame::Start { .. }) => {
                return Err(fail(
                    "file".into(),
                    "start-frame",
                    "second start frame".into(),
                    "splice of two logs",
                ));
            }
            None => {
                return Err(fail(
                    "file".into(),
                    "end-frame",
                    "file ends without an end frame".into(),
                    "truncation",
                ));
            }
        }
    }
}
