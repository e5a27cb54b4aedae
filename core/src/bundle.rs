//! Disclosure bundles: the events under investigation, with what a third party needs to check
//! them alone, and nothing else.
//!
//! A bundle is a CBOR sequence (RFC 8742) of canonical frames:
//!
//! ```text
//! ["afr-bundle", 2, recorder: bstr(20)]                                  start
//! ["anchor-proofs", archive: bstr]         0 or 1, right after the start frame (v4)
//! ["header", header]                       × every epoch 0 ..= the last disclosed epoch
//! ["erased", [* epoch]]                    epochs claimed crypto-erased, strictly ascending
//! ["checkpoint", note: tstr, [* bstr(32)], [* [tsa: tstr, token: bstr]]]   × 0 or more (v3)
//! ["event", record, [* bstr(32)], sealed_payload / null, event_key: bstr(64) / null]  × events
//! ["end", headers: uint, events: uint]
//! ```
//!
//! Every byte is checked or absent: headers by their back-pointer chain (and, by the caller,
//! their roots against the anchored ones), events by their inclusion proofs, payloads by their
//! commitments and keys by opening them, totals by counting. Version 1 also carried a creation
//! time and "anchor" frames naming transactions; nothing checked them, so a mutated bundle
//! could still verify, and version 2 dropped both: where a root was anchored is read from the
//! chain by the verifier, not from the file. Version 4's `anchor-proofs` frame is not such a
//! claim: it holds a proof archive (`docs/spec/anchor-proofs.md`: block headers and the
//! Merkle-Patricia proofs of the anchoring transactions), which the verifier re-proves
//! offline, byte by byte, when no chain is read; this crate only carries its bytes.
//!
//! Every header from epoch 0 is included so the back-pointer chain can be checked from the
//! first epoch to the last disclosed one; headers are 165 bytes of public metadata. An event
//! carries its record, its audit path inside its epoch, and, when disclosed with keys, its
//! sealed payload and its 64-byte event key, which opens that event and no other.
//!
//! # Erasure claims
//!
//! An epoch in the `erased` frame explains why its events come without keys, but a claim alone
//! proves nothing (anyone can write the frame). A claim counts only when the bundle also
//! discloses, with its key, the recorder's own `afr.erase` event for that epoch
//! ([`ERASE_TOOL`], `intent.args.epoch`), recorded after the epoch was sealed. That event is
//! proven like any other (inclusion under its epoch's root, which the caller compares with the
//! anchored one). An unproven claim leaves the withheld payloads missing: *incomplete*, never
//! *verified*.

use crate::{
    EpochHeader, Hash32, Record, RecorderId,
    cbor::{CborError, Reader, Writer},
    crypto::{self, EncryptedPayload, EventKey, Slot},
    event::Payload,
    merkle,
    verify::{Check, Failure, Location, Outcome},
};

/// Magic of the start frame.
pub const BUNDLE_MAGIC: &str = "afr-bundle";
/// Version of the bundle container (the records and headers inside keep
/// [`crate::FORMAT_VERSION`]). Version 3 adds `checkpoint` frames, version 4 the
/// `anchor-proofs` frame ([`embed_anchor_proofs`]); a bundle without either is still written
/// as version 2, which this reader also reads.
pub const BUNDLE_VERSION: u64 = 4;
/// Largest `anchor-proofs` frame read, in bytes.
pub const MAX_ANCHOR_PROOFS: usize = 32 << 20;
/// Most checkpoint frames, timestamp tokens per frame, and bytes of one token or note.
const MAX_CHECKPOINTS: u64 = 64;
const MAX_TOKENS: u64 = 16;
const MAX_ROOT_BYTES: usize = 64 * 1024;

