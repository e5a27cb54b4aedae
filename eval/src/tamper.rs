//! Tampered evidence for the tamper matrix: honest logs and bundles built with the core crate
//! alone, and the attacks of issue 6 applied to them at random positions.
//!
//! An honest [`History`] is a list of epochs of plaintext events. Sealing it
//! ([`History::seal`]) does what the recorder does, through the same sequencer
//! (`afr_core::sequencer`): seal each payload under its event key, commit to it in the record,
//! chain the records, build each epoch's Merkle tree and header.
//! Two kinds of attacker then work on it:
//!
//! ```text
//!   file attacker (no keys):     SealedLog ──edit / delete / reorder / splice──► export bytes
//!                                 (fixes the cheap framing: epoch counts and end totals)
//!   host attacker (every key):   History ──change──► seal again ──► a consistent export
//!                                 (re-encrypts, re-commits, re-chains, re-roots, re-headers)
//! ```
//!
//! The first is caught by the hash chain or the Merkle layer; the second only by the roots
//! anchored before the attack. Every attack reports the lowest epoch it touched, so the
//! matrix can tell whether anchoring was in a position to catch it.

use afr_core::{
    Category, EpochHeader, Hash32, Payload, Record, RecorderId,
    bundle::{Bundle, DisclosedEvent},
    crypto::{EncryptedPayload, EventKey, MasterKey, Slot, encrypt},
    event::{Envelope, Intent},
    export::LogWriter,
    hash::leaf_hash,
    merkle,
    sequencer::Sequencer,
};

/// A small deterministic PRNG (xorshift64*), so every case is reproducible from its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value, zero included).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1b5_4a32_d192_ed03 | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
}

/// One plaintext event of a history.
#[derive(Debug, Clone)]
pub struct Event {
    /// Envelope: kind of action.
    pub category: Category,
    /// Envelope: time.
    pub timestamp_us: u64,
    /// The semantic fields that get sealed.
    pub payload: Payload,
    /// The sealed payload and the `(epoch, seq)` it was sealed for, reused while the event
    /// keeps its slot so that re-sealing leaves an unchanged prefix byte-identical.
    sealed: Option<(u64, u64, EncryptedPayload)>,
}

fn payload(tool: String, n: u64) -> Payload {
    Payload::intent_only(tool, serde_json::json!({ "n": n }))
}

impl Event {
    fn random(rng: &mut Rng, n: u64) -> Event {
        let tools = ["psql", "bash", "http.get", "git.push", "fs.write"];
        Event {
            category: Category::ALL[rng.below(Category::ALL.len())],
            timestamp_us: 1_764_000_000_000_000 + n * 1_000,
            payload: payload(tools[rng.below(tools.len())].to_owned(), n),
            sealed: None,
        }
    }

    /// Replaces the payload's tool; the event must then be sealed anew.
    pub fn set_tool(&mut self, tool: &str) {
        self.payload.intent.tool = tool.to_owned();
        self.sealed = None;
    }

    /// Replaces the payload's intent (tool and arguments); the event must then be sealed anew.
    pub fn set_intent(&mut self, tool: &str, args: serde_json::Value) {
        self.payload.intent = Intent {
            tool: tool.to_owned(),
            args,
        };
        self.sealed = None;
    }
}

/// An honest recorder's history before sealing: epochs of events, and every key.
#[derive(Debug, Clone)]
pub struct History {
    /// The recorder.
    pub recorder: RecorderId,
    master: MasterKey,
    /// Events by epoch; no epoch is empty once sealed.
    pub epochs: Vec<Vec<Event>>,
    nonces: u64,
}

/// Bounds of a random history: epochs, and events per epoch.
pub const EPOCHS: (usize, usize) = (2, 6);
/// Events per epoch.
pub const EPOCH_SIZE: (usize, usize) = (3, 8);

