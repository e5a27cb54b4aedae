//! Signed human approvals through `afr-verify` (`docs/spec/approvals.md` §4): per-event
//! reports, pinned approvers, every failed check, a signature made by the real `ssh-keygen`,
//! and hostile approvals that must neither panic nor redraw the terminal.
//!
//! The signing helpers here are also the named vectors' (`testdata.rs`): deterministic, so a
//! regenerated catalogue is byte for byte the same.

use std::{path::Path, process::Command};

use afr_core::{
    RecorderId,
    approval::{SSH_NAMESPACE, Statement},
    event::{ApprovalSignature, Decision, Execution, HumanApproval, Intent, Payload},
};
use afr_eval::tamper::{Event, History, Rng, SealedLog};
use afr_verify::{Kind, Source, Trust, anchors::Anchors};
use serde_json::{Value, json};

/// Anvil's second well-known key; its address is `0x70997970…79c8`.
pub(crate) const ETH_KEY: &str = "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
/// Anvil's third well-known key, pinned for no one.
pub(crate) const OTHER_ETH_KEY: &str =
    "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";
/// The Ed25519 seed of the SSH approver.
pub(crate) const SSH_SEED: [u8; 32] = [0x5e; 32];
/// Unix seconds at which the events of an `afr_eval::tamper` history run (plus a few ms).
pub(crate) const RUN_AT: u64 = 1_764_000_000;
/// The usual validity window around [`RUN_AT`]: issued 10 s before, five minutes long.
pub(crate) const WINDOW: (u64, u64) = (RUN_AT - 10, RUN_AT + 290);
/// The pinned name of the EIP-712 approver (party Acme).
pub(crate) const J_DOE: &str = "j.doe@acme.example";
/// The pinned name of the SSH approver (party Globex).
pub(crate) const R_ROE: &str = "r.roe@globex.example";

const RECORDER: RecorderId = [0xa1; 20];

fn key32(hex_key: &str) -> [u8; 32] {
    let mut k = [0u8; 32];
    hex::decode_to_slice(hex_key, &mut k).unwrap();
    k
}

/// The address of secp256k1 key `hex_key`, `0x` + 40 lower-case hex digits.
pub(crate) fn eth_address(hex_key: &str) -> String {
    use sha3::{Digest, Keccak256};
    let sk = k256::ecdsa::SigningKey::from_slice(&key32(hex_key)).unwrap();
    let point = sk.verifying_key().to_encoded_point(false);
    let h = Keccak256::digest(&point.as_bytes()[1..]);
    format!("0x{}", hex::encode(&h[12..]))
}

/// `st` signed as EIP-712 typed data by `hex_key`: `r ‖ s ‖ v`, `v` = 27 or 28 (RFC 6979, so
/// deterministic; k256 signs with a low `s`).
pub(crate) fn sign_eip712(st: &Statement, hex_key: &str) -> ApprovalSignature {
    let sk = k256::ecdsa::SigningKey::from_slice(&key32(hex_key)).unwrap();
    let (sig, recid) = sk
        .sign_prehash_recoverable(&st.eip712_signing_hash().unwrap())
        .unwrap();
    let mut raw = sig.to_bytes().to_vec();
    raw.push(27 + recid.to_byte());
    ApprovalSignature {
        scheme: "eip712".into(),
        signer: eth_address(hex_key),
        statement: st.clone(),
        signature: format!("0x{}", hex::encode(raw)),
    }
}

fn ssh_private(seed: [u8; 32]) -> ssh_key::PrivateKey {
    ssh_key::PrivateKey::from(ssh_key::private::Ed25519Keypair::from_seed(&seed))
}

/// The OpenSSH public key of `seed`, `ssh-ed25519 AAAA…` without a comment.
pub(crate) fn ssh_public(seed: [u8; 32]) -> String {
    ssh_private(seed).public_key().to_openssh().unwrap()
}

