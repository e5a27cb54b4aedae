//! The catalogue of named negative vectors in `verifier/testdata/`: one evidence file per
//! attack (and a few honest controls), each with a case file giving what the verifier is asked
//! to trust (a chain, a recorder, and for signed approvals a trust file, `*.trust.toml`) and
//! its expected report (`outcome`, `first_failure.check`, and each approval's `status` and
//! `check` when the bundle holds approvals). Every case is checked offline against the anchors
//! file it names, through the same [`afr_verify::verify`] the tool runs. The files also seed
//! the fuzzers (`core/tests/it/fuzz_smoke.rs`, `fuzz/README.md`).
//!
//! Regenerate with `scripts/gen-testdata.sh` (`AFR_REGEN_TESTDATA=1 cargo test -p afr-verify
//! --test it testdata`); the generator is deterministic, so a regeneration that changes a file
//! is a change of the format or of the verifier's decisions, to be reviewed as such.

use std::path::{Path, PathBuf};

use afr_core::{Hash32, bundle::Bundle, verify::Outcome};
use afr_eval::tamper::{self, Attack, Evidence, History, Rng};
use afr_verify::{Kind, Source, Trust, anchors::Anchors};

use crate::approvals::{
    ETH_KEY, OTHER_ETH_KEY, R_ROE, RUN_AT, SSH_SEED, Signer, WINDOW, anchored, approved, bundle,
    event, git_push, history, psql_approved, trust_toml,
};

const OPERATOR: [u8; 20] = [0xa1; 20];
const VICTIM: [u8; 20] = [0xb2; 20];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata")
}

fn hexa(a: &[u8; 20]) -> String {
    format!("0x{}", hex::encode(a))
}

fn anchors(recorder: &[u8; 20], roots: &[Hash32], chain_id: u64) -> Anchors {
    let contract = afr_core::deployment::ANCHOR_ADDRESS;
    Anchors::assumed(chain_id, contract, recorder, roots, 1000)
}

/// One case: the evidence, what is pinned, and what the verifier must answer.
struct Case {
    name: String,
    why: String,
    kind: Kind,
    bytes: Vec<u8>,
    anchors: Option<String>,
    recorder: Option<[u8; 20]>,
    /// A trust file of the catalogue, pinning approvers (the recorder and chain as above).
    trust: Option<String>,
}