impl History {
    /// A random history of [`EPOCHS`] epochs of [`EPOCH_SIZE`] events.
    pub fn random(rng: &mut Rng, recorder: RecorderId) -> History {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&rng.next_u64().to_be_bytes());
        key[8..28].copy_from_slice(&recorder);
        let mut n = 0;
        let epochs = (0..rng.range(EPOCHS.0, EPOCHS.1))
            .map(|_| {
                (0..rng.range(EPOCH_SIZE.0, EPOCH_SIZE.1))
                    .map(|_| {
                        n += 1;
                        Event::random(rng, n)
                    })
                    .collect()
            })
            .collect();
        History {
            recorder,
            master: MasterKey::from_bytes(key),
            epochs,
            nonces: rng.next_u64(),
        }
    }

    /// The key of event `seq` in `epoch`, as the recorder (or a host attacker) derives it.
    pub fn key(&self, epoch: u64, seq: u64) -> EventKey {
        let mut salt = [0u8; 32];
        salt[..8].copy_from_slice(&epoch.to_be_bytes());
        self.master
            .epoch_key(&salt, &self.recorder, epoch)
            .event_key(seq)
    }

    /// Seals a payload for a slot with a fresh nonce.
    pub fn seal_payload(&mut self, p: &Payload, epoch: u64, seq: u64) -> EncryptedPayload {
        self.nonces = self.nonces.wrapping_add(1);
        let mut nonce = [0u8; 12];
        nonce[..8].copy_from_slice(&self.nonces.to_be_bytes());
        let slot = Slot {
            recorder: self.recorder,
            epoch,
            seq,
        };
        #[expect(
            clippy::expect_used,
            reason = "a payload of a tool name and a one-key JSON object always encodes"
        )]
        let plain = p.encode().expect("payload encodes");
        encrypt(&self.key(epoch, seq), &slot, nonce, &plain)
    }

    /// Events in the history.
    pub fn len(&self) -> usize {
        self.epochs.iter().map(Vec::len).sum()
    }

    /// Whether the history holds no event.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Seals everything through the core's sequencer, as the recorder does: payloads,
    /// records, chain, trees, headers. Empty epochs are dropped first.
    pub fn seal(&mut self) -> SealedLog {
        self.epochs.retain(|e| !e.is_empty());
        let mut epochs = std::mem::take(&mut self.epochs);
        let mut chain = Sequencer::new(self.recorder);
        let mut out = Vec::new();
        for evs in epochs.iter_mut() {
            let mut sealed_events = Vec::new();
            for ev in evs.iter_mut() {
                let Slot { epoch: e, seq, .. } = chain.slot();
                let p = match &ev.sealed {
                    Some((se, ss, p)) if *se == e && *ss == seq => p.clone(),
                    _ => {
                        let p = self.seal_payload(&ev.payload.clone(), e, seq);
                        ev.sealed = Some((e, seq, p.clone()));
                        p
                    }
                };
                let env = Envelope {
                    category: ev.category,
                    timestamp_us: Some(ev.timestamp_us),
                    lane: None,
                    concurrent_with: Vec::new(),
                };
                #[expect(
                    clippy::expect_used,
                    reason = "an envelope without concurrent_with always appends"
                )]
                let appended = chain
                    .append(env, ev.timestamp_us, p.commitment())
                    .expect("appends");
                sealed_events.push(SealedEvent {
                    record: appended.bytes,
                    payload: Some(p),
                    key: self.key(e, seq),
                });
            }
            let e = chain.open().number();
            #[expect(clippy::expect_used, reason = "empty epochs were dropped above")]
            let header = chain
                .seal(1_764_000_000_000_000 + e)
                .expect("a non-empty epoch seals")
                .into_header();
            out.push(SealedEpoch {
                header,
                events: sealed_events,
            });
        }
        self.epochs = epochs;
        SealedLog {
            recorder: self.recorder,
            epochs: out,
        }
    }
}

/// One sealed event as it sits in an export.
#[derive(Debug, Clone)]
pub struct SealedEvent {
    /// The record's canonical bytes.
    pub record: Vec<u8>,
    /// Its sealed payload.
    pub payload: Option<EncryptedPayload>,
    /// Its event key (for bundles).
    pub key: EventKey,
}

/// A sealed epoch: header and events.
#[derive(Debug, Clone)]
pub struct SealedEpoch {
    /// The header as sealed.
    pub header: EpochHeader,
    /// The events in file order.
    pub events: Vec<SealedEvent>,
}

/// A sealed log, frame by frame, for attackers that work on the file.
#[derive(Debug, Clone)]
pub struct SealedLog {
    /// The recorder.
    pub recorder: RecorderId,
    /// Epochs in file order.
    pub epochs: Vec<SealedEpoch>,
}

