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
    EpochHeader, Hash32, Record, RecorderId,
    cbor::CborError,
    crypto::EncryptedPayload,
    export::{Frame, Frames, LogReader, StreamLog},
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

/// A check the verifiers run, named by what its failure means. Several variants share the
/// public name printed as `check` (one check can fail in ways that point at different
/// attacks); each knows the attack its failure is consistent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Check {
    /// `encoding`: consistent with edit or truncation of the file.
    Encoding,
    /// `event-count`: consistent with deletion or truncation.
    EventFrameMissing,
    /// `recorder-id`: consistent with splice from another recorder.
    ForeignRecorder,
    /// `chain-link`: consistent with edit, deletion, insertion or reordering.
    ChainLink,
    /// `payload-commitment`: consistent with payload edit or swapped ciphertext.
    PayloadCommitment,
    /// `start-frame`: consistent with not an AFR log export.
    NoStartFrame,
    /// `back-pointer`: consistent with dropped epoch or fork.
    BackPointer,
    /// `event-count`: consistent with edit of the header.
    HeaderCount,
    /// `merkle-root`: consistent with edit, deletion, insertion or reordering inside the epoch.
    MerkleRoot,
    /// `chain-head`: consistent with truncation of the epoch.
    ChainHead,
    /// `event-count`: consistent with edit of the file.
    TailCount,
    /// `totals`: consistent with deletion or truncation.
    Totals,
    /// `end-frame`: consistent with insertion.
    TrailingBytes,
    /// `event-count`: consistent with insertion.
    EventOutsideEpoch,
    /// `start-frame`: consistent with splice of two logs.
    SecondStartFrame,
    /// `end-frame`: consistent with truncation.
    NoEndFrame,
    /// `epoch-sequence`: consistent with dropped or reordered epoch.
    BundleEpochSequence,
    /// `epoch-range`: consistent with edit of the header.
    EpochRangeOverflow,
    /// `epoch-range`: consistent with deletion or insertion across epochs.
    EpochRange,
    /// `inclusion-proof`: consistent with edit of the proof.
    ProofTooLong,
    /// `sequence`: consistent with reordering or replay.
    BundleSequence,
    /// `epoch-membership`: consistent with splice or unsealed event.
    NoHeaderForEpoch,
    /// `epoch-membership`: consistent with splice from another epoch.
    EpochMembership,
    /// `inclusion-proof`: consistent with edit, insertion or splice.
    InclusionProof,
    /// `payload-key`: consistent with swapped keys or ciphertexts.
    PayloadKey,
    /// `payload-encoding`: consistent with forged payload.
    PayloadEncoding,
    /// `payload-commitment`: consistent with edit of the bundle.
    KeyWithoutPayload,
    /// `totals`: consistent with deletion or insertion.
    BundleTotals,
    /// `recorder-id`: consistent with evidence from another recorder.
    UnpinnedRecorder,
    /// `anchored-root`: consistent with edit, fork or equivocation after anchoring.
    AnchoredRoot,
    /// `checkpoint`: a signed checkpoint (docs/spec/roots.md) whose tree is not the file's
    /// epochs, or two that are not consistent: consistent with edit, fork or equivocation
    /// after witnessing.
    Checkpoint,
    /// `cosignature`: a pinned witness's cosignature that does not verify.
    Cosignature,
    /// `timestamp`: a pinned TSA's token that does not verify over its checkpoint.
    Timestamp,
    /// `sequence`: consistent with deletion.
    SequenceSkipped,
    /// `sequence`: consistent with reordering, insertion or replay.
    SequenceRepeated,
    /// `epoch-sequence`: consistent with dropped epoch.
    EpochSkipped,
    /// `epoch-sequence`: consistent with reordered or replayed epoch.
    EpochRepeated,
    /// `approval-digest`: consistent with arguments or command changed after signing.
    ApprovalDigest,
    /// `approval-statement`: consistent with an approval taken from another action.
    ApprovalStatement,
    /// `approval-signature`: consistent with a forged or altered approval signature.
    ApprovalSignature,
    /// `approval-signer`: consistent with an approval signed by a key not on the allowlist.
    ApprovalSigner,
    /// `approval-window`: consistent with an expired or post-dated approval.
    ApprovalWindow,
    /// `approval-nonce`: consistent with an approval replayed on another event.
    ApprovalNonce,
    /// `delegation-link`: consistent with a rewritten or invented delegation.
    DelegationLink,
    /// `delegation-time`: consistent with a back- or post-dated delegation.
    DelegationTime,
    /// `fork`: consistent with two histories from one recorder.
    Fork,
}

