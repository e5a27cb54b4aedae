//! Deterministic CBOR (RFC 8949 §4.2.1): one value, one encoding.
//!
//! Every hash in AFR is over canonical CBOR, so two honest implementations agree on the bytes
//! and an attacker cannot re-encode a value to change its hash without changing its meaning.
//! The rules: integers, lengths and tags in their shortest form; definite lengths only; map
//! keys sorted by the bytewise order of their own encodings, no duplicates; floats in the
//! shortest form that keeps the value (ciborium's encoder already picks it).
//!
//! Two codecs share these rules:
//! - the generic codec ([`to_vec`], [`from_slice`]) for serde types such as the payload: it
//!   goes through [`ciborium::Value`], sorts map keys, and on decoding re-encodes what it read
//!   and rejects the input unless the bytes are identical. So `encode(decode(b)) == b` holds for
//!   every accepted `b` by construction, and trailing bytes are rejected too;
//! - a small strict [`Writer`]/[`Reader`] pair for the fixed-shape structures (records, epoch
//!   headers, export frames), which is what the hot path and the 1M-record verifier use.
//!
//! ```
//! use afr_core::cbor;
//! let b = cbor::to_vec(&std::collections::HashMap::from([("bb", 1), ("a", 2)])).unwrap();
//! assert_eq!(b, [0xa2, 0x61, b'a', 0x02, 0x62, b'b', b'b', 0x01]); // "a" sorts first
//! assert!(cbor::from_slice::<ciborium::Value>(&[0x18, 0x05]).is_err()); // 5 in two bytes
//! ```

use ciborium::Value;
use serde::{Serialize, de::DeserializeOwned};

/// Why bytes are not acceptable canonical CBOR, or a value cannot be encoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CborError {
    /// The bytes are not well-formed CBOR, or do not match the expected shape.
    #[error("malformed cbor: {0}")]
    Malformed(String),
    /// Well-formed CBOR, but not in the deterministic encoding (or with trailing bytes).
    #[error("cbor is not in canonical form")]
    NonCanonical,
    /// A map holds the same key twice.
    #[error("cbor map has a duplicate key")]
    DuplicateKey,
    /// Input ended in the middle of an item.
    #[error("cbor input truncated")]
    Truncated,
    /// Bytes left over after the item.
    #[error("{0} trailing bytes after cbor item")]
    Trailing(usize),
}

/// The length in bytes of the one CBOR item at the start of `buf`, walking its heads without
/// decoding it: [`CborError::Truncated`] if it does not end within `buf`, `Malformed` for an
/// indefinite length, a reserved head or nesting deeper than 64. A streaming reader uses it to
/// know when a whole item is buffered.
pub fn item_len(buf: &[u8]) -> Result<usize, CborError> {
    let mut pos = 0usize;
    // Items still to read at each open level.
    let mut todo: Vec<u64> = vec![1];
    while let Some(top) = todo.last_mut() {
        if *top == 0 {
            todo.pop();
            continue;
        }
        *top -= 1;
        let ib = *buf.get(pos).ok_or(CborError::Truncated)?;
        pos += 1;
        let (major, info) = (ib >> 5, ib & 0x1f);
        let width = match info {
            0..=23 => 0,
            24 => 1,
            25 => 2,
            26 => 4,
            27 => 8,
            _ => {
                return Err(CborError::Malformed(
                    "indefinite length or reserved head".into(),
                ));
            }
        };
        let arg_bytes = buf.get(pos..pos + width).ok_or(CborError::Truncated)?;
        pos += width;
        let arg = if width == 0 {
            info as u64
        } else {
            arg_bytes.iter().fold(0u64, |a, b| (a << 8) | *b as u64)
        };
        match major {
            2 | 3 => {
                let n = usize::try_from(arg).map_err(|_| CborError::Truncated)?;
                pos = pos.checked_add(n).ok_or(CborError::Truncated)?;
                if pos > buf.len() {
                    return Err(CborError::Truncated);
                }
            }
            4 => todo.push(arg),
            5 => todo.push(
                arg.checked_mul(2)
                    .ok_or_else(|| CborError::Malformed("map too long".into()))?,
            ),
            6 => todo.push(1),
            _ => {}
        }
        if todo.len() > 64 {
            return Err(CborError::Malformed("nesting deeper than 64".into()));
        }
    }
    Ok(pos)
}

