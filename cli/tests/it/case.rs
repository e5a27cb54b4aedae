//! `afr-verify case` on a real anvil: two recorders (two anchoring keys, one contract) that
//! delegate to each other through `afr delegate`, and the denials a case exposes
//! (`docs/spec/delegation.md`, section 4). The bundles come from the real `afr` binary; the
//! verdict from the `afr_verify` library behind `afr-verify`.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use afr_core::{
    delegation::Receipt,
    verify::Outcome::{self, Incomplete, Tampered, Verified},
};
use afr_testkit::{DEV_ADDR, DEV_KEY, anvil};
use afr_verify::{
    Source, Trust,
    anchors::Anchors,
    case::{Blame, Case, CaseReport, Link, verify_case},
};
use serde_json::{Value, json};

use super::{
    afr,
    delegate::{receipt_args, write},
    ok,
};

/// Anvil's second dev account: the receiving organisation's anchoring key.
const KEY_B: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const ADDR_B: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
/// Anvil's third dev account: a recorder of neither organisation.
const KEY_C: &str = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";
const ADDR_C: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";

/// One organisation's recorder: its directory and anchoring key.
struct Org {
    dir: PathBuf,
    key: &'static str,
}

impl Org {
    /// A fresh recorder (`afr init`) in `dir`, anchoring with `key`.
    fn init(dir: PathBuf, key: &'static str) -> Org {
        let o = Org { dir, key };
        o.run(&["init"]);
        o
    }

    /// Its recorder id: the address of its anchoring key.
    fn id(&self) -> &'static str {
        match self.key {
            DEV_KEY => DEV_ADDR,
            KEY_B => ADDR_B,
            KEY_C => ADDR_C,
            k => panic!("no address known for key {k}"),
        }
    }

    /// `afr --dir DIR` signing and anchoring with this organisation's key.
    fn afr(&self) -> Command {
        let mut c = afr(&self.dir);
        c.env("AFR_ANCHOR_KEY", self.key)
            .env_remove("AFR_KEYSTORE_PASSWORD")
            .env_remove("AFR_KEYSTORE_PASSWORD_FILE")
            .env_remove("AFR_RPC_URL");
        c
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        ok(self.afr().args(args))
    }

    /// Records `event` (JSON) with `afr record`.
    fn record(&self, event: &Value) {
        let f = self
            .dir
            .with_extension(format!("{}.json", rand_name(event)));
        std::fs::write(&f, format!("{event}\n")).unwrap();
        ok(self.afr().arg("record").arg(&f));
    }

    fn seal(&self) {
        self.run(&["seal"]);
    }

    fn anchor(&self, chain: &Chain) {
        self.run(&["anchor", "--rpc", &chain.url, "--contract", &chain.contract]);
    }

    /// `afr disclose [--with-keys] --seq SEQS` into `name` beside the recorders.
    fn disclose(&self, seqs: &str, keys: bool, name: &str) -> PathBuf {
        let out = self.dir.parent().unwrap().join(name);
        let mut c = self.afr();
        c.args(["disclose", "--seq", seqs, "--out"]).arg(&out);
        if keys {
            c.arg("--with-keys");
        }
        ok(&mut c);
        out
    }
}

/// A file name for an event (its hash: distinct events, distinct files).
fn rand_name(v: &Value) -> String {
    use sha2::Digest as _;
    hex::encode(&sha2::Sha256::digest(v.to_string().as_bytes())[..6])
}

/// A chain with the contract deployed.
struct Chain {
    _anvil: afr_testkit::Anvil,
    url: String,
    contract: String,
}

/// Seals and anchors A's and B's open epochs on `chain`, then each discloses its events
/// `seqs` with keys (`acme.bundle`, `globex.bundle`).
fn anchor_and_disclose(
    chain: &Chain,
    (a, a_seqs): (&Org, &str),
    (b, b_seqs): (&Org, &str),
) -> (PathBuf, PathBuf) {
    for o in [a, b] {
        o.seal();
        o.anchor(chain);
    }
    (
        a.disclose(a_seqs, true, "acme.bundle"),
        b.disclose(b_seqs, true, "globex.bundle"),
    )
}

/// A temporary directory, anvil, the contract deployed from A's key, and the two
/// organisations' recorders (A with the first dev key, B with the second) in the directory.
fn setup() -> (tempfile::TempDir, Chain, Org, Org) {
    let tmp = tempfile::tempdir().unwrap();
    let node = anvil();
    let a = Org::init(tmp.path().join("acme"), DEV_KEY);
    let b = Org::init(tmp.path().join("globex"), KEY_B);
    let out = a.run(&["deploy", "--json", "--rpc", &node.url]);
    let contract = serde_json::from_slice::<Value>(&out.stdout).unwrap()["contract"]
        .as_str()
        .unwrap()
        .to_owned();
    let url = node.url.clone();
    (
        tmp,
        Chain {
            _anvil: node,
            url,
            contract,
        },
        a,
        b,
    )
}

/// The handshake: A offers `ea`, B accepts it with `eb`, A records B's receipt. Returns A's
/// and B's receipts.
fn delegate(tmp: &Path, a: &Org, b: &Org, ea: &Value, eb: &Value) -> (Receipt, Receipt) {
    let n = rand_name(ea);
    let ea = write(tmp, &format!("ea-{n}.json"), ea);
    let eb = write(tmp, &format!("eb-{n}.json"), eb);
    let offer: Receipt =
        serde_json::from_slice(&a.run(&["delegate", "offer", &ea, "--to", b.id()]).stdout).unwrap();
    let offer_file = write(
        tmp,
        &format!("offer-{n}.json"),
        &serde_json::to_value(&offer).unwrap(),
    );
    let accepted: Receipt = serde_json::from_slice(
        &b.run(&["delegate", "accept", &eb, "--parent", &offer_file])
            .stdout,
    )
    .unwrap();
    let accepted_file = write(
        tmp,
        &format!("accepted-{n}.json"),
        &serde_json::to_value(&accepted).unwrap(),
    );
    a.run(&receipt_args(&offer_file, &accepted_file));
    (offer, accepted)
}

