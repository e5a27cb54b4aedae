//! Case files: one verdict over the evidence of several parties, with the delegation links
//! between their recorders checked (`docs/spec/delegation.md`, section 4).
//!
//! A case file is a trust file ([`crate::trust`]) whose parties also name their bundles (and,
//! for offline use, anchors files), paths relative to the case file:
//!
//! ```toml
//! chain_id = 31337
//! [[party]]
//! name = "Acme (delegating)"
//! recorders = ["0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"]
//! bundles = ["acme.bundle"]
//! anchors = ["acme.anchors.json"]     # optional
//! ```
//!
//! Or a trust file and bundles, each assigned to the party of its recorder
//! ([`Case::with_bundles`]).
//!
//! Each bundle is verified as `afr-verify bundle` does, against the trust narrowed to the
//! party it stands for (a bundle of a recorder no party answers for is tampered, `recorder-id`).
//! Then every reference an opened event makes to another recorder's event
//! (`delegation_provenance.parent_event` and each `delegated_to`) is a [`Link`], judged against
//! the other recorder's bundles, by the rows of `docs/spec/delegation.md` §4 in their order
//! (the spec's table is the reference; `link` follows it row by row):
//!
//! ```text
//!  reference does not parse / names no party / has no leaf hash
//!  wrong role or wrong other end (offer to another recorder, accept of another offer)
//!  linked event not disclosed or unanchored   (linked party if it signed, else citing)
//!  leaf hashes differ                          (linked party if it signed, else citing)
//!  both ends: the accept names the offer; the offer is addressed or acknowledged
//!  time: each event against its own epoch's anchoring, then the cited one against the
//!        citing one's (chain or arbiter times only); else a clock disagreement (the case)
//!  payload withheld without a proven erasure  (linked party)
//!  otherwise                                   verified
//! ```
//!
//! Two bundles of one recorder that commit to different roots for one epoch are a fork, on the
//! party of the second (also when one of them fails only because its root is not the anchored
//! one: the fork, which explains that, is then the party's first failure). A party's verdict
//! combines its bundles' with the links that blame it; the case is tampered if a party is, else
//! incomplete if a party or the case misses anything, else verified.
//! Nothing in a bundle can make this panic or run away: links are as many as the references
//! in opened events, and the chains reported are bounded ([`MAX_CHAINS`]).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use afr_core::{
    Hash32, RecorderId,
    delegation::{CheckedRef, RefProof, Role, check_ref},
    event::EventRef,
    text::escape,
    verify::{Check, Failure, Location, Outcome},
};

use crate::{
    Kind, Origin, PinnedSource, Source, Trust, Verdict,
    anchors::{Anchors, Rpc},
    error::{UsageError, VerifyError},
    trust::Party,
    verify_full,
};

/// Clock skew allowed between two recorders, and between a recorder and the chain, in µs.
pub const SKEW_US: u64 = 60_000_000;
/// Most delegation chains reported (a hostile bundle can make many).
pub const MAX_CHAINS: usize = 100;

/// The tool of the recorder's own event that records the receiving side's receipt (the
/// recorder crate's `DELEGATED_TOOL`): its `intent.args.offer.seq` names the delegating event.
const DELEGATED_TOOL: &str = "afr.delegated";

/// What a case holds: the trust and, for each party, its evidence.
#[derive(Debug, Clone)]
pub struct Case {
    /// The pinned chain, contract, parties and approvers.
    pub trust: Trust,
    /// For each party of [`Case::trust`] (same order), the bundles a case file lists for it.
    pub bundles: Vec<Vec<PathBuf>>,
    /// Bundles assigned to the party whose recorder made them.
    pub loose: Vec<PathBuf>,
    /// The arbiter's own anchors files (`--anchors`; any order, one per recorder), used for any
    /// recorder unless the roots are read from a chain.
    pub anchors: Vec<PathBuf>,
    /// For each party of [`Case::trust`] (same order), the anchors files the case file lists
    /// for it: used for that party's own recorders only (a party's file cannot speak for
    /// another party's recorder), and not where the arbiter gave one for the same recorder.
    pub party_anchors: Vec<Vec<PathBuf>>,
    /// Name, size and SHA-256 of the case file, as read.
    pub digest: Option<(String, u64, Hash32)>,
    /// Whether the parties name their own bundles (a case file): a party without any is then
    /// incomplete. Otherwise a party with no bundle is in the case only if a link names it.
    pub listed: bool,
    /// The case file's directory: files under it are named relative to it in the report.
    pub base: Option<PathBuf>,
}

impl Case {
    /// Reads a case file; bundles and anchors files are relative to its directory. `chain_id`
    /// and `contract` pin as for a trust file (and must agree with it). A file that is not a
    /// case file (a bundle, an export, anything not UTF-8 text) is
    /// [`UsageError::NotACaseFile`].
    pub fn load(
        path: &Path,
        chain_id: Option<u64>,
        contract: Option<&str>,
    ) -> Result<Case, VerifyError> {
        let bytes = std::fs::read(path).map_err(|source| VerifyError::Read {
            path: path.to_owned(),
            source,
        })?;
        let name = path.display().to_string();
        let not_case = |what| UsageError::NotACaseFile {
            name: name.clone(),
            what,
        };
        // Bundles given without --trust: the first one is not the case file it stands for.
        if bundle_recorder(&bytes).is_some() {
            return Err(not_case("a disclosure bundle").into());
        }
        if matches!(
            afr_core::export::LogReader::new(&bytes).next_frame(),
            Ok(Some(afr_core::export::Frame::Start { .. }))
        ) {
            return Err(not_case("a whole-log export").into());
        }
        let digest = (
            name.clone(),
            bytes.len() as u64,
            afr_core::hash::sha256(&[&bytes]),
        );
        let text = String::from_utf8(bytes).map_err(|_| not_case("not UTF-8 text"))?;
        let (trust, evidence) = Trust::case((&name, &text), chain_id, contract)?;
        let base = path.parent().unwrap_or(Path::new(""));
        Ok(Case {
            trust,
            bundles: evidence
                .iter()
                .map(|e| e.bundles.iter().map(|b| base.join(b)).collect())
                .collect(),
            loose: Vec::new(),
            anchors: Vec::new(),
            party_anchors: evidence
                .iter()
                .map(|e| e.anchors.iter().map(|a| base.join(a)).collect())
                .collect(),
            digest: Some(digest),
            listed: true,
            base: Some(base.to_owned()),
        })
    }

    /// A case of `bundles` under `trust`, each assigned to the party of its recorder.
    pub fn with_bundles(trust: Trust, bundles: Vec<PathBuf>) -> Case {
        Case {
            bundles: vec![Vec::new(); trust.parties.len()],
            party_anchors: vec![Vec::new(); trust.parties.len()],
            trust,
            loose: bundles,
            anchors: Vec::new(),
            digest: None,
            listed: false,
            base: None,
        }
    }
}

/// One bundle's verdict, and the trust it was verified against.
#[derive(Debug, Clone)]
pub struct BundleVerdict {
    /// The file, as named.
    pub file: String,
    /// The size of the bytes verified.
    pub size: u64,
    /// The SHA-256 of the bytes verified (what the report names as the evidence judged).
    pub sha256: Hash32,
    /// The trust, narrowed to the party the bundle stands for.
    pub trust: Trust,
    /// What `afr-verify bundle` would answer.
    pub verdict: Verdict,
}

