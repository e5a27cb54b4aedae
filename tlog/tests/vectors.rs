//! The published vectors of docs/spec/roots.md (`docs/spec/roots-vectors.json`): recomputed
//! here and compared byte for byte. `AFR_WRITE_VECTORS=1` rewrites the file.
#![expect(clippy::unwrap_used, reason = "tests: a failed step is a failed test")]

use afr_core::hash::sha256;
use afr_tlog::{
    Checkpoint, Note, NoteSigner,
    note::{TYPE_COSIGNATURE, TYPE_ED25519},
    proof::TlogProof,
    tree,
    witness::AddCheckpoint,
};
use zeroize::Zeroizing;

fn vectors() -> serde_json::Value {
    let origin = afr_tlog::origin("0x00000000000000000000000000000000000000aa");
    let log = NoteSigner::new(&origin, TYPE_ED25519, &Zeroizing::new([1; 32])).unwrap();
    let wit = NoteSigner::new(
        "witness.example/w1",
        TYPE_COSIGNATURE,
        &Zeroizing::new([2; 32]),
    )
    .unwrap();
    let roots: Vec<_> = (0u8..5)
        .map(|i| sha256(&[b"afr/v1/example-epoch-root", &[i]]))
        .collect();
    let leaves = tree::leaves(&roots);
    let mut out = Vec::new();
    for n in [1u64, 3, 5] {
        let cp = Checkpoint {
            origin: origin.clone(),
            size: n,
            root: tree::root(&leaves[..n as usize]),
            extensions: vec![],
        };
        let text = cp.text();
        let mut note = Note {
            signatures: vec![log.sign(&text)],
            text: text.clone(),
        };
        note.signatures.push(wit.cosign(&text, 1_700_000_000));
        out.push(serde_json::json!({
            "size": n,
            "checkpoint_text": text,
            "signed_note": note.to_text(),
            "inclusion_proof_epoch_0": tree::inclusion_proof(&leaves, 0, n).unwrap().iter().map(|h| h.to_hex()).collect::<Vec<_>>(),
            "consistency_proof_from_1": tree::consistency_proof(&leaves, 1, n).unwrap().iter().map(|h| h.to_hex()).collect::<Vec<_>>(),
        }));
    }
    let add = AddCheckpoint {
        old: 3,
        proof: tree::consistency_proof(&leaves, 3, 5).unwrap(),
        checkpoint: out[2]["signed_note"].as_str().unwrap().to_owned(),
    };
    let proof = TlogProof {
        extra: None,
        index: 2,
        path: tree::inclusion_proof(&leaves, 2, 5).unwrap(),
        checkpoint: out[2]["signed_note"].as_str().unwrap().to_owned(),
    };
    serde_json::json!({
        "about": "docs/spec/roots.md: log key = Ed25519 seed 0x01 x 32, witness key = seed 0x02 x 32, cosignature time 1700000000, epoch_root(i) = SHA-256(\"afr/v1/example-epoch-root\" || u8(i))",
        "origin": origin,
        "log_vkey": log.verifier().to_string(),
        "witness_vkey": wit.verifier().to_string(),
        "epoch_roots": roots.iter().map(|h| h.to_hex()).collect::<Vec<_>>(),
        "leaf_hashes": leaves.iter().map(|h| h.to_hex()).collect::<Vec<_>>(),
        "checkpoints": out,
        "add_checkpoint_body_3_to_5": add.body(),
        "tlog_proof_epoch_2_in_5": proof.to_text(),
    })
}

#[test]
fn published_vectors_hold() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/spec/roots-vectors.json");
    let want = serde_json::to_string_pretty(&vectors()).unwrap() + "\n";
    if std::env::var_os("AFR_WRITE_VECTORS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        want,
        "docs/spec/roots-vectors.json is stale"
    );
}
