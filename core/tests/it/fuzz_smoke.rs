//! A short, deterministic, stable-Rust fuzz run of every decoder, with the same oracles as the
//! libFuzzer targets in `fuzz/` (see `fuzz/README.md` for the real, coverage-guided run).
//!
//! Each target starts from valid encodings made by our own encoders (every seed must be
//! accepted), then feeds mutated seeds, splices and random bytes for a time budget:
//! `AFR_FUZZ_SMOKE_MS` per target (default 1000), seeded by `AFR_FUZZ_SEED` (default fixed).
//! A failing input is printed as hex. `AFR_FUZZ_SEED_DIR=dir` also writes the seeds to
//! `dir/<target>/`, as a starting corpus for `cargo fuzz run <target> dir/<target>`.

use std::time::{Duration, Instant};

use afr_core::{
    EpochHeader, Payload, Record, cbor,
    crypto::{MasterKey, Slot, encrypt},
    event::DEFAULT_MAX_EVENT_BYTES,
    hash::Hash32,
    record::Category,
};

use crate::oracles;

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Bytes that sit on CBOR head boundaries, plus JSON punctuation.
const INTERESTING: &[u8] = &[
    0x00, 0x01, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1f, 0x20, 0x40, 0x58, 0x5f, 0x60, 0x78, 0x7f,
    0x80, 0x89, 0x8a, 0x9f, 0xa0, 0xbf, 0xc0, 0xf4, 0xf5, 0xf6, 0xf7, 0xf9, 0xfa, 0xfb, 0xff, b'"',
    b'{', b'}', b'[', b']', b',', b':', b'\\', b'-', b'0', b'9', b'e', b'.',
];

/// JSON fragments for the event target.
const TOKENS: &[&str] = &[
    "null",
    "{}",
    "[]",
    "\"\"",
    "0",
    "-1",
    "1.5",
    "1e400",
    "18446744073709551616",
    "true",
    "\"category\"",
    "\"intent\"",
    "\"tool\"",
    "\"args\"",
    "\"lane\"",
    "\"concurrent_with\"",
    "\"decision\"",
    "\"approved\"",
    "\"verdict\"",
    "\"deny\"",
    "\"parent_event\"",
    "\"seq\"",
    "\"recorder\"",
    "\"0x00000000000000000000000000000000000aF2Af\"",
    ",",
    ":",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\u{e9}",
    "{\"a\":1,\"a\":2}",
];

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], json: bool) -> Vec<u8> {
    if rng.below(16) == 0 {
        let n = rng.below(64);
        return (0..n).map(|_| rng.next() as u8).collect();
    }
    let mut b = seeds[rng.below(seeds.len())].clone();
    for _ in 0..1 + rng.below(4) {
        let len = b.len();
        match rng.below(if json { 9 } else { 8 }) {
            0 if len > 0 => b[rng.below(len)] ^= 1 << rng.below(8),
            1 if len > 0 => b[rng.below(len)] = rng.next() as u8,
            2 if len > 0 => b[rng.below(len)] = INTERESTING[rng.below(INTERESTING.len())],
            3 => b.insert(
                rng.below(len + 1),
                INTERESTING[rng.below(INTERESTING.len())],
            ),
            4 if len > 0 => {
                b.remove(rng.below(len));
            }
            5 => b.truncate(rng.below(len + 1)),
            6 if len > 0 => {
                let (at, n) = (rng.below(len), 1 + rng.below(16));
                let chunk: Vec<u8> = b[at..(at + n).min(len)].to_vec();
                let to = rng.below(len + 1);
                b.splice(to..to, chunk);
            }
            7 => {
                let other = &seeds[rng.below(seeds.len())];
                let (cut, from) = (rng.below(len + 1), rng.below(other.len() + 1));
                b.truncate(cut);
                b.extend_from_slice(&other[from..]);
            }
            8 => {
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                let at = rng.below(len + 1);
                b.splice(at..at, t.iter().copied());
            }
            _ => {}
        }
    }
    b
}

fn run(name: &str, seeds: Vec<Vec<u8>>, json: bool, oracle: fn(&[u8]) -> bool) {
    run_with(name, seeds, Vec::new(), json, oracle);
}

