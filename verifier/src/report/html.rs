//! The HTML a report is written in: escaping, cutting, the document and its style.
//!
//! Every string from the evidence reaches the page through [`esc`] (or [`cut`], which escapes
//! what it keeps); [`Doc`] opens the document under the Content-Security-Policy and closes
//! it with the footer, and counts the bytes of the cards written into it.

use std::fmt::Write as _;

use afr_core::{RecorderId, calendar::format_time_us, verify::Outcome};

use super::{CSP, MAX_STRING};

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
pub(super) fn cut(s: &str, max: usize) -> String {
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
pub(super) fn cut_lines(s: &str, max: usize) -> String {
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
pub(super) fn utc(us: u64) -> String {
    format_time_us(us)
}

pub(super) fn hex_id(r: &RecorderId) -> String {
    format!("0x{}", hex::encode(r))
}

/// `0xf39f…2266`.
pub(super) fn short_id(r: &str) -> String {
    if r.len() == 42 && r.is_ascii() {
        format!("{}…{}", &r[..6], &r[38..])
    } else {
        r.to_owned()
    }
}

pub(super) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub(super) fn outcome_class(o: Outcome) -> &'static str {
    o.name()
}

pub(super) fn badge(o: Outcome) -> String {
    format!(
        "<span class=\"badge {}\">{}</span>",
        outcome_class(o),
        o.name().to_uppercase()
    )
}

/// What an outcome means, in plain words: of one piece of evidence, or of a `case`.
pub(super) fn meaning(o: Outcome, case: bool) -> &'static str {
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
pub(super) fn check_about(name: &str) -> &'static str {
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
pub(super) struct Doc {
    pub(super) out: String,
    /// Cards written.
    pub(super) cards: usize,
    /// Bytes of the cards written.
    pub(super) card_bytes: usize,
}

impl Doc {
    pub(super) fn new(title: &str) -> Doc {
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

    pub(super) fn push(&mut self, s: &str) {
        self.out.push_str(s);
    }

    pub(super) fn finish(mut self) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::MAX_STRING;

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
}