/// A signed checkpoint of the recorder's log of epochs (`docs/spec/roots.md`), carried for the
/// verifier to check under its trust policy: this crate reads it, never trusts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointFrame {
    /// The signed note (`c2sp.org/tlog-checkpoint`), with any cosignatures.
    pub note: String,
    /// Consistency proof to the checkpoint's size from the tree of the bundle's headers (or
    /// from the previous frame's size, if larger); empty when the size is at most the number
    /// of headers.
    pub proof: Vec<Hash32>,
    /// RFC 3161 tokens over `SHA-256(note text)`, by TSA name.
    pub tokens: Vec<(String, Vec<u8>)>,
}
/// Tool name of the event a recorder writes when it destroys an epoch's key material; its
/// `intent.args` hold `{"epoch": E, ...}`.
pub const ERASE_TOOL: &str = "afr.erase";
/// Most hashes an audit path can hold (trees of up to 2^64 leaves).
const MAX_PROOF: u64 = 64;

/// One disclosed event.
#[derive(Debug, Clone)]
pub struct DisclosedEvent {
    /// The record's canonical bytes.
    pub record: Vec<u8>,
    /// Audit path of the record in its epoch's tree.
    pub proof: Vec<Hash32>,
    /// The sealed payload (disclosed with keys only).
    pub payload: Option<EncryptedPayload>,
    /// The event key (disclosed with keys only, absent for erased epochs).
    pub key: Option<EventKey>,
}

/// A whole bundle, for writing.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// Recorder.
    pub recorder: RecorderId,
    /// Headers of epochs `0..headers.len()`.
    pub headers: Vec<EpochHeader>,
    /// Epochs claimed erased (sorted and deduplicated when encoded); each needs its
    /// `afr.erase` event among `events`, disclosed with its key, to count.
    pub erased: Vec<u64>,
    /// Disclosed events, in sequence order.
    pub events: Vec<DisclosedEvent>,
    /// Checkpoints covering the disclosed epochs, in ascending size.
    pub checkpoints: Vec<CheckpointFrame>,
}

impl Bundle {
    /// Canonical bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(4096);
        w.array(3);
        w.text(BUNDLE_MAGIC);
        w.uint(if self.checkpoints.is_empty() { 2 } else { 3 });
        w.bytes(&self.recorder);
        for h in &self.headers {
            w.array(2);
            w.text("header");
            w.raw(&h.encode());
        }
        let mut erased = self.erased.clone();
        erased.sort_unstable();
        erased.dedup();
        w.array(2);
        w.text("erased");
        w.array(erased.len() as u64);
        for e in &erased {
            w.uint(*e);
        }
        for c in &self.checkpoints {
            w.array(4);
            w.text("checkpoint");
            w.text(&c.note);
            w.array(c.proof.len() as u64);
            for h in &c.proof {
                w.bytes(&h.0);
            }
            w.array(c.tokens.len() as u64);
            for (name, der) in &c.tokens {
                w.array(2);
                w.text(name);
                w.bytes(der);
            }
        }
        for ev in &self.events {
            w.array(5);
            w.text("event");
            w.raw(&ev.record);
            w.array(ev.proof.len() as u64);
            for h in &ev.proof {
                w.bytes(&h.0);
            }
            match &ev.payload {
                Some(p) => p.write(&mut w),
                None => w.null(),
            }
            match &ev.key {
                Some(k) => w.bytes(k.expose()),
                None => w.null(),
            }
        }
        w.array(3);
        w.text("end");
        w.uint(self.headers.len() as u64);
        w.uint(self.events.len() as u64);
        w.buf
    }
}

/// A disclosed record as a reference to it is checked (its leaf hash, time and epoch) and as
/// a report shows it (its category and lane).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisclosedLeaf {
    /// The record's leaf hash (`SHA-256(0x00 ‖ record)`).
    pub leaf: Hash32,
    /// The record's timestamp, microseconds since the Unix epoch.
    pub timestamp_us: u64,
    /// The record's epoch.
    pub epoch: u64,
    /// The record's category.
    pub category: crate::Category,
    /// The record's lane, if any.
    pub lane: Option<String>,
}