/// The handshake with plain events: A's `hand_off` delegated to B's `run_job`.
fn hand_off(tmp: &Path, a: &Org, b: &Org) -> (Receipt, Receipt) {
    delegate(tmp, a, b, &event("hand_off"), &event("run_job"))
}

/// A delegation event calling `tool`.
fn event(tool: &str) -> Value {
    event_with(tool, json!({}))
}

/// A delegation event calling `tool`, with the fields of `extra` besides.
fn event_with(tool: &str, extra: Value) -> Value {
    let mut v = json!({"category": "delegation", "intent": {"tool": tool, "args": {"task": "rotate keys"}}});
    if let (Value::Object(m), Value::Object(x)) = (&mut v, extra) {
        m.extend(x);
    }
    v
}

/// Writes a case file beside the bundles: Acme (recorder A) and Globex (recorder B) with
/// their bundles (file names relative to `tmp`).
fn case_file(tmp: &Path, name: &str, acme: &[&Path], globex: &[&Path]) -> PathBuf {
    let list = |b: &[&Path]| {
        b.iter()
            .map(|p| format!("{:?}", p.file_name().unwrap().to_str().unwrap()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let text = format!(
        "chain_id = 31337\n\
         [[party]]\nname = \"Acme\"\nrecorders = [\"{DEV_ADDR}\"]\nbundles = [{}]\n\
         [[party]]\nname = \"Globex\"\nrecorders = [\"{ADDR_B}\"]\nbundles = [{}]\n",
        list(acme),
        list(globex)
    );
    let p = tmp.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn rpc(chain: &Chain) -> Source<'_> {
    Source::Rpc {
        urls: std::slice::from_ref(&chain.url),
        agree: afr_verify::Agree::All,
        block: None,
        from_block: 0,
    }
}

/// The roots of recorder `rec` proven anchored on `chain` (by its own transactions), read at
/// the latest block.
fn proven(chain: &Chain, rec: &str) -> Anchors {
    fetched(chain, rec).anchors
}

/// What [`proven`] reads, with the headers and proofs it rests on.
fn fetched(chain: &Chain, rec: &str) -> afr_verify::anchors::Fetched {
    let (rpc, block) = afr_verify::anchors::Rpc::pinned(&chain.url, 31337, None).unwrap();
    rpc.fetch(
        31337,
        &chain.contract,
        &afr_verify::parse_addr(rec, "recorder").unwrap(),
        (0, block),
        None,
    )
    .unwrap()
}

fn verify(case: &Path, chain: &Chain) -> CaseReport {
    verify_case(&Case::load(case, None, None).unwrap(), rpc(chain)).unwrap()
}

/// The verdict of the party named `name`.
fn party<'a>(r: &'a CaseReport, name: &str) -> &'a afr_verify::case::PartyVerdict {
    r.parties
        .iter()
        .find(|p| p.name.as_deref() == Some(name))
        .unwrap()
}

/// Asserts the case's and each named party's outcome, with the report in the message.
fn assert_outcomes(r: &CaseReport, case: Outcome, parties: &[(&str, Outcome)]) {
    let text = r.to_text();
    assert_eq!(r.outcome, case, "{text}");
    for (name, o) in parties {
        assert_eq!(party(r, name).outcome, *o, "{name}: {text}");
    }
}

/// Asserts the case incomplete for want of Globex's evidence: Acme verified, Globex incomplete.
fn assert_globex_incomplete(r: &CaseReport) {
    assert_outcomes(r, Incomplete, &[("Acme", Verified), ("Globex", Incomplete)]);
}

/// Asserts the first failure of party `name`: its check and location.
fn assert_failure(r: &CaseReport, name: &str, check: &str, location: &str) {
    let (f, _) = party(r, name)
        .first_failure
        .as_ref()
        .unwrap_or_else(|| panic!("{}", r.to_text()));
    assert_eq!(
        (f.check.name(), f.location.to_string().as_str()),
        (check, location)
    );
}

/// Asserts the text report holds `s`, with the report in the message.
fn assert_reports(r: &CaseReport, s: &str) {
    let text = r.to_text();
    assert!(text.contains(s), "{text}");
}

/// The case's one link.
fn only_link(r: &CaseReport) -> &Link {
    let [l] = r.links.as_slice() else {
        panic!("{}", r.to_text())
    };
    l
}

#[test]
fn an_honest_case_verifies_and_withheld_or_foreign_evidence_does_not() {
    let (tmp, chain, a, b) = setup();
    let t = tmp.path();
    // A 0 hand_off, A 1 afr.delegated; B 0 run_job (parent A 0), B 1 an unrelated event.
    let (offer, accepted) = hand_off(t, &a, &b);
    assert_eq!((offer.seq, accepted.seq), (0, 0));
    b.record(&json!({"category": "shell", "intent": {"tool": "cleanup"}}));
    let (ab, bb) = anchor_and_disclose(&chain, (&a, "0-1"), (&b, "0"));

    // Honest: both parties verified, both links verified, one chain across the two.
    let case = case_file(t, "case.toml", &[&ab], &[&bb]);
    let r = verify(&case, &chain);
    assert_outcomes(&r, Verified, &[("Acme", Verified), ("Globex", Verified)]);
    assert_eq!(r.links.len(), 2, "{}", r.to_text());
    assert!(r.links.iter().all(|l| l.status == Verified));
    let j = r.to_json();
    assert_eq!(j["outcome"], "verified");
    assert_eq!(j["links"].as_array().map(Vec::len), Some(2), "{j}");
    assert_eq!(j["links"][0]["kind"], "delegated_to", "{j}");
    assert_eq!(j["links"][1]["kind"], "parent_event", "{j}");
    assert_eq!(
        j["links"][0]["from"],
        json!({"party": "Acme", "recorder": DEV_ADDR, "seq": 1})
    );
    assert_eq!(
        j["links"][0]["to"],
        json!({"party": "Globex", "recorder": ADDR_B, "seq": 0})
    );
    assert_eq!(j["links"][0]["receipt"], "signed");
    assert_eq!(
        j["chains"],
        json!([[
            {"party": "Acme", "recorder": DEV_ADDR, "seq": 0, "tool": "hand_off", "via": null, "status": null},
            {"party": "Globex", "recorder": ADDR_B, "seq": 0, "tool": "run_job", "via": "delegated_to+parent_event", "status": "verified"},
        ]]),
        "{j}"
    );
    let text = r.to_text();
    assert!(text.starts_with("CASE VERIFIED\n"), "{text}");
    assert_reports(
        &r,
        "chain: \"Acme\" 0 hand_off -[delegated_to+parent_event]-> \"Globex\" 0 run_job",
    );

    // The same bundles under a trust file, each assigned by its recorder.
    let trust_file = t.join("trust.toml");
    std::fs::write(
        &trust_file,
        format!(
            "chain_id = 31337\n[[party]]\nname = \"Acme\"\nrecorders = [\"{DEV_ADDR}\"]\n\
             [[party]]\nname = \"Globex\"\nrecorders = [\"{ADDR_B}\"]\n"
        ),
    )
    .unwrap();
    let trust_text = std::fs::read_to_string(&trust_file).unwrap();
    let trust = Trust::new(Some(("trust.toml", &trust_text)), None, None, None).unwrap();
    let loose = |bundles: Vec<PathBuf>| {
        verify_case(&Case::with_bundles(trust.clone(), bundles), rpc(&chain)).unwrap()
    };
    let r = loose(vec![bb.clone(), ab.clone()]);
    assert_outcomes(&r, Verified, &[("Acme", Verified), ("Globex", Verified)]);

    // Offline, from proof archives fetched once: each block's time comes from its header.
    let mut anchors = Vec::new();
    for rec in [DEV_ADDR, ADDR_B] {
        let f = fetched(&chain, rec);
        assert!(
            f.anchors.roots.values().all(|p| p.block_time.is_some()),
            "{:?}",
            f.anchors
        );
        let p = t.join(format!("{rec}.anchors.json"));
        std::fs::write(&p, serde_json::to_string(&f.archive).unwrap()).unwrap();
        anchors.push(p);
    }
    let mut offline = Case::load(&case, None, None).unwrap();
    offline.anchors = anchors.clone();
    let r = verify_case(&offline, Source::None).unwrap();
    assert_outcomes(&r, Verified, &[("Acme", Verified), ("Globex", Verified)]);
    for p in r.involved() {
        let notes = &p.bundles[0].verdict.notes;
        assert!(
            notes
                .iter()
                .any(|n| n.contains("re-proven offline from the proof archive")),
            "{notes:?}"
        );
    }

    // B withholds the delegated event: it discloses only its other one.
    let withheld = b.disclose("1", true, "globex-withheld.bundle");
    let r = verify(&case_file(t, "withheld.toml", &[&ab], &[&withheld]), &chain);
    assert_globex_incomplete(&r);
    let l = &r.links[0];
    assert_eq!((l.status, l.blame), (Incomplete, Some(Blame::Linked)));
    assert!(l.why.contains("is not disclosed"), "{}", l.why);
    // No bundle of B at all: the same.
    let r = verify(&case_file(t, "absent.toml", &[&ab], &[]), &chain);
    assert_globex_incomplete(&r);
    assert!(
        party(&r, "Globex")
            .missing
            .iter()
            .any(|m| m.contains("no bundle")),
        "{}",
        r.to_text()
    );

    // A linked recorder that is no party: the case, not a party, is incomplete.
    let only_a = Trust::new(
        Some((
            "a.toml",
            &format!(
                "chain_id = 31337\n[[party]]\nname = \"Acme\"\nrecorders = [\"{DEV_ADDR}\"]\n"
            ),
        )),
        None,
        None,
        None,
    )
    .unwrap();
    let r = verify_case(&Case::with_bundles(only_a, vec![ab.clone()]), rpc(&chain)).unwrap();
    assert_outcomes(&r, Incomplete, &[("Acme", Verified)]);
    assert!(
        r.missing[0].contains("is no party of the case"),
        "{}",
        r.to_text()
    );

    // A third recorder's bundle slipped in: tampered (recorder-id), under a party or loose.
    let c = Org::init(t.join("initech"), KEY_C);
    c.record(&event("run_job"));
    c.seal();
    let cb = c.disclose("0", true, "initech.bundle");
    let r = verify(&case_file(t, "slipped.toml", &[&ab], &[&bb, &cb]), &chain);
    assert_outcomes(&r, Tampered, &[("Acme", Verified), ("Globex", Tampered)]);
    assert_failure(&r, "Globex", "recorder-id", "file");
    let r = loose(vec![ab.clone(), bb.clone(), cb.clone()]);
    assert_eq!(r.outcome, Tampered, "{}", r.to_text());
    let stray = r.parties.iter().find(|p| p.name.is_none()).unwrap();
    assert_eq!(stray.outcome, Tampered);
    assert_eq!(
        stray.first_failure.as_ref().unwrap().0.check.name(),
        "recorder-id"
    );
    assert_reports(&r, "bundles of no pinned party: TAMPERED");
}

#[test]
fn a_rewritten_delegated_event_is_the_tampering_of_the_recorder_that_signed_it() {
    let (tmp, chain, a, b) = setup();
    let t = tmp.path();
    hand_off(t, &a, &b);
    // B's key anchors another history: a second store whose event 0 is something else.
    let b2 = Org::init(t.join("globex-rewritten"), KEY_B);
    b2.record(&event("did_nothing"));
    let (ab, bb) = anchor_and_disclose(&chain, (&a, "0-1"), (&b2, "0"));
    let r = verify(&case_file(t, "case.toml", &[&ab], &[&bb]), &chain);
    assert_outcomes(&r, Tampered, &[("Acme", Verified), ("Globex", Tampered)]);
    assert_failure(&r, "Globex", "delegation-link", "event 0");
    let l = only_link(&r);
    assert_eq!(
        (l.status, l.blame, l.from_seq, l.to_seq),
        (Tampered, Some(Blame::Linked), 1, 0)
    );
    assert!(l.why.contains("signed a receipt"), "{}", l.why);
    assert_reports(&r, "consistent with: a rewritten or invented delegation");
}

#[test]
fn a_delegation_the_other_side_never_received_is_the_tampering_of_its_citer() {
    let (tmp, chain, a, b) = setup();
    let t = tmp.path();
    // B's event 0 is its own work; A claims to have delegated it, once without a receipt
    // signature and once with B's genuine signature of another receipt.
    b.record(&event("run_job"));
    // A genuine receipt of B, for a signature to reuse: B's event 1.
    let c = Org::init(t.join("acme-other"), KEY_C);
    let (_, genuine) = delegate(t, &c, &b, &event("hand_off"), &event("other_job"));
    assert_eq!(genuine.seq, 1);
    let invented = "ab".repeat(32);
    let claim = |to: Value| {
        event_with(
            "claimed_handoff",
            json!({"delegation_provenance": {"delegated_to": [to]}}),
        )
    };
    a.record(&claim(
        json!({"recorder": ADDR_B, "seq": 0, "leaf_hash": invented}),
    ));
    a.record(&claim(
        json!({"recorder": ADDR_B, "seq": 0, "leaf_hash": invented, "signature": genuine.signature}),
    ));
    let (ab, bb) = anchor_and_disclose(&chain, (&a, "0-1"), (&b, "0"));
    let r = verify(&case_file(t, "case.toml", &[&ab], &[&bb]), &chain);
    assert_outcomes(&r, Tampered, &[("Acme", Tampered), ("Globex", Verified)]);
    assert_failure(&r, "Acme", "delegation-link", "event 0");
    let backing: Vec<(&str, Outcome, Option<Blame>)> = r
        .links
        .iter()
        .map(|l| (l.backing.name(), l.status, l.blame))
        .collect();
    assert_eq!(
        backing,
        [
            ("unsigned", Tampered, Some(Blame::Citing)),
            ("bad-signature", Tampered, Some(Blame::Citing)),
        ],
        "{}",
        r.to_text()
    );
}

#[test]
fn links_to_erased_events_stay_verifiable_only_with_a_proven_erasure() {
    let (tmp, chain, a, b) = setup();
    let t = tmp.path();
    hand_off(t, &a, &b);
    // B seals its epoch 0 (the accepted event) and erases it: afr.erase is its event 1.
    b.seal();
    b.run(&["erase", "--epoch", "0"]);
    // With keys: the erasure is proven by the afr.erase event the bundle carries.
    let (ab, proven) = anchor_and_disclose(&chain, (&a, "0-1"), (&b, "0"));
    let r = verify(&case_file(t, "case.toml", &[&ab], &[&proven]), &chain);
    assert_outcomes(&r, Verified, &[("Acme", Verified), ("Globex", Verified)]);
    let l = only_link(&r);
    assert_eq!((l.status, l.to_seq), (Verified, 0));
    assert!(l.why.contains("erased"), "{}", l.why);
    // Without keys, the erasure is unproven: the payload is withheld, the answer incomplete.
    let unproven = b.disclose("0", false, "globex-nokeys.bundle");
    let r = verify(&case_file(t, "unproven.toml", &[&ab], &[&unproven]), &chain);
    assert_globex_incomplete(&r);
    let l = only_link(&r);
    assert_eq!((l.status, l.blame), (Incomplete, Some(Blame::Linked)));
    assert!(l.why.contains("no erasure of it is proven"), "{}", l.why);
}

#[test]
fn dates_out_of_anchoring_order_are_the_tampering_of_the_clock_that_lies() {
    let (tmp, chain, a, b) = setup();
    let t = tmp.path();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let dated = |tool: &str, h: i64| {
        event_with(
            tool,
            json!({"timestamp_us": now.saturating_add_signed(h * 3_600_000_000)}),
        )
    };
    // A dates its delegating event 0 two hours ahead; B accepts it now (B 0, A 1 afr.delegated).
    delegate(t, &a, &b, &dated("hand_off", 2), &event("run_job"));
    // A delegates now (A 2, afr.delegated A 3); B dates its accepting event 1 two hours back.
    delegate(t, &a, &b, &event("hand_off"), &dated("run_job", -2));
    // A's event 0 is dated after the block that anchored B's epoch citing it: A lies.
    let (ab, bb) = anchor_and_disclose(&chain, (&a, "0-1"), (&b, "0"));
    let r = verify(&case_file(t, "post-dated.toml", &[&ab], &[&bb]), &chain);
    assert_outcomes(&r, Tampered, &[("Acme", Tampered), ("Globex", Verified)]);
    assert_failure(&r, "Acme", "delegation-time", "event 0");
    assert_reports(&r, "consistent with: a back- or post-dated delegation");
    // B's event 1 is dated two hours before the event it accepts, and both are dated before
    // their own epochs were anchored: one of the two clocks is wrong, and nothing shows
    // which. Neither side is convicted; the case is incomplete.
    let ab = a.disclose("2-3", true, "acme-2.bundle");
    let bb = b.disclose("1", true, "globex-2.bundle");
    let r = verify(&case_file(t, "back-dated.toml", &[&ab], &[&bb]), &chain);
    assert_outcomes(&r, Incomplete, &[("Acme", Verified), ("Globex", Verified)]);
    assert!(
        r.missing.iter().any(|m| m.contains("clocks disagree")),
        "{}",
        r.to_text()
    );
}

/// `cast rpc` on `chain`: moves anvil's clock forward by `secs` and mines a block.
fn advance(chain: &Chain, secs: u64) {
    afr_testkit::cast_at(&chain.url, &["rpc", "evm_increaseTime", &secs.to_string()]);
    afr_testkit::cast_at(&chain.url, &["rpc", "evm_mine"]);
}

#[test]
fn the_honest_side_is_never_convicted_by_the_other_sides_clock() {
    let (tmp, chain, a, b) = setup();
    let t = tmp.path();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    // Acme dates its offer an hour ahead and anchors it now; Globex accepts honestly (dated
    // now) but anchors two hours later.
    let ahead = event_with("hand_off", json!({"timestamp_us": now + 3_600_000_000}));
    delegate(t, &a, &b, &ahead, &event("run_job"));
    a.seal();
    a.anchor(&chain);
    advance(&chain, 7_200);
    b.seal();
    b.anchor(&chain);
    let ab = a.disclose("0-1", true, "acme.bundle");
    let bb = b.disclose("0", true, "globex.bundle");
    let case = case_file(t, "case.toml", &[&ab], &[&bb]);
    // Acme's offer is dated after the block that anchored its own epoch: Acme's claim is the
    // impossible one.
    let r = verify(&case, &chain);
    assert_outcomes(&r, Tampered, &[("Acme", Tampered), ("Globex", Verified)]);
    assert_failure(&r, "Acme", "delegation-time", "event 0");
    assert_reports(&r, "anchored its own epoch 0");
    // Offline, from anchors files without block times (version 2, taken as they are): no time
    // rule can blame anyone, and the clock disagreement makes the case incomplete, not Globex
    // tampered.
    let mut offline = Case::load(&case, None, None).unwrap();
    offline.trust.chain.unproven_anchors = true;
    for rec in [DEV_ADDR, ADDR_B] {
        let mut f = proven(&chain, rec);
        for p in f.roots.values_mut() {
            p.block_time = None;
        }
        let p = t.join(format!("{rec}.untimed.json"));
        std::fs::write(&p, serde_json::to_string(&f).unwrap()).unwrap();
        offline.anchors.push(p);
    }
    let r = verify_case(&offline, Source::None).unwrap();
    assert_outcomes(&r, Incomplete, &[("Acme", Verified), ("Globex", Verified)]);
    assert!(
        r.missing.iter().any(|m| m.contains("clocks disagree")),
        "{}",
        r.to_text()
    );
}

#[test]
fn a_delegation_the_receiving_side_never_accepted_does_not_verify() {
    let (tmp, chain, a, b) = setup();
    let t = tmp.path();
    // The honest handshake: A 0 hand_off -> B 0 run_job; A 1 afr.delegated holds R_B.
    let (_, accepted) = hand_off(t, &a, &b);
    let accepted_file = write(
        t,
        "accepted.json",
        &serde_json::to_value(&accepted).unwrap(),
    );
    // A second offer (A 2), which Globex never saw: `afr delegate receipt` refuses to pair
    // it with Globex's receipt for the first one, and records nothing.
    let drop = event_with(
        "hand_off",
        json!({"intent": {"tool": "hand_off", "args": {"task": "drop the production customer database"}}}),
    );
    let drop_file = write(t, "drop.json", &drop);
    let o2: Receipt = serde_json::from_slice(
        &a.run(&["delegate", "offer", &drop_file, "--to", ADDR_B])
            .stdout,
    )
    .unwrap();
    assert_eq!(o2.seq, 2);
    let o2_file = write(t, "o2.json", &serde_json::to_value(&o2).unwrap());
    let out = a
        .afr()
        .args(receipt_args(&o2_file, &accepted_file))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("not this offer"), "{err}");
    // A writes the pairing into its log anyway (an event of its own citing R_B as the
    // accept of the destructive offer): A 3.
    a.record(&event_with(
        "hand_off_claim",
        json!({"intent": {"tool": "hand_off_claim", "args": {"offer": {"seq": 2}}},
               "delegation_provenance": {"delegated_to": [accepted.to_ref()]}}),
    ));
    let (ab, bb) = anchor_and_disclose(&chain, (&a, "0-3"), (&b, "0"));
    let r = verify(&case_file(t, "case.toml", &[&ab], &[&bb]), &chain);
    assert_outcomes(&r, Tampered, &[("Acme", Tampered), ("Globex", Verified)]);
    assert_failure(&r, "Acme", "delegation-link", "event 3");
    let forged = r.links.iter().find(|l| l.from_seq == 3).unwrap();
    assert_eq!(
        (forged.status, forged.blame),
        (Tampered, Some(Blame::Citing))
    );
    assert!(forged.why.contains("accepts offer 0"), "{}", forged.why);
    // No chain shows the destructive offer (or the claim) reaching Globex's accept verified.
    let j = r.to_json();
    for c in j["chains"].as_array().unwrap() {
        let steps = c.as_array().unwrap();
        if steps
            .iter()
            .any(|s| s["seq"] == 3 && s["recorder"] == DEV_ADDR)
        {
            assert!(steps.iter().any(|s| s["status"] == "tampered"), "{j:#}");
        }
    }
    // The honest links still verify.
    assert!(
        r.links
            .iter()
            .filter(|l| l.from_seq != 3)
            .all(|l| l.status == Verified),
        "{}",
        r.to_text()
    );
}