impl Check {
    /// The check's public name (`chain-link`, `merkle-root`, ...), as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Check::Encoding => "encoding",
            Check::EventFrameMissing => "event-count",
            Check::ForeignRecorder => "recorder-id",
            Check::ChainLink => "chain-link",
            Check::PayloadCommitment => "payload-commitment",
            Check::NoStartFrame => "start-frame",
            Check::BackPointer => "back-pointer",
            Check::HeaderCount => "event-count",
            Check::MerkleRoot => "merkle-root",
            Check::ChainHead => "chain-head",
            Check::TailCount => "event-count",
            Check::Totals => "totals",
            Check::TrailingBytes => "end-frame",
            Check::EventOutsideEpoch => "event-count",
            Check::SecondStartFrame => "start-frame",
            Check::NoEndFrame => "end-frame",
            Check::BundleEpochSequence => "epoch-sequence",
            Check::EpochRangeOverflow => "epoch-range",
            Check::EpochRange => "epoch-range",
            Check::ProofTooLong => "inclusion-proof",
            Check::BundleSequence => "sequence",
            Check::NoHeaderForEpoch => "epoch-membership",
            Check::EpochMembership => "epoch-membership",
            Check::InclusionProof => "inclusion-proof",
            Check::PayloadKey => "payload-key",
            Check::PayloadEncoding => "payload-encoding",
            Check::KeyWithoutPayload => "payload-commitment",
            Check::BundleTotals => "totals",
            Check::UnpinnedRecorder => "recorder-id",
            Check::AnchoredRoot => "anchored-root",
            Check::Checkpoint => "checkpoint",
            Check::Cosignature => "cosignature",
            Check::Timestamp => "timestamp",
            Check::SequenceSkipped => "sequence",
            Check::SequenceRepeated => "sequence",
            Check::EpochSkipped => "epoch-sequence",
            Check::EpochRepeated => "epoch-sequence",
            Check::ApprovalDigest => "approval-digest",
            Check::ApprovalStatement => "approval-statement",
            Check::ApprovalSignature => "approval-signature",
            Check::ApprovalSigner => "approval-signer",
            Check::ApprovalWindow => "approval-window",
            Check::ApprovalNonce => "approval-nonce",
            Check::DelegationLink => "delegation-link",
            Check::DelegationTime => "delegation-time",
            Check::Fork => "fork",
        }
    }

    /// The attack a failure of this check is consistent with, in plain words.
    pub fn consistent_with(self) -> &'static str {
        match self {
            Check::Encoding => "edit or truncation of the file",
            Check::EventFrameMissing => "deletion or truncation",
            Check::ForeignRecorder => "splice from another recorder",
            Check::ChainLink => "edit, deletion, insertion or reordering",
            Check::PayloadCommitment => "payload edit or swapped ciphertext",
            Check::NoStartFrame => "not an AFR log export",
            Check::BackPointer => "dropped epoch or fork",
            Check::HeaderCount => "edit of the header",
            Check::MerkleRoot => "edit, deletion, insertion or reordering inside the epoch",
            Check::ChainHead => "truncation of the epoch",
            Check::TailCount => "edit of the file",
            Check::Totals => "deletion or truncation",
            Check::TrailingBytes => "insertion",
            Check::EventOutsideEpoch => "insertion",
            Check::SecondStartFrame => "splice of two logs",
            Check::NoEndFrame => "truncation",
            Check::BundleEpochSequence => "dropped or reordered epoch",
            Check::EpochRangeOverflow => "edit of the header",
            Check::EpochRange => "deletion or insertion across epochs",
            Check::ProofTooLong => "edit of the proof",
            Check::BundleSequence => "reordering or replay",
            Check::NoHeaderForEpoch => "splice or unsealed event",
            Check::EpochMembership => "splice from another epoch",
            Check::InclusionProof => "edit, insertion or splice",
            Check::PayloadKey => "swapped keys or ciphertexts",
            Check::PayloadEncoding => "forged payload",
            Check::KeyWithoutPayload => "edit of the bundle",
            Check::BundleTotals => "deletion or insertion",
            Check::UnpinnedRecorder => "evidence from another recorder",
            Check::AnchoredRoot => "edit, fork or equivocation after anchoring",
            Check::Checkpoint => "edit, fork or equivocation after witnessing",
            Check::Cosignature => "a forged or altered witness cosignature",
            Check::Timestamp => "a forged timestamp or one over another checkpoint",
            Check::SequenceSkipped => "deletion",
            Check::SequenceRepeated => "reordering, insertion or replay",
            Check::EpochSkipped => "dropped epoch",
            Check::EpochRepeated => "reordered or replayed epoch",
            Check::ApprovalDigest => "arguments or command changed after signing",
            Check::ApprovalStatement => "an approval taken from another action",
            Check::ApprovalSignature => "a forged or altered approval signature",
            Check::ApprovalSigner => "an approval signed by a key not on the allowlist",
            Check::ApprovalWindow => "an expired or post-dated approval",
            Check::ApprovalNonce => "an approval replayed on another event",
            Check::DelegationLink => "a rewritten or invented delegation",
            Check::DelegationTime => "a back- or post-dated delegation",
            Check::Fork => "two histories from one recorder",
        }
    }
}