impl SealedLog {
    /// The epoch roots, in order: what the honest recorder anchors.
    pub fn roots(&self) -> Vec<Hash32> {
        self.epochs.iter().map(|e| e.header.root()).collect()
    }

    /// Writes the export. Headers are written as they stand; the end frame's totals are
    /// counted from the events present (a file attacker fixes them for free).
    pub fn export(&self) -> Vec<u8> {
        let mut w = LogWriter::start(&self.recorder, 1);
        let mut n = 0u64;
        for e in &self.epochs {
            w.epoch(&e.header.encode());
            for ev in &e.events {
                w.event(
                    &ev.record,
                    ev.payload.as_ref().map(|p| p.encode()).as_deref(),
                );
                n += 1;
            }
        }
        w.tail(0);
        w.end(n, self.epochs.len() as u64);
        w.take()
    }

    /// What a file attacker does after moving events around so the file still parses: drops
    /// emptied epochs and sets each header's event count. Nothing else is recomputed.
    pub fn fix_counts(&mut self) {
        self.epochs.retain(|e| !e.events.is_empty());
        for e in &mut self.epochs {
            e.header.count = e.events.len() as u64;
        }
    }

    /// `(epoch index, event index)` of every event, in file order.
    pub fn positions(&self) -> Vec<(usize, usize)> {
        self.epochs
            .iter()
            .enumerate()
            .flat_map(|(e, ep)| (0..ep.events.len()).map(move |i| (e, i)))
            .collect()
    }

    /// An honest disclosure bundle of the events at `positions` (sorted, distinct), with
    /// payloads and keys, and every header up to the last disclosed epoch.
    pub fn bundle(&self, positions: &[(usize, usize)]) -> Bundle {
        let last = positions.iter().map(|p| p.0).max().unwrap_or(0);
        let events = positions
            .iter()
            .map(|&(e, i)| {
                let ep = &self.epochs[e];
                let leaves: Vec<Hash32> = ep.events.iter().map(|x| leaf_hash(&x.record)).collect();
                let ev = &ep.events[i];
                DisclosedEvent {
                    record: ev.record.clone(),
                    proof: merkle::inclusion_proof(&leaves, i).unwrap_or_default(),
                    payload: ev.payload.clone(),
                    key: Some(ev.key.clone()),
                }
            })
            .collect();
        Bundle {
            recorder: self.recorder,
            headers: self.epochs[..=last]
                .iter()
                .map(|e| e.header.clone())
                .collect(),
            erased: Vec::new(),
            events,
            checkpoints: Vec::new(),
        }
    }
}

/// The attack classes of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Attack {
    /// Flip one byte of a record.
    EditRecordByte,
    /// Change a record's timestamp or category and re-encode it canonically (no re-chaining).
    EditRecordField,
    /// Flip one ciphertext byte and put the new commitment in the record (no re-chaining).
    EditPayloadByte,
    /// Change a semantic field, re-seal it and everything after it with the recorder's keys.
    EditResealed,
    /// Delete the first, a middle or the last event of an epoch or of the log.
    Delete,
    /// Swap two events.
    Swap,
    /// Move one event elsewhere.
    Move,
    /// Insert a forged event sealed with the recorder's keys and linked to its predecessor.
    Insert,
    /// Re-seal a different history from a common prefix of whole epochs.
    Fork,
    /// Drop the last events and re-seal consistently.
    Truncate,
    /// Remove one epoch, header and events.
    DropEpoch,
    /// Replace an event with one from another epoch.
    SpliceEpoch,
    /// Replace an event with one from another recorder's log.
    SpliceRecorder,
    /// Duplicate an event later in the log.
    Replay,
    /// Swap two events' sealed payloads.
    SwapCiphertexts,
    /// Bundle: give a disclosed event another event's key.
    BundleSwapKeys,
    /// Bundle: give a disclosed event another event's sealed payload.
    BundleSwapCiphertexts,
    /// Bundle: flip a byte of a disclosed record.
    BundleEditRecord,
    /// Bundle: disclose from a history re-sealed from a common prefix.
    BundleFork,
}