/// `st` signed as `ssh-keygen -Y sign -n afr-approval-v1` would with the key of `seed`: the
/// armored SSHSIG, LF line endings (Ed25519 is deterministic).
pub(crate) fn sign_ssh(st: &Statement, seed: [u8; 32]) -> ApprovalSignature {
    let sig = ssh_private(seed)
        .sign(
            SSH_NAMESPACE,
            ssh_key::HashAlg::Sha512,
            st.ssh_message().as_bytes(),
        )
        .unwrap();
    ApprovalSignature {
        scheme: "ssh".into(),
        signer: ssh_public(seed),
        statement: st.clone(),
        signature: sig.to_pem(ssh_key::LineEnding::LF).unwrap(),
    }
}

/// Who signs an approval.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Signer {
    /// Nobody: the operator's word.
    Nobody,
    /// An Ethereum key (hex), EIP-712.
    Eth(&'static str),
    /// An Ed25519 key (seed), SSHSIG.
    Ssh([u8; 32]),
}

/// A call of `tool` with `args` that ran `command` against `target`.
fn call(tool: &str, args: Value, command: String, target: &str) -> (Intent, Execution) {
    (
        Intent {
            tool: tool.into(),
            args,
        },
        Execution {
            command,
            target: Some(target.into()),
            mutation: Value::Null,
        },
    )
}

/// A psql call on the production database, numbered `n` so that two calls differ.
pub(crate) fn psql(n: u64) -> (Intent, Execution) {
    let sql = format!("UPDATE accounts SET credit_limit = 5000 WHERE id = {n}");
    call(
        "psql",
        json!({"database": "prod", "query": sql}),
        format!("psql -d prod -c '{sql}'"),
        "db.prod.internal",
    )
}

/// A `git push` of `branch`.
pub(crate) fn git_push(branch: &str) -> (Intent, Execution) {
    call(
        "git.push",
        json!({"remote": "origin", "ref": branch}),
        format!("git push origin {branch}"),
        "github.com/acme/billing",
    )
}

/// The payload of a call approved by `approver` (as the operator records the name), signed by
/// `signer` over a statement for `recorder` valid over `window` with nonce `[nonce; 32]`.
pub(crate) fn approved(
    (intent, execution): (Intent, Execution),
    approver: &str,
    signer: Signer,
    recorder: &RecorderId,
    window: (u64, u64),
    nonce: u8,
) -> Payload {
    let st = Statement::new(
        &intent,
        Some(&execution),
        Decision::Approved,
        recorder,
        window.0,
        window.1,
        [nonce; 32],
    );
    let signature = match signer {
        Signer::Nobody => None,
        Signer::Eth(k) => Some(sign_eip712(&st, k)),
        Signer::Ssh(seed) => Some(sign_ssh(&st, seed)),
    };
    let mut p = Payload::intent_only(intent.tool.clone(), intent.args.clone());
    p.execution = Some(execution);
    p.human_approval = Some(HumanApproval {
        approver: approver.into(),
        prompt: format!("Approve this call? {}", intent.tool),
        decision: Decision::Approved,
        decided_at_us: window.0 * 1_000_000 + 1_000,
        signature,
    });
    p
}

/// The payload of [`psql`] call `n` approved by [`J_DOE`] (as recorded), signed by `signer`
/// over a statement for `recorder` valid over `window` with nonce `[n; 32]`.
pub(crate) fn psql_approved(
    n: u64,
    signer: Signer,
    recorder: &RecorderId,
    window: (u64, u64),
) -> Payload {
    approved(psql(n), J_DOE, signer, recorder, window, n as u8)
}

/// The event at flat position `i` (its sequence number) of a history not yet sealed.
pub(crate) fn event(h: &mut History, i: usize) -> &mut Event {
    h.epochs.iter_mut().flatten().nth(i).unwrap()
}

/// A random history of `recorder` with at least `n` events, none sealed yet.
pub(crate) fn history(seed: u64, recorder: RecorderId, n: usize) -> History {
    let mut h = History::random(&mut Rng::new(seed), recorder);
    while h.len() < n {
        let e = h.epochs[0][0].clone();
        h.epochs[0].push(e);
    }
    h
}

