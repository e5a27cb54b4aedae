//! EIP-712 typed-data hashing, by hand: the digest an Ethereum key signs for a struct.
//!
//! [EIP-712] hashes a struct so that a wallet can show its fields and a contract (or this
//! crate) can check the signature over them. Every value is encoded as one 32-byte word, so
//! the encoding is unambiguous without lengths or separators:
//!
//! ```text
//! typeHash        = keccak256(encodeType)            "Name(type1 name1,type2 name2,...)"
//! hashStruct(s)   = keccak256(typeHash ‖ word(field1) ‖ word(field2) ‖ ...)
//! domainSeparator = hashStruct(EIP712Domain{name, version})
//! digest          = keccak256(0x19 ‖ 0x01 ‖ domainSeparator ‖ hashStruct(message))
//!
//! word(address)        = 12 zero bytes ‖ the 20 bytes
//! word(uintN)          = the value, 32 bytes big-endian
//! word(bytes32)        = the 32 bytes
//! word(string / bytes) = keccak256(the bytes)
//! word(struct)         = hashStruct(the struct)
//! ```
//!
//! The `0x19` prefix keeps a digest from being a valid RLP transaction (EIP-191), `0x01` names
//! the typed-data version, and the domain separator keeps a signature made for one application
//! from verifying in another. This module covers the types the AFR structs use
//! (`docs/spec/approvals.md` §2.1, `docs/spec/delegation.md` §1) and nested structs; the caller
//! writes `encodeType` in full, referenced struct types appended in alphabetical order as the
//! EIP specifies.
//!
//! ```
//! use afr_core::eip712::{self, Field};
//!
//! let recorder = [0x11; 20];
//! let leaf = [0xab; 32];
//! let message = eip712::hash_struct(
//!     "AfrReceipt(address recorder,uint64 seq,bytes32 leafHash)",
//!     &[Field::Address(&recorder), Field::Uint(7), Field::Bytes32(&leaf)],
//! );
//! let domain = eip712::domain_separator("Agent Flight Recorder", "1");
//! let digest = eip712::signing_hash(&domain, &message);
//! assert_ne!(digest, message);
//! ```
//!
//! [EIP-712]: https://eips.ethereum.org/EIPS/eip-712

use sha3::{Digest, Keccak256};

/// The prefix of every digest: EIP-191's `0x19` and version byte `0x01` (structured data).
pub const DIGEST_PREFIX: [u8; 2] = [0x19, 0x01];
/// The `encodeType` of the domain AFR signs under: a name and a version, no chain id and no
/// verifying contract (an approval or receipt is about a recorder, not a chain).
pub const DOMAIN_TYPE: &str = "EIP712Domain(string name,string version)";

/// Keccak-256 (the original Keccak padding, as Ethereum uses; not FIPS 202 SHA3-256).
pub fn keccak256(data: &[u8]) -> [u8; 32] {
    Keccak256::digest(data).into()
}

