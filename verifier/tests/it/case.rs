//! `afr-verify case` without a chain: bundles built with the core crate, receipts signed with
//! the recorders' keys, anchors from files. Exit codes, usage errors, forks, chains across
//! three parties, hostile strings and junk (the anvil scenarios are in `cli/tests/it/case.rs`).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use afr_core::{
    EpochHeader, EventInput, Hash32, Record, RecorderId,
    bundle::{Bundle, DisclosedEvent},
    crypto::{EncryptedPayload, EventKey, MasterKey, Slot, encrypt},
    delegation::{Receipt, Role, signing_hash},
    hash::leaf_hash,
    merkle,
    verify::Outcome,
};
use afr_testkit::{DEV_ADDR as ADDR_A, DEV_KEY as KEY_A};
use afr_verify::{
    Source, Trust,
    anchors::Anchors,
    case::{Case, CaseReport, MAX_CHAINS, verify_case},
    parse_addr,
};
use serde_json::{Value, json};

pub(crate) const KEY_B: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
pub(crate) const ADDR_B: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
pub(crate) const KEY_C: &str = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";
pub(crate) const ADDR_C: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";
/// 2024-01-01T00:00:00Z, in µs: the recorders' clock in these tests.
pub(crate) const T0: u64 = 1_704_067_200_000_000;

/// One recorder's log of one epoch, built event by event.
pub(crate) struct Log {
    pub(crate) recorder: RecorderId,
    key: &'static str,
    events: Vec<(Vec<u8>, EncryptedPayload, EventKey)>,
    leaves: Vec<Hash32>,
}

impl Log {
    pub(crate) fn new(addr: &str, key: &'static str) -> Log {
        Log {
            recorder: parse_addr(addr, "recorder").unwrap(),
            key,
            events: Vec::new(),
            leaves: Vec::new(),
        }
    }

    /// Appends `event` (JSON of an event) dated `ts`; its seq and leaf hash.
    pub(crate) fn push(&mut self, event: Value, ts: u64) -> (u64, Hash32) {
        // Deserialized without the input checks: the recorder writes its own `afr.` events.
        let ev: EventInput = serde_json::from_value(event).unwrap();
        let (env, payload) = ev.into_payload();
        let seq = self.events.len() as u64;
        let slot = Slot {
            recorder: self.recorder,
            epoch: 0,
            seq,
        };
        let ek = MasterKey::from_bytes([7; 32]).epoch_key(&[1; 32], &self.recorder, 0);
        let key = ek.event_key(seq);
        let sealed = encrypt(&key, &slot, [seq as u8; 12], &payload.encode().unwrap());
        let r = Record {
            recorder: self.recorder,
            seq,
            epoch: 0,
            timestamp_us: ts,
            category: env.category,
            lane: None,
            concurrent_with: Vec::new(),
            prev_hash: self.leaves.last().copied().unwrap_or(Hash32::ZERO),
            payload_commitment: sealed.commitment(),
        };
        let b = r.encode();
        let leaf = leaf_hash(&b);
        self.events.push((b, sealed, key));
        self.leaves.push(leaf);
        (seq, leaf)
    }

    pub(crate) fn header(&self) -> EpochHeader {
        EpochHeader {
            recorder: self.recorder,
            epoch: 0,
            first_seq: 0,
            count: self.leaves.len() as u64,
            merkle_root: merkle::root(&self.leaves),
            chain_head: self.leaves.last().copied().unwrap_or(Hash32::ZERO),
            prev_epoch_root: Hash32::ZERO,
            sealed_at_us: T0 + 3_600_000_000,
        }
    }

    /// A bundle of `seqs` with their keys.
    pub(crate) fn bundle(&self, seqs: &[u64]) -> Vec<u8> {
        Bundle {
            recorder: self.recorder,
            headers: vec![self.header()],
            erased: Vec::new(),
            checkpoints: Vec::new(),
            events: seqs
                .iter()
                .map(|&s| {
                    let (record, sealed, key) = &self.events[s as usize];
                    DisclosedEvent {
                        record: record.clone(),
                        proof: merkle::inclusion_proof(&self.leaves, s as usize).unwrap(),
                        payload: Some(sealed.clone()),
                        key: Some(key.clone()),
                    }
                })
                .collect(),
        }
        .encode()
    }

