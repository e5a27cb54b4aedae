//! The evidence report: one self-contained HTML document that a person settling a dispute
//! (counsel, an arbiter, an auditor) can read on screen or print (`afr-verify log|bundle|case
//! ... --html FILE`, and `--pdf FILE` through a headless Chromium: [`print_pdf`]).
//!
//! It shows the verdict and what it rests on (the pinned chain, contract, recorders, parties
//! and approvers, and when it was checked), every check with its count, the first failure in
//! plain words, what is missing, a timeline (SVG) of the disclosed events by lane and time, the
//! delegation graph (SVG) across events and parties, a card per event with the eight semantic
//! fields of every opened payload, the anchors, and the exact commands to re-verify. A
//! whole-log export holds every record in the clear and every payload sealed, without keys: its
//! report shows the timeline of its records and a card per record (sealed or withheld), re-read
//! from the export ([`LogSample`]), and no graph or approvals.
//!
//! The document is inert: no script, no external URL, no web font; inline CSS and SVG only,
//! under a Content-Security-Policy that forbids everything else ([`CSP`]). Every string that
//! comes from the evidence (or from an RPC answer, or a case file) goes through one function,
//! [`esc`], which first makes terminal and bidirectional controls visible as the text report
//! does ([`afr_core::text::escape`]) and then escapes `& < > " '`. Its size is bounded whatever
//! the evidence holds: at most [`MAX_CARDS`] event cards and [`MAX_MARKS`] timeline marks (the
//! report says how many more were not shown, and for a log which were), each evidence string
//! cut at [`MAX_STRING`] bytes with "… (N bytes more)", and the cards together at about
//! [`CARD_BUDGET`] bytes. RPC URLs appear only as [`afr_core::redact_url`] writes them.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    path::{Path, PathBuf},
};

use afr_core::{
    Category, Hash32, RecorderId,
    bundle::DisclosedLeaf,
    calendar::format_time_us,
    verify::{Failure, Outcome},
};
use serde_json::Value;

use crate::{
    Kind, Trust, Verdict,
    approvals::{Approval, Status},
    case::CaseReport,
};

/// The Content-Security-Policy of every report: nothing may load or run but inline styles and
/// `data:` images (of which the report has none).
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";
/// Most event cards in one report.
pub const MAX_CARDS: usize = 1_000;
/// Most marks on one timeline.
pub const MAX_MARKS: usize = 5_000;
/// Longest evidence string shown, in bytes; the rest is counted, not shown.
pub const MAX_STRING: usize = 4 << 10;
/// Bytes of event cards after which the remaining events are counted, not shown.
pub const CARD_BUDGET: usize = 4 << 20;
/// Evidence bytes shown in one card, over all its strings.
const CARD_STRINGS: usize = 24 << 10;
/// Longest line of a list (notes, what is missing), in bytes.
const LINE: usize = 1 << 10;
/// Longest evidence string in a table cell.
const CELL: usize = 512;
/// Longest tool name in a timeline tooltip or a chain, in characters.
const SHORT: usize = 64;
/// Most rows (lanes) of a timeline; the rest share one.
const MAX_ROWS: usize = 40;
/// Most nodes of a delegation graph.
const MAX_NODES: usize = 150;
/// Most lines of a list (missing, notes, approvals, links, anchors, chains).
const MAX_LIST: usize = 100;
/// Most items of a list inside a card (guardrails, state changes, sources, delegations).
const MAX_ITEMS: usize = 20;
/// How a case names the bundles of a recorder no pinned party answers for.
const NO_PARTY: &str = "(bundles of no pinned party)";

/// `s` made safe for HTML text and quoted attribute values: terminal and bidirectional
/// controls written as visible escapes ([`afr_core::text::escape`]: `\u{202e}`, `\n`), then
/// `&`, `<`, `>`, `"` and `'` as character references. Every string of the evidence reaches the
/// report through here.
pub fn esc(s: &str) -> String {
    let s = afr_core::text::escape(s);
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `s` cut at `max` bytes (on a character boundary), then escaped ([`esc`]), with what was
/// cut said: `… (N bytes more)`.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return esc(s);
    }
    let end = s.floor_char_boundary(max);
    format!(
        "{}<span class=\"more\">… ({} bytes more)</span>",
        esc(&s[..end]),
        s.len() - end
    )
}

/// `s` cut at `max` bytes and escaped line by line: for pretty-printed JSON, whose line breaks
/// are its layout (inside its strings, control characters are already JSON escapes).
fn cut_lines(s: &str, max: usize) -> String {
    let end = if s.len() <= max {
        s.len()
    } else {
        s.floor_char_boundary(max)
    };
    let mut out: Vec<String> = s[..end].split('\n').map(esc).collect();
    if end < s.len()
        && let Some(last) = out.last_mut()
    {
        let _ = write!(
            last,
            "<span class=\"more\">… ({} bytes more)</span>",
            s.len() - end
        );
    }
    out.join("\n")
}

/// A UTC time, from µs since the Unix epoch.
fn utc(us: u64) -> String {
    format_time_us(us)
}

fn hex_id(r: &RecorderId) -> String {
    format!("0x{}", hex::encode(r))
}

/// `0xf39f…2266`.
fn short_id(r: &str) -> String {
    if r.len() == 42 && r.is_ascii() {
        format!("{}…{}", &r[..6], &r[38..])
    } else {
        r.to_owned()
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn outcome_class(o: Outcome) -> &'static str {
    o.name()
}

fn badge(o: Outcome) -> String {
    format!(
        "<span class=\"badge {}\">{}</span>",
        outcome_class(o),
        o.name().to_uppercase()
    )
}

/// What an outcome means, in plain words: of one piece of evidence, or of a `case`.
fn meaning(o: Outcome, case: bool) -> &'static str {
    let (evidence, of_case) = match o {
        Outcome::Verified => (
            "Every check passed: these records are exactly what the pinned recorder sealed, under the epoch roots the anchors below attribute to it (where those anchors came from is said beside them), and every opened payload is exactly what was sealed. It does not say that the agent or the recorder told the truth when the events were written, nor that events were not left out of a bundle.",
            "Every party's evidence verified, and every delegation link between their recorders is backed by the other recorder's disclosed, anchored record.",
        ),
        Outcome::Tampered => (
            "A check failed: this evidence is not what the pinned recorder sealed and anchored. The first failure below says where, which check, and what it is consistent with.",
            "At least one party's evidence, or a delegation link about it, failed a check. Each party's verdict and first failure are below.",
        ),
        Outcome::Incomplete => (
            "Every check that could run passed, but something could not be checked (listed below): the evidence is neither proven intact nor shown to be altered.",
            "Nothing failed, but something the case needs could not be checked (listed below, by party).",
        ),
    };
    if case { of_case } else { evidence }
}

/// What passing a check means, by its public name.
fn check_about(name: &str) -> &'static str {
    match name {
        "encoding" => "every frame decodes as strict canonical CBOR",
        "event-count" => "each epoch holds exactly the events its header counts",
        "recorder-id" => "the evidence comes from a pinned recorder",
        "chain-link" => "each record names the hash of the record before it",
        "payload-commitment" => "each sealed payload matches its record's commitment",
        "start-frame" => "the file starts with one start frame",
        "back-pointer" => "each epoch header continues the previous epoch",
        "merkle-root" => "each epoch's Merkle root is recomputed from its records",
        "chain-head" => "each epoch ends at the record its header names",
        "totals" => "the end frame counts what the file holds",
        "end-frame" => "the file ends with its end frame, and nothing after it",
        "epoch-sequence" => "epochs follow each other without a gap or repeat",
        "epoch-range" => "each epoch's sequence numbers follow the previous epoch's",
        "inclusion-proof" => "each disclosed record is in its epoch's Merkle tree",
        "sequence" => "sequence numbers increase without a gap or repeat",
        "epoch-membership" => "each disclosed record lies inside its epoch",
        "payload-key" => "each event key opens its own payload to the committed plaintext",
        "payload-encoding" => "each opened payload is a canonical payload",
        "payload-content" => "each opened payload is exactly what was sealed",
        "anchored-root" => {
            "each epoch root equals the root the recorder anchored on chain from its own key"
        }
        "approval-digest" => "each signed approval covers this event's exact action",
        "approval-statement" => "each signed statement names this event and recorder",
        "approval-signature" => "each approval signature verifies",
        "approval-signer" => "each approval is signed by a pinned approver",
        "approval-window" => "each approval was valid when the event ran",
        "approval-nonce" => "no approval is used twice",
        "delegation-link" => "each cited event of another recorder has the cited leaf hash",
        "delegation-time" => "delegated events are dated consistently with the anchoring",
        "fork" => "one recorder's bundles agree on every epoch root",
        _ => "",
    }
}

/// How the verdict was asked for: what the report's "re-verify" commands repeat. Paths are
/// as given on the command line; the RPC URL is written only as [`afr_core::redact_url`]
/// makes it (scheme, host and port).
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    /// `log`, `bundle` or `case`.
    pub command: &'static str,
    /// The files (for a case: the case file first, unless `--trust` is given, then bundles).
    pub files: Vec<String>,
    /// `--trust FILE`.
    pub trust: Option<String>,
    /// `--chain-id`.
    pub chain_id: Option<u64>,
    /// `--contract`.
    pub contract: Option<String>,
    /// `--recorder`.
    pub recorder: Option<String>,
    /// `--rpc`: only its redacted form is written.
    pub rpc: Option<String>,
    /// `--block`.
    pub block: Option<u64>,
    /// `--from-block`.
    pub from_block: u64,
    /// `--anchors` (one for a log or a bundle; any number for a case).
    pub anchors: Vec<String>,
    /// The evidence files read: name, size and SHA-256 of the very bytes verified (hashed as
    /// they were read for verification, never read again), so the reader knows which bytes
    /// were judged.
    pub digests: Vec<(String, u64, Hash32)>,
}

impl Invocation {
    /// The commands that repeat this verification, one per line, shell-quoted.
    fn commands(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut a: Vec<String> = vec!["afr-verify".into(), self.command.into()];
        if let Some(t) = &self.trust {
            a.extend(["--trust".into(), t.clone()]);
        }
        a.extend(self.files.iter().cloned());
        let mut pins = Vec::new();
        if let Some(c) = self.chain_id {
            pins.extend(["--chain-id".into(), c.to_string()]);
        }
        if let Some(c) = &self.contract {
            pins.extend(["--contract".into(), c.clone()]);
        }
        if let Some(r) = &self.recorder {
            pins.extend(["--recorder".into(), r.clone()]);
        }
        a.extend(pins.iter().cloned());
        let mut source = Vec::new();
        if let Some(url) = &self.rpc {
            source.extend(["--rpc".into(), afr_core::redact_url(url)]);
            if let Some(b) = self.block {
                source.extend(["--block".into(), b.to_string()]);
            }
            if self.from_block != 0 {
                source.extend(["--from-block".into(), self.from_block.to_string()]);
            }
        }
        for f in &self.anchors {
            source.extend(["--anchors".into(), f.clone()]);
        }
        a.extend(source);
        out.push(shell_line(&a));
        // Air-gapped: fetch the anchors once, then verify offline.
        if let (Some(url), Some(rec), Some(chain), "log" | "bundle") =
            (&self.rpc, &self.recorder, self.chain_id, self.command)
        {
            let mut f: Vec<String> = vec![
                "afr-verify".into(),
                "anchors".into(),
                "--rpc".into(),
                afr_core::redact_url(url),
                "--chain-id".into(),
                chain.to_string(),
                "--recorder".into(),
                rec.clone(),
            ];
            if let Some(c) = &self.contract {
                f.extend(["--contract".into(), c.clone()]);
            }
            if let Some(b) = self.block {
                f.extend(["--block".into(), b.to_string()]);
            }
            f.extend(["--out".into(), "anchors.json".into()]);
            out.push(shell_line(&f));
            let mut g: Vec<String> = vec!["afr-verify".into(), self.command.into()];
            g.extend(self.files.iter().cloned());
            g.extend(["--anchors".into(), "anchors.json".into()]);
            g.extend(pins);
            out.push(shell_line(&g));
        }
        out
    }
}