impl Attack {
    /// Every class, in table order.
    pub const ALL: [Attack; 19] = [
        Attack::EditRecordByte,
        Attack::EditRecordField,
        Attack::EditPayloadByte,
        Attack::EditResealed,
        Attack::Delete,
        Attack::Swap,
        Attack::Move,
        Attack::Insert,
        Attack::Fork,
        Attack::Truncate,
        Attack::DropEpoch,
        Attack::SpliceEpoch,
        Attack::SpliceRecorder,
        Attack::Replay,
        Attack::SwapCiphertexts,
        Attack::BundleSwapKeys,
        Attack::BundleSwapCiphertexts,
        Attack::BundleEditRecord,
        Attack::BundleFork,
    ];

    /// Row label.
    pub fn name(self) -> &'static str {
        match self {
            Attack::EditRecordByte => "edit: record byte",
            Attack::EditRecordField => "edit: record field re-encoded",
            Attack::EditPayloadByte => "edit: payload byte",
            Attack::EditResealed => "edit: semantic field, re-sealed",
            Attack::Delete => "delete: first/mid/last event",
            Attack::Swap => "reorder: swap two events",
            Attack::Move => "reorder: move one event",
            Attack::Insert => "insert: forged event",
            Attack::Fork => "fork: re-sealed from a prefix",
            Attack::Truncate => "truncate: tail, re-sealed",
            Attack::DropEpoch => "drop: whole epoch",
            Attack::SpliceEpoch => "splice: from another epoch",
            Attack::SpliceRecorder => "splice: from another recorder",
            Attack::Replay => "replay: duplicate event",
            Attack::SwapCiphertexts => "swap: ciphertexts",
            Attack::BundleSwapKeys => "bundle: swapped keys",
            Attack::BundleSwapCiphertexts => "bundle: swapped ciphertexts",
            Attack::BundleEditRecord => "bundle: record byte",
            Attack::BundleFork => "bundle: re-sealed fork",
        }
    }

    /// Whether the attack targets a disclosure bundle rather than a whole log.
    pub fn on_bundle(self) -> bool {
        matches!(
            self,
            Attack::BundleSwapKeys
                | Attack::BundleSwapCiphertexts
                | Attack::BundleEditRecord
                | Attack::BundleFork
        )
    }
}

/// A piece of evidence to verify.
#[derive(Debug, Clone)]
pub enum Evidence {
    /// A whole-log export.
    Log(Vec<u8>),
    /// A disclosure bundle.
    Bundle(Vec<u8>),
}

/// A tampered file and the lowest epoch (of the honest log) the attack changed.
#[derive(Debug, Clone)]
pub struct Tampered {
    /// The tampered file.
    pub evidence: Evidence,
    /// Lowest honest epoch whose content or root the attack changed.
    pub touched: u64,
}

/// Where the interesting positions are: the first event of the log, the first, a middle and
/// the last event of an epoch, and the last event of the log (which has no successor).
fn pick(rng: &mut Rng, log: &SealedLog) -> (usize, usize) {
    let last_e = log.epochs.len() - 1;
    match rng.below(5) {
        0 => (0, 0),
        4 => (last_e, log.epochs[last_e].events.len() - 1),
        k => {
            let e = rng.below(log.epochs.len());
            let n = log.epochs[e].events.len();
            match k {
                1 => (e, 0),
                2 => (e, 1 + rng.below(n - 2)),
                _ => (e, n - 1),
            }
        }
    }
}

fn edit_record(ev: &mut SealedEvent, f: impl FnOnce(&mut Record)) {
    if let Ok(mut r) = Record::decode(&ev.record) {
        f(&mut r);
        ev.record = r.encode();
    }
}

/// Two distinct positions, the first before the second in file order.
fn two(rng: &mut Rng, log: &SealedLog) -> ((usize, usize), (usize, usize)) {
    let pos = log.positions();
    let a = rng.below(pos.len());
    let mut b = rng.below(pos.len() - 1);
    if b >= a {
        b += 1;
    }
    (pos[a.min(b)], pos[a.max(b)])
}

/// The history with every event from `k` (epoch index) on rewritten: a different history
/// that shares epochs `0..k`, sometimes longer or shorter at the end.
fn forked(rng: &mut Rng, h: &History, k: usize, keep_shape: bool) -> History {
    let mut f = h.clone();
    for (e, evs) in f.epochs.iter_mut().enumerate().skip(k) {
        for (i, ev) in evs.iter_mut().enumerate() {
            ev.set_tool(&format!("forked-{e}-{i}"));
        }
    }
    if !keep_shape {
        let base = f.len() as u64;
        match rng.below(3) {
            0 => {
                if let Some(last) = f.epochs.last_mut() {
                    last.push(Event::random(rng, base + 1));
                }
            }
            1 => f.epochs.push(
                (0..rng.range(EPOCH_SIZE.0, EPOCH_SIZE.1))
                    .map(|i| Event::random(rng, base + 1 + i as u64))
                    .collect(),
            ),
            _ => {}
        }
    }
    f
}

