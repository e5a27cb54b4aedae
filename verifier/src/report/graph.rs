//! The delegation graph: one SVG of the events that delegate work and the events they
//! delegate to, across recorders and parties.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
};

use afr_core::verify::Outcome;
use serde_json::Value;

use super::{
    Event, Evidence, MAX_LIST, MAX_NODES, at,
    html::{esc, hex_id, short_id, utc},
    timeline::cut_chars,
    tool_of,
};

/// An event of the delegation graph.
pub(super) struct Node {
    /// Its recorder, as `0x…` (as referenced, if not an address).
    pub(super) recorder: String,
    pub(super) seq: u64,
    pub(super) party: Option<String>,
    pub(super) tool: Option<String>,
    pub(super) ts: Option<u64>,
    /// Disclosed in the evidence of this report.
    pub(super) disclosed: bool,
    pub(super) card: Option<String>,
}

#[derive(Default)]
pub(super) struct Graph {
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
    pub(super) fn node(&mut self, n: Node) -> Option<usize> {
        let key = (n.recorder.clone(), n.seq);
        if let Some(&i) = self.index.get(&key)
            && let Some(old) = self.nodes.get_mut(i)
        {
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

    pub(super) fn edge(
        &mut self,
        from: Option<usize>,
        to: Option<usize>,
        via: &str,
        status: Option<Outcome>,
    ) {
        if let (Some(f), Some(t)) = (from, to)
            && f != t
        {
            let e = self.edges.entry((f, t)).or_default();
            e.0.extend(via.split('+').map(str::to_owned));
            e.1 = worst(e.1, status);
        }
    }

    pub(super) fn svg(&self) -> String {
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
        let mut order: Vec<(usize, &Node)> = self.nodes.iter().enumerate().collect();
        order.sort_by(|(_, x), (_, y)| {
            (x.ts.is_none(), x.ts, &x.recorder, x.seq).cmp(&(
                y.ts.is_none(),
                y.ts,
                &y.recorder,
                y.seq,
            ))
        });
        let mut rank = vec![0usize; self.nodes.len()];
        for (r, (i, _)) in order.into_iter().enumerate() {
            if let Some(slot) = rank.get_mut(i) {
                *slot = r;
            }
        }
        // Node indices are the edges' and `rank`'s: all below `self.nodes.len()`.
        let rank_of = |i: usize| rank.get(i).copied().unwrap_or(0);
        let (bw, bh, gap_x, gap_y, top) = (230.0, 44.0, 110.0, 28.0, 44.0);
        let col_of = |i: usize| {
            self.nodes
                .get(i)
                .and_then(|n| cols.iter().position(|c| *c == n.recorder))
                .unwrap_or(0)
        };
        let pos = |i: usize| {
            (
                20.0 + col_of(i) as f64 * (bw + gap_x),
                top + rank_of(i) as f64 * (bh + gap_y),
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
                if rank_of(*f).abs_diff(rank_of(*t)) == 1 {
                    (
                        format!("M{x1:.1} {y1:.1} L{x1:.1} {y2:.1}"),
                        x1 + 6.0,
                        (y1 + y2) / 2.0 + 4.0,
                    )
                } else {
                    let (ya, yb) = (fy + bh / 2.0, ty + bh / 2.0);
                    let xr = fx + bw;
                    let bulge =
                        xr + 40.0 + (rank_of(*f).abs_diff(rank_of(*t)) as f64).min(6.0) * 6.0;
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
pub(super) fn graph_of(
    g: &mut Graph,
    ev: &Evidence<'_>,
    events: &[Event<'_>],
    cards: &BTreeSet<u64>,
) {
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
            at(p, "/intent/args/offer/seq").as_u64().unwrap_or(e.seq)
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
