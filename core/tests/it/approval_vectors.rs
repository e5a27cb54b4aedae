//! `docs/spec/approval-vectors.json`, made by tools independent of this crate (Python `cbor2`,
//! `eth-account`, OpenSSH's `ssh-keygen`; `scripts/approval-vectors.py`), checked against
//! [`afr_core::approval`]: the same digests, EIP-712 hashes and SSH messages, and every
//! signature verifies to its signer.

use afr_core::{
    approval::{self, Statement},
    event::{ApprovalSignature, Execution, Intent},
};
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/spec/approval-vectors.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn statement(v: &Value) -> Statement {
    serde_json::from_value(v["statement"].clone()).unwrap()
}

fn signature(v: &Value, scheme: &str) -> ApprovalSignature {
    ApprovalSignature {
        scheme: scheme.into(),
        signer: v["signer"].as_str().unwrap().into(),
        statement: statement(v),
        signature: v["signature"].as_str().unwrap().into(),
    }
}

#[test]
fn action_digests_match_cbor2() {
    let v = vectors();
    let cases = v["actions"].as_array().unwrap();
    assert!(cases.len() >= 6);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let intent: Intent = serde_json::from_value(c["intent"].clone()).unwrap();
        let execution: Option<Execution> = serde_json::from_value(c["execution"].clone()).unwrap();
        let bytes = afr_core::cbor::to_vec(&("afr-action", 1u64, &intent, &execution)).unwrap();
        assert_eq!(
            hex::encode(&bytes),
            c["cbor"].as_str().unwrap(),
            "{name}: CBOR"
        );
        assert_eq!(
            approval::action_digest(&intent, execution.as_ref()).to_hex(),
            c["action"].as_str().unwrap(),
            "{name}: digest"
        );
    }
}

/// Checks every `scheme` case of the vectors (at least three): `check` for what the scheme
/// hashes or signs, then that the signature verifies to its signer and that, over the
/// statement changed by `alter`, it is refused (`approval-signature`).
fn check_signatures(
    scheme: &str,
    alter: fn(&mut Statement),
    check: impl Fn(&str, &Value, &ApprovalSignature),
) {
    let v = vectors();
    let cases = v[scheme].as_array().unwrap();
    assert!(cases.len() >= 3);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let sig = signature(c, scheme);
        check(name, c, &sig);
        assert_eq!(
            approval::verify_signature(&sig).unwrap(),
            c["signer"].as_str().unwrap(),
            "{name}"
        );
        let mut other = sig.clone();
        alter(&mut other.statement);
        let e = approval::verify_signature(&other).unwrap_err();
        assert_eq!(e.check.name(), "approval-signature", "{name}: {}", e.detail);
    }
}

#[test]
fn eip712_hashes_and_signers_match_eth_account() {
    // Any other statement recovers another address, which is not the named signer.
    check_signatures(
        "eip712",
        |st| st.issued_at += 1,
        |name, c, sig| {
            assert_eq!(
                format!(
                    "0x{}",
                    hex::encode(sig.statement.eip712_signing_hash().unwrap())
                ),
                c["signing_hash"].as_str().unwrap(),
                "{name}: signing hash"
            );
        },
    );
}

#[test]
fn ssh_messages_and_signatures_match_ssh_keygen() {
    check_signatures(
        "ssh",
        |st| st.tool.push('x'),
        |name, c, sig| {
            assert_eq!(
                sig.statement.ssh_message(),
                c["message"].as_str().unwrap(),
                "{name}"
            );
            // The right signature under the wrong scheme name is refused too.
            let mut wrong = sig.clone();
            wrong.scheme = "eip712".into();
            assert!(approval::verify_signature(&wrong).is_err(), "{name}");
        },
    );
}
