//! `docs/spec/vectors.json`: test vectors of every format in `docs/spec/format.md`, produced by
//! this crate and re-checked on every run.
//!
//! `AFR_UPDATE_VECTORS=1 cargo test -p afr-core --test it spec_vectors` rewrites the file;
//! without it the test fails when the file is stale. Beside the comparison, the test recomputes
//! the crypto values from the spec's formulas with the primitives directly (HKDF, ChaCha20-
//! Poly1305, SHA-256), not through `afr_core::crypto`, so the formulas in the spec are checked
//! too, not only the code.

use afr_core::{
    EpochHeader, EventInput, Record, cbor,
    crypto::{self, MasterKey, Slot},
    epoch::back_pointer,
    event::DEFAULT_MAX_EVENT_BYTES,
    hash::{Hash32, leaf_hash, sha256},
    merkle,
    record::Category,
};
use chacha20poly1305::{AeadInOut, ChaCha20Poly1305, KeyInit, Nonce};
use ciborium::Value as Cbor;
use hkdf::Hkdf;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::{read, workspace_dir};

const RECORDER: [u8; 20] = [
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a,
    0xf2, 0xaf, 0x00, 0x01,
];
const MASTER: [u8; 32] = [0x4d; 32];
const EPOCH_SALT: [u8; 32] = [0x53; 32];
const NONCE: [u8; 12] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
];
const T0: u64 = 1_767_225_600_000_000;

/// The sample event; its payload is the plaintext of the seal vector.
const EVENT: &str = r#"{"category":"database","timestamp_us":1767225600000000,"lane":"task-3","intent":{"tool":"psql","args":{"db":"prod","sql":"DROP TABLE users"}},"policy_evaluation":[{"guardrail":"no-destructive-sql","version":"2","verdict":"escalate"}],"human_approval":{"approver":"alice@example.com","prompt":"Drop table users?","decision":"approved","decided_at_us":1767225599000000},"execution":{"command":"DROP TABLE users","target":"db.prod.internal"},"effects":{"return_value":{"rows":0},"state_changes":["dropped table users (48,213 rows)"]}}"#;

fn h(b: &[u8]) -> String {
    hex::encode(b)
}

