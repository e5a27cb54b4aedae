//! The sections every report shares: what the verdict rests on, the first failure, what is
//! missing, the checks, the notes, the approvals, the anchors and how to re-verify.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
};

use afr_core::verify::Failure;

use super::{
    CELL, Evidence, Invocation, LINE, MAX_LIST, MAX_STRING,
    html::{check_about, cut, esc, hex_id, plural, short_id, utc},
};
use crate::{
    Trust, Verdict,
    approvals::{Approval, Status},
};

/// The trust table rows: chain, contract, parties, approvers.
pub(super) fn trust_rows(trust: &Trust, party: Option<&str>) -> String {
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

pub(super) fn checked_row(checked_at_us: u64) -> String {
    format!(
        "<tr><th>Checked at</th><td>{} (UTC), by afr-verify {}</td></tr>",
        utc(checked_at_us),
        env!("CARGO_PKG_VERSION")
    )
}

pub(super) fn files_rows(inv: &Invocation) -> String {
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
pub(super) fn failure_html(f: &Failure, file: Option<&str>, card: Option<String>) -> String {
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

pub(super) fn missing_html(missing: &[String]) -> String {
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

pub(super) fn checks_html(v: &Verdict) -> String {
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
pub(super) fn notes_html(v: &Verdict) -> String {
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

/// The roots of each epoch under the trust policy's rule (`crate::roots`), as a table; empty
/// when the verdict has none. Long runs are cut: the JSON verdict has every epoch.
pub(super) fn roots_html(v: &Verdict) -> String {
    const ROWS: usize = 200;
    let Some(r) = &v.roots else {
        return String::new();
    };
    let epochs = r["epochs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let cell = |x: &serde_json::Value| match x {
        serde_json::Value::Bool(true) => "yes".to_owned(),
        serde_json::Value::Bool(false) | serde_json::Value::Null => {
            "<span class=\"err\">no</span>".to_owned()
        }
        serde_json::Value::Number(n) => {
            let t = n
                .as_u64()
                .map(|s| super::html::utc(s.saturating_mul(1_000_000)))
                .unwrap_or_default();
            esc(&t)
        }
        other => esc(other.as_str().unwrap_or_default()),
    };
    let mut rows = String::new();
    for e in epochs.iter().take(ROWS) {
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            e["epoch"].as_u64().unwrap_or_default(),
            cell(&e["chain"]),
            cell(&e["witnessed_at"]),
            cell(&e["timestamped_at"]),
            cell(&e["required_met"]),
        ));
    }
    let more = if epochs.len() > ROWS {
        format!(
            "<p>... and {} more epochs (in the JSON verdict)</p>",
            epochs.len() - ROWS
        )
    } else {
        String::new()
    };
    format!(
        "<h3>Roots per epoch (require {})</h3><table><tr><th>epoch</th><th>anchored</th><th>witnessed</th><th>timestamped</th><th>rule met</th></tr>{rows}</table>{more}",
        esc(r["require"].as_str().unwrap_or_default())
    )
}

pub(super) fn approval_status_html(a: &Approval) -> String {
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

pub(super) fn approvals_html(ev: &Evidence<'_>, with_cards: &BTreeSet<u64>) -> String {
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
/// The providers and the header hashes the anchored roots rest on (`Verdict::chain`): what a
/// reader compares with any node or explorer.
fn chain_html(v: &Verdict) -> String {
    let Some(c) = &v.chain else {
        return String::new();
    };
    let mut out = String::new();
    if let Some(ps) = c["providers"].as_array().filter(|p| !p.is_empty()) {
        let items: String = ps
            .iter()
            .take(MAX_LIST)
            .map(|p| {
                let agreed = p["agreed"].as_bool() == Some(true);
                format!(
                    "<li>{} <span class=\"{}\">{}</span>{}</li>",
                    esc(p["endpoint"].as_str().unwrap_or("?")),
                    if agreed { "ok" } else { "err" },
                    if agreed { "agreed" } else { "did not agree" },
                    p["detail"]
                        .as_str()
                        .map(|d| format!(": {}", esc(d)))
                        .unwrap_or_default()
                )
            })
            .collect();
        out.push_str(&format!(
            "<br>Providers (rule: {}):<ul>{items}</ul>",
            esc(c["rule"].as_str().unwrap_or("?"))
        ));
    }
    if let Some(hs) = c["headers"].as_object().filter(|h| !h.is_empty()) {
        let depth: std::collections::BTreeMap<u64, &serde_json::Value> = c["depth"]
            .as_array()
            .map(|d| {
                d.iter()
                    .filter_map(|x| Some((x["block"].as_u64()?, x)))
                    .collect()
            })
            .unwrap_or_default();
        let rows: String = hs
            .iter()
            .take(MAX_LIST)
            .map(|(n, h)| {
                let d = n.parse::<u64>().ok().and_then(|b| depth.get(&b));
                format!(
                    "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                    esc(n),
                    esc(h.as_str().unwrap_or("?")),
                    d.and_then(|d| d["confirmations"].as_u64())
                        .map_or("?".into(), |c| c.to_string()),
                    match d.and_then(|d| d["finalized"].as_bool()) {
                        Some(true) => "yes",
                        Some(false) => "no",
                        None => "not said",
                    }
                )
            })
            .collect();
        out.push_str(&format!(
            "<br>Block headers relied upon (compare with any node or explorer):<table><tr><th>block</th><th>hash</th><th>confirmations</th><th>finalized</th></tr>{rows}</table>"
        ));
    }
    out
}

pub(super) fn anchors_from_html(v: &Verdict) -> String {
    match &v.anchors_from {
        None => String::new(),
        Some(a @ (crate::AnchorsFrom::Chain { .. } | crate::AnchorsFrom::Archive { .. })) => {
            format!(
                "<span class=\"meta\">{}</span>{}",
                esc(&a.describe()),
                chain_html(v)
            )
        }
        Some(a @ crate::AnchorsFrom::File { .. }) => {
            format!("<b class=\"err\">{}</b>", esc(&a.describe()))
        }
    }
}

pub(super) fn anchors_table(evs: &[Evidence<'_>], party_col: bool) -> String {
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

pub(super) fn reverify_html(inv: &Invocation) -> String {
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
    if !inv.rpc.is_empty() {
        s.push_str(
            " The endpoint is shown by scheme, host and port only (a hosted endpoint's path or query may hold an API key): use your own node or endpoint of the same chain.",
        );
    }
    s.push_str("</p>");
    s
}