/// Words joined into one shell command line, each quoted if it needs to be.
fn shell_line(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,…".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

const STYLE: &str = r#"
:root{--ok:#137333;--okbg:#e6f4ea;--bad:#a50e0e;--badbg:#fce8e6;--warn:#8a5a00;--warnbg:#fef7e0;--ink:#202124;--mute:#5f6368;--line:#dadce0;--soft:#f8f9fa}
*{box-sizing:border-box}
html{-webkit-print-color-adjust:exact;print-color-adjust:exact}
body{margin:0 auto;max-width:1180px;padding:24px;font:14px/1.45 "DejaVu Sans","Liberation Sans",Arial,system-ui,sans-serif;color:var(--ink);background:#fff}
h1{font-size:22px;margin:0 0 6px}
h2{font-size:18px;margin:30px 0 8px;border-bottom:2px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
code,pre,.mono{font-family:"DejaVu Sans Mono","Liberation Mono",Menlo,Consolas,monospace;font-size:12.5px}
code{overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:var(--soft);border:1px solid var(--line);border-radius:4px;padding:6px 8px;margin:2px 0}
.banner{border:3px solid;border-radius:8px;padding:14px 20px;margin:0 0 16px}
.banner .word{font-size:34px;font-weight:800;letter-spacing:.04em;line-height:1.1}
.banner p{margin:6px 0 0;color:var(--ink)}
.verified{border-color:var(--ok);background:var(--okbg);color:var(--ok)}
.tampered{border-color:var(--bad);background:var(--badbg);color:var(--bad)}
.incomplete{border-color:var(--warn);background:var(--warnbg);color:var(--warn)}
.nw,.badge{white-space:nowrap}
.badge{display:inline-block;padding:0 6px;border:1px solid;border-radius:3px;font-weight:700;font-size:12px;letter-spacing:.03em}
.badge.deny,.badge.invalid{color:var(--bad);border-color:var(--bad);background:var(--badbg)}
.badge.escalate,.badge.warn,.badge.unsigned{color:var(--warn);border-color:var(--warn);background:var(--warnbg)}
.badge.allow,.badge.signed{color:var(--ok);border-color:var(--ok);background:var(--okbg)}
.badge.none{color:var(--mute);border-color:var(--line)}
table{border-collapse:collapse;width:100%;margin:6px 0}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f1f3f4;font-weight:600;overflow-wrap:normal}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.kv th{width:230px}
.failure{border:2px solid var(--bad);background:var(--badbg);border-radius:6px;padding:8px 14px}
.failure p{margin:4px 0}
.missing{border:2px solid var(--warn);background:var(--warnbg);border-radius:6px;padding:8px 14px 8px 30px}
.more,.meta{color:var(--mute)}
.more{font-style:italic}
.err{color:var(--bad);font-weight:600}
.card{border:1px solid var(--line);border-left:6px solid var(--cat,#9aa0a6);border-radius:6px;padding:10px 14px;margin:12px 0;break-inside:avoid;page-break-inside:avoid}
.card h3{margin:0 0 4px}
.card dl{display:grid;grid-template-columns:190px minmax(0,1fr);gap:6px 12px;margin:8px 0 0}
.card dt{font-weight:600;color:var(--mute)}
.card dd{margin:0;min-width:0}
.card ul{margin:2px 0;padding-left:20px}
.card table{margin:2px 0}
.absent{color:var(--mute);font-size:12.5px;margin-top:6px}
.sealed{background:var(--soft);border:1px dashed var(--line);padding:6px 10px;border-radius:4px}
svg{max-width:100%;height:auto;display:block}
svg text{font-family:"DejaVu Sans","Liberation Sans",Arial,sans-serif}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;font-size:12px;color:var(--mute);margin:6px 0}
.legend span{display:inline-flex;align-items:center;gap:4px}
.legend svg{display:inline;width:18px;height:18px}
footer{margin-top:36px;border-top:1px solid var(--line);padding-top:8px;font-size:12px;color:var(--mute)}
@page{margin:14mm}
@media print{
body{max-width:none;padding:0;font-size:10.5pt}
a{color:inherit;text-decoration:none}
h2,h3{break-after:avoid;page-break-after:avoid}
.cards,.party{break-before:page;page-break-before:always}
.card,.failure,tr,svg{break-inside:avoid;page-break-inside:avoid}
pre{background:#fff}
}
"#;

/// One HTML document under construction, with the size budget of its cards.
struct Doc {
    out: String,
    /// Cards written.
    cards: usize,
    /// Bytes of the cards written.
    card_bytes: usize,
}

impl Doc {
    fn new(title: &str) -> Doc {
        let mut out = String::with_capacity(64 << 10);
        let _ = writeln!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <meta name=\"generator\" content=\"afr-verify {}\">\
             <title>{}</title><style>{STYLE}</style></head><body>",
            env!("CARGO_PKG_VERSION"),
            esc(title)
        );
        Doc {
            out,
            cards: 0,
            card_bytes: 0,
        }
    }

    fn push(&mut self, s: &str) {
        self.out.push_str(s);
    }

    fn finish(mut self) -> String {
        let _ = writeln!(
            self.out,
            "<footer>Written by afr-verify {} (Agent Flight Recorder). This document is self-contained: \
             it holds no script and loads nothing (inline styles and SVG only). Every string from the \
             evidence is shown escaped, control and bidirectional characters as visible escapes \
             (<code>\\u{{202e}}</code>), long strings cut at {} KiB.</footer>\n</body></html>",
            env!("CARGO_PKG_VERSION"),
            MAX_STRING >> 10
        );
        self.out
    }
}

/// A bundle or log verdict in a report, with where its cards live.
struct Evidence<'a> {
    /// Index of the evidence in the report (card ids).
    idx: usize,
    /// Its party's name, in a case.
    party: Option<&'a str>,
    /// The file, as named.
    file: &'a str,
    /// A bundle, or a whole-log export (whose payloads are sealed, never opened).
    kind: Kind,
    verdict: &'a Verdict,
    trust: &'a Trust,
}

/// What became of an event's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Opened,
    Withheld,
    Erased,
    /// A whole-log export's sealed payload: present, but the export carries no key.
    Sealed,
    /// The verdict's first failure is at this event (its payload, key or approval).
    Failed,
}

/// An event of a bundle, as the report shows it.
struct Event<'a> {
    seq: u64,
    record: &'a DisclosedLeaf,
    payload: Option<&'a Value>,
    state: State,
    approval: Option<&'a Approval>,
}

impl Evidence<'_> {
    fn card_id(&self, seq: u64) -> String {
        format!("e{}-{seq}", self.idx)
    }

    fn events(&self) -> Vec<Event<'_>> {
        let v = self.verdict;
        let opened: BTreeMap<u64, &Value> = v
            .opened
            .iter()
            .filter_map(|o| Some((o["seq"].as_u64()?, &o["payload"])))
            .collect();
        let approvals: BTreeMap<u64, &Approval> = v.approvals.iter().map(|a| (a.seq, a)).collect();
        let erased: BTreeSet<u64> = v.erased.iter().copied().collect();
        let failed = match v.first_failure.as_ref().map(|f| f.location) {
            Some(afr_core::verify::Location::Event(s)) => Some(s),
            _ => None,
        };
        v.records
            .iter()
            .map(|(seq, record)| {
                let payload = opened.get(seq).copied();
                Event {
                    seq: *seq,
                    record,
                    payload,
                    state: match (payload, erased.contains(seq)) {
                        _ if failed == Some(*seq) => State::Failed,
                        (Some(_), _) => State::Opened,
                        (None, true) => State::Erased,
                        (None, false) => State::Withheld,
                    },
                    approval: approvals.get(seq).copied(),
                }
            })
            .collect()
    }

    /// The party a recorder belongs to, by the pinned trust (none for a recorder pinned by
    /// `--recorder`).
    fn party_of(&self, rec: &RecorderId) -> Option<&str> {
        self.trust
            .parties
            .iter()
            .find(|p| p.recorders.contains(rec))
            .map(|p| p.name.as_str())
            .filter(|p| *p != "--recorder")
    }
}

/// The colour of a category on the timeline and the cards.
fn cat_colour(c: Category) -> &'static str {
    match c {
        Category::File => "#4285f4",
        Category::Shell => "#3c4043",
        Category::Api => "#a142f4",
        Category::Database => "#12939a",
        Category::Retrieval => "#f06292",
        Category::Code => "#7cb342",
        Category::Approval => "#f9ab00",
        Category::Delegation => "#8d6e63",
        Category::Other => "#9aa0a6",
    }
}

/// The guardrail verdicts of a payload: (any deny, any escalate).
fn guardrails(p: Option<&Value>) -> (bool, bool) {
    let list = p
        .and_then(|p| p["policy_evaluation"].as_array())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let has = |v: &str| list.iter().any(|g| g["verdict"] == v);
    (has("deny"), has("escalate"))
}

/// How an event's approval shows: `signed`, `unsigned`, `invalid`, or `unchecked` (a
/// signature the verifier did not get to).
fn approval_word(e: &Event<'_>) -> Option<&'static str> {
    match (e.approval, e.payload.map(|p| &p["human_approval"])) {
        (Some(a), _) if a.ran_against_rejection => Some("ran against rejection"),
        (Some(a), _) => Some(a.status.name()),
        (None, Some(h)) if h.is_object() => Some(if h["signature"].is_object() {
            "unchecked"
        } else {
            "unsigned"
        }),
        _ => None,
    }
}

fn error_of(p: Option<&Value>) -> Option<&str> {
    p.and_then(|p| p["effects"]["error"].as_str())
}

fn tool_of(p: Option<&Value>) -> Option<&str> {
    p.and_then(|p| p["intent"]["tool"].as_str())
}

// ---------------------------------------------------------------------------------------------
// Sections shared by every report.

/// The trust table rows: chain, contract, parties, approvers.
fn trust_rows(trust: &Trust, party: Option<&str>) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<tr><th>Chain</th><td>{}</td></tr>",
        trust.chain_id.map_or_else(
            || "<span class=\"err\">no chain pinned</span>".to_owned(),
            |c| format!("chain id <b>{c}</b>")
        )
    );
    let _ = write!(
        s,
        "<tr><th>Anchor contract</th><td><code>{}</code> {}</td></tr>",
        trust.contract_hex(),
        if trust.canonical() {
            "(the canonical AfrAnchor address)".to_owned()
        } else {
            format!(
                "<b>(named explicitly; NOT the canonical AfrAnchor address {})</b>",
                esc(afr_core::deployment::ANCHOR_ADDRESS)
            )
        }
    );
    if trust.parties.is_empty() {
        s.push_str(
            "<tr><th>Recorders</th><td><span class=\"err\">no recorder pinned</span>: any key can anchor an invented history of its own</td></tr>",
        );
    }
    for p in trust.parties.iter().take(MAX_LIST) {
        let name = if p.name == "--recorder" {
            "recorder pinned on the command line (<code>--recorder</code>)".to_owned()
        } else {
            format!("party “{}”", cut(&p.name, CELL))
        };
        let recs: Vec<String> = p
            .recorders
            .iter()
            .take(MAX_LIST)
            .map(|r| format!("<code>{}</code>", hex_id(r)))
            .collect();
        let _ = write!(
            s,
            "<tr><th>{name}{}</th><td>{}</td></tr>",
            if party == Some(p.name.as_str()) && trust.parties.len() > 1 {
                " (this file's)"
            } else {
                ""
            },
            recs.join("<br>")
        );
    }
    if trust.parties.len() > MAX_LIST {
        let _ = write!(
            s,
            "<tr><th></th><td class=\"more\">… {} more parties not shown</td></tr>",
            trust.parties.len() - MAX_LIST
        );
    }
    let approvers = if trust.approvers.is_empty() {
        "none pinned: a signed approval is attributed to no one".to_owned()
    } else {
        trust
            .approvers
            .iter()
            .take(MAX_LIST)
            .map(|a| {
                format!(
                    "{} of {} ({})",
                    cut(&a.name, CELL),
                    cut(&a.party, CELL),
                    plural(a.keys.len(), "key", "keys")
                )
            })
            .collect::<Vec<_>>()
            .join("<br>")
    };
    let _ = write!(
        s,
        "<tr><th>Approvers</th><td>{approvers}{}</td></tr>",
        if trust.require_signed_approvals {
            "<br><b>signed approvals required</b>"
        } else {
            ""
        }
    );
    s
}

fn checked_row(checked_at_us: u64) -> String {
    format!(
        "<tr><th>Checked at</th><td>{} (UTC), by afr-verify {}</td></tr>",
        utc(checked_at_us),
        env!("CARGO_PKG_VERSION")
    )
}

fn files_rows(inv: &Invocation) -> String {
    let mut s = String::new();
    for (name, size, h) in inv.digests.iter().take(MAX_LIST) {
        let _ = write!(
            s,
            "<tr><th>Evidence file</th><td><code>{}</code>, {size} bytes, SHA-256 <code>{h}</code></td></tr>",
            cut(name, CELL)
        );
    }
    s
}

/// The first failure in plain words.
fn failure_html(f: &Failure, file: Option<&str>, card: Option<String>) -> String {
    let about = check_about(f.check.name());
    let location = match card {
        Some(id) => format!("<a href=\"#{id}\">{}</a>", f.location),
        None => f.location.to_string(),
    };
    let mut s = String::from("<div class=\"failure\">");
    let _ = write!(
        s,
        "<p><b>The <code>{}</code> check failed at {location}{}.</b></p>",
        f.check.name(),
        file.map(|f| format!(" of <code>{}</code>", cut(f, CELL)))
            .unwrap_or_default()
    );
    if !about.is_empty() {
        let _ = write!(s, "<p>This check verifies that {about}.</p>");
    }
    let _ = write!(
        s,
        "<p><b>What differed:</b> {}</p><p><b>Consistent with:</b> {}.</p>\
         <p class=\"meta\">Checking stops at the first failure: what follows it in the evidence was not judged.</p></div>",
        cut(&f.detail, MAX_STRING),
        f.consistent_with()
    );
    s
}

fn missing_html(missing: &[String]) -> String {
    list_html("<ul class=\"missing\">", missing, "")
}

/// A list of `lines` opened by `ul`, at most [`MAX_LIST`] of them, each cut at [`LINE`]
/// bytes, and a line counting the `more` not shown; nothing when there are none.
fn list_html(ul: &str, lines: &[impl AsRef<str>], more: &str) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let mut s = String::from(ul);
    for l in lines.iter().take(MAX_LIST) {
        let _ = write!(s, "<li>{}</li>", cut(l.as_ref(), LINE));
    }
    if lines.len() > MAX_LIST {
        let _ = write!(
            s,
            "<li class=\"more\">… {} more{more} not shown</li>",
            lines.len() - MAX_LIST
        );
    }
    s.push_str("</ul>");
    s
}

fn checks_html(v: &Verdict) -> String {
    if v.checks.is_empty() {
        return "<p class=\"meta\">No check passed.</p>".into();
    }
    let mut s =
        String::from("<table><tr><th>Check</th><th>Passed</th><th>What passing means</th></tr>");
    for (c, n) in &v.checks {
        let _ = write!(
            s,
            "<tr><td><code class=\"nw\">{}</code></td><td class=\"num\">{n}</td><td>{}</td></tr>",
            esc(c),
            check_about(c)
        );
    }
    if let Some(f) = &v.first_failure {
        let _ = write!(
            s,
            "<tr class=\"tampered\"><td><code>{}</code></td><td class=\"num\">failed</td><td>at {}</td></tr>",
            f.check.name(),
            f.location
        );
    }
    s.push_str("</table>");
    s
}

