//! Why a token was not accepted: one variant per check, in the order [`crate::verify`] runs
//! them.

/// A TimeStampToken failed verification. Each variant names the check that failed; strings
/// in fields (subjects, OIDs) come from the token and must be escaped before printing.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TsaError {
    /// The token is longer than [`crate::MAX_TOKEN_LEN`]; nothing was parsed.
    #[error("token is {len} bytes, over the {max}-byte limit")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Not DER, truncated, trailing bytes, or a structure RFC 3161 / RFC 5652 does not allow.
    #[error("malformed token: {part}: {reason}")]
    Malformed {
        /// The structure that did not decode (`ContentInfo`, `SignedData`, `TSTInfo`, ...).
        part: &'static str,
        /// What was wrong with it.
        reason: String,
    },
    /// The ContentInfo is not a CMS SignedData.
    #[error("not a CMS SignedData: content type {oid}")]
    NotSignedData {
        /// The content type found.
        oid: String,
    },
    /// The SignedData does not encapsulate a TSTInfo.
    #[error("encapsulated content type is {oid}, not id-ct-TSTInfo")]
    NotTstInfo {
        /// The eContentType found.
        oid: String,
    },
    /// The token has no signer, or several.
    #[error("token has {count} signers; exactly one is required")]
    SignerCount {
        /// How many SignerInfos it has.
        count: usize,
    },
    /// The TSTInfo has a critical extension, which afr-tsa cannot honour.
    #[error("TSTInfo has a critical extension {oid}")]
    CriticalExtension {
        /// The extension's id.
        oid: String,
    },
    /// The message imprint is not SHA-256 (parameters absent or NULL).
    #[error("message imprint uses {oid}; only SHA-256 is accepted")]
    ImprintAlgorithm {
        /// The imprint's hash algorithm.
        oid: String,
    },
    /// The token is over another digest than the one given.
    #[error("token is over another digest")]
    DigestMismatch,
    /// The SignerInfo's digest algorithm is not SHA-256, SHA-384 or SHA-512.
    #[error("unsupported digest algorithm {oid}")]
    DigestAlgorithm {
        /// The algorithm found.
        oid: String,
    },
    /// The SignerInfo has no signed attributes (RFC 3161 requires them).
    #[error("signer has no signed attributes")]
    NoSignedAttributes,
    /// A required signed attribute is absent.
    #[error("signed attribute {name} is missing")]
    MissingAttribute {
        /// `content-type`, `message-digest` or `signing-certificate`.
        name: &'static str,
    },
    /// A signed attribute appears twice, or with other than one value.
    #[error("signed attribute {name} must appear once with one value")]
    RepeatedAttribute {
        /// The attribute.
        name: &'static str,
    },
    /// The content-type attribute does not name id-ct-TSTInfo.
    #[error("content-type attribute is {oid}, not id-ct-TSTInfo")]
    ContentTypeAttribute {
        /// What it names.
        oid: String,
    },
    /// The message-digest attribute is not the hash of the TSTInfo.
    #[error("message-digest attribute does not match the TSTInfo")]
    MessageDigestMismatch,
    /// No certificate in the token or the trusted list matches the SignerInfo's sid.
    #[error("signer certificate not found in the token or the trusted certificates")]
    SignerNotFound,
    /// The signature (or certificate signature) algorithm is not one afr-tsa checks.
    #[error("unsupported signature algorithm {oid}")]
    SignatureAlgorithm {
        /// The algorithm found.
        oid: String,
    },
    /// The signer's public key is malformed, of the wrong kind, or too weak.
    #[error("unsupported public key: {reason}")]
    PublicKey {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The SignerInfo's signature over the signed attributes does not verify.
    #[error("signature does not verify")]
    BadSignature,
    /// The signer certificate's extended key usage (or key usage) is not a TSA's.
    #[error("signer certificate {subject:?}: {reason}")]
    KeyUsage {
        /// The signer's subject.
        subject: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The signer certificate is neither pinned nor issued by a pinned CA.
    #[error("signer certificate {subject:?} is neither pinned nor issued by a pinned CA")]
    Untrusted {
        /// The signer's subject.
        subject: String,
    },
    /// The signer certificate names a pinned CA as issuer, but no such CA's signature on it
    /// verifies (a forged certificate).
    #[error("signer certificate {subject:?} names a pinned CA, but its signature does not verify")]
    CertSignature {
        /// The signer's subject.
        subject: String,
    },
    /// The signer's or its CA's certificate is not valid at the token's genTime.
    #[error("{which} certificate {subject:?} is not valid at the token's time {gen_time}")]
    NotValid {
        /// `signer` or `issuing CA`.
        which: &'static str,
        /// Its subject.
        subject: String,
        /// The token's genTime, RFC 3339.
        gen_time: String,
    },
    /// The signing-certificate-v2 attribute names another certificate than the signer's.
    #[error("signing-certificate attribute does not name the signer certificate")]
    SigningCertificateMismatch,
}