/// One member of a struct, as EIP-712's `encodeData` encodes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field<'a> {
    /// `address`: left-padded to 32 bytes.
    Address(&'a [u8; 20]),
    /// `uint8` .. `uint256` holding a value below 2^64: big-endian, left-padded.
    Uint(u64),
    /// `bytes32`: as is.
    Bytes32(&'a [u8; 32]),
    /// `string`: the Keccak-256 of its UTF-8 bytes.
    String(&'a str),
    /// `bytes`: the Keccak-256 of the bytes.
    Bytes(&'a [u8]),
    /// A nested struct: its [`hash_struct`].
    Struct([u8; 32]),
}

impl Field<'_> {
    /// The 32-byte word that stands for this member.
    pub fn word(&self) -> [u8; 32] {
        let mut w = [0u8; 32];
        match self {
            Field::Address(a) => w[12..].copy_from_slice(&a[..]),
            Field::Uint(n) => w[24..].copy_from_slice(&n.to_be_bytes()),
            Field::Bytes32(b) => w = **b,
            Field::String(s) => w = keccak256(s.as_bytes()),
            Field::Bytes(b) => w = keccak256(b),
            Field::Struct(h) => w = *h,
        }
        w
    }
}

/// `keccak256(encodeType)`: the hash naming a struct type and its members.
pub fn type_hash(encode_type: &str) -> [u8; 32] {
    keccak256(encode_type.as_bytes())
}

/// The number of members `encode_type` declares for its primary type.
fn member_count(encode_type: &str) -> usize {
    let members = encode_type
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map_or("", |(m, _)| m);
    if members.is_empty() {
        0
    } else {
        members.split(',').count()
    }
}

/// `hashStruct`: `keccak256(typeHash ‖ word(field) ...)`, with `fields` in the order
/// `encode_type` declares them.
pub fn hash_struct(encode_type: &str, fields: &[Field<'_>]) -> [u8; 32] {
    debug_assert_eq!(
        member_count(encode_type),
        fields.len(),
        "{encode_type}: one field per declared member"
    );
    let mut h = Keccak256::new();
    h.update(type_hash(encode_type));
    for f in fields {
        h.update(f.word());
    }
    h.finalize().into()
}

/// The separator of the domain `EIP712Domain(string name,string version)` ([`DOMAIN_TYPE`]).
pub fn domain_separator(name: &str, version: &str) -> [u8; 32] {
    hash_struct(DOMAIN_TYPE, &[Field::String(name), Field::String(version)])
}

/// The digest a key signs: `keccak256(0x19 ‖ 0x01 ‖ domainSeparator ‖ structHash)`.
pub fn signing_hash(domain_separator: &[u8; 32], struct_hash: &[u8; 32]) -> [u8; 32] {
    let mut h = Keccak256::new();
    h.update(DIGEST_PREFIX);
    h.update(domain_separator);
    h.update(struct_hash);
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h32(s: &str) -> [u8; 32] {
        let mut b = [0u8; 32];
        hex::decode_to_slice(s, &mut b).unwrap();
        b
    }

    fn h20(s: &str) -> [u8; 20] {
        let mut b = [0u8; 20];
        hex::decode_to_slice(s, &mut b).unwrap();
        b
    }

    #[test]
    fn keccak_is_ethereums_not_sha3() {
        // Keccak-256 of the empty string, as Ethereum's empty code hash.
        assert_eq!(
            keccak256(b""),
            h32("c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470")
        );
    }

    const PERSON: &str = "Person(string name,address wallet)";
    const MAIL: &str =
        "Mail(Person from,Person to,string contents)Person(string name,address wallet)";

    fn person(name: &str, wallet: &str) -> [u8; 32] {
        let wallet = h20(wallet);
        hash_struct(PERSON, &[Field::String(name), Field::Address(&wallet)])
    }

    /// The example of EIP-712 itself (`Example.js`, "Ether Mail"); the expected values are also
    /// what Python's `eth-account` 0.14 (`encode_typed_data`) computes.
    #[test]
    fn the_eip_mail_example() {
        assert_eq!(
            type_hash(MAIL),
            h32("a0cedeb2dc280ba39b857546d74f5549c3a1d7bdc2dd96bf881f76108e23dac2")
        );
        assert_eq!(
            type_hash(PERSON),
            h32("b9d8c78acf9b987311de6c7b45bb6a9c8e1bf361fa7fd3467a2163f994c79500")
        );
        let contract = h20("cccccccccccccccccccccccccccccccccccccccc");
        let domain = hash_struct(
            "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)",
            &[
                Field::String("Ether Mail"),
                Field::String("1"),
                Field::Uint(1),
                Field::Address(&contract),
            ],
        );
        assert_eq!(
            domain,
            h32("f2cee375fa42b42143804025fc449deafd50cc031ca257e0b194a650a912090f")
        );
        let mail = hash_struct(
            MAIL,
            &[
                Field::Struct(person("Cow", "cd2a3d9f938e13cd947ec05abc7fe734df8dd826")),
                Field::Struct(person("Bob", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")),
                Field::String("Hello, Bob!"),
            ],
        );
        assert_eq!(
            mail,
            h32("c52c0ee5d84264471806290a3f2c4cecfc5490626bf912d01f240d7a274b371e")
        );
        assert_eq!(
            signing_hash(&domain, &mail),
            h32("be609aee343fb3c4b28e1df9e632fca64fcfaede20f02e86244efddf30957bd2")
        );

        // Tamper: another member value, or the members swapped, is another digest.
        let swapped = hash_struct(
            MAIL,
            &[
                Field::Struct(person("Bob", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")),
                Field::Struct(person("Cow", "cd2a3d9f938e13cd947ec05abc7fe734df8dd826")),
                Field::String("Hello, Bob!"),
            ],
        );
        assert_ne!(swapped, mail);
    }

    /// The AFR domain, and `bytes` and a `uint64` at its maximum, against `eth-account` 0.14:
    /// typed data `X(bytes b,uint64 n)` with `b = 0x0102`, `n = 2^64 - 1`.
    #[test]
    fn the_afr_domain_bytes_and_a_full_uint64() {
        let domain = domain_separator("Agent Flight Recorder", "1");
        assert_eq!(
            domain,
            h32("a88c6de6d743dd329d4b56d2a8d4482fd1381956c304319eda2e1984e0090a85")
        );
        let x = hash_struct(
            "X(bytes b,uint64 n)",
            &[Field::Bytes(&[1, 2]), Field::Uint(u64::MAX)],
        );
        assert_eq!(
            x,
            h32("906abd64a8b7c0c62c757251df9589e96cc1abb5fff4ae1b046d446df2873029")
        );
        assert_eq!(
            signing_hash(&domain, &x),
            h32("4e21cc73b5130a9b9d0f8203936a4b8246984420018fe32fd43000f08348704a")
        );
        assert_ne!(domain_separator("Agent Flight Recorder", "2"), domain);
    }

    #[test]
    fn words_are_padded_on_the_left() {
        let mut w = [0u8; 32];
        w[31] = 7;
        assert_eq!(Field::Uint(7).word(), w);
        let a = [0xff; 20];
        assert_eq!(Field::Address(&a).word()[..12], [0u8; 12]);
        assert_eq!(Field::Address(&a).word()[12..], a);
        assert_eq!(member_count("E()"), 0);
        assert_eq!(member_count(MAIL), 3);
    }
}
