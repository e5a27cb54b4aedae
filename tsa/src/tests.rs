//! Verification against the fixtures of `testdata/` (made by `testdata/gen.sh` with openssl),
//! and hostile input: every named failure, truncations, mutations, garbage.

use std::time::{Duration, SystemTime};

use crate::{MAX_TOKEN_LEN, Timestamp, TrustError, TrustedCert, TsaError, verify};

const DIGEST: &[u8; 32] = include_bytes!("../testdata/digest.bin");
const RSA: &[u8] = include_bytes!("../testdata/rsa.tst");
const EC: &[u8] = include_bytes!("../testdata/ec.tst");
const CA_PEM: &[u8] = include_bytes!("../testdata/ca.pem");
const CA_DER: &[u8] = include_bytes!("../testdata/ca.der");
const OTHER_CA_PEM: &[u8] = include_bytes!("../testdata/other-ca.pem");
const TSA_RSA_PEM: &[u8] = include_bytes!("../testdata/tsa-rsa.pem");

fn ca() -> Vec<TrustedCert> {
    TrustedCert::parse(CA_PEM).unwrap()
}

fn ok(token: &[u8]) -> Timestamp {
    verify(token, DIGEST, &ca()).unwrap()
}

fn err(token: &[u8]) -> TsaError {
    verify(token, DIGEST, &ca()).unwrap_err()
}

#[test]
fn rsa_token_verifies_under_its_ca() {
    let ts = ok(RSA);
    assert_eq!(ts.policy, "1.3.6.1.4.1.99999.1.1");
    assert!(ts.signer.contains("AFR test TSA (RSA)"), "{}", ts.signer);
    assert_eq!(ts.tsa_name.as_deref(), Some(ts.signer.as_str()));
    assert!(ts.nonce.is_some());
    assert!(!ts.serial.is_empty());
    assert_eq!(ts.trusted_index, 0);
    // Made by gen.sh, after this code was written, before any test ran.
    assert!(ts.gen_time > SystemTime::UNIX_EPOCH + Duration::from_secs(1_780_000_000));
    assert!(ts.gen_time_rfc3339().ends_with('Z'));
}

#[test]
fn ec_p384_token_verifies() {
    let ts = ok(EC);
    assert!(ts.signer.contains("AFR test TSA (EC)"), "{}", ts.signer);
}

#[test]
fn pinning_the_tsa_certificate_itself_suffices() {
    let mut trusted = TrustedCert::parse(OTHER_CA_PEM).unwrap();
    trusted.extend(TrustedCert::parse(TSA_RSA_PEM).unwrap());
    let ts = verify(RSA, DIGEST, &trusted).unwrap();
    assert_eq!(ts.trusted_index, 1);
}

#[test]
fn trusted_certificates_parse_from_der_and_pem() {
    let der = TrustedCert::parse(CA_DER).unwrap();
    assert_eq!(der.len(), 1);
    assert_eq!(der[0].der(), ca()[0].der());
    assert!(der[0].subject().contains("AFR test CA"));
    let two = [CA_PEM, OTHER_CA_PEM].concat();
    assert_eq!(TrustedCert::parse(&two).unwrap().len(), 2);
    assert!(matches!(
        TrustedCert::parse(b"garbage"),
        Err(TrustError::Der { .. })
    ));
    assert!(matches!(
        TrustedCert::parse(b""),
        Err(TrustError::Der { .. })
    ));
    let cut = &CA_PEM[..CA_PEM.len() - 30];
    assert!(matches!(
        TrustedCert::parse(cut),
        Err(TrustError::Pem { .. })
    ));
    let key = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    assert!(TrustedCert::parse(key).is_err());
}

#[test]
fn another_digest_is_refused() {
    let mut other = *DIGEST;
    other[31] ^= 1;
    assert_eq!(verify(RSA, &other, &ca()), Err(TsaError::DigestMismatch));
    assert_eq!(verify(EC, &[0; 32], &ca()), Err(TsaError::DigestMismatch));
}

#[test]
fn sha1_imprint_is_refused_by_name() {
    let e = err(include_bytes!("../testdata/sha1-imprint.tst"));
    assert_eq!(
        e,
        TsaError::ImprintAlgorithm {
            oid: "1.3.14.3.2.26".into()
        }
    );
    assert!(e.to_string().contains("only SHA-256"), "{e}");
}

#[test]
fn untrusted_tsa_is_refused() {
    let e = err(include_bytes!("../testdata/untrusted.tst"));
    assert!(
        matches!(e, TsaError::Untrusted { ref subject } if subject.contains("Untrusted TSA")),
        "{e}"
    );
    // Nothing pinned: nothing is trusted, even a well-signed token.
    assert!(matches!(
        verify(RSA, DIGEST, &[]),
        Err(TsaError::Untrusted { .. })
    ));
    // Pinned: another CA only.
    let other = TrustedCert::parse(OTHER_CA_PEM).unwrap();
    assert!(matches!(
        verify(RSA, DIGEST, &other),
        Err(TsaError::Untrusted { .. })
    ));
}

