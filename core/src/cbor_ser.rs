//! A serde serializer that writes deterministic CBOR directly, without building a value tree.
//!
//! It is the record path's payload encoder: the same bytes as going through
//! [`ciborium::Value`] and sorting (a property test checks that), in about a third of the
//! time. Maps and structs are written into a scratch buffer entry by entry, then the entries
//! are sorted by their encoded keys and copied out, so nested maps cost one buffer each.

use serde::{Serialize, ser};

use crate::cbor::CborError;

impl ser::Error for CborError {
    fn custom<T: std::fmt::Display>(msg: T) -> CborError {
        CborError::Malformed(msg.to_string())
    }
}

fn head(out: &mut Vec<u8>, major: u8, n: u64) {
    let m = major << 5;
    if n < 24 {
        out.push(m | n as u8);
    } else if n <= u8::MAX as u64 {
        out.extend_from_slice(&[m | 24, n as u8]);
    } else if n <= u16::MAX as u64 {
        out.push(m | 25);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else if n <= u32::MAX as u64 {
        out.push(m | 26);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Encodes `value` as deterministic CBOR into `out`.
pub fn write<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), CborError> {
    value.serialize(Ser { out })
}

struct Ser<'a> {
    out: &'a mut Vec<u8>,
}

/// An array whose length is counted as items arrive (serde may not know it up front).
struct Seq<'a> {
    out: &'a mut Vec<u8>,
    buf: Vec<u8>,
    n: u64,
}

/// A map (or struct) whose entries are sorted by encoded key at the end.
struct Map<'a> {
    out: &'a mut Vec<u8>,
    buf: Vec<u8>,
    /// (key start, value start, end) in `buf`.
    entries: Vec<(usize, usize, usize)>,
    key_start: usize,
    val_start: usize,
    /// For a newtype variant: wrap the result in a one-entry map with this key.
    variant: Option<&'static str>,
}

impl<'a> Map<'a> {
    fn new(out: &'a mut Vec<u8>, variant: Option<&'static str>) -> Map<'a> {
        Map {
            out,
            buf: Vec::with_capacity(128),
            entries: Vec::new(),
            key_start: 0,
            val_start: 0,
            variant,
        }
    }

    fn finish(mut self) -> Result<(), CborError> {
        let buf = &self.buf;
        // Each entry's offsets are where this map wrote it into `buf`.
        let key = |e: &(usize, usize, usize)| buf.get(e.0..e.1);
        self.entries.sort_by(|a, b| key(a).cmp(&key(b)));
        let sorted = &self.entries;
        if sorted
            .iter()
            .zip(sorted.iter().skip(1))
            .any(|(a, b)| key(a) == key(b))
        {
            return Err(CborError::DuplicateKey);
        }
        if let Some(v) = self.variant {
            head(self.out, 5, 1);
            head(self.out, 3, v.len() as u64);
            self.out.extend_from_slice(v.as_bytes());
        }
        head(self.out, 5, self.entries.len() as u64);
        for &(k, _, e) in &self.entries {
            let entry = buf
                .get(k..e)
                .ok_or_else(|| CborError::Malformed("map entry out of range".into()))?;
            self.out.extend_from_slice(entry);
        }
        Ok(())
    }
}