/// What checking a bundle found.
#[derive(Debug, Clone)]
pub struct BundleReport {
    /// The answer.
    pub outcome: Outcome,
    /// Recorder, once read.
    pub recorder: Option<RecorderId>,
    /// Passed checks by name.
    pub checks: std::collections::BTreeMap<&'static str, u64>,
    /// First failure, if tampered.
    pub first_failure: Option<Failure>,
    /// What is missing, if incomplete.
    pub missing: Vec<String>,
    /// `(epoch, root)` of every header, to compare with anchored roots.
    pub epoch_roots: Vec<(u64, Hash32)>,
    /// Sequence numbers of events whose records checked out.
    pub events: Vec<u64>,
    /// Opened payloads: `(seq, payload)`, content-verified.
    pub opened: Vec<(u64, Payload)>,
    /// The record timestamp (µs) of every opened event, by sequence number: when it ran, for
    /// the validity window of its approval.
    pub opened_at: std::collections::BTreeMap<u64, u64>,
    /// Sequence numbers whose payloads were erased, by a proven erasure.
    pub erased: Vec<u64>,
    /// Every record whose inclusion proof checked out (opened, withheld or erased), by
    /// sequence number: what a reference from another log is compared with
    /// (`docs/spec/delegation.md`).
    pub leaves: std::collections::BTreeMap<u64, DisclosedLeaf>,
    /// Erased epochs with their proof: `(epoch, seq of its afr.erase event)`.
    pub erasures: Vec<(u64, u64)>,
    /// The checkpoint frames as read (unverified: the verifier checks them under its trust
    /// policy).
    pub checkpoints: Vec<CheckpointFrame>,
    /// The `anchor-proofs` frame's bytes as read (a proof archive, unverified here).
    pub anchor_proofs: Option<Vec<u8>>,
}

/// `bundle` with `archive` (a proof archive's bytes) in an `anchor-proofs` frame right after
/// its start frame, as version 4. Refused: bytes that are not a bundle, a bundle that already
/// carries one, an archive over [`MAX_ANCHOR_PROOFS`].
pub fn embed_anchor_proofs(bundle: &[u8], archive: &[u8]) -> Result<Vec<u8>, CborError> {
    if archive.len() > MAX_ANCHOR_PROOFS {
        return Err(CborError::Malformed(format!(
            "anchor proofs of {} bytes: at most {MAX_ANCHOR_PROOFS}",
            archive.len()
        )));
    }
    let mut r = Reader::new(bundle);
    if r.array()? != 3 || r.text()? != BUNDLE_MAGIC {
        return Err(CborError::Malformed("not an afr bundle".into()));
    }
    let version = r.uint()?;
    if version >= 4 {
        return Err(CborError::Malformed(
            "the bundle is version 4 already (it may carry anchor proofs)".into(),
        ));
    }
    let recorder: RecorderId = r.fixed()?;
    let rest = bundle.get(r.position()..).ok_or(CborError::Truncated)?;
    let mut w = Writer::with_capacity(bundle.len() + archive.len() + 64);
    w.array(3);
    w.text(BUNDLE_MAGIC);
    w.uint(4);
    w.bytes(&recorder);
    w.array(2);
    w.text("anchor-proofs");
    w.bytes(archive);
    let mut out = w.buf;
    out.extend_from_slice(rest);
    Ok(out)
}

fn fail(location: Location, check: Check, detail: &str) -> Failure {
    Failure {
        check,
        location,
        detail: detail.to_owned(),
    }
}

/// Checks a bundle on its own: header chain, inclusion proofs, commitments, and (with keys)
/// decryption and content binding.
pub fn verify_bundle(bytes: &[u8]) -> BundleReport {
    let mut rep = BundleReport {
        outcome: Outcome::Verified,
        recorder: None,
        checks: Default::default(),
        first_failure: None,
        missing: Vec::new(),
        epoch_roots: Vec::new(),
        events: Vec::new(),
        opened: Vec::new(),
        opened_at: Default::default(),
        leaves: Default::default(),
        erased: Vec::new(),
        erasures: Vec::new(),
        checkpoints: Vec::new(),
        anchor_proofs: None,
    };
    match run(bytes, &mut rep) {
        Ok(()) if !rep.missing.is_empty() => rep.outcome = Outcome::Incomplete,
        Ok(()) => {}
        Err(f) => {
            rep.outcome = Outcome::Tampered;
            rep.first_failure = Some(f);
        }
    }
    rep
}

