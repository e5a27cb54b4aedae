//! Independent roots end to end (issue #32): a real store, two real `afr witness serve`
//! instances, `afr witness` submitting, `afr disclose` carrying the checkpoints and writing
//! `tlog-proof`s, and the verifier's trust policy (`[roots]`) deciding: a witness down, a
//! quorum met or not, a forked store refused by `afr witness` and by the witness, a forged
//! cosignature tampered.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use afr_core::verify::Outcome;
use afr_recorder::{Config, Recorder};
use afr_testkit::shell_event;
use afr_tlog::{Policy, proof::TlogProof, tree};
use afr_verify::{Kind, Source, Trust};

use super::{afr, initialised, ok, proc::Daemon};

/// A running `afr witness serve`: the process, its URL and its vkey.
struct Witness {
    daemon: Daemon,
    url: String,
    vkey: String,
}

fn witness(tmp: &Path, name: &str, log_vkey: &str) -> Witness {
    let key = tmp.join(format!("{name}.key"));
    let serve = |c: &mut Command| {
        c.args(["witness", "serve", "--key"]).arg(&key).args([
            "--init",
            "--name",
            &format!("witness.test/{name}"),
        ]);
    };
    let mut c = afr(tmp);
    serve(&mut c);
    let vkey = String::from_utf8(ok(c.arg("--print-vkey")).stdout)
        .unwrap()
        .trim()
        .to_owned();
    let mut c = afr(tmp);
    serve(&mut c);
    c.args(["--log", log_vkey, "--state"])
        .arg(tmp.join(format!("{name}-state")))
        .args(["--listen", "127.0.0.1:0"]);
    let mut daemon = Daemon::spawn(&mut c);
    let addr = daemon
        .wait_for(|l| l.split("listening on http://").nth(1).map(str::to_owned))
        .unwrap_or_else(|| panic!("witness {name} did not start: {}", daemon.stderr()));
    Witness {
        daemon,
        url: format!("http://{addr}"),
        vkey,
    }
}

fn record(dir: &Path, n: usize, tag: &str) {
    let r = Recorder::open(dir, Config::with_epoch_size(10)).unwrap();
    for i in 0..n {
        r.record(shell_event(&format!("{tag}-{i}"))).unwrap();
    }
}

fn policy_text(ws: &[(&str, &Witness)], quorum: &str) -> String {
    let mut s = String::new();
    for (n, w) in ws {
        s.push_str(&format!("witness {n} {} {}\n", w.vkey, w.url));
    }
    s + quorum
}

fn trust(recorder: &str, log_vkey: &str, roots: &str) -> Trust {
    let text = format!(
        "chain_id = 31337\n{roots}\n[[party]]\nname = \"Acme\"\nrecorders = [\"{recorder}\"]\nlog_keys = [\"{log_vkey}\"]\n"
    );
    Trust::new(Some(("trust.toml", &text)), None, None, None).unwrap()
}

fn verify(bundle: &[u8], t: &Trust) -> afr_verify::Verdict {
    afr_verify::verify(Kind::Bundle, bundle, t, Source::None).unwrap()
}

fn witness_cmd(dir: &Path, policy: &Path) -> std::process::Output {
    afr(dir)
        .args(["witness", "--policy"])
        .arg(policy)
        .output()
        .unwrap()
}

fn disclose(dir: &Path, seq: &str, out: &Path, proofs: Option<&Path>) {
    let mut c = afr(dir);
    c.args(["disclose", "--with-keys", "--seq", seq, "--out"])
        .arg(out);
    if let Some(p) = proofs {
        c.arg("--tlog-proof").arg(p);
    }
    ok(&mut c);
}

fn recorder_hex(dir: &Path) -> String {
    let r = Recorder::open(dir, Config::default()).unwrap();
    format!("0x{}", hex::encode(r.store().recorder_id().unwrap()))
}

fn epoch_roots(dir: &Path) -> Vec<afr_core::Hash32> {
    let r = Recorder::open(dir, Config::default()).unwrap();
    r.store()
        .epochs_from(0)
        .unwrap()
        .map(|kv| {
            afr_core::EpochHeader::decode(&kv.unwrap().1)
                .unwrap()
                .root()
        })
        .collect()
}

