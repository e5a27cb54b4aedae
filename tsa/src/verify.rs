//! Offline verification of a TimeStampToken (RFC 3161 over RFC 5652 SignedData).
//!
//! The checks run in the order of `docs/spec/tsa.md`; the first that fails is the error.

use cms::cert::IssuerAndSerialNumber;
use cms::signed_data::{EncapsulatedContentInfo, SignerIdentifier, SignerInfo};
use der::asn1::ObjectIdentifier;
use der::{Encode, Tag, TagNumber, Tagged};
use spki::AlgorithmIdentifierOwned;
use x509_cert::attr::Attribute;
use x509_cert::ext::pkix::name::GeneralName;

use crate::asn1::{TstInfo, decode, gen_time, one_tlv, tlvs};
use crate::cert::{Anchor, Cert, TrustedCert, chain, check_tsa_usage};
use crate::sig::{self, Hash, SigError};
use crate::{MAX_TOKEN_LEN, Timestamp, TsaError, oid};

/// A token taken apart; nothing in it is checked yet but its structure.
pub(crate) struct Parsed {
    pub(crate) tst: TstInfo,
    /// The DER of the TSTInfo: what the message-digest attribute hashes.
    econtent: Vec<u8>,
    /// The certificates of the token, as sent.
    certs: Vec<Cert>,
    signer: SignerInfo,
    /// The DER of the signed attributes as a SET OF: what the signature covers.
    signed_attrs: Option<Vec<u8>>,
}

fn malformed(part: &'static str, reason: impl Into<String>) -> TsaError {
    TsaError::Malformed {
        part,
        reason: reason.into(),
    }
}

fn der_err(part: &'static str) -> impl Fn(der::Error) -> TsaError {
    move |e| malformed(part, e.to_string())
}

const fn context(number: u8) -> Tag {
    Tag::ContextSpecific {
        constructed: true,
        number: TagNumber::new(number),
    }
}