/// [`run`] with `extra` seeds that need not be accepted (negative vectors): they are mutated
/// and spliced like the others and must never make the target panic.
fn run_with(
    name: &str,
    mut seeds: Vec<Vec<u8>>,
    extra: Vec<Vec<u8>>,
    json: bool,
    oracle: fn(&[u8]) -> bool,
) {
    let ms = std::env::var("AFR_FUZZ_SMOKE_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let seed = std::env::var("AFR_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x00af_7f12);
    if let Some(dir) = std::env::var_os("AFR_FUZZ_SEED_DIR") {
        let dir = std::path::Path::new(&dir).join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for (i, s) in seeds.iter().chain(&extra).enumerate() {
            std::fs::write(dir.join(format!("seed-{i:02}")), s).unwrap();
        }
    }
    let check = |input: &[u8]| match std::panic::catch_unwind(|| oracle(input)) {
        Ok(accepted) => accepted,
        Err(e) => {
            eprintln!(
                "fuzz target {name} failed (AFR_FUZZ_SEED={seed}) on input {}",
                hex::encode(input)
            );
            std::panic::resume_unwind(e)
        }
    };
    for (i, s) in seeds.iter().enumerate() {
        assert!(check(s), "{name}: seed {i} is rejected by its own decoder");
    }
    for s in &extra {
        check(s);
    }
    seeds.extend(extra);
    let mut rng = Rng(seed | 1);
    let deadline = Instant::now() + Duration::from_millis(ms);
    let (mut runs, mut accepted) = (0u64, 0u64);
    while runs < 1000 || Instant::now() < deadline {
        let input = mutate(&mut rng, &seeds, json);
        accepted += u64::from(check(&input));
        runs += 1;
    }
    eprintln!("fuzz smoke {name}: {runs} inputs, {accepted} accepted, seed {seed}");
}

fn records() -> Vec<Record> {
    let base = Record {
        recorder: [0xaf; 20],
        seq: 0,
        epoch: 0,
        timestamp_us: 1_767_225_600_000_000,
        category: Category::Shell,
        lane: None,
        concurrent_with: vec![],
        prev_hash: Hash32::ZERO,
        payload_commitment: Hash32([0x5a; 32]),
    };
    vec![
        base.clone(),
        Record {
            seq: 24,
            epoch: 1,
            category: Category::Other,
            lane: Some("t".into()),
            concurrent_with: vec![0, 23],
            ..base.clone()
        },
        Record {
            seq: u64::MAX,
            epoch: u64::MAX,
            timestamp_us: 0,
            lane: Some("x".repeat(64)),
            concurrent_with: (0..16).collect(),
            ..base
        },
    ]
}

fn header() -> EpochHeader {
    EpochHeader {
        recorder: [0xaf; 20],
        epoch: 2,
        first_seq: 300,
        count: 256,
        merkle_root: Hash32([1; 32]),
        chain_head: Hash32([2; 32]),
        prev_epoch_root: Hash32([3; 32]),
        sealed_at_us: 1_767_225_600_000_000,
    }
}

const EVENTS: &[&str] = &[
    r#"{"category":"shell","intent":{"tool":"ls"}}"#,
    r#"{"category":"database","timestamp_us":1,"lane":"a","concurrent_with":[1,2],"intent":{"tool":"psql","args":{"sql":"DROP TABLE users","n":[1,-2,3.5,null,true]}},
      "policy_evaluation":[{"guardrail":"g","version":"2","verdict":"escalate","reason":"r"}],
      "human_approval":{"approver":"a","prompt":"p","decision":"rejected","decided_at_us":9,"signature":{"scheme":"ssh","signer":"ssh-ed25519 AAAA","statement":{"action":"00","tool":"psql","target":"t","decision":"rejected","recorder":"0x00","issued_at":1,"expires_at":2,"nonce":"11"},"signature":"22"}},
      "execution":{"command":"c","target":"t","mutation":{"x":{}}},
      "effects":{"return_value":0,"state_changes":["s"],"external_response":"ok","error":"e"},
      "context_provenance":{"sources":[{"uri":"u","content_hash":"h","kind":"web"}],"environment":"prod"},
      "code_provenance":{"agent":"a","agent_version":"1","tool_version":"2","repository":"r","commit":"c","model":"m"},
      "delegation_provenance":{"parent_event":{"recorder":"0x00000000000000000000000000000000000aF2Af","seq":3},"delegating_agent":"d","organisation":"o","on_behalf_of":"b"}}"#,
];

