//! The Agent Flight Recorder format: every byte a verifier checks is defined here.
//!
//! This crate is sans-I/O, in the manner of rustls: it encodes, hashes, builds and checks
//! Merkle proofs, derives keys and seals payloads, all as pure functions over bytes. Storage
//! (RocksDB) and networking (RPC) live in other crates, so the standalone verifier links this
//! crate and nothing heavier.
//!
//! Overview of the data flow, from a tool call to an anchored epoch root:
//!
//! ```text
//!  EventInput (JSON) ──► Payload (8 semantic fields) ──canonical CBOR──► plaintext
//!                                                                           │ seal (ChaCha20-Poly1305,
//!                                                                           ▼  per-event key)
//!  Record {seq, epoch, prev_hash, payload_commitment, ...} ◄── commitment ── PayloadEntry
//!     │ leaf = SHA-256(0x00 ‖ record)
//!     ▼
//!  hash chain (prev_hash = leaf of previous record) + RFC 6962 tree per epoch
//!     ▼
//!  EpochHeader ──► epoch root (32 bytes, anchored on chain) ──► back-pointer of the next epoch
//! ```
//!
//! The exact byte layouts and formulas are in `docs/spec/format.md`.

pub mod bundle;
pub mod cbor;
mod cbor_ser;
pub mod crypto;
pub mod epoch;
pub mod event;
pub mod export;
pub mod hash;
pub mod merkle;
pub mod record;
pub mod verify;

pub use epoch::EpochHeader;
pub use event::{EventInput, Payload};
pub use hash::Hash32;
pub use record::{Category, Record};

/// The 20-byte identity of a recorder: the Ethereum address that anchors its epochs.
pub type RecorderId = [u8; 20];

/// Version of the record, header, export and bundle formats defined by this crate.
pub const FORMAT_VERSION: u64 = 1;
