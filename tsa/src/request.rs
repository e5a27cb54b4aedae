//! The TimeStampReq afr-tsa sends, and reading the TimeStampResp that answers it.

use der::Encode;

use crate::asn1::{TimeStampResp, decode};
use crate::{Token, TsaError};

/// `AlgorithmIdentifier { id-sha256, NULL }`, DER: the imprint's algorithm, with the NULL
/// parameters `openssl ts -query` writes (RFC 5754 lets a verifier accept both forms; some TSAs
/// accept only this one).
const SHA256_ALG_ID: [u8; 15] = [
    0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00,
];

/// The content octets of the DER INTEGER `n` (minimal two's complement, non-negative).
pub(crate) fn uint_content(n: u64) -> Vec<u8> {
    let bytes = n.to_be_bytes();
    let skip = bytes
        .iter()
        .take_while(|b| **b == 0)
        .count()
        .min(bytes.len() - 1);
    let mut out = Vec::with_capacity(9);
    if bytes[skip] & 0x80 != 0 {
        out.push(0);
    }
    out.extend_from_slice(&bytes[skip..]);
    out
}

/// A DER `TimeStampReq` (RFC 3161 2.4.1) for a SHA-256 `digest`: version 1, messageImprint
/// SHA-256, no policy, `nonce`, certReq TRUE (the TSA includes its certificate in the token).
///
/// ```
/// let req = afr_tsa::request(&[7; 32], 42);
/// assert_eq!(req[0], 0x30); // a DER SEQUENCE
/// ```
pub fn request(digest: &[u8; 32], nonce: u64) -> Vec<u8> {
    let nonce = uint_content(nonce);
    let mut body = vec![0x02, 0x01, 0x01]; // version v1
    body.extend_from_slice(&[0x30, 0x31]); // MessageImprint: 15 + 2 + 32 bytes
    body.extend_from_slice(&SHA256_ALG_ID);
    body.extend_from_slice(&[0x04, 0x20]);
    body.extend_from_slice(digest);
    body.push(0x02); // nonce INTEGER, at most 9 content bytes
    body.push(nonce.len() as u8);
    body.extend_from_slice(&nonce);
    body.extend_from_slice(&[0x01, 0x01, 0xff]); // certReq TRUE
    let mut out = vec![0x30, body.len() as u8]; // under 128 bytes: short-form length
    out.extend_from_slice(&body);
    out
}

/// `PKIStatus` values (RFC 3161 2.4.2).
const GRANTED: u8 = 0;
const GRANTED_WITH_MODS: u8 = 1;

/// Names of `PKIFailureInfo` bits (RFC 3161 2.4.2), by bit number.
const FAIL_INFO: [(usize, &str); 8] = [
    (0, "badAlg"),
    (2, "badRequest"),
    (5, "badDataFormat"),
    (14, "timeNotAvailable"),
    (15, "unacceptedPolicy"),
    (16, "unacceptedExtension"),
    (17, "addInfoNotAvailable"),
    (25, "systemFailure"),
];

/// A TimeStampResp did not carry a granted token.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplyError {
    /// The reply is not a DER TimeStampResp.
    #[error("malformed TimeStampResp: {reason}")]
    Malformed {
        /// What the decoder said.
        reason: String,
    },
    /// The TSA answered with a status other than granted / grantedWithMods.
    #[error("the TSA refused: status {status} ({}), {text:?}, failure {fail_info:?}", status_name(*.status))]
    Refused {
        /// The PKIStatus (2 rejection, 3 waiting, 4 revocationWarning, 5 revocationNotification).
        status: u8,
        /// The TSA's statusString, as sent.
        text: Vec<String>,
        /// The names of the PKIFailureInfo bits set.
        fail_info: Vec<&'static str>,
    },
    /// A granted reply without a timeStampToken.
    #[error("granted reply without a timeStampToken")]
    NoToken,
    /// The token does not decode, or does not answer this request (imprint, nonce).
    #[error("token does not answer the request: {0}")]
    Token(TsaError),
    /// The token answers another request.
    #[error("token answers another request: its {what} differs")]
    Mismatch {
        /// `message imprint` or `nonce`.
        what: &'static str,
    },
}