/// The verdict's notes, without the one line per opened event (the cards show those).
fn notes_html(v: &Verdict) -> String {
    let opened: BTreeSet<String> = v
        .opened
        .iter()
        .filter_map(|o| o["seq"].as_u64())
        .map(|s| format!("event {s} opened: "))
        .collect();
    let notes: Vec<&String> = v
        .notes
        .iter()
        .filter(|n| {
            !n.split_once(" opened: ")
                .is_some_and(|(head, _)| opened.contains(&format!("{head} opened: ")))
        })
        .collect();
    list_html("<ul>", &notes, " notes")
}

fn approval_status_html(a: &Approval) -> String {
    let signer = a
        .signer
        .as_deref()
        .map(|s| format!(" by <code>{}</code>", cut(s, CELL)))
        .unwrap_or_default();
    let scheme = a
        .scheme
        .as_deref()
        .map(|s| format!(" ({})", cut(s, CELL)))
        .unwrap_or_default();
    let pinned = match (&a.pinned_name, &a.party) {
        (Some(n), Some(p)) => format!(", pinned approver “{}” of “{}”", cut(n, CELL), cut(p, CELL)),
        _ => String::new(),
    };
    let detail = a
        .detail
        .as_deref()
        .map(|d| format!(" — {}", cut(d, CELL)))
        .unwrap_or_default();
    let signed_at = a
        .signed_at
        .map(|t| format!(", signed at {} UTC", utc(t.saturating_mul(1_000_000))))
        .unwrap_or_default();
    let ran = if a.ran_against_rejection {
        "<span class=\"badge invalid\">RAN AGAINST THE REJECTION</span> the call executed although the decision was a rejection; "
    } else {
        ""
    };
    match a.status {
        Status::Signed => format!(
            "{ran}<span class=\"badge signed\">SIGNED {}</span>{scheme}{signer}{pinned}{signed_at}{detail}",
            a.decision.name().to_uppercase()
        ),
        Status::Unsigned => {
            format!("{ran}<span class=\"badge unsigned\">UNSIGNED</span> the operator's word only")
        }
        Status::Invalid => format!(
            "<span class=\"badge invalid\">INVALID</span> <code>{}</code>{signer}{pinned}{detail}",
            a.check.map_or("?", |c| c.name())
        ),
    }
}

fn approvals_html(ev: &Evidence<'_>, with_cards: &BTreeSet<u64>) -> String {
    let v = ev.verdict;
    if v.approvals.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<table><tr><th>Event</th><th>Approver (as recorded)</th><th>Decision</th><th>Signature</th></tr>",
    );
    for a in v.approvals.iter().take(MAX_LIST) {
        let event = if with_cards.contains(&a.seq) {
            format!("<a href=\"#{}\">{}</a>", ev.card_id(a.seq), a.seq)
        } else {
            a.seq.to_string()
        };
        let _ = write!(
            s,
            "<tr><td class=\"num\">{event}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            cut(&a.approver, CELL),
            a.decision.name(),
            approval_status_html(a)
        );
    }
    if v.approvals.len() > MAX_LIST {
        let _ = write!(
            s,
            "<tr><td colspan=\"4\" class=\"more\">… {} more approvals not shown (see the event cards)</td></tr>",
            v.approvals.len() - MAX_LIST
        );
    }
    s.push_str("</table>");
    s
}

/// Anchors table rows of one piece of evidence: chain, contract, epoch, root, transaction,
/// block; and the epochs whose roots were not matched with an anchored one.
fn anchor_rows(ev: &Evidence<'_>, party_col: bool, rows: &mut usize) -> String {
    let v = ev.verdict;
    let trust = ev.trust;
    let chain = trust
        .chain_id
        .map_or_else(|| "—".to_owned(), |c| c.to_string());
    let contract = trust.contract_hex();
    let anchored: BTreeMap<u64, &(u64, String, u64, u64)> =
        v.anchors.iter().map(|a| (a.0, a)).collect();
    let mut s = String::new();
    let lead = if party_col {
        format!(
            "<td>{}<br><span class=\"meta\">{}</span></td>",
            cut(ev.party.unwrap_or("(no pinned party)"), CELL),
            cut(ev.file, CELL)
        )
    } else {
        String::new()
    };
    let unchecked = if matches!(v.anchors_from, Some(crate::AnchorsFrom::File { .. })) {
        "<br><span class=\"err\">as the anchors file says; not checked against a chain</span>"
    } else {
        ""
    };
    for (epoch, root) in &v.epoch_roots {
        if *rows >= MAX_LIST * 10 {
            break;
        }
        *rows += 1;
        match anchored.get(epoch) {
            Some((_, tx, block, log_index)) => {
                let _ = write!(
                    s,
                    "<tr>{lead}<td class=\"num\">{chain}</td><td><code>{}</code></td><td class=\"num\">{epoch}</td>\
                     <td><code>0x{root}</code></td><td><code>{}</code>{unchecked}</td><td class=\"num\">{block}</td><td class=\"num\">{log_index}</td></tr>",
                    short_id(&contract),
                    cut(tx, CELL)
                );
            }
            None => {
                let why = match &v.first_failure {
                    Some(f)
                        if f.check.name() == "anchored-root"
                            && f.location == afr_core::verify::Location::Epoch(*epoch) =>
                    {
                        "<span class=\"err\">DIFFERS from the root the recorder anchored (the first failure)</span>"
                    }
                    Some(f) if f.check.name() != "anchored-root" => {
                        "<span class=\"meta\">not compared: checking stopped at the first failure</span>"
                    }
                    _ => {
                        "<span class=\"err\">not proven anchored (see what could not be checked)</span>"
                    }
                };
                let _ = write!(
                    s,
                    "<tr>{lead}<td class=\"num\">{chain}</td><td><code>{}</code></td><td class=\"num\">{epoch}</td>\
                     <td><code>0x{root}</code></td><td colspan=\"3\">{why}</td></tr>",
                    short_id(&contract)
                );
            }
        }
    }
    s
}

/// Where one piece of evidence's anchored roots came from, for the banner and the anchors
/// table; empty when none were compared.
fn anchors_from_html(v: &Verdict) -> String {
    match &v.anchors_from {
        None => String::new(),
        Some(a @ crate::AnchorsFrom::Chain { .. }) => {
            format!("<span class=\"meta\">{}</span>", esc(&a.describe()))
        }
        Some(a @ crate::AnchorsFrom::File { .. }) => {
            format!("<b class=\"err\">{}</b>", esc(&a.describe()))
        }
    }
}

fn anchors_table(evs: &[Evidence<'_>], party_col: bool) -> String {
    let mut rows = 0;
    let body: String = evs
        .iter()
        .map(|e| anchor_rows(e, party_col, &mut rows))
        .collect();
    if body.is_empty() {
        return "<p class=\"meta\">The evidence commits to no epoch root.</p>".into();
    }
    let total: usize = evs.iter().map(|e| e.verdict.epoch_roots.len()).sum();
    let sources: String = evs
        .iter()
        .filter(|e| e.verdict.anchors_from.is_some())
        .map(|e| {
            let who = if party_col {
                format!(
                    "{} ({}): ",
                    cut(e.party.unwrap_or("(no pinned party)"), CELL),
                    cut(e.file, CELL)
                )
            } else {
                String::new()
            };
            format!("<p>{who}{}</p>", anchors_from_html(e.verdict))
        })
        .collect();
    format!(
        "{sources}<table><tr>{}<th>Chain</th><th>Contract</th><th>Epoch</th><th>Root</th><th>Transaction</th><th>Block</th><th>Log</th></tr>{body}</table>{}",
        if party_col { "<th>Party</th>" } else { "" },
        if total > rows {
            format!(
                "<p class=\"more\">… {} more epochs not shown</p>",
                total - rows
            )
        } else {
            String::new()
        }
    )
}

fn reverify_html(inv: &Invocation) -> String {
    let mut s = String::from(
        "<p>Anyone can repeat this verification on their own machine with the same files and pins \
         (install the verifier with <code>cargo install --path verifier</code> from the AFR repository; \
         it needs nothing from the operator):</p><pre>",
    );
    let cmds = inv.commands();
    for (i, c) in cmds.iter().enumerate() {
        if i == 1 {
            s.push_str("\n# or air-gapped: fetch the proven anchors once, then verify offline\n");
        }
        let _ = writeln!(s, "{}", cut(c, MAX_STRING));
    }
    s.push_str("</pre><p class=\"meta\">Add <code>--json</code> for one JSON object, <code>--html FILE</code> or \
                <code>--pdf FILE</code> for this report. Exit codes: 0 verified, 1 tampered, 2 incomplete.");
    if inv.rpc.is_some() {
        s.push_str(
            " The endpoint is shown by scheme, host and port only (a hosted endpoint's path or query may hold an API key): use your own node or endpoint of the same chain.",
        );
    }
    s.push_str("</p>");
    s
}

// ---------------------------------------------------------------------------------------------
// The timeline.

/// One mark on the timeline.
struct Mark {
    row: String,
    seq: u64,
    ts: u64,
    category: Category,
    state: State,
    tool: Option<String>,
    deny: bool,
    escalate: bool,
    approval: Option<&'static str>,
    error: bool,
    card: Option<String>,
    party: Option<String>,
}

fn marks_of(ev: &Evidence<'_>, events: &[Event<'_>], cards: &BTreeSet<u64>, out: &mut Vec<Mark>) {
    for e in events {
        let lane = e.record.lane.as_deref().unwrap_or("(no lane)");
        let row = match ev.party {
            Some(p) => format!("{p} · {lane}"),
            None => lane.to_owned(),
        };
        let (deny, escalate) = guardrails(e.payload);
        out.push(Mark {
            row,
            seq: e.seq,
            ts: e.record.timestamp_us,
            category: e.record.category,
            state: e.state,
            tool: tool_of(e.payload).map(str::to_owned),
            deny,
            escalate,
            approval: approval_word(e),
            error: error_of(e.payload).is_some(),
            card: cards.contains(&e.seq).then(|| ev.card_id(e.seq)),
            party: ev.party.map(str::to_owned),
        });
    }
}

/// The timeline's legend; `sealed` adds the mark of a sealed payload (a whole-log export's).
fn legend(sealed: bool) -> String {
    let mut s = String::from("<div class=\"legend\">");
    for c in Category::ALL {
        let _ = write!(
            s,
            "<span><svg viewBox=\"0 0 18 18\"><circle cx=\"9\" cy=\"9\" r=\"6\" fill=\"{}\"/></svg>{}</span>",
            cat_colour(c),
            c.name()
        );
    }
    if sealed {
        s.push_str(
            "<span><svg viewBox=\"0 0 18 18\"><circle cx=\"9\" cy=\"9\" r=\"5\" fill=\"#5f6368\" fill-opacity=\"0.35\" stroke=\"#5f6368\" stroke-width=\"1.5\"/></svg>payload sealed, not opened</span>",
        );
    }
    s.push_str(
        "<span><svg viewBox=\"0 0 18 18\"><circle cx=\"9\" cy=\"9\" r=\"5\" fill=\"#fff\" stroke=\"#5f6368\" stroke-width=\"2\"/></svg>payload withheld</span>\
         <span><svg viewBox=\"0 0 18 18\"><circle cx=\"9\" cy=\"9\" r=\"5\" fill=\"#dadce0\" stroke=\"#5f6368\" stroke-dasharray=\"2 1.5\"/></svg>payload erased</span>\
         <span><svg viewBox=\"0 0 18 18\"><circle cx=\"9\" cy=\"9\" r=\"5\" fill=\"#9aa0a6\" stroke=\"#c5221f\" stroke-width=\"3\"/></svg>first failure</span>\
         <span><svg viewBox=\"0 0 18 18\"><rect x=\"1\" y=\"1\" width=\"16\" height=\"16\" fill=\"none\" stroke=\"#c5221f\" stroke-width=\"2\"/></svg>guardrail denied</span>\
         <span><svg viewBox=\"0 0 18 18\"><circle cx=\"9\" cy=\"9\" r=\"7.5\" fill=\"none\" stroke=\"#e37400\" stroke-width=\"2\" stroke-dasharray=\"3 2\"/></svg>guardrail escalated</span>\
         <span><svg viewBox=\"0 0 18 18\"><path d=\"M4 14 L9 5 L14 14 Z\" fill=\"#188038\"/></svg>approval signed</span>\
         <span><svg viewBox=\"0 0 18 18\"><path d=\"M4 14 L9 5 L14 14 Z\" fill=\"#fff\" stroke=\"#b06000\" stroke-width=\"1.5\"/></svg>approval unsigned</span>\
         <span><svg viewBox=\"0 0 18 18\"><path d=\"M4 14 L9 5 L14 14 Z\" fill=\"#c5221f\"/></svg>approval invalid</span>\
         <span><svg viewBox=\"0 0 18 18\"><path d=\"M4 4 L14 14 M14 4 L4 14\" stroke=\"#c5221f\" stroke-width=\"2.5\"/></svg>error</span></div>",
    );
    s
}

