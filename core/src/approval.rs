//! Signed human approvals: the action digest, the statement an approver signs, and the two
//! signature schemes (EIP-712 typed data, OpenSSH SSHSIG). `docs/spec/approvals.md` is the
//! specification; `docs/spec/approval-vectors.json` holds vectors made by independent tools.
//!
//! Pure functions: [`check`] answers whether one event's approval is bound to that event and
//! validly signed, and by whom. Which signers count (an allowlist) and whether a nonce was seen
//! before are the caller's state: the verifier's trust file, the gateway's policy.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::{
    Hash32, RecorderId, cbor,
    eip712::{self, Field},
    event::{ApprovalSignature, Decision, Execution, Intent, Payload},
    hash::sha256,
    verify::Check,
};

/// The SSHSIG namespace (`ssh-keygen -Y sign -n afr-approval-v1`), also the first line of the
/// signed text.
pub const SSH_NAMESPACE: &str = "afr-approval-v1";
/// The EIP-712 domain's `name`.
pub const EIP712_NAME: &str = "Agent Flight Recorder";
/// The EIP-712 domain's `version`.
pub const EIP712_VERSION: &str = "1";
/// The OpenSSH key types an approval may be signed with (spec §2.2). A policy or trust file
/// pinning another (`ssh-rsa`, say) is refused: no approval by it could verify.
pub const SSH_KEY_TYPES: [&str; 4] = [
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// Allowed clock difference, in seconds, between an approver's machine and the recorder when
/// an event's time is compared with its approval's validity window.
pub const CLOCK_SKEW_S: u64 = 60;

/// The `encodeType` of the EIP-712 struct an approver signs (`docs/spec/approvals.md` §2.1).
pub const EIP712_APPROVAL_TYPE: &str = "AfrApproval(bytes32 action,string tool,string target,\
     string decision,address recorder,uint64 issuedAt,uint64 expiresAt,bytes32 nonce)";

/// The largest `s` a signature may have, `(n - 1) / 2` for secp256k1's group order `n`
/// (EIP-2): of the two signatures `(r, s)` and `(r, n - s)` that verify alike, only the low
/// one is accepted.
const SECP256K1_HALF_ORDER: [u8; 32] = [
    0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x5d, 0x57, 0x6e, 0x73, 0x57, 0xa4, 0x50, 0x1d, 0xdf, 0xe9, 0x2f, 0x46, 0x68, 0x1b, 0x20, 0xa0,
];

/// The separator of the domain AFR signs under (`EIP712_NAME`, `EIP712_VERSION`).
pub fn eip712_domain() -> [u8; 32] {
    eip712::domain_separator(EIP712_NAME, EIP712_VERSION)
}

/// A signature scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// EIP-712 typed data signed by an Ethereum key.
    Eip712,
    /// An OpenSSH signature (`ssh-keygen -Y sign`).
    Ssh,
}

impl Scheme {
    /// Every scheme.
    pub const ALL: [Scheme; 2] = [Scheme::Eip712, Scheme::Ssh];

    /// The name in `human_approval.signature.scheme`.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Eip712 => "eip712",
            Scheme::Ssh => "ssh",
        }
    }

    /// The scheme named `s`.
    pub fn from_name(s: &str) -> Option<Scheme> {
        Scheme::ALL.into_iter().find(|x| x.name() == s)
    }
}

/// What the approver signs: the action digest and readable fields (spec §2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statement {
    /// The action digest, 64 lower-case hex digits.
    pub action: String,
    /// `intent.tool`.
    pub tool: String,
    /// `execution.target`, or empty.
    pub target: String,
    /// The decision signed.
    pub decision: Decision,
    /// The recorder id, `0x` and 40 lower-case hex digits.
    pub recorder: String,
    /// When the approver signed, Unix seconds.
    pub issued_at: u64,
    /// When the approval lapses, Unix seconds.
    pub expires_at: u64,
    /// A fresh random value, 64 lower-case hex digits.
    pub nonce: String,
}

/// Why an approval does not hold, named by the check that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The check.
    pub check: Check,
    /// What differed.
    pub detail: String,
}

