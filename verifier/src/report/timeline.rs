//! The timeline: one SVG of the events by lane (rows) and time (left to right).

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
};

use afr_core::Category;

use super::{
    Event, Evidence, MAX_MARKS, MAX_ROWS, SHORT, State, approval_word, cat_colour, error_of,
    guardrails,
    html::{esc, plural, utc},
    tool_of,
};

/// One mark on the timeline.
pub(super) struct Mark {
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

pub(super) fn marks_of(
    ev: &Evidence<'_>,
    events: &[Event<'_>],
    cards: &BTreeSet<u64>,
    out: &mut Vec<Mark>,
) {
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
pub(super) fn timeline(marks: &[Mark], total: usize, stride: Option<u64>) -> String {
    if marks.is_empty() {
        return "<p class=\"meta\">No disclosed event to place on a timeline.</p>".into();
    }
    let shown = marks.get(..MAX_MARKS).unwrap_or(marks);
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
    let row = |m: &Mark| row_of.get(m.row.as_str()).copied().unwrap_or(0);
    // Per row (`row` is below `rows.len()`): where each level's last mark is, levels used.
    let mut last: Vec<[f64; LEVELS]> = vec![[f64::NEG_INFINITY; LEVELS]; rows.len()];
    let mut levels = vec![1usize; rows.len()];
    let mut order: Vec<(usize, &Mark)> = shown.iter().enumerate().collect();
    order.sort_by_key(|&(i, m)| (m.ts, i));
    let mut level_of = vec![0usize; shown.len()];
    for (i, m) in order {
        let r = row(m);
        let x = x_of(m.ts);
        let (Some(lane), Some(used), Some(level)) =
            (last.get_mut(r), levels.get_mut(r), level_of.get_mut(i))
        else {
            continue;
        };
        let l = lane
            .iter()
            .position(|&end| end <= x - 16.0)
            .unwrap_or_else(|| {
                lane.iter()
                    .enumerate()
                    .min_by(|(_, a), (_, b)| a.total_cmp(b))
                    .map_or(0, |(l, _)| l)
            });
        if let Some(end) = lane.get_mut(l) {
            *end = x;
        }
        *used = (*used).max(l + 1);
        *level = l;
    }
    let place: Vec<(usize, usize)> = shown
        .iter()
        .zip(&level_of)
        .map(|(m, &l)| (row(m), l))
        .collect();
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
    for (r, ((name, &y), &used)) in rows.iter().zip(&row_y).zip(&levels).enumerate() {
        let h = used as f64 * level_h + 14.0;
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
        let Some(&row_top) = row_y.get(r) else {
            continue;
        };
        let x = x_of(m.ts);
        let y = row_top + 10.0 + l as f64 * level_h;
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
pub(super) fn cut_chars(s: &str, n: usize) -> String {
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