/// A party's verdict: its bundles' and the links that blame it.
#[derive(Debug, Clone)]
pub struct PartyVerdict {
    /// Its name; `None` for the bundles of no pinned party.
    pub name: Option<String>,
    /// Its recorders.
    pub recorders: Vec<RecorderId>,
    /// The answer.
    pub outcome: Outcome,
    /// The first failure, if tampered, and the bundle it is in (`None` for a link's).
    pub first_failure: Option<(Failure, Option<String>)>,
    /// What is missing, if incomplete.
    pub missing: Vec<String>,
    /// Its bundles.
    pub bundles: Vec<BundleVerdict>,
    /// Whether it is part of the case (see [`Case::listed`]).
    pub in_case: bool,
}

impl PartyVerdict {
    /// Records `f` as the party's first failure, unless it has one; a fork replaces an
    /// `anchored-root` failure, which it explains (one of the recorder's two histories is not
    /// the one it anchored).
    fn tamper(&mut self, f: Failure, file: Option<String>) {
        let explains = f.check == Check::Fork
            && self
                .first_failure
                .as_ref()
                .is_some_and(|(g, _)| g.check == Check::AnchoredRoot);
        if self.outcome != Outcome::Tampered || explains {
            self.outcome = Outcome::Tampered;
            self.first_failure = Some((f, file));
        }
    }
}

/// Which reference of an event a link is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LinkKind {
    /// `delegation_provenance.parent_event`: the citing event accepted work from the linked one.
    ParentEvent,
    /// An entry of `delegation_provenance.delegated_to`: the linked event accepted work the
    /// citing side delegated.
    DelegatedTo,
}

impl LinkKind {
    /// `parent_event` or `delegated_to`.
    pub fn name(self) -> &'static str {
        match self {
            LinkKind::ParentEvent => "parent_event",
            LinkKind::DelegatedTo => "delegated_to",
        }
    }
}

/// What backs a reference's leaf hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backing {
    /// A signature of the linked recorder over it: that recorder's word.
    Signed,
    /// No signature: the citing side's word.
    Unsigned,
    /// A signature that does not verify (why): the citing side's word.
    BadSignature(String),
    /// No leaf hash: a position, not an event.
    NoLeafHash,
    /// The reference does not parse (why).
    Malformed(String),
}

impl Backing {
    /// `signed`, `unsigned`, `bad-signature`, `no-leaf-hash` or `malformed`.
    pub fn name(&self) -> &'static str {
        match self {
            Backing::Signed => "signed",
            Backing::Unsigned => "unsigned",
            Backing::BadSignature(_) => "bad-signature",
            Backing::NoLeafHash => "no-leaf-hash",
            Backing::Malformed(_) => "malformed",
        }
    }
}

/// Whom a link's finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The party whose event makes the reference.
    Citing,
    /// The party whose event is referenced.
    Linked,
    /// No party: the case as a whole (the linked recorder is no party).
    Case,
}

impl Blame {
    /// `citing`, `linked` or `case`.
    pub fn name(self) -> &'static str {
        match self {
            Blame::Citing => "citing",
            Blame::Linked => "linked",
            Blame::Case => "case",
        }
    }
}

/// A reference from an opened event to another recorder's event, judged.
#[derive(Debug, Clone)]
pub struct Link {
    /// The citing party (index into [`CaseReport::parties`]).
    pub from_party: usize,
    /// The citing recorder.
    pub from_recorder: RecorderId,
    /// The citing event.
    pub from_seq: u64,
    /// The linked party, if the linked recorder is one's.
    pub to_party: Option<usize>,
    /// The linked recorder (`None` when the reference does not parse).
    pub to_recorder: Option<RecorderId>,
    /// The linked event.
    pub to_seq: u64,
    /// Which reference.
    pub kind: LinkKind,
    /// What backs its leaf hash.
    pub backing: Backing,
    /// The role the reference states (`offer`, `accept` or `plain`; bound by its signature
    /// only when [`Link::backing`] is [`Backing::Signed`]); `None` when it does not parse.
    pub role: Option<&'static str>,
    /// The leaf hash it names.
    pub leaf_hash: Option<Hash32>,
    /// The answer for this link.
    pub status: Outcome,
    /// Whom a tampered or incomplete answer is about.
    pub blame: Option<Blame>,
    /// The failed check, if tampered.
    pub check: Option<Check>,
    /// Why, in words.
    pub why: String,
}

/// One event of a delegation chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Its party's name, if its recorder is a party's.
    pub party: Option<String>,
    /// Its recorder.
    pub recorder: RecorderId,
    /// Its sequence number.
    pub seq: u64,
    /// Its tool, if its payload was opened.
    pub tool: Option<String>,
    /// How the previous step links to it (`parent_event`, `delegated_to`, both joined by `+`,
    /// or `same-log` for a `parent_event` inside one log); `None` for the first step.
    pub via: Option<String>,
    /// The answer of the link(s) from the previous step; `None` for the first step and for
    /// links inside one log (checked against the disclosed leaf, not judged).
    pub status: Option<Outcome>,
}

/// The answer for a whole case.
#[derive(Debug, Clone)]
pub struct CaseReport {
    /// The case's answer.
    pub outcome: Outcome,
    /// The trust of the case.
    pub trust: Trust,
    /// Every party's verdict, in the trust's order; a last entry without a name holds the
    /// bundles of no pinned party, if any.
    pub parties: Vec<PartyVerdict>,
    /// Every cross-recorder link.
    pub links: Vec<Link>,
    /// The delegation chains across parties, each from an event nothing delegated to.
    pub chains: Vec<Vec<Step>>,
    /// What the case misses that no party is blamed for.
    pub missing: Vec<String>,
    /// Free-form lines for the human report.
    pub notes: Vec<String>,
}

/// One bundle, verified.
struct Checked {
    party: Option<usize>,
    file: String,
    /// Size and SHA-256 of the bytes verified.
    size: u64,
    sha256: Hash32,
    trust: Trust,
    verdict: Verdict,
    report: Option<afr_core::bundle::BundleReport>,
    anchors: Option<Anchors>,
    /// Where its anchors' block times came from.
    time_src: TimeSrc,
}

/// A disclosed event of a bundle that verified (or is only incomplete).
#[derive(Debug, Clone)]
struct Known {
    leaf: Hash32,
    timestamp_us: u64,
    epoch: u64,
    /// Its epoch's root matches the one its recorder anchored.
    anchored: bool,
    /// Its payload was opened.
    opened: bool,
    /// Its payload was erased, by a proven erasure.
    erased: bool,
    tool: Option<String>,
    /// Its opened payload's `delegation_provenance.parent_event`.
    parent: Option<EventRef>,
}

/// The recorder a bundle's start frame names, if it has one (the bundle is checked later):
/// which party and anchors file it goes with.
fn bundle_recorder(bytes: &[u8]) -> Option<RecorderId> {
    let mut r = afr_core::cbor::Reader::new(bytes);
    (r.array().ok()? == 3 && r.text().ok()? == afr_core::bundle::BUNDLE_MAGIC).then_some(())?;
    r.uint().ok()?;
    r.fixed().ok()
}

fn hex_id(r: &RecorderId) -> String {
    format!("0x{}", hex::encode(r))
}

/// `1712345678.123456 s` from µs.
fn secs(us: u64) -> String {
    format!("{}.{:06} s", us / 1_000_000, us % 1_000_000)
}