#[test]
fn an_offer_made_to_a_third_recorder_cannot_be_cited_as_accepted() {
    let (tmp, chain, a, b) = setup();
    let t = tmp.path();
    // Acme offers work to Initech (recorder C), not to Globex.
    let ea = write(t, "ea.json", &event("hand_off"));
    let to_c: Receipt =
        serde_json::from_slice(&a.run(&["delegate", "offer", &ea, "--to", ADDR_C]).stdout).unwrap();
    let to_c_file = write(t, "to-c.json", &serde_json::to_value(&to_c).unwrap());
    // Globex's `afr delegate accept` refuses it, and records nothing.
    let eb = write(t, "eb.json", &event("run_job"));
    let out = b
        .afr()
        .args(["delegate", "accept", &eb, "--parent", &to_c_file])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("not to this recorder"), "{err}");
    // Globex cites it anyway, as recorded (B 0), and rewritten to name itself (B 1).
    b.record(&event_with(
        "run_job",
        json!({"delegation_provenance": {"parent_event": to_c.to_ref()}}),
    ));
    let mut readdressed = to_c.to_ref();
    readdressed.to = Some(ADDR_B.into());
    b.record(&event_with(
        "run_job_2",
        json!({"delegation_provenance": {"parent_event": readdressed}}),
    ));
    let (ab, bb) = anchor_and_disclose(&chain, (&a, "0"), (&b, "0-1"));
    let r = verify(&case_file(t, "case.toml", &[&ab], &[&bb]), &chain);
    assert_eq!(r.outcome, Tampered, "{}", r.to_text());
    assert_outcomes(&r, Tampered, &[("Acme", Verified), ("Globex", Tampered)]);
    assert_failure(&r, "Globex", "delegation-link", "event 0");
    let [l0, l1] = r.links.as_slice() else {
        panic!("{}", r.to_text())
    };
    assert_eq!((l0.status, l0.blame), (Tampered, Some(Blame::Citing)));
    assert!(l0.why.contains(ADDR_C), "{}", l0.why);
    // The rewritten `to` breaks Acme's signature: nothing of Acme's says it offered to B.
    assert_eq!((l1.status, l1.blame), (Incomplete, Some(Blame::Citing)));
    assert_eq!(l1.backing.name(), "bad-signature");
}

