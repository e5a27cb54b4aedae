//! The object identifiers afr-tsa reads, named once.

use der::asn1::ObjectIdentifier as Oid;

/// `id-signedData` (RFC 5652): the content type of a TimeStampToken.
pub(crate) const SIGNED_DATA: Oid = Oid::new_unwrap("1.2.840.113549.1.7.2");
/// `id-ct-TSTInfo` (RFC 3161): the encapsulated content type of a TimeStampToken.
pub(crate) const CT_TST_INFO: Oid = Oid::new_unwrap("1.2.840.113549.1.9.16.1.4");
/// `id-contentType` signed attribute (RFC 5652).
pub(crate) const CONTENT_TYPE: Oid = Oid::new_unwrap("1.2.840.113549.1.9.3");
/// `id-messageDigest` signed attribute (RFC 5652).
pub(crate) const MESSAGE_DIGEST: Oid = Oid::new_unwrap("1.2.840.113549.1.9.4");
/// `id-aa-signingCertificate` (RFC 2634, ESSCertID over SHA-1; not checked).
pub(crate) const SIGNING_CERTIFICATE: Oid = Oid::new_unwrap("1.2.840.113549.1.9.16.2.12");
/// `id-aa-signingCertificateV2` (RFC 5035, RFC 5816).
pub(crate) const SIGNING_CERTIFICATE_V2: Oid = Oid::new_unwrap("1.2.840.113549.1.9.16.2.47");

pub(crate) const SHA256: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.2.1");
pub(crate) const SHA384: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.2.2");
pub(crate) const SHA512: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.2.3");

pub(crate) const RSA_ENCRYPTION: Oid = Oid::new_unwrap("1.2.840.113549.1.1.1");
pub(crate) const SHA256_WITH_RSA: Oid = Oid::new_unwrap("1.2.840.113549.1.1.11");
pub(crate) const SHA384_WITH_RSA: Oid = Oid::new_unwrap("1.2.840.113549.1.1.12");
pub(crate) const SHA512_WITH_RSA: Oid = Oid::new_unwrap("1.2.840.113549.1.1.13");

pub(crate) const EC_PUBLIC_KEY: Oid = Oid::new_unwrap("1.2.840.10045.2.1");
pub(crate) const ECDSA_WITH_SHA256: Oid = Oid::new_unwrap("1.2.840.10045.4.3.2");
pub(crate) const ECDSA_WITH_SHA384: Oid = Oid::new_unwrap("1.2.840.10045.4.3.3");
pub(crate) const ECDSA_WITH_SHA512: Oid = Oid::new_unwrap("1.2.840.10045.4.3.4");
pub(crate) const SECP256R1: Oid = Oid::new_unwrap("1.2.840.10045.3.1.7");
pub(crate) const SECP384R1: Oid = Oid::new_unwrap("1.3.132.0.34");

pub(crate) const CE_SUBJECT_KEY_IDENTIFIER: Oid = Oid::new_unwrap("2.5.29.14");
pub(crate) const CE_KEY_USAGE: Oid = Oid::new_unwrap("2.5.29.15");
pub(crate) const CE_BASIC_CONSTRAINTS: Oid = Oid::new_unwrap("2.5.29.19");
pub(crate) const CE_EXT_KEY_USAGE: Oid = Oid::new_unwrap("2.5.29.37");
/// `id-kp-timeStamping` (RFC 5280 4.2.1.12).
pub(crate) const KP_TIME_STAMPING: Oid = Oid::new_unwrap("1.3.6.1.5.5.7.3.8");