/// Verifies `case`, reading anchored roots from `src`: a chain ([`Source::Rpc`], read at one
/// block for every bundle) or the case's anchors files (with [`Source::File`], one more).
/// Errors are I/O, RPC or usage errors (nothing was decided).
pub fn verify_case(case: &Case, src: Source<'_>) -> Result<CaseReport, VerifyError> {
    let trust = &case.trust;
    let mut notes = Vec::new();
    let src = PinnedSource::of(src, trust.chain_id)?;
    // The arbiter's files first (`None`), then each party's; each pinned to the case's chain.
    let mut anchor_files: Vec<(Option<usize>, &Path)> =
        case.anchors.iter().map(|p| (None, p.as_path())).collect();
    if let Some(Origin::File(p)) = src.map(|s| s.origin()) {
        anchor_files.push((None, p));
    }
    for (i, files) in case.party_anchors.iter().enumerate() {
        anchor_files.extend(files.iter().map(|p| (Some(i), p.as_path())));
    }
    let anchor_files = anchor_files
        .into_iter()
        .map(|(by, p)| Ok((by, p, PinnedSource::new(Origin::File(p), trust.chain_id)?)))
        .collect::<Result<Vec<_>, UsageError>>()?;
    if case.loose.is_empty() && case.bundles.iter().all(Vec::is_empty) {
        return Err(UsageError::NoBundle.into());
    }
    // One block for the whole case: every bundle is read against the same chain state.
    let mut rpc = None;
    if let Some(s) = src
        && let Origin::Rpc { url, block, .. } = s.origin()
    {
        let (_, block) = Rpc::pinned(url, s.chain_id(), block)?;
        if !anchor_files.is_empty() {
            notes.push(format!(
                "anchored roots read from the chain at block {block}; the anchors files were not used"
            ));
        }
        rpc = Some(s.at_block(block));
    }
    // The anchors file of each recorder, and who gave it.
    let mut by_recorder: BTreeMap<RecorderId, (&Path, PinnedSource<'_>, Option<usize>)> =
        BTreeMap::new();
    if rpc.is_none() {
        for &(by, p, pinned) in &anchor_files {
            let a = Anchors::load(p)?;
            let rec =
                crate::verdict::parse_addr(&a.recorder, &format!("recorder of {}", p.display()))?;
            if let Some(i) = by {
                let lister = trust.parties.get(i);
                if !lister.is_some_and(|l| l.recorders.contains(&rec)) {
                    notes.push(format!(
                        "the anchors file {} listed by party \"{}\" is for recorder {}, which is not that party's: not used (a party's anchors count only for its own recorders)",
                        p.display(),
                        lister.map_or("?", |l| l.name.as_str()),
                        hex_id(&rec)
                    ));
                    continue;
                }
                if let Some((first, _, None)) = by_recorder.get(&rec) {
                    notes.push(format!(
                        "the anchors file {} listed by party \"{}\" for recorder {} was not used: the arbiter's {} was given for it",
                        p.display(),
                        lister.map_or("?", |l| l.name.as_str()),
                        hex_id(&rec),
                        first.display()
                    ));
                    continue;
                }
            }
            if let Some((first, _, _)) = by_recorder.insert(rec, (p, pinned, by)) {
                return Err(UsageError::AnchorsTwice {
                    recorder: rec,
                    first: first.to_owned(),
                    second: p.to_owned(),
                }
                .into());
            }
        }
    }

    // The bundles, each with the party it stands for.
    let mut jobs: Vec<(Option<usize>, &Path)> = Vec::new();
    for (i, files) in case.bundles.iter().enumerate() {
        jobs.extend(files.iter().map(|f| (Some(i), f.as_path())));
    }
    jobs.extend(case.loose.iter().map(|f| (None, f.as_path())));
    let mut checked = Vec::with_capacity(jobs.len());
    for (listed, path) in jobs {
        let bytes = std::fs::read(path).map_err(|source| VerifyError::Read {
            path: path.to_owned(),
            source,
        })?;
        let recorder = bundle_recorder(&bytes);
        let party = match listed {
            Some(i) => Some(i).filter(|i| *i < trust.parties.len()),
            None => {
                recorder.and_then(|r| trust.parties.iter().position(|p| p.recorders.contains(&r)))
            }
        };
        // Narrowed to the party it stands for: a bundle of another recorder is tampered.
        let narrowed = match party.and_then(|i| trust.parties.get(i)) {
            Some(p) => Trust {
                parties: vec![p.clone()],
                ..trust.clone()
            },
            None => trust.clone(),
        };
        let (src, time_src) = match (rpc, recorder.and_then(|r| by_recorder.get(&r))) {
            (Some(chain), _) => (Some(chain), TimeSrc::Chain),
            (None, Some((_, file, by))) => {
                (Some(*file), by.map_or(TimeSrc::Arbiter, TimeSrc::Party))
            }
            (None, None) => (None, TimeSrc::Arbiter),
        };
        let c = verify_full(Kind::Bundle, &bytes, &narrowed, src)?;
        checked.push(Checked {
            party,
            size: bytes.len() as u64,
            sha256: afr_core::hash::sha256(&[&bytes]),
            time_src,
            file: case
                .base
                .as_deref()
                .and_then(|b| path.strip_prefix(b).ok())
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(path)
                .display()
                .to_string(),
            trust: narrowed,
            verdict: c.verdict,
            report: c.bundle,
            anchors: c.anchors,
        });
    }
    Ok(judge(case, checked, notes))
}

/// Everything after the bundles are verified: parties, links, chains, the case's answer.
fn judge(case: &Case, mut checked: Vec<Checked>, notes: Vec<String>) -> CaseReport {
    let trust = &case.trust;
    let n = trust.parties.len();
    let replays = pool_nonces(&mut checked, n);
    let mut parties: Vec<PartyVerdict> = trust
        .parties
        .iter()
        .enumerate()
        .map(|(i, p)| PartyVerdict {
            name: Some(p.name.clone()),
            recorders: p.recorders.clone(),
            outcome: Outcome::Verified,
            first_failure: None,
            missing: Vec::new(),
            bundles: Vec::new(),
            in_case: case.listed || case.bundles.get(i).is_some_and(|b| !b.is_empty()),
        })
        .collect();
    parties.push(PartyVerdict {
        name: None,
        recorders: Vec::new(),
        outcome: Outcome::Verified,
        first_failure: None,
        missing: Vec::new(),
        bundles: Vec::new(),
        in_case: false,
    });
    // What the bundles that did not fail disclose, by recorder and sequence number.
    let mut known: BTreeMap<(RecorderId, u64), Known> = BTreeMap::new();
    // When each anchored epoch was anchored: (block, block time, where the time came from).
    let mut anchored_at: AnchoredAt = BTreeMap::new();
    // Epoch roots by recorder, to find two bundles of one recorder that fork.
    let mut roots: BTreeMap<(RecorderId, u64), (Hash32, String)> = BTreeMap::new();
    let mut failed: BTreeSet<RecorderId> = BTreeSet::new();
    for c in &checked {
        let i = c.party.unwrap_or(n);
        let p = &mut parties[i];
        p.in_case = true;
        let v = &c.verdict;
        match v.outcome {
            Outcome::Tampered => {
                if let Some(f) = &v.first_failure {
                    p.tamper(f.clone(), Some(c.file.clone()));
                }
                if let Some(r) = v.recorder {
                    failed.insert(r);
                }
            }
            _ => p
                .missing
                .extend(v.missing.iter().map(|m| format!("{}: {m}", c.file))),
        }
        let Some(rec) = v.recorder else { continue };
        // A bundle whose only failure is a root other than the anchored one still commits to
        // its roots: compared with the recorder's other bundles, it shows the fork.
        let roots_hold = matches!(v.outcome, Outcome::Verified | Outcome::Incomplete)
            || v.first_failure
                .as_ref()
                .is_some_and(|f| f.check == Check::AnchoredRoot);
        for (e, root) in v.epoch_roots.iter().filter(|_| roots_hold) {
            match roots.get(&(rec, *e)) {
                Some((r, other)) if r != root => p.tamper(
                    Failure {
                        check: Check::Fork,
                        location: Location::Epoch(*e),
                        detail: format!(
                            "bundles {other} and {} of recorder {} commit to different roots for epoch {e} ({r} and {root})",
                            c.file,
                            hex_id(&rec)
                        ),
                    },
                    Some(c.file.clone()),
                ),
                Some(_) => {}
                None => {
                    roots.insert((rec, *e), (*root, c.file.clone()));
                }
            }
        }
        let (Some(rep), Outcome::Verified | Outcome::Incomplete) = (&c.report, v.outcome) else {
            continue;
        };
        let anchored: BTreeSet<u64> = v.anchors.iter().map(|a| a.0).collect();
        for &(e, _, block, _) in &v.anchors {
            let time = c
                .anchors
                .as_ref()
                .and_then(|a| a.roots.get(&e))
                .and_then(|p| p.block_time);
            anchored_at
                .entry((rec, e))
                .or_insert((block, time, c.time_src));
        }
        let payloads: BTreeMap<u64, &afr_core::event::Payload> =
            rep.opened.iter().map(|(s, p)| (*s, p)).collect();
        for (seq, l) in &rep.leaves {
            let opened = payloads.get(seq);
            known.entry((rec, *seq)).or_insert_with(|| Known {
                leaf: l.leaf,
                timestamp_us: l.timestamp_us,
                epoch: l.epoch,
                anchored: anchored.contains(&l.epoch),
                opened: opened.is_some(),
                erased: rep.erased.contains(seq),
                tool: opened.map(|p| p.intent.tool.clone()),
                parent: opened
                    .and_then(|p| p.delegation_provenance.as_ref())
                    .and_then(|d| d.parent_event.clone()),
            });
        }
    }
    for (i, f, file) in replays {
        if let Some(p) = parties.get_mut(i) {
            p.in_case = true;
            p.tamper(f, Some(file));
        }
    }
    // Recorders with a bundle that did not fail.
    let mut with_bundle: BTreeSet<RecorderId> = BTreeSet::new();
    for c in &checked {
        if let (Some(r), Outcome::Verified | Outcome::Incomplete) =
            (c.verdict.recorder, c.verdict.outcome)
        {
            with_bundle.insert(r);
        }
    }

    // What each delegating side's own log records of the accepts of its offers.
    let mut acks: BTreeMap<(RecorderId, u64), BTreeSet<(RecorderId, u64)>> = BTreeMap::new();
    for c in &checked {
        let (Some(own), Some(rep), Outcome::Verified | Outcome::Incomplete) =
            (c.verdict.recorder, &c.report, c.verdict.outcome)
        else {
            continue;
        };
        for (seq, payload) in &rep.opened {
            let Some(d) = &payload.delegation_provenance else {
                continue;
            };
            let (offer, _) = origin_of(payload, *seq);
            for r in &d.delegated_to {
                if let Ok(c) = check_ref(r, &own) {
                    acks.entry((own, offer))
                        .or_default()
                        .insert((c.recorder, r.seq));
                }
            }
        }
    }
    // Every cross-recorder reference of an opened event of a bundle that did not fail.
    let mut links: Vec<Link> = Vec::new();
    let mut edges: Edges = BTreeMap::new();
    // An event disclosed in two bundles is read once.
    let mut read: BTreeSet<(RecorderId, u64)> = BTreeSet::new();
    for c in &checked {
        let (Some(own), Some(rep), Some(from_party), Outcome::Verified | Outcome::Incomplete) =
            (c.verdict.recorder, &c.report, c.party, c.verdict.outcome)
        else {
            continue;
        };
        for (seq, payload) in &rep.opened {
            let Some(d) = &payload.delegation_provenance else {
                continue;
            };
            if !read.insert((own, *seq)) {
                continue;
            }
            let refs = d
                .parent_event
                .iter()
                .map(|r| (LinkKind::ParentEvent, r))
                .chain(d.delegated_to.iter().map(|r| (LinkKind::DelegatedTo, r)));
            let (origin, origin_leaf) = origin_of(payload, *seq);
            let origin_leaf = origin_leaf.or_else(|| {
                (origin != *seq)
                    .then(|| known.get(&(own, origin)).map(|k| k.leaf))
                    .flatten()
            });
            for (kind, r) in refs {
                let citing = Site {
                    party: from_party,
                    recorder: own,
                    seq: *seq,
                };
                let link = link(
                    &citing,
                    kind,
                    r,
                    (origin, origin_leaf),
                    &Ctx {
                        trust,
                        known: &known,
                        anchored_at: &anchored_at,
                        with_bundle: &with_bundle,
                        failed: &failed,
                        acks: &acks,
                    },
                );
                let Some(link) = link else {
                    // A reference inside this log: part of the chain if it holds.
                    if kind == LinkKind::ParentEvent
                        && let Some(k) = known.get(&(own, r.seq))
                        && r.leaf_hash
                            .as_deref()
                            .is_none_or(|h| Hash32::from_hex(h) == Some(k.leaf))
                    {
                        edges
                            .entry(((own, r.seq), (own, *seq)))
                            .or_default()
                            .0
                            .insert("same-log");
                    }
                    continue;
                };
                if let Some(to) = link.to_recorder {
                    let (from, to) = match kind {
                        LinkKind::ParentEvent => ((to, link.to_seq), (own, *seq)),
                        LinkKind::DelegatedTo => ((own, origin), (to, link.to_seq)),
                    };
                    let e = edges.entry((from, to)).or_default();
                    e.0.insert(kind.name());
                    e.1 = Some(worst(e.1, link.status));
                }
                links.push(link);
            }
        }
    }
    // The links' findings, on the parties they are about.
    let mut missing = Vec::new();
    for l in &links {
        let who = match l.blame {
            Some(Blame::Citing) => Some(l.from_party),
            Some(Blame::Linked) => l.to_party,
            _ => None,
        };
        match (l.status, who) {
            (Outcome::Verified, _) => {}
            (Outcome::Tampered, Some(i)) => {
                let at = if l.blame == Some(Blame::Linked) {
                    l.to_seq
                } else {
                    l.from_seq
                };
                if let Some(p) = parties.get_mut(i) {
                    p.in_case = true;
                    p.tamper(
                        Failure {
                            check: l.check.unwrap_or(Check::DelegationLink),
                            location: Location::Event(at),
                            detail: l.why.clone(),
                        },
                        None,
                    );
                }
            }
            (_, Some(i)) => {
                if let Some(p) = parties.get_mut(i) {
                    p.in_case = true;
                    p.missing.push(l.why.clone());
                }
            }
            (_, None) => missing.push(l.why.clone()),
        }
    }
    for (i, p) in parties.iter_mut().enumerate() {
        let has = checked.iter().any(|c| c.party.unwrap_or(n) == i);
        if p.in_case && !has && p.name.is_some() {
            p.missing.push("no bundle of this party was given".into());
        }
        if p.outcome != Outcome::Tampered {
            p.outcome = if p.missing.is_empty() {
                Outcome::Verified
            } else {
                Outcome::Incomplete
            };
        }
    }
    for c in checked {
        parties[c.party.unwrap_or(n)].bundles.push(BundleVerdict {
            file: c.file,
            size: c.size,
            sha256: c.sha256,
            trust: c.trust,
            verdict: c.verdict,
        });
    }
    let involved = parties.iter().filter(|p| p.in_case);
    let outcome = if involved.clone().any(|p| p.outcome == Outcome::Tampered) {
        Outcome::Tampered
    } else if !missing.is_empty() || involved.clone().any(|p| p.outcome == Outcome::Incomplete) {
        Outcome::Incomplete
    } else {
        Outcome::Verified
    };
    let chains = chains(&edges, &known, trust);
    CaseReport {
        outcome,
        trust: trust.clone(),
        parties,
        links,
        chains,
        missing,
        notes,
    }
}

/// A signed approval's nonce is single-use per recorder across every bundle of the case: the
/// same approval disclosed for two events in two bundles (each of which alone verifies) is a
/// replay. The first event by sequence number keeps it; each later one is marked invalid
/// (`approval-nonce`) in its bundle's verdict, and returned as a failure of its party, with
/// the bundle. The same event disclosed in two bundles is not a replay.
fn pool_nonces(checked: &mut [Checked], stray: usize) -> Vec<(usize, Failure, String)> {
    use crate::approvals::Status;
    // (recorder, nonce) -> every (seq, bundle index) whose accepted signature used it.
    let mut uses: BTreeMap<(RecorderId, String), BTreeSet<(u64, usize)>> = BTreeMap::new();
    for (b, c) in checked.iter().enumerate() {
        let Some(rec) = c.verdict.recorder else {
            continue;
        };
        if c.verdict.outcome == Outcome::Tampered {
            continue;
        }
        for a in &c.verdict.approvals {
            if let (Status::Signed, Some(nonce)) = (a.status, &a.nonce) {
                uses.entry((rec, nonce.clone()))
                    .or_default()
                    .insert((a.seq, b));
            }
        }
    }
    let mut out = Vec::new();
    for ((_, nonce), used) in uses {
        let Some(&(first, first_b)) = used.first() else {
            continue;
        };
        for &(seq, b) in used.iter().filter(|(s, _)| *s != first) {
            let first_file = checked
                .get(first_b)
                .map(|c| c.file.clone())
                .unwrap_or_default();
            let Some(c) = checked.get_mut(b) else {
                continue;
            };
            let detail = format!(
                "the approval's nonce {nonce} was already used by event {first} (bundle {first_file}): the same approval replayed across bundles"
            );
            for a in c.verdict.approvals.iter_mut().filter(|a| a.seq == seq) {
                a.status = Status::Invalid;
                a.check = Some(Check::ApprovalNonce);
                a.detail = Some(detail.clone());
            }
            out.push((
                c.party.unwrap_or(stray),
                Failure {
                    check: Check::ApprovalNonce,
                    location: Location::Event(seq),
                    detail,
                },
                c.file.clone(),
            ));
        }
    }
    out
}

/// The delegating event an opened event at `seq` stands for, and its leaf hash if named: for
/// `afr.delegated`, the offer its `intent.args.offer` names; else the event itself.
fn origin_of(payload: &afr_core::event::Payload, seq: u64) -> (u64, Option<Hash32>) {
    if payload.intent.tool != DELEGATED_TOOL {
        return (seq, None);
    }
    let offer = &payload.intent.args["offer"];
    (
        offer["seq"].as_u64().unwrap_or(seq),
        offer["leaf_hash"]
            .as_str()
            .and_then(|h| Hash32::from_hex(&h.to_ascii_lowercase())),
    )
}

/// The worse of two answers: tampered, then incomplete, then verified.
fn worst(a: Option<Outcome>, b: Outcome) -> Outcome {
    let rank = |o: Outcome| match o {
        Outcome::Verified => 0,
        Outcome::Incomplete => 1,
        Outcome::Tampered => 2,
    };
    match a {
        Some(a) if rank(a) >= rank(b) => a,
        _ => b,
    }
}

/// The event that makes a reference.
struct Site {
    party: usize,
    recorder: RecorderId,
    seq: u64,
}

/// What links are judged against.
struct Ctx<'a> {
    trust: &'a Trust,
    known: &'a BTreeMap<(RecorderId, u64), Known>,
    anchored_at: &'a AnchoredAt,
    with_bundle: &'a BTreeSet<RecorderId>,
    failed: &'a BTreeSet<RecorderId>,
    /// For each delegating event (recorder, seq): the accepting events its own log records
    /// receipts of (`delegated_to` of its opened `afr.delegated` events).
    acks: &'a BTreeMap<(RecorderId, u64), BTreeSet<(RecorderId, u64)>>,
}

