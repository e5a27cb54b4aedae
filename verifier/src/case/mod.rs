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
//!
//! The files follow that order: `load` reads the case, pins its anchors files to the case's
//! chain and verifies each bundle; `judge` combines the bundles' verdicts into the parties'
//! and the case's, with the links `link` judges row by row (its time rows in `time`), the
//! approval nonces `nonces` pools across bundles and the chains `chains` walks; `render`
//! writes the answer as JSON and text.

mod chains;
mod judge;
mod link;
mod load;
mod nonces;
mod render;
mod time;

use afr_core::{
    Hash32, RecorderId,
    event::EventRef,
    verify::{Check, Failure, Outcome},
};

use crate::{Trust, Verdict, anchors::Anchors};
pub use load::{Case, verify_case};
pub use time::SKEW_US;
use time::TimeSrc;

/// Most delegation chains reported (a hostile bundle can make many).
pub const MAX_CHAINS: usize = 100;

/// The tool of the recorder's own event that records the receiving side's receipt (the
/// recorder crate's `DELEGATED_TOOL`): its `intent.args.offer.seq` names the delegating event.
const DELEGATED_TOOL: &str = "afr.delegated";

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

fn hex_id(r: &RecorderId) -> String {
    format!("0x{}", hex::encode(r))
}