#[test]
fn an_unsigned_claim_about_the_other_log_is_the_claimants_problem() {
    let (tmp, chain, a, b) = setup();
    let t = tmp.path();
    b.record(&event("own_work"));
    // Acme says it delegated to Globex's event 99, which Globex never had, without any
    // receipt of Globex's.
    a.record(&event_with(
        "claimed_handoff",
        json!({"delegation_provenance": {"delegated_to": [
            {"recorder": ADDR_B, "seq": 99, "leaf_hash": "ab".repeat(32)}
        ]}}),
    ));
    let (ab, bb) = anchor_and_disclose(&chain, (&a, "0"), (&b, "0"));
    let r = verify(&case_file(t, "case.toml", &[&ab], &[&bb]), &chain);
    assert_outcomes(
        &r,
        Incomplete,
        &[("Acme", Incomplete), ("Globex", Verified)],
    );
    let l = only_link(&r);
    assert_eq!((l.status, l.blame), (Incomplete, Some(Blame::Citing)));
    assert!(l.why.contains("claim alone"), "{}", l.why);
}

#[test]
fn one_partys_anchors_file_never_speaks_for_another_party() {
    let (tmp, chain, a, b) = setup();
    let t = tmp.path();
    hand_off(t, &a, &b);
    anchor_and_disclose(&chain, (&a, "0-1"), (&b, "0"));
    let write_anchors = |name: &str, a: &Anchors| {
        let p = t.join(name);
        std::fs::write(&p, serde_json::to_string(a).unwrap()).unwrap();
        p
    };
    write_anchors("acme.anchors.json", &proven(&chain, DEV_ADDR));
    write_anchors("globex.anchors.json", &proven(&chain, ADDR_B));
    // Acme lists a forged anchors file for Globex's recorder: another root for its epoch 0.
    let mut forged = proven(&chain, ADDR_B);
    for p in forged.roots.values_mut() {
        p.root = afr_core::Hash32([0x66; 32]).to_hex();
    }
    write_anchors("forged-globex.anchors.json", &forged);
    let text = |globex_anchors: &str| {
        format!(
            "chain_id = 31337\n\
             [chain]\nunproven_anchors = true\n\
             [[party]]\nname = \"Acme\"\nrecorders = [\"{DEV_ADDR}\"]\nbundles = [\"acme.bundle\"]\n\
             anchors = [\"acme.anchors.json\", \"forged-globex.anchors.json\"]\n\
             [[party]]\nname = \"Globex\"\nrecorders = [\"{ADDR_B}\"]\nbundles = [\"globex.bundle\"]\n\
             anchors = [{globex_anchors}]\n"
        )
    };
    let offline = |name: &str, globex_anchors: &str| {
        let p = t.join(name);
        std::fs::write(&p, text(globex_anchors)).unwrap();
        verify_case(&Case::load(&p, None, None).unwrap(), Source::None).unwrap()
    };
    // Without Globex's own file: Globex's roots are not checked (incomplete), never tampered.
    let r = offline("forged-only.toml", "");
    assert_outcomes(
        &r,
        Incomplete,
        &[("Acme", Verified), ("Globex", Incomplete)],
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("which is not that party's: not used")),
        "{}",
        r.to_text()
    );
    // With Globex's own file beside the forged one: Globex verifies (and nothing is refused
    // as two files for one recorder).
    let r = offline("both.toml", "\"globex.anchors.json\"");
    assert_outcomes(&r, Verified, &[("Acme", Verified), ("Globex", Verified)]);
}