/// Takes a token apart: ContentInfo, SignedData, its certificates, its one SignerInfo (with the
/// signed attributes' bytes as sent), the TSTInfo.
pub(crate) fn parse(token: &[u8]) -> Result<Parsed, TsaError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(TsaError::TooLarge {
            len: token.len(),
            max: MAX_TOKEN_LEN,
        });
    }
    // ContentInfo ::= SEQUENCE { contentType, [0] EXPLICIT content }
    let ci = one_tlv(token).map_err(der_err("ContentInfo"))?;
    let ci_parts = if ci.tag == Tag::Sequence {
        tlvs(ci.value).map_err(der_err("ContentInfo"))?
    } else {
        Vec::new()
    };
    let [content_type, content] = ci_parts[..] else {
        return Err(malformed(
            "ContentInfo",
            "not a SEQUENCE of a type and a content",
        ));
    };
    let content_type: ObjectIdentifier = decode(content_type.raw, "ContentInfo")?;
    if content_type != oid::SIGNED_DATA {
        return Err(TsaError::NotSignedData {
            oid: content_type.to_string(),
        });
    }
    if content.tag != context(0) {
        return Err(malformed("ContentInfo", "content is not [0] EXPLICIT"));
    }
    // SignedData ::= SEQUENCE { version, digestAlgorithms SET, encapContentInfo,
    //   certificates [0] IMPLICIT OPTIONAL, crls [1] IMPLICIT OPTIONAL, signerInfos SET }
    let sd = one_tlv(content.value).map_err(der_err("SignedData"))?;
    if sd.tag != Tag::Sequence {
        return Err(malformed("SignedData", "not a SEQUENCE"));
    }
    let parts = tlvs(sd.value).map_err(der_err("SignedData"))?;
    let (version, digest_algs, encap, rest) = match &parts[..] {
        [v, d, e, rest @ ..] => (v, d, e, rest),
        _ => return Err(malformed("SignedData", "too few fields")),
    };
    let version: u8 = decode(version.raw, "SignedData version")?;
    // RFC 5652 5.1: 3 whenever the eContentType is not id-data (here it is id-ct-TSTInfo).
    if version != 3 {
        return Err(malformed(
            "SignedData",
            format!("version {version}, expected 3"),
        ));
    }
    if digest_algs.tag != Tag::Set {
        return Err(malformed("SignedData", "digestAlgorithms is not a SET"));
    }
    let (signer_infos, middle) = rest
        .split_last()
        .ok_or_else(|| malformed("SignedData", "no signerInfos"))?;
    let mut certs = Vec::new();
    let mut next = 0u8; // the [0], [1] fields in order, each at most once
    for field in middle {
        match field.tag {
            t if t == context(0) && next == 0 => {
                for c in tlvs(field.value).map_err(der_err("certificates"))? {
                    // Other CertificateChoices (attribute certificates, ...) are not used.
                    if c.tag == Tag::Sequence {
                        certs.push(Cert::parse(c.raw).map_err(der_err("certificate"))?);
                    }
                }
                next = 1;
            }
            t if t == context(1) && next <= 1 => next = 2,
            _ => return Err(malformed("SignedData", "unexpected field")),
        }
    }
    if signer_infos.tag != Tag::Set {
        return Err(malformed("SignedData", "signerInfos is not a SET"));
    }
    let signer_list = tlvs(signer_infos.value).map_err(der_err("SignerInfo"))?;
    let [signer_tlv] = signer_list[..] else {
        return Err(TsaError::SignerCount {
            count: signer_list.len(),
        });
    };
    let signer: SignerInfo = decode(signer_tlv.raw, "SignerInfo")?;
    // SignerInfo ::= SEQUENCE { version, sid, digestAlgorithm, signedAttrs [0] IMPLICIT
    //   OPTIONAL, ... }: the signature is over the same bytes with the SET OF tag (RFC 5652 5.4).
    let signed_attrs = tlvs(signer_tlv.value)
        .map_err(der_err("SignerInfo"))?
        .iter()
        .take(4)
        .find(|t| t.tag == context(0))
        .map(|t| {
            let mut set = t.raw.to_vec();
            set[0] = 0x31; // [0] constructed (0xa0), one byte, becomes SET (0x31)
            set
        });

    let encap: EncapsulatedContentInfo = decode(encap.raw, "EncapsulatedContentInfo")?;
    if encap.econtent_type != oid::CT_TST_INFO {
        return Err(TsaError::NotTstInfo {
            oid: encap.econtent_type.to_string(),
        });
    }
    let econtent = match encap.econtent {
        Some(e) if e.tag() == Tag::OctetString => e.value().to_vec(),
        Some(_) => {
            return Err(malformed(
                "EncapsulatedContentInfo",
                "eContent is not an OCTET STRING",
            ));
        }
        None => return Err(malformed("EncapsulatedContentInfo", "no eContent")),
    };
    let tst: TstInfo = decode(&econtent, "TSTInfo")?;
    if tst.version != 1 {
        return Err(malformed(
            "TSTInfo",
            format!("version {}, expected 1", tst.version),
        ));
    }
    Ok(Parsed {
        tst,
        econtent,
        certs,
        signer,
        signed_attrs,
    })
}

/// The message imprint is SHA-256 over `digest`.
pub(crate) fn check_imprint(tst: &TstInfo, digest: &[u8; 32]) -> Result<(), TsaError> {
    let imprint = &tst.message_imprint;
    if Hash::from_alg(&imprint.hash_algorithm) != Some(Hash::Sha256) {
        return Err(TsaError::ImprintAlgorithm {
            oid: imprint.hash_algorithm.oid.to_string(),
        });
    }
    if imprint.hashed_message.as_bytes() != digest {
        return Err(TsaError::DigestMismatch);
    }
    Ok(())
}

/// The signed attributes afr-tsa reads.
struct SignedAttrs {
    content_type: ObjectIdentifier,
    message_digest: Vec<u8>,
    /// `signingCertificateV2`'s value, if present.
    ess_v2: Option<der::asn1::Any>,
    /// Whether the SHA-1 `signingCertificate` is present.
    ess_v1: bool,
}

fn single<'a>(attr: &'a Attribute, name: &'static str) -> Result<&'a der::asn1::Any, TsaError> {
    match attr.values.as_slice() {
        [one] => Ok(one),
        _ => Err(TsaError::RepeatedAttribute { name }),
    }
}