fn payloads() -> Vec<Payload> {
    EVENTS
        .iter()
        .map(|e| {
            afr_core::EventInput::from_json(e.as_bytes(), DEFAULT_MAX_EVENT_BYTES)
                .unwrap()
                .into_payload()
                .1
        })
        .collect()
}

fn sealed() -> Vec<Vec<u8>> {
    let ek = MasterKey::from_bytes([1; 32]).epoch_key(&[2; 32], &[0xaf; 20], 0);
    payloads()
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let slot = Slot {
                recorder: [0xaf; 20],
                epoch: 0,
                seq: i as u64,
            };
            encrypt(
                &ek.event_key(i as u64),
                &slot,
                [i as u8; 12],
                &p.encode().unwrap(),
            )
            .encode()
        })
        .chain([encrypt(
            &ek.event_key(9),
            &Slot {
                recorder: [0; 20],
                epoch: 0,
                seq: 9,
            },
            [0; 12],
            b"",
        )
        .encode()])
        .collect()
}

#[test]
fn fuzz_smoke_cbor_value() {
    let v = ciborium::Value::Map(vec![
        (
            ciborium::Value::Text("a".into()),
            ciborium::Value::Float(1.5),
        ),
        (
            ciborium::Value::Integer((-24).into()),
            ciborium::Value::Bytes(vec![0; 30]),
        ),
        (
            ciborium::Value::Bool(true),
            ciborium::Value::Tag(1, Box::new(ciborium::Value::Null)),
        ),
    ]);
    let mut seeds = vec![
        cbor::to_vec(&v).unwrap(),
        cbor::to_vec(&u64::MAX).unwrap(),
        header().encode(),
    ];
    seeds.extend(records().iter().map(Record::encode));
    seeds.extend(payloads().iter().map(|p| p.encode().unwrap()));
    run("cbor_value", seeds, false, oracles::cbor_value);
}

#[test]
fn fuzz_smoke_record() {
    run(
        "record",
        records().iter().map(Record::encode).collect(),
        false,
        oracles::record,
    );
}

#[test]
fn fuzz_smoke_epoch_header() {
    let h = header();
    let seeds = vec![
        h.encode(),
        EpochHeader {
            count: 1,
            first_seq: 0,
            epoch: 0,
            sealed_at_us: 23,
            ..h
        }
        .encode(),
    ];
    run("epoch_header", seeds, false, oracles::epoch_header);
}

#[test]
fn fuzz_smoke_sealed_payload() {
    run("sealed_payload", sealed(), false, oracles::sealed_payload);
}

#[test]
fn fuzz_smoke_payload() {
    run(
        "payload",
        payloads().iter().map(|p| p.encode().unwrap()).collect(),
        false,
        oracles::payload,
    );
}

#[test]
fn fuzz_smoke_event_json() {
    run(
        "event_json",
        EVENTS.iter().map(|e| e.as_bytes().to_vec()).collect(),
        true,
        oracles::event_json,
    );
}