    /// This recorder's signed plain receipt of its event `seq` (as recorders issued before
    /// receipts named their roles), as a reference to record.
    pub(crate) fn receipt(&self, seq: u64) -> Value {
        self.receipt_as(seq, &Role::Plain)
    }

    /// This recorder's signed receipt of its event `seq` in `role`, as a reference.
    pub(crate) fn receipt_as(&self, seq: u64, role: &Role) -> Value {
        let leaf = self.leaves[seq as usize];
        let raw = hex::decode(self.key.trim_start_matches("0x")).unwrap();
        let sk = k256::ecdsa::SigningKey::from_slice(&raw).unwrap();
        let (sig, recid) = sk
            .sign_prehash_recoverable(&signing_hash(&self.recorder, seq, &leaf, role))
            .unwrap();
        let mut s = [0u8; 65];
        s[..64].copy_from_slice(&sig.to_bytes());
        s[64] = 27 + recid.to_byte();
        serde_json::to_value(Receipt::new(&self.recorder, seq, &leaf, role, &s).to_ref()).unwrap()
    }

    /// An anchors file of its one epoch, anchored in block 9 at `time` (seconds), if given.
    fn anchors(&self, dir: &Path, time: Option<u64>) -> PathBuf {
        let mut a = Anchors::assumed(
            31337,
            afr_core::deployment::ANCHOR_ADDRESS,
            &self.recorder,
            &[self.header().root()],
            9,
        );
        for p in a.roots.values_mut() {
            p.block_time = time;
        }
        let p = dir.join(format!("{}.anchors.json", hex::encode(self.recorder)));
        std::fs::write(&p, serde_json::to_string(&a).unwrap()).unwrap();
        p
    }
}

pub(crate) fn ev(tool: &str, extra: Value) -> Value {
    let mut v = json!({"category": "delegation", "intent": {"tool": tool}});
    if let (Value::Object(m), Value::Object(x)) = (&mut v, extra) {
        m.extend(x);
    }
    v
}

pub(crate) fn parent(r: Value) -> Value {
    json!({"delegation_provenance": {"parent_event": r}})
}

pub(crate) fn delegated(r: Value, offer: u64) -> Value {
    json!({"intent": {"tool": "afr.delegated", "args": {"offer": {"seq": offer}}},
           "delegation_provenance": {"delegated_to": [r]}})
}

/// A delegation A 0 `hand_off` -> B 0 `run_job` (its parent), dated `ta` and `tb`; the two
/// logs.
fn handed_off(ta: u64, tb: u64) -> (Log, Log) {
    let mut a = Log::new(ADDR_A, KEY_A);
    let mut b = Log::new(ADDR_B, KEY_B);
    a.push(ev("hand_off", json!({})), ta);
    b.push(ev("run_job", parent(a.receipt(0))), tb);
    (a, b)
}

/// A honest delegation A 0 -> B 0, A 1 `afr.delegated`; the two logs.
fn honest() -> (Log, Log) {
    let (mut a, b) = handed_off(T0, T0 + 1_000_000);
    a.push(ev("x", delegated(b.receipt(0), 0)), T0 + 2_000_000);
    (a, b)
}