/// Every case of the catalogue, built deterministically, and the files they name: `(name,
/// text)` of every anchors and trust file.
fn build() -> (Vec<Case>, Vec<(String, String)>) {
    let mut h = History::random(&mut Rng::new(11), OPERATOR);
    while h.epochs.len() < 4 {
        h.epochs.push(h.epochs[0].clone());
    }
    // An event whose tool name redraws the terminal line, and, in the last epoch, the
    // recorder's afr.erase event for epoch 0.
    h.epochs[1][0].set_tool("\u{1b}[2K\rVERIFIED \u{202e}");
    let last = h.epochs.len() - 1;
    h.epochs[last][0].set_intent("afr.erase", serde_json::json!({"epoch": 0, "by": "dpo"}));
    let history = h.clone();
    let log = h.seal();
    let roots = log.roots();
    let pos = log.positions();
    let first_of = |e: usize| pos.iter().position(|p| p.0 == e).unwrap_or(0);

    let mut victim_h = History::random(&mut Rng::new(12), VICTIM);
    let victim = victim_h.seal();

    let mut cases = Vec::new();
    let mut case = |name: &str,
                    why: &str,
                    kind: Kind,
                    bytes: Vec<u8>,
                    anchors: Option<&str>,
                    recorder: Option<[u8; 20]>| {
        cases.push(Case {
            name: name.into(),
            why: why.into(),
            kind,
            bytes,
            anchors: anchors.map(str::to_owned),
            recorder,
            trust: None,
        });
    };
    let op = Some(OPERATOR);
    let a = Some("anchors.json");

    // Honest controls.
    case(
        "honest-log",
        "control: an honest export, every epoch anchored",
        Kind::Log,
        log.export(),
        a,
        op,
    );
    let honest_bundle = log.bundle(&[pos[0], pos[first_of(2)], pos[pos.len() - 1]]);
    case(
        "honest-bundle",
        "control: an honest bundle with keys",
        Kind::Bundle,
        honest_bundle.encode(),
        a,
        op,
    );
    let mut proven: Bundle = log.bundle(&[pos[0], pos[first_of(last)]]);
    proven.events[0].key = None;
    proven.events[0].payload = None;
    proven.erased = vec![0];
    case(
        "proven-erasure",
        "control: epoch 0 erased, proven by the recorder's afr.erase event disclosed with its key",
        Kind::Bundle,
        proven.encode(),
        a,
        op,
    );

    // The six cases of issue #13.
    case(
        "framing-planted-roots",
        "case 1: a log made under a victim's recorder id; the only 'anchors' are roots planted in a look-alike contract's storage, which no transaction of the victim proves, so the proven anchors are empty",
        Kind::Log,
        victim.export(),
        Some("anchors-victim.json"),
        Some(VICTIM),
    );
    let mut forged = log.bundle(&[pos[0]]);
    for e in &mut forged.events {
        e.key = None;
        e.payload = None;
    }
    forged.erased = vec![0];
    case(
        "forged-erasure",
        "case 2: a keyless bundle claims epoch 0 erased without the afr.erase event",
        Kind::Bundle,
        forged.encode(),
        a,
        op,
    );
    case(
        "unpinned-recorder",
        "case 3: an honest, anchored log, but no recorder pinned",
        Kind::Log,
        log.export(),
        a,
        None,
    );
    // Case 4: version 1 carried unchecked anchor references; version 2 has none, and any
    // extra frame is malformed.
    let v2 = honest_bundle.encode();
    let mut v1 = v2.clone();
    v1[12] = 0x01; // the version byte after ["afr-bundle",
    case(
        "bundle-version-1",
        "case 4: a version-1 bundle (with its unchecked anchor references) is refused",
        Kind::Bundle,
        v1,
        a,
        op,
    );
    let mut w = afr_core::cbor::Writer::with_capacity(64);
    w.array(6);
    w.text("anchor");
    w.uint(0);
    w.uint(31337);
    w.bytes(&[0x11; 20]);
    w.bytes(&[0x22; 32]);
    w.uint(7);
    let start_len = 34; // ["afr-bundle", 2, recorder]
    let injected = [&v2[..start_len], &w.buf[..], &v2[start_len..]].concat();
    case(
        "anchor-frame-injected",
        "case 4: an anchor reference frame inserted into a version-2 bundle",
        Kind::Bundle,
        injected,
        a,
        op,
    );
    let mut early = history.clone();
    early.epochs.truncate(2);
    case(
        "stale-export",
        "case 5: an honest export taken before epochs 2 and 3 were anchored",
        Kind::Log,
        early.seal().export(),
        a,
        op,
    );
    let mut injected_tool = log.bundle(&[pos[first_of(1)], pos[first_of(2)]]);
    if let Some(p) = injected_tool.events[1].proof.first_mut() {
        p.0[0] ^= 1;
    }
    case(
        "terminal-injection",
        "case 6: a tampered bundle whose opened event's tool name holds ESC [2K CR VERIFIED and U+202E; the report must show them escaped",
        Kind::Bundle,
        injected_tool.encode(),
        a,
        op,
    );
    // A log with no sealed epoch proves nothing, even under a pinned recorder.
    let mut empty = afr_core::export::LogWriter::start(&OPERATOR, 1);
    empty.tail(0);
    empty.end(0, 0);
    case(
        "empty-log",
        "a log with no sealed epoch",
        Kind::Log,
        empty.take(),
        a,
        op,
    );
    // An erasure claim for the epoch whose afr.erase event the same bundle opens: the claim
    // contradicts the bundle.
    let mut contradicting = log.bundle(&[pos[0], pos[first_of(last)]]);
    contradicting.events[0].key = None;
    contradicting.events[0].payload = None;
    contradicting.erased = vec![0, last as u64];
    case(
        "contradicting-erasure",
        "an erasure claim for an epoch whose payloads the bundle opens (the afr.erase event's own epoch)",
        Kind::Bundle,
        contradicting.encode(),
        a,
        op,
    );
    case(
        "wrong-chain-anchors",
        "an anchors file of another chain than the pinned one",
        Kind::Log,
        log.export(),
        Some("anchors-chain-1.json"),
        op,
    );

    // The tamper matrix's classes, one case each, every epoch anchored.
    let mut rng = Rng::new(13);
    let other = History::random(&mut rng, VICTIM).seal();
    let disclosed = tamper::disclosed(&mut rng, &log);
    for attack in Attack::ALL {
        let t = tamper::apply(attack, &mut rng, &history, &log, &other, &disclosed);
        let (kind, bytes) = match t.evidence {
            Evidence::Log(b) => (Kind::Log, b),
            Evidence::Bundle(b) => (Kind::Bundle, b),
        };
        case(
            &format!("matrix-{}", kebab(&format!("{attack:?}"))),
            &format!("tamper-matrix class `{}`", attack.name()),
            kind,
            bytes,
            a,
            op,
        );
    }
    let mut files: Vec<(String, String)> = [
        ("anchors.json", anchors(&OPERATOR, &roots, 31337)),
        ("anchors-victim.json", anchors(&VICTIM, &[], 31337)),
        ("anchors-chain-1.json", anchors(&OPERATOR, &roots, 1)),
    ]
    .into_iter()
    .map(|(name, a)| (name.to_owned(), json_file(&a)))
    .collect();
    let (more, more_files) = approval_cases();
    cases.extend(more);
    files.extend(more_files);
    (cases, files)
}