/// Where a block time came from: only the chain, or a file the arbiter gave, can date one
/// party's epoch to convict another party.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimeSrc {
    /// Read from the chain (`--rpc`).
    Chain,
    /// An anchors file given on the command line (`--anchors`): the arbiter's own.
    Arbiter,
    /// An anchors file a party's case-file entry lists: that party's word.
    Party(usize),
}

/// When an anchored epoch was anchored: its block, the block's time if known, and where the
/// time came from.
type AnchoredAt = BTreeMap<(RecorderId, u64), (u64, Option<u64>, TimeSrc)>;

/// Judges reference `r` of kind `kind` made by `citing` (whose delegation `origin` names, for
/// a `delegated_to` reference: the offer's sequence number and leaf hash); `None` for a
/// reference to the citing recorder's own log. The rows of the module table, in order.
fn link(
    citing: &Site,
    kind: LinkKind,
    r: &EventRef,
    origin: (u64, Option<Hash32>),
    cx: &Ctx<'_>,
) -> Option<Link> {
    let mut l = Link {
        from_party: citing.party,
        from_recorder: citing.recorder,
        from_seq: citing.seq,
        to_party: None,
        to_recorder: None,
        to_seq: r.seq,
        kind,
        backing: Backing::Unsigned,
        role: None,
        leaf_hash: None,
        status: Outcome::Incomplete,
        blame: None,
        check: None,
        why: String::new(),
    };
    let name = |i: Option<usize>| -> String {
        match i.and_then(|i| cx.trust.parties.get(i)) {
            Some(Party { name, .. }) => format!("party \"{name}\""),
            None => "no party".into(),
        }
    };
    let from = format!(
        "event {} of recorder {}",
        citing.seq,
        hex_id(&citing.recorder)
    );
    let own_known = cx.known.get(&(citing.recorder, citing.seq));
    let own_anchored = own_known.is_some_and(|k| k.anchored);
    let CheckedRef {
        recorder: rec,
        proof,
        role,
    } = match check_ref(r, &citing.recorder) {
        Ok(x) => x,
        Err(why) => {
            // A reference that names no event cites nothing; whether it is the citing party's
            // word depends on its event being anchored.
            l.backing = Backing::Malformed(why.clone());
            l.blame = Some(Blame::Citing);
            let reference = format!("{from} makes a {} reference", kind.name());
            if own_anchored {
                l.status = Outcome::Tampered;
                l.check = Some(Check::DelegationLink);
                l.why = format!("{reference} that names no event: {why}");
            } else {
                l.why = format!(
                    "{reference} that does not parse ({why}), and its epoch is not anchored"
                );
            }
            return Some(l);
        }
    };
    if rec == citing.recorder {
        return None;
    }
    l.to_recorder = Some(rec);
    l.role = Some(role.name());
    let to = format!("event {} of recorder {}", r.seq, hex_id(&rec));
    let leaf = match &proof {
        RefProof::Unbound => None,
        RefProof::Bound(h) | RefProof::Signed(h) | RefProof::BadSignature(h, _) => Some(*h),
    };
    let signed = matches!(proof, RefProof::Signed(_));
    l.leaf_hash = leaf;
    l.backing = match &proof {
        RefProof::Unbound => Backing::NoLeafHash,
        RefProof::Bound(_) => Backing::Unsigned,
        RefProof::Signed(_) => Backing::Signed,
        RefProof::BadSignature(_, why) => Backing::BadSignature(why.clone()),
    };
    let Some(to_party) = cx
        .trust
        .parties
        .iter()
        .position(|p| p.recorders.contains(&rec))
    else {
        l.blame = Some(Blame::Case);
        l.why = format!(
            "{from} cites {to}, and recorder {} is no party of the case",
            hex_id(&rec)
        );
        return Some(l);
    };
    l.to_party = Some(to_party);
    let incomplete = |mut l: Link, blame, why: String| {
        l.status = Outcome::Incomplete;
        l.blame = Some(blame);
        l.why = why;
        Some(l)
    };
    let tampered = |mut l: Link, blame, check, why: String| {
        l.status = Outcome::Tampered;
        l.blame = Some(blame);
        l.check = Some(check);
        l.why = why;
        Some(l)
    };
    // The citing side's own claim is false: tampered once its event is anchored (it can no
    // longer be taken back), incomplete before.
    let citing_fault = |l: Link, why: String| {
        if own_anchored {
            tampered(l, Blame::Citing, Check::DelegationLink, why)
        } else {
            incomplete(
                l,
                Blame::Citing,
                format!("{why}; the citing event's epoch is not anchored"),
            )
        }
    };
    let Some(leaf) = leaf else {
        return incomplete(
            l,
            Blame::Citing,
            format!("{from} cites {to} without a leaf hash: a position, not an event"),
        );
    };
    // What the reference says of the delegation's other end, before anything is looked up.
    let (origin_seq, origin_leaf) = origin;
    let offer_of = |rec: &RecorderId, seq: u64, leaf: &Hash32| {
        format!("offer {seq} of recorder {} (leaf {leaf})", hex_id(rec))
    };
    match (kind, &role) {
        (LinkKind::ParentEvent, Role::Accept { .. }) => {
            return citing_fault(
                l,
                format!(
                    "{from} names as the offer it accepted a receipt of {to} that is itself an accept, not an offer"
                ),
            );
        }
        (LinkKind::ParentEvent, Role::Offer { to: offered }) if *offered != citing.recorder => {
            return citing_fault(
                l,
                format!(
                    "{from} accepts {to}, which {} offered to recorder {}, not to it",
                    if signed {
                        "its receipt (signed by its recorder) says was"
                    } else {
                        "the reference (not signed by its recorder) says was"
                    },
                    hex_id(offered)
                ),
            );
        }
        (LinkKind::DelegatedTo, Role::Offer { .. }) => {
            return citing_fault(
                l,
                format!(
                    "{from} names as the accept of its delegation a receipt of {to} that is an offer"
                ),
            );
        }
        (
            LinkKind::DelegatedTo,
            Role::Accept {
                recorder: ar,
                seq: aseq,
                leaf: aleaf,
            },
        ) => {
            let same = *ar == citing.recorder
                && *aseq == origin_seq
                && origin_leaf.is_none_or(|o| o == *aleaf);
            if !same {
                return citing_fault(
                    l,
                    format!(
                        "{from} pairs its offer {origin_seq} with {to}, whose receipt{} accepts {}",
                        if signed {
                            " (signed by its recorder)"
                        } else {
                            ""
                        },
                        offer_of(ar, *aseq, aleaf)
                    ),
                );
            }
        }
        _ => {}
    }
    // The afr.delegated event's own claim about its offer, against its own log.
    if kind == LinkKind::DelegatedTo
        && let (Some(o), Some(k)) = (origin_leaf, cx.known.get(&(citing.recorder, origin_seq)))
        && k.leaf != o
    {
        return citing_fault(
            l,
            format!(
                "{from} names its offer {origin_seq} with leaf {o}, and its own log holds leaf {} there",
                k.leaf
            ),
        );
    }
    // Whose word the cited event is: the linked recorder's, if it signed the receipt; else
    // only the citing side's, whose problem it is if the event cannot be found.
    let vouched = if signed { Blame::Linked } else { Blame::Citing };
    let Some(target) = cx.known.get(&(rec, r.seq)) else {
        let why = if cx.with_bundle.contains(&rec) {
            format!("{to}, cited by {from}, is not disclosed")
        } else if cx.failed.contains(&rec) {
            format!("{to}, cited by {from}: the bundle of its recorder did not verify")
        } else {
            format!(
                "{to}, cited by {from}: no bundle of recorder {} was given ({})",
                hex_id(&rec),
                name(Some(to_party))
            )
        };
        let why = if signed {
            why
        } else {
            format!(
                "{why}; the reference is not signed by recorder {}, so it is {from}'s claim alone",
                hex_id(&rec)
            )
        };
        return incomplete(l, vouched, why);
    };
    if !target.anchored {
        return incomplete(
            l,
            vouched,
            format!(
                "{to}, cited by {from}, is in epoch {} whose anchored root was not checked",
                target.epoch
            ),
        );
    }
    if leaf != target.leaf && signed {
        return tampered(
            l,
            Blame::Linked,
            Check::DelegationLink,
            format!(
                "recorder {} signed a receipt for leaf {leaf} at seq {} (held by {from}) and anchored leaf {} there",
                hex_id(&rec),
                r.seq,
                target.leaf
            ),
        );
    }
    let Some(own) = own_known.filter(|k| k.anchored) else {
        return incomplete(
            l,
            Blame::Citing,
            format!("{from} cites {to}, and the citing event's epoch is not anchored"),
        );
    };
    if leaf != target.leaf {
        let backing = match &proof {
            RefProof::BadSignature(_, why) => {
                format!("with a receipt signature that does not verify ({why})")
            }
            _ => "without a receipt signature".into(),
        };
        return tampered(
            l,
            Blame::Citing,
            Check::DelegationLink,
            format!(
                "{from} cites leaf {leaf} at {to}, {backing}; recorder {} anchored leaf {} there",
                hex_id(&rec),
                target.leaf
            ),
        );
    }
    // Both ends: the other side's word that this delegation is the one it took part in.
    let mut notes: Vec<String> = Vec::new();
    match kind {
        LinkKind::DelegatedTo => {
            // The accepting event names its parent: it must be this offer.
            if let Some(p) = &target.parent {
                let names_offer = check_ref(p, &rec).is_ok_and(|c| {
                    c.recorder == citing.recorder
                        && p.seq == origin_seq
                        && match (&c.proof, origin_leaf) {
                            (
                                RefProof::Bound(h)
                                | RefProof::Signed(h)
                                | RefProof::BadSignature(h, _),
                                Some(o),
                            ) => *h == o,
                            (RefProof::Unbound, _) => false,
                            (_, None) => true,
                        }
                });
                if !names_offer {
                    let named = format!(
                        "its parent_event is event {} of recorder {}",
                        p.seq,
                        p.recorder.as_deref().unwrap_or("(its own)")
                    );
                    return if signed && matches!(role, Role::Accept { .. }) {
                        tampered(
                            l,
                            Blame::Linked,
                            Check::DelegationLink,
                            format!(
                                "recorder {} signed a receipt saying {to} accepts offer {origin_seq} of recorder {}, and {named}",
                                hex_id(&rec),
                                hex_id(&citing.recorder)
                            ),
                        )
                    } else {
                        tampered(
                            l,
                            Blame::Citing,
                            Check::DelegationLink,
                            format!(
                                "{from} says {to} accepted its offer {origin_seq}, and {named}: it accepted another delegation"
                            ),
                        )
                    };
                }
            } else if target.opened {
                // A signed accept of this very offer on an event that names no parent: the
                // receiving recorder signed one thing and recorded another.
                let blame = if signed && matches!(role, Role::Accept { .. }) {
                    Blame::Linked
                } else {
                    Blame::Citing
                };
                return tampered(
                    l,
                    blame,
                    Check::DelegationLink,
                    format!(
                        "{from} says {to} accepted its offer {origin_seq}, and {to} names no parent_event: it accepted no delegation"
                    ),
                );
            } else if !(signed && matches!(role, Role::Accept { .. })) {
                // Not opened (withheld or erased): only a signed accept of this offer binds it.
                return incomplete(
                    l,
                    Blame::Citing,
                    format!(
                        "{to} is not opened, and the reference is not a validly signed accept of offer {origin_seq}: nothing shows {to} accepted this delegation"
                    ),
                );
            }
            if !matches!(role, Role::Accept { .. }) || !signed {
                notes.push(format!(
                    "the receipt is {} and does not bind the offer it answers{}",
                    if signed {
                        "a plain receipt (made before receipts named their roles)"
                    } else {
                        "not signed by the receiving recorder"
                    },
                    if target.opened {
                        "; the accepting event's own parent_event names this offer"
                    } else {
                        ""
                    }
                ));
            }
        }
        LinkKind::ParentEvent => {
            let addressed = signed && matches!(role, Role::Offer { .. });
            let acknowledged = cx
                .acks
                .get(&(rec, r.seq))
                .is_some_and(|s| s.contains(&(citing.recorder, citing.seq)));
            if !addressed && !acknowledged {
                if signed {
                    notes.push(
                        "a plain receipt (made before receipts named their roles): it does not name the recorder the offer was made to".into(),
                    );
                } else {
                    return incomplete(
                        l,
                        Blame::Citing,
                        format!(
                            "{from} accepts {to}, but nothing of recorder {} says the offer was made to it: the reference is not signed by that recorder ({}), and its log records no receipt of this accept",
                            hex_id(&rec),
                            match &proof {
                                RefProof::BadSignature(_, why) => why.clone(),
                                _ => "no signature".into(),
                            }
                        ),
                    );
                }
            } else if !addressed {
                notes.push(format!(
                    "the offer's reference is not an addressed, signed offer; recorder {}'s own log records the receipt of this accept",
                    hex_id(&rec)
                ));
            }
        }
    }
    // Time. First each event against its own epoch's anchoring (a claim that is impossible on
    // its own), then the cited event against the anchoring of the citing one (whose record
    // already holds its leaf), dated from the chain or the arbiter's file only; a citing
    // event dated before what it cites, with neither impossible, is a clock disagreement.
    let dated_after = |who: &str, k: &Known, rec: &RecorderId| -> Option<String> {
        let &(block, Some(time), _) = cx.anchored_at.get(&(*rec, k.epoch))? else {
            return None;
        };
        (k.timestamp_us > time.saturating_mul(1_000_000).saturating_add(SKEW_US)).then(|| {
            format!(
                "{who} is dated {}, more than 60 s after block {block} (time {time} s) anchored its own epoch {}",
                secs(k.timestamp_us),
                k.epoch
            )
        })
    };
    if let Some(why) = dated_after(&to, target, &rec) {
        return tampered(l, Blame::Linked, Check::DelegationTime, why);
    }
    if let Some(why) = dated_after(&from, own, &citing.recorder) {
        return tampered(l, Blame::Citing, Check::DelegationTime, why);
    }
    if let Some(&(block, Some(time), src)) = cx.anchored_at.get(&(citing.recorder, own.epoch))
        && matches!(src, TimeSrc::Chain | TimeSrc::Arbiter)
    {
        let limit = time.saturating_mul(1_000_000).saturating_add(SKEW_US);
        if target.timestamp_us > limit {
            return tampered(
                l,
                Blame::Linked,
                Check::DelegationTime,
                format!(
                    "{to} is dated {}, more than 60 s after block {block} (time {time} s) anchored the epoch of {from}, which already cites it",
                    secs(target.timestamp_us)
                ),
            );
        }
    }
    if own.timestamp_us.saturating_add(SKEW_US) < target.timestamp_us {
        return incomplete(
            l,
            Blame::Case,
            format!(
                "{from} is dated {}, more than 60 s before {to} it cites ({}): the two recorders' clocks disagree, and no anchoring time shows which one is wrong",
                secs(own.timestamp_us),
                secs(target.timestamp_us)
            ),
        );
    }
    if !(target.opened || target.erased) {
        return incomplete(
            l,
            Blame::Linked,
            format!(
                "{to}, cited by {from}, matches the leaf hash, but its payload is withheld and no erasure of it is proven"
            ),
        );
    }
    if let RefProof::BadSignature(_, why) = &proof {
        notes.push(format!("the receipt's signature does not verify ({why})"));
    }
    l.status = Outcome::Verified;
    l.why = format!(
        "{to} is disclosed under an anchored root, with the leaf hash that {from} cites{}{}",
        if target.erased {
            " (its payload was erased, proven by its recorder's afr.erase event)"
        } else {
            ""
        },
        notes.iter().map(|n| format!("; {n}")).collect::<String>()
    );
    Some(l)
}