/// The timeline of `marks` (at most [`MAX_MARKS`] of `total` drawn): rows by lane (in a case,
/// by party and lane), x by time. `stride` says how the marks of a whole log were drawn from
/// its records (one in every `stride`, and the last: [`LogSample`]); `None`, the first ones.
fn timeline(marks: &[Mark], total: usize, stride: Option<u64>) -> String {
    if marks.is_empty() {
        return "<p class=\"meta\">No disclosed event to place on a timeline.</p>".into();
    }
    let shown = &marks[..marks.len().min(MAX_MARKS)];
    // Rows in order of first appearance; past MAX_ROWS, one shared row.
    let mut rows: Vec<String> = Vec::new();
    let mut row_of: BTreeMap<&str, usize> = BTreeMap::new();
    let mut folded = BTreeSet::new();
    for m in shown {
        if row_of.contains_key(m.row.as_str()) {
            continue;
        }
        if rows.len() < MAX_ROWS {
            row_of.insert(&m.row, rows.len());
            rows.push(m.row.clone());
        } else {
            folded.insert(m.row.as_str());
            row_of.insert(&m.row, MAX_ROWS);
        }
    }
    if !folded.is_empty() {
        rows.push(format!("({} more lanes)", folded.len()));
    }
    let t0 = shown.iter().map(|m| m.ts).min().unwrap_or(0);
    let t1 = shown.iter().map(|m| m.ts).max().unwrap_or(0);
    let span = (t1 - t0).max(1) as f64;
    let (label_w, x0, width) = (236.0, 246.0, 834.0);
    let x_of = |t: u64| x0 + (t - t0) as f64 / span * width;
    // Marks closer than this on one row go on the next level down (at most LEVELS).
    const LEVELS: usize = 4;
    let mut place: Vec<(usize, usize)> = Vec::with_capacity(shown.len());
    let mut last: Vec<[f64; LEVELS]> = vec![[f64::NEG_INFINITY; LEVELS]; rows.len()];
    let mut levels = vec![1usize; rows.len()];
    let mut order: Vec<usize> = (0..shown.len()).collect();
    order.sort_by_key(|&i| (shown[i].ts, i));
    let mut level_of = vec![0usize; shown.len()];
    for &i in &order {
        let r = row_of.get(shown[i].row.as_str()).copied().unwrap_or(0);
        let x = x_of(shown[i].ts);
        let l = (0..LEVELS)
            .find(|&l| last[r][l] <= x - 16.0)
            .unwrap_or_else(|| {
                (0..LEVELS)
                    .min_by(|&a, &b| last[r][a].total_cmp(&last[r][b]))
                    .unwrap_or(0)
            });
        last[r][l] = x;
        levels[r] = levels[r].max(l + 1);
        level_of[i] = l;
    }
    for (i, m) in shown.iter().enumerate() {
        place.push((
            row_of.get(m.row.as_str()).copied().unwrap_or(0),
            level_of[i],
        ));
    }
    let level_h = 20.0;
    let mut row_y = Vec::with_capacity(rows.len());
    let mut y = 46.0;
    for l in &levels {
        row_y.push(y);
        y += *l as f64 * level_h + 14.0;
    }
    let height = y + 8.0;
    let mut s = String::with_capacity(shown.len() * 300 + 4096);
    let _ = write!(
        s,
        "<svg class=\"timeline\" viewBox=\"0 0 1100 {height:.0}\" width=\"1100\" height=\"{height:.0}\" role=\"img\" aria-label=\"timeline of {} events\">",
        shown.len()
    );
    // Axis and ticks.
    let _ = write!(
        s,
        "<line x1=\"{x0}\" y1=\"30\" x2=\"{}\" y2=\"30\" stroke=\"#5f6368\"/>",
        x0 + width
    );
    // Ticks: the date over the first tick (and wherever it changes), the time of day under
    // it to the millisecond; under 5 ms, offsets from the first tick in µs.
    let ticks = if t1 == t0 { 1 } else { 5 };
    let relative = t1 - t0 < 5_000;
    let mut last_date = String::new();
    for k in 0..=ticks {
        let t = t0 + ((t1 - t0) as f64 * k as f64 / ticks as f64) as u64;
        let x = x_of(t);
        let full = utc(t);
        let (date, time) = (full.get(..10).unwrap_or(""), full.get(11..23).unwrap_or(""));
        let anchor = match (k, ticks) {
            (0, _) => "start",
            (k, n) if k == n => "end",
            _ => "middle",
        };
        let label = if relative && k > 0 {
            format!("+{} µs", t - t0)
        } else {
            time.to_owned()
        };
        if date != last_date && !(relative && k > 0) {
            let _ = write!(
                s,
                "<text x=\"{x:.1}\" y=\"9\" font-size=\"10\" text-anchor=\"{anchor}\" fill=\"#5f6368\">{date}</text>"
            );
            last_date = date.to_owned();
        }
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"26\" x2=\"{x:.1}\" y2=\"{:.0}\" stroke=\"#e8eaed\"/><text x=\"{x:.1}\" y=\"22\" font-size=\"11\" text-anchor=\"{anchor}\" fill=\"#202124\">{label}</text>",
            height - 6.0
        );
    }
    for (r, name) in rows.iter().enumerate() {
        let y = row_y[r];
        let h = levels[r] as f64 * level_h + 14.0;
        if r % 2 == 1 {
            let _ = write!(
                s,
                "<rect x=\"0\" y=\"{:.0}\" width=\"1100\" height=\"{h:.0}\" fill=\"#f8f9fa\"/>",
                y - 4.0
            );
        }
        let _ = write!(
            s,
            "<text x=\"{:.0}\" y=\"{:.0}\" font-size=\"11.5\" text-anchor=\"end\" fill=\"#202124\">{}</text>",
            label_w - 4.0,
            y + 13.0,
            cut_chars(name, 36)
        );
    }
    let labels = shown.len() <= 80;
    for (m, &(r, l)) in shown.iter().zip(&place) {
        let x = x_of(m.ts);
        let y = row_y[r] + 10.0 + l as f64 * level_h;
        s.push_str(&mark_svg(m, x, y, labels));
    }
    s.push_str("</svg>");
    let mut out = legend(shown.iter().any(|m| m.state == State::Sealed));
    let _ = write!(
        out,
        "<p class=\"meta\">From {} to {} (UTC); {} on {}.{}</p>",
        utc(t0),
        utc(t1),
        plural(shown.len(), "event", "events"),
        plural(rows.len(), "row", "rows"),
        match stride {
            _ if total <= shown.len() => String::new(),
            None => format!(
                " <b>{} more events are not on the timeline</b> (at most {MAX_MARKS} marks).",
                total - shown.len()
            ),
            Some(n) => format!(
                " <b>{} more records are not on the timeline</b> (at most {MAX_MARKS} marks): \
                 one record in every {n} is drawn, evenly spaced from the first, and the last.",
                total - shown.len()
            ),
        }
    );
    out.push_str(&s);
    out
}

/// At most `n` characters of `s`, escaped, with `…` if cut.
fn cut_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", esc(&s[..i])),
        None => esc(s),
    }
}

fn mark_svg(m: &Mark, x: f64, y: f64, label: bool) -> String {
    let mut title = String::new();
    if let Some(p) = &m.party {
        let _ = write!(title, "{} · ", cut_chars(p, 40));
    }
    let _ = write!(
        title,
        "event {} · {} · {}",
        m.seq,
        m.category.name(),
        utc(m.ts)
    );
    match (&m.tool, m.state) {
        (Some(t), _) => {
            let _ = write!(title, " · {}", cut_chars(t, SHORT));
        }
        (None, State::Withheld) => title.push_str(" · payload withheld"),
        (None, State::Erased) => title.push_str(" · payload erased"),
        (None, State::Sealed) => title.push_str(" · payload sealed"),
        (None, State::Opened | State::Failed) => {}
    }
    if m.state == State::Failed {
        title.push_str(" · FIRST FAILURE");
    }
    // A guardrail's verdict, an approval or an error: said in the tooltip, and drawn under (a
    // frame) or over (a sign) the event's circle.
    let (mut under, mut over) = (String::new(), String::new());
    if m.deny {
        title.push_str(" · guardrail DENY");
        let _ = write!(
            under,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"18\" height=\"18\" fill=\"none\" stroke=\"#c5221f\" stroke-width=\"2\"/>",
            x - 9.0,
            y - 9.0
        );
    }
    if m.escalate {
        title.push_str(" · guardrail ESCALATE");
        let _ = write!(
            under,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"9.5\" fill=\"none\" stroke=\"#e37400\" stroke-width=\"2\" stroke-dasharray=\"3 2\"/>"
        );
    }
    if let Some(a) = m.approval {
        let _ = write!(title, " · approval {a}");
        let (fill, stroke) = match a {
            "signed" => ("#188038", "#188038"),
            "invalid" | "ran against rejection" => ("#c5221f", "#c5221f"),
            _ => ("#fff", "#b06000"),
        };
        let _ = write!(
            over,
            "<path d=\"M{:.1} {:.1} l4 -7 l4 7 z\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"1.2\"/>",
            x - 4.0,
            y - 8.0
        );
    }
    if m.error {
        title.push_str(" · error");
        let _ = write!(
            over,
            "<path d=\"M{:.1} {:.1} l6 6 m0 -6 l-6 6\" stroke=\"#c5221f\" stroke-width=\"2.2\"/>",
            x + 5.0,
            y + 2.0
        );
    }
    let mut s = String::with_capacity(400);
    if let Some(id) = &m.card {
        let _ = write!(s, "<a href=\"#{id}\">");
    }
    let _ = write!(s, "<g><title>{title}</title>{under}");
    let colour = cat_colour(m.category);
    let _ = match m.state {
        State::Opened => write!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"6\" fill=\"{colour}\" stroke=\"#202124\" stroke-width=\"0.6\"/>"
        ),
        State::Withheld => write!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"5\" fill=\"#fff\" stroke=\"{colour}\" stroke-width=\"2\"/>"
        ),
        State::Erased => write!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"5\" fill=\"#dadce0\" stroke=\"{colour}\" stroke-width=\"1.2\" stroke-dasharray=\"2 1.5\"/>"
        ),
        State::Sealed => write!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"5\" fill=\"{colour}\" fill-opacity=\"0.35\" stroke=\"{colour}\" stroke-width=\"1.5\"/>"
        ),
        State::Failed => write!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"6\" fill=\"{colour}\" stroke=\"#c5221f\" stroke-width=\"3\"/>"
        ),
    };
    s.push_str(&over);
    if label {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" fill=\"#5f6368\">{}</text>",
            x + 8.0,
            y - 3.0,
            m.seq
        );
    }
    s.push_str("</g>");
    if m.card.is_some() {
        s.push_str("</a>");
    }
    s
}

// ---------------------------------------------------------------------------------------------
// The delegation graph.

/// An event of the delegation graph.
struct Node {
    /// Its recorder, as `0x…` (as referenced, if not an address).
    recorder: String,
    seq: u64,
    party: Option<String>,
    tool: Option<String>,
    ts: Option<u64>,
    /// Disclosed in the evidence of this report.
    disclosed: bool,
    card: Option<String>,
}

#[derive(Default)]
struct Graph {
    nodes: Vec<Node>,
    index: BTreeMap<(String, u64), usize>,
    edges: BTreeMap<(usize, usize), (BTreeSet<String>, Option<Outcome>)>,
    /// Nodes left out (past [`MAX_NODES`]).
    omitted: BTreeSet<(String, u64)>,
}

fn worst(a: Option<Outcome>, b: Option<Outcome>) -> Option<Outcome> {
    let rank = |o: Option<Outcome>| match o {
        Some(Outcome::Tampered) => 3,
        Some(Outcome::Incomplete) => 2,
        Some(Outcome::Verified) => 1,
        None => 0,
    };
    if rank(b) > rank(a) { b } else { a }
}

impl Graph {
    fn node(&mut self, n: Node) -> Option<usize> {
        let key = (n.recorder.clone(), n.seq);
        if let Some(&i) = self.index.get(&key) {
            let old = &mut self.nodes[i];
            old.tool = old.tool.take().or(n.tool);
            old.ts = old.ts.or(n.ts);
            old.party = old.party.take().or(n.party);
            old.disclosed |= n.disclosed;
            old.card = old.card.take().or(n.card);
            return Some(i);
        }
        if self.nodes.len() >= MAX_NODES {
            self.omitted.insert(key);
            return None;
        }
        self.index.insert(key, self.nodes.len());
        self.nodes.push(n);
        Some(self.nodes.len() - 1)
    }

    fn edge(&mut self, from: Option<usize>, to: Option<usize>, via: &str, status: Option<Outcome>) {
        if let (Some(f), Some(t)) = (from, to)
            && f != t
        {
            let e = self.edges.entry((f, t)).or_default();
            e.0.extend(via.split('+').map(str::to_owned));
            e.1 = worst(e.1, status);
        }
    }

