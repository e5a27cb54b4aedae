//! Certificates: the pinned ones ([`TrustedCert`]), the signer's extended key usage, validity,
//! and the one-link chain from a signer to a pinned certificate.

use std::time::SystemTime;

use der::{Decode, Encode};
use x509_cert::Certificate;
use x509_cert::ext::Extension;
use x509_cert::ext::pkix::{
    BasicConstraints, ExtendedKeyUsage, KeyUsage, KeyUsages, SubjectKeyIdentifier,
};

use crate::asn1::{one_tlv, rfc3339, tlvs};
use crate::sig::{self, SigError};
use crate::{TsaError, oid};

/// A parsed certificate with its DER as received and the DER of its TBSCertificate.
#[derive(Clone, Debug)]
pub(crate) struct Cert {
    pub(crate) der: Vec<u8>,
    pub(crate) tbs: Vec<u8>,
    pub(crate) cert: Certificate,
}

impl Cert {
    pub(crate) fn parse(der: &[u8]) -> der::Result<Self> {
        let cert = Certificate::from_der(der)?;
        let outer = one_tlv(der)?;
        let tbs = tlvs(outer.value)?
            .first()
            .map(|t| t.raw.to_vec())
            .ok_or(der::ErrorKind::Failed)?;
        Ok(Self {
            der: der.to_vec(),
            tbs,
            cert,
        })
    }

    /// The subject, RFC 4514 style (text from the certificate: escape it before printing).
    pub(crate) fn subject(&self) -> String {
        self.cert.tbs_certificate.subject.to_string()
    }

    /// The one extension `id`, if present; two of them is malformed (RFC 5280 4.2).
    fn extension(&self, id: der::asn1::ObjectIdentifier) -> Result<Option<&Extension>, TsaError> {
        let mut found = self
            .cert
            .tbs_certificate
            .extensions
            .iter()
            .flatten()
            .filter(|e| e.extn_id == id);
        let first = found.next();
        if found.next().is_some() {
            return Err(TsaError::Malformed {
                part: "certificate",
                reason: format!("extension {id} appears twice"),
            });
        }
        Ok(first)
    }

    fn decode_ext<'a, T: Decode<'a>>(
        &'a self,
        id: der::asn1::ObjectIdentifier,
        name: &'static str,
    ) -> Result<Option<(bool, T)>, TsaError> {
        match self.extension(id)? {
            None => Ok(None),
            Some(e) => T::from_der(e.extn_value.as_bytes())
                .map(|v| Some((e.critical, v)))
                .map_err(|err| TsaError::Malformed {
                    part: name,
                    reason: err.to_string(),
                }),
        }
    }

    pub(crate) fn subject_key_id(&self) -> Result<Option<Vec<u8>>, TsaError> {
        Ok(self
            .decode_ext::<SubjectKeyIdentifier>(
                oid::CE_SUBJECT_KEY_IDENTIFIER,
                "subject key identifier",
            )?
            .map(|(_, ski)| ski.0.as_bytes().to_vec()))
    }

    fn valid_at(&self, at: SystemTime) -> bool {
        let v = &self.cert.tbs_certificate.validity;
        v.not_before.to_system_time() <= at && at <= v.not_after.to_system_time()
    }
}

/// A certificate the relying party pins: a TSA's own certificate, or a CA that issues TSA
/// certificates. Parse with [`TrustedCert::from_der`] or [`TrustedCert::parse`].
#[derive(Clone, Debug)]
pub struct TrustedCert(pub(crate) Cert);

/// A pinned certificate could not be read.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// The bytes are not one DER X.509 certificate.
    #[error("not a DER X.509 certificate: {reason}")]
    Der {
        /// What the DER decoder said.
        reason: String,
    },
    /// A PEM block is malformed, or the text holds no `CERTIFICATE` block.
    #[error("malformed PEM: {reason}")]
    Pem {
        /// What was wrong.
        reason: String,
    },
}

const PEM_BEGIN: &str = "-----BEGIN CERTIFICATE-----";
const PEM_END: &str = "-----END CERTIFICATE-----";

impl TrustedCert {
    /// One DER-encoded certificate.
    pub fn from_der(der: &[u8]) -> Result<Self, TrustError> {
        Cert::parse(der).map(Self).map_err(|e| TrustError::Der {
            reason: e.to_string(),
        })
    }

    /// DER, or PEM text with one or more `CERTIFICATE` blocks (other blocks are ignored).
    pub fn parse(bytes: &[u8]) -> Result<Vec<Self>, TrustError> {
        let text = match std::str::from_utf8(bytes) {
            Ok(t) if t.contains(PEM_BEGIN) => t,
            _ => return Self::from_der(bytes).map(|c| vec![c]),
        };
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find(PEM_BEGIN) {
            let end = rest[start..]
                .find(PEM_END)
                .map(|e| start + e + PEM_END.len())
                .ok_or_else(|| TrustError::Pem {
                    reason: "BEGIN CERTIFICATE without END".into(),
                })?;
            let (label, der) = der::pem::decode_vec(&rest.as_bytes()[start..end]).map_err(|e| {
                TrustError::Pem {
                    reason: e.to_string(),
                }
            })?;
            if label != "CERTIFICATE" {
                return Err(TrustError::Pem {
                    reason: format!("label {label}"),
                });
            }
            out.push(Self::from_der(&der)?);
            rest = &rest[end..];
        }
        Ok(out)
    }