impl serde::Serialize for Check {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// The file as a whole (its frames, its totals).
    File,
    /// A byte offset in the file (a frame that does not decode).
    Offset(u64),
    /// An event, by sequence number.
    Event(u64),
    /// An epoch, by number.
    Epoch(u64),
    /// What follows the last sealed epoch.
    Tail,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::File => f.write_str("file"),
            Location::Offset(o) => write!(f, "file offset {o}"),
            Location::Event(s) => write!(f, "event {s}"),
            Location::Epoch(e) => write!(f, "epoch {e}"),
            Location::Tail => f.write_str("tail"),
        }
    }
}

/// The first failing check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Which check.
    pub check: Check,
    /// Where.
    pub location: Location,
    /// What differed.
    pub detail: String,
}

impl Failure {
    /// The attack this failure is consistent with ([`Check::consistent_with`]).
    pub fn consistent_with(&self) -> &'static str {
        self.check.consistent_with()
    }

    /// `{location, check, detail, consistent_with}`, as the verifiers print it with `--json`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "location": self.location.to_string(),
            "check": self.check.name(),
            "detail": self.detail,
            "consistent_with": self.consistent_with(),
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

fn fail(location: Location, check: Check, detail: String) -> Fail {
    Fail(Failure {
        check,
        location,
        detail,
    })
}

fn malformed(at: usize, e: CborError) -> Fail {
    fail(Location::Offset(at as u64), Check::Encoding, e.to_string())
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
    verify_frames(&mut LogReader::new(bytes), bytes.len() as u64, layers)
}

struct Chain {
    merkle: bool,
    recorder: RecorderId,
    next_seq: u64,
    prev_leaf: Hash32,
    withheld: u64,
}

