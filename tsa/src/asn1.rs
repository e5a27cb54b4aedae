//! The RFC 3161 structures (TimeStampReq, TimeStampResp, TSTInfo) and a raw TLV walker.
//!
//! CMS and X.509 types come from the `cms` and `x509-cert` crates. What is signed is read as
//! the bytes that were sent, never as a re-encoding: [`tlvs`] splits a DER value into its
//! elements and keeps each one's exact encoding.

use std::time::{Duration, SystemTime};

use der::asn1::{Any, BitString, Int, ObjectIdentifier, OctetString};
use der::{Decode, Reader, SliceReader, Tag, Tagged};
use spki::AlgorithmIdentifierOwned;
use x509_cert::ext::Extensions;
use x509_cert::ext::pkix::name::GeneralName;

/// `MessageImprint ::= SEQUENCE { hashAlgorithm AlgorithmIdentifier, hashedMessage OCTET STRING }`
#[derive(Clone, Debug, Eq, PartialEq, der::Sequence)]
pub(crate) struct MessageImprint {
    pub(crate) hash_algorithm: AlgorithmIdentifierOwned,
    pub(crate) hashed_message: OctetString,
}

/// `TimeStampReq` (RFC 3161 2.4.1), without extensions: [`crate::request`] writes it by hand;
/// this type checks that in tests.
#[cfg(test)]
#[derive(Clone, Debug, der::Sequence)]
pub(crate) struct TimeStampReq {
    pub(crate) version: u8,
    pub(crate) message_imprint: MessageImprint,
    #[asn1(optional = "true")]
    pub(crate) req_policy: Option<ObjectIdentifier>,
    #[asn1(optional = "true")]
    pub(crate) nonce: Option<der::asn1::Uint>,
    #[asn1(default = "Default::default")]
    pub(crate) cert_req: bool,
}

/// `PKIStatusInfo` (RFC 3161 2.4.2).
#[derive(Clone, Debug, der::Sequence)]
pub(crate) struct PkiStatusInfo {
    pub(crate) status: u8,
    #[asn1(optional = "true")]
    pub(crate) status_string: Option<Vec<String>>,
    #[asn1(optional = "true")]
    pub(crate) fail_info: Option<BitString>,
}

/// `TimeStampResp ::= SEQUENCE { status PKIStatusInfo, timeStampToken TimeStampToken OPTIONAL }`
#[derive(Clone, Debug, der::Sequence)]
pub(crate) struct TimeStampResp {
    pub(crate) status: PkiStatusInfo,
    #[asn1(optional = "true")]
    pub(crate) time_stamp_token: Option<Any>,
}

/// `Accuracy` (RFC 3161 2.4.2); parsed for structure, not reported.
#[derive(Clone, Debug, der::Sequence)]
pub(crate) struct Accuracy {
    #[asn1(optional = "true")]
    pub(crate) seconds: Option<Int>,
    #[asn1(context_specific = "0", tag_mode = "IMPLICIT", optional = "true")]
    pub(crate) millis: Option<Int>,
    #[asn1(context_specific = "1", tag_mode = "IMPLICIT", optional = "true")]
    pub(crate) micros: Option<Int>,
}

/// `TSTInfo` (RFC 3161 2.4.2). `genTime` is kept raw: DER GeneralizedTime may carry
/// fractional seconds, which the `der` crate's type refuses; [`gen_time`] parses it.
#[derive(Clone, Debug, der::Sequence)]
pub(crate) struct TstInfo {
    pub(crate) version: u8,
    pub(crate) policy: ObjectIdentifier,
    pub(crate) message_imprint: MessageImprint,
    pub(crate) serial_number: Int,
    pub(crate) gen_time: Any,
    #[asn1(optional = "true")]
    pub(crate) accuracy: Option<Accuracy>,
    #[asn1(default = "Default::default")]
    pub(crate) ordering: bool,
    #[asn1(optional = "true")]
    pub(crate) nonce: Option<Int>,
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT", optional = "true")]
    pub(crate) tsa: Option<GeneralName>,
    #[asn1(context_specific = "1", tag_mode = "IMPLICIT", optional = "true")]
    pub(crate) extensions: Option<Extensions>,
}

/// One DER element: its tag, its contents, and its whole encoding as it was sent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tlv<'a> {
    pub(crate) tag: Tag,
    pub(crate) value: &'a [u8],
    pub(crate) raw: &'a [u8],
}

/// Splits `bytes` into consecutive DER elements; every byte must belong to one.
pub(crate) fn tlvs(bytes: &[u8]) -> der::Result<Vec<Tlv<'_>>> {
    let mut reader = SliceReader::new(bytes)?;
    let mut out = Vec::new();
    while !reader.is_finished() {
        let start = usize::try_from(reader.position())?;
        let any: der::asn1::AnyRef<'_> = reader.decode()?;
        let end = usize::try_from(reader.position())?;
        let raw = bytes
            .get(start..end)
            .ok_or_else(|| der::Error::from(der::ErrorKind::Failed))?;
        out.push(Tlv {
            tag: any.tag(),
            value: any.value(),
            raw,
        });
    }
    Ok(out)
}