    fn svg(&self) -> String {
        if self.nodes.is_empty() {
            return "<p class=\"meta\">No opened event delegates work or names the event that delegated it (<code>delegation_provenance</code>).</p>".into();
        }
        // Columns by recorder, in order of first appearance; rows by time, then recorder and seq.
        let mut cols: Vec<&str> = Vec::new();
        for n in &self.nodes {
            if !cols.contains(&n.recorder.as_str()) {
                cols.push(&n.recorder);
            }
        }
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (&self.nodes[a], &self.nodes[b]);
            (x.ts.is_none(), x.ts, &x.recorder, x.seq).cmp(&(
                y.ts.is_none(),
                y.ts,
                &y.recorder,
                y.seq,
            ))
        });
        let mut rank = vec![0usize; self.nodes.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r;
        }
        let (bw, bh, gap_x, gap_y, top) = (230.0, 44.0, 110.0, 28.0, 44.0);
        let col_of = |i: usize| {
            cols.iter()
                .position(|c| *c == self.nodes[i].recorder)
                .unwrap_or(0)
        };
        let pos = |i: usize| {
            (
                20.0 + col_of(i) as f64 * (bw + gap_x),
                top + rank[i] as f64 * (bh + gap_y),
            )
        };
        let width = 40.0 + cols.len() as f64 * (bw + gap_x);
        let height = top + self.nodes.len() as f64 * (bh + gap_y) + 10.0;
        let mut s = String::new();
        let _ = write!(
            s,
            "<svg class=\"graph\" viewBox=\"0 0 {width:.0} {height:.0}\" width=\"{width:.0}\" height=\"{height:.0}\" role=\"img\" aria-label=\"delegation graph\"><defs>"
        );
        for (id, colour) in [
            ("n", "#5f6368"),
            ("v", "#137333"),
            ("t", "#c5221f"),
            ("i", "#b06000"),
        ] {
            let _ = write!(
                s,
                "<marker id=\"arrow-{id}\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0 0 L10 5 L0 10 z\" fill=\"{colour}\"/></marker>"
            );
        }
        s.push_str("</defs>");
        for (c, rec) in cols.iter().enumerate() {
            let party = self
                .nodes
                .iter()
                .find(|n| n.recorder == *rec)
                .and_then(|n| n.party.as_deref());
            let x = 20.0 + c as f64 * (bw + gap_x);
            let _ = match party {
                Some(p) => write!(
                    s,
                    "<text x=\"{x:.0}\" y=\"16\" font-size=\"12\" font-weight=\"700\" fill=\"#202124\">{}</text><text x=\"{x:.0}\" y=\"31\" font-size=\"10.5\" fill=\"#5f6368\">recorder {}</text>",
                    cut_chars(p, 34),
                    cut_chars(&short_id(rec), 30)
                ),
                None => write!(
                    s,
                    "<text x=\"{x:.0}\" y=\"16\" font-size=\"12\" font-weight=\"700\" fill=\"#202124\">recorder {}</text>",
                    cut_chars(&short_id(rec), 30)
                ),
            };
        }
        // Edges under the nodes.
        for ((f, t), (via, status)) in &self.edges {
            let (fx, fy) = pos(*f);
            let (tx, ty) = pos(*t);
            let (colour, id) = match status {
                Some(Outcome::Verified) => ("#137333", "v"),
                Some(Outcome::Tampered) => ("#c5221f", "t"),
                Some(Outcome::Incomplete) => ("#b06000", "i"),
                None => ("#5f6368", "n"),
            };
            let via: Vec<&str> = via.iter().map(String::as_str).collect();
            let label = format!(
                "{}{}",
                esc(&via.join(" + ")),
                status
                    .map(|o| format!(": {}", o.name()))
                    .unwrap_or_default()
            );
            let (path, lx, ly) = if col_of(*f) == col_of(*t) {
                let (x1, y1, y2) = if fy < ty {
                    (fx + bw / 2.0, fy + bh, ty)
                } else {
                    (fx + bw / 2.0, fy, ty + bh)
                };
                if rank[*f].abs_diff(rank[*t]) == 1 {
                    (
                        format!("M{x1:.1} {y1:.1} L{x1:.1} {y2:.1}"),
                        x1 + 6.0,
                        (y1 + y2) / 2.0 + 4.0,
                    )
                } else {
                    let (ya, yb) = (fy + bh / 2.0, ty + bh / 2.0);
                    let xr = fx + bw;
                    let bulge = xr + 40.0 + (rank[*f].abs_diff(rank[*t]) as f64).min(6.0) * 6.0;
                    (
                        format!(
                            "M{xr:.1} {ya:.1} C{bulge:.1} {ya:.1} {bulge:.1} {yb:.1} {xr:.1} {yb:.1}"
                        ),
                        bulge - 30.0,
                        (ya + yb) / 2.0 + 4.0,
                    )
                }
            } else {
                let (x1, x2) = if fx < tx {
                    (fx + bw, tx)
                } else {
                    (fx, tx + bw)
                };
                let (y1, y2) = (fy + bh / 2.0, ty + bh / 2.0);
                (
                    format!("M{x1:.1} {y1:.1} L{x2:.1} {y2:.1}"),
                    (x1 + x2) / 2.0 - 40.0,
                    (y1 + y2) / 2.0 - 5.0,
                )
            };
            let _ = write!(
                s,
                "<g><title>{label}</title><path d=\"{path}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.8\" marker-end=\"url(#arrow-{id})\"/>\
                 <text x=\"{lx:.1}\" y=\"{ly:.1}\" font-size=\"10\" fill=\"{colour}\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\">{label}</text></g>"
            );
        }
        for (i, n) in self.nodes.iter().enumerate() {
            let (x, y) = pos(i);
            let (fill, dash) = if n.disclosed {
                ("#f1f3f4", "")
            } else {
                ("#fff", " stroke-dasharray=\"4 3\"")
            };
            if let Some(id) = &n.card {
                let _ = write!(s, "<a href=\"#{id}\">");
            }
            let line2 = match (&n.tool, n.disclosed) {
                (Some(t), _) => cut_chars(t, 32),
                (None, true) => "(payload not opened)".into(),
                (None, false) => "(not disclosed here)".into(),
            };
            let _ = write!(
                s,
                "<g><title>{} event {}{}</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bw}\" height=\"{bh}\" rx=\"6\" fill=\"{fill}\" stroke=\"#5f6368\"{dash}/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" font-weight=\"700\" fill=\"#202124\">event {}</text>\
                 <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#202124\">{line2}</text></g>",
                n.party
                    .as_deref()
                    .map_or_else(|| cut_chars(&n.recorder, 44), |p| cut_chars(p, 60)),
                n.seq,
                n.ts.map(|t| format!(" at {}", utc(t))).unwrap_or_default(),
                x + 10.0,
                y + 18.0,
                n.seq,
                x + 10.0,
                y + 35.0
            );
            if n.card.is_some() {
                s.push_str("</a>");
            }
        }
        s.push_str("</svg>");
        if !self.omitted.is_empty() {
            let _ = write!(
                s,
                "<p class=\"more\">… {} more events of the delegation graph not shown (at most {MAX_NODES}).</p>",
                self.omitted.len()
            );
        }
        s
    }
}

/// `0x…` lower case if `r` is an address, else `r` as it is.
fn norm_recorder(r: &str) -> String {
    if r.len() == 42 && r.starts_with("0x") && r[2..].chars().all(|c| c.is_ascii_hexdigit()) {
        r.to_ascii_lowercase()
    } else {
        r.to_owned()
    }
}

