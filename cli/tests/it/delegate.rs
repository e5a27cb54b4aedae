//! The delegation handshake between two recorders (`docs/spec/delegation.md`): `afr delegate
//! offer|accept|receipt` on the stores directly and through a running `afr serve`; each side
//! ends up holding the other's signed receipt, and forged or foreign receipts are refused
//! before anything is recorded.

use std::path::Path;

use afr_core::delegation::Receipt;
use serde_json::{Value, json};

use super::{
    afr, initialised,
    mcp::query_lines,
    ok,
    serve::{serve, terminate},
};

/// Writes `v` to `dir/name`; the file's path.
pub(super) fn write(dir: &Path, name: &str, v: &Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, v.to_string()).unwrap();
    p.to_str().unwrap().to_owned()
}

/// `delegate receipt --offer OFFER --receipt RECEIPT`: the delegating side records the
/// receiving side's receipt.
pub(super) fn receipt_args<'a>(offer: &'a str, receipt: &'a str) -> [&'a str; 6] {
    [
        "delegate",
        "receipt",
        "--offer",
        offer,
        "--receipt",
        receipt,
    ]
}

/// The recorder id of the store in `dir`: its anchoring key's address, `0x` + 40 hex.
pub(super) fn recorder_id(dir: &Path) -> String {
    let key: [u8; 32] = std::fs::read(dir.join("anchor.key"))
        .unwrap()
        .try_into()
        .unwrap();
    let signer = afr_anchorer::signer_from_bytes(&key).unwrap();
    format!("{:#x}", signer.address())
}

fn receipt(out: &std::process::Output) -> Receipt {
    serde_json::from_slice(&out.stdout).unwrap()
}