/// Parses one whole DER element (no trailing bytes).
pub(crate) fn one_tlv(bytes: &[u8]) -> der::Result<Tlv<'_>> {
    let mut all = tlvs(bytes)?;
    match all.len() {
        1 => Ok(all.remove(0)),
        0 => Err(der::ErrorKind::Incomplete {
            expected_len: der::Length::ONE,
            actual_len: der::Length::ZERO,
        }
        .into()),
        _ => Err(der::ErrorKind::TrailingData {
            decoded: der::Length::ZERO,
            remaining: der::Length::ONE,
        }
        .into()),
    }
}

/// The time of a DER GeneralizedTime `YYYYMMDDHHMMSS[.f{1,9}]Z` (X.690 11.7: `Z`, no
/// trailing zero in the fraction); `None` if it is anything else.
pub(crate) fn gen_time(value: &Any) -> Option<SystemTime> {
    if value.tag() != Tag::GeneralizedTime {
        return None;
    }
    let s = value.value();
    let (body, z) = s.split_at_checked(s.len().checked_sub(1)?)?;
    if z != b"Z" || body.len() < 14 {
        return None;
    }
    let (whole, frac) = body.split_at(14);
    if !whole.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> u16 {
        whole[r]
            .iter()
            .fold(0u16, |n, d| n * 10 + u16::from(d - b'0'))
    };
    let nanos = match frac {
        [] => 0,
        [b'.', digits @ ..] => {
            if digits.is_empty() || digits.len() > 9 || digits.last() == Some(&b'0') {
                return None;
            }
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let n = digits
                .iter()
                .fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
            n * 10u32.pow(9 - u32::try_from(digits.len()).ok()?)
        }
        _ => return None,
    };
    let month = u8::try_from(num(4..6)).ok()?;
    let day = u8::try_from(num(6..8)).ok()?;
    let hour = u8::try_from(num(8..10)).ok()?;
    let minute = u8::try_from(num(10..12)).ok()?;
    let second = u8::try_from(num(12..14)).ok()?;
    let dt = der::DateTime::new(num(0..4), month, day, hour, minute, second).ok()?;
    Some(SystemTime::UNIX_EPOCH + dt.unix_duration() + Duration::from_nanos(u64::from(nanos)))
}

/// `time` as RFC 3339 UTC, to the second (`2026-12-02T06:58:35Z`).
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let since = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    match der::DateTime::from_unix_duration(Duration::from_secs(since.as_secs())) {
        Ok(dt) => dt.to_string(),
        Err(_) => format!("{}s after the epoch", since.as_secs()),
    }
}

/// Decodes a `T` that must fill `bytes`, naming `part` in the error.
pub(crate) fn decode<'a, T: Decode<'a>>(
    bytes: &'a [u8],
    part: &'static str,
) -> Result<T, crate::TsaError> {
    T::from_der(bytes).map_err(|e| crate::TsaError::Malformed {
        part,
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use der::Encode;
    use der::asn1::GeneralizedTime;

    fn any(s: &str) -> Any {
        Any::new(Tag::GeneralizedTime, s.as_bytes()).unwrap()
    }

    #[test]
    fn gen_time_forms() {
        let t = gen_time(&any("20261202065835Z")).unwrap();
        assert_eq!(rfc3339(t), "2026-12-02T06:58:35Z");
        let f = gen_time(&any("20261202065835.25Z")).unwrap();
        assert_eq!(f.duration_since(t).unwrap(), Duration::from_millis(250));
        for bad in [
            "20261202065835",
            "20261202065835.Z",
            "20261202065835.250Z",
            "20261202065835,25Z",
            "20261302065835Z",
            "2026120206583Z",
            "20261202065835.1234567891Z",
            "20261202065835+0100",
            "",
            "Z",
        ] {
            assert_eq!(gen_time(&any(bad)), None, "{bad}");
        }
        let utc = Any::new(Tag::UtcTime, b"261202065835Z".as_slice()).unwrap();
        assert_eq!(gen_time(&utc), None);
        // Agrees with der's own GeneralizedTime where that applies.
        let g = GeneralizedTime::from_unix_duration(Duration::from_secs(1_800_000_000)).unwrap();
        let der = g.to_der().unwrap();
        let parsed = gen_time(&Any::from_der(&der).unwrap()).unwrap();
        assert_eq!(
            parsed,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
        );
    }

    #[test]
    fn tlvs_keep_raw_bytes_and_refuse_garbage() {
        let bytes = [0x02, 0x01, 0x05, 0x04, 0x00];
        let all = tlvs(&bytes).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].raw, &bytes[..3]);
        assert_eq!(all[1].value, b"");
        assert!(tlvs(&[0x02, 0x05, 0x01]).is_err());
        assert!(one_tlv(&bytes).is_err());
        assert!(one_tlv(&[]).is_err());
    }
}
