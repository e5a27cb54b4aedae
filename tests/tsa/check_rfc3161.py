#!/usr/bin/env python3
"""Verifies an RFC 3161 token with the PyPI rfc3161-client package, independently of afr-tsa.

Usage: check_rfc3161.py TOKEN_FILE DIGEST_HEX ROOT_PEM

TOKEN_FILE holds a TimeStampToken (CMS ContentInfo DER, what afr-tsa stores); it is wrapped in a
granted TimeStampResp, the form rfc3161-client reads. Prints one JSON line, {"ok": true,
"gen_time": unix seconds, "serial": hex, "policy": dotted} or {"ok": false, "error": ...}, and
exits 0 or 1.
"""

import json
import sys

import cryptography.x509
from rfc3161_client import VerifierBuilder, decode_timestamp_response


def der_len(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def main():
    token = open(sys.argv[1], "rb").read()
    digest = bytes.fromhex(sys.argv[2])
    root = cryptography.x509.load_pem_x509_certificate(open(sys.argv[3], "rb").read())
    granted = bytes([0x30, 0x03, 0x02, 0x01, 0x00])  # PKIStatusInfo { granted }
    body = granted + token
    try:
        response = decode_timestamp_response(bytes([0x30]) + der_len(len(body)) + body)
        VerifierBuilder().add_root_certificate(root).build().verify(response, digest)
    except Exception as e:  # noqa: BLE001 (any failure is a refusal, reported)
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
        return 1
    info = response.tst_info
    print(json.dumps({
        "ok": True,
        "gen_time": info.gen_time.timestamp(),
        "serial": format(info.serial_number, "x"),
        "policy": info.policy.dotted_string,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