fn failure(dir: &Path, args: &[&str]) -> String {
    let out = afr(dir).args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn each_side_records_the_others_signed_receipt() {
    let (tmp, a) = initialised();
    let b = tmp.path().join("b");
    ok(afr(&b).arg("init"));
    let t = tmp.path();
    let ea = write(
        t,
        "ea.json",
        &json!({"category": "delegation", "intent": {"tool": "delegate", "args": {"task": "rotate keys", "to": "globex"}}}),
    );
    let eb = write(
        t,
        "eb.json",
        &json!({"category": "delegation", "intent": {"tool": "accept_task", "args": {"task": "rotate keys"}}}),
    );

    // A offers to B (directly on its store); B accepts through its running afr serve.
    let b_id = recorder_id(&b);
    let offer = receipt(&ok(afr(&a).args(["delegate", "offer", &ea, "--to", &b_id])));
    offer.verify().unwrap();
    assert_eq!(offer.seq, 0);
    assert_eq!(offer.to.as_deref(), Some(b_id.as_str()));
    // The receipt binds the recorder it is offered to: another `to` no longer verifies.
    let mut readdressed = offer.clone();
    readdressed.to = Some(recorder_id(&a));
    assert!(readdressed.verify().is_err());
    let offer_file = write(t, "offer.json", &serde_json::to_value(&offer).unwrap());
    let server = serve(&b, &[]);
    let accepted = receipt(&ok(afr(&b).args([
        "delegate",
        "accept",
        &eb,
        "--parent",
        &offer_file,
    ])));
    accepted.verify().unwrap();
    assert_ne!(accepted.recorder, offer.recorder);
    // B's receipt names the offer it accepts.
    let answers = accepted.answers.clone().unwrap();
    assert_eq!(
        (
            answers.recorder.as_str(),
            answers.seq,
            answers.leaf_hash.as_str()
        ),
        (offer.recorder.as_str(), offer.seq, offer.leaf_hash.as_str())
    );

    // B refuses a forged offer (one hex digit of the leaf changed) and its own receipt.
    let mut forged = offer.clone();
    forged.leaf_hash.replace_range(
        0..1,
        if forged.leaf_hash.starts_with('0') {
            "1"
        } else {
            "0"
        },
    );
    let forged_file = write(t, "forged.json", &serde_json::to_value(&forged).unwrap());
    let err = failure(&b, &["delegate", "accept", &eb, "--parent", &forged_file]);
    assert!(err.contains("does not hold"), "{err}");
    let own_file = write(t, "own.json", &serde_json::to_value(&accepted).unwrap());
    let err = failure(&b, &["delegate", "accept", &eb, "--parent", &own_file]);
    assert!(err.contains("this recorder's own"), "{err}");
    let (code, _) = terminate(server);
    assert_eq!(code, Some(0));
    let b_events = query_lines(&b);
    assert_eq!(b_events.len(), 1, "only the accepted event: {b_events:#?}");
    let parent = &b_events[0]["event"]["delegation_provenance"]["parent_event"];
    assert_eq!(parent["recorder"], offer.recorder.as_str());
    assert_eq!(parent["seq"], 0);
    assert_eq!(parent["leaf_hash"], offer.leaf_hash.as_str());
    assert_eq!(parent["signature"], offer.signature.as_str());

    // A records B's receipt; a retry records nothing new; a forged receipt is refused.
    let accepted_file = write(
        t,
        "accepted.json",
        &serde_json::to_value(&accepted).unwrap(),
    );
    let args = receipt_args(&offer_file, &accepted_file);
    let first = receipt(&ok(afr(&a).args(args)));
    let again = receipt(&ok(afr(&a).args(args)));
    assert_eq!(first, again);
    let mut bad = accepted.clone();
    bad.seq += 1;
    let bad_file = write(t, "bad.json", &serde_json::to_value(&bad).unwrap());
    let err = failure(&a, &receipt_args(&offer_file, &bad_file));
    assert!(err.contains("does not hold"), "{err}");
    // An offer that is not this log's event at that position.
    let err = failure(&a, &receipt_args(&forged_file, &accepted_file));
    assert!(err.contains("another leaf hash"), "{err}");
    let a_events = query_lines(&a);
    assert_eq!(a_events.len(), 2, "{a_events:#?}");
    let held = &a_events[1]["event"];
    assert_eq!(held["intent"]["tool"], "afr.delegated");
    assert_eq!(held["intent"]["args"]["offer"]["seq"], 0);
    let to = &held["delegation_provenance"]["delegated_to"][0];
    assert_eq!(to["recorder"], accepted.recorder.as_str());
    assert_eq!(to["leaf_hash"], accepted.leaf_hash.as_str());

    // Clients cannot write the recorder's own afr.delegated events.
    let fake = write(
        t,
        "fake.json",
        &json!({"category": "delegation", "intent": {"tool": "afr.delegated"}}),
    );
    let err = failure(&a, &["delegate", "offer", &fake, "--to", &b_id]);
    assert!(err.contains("reserved"), "{err}");
    // An offer names a recorder: a malformed one, or this recorder itself, is refused.
    let err = failure(&a, &["delegate", "offer", &ea, "--to", "0x12"]);
    assert!(err.contains("is not a recorder id"), "{err}");
    let err = failure(&a, &["delegate", "offer", &ea, "--to", &recorder_id(&a)]);
    assert!(err.contains("this recorder itself"), "{err}");

    // A's half of the case: the delegating event and the receipt it holds.
    ok(afr(&a).arg("seal"));
    let bundle = t.join("a.bundle");
    ok(afr(&a)
        .args(["disclose", "--chain", "0", "--with-keys", "--out"])
        .arg(&bundle));
    let rep = afr_core::bundle::verify_bundle(&std::fs::read(&bundle).unwrap());
    assert_eq!(rep.events, vec![0, 1]);
    // The same half, asked from the afr.delegated event: it belongs to its offer's chain.
    ok(afr(&a)
        .args(["disclose", "--chain", "1", "--with-keys", "--out"])
        .arg(&bundle));
    let rep = afr_core::bundle::verify_bundle(&std::fs::read(&bundle).unwrap());
    assert_eq!(rep.events, vec![0, 1]);

    // B's agent goes on under the accepted task; B discloses its chain. A's query follows the
    // delegation into it, and B's follows it back into A's bundle.
    let child = write(
        t,
        "child.json",
        &json!({"category": "database", "intent": {"tool": "psql", "args": {"sql": "DELETE FROM sessions"}},
            "delegation_provenance": {"parent_event": {"seq": accepted.seq}}}),
    );
    ok(afr(&b).args(["record", &child]));
    ok(afr(&b).arg("seal"));
    let b_bundle = t.join("b.bundle");
    ok(afr(&b)
        .args(["disclose", "--chain", "1", "--with-keys", "--out"])
        .arg(&b_bundle));
    let lines = |out: std::process::Output| -> Vec<Value> {
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let down = lines(ok(afr(&a)
        .args(["query", "descendants(0)", "--json", "--bundle"])
        .arg(&b_bundle)));
    let across: Vec<&Value> = down
        .iter()
        .filter(|v| v.get("recorder").is_some())
        .collect();
    assert_eq!(across.len(), 2, "{down:#?}");
    assert_eq!(across[0]["recorder"], accepted.recorder.as_str());
    assert_eq!(across[0]["seq"], accepted.seq);
    assert_eq!(across[0]["link"], "leaf hash matches");
    assert_eq!(across[1]["event"]["intent"]["tool"], "psql");
    let up = lines(ok(afr(&b)
        .args(["query", "ancestors(1)", "--json", "--bundle"])
        .arg(&bundle)));
    let top = up.iter().find(|v| v.get("recorder").is_some()).unwrap();
    assert_eq!(top["recorder"], offer.recorder.as_str());
    assert_eq!(top["event"]["intent"]["tool"], "delegate");
    assert_eq!(top["link"], "leaf hash matches");

    // B signs a second receipt for the same event with another leaf (it equivocates): A
    // records it too, as evidence, instead of taking it for a retry of the first.
    let key: [u8; 32] = std::fs::read(b.join("anchor.key"))
        .unwrap()
        .try_into()
        .unwrap();
    let signer = afr_anchorer::signer_from_bytes(&key).unwrap();
    let (rec, _) = accepted.parts().unwrap();
    let other = afr_core::Hash32([0xcd; 32]);
    let role = accepted.role().unwrap();
    let digest = afr_core::delegation::signing_hash(&rec, accepted.seq, &other, &role);
    let sig = afr_anchorer::sign_digest(&signer, digest).unwrap();
    let twin = Receipt::new(&rec, accepted.seq, &other, &role, &sig);
    twin.verify().unwrap();
    let twin_file = write(t, "twin.json", &serde_json::to_value(&twin).unwrap());
    let second = receipt(&ok(afr(&a).args(receipt_args(&offer_file, &twin_file))));
    assert_ne!(
        second.seq, first.seq,
        "the conflicting receipt was taken for a retry"
    );
}
