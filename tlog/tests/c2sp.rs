//! The formats against the C2SP spec's own example and against an independent implementation
//! (Cloudflare's `signed_note` and `tlog_tiles`).
#![expect(clippy::unwrap_used, reason = "tests: a failed step is a failed test")]

use std::collections::HashSet;

use afr_core::{Hash32, hash::sha256};
use afr_tlog::{
    CheckError, Checkpoint, Note, NoteError, NoteSigner, Policy, VerifierKey, check_checkpoint,
    note::{TYPE_COSIGNATURE, TYPE_ED25519},
    proof::TlogProof,
    tree,
    witness::{AddCheckpoint, Head, add_checkpoint},
};
use zeroize::Zeroizing;

fn seed(b: u8) -> Zeroizing<[u8; 32]> {
    Zeroizing::new([b; 32])
}

fn roots(n: u8) -> Vec<Hash32> {
    (0..n).map(|i| sha256(&[b"epoch", &[i]])).collect()
}

const ORIGIN: &str = "afr.recorder/0x00000000000000000000000000000000000000aa";

fn signed(signer: &NoteSigner, leaves: &[Hash32]) -> String {
    let cp = Checkpoint {
        origin: ORIGIN.into(),
        size: leaves.len() as u64,
        root: tree::root(leaves),
        extensions: vec![],
    };
    let text = cp.text();
    Note {
        signatures: vec![signer.sign(&text)],
        text,
    }
    .to_text()
}

#[test]
fn the_spec_example_verifies() {
    // c2sp.org/signed-note, "Example".
    let vkey = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";
    let note = "This is an example message.\n\n\u{2014} example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n";
    let k = VerifierKey::parse(vkey).unwrap();
    assert_eq!(k.to_string(), vkey);
    let n = Note::parse(note.as_bytes()).unwrap();
    assert_eq!(n.verify(std::slice::from_ref(&k)).unwrap(), vec![(0, None)]);
    let forged = note.replace("example message", "exemple message");
    assert!(matches!(
        Note::parse(forged.as_bytes()).unwrap().verify(&[k]),
        Err(NoteError::BadSignature { .. })
    ));
}

#[test]
fn notes_and_checkpoints_verify_under_cloudflares_code() {
    let log = NoteSigner::new(ORIGIN, TYPE_ED25519, &seed(1)).unwrap();
    let leaves = tree::leaves(&roots(7));
    let text = signed(&log, &leaves);
    let theirs = signed_note::Note::from_bytes(text.as_bytes()).unwrap();
    let v = signed_note::StandardVerifier::new(&log.verifier().to_string()).unwrap();
    let (ok, _) = theirs
        .verify(&signed_note::VerifierList::new(vec![Box::new(v)]))
        .unwrap();
    assert_eq!(ok.len(), 1);
    let cp = tlog_tiles::Checkpoint::from_bytes(theirs.text()).unwrap();
    assert_eq!(cp.size(), 7);
    assert_eq!(cp.hash().0, tree::root(&leaves).0);
    assert_eq!(cp.origin(), ORIGIN);
    // And their signatures verify under ours.
    let seed = [7u8; 32];
    let public = ed25519_dalek::SigningKey::from_bytes(&seed)
        .verifying_key()
        .to_bytes();
    let mine = VerifierKey::new("example.org/log", TYPE_ED25519, public).unwrap();
    let mut raw = vec![TYPE_ED25519];
    raw.extend_from_slice(&seed);
    let skey = format!("PRIVATE+KEY+example.org/log+{:08x}+{}", mine.id, b64(&raw));
    let signer = signed_note::StandardSigner::new(&skey).unwrap();
    let mut n = signed_note::Note::new(
        b"example.org/log\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
        &[],
    )
    .unwrap();
    n.add_sigs(&[&signer]).unwrap();
    let ours = Note::parse(&n.to_bytes()).unwrap();
    assert_eq!(ours.verify(&[mine]).unwrap().len(), 1);
}