/// Encodes a serde value as canonical CBOR (directly, see [`crate::cbor_ser`]).
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CborError> {
    let mut out = Vec::with_capacity(256);
    crate::cbor_ser::write(value, &mut out)?;
    Ok(out)
}

/// Encodes a serde value as canonical CBOR through [`ciborium::Value`] and [`canonicalize`]:
/// the slow reference the direct encoder is tested against.
pub fn to_vec_via_value<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CborError> {
    let mut v = Value::serialized(value).map_err(|e| CborError::Malformed(e.to_string()))?;
    canonicalize(&mut v)?;
    let mut out = Vec::with_capacity(256);
    ciborium::into_writer(&v, &mut out).map_err(|e| CborError::Malformed(e.to_string()))?;
    Ok(out)
}

/// Decodes canonical CBOR into a serde value; rejects any other encoding of it.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CborError> {
    let v: Value = ciborium::from_reader(bytes).map_err(|e| match e {
        ciborium::de::Error::Io(_) => CborError::Truncated,
        other => CborError::Malformed(other.to_string()),
    })?;
    reject_tags(&v)?;
    // The canonical encoder sorts keys and rejects duplicates; anything else that differs
    // (long heads, indefinite lengths, wide floats, trailing bytes) shows as a byte mismatch.
    if to_vec(&v)? != bytes {
        return Err(CborError::NonCanonical);
    }
    v.deserialized()
        .map_err(|e| CborError::Malformed(e.to_string()))
}

/// Decodes CBOR straight into JSON, as `from_slice::<serde_json::Value>` would, without the
/// canonical-form check or the intermediate value: for payloads already authenticated (an
/// opened AEAD with its key commitment), where only speed matters. A full scan decodes every
/// payload of the log with it. Map keys must be text; byte strings, tags and indefinite
/// lengths are refused, as the strict decoder refuses them for JSON; nesting is capped at 128.
pub fn to_json(bytes: &[u8]) -> Result<serde_json::Value, CborError> {
    let mut r = Reader::new(bytes);
    let v = json_item(&mut r, 0)?;
    r.finish()?;
    Ok(v)
}

/// [`to_json`] of a map keeping only the entries whose key is in `keep` (the others are
/// skipped unread): a query that reads two fields of an event builds only those. Anything
/// but a map is decoded whole.
pub fn to_json_fields(bytes: &[u8], keep: &[String]) -> Result<serde_json::Value, CborError> {
    let mut r = Reader::new(bytes);
    if r.peek()? >> 5 != 5 {
        return to_json(bytes);
    }
    let v = json_map(&mut r, 1, Some(keep))?;
    r.finish()?;
    Ok(v)
}

/// A map (the reader at its head) as a JSON object; with `keep`, only the entries whose key is
/// in it are built and the others skipped unread.
fn json_map(
    r: &mut Reader<'_>,
    depth: u32,
    keep: Option<&[String]>,
) -> Result<serde_json::Value, CborError> {
    let n = r.arg(5)?;
    let mut m = serde_json::Map::new();
    for _ in 0..n {
        if r.peek()? >> 5 != 3 {
            return Err(CborError::Malformed("map key is not text".into()));
        }
        let k = r.text()?;
        if keep.is_none_or(|keep| keep.iter().any(|x| x == k)) {
            let k = k.to_owned();
            m.insert(k, json_item(r, depth)?);
        } else {
            let len = item_len(r.rest())?;
            r.take(len)?;
        }
    }
    Ok(serde_json::Value::Object(m))
}