fn problem(check: Check, detail: impl Into<String>) -> Problem {
    Problem {
        check,
        detail: detail.into(),
    }
}

/// `SHA-256(CBOR(["afr-action", 1, intent, execution]))`: what an approval is bound to.
pub fn action_digest(intent: &Intent, execution: Option<&Execution>) -> Hash32 {
    // Serialising a parsed intent and execution cannot fail: every JSON value has a CBOR form.
    let bytes = cbor::to_vec(&("afr-action", 1u64, intent, execution)).unwrap_or_default();
    sha256(&[&bytes])
}

fn hex32(s: &str, what: &str) -> Result<[u8; 32], Problem> {
    let mut b = [0u8; 32];
    if s.len() != 64 || s.bytes().any(|c| c.is_ascii_uppercase()) {
        return Err(problem(
            Check::ApprovalStatement,
            format!("statement {what} is not 64 lower-case hex digits"),
        ));
    }
    hex::decode_to_slice(s, &mut b).map_err(|_| {
        problem(
            Check::ApprovalStatement,
            format!("statement {what} is not 64 lower-case hex digits"),
        )
    })?;
    Ok(b)
}

fn recorder_bytes(s: &str) -> Result<[u8; 20], Problem> {
    let mut b = [0u8; 20];
    let bad = || {
        problem(
            Check::ApprovalStatement,
            "statement recorder is not 0x and 40 lower-case hex digits",
        )
    };
    let h = s.strip_prefix("0x").ok_or_else(bad)?;
    if h.bytes().any(|c| c.is_ascii_uppercase()) {
        return Err(bad());
    }
    hex::decode_to_slice(h, &mut b).map_err(|_| bad())?;
    Ok(b)
}

/// A JSON string with only the escapes RFC 8259 requires (spec §2.2).
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Statement {
    /// The statement binding `decision` on the action (`intent`, `execution`) to `recorder`,
    /// valid from `issued_at` to `expires_at` (Unix seconds).
    pub fn new(
        intent: &Intent,
        execution: Option<&Execution>,
        decision: Decision,
        recorder: &RecorderId,
        issued_at: u64,
        expires_at: u64,
        nonce: [u8; 32],
    ) -> Statement {
        Statement {
            action: action_digest(intent, execution).to_hex(),
            tool: intent.tool.clone(),
            target: execution.and_then(|e| e.target.clone()).unwrap_or_default(),
            decision,
            recorder: format!("0x{}", hex::encode(recorder)),
            issued_at,
            expires_at,
            nonce: hex::encode(nonce),
        }
    }

    /// The text an SSH key signs (spec §2.2).
    pub fn ssh_message(&self) -> String {
        format!(
            "{SSH_NAMESPACE}\naction: {}\ntool: {}\ntarget: {}\ndecision: {}\nrecorder: {}\n\
             issued-at: {}\nexpires-at: {}\nnonce: {}\n",
            self.action,
            json_string(&self.tool),
            json_string(&self.target),
            self.decision.name(),
            self.recorder,
            self.issued_at,
            self.expires_at,
            self.nonce
        )
    }

    /// The statement's EIP-712 `hashStruct` ([`EIP712_APPROVAL_TYPE`]).
    pub fn eip712_struct_hash(&self) -> Result<[u8; 32], Problem> {
        let action = hex32(&self.action, "action")?;
        let recorder = recorder_bytes(&self.recorder)?;
        let nonce = hex32(&self.nonce, "nonce")?;
        Ok(eip712::hash_struct(
            EIP712_APPROVAL_TYPE,
            &[
                Field::Bytes32(&action),
                Field::String(&self.tool),
                Field::String(&self.target),
                Field::String(self.decision.name()),
                Field::Address(&recorder),
                Field::Uint(self.issued_at),
                Field::Uint(self.expires_at),
                Field::Bytes32(&nonce),
            ],
        ))
    }

    /// The EIP-712 digest an Ethereum key signs (spec §2.1).
    pub fn eip712_signing_hash(&self) -> Result<[u8; 32], Problem> {
        Ok(eip712::signing_hash(
            &eip712_domain(),
            &self.eip712_struct_hash()?,
        ))
    }

    /// The typed data in the JSON form wallets sign (`eth_signTypedData_v4`); `uint64` values as
    /// decimal strings.
    pub fn eip712_typed_data(&self) -> serde_json::Value {
        let field = |name: &str, ty: &str| serde_json::json!({"name": name, "type": ty});
        serde_json::json!({
            "types": {
                "EIP712Domain": [field("name", "string"), field("version", "string")],
                "AfrApproval": [
                    field("action", "bytes32"),
                    field("tool", "string"),
                    field("target", "string"),
                    field("decision", "string"),
                    field("recorder", "address"),
                    field("issuedAt", "uint64"),
                    field("expiresAt", "uint64"),
                    field("nonce", "bytes32"),
                ],
            },
            "primaryType": "AfrApproval",
            "domain": {"name": EIP712_NAME, "version": EIP712_VERSION},
            "message": {
                "action": format!("0x{}", self.action),
                "tool": self.tool,
                "target": self.target,
                "decision": self.decision.name(),
                "recorder": self.recorder,
                // Decimal strings: a JavaScript wallet would round numbers above 2^53.
                "issuedAt": self.issued_at.to_string(),
                "expiresAt": self.expires_at.to_string(),
                "nonce": format!("0x{}", self.nonce),
            },
        })
    }

    /// The nonce's bytes.
    pub fn nonce_bytes(&self) -> Result<[u8; 32], Problem> {
        hex32(&self.nonce, "nonce")
    }
}

