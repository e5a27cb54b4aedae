//! Criterion benches of the hot pieces of the record path and the verifier.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "benchmark set-up fails loudly on purpose"
)]
//!
//! `cargo bench -p afr-benches` (add `-- --quick` for a fast pass). Inputs are deterministic:
//! the synthetic workload's first events, fixed keys, leaves `leaf_hash(u64be(i))`.

use afr_core::{
    Record,
    crypto::{MasterKey, Slot, decrypt, encrypt},
    hash::{leaf_hash, node_hash},
    merkle,
};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

fn sample_payload() -> afr_core::Payload {
    let line = br#"{"category":"database","lane":"task-2","concurrent_with":[11],"intent":{"tool":"psql","args":{"input":"UPDATE accounts SET tier = 'gold' WHERE id = 4521","step":12}},"policy_evaluation":[{"guardrail":"database-policy","version":"1.4","verdict":"escalate","reason":"mutating action on shared state"}],"human_approval":{"approver":"oncall@acme-corp.example","prompt":"Allow psql in production?","decision":"approved","decided_at_us":1767225612500000},"execution":{"command":"UPDATE accounts SET tier = 'gold' WHERE id = 4521","target":"production-cluster"},"effects":{"return_value":{"status":0}},"context_provenance":{"environment":"production"},"code_provenance":{"agent":"db-agent","model":"model-2026-10"}}"#;
    afr_core::EventInput::from_json(line, 1 << 20)
        .map(|e| e.into_payload().1)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn sample_record() -> Record {
    Record {
        recorder: [7; 20],
        seq: 12_345,
        epoch: 123,
        timestamp_us: 1_767_225_612_000_000,
        category: afr_core::Category::Database,
        lane: Some("task-2".into()),
        concurrent_with: vec![12_344],
        prev_hash: leaf_hash(b"prev"),
        payload_commitment: leaf_hash(b"payload"),
    }
}

fn cbor(c: &mut Criterion) {
    let mut g = c.benchmark_group("cbor");
    let p = sample_payload();
    let bytes = p.encode().unwrap_or_default();
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("payload_encode", |b| b.iter(|| black_box(&p).encode()));
    g.bench_function("payload_decode", |b| {
        b.iter(|| afr_core::Payload::decode(black_box(&bytes)))
    });
    let r = sample_record();
    let rb = r.encode();
    g.bench_function("record_encode", |b| b.iter(|| black_box(&r).encode()));
    g.bench_function("record_decode", |b| {
        b.iter(|| Record::decode(black_box(&rb)))
    });
    g.finish();
}

fn hashing(c: &mut Criterion) {
    let mut g = c.benchmark_group("hash");
    let rb = sample_record().encode();
    g.bench_function("leaf_record", |b| b.iter(|| leaf_hash(black_box(&rb))));
    let (l, r) = (leaf_hash(b"l"), leaf_hash(b"r"));
    g.bench_function("node", |b| {
        b.iter(|| node_hash(black_box(&l), black_box(&r)))
    });
    g.finish();
}

fn merkle_trees(c: &mut Criterion) {
    let mut g = c.benchmark_group("merkle");
    for n in [100usize, 1000] {
        let leaves: Vec<_> = (0..n as u64).map(|i| leaf_hash(&i.to_be_bytes())).collect();
        g.bench_with_input(BenchmarkId::new("root_rs_merkle", n), &leaves, |b, l| {
            b.iter(|| merkle::root(l))
        });
        g.bench_with_input(BenchmarkId::new("compact_range", n), &leaves, |b, l| {
            b.iter(|| {
                let mut cr = merkle::CompactRange::new();
                for x in l {
                    cr.push(*x);
                }
                cr.root()
            })
        });
        let root = merkle::root(&leaves);
        let proof = merkle::inclusion_proof(&leaves, n / 3).unwrap_or_default();
        g.bench_with_input(BenchmarkId::new("inclusion_proof", n), &leaves, |b, l| {
            b.iter(|| merkle::inclusion_proof(l, n / 3))
        });
        g.bench_with_input(BenchmarkId::new("verify_inclusion", n), &leaves, |b, l| {
            b.iter(|| merkle::verify_inclusion(&l[n / 3], (n / 3) as u64, n as u64, &proof, &root))
        });
    }
    g.finish();
}

fn crypto(c: &mut Criterion) {
    let mut g = c.benchmark_group("crypto");
    let master = MasterKey::from_bytes([5; 32]);
    let ek = master.epoch_key(&[6; 32], &[7; 20], 3);
    g.bench_function("epoch_key", |b| {
        b.iter(|| master.epoch_key(&[6; 32], &[7; 20], black_box(3)))
    });
    g.bench_function("event_key", |b| b.iter(|| ek.event_key(black_box(301))));
    let pt = sample_payload().encode().unwrap_or_default();
    let key = ek.event_key(301);
    let slot = Slot {
        recorder: [7; 20],
        epoch: 3,
        seq: 301,
    };
    g.throughput(Throughput::Bytes(pt.len() as u64));
    g.bench_function("seal", |b| {
        b.iter(|| encrypt(&key, &slot, [1; 12], black_box(&pt)))
    });
    let sealed = encrypt(&key, &slot, [1; 12], &pt);
    g.bench_function("open", |b| {
        b.iter(|| decrypt(&key, &slot, black_box(&sealed)))
    });
    g.bench_function("commitment", |b| b.iter(|| black_box(&sealed).commitment()));
    g.finish();
}

criterion_group!(benches, cbor, hashing, merkle_trees, crypto);

fn aead_only(c: &mut Criterion) {
    use chacha20poly1305::{AeadInOut, ChaCha20Poly1305, KeyInit};
    let mut g = c.benchmark_group("aead");
    let cipher = ChaCha20Poly1305::new_from_slice(&[1u8; 32]).unwrap_or_else(|_| unreachable!());
    for n in [400usize, 4096] {
        let pt = vec![7u8; n];
        g.throughput(Throughput::Bytes(n as u64));
        g.bench_with_input(BenchmarkId::new("chacha20poly1305", n), &pt, |b, pt| {
            b.iter(|| {
                let mut buf = pt.clone();
                let _ = cipher.encrypt_in_place(&[0u8; 12].into(), b"", &mut buf);
                buf
            })
        });
    }
    g.finish();
}
criterion_group!(aead_benches, aead_only);
criterion_main!(benches, aead_benches);
