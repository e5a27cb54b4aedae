//! A strict parse of the copy (JSON with duplicate object keys refused at every depth, by the
//! core's parser), and the globs of the policy file.
//!
//! serde_json keeps the last of two equal keys; a server written in another language may keep
//! the first. A gateway that checks one value while the server acts on the other is bypassed,
//! so a message with a duplicate key is never forwarded.

/// Parses `bytes` as one JSON value, refusing duplicate object keys (the error names the key):
/// the core's strict parser, the one events go through.
pub use afr_core::event::parse_strict_json as parse_strict;

/// Whether `text` matches the glob `pattern`: `*` is any run of characters (`/` included),
/// `?` one character; everything else is literal.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matcher with one backtrack point (the last `*`): linear in practice, never
    // exponential.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        assert!(parse_strict(br#"{"a":1,"b":{"c":2}}"#).is_ok());
        let e = parse_strict(br#"{"params":{"arguments":{"path":"/tmp/x","path":"/etc/x"}}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("duplicate key `path`"), "{e}");
        assert!(parse_strict(br#"[{"a":1,"a":1}]"#).is_err());
        assert!(parse_strict(br#"{"a":1} x"#).is_err());
    }

    #[test]
    fn globs() {
        assert!(glob("write_*", "write_file"));
        assert!(glob("*", ""));
        assert!(glob("/etc/*", "/etc/ssh/sshd_config"));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "ac"));
        assert!(!glob("read_file", "read_files"));
        assert!(glob("*file*", "edit_file_now"));
        assert!(!glob("/tmp/*", "/etc/passwd"));
    }
}