/// The bundle of `log`'s events `seqs` (sorted), with keys.
pub(crate) fn bundle(log: &SealedLog, seqs: &[usize]) -> Vec<u8> {
    let pos = log.positions();
    log.bundle(&seqs.iter().map(|&i| pos[i]).collect::<Vec<_>>())
        .encode()
}

/// Every epoch of `log` anchored, as an offline anchors file of chain 31337.
pub(crate) fn anchored(log: &SealedLog) -> Anchors {
    Anchors::assumed(
        31337,
        afr_core::deployment::ANCHOR_ADDRESS,
        &log.recorder,
        &log.roots(),
        1000,
    )
}

/// A trust file pinning chain 31337, `recorder` for Acme with [`J_DOE`] (EIP-712, [`ETH_KEY`]),
/// and Globex with [`R_ROE`] (SSH, [`SSH_SEED`]); `required` sets `require_signed_approvals`.
pub(crate) fn trust_toml(recorder: &RecorderId, required: bool) -> String {
    format!(
        "chain_id = 31337\n\
         require_signed_approvals = {required}\n\
         \n\
         [[party]]\n\
         name = \"Acme Corp (operator)\"\n\
         recorders = [\"0x{}\"]\n\
         \n\
         [[party.approver]]\n\
         name = \"{J_DOE}\"\n\
         keys = [\"{}\"]\n\
         \n\
         [[party]]\n\
         name = \"Globex (customer)\"\n\
         recorders = [\"0x{}\"]\n\
         \n\
         [[party.approver]]\n\
         name = \"{R_ROE}\"\n\
         keys = [\"{}\"]\n",
        hex::encode(recorder),
        eth_address(ETH_KEY),
        hex::encode([0xb2; 20]),
        ssh_public(SSH_SEED),
    )
}

/// The files of one verification: the bundle, its anchors, and a trust file.
struct Files {
    _dir: tempfile::TempDir,
    bundle: std::path::PathBuf,
    anchors: std::path::PathBuf,
    trust: std::path::PathBuf,
}

fn files(log: &SealedLog, seqs: &[usize], trust: &str) -> Files {
    let dir = tempfile::tempdir().unwrap();
    let bundle_path = dir.path().join("case.bundle");
    std::fs::write(&bundle_path, bundle(log, seqs)).unwrap();
    let anchors = dir.path().join("anchors.json");
    std::fs::write(&anchors, serde_json::to_string(&anchored(log)).unwrap()).unwrap();
    let trust_path = dir.path().join("trust.toml");
    std::fs::write(&trust_path, trust).unwrap();
    Files {
        bundle: bundle_path,
        anchors,
        trust: trust_path,
        _dir: dir,
    }
}

/// `afr-verify bundle FILE --anchors A ARGS`: exit code, stdout.
fn run(f: &Files, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_afr-verify"))
        .arg("bundle")
        .arg(&f.bundle)
        .arg("--anchors")
        .arg(&f.anchors)
        .arg("--unproven-anchors")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

fn run_json(f: &Files, args: &[&str]) -> (i32, Value) {
    let (code, out) = run(f, &[args, &["--json"]].concat());
    (code, serde_json::from_str(&out).unwrap())
}

/// Verifies `bytes` in the library under a trust file's text, with every epoch anchored.
fn verify_lib(log: &SealedLog, seqs: &[usize], trust: &str) -> afr_verify::Verdict {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("anchors.json");
    std::fs::write(&a, serde_json::to_string(&anchored(log)).unwrap()).unwrap();
    let mut trust = Trust::new(Some(("trust.toml", trust)), None, None, None).unwrap();
    // A version-2 anchors file (roots assumed anchored): taken as it is.
    trust.chain.unproven_anchors = true;
    afr_verify::verify(Kind::Bundle, &bundle(log, seqs), &trust, Source::File(&a)).unwrap()
}

/// The report line of one approval, every member named.
#[allow(clippy::too_many_arguments, reason = "one argument per JSON member")]
fn row(
    seq: u64,
    approver: &str,
    status: &str,
    scheme: Option<&str>,
    signer: Option<&str>,
    party: Option<&str>,
    pinned_name: Option<&str>,
    check: Option<&str>,
) -> Value {
    json!({"seq": seq, "approver": approver, "decision": "approved", "status": status,
        "scheme": scheme, "signer": signer, "party": party, "pinned_name": pinned_name,
        "check": check})
}

/// The report line of an approval signed with `scheme` by `signer`, which verified: by the key
/// of `pinned` (party, name) where approvers are pinned.
fn signed(
    seq: u64,
    approver: &str,
    scheme: &str,
    signer: &str,
    pinned: Option<(&str, &str)>,
) -> Value {
    let (party, name) = pinned.unzip();
    row(
        seq,
        approver,
        "signed",
        Some(scheme),
        Some(signer),
        party,
        name,
        None,
    )
}

/// The approvals of a JSON report without their `detail`, which is prose.
fn rows(v: &Value) -> Vec<Value> {
    v["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let mut a = a.clone();
            // The members each test checks on its own (the signed nonce and time, the
            // rejection that ran) are left out of the rows.
            for k in ["detail", "nonce", "signed_at", "ran_against_rejection"] {
                a.as_object_mut().unwrap().remove(k);
            }
            a
        })
        .collect()
}