fn b64(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[test]
fn consistency_proofs_check_under_tlog_tiles() {
    let leaves = tree::leaves(&roots(23));
    for old in 1..23u64 {
        for new in old..=23 {
            let p = tree::consistency_proof(&leaves, old, new).unwrap();
            let theirs: Vec<tlog_tiles::Hash> = p.iter().map(|h| tlog_tiles::Hash(h.0)).collect();
            let r = |n: u64| tlog_tiles::Hash(tree::root(&leaves[..n as usize]).0);
            tlog_tiles::check_tree(&theirs, new, r(new), old, r(old)).unwrap();
        }
    }
}

/// A `cosignature/v1` checker written from the spec text alone, for the test.
struct SpecCosigVerifier {
    name: String,
    id: u32,
    key: ed25519_dalek::VerifyingKey,
}

impl signed_note::Verifier for SpecCosigVerifier {
    fn name(&self) -> &str {
        &self.name
    }
    fn key_id(&self) -> u32 {
        self.id
    }
    fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        if sig.len() != 72 {
            return false;
        }
        let ts = u64::from_be_bytes(sig[..8].try_into().unwrap());
        let mut m = format!("cosignature/v1\ntime {ts}\n").into_bytes();
        m.extend_from_slice(msg);
        let s = ed25519_dalek::Signature::from_slice(&sig[8..]).unwrap();
        self.key.verify_strict(&m, &s).is_ok()
    }
}

fn witness_policy(ws: &[&NoteSigner], log: &NoteSigner, quorum: &str) -> Policy {
    let mut text = format!("log {}\n", log.verifier());
    for (i, w) in ws.iter().enumerate() {
        text.push_str(&format!("witness w{i} {}\n", w.verifier()));
    }
    text.push_str(quorum);
    Policy::parse(&text).unwrap()
}

#[test]
fn a_witness_cosigns_consistent_checkpoints_and_refuses_the_rest() {
    let log = NoteSigner::new(ORIGIN, TYPE_ED25519, &seed(1)).unwrap();
    let w = NoteSigner::new("witness.example/w1", TYPE_COSIGNATURE, &seed(2)).unwrap();
    let keys = [log.verifier().clone()];
    let leaves = tree::leaves(&roots(12));
    let at = |n: usize| signed(&log, &leaves[..n]);
    let req = |old: u64, new: u64| AddCheckpoint {
        old,
        proof: if old == 0 {
            vec![]
        } else {
            tree::consistency_proof(&leaves, old, new).unwrap()
        },
        checkpoint: at(new as usize),
    };
    // A round trip through the body format.
    let r = req(0, 5);
    assert_eq!(AddCheckpoint::parse(r.body().as_bytes()).unwrap(), r);
    let (head, sig) = add_checkpoint(&r, &keys, None, &w, 1_700_000_000).unwrap();
    assert_eq!(head.size, 5);
    // The cosignature verifies under a checker written from the spec, through signed_note.
    let v = SpecCosigVerifier {
        name: w.verifier().name.clone(),
        id: w.verifier().id,
        key: ed25519_dalek::VerifyingKey::from_bytes(&w.verifier().public).unwrap(),
    };
    let theirs = signed_note::Note::from_bytes(head.note.as_bytes()).unwrap();
    let (ok, _) = theirs
        .verify(&signed_note::VerifierList::new(vec![Box::new(v)]))
        .unwrap();
    assert_eq!(ok.len(), 1);
    assert_eq!(
        Note::parse(head.note.as_bytes()).unwrap().signatures.last(),
        Some(&sig)
    );
    // Stale old size: 409 with the size.
    let e = add_checkpoint(&req(0, 8), &keys, Some(&head), &w, 1).unwrap_err();
    assert_eq!(
        (e.status, e.body.as_str(), e.content_type),
        (409, "5\n", "text/x.tlog.size")
    );
    // Extending: 200.
    let (head2, _) = add_checkpoint(&req(5, 8), &keys, Some(&head), &w, 2).unwrap();
    assert_eq!(head2.size, 8);
    // A fork: another history of 10 epochs whose first 8 differ at epoch 6.
    let mut forked = roots(10);
    forked[6] = sha256(&[b"other"]);
    let fl = tree::leaves(&forked);
    let fork = AddCheckpoint {
        old: 8,
        proof: tree::consistency_proof(&fl, 8, 10).unwrap(),
        checkpoint: signed(&log, &fl),
    };
    assert_eq!(
        add_checkpoint(&fork, &keys, Some(&head2), &w, 3)
            .unwrap_err()
            .status,
        422
    );
    // Same size, other root: 422. Unknown origin: 404. Untrusted signer: 403. old > size: 400.
    let same = AddCheckpoint {
        old: 8,
        proof: vec![],
        checkpoint: signed(&log, &fl[..8]),
    };
    assert_eq!(
        add_checkpoint(&same, &keys, Some(&head2), &w, 3)
            .unwrap_err()
            .status,
        422
    );
    assert_eq!(
        add_checkpoint(&req(5, 8), &[], None, &w, 3)
            .unwrap_err()
            .status,
        404
    );
    let other = NoteSigner::new(ORIGIN, TYPE_ED25519, &seed(9)).unwrap();
    let bad = AddCheckpoint {
        old: 0,
        proof: vec![],
        checkpoint: signed(&other, &leaves[..3]),
    };
    assert_eq!(
        add_checkpoint(&bad, &keys, None, &w, 3).unwrap_err().status,
        403
    );
    let back = AddCheckpoint {
        old: 9,
        proof: vec![],
        checkpoint: at(8),
    };
    assert_eq!(
        add_checkpoint(&back, &keys, Some(&head2), &w, 3)
            .unwrap_err()
            .status,
        400
    );
    // A non-empty proof from old size 0: 422.
    let mut r = req(0, 4);
    r.proof = vec![leaves[0]];
    assert_eq!(
        add_checkpoint(&r, &keys, None, &w, 3).unwrap_err().status,
        422
    );
}