impl<'a> ser::Serializer for Ser<'a> {
    type Ok = ();
    type Error = CborError;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Map<'a>;
    type SerializeStruct = Map<'a>;
    type SerializeStructVariant = Map<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), CborError> {
        self.out.push(if v { 0xf5 } else { 0xf4 });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), CborError> {
        self.serialize_i64(v as i64)
    }
    fn serialize_i16(self, v: i16) -> Result<(), CborError> {
        self.serialize_i64(v as i64)
    }
    fn serialize_i32(self, v: i32) -> Result<(), CborError> {
        self.serialize_i64(v as i64)
    }
    fn serialize_i64(self, v: i64) -> Result<(), CborError> {
        if v >= 0 {
            head(self.out, 0, v as u64);
        } else {
            head(self.out, 1, !(v as u64));
        }
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), CborError> {
        // CBOR's major types 0 and 1 cover -2^64 ..= 2^64 - 1; beyond that would need tags.
        let too_big = || CborError::Malformed("integer outside the 64-bit cbor range".into());
        if v >= 0 {
            head(self.out, 0, u64::try_from(v).map_err(|_| too_big())?);
        } else {
            head(self.out, 1, u64::try_from(-1 - v).map_err(|_| too_big())?);
        }
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<(), CborError> {
        let n = u64::try_from(v)
            .map_err(|_| CborError::Malformed("integer outside the 64-bit cbor range".into()))?;
        head(self.out, 0, n);
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), CborError> {
        self.serialize_u64(v as u64)
    }
    fn serialize_u16(self, v: u16) -> Result<(), CborError> {
        self.serialize_u64(v as u64)
    }
    fn serialize_u32(self, v: u32) -> Result<(), CborError> {
        self.serialize_u64(v as u64)
    }
    fn serialize_u64(self, v: u64) -> Result<(), CborError> {
        head(self.out, 0, v);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), CborError> {
        self.serialize_f64(v as f64)
    }
    fn serialize_f64(self, v: f64) -> Result<(), CborError> {
        // ciborium picks the shortest lossless float form.
        ciborium::into_writer(&ciborium::Value::Float(v), &mut *self.out)
            .map_err(|e| CborError::Malformed(e.to_string()))
    }
    fn serialize_char(self, v: char) -> Result<(), CborError> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), CborError> {
        head(self.out, 3, v.len() as u64);
        self.out.extend_from_slice(v.as_bytes());
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), CborError> {
        head(self.out, 2, v.len() as u64);
        self.out.extend_from_slice(v);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), CborError> {
        self.out.push(0xf6);
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), CborError> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), CborError> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), CborError> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), CborError> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), CborError> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), CborError> {
        head(self.out, 5, 1);
        head(self.out, 3, variant.len() as u64);
        self.out.extend_from_slice(variant.as_bytes());
        v.serialize(self)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Seq<'a>, CborError> {
        Ok(Seq {
            out: self.out,
            buf: Vec::with_capacity(64),
            n: 0,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>, CborError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq<'a>, CborError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Seq<'a>, CborError> {
        head(self.out, 5, 1);
        head(self.out, 3, variant.len() as u64);
        self.out.extend_from_slice(variant.as_bytes());
        self.serialize_seq(None)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Map<'a>, CborError> {
        Ok(Map::new(self.out, None))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Map<'a>, CborError> {
        Ok(Map::new(self.out, None))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Map<'a>, CborError> {
        Ok(Map::new(self.out, Some(variant)))
    }
}

impl Seq<'_> {
    fn push<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), CborError> {
        self.n += 1;
        v.serialize(Ser { out: &mut self.buf })
    }
    fn done(self) -> Result<(), CborError> {
        head(self.out, 4, self.n);
        self.out.extend_from_slice(&self.buf);
        Ok(())
    }
}

/// Sequences, tuples and their struct and variant forms all serialize as one CBOR array.
macro_rules! impl_array {
    ($($trait:ident :: $method:ident),* $(,)?) => {$(
        impl ser::$trait for Seq<'_> {
            type Ok = ();
            type Error = CborError;
            fn $method<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), CborError> {
                self.push(v)
            }
            fn end(self) -> Result<(), CborError> {
                self.done()
            }
        }
    )*};
}

impl_array!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

impl Map<'_> {
    fn key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), CborError> {
        self.key_start = self.buf.len();
        k.serialize(Ser { out: &mut self.buf })?;
        self.val_start = self.buf.len();
        Ok(())
    }
    fn value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), CborError> {
        v.serialize(Ser { out: &mut self.buf })?;
        self.entries
            .push((self.key_start, self.val_start, self.buf.len()));
        Ok(())
    }
    fn field<T: Serialize + ?Sized>(&mut self, k: &'static str, v: &T) -> Result<(), CborError> {
        self.key(k)?;
        self.value(v)
    }
}

impl ser::SerializeMap for Map<'_> {
    type Ok = ();
    type Error = CborError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), CborError> {
        self.key(k)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), CborError> {
        self.value(v)
    }
    fn end(self) -> Result<(), CborError> {
        self.finish()
    }
}

/// Structs and struct variants serialize as one CBOR map keyed by field name.
macro_rules! impl_struct_map {
    ($($trait:ident),* $(,)?) => {$(
        impl ser::$trait for Map<'_> {
            type Ok = ();
            type Error = CborError;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                k: &'static str,
                v: &T,
            ) -> Result<(), CborError> {
                self.field(k, v)
            }
            fn end(self) -> Result<(), CborError> {
                self.finish()
            }
        }
    )*};
}

impl_struct_map!(SerializeStruct, SerializeStructVariant);
