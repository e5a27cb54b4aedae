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

#[test]
fn eip712_hashes_and_signers_match_eth_account() {
    let v = vectors();
    let cases = v["eip712"].as_array().unwrap();
    assert!(cases.len() >= 3);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let st = statement(c);
        assert_eq!(
            format!("0x{}", hex::encode(st.eip712_signing_hash().unwrap())),
            c["signing_hash"].as_str().unwrap(),
            "{name}: signing hash"
        );
        let sig = signature(c, "eip712");
        assert_eq!(
            approval::verify_signature(&sig).unwrap(),
            c["signer"].as_str().unwrap(),
            "{name}"
        );
        // Any other statement recovers another address, which is not the named signer.
        let mut other = sig.clone();
        other.statement.issued_at += 1;
        let e = approval::verify_signature(&other).unwrap_err();
        assert_eq!(e.check.name(), "approval-signature", "{name}: {}", e.detail);
    }
}

#[test]
fn ssh_messages_and_signatures_match_ssh_keygen() {
    let v = vectors();
    let cases = v["ssh"].as_array().unwrap();
    assert!(cases.len() >= 3);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let st = statement(c);
        assert_eq!(st.ssh_message(), c["message"].as_str().unwrap(), "{name}");
        let sig = signature(c, "ssh");
        assert_eq!(
            approval::verify_signature(&sig).unwrap(),
            c["signer"].as_str().unwrap(),
            "{name}"
        );
        let mut other = sig.clone();
        other.statement.tool.push('x');
        let e = approval::verify_signature(&other).unwrap_err();
        assert_eq!(e.check.name(), "approval-signature", "{name}: {}", e.detail);
        // The right signature under the wrong scheme name is refused too.
        let mut wrong = sig.clone();
        wrong.scheme = "eip712".into();
        assert!(approval::verify_signature(&wrong).is_err(), "{name}");
    }
}