fn json_item(r: &mut Reader<'_>, depth: u32) -> Result<serde_json::Value, CborError> {
    use serde_json::Value as J;
    if depth > 128 {
        return Err(CborError::Malformed("nesting deeper than 128".into()));
    }
    let ib = r.peek()?;
    let (major, info) = (ib >> 5, ib & 0x1f);
    Ok(match major {
        MAJOR_UINT => J::from(r.uint()?),
        1 => {
            let n = r.arg(1)?;
            // Below i64::MIN JSON's numbers (as serde_json holds them) have no exact form.
            let n = i64::try_from(n)
                .map_err(|_| CborError::Malformed("integer below i64::MIN".into()))?;
            J::from(-1 - n)
        }
        3 => J::String(r.text()?.to_owned()),
        4 => {
            let n = r.array()?;
            let mut a = Vec::with_capacity(n.min(1024) as usize);
            for _ in 0..n {
                a.push(json_item(r, depth + 1)?);
            }
            J::Array(a)
        }
        5 => json_map(r, depth + 1, None)?,
        7 => {
            r.take(1)?;
            match info {
                20 => J::Bool(false),
                21 => J::Bool(true),
                22 | 23 => J::Null,
                25 => J::from(f16_to_f64(u16::from_be_bytes(r.take_array()?))),
                26 => J::from(f32::from_be_bytes(r.take_array()?) as f64),
                27 => J::from(f64::from_be_bytes(r.take_array()?)),
                _ => return Err(CborError::Malformed("unsupported simple value".into())),
            }
        }
        2 => {
            return Err(CborError::Malformed(
                "byte string where JSON was expected".into(),
            ));
        }
        _ => return Err(CborError::Malformed("cbor tags are not allowed".into())),
    })
}

/// An IEEE 754 half-precision float, widened.
fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = (h >> 10) & 0x1f;
    let frac = (h & 0x3ff) as f64;
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + frac / 1024.0) * 2f64.powi(e as i32 - 15),
    }
}

/// No AFR structure uses tags; refusing them keeps one encoding per value.
fn reject_tags(v: &Value) -> Result<(), CborError> {
    match v {
        Value::Tag(..) => Err(CborError::Malformed("cbor tags are not allowed".into())),
        Value::Array(items) => items.iter().try_for_each(reject_tags),
        Value::Map(entries) => entries.iter().try_for_each(|(k, v)| {
            reject_tags(k)?;
            reject_tags(v)
        }),
        _ => Ok(()),
    }
}

/// Sorts every map's entries by the bytes of the encoded key, and rejects duplicate keys.
pub fn canonicalize(v: &mut Value) -> Result<(), CborError> {
    match v {
        Value::Array(items) => items.iter_mut().try_for_each(canonicalize),
        // No AFR structure uses tags; refusing them keeps one encoding per value.
        Value::Tag(..) => Err(CborError::Malformed("cbor tags are not allowed".into())),
        Value::Map(entries) => {
            let mut keyed = Vec::with_capacity(entries.len());
            for (mut k, mut val) in entries.drain(..) {
                canonicalize(&mut k)?;
                canonicalize(&mut val)?;
                let mut kb = Vec::new();
                ciborium::into_writer(&k, &mut kb)
                    .map_err(|e| CborError::Malformed(e.to_string()))?;
                keyed.push((kb, k, val));
            }
            keyed.sort_by(|a, b| a.0.cmp(&b.0));
            if keyed
                .iter()
                .zip(keyed.iter().skip(1))
                .any(|(a, b)| a.0 == b.0)
            {
                return Err(CborError::DuplicateKey);
            }
            entries.extend(keyed.into_iter().map(|(_, k, v)| (k, v)));
            Ok(())
        }
        _ => Ok(()),
    }
}

const MAJOR_UINT: u8 = 0;
const MAJOR_BYTES: u8 = 2;
const MAJOR_TEXT: u8 = 3;
const MAJOR_ARRAY: u8 = 4;
const SIMPLE_NULL: u8 = 0xf6;

/// Appends canonical CBOR items to a buffer. Every method writes the shortest form.
#[derive(Debug, Default)]
pub struct Writer {
    /// The bytes written so far.
    pub buf: Vec<u8>,
}

impl Writer {
    /// A writer with room for `cap` bytes.
    pub fn with_capacity(cap: usize) -> Writer {
        Writer {
            buf: Vec::with_capacity(cap),
        }
    }