fn malformed(r: &Reader<'_>, e: CborError) -> Failure {
    fail(
        Location::Offset(r.position() as u64),
        Check::Encoding,
        &e.to_string(),
    )
}

fn read_checkpoint(r: &mut Reader<'_>) -> Result<CheckpointFrame, CborError> {
    let big = |what: &str| CborError::Malformed(format!("checkpoint frame: {what} too large"));
    let note = r.text()?.to_owned();
    if note.len() > MAX_ROOT_BYTES {
        return Err(big("note"));
    }
    let np = r.array()?;
    if np > MAX_PROOF {
        return Err(big("consistency proof"));
    }
    let mut proof = Vec::with_capacity(np as usize);
    for _ in 0..np {
        proof.push(Hash32(r.fixed()?));
    }
    let nt = r.array()?;
    if nt > MAX_TOKENS {
        return Err(big("token list"));
    }
    let mut tokens = Vec::with_capacity(nt as usize);
    for _ in 0..nt {
        if r.array()? != 2 {
            return Err(CborError::Malformed(
                "checkpoint frame: a token is [tsa, der]".into(),
            ));
        }
        let name = r.text()?.to_owned();
        let der = r.bytes()?.to_vec();
        if der.len() > MAX_ROOT_BYTES || name.len() > 256 {
            return Err(big("token"));
        }
        tokens.push((name, der));
    }
    Ok(CheckpointFrame {
        note,
        proof,
        tokens,
    })
}

