//! `POST /v1/events`: lines to events to receipts, on a blocking thread.
//!
//! Each line is parsed by [`EventInput::from_json`] with the recorder's size cap, exactly as
//! `afr record` parses it, after a top-level `"idempotency_key"` member is cut out of it (the
//! other members are passed on byte for byte, so the strict parser still sees duplicate keys
//! and unknown fields). Good lines are submitted in order; a bad line is reported and skipped.
//! The receipts are released once the last submitted event is durable.

use afr_core::{EventInput, event::InputError};
use afr_recorder::{Durability, MAX_IDEMPOTENCY_KEY_BYTES, RecordError, Recorder};
use bytes::Bytes;
use serde::de::{MapAccess, Visitor};
use serde_json::{Value, json, value::RawValue};

/// Name of the member that carries an idempotency key.
pub(crate) const IDEMPOTENCY_MEMBER: &str = "idempotency_key";

/// Room a line may take beyond the event cap for the idempotency member: a longer line makes
/// the server refuse its whole batch (413).
pub const LINE_SLACK: usize = 256;

/// What a batch came to.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) receipts: Vec<Value>,
    pub(crate) errors: Vec<Value>,
    /// A failure of the recorder (not of an event) that stopped the batch.
    pub(crate) fatal: Option<RecordError>,
}

/// Records `lines` (1-based line numbers; blank lines skipped, as `afr record` does).
pub(crate) fn record_lines(r: &Recorder, lines: &[Bytes]) -> Outcome {
    let cap = r.config().max_event_bytes;
    let mut out = Outcome::default();
    let mut last_seq = None;
    for (i, line) in lines.iter().enumerate() {
        let no = i + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let res = split_key(line).and_then(|(key, event)| {
            let ev = EventInput::from_json(&event, cap)?;
            Ok(match key {
                Some(k) => r.submit_idempotent(k.as_bytes(), ev),
                None => r.submit(ev).map(|receipt| afr_recorder::IdempotentReceipt {
                    receipt,
                    duplicate: false,
                }),
            })
        });
        match res {
            Err(e) | Ok(Err(RecordError::Invalid(e))) => out.errors.push(error_json(no, &e)),
            Ok(Err(e)) => {
                out.fatal = Some(e);
                break;
            }
            Ok(Ok(ir)) => {
                let rc = ir.receipt;
                last_seq = Some(last_seq.map_or(rc.seq, |s: u64| s.max(rc.seq)));
                out.receipts.push(json!({
                    "line": no,
                    "seq": rc.seq,
                    "epoch": rc.epoch,
                    "leaf_hash": rc.leaf_hash.to_hex(),
                    "timestamp_us": rc.timestamp_us,
                    "duplicate": ir.duplicate,
                }));
            }
        }
    }
    // `submit` returns before the group write in group mode; `Sync` wrote each event itself.
    if let Some(seq) = last_seq
        && r.config().durability == Durability::Group
        && let Err(e) = r.wait_written(seq)
    {
        // Nothing is acknowledged unless it is durable.
        out.receipts.clear();
        out.fatal = Some(e);
    }
    out
}

fn error_json(line: usize, e: &InputError) -> Value {
    json!({ "line": line, "field": e.path, "message": e.message })
}

/// Cuts a top-level `"idempotency_key": "..."` member out of an event object: the key, and
/// the object without it (the other members byte for byte, in their order). A line without
/// the member is returned as it is.
pub fn split_key(line: &[u8]) -> Result<(Option<String>, std::borrow::Cow<'_, [u8]>), InputError> {
    let needle = IDEMPOTENCY_MEMBER.as_bytes();
    if !line.windows(needle.len()).any(|w| w == needle) {
        return Ok((None, line.into()));
    }
    let Ok(text) = std::str::from_utf8(line) else {
        // Let the event parser name the problem.
        return Ok((None, line.into()));
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let members = match serde::Deserializer::deserialize_map(&mut de, Members) {
        Ok(m) if de.end().is_ok() => m,
        // Not one object: the event parser reports it as it would without a key.
        _ => return Ok((None, line.into())),
    };
    let mut key = None;
    let mut rest = String::with_capacity(line.len());
    rest.push('{');
    for (name, value) in &members {
        if name == IDEMPOTENCY_MEMBER {
            if key.is_some() {
                return Err(invalid("duplicate key"));
            }
            let k: String =
                serde_json::from_str(value.get()).map_err(|_| invalid("must be a string"))?;
            if k.is_empty() || k.len() > MAX_IDEMPOTENCY_KEY_BYTES {
                return Err(invalid(&format!(
                    "must be 1 to {MAX_IDEMPOTENCY_KEY_BYTES} bytes"
                )));
            }
            key = Some(k);
            continue;
        }
        if rest.len() > 1 {
            rest.push(',');
        }
        // A name re-encoded by serde_json is the same string; the parser sees no difference.
        rest.push_str(&serde_json::to_string(name).map_err(|e| invalid(&e.to_string()))?);
        rest.push(':');
        rest.push_str(value.get());
    }
    rest.push('}');
    Ok((key, rest.into_bytes().into()))
}

fn invalid(message: &str) -> InputError {
    InputError {
        path: IDEMPOTENCY_MEMBER.into(),
        message: message.into(),
    }
}

/// The members of a JSON object in order, duplicates kept, values unparsed.
struct Members;

impl<'de> Visitor<'de> for Members {
    type Value = Vec<(String, &'de RawValue)>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(k) = map.next_key::<String>()? {
            let v: &'de RawValue = map.next_value()?;
            out.push((k, v));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn the_key_is_cut_out_and_the_rest_kept_byte_for_byte() {
        let (k, rest) =
            split_key(br#"{"a": {"x":1 }, "idempotency_key":"k1","b":[1, 2]}"#).unwrap();
        assert_eq!(k.as_deref(), Some("k1"));
        assert_eq!(&*rest, br#"{"a":{"x":1 },"b":[1, 2]}"#);
        // Duplicates of other members survive for the strict parser to refuse.
        let (_, rest) = split_key(br#"{"a":1,"a":2,"idempotency_key":"k"}"#).unwrap();
        assert_eq!(&*rest, br#"{"a":1,"a":2}"#);
        let (k, rest) = split_key(br#"{"a":1}"#).unwrap();
        assert!(k.is_none());
        assert_eq!(&*rest, br#"{"a":1}"#);
    }

    #[test]
    fn a_bad_key_names_the_member() {
        for bad in [
            &br#"{"idempotency_key":1}"#[..],
            br#"{"idempotency_key":""}"#,
            br#"{"idempotency_key":"a","idempotency_key":"b"}"#,
        ] {
            assert_eq!(split_key(bad).unwrap_err().path, IDEMPOTENCY_MEMBER);
        }
        let long = format!(r#"{{"idempotency_key":"{}"}}"#, "x".repeat(129));
        assert!(split_key(long.as_bytes()).is_err());
    }
}
