//! Signature checks: RSA PKCS#1 v1.5 with SHA-256/384/512 and ECDSA on P-256 and P-384, the
//! algorithms `openssl ts` signs with from an RSA or EC key.

use der::asn1::ObjectIdentifier;
use der::{Encode, Tag, Tagged};
use p256::ecdsa::signature::hazmat::PrehashVerifier;
use rsa::pkcs8::DecodePublicKey;
use rsa::traits::PublicKeyParts;
use sha2_010::Digest;
use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};

use crate::oid;

/// The shortest RSA modulus accepted, in bytes (2048 bits).
pub(crate) const MIN_RSA_BYTES: usize = 256;

/// A SHA-2 function named by an AlgorithmIdentifier.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

impl Hash {
    /// The hash an AlgorithmIdentifier names, with parameters absent or NULL (RFC 5754).
    pub(crate) fn from_alg(alg: &AlgorithmIdentifierOwned) -> Option<Self> {
        if !params_absent_or_null(alg) {
            return None;
        }
        match alg.oid {
            oid::SHA256 => Some(Self::Sha256),
            oid::SHA384 => Some(Self::Sha384),
            oid::SHA512 => Some(Self::Sha512),
            _ => None,
        }
    }

    pub(crate) fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => sha2_010::Sha256::digest(data).to_vec(),
            Self::Sha384 => sha2_010::Sha384::digest(data).to_vec(),
            Self::Sha512 => sha2_010::Sha512::digest(data).to_vec(),
        }
    }
}

fn params_absent_or_null(alg: &AlgorithmIdentifierOwned) -> bool {
    match &alg.parameters {
        None => true,
        Some(p) => p.tag() == Tag::Null && p.value().is_empty(),
    }
}

/// Why a signature was not accepted.
#[derive(Clone, Debug, Eq, PartialEq)]
pub(crate) enum SigError {
    /// The signature algorithm (or its parameters) is not one afr-tsa checks.
    Algorithm(ObjectIdentifier),
    /// The public key is of another kind than the algorithm, malformed, or too weak.
    Key(&'static str),
    /// The signature does not verify.
    Invalid,
}

#[derive(Clone, Copy)]
enum Scheme {
    Rsa,
    Ecdsa,
}

/// Verifies `sig` over `msg` with `spki`. `alg` is the signature algorithm; when it names no
/// hash (`rsaEncryption`, `id-ecPublicKey`, as CMS signers may write), `default_hash` (the
/// SignerInfo's digest algorithm) is the hash.
pub(crate) fn verify(
    spki: &SubjectPublicKeyInfoOwned,
    alg: &AlgorithmIdentifierOwned,
    default_hash: Option<Hash>,
    msg: &[u8],
    sig: &[u8],
) -> Result<(), SigError> {
    let unsupported = || SigError::Algorithm(alg.oid);
    let (scheme, hash) = match alg.oid {
        oid::RSA_ENCRYPTION => (Scheme::Rsa, default_hash.ok_or_else(unsupported)?),
        oid::SHA256_WITH_RSA => (Scheme::Rsa, Hash::Sha256),
        oid::SHA384_WITH_RSA => (Scheme::Rsa, Hash::Sha384),
        oid::SHA512_WITH_RSA => (Scheme::Rsa, Hash::Sha512),
        oid::EC_PUBLIC_KEY => (Scheme::Ecdsa, default_hash.ok_or_else(unsupported)?),
        oid::ECDSA_WITH_SHA256 => (Scheme::Ecdsa, Hash::Sha256),
        oid::ECDSA_WITH_SHA384 => (Scheme::Ecdsa, Hash::Sha384),
        oid::ECDSA_WITH_SHA512 => (Scheme::Ecdsa, Hash::Sha512),
        _ => return Err(unsupported()),
    };
    // RSA algorithms carry NULL (or no) parameters; ECDSA-with-SHA2 none (RFC 5758); an
    // id-ecPublicKey signature algorithm may repeat the curve, which the key decides anyway.
    let params_ok = match (scheme, alg.oid) {
        (_, oid::EC_PUBLIC_KEY) => true,
        (Scheme::Rsa, _) => params_absent_or_null(alg),
        (Scheme::Ecdsa, _) => alg.parameters.is_none(),
    };
    if !params_ok {
        return Err(unsupported());
    }
    let hashed = hash.digest(msg);
    match scheme {
        Scheme::Rsa => verify_rsa(spki, hash, &hashed, sig),
        Scheme::Ecdsa => verify_ecdsa(spki, &hashed, sig),
    }
}

fn verify_rsa(
    spki: &SubjectPublicKeyInfoOwned,
    hash: Hash,
    hashed: &[u8],
    sig: &[u8],
) -> Result<(), SigError> {
    if spki.algorithm.oid != oid::RSA_ENCRYPTION {
        return Err(SigError::Key("an RSA signature from a key that is not RSA"));
    }
    let der = spki
        .to_der()
        .map_err(|_| SigError::Key("malformed RSA key"))?;
    let key = rsa::RsaPublicKey::from_public_key_der(&der)
        .map_err(|_| SigError::Key("malformed or unsupported RSA key"))?;
    if key.size() < MIN_RSA_BYTES {
        return Err(SigError::Key("RSA key shorter than 2048 bits"));
    }
    let scheme = match hash {
        Hash::Sha256 => rsa::Pkcs1v15Sign::new::<sha2_010::Sha256>(),
        Hash::Sha384 => rsa::Pkcs1v15Sign::new::<sha2_010::Sha384>(),
        Hash::Sha512 => rsa::Pkcs1v15Sign::new::<sha2_010::Sha512>(),
    };
    key.verify(scheme, hashed, sig)
        .map_err(|_| SigError::Invalid)
}

fn verify_ecdsa(
    spki: &SubjectPublicKeyInfoOwned,
    hashed: &[u8],
    sig: &[u8],
) -> Result<(), SigError> {
    if spki.algorithm.oid != oid::EC_PUBLIC_KEY {
        return Err(SigError::Key(
            "an ECDSA signature from a key that is not EC",
        ));
    }
    let curve = spki
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.decode_as::<ObjectIdentifier>().ok())
        .ok_or(SigError::Key("EC key without a named curve"))?;
    let point = spki
        .subject_public_key
        .as_bytes()
        .ok_or(SigError::Key("EC key with unused bits"))?;
    match curve {
        oid::SECP256R1 => {
            let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(point)
                .map_err(|_| SigError::Key("malformed P-256 key"))?;
            let sig = p256::ecdsa::Signature::from_der(sig).map_err(|_| SigError::Invalid)?;
            key.verify_prehash(hashed, &sig)
                .map_err(|_| SigError::Invalid)
        }
        oid::SECP384R1 => {
            let key = p384::ecdsa::VerifyingKey::from_sec1_bytes(point)
                .map_err(|_| SigError::Key("malformed P-384 key"))?;
            let sig = p384::ecdsa::Signature::from_der(sig).map_err(|_| SigError::Invalid)?;
            key.verify_prehash(hashed, &sig)
                .map_err(|_| SigError::Invalid)
        }
        _ => Err(SigError::Key("EC key on a curve other than P-256 or P-384")),
    }
}