    fn head(&mut self, major: u8, n: u64) {
        let m = major << 5;
        if n < 24 {
            self.buf.push(m | n as u8);
        } else if n <= u8::MAX as u64 {
            self.buf.extend_from_slice(&[m | 24, n as u8]);
        } else if n <= u16::MAX as u64 {
            self.buf.push(m | 25);
            self.buf.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= u32::MAX as u64 {
            self.buf.push(m | 26);
            self.buf.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            self.buf.push(m | 27);
            self.buf.extend_from_slice(&n.to_be_bytes());
        }
    }

    /// An unsigned integer.
    pub fn uint(&mut self, n: u64) {
        self.head(MAJOR_UINT, n);
    }

    /// A byte string.
    pub fn bytes(&mut self, b: &[u8]) {
        self.head(MAJOR_BYTES, b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    /// A text string.
    pub fn text(&mut self, s: &str) {
        self.head(MAJOR_TEXT, s.len() as u64);
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// The head of a definite-length array of `n` items.
    pub fn array(&mut self, n: u64) {
        self.head(MAJOR_ARRAY, n);
    }

    /// `null`.
    pub fn null(&mut self) {
        self.buf.push(SIMPLE_NULL);
    }

    /// Bytes that are already one canonical CBOR item.
    pub fn raw(&mut self, item: &[u8]) {
        self.buf.extend_from_slice(item);
    }
}

/// Reads canonical CBOR items from a slice, rejecting any non-shortest head, indefinite
/// length, or item of another type than asked for. It never allocates more than the input.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Reads one item that is the whole of `bytes` with `read` (a type's `read`); fails on
    /// trailing bytes.
    pub fn read_all<T>(
        bytes: &'a [u8],
        read: impl FnOnce(&mut Reader<'a>) -> Result<T, CborError>,
    ) -> Result<T, CborError> {
        let mut r = Reader::new(bytes);
        let item = read(&mut r)?;
        r.finish()?;
        Ok(item)
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<(), CborError> {
        match self.buf.len() - self.pos {
            0 => Ok(()),
            n => Err(CborError::Trailing(n)),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], CborError> {
        let end = self.pos.checked_add(n).ok_or(CborError::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(CborError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    /// The next `N` bytes, as an array.
    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], CborError> {
        self.take(N)?.try_into().map_err(|_| CborError::Truncated)
    }

    /// The bytes not consumed yet (`pos` never passes the end of `buf`).
    fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    fn peek(&self) -> Result<u8, CborError> {
        self.buf.get(self.pos).copied().ok_or(CborError::Truncated)
    }

    fn head(&mut self, want_major: u8, what: &str) -> Result<u64, CborError> {
        let [ib] = self.take_array()?;
        let (major, info) = (ib >> 5, ib & 0x1f);
        if major != want_major {
            return Err(CborError::Malformed(format!("expected {what}")));
        }
        let (n, min) = match info {
            0..=23 => return Ok(info as u64),
            24 => (u8::from_be_bytes(self.take_array()?) as u64, 24),
            25 => (u16::from_be_bytes(self.take_array()?) as u64, 256),
            26 => (u32::from_be_bytes(self.take_array()?) as u64, 1 << 16),
            27 => (u64::from_be_bytes(self.take_array()?), 1 << 32),
            _ => return Err(CborError::NonCanonical),
        };
        if n < min {
            return Err(CborError::NonCanonical);
        }
        Ok(n)
    }

    /// An unsigned integer.
    pub fn uint(&mut self) -> Result<u64, CborError> {
        self.head(MAJOR_UINT, "unsigned integer")
    }

    /// The argument of a head of major type `major` (a negative integer's `-1 - n`, a map's
    /// number of pairs).
    fn arg(&mut self, major: u8) -> Result<u64, CborError> {
        self.head(major, "item")
    }

    /// A byte string, borrowed from the input.
    pub fn bytes(&mut self) -> Result<&'a [u8], CborError> {
        let n = self.head(MAJOR_BYTES, "byte string")?;
        let n = usize::try_from(n).map_err(|_| CborError::Truncated)?;
        self.take(n)
    }

    /// A byte string of exactly `N` bytes.
    pub fn fixed<const N: usize>(&mut self) -> Result<[u8; N], CborError> {
        let b = self.bytes()?;
        <[u8; N]>::try_from(b)
            .map_err(|_| CborError::Malformed(format!("expected {N} bytes, found {}", b.len())))
    }

    /// A text string, borrowed from the input.
    pub fn text(&mut self) -> Result<&'a str, CborError> {
        let n = self.head(MAJOR_TEXT, "text string")?;
        let n = usize::try_from(n).map_err(|_| CborError::Truncated)?;
        core::str::from_utf8(self.take(n)?)
            .map_err(|_| CborError::Malformed("text is not utf-8".into()))
    }

    /// The head of a definite-length array; returns its length.
    pub fn array(&mut self) -> Result<u64, CborError> {
        self.head(MAJOR_ARRAY, "array")
    }

    /// The head of an array that must have exactly `n` items.
    pub fn array_of(&mut self, n: u64, what: &str) -> Result<(), CborError> {
        let got = self.array()?;
        if got != n {
            return Err(CborError::Malformed(format!(
                "{what}: expected {n} fields, found {got}"
            )));
        }
        Ok(())
    }

    /// Consumes `null` if it is next; tells whether it was.
    pub fn null(&mut self) -> Result<bool, CborError> {
        if self.peek()? == SIMPLE_NULL {
            self.pos += 1;
            return Ok(true);
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<u64>().prop_map(|n| Value::Integer(n.into())),
            any::<i64>().prop_map(|n| Value::Integer(n.into())),
            // The 64-bit negative range below i64::MIN.
            any::<u64>().prop_map(|n| Value::Integer((-1i128 - n as i128).try_into().unwrap())),
            any::<bool>().prop_map(Value::Bool),
            Just(Value::Null),
            any::<f64>()
                .prop_filter("nan", |f| !f.is_nan())
                .prop_map(Value::Float),
            ".{0,12}".prop_map(Value::Text),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::Bytes),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z]{0,6}", inner, 0..8).prop_map(|m| {
                    Value::Map(m.into_iter().map(|(k, v)| (Value::Text(k), v)).collect())
                }),
            ]
        })
    }