#[test]
fn certificate_claiming_the_pinned_ca_is_refused() {
    let e = err(include_bytes!("../testdata/forged-ca.tst"));
    assert!(matches!(e, TsaError::CertSignature { .. }), "{e}");
}

#[test]
fn wrong_extended_key_usage_is_refused() {
    for (token, reason) in [
        (
            &include_bytes!("../testdata/no-eku.tst")[..],
            "no extended key usage",
        ),
        (
            &include_bytes!("../testdata/noncritical-eku.tst")[..],
            "not critical",
        ),
        (&include_bytes!("../testdata/codesign-eku.tst")[..], "alone"),
    ] {
        match err(token) {
            TsaError::KeyUsage { reason: r, .. } => assert!(r.contains(reason), "{r}"),
            e => panic!("{e}"),
        }
    }
}

#[test]
fn expired_signer_is_refused() {
    match err(include_bytes!("../testdata/expired.tst")) {
        TsaError::NotValid { which, subject, .. } => {
            assert_eq!(which, "signer");
            assert!(subject.contains("Expired TSA"));
        }
        e => panic!("{e}"),
    }
}

#[test]
fn token_without_signing_certificate_attribute_is_refused() {
    // The TSTInfo of rsa.tst signed again by the same TSA with `openssl cms -sign`, which
    // writes no ESS signing-certificate attribute.
    let e = err(include_bytes!("../testdata/cms-resigned.tst"));
    assert_eq!(
        e,
        TsaError::MissingAttribute {
            name: "signing-certificate"
        }
    );
}

#[test]
fn mutated_signature_is_refused() {
    for token in [RSA, EC] {
        // No unsigned attributes: the signature's last byte is the token's.
        let mut t = token.to_vec();
        *t.last_mut().unwrap() ^= 0x01;
        assert_eq!(err(&t), TsaError::BadSignature);
    }
}

fn replace_first(token: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = token.windows(from.len()).position(|w| w == from).unwrap();
    [&token[..at], to, &token[at + from.len()..]].concat()
}

#[test]
fn content_types_are_checked() {
    const SIGNED_DATA: &[u8] = &[
        0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x02,
    ];
    const DATA: &[u8] = &[
        0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01,
    ];
    let t = replace_first(RSA, SIGNED_DATA, DATA);
    assert_eq!(
        err(&t),
        TsaError::NotSignedData {
            oid: "1.2.840.113549.1.7.1".into()
        }
    );
    const TST: &[u8] = &[
        0x06, 0x0b, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x10, 0x01, 0x04,
    ];
    const OTHER: &[u8] = &[
        0x06, 0x0b, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x10, 0x01, 0x05,
    ];
    let t = replace_first(RSA, TST, OTHER);
    assert_eq!(
        err(&t),
        TsaError::NotTstInfo {
            oid: "1.2.840.113549.1.9.16.1.5".into()
        }
    );
}

#[test]
fn trailing_bytes_are_refused() {
    let t = [RSA, &[0]].concat();
    assert!(
        matches!(
            err(&t),
            TsaError::Malformed {
                part: "ContentInfo",
                ..
            }
        ),
        "{}",
        err(&t)
    );
}

#[test]
fn every_truncation_is_a_typed_error() {
    for len in 0..RSA.len() {
        assert!(
            matches!(err(&RSA[..len]), TsaError::Malformed { .. }),
            "prefix {len}: {}",
            err(&RSA[..len])
        );
    }
}

#[test]
fn every_byte_flip_fails_or_changes_nothing_verified() {
    let good = ok(RSA);
    let trusted = ca();
    let mut refused = 0;
    for i in 0..RSA.len() {
        let mut t = RSA.to_vec();
        t[i] ^= 0xff;
        match verify(&t, DIGEST, &trusted) {
            Err(_) => refused += 1,
            Ok(ts) => assert_eq!(ts, good, "flip at {i} changed what verifies"),
        }
    }
    // Only bytes no check reads may flip unnoticed (e.g. the SignedData digestAlgorithms).
    assert!(refused > RSA.len() * 9 / 10, "{refused} of {}", RSA.len());
}

/// A deterministic byte stream (xorshift64*), so failures reproduce.
fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

#[test]
fn garbage_is_a_typed_error() {
    let huge = garbage(1, 10 << 20);
    assert_eq!(
        err(&huge),
        TsaError::TooLarge {
            len: 10 << 20,
            max: MAX_TOKEN_LEN
        }
    );
    // A SEQUENCE header that claims 10 MB, with the rest zeros.
    let mut claim = vec![0x30, 0x83, 0xa0, 0x00, 0x00];
    claim.resize(10 << 20, 0);
    assert!(matches!(err(&claim), TsaError::TooLarge { .. }));
    // Just under the limit.
    assert!(matches!(
        err(&garbage(2, MAX_TOKEN_LEN)),
        TsaError::Malformed { .. }
    ));
    for seed in 0..2000u64 {
        let g = garbage(seed, (seed % 300) as usize);
        assert!(verify(&g, DIGEST, &ca()).is_err());
        // Garbage behind a valid prefix of the token.
        let cut = (seed as usize * 7) % RSA.len();
        let t = [&RSA[..cut], &g].concat();
        let _ = verify(&t, DIGEST, &ca());
    }
}
