//! A strict parse of the copy: JSON with duplicate object keys refused at every depth.
//!
//! serde_json keeps the last of two equal keys; a server written in another language may keep
//! the first. A gateway that checks one value while the server acts on the other is bypassed,
//! so a message with a duplicate key is never forwarded.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer};
use serde_json::Value;

/// Parses `bytes` as one JSON value, refusing duplicate object keys (the error names the key).
pub fn parse_strict(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let Strict(v) = Strict::deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
        let mut v = Vec::new();
        while let Some(Strict(x)) = a.next_element()? {
            v.push(x);
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
        let mut m = serde_json::Map::new();
        while let Some(k) = a.next_key::<String>()? {
            let Strict(v) = a.next_value()?;
            if m.contains_key(&k) {
                return Err(de::Error::custom(format!("duplicate key `{k}`")));
            }
            m.insert(k, v);
        }
        Ok(Value::Object(m))
    }
}

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