#[test]
fn witnessed_checkpoints_verify_under_the_trust_policy_and_forks_are_refused() {
    let (tmp, dir) = initialised();
    let tmp = tmp.path().to_owned();
    record(&dir, 30, "a");
    let recorder = recorder_hex(&dir);
    let log_vkey = String::from_utf8(ok(afr(&dir).args(["witness", "--print-vkey"])).stdout)
        .unwrap()
        .trim()
        .to_owned();
    assert!(
        log_vkey.starts_with(&format!("afr.recorder/{recorder}+")),
        "{log_vkey}"
    );
    let w1 = witness(&tmp, "w1", &log_vkey);
    let mut w2 = witness(&tmp, "w2", &log_vkey);
    let both = policy_text(
        &[("w1", &w1), ("w2", &w2)],
        "group both all w1 w2\nquorum both\n",
    );
    let any = policy_text(
        &[("w1", &w1), ("w2", &w2)],
        "group one any w1 w2\nquorum one\n",
    );
    let pfile = tmp.join("witnesses.policy");
    std::fs::write(&pfile, &both).unwrap();
    let out = witness_cmd(&dir, &pfile);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("witness w1 cosigned size 3") && said.contains("witness w2 cosigned size 3"),
        "{said}"
    );

    // The bundle carries the checkpoint; the tlog-proof stands alone.
    let bundle_path = tmp.join("b.bundle");
    let proofs = tmp.join("proofs");
    disclose(&dir, "15", &bundle_path, Some(&proofs));
    let bundle = std::fs::read(&bundle_path).unwrap();
    let p = TlogProof::parse(&std::fs::read(proofs.join("15.tlog-proof")).unwrap()).unwrap();
    assert_eq!(p.index, 1);
    let policy = Policy::parse(&format!("log {log_vkey}\n{both}")).unwrap();
    let checked = afr_tlog::check_checkpoint(
        p.checkpoint.as_bytes(),
        &policy,
        &format!("afr.recorder/{recorder}"),
        u64::MAX / 4,
    )
    .unwrap();
    assert!(checked.quorum_met);
    let roots = epoch_roots(&dir);
    afr_core::merkle::verify_inclusion(
        &tree::leaf(&roots[1]),
        1,
        3,
        &p.path,
        &checked.checkpoint.root,
    )
    .unwrap();
    assert!(p.extra.is_some());

    let witnesses = |pol: &str, require: &str| {
        trust(
            &recorder,
            &log_vkey,
            &format!("[roots]\n{require}\nwitness_policy = \"\"\"\n{pol}\"\"\"\n"),
        )
    };
    let v = verify(&bundle, &witnesses(&both, "require = [\"witnesses\"]"));
    assert_eq!(
        v.outcome,
        Outcome::Verified,
        "{:?} {:?}",
        v.missing,
        v.first_failure
    );
    assert!(
        v.checks.iter().any(|(c, _)| c == "witness-quorum"),
        "{:?}",
        v.checks
    );
    let roots_json = v.roots.clone().unwrap();
    assert!(
        roots_json["epochs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["witnessed_at"].is_u64()),
        "{roots_json}"
    );
    // The chain alone is required by default: without an RPC, incomplete.
    let v = verify(&bundle, &witnesses(&both, ""));
    assert_eq!(v.outcome, Outcome::Incomplete);
    // Chain and witnesses: the chain is still missing.
    let v = verify(
        &bundle,
        &witnesses(&both, "require = [\"chain\", \"witnesses\"]"),
    );
    assert_eq!(v.outcome, Outcome::Incomplete);
    // Any one of three: the witnesses suffice.
    let v = verify(&bundle, &witnesses(&both, "require_any = 1"));
    assert_eq!(v.outcome, Outcome::Verified, "{:?}", v.missing);
    // A forged cosignature (one base64 character of w2's changed) is tampered.
    let note = afr_tlog::Note::parse(checked_note(&bundle).as_bytes()).unwrap();
    let w2_line = note
        .signatures
        .iter()
        .find(|s| s.name == "witness.test/w2")
        .unwrap()
        .line();
    let b64 = w2_line.rsplit(' ').next().unwrap().trim_end().to_owned();
    let mut forged_b64 = b64.clone().into_bytes();
    forged_b64[30] = if forged_b64[30] == b'A' { b'B' } else { b'A' };
    let forged = replace_bytes(&bundle, b64.as_bytes(), &forged_b64);
    let v = verify(&forged, &witnesses(&both, "require = [\"witnesses\"]"));
    assert_eq!(v.outcome, Outcome::Tampered);
    assert_eq!(v.first_failure.unwrap().check.name(), "cosignature");

    // One witness down: w1 alone cosigns size 4; the quorum "both" is not met, "any" is.
    let _ = w2.daemon.guard.0.kill();
    let _ = w2.daemon.guard.0.wait();
    record(&dir, 10, "b");
    let out = witness_cmd(&dir, &pfile);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("witness w1 cosigned size 4"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("witness w2"));
    disclose(&dir, "35", &bundle_path, None);
    let bundle = std::fs::read(&bundle_path).unwrap();
    let v = verify(&bundle, &witnesses(&both, "require = [\"witnesses\"]"));
    assert_eq!(v.outcome, Outcome::Incomplete);
    assert!(
        v.missing
            .iter()
            .any(|m| m.contains("short of the quorum both")),
        "{:?}",
        v.missing
    );
    let v = verify(&bundle, &witnesses(&any, "require = [\"witnesses\"]"));
    assert_eq!(v.outcome, Outcome::Verified, "{:?}", v.missing);

    // A fork: the store's database rolled back to 3 epochs and refilled with other events.
    let snapshot = tmp.join("snapshot");
    copy_dir(&dir.join("db"), &snapshot);
    record(&dir, 10, "c");
    std::fs::write(&pfile, policy_text(&[("w1", &w1)], "quorum w1\n")).unwrap();
    assert!(witness_cmd(&dir, &pfile).status.success());
    std::fs::remove_dir_all(dir.join("db")).unwrap();
    copy_dir(&snapshot, &dir.join("db"));
    record(&dir, 20, "forged");
    let out = witness_cmd(&dir, &pfile);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a fork"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The operator also wipes its own checkpoints: the witness refuses the other history,
    // and its head proves it.
    for e in std::fs::read_dir(dir.join("roots")).unwrap() {
        let p = e.unwrap().path();
        if p.extension()
            .is_some_and(|x| x == "checkpoint" || x == "json")
        {
            std::fs::remove_file(p).unwrap();
        }
    }
    let out = witness_cmd(&dir, &pfile);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains("witness w1 refused size") && err.contains("its head size"),
        "{err}"
    );
}

