//! Printing untrusted text: strings from a file or a store, made safe for a terminal.
//!
//! A recorded tool name, command or approver is attacker-controlled in a dispute. Printed raw,
//! `"\u{1b}[2K\rVERIFIED"` erases the line it is on and writes a verdict of its own, and a
//! bidirectional override (U+202E) reorders what the reader sees. [`escape`] replaces every
//! such character by a visible escape, so what is shown is what the bytes say:
//!
//! ```
//! use afr_core::text::escape;
//! assert_eq!(escape("rm -rf /\u{1b}[2K\rVERIFIED"), "rm -rf /\\u{1b}[2K\\rVERIFIED");
//! assert_eq!(escape("plain text: ünïcode"), "plain text: ünïcode");
//! ```

use std::borrow::Cow;

/// Whether `c` must not reach a terminal raw: C0 and C1 controls, DEL, bidirectional
/// formatting characters (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069), zero-width
/// and invisible formatting characters (U+200B..U+200D, U+2060..U+2064, U+206A..U+206F,
/// U+FEFF), line and paragraph separators (U+2028, U+2029), interlinear annotation marks
/// (U+FFF9..U+FFFB) and tag characters (U+E0000..U+E007F).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206f}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

/// A JSON text with every unsafe character (see [`is_unsafe`]) that serde_json leaves raw
/// (C1 controls, DEL, bidirectional and invisible formatting characters) written as a `\uXXXX`
/// escape (a surrogate pair above U+FFFF). Still the same JSON value; safe to print.
pub fn escape_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(is_unsafe) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_unsafe(c) {
            use std::fmt::Write as _;
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{:04x}", u);
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` with every unsafe character (see [`is_unsafe`]) written as a Rust-style escape:
/// `\n`, `\r`, `\t`, and anything else
/// as `\u{hex}`. Borrowed when there is nothing to escape.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe(c) => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Sorted numbers as runs: `[1, 2, 3, 7, 9, 10]` with `to = "-"` is `1-3, 7, 9-10`.
pub fn runs(sorted: &[u64], to: &str) -> String {
    let show = |(first, last): (u64, u64)| {
        if first == last {
            first.to_string()
        } else {
            format!("{first}{to}{last}")
        }
    };
    let mut parts = Vec::new();
    // The run being read: its first and last number.
    let mut run: Option<(u64, u64)> = None;
    for &n in sorted {
        run = match run {
            Some((first, last)) if n == last.wrapping_add(1) => Some((first, n)),
            Some(done) => {
                parts.push(show(done));
                Some((n, n))
            }
            None => Some((n, n)),
        };
    }
    parts.extend(run.map(show));
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_are_escaped_and_nothing_else() {
        assert_eq!(escape("a\u{1b}[31mb"), "a\\u{1b}[31mb");
        assert_eq!(escape("a\u{9b}31mb"), "a\\u{9b}31mb"); // C1 CSI
        assert_eq!(escape("x\u{202e}gnp.exe"), "x\\u{202e}gnp.exe");
        assert_eq!(escape("l1\nl2\r\t"), "l1\\nl2\\r\\t");
        assert_eq!(escape("\u{7f}"), "\\u{7f}");
        assert!(matches!(
            escape("safe ascii, ünïcode, 日本"),
            Cow::Borrowed(_)
        ));
        for s in [
            "\u{1b}", "\u{0}", "\u{85}", "\u{2028}", "\u{2066}", "\u{feff}",
        ] {
            assert!(!escape(s).chars().any(is_unsafe), "{s:?}");
        }
    }
}