/// Adds the delegation edges of one bundle's opened events.
fn graph_of(g: &mut Graph, ev: &Evidence<'_>, events: &[Event<'_>], cards: &BTreeSet<u64>) {
    let Some(own) = ev.verdict.recorder else {
        return;
    };
    let own_hex = hex_id(&own);
    let party_of = |rec: &str| -> Option<String> {
        let mut a = [0u8; 20];
        hex::decode_to_slice(rec.trim_start_matches("0x"), &mut a).ok()?;
        ev.party_of(&a).map(str::to_owned)
    };
    let by_seq: BTreeMap<u64, &Event<'_>> = events.iter().map(|e| (e.seq, e)).collect();
    let node = |g: &mut Graph, rec: &str, seq: u64| -> Option<usize> {
        let mine = rec == own_hex;
        let e = if mine { by_seq.get(&seq) } else { None };
        g.node(Node {
            recorder: rec.to_owned(),
            seq,
            party: party_of(rec),
            tool: e.and_then(|e| tool_of(e.payload)).map(str::to_owned),
            ts: e.map(|e| e.record.timestamp_us),
            disclosed: e.is_some(),
            card: (mine && cards.contains(&seq)).then(|| ev.card_id(seq)),
        })
    };
    for e in events {
        let Some(p) = e.payload else { continue };
        let d = &p["delegation_provenance"];
        if !d.is_object() {
            continue;
        }
        let target = |r: &Value| -> Option<(String, u64)> {
            let seq = r["seq"].as_u64()?;
            let rec = r["recorder"]
                .as_str()
                .map_or_else(|| own_hex.clone(), norm_recorder);
            Some((rec, seq))
        };
        if let Some((rec, seq)) = target(&d["parent_event"]) {
            let from = node(g, &rec, seq);
            let to = node(g, &own_hex, e.seq);
            g.edge(from, to, "parent_event", None);
        }
        let origin = if tool_of(Some(p)) == Some("afr.delegated") {
            p["intent"]["args"]["offer"]["seq"]
                .as_u64()
                .unwrap_or(e.seq)
        } else {
            e.seq
        };
        for r in d["delegated_to"]
            .as_array()
            .into_iter()
            .flatten()
            .take(MAX_LIST)
        {
            if let Some((rec, seq)) = target(r) {
                let from = node(g, &own_hex, origin);
                let to = node(g, &rec, seq);
                g.edge(from, to, "delegated_to", None);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Event cards.

/// A card's share of evidence bytes ([`CARD_STRINGS`]).
struct Budget(usize);

impl Budget {
    /// `s` cut at [`MAX_STRING`] or what is left of the card's budget, escaped.
    fn text(&mut self, s: &str) -> String {
        let max = MAX_STRING.min(self.0);
        self.0 = self.0.saturating_sub(s.len().min(max));
        cut(s, max)
    }

    /// A JSON value, pretty-printed, in a `<pre>`.
    fn json(&mut self, v: &Value) -> String {
        let text = match v {
            Value::String(s) => s.clone(),
            v => serde_json::to_string_pretty(v).unwrap_or_default(),
        };
        let max = MAX_STRING.min(self.0);
        self.0 = self.0.saturating_sub(text.len().min(max));
        format!("<pre>{}</pre>", cut_lines(&text, max))
    }

    fn field(&mut self, v: &Value) -> String {
        match v {
            Value::String(s) => self.text(s),
            Value::Null => "—".into(),
            v => self.text(&v.to_string()),
        }
    }
}

/// A list inside a card: `open`, each of its items (at most [`MAX_ITEMS`]) as `item` writes
/// it, `close`, and a line for the rest; nothing when the list is empty.
fn card_list(v: &Value, open: &str, close: &str, mut item: impl FnMut(&Value) -> String) -> String {
    let all = v.as_array().map(Vec::as_slice).unwrap_or_default();
    if all.is_empty() {
        return String::new();
    }
    let mut s = String::from(open);
    for x in all.iter().take(MAX_ITEMS) {
        s.push_str(&item(x));
    }
    s.push_str(close);
    if all.len() > MAX_ITEMS {
        let _ = write!(
            s,
            "<p class=\"more\">… {} more not shown</p>",
            all.len() - MAX_ITEMS
        );
    }
    s
}

/// `show(v)` when `v` is recorded (not null), else nothing.
fn present(v: &Value, show: impl FnOnce(&Value) -> String) -> String {
    if v.is_null() { String::new() } else { show(v) }
}

/// `label <tag>value</tag>` for each `(key, label)` of `keys` that `v` holds.
fn labelled(v: &Value, keys: &[(&str, &str)], tag: &str, b: &mut Budget) -> Vec<String> {
    keys.iter()
        .filter(|(key, _)| !v[*key].is_null())
        .map(|(key, label)| format!("{label} <{tag}>{}</{tag}>", b.field(&v[*key])))
        .collect()
}

/// The eight semantic fields of an opened payload.
fn fields(p: &Value, e: &Event<'_>, own: Option<&RecorderId>, b: &mut Budget) -> String {
    let mut s = String::from("<dl>");
    // 1. Intent.
    let _ = write!(
        s,
        "<dt>Intent</dt><dd>tool <code>{}</code>{}</dd>",
        b.field(&p["intent"]["tool"]),
        match &p["intent"]["args"] {
            Value::Null => String::new(),
            a => format!("<br>arguments {}", b.json(a)),
        }
    );
    // 2. to 8., in this order (each takes its share of the card's budget), or absent.
    let mut absent: Vec<String> = Vec::new();
    for (name, dd) in [
        ("Policy evaluation", policy_dd(&p["policy_evaluation"], b)),
        ("Human approval", approval_dd(&p["human_approval"], e, b)),
        ("Execution", execution_dd(&p["execution"], b)),
        ("Effects", effects_dd(&p["effects"], b)),
        (
            "Context provenance",
            context_dd(&p["context_provenance"], b),
        ),
        ("Code provenance", code_dd(&p["code_provenance"], b)),
        (
            "Delegation provenance",
            delegation_dd(&p["delegation_provenance"], own, b),
        ),
    ] {
        match dd {
            Some(dd) => {
                let _ = write!(s, "<dt>{name}</dt><dd>{dd}</dd>");
            }
            None => absent.push(name.to_lowercase()),
        }
    }
    s.push_str("</dl>");
    if !absent.is_empty() {
        let _ = write!(
            s,
            "<p class=\"absent\">Not recorded for this event: {}.</p>",
            absent.join(", ")
        );
    }
    s
}

/// A card's policy evaluation: a table of its guardrails' verdicts.
fn policy_dd(v: &Value, b: &mut Budget) -> Option<String> {
    let table = card_list(
        v,
        "<table><tr><th>Guardrail</th><th>Version</th><th>Verdict</th><th>Reason</th></tr>",
        "</table>",
        |g| {
            let verdict = g["verdict"].as_str().unwrap_or("?");
            let class = match verdict {
                "allow" | "deny" | "warn" | "escalate" => verdict,
                _ => "none",
            };
            format!(
                "<tr><td>{}</td><td>{}</td><td><span class=\"badge {class}\">{}</span></td><td>{}</td></tr>",
                b.field(&g["guardrail"]),
                b.field(&g["version"]),
                esc(&verdict.to_uppercase()),
                b.field(&g["reason"])
            )
        },
    );
    (!table.is_empty()).then_some(table)
}

/// A card's human approval, with what its signature proves ([`Event::approval`]).
fn approval_dd(h: &Value, e: &Event<'_>, b: &mut Budget) -> Option<String> {
    if !h.is_object() {
        return None;
    }
    let signature = match e.approval {
        Some(a) => approval_status_html(a),
        None if h["signature"].is_object() => format!(
            "<span class=\"badge none\">NOT CHECKED</span> a {} signature by <code>{}</code>; verification stopped before approvals were checked",
            b.field(&h["signature"]["scheme"]),
            b.field(&h["signature"]["signer"])
        ),
        None => "<span class=\"badge unsigned\">UNSIGNED</span> the operator's word only".into(),
    };
    Some(format!(
        "<b>{}</b> by {}{}<br>prompt: {}<br>signature: {signature}",
        b.field(&h["decision"]),
        b.field(&h["approver"]),
        h["decided_at_us"]
            .as_u64()
            .map(|t| format!(
                ", recorded as decided at {} UTC (the operator's clock; not signed)",
                utc(t)
            ))
            .unwrap_or_default(),
        b.field(&h["prompt"])
    ))
}

fn execution_dd(x: &Value, b: &mut Budget) -> Option<String> {
    x.is_object().then(|| {
        format!(
            "<pre>{}</pre>{}{}",
            b.field(&x["command"]),
            present(&x["target"], |t| format!(
                "target <code>{}</code>",
                b.field(t)
            )),
            present(&x["mutation"], |m| format!("<br>mutation {}", b.json(m)))
        )
    })
}

fn effects_dd(f: &Value, b: &mut Budget) -> Option<String> {
    f.is_object().then(|| {
        [
            present(&f["error"], |e| {
                format!("<span class=\"err\">error: {}</span><br>", b.field(e))
            }),
            present(&f["return_value"], |v| {
                format!("return value {}", b.json(v))
            }),
            card_list(&f["state_changes"], "state changes<ul>", "</ul>", |c| {
                format!("<li>{}</li>", b.field(c))
            }),
            present(&f["external_response"], |v| {
                format!("external response {}", b.json(v))
            }),
        ]
        .concat()
    })
}

fn context_dd(c: &Value, b: &mut Budget) -> Option<String> {
    c.is_object().then(|| {
        [
            present(&c["environment"], |v| {
                format!("environment <b>{}</b>", b.field(v))
            }),
            card_list(
                &c["sources"],
                "<table><tr><th>Source</th><th>Kind</th><th>Content hash</th></tr>",
                "</table>",
                |src| {
                    format!(
                        "<tr><td><code>{}</code></td><td>{}</td><td><code>{}</code></td></tr>",
                        b.field(&src["uri"]),
                        b.field(&src["kind"]),
                        b.field(&src["content_hash"])
                    )
                },
            ),
        ]
        .concat()
    })
}

fn code_dd(k: &Value, b: &mut Budget) -> Option<String> {
    let keys = [
        ("agent", "agent"),
        ("agent_version", "agent version"),
        ("tool_version", "tool version"),
        ("model", "model"),
        ("repository", "repository"),
        ("commit", "commit"),
    ];
    k.as_object()
        .is_some_and(|o| !o.is_empty())
        .then(|| labelled(k, &keys, "code", b).join(" · "))
}

fn delegation_dd(d: &Value, own: Option<&RecorderId>, b: &mut Budget) -> Option<String> {
    if d.as_object().is_none_or(|o| o.is_empty()) {
        return None;
    }
    let mut parts = Vec::new();
    if d["parent_event"].is_object() {
        parts.push(format!(
            "delegated by {}",
            event_ref(&d["parent_event"], own, b)
        ));
    }
    let keys = [
        ("delegating_agent", "delegating agent"),
        ("organisation", "organisation"),
        ("on_behalf_of", "on behalf of"),
    ];
    parts.extend(labelled(d, &keys, "b", b));
    let mut s = parts.join("<br>");
    s.push_str(&card_list(
        &d["delegated_to"],
        "<br>delegated to<ul>",
        "</ul>",
        |r| format!("<li>{}</li>", event_ref(r, own, b)),
    ));
    Some(s)
}

/// A reference to an event (`EventRef`) made by recorder `own`, in words: the receipt is
/// called signed only when its signature verifies (for the role it states).
fn event_ref(r: &Value, own: Option<&RecorderId>, b: &mut Budget) -> String {
    use afr_core::delegation::{RefProof, Role, check_ref};
    let rec = match r["recorder"].as_str() {
        Some(x) => format!("recorder <code>{}</code>", b.text(x)),
        None => "this recorder".into(),
    };
    let checked = serde_json::from_value::<afr_core::event::EventRef>(r.clone())
        .ok()
        .zip(own)
        .map(|(e, own)| check_ref(&e, own));
    let receipt = match checked {
        None if r["signature"].is_null() => ", receipt unsigned".to_owned(),
        None => ", receipt signature <span class=\"err\">not checked</span>".to_owned(),
        Some(Err(_)) => ", <span class=\"err\">malformed reference</span>".to_owned(),
        Some(Ok(c)) => {
            let role = match c.role {
                Role::Plain => String::new(),
                Role::Offer { to } => format!(", offered to <code>{}</code>", hex_id(&to)),
                Role::Accept { recorder, seq, .. } => format!(
                    ", accepting offer {seq} of <code>{}</code>",
                    hex_id(&recorder)
                ),
            };
            match c.proof {
                RefProof::Signed(_) => format!(", receipt signed by its recorder (verified){role}"),
                RefProof::BadSignature(..) => format!(
                    ", <span class=\"err\">receipt signature does not verify</span>{role} (not the recorder's word)"
                ),
                RefProof::Bound(_) | RefProof::Unbound => {
                    format!(", receipt unsigned{role} (the citing side's word)")
                }
            }
        }
    };
    format!(
        "event {} of {rec}{}{receipt}",
        b.field(&r["seq"]),
        r["leaf_hash"]
            .as_str()
            .map(|h| format!(", leaf <code>{}</code>", b.text(h)))
            .unwrap_or_else(|| ", no leaf hash".into()),
    )
}

fn card(ev: &Evidence<'_>, e: &Event<'_>) -> String {
    let r = e.record;
    let mut s = String::with_capacity(2048);
    let _ = write!(
        s,
        "<article class=\"card\" id=\"{}\" style=\"--cat:{}\"><h3>{}Event {} · {}{}</h3>\
         <div class=\"meta\">{} UTC · epoch {} · lane {} · payload {} · leaf <code>{}</code></div>",
        ev.card_id(e.seq),
        cat_colour(r.category),
        ev.party
            .map(|p| format!("{} · ", cut(p, CELL)))
            .unwrap_or_default(),
        e.seq,
        r.category.name(),
        tool_of(e.payload)
            .map(|t| format!(" · <code>{}</code>", cut(t, 256)))
            .unwrap_or_default(),
        utc(r.timestamp_us),
        r.epoch,
        r.lane.as_deref().map_or_else(
            || "—".to_owned(),
            |l| format!("<code>{}</code>", cut(l, 256))
        ),
        match e.state {
            State::Opened => "opened",
            State::Withheld => "withheld",
            State::Erased => "erased",
            State::Sealed => "sealed",
            State::Failed => "<b class=\"err\">the first failure</b>",
        },
        r.leaf
    );
    match (e.state, e.payload) {
        (State::Opened, Some(p)) => s.push_str(&fields(p, e, ev.verdict.recorder.as_ref(), &mut Budget(CARD_STRINGS))),
        (State::Failed, p) => {
            if let Some(f) = &ev.verdict.first_failure {
                let _ = write!(
                    s,
                    "<p class=\"failure\"><b>The first failure is here:</b> the <code>{}</code> check failed ({}).{}</p>",
                    f.check.name(),
                    cut(&f.detail, MAX_STRING),
                    match (p, ev.kind) {
                        (Some(_), _) => {
                            " The payload below was opened, and is what the check rejected."
                        }
                        (None, Kind::Bundle) => " Its payload cannot be shown: it did not check out.",
                        (None, Kind::Log) => {
                            " Its payload is sealed: a whole-log export carries no keys."
                        }
                    }
                );
            }
            if let Some(p) = p {
                s.push_str(&fields(p, e, ev.verdict.recorder.as_ref(), &mut Budget(CARD_STRINGS)));
            }
        }
        (State::Erased, _) => s.push_str(
            "<p class=\"sealed\"><b>Payload crypto-erased.</b> The recorder destroyed this epoch's keys, \
             and the bundle proves it with the recorder's own <code>afr.erase</code> event (see the notes). \
             The record itself (time, category, lane, place in the log) is still proven; the eight fields cannot be read by anyone.</p>",
        ),
        (State::Sealed, _) => s.push_str(
            "<p class=\"sealed\"><b>Payload sealed: not opened</b> (a whole-log export carries no keys), so none of its \
             eight fields can be shown. The record itself (time, category, lane, place in the log) is what the checks above judged.</p>",
        ),
        _ if ev.kind == Kind::Log => s.push_str(
            "<p class=\"sealed\"><b>Payload withheld.</b> The export carries no sealed payload for this record, so none of its \
             eight fields can be shown. The record itself (time, category, lane, place in the log) is what the checks above judged.</p>",
        ),
        _ => s.push_str(
            "<p class=\"sealed\"><b>Payload withheld.</b> The bundle does not carry this event's key, so none of its \
             eight fields can be shown. The record itself (time, category, lane, place in the log) is proven by its inclusion proof.</p>",
        ),
    }
    s.push_str("</article>\n");
    s
}

/// Which events of each piece of evidence get a card, within [`MAX_CARDS`] and
/// [`CARD_BUDGET`]: writes them into `doc` and returns the count not shown.
fn cards(doc: &mut Doc, list: &[(&Evidence<'_>, Vec<Event<'_>>)]) -> usize {
    let mut skipped = 0;
    for (ev, events) in list {
        for e in events {
            if doc.cards >= MAX_CARDS || doc.card_bytes >= CARD_BUDGET {
                skipped += 1;
                continue;
            }
            let c = card(ev, e);
            doc.card_bytes += c.len();
            doc.cards += 1;
            doc.push(&c);
        }
    }
    skipped
}

/// The events that will get a card: the first ones, up to [`MAX_CARDS`] over all evidence
/// (the byte budget may stop earlier; the card ids of those are then dangling links to
/// nothing, which a browser ignores).
fn planned(list: &[(&Evidence<'_>, Vec<Event<'_>>)]) -> Vec<BTreeSet<u64>> {
    let mut left = MAX_CARDS;
    list.iter()
        .map(|(_, events)| {
            let take = events.len().min(left);
            left -= take;
            events[..take].iter().map(|e| e.seq).collect()
        })
        .collect()
}

fn cards_section(doc: &mut Doc, list: &[(&Evidence<'_>, Vec<Event<'_>>)]) {
    let total: usize = list.iter().map(|(_, e)| e.len()).sum();
    let _ = write!(
        doc.out,
        "<section class=\"cards\" id=\"events\"><h2>Events ({})</h2>\
         <p class=\"meta\">One card per disclosed event, in sequence order. The eight semantic fields are shown only for opened payloads; \
         withheld and erased payloads are marked as such.</p>",
        plural(total, "disclosed event", "disclosed events")
    );
    if total == 0 {
        doc.push("<p class=\"meta\">No disclosed event passed its checks (an event is shown once its record is proven in its epoch's tree).</p>");
    }
    let skipped = cards(doc, list);
    if skipped > 0 {
        let _ = write!(
            doc.out,
            "<p class=\"more\"><b>{skipped} more events are not shown as cards</b> (at most {MAX_CARDS} cards and about {} MiB of them in one report); \
             they are all in the verification above and in <code>--json</code>.</p>",
            CARD_BUDGET >> 20
        );
    }
    doc.push("</section>\n");
}

// ---------------------------------------------------------------------------------------------
// The records of a whole-log export.

/// A record of a whole-log export, as the report shows it.
struct LogRecord {
    seq: u64,
    leaf: DisclosedLeaf,
    /// Its sealed payload is in the export (else it was withheld).
    sealed: bool,
}

/// The records of a whole-log export the report shows, re-read from the export's bytes: the
/// verifier keeps none of them (a log may hold millions), and the report keeps at most
/// [`MAX_MARKS`] + [`MAX_CARDS`].
struct LogSample {
    /// Records in the export, up to the first frame that does not parse.
    total: u64,
    /// One record in every `stride` is on the timeline, from the first, and the last.
    stride: u64,
    /// The records on the timeline.
    marks: Vec<LogRecord>,
    /// The records with a card: all of them, or the first and the last [`MAX_CARDS`] / 2.
    cards: Vec<LogRecord>,
}

/// The event frames of an export, in file order, up to the first frame that does not parse:
/// each record with its canonical bytes and whether its sealed payload is present.
fn log_frames(bytes: &[u8]) -> impl Iterator<Item = (afr_core::Record, &[u8], bool)> {
    use afr_core::export::{Frame, LogReader};
    let mut r = LogReader::new(bytes);
    std::iter::from_fn(move || {
        loop {
            match r.next_frame() {
                Ok(Some(Frame::Event {
                    record_bytes,
                    record,
                    payload,
                })) => return Some((record, record_bytes, payload.is_some())),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return None,
            }
        }
    })
}

impl LogSample {
    /// Reads the export `bytes` twice: once to count its records, once to keep those shown.
    fn read(bytes: &[u8]) -> LogSample {
        let total = log_frames(bytes).count() as u64;
        let (marks_max, cards_half) = (MAX_MARKS as u64, (MAX_CARDS / 2) as u64);
        // With `stride` = ⌈(n − 1) / (MAX_MARKS − 1)⌉, the multiples of `stride` below n and the
        // last record are at most MAX_MARKS.
        let stride = if total <= marks_max {
            1
        } else {
            (total - 1).div_ceil(marks_max - 1)
        };
        let carded = |i: u64| total <= 2 * cards_half || i < cards_half || i >= total - cards_half;
        let mut out = LogSample {
            total,
            stride,
            marks: Vec::new(),
            cards: Vec::new(),
        };
        for (i, (r, record_bytes, sealed)) in (0u64..).zip(log_frames(bytes)) {
            let (mark, card) = (i % stride == 0 || i + 1 == total, carded(i));
            if !(mark || card) {
                continue;
            }
            let rec = || LogRecord {
                seq: r.seq,
                leaf: DisclosedLeaf {
                    leaf: afr_core::hash::leaf_hash(record_bytes),
                    timestamp_us: r.timestamp_us,
                    epoch: r.epoch,
                    category: r.category,
                    lane: r.lane.clone(),
                },
                sealed,
            };
            if mark {
                out.marks.push(rec());
            }
            if card {
                out.cards.push(rec());
            }
        }
        out
    }

    /// `records` as events: sealed or withheld, the one of the first failure marked.
    fn events<'a>(records: &'a [LogRecord], v: &Verdict) -> Vec<Event<'a>> {
        let failed = match v.first_failure.as_ref().map(|f| f.location) {
            Some(afr_core::verify::Location::Event(s)) => Some(s),
            _ => None,
        };
        records
            .iter()
            .map(|r| Event {
                seq: r.seq,
                record: &r.leaf,
                payload: None,
                state: match r.sealed {
                    _ if failed == Some(r.seq) => State::Failed,
                    true => State::Sealed,
                    false => State::Withheld,
                },
                approval: None,
            })
            .collect()
    }
}

/// The timeline of the records of a whole-log export ([`LogSample`]).
fn log_timeline(doc: &mut Doc, ev: &Evidence<'_>, sample: &LogSample) {
    let with_cards: BTreeSet<u64> = sample.cards.iter().map(|r| r.seq).collect();
    let mut marks = Vec::new();
    let events = LogSample::events(&sample.marks, ev.verdict);
    marks_of(ev, &events, &with_cards, &mut marks);
    let _ = writeln!(
        doc.out,
        "<section id=\"timeline\"><h2>Timeline</h2><p class=\"meta\">The log's records by lane (rows) and time (left to right), as their records state it. \
         Their payloads are sealed (a whole-log export carries no keys), so no tool, guardrail, approval or error can be shown. \
         Hover over a mark for its details; a mark with a card links to it.</p>{}</section>",
        timeline(&marks, sample.total as usize, Some(sample.stride))
    );
}

/// The cards of the records of a whole-log export ([`LogSample`]).
fn log_cards(doc: &mut Doc, ev: &Evidence<'_>, sample: &LogSample) {
    let events = LogSample::events(&sample.cards, ev.verdict);
    let _ = write!(
        doc.out,
        "<section class=\"cards\" id=\"events\"><h2>Records ({})</h2>\
         <p class=\"meta\">A whole-log export holds every record in the clear (sequence number, epoch, time, category, lane) and its payload sealed, \
         without a key: one card per record, with its leaf hash; none of the eight semantic fields can be shown. To read events, ask for a \
         disclosure bundle of them with their keys (<code>afr disclose --with-keys</code>) and verify it with <code>afr-verify bundle</code>.</p>",
        plural(sample.total as usize, "record", "records")
    );
    let skipped = cards(doc, &[(ev, events)]) as u64 + (sample.total - sample.cards.len() as u64);
    if skipped > 0 {
        let _ = write!(
            doc.out,
            "<p class=\"more\"><b>{skipped} more records are not shown as cards</b> (at most {MAX_CARDS} cards in one report: \
             the first {half} records and the last {half} are shown); every record was checked in the verification above.</p>",
            half = MAX_CARDS / 2
        );
    }
    doc.push("</section>\n");
}

// ---------------------------------------------------------------------------------------------
// The two reports.

/// The report of a log or a bundle verdict (`afr-verify log|bundle ... --html`): `v` as
/// [`crate::verify`] returned it for the file `bytes` under `trust`, `inv` how it was asked
/// for, `checked_at_us` when (µs since the Unix epoch). A bundle's disclosed records are in
/// `v`; a whole log's are re-read from `bytes` for its timeline and cards.
pub fn verdict_html(
    kind: Kind,
    v: &Verdict,
    bytes: &[u8],
    trust: &Trust,
    inv: &Invocation,
    checked_at_us: u64,
) -> String {
    let file = inv.files.first().map(String::as_str).unwrap_or("");
    let what = match kind {
        Kind::Log => "whole-log export",
        Kind::Bundle => "disclosure bundle",
    };
    let word = v.outcome.name().to_uppercase();
    let mut doc = Doc::new(&format!("{word}: AFR evidence report, {what} {file}"));
    let ev = Evidence {
        idx: 0,
        party: None,
        file,
        kind,
        verdict: v,
        trust,
    };
    let events = ev.events();
    // A whole log's records, re-read from the export.
    let log = (kind == Kind::Log).then(|| LogSample::read(bytes));
    let summary = match kind {
        Kind::Log => format!(
            "{} in {}",
            plural(v.events.as_u64().unwrap_or(0) as usize, "event", "events"),
            plural(
                v.epochs.unwrap_or(0) as usize,
                "sealed epoch",
                "sealed epochs"
            )
        ),
        Kind::Bundle => {
            let count = |st: State| events.iter().filter(|e| e.state == st).count();
            format!(
                "{}: {} opened, {} withheld, {} erased{}",
                plural(events.len(), "disclosed event", "disclosed events"),
                count(State::Opened),
                count(State::Withheld),
                count(State::Erased),
                match count(State::Failed) {
                    0 => String::new(),
                    _ => ", 1 failed".into(),
                }
            )
        }
    };
    let recorder = v
        .recorder
        .map(|r| format!("recorder <code>{}</code>", hex_id(&r)))
        .unwrap_or_else(|| "recorder unknown".into());
    let _ = writeln!(
        doc.out,
        "<header class=\"banner {}\"><div class=\"word\">{word}</div>\
         <h1>Evidence report: {what} <code>{}</code></h1>\
         <p>{summary} · {recorder}{} · checked {} UTC</p><p>{}</p>{}{}</header>",
        outcome_class(v.outcome),
        cut(file, CELL),
        v.party
            .as_deref()
            .filter(|p| *p != "--recorder")
            .map(|p| format!(" of party “{}”", cut(p, CELL)))
            .unwrap_or_default(),
        utc(checked_at_us),
        meaning(v.outcome, false),
        match anchors_from_html(v) {
            a if a.is_empty() => String::new(),
            a => format!("<p>{a}</p>"),
        },
        match v.headline_warning() {
            w if w.is_empty() => String::new(),
            w => format!(
                "<p><b class=\"err\">{}</b></p>",
                esc(w.trim_start_matches(", but "))
            ),
        }
    );
    let _ = writeln!(
        doc.out,
        "<section id=\"trust\"><h2>What this verdict rests on</h2><table class=\"kv\">{}{}{}</table>{}</section>",
        files_rows(inv),
        trust_rows(trust, v.party.as_deref()),
        checked_row(checked_at_us),
        notes_html(v)
    );
    let plan = planned(&[(&ev, events)]);
    let events = ev.events();
    let with_cards = plan.first().cloned().unwrap_or_default();
    if let Some(f) = &v.first_failure {
        let card = match f.location {
            afr_core::verify::Location::Event(s) if with_cards.contains(&s) => Some(ev.card_id(s)),
            _ => None,
        };
        let _ = writeln!(
            doc.out,
            "<section id=\"failure\"><h2>First failure</h2>{}</section>",
            failure_html(f, None, card)
        );
    }
    if !v.missing.is_empty() {
        let _ = writeln!(
            doc.out,
            "<section id=\"missing\"><h2>What could not be checked</h2>{}</section>",
            missing_html(&v.missing)
        );
    }
    let _ = writeln!(
        doc.out,
        "<section id=\"checks\"><h2>Checks</h2>{}</section>",
        checks_html(v)
    );
    if let Some(sample) = &log {
        log_timeline(&mut doc, &ev, sample);
    }
    if kind == Kind::Bundle {
        let mut marks = Vec::new();
        marks_of(&ev, &events, &with_cards, &mut marks);
        let _ = writeln!(
            doc.out,
            "<section id=\"timeline\"><h2>Timeline</h2><p class=\"meta\">The disclosed events by lane (rows) and time (left to right), as their records state it. \
             Hover over a mark for its details; each mark links to its card.</p>{}</section>",
            timeline(&marks, events.len(), None)
        );
        let mut g = Graph::default();
        graph_of(&mut g, &ev, &events, &with_cards);
        let _ = writeln!(
            doc.out,
            "<section id=\"delegation\"><h2>Delegation</h2><p class=\"meta\">Events that delegated work or name the event that delegated them \
             (<code>parent_event</code>, <code>delegated_to</code>), from the opened payloads. A link to another recorder is checked only in a case, \
             with that recorder's bundle (<code>afr-verify case</code>).</p>{}</section>",
            g.svg()
        );
        if !v.approvals.is_empty() {
            let _ = writeln!(
                doc.out,
                "<section id=\"approvals\"><h2>Human approvals</h2>{}</section>",
                approvals_html(&ev, &with_cards)
            );
        }
    }
    let _ = writeln!(
        doc.out,
        "<section id=\"anchors\"><h2>Anchors</h2><p class=\"meta\">Each epoch root the evidence commits to, and the transaction by which the recorder anchored it.</p>{}</section>",
        anchors_table(std::slice::from_ref(&ev), false)
    );
    match &log {
        None => cards_section(&mut doc, &[(&ev, events)]),
        Some(sample) => log_cards(&mut doc, &ev, sample),
    }
    let _ = writeln!(
        doc.out,
        "<section id=\"reverify\"><h2>Re-verify</h2>{}</section>",
        reverify_html(inv)
    );
    doc.finish()
}

/// The report of a case (`afr-verify case ... --html`).
pub fn case_html(r: &CaseReport, inv: &Invocation, checked_at_us: u64) -> String {
    let word = format!("CASE {}", r.outcome.name().to_uppercase());
    let mut doc = Doc::new(&format!("{word}: AFR evidence report"));
    let parties: Vec<&crate::case::PartyVerdict> = r.involved().collect();
    let evs: Vec<Evidence<'_>> = parties
        .iter()
        .flat_map(|p| p.bundles.iter().map(move |b| (p, b)))
        .enumerate()
        .map(|(idx, (p, b))| Evidence {
            idx,
            party: Some(p.name.as_deref().unwrap_or(NO_PARTY)),
            file: &b.file,
            kind: Kind::Bundle,
            verdict: &b.verdict,
            trust: &b.trust,
        })
        .collect();
    let list: Vec<(&Evidence<'_>, Vec<Event<'_>>)> = evs.iter().map(|e| (e, e.events())).collect();
    let plan = planned(&list);
    let _ = writeln!(
        doc.out,
        "<header class=\"banner {}\"><div class=\"word\">{word}</div><h1>Evidence report: a case of {}</h1>\
         <p>{} · {} between recorders · checked {} UTC</p><p>{}</p>{}</header>",
        outcome_class(r.outcome),
        plural(parties.len(), "party", "parties"),
        plural(evs.len(), "bundle", "bundles"),
        plural(r.links.len(), "link", "links"),
        utc(checked_at_us),
        meaning(r.outcome, true),
        {
            let files: Vec<String> = evs
                .iter()
                .filter(|e| {
                    matches!(
                        e.verdict.anchors_from,
                        Some(crate::AnchorsFrom::File { .. })
                    )
                })
                .map(|e| cut(e.file, CELL))
                .collect();
            if files.is_empty() {
                String::new()
            } else {
                format!(
                    "<p><b class=\"err\">The anchored roots of {} were taken as is from anchors files, not checked against any chain (see Anchors).</b></p>",
                    files.join(", ")
                )
            }
        }
    );
    // Each party's verdict.
    let mut s = String::from(
        "<section id=\"parties\"><h2>Verdict by party</h2><table><tr><th>Party</th><th>Recorders</th><th>Verdict</th><th>First failure, or what is missing</th></tr>",
    );
    for p in parties.iter().take(MAX_LIST) {
        let why = match (&p.first_failure, p.missing.len()) {
            (Some((f, file)), _) => format!(
                "<code>{}</code> at {}{}: {}",
                f.check.name(),
                f.location,
                file.as_deref()
                    .map(|f| format!(" of <code>{}</code>", cut(f, CELL)))
                    .unwrap_or_default(),
                cut(&f.detail, CELL)
            ),
            (None, 0) => "—".into(),
            (None, n) => format!("{} missing", n),
        };
        let _ = write!(
            s,
            "<tr><td><b>{}</b></td><td>{}</td><td>{}</td><td>{why}</td></tr>",
            p.name.as_deref().map_or_else(
                || "(bundles of no pinned party)".to_owned(),
                |n| cut(n, CELL)
            ),
            p.recorders
                .iter()
                .take(MAX_LIST)
                .map(|r| format!("<code>{}</code>", hex_id(r)))
                .collect::<Vec<_>>()
                .join("<br>"),
            badge(p.outcome)
        );
    }
    s.push_str("</table>");
    if !r.missing.is_empty() {
        let _ = write!(
            s,
            "<h3>Missing for the case (no party is blamed)</h3>{}",
            missing_html(&r.missing)
        );
    }
    s.push_str("</section>\n");
    doc.push(&s);
    let notes = if r.notes.is_empty() {
        String::new()
    } else {
        format!(
            "<ul>{}</ul>",
            r.notes
                .iter()
                .take(MAX_LIST)
                .map(|n| format!("<li>{}</li>", cut(n, LINE)))
                .collect::<String>()
        )
    };
    let _ = writeln!(
        doc.out,
        "<section id=\"trust\"><h2>What this verdict rests on</h2><table class=\"kv\">{}{}{}</table>{notes}</section>",
        files_rows(inv),
        trust_rows(&r.trust, None),
        checked_row(checked_at_us)
    );
    // The delegation graph across parties.
    let mut g = Graph::default();
    let mut ts: BTreeMap<(String, u64), (u64, Option<String>)> = BTreeMap::new();
    for (e, (_, events)) in evs.iter().zip(&list) {
        if let Some(rec) = e.verdict.recorder {
            for ev in events {
                ts.entry((hex_id(&rec), ev.seq)).or_insert((
                    ev.record.timestamp_us,
                    plan[e.idx].contains(&ev.seq).then(|| e.card_id(ev.seq)),
                ));
            }
        }
    }
    for chain in &r.chains {
        let mut prev: Option<usize> = None;
        for step in chain {
            let rec = hex_id(&step.recorder);
            let known = ts.get(&(rec.clone(), step.seq));
            let i = g.node(Node {
                recorder: rec,
                seq: step.seq,
                party: step.party.clone(),
                tool: step.tool.clone(),
                ts: known.map(|k| k.0),
                disclosed: known.is_some(),
                card: known.and_then(|k| k.1.clone()),
            });
            if let Some(via) = &step.via {
                g.edge(prev, i, via, step.status);
            }
            prev = i;
        }
    }
    let mut s = format!(
        "<section id=\"delegation\"><h2>Delegation across parties</h2><p class=\"meta\">Every delegation chain: one box per event (party, sequence number), \
         an arrow from the delegating event to the delegated one, coloured by the link's verdict (green verified, red tampered, amber incomplete, grey: inside one log).</p>{}",
        g.svg()
    );
    if !r.chains.is_empty() {
        s.push_str("<h3>Chains</h3><ol>");
        for c in r.chains.iter().take(MAX_LIST) {
            let steps: Vec<String> = c
                .iter()
                .map(|st| {
                    let who = st.party.as_deref().map_or_else(
                        || format!("<code>{}</code>", hex_id(&st.recorder)),
                        |p| format!("“{}”", cut(p, CELL)),
                    );
                    let link = match (&st.via, st.status) {
                        (Some(v), Some(o)) => format!(" —[{}, {}]→ ", esc(v), o.name()),
                        (Some(v), None) => format!(" —[{}]→ ", esc(v)),
                        (None, _) => String::new(),
                    };
                    format!(
                        "{link}{who} event {}{}",
                        st.seq,
                        st.tool
                            .as_deref()
                            .map(|t| format!(" <code>{}</code>", cut(t, SHORT)))
                            .unwrap_or_default()
                    )
                })
                .collect();
            let _ = write!(s, "<li>{}</li>", steps.concat());
        }
        s.push_str("</ol>");
    }
    if !r.links.is_empty() {
        s.push_str("<h3>Links between recorders</h3><table><tr><th>From (citing)</th><th>To (cited)</th><th>Reference</th><th>Receipt</th><th>Verdict</th><th>Why</th></tr>");
        let name = |i: Option<usize>| {
            i.and_then(|i| r.parties.get(i))
                .and_then(|p| p.name.as_deref())
        };
        for l in r.links.iter().take(MAX_LIST) {
            let end = |party: Option<&str>, rec: Option<&RecorderId>, seq: u64| {
                let who = match (party, rec) {
                    (Some(p), _) => format!("“{}”", cut(p, CELL)),
                    (None, Some(r)) => format!("<code>{}</code>", hex_id(r)),
                    (None, None) => "?".into(),
                };
                format!("{who} event {seq}")
            };
            let blamed = match l.blame {
                Some(crate::case::Blame::Citing) => name(Some(l.from_party)),
                Some(crate::case::Blame::Linked) => name(l.to_party),
                _ => None,
            };
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td><code class=\"nw\">{}</code></td><td>{}</td><td>{}{}</td><td>{}</td></tr>",
                end(name(Some(l.from_party)), Some(&l.from_recorder), l.from_seq),
                end(name(l.to_party), l.to_recorder.as_ref(), l.to_seq),
                l.kind.name(),
                match (l.role, &l.backing) {
                    (Some(role), crate::case::Backing::Signed) => format!("{role}, signed"),
                    (Some(role), b) => format!("{role} (as stated), {}", b.name()),
                    (None, b) => b.name().to_owned(),
                },
                badge(l.status),
                match (l.status, blamed) {
                    (Outcome::Verified, _) => String::new(),
                    (_, Some(p)) => format!("<br>about “{}”", cut(p, CELL)),
                    (_, None) => "<br>about the case".into(),
                },
                cut(&l.why, MAX_STRING)
            );
        }
        s.push_str("</table>");
        if r.links.len() > MAX_LIST {
            let _ = write!(
                s,
                "<p class=\"more\">… {} more links not shown</p>",
                r.links.len() - MAX_LIST
            );
        }
    }
    s.push_str("</section>\n");
    doc.push(&s);
    // The timeline of every bundle.
    let mut marks = Vec::new();
    for ((e, events), cards) in list.iter().zip(&plan) {
        marks_of(e, events, cards, &mut marks);
    }
    let total = marks.len();
    let _ = writeln!(
        doc.out,
        "<section id=\"timeline\"><h2>Timeline</h2><p class=\"meta\">Every party's disclosed events by party and lane (rows) and time (left to right), as their records state it; \
         each recorder's clock is its own.</p>{}</section>",
        timeline(&marks, total, None)
    );
    let _ = writeln!(
        doc.out,
        "<section id=\"anchors\"><h2>Anchors</h2>{}</section>",
        anchors_table(&evs, true)
    );
    // Each party's evidence.
    for p in parties.iter().take(MAX_LIST) {
        let name = p.name.as_deref().unwrap_or(NO_PARTY);
        let mut s = format!(
            "<section class=\"party\"><h2>Party “{}”: {}</h2>",
            cut(name, CELL),
            badge(p.outcome)
        );
        if let Some((f, file)) = &p.first_failure {
            let card = match (f.location, file) {
                (afr_core::verify::Location::Event(seq), Some(file)) => evs
                    .iter()
                    .find(|e| e.file == file && e.party == Some(name))
                    .filter(|e| plan[e.idx].contains(&seq))
                    .map(|e| e.card_id(seq)),
                _ => None,
            };
            let _ = write!(
                s,
                "<h3>First failure</h3>{}",
                failure_html(f, file.as_deref(), card)
            );
        }
        if !p.missing.is_empty() {
            let _ = write!(
                s,
                "<h3>What could not be checked</h3>{}",
                missing_html(&p.missing)
            );
        }
        for e in evs.iter().filter(|e| e.party == Some(name)) {
            let v = e.verdict;
            let _ = write!(
                s,
                "<h3>Bundle <code>{}</code>: {}</h3><p>{}{}</p>{}{}",
                cut(e.file, CELL),
                badge(v.outcome),
                v.recorder
                    .map(|r| format!("recorder <code>{}</code> · ", hex_id(&r)))
                    .unwrap_or_default(),
                plural(v.records.len(), "disclosed event", "disclosed events"),
                checks_html(v),
                notes_html(v)
            );
            if let Some(f) = &v.first_failure
                && p.first_failure.as_ref().is_none_or(|(pf, _)| pf != f)
            {
                s.push_str(&failure_html(f, Some(e.file), None));
            }
            s.push_str(&approvals_html(e, &plan[e.idx]));
        }
        s.push_str("</section>\n");
        doc.push(&s);
    }
    cards_section(&mut doc, &list);
    let _ = writeln!(
        doc.out,
        "<section id=\"reverify\"><h2>Re-verify</h2>{}</section>",
        reverify_html(inv)
    );
    doc.finish()
}

// ---------------------------------------------------------------------------------------------
// PDF.

/// Why a PDF could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PdfError {
    /// No headless Chromium on this machine.
    #[error(
        "--pdf needs a headless Chromium to print the report, and none was found (AFR_CHROMIUM, \
         or chromium, chromium-browser or google-chrome on PATH): install one (Debian and Ubuntu: \
         `apt-get install chromium`; the project's scripts/setup.sh does), or set AFR_CHROMIUM to \
         its path; or write the report with --html FILE and print it to PDF from any browser \
         (the print layout is the same)"
    )]
    NoRenderer,
    /// The private working directory or the HTML could not be written.
    #[error("cannot prepare the report for printing")]
    Temp(#[source] std::io::Error),
    /// The renderer could not be started.
    #[error("cannot run {}", renderer.display())]
    Spawn {
        /// The renderer.
        renderer: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The renderer ran and wrote no PDF.
    #[error("{} did not print the report ({status}): {stderr}", renderer.display())]
    Failed {
        /// The renderer.
        renderer: PathBuf,
        /// Its exit status.
        status: String,
        /// The end of what it wrote on stderr.
        stderr: String,
    },
}

/// The headless Chromium used for `--pdf`: `AFR_CHROMIUM` if set, else the first of
/// `chromium`, `chromium-browser` and `google-chrome` on `PATH`.
pub fn find_renderer() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AFR_CHROMIUM").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// A private directory (mode 0700) under the system's temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<TempDir> {
        use std::os::unix::fs::DirBuilderExt as _;
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut last = None;
        for i in 0..16u32 {
            let p = base.join(format!("afr-report-{}-{nanos}-{i}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&p) {
                Ok(()) => return Ok(TempDir(p)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no temporary directory")))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `file://` URL of an absolute path, bytes outside `[A-Za-z0-9/._-]` percent-encoded.
fn file_url(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut s = String::from("file://");
    for &b in p.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/._-".contains(&b) {
            s.push(b as char);
        } else {
            let _ = write!(s, "%{b:02X}");
        }
    }
    s
}

/// How long the renderer may take.
const RENDER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(180);

/// Prints `html` to a PDF at `out` with a headless Chromium ([`find_renderer`]): the HTML is
/// written to a private temporary directory (with the renderer's profile), rendered with
/// `--print-to-pdf`, and the PDF copied to `out`; the directory is removed. Errors writing
/// `out` itself are returned as [`std::io::Error`] inside `Ok(Err(_))`, so the caller can name
/// the file.
pub fn print_pdf(html: &str, out: &Path) -> Result<std::io::Result<()>, PdfError> {
    let renderer = find_renderer().ok_or(PdfError::NoRenderer)?;
    let dir = TempDir::new().map_err(PdfError::Temp)?;
    let page = dir.0.join("report.html");
    let pdf = dir.0.join("report.pdf");
    std::fs::write(&page, html).map_err(PdfError::Temp)?;
    let err_path = dir.0.join("stderr");
    let err_file = std::fs::File::create(&err_path).map_err(PdfError::Temp)?;
    let mut child = std::process::Command::new(&renderer)
        // The document is this tool's own, holds no script and loads nothing (its CSP says
        // so); Chromium's sandbox cannot start as root or in many containers.
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            "--no-pdf-header-footer",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.0.join("profile").display()
        ))
        .arg(format!("--print-to-pdf={}", pdf.display()))
        .arg(file_url(&page))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(err_file)
        .spawn()
        .map_err(|source| PdfError::Spawn {
            renderer: renderer.clone(),
            source,
        })?;
    let start = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s.to_string(),
            Ok(None) if start.elapsed() > RENDER_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                break format!("killed after {} s", RENDER_TIMEOUT.as_secs());
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(50)),
            Err(e) => break e.to_string(),
        }
    };
    let ok = std::fs::read(&pdf).is_ok_and(|b| b.starts_with(b"%PDF"));
    if !ok {
        let text = std::fs::read_to_string(&err_path).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(PdfError::Failed {
            renderer,
            status,
            stderr: afr_core::text::escape(&tail.join(" | ")).into_owned(),
        });
    }
    Ok(std::fs::copy(&pdf, out).map(|_| ()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn esc_escapes_markup_and_controls() {
        assert_eq!(
            esc("<script>a&b\"c'd</script>"),
            "&lt;script&gt;a&amp;b&quot;c&#39;d&lt;/script&gt;"
        );
        assert_eq!(esc("x\u{202e}y\u{1b}[2K\n"), "x\\u{202e}y\\u{1b}[2K\\n");
        assert_eq!(esc("plain ünïcode"), "plain ünïcode");
    }

    #[test]
    fn cut_says_how_much_was_left_out() {
        let s = "é".repeat(3000); // 6000 bytes
        let c = cut(&s, MAX_STRING);
        assert!(c.contains("… (1904 bytes more)"), "{}", &c[c.len() - 80..]);
        assert_eq!(cut("short", MAX_STRING), "short");
        let j = cut_lines("{\n  \"a\": \"<b>\"\n}", 100);
        assert_eq!(j, "{\n  &quot;a&quot;: &quot;&lt;b&gt;&quot;\n}");
    }

    #[test]
    fn commands_never_hold_the_endpoint_path() {
        let inv = Invocation {
            command: "bundle",
            files: vec!["case one.bundle".into()],
            chain_id: Some(10),
            recorder: Some("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266".into()),
            rpc: Some("https://rpc.example/v2/SECRETKEY?k=1".into()),
            ..Invocation::default()
        };
        let c = inv.commands();
        assert_eq!(
            c[0],
            "afr-verify bundle 'case one.bundle' --chain-id 10 --recorder \
             0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266 --rpc https://rpc.example/…"
        );
        assert!(c.iter().all(|l| !l.contains("SECRET")), "{c:?}");
        assert_eq!(c.len(), 3, "{c:?}");
    }

    #[test]
    fn file_urls_are_percent_encoded() {
        assert_eq!(
            file_url(Path::new("/tmp/a b/r#1.html")),
            "file:///tmp/a%20b/r%231.html"
        );
    }
}