/// CBOR diagnostic notation (RFC 8949 §8) of the value kinds used here.
fn diag(v: &Cbor) -> String {
    match v {
        Cbor::Integer(i) => i128::from(*i).to_string(),
        Cbor::Bytes(b) => format!("h'{}'", h(b)),
        Cbor::Text(s) => format!("{s:?}"),
        Cbor::Float(f) => format!("{f:?}"),
        Cbor::Bool(b) => b.to_string(),
        Cbor::Null => "null".into(),
        Cbor::Array(a) => format!("[{}]", a.iter().map(diag).collect::<Vec<_>>().join(", ")),
        Cbor::Map(m) => {
            let items: Vec<_> = m
                .iter()
                .map(|(k, v)| format!("{}: {}", diag(k), diag(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        Cbor::Tag(t, inner) => format!("{t}({})", diag(inner)),
        other => panic!("no diagnostic form for {other:?}"),
    }
}

fn canonical_cbor() -> Value {
    let t = |s: &str| Cbor::Text(s.into());
    let accepted = [
        Cbor::Integer(23.into()),
        Cbor::Integer(24.into()),
        Cbor::Integer(500.into()),
        Cbor::Integer((-1).into()),
        Cbor::Integer(u64::MAX.into()),
        Cbor::Float(1.5),
        Cbor::Float(100_000.0),
        Cbor::Float(1.1),
        Cbor::Bytes(vec![0xaf; 3]),
        // Keys sort by their encoded bytes: shorter text first, then bytewise.
        Cbor::Map(vec![
            (t("bb"), Cbor::Integer(1.into())),
            (t("a"), Cbor::Null),
            (t("c"), Cbor::Array(vec![Cbor::Bool(true)])),
        ]),
    ];
    let accepted: Vec<Value> = accepted
        .iter()
        .map(|v| {
            let b = cbor::to_vec(v).unwrap();
            assert_eq!(
                cbor::to_vec(&cbor::from_slice::<Cbor>(&b).unwrap()).unwrap(),
                b
            );
            json!({ "diagnostic": diag(v), "cbor": h(&b) })
        })
        .collect();
    let rejected = [
        ("1805", "5 in two bytes: integers take their shortest head"),
        ("9f01ff", "indefinite-length array"),
        ("5f4100ff", "indefinite-length byte string"),
        ("a2616201616102", "map keys not sorted: \"b\" before \"a\""),
        ("a2616101616102", "duplicate map key"),
        (
            "fa3fc00000",
            "1.5 as a single-precision float: it fits in a half",
        ),
        ("0100", "trailing byte after the item"),
    ];
    let rejected: Vec<Value> = rejected
        .iter()
        .map(|(x, why)| {
            assert!(
                cbor::from_slice::<Cbor>(&hex::decode(x).unwrap()).is_err(),
                "{x} accepted"
            );
            json!({ "cbor": x, "why": why })
        })
        .collect();
    json!({ "accepted": accepted, "rejected": rejected })
}

fn record_json(r: &Record) -> Value {
    let b = r.encode();
    assert_eq!(Record::decode(&b).unwrap(), *r);
    json!({
        "recorder": h(&r.recorder),
        "seq": r.seq,
        "epoch": r.epoch,
        "timestamp_us": r.timestamp_us,
        "category": r.category.name(),
        "category_wire": r.category as u64,
        "lane": r.lane,
        "concurrent_with": r.concurrent_with,
        "prev_hash": r.prev_hash.to_hex(),
        "payload_commitment": r.payload_commitment.to_hex(),
        "cbor": h(&b),
        "leaf_hash": leaf_hash(&b).to_hex(),
    })
}

fn header_json(e: &EpochHeader) -> Value {
    let b = e.encode();
    assert_eq!(EpochHeader::decode(&b).unwrap(), *e);
    // The packed formula, spelled out.
    let packed = [
        b"afr/v1/epoch-root".as_slice(),
        &e.recorder,
        &e.epoch.to_be_bytes(),
        &e.first_seq.to_be_bytes(),
        &e.count.to_be_bytes(),
        &e.merkle_root.0,
        &e.chain_head.0,
        &e.prev_epoch_root.0,
        &e.sealed_at_us.to_be_bytes(),
    ]
    .concat();
    assert_eq!(packed.len(), 165);
    assert_eq!(sha256(&[&packed]), e.root());
    json!({
        "recorder": h(&e.recorder),
        "epoch": e.epoch,
        "first_seq": e.first_seq,
        "count": e.count,
        "merkle_root": e.merkle_root.to_hex(),
        "chain_head": e.chain_head.to_hex(),
        "prev_epoch_root": e.prev_epoch_root.to_hex(),
        "sealed_at_us": e.sealed_at_us,
        "cbor": h(&b),
        "root_preimage": h(&packed),
        "root": e.root().to_hex(),
        "back_pointer": back_pointer(e.epoch, &e.prev_epoch_root).to_hex(),
    })
}

/// Builds the whole vectors document, checking the spec's formulas on the way.
fn vectors() -> Value {
    let ev = EventInput::from_json(EVENT.as_bytes(), DEFAULT_MAX_EVENT_BYTES).unwrap();
    let (_, payload) = ev.into_payload();
    let plaintext = payload.encode().unwrap();

    // Keys: level 1 (epoch key) and level 2 (event key), from the formulas.
    let (epoch, seq) = (0u64, 1u64);
    let epoch_key = MasterKey::from_bytes(MASTER).epoch_key(&EPOCH_SALT, &RECORDER, epoch);
    let event_key = epoch_key.event_key(seq);
    let mut ek = [0u8; 32];
    Hkdf::<Sha256>::new(Some(&EPOCH_SALT), &MASTER)
        .expand(
            &[
                b"afr/v1/epoch-key".as_slice(),
                &RECORDER,
                &epoch.to_be_bytes(),
            ]
            .concat(),
            &mut ek,
        )
        .unwrap();
    assert_eq!(&ek, epoch_key.expose(), "epoch key formula");
    let mut evk = [0u8; 64];
    Hkdf::<Sha256>::from_prk(&ek)
        .unwrap()
        .expand(
            &[b"afr/v1/event-key".as_slice(), &seq.to_be_bytes()].concat(),
            &mut evk,
        )
        .unwrap();
    assert_eq!(&evk, event_key.expose(), "event key formula");
    let (enc_key, commit_key) = evk.split_at(32);

    // Seal, and the AEAD, key commitment and commitment from the formulas.
    let slot = Slot {
        recorder: RECORDER,
        epoch,
        seq,
    };
    let sealed = crypto::encrypt(&event_key, &slot, NONCE, &plaintext);
    let aad = [
        b"afr/v1/payload-aad".as_slice(),
        &RECORDER,
        &epoch.to_be_bytes(),
        &seq.to_be_bytes(),
    ]
    .concat();
    let mut buf = plaintext.clone();
    ChaCha20Poly1305::new_from_slice(enc_key)
        .unwrap()
        .encrypt_in_place(&Nonce::from(NONCE), &aad, &mut buf)
        .unwrap();
    assert_eq!(buf, sealed.ciphertext, "aead formula");
    let key_commit = sha256(&[b"afr/v1/key-commit", commit_key, &plaintext]);
    assert_eq!(key_commit, sealed.key_commit, "key commitment formula");
    let commitment = sha256(&[
        b"afr/v1/payload-commit",
        &key_commit.0,
        &NONCE,
        &sealed.ciphertext,
    ]);
    assert_eq!(
        commitment,
        sealed.commitment(),
        "payload commitment formula"
    );
    assert_eq!(
        crypto::decrypt(&event_key, &slot, &sealed).unwrap(),
        plaintext
    );

    // A chain of two records in epoch 0 (the second holds the sealed payload), then epoch 1.
    let r0 = Record {
        recorder: RECORDER,
        seq: 0,
        epoch: 0,
        timestamp_us: T0 - 1_000_000,
        category: Category::Retrieval,
        lane: None,
        concurrent_with: vec![],
        prev_hash: Hash32::ZERO,
        payload_commitment: Hash32([0x11; 32]),
    };
    let r1 = Record {
        seq: 1,
        timestamp_us: T0,
        category: Category::Database,
        lane: Some("task-3".into()),
        concurrent_with: vec![0],
        prev_hash: r0.leaf_hash(),
        payload_commitment: sealed.commitment(),
        ..r0.clone()
    };
    let r2 = Record {
        seq: 2,
        epoch: 1,
        timestamp_us: T0 + 1,
        category: Category::Other,
        lane: None,
        concurrent_with: vec![],
        prev_hash: r1.leaf_hash(),
        payload_commitment: Hash32([0x22; 32]),
        ..r0.clone()
    };
    let leaves0 = [r0.leaf_hash(), r1.leaf_hash()];
    let e0 = EpochHeader {
        recorder: RECORDER,
        epoch: 0,
        first_seq: 0,
        count: 2,
        merkle_root: merkle::root(&leaves0),
        chain_head: r1.leaf_hash(),
        prev_epoch_root: Hash32::ZERO,
        sealed_at_us: T0 + 500_000,
    };
    assert_eq!(
        e0.merkle_root,
        afr_core::hash::node_hash(&leaves0[0], &leaves0[1])
    );
    let e1 = EpochHeader {
        epoch: 1,
        first_seq: 2,
        count: 1,
        merkle_root: merkle::root(&[r2.leaf_hash()]),
        chain_head: r2.leaf_hash(),
        prev_epoch_root: e0.root(),
        sealed_at_us: T0 + 60_000_000,
        ..e0.clone()
    };
    let proof = merkle::inclusion_proof(&leaves0, 1).unwrap();
    merkle::verify_inclusion(&leaves0[1], 1, 2, &proof, &e0.merkle_root).unwrap();

    json!({
        "comment": "AFR format test vectors (docs/spec/format.md). Generated by core/tests/it/spec_vectors.rs; \
                    regenerate with AFR_UPDATE_VECTORS=1 cargo test -p afr-core --test it spec_vectors. \
                    Byte strings are lower-case hex without 0x.",
        "canonical_cbor": canonical_cbor(),
        "payload": { "event_json": EVENT, "payload_cbor": h(&plaintext) },
        "keys": {
            "master": h(&MASTER),
            "epoch_salt": h(&EPOCH_SALT),
            "recorder": h(&RECORDER),
            "epoch": epoch,
            "seq": seq,
            "epoch_key": h(&ek),
            "event_key": h(&evk),
            "enc_key": h(enc_key),
            "commit_key": h(commit_key),
        },
        "seal": {
            "recorder": h(&RECORDER),
            "epoch": epoch,
            "seq": seq,
            "plaintext": h(&plaintext),
            "nonce": h(&NONCE),
            "aad": h(&aad),
            "ciphertext": h(&sealed.ciphertext),
            "key_commit": key_commit.to_hex(),
            "commitment": commitment.to_hex(),
            "sealed_payload_cbor": h(&sealed.encode()),
        },
        "records": [record_json(&r0), record_json(&r1), record_json(&r2)],
        "epochs": [header_json(&e0), header_json(&e1)],
        "inclusion": {
            "epoch": 0,
            "seq": 1,
            "leaf_index": 1,
            "tree_size": 2,
            "leaf_hash": leaves0[1].to_hex(),
            "proof": proof.iter().map(Hash32::to_hex).collect::<Vec<_>>(),
            "merkle_root": e0.merkle_root.to_hex(),
        },
    })
}

#[test]
fn spec_vectors_are_current() {
    let path = workspace_dir().join("docs/spec/vectors.json");
    let now = vectors();
    if std::env::var_os("AFR_UPDATE_VECTORS").is_some_and(|v| v == "1") {
        std::fs::write(&path, serde_json::to_string_pretty(&now).unwrap() + "\n").unwrap();
        eprintln!("wrote {}", path.display());
        return;
    }
    let file: Value = serde_json::from_slice(&read(&path)).unwrap();
    for (key, want) in now.as_object().unwrap() {
        assert_eq!(
            file.get(key),
            Some(want),
            "{}: `{key}` is stale; run AFR_UPDATE_VECTORS=1 cargo test -p afr-core --test it spec_vectors",
            path.display()
        );
    }
    assert_eq!(file, now, "{} has extra keys", path.display());
}