fn status_name(status: u8) -> &'static str {
    match status {
        0 => "granted",
        1 => "grantedWithMods",
        2 => "rejection",
        3 => "waiting",
        4 => "revocationWarning",
        5 => "revocationNotification",
        _ => "unknown",
    }
}

/// The TimeStampToken of a DER `TimeStampResp`, if its status is granted or grantedWithMods.
/// The token is not verified: that is [`crate::verify`]'s job.
pub fn token_from_reply(reply: &[u8]) -> Result<Token, ReplyError> {
    let resp: TimeStampResp =
        decode(reply, "TimeStampResp").map_err(|e| ReplyError::Malformed {
            reason: e.to_string(),
        })?;
    let status = resp.status.status;
    if status != GRANTED && status != GRANTED_WITH_MODS {
        let fail_info = resp
            .status
            .fail_info
            .map(|bits| {
                let set: Vec<bool> = bits.bits().collect();
                FAIL_INFO
                    .iter()
                    .filter(|(i, _)| set.get(*i) == Some(&true))
                    .map(|(_, n)| *n)
                    .collect()
            })
            .unwrap_or_default();
        return Err(ReplyError::Refused {
            status,
            text: resp.status.status_string.unwrap_or_default(),
            fail_info,
        });
    }
    let token = resp.time_stamp_token.ok_or(ReplyError::NoToken)?;
    let der = token.to_der().map_err(|e| ReplyError::Malformed {
        reason: e.to_string(),
    })?;
    Ok(Token(der))
}

/// Checks that `token` answers the request for `digest` with `nonce` (unverified parse).
pub(crate) fn answers(token: &Token, digest: &[u8; 32], nonce: u64) -> Result<(), ReplyError> {
    let parsed = crate::verify::parse(token.as_der()).map_err(ReplyError::Token)?;
    crate::verify::check_imprint(&parsed.tst, digest).map_err(|e| match e {
        TsaError::DigestMismatch => ReplyError::Mismatch {
            what: "message imprint",
        },
        other => ReplyError::Token(other),
    })?;
    if parsed.tst.nonce.as_ref().map(|n| n.as_bytes()) != Some(&uint_content(nonce)[..]) {
        return Err(ReplyError::Mismatch { what: "nonce" });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asn1::TimeStampReq;
    use der::Decode;

    #[test]
    fn request_decodes_as_a_time_stamp_req() {
        for nonce in [0, 1, 0x7f, 0x80, 0xff, 0x1234, u64::MAX, 1 << 63] {
            let der = request(&[0xab; 32], nonce);
            let req = TimeStampReq::from_der(&der).unwrap();
            assert_eq!(req.version, 1);
            assert!(req.cert_req);
            assert_eq!(req.req_policy, None);
            assert_eq!(req.message_imprint.hash_algorithm.oid, crate::oid::SHA256);
            assert_eq!(req.message_imprint.hashed_message.as_bytes(), &[0xab; 32]);
            let n = req.nonce.clone().unwrap();
            let mut be = [0u8; 8];
            let b = n.as_bytes();
            be[8 - b.len()..].copy_from_slice(b);
            assert_eq!(u64::from_be_bytes(be), nonce);
            // Our encoding is the der crate's.
            assert_eq!(req.to_der().unwrap(), der);
        }
    }

    #[test]
    fn replies() {
        // status rejection, "no", failInfo badAlg.
        let refused = [
            0x30, 0x0f, 0x30, 0x0d, 0x02, 0x01, 0x02, 0x30, 0x04, 0x0c, 0x02, b'n', b'o', 0x03,
            0x02, 0x07, 0x80,
        ];
        assert_eq!(
            token_from_reply(&refused),
            Err(ReplyError::Refused {
                status: 2,
                text: vec!["no".into()],
                fail_info: vec!["badAlg"]
            })
        );
        let granted_empty = [0x30, 0x05, 0x30, 0x03, 0x02, 0x01, 0x00];
        assert_eq!(token_from_reply(&granted_empty), Err(ReplyError::NoToken));
        assert!(matches!(
            token_from_reply(&granted_empty[..6]),
            Err(ReplyError::Malformed { .. })
        ));
        assert!(matches!(
            token_from_reply(b""),
            Err(ReplyError::Malformed { .. })
        ));
    }
}