fn run(bytes: &[u8], rep: &mut BundleReport) -> Result<(), Failure> {
    let mut r = Reader::new(bytes);
    let m = |r: &Reader<'_>, e| malformed(r, e);
    // Start frame.
    let start = (|| -> Result<(RecorderId, u64), CborError> {
        let n = r.array()?;
        if r.text()? != BUNDLE_MAGIC {
            return Err(CborError::Malformed("not an afr bundle".into()));
        }
        let v = r.uint()?;
        if !(2..=BUNDLE_VERSION).contains(&v) || n != 3 {
            return Err(CborError::Malformed(format!(
                "bundle version {v} unsupported (this verifier reads version {BUNDLE_VERSION}; \
                 re-disclose with a current `afr disclose`)"
            )));
        }
        Ok((r.fixed()?, v))
    })();
    let (recorder, version) = start.map_err(|e| m(&r, e))?;
    rep.recorder = Some(recorder);
    let mut headers: Vec<EpochHeader> = Vec::new();
    let mut erased: Option<Vec<u64>> = None;
    // Events without keys in an epoch claimed erased: settled once every event is read.
    let mut pending_erased: Vec<(u64, u64)> = Vec::new();
    let mut prev_root = Hash32::ZERO;
    let mut last_seq: Option<u64> = None;
    loop {
        let n = r.array().map_err(|e| m(&r, e))?;
        let tag = r.text().map_err(|e| m(&r, e))?;
        match (tag, n) {
            ("anchor-proofs", 2)
                if version >= 4
                    && headers.is_empty()
                    && erased.is_none()
                    && rep.anchor_proofs.is_none() =>
            {
                let b = r.bytes().map_err(|e| m(&r, e))?;
                if b.len() > MAX_ANCHOR_PROOFS {
                    return Err(m(
                        &r,
                        CborError::Malformed(format!(
                            "anchor-proofs frame over {MAX_ANCHOR_PROOFS} bytes"
                        )),
                    ));
                }
                rep.anchor_proofs = Some(b.to_vec());
            }
            ("header", 2) => {
                let h = EpochHeader::read(&mut r).map_err(|e| m(&r, e))?;
                let at = Location::Epoch(h.epoch);
                if h.recorder != recorder {
                    return Err(fail(
                        at,
                        Check::ForeignRecorder,
                        "header names another recorder",
                    ));
                }
                if h.epoch != headers.len() as u64 {
                    return Err(fail(
                        at,
                        Check::BundleEpochSequence,
                        "headers must run from epoch 0 without a gap",
                    ));
                }
                if erased.is_some() {
                    return Err(m(
                        &r,
                        CborError::Malformed("header frame after the erased frame".into()),
                    ));
                }
                if h.first_seq.checked_add(h.count).is_none() {
                    return Err(fail(
                        at,
                        Check::EpochRangeOverflow,
                        "first_seq + count overflows",
                    ));
                }
                let expected_first = headers.last().map_or(0, EpochHeader::end_seq);
                if h.prev_epoch_root != prev_root || h.first_seq != expected_first {
                    return Err(fail(
                        at,
                        Check::BackPointer,
                        "header does not continue the previous epoch",
                    ));
                }
                *rep.checks.entry("back-pointer").or_default() += 1;
                prev_root = h.root();
                rep.epoch_roots.push((h.epoch, prev_root));
                headers.push(h);
            }
            ("erased", 2) if erased.is_none() => {
                let k = r.array().map_err(|e| m(&r, e))?;
                let mut list: Vec<u64> = Vec::new();
                for _ in 0..k.min(bytes.len() as u64) {
                    let e = r.uint().map_err(|e| m(&r, e))?;
                    if list.last().is_some_and(|l| *l >= e) || e >= headers.len() as u64 {
                        return Err(m(
                            &r,
                            CborError::Malformed(format!(
                                "erased epoch {e} out of order, repeated or without a header"
                            )),
                        ));
                    }
                    list.push(e);
                }
                erased = Some(list);
            }
            ("checkpoint", 4) if version >= 3 => {
                if erased.is_none() || last_seq.is_some() {
                    return Err(m(
                        &r,
                        CborError::Malformed(
                            "a checkpoint frame must come after the erased frame and before the events".into(),
                        ),
                    ));
                }
                let c = read_checkpoint(&mut r).map_err(|e| m(&r, e))?;
                if rep.checkpoints.len() as u64 >= MAX_CHECKPOINTS {
                    return Err(m(
                        &r,
                        CborError::Malformed(format!(
                            "more than {MAX_CHECKPOINTS} checkpoint frames"
                        )),
                    ));
                }
                rep.checkpoints.push(c);
            }
            ("event", 5) => {
                let Some(erased) = erased.as_deref() else {
                    return Err(m(
                        &r,
                        CborError::Malformed("event frame before the erased frame".into()),
                    ));
                };
                let start = r.position();
                let rec_res = crate::export::skip_record(&mut r);
                rec_res.map_err(|e| m(&r, e))?;
                let record_bytes = bytes
                    .get(start..r.position())
                    .ok_or(CborError::Truncated)
                    .map_err(|e| m(&r, e))?;
                let record = Record::decode(record_bytes).map_err(|e| m(&r, e))?;
                let seq = record.seq;
                let at = Location::Event(seq);
                let np = r.array().map_err(|e| m(&r, e))?;
                if np > MAX_PROOF {
                    return Err(fail(
                        at,
                        Check::ProofTooLong,
                        "audit path longer than 64 hashes",
                    ));
                }
                let mut proof = Vec::with_capacity(np as usize);
                for _ in 0..np {
                    proof.push(Hash32(r.fixed().map_err(|e| m(&r, e))?));
                }
                let payload = if r.null().map_err(|e| m(&r, e))? {
                    None
                } else {
                    Some(EncryptedPayload::read(&mut r).map_err(|e| m(&r, e))?)
                };
                let key = if r.null().map_err(|e| m(&r, e))? {
                    None
                } else {
                    Some(EventKey::from_bytes(r.fixed().map_err(|e| m(&r, e))?))
                };
                if record.recorder != recorder {
                    return Err(fail(
                        at,
                        Check::ForeignRecorder,
                        "record names another recorder",
                    ));
                }
                if last_seq.is_some_and(|l| seq <= l) {
                    return Err(fail(
                        at,
                        Check::BundleSequence,
                        "events out of order or repeated",
                    ));
                }
                last_seq = Some(seq);
                let Some(h) = headers.get(usize::try_from(record.epoch).unwrap_or(usize::MAX))
                else {
                    return Err(fail(
                        at,
                        Check::NoHeaderForEpoch,
                        "no header for the record's epoch",
                    ));
                };
                if seq < h.first_seq || seq >= h.end_seq() {
                    return Err(fail(
                        at,
                        Check::EpochMembership,
                        "sequence number outside its epoch",
                    ));
                }
                let leaf = crate::hash::leaf_hash(record_bytes);
                if merkle::verify_inclusion(
                    &leaf,
                    seq - h.first_seq,
                    h.count,
                    &proof,
                    &h.merkle_root,
                )
                .is_err()
                {
                    return Err(fail(
                        at,
                        Check::InclusionProof,
                        "record is not in its epoch's tree",
                    ));
                }
                *rep.checks.entry("inclusion-proof").or_default() += 1;
                rep.events.push(seq);
                rep.leaves.insert(
                    seq,
                    DisclosedLeaf {
                        leaf,
                        timestamp_us: record.timestamp_us,
                        epoch: record.epoch,
                        category: record.category,
                        lane: record.lane.clone(),
                    },
                );
                match (payload, key) {
                    (Some(p), key) => {
                        if p.commitment() != record.payload_commitment {
                            return Err(fail(
                                at,
                                Check::PayloadCommitment,
                                "sealed payload does not match the record",
                            ));
                        }
                        *rep.checks.entry("payload-commitment").or_default() += 1;
                        match key {
                            Some(k) => {
                                let slot = Slot {
                                    recorder,
                                    epoch: record.epoch,
                                    seq,
                                };
                                let plain = crypto::decrypt(&k, &slot, &p).map_err(|_| {
                                    fail(
                                        at,
                                        Check::PayloadKey,
                                        "key does not open the payload to its committed plaintext",
                                    )
                                })?;
                                let pl = Payload::decode(&plain).map_err(|_| {
                                    fail(
                                        at,
                                        Check::PayloadEncoding,
                                        "plaintext is not a canonical payload",
                                    )
                                })?;
                                *rep.checks.entry("payload-content").or_default() += 1;
                                rep.opened.push((seq, pl));
                                rep.opened_at.insert(seq, record.timestamp_us);
                            }
                            None if erased.contains(&record.epoch) => {
                                pending_erased.push((seq, record.epoch));
                            }
                            None => rep.missing.push(format!("key of event {seq} withheld")),
                        }
                    }
                    (None, Some(_)) => {
                        return Err(fail(
                            at,
                            Check::KeyWithoutPayload,
                            "key without its sealed payload",
                        ));
                    }
                    (None, None) if erased.contains(&record.epoch) => {
                        pending_erased.push((seq, record.epoch));
                    }
                    (None, None) => rep.missing.push(format!("payload of event {seq} withheld")),
                }
            }
            ("end", 3) => {
                let nh = r.uint().map_err(|e| m(&r, e))?;
                let ne = r.uint().map_err(|e| m(&r, e))?;
                if nh != headers.len() as u64 || ne != rep.events.len() as u64 {
                    return Err(fail(
                        Location::File,
                        Check::BundleTotals,
                        "end frame totals differ from the bundle",
                    ));
                }
                r.finish().map_err(|e| m(&r, e))?;
                settle_erasures(
                    rep,
                    &headers,
                    erased.as_deref().unwrap_or_default(),
                    &pending_erased,
                );
                if rep.events.is_empty() {
                    rep.missing.push("no events disclosed".into());
                }
                return Ok(());
            }
            (t, n) => {
                return Err(m(
                    &r,
                    CborError::Malformed(format!("unknown frame `{t}` with {n} items")),
                ));
            }
        }
    }
}