    proptest! {
        // encode → decode → encode is the identity on bytes.
        #[test]
        fn encode_decode_round_trip(v in arb_value()) {
            let b = to_vec(&v).unwrap();
            let back: Value = from_slice(&b).unwrap();
            prop_assert_eq!(to_vec(&back).unwrap(), b);
        }

        // The direct encoder writes the same bytes as the value-tree reference.
        #[test]
        fn direct_encoder_matches_value_path(v in arb_value()) {
            prop_assert_eq!(to_vec(&v).unwrap(), to_vec_via_value(&v).unwrap());
        }

        // The fast JSON decoder agrees with the strict one on every canonical encoding:
        // the same JSON, or both refuse (byte strings, which JSON has no form for).
        #[test]
        fn to_json_matches_strict_decoder(v in arb_value()) {
            let b = to_vec(&v).unwrap();
            let strict = from_slice::<serde_json::Value>(&b).ok();
            prop_assert_eq!(to_json(&b).ok(), strict);
        }

        // Any bytes the decoder accepts re-encode to themselves.
        #[test]
        fn accepted_bytes_are_canonical(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(v) = from_slice::<Value>(&b) {
                prop_assert_eq!(to_vec(&v).unwrap(), b);
            }
        }

        // Changing a byte of a valid encoding never yields another accepted encoding of
        // the same value.
        #[test]
        fn mutated_encoding_is_rejected_or_different(v in arb_value(), i in any::<prop::sample::Index>(), x in 1u8..) {
            let b = to_vec(&v).unwrap();
            let mut m = b.clone();
            let i = i.index(m.len());
            m[i] ^= x;
            if let Ok(w) = from_slice::<Value>(&m) {
                prop_assert_ne!(w, v);
            }
        }
    }