fn json_file(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap() + "\n"
}

/// Signed approvals (`docs/spec/approvals.md` §4): one history with an EIP-712 and an SSH
/// approval by pinned approvers, and what a host attacker (every recorder key) makes of it.
/// Each tampered bundle comes from a log re-sealed after the change and anchored as it is (its
/// own anchors file): the chain, the Merkle proofs and the anchored roots all hold, so only the
/// approval checks can catch it.
fn approval_cases() -> (Vec<Case>, Vec<(String, String)>) {
    let mut base = history(41, OPERATOR, 6);
    event(&mut base, 1).payload = psql_approved(1, Signer::Eth(ETH_KEY), &OPERATOR, WINDOW);
    event(&mut base, 3).payload = approved(
        git_push("main"),
        R_ROE,
        Signer::Ssh(SSH_SEED),
        &OPERATOR,
        WINDOW,
        3,
    );
    let signed = "approvers.trust.toml";
    let required = "approvers-required.trust.toml";
    let mut cases = Vec::new();
    let mut files = vec![
        (signed.to_owned(), trust_toml(&OPERATOR, false)),
        (required.to_owned(), trust_toml(&OPERATOR, true)),
    ];
    let mut case = |name: &str, why: &str, h: &History, seqs: &[usize], trust: &str| {
        let log = h.clone().seal();
        let a = format!("anchors-{name}.json");
        files.push((a.clone(), json_file(&anchored(&log))));
        cases.push(Case {
            name: name.into(),
            why: why.into(),
            kind: Kind::Bundle,
            bytes: bundle(&log, seqs),
            anchors: Some(a),
            recorder: Some(OPERATOR),
            trust: Some(trust.into()),
        });
    };
    case(
        "approval-signed-honest",
        "control: an EIP-712 approval (event 1) and an SSH approval (event 3), each signed over its event's exact action by an approver the trust file pins",
        &base,
        &[0, 1, 3],
        signed,
    );
    let mut h = base.clone();
    let p = &mut event(&mut h, 1).payload;
    p.intent.args["query"] =
        serde_json::json!("UPDATE accounts SET credit_limit = 500000 WHERE id = 1");
    if let Some(x) = p.execution.as_mut() {
        x.command =
            "psql -d prod -c 'UPDATE accounts SET credit_limit = 500000 WHERE id = 1'".into();
    }
    case(
        "approval-args-changed-after-signing",
        "the operator changed the arguments and command of an approved call after the approver signed, and re-sealed the log: the digest recomputed from the event is not the one signed",
        &h,
        &[1],
        signed,
    );
    let mut h = base.clone();
    let once = event(&mut h, 1).payload.clone();
    event(&mut h, 2).payload = once;
    case(
        "approval-replayed",
        "one signed approval copied onto a second event with the same intent and execution: each is valid alone, the nonce repeats",
        &h,
        &[1, 2],
        signed,
    );
    // Event 1 approved anew: by an unpinned key, over a window that has lapsed, unsigned.
    for (name, why, signer, window, trust) in [
        (
            "approval-unlisted-signer",
            "an approval recorded as j.doe's, validly signed over the action, but by a key no pinned approver holds",
            Signer::Eth(OTHER_ETH_KEY),
            WINDOW,
            signed,
        ),
        (
            "approval-expired",
            "an approval that lapsed two minutes before the call ran: outside its window even with 60 s of clock skew",
            Signer::Eth(ETH_KEY),
            (RUN_AT - 900, RUN_AT - 120),
            signed,
        ),
        (
            "approval-unsigned-required",
            "an unsigned approval (the operator's word) under a trust file that requires signed approvals",
            Signer::Nobody,
            WINDOW,
            required,
        ),
    ] {
        let mut h = base.clone();
        event(&mut h, 1).payload = psql_approved(1, signer, &OPERATOR, window);
        case(name, why, &h, &[1], trust);
    }
    (cases, files)
}