/// A small honest recorder history: `sizes[e]` events in epoch `e`, then `tail` unsealed
/// events. Returns the whole-log export and bundles of a few events (with keys, without keys).
pub(crate) fn honest_files(sizes: &[usize], tail: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
    use afr_core::{
        bundle::{Bundle, DisclosedEvent},
        export::LogWriter,
        merkle,
    };
    let recorder = [0xaf; 20];
    let master = MasterKey::from_bytes([7; 32]);
    let plain = payloads();
    let mut w = LogWriter::start(&recorder, 1);
    let (mut prev, mut prev_root, mut seq) = (Hash32::ZERO, Hash32::ZERO, 0u64);
    let mut headers = Vec::new();
    let mut disclosed = Vec::new();
    let event = |epoch: u64, seq: u64, prev: &mut Hash32| {
        let ek = master.epoch_key(&[epoch as u8; 32], &recorder, epoch);
        let slot = Slot {
            recorder,
            epoch,
            seq,
        };
        let p = &plain[seq as usize % plain.len()];
        let sealed = encrypt(
            &ek.event_key(seq),
            &slot,
            [seq as u8; 12],
            &p.encode().unwrap(),
        );
        let r = Record {
            recorder,
            seq,
            epoch,
            timestamp_us: 1_767_225_600_000_000 + seq,
            category: Category::ALL[seq as usize % Category::ALL.len()],
            lane: None,
            concurrent_with: Vec::new(),
            prev_hash: *prev,
            payload_commitment: sealed.commitment(),
        };
        *prev = r.leaf_hash();
        let bytes = r.encode();
        (bytes, sealed, ek.event_key(seq))
    };
    for (e, &n) in sizes.iter().enumerate() {
        let e = e as u64;
        let first_seq = seq;
        let mut recs = Vec::new();
        for _ in 0..n {
            recs.push(event(e, seq, &mut prev));
            seq += 1;
        }
        let leaves: Vec<Hash32> = recs
            .iter()
            .map(|(b, _, _)| afr_core::hash::leaf_hash(b))
            .collect();
        let h = EpochHeader {
            recorder,
            epoch: e,
            first_seq,
            count: n as u64,
            merkle_root: merkle::root(&leaves),
            chain_head: prev,
            prev_epoch_root: prev_root,
            sealed_at_us: 1_767_225_700_000_000 + e,
        };
        prev_root = h.root();
        w.epoch(&h.encode());
        for (record, sealed, _) in &recs {
            w.event(record, Some(&sealed.encode()));
        }
        headers.push(h);
        for i in [0, n / 2, n - 1] {
            let (record, payload, key) = recs[i].clone();
            if disclosed
                .last()
                .is_some_and(|(r, _, _, _): &(Vec<u8>, _, _, _)| *r == record)
            {
                continue;
            }
            let proof = merkle::inclusion_proof(&leaves, i).unwrap();
            disclosed.push((record, proof, payload, key));
        }
    }
    w.tail(tail as u64);
    for _ in 0..tail {
        let (record, sealed, _) = event(sizes.len() as u64, seq, &mut prev);
        w.event(&record, Some(&sealed.encode()));
        seq += 1;
    }
    w.end(seq, sizes.len() as u64);
    let bundle = |keys: bool, upto: usize| {
        Bundle {
            recorder,
            headers: headers.clone(),
            erased: Vec::new(),
            checkpoints: Vec::new(),
            events: disclosed[..upto.min(disclosed.len())]
                .iter()
                .map(|(record, proof, payload, key)| DisclosedEvent {
                    record: record.clone(),
                    proof: proof.clone(),
                    payload: keys.then(|| payload.clone()),
                    key: keys.then(|| key.clone()),
                })
                .collect(),
        }
        .encode()
    };
    let n = disclosed.len();
    (
        w.take(),
        vec![bundle(true, n), bundle(false, n), bundle(true, 1)],
    )
}

#[test]
fn fuzz_smoke_log_file() {
    let seeds: Vec<Vec<u8>> = [(&[3usize, 1, 4][..], 2), (&[1], 0), (&[5, 2], 0), (&[], 1)]
        .iter()
        .map(|(sizes, tail)| honest_files(sizes, *tail).0)
        .collect();
    assert_eq!(
        afr_core::verify::verify_log(&seeds[2]).outcome,
        afr_core::verify::Outcome::Verified
    );
    run_with_catalogue("log_file", seeds, "afr", oracles::log_file);
}

#[test]
fn fuzz_smoke_bundle_file() {
    let (_, mut seeds) = honest_files(&[3, 1, 4], 0);
    seeds.extend(honest_files(&[2], 0).1);
    assert_eq!(
        afr_core::bundle::verify_bundle(&seeds[0]).outcome,
        afr_core::verify::Outcome::Verified
    );
    run_with_catalogue("bundle_file", seeds, "bundle", oracles::bundle_file);
}

/// [`run_with`] the files of the [`catalogue`] with extension `ext` as the extra seeds.
fn run_with_catalogue(name: &str, seeds: Vec<Vec<u8>>, ext: &str, oracle: fn(&[u8]) -> bool) {
    run_with(name, seeds, catalogue(ext), false, oracle);
}

/// The named negative vectors of `verifier/testdata/` with extension `ext`: honest controls and
/// one file per attack, the seeds closest to the verifier's edge cases.
fn catalogue(ext: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../verifier/testdata");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    let seeds: Vec<Vec<u8>> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert!(
        seeds.len() >= 5,
        "too few .{ext} files in {}",
        dir.display()
    );
    seeds
}