#[test]
fn a_second_history_under_the_same_key_is_refused_on_chain_and_exposed_as_a_fork() {
    let (tmp, chain, a, b) = setup();
    // A's honest history (A 0 hand_off, A 1 afr.delegated; B 0 run_job), anchored.
    hand_off(tmp.path(), &a, &b);
    let (ab, bb) = anchor_and_disclose(&chain, (&a, "0-1"), (&b, "0"));
    let honest = proven(&chain, DEV_ADDR);
    assert_eq!(honest.head, Some(0), "{honest:?}");
    let t = tmp.path();
    // A second store with A's key (the same recorder) records another history, two epochs,
    // and asks `afr anchor` to anchor it on the same contract.
    let forked = Org::init(t.join("acme-forked"), DEV_KEY);
    for tool in ["did_nothing", "cover_up"] {
        forked.record(&event(tool));
        forked.seal();
    }
    for _ in 0..2 {
        let out = forked
            .afr()
            .args(["anchor", "--rpc", &chain.url, "--contract", &chain.contract])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        // It refuses: epoch 0 is anchored with another root. The alarm stays raised, and
        // nothing of the other history (not even its epoch 1, past the anchored head) is sent.
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(
            err.contains("FORK ALARM: epoch 0 is anchored on chain 31337"),
            "{err}"
        );
    }
    let after = proven(&chain, DEV_ADDR);
    assert_eq!(
        (after.head, after.root(0)),
        (Some(0), honest.root(0)),
        "{after:?}"
    );
    // The other history's bundle: its epoch 0 is not the root A anchored.
    let fb = forked.disclose("0-1", true, "acme-forked.bundle");
    let r = verify(&case_file(t, "forked.toml", &[&fb], &[&bb]), &chain);
    assert_outcomes(&r, Tampered, &[("Acme", Tampered), ("Globex", Verified)]);
    assert_failure(&r, "Acme", "anchored-root", "epoch 0");
    // Beside A's honest bundle, in either order: a fork, on A.
    let (ab, fb) = (ab.as_path(), fb.as_path());
    for (name, acme) in [("both.toml", [ab, fb]), ("both-swapped.toml", [fb, ab])] {
        let r = verify(&case_file(t, name, &acme, &[&bb]), &chain);
        assert_outcomes(&r, Tampered, &[("Acme", Tampered), ("Globex", Verified)]);
        assert_failure(&r, "Acme", "fork", "epoch 0");
        assert_reports(&r, "consistent with: two histories from one recorder");
    }
}

