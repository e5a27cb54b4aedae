//! The records of a whole-log export that its report shows.

use std::{collections::BTreeSet, fmt::Write as _};

use afr_core::{
    bundle::DisclosedLeaf,
    cbor::CborError,
    export::{Frame, Frames, LogReader},
    verify::{Layers, verify_frames},
};

use super::{
    Event, Evidence, MAX_CARDS, MAX_MARKS, State,
    cards::cards,
    html::{Doc, plural},
    timeline::{marks_of, timeline},
};
use crate::Verdict;

/// A record of a whole-log export, as the report shows it.
struct LogRecord {
    seq: u64,
    leaf: DisclosedLeaf,
    /// Its sealed payload is in the export (else it was withheld).
    sealed: bool,
}

/// The event frames of a whole-log export, as verification read them: where each starts in
/// the export, in file order, up to the first frame that does not parse. The verifier keeps no
/// record (a log may hold millions); the report draws its sample from these ([`LogSample`]).
pub(crate) struct LogFrames<'a> {
    bytes: &'a [u8],
    /// Offset in `bytes` of each event frame.
    events: Vec<usize>,
}

impl std::fmt::Debug for LogFrames<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogFrames")
            .field("bytes", &self.bytes.len())
            .field("events", &self.events.len())
            .finish()
    }
}

/// The frames of an export in memory, as the checks take them, noting where each event frame
/// starts until the first frame that does not parse (or the end of the input).
struct Noting<'a> {
    rd: LogReader<'a>,
    frames: LogFrames<'a>,
    /// A frame did not parse, or the input ended: nothing more is noted.
    ended: bool,
}

impl Frames for Noting<'_> {
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CborError> {
        let at = self.rd.offset();
        let frame = self.rd.next_frame();
        match &frame {
            Ok(Some(Frame::Event { .. })) if !self.ended => self.frames.events.push(at),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => self.ended = true,
        }
        frame
    }

    fn offset(&self) -> u64 {
        self.rd.offset() as u64
    }

    fn at_end(&mut self) -> bool {
        self.rd.at_end()
    }
}

/// Verifies the whole-log export `bytes` as `afr_core::verify::verify_log` does (the same
/// checks on the same frames, so the same report), noting its event frames for the evidence
/// report in the same pass. Where the checks stop early (at the first failure), the pass goes
/// on reading frames, without checking them, up to the first that does not parse: the report
/// shows the records of the whole export, as it always has.
pub(crate) fn verify_log_noting(bytes: &[u8]) -> (afr_core::verify::Report, LogFrames<'_>) {
    let mut rd = Noting {
        rd: LogReader::new(bytes),
        frames: LogFrames {
            bytes,
            events: Vec::new(),
        },
        ended: false,
    };
    let rep = verify_frames(&mut rd, bytes.len() as u64, Layers::ALL);
    while !rd.ended {
        let _ = Frames::next_frame(&mut rd);
    }
    (rep, rd.frames)
}

/// The records of a whole-log export the report shows, at most [`MAX_MARKS`] + [`MAX_CARDS`]
/// of them, drawn from the frames verification noted ([`LogFrames`]).
pub(super) struct LogSample {
    /// Records in the export, up to the first frame that does not parse.
    total: u64,
    /// One record in every `stride` is on the timeline, from the first, and the last.
    stride: u64,
    /// The records on the timeline.
    marks: Vec<LogRecord>,
    /// The records with a card: all of them, or the first and the last [`MAX_CARDS`] / 2.
    cards: Vec<LogRecord>,
}

impl LogSample {
    /// The records shown of the export whose event frames are `frames`: only those are
    /// decoded (again), from their frames.
    pub(super) fn read(frames: &LogFrames<'_>) -> LogSample {
        let total = frames.events.len() as u64;
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
        for (i, &at) in (0u64..).zip(&frames.events) {
            let (mark, card) = (i % stride == 0 || i + 1 == total, carded(i));
            if !(mark || card) {
                continue;
            }
            // Each offset is where an event frame parsed during verification.
            let Some(Ok(Some(Frame::Event {
                record_bytes,
                record: r,
                payload,
            }))) = frames
                .bytes
                .get(at..)
                .map(|rest| LogReader::new(rest).next_frame())
            else {
                continue;
            };
            let rec = || LogRecord {
                seq: r.seq,
                leaf: DisclosedLeaf {
                    leaf: afr_core::hash::leaf_hash(record_bytes),
                    timestamp_us: r.timestamp_us,
                    epoch: r.epoch,
                    category: r.category,
                    lane: r.lane.clone(),
                },
                sealed: payload.is_some(),
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
pub(super) fn log_timeline(doc: &mut Doc, ev: &Evidence<'_>, sample: &LogSample) {
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
pub(super) fn log_cards(doc: &mut Doc, ev: &Evidence<'_>, sample: &LogSample) {
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
