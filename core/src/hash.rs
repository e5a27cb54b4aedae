//! SHA-256 hashing with named domain separation, as used by every integrity structure.
//!
//! RFC 6962 separates leaves from interior nodes with a one-byte prefix, so no interior node
//! can be passed off as a leaf (second-preimage attacks on the tree). The same leaf hash is
//! the hash-chain link: a record names its predecessor by the predecessor's leaf hash.

use core::fmt;

use sha2::{Digest, Sha256};

/// Prefix of a leaf hash (RFC 6962 §2.1).
pub const LEAF_PREFIX: u8 = 0x00;
/// Prefix of an interior node hash (RFC 6962 §2.1).
pub const NODE_PREFIX: u8 = 0x01;

/// A SHA-256 digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Hash32(pub [u8; 32]);

impl Hash32 {
    /// The all-zero value: the `prev_hash` of the first record and the previous root of epoch 0.
    pub const ZERO: Hash32 = Hash32([0; 32]);

    /// Lower-case hex, no prefix.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses 64 hex digits, with or without a `0x` prefix.
    pub fn from_hex(s: &str) -> Option<Hash32> {
        let s = s.strip_prefix("0x").unwrap_or(s);
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).ok()?;
        Some(Hash32(out))
    }

    /// Builds a hash from a slice that must be exactly 32 bytes long.
    pub fn from_slice(b: &[u8]) -> Option<Hash32> {
        <[u8; 32]>::try_from(b).ok().map(Hash32)
    }
}

impl fmt::Debug for Hash32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_hex())
    }
}

impl fmt::Display for Hash32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_hex())
    }
}

/// SHA-256 over the concatenation of `parts`.
pub fn sha256(parts: &[&[u8]]) -> Hash32 {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    Hash32(h.finalize().into())
}

/// RFC 6962 leaf hash: `SHA-256(0x00 ‖ data)`.
pub fn leaf_hash(data: &[u8]) -> Hash32 {
    sha256(&[&[LEAF_PREFIX], data])
}

/// RFC 6962 interior node hash: `SHA-256(0x01 ‖ left ‖ right)`.
pub fn node_hash(left: &Hash32, right: &Hash32) -> Hash32 {
    sha256(&[&[NODE_PREFIX], &left.0, &right.0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_leaf_matches_rfc6962() {
        // The RFC 6962 test vectors give the hash of the empty leaf.
        assert_eq!(
            leaf_hash(b"").to_hex(),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
    }

    #[test]
    fn hex_round_trip_and_rejects_bad_lengths() {
        let h = leaf_hash(b"x");
        assert_eq!(Hash32::from_hex(&h.to_hex()), Some(h));
        assert_eq!(Hash32::from_hex(&format!("0x{}", h.to_hex())), Some(h));
        assert_eq!(Hash32::from_hex("abcd"), None);
        assert_eq!(Hash32::from_slice(&[0; 31]), None);
    }
}