impl Chain {
    /// Checks one event at position `seq` of epoch `epoch`; returns its leaf hash.
    fn event(&mut self, item: Option<Item>, epoch: u64, rep: &mut Report) -> Result<Hash32, Fail> {
        let seq = self.next_seq;
        let at = || Location::Event(seq);
        let Some(Item::Event {
            record,
            leaf,
            commitment,
        }) = item
        else {
            return Err(fail(
                at(),
                Check::EventFrameMissing,
                "event frame missing".into(),
            ));
        };
        if record.recorder != self.recorder {
            return Err(fail(
                at(),
                Check::ForeignRecorder,
                "record names another recorder".into(),
            ));
        }
        if self.merkle && record.seq != seq {
            let check = if record.seq > seq {
                Check::SequenceSkipped
            } else {
                Check::SequenceRepeated
            };
            return Err(fail(
                at(),
                check,
                format!("found sequence number {}", record.seq),
            ));
        }
        if self.merkle && record.epoch != epoch {
            return Err(fail(
                at(),
                Check::EpochMembership,
                format!("record says epoch {}", record.epoch),
            ));
        }
        if record.prev_hash != self.prev_leaf {
            return Err(fail(
                at(),
                Check::ChainLink,
                "prev_hash is not the previous record's hash".into(),
            ));
        }
        *rep.checks.entry("chain-link").or_default() += 1;
        match commitment {
            Some(c) => {
                if c != record.payload_commitment {
                    return Err(fail(
                        at(),
                        Check::PayloadCommitment,
                        "sealed payload does not match the record".into(),
                    ));
                }
                *rep.checks.entry("payload-commitment").or_default() += 1;
            }
            None => self.withheld += 1,
        }
        self.prev_leaf = leaf;
        self.next_seq += 1;
        rep.events += 1;
        Ok(leaf)
    }
}

/// A frame as the checks take it: an event comes with its leaf hash and its payload's
/// commitment, computed where the frame was read (inline, or on another core).
enum Item {
    Start(RecorderId),
    Epoch(EpochHeader),
    Tail(u64),
    Event {
        record: Record,
        leaf: Hash32,
        /// `None`: the payload is withheld.
        commitment: Option<Hash32>,
    },
    End {
        events: u64,
        epochs: u64,
        /// Bytes follow the end frame.
        trailing: bool,
    },
}

/// An item whose hashes are still to compute (the reading stage's output).
enum Pending {
    Ready(Item),
    Event {
        record_bytes: Vec<u8>,
        record: Record,
        payload: Option<EncryptedPayload>,
    },
}

impl Pending {
    /// The hashing stage: leaf hash of the record, commitment of the sealed payload.
    fn digest(self) -> Item {
        match self {
            Pending::Ready(i) => i,
            Pending::Event {
                record_bytes,
                record,
                payload,
            } => Item::Event {
                leaf: leaf_hash(&record_bytes),
                commitment: payload.map(|p| p.commitment()),
                record,
            },
        }
    }
}

/// The reading stage: the next frame of `rd`, parsed; `Encoding` at its offset if it is not
/// a frame.
fn read_pending<F: Frames>(rd: &mut F) -> Result<Option<Pending>, Fail> {
    let at = rd.offset();
    let frame = rd.next_frame().map_err(|e| malformed(at as usize, e))?;
    let item = match frame {
        None => return Ok(None),
        Some(Frame::Event {
            record_bytes,
            record,
            payload,
        }) => {
            return Ok(Some(Pending::Event {
                record_bytes: record_bytes.to_vec(),
                record,
                payload,
            }));
        }
        Some(Frame::Start { recorder, .. }) => Item::Start(recorder),
        Some(Frame::Epoch(h)) => Item::Epoch(h),
        Some(Frame::Tail(n)) => Item::Tail(n),
        Some(Frame::End { events, epochs }) => Item::End {
            events,
            epochs,
            trailing: !rd.at_end(),
        },
    };
    Ok(Some(Pending::Ready(item)))
}

/// Where the checks take their items from.
trait Items {
    fn next_item(&mut self) -> Result<Option<Item>, Fail>;
}

/// Frames read and hashed on the calling thread.
struct Inline<'f, F>(&'f mut F);

impl<F: Frames> Items for Inline<'_, F> {
    fn next_item(&mut self) -> Result<Option<Item>, Fail> {
        Ok(read_pending(self.0)?.map(Pending::digest))
    }
}