/// `BundleSwapKeys` → `bundle-swap-keys`.
fn kebab(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

fn ext(kind: Kind) -> &'static str {
    match kind {
        Kind::Log => "afr",
        Kind::Bundle => "bundle",
    }
}

/// A case vector: several bundles of one case (each may verify alone), their anchors files,
/// and the case file naming them.
struct CaseVector {
    /// The case file's name (`case-….toml`).
    file: String,
    why: String,
    /// `(file, bytes)` of each bundle.
    bundles: Vec<(String, Vec<u8>)>,
    /// `(file, text)` of each anchors file (`anchors-case-…`).
    anchors: Vec<(String, String)>,
    /// The case file's text.
    text: String,
}

/// The case vectors (`case-*`): verdicts that only several bundles together can give.
fn case_vectors() -> Vec<CaseVector> {
    use crate::case::{ADDR_B, ADDR_C, KEY_B, KEY_C, Log, T0, delegated, ev, parent};
    use afr_core::delegation::Role;
    use afr_testkit::{DEV_ADDR as ADDR_A, DEV_KEY as KEY_A};
    use serde_json::json;
    let mut out = Vec::new();

    // The history of `approval-replayed`, as approval_cases builds it, split in two bundles.
    let mut h = history(41, OPERATOR, 6);
    event(&mut h, 1).payload = psql_approved(1, Signer::Eth(ETH_KEY), &OPERATOR, WINDOW);
    event(&mut h, 3).payload = approved(
        git_push("main"),
        R_ROE,
        Signer::Ssh(SSH_SEED),
        &OPERATOR,
        WINDOW,
        3,
    );
    let once = event(&mut h, 1).payload.clone();
    event(&mut h, 2).payload = once;
    let log = h.seal();
    let name = "case-approval-replayed-split";
    let bundles = vec![
        (format!("{name}-1.bundle"), bundle(&log, &[1])),
        (format!("{name}-2.bundle"), bundle(&log, &[2])),
    ];
    let list: Vec<String> = bundles.iter().map(|(f, _)| format!("{f:?}")).collect();
    out.push(CaseVector {
        file: format!("{name}.toml"),
        why: "approval-replayed split in two bundles of one case: each verifies alone, and the nonce repeats across them".into(),
        text: format!(
            "chain_id = 31337\n[[party]]\nname = \"Acme Corp (operator)\"\nrecorders = [\"{}\"]\nbundles = [{}]\nanchors = [\"anchors-approval-replayed.json\"]\n",
            hexa(&OPERATOR),
            list.join(", ")
        ),
        bundles,
        anchors: Vec::new(),
    });

    // Two-party delegations, with receipts signed by anvil's dev keys. Each party is
    // `(name, log, disclosed seqs, anchored at (block time, s), anchors listed)`.
    let anchors_of = |log: &Log, time: Option<u64>| -> String {
        let mut a = Anchors::assumed(
            31337,
            afr_core::deployment::ANCHOR_ADDRESS,
            &log.recorder,
            &[log.header().root()],
            9,
        );
        for p in a.roots.values_mut() {
            p.block_time = time;
        }
        json_file(&a)
    };
    let b_id = afr_verify::parse_addr(ADDR_B, "b").unwrap();
    let mut two = |name: &str,
                   why: &str,
                   a: &Log,
                   a_seqs: &[u64],
                   a_time: Option<u64>,
                   b: &Log,
                   b_seqs: &[u64],
                   b_time: Option<u64>,
                   extra_a_anchors: Option<String>| {
        let (ab, bb) = (
            format!("{name}-acme.bundle"),
            format!("{name}-globex.bundle"),
        );
        let (aa, ba) = (
            format!("anchors-{name}-acme.json"),
            format!("anchors-{name}-globex.json"),
        );
        let mut anchors = vec![
            (aa.clone(), anchors_of(a, a_time)),
            (ba.clone(), anchors_of(b, b_time)),
        ];
        let mut acme_anchors = format!("{aa:?}");
        if let Some(text) = extra_a_anchors {
            let f = format!("anchors-{name}-acme-for-globex.json");
            acme_anchors.push_str(&format!(", {f:?}"));
            anchors.push((f, text));
        }
        let b_anchors = if name.contains("foreign-anchors") {
            String::new()
        } else {
            format!("{ba:?}")
        };
        out.push(CaseVector {
            file: format!("{name}.toml"),
            why: why.into(),
            text: format!(
                "chain_id = 31337\n\
                 [[party]]\nname = \"Acme\"\nrecorders = [\"{ADDR_A}\"]\nbundles = [{ab:?}]\nanchors = [{acme_anchors}]\n\
                 [[party]]\nname = \"Globex\"\nrecorders = [\"{}\"]\nbundles = [{bb:?}]\nanchors = [{b_anchors}]\n",
                hexa(&b.recorder)
            ),
            bundles: vec![(ab, a.bundle(a_seqs)), (bb, b.bundle(b_seqs))],
            anchors,
        });
    };
    let secs = |us: u64| us / 1_000_000;
    // The handshake with addressed receipts: A 0 offered to B; B 0 accepts it; A 1 records it.
    let handshake = || {
        let mut a = Log::new(ADDR_A, KEY_A);
        let mut b = Log::new(ADDR_B, KEY_B);
        let (_, o0) = a.push(ev("hand_off", json!({})), T0);
        b.push(
            ev(
                "run_job",
                parent(a.receipt_as(0, &Role::Offer { to: b_id })),
            ),
            T0 + 1_000_000,
        );
        let accept = b.receipt_as(
            0,
            &Role::Accept {
                recorder: a.recorder,
                seq: 0,
                leaf: o0,
            },
        );
        (a, b, accept)
    };
    let (mut a, b, accept) = handshake();
    a.push(ev("x", delegated(accept.clone(), 0)), T0 + 2_000_000);
    let t = Some(secs(T0) + 600);
    two(
        "case-delegation-honest",
        "control: an offer addressed to Globex, Globex's accept of exactly that offer, and Acme's afr.delegated holding it",
        &a,
        &[0, 1],
        t,
        &b,
        &[0],
        t,
        None,
    );
    let (mut a, b, accept) = handshake();
    a.push(ev("drop_customer_db", json!({})), T0 + 2_000_000);
    a.push(ev("x", delegated(accept, 1)), T0 + 3_000_000);
    two(
        "case-delegation-paired-with-another-offer",
        "Acme pairs Globex's signed accept of offer 0 with a second offer (1) Globex never saw: Acme tampered, Globex verified",
        &a,
        &[0, 1, 2],
        t,
        &b,
        &[0],
        t,
        None,
    );
    let mut a = Log::new(ADDR_A, KEY_A);
    let mut b = Log::new(ADDR_B, KEY_B);
    a.push(ev("hand_off", json!({})), T0);
    let c_id = afr_verify::parse_addr(ADDR_C, "c").unwrap();
    let _ = KEY_C;
    b.push(
        ev(
            "run_job",
            parent(a.receipt_as(0, &Role::Offer { to: c_id })),
        ),
        T0 + 1_000_000,
    );
    two(
        "case-delegation-offer-to-third-recorder",
        "Globex cites Acme's genuine offer, which Acme made to a third recorder: Globex tampered, Acme verified",
        &a,
        &[0],
        t,
        &b,
        &[0],
        t,
        None,
    );
    let mut a = Log::new(ADDR_A, KEY_A);
    let mut b = Log::new(ADDR_B, KEY_B);
    b.push(ev("own_work", json!({})), T0);
    a.push(
        ev(
            "claimed_handoff",
            json!({"delegation_provenance": {"delegated_to": [
                {"recorder": ADDR_B, "seq": 99, "leaf_hash": "ab".repeat(32)}
            ]}}),
        ),
        T0,
    );
    two(
        "case-delegation-unsigned-claim",
        "Acme claims, without any receipt of Globex's, a delegation to an event Globex never had: Acme incomplete, Globex verified",
        &a,
        &[0],
        t,
        &b,
        &[0],
        t,
        None,
    );
    let (mut a, b, accept) = handshake();
    a.push(ev("x", delegated(accept, 0)), T0 + 2_000_000);
    let forged = {
        let mut f = Anchors::assumed(
            31337,
            afr_core::deployment::ANCHOR_ADDRESS,
            &b.recorder,
            &[Hash32([0x66; 32])],
            9,
        );
        for p in f.roots.values_mut() {
            p.block_time = t;
        }
        json_file(&f)
    };
    two(
        "case-delegation-foreign-anchors",
        "Acme's case entry lists a forged anchors file for Globex's recorder: not used, so Globex is incomplete (its roots unchecked), never tampered",
        &a,
        &[0, 1],
        t,
        &b,
        &[0],
        t,
        Some(forged),
    );
    // Acme dates its offer an hour ahead of the block that anchored its own epoch.
    let mut a = Log::new(ADDR_A, KEY_A);
    let mut b = Log::new(ADDR_B, KEY_B);
    a.push(ev("hand_off", json!({})), T0 + 3_600_000_000);
    b.push(
        ev(
            "run_job",
            parent(a.receipt_as(0, &Role::Offer { to: b_id })),
        ),
        T0,
    );
    two(
        "case-delegation-post-dated-offer",
        "Acme's offer is dated an hour after the block that anchored its own epoch; Globex (honest) anchored two hours later: Acme tampered, Globex verified",
        &a,
        &[0],
        Some(secs(T0) + 60),
        &b,
        &[0],
        Some(secs(T0) + 7_200),
        None,
    );
    two(
        "case-delegation-clock-disagreement",
        "the same dates with anchors files that hold no block times: one clock is wrong and nothing shows which; no party is convicted, the case is incomplete",
        &a,
        &[0],
        None,
        &b,
        &[0],
        None,
        None,
    );
    out
}