#[test]
fn each_approval_is_reported_and_attributed_to_a_pinned_approver() {
    let mut h = history(31, RECORDER, 4);
    event(&mut h, 1).payload = psql_approved(1, Signer::Eth(ETH_KEY), &RECORDER, WINDOW);
    // The operator records the SSH approver under another name: a note, not a failure.
    event(&mut h, 2).payload = approved(
        git_push("main"),
        "Richard Roe",
        Signer::Ssh(SSH_SEED),
        &RECORDER,
        WINDOW,
        2,
    );
    event(&mut h, 3).payload =
        approved(psql(3), "ops-oncall", Signer::Nobody, &RECORDER, WINDOW, 3);
    let log = h.seal();
    let f = files(&log, &[0, 1, 2, 3], &trust_toml(&RECORDER, false));
    let trust = ["--trust", f.trust.to_str().unwrap()];
    let (code, v) = run_json(&f, &trust);
    assert_eq!(
        (code, v["outcome"].as_str()),
        (0, Some("verified")),
        "{v:#}"
    );
    assert_eq!(v["events"], json!([0, 1, 2, 3]));
    let eth = eth_address(ETH_KEY);
    let ssh = ssh_public(SSH_SEED);
    let acme = "Acme Corp (operator)";
    let globex = "Globex (customer)";
    // A signed approval's nonce and signing time (the statement's `issued_at`), once accepted.
    let a = &v["approvals"];
    assert_eq!(a[0]["nonce"], "01".repeat(32), "{v:#}");
    assert!(a[0]["signed_at"].is_u64(), "{v:#}");
    assert_eq!(
        (&a[2]["nonce"], &a[2]["signed_at"]),
        (&Value::Null, &Value::Null)
    );
    assert_eq!(a[0]["ran_against_rejection"], false);
    assert_eq!(
        rows(&v),
        [
            signed(1, J_DOE, "eip712", &eth, Some((acme, J_DOE))),
            signed(2, "Richard Roe", "ssh", &ssh, Some((globex, R_ROE))),
            row(3, "ops-oncall", "unsigned", None, None, None, None, None),
        ]
    );
    assert_eq!(v["approvals"][0]["detail"], Value::Null);
    // Each check the two signed approvals pass counts, the pinned signer's included, and the
    // report's table of checks says what passing each means.
    let html = f.bundle.with_extension("html");
    let (code, _) = run(
        &f,
        &[&trust[..], &["--html", html.to_str().unwrap()]].concat(),
    );
    assert_eq!(code, 0);
    let report = crate::report::text(&std::fs::read_to_string(&html).unwrap());
    for (c, means) in APPROVAL_CHECKS.iter().zip([
        "each signed approval covers this event's exact action",
        "each signed statement names this event and recorder",
        "each approval signature verifies",
        "each approval was valid when the event ran",
        "each approval is signed by a pinned approver",
        "no approval is used twice",
    ]) {
        assert_eq!(v["checks"][c], 2, "{c}: {v:#}");
        assert!(report.contains(&format!("{c} 2 {means}")), "{c}: {report}");
    }
    assert_eq!(v["trust"]["approvers_pinned"], 2);
    assert_eq!(v["trust"]["require_signed_approvals"], false);
    let notes = v["notes"].to_string();
    assert!(
        notes.contains(
            "event 2: the approval recorded as by 'Richard Roe' is signed by the key of pinned approver 'r.roe@globex.example' of Globex (customer)"
        ),
        "{notes}"
    );
    assert!(
        notes.contains("event 3: approval by 'ops-oncall' is unsigned: the operator's word only"),
        "{notes}"
    );

    // The terminal report: one line per approval.
    let (code, text) = run(&f, &trust);
    assert_eq!(code, 0, "{text}");
    for line in [
        format!(
            "approval at event 1: approved by 'j.doe@acme.example': signed (eip712) by {eth}, pinned approver 'j.doe@acme.example' of Acme Corp (operator)"
        ),
        format!(
            "approval at event 2: approved by 'Richard Roe': signed (ssh) by {ssh}, pinned approver 'r.roe@globex.example' of Globex (customer)"
        ),
        "approval at event 3: approved by 'ops-oncall': unsigned, the operator's word only".into(),
        "approval-signature   2 passed".into(),
        "2 approvers pinned".into(),
    ] {
        assert!(text.contains(&line), "{line}\n{text}");
    }

    // Signed approvals required: the unsigned one leaves the answer incomplete.
    std::fs::write(&f.trust, trust_toml(&RECORDER, true)).unwrap();
    let (code, v) = run_json(&f, &trust);
    assert_eq!(code, 2, "{v:#}");
    assert_eq!(
        v["missing"],
        json!([
            "event 3: the approval by 'ops-oncall' is unsigned, and the trust file requires signed approvals"
        ])
    );

    // No approvers pinned (the recorder alone): signed approvals are attributed to no one, a
    // note as for the unsigned one (a valid signature bound to the event is no less).
    let rec = format!("0x{}", hex::encode(RECORDER));
    let (code, v) = run_json(&f, &["--chain-id", "31337", "--recorder", &rec]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(
        rows(&v)[..2],
        [
            signed(1, J_DOE, "eip712", &eth, None),
            signed(2, "Richard Roe", "ssh", &ssh, None),
        ]
    );
    assert_eq!(
        v["approvals"][0]["detail"],
        "not attributed: no approvers are pinned"
    );
    assert_eq!(v["missing"], json!([]), "{v:#}");
    let notes = v["notes"].to_string();
    assert!(
        notes.contains(&format!(
            "event 1: approval by 'j.doe@acme.example': signature valid and bound to the event; signer {eth} not attributed: no approvers pinned"
        )),
        "{notes}"
    );
    // No signer was checked against pinned approvers: `approval-signer` does not count.
    for c in APPROVAL_CHECKS {
        let want = if c == "approval-signer" {
            json!(null)
        } else {
            json!(2)
        };
        assert_eq!(v["checks"][c], want, "{c}: {v:#}");
    }

    // Signed approvals required and no approvers pinned: attribution is required too, so the
    // signed approvals leave the answer incomplete, as does the unsigned one.
    std::fs::write(
        &f.trust,
        format!(
            "chain_id = 31337\nrequire_signed_approvals = true\n\
             [[party]]\nname = \"Acme\"\nrecorders = [\"{rec}\"]\n"
        ),
    )
    .unwrap();
    let (code, v) = run_json(&f, &trust);
    assert_eq!(code, 2, "{v:#}");
    assert_eq!(
        v["missing"],
        json!([
            format!(
                "event 1: approval signed by {eth}, but no approvers are pinned (trust file [[party.approver]]), so it is not attributed to anyone, and the trust file requires signed approvals"
            ),
            format!(
                "event 2: approval signed by {ssh}, but no approvers are pinned (trust file [[party.approver]]), so it is not attributed to anyone, and the trust file requires signed approvals"
            ),
            "event 3: the approval by 'ops-oncall' is unsigned, and the trust file requires signed approvals",
        ]),
        "{v:#}"
    );
}

/// The checks a signed approval that holds passes (`docs/spec/approvals.md` §4).
const APPROVAL_CHECKS: [&str; 6] = [
    "approval-digest",
    "approval-statement",
    "approval-signature",
    "approval-window",
    "approval-signer",
    "approval-nonce",
];

#[test]
fn every_failed_approval_is_reported_and_the_first_decides() {
    let mut h = history(32, RECORDER, 7);
    let sign = |n: u64, signer| psql_approved(n, signer, &RECORDER, WINDOW);
    // 1: signed, then the arguments were edited (and the log re-sealed).
    let mut edited = sign(1, Signer::Eth(ETH_KEY));
    edited.intent.args["query"] = json!("UPDATE accounts SET credit_limit = 500000 WHERE id = 1");
    event(&mut h, 1).payload = edited;
    // 2: signed by a key no one pinned.
    event(&mut h, 2).payload = sign(2, Signer::Eth(OTHER_ETH_KEY));
    // 3 and 4: one approval, two identical calls.
    let once = sign(3, Signer::Ssh(SSH_SEED));
    event(&mut h, 3).payload = once.clone();
    event(&mut h, 4).payload = once;
    // 5: expired over an hour before the call ran.
    event(&mut h, 5).payload = psql_approved(
        5,
        Signer::Eth(ETH_KEY),
        &RECORDER,
        (RUN_AT - 7200, RUN_AT - 3600),
    );
    // 6: a signature altered in transit.
    let mut forged = sign(6, Signer::Eth(ETH_KEY));
    if let Some(s) = forged
        .human_approval
        .as_mut()
        .and_then(|a| a.signature.as_mut())
    {
        let mut raw = hex::decode(&s.signature[2..]).unwrap();
        raw[40] ^= 0x01;
        s.signature = format!("0x{}", hex::encode(raw));
    }
    event(&mut h, 6).payload = forged;
    let log = h.seal();
    let v = verify_lib(&log, &[1, 2, 3, 4, 5, 6], &trust_toml(&RECORDER, false));
    let v = v.to_json(None);
    assert_eq!(v["outcome"], "tampered", "{v:#}");
    assert_eq!(v["first_failure"]["check"], "approval-digest");
    assert_eq!(v["first_failure"]["location"], "event 1");
    assert_eq!(
        v["first_failure"]["consistent_with"],
        "arguments or command changed after signing"
    );
    let eth = eth_address(ETH_KEY);
    let other = eth_address(OTHER_ETH_KEY);
    let ssh = ssh_public(SSH_SEED);
    let acme = Some(("Acme Corp (operator)", J_DOE));
    let globex = Some(("Globex (customer)", R_ROE));
    // Every approval is recorded as J. Doe's.
    let invalid = |seq, scheme, signer: Option<&str>, pinned: Option<(&str, &str)>, check| {
        let (party, name) = pinned.unzip();
        row(
            seq,
            J_DOE,
            "invalid",
            Some(scheme),
            signer,
            party,
            name,
            Some(check),
        )
    };
    assert_eq!(
        rows(&v),
        [
            // The signature is J. Doe's, genuinely, but over other arguments.
            invalid(1, "eip712", Some(&eth), acme, "approval-digest"),
            invalid(2, "eip712", Some(&other), None, "approval-signer"),
            signed(3, J_DOE, "ssh", &ssh, globex),
            invalid(4, "ssh", Some(&ssh), globex, "approval-nonce"),
            invalid(5, "eip712", Some(&eth), acme, "approval-window"),
            invalid(6, "eip712", None, None, "approval-signature"),
        ]
    );
    let detail = |i: usize| v["approvals"][i]["detail"].as_str().unwrap().to_owned();
    assert!(
        detail(3).contains("already used by event 3"),
        "{}",
        detail(3)
    );
    assert!(detail(1).contains(&other), "{}", detail(1));
    assert!(
        detail(4).contains("after the approval expired"),
        "{}",
        detail(4)
    );
    // Each check counts the approvals that passed it: 2, 3 and 4 were accepted on their own
    // (bound, signed, in their window); 3 and 4 by a pinned signer; only 3 with a fresh nonce.
    // The anchored roots still count.
    for (c, n) in [
        ("approval-digest", 3),
        ("approval-statement", 3),
        ("approval-signature", 3),
        ("approval-window", 3),
        ("approval-signer", 2),
        ("approval-nonce", 1),
    ] {
        assert_eq!(v["checks"][c], n, "{c}: {v:#}");
    }
    assert_eq!(
        v["checks"]["anchored-root"],
        json!(v["epoch_roots"].as_array().unwrap().len())
    );
}

#[test]
fn a_signature_made_by_ssh_keygen_verifies() {
    let keygen = afr_testkit::installed(Path::new("/usr/bin/ssh-keygen"), "scripts/setup.sh");
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("id_ed25519");
    let ok = Command::new(&keygen)
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "r.roe@laptop", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(ok.success());
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let (intent, execution) = git_push("release");
    let st = Statement::new(
        &intent,
        Some(&execution),
        Decision::Approved,
        &RECORDER,
        WINDOW.0,
        WINDOW.1,
        [0x42; 32],
    );
    let msg = dir.path().join("statement.txt");
    std::fs::write(&msg, st.ssh_message()).unwrap();
    let out = Command::new(&keygen)
        .args(["-Y", "sign", "-n", "afr-approval-v1", "-f"])
        .arg(&key)
        .arg(&msg)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let armored = std::fs::read_to_string(dir.path().join("statement.txt.sig")).unwrap();

    let mut h = history(33, RECORDER, 3);
    let mut p = approved(
        (intent, execution),
        R_ROE,
        Signer::Nobody,
        &RECORDER,
        WINDOW,
        0x42,
    );
    if let Some(a) = p.human_approval.as_mut() {
        a.signature = Some(ApprovalSignature {
            scheme: "ssh".into(),
            // As ssh-keygen wrote it, comment and all: the verifier compares canonical keys.
            signer: public.trim().to_owned(),
            statement: st,
            signature: armored,
        });
    }
    event(&mut h, 1).payload = p;
    let log = h.seal();
    // The approver is pinned with the public key file's line as it is.
    let trust = format!(
        "chain_id = 31337\n[[party]]\nname = \"Globex\"\nrecorders = [\"0x{}\"]\n\
         [[party.approver]]\nname = \"{R_ROE}\"\nkeys = [\"{}\"]\n",
        hex::encode(RECORDER),
        public.trim()
    );
    let f = files(&log, &[1], &trust);
    let (code, v) = run_json(&f, &["--trust", f.trust.to_str().unwrap()]);
    assert_eq!(code, 0, "{v:#}");
    let canonical = public.rsplit_once(' ').unwrap().0;
    assert_eq!(
        rows(&v),
        [signed(1, R_ROE, "ssh", canonical, Some(("Globex", R_ROE)))]
    );

    // The same signature over a statement with another expiry does not verify.
    let mut h = history(33, RECORDER, 3);
    let mut p = approved(
        git_push("release"),
        R_ROE,
        Signer::Nobody,
        &RECORDER,
        WINDOW,
        0x42,
    );
    let sig = log_payload(&log, 1).human_approval.unwrap().signature;
    if let (Some(a), Some(mut sig)) = (p.human_approval.as_mut(), sig) {
        sig.statement.expires_at += 3600;
        a.signature = Some(sig);
    }
    event(&mut h, 1).payload = p;
    let v = verify_lib(&h.seal(), &[1], &trust).to_json(None);
    assert_eq!(v["outcome"], "tampered", "{v:#}");
    assert_eq!(v["first_failure"]["check"], "approval-signature");
    assert_eq!(v["approvals"][0]["signer"], Value::Null);
}

/// The signature of a signed approval's payload.
fn sig_of(p: &mut Payload) -> &mut ApprovalSignature {
    p.human_approval
        .as_mut()
        .and_then(|a| a.signature.as_mut())
        .unwrap()
}

/// The payload of event `seq` of `log`, decrypted from its bundle.
fn log_payload(log: &SealedLog, seq: usize) -> Payload {
    let rep = afr_core::bundle::verify_bundle(&bundle(log, &[seq]));
    rep.opened.into_iter().next().unwrap().1
}

#[test]
fn hostile_approvals_are_refused_without_panic_and_print_escaped() {
    let mut h = history(34, RECORDER, 10);
    let base = |n: u64| psql_approved(n, Signer::Eth(ETH_KEY), &RECORDER, WINDOW);
    let mut cases: Vec<(Payload, &str)> = Vec::new();
    let mut p = base(1);
    sig_of(&mut p).scheme = "rsa".into();
    cases.push((p, "approval-signature"));
    let mut p = base(2);
    sig_of(&mut p).signature = format!("0x{}", "z".repeat(130));
    cases.push((p, "approval-signature"));
    let mut p = base(3);
    sig_of(&mut p).signer = "ssh-ed25519 \u{1b}[2K\rVERIFIED".into();
    cases.push((p, "approval-statement"));
    let mut p = base(4);
    let st = &mut sig_of(&mut p).statement;
    st.nonce = st.nonce.to_ascii_uppercase().replace('0', "A");
    cases.push((p, "approval-statement"));
    // A high-s twin of a valid signature (EIP-2): s' = n − s, v flipped.
    let mut p = base(5);
    let s = sig_of(&mut p);
    let mut raw = hex::decode(&s.signature[2..]).unwrap();
    let sig = k256::ecdsa::Signature::from_slice(&raw[..64]).unwrap();
    let high = k256::ecdsa::Signature::from_scalars(sig.r(), -*sig.s()).unwrap();
    raw[..64].copy_from_slice(&high.to_bytes());
    raw[64] ^= 1;
    s.signature = format!("0x{}", hex::encode(raw));
    cases.push((p, "approval-signature"));
    // The statement of another tool, recorder or decision, signed as such.
    let mut p = base(6);
    let s = sig_of(&mut p);
    s.statement.tool = "psql\nnonce: 00".into();
    *s = sign_eip712(&s.statement, ETH_KEY);
    cases.push((p, "approval-statement"));
    let mut p = base(7);
    let s = sig_of(&mut p);
    s.statement.recorder = format!("0x{}", hex::encode([0xb2; 20]));
    *s = sign_eip712(&s.statement, ETH_KEY);
    cases.push((p, "approval-statement"));
    let mut p = base(8);
    if let Some(a) = p.human_approval.as_mut() {
        a.decision = Decision::Rejected;
    }
    cases.push((p, "approval-statement"));
    // A valid approval whose recorded approver name tries to redraw the terminal.
    let mut p = base(9);
    if let Some(a) = p.human_approval.as_mut() {
        a.approver = "\u{1b}[2K\rVERIFIED \u{202e}j.doe".into();
    }
    cases.push((p, ""));
    let seqs: Vec<usize> = (1..=cases.len()).collect();
    for (i, (p, _)) in seqs.iter().zip(&cases) {
        event(&mut h, *i).payload = p.clone();
    }
    let log = h.seal();
    let verdict = verify_lib(&log, &seqs, &trust_toml(&RECORDER, false));
    let v = verdict.to_json(None);
    assert_eq!(v["outcome"], "tampered", "{v:#}");
    assert_eq!(v["first_failure"]["location"], "event 1");
    for (i, (_, check)) in cases.iter().enumerate() {
        let a = &v["approvals"][i];
        match *check {
            "" => assert_eq!(a["status"], "signed", "{a}"),
            c => assert_eq!(
                (&a["status"], &a["check"]),
                (&json!("invalid"), &json!(c)),
                "{a}"
            ),
        }
    }
    let text = verdict.to_text(None);
    assert!(
        !text
            .chars()
            .any(|c| c != '\n' && afr_core::text::is_unsafe(c)),
        "{text:?}"
    );
    assert!(
        text.contains("by '\\u{1b}[2K\\rVERIFIED \\u{202e}j.doe'"),
        "{text}"
    );
}
