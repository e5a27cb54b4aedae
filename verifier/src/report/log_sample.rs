//! The records of a whole-log export that its report shows.

use std::{collections::BTreeSet, fmt::Write as _};

use afr_core::bundle::DisclosedLeaf;

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

/// The records of a whole-log export the report shows, re-read from the export's bytes: the
/// verifier keeps none of them (a log may hold millions), and the report keeps at most
/// [`MAX_MARKS`] + [`MAX_CARDS`].
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
    pub(super) fn read(bytes: &[u8]) -> LogSample {
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