/// Accepts the erasure claims proven by an opened `afr.erase` event of the recorder, recorded
/// after the erased epoch was sealed; every other claim, and every event it would excuse, is
/// reported missing.
fn settle_erasures(
    rep: &mut BundleReport,
    headers: &[EpochHeader],
    claimed: &[u64],
    pending: &[(u64, u64)],
) {
    for &epoch in claimed {
        // An epoch whose payloads were opened here was not erased: the claim contradicts the
        // bundle itself and proves nothing.
        if rep.opened.iter().any(|(seq, _)| {
            headers
                .get(usize::try_from(epoch).unwrap_or(usize::MAX))
                .is_some_and(|h| (h.first_seq..h.end_seq()).contains(seq))
        }) {
            rep.missing.push(format!(
                "epoch {epoch} is claimed erased, yet the bundle opens payloads of it"
            ));
            continue;
        }
        let end = headers
            .get(usize::try_from(epoch).unwrap_or(usize::MAX))
            .map_or(u64::MAX, EpochHeader::end_seq);
        let proof = rep.opened.iter().find(|(seq, p)| {
            p.intent.tool == ERASE_TOOL
                && p.intent
                    .args
                    .get("epoch")
                    .and_then(serde_json::Value::as_u64)
                    == Some(epoch)
                && *seq >= end
        });
        match proof {
            Some((seq, _)) => rep.erasures.push((epoch, *seq)),
            None => rep.missing.push(format!(
                "epoch {epoch} is claimed erased, but its afr.erase event is not disclosed \
                 with its key, so the claim is unproven"
            )),
        }
    }
    for &(seq, epoch) in pending {
        if rep.erasures.iter().any(|(e, _)| *e == epoch) {
            rep.erased.push(seq);
        } else {
            rep.missing.push(format!(
                "payload of event {seq} withheld (erasure unproven)"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Category,
        crypto::{MasterKey, encrypt},
        hash::leaf_hash,
    };
    use proptest::prelude::*;

    /// A one-epoch bundle of 5 events, built with the core API alone.
    fn sample(with_keys: bool) -> Bundle {
        sample_from(with_keys, 0)
    }

    /// [`sample`] with its epoch 0 starting at sequence number `first` (0 honestly): every
    /// record, proof, payload and key consistent with that header.
    fn sample_from(with_keys: bool, first: u64) -> Bundle {
        let recorder = [9u8; 20];
        let ek = MasterKey::from_bytes([1; 32]).epoch_key(&[2; 32], &recorder, 0);
        let mut prev = Hash32::ZERO;
        let mut records = Vec::new();
        let mut sealed = Vec::new();
        for seq in first..first + 5 {
            let p = Payload::intent_only(format!("tool-{seq}"), serde_json::Value::Null);
            let slot = Slot {
                recorder,
                epoch: 0,
                seq,
            };
            let s = encrypt(
                &ek.event_key(seq),
                &slot,
                [seq as u8; 12],
                &p.encode().unwrap(),
            );
            let r = Record {
                recorder,
                seq,
                epoch: 0,
                timestamp_us: seq,
                category: Category::Shell,
                lane: None,
                concurrent_with: Vec::new(),
                prev_hash: prev,
                payload_commitment: s.commitment(),
            };
            prev = r.leaf_hash();
            records.push(r.encode());
            sealed.push(s);
        }
        let leaves: Vec<_> = records.iter().map(|b| leaf_hash(b)).collect();
        let header = EpochHeader {
            recorder,
            epoch: 0,
            first_seq: first,
            count: 5,
            merkle_root: merkle::root(&leaves),
            chain_head: prev,
            prev_epoch_root: Hash32::ZERO,
            sealed_at_us: 7,
        };
        let events = [1usize, 3, 4]
            .iter()
            .map(|&i| DisclosedEvent {
                record: records[i].clone(),
                proof: merkle::inclusion_proof(&leaves, i).unwrap(),
                payload: with_keys.then(|| sealed[i].clone()),
                key: with_keys.then(|| ek.event_key(first + i as u64)),
            })
            .collect();
        Bundle {
            recorder,
            headers: vec![header],
            erased: Vec::new(),
            events,
            checkpoints: Vec::new(),
        }
    }

    #[test]
    fn sample_bundles_verify() {
        let rep = verify_bundle(&sample(true).encode());
        assert_eq!(rep.outcome, Outcome::Verified, "{:?}", rep.first_failure);
        assert_eq!(rep.opened.len(), 3);
        assert_eq!(
            verify_bundle(&sample(false).encode()).outcome,
            Outcome::Incomplete
        );
    }

    #[test]
    fn epoch_0_must_start_at_sequence_0() {
        // Consistent in itself, but the log does not start at event 0: events 0..5 are gone.
        let rep = verify_bundle(&sample_from(true, 5).encode());
        assert_eq!(rep.outcome, Outcome::Tampered);
        let f = rep.first_failure.unwrap();
        assert_eq!(
            (f.check, f.location),
            (Check::BackPointer, Location::Epoch(0))
        );
    }

    #[test]
    fn anchor_proofs_ride_in_their_own_frame_after_the_start_only() {
        let plain = sample(true).encode();
        let honest = verify_bundle(&plain);
        let archive = br#"{"version":3}"#;
        let with = embed_anchor_proofs(&plain, archive).unwrap();
        let rep = verify_bundle(&with);
        assert_eq!(rep.outcome, honest.outcome);
        assert_eq!(rep.epoch_roots, honest.epoch_roots);
        assert_eq!(rep.anchor_proofs.as_deref(), Some(&archive[..]));
        assert!(honest.anchor_proofs.is_none());
        // Once only, and only in a bundle.
        assert!(embed_anchor_proofs(&with, archive).is_err());
        assert!(embed_anchor_proofs(b"junk", archive).is_err());
        // The frame in a version-2 bundle is an unknown frame: tampered.
        let mut v2 = with.clone();
        let at = 1 + 1 + BUNDLE_MAGIC.len();
        assert_eq!(v2[at], 4);
        v2[at] = 2;
        assert_eq!(verify_bundle(&v2).outcome, Outcome::Tampered);
        // After the headers it is out of place: tampered.
        let mut w = Writer::with_capacity(64);
        w.array(2);
        w.text("anchor-proofs");
        w.bytes(archive);
        let frame = w.buf;
        let start_len = 1 + 1 + BUNDLE_MAGIC.len() + 1 + 21;
        let mut late = with[..start_len].to_vec();
        let rest = &plain[start_len..];
        let header_len = crate::cbor::item_len(rest).unwrap();
        late.extend_from_slice(&rest[..header_len]);
        late.extend_from_slice(&frame);
        late.extend_from_slice(&rest[header_len..]);
        assert_eq!(verify_bundle(&late).outcome, Outcome::Tampered);
    }

    proptest! {
        // Hostile input: random bytes and mutated bundles never panic, and a mutation anywhere
        // never verifies with the same epoch roots: every byte of a bundle is checked.
        #[test]
        fn mutated_bundles_never_panic_or_pass(i in any::<prop::sample::Index>(), x in 1u8.., cut in any::<bool>()) {
            let good = sample(true).encode();
            let honest = verify_bundle(&good);
            let mut bad = good.clone();
            let i = i.index(good.len());
            if cut { bad.truncate(i) } else { bad[i] ^= x }
            let rep = verify_bundle(&bad);
            prop_assert!(rep.outcome != Outcome::Verified || rep.epoch_roots != honest.epoch_roots);
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = verify_bundle(&b);
            let _ = crate::verify::verify_log(&b);
        }
    }
}