/// An event, by recorder and sequence number.
type Node = (RecorderId, u64);

/// The chain's edges, delegating event to delegated one: how each is known (`parent_event`,
/// `delegated_to`, `same-log`) and the worst answer of the links that make it.
type Edges = BTreeMap<(Node, Node), (BTreeSet<&'static str>, Option<Outcome>)>;

/// The delegation chains: every path from an event no edge leads to, at most [`MAX_CHAINS`].
fn chains(edges: &Edges, known: &BTreeMap<Node, Known>, trust: &Trust) -> Vec<Vec<Step>> {
    let mut next: BTreeMap<Node, Vec<(Node, String, Option<Outcome>)>> = BTreeMap::new();
    let mut has_parent: BTreeSet<Node> = BTreeSet::new();
    let mut nodes: BTreeSet<Node> = BTreeSet::new();
    for ((from, to), (via, status)) in edges {
        if from == to {
            continue;
        }
        let via: Vec<&str> = via.iter().copied().collect();
        next.entry(*from)
            .or_default()
            .push((*to, via.join("+"), *status));
        has_parent.insert(*to);
        nodes.insert(*from);
        nodes.insert(*to);
    }
    let step = |n: Node, via: Option<String>, status: Option<Outcome>| Step {
        party: trust
            .parties
            .iter()
            .find(|p| p.recorders.contains(&n.0))
            .map(|p| p.name.clone()),
        recorder: n.0,
        seq: n.1,
        tool: known.get(&n).and_then(|k| k.tool.clone()),
        via,
        status,
    };
    let mut out: Vec<Vec<Step>> = Vec::new();
    let mut seen: BTreeSet<Node> = BTreeSet::new();
    // Roots first, then whatever only a cycle reaches.
    let starts: Vec<Node> = nodes
        .iter()
        .filter(|n| !has_parent.contains(n))
        .chain(nodes.iter().filter(|n| has_parent.contains(n)))
        .copied()
        .collect();
    for s in starts {
        if seen.contains(&s) || out.len() >= MAX_CHAINS {
            continue;
        }
        // Depth-first, one path at a time; a node already on the path ends it (a cycle).
        let mut path: Vec<(Node, usize)> = vec![(s, 0)];
        let mut on_path: BTreeSet<Node> = BTreeSet::from([s]);
        let mut steps: Vec<Step> = vec![step(s, None, None)];
        seen.insert(s);
        while let Some(&(n, i)) = path.last() {
            if out.len() >= MAX_CHAINS {
                break;
            }
            let succ = next.get(&n).map_or(&[][..], Vec::as_slice);
            if i == 0 && succ.iter().all(|(m, _, _)| on_path.contains(m)) {
                out.push(steps.clone());
            }
            match succ.get(i) {
                Some((m, via, status)) => {
                    if let Some(top) = path.last_mut() {
                        top.1 += 1;
                    }
                    if on_path.insert(*m) {
                        seen.insert(*m);
                        path.push((*m, 0));
                        steps.push(step(*m, Some(via.clone()), *status));
                    }
                }
                None => {
                    path.pop();
                    on_path.remove(&n);
                    steps.pop();
                }
            }
        }
    }
    out
}

impl CaseReport {
    /// The parties in the case (see [`Case::listed`]).
    pub fn involved(&self) -> impl Iterator<Item = &PartyVerdict> {
        self.parties.iter().filter(|p| p.in_case)
    }

    fn party_name(&self, i: Option<usize>) -> Option<&str> {
        i.and_then(|i| self.parties.get(i))
            .and_then(|p| p.name.as_deref())
    }

    /// The report as one JSON object (`afr-verify case --json`).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let fail = |f: &Option<(Failure, Option<String>)>| {
            f.as_ref().map(|(f, file)| {
                let mut v = f.to_json();
                v["bundle"] = json!(file);
                v
            })
        };
        json!({
            "outcome": self.outcome.name(),
            "trust": {
                "chain_id": self.trust.chain_id,
                "contract": self.trust.contract_hex(),
                "canonical_contract": self.trust.canonical(),
                "approvers_pinned": self.trust.approvers.len(),
                "require_signed_approvals": self.trust.require_signed_approvals,
            },
            "parties": self.involved().map(|p| json!({
                "name": p.name,
                "recorders": p.recorders.iter().map(hex_id).collect::<Vec<_>>(),
                "outcome": p.outcome.name(),
                "first_failure": fail(&p.first_failure),
                "missing": p.missing,
                "bundles": p.bundles.iter().map(|b| {
                    let mut v = b.verdict.to_json(Some(&b.trust));
                    v["file"] = json!(b.file);
                    v
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "links": self.links.iter().map(|l| json!({
                "from": {"party": self.party_name(Some(l.from_party)), "recorder": hex_id(&l.from_recorder), "seq": l.from_seq},
                "to": {"party": self.party_name(l.to_party), "recorder": l.to_recorder.as_ref().map(hex_id), "seq": l.to_seq},
                "kind": l.kind.name(),
                "receipt": l.backing.name(),
                "role": l.role,
                "leaf_hash": l.leaf_hash.map(|h| h.to_hex()),
                "status": l.status.name(),
                "blames": l.blame.map(Blame::name),
                "blamed_party": match l.blame {
                    Some(Blame::Citing) => self.party_name(Some(l.from_party)),
                    Some(Blame::Linked) => self.party_name(l.to_party),
                    _ => None,
                },
                "check": l.check.map(Check::name),
                "why": l.why,
            })).collect::<Vec<_>>(),
            "chains": self.chains.iter().map(|c| c.iter().map(|s| json!({
                "party": s.party,
                "recorder": hex_id(&s.recorder),
                "seq": s.seq,
                "tool": s.tool,
                "via": s.via,
                "status": s.status.map(Outcome::name),
            })).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "missing": self.missing,
            "notes": self.notes,
        })
    }

    /// The report for a terminal; every string from a file or the case file is escaped
    /// ([`afr_core::text::escape`]).
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(out, "CASE {}", self.outcome.name().to_uppercase());
        let _ = writeln!(
            out,
            "  trust: {}, contract {}{}, {} parties pinned",
            self.trust
                .chain_id
                .map_or_else(|| "no chain pinned".to_owned(), |c| format!("chain {c}")),
            self.trust.contract_hex(),
            if self.trust.canonical() {
                " (canonical)"
            } else {
                " (named explicitly, not canonical)"
            },
            self.trust.parties.len()
        );
        for n in &self.notes {
            let _ = writeln!(out, "  {}", escape(n));
        }
        for p in self.involved() {
            let who = match &p.name {
                Some(n) => format!("party \"{}\"", escape(n)),
                None => "bundles of no pinned party".into(),
            };
            let _ = writeln!(out, "  {who}: {}", p.outcome.name().to_uppercase());
            for b in &p.bundles {
                let v = &b.verdict;
                let _ = writeln!(
                    out,
                    "    bundle {}: {}{}, events {}",
                    escape(&b.file),
                    v.outcome.name(),
                    v.recorder
                        .map(|r| format!(" (recorder {})", hex_id(&r)))
                        .unwrap_or_default(),
                    v.events
                );
            }
            for m in &p.missing {
                let _ = writeln!(out, "    missing: {}", escape(m));
            }
            if let Some((f, file)) = &p.first_failure {
                let _ = writeln!(
                    out,
                    "    first failure {}at {}: {} ({})",
                    file.as_deref()
                        .map(|f| format!("in bundle {} ", escape(f)))
                        .unwrap_or_default(),
                    f.location,
                    f.check,
                    escape(&f.detail)
                );
                let _ = writeln!(out, "    consistent with: {}", f.consistent_with());
            }
        }
        for l in &self.links {
            let end = |party: Option<&str>, rec: Option<&RecorderId>, seq: u64| {
                let who = match (party, rec) {
                    (Some(p), _) => format!("\"{}\"", escape(p)),
                    (None, Some(r)) => hex_id(r),
                    (None, None) => "?".into(),
                };
                format!("{who} {seq}")
            };
            let blamed = match l.blame {
                Some(Blame::Citing) => self.party_name(Some(l.from_party)),
                Some(Blame::Linked) => self.party_name(l.to_party),
                _ => None,
            };
            let _ = writeln!(
                out,
                "  link {} -> {} ({}, {} receipt): {}{}: {}",
                end(
                    self.party_name(Some(l.from_party)),
                    Some(&l.from_recorder),
                    l.from_seq
                ),
                end(
                    self.party_name(l.to_party),
                    l.to_recorder.as_ref(),
                    l.to_seq
                ),
                l.kind.name(),
                match l.role {
                    Some(role) => format!("{} {role}", l.backing.name()),
                    None => l.backing.name().to_owned(),
                },
                l.status.name(),
                match (l.status, blamed) {
                    (Outcome::Verified, _) => String::new(),
                    (_, Some(p)) => format!(", about \"{}\"", escape(p)),
                    (_, None) => ", about the case".into(),
                },
                escape(&l.why)
            );
        }
        for c in &self.chains {
            let steps: Vec<String> = c
                .iter()
                .map(|s| {
                    let who = s
                        .party
                        .as_deref()
                        .map_or_else(|| hex_id(&s.recorder), |p| format!("\"{}\"", escape(p)));
                    let link = match (&s.via, s.status) {
                        (Some(v), Some(st)) if st != Outcome::Verified => {
                            format!(" -[{v}, {}]-> ", st.name())
                        }
                        (Some(v), _) => format!(" -[{v}]-> "),
                        (None, _) => String::new(),
                    };
                    format!(
                        "{link}{who} {}{}",
                        s.seq,
                        s.tool
                            .as_deref()
                            .map(|t| format!(" {}", escape(t)))
                            .unwrap_or_default()
                    )
                })
                .collect();
            let _ = writeln!(out, "  chain: {}", steps.concat());
        }
        for m in &self.missing {
            let _ = writeln!(out, "  missing: {}", escape(m));
        }
        out
    }
}