/// The address whose key signed the 32-byte `hash` with `sig`: `0x` (lower-case) and 130 hex
/// digits (either case), the 65 bytes `r ‖ s ‖ v`.
///
/// `v` gives the parity of `y` of the signature's point: 27 or 28 (even, odd), or 0 or 1, as
/// `docs/spec/approvals.md` says; every other value is refused (an EIP-155 `v` belongs to
/// transactions, never to typed-data signatures). A high `s`
/// (above `(n - 1) / 2`) is refused (EIP-2), as are `r` or `s` zero or not below the group order
/// `n` and a signature from which no key recovers. Every malformed input is an `Err`.
pub fn recover(hash: &[u8; 32], sig: &str) -> Result<[u8; 20], String> {
    let mut raw = [0u8; 65];
    sig.strip_prefix("0x")
        .and_then(|h| hex::decode_to_slice(h, &mut raw).ok())
        .ok_or("the EIP-712 signature is not 0x and 130 hex digits")?;
    let (rs, v) = (&raw[..64], raw[64]);
    let y_odd = match v {
        0 | 1 => v == 1,
        27 | 28 => v == 28,
        _ => {
            return Err(format!(
                "the EIP-712 signature is malformed: invalid parity: {v}"
            ));
        }
    };
    // Big-endian, so the byte order is the numeric order.
    if raw[32..64] > SECP256K1_HALF_ORDER[..] {
        return Err("the EIP-712 signature has a high s value (EIP-2); not accepted".into());
    }
    let recovered = k256::ecdsa::Signature::from_slice(rs).and_then(|s| {
        k256::ecdsa::VerifyingKey::recover_from_prehash(
            hash,
            &s,
            k256::ecdsa::RecoveryId::new(y_odd, false),
        )
    });
    let key = recovered.map_err(|e| format!("no signer can be recovered: {e}"))?;
    Ok(eth_address(&key))
}

/// The Ethereum address of `key`: the last 20 bytes of the Keccak-256 of its uncompressed
/// point without the `0x04` tag.
fn eth_address(key: &k256::ecdsa::VerifyingKey) -> [u8; 20] {
    let point = key.to_encoded_point(false);
    let h = eip712::keccak256(point.as_bytes().get(1..).unwrap_or_default());
    let mut a = [0u8; 20];
    a.copy_from_slice(&h[12..]);
    a
}