fn signed_attrs(set: &[u8]) -> Result<SignedAttrs, TsaError> {
    let set = one_tlv(set).map_err(der_err("signedAttrs"))?;
    let mut content_type = None;
    let mut message_digest = None;
    let mut ess_v2 = None;
    let mut ess_v1 = false;
    for t in tlvs(set.value).map_err(der_err("signedAttrs"))? {
        let attr: Attribute = decode(t.raw, "signed attribute")?;
        let (name, seen) = match attr.oid {
            oid::CONTENT_TYPE => {
                let v = single(&attr, "content-type")?;
                let oid = v
                    .decode_as::<ObjectIdentifier>()
                    .map_err(der_err("content-type attribute"))?;
                ("content-type", content_type.replace(oid).is_some())
            }
            oid::MESSAGE_DIGEST => {
                let v = single(&attr, "message-digest")?;
                let d = v
                    .decode_as::<der::asn1::OctetString>()
                    .map_err(der_err("message-digest attribute"))?;
                (
                    "message-digest",
                    message_digest.replace(d.into_bytes()).is_some(),
                )
            }
            oid::SIGNING_CERTIFICATE_V2 => {
                let v = single(&attr, "signing-certificate-v2")?.clone();
                ("signing-certificate-v2", ess_v2.replace(v).is_some())
            }
            oid::SIGNING_CERTIFICATE => {
                ("signing-certificate", std::mem::replace(&mut ess_v1, true))
            }
            _ => continue,
        };
        if seen {
            return Err(TsaError::RepeatedAttribute { name });
        }
    }
    Ok(SignedAttrs {
        content_type: content_type.ok_or(TsaError::MissingAttribute {
            name: "content-type",
        })?,
        message_digest: message_digest.ok_or(TsaError::MissingAttribute {
            name: "message-digest",
        })?,
        ess_v2,
        ess_v1,
    })
}

fn names_signer(c: &Cert, sid: &SignerIdentifier) -> Result<bool, TsaError> {
    Ok(match sid {
        SignerIdentifier::IssuerAndSerialNumber(IssuerAndSerialNumber {
            issuer,
            serial_number,
        }) => {
            let tbs = &c.cert.tbs_certificate;
            tbs.serial_number == *serial_number && tbs.issuer.to_der().ok() == issuer.to_der().ok()
        }
        SignerIdentifier::SubjectKeyIdentifier(ski) => {
            c.subject_key_id()?.as_deref() == Some(ski.0.as_bytes())
        }
    })
}

/// The certificate the sid names: the token's first, then the pinned ones.
fn find_signer<'a>(
    sid: &SignerIdentifier,
    certs: &'a [Cert],
    trusted: &'a [TrustedCert],
) -> Result<&'a Cert, TsaError> {
    for c in certs.iter().chain(trusted.iter().map(|t| &t.0)) {
        if names_signer(c, sid)? {
            return Ok(c);
        }
    }
    Err(TsaError::SignerNotFound)
}

/// RFC 5035 / RFC 5816: the first ESSCertIDv2 is the hash of the signer's certificate.
///
/// ```text
/// SigningCertificateV2 ::= SEQUENCE { certs SEQUENCE OF ESSCertIDv2, policies ... OPTIONAL }
/// ESSCertIDv2 ::= SEQUENCE { hashAlgorithm AlgorithmIdentifier DEFAULT {id-sha256},
///                            certHash OCTET STRING, issuerSerial IssuerSerial OPTIONAL }
/// ```
fn check_ess_v2(value: &der::asn1::Any, signer: &Cert) -> Result<(), TsaError> {
    let bad = |reason: &str| malformed("signing-certificate-v2 attribute", reason);
    if value.tag() != Tag::Sequence {
        return Err(bad("not a SEQUENCE"));
    }
    let parts = tlvs(value.value()).map_err(der_err("signing-certificate-v2 attribute"))?;
    let certs = parts
        .first()
        .filter(|t| t.tag == Tag::Sequence)
        .ok_or_else(|| bad("no certs"))?;
    let ids = tlvs(certs.value).map_err(der_err("signing-certificate-v2 attribute"))?;
    let first = ids
        .first()
        .filter(|t| t.tag == Tag::Sequence)
        .ok_or_else(|| bad("no ESSCertIDv2"))?;
    let fields = tlvs(first.value).map_err(der_err("signing-certificate-v2 attribute"))?;
    let (hash, cert_hash) = match &fields[..] {
        [alg, h, ..] if alg.tag == Tag::Sequence && h.tag == Tag::OctetString => {
            let alg: AlgorithmIdentifierOwned =
                decode(alg.raw, "signing-certificate-v2 attribute")?;
            let hash = Hash::from_alg(&alg).ok_or(TsaError::DigestAlgorithm {
                oid: alg.oid.to_string(),
            })?;
            (hash, h.value)
        }
        [h, ..] if h.tag == Tag::OctetString => (Hash::Sha256, h.value),
        _ => return Err(bad("no certHash")),
    };
    if hash.digest(&signer.der) != cert_hash {
        return Err(TsaError::SigningCertificateMismatch);
    }
    Ok(())
}