/// Items from the pipeline's hashing stage, in file order.
struct Piped {
    rx: std::sync::mpsc::Receiver<Vec<Result<Item, Fail>>>,
    batch: std::vec::IntoIter<Result<Item, Fail>>,
}

impl Items for Piped {
    fn next_item(&mut self) -> Result<Option<Item>, Fail> {
        loop {
            if let Some(x) = self.batch.next() {
                return x.map(Some);
            }
            match self.rx.recv() {
                Ok(b) => self.batch = b.into_iter(),
                Err(_) => return Ok(None),
            }
        }
    }
}

/// Frames per batch passed between the pipeline's stages, and bytes per batch: with two
/// batches queued at each stage, the pipeline holds a few MiB whatever the log's size.
const BATCH_FRAMES: usize = 2048;
const BATCH_BYTES: usize = 1 << 20;

/// [`verify_log`] of a stream (a file) of `len` bytes, reading one frame at a time: memory
/// stays bounded by one epoch's state and a few batches, whatever the size of the log. An I/O
/// error is returned as such (nothing was decided), never as tampering.
///
/// It runs as a pipeline over three threads: reading and parsing frames, hashing them (each
/// record's leaf hash, each payload's commitment: most of the work), and the checks with the
/// Merkle tree of each epoch on the calling thread. The decision is the one [`verify_log`]
/// takes on the same bytes: items reach the checks in file order, and the first failure ends
/// every stage.
pub fn verify_log_stream<R: std::io::Read + Send>(src: R, len: u64) -> std::io::Result<Report> {
    use std::sync::mpsc::sync_channel;
    std::thread::scope(|sc| {
        let (raw_tx, raw_rx) = sync_channel::<Vec<Result<Pending, Fail>>>(2);
        let (item_tx, item_rx) = sync_channel::<Vec<Result<Item, Fail>>>(2);
        let reader = sc.spawn(move || {
            let mut rd = StreamLog::new(src);
            let (mut batch, mut bytes) = (Vec::new(), 0usize);
            loop {
                let next = read_pending(&mut rd).transpose();
                let last = !matches!(next, Some(Ok(_)));
                if let Some(Ok(Pending::Event {
                    record_bytes,
                    payload,
                    ..
                })) = &next
                {
                    bytes +=
                        record_bytes.len() + payload.as_ref().map_or(0, |p| p.ciphertext.len());
                }
                batch.extend(next);
                if last || batch.len() >= BATCH_FRAMES || bytes >= BATCH_BYTES {
                    if raw_tx.send(std::mem::take(&mut batch)).is_err() {
                        break;
                    }
                    bytes = 0;
                }
                if last {
                    break;
                }
            }
            rd.io_error
        });
        let hasher = sc.spawn(move || {
            for batch in raw_rx {
                let items = batch.into_iter().map(|p| p.map(Pending::digest)).collect();
                if item_tx.send(items).is_err() {
                    break;
                }
            }
        });
        let mut items = Piped {
            rx: item_rx,
            batch: Vec::new().into_iter(),
        };
        let rep = verify_items(&mut items, len, Layers::ALL);
        // Stops the other stages if the checks ended early.
        drop(items);
        let _ = hasher.join();
        match reader.join() {
            Ok(Some(e)) => Err(e),
            Ok(None) => Ok(rep),
            Err(_) => Err(std::io::Error::other("the log reading thread panicked")),
        }
    })
}

/// [`verify_log_layers`] over any source of frames of a file of `len` bytes.
pub fn verify_frames<F: Frames>(rd: &mut F, len: u64, layers: Layers) -> Report {
    verify_items(&mut Inline(rd), len, layers)
}

