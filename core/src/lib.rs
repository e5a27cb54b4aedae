//! The Agent Flight Recorder format: every byte a verifier checks is defined here.
//!
//! This crate is sans-I/O, in the manner of rustls: it encodes, hashes, builds and checks
//! Merkle proofs, derives keys and encrypts payloads, all as pure functions over bytes. Storage
//! (RocksDB) and networking (RPC) live in other crates, so the standalone verifier links this
//! crate and nothing heavier.
//!
//! Overview of the data flow, from a tool call to an anchored epoch root:
//!
//! ```text
//!  EventInput (JSON) ──► Payload (8 semantic fields) ──canonical CBOR──► plaintext
//!                                                                           │ encrypt (ChaCha20-Poly1305,
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

#![warn(clippy::indexing_slicing)]

pub mod agent;
pub mod approval;
pub mod bundle;
pub mod calendar;
pub mod cbor;
mod cbor_ser;
pub mod crypto;
pub mod delegation;
pub mod deployment;
pub mod eip712;
pub mod epoch;
pub mod event;
pub mod export;
pub mod hash;
pub mod merkle;
pub mod pipe;
pub mod record;
pub mod sequencer;
pub mod text;
pub mod verify;

pub use epoch::EpochHeader;
pub use event::{EventInput, Payload};
pub use hash::Hash32;
pub use record::{Category, Record};

/// The 20-byte identity of a recorder: the Ethereum address that anchors its epochs.
pub type RecorderId = [u8; 20];

/// Version of the record, header, export and bundle formats defined by this crate.
pub const FORMAT_VERSION: u64 = 1;

/// An RPC URL fit for messages and logs: scheme, host and port only. Hosted endpoints carry
/// API keys in the path or query (`https://host/v2/KEY`), which must not reach a log.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    // Credentials before an `@` go too.
    let host = rest[..end].rsplit('@').next().unwrap_or_default();
    let hidden = if end < rest.len() || rest[..end].contains('@') {
        "/…"
    } else {
        ""
    };
    if scheme.is_empty() {
        format!("{host}{hidden}")
    } else {
        format!("{scheme}://{host}{hidden}")
    }
}

/// `text` with every `http://` or `https://` URL in it passed through [`redact_url`]: for
/// error messages from HTTP clients, which quote the URL they failed on.
pub fn redact_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = [rest.find("http://"), rest.find("https://")]
        .into_iter()
        .flatten()
        .min()
    {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | ',' | '>'))
            .unwrap_or(tail.len());
        out.push_str(&redact_url(&tail[..end]));
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn urls_in_messages_are_redacted() {
        assert_eq!(
            super::redact_urls_in(
                "error sending request for url (https://rpc.example/v3/KEY): timed out; http://127.0.0.1:8545 ok"
            ),
            "error sending request for url (https://rpc.example/…): timed out; http://127.0.0.1:8545 ok"
        );
        assert_eq!(super::redact_urls_in("no url"), "no url");
    }

    #[test]
    fn redact_url_keeps_only_scheme_host_and_port() {
        use super::redact_url;
        assert_eq!(redact_url("http://127.0.0.1:8545"), "http://127.0.0.1:8545");
        assert_eq!(
            redact_url("https://eth-mainnet.example/v2/SECRETKEY"),
            "https://eth-mainnet.example/…"
        );
        assert_eq!(
            redact_url("https://user:pw@rpc.example:443?key=SECRET"),
            "https://rpc.example:443/…"
        );
        assert_eq!(redact_url("not a url/SECRET"), "not a url/…");
    }
}