/// The note of the first checkpoint frame of a bundle.
fn checked_note(bundle: &[u8]) -> String {
    afr_core::bundle::verify_bundle(bundle).checkpoints[0]
        .note
        .clone()
}

fn replace_bytes(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let i = hay.windows(from.len()).position(|w| w == from).unwrap();
    let mut out = hay.to_vec();
    out[i..i + from.len()].copy_from_slice(to);
    out
}

fn copy_dir(from: &Path, to: &PathBuf) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// Hostile checkpoint frames, built here with the recorder's own log key and a witness key of
/// the test: reordered, inconsistent (equivocation), over another tree, oversized, dated in
/// the future, signed by an unpinned key.
#[test]
fn hostile_checkpoint_frames_are_tampered_or_not_counted() {
    use afr_core::bundle::CheckpointFrame;
    use afr_tlog::{Checkpoint, Note, NoteSigner, note::TYPE_COSIGNATURE};
    let (_tmp, dir) = initialised();
    record(&dir, 40, "a");
    let recorder = recorder_hex(&dir);
    let log_vkey = String::from_utf8(ok(afr(&dir).args(["witness", "--print-vkey"])).stdout)
        .unwrap()
        .trim()
        .to_owned();
    let seed = afr_recorder::read_key_file(&dir.join("roots/log.key")).unwrap();
    let origin = format!("afr.recorder/{recorder}");
    let log = NoteSigner::new(&origin, afr_tlog::note::TYPE_ED25519, &seed).unwrap();
    let wit = NoteSigner::new(
        "witness.test/x",
        TYPE_COSIGNATURE,
        &zeroize::Zeroizing::new([5; 32]),
    )
    .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let roots = epoch_roots(&dir);
    let leaves = tree::leaves(&roots);
    let n = leaves.len() as u64;
    // A bundle of epoch 1's events: headers 0..=1, so h = 2.
    let base = afr_recorder::LogReader::open(&dir)
        .unwrap()
        .disclose(&[15], true)
        .unwrap();
    let h = base.headers.len() as u64;
    let sign = |size: u64, root: afr_core::Hash32, t: u64| {
        let text = Checkpoint {
            origin: origin.clone(),
            size,
            root,
            extensions: vec![],
        }
        .text();
        let sigs = vec![log.sign(&text), wit.cosign(&text, t)];
        Note {
            text,
            signatures: sigs,
        }
        .to_text()
    };
    let frame = |size: u64, t: u64| CheckpointFrame {
        note: sign(size, tree::root(&leaves[..size as usize]), t),
        proof: if size > h {
            tree::consistency_proof(&leaves, h, size).unwrap()
        } else {
            vec![]
        },
        tokens: vec![],
    };
    let with = |frames: Vec<CheckpointFrame>| {
        let mut b = base.clone();
        b.checkpoints = frames;
        b.encode()
    };
    let t = trust(
        &recorder,
        &log_vkey,
        &format!(
            "[roots]\nrequire = [\"witnesses\"]\nwitness_policy = \"witness x {}\\nquorum x\\n\"\n",
            wit.verifier()
        ),
    );
    let check_name = |v: &afr_verify::Verdict| v.first_failure.as_ref().map(|f| f.check.name());
    // Honest: verified.
    let v = verify(&with(vec![frame(n, now)]), &t);
    assert_eq!(
        v.outcome,
        Outcome::Verified,
        "{:?} {:?}",
        v.missing,
        v.first_failure
    );
    // Two honest frames, ascending: verified; descending: tampered.
    let v = verify(&with(vec![frame(h, now), frame(n, now)]), &t);
    assert_eq!(
        v.outcome,
        Outcome::Verified,
        "{:?} {:?}",
        v.missing,
        v.first_failure
    );
    let v = verify(&with(vec![frame(n, now), frame(h, now)]), &t);
    assert_eq!(
        (v.outcome, check_name(&v)),
        (Outcome::Tampered, Some("checkpoint"))
    );
    // Equivocation: a second, larger checkpoint of another history.
    let mut other = roots.clone();
    other.push(afr_core::hash::sha256(&[b"invented epoch"]));
    other[n as usize - 1] = afr_core::hash::sha256(&[b"rewritten epoch"]);
    let ol = tree::leaves(&other);
    let fork = CheckpointFrame {
        note: sign(n + 1, tree::root(&ol), now),
        proof: tree::consistency_proof(&ol, n, n + 1).unwrap(),
        tokens: vec![],
    };
    let v = verify(&with(vec![frame(n, now), fork]), &t);
    assert_eq!(
        (v.outcome, check_name(&v)),
        (Outcome::Tampered, Some("checkpoint")),
        "{:?}",
        v.first_failure
    );
    // A checkpoint over another tree of the bundle's own epochs.
    let bad = CheckpointFrame {
        note: sign(h, afr_core::hash::sha256(&[b"x"]), now),
        proof: vec![],
        tokens: vec![],
    };
    let v = verify(&with(vec![bad]), &t);
    assert_eq!(
        (v.outcome, check_name(&v)),
        (Outcome::Tampered, Some("checkpoint"))
    );
    // An oversized note: the bundle is malformed.
    let huge = CheckpointFrame {
        note: "x".repeat(70_000),
        proof: vec![],
        tokens: vec![],
    };
    let v = verify(&with(vec![huge]), &t);
    assert_eq!(v.outcome, Outcome::Tampered);
    // A cosignature dated an hour ahead: verified as a signature, not counted.
    let v = verify(&with(vec![frame(n, now + 3600)]), &t);
    assert_eq!(v.outcome, Outcome::Incomplete);
    assert!(
        v.missing.iter().any(|m| m.contains("in the future")),
        "{:?}",
        v.missing
    );
    // A checkpoint signed by a key not pinned for this recorder.
    let stranger = NoteSigner::new(
        &origin,
        afr_tlog::note::TYPE_ED25519,
        &zeroize::Zeroizing::new([9; 32]),
    )
    .unwrap();
    let text = Checkpoint {
        origin: origin.clone(),
        size: h,
        root: tree::root(&leaves[..h as usize]),
        extensions: vec![],
    }
    .text();
    let note = Note {
        signatures: vec![stranger.sign(&text), wit.cosign(&text, now)],
        text,
    }
    .to_text();
    let v = verify(
        &with(vec![CheckpointFrame {
            note,
            proof: vec![],
            tokens: vec![],
        }]),
        &t,
    );
    assert_eq!(v.outcome, Outcome::Incomplete);
    assert!(
        v.missing
            .iter()
            .any(|m| m.contains("not signed by a pinned log key")),
        "{:?}",
        v.missing
    );
    // The same frames under the default rule (the chain): the witnesses change nothing.
    let t_chain = trust(&recorder, &log_vkey, "");
    let v = verify(&with(vec![frame(n, now)]), &t_chain);
    assert_eq!(v.outcome, Outcome::Incomplete);
    assert!(
        v.missing
            .iter()
            .any(|m| m.contains("anchored roots not checked")),
        "{:?}",
        v.missing
    );
}