/// Applies `attack` to the honest `history` (sealed as `honest`); `other` is another
/// recorder's sealed log, and `disclosed` the positions of the honest bundle.
pub fn apply(
    attack: Attack,
    rng: &mut Rng,
    history: &History,
    honest: &SealedLog,
    other: &SealedLog,
    disclosed: &[(usize, usize)],
) -> Tampered {
    let mut log = honest.clone();
    let log_case = |log: &SealedLog, touched: usize| Tampered {
        evidence: Evidence::Log(log.export()),
        touched: touched as u64,
    };
    let bundle_case = |b: &Bundle, touched: usize| Tampered {
        evidence: Evidence::Bundle(b.encode()),
        touched: touched as u64,
    };
    match attack {
        Attack::EditRecordByte => {
            let (e, i) = pick(rng, &log);
            let ev = &mut log.epochs[e].events[i];
            let at = rng.below(ev.record.len());
            ev.record[at] ^= 1 << rng.below(8);
            log_case(&log, e)
        }
        Attack::EditRecordField => {
            let (e, i) = pick(rng, &log);
            let bump = 1 + rng.below(1_000_000) as u64;
            let cat = rng.below(2) == 0;
            edit_record(&mut log.epochs[e].events[i], |r| {
                if cat {
                    r.category = Category::ALL[(r.category as usize + 1) % Category::ALL.len()];
                } else {
                    r.timestamp_us += bump;
                }
            });
            log_case(&log, e)
        }
        Attack::EditPayloadByte => {
            let (e, i) = pick(rng, &log);
            let ev = &mut log.epochs[e].events[i];
            if let Some(p) = ev.payload.as_mut() {
                let at = rng.below(p.ciphertext.len());
                p.ciphertext[at] ^= 1 << rng.below(8);
                let c = p.commitment();
                edit_record(ev, |r| r.payload_commitment = c);
            }
            log_case(&log, e)
        }
        Attack::EditResealed => {
            let (e, i) = pick(rng, &log);
            let mut h = history.clone();
            h.epochs[e][i].set_tool("rm -rf /");
            log_case(&h.seal(), e)
        }
        Attack::Delete => {
            let (e, i) = pick(rng, &log);
            log.epochs[e].events.remove(i);
            log.fix_counts();
            log_case(&log, e)
        }
        Attack::Swap => {
            let (a, b) = two(rng, &log);
            let ea = log.epochs[a.0].events[a.1].clone();
            let eb = std::mem::replace(&mut log.epochs[b.0].events[b.1], ea);
            log.epochs[a.0].events[a.1] = eb;
            log_case(&log, a.0)
        }
        Attack::Move => {
            let (a, b) = two(rng, &log);
            let (from, to) = if rng.below(2) == 0 { (a, b) } else { (b, a) };
            let ev = log.epochs[from.0].events.remove(from.1);
            let to_i = to.1.min(log.epochs[to.0].events.len());
            log.epochs[to.0].events.insert(to_i, ev);
            log.fix_counts();
            log_case(&log, a.0)
        }
        Attack::Insert => {
            let (e, i) = pick(rng, &log);
            // Insert after the picked event, so the end of the log is reachable.
            let prev = Record::decode(&log.epochs[e].events[i].record).ok();
            let seq = prev.as_ref().map_or(0, |r| r.seq + 1);
            let mut h = history.clone();
            let p = payload("forged".into(), seq);
            let sealed = h.seal_payload(&p, e as u64, seq);
            let r = Record {
                recorder: log.recorder,
                seq,
                epoch: e as u64,
                timestamp_us: prev.as_ref().map_or(0, |r| r.timestamp_us + 1),
                category: Category::Shell,
                lane: None,
                concurrent_with: Vec::new(),
                prev_hash: leaf_hash(&log.epochs[e].events[i].record),
                payload_commitment: sealed.commitment(),
            };
            log.epochs[e].events.insert(
                i + 1,
                SealedEvent {
                    record: r.encode(),
                    payload: Some(sealed),
                    key: h.key(e as u64, seq),
                },
            );
            log.fix_counts();
            log_case(&log, e)
        }
        Attack::Fork => {
            let k = rng.below(log.epochs.len());
            log_case(&forked(rng, history, k, false).seal(), k)
        }
        Attack::Truncate => {
            let mut h = history.clone();
            let drop = rng.range(1, (h.len() - 1).min(2 * EPOCH_SIZE.1));
            let mut left = drop;
            while left > 0 {
                let Some(last) = h.epochs.last_mut() else {
                    break;
                };
                if last.len() <= left {
                    left -= last.len();
                    h.epochs.pop();
                } else {
                    last.truncate(last.len() - left);
                    left = 0;
                }
            }
            // The first epoch changed is the one now last if it was cut, or the next one.
            let kept = h.epochs.len();
            let cut_inside = h
                .epochs
                .last()
                .is_some_and(|l| l.len() < history.epochs[kept - 1].len());
            let touched = if cut_inside { kept - 1 } else { kept };
            log_case(&h.seal(), touched)
        }
        Attack::DropEpoch => {
            let k = rng.below(log.epochs.len());
            log.epochs.remove(k);
            log_case(&log, k)
        }
        Attack::SpliceEpoch => {
            let (e, i) = pick(rng, &log);
            let mut src = rng.below(log.epochs.len() - 1);
            if src >= e {
                src += 1;
            }
            let j = rng.below(log.epochs[src].events.len());
            log.epochs[e].events[i] = log.epochs[src].events[j].clone();
            log_case(&log, e)
        }
        Attack::SpliceRecorder => {
            let (e, i) = pick(rng, &log);
            let pos = other.positions();
            let (oe, oi) = pos[rng.below(pos.len())];
            log.epochs[e].events[i] = other.epochs[oe].events[oi].clone();
            log_case(&log, e)
        }
        Attack::Replay => {
            let pos = log.positions();
            let a = rng.below(pos.len());
            let (ae, ai) = pos[a];
            let copy = log.epochs[ae].events[ai].clone();
            // Anywhere after the original, the very end of the log included.
            let (be, bi) = match pos.get(a + 1 + rng.below(pos.len() - a)) {
                Some(&p) => p,
                None => (
                    log.epochs.len() - 1,
                    log.epochs[log.epochs.len() - 1].events.len(),
                ),
            };
            log.epochs[be].events.insert(bi, copy);
            log.fix_counts();
            log_case(&log, be)
        }
        Attack::SwapCiphertexts => {
            let (a, b) = two(rng, &log);
            let pa = log.epochs[a.0].events[a.1].payload.clone();
            let pb = std::mem::replace(&mut log.epochs[b.0].events[b.1].payload, pa);
            log.epochs[a.0].events[a.1].payload = pb;
            log_case(&log, a.0)
        }
        Attack::BundleSwapKeys | Attack::BundleSwapCiphertexts | Attack::BundleEditRecord => {
            let mut b = honest.bundle(disclosed);
            let t = rng.below(disclosed.len());
            let (e, i) = disclosed[t];
            let pos = honest.positions();
            let mut o = rng.below(pos.len() - 1);
            if pos[o] >= (e, i) {
                o += 1;
            }
            let donor = &honest.epochs[pos[o].0].events[pos[o].1];
            let ev = &mut b.events[t];
            match attack {
                Attack::BundleSwapKeys => ev.key = Some(donor.key.clone()),
                Attack::BundleSwapCiphertexts => ev.payload = donor.payload.clone(),
                _ => {
                    let at = rng.below(ev.record.len());
                    ev.record[at] ^= 1 << rng.below(8);
                }
            }
            bundle_case(&b, e)
        }
        Attack::BundleFork => {
            let last = disclosed.iter().map(|p| p.0).max().unwrap_or(0);
            let k = rng.below(last + 1);
            let f = forked(rng, history, k, true).seal();
            bundle_case(&f.bundle(disclosed), k)
        }
    }
}

/// Positions of an honest bundle: one to three distinct events, in file order.
pub fn disclosed(rng: &mut Rng, log: &SealedLog) -> Vec<(usize, usize)> {
    let pos = log.positions();
    let mut out: Vec<(usize, usize)> = (0..rng.range(1, 3))
        .map(|_| pos[rng.below(pos.len())])
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}