#[test]
fn quorums_groups_and_hostile_cosignatures() {
    let log = NoteSigner::new(ORIGIN, TYPE_ED25519, &seed(1)).unwrap();
    let ws: Vec<NoteSigner> = (0..3)
        .map(|i| {
            NoteSigner::new(&format!("w.example/{i}"), TYPE_COSIGNATURE, &seed(10 + i)).unwrap()
        })
        .collect();
    let refs: Vec<&NoteSigner> = ws.iter().collect();
    let p = witness_policy(&refs, &log, "group two 2 w0 w1 w2\nquorum two\n");
    let leaves = tree::leaves(&roots(4));
    let mut note = Note::parse(signed(&log, &leaves).as_bytes()).unwrap();
    let now = 1_800_000_000;
    note.signatures.push(ws[0].cosign(&note.text, now - 10));
    let c = check_checkpoint(note.to_text().as_bytes(), &p, ORIGIN, now).unwrap();
    assert!(!c.quorum_met);
    assert_eq!(c.cosigned, vec![("w0".to_owned(), now - 10)]);
    // A second witness, but dated an hour ahead: verified, not counted.
    note.signatures.push(ws[1].cosign(&note.text, now + 3600));
    let c = check_checkpoint(note.to_text().as_bytes(), &p, ORIGIN, now).unwrap();
    assert!(!c.quorum_met);
    assert_eq!(c.not_counted.len(), 1);
    note.signatures.push(ws[2].cosign(&note.text, now));
    let c = check_checkpoint(note.to_text().as_bytes(), &p, ORIGIN, now).unwrap();
    assert!(c.quorum_met);
    // A cosignature that does not verify rejects the note.
    let mut bad = note.clone();
    let last = bad.signatures.len() - 1;
    bad.signatures[last].sig[20] ^= 1;
    assert_eq!(
        check_checkpoint(bad.to_text().as_bytes(), &p, ORIGIN, now),
        Err(CheckError::BadCosignature("w2".into()))
    );
    // An unknown key with a known name (other ID) is ignored.
    let mut odd = note.clone();
    let mut s = ws[0].cosign(&note.text, now);
    s.id ^= 1;
    odd.signatures.push(s);
    assert!(
        check_checkpoint(odd.to_text().as_bytes(), &p, ORIGIN, now)
            .unwrap()
            .quorum_met
    );
    // Another origin, a note signed by no pinned log key.
    assert!(matches!(
        check_checkpoint(note.to_text().as_bytes(), &p, "other/log", now),
        Err(CheckError::Origin { .. })
    ));
    let other = NoteSigner::new(ORIGIN, TYPE_ED25519, &seed(99)).unwrap();
    assert!(matches!(
        check_checkpoint(signed(&other, &leaves).as_bytes(), &p, ORIGIN, now),
        Err(CheckError::LogSignature(_))
    ));
    // The group arithmetic.
    let met = |names: &[&str]| p.met(&names.iter().copied().collect::<HashSet<_>>());
    assert!(!met(&["w0"]));
    assert!(met(&["w0", "w2"]));
    let _ = Head {
        size: 0,
        root: Hash32([0; 32]),
        note: String::new(),
    };
}