/// `afr approve --file` of `event` for recorder `rec`, signed by Bob's Ethereum key
/// (`decision` rewritten to "rejected" when `reject`): the `human_approval` it prints.
fn signed_approval(t: &Path, event: &Value, rec: &str) -> Value {
    let key = t.join("bob.key");
    std::fs::write(&key, KEY_B).unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let f = write(t, &format!("approve-{}.json", rand_name(event)), event);
    let out = ok(afr(&t.join("nowhere"))
        .args(["approve", "--file", &f, "--recorder", rec, "--eth-key"])
        .arg(&key));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn one_signed_approval_disclosed_twice_in_two_bundles_is_a_replay() {
    let (tmp, chain, a, b) = setup();
    let t = tmp.path();
    // One signed approval, recorded on two identical calls (A 0 and A 1).
    let call = json!({"category": "database",
        "intent": {"tool": "psql", "args": {"sql": "DROP SCHEMA billing CASCADE"}},
        "execution": {"command": "psql -c 'DROP SCHEMA billing CASCADE'", "target": "prod-db"}});
    let mut approved = call.clone();
    approved["human_approval"] = signed_approval(t, &call, DEV_ADDR);
    a.record(&approved);
    a.record(&approved);
    b.record(&event("unrelated"));
    anchor_and_disclose(&chain, (&a, "0-1"), (&b, "0"));
    // Each bundle holds one of the two events: each verifies alone.
    let b1 = a.disclose("0", true, "acme-1.bundle");
    let b2 = a.disclose("1", true, "acme-2.bundle");
    let bb = t.join("globex.bundle");
    let r = verify(&case_file(t, "case.toml", &[&b1], &[&bb]), &chain);
    assert_outcomes(&r, Verified, &[("Acme", Verified), ("Globex", Verified)]);
    // Together, in a case file (either order) or under a trust file: the nonce repeats.
    for (name, bundles) in [("one-two.toml", [&b1, &b2]), ("two-one.toml", [&b2, &b1])] {
        let r = verify(
            &case_file(t, name, &bundles.map(|p| p.as_path()), &[&bb]),
            &chain,
        );
        assert_outcomes(&r, Tampered, &[("Acme", Tampered), ("Globex", Verified)]);
        assert_failure(&r, "Acme", "approval-nonce", "event 1");
        let acme = party(&r, "Acme");
        let invalid: Vec<u64> = acme
            .bundles
            .iter()
            .flat_map(|b| &b.verdict.approvals)
            .filter(|a| a.status == afr_verify::approvals::Status::Invalid)
            .map(|a| a.seq)
            .collect();
        assert_eq!(invalid, [1], "{}", r.to_text());
    }
    let trust = Trust::new(
        Some((
            "trust.toml",
            &format!(
                "chain_id = 31337\n[[party]]\nname = \"Acme\"\nrecorders = [\"{DEV_ADDR}\"]\n"
            ),
        )),
        None,
        None,
        None,
    )
    .unwrap();
    let r = verify_case(
        &Case::with_bundles(trust, vec![b1.clone(), b2.clone()]),
        rpc(&chain),
    )
    .unwrap();
    assert_outcomes(&r, Tampered, &[("Acme", Tampered)]);
    assert_failure(&r, "Acme", "approval-nonce", "event 1");
    // The same event disclosed in two bundles is not a replay.
    let again = a.disclose("0", true, "acme-1-again.bundle");
    let r = verify(&case_file(t, "same.toml", &[&b1, &again], &[&bb]), &chain);
    assert_outcomes(&r, Verified, &[("Acme", Verified), ("Globex", Verified)]);
}

#[test]
fn the_report_says_what_it_did_not_check_and_what_ran_against_a_rejection() {
    let (tmp, chain, a, b) = setup();
    let t = tmp.path();
    // A call that ran although its signed decision was a rejection (A 2), beside the
    // handshake (A 0, A 1; B 0), and a receipt on B's side whose signature is forged (B 1).
    let (offer, _) = hand_off(t, &a, &b);
    let call = json!({"category": "database",
        "intent": {"tool": "psql", "args": {"sql": "DROP TABLE users"}},
        "execution": {"command": "psql -c 'DROP TABLE users'", "target": "prod-db"}});
    let mut h = signed_approval(t, &call, DEV_ADDR);
    // Re-signed as a rejection: the statement's decision is part of what is signed.
    let mut st: afr_core::approval::Statement =
        serde_json::from_value(h["signature"]["statement"].clone()).unwrap();
    st.decision = afr_core::event::Decision::Rejected;
    let raw: [u8; 32] = hex::decode(KEY_B.trim_start_matches("0x"))
        .unwrap()
        .try_into()
        .unwrap();
    let signer = afr_anchorer::signer_from_bytes(&raw).unwrap();
    let sig = afr_anchorer::sign_digest(&signer, st.eip712_signing_hash().unwrap()).unwrap();
    h["decision"] = "rejected".into();
    h["signature"]["statement"] = serde_json::to_value(&st).unwrap();
    h["signature"]["signature"] = format!("0x{}", hex::encode(sig)).into();
    let mut rejected = call.clone();
    rejected["human_approval"] = h;
    a.record(&rejected);
    let mut bad = offer.to_ref();
    let last = bad.signature.as_mut().unwrap();
    last.replace_range(10..12, if &last[10..12] == "00" { "11" } else { "00" });
    b.record(&event_with(
        "run_job_forged",
        json!({"delegation_provenance": {"parent_event": bad}}),
    ));
    anchor_and_disclose(&chain, (&a, "0-2"), (&b, "0-1"));
    let ab = t.join("acme.bundle");
    let bb = t.join("globex.bundle");
    // A forged offline anchors file for Acme (given by the arbiter): the report says the
    // roots were taken as is.
    let anchors = t.join("acme.anchors.json");
    std::fs::write(
        &anchors,
        serde_json::to_string(&proven(&chain, DEV_ADDR)).unwrap(),
    )
    .unwrap();
    let mut case = Case::load(&case_file(t, "case.toml", &[&ab], &[&bb]), None, None).unwrap();
    // A version-2 file, taken as it is (`--unproven-anchors`).
    case.trust.chain.unproven_anchors = true;
    case.anchors.push(anchors);
    let r = verify_case(&case, Source::None).unwrap();
    let acme = party(&r, "Acme");
    let v = &acme.bundles[0].verdict;
    assert!(
        v.approvals
            .iter()
            .any(|a| a.seq == 2 && a.ran_against_rejection),
        "{}",
        r.to_text()
    );
    assert!(v.to_text(None).contains("event 2 RAN AGAINST A REJECTION"));
    let inv = afr_verify::report::Invocation {
        command: "case",
        digests: r
            .parties
            .iter()
            .flat_map(|p| &p.bundles)
            .map(|b| (b.file.clone(), b.size, b.sha256))
            .collect(),
        ..Default::default()
    };
    let report = afr_verify::report::case_html(&r, &inv, 0);
    assert!(
        report.contains("taken AS IS from the anchors file"),
        "no source of anchors"
    );
    assert!(
        report.contains("RAN AGAINST THE REJECTION"),
        "rejection not shown"
    );
    assert!(
        report.contains("SIGNED REJECTED"),
        "decision not shown with the signature"
    );
    assert!(
        report.contains("receipt signature does not verify"),
        "forged receipt shown as signed"
    );
    assert!(report.contains("not signed)"), "decided_at shown as signed");
    // The digests are of the bytes verified.
    use sha2::Digest as _;
    let digest = hex::encode(sha2::Sha256::digest(std::fs::read(&ab).unwrap()));
    assert_eq!(acme.bundles[0].sha256.to_hex(), digest);
    assert!(report.contains(&digest), "bundle digest missing");
}

/// `afr disclose --anchor-proofs`: a bundle that carries its own proof archive verifies with
/// the chain gone and no anchors file; a byte changed inside the embedded archive, or no
/// pinned chain, never verifies; an archive of another recorder is refused before anything is
/// written.
#[test]
fn a_bundle_carries_its_anchor_proofs_and_verifies_offline() {
    let (tmp, chain, a, b) = setup();
    let t = tmp.path();
    a.record(&event("deploy"));
    a.record(&event("migrate"));
    a.seal();
    a.anchor(&chain);
    let write_archive = |name: &str, rec: &str| {
        let p = t.join(name);
        let f = fetched(&chain, rec);
        std::fs::write(&p, serde_json::to_string_pretty(&f.archive).unwrap()).unwrap();
        p
    };
    let mine = write_archive("acme.archive.json", DEV_ADDR);
    let theirs = write_archive("globex.archive.json", ADDR_B);
    let out = t.join("acme.bundle");
    let disclose = |archive: &Path| {
        let mut c = a.afr();
        c.args(["disclose", "--seq", "0-1", "--with-keys", "--out"])
            .arg(&out)
            .arg("--anchor-proofs")
            .arg(archive);
        c.output().unwrap()
    };
    let refused = disclose(&theirs);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("is for recorder"),
        "{refused:?}"
    );
    assert!(!out.exists(), "a refused archive wrote a bundle");
    let plain = t.join("plain.json");
    std::fs::write(&plain, "{\"version\": 2}").unwrap();
    assert!(!disclose(&plain).status.success());
    let done = disclose(&mine);
    assert!(done.status.success(), "{done:?}");
    assert!(
        String::from_utf8_lossy(&done.stdout).contains("embedded anchor proofs of 1 epochs"),
        "{done:?}"
    );
    drop(b);
    let contract = chain.contract.clone();
    drop(chain);

    let bytes = std::fs::read(&out).unwrap();
    let verify = |bytes: &[u8], chain_id: Option<u64>| {
        let trust = Trust::new(None, chain_id, Some(&contract), Some(DEV_ADDR)).unwrap();
        afr_verify::verify(afr_verify::Kind::Bundle, bytes, &trust, Source::None).unwrap()
    };
    let v = verify(&bytes, Some(31337));
    assert_eq!(v.outcome, Verified, "{:?}", v.to_json(None));
    let j = v.to_json(None);
    assert_eq!(j["anchors_from"]["source"], "archive", "{j}");
    assert!(
        j["notes"]
            .to_string()
            .contains("the proof archive embedded in the bundle"),
        "{j}"
    );
    assert!(
        !j["chain"]["headers"].as_object().unwrap().is_empty(),
        "{j}"
    );
    // No chain pinned: the proofs cannot be judged.
    let v = verify(&bytes, None);
    assert_eq!(v.outcome, Incomplete);
    // One hex digit of the embedded receipt changed: not verified.
    let at = bytes
        .windows(12)
        .position(|w| w == b"\"receipt\": \"")
        .unwrap()
        + 20;
    let mut forged = bytes.clone();
    forged[at] = if forged[at] == b'a' { b'b' } else { b'a' };
    assert_ne!(verify(&forged, Some(31337)).outcome, Verified);
    // The frame's bytes are not JSON: not verified.
    let at = bytes
        .windows(11)
        .position(|w| w == b"\"version\": ")
        .unwrap();
    let mut broken = bytes.clone();
    broken[at] = b'}';
    assert_ne!(verify(&broken, Some(31337)).outcome, Verified);
}
