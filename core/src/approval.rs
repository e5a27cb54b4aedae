//! Signed human approvals: the action digest, the statement an approver signs, and the two
//! signature schemes (EIP-712 typed data, OpenSSH SSHSIG). `docs/spec/approvals.md` is the
//! specification; `docs/spec/approval-vectors.json` holds vectors made by independent tools.
//!
//! Pure functions: [`check`] answers whether one event's approval is bound to that event and
//! validly signed, and by whom. Which signers count (an allowlist) and whether a nonce was seen
//! before are the caller's state: the verifier's trust file, the gateway's policy.

use std::fmt::Write as _;

use alloy_primitives::{Address, B256, Signature};
use alloy_sol_types::{SolStruct, eip712_domain, sol};
use serde::{Deserialize, Serialize};

use crate::{
    Hash32, RecorderId, cbor,
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

sol! {
    /// The EIP-712 struct an approver signs (`docs/spec/approvals.md` §2.1).
    #[derive(Debug)]
    struct AfrApproval {
        bytes32 action;
        string tool;
        string target;
        string decision;
        address recorder;
        uint64 issuedAt;
        uint64 expiresAt;
        bytes32 nonce;
    }
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

    fn eip712_struct(&self) -> Result<AfrApproval, Problem> {
        Ok(AfrApproval {
            action: B256::from(hex32(&self.action, "action")?),
            tool: self.tool.clone(),
            target: self.target.clone(),
            decision: self.decision.name().to_owned(),
            recorder: Address::from(recorder_bytes(&self.recorder)?),
            issuedAt: self.issued_at,
            expiresAt: self.expires_at,
            nonce: B256::from(hex32(&self.nonce, "nonce")?),
        })
    }

    /// The EIP-712 digest an Ethereum key signs (spec §2.1).
    pub fn eip712_signing_hash(&self) -> Result<[u8; 32], Problem> {
        let domain = eip712_domain! { name: EIP712_NAME, version: EIP712_VERSION, };
        Ok(self.eip712_struct()?.eip712_signing_hash(&domain).0)
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

/// The address whose key signed the 32-byte `hash` with `sig` (`0x` + 130 hex digits,
/// `r ‖ s ‖ v`, `v` in 0, 1, 27, 28; a high `s` is refused, EIP-2).
pub fn recover(hash: &[u8; 32], sig: &str) -> Result<[u8; 20], String> {
    let raw = sig
        .strip_prefix("0x")
        .and_then(|h| hex::decode(h).ok())
        .filter(|b| b.len() == 65)
        .ok_or("the EIP-712 signature is not 0x and 130 hex digits")?;
    let s = Signature::from_raw(&raw)
        .map_err(|e| format!("the EIP-712 signature is malformed: {e}"))?;
    if s.normalize_s().is_some() {
        return Err("the EIP-712 signature has a high s value (EIP-2); not accepted".into());
    }
    let a = s
        .recover_address_from_prehash(&B256::from(*hash))
        .map_err(|e| format!("no signer can be recovered: {e}"))?;
    Ok(a.0.0)
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