/// Writes `bytes` to `dir/name`.
fn put(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A case file `dir/file` of `(party name, recorder, bundles, anchors)`.
fn case_file(dir: &Path, file: &str, parties: &[(&str, &str, &[&str], &[&str])]) -> PathBuf {
    let mut text = String::from("chain_id = 31337\n");
    let list = |l: &[&str]| {
        l.iter()
            .map(|s| serde_json::to_string(s).unwrap())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (name, rec, bundles, anchors) in parties {
        text.push_str(&format!(
            "[[party]]\nname = {}\nrecorders = [\"{rec}\"]\nbundles = [{}]\nanchors = [{}]\n",
            serde_json::to_string(name).unwrap(),
            list(bundles),
            list(anchors)
        ));
    }
    put(dir, file, text.as_bytes())
}

fn run(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_afr-verify"))
        .arg("case")
        .args(args)
        // The anchors files here are version 2 (roots assumed anchored): taken as they are.
        .arg("--unproven-anchors")
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_str().unwrap().to_owned()
}

fn lib(case: &Path) -> CaseReport {
    let mut c = Case::load(case, None, None).unwrap();
    // The anchors files here are version 2 (roots assumed anchored): taken as they are.
    c.trust.chain.unproven_anchors = true;
    verify_case(&c, Source::None).unwrap()
}

#[test]
fn case_exit_codes_follow_the_verdict_and_usage_errors_are_64() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (a, b) = honest();
    let ab = put(d, "a.bundle", &a.bundle(&[0, 1]));
    let bb = put(d, "b.bundle", &b.bundle(&[0]));
    let (aa, ba) = (a.anchors(d, Some(T0 / 1_000_000 + 10)), b.anchors(d, None));
    let (ab, bb, aa, ba) = (name(&ab), name(&bb), name(&aa), name(&ba));

    // Verified, from the case file's anchors (the file's directory is not the working one).
    let case = case_file(
        d,
        "case.toml",
        &[
            ("Acme", ADDR_A, &[&ab], &[&aa]),
            ("Globex", ADDR_B, &[&bb], &[&ba]),
        ],
    );
    let (code, out, err) = run(&[case.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("CASE VERIFIED\n"), "{out}");
    assert!(
        out.contains("  party \"Acme\": VERIFIED\n    bundle a.bundle: verified"),
        "{out}"
    );
    assert!(
        out.contains(
            "chain: \"Acme\" 0 hand_off -[delegated_to+parent_event]-> \"Globex\" 0 run_job"
        ),
        "{out}"
    );
    let (code, out, _) = run(&[case.as_os_str(), "--json".as_ref()]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["outcome"], "verified");
    assert_eq!(v["parties"][1]["bundles"][0]["file"], "b.bundle");
    assert_eq!(v["parties"][1]["bundles"][0]["outcome"], "verified");
    assert_eq!(v["links"].as_array().unwrap().len(), 2);

    // The same from --trust, the bundles and one --anchors per recorder.
    let trust = put(
        d,
        "trust.toml",
        format!(
            "chain_id = 31337\n[[party]]\nname = \"Acme\"\nrecorders = [\"{ADDR_A}\"]\n\
             [[party]]\nname = \"Globex\"\nrecorders = [\"{ADDR_B}\"]\n"
        )
        .as_bytes(),
    );
    let at = |f: &str| d.join(f).into_os_string();
    let (code, out, err) = run(&[
        "--trust".as_ref(),
        trust.as_os_str(),
        &at(&bb),
        &at(&ab),
        "--anchors".as_ref(),
        &at(&aa),
        "--anchors".as_ref(),
        &at(&ba),
    ]);
    assert_eq!(code, 0, "{out}{err}");

    // Without anchors: incomplete (2). Without B's bundle: incomplete.
    let (code, out, _) = run(&["--trust".as_ref(), trust.as_os_str(), &at(&ab), &at(&bb)]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("whose anchored root was not checked"), "{out}");

    // A invents a delegation (unsigned, another leaf): tampered (1).
    let mut a2 = Log::new(ADDR_A, KEY_A);
    let mut forged = b.receipt(0);
    forged["leaf_hash"] = json!("ab".repeat(32));
    forged.as_object_mut().unwrap().remove("signature");
    a2.push(
        ev(
            "claim",
            json!({"delegation_provenance": {"delegated_to": [forged]}}),
        ),
        T0,
    );
    let a2b = put(d, "a2.bundle", &a2.bundle(&[0]));
    let a2a = a2.anchors(d, None);
    let (code, out, _) = run(&[
        "--trust".as_ref(),
        trust.as_os_str(),
        a2b.as_os_str(),
        &at(&bb),
        "--anchors".as_ref(),
        a2a.as_os_str(),
        "--anchors".as_ref(),
        &at(&ba),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("  party \"Acme\": TAMPERED"), "{out}");
    assert!(
        out.contains("first failure at event 0: delegation-link"),
        "{out}"
    );

    // Usage errors (64): no file; a case file given as a trust file (to `bundle` or to
    // `case --trust`); two anchors files for one recorder; anchors without a pinned chain; a
    // case naming no bundle.
    let bundle_cmd = Command::new(env!("CARGO_BIN_EXE_afr-verify"))
        .args(["bundle", "--trust"])
        .arg(&case)
        .arg(d.join(&ab))
        .output()
        .unwrap();
    assert_eq!(bundle_cmd.status.code(), Some(64));
    assert!(
        String::from_utf8_lossy(&bundle_cmd.stderr).contains("that is a case file"),
        "{bundle_cmd:?}"
    );
    for (args, want) in [
        (vec![], "required"),
        (
            vec!["--trust".into(), case.clone().into_os_string(), at(&ab)],
            "that is a case file",
        ),
        (
            vec![
                case.clone().into_os_string(),
                "--anchors".into(),
                at(&aa),
                "--anchors".into(),
                at(&aa),
            ],
            "two anchors files for recorder",
        ),
        (
            vec![
                "--trust".into(),
                put(
                    d,
                    "t0.toml",
                    format!("[[party]]\nname = \"x\"\nrecorders = [\"{ADDR_A}\"]\n").as_bytes(),
                )
                .into_os_string(),
                at(&ab),
                "--anchors".into(),
                at(&aa),
            ],
            "needs a pinned chain",
        ),
        (
            vec![case_file(d, "empty.toml", &[("Acme", ADDR_A, &[], &[])]).into_os_string()],
            "names no bundle",
        ),
        // Bundles without a case file or --trust: refused before the chain is asked anything.
        (
            vec![
                at(&ab),
                at(&bb),
                "--rpc".into(),
                "http://127.0.0.1:1".into(),
                "--chain-id".into(),
                "31337".into(),
            ],
            "a.bundle is a disclosure bundle, not a case file: give a case file first \
             (afr-verify case CASE.toml [MORE.bundle ...]), or --trust TRUST.toml with the bundles",
        ),
        (
            vec![
                case_file(
                    d,
                    "twice.toml",
                    &[("Acme", ADDR_A, &[&ab], &[]), ("Acme", ADDR_B, &[&bb], &[])],
                )
                .into_os_string(),
            ],
            "two parties are named \"Acme\" in",
        ),
        (
            vec![
                case_file(
                    d,
                    "shared-recorder.toml",
                    &[
                        ("Acme", ADDR_A, &[&ab], &[]),
                        ("Globex", ADDR_A, &[&bb], &[]),
                    ],
                )
                .into_os_string(),
            ],
            "is pinned by two parties, \"Acme\" and \"Globex\"",
        ),
    ] {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let (code, out, err) = run(&args);
        assert_eq!(code, 64, "{args:?}: {out}{err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // `case --help` says what becomes of bundles given without --trust.
    let (code, out, _) = run(&["--help".as_ref()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("bundles alone (afr-verify case A.bundle B.bundle) are a usage error"),
        "{out}"
    );
    // I/O errors (74): a bundle or a case file that cannot be read.
    let (code, _, err) = run(&[
        "--trust".as_ref(),
        trust.as_os_str(),
        "/nonexistent/x.bundle".as_ref(),
    ]);
    assert_eq!(code, 74, "{err}");
    assert!(err.contains("cannot read /nonexistent/x.bundle"), "{err}");
    let (code, _, _) = run(&["/nonexistent/case.toml".as_ref()]);
    assert_eq!(code, 74);
}

#[test]
fn two_bundles_of_one_recorder_that_disagree_are_a_fork() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (a, b) = honest();
    // B's key, another history: event 0 is something else.
    let mut b2 = Log::new(ADDR_B, KEY_B);
    b2.push(ev("did_nothing", json!({})), T0);
    put(d, "a.bundle", &a.bundle(&[0, 1]));
    put(d, "b.bundle", &b.bundle(&[0]));
    put(d, "b2.bundle", &b2.bundle(&[0]));
    let r = lib(&case_file(
        d,
        "case.toml",
        &[
            ("Acme", ADDR_A, &["a.bundle"], &[]),
            ("Globex", ADDR_B, &["b.bundle", "b2.bundle"], &[]),
        ],
    ));
    assert_eq!(r.outcome, Outcome::Tampered, "{}", r.to_text());
    let g = &r.parties[1];
    let (f, file) = g.first_failure.as_ref().unwrap();
    assert_eq!(
        (f.check.name(), file.as_deref()),
        ("fork", Some("b2.bundle"))
    );
    assert_eq!(f.consistent_with(), "two histories from one recorder");
    // With B's anchored roots: the other history alone differs from them (`anchored-root`);
    // beside the anchored one, it is the fork that explains it, whichever comes first.
    let ba = name(&b.anchors(d, None));
    for (bundles, check) in [
        (&["b2.bundle"][..], "anchored-root"),
        (&["b.bundle", "b2.bundle"], "fork"),
        (&["b2.bundle", "b.bundle"], "fork"),
    ] {
        let r = lib(&case_file(
            d,
            "anchored.toml",
            &[
                ("Acme", ADDR_A, &["a.bundle"], &[]),
                ("Globex", ADDR_B, bundles, &[&ba]),
            ],
        ));
        assert_eq!(r.outcome, Outcome::Tampered, "{}", r.to_text());
        let (f, _) = r.parties[1].first_failure.as_ref().unwrap();
        assert_eq!(f.check.name(), check, "{bundles:?}: {}", r.to_text());
    }
}

#[test]
fn post_dated_events_are_caught_by_the_block_time_of_an_anchors_file() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // A dates its delegating event an hour after the block that anchored B's citing epoch.
    let (a, b) = handed_off(T0 + 3_600_000_000, T0);
    let block = T0 / 1_000_000 + 60;
    put(d, "a.bundle", &a.bundle(&[0]));
    put(d, "b.bundle", &b.bundle(&[0]));
    let (aa, ba) = (
        name(&a.anchors(d, Some(block))),
        name(&b.anchors(d, Some(block))),
    );
    let parties = |ba: &str| {
        case_file(
            d,
            "case.toml",
            &[
                ("Acme", ADDR_A, &["a.bundle"], &[aa.as_str()]),
                ("Globex", ADDR_B, &["b.bundle"], &[ba]),
            ],
        )
    };
    let r = lib(&parties(&ba));
    let who: Vec<(Outcome, Option<&str>)> = r
        .parties
        .iter()
        .filter(|p| p.in_case)
        .map(|p| {
            (
                p.outcome,
                p.first_failure.as_ref().map(|f| f.0.check.name()),
            )
        })
        .collect();
    assert_eq!(
        who,
        [
            (Outcome::Tampered, Some("delegation-time")),
            (Outcome::Verified, None)
        ],
        "{}",
        r.to_text()
    );
    // Without the time of B's block: A's own anchors file still dates A's epoch before A's
    // event, so A's date is the impossible one (never B, whose event is merely older).
    let plain = name(&b.anchors(d, None));
    let r = lib(&parties(&plain));
    assert_eq!(r.parties[0].outcome, Outcome::Tampered, "{}", r.to_text());
    assert_eq!(r.parties[1].outcome, Outcome::Verified, "{}", r.to_text());
    // With both times, A is convicted by its own epoch's anchoring (the first time rule), not
    // by B's: a party's own anchors file can date only its own epochs against itself.
    let r = lib(&parties(&ba));
    let l = r
        .links
        .iter()
        .find(|l| l.status == Outcome::Tampered)
        .unwrap();
    assert!(l.why.contains("its own epoch"), "{}", l.why);
    // Without any block time: no rule can tell whose clock is wrong. No one is convicted.
    let untimed = case_file(
        d,
        "untimed.toml",
        &[
            (
                "Acme",
                ADDR_A,
                &["a.bundle"],
                &[name(&a.anchors(d, None)).as_str()],
            ),
            ("Globex", ADDR_B, &["b.bundle"], &[plain.as_str()]),
        ],
    );
    let r = lib(&untimed);
    assert_eq!(r.outcome, Outcome::Incomplete, "{}", r.to_text());
    assert!(
        r.involved().all(|p| p.outcome == Outcome::Verified),
        "{}",
        r.to_text()
    );
    assert!(r.missing[0].contains("clocks disagree"), "{}", r.to_text());
}

#[test]
fn an_accept_paired_with_another_offer_is_the_pairing_sides_tampering() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // A 0 hand_off -> B 0 run_job (plain receipts, as before receipts named roles); A 1 is a
    // second offer B never saw; A 2 afr.delegated pairs offer 1 with B's receipt of B 0.
    let (mut a, b) = handed_off(T0, T0 + 1_000_000);
    a.push(ev("drop_customer_db", json!({})), T0 + 2_000_000);
    a.push(ev("x", delegated(b.receipt(0), 1)), T0 + 3_000_000);
    put(d, "a.bundle", &a.bundle(&[0, 1, 2]));
    put(d, "b.bundle", &b.bundle(&[0]));
    let (aa, ba) = (name(&a.anchors(d, None)), name(&b.anchors(d, None)));
    let case = case_file(
        d,
        "case.toml",
        &[
            ("Acme", ADDR_A, &["a.bundle"], &[aa.as_str()]),
            ("Globex", ADDR_B, &["b.bundle"], &[ba.as_str()]),
        ],
    );
    let r = lib(&case);
    assert_eq!(r.parties[0].outcome, Outcome::Tampered, "{}", r.to_text());
    assert_eq!(r.parties[1].outcome, Outcome::Verified, "{}", r.to_text());
    let l = r.links.iter().find(|l| l.from_seq == 2).unwrap();
    assert_eq!(l.status, Outcome::Tampered);
    assert!(
        l.why.contains("it accepted another delegation"),
        "{}",
        l.why
    );
    // With B's accept receipt (it names offer 0), the pairing fails without opening B 0.
    let mut a2 = Log::new(ADDR_A, KEY_A);
    let mut b2 = Log::new(ADDR_B, KEY_B);
    let (_, o0) = a2.push(ev("hand_off", json!({})), T0);
    let offer = a2.receipt_as(
        0,
        &Role::Offer {
            to: parse_addr(ADDR_B, "b").unwrap(),
        },
    );
    b2.push(ev("run_job", parent(offer)), T0 + 1_000_000);
    a2.push(ev("drop_customer_db", json!({})), T0 + 2_000_000);
    let accept = b2.receipt_as(
        0,
        &Role::Accept {
            recorder: a2.recorder,
            seq: 0,
            leaf: o0,
        },
    );
    a2.push(ev("x", delegated(accept, 1)), T0 + 3_000_000);
    put(d, "a2.bundle", &a2.bundle(&[0, 1, 2]));
    put(d, "b2.bundle", &b2.bundle(&[0]));
    let (aa, ba) = (name(&a2.anchors(d, None)), name(&b2.anchors(d, None)));
    // B withholds its bundle: the signed accept alone convicts A.
    let case = case_file(
        d,
        "case2.toml",
        &[
            ("Acme", ADDR_A, &["a2.bundle"], &[aa.as_str()]),
            ("Globex", ADDR_B, &[], &[ba.as_str()]),
        ],
    );
    let r = lib(&case);
    assert_eq!(r.parties[0].outcome, Outcome::Tampered, "{}", r.to_text());
    let l = r.links.iter().find(|l| l.from_seq == 2).unwrap();
    assert!(l.why.contains("pairs its offer 1"), "{}", l.why);
    assert_eq!(l.role, Some("accept"));
}

#[test]
fn chains_cross_three_parties_and_hostile_references_stay_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // A 0 -> B 0 -> (B 1, same log) -> C 0; and C 1 cites B 2 which cites C 1: a cycle.
    let (a, mut b) = handed_off(T0, T0 + 1);
    let mut c = Log::new(ADDR_C, KEY_C);
    let same = json!({"seq": 0, "leaf_hash": b.leaves[0].to_hex()});
    b.push(ev("sub_task", parent(same)), T0 + 2);
    c.push(ev("do_it", parent(b.receipt(1))), T0 + 3);
    // A hostile event: hundreds of references to events nobody disclosed, and one to B 2,
    // which cites it back: a cycle (only possible with a leaf hash that cannot hold).
    let mut many: Vec<Value> = (0..600)
        .map(|i| json!({"recorder": ADDR_B, "seq": 1000 + i, "leaf_hash": "cd".repeat(32)}))
        .collect();
    many.push(json!({"recorder": ADDR_B, "seq": 2, "leaf_hash": "ee".repeat(32)}));
    c.push(
        ev(
            "\u{1b}[2Jspoof\u{202e}",
            json!({"delegation_provenance": {"delegated_to": many}}),
        ),
        T0 + 4,
    );
    let mut refs: Vec<Value> = (0..300)
        .map(|i| json!({"recorder": ADDR_C, "seq": 2000 + i, "leaf_hash": "ef".repeat(32)}))
        .collect();
    refs.push(c.receipt(1));
    b.push(
        ev(
            "loop",
            json!({"delegation_provenance": {"delegated_to": refs}}),
        ),
        T0 + 5,
    );
    put(d, "a.bundle", &a.bundle(&[0]));
    put(d, "b.bundle", &b.bundle(&[0, 1, 2]));
    put(d, "c.bundle", &c.bundle(&[0, 1]));
    put(d, "junk.bundle", b"\x83\x6aafr-bundle\x02\xff");
    let case = case_file(
        d,
        "case.toml",
        &[
            ("Acme", ADDR_A, &["a.bundle"], &[]),
            ("Globex\u{1b}[31m", ADDR_B, &["b.bundle"], &[]),
            ("Initech", ADDR_C, &["c.bundle", "junk.bundle"], &[]),
        ],
    );
    let r = lib(&case);
    assert_eq!(r.outcome, Outcome::Tampered, "junk is tampered");
    assert_eq!(
        r.parties[2].first_failure.as_ref().unwrap().0.check.name(),
        "encoding"
    );
    assert!(r.chains.len() <= MAX_CHAINS);
    let chain: Vec<(u64, Option<&str>, Option<&str>)> = r.chains[0]
        .iter()
        .map(|s| (s.seq, s.tool.as_deref(), s.via.as_deref()))
        .collect();
    assert_eq!(
        chain,
        [
            (0, Some("hand_off"), None),
            (0, Some("run_job"), Some("parent_event")),
            (1, Some("sub_task"), Some("same-log")),
            (0, Some("do_it"), Some("parent_event")),
        ],
        "{}",
        r.to_text()
    );
    // The cycle C 1 -> B 2 -> C 1 is followed once: no chain holds an event twice.
    assert!(
        r.chains
            .iter()
            .any(|c| c.len() >= 2 && c[0].seq == 1 && c[1].seq == 2),
        "{:#?}",
        r.chains
    );
    for c in &r.chains {
        let mut nodes: Vec<_> = c.iter().map(|s| (s.recorder, s.seq)).collect();
        nodes.sort();
        nodes.dedup();
        assert_eq!(nodes.len(), c.len(), "{c:#?}");
    }
    // Every string from a file or the case file is escaped in the text report.
    let text = r.to_text();
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{202e}'),
        "{text}"
    );
    assert!(text.contains("\\u{1b}[2Jspoof"), "{text}");
    let (code, out, _) = run(&[case.as_os_str(), "--json".as_ref()]);
    assert_eq!(code, 1);
    assert!(!out.contains('\u{1b}'), "{out}");
    serde_json::from_str::<Value>(&out).unwrap();
}

#[test]
fn a_trust_without_cases_is_unchanged() {
    // A trust file naming bundles is refused where a trust file is expected, and accepted
    // as a case file.
    let text = format!(
        "chain_id = 1\n[[party]]\nname = \"Acme\"\nrecorders = [\"{ADDR_A}\"]\nbundles = [\"a.bundle\"]\n"
    );
    let e = Trust::new(Some(("c.toml", &text)), None, None, None).unwrap_err();
    assert!(e.to_string().contains("that is a case file"), "{e}");
    let (t, ev) = Trust::case(("c.toml", &text), None, None).unwrap();
    assert_eq!(t.parties.len(), 1);
    assert_eq!(ev[0].bundles, ["a.bundle"]);
}