/// A self-signed TSA certificate made by openssl (`NAME.pem`, key `NAME.key`), pinned
/// directly in the trust file.
fn tsa_cert(dir: &Path, name: &str) {
    ok(Command::new("openssl").current_dir(dir).args([
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        &format!("{name}.key"),
        "-out",
        &format!("{name}.pem"),
        "-days",
        "365",
        "-subj",
        &format!("/O=AFR roots test/CN={name}"),
        "-addext",
        "basicConstraints=critical,CA:false",
        "-addext",
        "keyUsage=critical,digitalSignature",
        "-addext",
        "extendedKeyUsage=critical,timeStamping",
    ]));
}

/// A real RFC 3161 TSA: `openssl ts -reply` behind tests/tsa/tsa_shim.py, its base URL. The
/// shim exits when its stdin (held by the returned child) closes.
fn tsa_shim(dir: &Path, signer: &str) -> (super::proc::Guard, String) {
    std::fs::write(
        dir.join("ts.cnf"),
        format!(
            "[ tsa ]\nserial = ./tsa.serial\ncrypto_device = builtin\nsigner_cert = ./{signer}.pem\n\
             signer_key = ./{signer}.key\nsigner_digest = sha256\ndefault_policy = 1.3.6.1.4.1.99999.2.1\n\
             digests = sha256\naccuracy = secs:1\ness_cert_id_alg = sha256\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("tsa.serial"), "01\n").unwrap();
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/tsa/tsa_shim.py");
    let mut child = Command::new("python3")
        .arg(shim)
        .arg(dir.join("ts.cnf"))
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let base = line.trim().strip_prefix("listening ").unwrap().to_owned();
    (super::proc::Guard(child), format!("{base}/tsa"))
}

#[test]
fn rfc3161_timestamps_from_openssl_verify_under_the_pinned_tsa() {
    let (tmp, dir) = initialised();
    let tmp = tmp.path().to_owned();
    tsa_cert(&tmp, "pinned-tsa");
    tsa_cert(&tmp, "other-tsa");
    let (_shim, url) = tsa_shim(&tmp, "pinned-tsa");
    record(&dir, 30, "a");
    let recorder = recorder_hex(&dir);
    let out = afr(&dir)
        .args(["witness", "--tsa", &format!("acme={url}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("tsa acme timestamped size 3"));
    let log_vkey = std::fs::read_to_string(dir.join("roots/log.vkey"))
        .unwrap()
        .trim()
        .to_owned();
    let b1 = tmp.join("one.bundle");
    disclose(&dir, "5", &b1, None);
    let pem = |n: &str| std::fs::read_to_string(tmp.join(format!("{n}.pem"))).unwrap();
    let t = |cert: &str, require: &str| {
        trust(
            &recorder,
            &log_vkey,
            &format!(
                "[roots]\n{require}\n[[roots.tsa]]\nname = \"acme\"\ncertificates = \"\"\"\n{cert}\"\"\"\n"
            ),
        )
    };
    let bundle = std::fs::read(&b1).unwrap();
    let v = verify(&bundle, &t(&pem("pinned-tsa"), "require = [\"tsa\"]"));
    assert_eq!(
        v.outcome,
        Outcome::Verified,
        "{:?} {:?}",
        v.missing,
        v.first_failure
    );
    let epochs = v.roots.unwrap()["epochs"].clone();
    assert!(
        epochs[0]["timestamped_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{epochs}"
    );
    // Another TSA pinned: the token counts for nothing.
    let v = verify(&bundle, &t(&pem("other-tsa"), "require = [\"tsa\"]"));
    assert_eq!(v.outcome, Outcome::Incomplete);
    assert!(
        v.missing.iter().any(|m| m.contains("from no pinned TSA")),
        "{:?}",
        v.missing
    );
    // A token moved onto another checkpoint (over another digest): tampered.
    record(&dir, 10, "b");
    ok(afr(&dir).args(["witness", "--tsa", &format!("acme={url}")]));
    let r = afr_recorder::LogReader::open(&dir).unwrap();
    let mut b = r.disclose(&[5], true).unwrap();
    assert_eq!(
        b.checkpoints.len(),
        2,
        "the smallest covering checkpoint (3) and the latest (4)"
    );
    let roots = afr_recorder::roots::Roots::open(&dir, false).unwrap();
    let newer = roots.get(4).unwrap().unwrap();
    b.checkpoints[0].tokens = newer.tokens.into_iter().collect();
    let v = verify(&b.encode(), &t(&pem("pinned-tsa"), "require = [\"tsa\"]"));
    assert_eq!(v.outcome, Outcome::Tampered, "{:?}", v.missing);
    assert_eq!(v.first_failure.unwrap().check.name(), "timestamp");
}

/// Two witnesses and a real anvil chain under one rule: `require = ["chain", "witnesses"]`
/// holds only once both the anchor and the quorum do; `require_any = 2` with one witness
/// down still holds through the chain and the other witness's group.
#[test]
fn chain_and_witnesses_under_one_rule_on_anvil() {
    let chain = afr_testkit::anvil();
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path().to_owned();
    let dir = tmp.join("afr");
    let keyed = |c: &mut Command| {
        c.env("AFR_ANCHOR_KEY", afr_testkit::DEV_KEY)
            .env_remove("AFR_RPC_URL");
    };
    let mut c = afr(&dir);
    keyed(&mut c);
    ok(c.arg("init"));
    let mut c = afr(&dir);
    keyed(&mut c);
    let out = ok(c.args(["deploy", "--json", "--rpc", &chain.url]));
    let contract = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["contract"]
        .as_str()
        .unwrap()
        .to_owned();
    record(&dir, 30, "a");
    let recorder = recorder_hex(&dir);
    let log_vkey = String::from_utf8(ok(afr(&dir).args(["witness", "--print-vkey"])).stdout)
        .unwrap()
        .trim()
        .to_owned();
    let w1 = witness(&tmp, "w1", &log_vkey);
    let w2 = witness(&tmp, "w2", &log_vkey);
    let both = policy_text(
        &[("w1", &w1), ("w2", &w2)],
        "group both all w1 w2\nquorum both\n",
    );
    let pfile = tmp.join("p.policy");
    std::fs::write(&pfile, &both).unwrap();
    assert!(witness_cmd(&dir, &pfile).status.success());
    let b = tmp.join("b.bundle");
    disclose(&dir, "12", &b, None);
    let bundle = std::fs::read(&b).unwrap();
    let rpc = Source::Rpc {
        urls: std::slice::from_ref(&chain.url),
        agree: afr_verify::Agree::All,
        block: None,
        from_block: 0,
    };
    let rule = |require: &str| {
        trust(
            &recorder,
            &log_vkey,
            &format!("[roots]\n{require}\nwitness_policy = \"\"\"\n{both}\"\"\"\n"),
        )
    };
    let run = |t: &Trust| afr_verify::verify(Kind::Bundle, &bundle, t, rpc).unwrap();
    // Witnessed, not yet anchored.
    let v = run(&rule("require = [\"chain\", \"witnesses\"]"));
    assert_eq!(v.outcome, Outcome::Incomplete);
    assert!(
        v.missing.iter().any(|m| m.contains("not anchored")),
        "{:?}",
        v.missing
    );
    let v = run(&rule("require = [\"witnesses\"]"));
    assert_eq!(v.outcome, Outcome::Verified, "{:?}", v.missing);
    // Anchored too.
    let mut c = afr(&dir);
    keyed(&mut c);
    ok(c.args(["anchor", "--rpc", &chain.url, "--contract", &contract]));
    let v = run(&rule("require = [\"chain\", \"witnesses\"]"));
    assert_eq!(
        v.outcome,
        Outcome::Verified,
        "{:?} {:?}",
        v.missing,
        v.first_failure
    );
    let roots = v.roots.unwrap();
    assert!(
        roots["epochs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["chain"] == true && e["witnessed_at"].is_u64()),
        "{roots}"
    );
    // Any two of three: the TSA is absent, both others hold.
    let v = run(&rule("require_any = 2"));
    assert_eq!(v.outcome, Outcome::Verified, "{:?}", v.missing);
    // Any three: the TSA never held.
    let v = run(&rule("require_any = 3"));
    assert_eq!(v.outcome, Outcome::Incomplete);
}
