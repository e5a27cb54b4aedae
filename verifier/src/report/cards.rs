//! Event cards: one per event, with the eight semantic fields of an opened payload.

use std::{collections::BTreeSet, fmt::Write as _};

use afr_core::RecorderId;
use serde_json::Value;

use super::{
    CARD_BUDGET, CARD_STRINGS, CELL, Event, Evidence, Kind, MAX_CARDS, MAX_ITEMS, MAX_STRING,
    State, at, cat_colour,
    html::{Doc, cut, cut_lines, esc, hex_id, plural, utc},
    sections::approval_status_html,
    tool_of,
};

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
        b.field(at(p, "/intent/tool")),
        match at(p, "/intent/args") {
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
            b.field(at(h, "/signature/scheme")),
            b.field(at(h, "/signature/signer"))
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
    k.as_object().is_some_and(|o| !o.is_empty()).then(|| {
        let mut parts = labelled(k, &keys, "code", b);
        let c = &k["capture"];
        if c.is_object() {
            let how = match c["strength"].as_str() {
                Some("inline") => "captured <b>inline</b> (before it ran) by",
                Some("self_reported") => "<b>self-reported</b> after the fact, via",
                _ => "captured by",
            };
            parts.push(format!("{how} <code>{}</code>", b.field(&c["via"])));
        }
        parts.join(" · ")
    })
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
pub(super) fn cards(doc: &mut Doc, list: &[(&Evidence<'_>, Vec<Event<'_>>)]) -> usize {
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
pub(super) fn planned(list: &[(&Evidence<'_>, Vec<Event<'_>>)]) -> Vec<BTreeSet<u64>> {
    let mut left = MAX_CARDS;
    list.iter()
        .map(|(_, events)| {
            let take = events.len().min(left);
            left -= take;
            events.iter().take(take).map(|e| e.seq).collect()
        })
        .collect()
}

pub(super) fn cards_section(doc: &mut Doc, list: &[(&Evidence<'_>, Vec<Event<'_>>)]) {
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