/// The canonical form of a signer: `0x` + 40 lower-case hex digits for an Ethereum address,
/// `<type> <base64>` (no comment) for an OpenSSH public key; `None` if `s` is neither.
pub fn canonical_signer(s: &str) -> Option<String> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x") {
        let mut b = [0u8; 20];
        return hex::decode_to_slice(h, &mut b)
            .ok()
            .map(|()| format!("0x{}", hex::encode(b)));
    }
    let k = ssh_key::PublicKey::from_openssh(s).ok()?;
    ssh_signer(k.key_data())
}

fn ssh_signer(k: &ssh_key::public::KeyData) -> Option<String> {
    ssh_key::PublicKey::new(k.clone(), "").to_openssh().ok()
}

/// The scheme a canonical signer belongs to.
pub fn signer_scheme(canonical: &str) -> Scheme {
    if canonical.starts_with("0x") {
        Scheme::Eip712
    } else {
        Scheme::Ssh
    }
}

/// The signer proven by `sig` over its statement (canonical form), or why there is none; the
/// signer `sig` names must be this one.
pub fn verify_signature(sig: &ApprovalSignature) -> Result<String, Problem> {
    let claimed = canonical_signer(&sig.signer).ok_or_else(|| {
        problem(
            Check::ApprovalStatement,
            "signer is neither an Ethereum address nor an OpenSSH public key",
        )
    })?;
    let proven = signer_of(sig)?;
    if proven != claimed {
        return Err(problem(
            Check::ApprovalSignature,
            format!("the signature is by {proven}, not by the named signer {claimed}"),
        ));
    }
    Ok(proven)
}

/// Who signed `sig.statement` with `sig.signature` under `sig.scheme` (canonical form),
/// whoever `sig.signer` names: the address recovered (EIP-712), or the key in the signature
/// once it verifies (SSH).
pub fn signer_of(sig: &ApprovalSignature) -> Result<String, Problem> {
    let bad = |d: String| problem(Check::ApprovalSignature, d);
    match Scheme::from_name(&sig.scheme) {
        Some(Scheme::Eip712) => {
            let hash = sig.statement.eip712_signing_hash()?;
            let a = recover(&hash, &sig.signature).map_err(bad)?;
            Ok(format!("0x{}", hex::encode(a)))
        }
        Some(Scheme::Ssh) => {
            let s = ssh_key::SshSig::from_pem(sig.signature.as_bytes())
                .map_err(|e| bad(format!("the SSH signature is not an armored SSHSIG: {e}")))?;
            if s.namespace() != SSH_NAMESPACE {
                return Err(bad(format!(
                    "the SSH signature is for namespace {:?}, not {SSH_NAMESPACE:?}",
                    s.namespace()
                )));
            }
            let key = ssh_key::PublicKey::new(s.public_key().clone(), "");
            key.verify(SSH_NAMESPACE, sig.statement.ssh_message().as_bytes(), &s)
                .map_err(|e| {
                    bad(format!(
                        "the SSH signature does not verify over the statement: {e}"
                    ))
                })?;
            // A FIDO key's signature says whether the user touched it; one made without is
            // not a human's approval.
            if key.key_data().is_sk_ed25519() || key.key_data().is_sk_ecdsa_p256() {
                let data = s.signature().as_bytes();
                let flags = data.len().checked_sub(5).and_then(|i| data.get(i));
                if flags.is_none_or(|f| f & 0x01 == 0) {
                    return Err(bad(
                        "the FIDO key's signature lacks the user-presence flag (no touch)".into(),
                    ));
                }
            }
            ssh_signer(s.public_key())
                .ok_or_else(|| bad("the SSH signature's key cannot be encoded".into()))
        }
        None => Err(bad(format!(
            "unknown signature scheme {:?} (known: eip712, ssh)",
            sig.scheme
        ))),
    }
}

/// A signed approval that holds on its own: bound to its event and validly signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The scheme.
    pub scheme: Scheme,
    /// The signer, canonical.
    pub signer: String,
    /// The statement's nonce.
    pub nonce: String,
    /// The approver the event names.
    pub approver: String,
    /// The decision.
    pub decision: Decision,
    /// When the approver signed (the statement's `issued_at`, Unix seconds).
    pub issued_at: u64,
    /// When the approval lapses (`expires_at`, Unix seconds).
    pub expires_at: u64,
}