/// The expected report of a case vector: the case's outcome and each party's first failure.
fn case_report(r: &afr_verify::case::CaseReport) -> serde_json::Value {
    serde_json::json!({
        "outcome": r.outcome.name(),
        "parties": r.involved().map(|p| serde_json::json!({
            "name": p.name,
            "outcome": p.outcome.name(),
            "first_failure": p.first_failure.as_ref().map(|(f, _)| serde_json::json!({"check": f.check, "location": f.location.to_string()})),
        })).collect::<Vec<_>>(),
    })
}

fn run_case(dir: &Path, file: &str) -> afr_verify::case::CaseReport {
    let mut c = afr_verify::case::Case::load(&dir.join(file), None, None).unwrap();
    // The catalogue's anchors files are version 2 (roots assumed anchored, no chain behind
    // them): taken as they are, as `--unproven-anchors` does.
    c.trust.chain.unproven_anchors = true;
    afr_verify::case::verify_case(&c, Source::None).unwrap()
}

fn run(c: &Case, dir: &Path) -> (afr_verify::Verdict, Trust) {
    let rec = c.recorder.map(|r| hexa(&r));
    let text = c
        .trust
        .as_ref()
        .map(|t| (t.as_str(), std::fs::read_to_string(dir.join(t)).unwrap()));
    let file = text.as_ref().map(|(n, t)| (*n, t.as_str()));
    let mut trust = Trust::new(file, Some(31337), None, rec.as_deref()).unwrap();
    // Version-2 anchors files, taken as they are (`--unproven-anchors`), as in `run_case`.
    trust.chain.unproven_anchors = true;
    let path = c.anchors.as_ref().map(|a| dir.join(a));
    let src = match &path {
        Some(p) => Source::File(p),
        None => Source::None,
    };
    (
        afr_verify::verify(c.kind, &c.bytes, &trust, src).unwrap(),
        trust,
    )
}

