//! What is wrong with a store that holds something it should not: a [`Corruption`], the reason
//! of [`RecordError::Corrupt`], which names the entry ([`Entry`]: its table and key) and the
//! fault, so a caller can tell a missing record from an undecodable header or a gap.
//!
//! Every variant is found by reading the store, never by trusting it: the recorder stops
//! writing on one (nothing is written until it is resolved), and a read-only view reports it.
//! Crypto failures stay opaque: [`Corruption::Undecryptable`] names the payload, never which
//! byte or why.

use std::fmt;

use crate::{RecordError, store::STORE_FORMAT};

/// An entry of the store, named by its column family and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// `records` under `u64be(seq)`.
    Record(u64),
    /// `payloads` under `u64be(seq)`.
    Payload(u64),
    /// `epochs` under `u64be(epoch)`: a sealed epoch's header.
    Header(u64),
    /// `keys` under `u64be(epoch)`: an epoch's salt.
    Salt(u64),
    /// `anchors` under `u64be(epoch)`: the value kept there for the anchorer.
    Anchor(u64),
    /// `meta` under this key.
    Meta(Vec<u8>),
    /// `index` under this key (a keyed hash of a term, then an epoch and a first sequence
    /// number).
    Index(Vec<u8>),
    /// A whole column family, by name.
    ColumnFamily(&'static str),
}

impl Entry {
    /// The entry is absent although the rest of the store implies it.
    pub fn missing(self) -> RecordError {
        RecordError::Corrupt(Corruption::Missing(self))
    }

    /// A scan in key order found this entry where `expected` was due.
    pub fn instead_of(self, expected: Entry) -> RecordError {
        RecordError::Corrupt(Corruption::OutOfPlace {
            found: self,
            expected,
        })
    }

    /// The entry is present but does not decode (or has the wrong size): `reason` says how.
    pub fn malformed(self, reason: impl fmt::Display) -> RecordError {
        RecordError::Corrupt(Corruption::Malformed {
            entry: self,
            reason: reason.to_string(),
        })
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Record(seq) => write!(f, "record {seq}"),
            Entry::Payload(seq) => write!(f, "payload {seq}"),
            Entry::Header(epoch) => write!(f, "header of epoch {epoch}"),
            Entry::Salt(epoch) => write!(f, "salt of epoch {epoch}"),
            Entry::Anchor(epoch) => write!(f, "anchor of epoch {epoch}"),
            Entry::Meta(key) => write!(f, "metadata entry {}", show_key(key)),
            Entry::Index(key) => write!(f, "index entry {}", show_key(key)),
            Entry::ColumnFamily(name) => write!(f, "column family {name}"),
        }
    }
}

/// A key as text: as it is when it is all printable ASCII (`recorder`); a printable prefix
/// ending in `/` and the rest in hex (`erased/0x0000000000000003`); otherwise all in hex.
pub(crate) fn show_key(key: &[u8]) -> String {
    let printable = key.iter().take_while(|b| b.is_ascii_graphic()).count();
    if printable == key.len() {
        return String::from_utf8_lossy(key).into_owned();
    }
    let prefix = key[..printable]
        .iter()
        .rposition(|b| *b == b'/')
        .map_or(0, |i| i + 1);
    format!(
        "{}0x{}",
        String::from_utf8_lossy(&key[..prefix]),
        hex::encode(&key[prefix..])
    )
}

/// What is wrong with the store (see [`RecordError::Corrupt`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Corruption {
    /// An entry the rest of the store implies is absent: a record an epoch covers, a record's
    /// payload, the header of an erased epoch, the salt of the open epoch, a column family.
    #[error("{0} missing")]
    Missing(Entry),
    /// An entry is present but does not decode, or has the wrong size.
    #[error("{entry}: {reason}")]
    Malformed {
        /// The entry.
        entry: Entry,
        /// How it fails to decode.
        reason: String,
    },
    /// A key of a column family does not have the length its table's keys have.
    #[error("key {} of column family {table} is {} bytes, not {expected}", show_key(.key), .key.len())]
    KeyLength {
        /// The column family.
        table: &'static str,
        /// The key.
        key: Vec<u8>,
        /// The length keys of that table have.
        expected: usize,
    },
    /// A scan in key order found one entry where another was due: a gap before it.
    #[error("{found} found where {expected} was expected")]
    OutOfPlace {
        /// What was found.
        found: Entry,
        /// What was due.
        expected: Entry,
    },
    /// A sealed epoch's records stop before its header's count.
    #[error("epoch {epoch} holds {found} of its {count} records")]
    ShortEpoch {
        /// The epoch.
        epoch: u64,
        /// Records found from its first sequence number on.
        found: u64,
        /// Records its header counts.
        count: u64,
    },
    /// A payload does not open under its epoch key (which byte is never said).
    #[error("payload {seq}: decryption failed")]
    Undecryptable {
        /// The payload's sequence number.
        seq: u64,
    },
    /// The store's format version is missing or not the one this build reads.
    #[error("unknown store format (this build reads format {STORE_FORMAT})")]
    UnknownFormat,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_name_their_table_and_key() {
        assert_eq!(show_key(b"recorder"), "recorder");
        assert_eq!(
            show_key(&[&b"erased/"[..], &3u64.to_be_bytes()].concat()),
            "erased/0x0000000000000003"
        );
        assert_eq!(show_key(&[0xab, b'/', 0]), "0xab2f00");
        let e = Entry::Header(4).malformed("bad cbor");
        assert_eq!(
            e.to_string(),
            "store is inconsistent: header of epoch 4: bad cbor"
        );
        let e = RecordError::Corrupt(Corruption::OutOfPlace {
            found: Entry::Record(7),
            expected: Entry::Record(5),
        });
        assert_eq!(
            e.to_string(),
            "store is inconsistent: record 7 found where record 5 was expected"
        );
        let e = RecordError::Corrupt(Corruption::KeyLength {
            table: "records",
            key: vec![1, 2],
            expected: 8,
        });
        assert_eq!(
            e.to_string(),
            "store is inconsistent: key 0x0102 of column family records is 2 bytes, not 8"
        );
    }
}