/// Checks the approval of one event, made by `recorder` and timestamped `at_us` (the time it
/// executed): `Ok(None)` when it has no signed approval, `Ok(Some)` when the signature is
/// bound to this event's action and valid, else the failed check (spec §4, all but the
/// allowlist and the nonce's uniqueness, which are the caller's).
pub fn check(p: &Payload, recorder: &RecorderId, at_us: u64) -> Result<Option<Signed>, Problem> {
    let Some(h) = &p.human_approval else {
        return Ok(None);
    };
    let Some(sig) = &h.signature else {
        return Ok(None);
    };
    let st = &sig.statement;
    hex32(&st.action, "action")?;
    hex32(&st.nonce, "nonce")?;
    let rec = recorder_bytes(&st.recorder)?;
    let digest = action_digest(&p.intent, p.execution.as_ref()).to_hex();
    if digest != st.action {
        return Err(problem(
            Check::ApprovalDigest,
            format!(
                "the approval signs action {}, but this event's intent and execution digest to {digest}",
                st.action
            ),
        ));
    }
    let target = p
        .execution
        .as_ref()
        .and_then(|e| e.target.as_deref())
        .unwrap_or("");
    let field = if st.tool != p.intent.tool {
        Some("tool")
    } else if st.target != target {
        Some("target")
    } else if st.decision != h.decision {
        Some("decision")
    } else if &rec != recorder {
        Some("recorder")
    } else {
        None
    };
    if let Some(f) = field {
        return Err(problem(
            Check::ApprovalStatement,
            format!("the signed statement's {f} is not this event's"),
        ));
    }
    let signer = verify_signature(sig)?;
    let at_s = at_us / 1_000_000;
    if at_s.saturating_add(CLOCK_SKEW_S) < st.issued_at {
        return Err(problem(
            Check::ApprovalWindow,
            format!(
                "the event ran at {at_s}, before the approval was issued ({})",
                st.issued_at
            ),
        ));
    }
    if at_s > st.expires_at.saturating_add(CLOCK_SKEW_S) {
        return Err(problem(
            Check::ApprovalWindow,
            format!(
                "the event ran at {at_s}, after the approval expired ({})",
                st.expires_at
            ),
        ));
    }
    Ok(Some(Signed {
        scheme: signer_scheme(&signer),
        signer,
        nonce: st.nonce.clone(),
        approver: h.approver.clone(),
        decision: h.decision,
        issued_at: st.issued_at,
        expires_at: st.expires_at,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_only_what_rfc_8259_requires() {
        assert_eq!(json_string("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(
            json_string("x\ny\u{1}\u{7f}\u{2028}é"),
            "\"x\\ny\\u0001\u{7f}\u{2028}é\""
        );
    }

    /// The `approved` EIP-712 case of `docs/spec/approval-vectors.json` (`eth-account`).
    const HASH: &str = "e64efb94fdd44bdd898ab688af8de9aa12f6a252924903d13fe68166634e17d5";
    const R_S: &str = "257bd17ec9a952435c6335aa1901df1bdb1fb6cdd4b9558ba7db27073387d2ca\
                       0ad53d4c032d04444d198abaa7672f1c5b1a17ee6da3777a8309c65229de2ba8";
    const SIGNER: &str = "70997970c51812dc3a010c7d01b50e0d17dc79c8";
    /// Its `(r, n - s)` twin, with the other parity: the same signer, but a high `s`.
    const R_HIGH_S: &str = "257bd17ec9a952435c6335aa1901df1bdb1fb6cdd4b9558ba7db27073387d2ca\
                            f52ac2b3fcd2fbbbb2e675455898d0e25f94c4f841a528c13cc8983aa6581599";
    /// secp256k1's group order `n`.
    const ORDER: &str = "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141";

    fn recover_hex(rs: &str, v: u8) -> Result<String, String> {
        let hash = hex32(HASH, "hash").unwrap();
        recover(&hash, &format!("0x{rs}{v:02x}")).map(hex::encode)
    }

    #[test]
    fn the_vector_recovers_under_every_spelling_of_its_v() {
        // v = 28 as signed; 1 is the same parity.
        for v in [28, 1] {
            assert_eq!(recover_hex(R_S, v).as_deref(), Ok(SIGNER), "v = {v}");
        }
        // The other parity recovers another key (or none), never the signer.
        for v in [27, 0] {
            assert_ne!(recover_hex(R_S, v).as_deref(), Ok(SIGNER), "v = {v}");
        }
        // Upper-case hex digits are the same bytes.
        let hash = hex32(HASH, "hash").unwrap();
        let upper = format!("0x{}1C", R_S.to_uppercase());
        assert_eq!(
            recover(&hash, &upper).map(hex::encode).as_deref(),
            Ok(SIGNER)
        );
        // Tamper: another digest recovers another address.
        let mut other = hash;
        other[0] ^= 1;
        let sig = format!("0x{R_S}1c");
        assert_ne!(
            recover(&other, &sig).map(hex::encode).as_deref(),
            Ok(SIGNER)
        );
    }

    #[test]
    fn invalid_v_values_are_refused() {
        for v in (2..27).chain(29..=255) {
            let e = recover_hex(R_S, v).unwrap_err();
            assert!(e.contains("invalid parity"), "v = {v}: {e}");
        }
    }

    #[test]
    fn a_high_s_is_refused_even_though_it_verifies() {
        for v in [27, 28] {
            let e = recover_hex(R_HIGH_S, v).unwrap_err();
            assert!(e.contains("high s"), "{e}");
        }
        // The largest low s, (n - 1) / 2, passes the check (and then recovers some key or
        // none); one above it does not.
        let r = &R_S[..64];
        let half = hex::encode(SECP256K1_HALF_ORDER);
        assert!(
            !recover_hex(&format!("{r}{half}"), 27)
                .unwrap_or_default()
                .contains("high s")
        );
        let above = "7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a1";
        assert!(
            recover_hex(&format!("{r}{above}"), 27)
                .unwrap_err()
                .contains("high s")
        );
    }

    #[test]
    fn out_of_range_scalars_and_bad_text_are_errors() {
        let (r, s) = R_S.split_at(64);
        let zero = "00".repeat(32);
        for rs in [
            format!("{zero}{s}"),
            format!("{r}{zero}"),
            format!("{ORDER}{s}"),
            format!("{}{s}", "ff".repeat(32)),
            format!("{zero}{zero}"),
        ] {
            let e = recover_hex(&rs, 27).unwrap_err();
            assert!(e.starts_with("no signer can be recovered"), "{rs}: {e}");
        }
        let hash = [0u8; 32];
        let good = format!("0x{R_S}1c");
        for bad in [
            String::new(),
            "0x".into(),
            good[2..].to_owned(),
            format!("0X{}", &good[2..]),
            format!(" {good}"),
            good[..good.len() - 1].to_owned(),
            format!("{good}00"),
            format!("{}g", &good[..good.len() - 1]),
        ] {
            let e = recover(&hash, &bad).unwrap_err();
            assert!(e.contains("not 0x and 130 hex digits"), "{bad:?}: {e}");
        }
    }

    proptest::proptest! {
        /// Any 65 bytes, any text: an answer, never a panic.
        #[test]
        fn recovery_never_panics(raw in proptest::collection::vec(proptest::num::u8::ANY, 65),
                                 hash in proptest::array::uniform32(proptest::num::u8::ANY),
                                 text in "(0x)?[0-9a-fA-F]{0,140}") {
            let _ = recover(&hash, &format!("0x{}", hex::encode(&raw)));
            let _ = recover(&hash, &text);
        }
    }

    #[test]
    fn signers_are_canonicalised() {
        assert_eq!(
            canonical_signer("0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266").as_deref(),
            Some("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266")
        );
        assert_eq!(canonical_signer("0x12"), None);
        assert_eq!(canonical_signer("ssh-ed25519 nonsense"), None);
    }
}