    #[test]
    fn to_json_reads_every_float_width_and_refuses_what_json_cannot_hold() {
        // Half 1.5, half -0.0, single 100000.0, double 0.1, half infinity (JSON null).
        let cases: &[(&[u8], serde_json::Value)] = &[
            (&[0xf9, 0x3e, 0x00], serde_json::json!(1.5)),
            (&[0xf9, 0x80, 0x00], serde_json::json!(-0.0)),
            (&[0xf9, 0x00, 0x01], serde_json::json!(2f64.powi(-24))),
            (&[0xfa, 0x47, 0xc3, 0x50, 0x00], serde_json::json!(100000.0)),
            (
                &[0xfb, 0x3f, 0xb9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a],
                serde_json::json!(0.1),
            ),
            (&[0xf9, 0x7c, 0x00], serde_json::Value::Null),
            (
                &[0x3b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                serde_json::json!(i64::MIN),
            ),
        ];
        for (b, want) in cases {
            assert_eq!(&to_json(b).unwrap(), want, "{b:02x?}");
            assert_eq!(
                &from_slice::<serde_json::Value>(b).unwrap(),
                want,
                "{b:02x?}"
            );
        }
        for bad in [
            &[0x41, 0x00][..],   // a byte string
            &[0xc1, 0x00],       // a tag
            &[0xa1, 0x01, 0x02], // a map with an integer key
            &[0x9f, 0x01, 0xff], // an indefinite array
            &[0x01, 0x00],       // trailing bytes
            &[0x82, 0x01],       // truncated
        ] {
            assert!(to_json(bad).is_err(), "accepted {bad:02x?}");
        }
        let deep = [vec![0x81u8; 200], vec![0x01]].concat();
        assert!(to_json(&deep).is_err());
        // Only the kept fields of a map are built; the others are skipped whole.
        let b =
            to_vec(&serde_json::json!({"a": [1, {"x": 2}], "b": "skip", "c": {"d": 1.5}})).unwrap();
        assert_eq!(
            to_json_fields(&b, &["a".into(), "c".into()]).unwrap(),
            serde_json::json!({"a": [1, {"x": 2}], "c": {"d": 1.5}})
        );
        assert_eq!(to_json_fields(&b, &[]).unwrap(), serde_json::json!({}));
        assert!(to_json_fields(&b[..b.len() - 1], &["a".into()]).is_err());
    }

    #[test]
    fn rejects_non_canonical_forms() {
        // 5 as uint8, indefinite-length array, unsorted map keys, duplicate keys, trailing byte,
        // float that fits in a half written as single.
        let cases: &[&[u8]] = &[
            &[0x18, 0x05],
            &[0x9f, 0x01, 0xff],
            &[0xa2, 0x61, b'b', 0x01, 0x61, b'a', 0x02],
            &[0xa2, 0x61, b'a', 0x01, 0x61, b'a', 0x02],
            &[0x01, 0x00],
            &[0xfa, 0x3f, 0x80, 0x00, 0x00],
            &[0x5f, 0x41, 0x00, 0xff],
        ];
        for c in cases {
            assert!(from_slice::<Value>(c).is_err(), "accepted {c:02x?}");
        }
        assert!(from_slice::<Value>(&[0xf9, 0x3c, 0x00]).is_ok()); // 1.0 as half
    }

    #[test]
    fn strict_reader_rejects_overlong_heads_and_trailing_bytes() {
        let mut w = Writer::default();
        w.array(2);
        w.uint(500);
        w.bytes(&[1, 2, 3]);
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.array().unwrap(), 2);
        assert_eq!(r.uint().unwrap(), 500);
        assert_eq!(r.bytes().unwrap(), &[1, 2, 3]);
        r.finish().unwrap();

        assert_eq!(
            Reader::new(&[0x19, 0x00, 0x10]).uint(),
            Err(CborError::NonCanonical)
        );
        assert_eq!(Reader::new(&[0x1f]).uint(), Err(CborError::NonCanonical));
        assert_eq!(
            Reader::new(&[0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).bytes(),
            Err(CborError::Truncated)
        );
        let mut r = Reader::new(&[0x01, 0x02]);
        r.uint().unwrap();
        assert_eq!(r.finish(), Err(CborError::Trailing(1)));
    }
}