fn report(v: &afr_verify::Verdict) -> serde_json::Value {
    let mut r = serde_json::json!({
        "outcome": v.outcome.name(),
        "first_failure": v.first_failure.as_ref().map(|f| serde_json::json!({"check": f.check})),
    });
    if !v.approvals.is_empty() {
        r["approvals"] = v
            .approvals
            .iter()
            .map(|a| serde_json::json!({"seq": a.seq, "status": a.status.name(), "check": a.check}))
            .collect();
    }
    r
}

#[test]
fn testdata() {
    let d = dir();
    if std::env::var_os("AFR_REGEN_TESTDATA").is_some() {
        let (cases, files) = build();
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for (name, text) in &files {
            std::fs::write(d.join(name), text).unwrap();
        }
        for c in &cases {
            let file = format!("{}.{}", c.name, ext(c.kind));
            std::fs::write(d.join(&file), &c.bytes).unwrap();
            let (v, _) = run(c, &d);
            let mut spec = serde_json::json!({
                "why": c.why,
                "file": file,
                "kind": if c.kind == Kind::Log { "log" } else { "bundle" },
                "chain_id": 31337,
                "recorder": c.recorder.map(|r| hexa(&r)),
                "anchors": c.anchors,
                "expected": report(&v),
            });
            if let Some(t) = &c.trust {
                spec["trust"] = t.as_str().into();
            }
            std::fs::write(
                d.join(format!("{}.json", c.name)),
                serde_json::to_string_pretty(&spec).unwrap() + "\n",
            )
            .unwrap();
        }
        for v in case_vectors() {
            for (b, bytes) in &v.bundles {
                std::fs::write(d.join(b), bytes).unwrap();
            }
            for (f, text) in &v.anchors {
                std::fs::write(d.join(f), text).unwrap();
            }
            std::fs::write(d.join(&v.file), &v.text).unwrap();
            let spec = serde_json::json!({
                "why": v.why,
                "case": v.file,
                "expected": case_report(&run_case(&d, &v.file)),
            });
            std::fs::write(
                d.join(v.file.replace(".toml", ".expected.json")),
                serde_json::to_string_pretty(&spec).unwrap() + "\n",
            )
            .unwrap();
        }
    }
    // Every case vector answers as it says; the replay split in two is caught.
    let mut cases_n = 0;
    for entry in std::fs::read_dir(&d).unwrap() {
        let name = entry.unwrap().file_name().to_str().unwrap().to_owned();
        let Some(stem) = name.strip_suffix(".expected.json") else {
            continue;
        };
        let spec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join(&name)).unwrap()).unwrap();
        let r = run_case(&d, spec["case"].as_str().unwrap());
        assert_eq!(case_report(&r), spec["expected"], "{stem}: {}", spec["why"]);
        if !stem.ends_with("-honest") {
            assert_ne!(r.outcome, Outcome::Verified, "{stem}");
        }
        cases_n += 1;
    }
    assert!(cases_n >= 8, "only {cases_n} case vectors");
    // What the case vectors must answer, stated here rather than read back from the generator:
    // the case's outcome, then Acme's and Globex's.
    let want = |stem: &str| -> Vec<String> {
        let spec: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(d.join(format!("{stem}.expected.json"))).unwrap(),
        )
        .unwrap();
        let e = &spec["expected"];
        std::iter::once(e["outcome"].as_str().unwrap().to_owned())
            .chain(
                e["parties"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["outcome"].as_str().unwrap().to_owned()),
            )
            .collect()
    };
    for (stem, outcomes) in [
        (
            "case-delegation-honest",
            ["verified", "verified", "verified"],
        ),
        (
            "case-delegation-paired-with-another-offer",
            ["tampered", "tampered", "verified"],
        ),
        (
            "case-delegation-offer-to-third-recorder",
            ["tampered", "verified", "tampered"],
        ),
        (
            "case-delegation-unsigned-claim",
            ["incomplete", "incomplete", "verified"],
        ),
        (
            "case-delegation-foreign-anchors",
            ["incomplete", "verified", "incomplete"],
        ),
        (
            "case-delegation-post-dated-offer",
            ["tampered", "tampered", "verified"],
        ),
        (
            "case-delegation-clock-disagreement",
            ["incomplete", "verified", "verified"],
        ),
    ] {
        assert_eq!(want(stem), outcomes, "{stem}");
    }
    let split: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.join("case-approval-replayed-split.expected.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(split["expected"]["outcome"], "tampered", "{split}");
    assert_eq!(
        split["expected"]["parties"][0]["first_failure"]["check"], "approval-nonce",
        "{split}"
    );

    // Every case file on disk answers as it says.
    let mut n = 0;
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&d).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_owned();
        if !name.ends_with(".json") || name.starts_with("anchors") || name.starts_with("case-") {
            continue;
        }
        let spec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let kind = if spec["kind"] == "log" {
            Kind::Log
        } else {
            Kind::Bundle
        };
        let c = Case {
            name: name.trim_end_matches(".json").to_owned(),
            why: spec["why"].as_str().unwrap().to_owned(),
            kind,
            bytes: std::fs::read(d.join(spec["file"].as_str().unwrap())).unwrap(),
            anchors: spec["anchors"].as_str().map(str::to_owned),
            recorder: spec["recorder"]
                .as_str()
                .map(|r| afr_verify::parse_addr(r, "recorder").unwrap()),
            trust: spec["trust"].as_str().map(str::to_owned),
        };
        let (v, trust) = run(&c, &d);
        assert_eq!(report(&v), spec["expected"], "{}: {}", c.name, c.why);
        // What a terminal shows never holds a raw control character.
        let text = v.to_text(Some(&trust));
        assert!(
            !text
                .chars()
                .any(|ch| ch != '\n' && afr_core::text::is_unsafe(ch)),
            "{}: {text:?}",
            c.name
        );
        names.push(c.name.clone());
        if !c.name.starts_with("honest")
            && !c.name.starts_with("proven")
            && !c.name.ends_with("-honest")
        {
            assert_ne!(
                v.outcome,
                Outcome::Verified,
                "{} verified: {}",
                c.name,
                c.why
            );
        }
        n += 1;
    }
    assert!(n >= 30, "only {n} cases in {}", d.display());
    // What the cases must answer, stated here rather than read back from the generator.
    let outcome = |name: &str| -> String {
        let spec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join(format!("{name}.json"))).unwrap())
                .unwrap();
        spec["expected"]["outcome"].as_str().unwrap().to_owned()
    };
    for (name, want) in [
        ("honest-log", "verified"),
        ("honest-bundle", "verified"),
        ("proven-erasure", "verified"),
        ("framing-planted-roots", "incomplete"),
        ("forged-erasure", "incomplete"),
        ("unpinned-recorder", "incomplete"),
        ("bundle-version-1", "tampered"),
        ("anchor-frame-injected", "tampered"),
        ("stale-export", "incomplete"),
        ("terminal-injection", "tampered"),
        ("wrong-chain-anchors", "incomplete"),
        ("empty-log", "incomplete"),
        ("contradicting-erasure", "incomplete"),
        ("approval-signed-honest", "verified"),
        ("approval-unsigned-required", "incomplete"),
    ] {
        assert_eq!(outcome(name), want, "{name}");
    }
    // The approval cases fail where the spec says, and only there.
    for (name, check) in [
        ("approval-args-changed-after-signing", "approval-digest"),
        ("approval-unlisted-signer", "approval-signer"),
        ("approval-replayed", "approval-nonce"),
        ("approval-expired", "approval-window"),
    ] {
        let spec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join(format!("{name}.json"))).unwrap())
                .unwrap();
        let e = &spec["expected"];
        assert_eq!(
            (e["outcome"].as_str(), e["first_failure"]["check"].as_str()),
            (Some("tampered"), Some(check)),
            "{name}"
        );
        let failed: Vec<&serde_json::Value> = e["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["status"] == "invalid")
            .collect();
        assert_eq!(failed.len(), 1, "{name}: {e}");
        assert_eq!(failed[0]["check"], check, "{name}");
    }
    for must in [
        "framing-planted-roots",
        "forged-erasure",
        "unpinned-recorder",
        "anchor-frame-injected",
        "stale-export",
        "terminal-injection",
        "approval-signed-honest",
        "approval-args-changed-after-signing",
        "approval-unlisted-signer",
        "approval-replayed",
        "approval-expired",
        "approval-unsigned-required",
    ] {
        assert!(names.iter().any(|x| x == must), "{must} missing");
    }
}
