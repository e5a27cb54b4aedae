#!/usr/bin/env bash
# Regenerates the RFC 3161 fixtures of afr-tsa's unit tests with Debian's openssl: a CA, TSA
# certificates (RSA, EC P-384, and bad ones), and tokens over one digest. Validity is checked at
# a token's genTime, never at the time the tests run, so the files stay valid. Run from anywhere:
#   tsa/testdata/gen.sh
# Tokens from a certificate openssl ts refuses to sign with (no or non-critical timeStamping EKU,
# an expired certificate) are the TSTInfo of a real token signed again with `openssl cms -sign`.
set -euo pipefail
out="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

# The digest the tokens are over: SHA-256 of a stand-in checkpoint note.
printf 'afr.example/recorder\n7\nq8L6Zf3cJ2w0b9a3Wc5n1hRrYlJmNfP0iW8g2sVtQkA=\n' >note.txt
openssl dgst -sha256 -binary note.txt >"$out/digest.bin"
hex() { od -An -v -tx1 | tr -d ' \n'; }
digest_hex="$(hex <"$out/digest.bin")"

cat >ca.cnf <<'CNF'
[ ca ]
default_ca = mini
[ mini ]
dir = .
database = ./index.txt
new_certs_dir = ./newcerts
serial = ./ca.serial
default_md = sha256
policy = any
unique_subject = no
copy_extensions = none
email_in_dn = no
[ any ]
commonName = supplied
organizationName = optional
[ v3_ca ]
basicConstraints = critical, CA:true
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[ v3_tsa ]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature, nonRepudiation
extendedKeyUsage = critical, timeStamping
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[ v3_tsa_noncritical ]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature
extendedKeyUsage = timeStamping
subjectKeyIdentifier = hash
[ v3_tsa_noeku ]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature
subjectKeyIdentifier = hash
[ v3_tsa_codesign ]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature
extendedKeyUsage = critical, timeStamping, codeSigning
subjectKeyIdentifier = hash
CNF
mkdir newcerts
touch index.txt
echo 1000 >ca.serial

# A self-signed CA: $1 name, $2 key file, $3 common name.
make_ca() {
    openssl req -new -x509 -key "$2" -subj "/O=AFR test/CN=$3" -days 36500 -sha256 \
        -config ca.cnf -extensions v3_ca -out "$1.pem" 2>/dev/null
}
# A certificate issued by CA $2 (key $3): $1 name, $4 key, $5 extensions section, $6 CN,
# optional $7 $8 start and end dates (YYYYMMDDHHMMSSZ).
issue() {
    openssl req -new -key "$4" -subj "/O=AFR test/CN=$6" -out "$1.csr" 2>/dev/null
    local dates=(-days 36500)
    [[ $# -ge 8 ]] && dates=(-startdate "$7" -enddate "$8")
    openssl ca -batch -config ca.cnf -cert "$2.pem" -keyfile "$3" -in "$1.csr" -out "$1.pem" \
        -extensions "$5" -notext "${dates[@]}" 2>/dev/null
}

openssl ecparam -name prime256v1 -genkey -noout -out ca.key
openssl ecparam -name prime256v1 -genkey -noout -out other-ca.key
openssl ecparam -name prime256v1 -genkey -noout -out fake-ca.key
openssl genrsa -out tsa-rsa.key 2048 2>/dev/null
openssl ecparam -name secp384r1 -genkey -noout -out tsa-ec.key
openssl ecparam -name prime256v1 -genkey -noout -out tsa-bad.key
make_ca ca ca.key "AFR test CA"
make_ca other-ca other-ca.key "Another CA"
# Same name as the trusted CA, another key: certificates it issues name the trusted CA.
make_ca fake-ca fake-ca.key "AFR test CA"
issue tsa-rsa ca ca.key tsa-rsa.key v3_tsa "AFR test TSA (RSA)"
issue tsa-ec ca ca.key tsa-ec.key v3_tsa "AFR test TSA (EC)"
issue tsa-other other-ca other-ca.key tsa-bad.key v3_tsa "Untrusted TSA"
issue tsa-fake fake-ca fake-ca.key tsa-bad.key v3_tsa "Forged TSA"
issue tsa-noncritical ca ca.key tsa-bad.key v3_tsa_noncritical "TSA, EKU not critical"
issue tsa-noeku ca ca.key tsa-bad.key v3_tsa_noeku "TSA without EKU"
issue tsa-codesign ca ca.key tsa-bad.key v3_tsa_codesign "TSA, EKU also code signing"
issue tsa-expired ca ca.key tsa-bad.key v3_tsa "Expired TSA" 20200101000000Z 20210101000000Z

cat >ts.cnf <<'CNF'
[ tsa ]
default_tsa = rsa
[ rsa ]
serial = ./ts.serial
signer_digest = sha256
clock_precision_digits = 0
crypto_device = builtin
default_policy = 1.3.6.1.4.1.99999.1.1
digests = sha1, sha256, sha384, sha512
accuracy = secs:1, millisecs:500
tsa_name = yes
ess_cert_id_alg = sha256
[ ec ]
serial = ./ts.serial
signer_digest = sha384
clock_precision_digits = 3
crypto_device = builtin
default_policy = 1.3.6.1.4.1.99999.1.1
digests = sha1, sha256, sha384, sha512
accuracy = secs:1, millisecs:500
tsa_name = yes
ess_cert_id_alg = sha256
CNF
echo 01 >ts.serial

openssl ts -query -digest "$digest_hex" -sha256 -cert -out q.tsq
# A token: $1 file, $2 section, $3 signer, $4 key, optional $5 query.
token() {
    openssl ts -reply -config ts.cnf -section "$2" -queryfile "${5:-q.tsq}" -signer "$3.pem" \
        -inkey "$4" -token_out -out "$out/$1" 2>/dev/null
}
token rsa.tst rsa tsa-rsa tsa-rsa.key
token ec.tst ec tsa-ec tsa-ec.key
token untrusted.tst rsa tsa-other tsa-bad.key
token forged-ca.tst rsa tsa-fake tsa-bad.key
openssl ts -query -digest "$(openssl dgst -sha1 -binary note.txt | hex)" -sha1 -cert -out q1.tsq
token sha1-imprint.tst rsa tsa-rsa tsa-rsa.key q1.tsq

# The TSTInfo of rsa.tst, signed again by certificate $2 (key $3) into $1 with openssl cms.
resign() {
    openssl cms -sign -binary -nodetach -outform DER -in tstinfo.der -econtent_type id-smime-ct-TSTInfo \
        -signer "$2.pem" -inkey "$3" -md sha256 -nosmimecap -out "$out/$1" 2>/dev/null
}
# eContent: the OCTET STRING inside encapContentInfo; its offset from asn1parse.
off="$(openssl asn1parse -inform DER -in "$out/rsa.tst" | awk -F: '/OCTET STRING/ {print $1 + 0; exit}')"
openssl asn1parse -inform DER -in "$out/rsa.tst" -strparse "$off" -noout -out tstinfo.der
resign noncritical-eku.tst tsa-noncritical tsa-bad.key
resign no-eku.tst tsa-noeku tsa-bad.key
resign codesign-eku.tst tsa-codesign tsa-bad.key
resign expired.tst tsa-expired tsa-bad.key
resign cms-resigned.tst tsa-rsa tsa-rsa.key

cp ca.pem other-ca.pem tsa-rsa.pem tsa-ec.pem "$out/"
openssl x509 -in ca.pem -outform DER -out "$out/ca.der"
echo "wrote $(ls "$out" | wc -l) files to $out" >&2