#[test]
fn malformed_input_is_refused_with_a_reason() {
    for (bytes, want) in [
        (&b"no signatures\n"[..], "no signature block"),
        (b"x\n\n\xe2\x80\x94 name AAAA\n", "malformed"),
        (b"x\n\n- name AAAAAAA=\n", "malformed"),
        (b"x\x01\n\n\xe2\x80\x94 n AAAAAAA=\n", "control"),
    ] {
        let e = Note::parse(bytes).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
    assert!(
        Note::parse(&vec![b'a'; 70_000])
            .unwrap_err()
            .to_string()
            .contains("at most")
    );
    let many: String = "t\n\n".to_owned() + &"\u{2014} n AAAAAAA=\n".repeat(101);
    assert!(matches!(
        Note::parse(many.as_bytes()),
        Err(NoteError::TooManySignatures(101))
    ));
    for text in [
        "o\n01\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
        "o\n1\nAAAA\n",
        "o\n1\n",
        "o\n\n1\nx\n",
    ] {
        assert!(Checkpoint::parse_text(text).is_err(), "{text:?}");
    }
    for vkey in [
        "a+b",
        "n+0000000+AQ==",
        "n+00000000+AQ==",
        "n+00000000+BQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    ] {
        assert!(VerifierKey::parse(vkey).is_err(), "{vkey}");
    }
    // A key whose ID does not match.
    let k = NoteSigner::new("n", TYPE_ED25519, &seed(3))
        .unwrap()
        .verifier()
        .to_string();
    let wrong = format!("n+{:08x}+{}", 0u32, k.rsplit('+').next().unwrap());
    assert!(
        VerifierKey::parse(&wrong)
            .unwrap_err()
            .to_string()
            .contains("key ID")
    );
    // Proofs: more than 63 consistency lines; more than 64 audit path lines.
    let line = b64(&[0u8; 32]) + "\n";
    let body = "old 1\n".to_owned() + &line.repeat(64) + "\nx";
    assert!(
        AddCheckpoint::parse(body.as_bytes())
            .unwrap_err()
            .contains("63")
    );
    let proof = "c2sp.org/tlog-proof@v1\nindex 0\n".to_owned() + &line.repeat(65) + "\nx";
    assert!(
        TlogProof::parse(proof.as_bytes())
            .unwrap_err()
            .contains("64")
    );
    for p in [
        "c2sp.org/tlog-proof@v2\nindex 0\n\nx",
        "c2sp.org/tlog-proof@v1\nindex 01\n\nx",
        "c2sp.org/tlog-proof@v1\nextra !!\nindex 0\n\nx",
    ] {
        assert!(TlogProof::parse(p.as_bytes()).is_err(), "{p}");
    }
    let ok = TlogProof {
        extra: Some(vec![1, 2]),
        index: 3,
        path: vec![Hash32([9; 32])],
        checkpoint: "c\n".into(),
    };
    assert_eq!(TlogProof::parse(ok.to_text().as_bytes()).unwrap(), ok);
    // Policies.
    for (text, want) in [
        ("quorum w\n", "not defined"),
        ("witness none x\n", "line 1"),
        ("", "no quorum"),
        ("quorum none\nquorum none\n", "second quorum"),
    ] {
        let e = Policy::parse(text).unwrap_err().to_string();
        assert!(e.contains(want), "{text:?}: {e}");
    }
}