    /// The DER of the certificate.
    pub fn der(&self) -> &[u8] {
        &self.0.der
    }

    /// The subject, RFC 4514 style. Text from the certificate: escape it before printing.
    pub fn subject(&self) -> String {
        self.0.subject()
    }
}

/// RFC 3161 2.3: the signer's certificate has exactly one extended key usage,
/// id-kp-timeStamping, in a critical extension; a key usage, if present, allows signing.
pub(crate) fn check_tsa_usage(signer: &Cert) -> Result<(), TsaError> {
    let fail = |reason: &'static str| TsaError::KeyUsage {
        subject: signer.subject(),
        reason,
    };
    let (critical, eku) = signer
        .decode_ext::<ExtendedKeyUsage>(oid::CE_EXT_KEY_USAGE, "extended key usage")?
        .ok_or_else(|| fail("no extended key usage (id-kp-timeStamping required)"))?;
    if eku.0 != [oid::KP_TIME_STAMPING] {
        return Err(fail("extended key usage is not id-kp-timeStamping alone"));
    }
    if !critical {
        return Err(fail("extended key usage is not critical"));
    }
    let ku = signer.decode_ext::<KeyUsage>(oid::CE_KEY_USAGE, "key usage")?;
    let signs = |ku: &KeyUsage| {
        ku.0.contains(KeyUsages::DigitalSignature) || ku.0.contains(KeyUsages::NonRepudiation)
    };
    if ku.is_some_and(|(_, ku)| !signs(&ku)) {
        return Err(fail(
            "key usage allows neither digitalSignature nor nonRepudiation",
        ));
    }
    Ok(())
}

/// Whether `ca` may issue certificates: basicConstraints cA and, if present, keyCertSign.
fn is_ca(ca: &Cert) -> Result<bool, TsaError> {
    let bc = ca.decode_ext::<BasicConstraints>(oid::CE_BASIC_CONSTRAINTS, "basic constraints")?;
    if !bc.is_some_and(|(_, bc)| bc.ca) {
        return Ok(false);
    }
    let ku = ca.decode_ext::<KeyUsage>(oid::CE_KEY_USAGE, "key usage")?;
    Ok(ku.is_none_or(|(_, ku)| ku.0.contains(KeyUsages::KeyCertSign)))
}

fn not_valid(which: &'static str, cert: &Cert, at: SystemTime) -> TsaError {
    TsaError::NotValid {
        which,
        subject: cert.subject(),
        gen_time: rfc3339(at),
    }
}

/// How the signer's certificate is trusted.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum Anchor {
    /// It is itself the pinned certificate at this index.
    Pinned(usize),
    /// It is issued by the pinned CA at this index.
    IssuedBy(usize),
}

/// The signer certificate is pinned, or issued by a pinned CA whose signature on it verifies;
/// the signer, and the CA, are valid at `at`.
pub(crate) fn chain(
    signer: &Cert,
    trusted: &[TrustedCert],
    at: SystemTime,
) -> Result<Anchor, TsaError> {
    let anchor = if let Some(i) = trusted.iter().position(|t| t.0.der == signer.der) {
        Anchor::Pinned(i)
    } else {
        let tbs = &signer.cert.tbs_certificate;
        if tbs.signature != signer.cert.signature_algorithm {
            return Err(TsaError::Malformed {
                part: "certificate",
                reason: "inner and outer signature algorithms differ".into(),
            });
        }
        let issuer = tbs.issuer.to_der().map_err(|e| TsaError::Malformed {
            part: "certificate",
            reason: e.to_string(),
        })?;
        let sig = signer
            .cert
            .signature
            .as_bytes()
            .ok_or_else(|| TsaError::Malformed {
                part: "certificate",
                reason: "signature with unused bits".into(),
            })?;
        let mut named_but_bad = false;
        let mut found = None;
        for (i, t) in trusted.iter().enumerate() {
            let ca = &t.0;
            if ca.cert.tbs_certificate.subject.to_der().ok().as_deref() != Some(&issuer[..])
                || !is_ca(ca)?
            {
                continue;
            }
            let spki = &ca.cert.tbs_certificate.subject_public_key_info;
            match sig::verify(
                spki,
                &signer.cert.signature_algorithm,
                None,
                &signer.tbs,
                sig,
            ) {
                Ok(()) => {
                    found = Some(i);
                    break;
                }
                Err(SigError::Algorithm(oid)) => {
                    return Err(TsaError::SignatureAlgorithm {
                        oid: oid.to_string(),
                    });
                }
                Err(SigError::Key(_) | SigError::Invalid) => named_but_bad = true,
            }
        }
        match found {
            Some(i) => Anchor::IssuedBy(i),
            None if named_but_bad => {
                return Err(TsaError::CertSignature {
                    subject: signer.subject(),
                });
            }
            None => {
                return Err(TsaError::Untrusted {
                    subject: signer.subject(),
                });
            }
        }
    };
    if !signer.valid_at(at) {
        return Err(not_valid("signer", signer, at));
    }
    if let Anchor::IssuedBy(i) = anchor {
        let ca = &trusted[i].0;
        if !ca.valid_at(at) {
            return Err(not_valid("issuing CA", ca, at));
        }
    }
    Ok(anchor)
}
