//! RFC 3161 timestamps for AFR: build a request, fetch a token from a Time-Stamping
//! Authority, and verify a token offline against pinned certificates.
//!
//! AFR timestamps a 32-byte SHA-256 digest (of a checkpoint's note text); this crate takes the
//! digest and never sees what it is a digest of. Verification ([`verify`]) is pure: bytes in,
//! a [`Timestamp`] or a [`TsaError`] out, no clock, no network, no file. The client
//! ([`timestamp`], [`Client`]) is the only I/O, blocking, with a timeout and a reply cap.
//!
//! What [`verify`] checks, in order (each failure is its own [`TsaError`] variant;
//! `docs/spec/tsa.md` is the full statement):
//!
//! 1. size (at most [`MAX_TOKEN_LEN`]), then strict DER: ContentInfo of type id-signedData,
//!    SignedData v3 encapsulating an id-ct-TSTInfo eContent, exactly one SignerInfo, TSTInfo v1;
//! 2. no critical TSTInfo extension; genTime a DER GeneralizedTime;
//! 3. the messageImprint is SHA-256 and equals the digest given;
//! 4. signed attributes: content-type is id-ct-TSTInfo, message-digest is the hash of the
//!    TSTInfo under the SignerInfo's digest algorithm (SHA-256/384/512);
//! 5. the signer certificate, found by sid (issuer and serial, or subject key identifier)
//!    among the token's certificates, then the pinned ones;
//! 6. the signature over the signed attributes' DER (as sent), RSA PKCS#1 v1.5 or ECDSA P-256
//!    / P-384 with SHA-256/384/512;
//! 7. the signer's extended key usage: exactly id-kp-timeStamping, critical;
//! 8. trust: the signer certificate is pinned, or issued by a pinned CA (basicConstraints cA)
//!    whose signature on it verifies; each is valid at genTime;
//! 9. the signing-certificate-v2 attribute, if present, hashes the signer certificate (a
//!    SHA-1 signing-certificate is accepted unchecked; neither is an error).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use sha2::{Digest, Sha256};
//! let note = b"afr.example/recorder\n7\n...\n";
//! let digest: [u8; 32] = Sha256::digest(note).into();
//!
//! // Recorder side: ask a TSA, store the token's DER beside the checkpoint.
//! let token = afr_tsa::timestamp("http://tsa.example/tsr", &digest)?;
//! let stored: Vec<u8> = token.into_der();
//!
//! // Verifier side, offline: the certificates the relying party pinned (PEM or DER).
//! let trusted = afr_tsa::TrustedCert::parse(&std::fs::read("tsa-ca.pem")?)?;
//! let ts = afr_tsa::verify(&stored, &digest, &trusted)?;
//! println!("{} by {:?} (serial {})", ts.gen_time_rfc3339(), ts.signer, ts.serial_hex());
//! # Ok(()) }
//! ```

mod asn1;
mod cert;
mod client;
mod error;
mod oid;
mod request;
mod sig;
mod verify;

use std::time::SystemTime;

pub use cert::{TrustError, TrustedCert};
pub use client::{Client, ClientError, DEFAULT_TIMEOUT, MAX_REPLY_LEN, timestamp};
pub use error::TsaError;
pub use request::{ReplyError, request, token_from_reply};
pub use verify::verify;

/// The longest token [`verify`] reads, in bytes (tokens are a few KiB; this leaves room for
/// long certificate chains).
pub const MAX_TOKEN_LEN: usize = 1 << 20;

/// A TimeStampToken: the DER of its CMS ContentInfo, as the TSA sent it. Not verified by
/// being one: [`verify`] it.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Token(pub(crate) Vec<u8>);

impl Token {
    /// The DER bytes.
    pub fn as_der(&self) -> &[u8] {
        &self.0
    }

    /// The DER bytes, owned.
    pub fn into_der(self) -> Vec<u8> {
        self.0
    }
}

/// What a verified token says. Strings come from the token: escape them before printing.
#[derive(Clone, Debug, Eq, PartialEq)]
#[non_exhaustive]
pub struct Timestamp {
    /// TSTInfo genTime: when the TSA says the digest existed (fractions kept, to the ns).
    pub gen_time: SystemTime,
    /// TSTInfo serialNumber, its DER INTEGER content (big-endian two's complement).
    pub serial: Vec<u8>,
    /// TSTInfo tsa, if present: the TSA's name (a directory name RFC 4514 style).
    pub tsa_name: Option<String>,
    /// TSTInfo policy, dotted.
    pub policy: String,
    /// The subject of the certificate that signed the token, RFC 4514 style.
    pub signer: String,
    /// TSTInfo nonce, if present, as its INTEGER content.
    pub nonce: Option<Vec<u8>>,
    /// Index into the `trusted` slice given to [`verify`] of the certificate that anchored
    /// the signer (the signer itself, or its issuing CA).
    pub trusted_index: usize,
}

impl Timestamp {
    /// [`Timestamp::gen_time`] as RFC 3339 UTC, to the second.
    pub fn gen_time_rfc3339(&self) -> String {
        asn1::rfc3339(self.gen_time)
    }

    /// [`Timestamp::serial`] in lower-case hex.
    pub fn serial_hex(&self) -> String {
        self.serial.iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests;