fn verify_items(rd: &mut impl Items, len: u64, layers: Layers) -> Report {
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
    match run(rd, len, &mut rep, layers) {
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

fn run(rd: &mut impl Items, len: u64, rep: &mut Report, layers: Layers) -> Result<(), Fail> {
    let m = layers.merkle;
    let recorder = match rd.next_item()? {
        Some(Item::Start(recorder)) => recorder,
        _ => {
            return Err(fail(
                Location::File,
                Check::NoStartFrame,
                "no start frame".into(),
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
        match rd.next_item()? {
            Some(Item::Epoch(h)) => {
                let at = Location::Epoch(h.epoch);
                if m && h.recorder != recorder {
                    return Err(fail(
                        at,
                        Check::ForeignRecorder,
                        "header names another recorder".into(),
                    ));
                }
                if m && h.epoch != epoch_no {
                    let check = if h.epoch > epoch_no {
                        Check::EpochSkipped
                    } else {
                        Check::EpochRepeated
                    };
                    return Err(fail(at, check, format!("expected epoch {epoch_no}")));
                }
                if m && h.first_seq != chain.next_seq {
                    return Err(fail(
                        at,
                        Check::EpochRange,
                        format!(
                            "first_seq {} but next event is {}",
                            h.first_seq, chain.next_seq
                        ),
                    ));
                }
                if m && h.prev_epoch_root != prev_root {
                    return Err(fail(
                        at,
                        Check::BackPointer,
                        "prev_epoch_root is not the previous epoch's root".into(),
                    ));
                }
                if m {
                    *rep.checks.entry("back-pointer").or_default() += 1;
                }
                if h.count > len / 40 {
                    return Err(fail(
                        at,
                        Check::HeaderCount,
                        format!("{} events cannot fit in the file", h.count),
                    ));
                }
                let mut tree = CompactRange::new();
                for _ in 0..h.count {
                    let item = rd.next_item()?;
                    tree.push(chain.event(item, h.epoch, rep)?);
                }
                if m && tree.root() != h.merkle_root {
                    return Err(fail(
                        at,
                        Check::MerkleRoot,
                        "recomputed Merkle root differs".into(),
                    ));
                }
                if m {
                    *rep.checks.entry("merkle-root").or_default() += 1;
                }
                if m && h.chain_head != chain.prev_leaf {
                    return Err(fail(
                        at,
                        Check::ChainHead,
                        "chain head is not the last record's hash".into(),
                    ));
                }
                prev_root = h.root();
                rep.epoch_roots.push((h.epoch, prev_root));
                rep.epochs += 1;
                epoch_no += 1;
            }
            Some(Item::Tail(n)) => {
                if n > len / 40 {
                    return Err(fail(
                        Location::Tail,
                        Check::TailCount,
                        format!("{n} events cannot fit in the file"),
                    ));
                }
                for _ in 0..n {
                    let item = rd.next_item()?;
                    chain.event(item, epoch_no, rep)?;
                }
                if n > 0 {
                    rep.missing.push(format!(
                        "{n} events (seq {}..{}) are not yet sealed into an epoch",
                        chain.next_seq - n,
                        chain.next_seq - 1
                    ));
                }
            }
            Some(Item::End {
                events,
                epochs,
                trailing,
            }) => {
                if m && (events != rep.events || epochs != rep.epochs) {
                    return Err(fail(
                        Location::File,
                        Check::Totals,
                        format!(
                            "end frame says {events} events in {epochs} epochs, file holds {} in {}",
                            rep.events, rep.epochs
                        ),
                    ));
                }
                if trailing {
                    return Err(fail(
                        Location::File,
                        Check::TrailingBytes,
                        "bytes after the end frame".into(),
                    ));
                }
                if chain.withheld > 0 {
                    rep.missing
                        .push(format!("{} payloads withheld", chain.withheld));
                }
                return Ok(());
            }
            Some(Item::Event { record, .. }) => {
                return Err(fail(
                    Location::Event(record.seq),
                    Check::EventOutsideEpoch,
                    "event outside any epoch".into(),
                ));
            }
            Some(Item::Start(_)) => {
                return Err(fail(
                    Location::File,
                    Check::SecondStartFrame,
                    "second start frame".into(),
                ));
            }
            None => {
                return Err(fail(
                    Location::File,
                    Check::NoEndFrame,
                    "file ends without an end frame".into(),
                ));
            }
        }
    }
}