fn general_name(name: &GeneralName) -> String {
    match name {
        GeneralName::DirectoryName(n) => n.to_string(),
        GeneralName::DnsName(s) => s.to_string(),
        GeneralName::Rfc822Name(s) => s.to_string(),
        GeneralName::UniformResourceIdentifier(s) => s.to_string(),
        _ => "(a name form afr-tsa does not render)".to_string(),
    }
}

/// Verifies `token` (a DER TimeStampToken, the CMS ContentInfo) over the SHA-256 `digest`,
/// offline, against the pinned `trusted` certificates. See the crate docs for the checks.
pub fn verify(
    token: &[u8],
    digest: &[u8; 32],
    trusted: &[TrustedCert],
) -> Result<Timestamp, TsaError> {
    let Parsed {
        tst,
        econtent,
        certs,
        signer,
        signed_attrs: attrs_der,
    } = parse(token)?;
    if let Some(ext) = tst.extensions.iter().flatten().find(|e| e.critical) {
        return Err(TsaError::CriticalExtension {
            oid: ext.extn_id.to_string(),
        });
    }
    let at = gen_time(&tst.gen_time)
        .ok_or_else(|| malformed("TSTInfo", "genTime is not a DER GeneralizedTime"))?;
    check_imprint(&tst, digest)?;

    let digest_alg = Hash::from_alg(&signer.digest_alg).ok_or(TsaError::DigestAlgorithm {
        oid: signer.digest_alg.oid.to_string(),
    })?;
    let attrs_der = attrs_der.ok_or(TsaError::NoSignedAttributes)?;
    let attrs = signed_attrs(&attrs_der)?;
    if attrs.content_type != oid::CT_TST_INFO {
        return Err(TsaError::ContentTypeAttribute {
            oid: attrs.content_type.to_string(),
        });
    }
    if digest_alg.digest(&econtent) != attrs.message_digest {
        return Err(TsaError::MessageDigestMismatch);
    }

    let cert = find_signer(&signer.sid, &certs, trusted)?;
    let spki = &cert.cert.tbs_certificate.subject_public_key_info;
    sig::verify(
        spki,
        &signer.signature_algorithm,
        Some(digest_alg),
        &attrs_der,
        signer.signature.as_bytes(),
    )
    .map_err(|e| match e {
        SigError::Algorithm(oid) => TsaError::SignatureAlgorithm {
            oid: oid.to_string(),
        },
        SigError::Key(reason) => TsaError::PublicKey { reason },
        SigError::Invalid => TsaError::BadSignature,
    })?;
    check_tsa_usage(cert)?;
    let anchor = chain(cert, trusted, at)?;
    match (&attrs.ess_v2, attrs.ess_v1) {
        (Some(v2), _) => check_ess_v2(v2, cert)?,
        // The SHA-1 ESSCertID is not checked: the signature already binds the key, and
        // afr-tsa computes no SHA-1.
        (None, true) => {}
        (None, false) => {
            return Err(TsaError::MissingAttribute {
                name: "signing-certificate",
            });
        }
    }
    let trusted_index = match anchor {
        Anchor::Pinned(i) | Anchor::IssuedBy(i) => i,
    };
    Ok(Timestamp {
        gen_time: at,
        serial: tst.serial_number.as_bytes().to_vec(),
        tsa_name: tst.tsa.as_ref().map(general_name),
        policy: tst.policy.to_string(),
        signer: cert.subject(),
        nonce: tst.nonce.as_ref().map(|n| n.as_bytes().to_vec()),
        trusted_index,
    })
}
