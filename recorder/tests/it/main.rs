//! Integration tests of the recorder on a real RocksDB store.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on purpose"
)]

use std::time::Duration;

mod blind_index;
mod query;

use afr_core::{
    EventInput,
    crypto::{MasterKey, Slot, decrypt},
    event::Payload,
    verify::{Check, Outcome, verify_log},
};
use afr_recorder::{
    Column, Config, Corruption, Durability, Entry, Kept, KeptOp, RawOp, RecordError, Recorder,
    export_log, init, read_key_file,
};
use afr_testkit::synth;

/// A temporary directory holding a fresh store (`init`) of recorder `id`, and the store's path.
fn initialised(id: [u8; 20]) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    init(&dir, id).unwrap();
    (tmp, dir)
}

fn fresh(config: Config) -> (tempfile::TempDir, Recorder) {
    let (tmp, dir) = initialised([0xab; 20]);
    let r = Recorder::open(&dir, config).unwrap();
    (tmp, r)
}

fn cfg(epoch_size: u64, durability: Durability) -> Config {
    Config {
        epoch_size,
        durability,
        ..Config::default()
    }
}

fn export(r: &Recorder) -> Vec<u8> {
    r.flush().unwrap();
    let mut out = Vec::new();
    export_log(r.store(), &mut out).unwrap();
    out
}

/// A kept value as it is stored: the store never decodes what it keeps for the anchorer.
fn bytes(b: &[u8]) -> Result<Vec<u8>, std::convert::Infallible> {
    Ok(b.to_vec())
}

#[test]
fn values_kept_for_the_anchorer_are_opaque_and_never_under_the_stores_own_names() {
    let (_tmp, r) = fresh(cfg(10, Durability::Sync));
    let s = r.store();
    s.write_kept(&[
        KeptOp::Put(Kept::Epoch(3), b"three"),
        KeptOp::Put(Kept::Epoch(1), b"one"),
        KeptOp::Put(Kept::Named(b"anchor-marker"), b"marker"),
        KeptOp::Put(Kept::Named(b"archived-anchor/a"), b"a"),
        KeptOp::Put(Kept::Named(b"archived-anchor/b"), b"b"),
    ])
    .unwrap();
    assert_eq!(
        s.kept(Kept::Epoch(1), bytes).unwrap(),
        Some(b"one".to_vec())
    );
    assert_eq!(s.kept(Kept::Epoch(2), bytes).unwrap(), None);
    let last = s.last_kept(|e, b| Ok::<_, std::convert::Infallible>((e, b.to_vec())));
    assert_eq!(last.unwrap(), Some((3, b"three".to_vec())));
    let from: Vec<(u64, Vec<u8>)> = s
        .kept_from(2, |e, b| Ok::<_, std::convert::Infallible>((e, b.to_vec())))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(from, [(3, b"three".to_vec())]);
    let archived = s
        .kept_prefixed(b"archived-anchor/", |rest, v| {
            Ok::<_, std::convert::Infallible>([rest, v].concat())
        })
        .unwrap();
    assert_eq!(archived, [b"aa".to_vec(), b"bb".to_vec()]);
    // A value its owner cannot decode is corruption of that entry.
    let e = s
        .kept(Kept::Epoch(3), |_| Err::<(), _>("not a receipt"))
        .unwrap_err();
    assert!(
        matches!(
            &e,
            RecordError::Corrupt(Corruption::Malformed { entry: Entry::Anchor(3), reason })
                if reason == "not a receipt"
        ),
        "{e}"
    );
    // The store's own names are refused, and the batch writes nothing.
    for own in [
        &b"recorder"[..],
        b"format",
        b"index/watermark",
        b"idempotency/k",
    ] {
        let e = s
            .write_kept(&[
                KeptOp::Delete(Kept::Epoch(1)),
                KeptOp::Put(Kept::Named(own), b"x"),
            ])
            .unwrap_err();
        assert!(e.to_string().contains("the store's own"), "{e}");
        assert!(
            matches!(&e, RecordError::ReservedName(n) if n == own),
            "{e}"
        );
    }
    assert_eq!(
        s.kept(Kept::Epoch(1), bytes).unwrap(),
        Some(b"one".to_vec())
    );
    s.write_kept(&[KeptOp::Delete(Kept::Named(b"anchor-marker"))])
        .unwrap();
    assert_eq!(s.kept(Kept::Named(b"anchor-marker"), bytes).unwrap(), None);
    // The recorder still opens and records over what it keeps.
    r.record(synth::generate(1, 3).remove(0)).unwrap();
}

#[test]
fn corruption_names_the_entry_and_what_is_wrong() {
    let (_tmp, dir) = initialised([0xee; 20]);
    {
        let r = Recorder::open(&dir, cfg(100, Durability::Sync)).unwrap();
        for ev in synth::generate(10, 5) {
            r.record(ev).unwrap();
        }
        r.store()
            .raw_write(&[RawOp::Delete(Column::Payloads, &3u64.to_be_bytes())])
            .unwrap();
        let e = export_log(r.store(), &mut Vec::new()).unwrap_err();
        assert!(
            matches!(
                e,
                RecordError::Corrupt(Corruption::OutOfPlace {
                    found: Entry::Payload(4),
                    expected: Entry::Payload(3)
                })
            ),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "store is inconsistent: payload 4 found where payload 3 was expected"
        );
    }
    let e = Recorder::open(&dir, cfg(100, Durability::Sync)).unwrap_err();
    assert!(
        matches!(
            e,
            RecordError::Corrupt(Corruption::Missing(Entry::Payload(3)))
        ),
        "{e}"
    );
}

#[test]
fn every_epoch_size_records_seals_exports_and_verifies() {
    let events = synth::generate(1_234, 7);
    for size in [10u64, 50, 100, 500, 1000] {
        let (_tmp, r) = fresh(cfg(size, Durability::Buffered));
        for ev in events.clone() {
            r.record(ev).unwrap();
        }
        // Before the last seal the tail is unsealed: incomplete, never tampered.
        let rep = verify_log(&export(&r));
        let tail = 1_234 % size;
        if tail > 0 {
            assert_eq!(rep.outcome, Outcome::Incomplete, "size {size}: {rep:?}");
        }
        r.seal().unwrap();
        let rep = verify_log(&export(&r));
        assert_eq!(
            rep.outcome,
            Outcome::Verified,
            "size {size}: {:?}",
            rep.first_failure
        );
        assert_eq!(rep.events, 1_234);
        assert_eq!(rep.epochs, 1_234u64.div_ceil(size));
        assert_eq!(rep.checks["merkle-root"], rep.epochs);
    }
}

#[test]
fn rejected_events_leave_the_log_untouched() {
    let (_tmp, r) = fresh(Config {
        max_event_bytes: 2_000,
        ..cfg(100, Durability::Group)
    });
    let events = synth::generate(10, 1);
    for ev in events[..5].iter().cloned() {
        r.record(ev).unwrap();
    }
    let before = export(&r);
    // Names an event that has not happened yet.
    let mut bad = events[5].clone();
    bad.concurrent_with = vec![3, 9];
    assert!(matches!(r.record(bad), Err(RecordError::Invalid(m)) if m.path == "concurrent_with"));
    // Over the payload cap.
    let mut big = events[5].clone();
    big.intent.args = serde_json::json!({ "blob": "x".repeat(5_000) });
    assert!(
        matches!(r.record(big), Err(RecordError::Invalid(m)) if m.message.contains("over the cap"))
    );
    assert_eq!(r.next_seq(), 5);
    let after = export(&r);
    // Same events (the export timestamp in the start frame differs).
    assert_eq!(verify_log(&before).events, verify_log(&after).events);
    for ev in events[5..].iter().cloned() {
        r.record(ev).unwrap();
    }
    r.seal().unwrap();
    assert_eq!(verify_log(&export(&r)).outcome, Outcome::Verified);
}

#[test]
fn many_threads_get_gapless_sequence_numbers() {
    let (_tmp, r) = fresh(cfg(100, Durability::Group));
    let mut events = synth::generate(2_000, 3);
    // The generator numbers events as if recorded in order; with four producers the order is
    // decided at run time, so keep the lanes but drop the references to earlier events.
    events.iter_mut().for_each(|e| e.concurrent_with.clear());
    let handles: Vec<_> = events
        .chunks(500)
        .map(|c| {
            let (r, c) = (r.clone(), c.to_vec());
            std::thread::spawn(move || {
                c.into_iter()
                    .map(|e| r.record(e).unwrap().seq)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut seqs: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..2_000).collect::<Vec<_>>());
    r.seal().unwrap();
    let rep = verify_log(&export(&r));
    assert_eq!(rep.outcome, Outcome::Verified);
    // Concurrency metadata survives.
    let with_lane = (0..2_000)
        .filter_map(|s| r.store().record(s).unwrap())
        .filter(|x| x.lane.is_some())
        .count();
    assert!(with_lane > 100, "{with_lane}");
}

#[test]
fn reopening_continues_the_chain_and_the_open_epoch() {
    let (_tmp, dir) = initialised([1; 20]);
    let events = synth::generate(400, 5);
    {
        let r = Recorder::open(&dir, cfg(100, Durability::Group)).unwrap();
        for ev in events[..150].iter().cloned() {
            r.record(ev).unwrap();
        }
        assert_eq!(r.open_epoch(), (1, 50));
    }
    let r = Recorder::open(&dir, cfg(100, Durability::Group)).unwrap();
    assert_eq!(r.next_seq(), 150);
    assert_eq!(r.open_epoch(), (1, 50));
    for ev in events[150..].iter().cloned() {
        r.record(ev).unwrap();
    }
    assert_eq!(r.open_epoch(), (4, 0));
    let rep = verify_log(&export(&r));
    assert_eq!(rep.outcome, Outcome::Verified, "{:?}", rep.first_failure);
    assert_eq!(rep.epochs, 4);
    // A second init of the same directory is refused and harms nothing.
    assert!(init(&dir, [2; 20]).is_err());
}

#[test]
fn old_epochs_seal_by_age_without_new_events() {
    let (_tmp, r) = fresh(Config {
        max_epoch_age: Duration::from_millis(100),
        ..cfg(1000, Durability::Group)
    });
    for ev in synth::generate(3, 9) {
        r.record(ev).unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while r.last_sealed().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let h = r.last_sealed().expect("epoch sealed by age");
    assert_eq!((h.epoch, h.count), (0, 3));
    assert_eq!(verify_log(&export(&r)).outcome, Outcome::Verified);
}

#[test]
fn payloads_decrypt_to_what_was_recorded_and_only_in_their_slot() {
    let (_tmp, dir) = initialised([3; 20]);
    let r = Recorder::open(&dir, cfg(10, Durability::Group)).unwrap();
    let events = synth::generate(25, 11);
    for ev in events.clone() {
        r.record(ev).unwrap();
    }
    let master = MasterKey::from_bytes(*read_key_file(&dir.join("master.key")).unwrap());
    for (seq, ev) in events.into_iter().enumerate() {
        let seq = seq as u64;
        let rec = r.store().record(seq).unwrap().unwrap();
        let sealed = r.store().payload(seq).unwrap().unwrap();
        assert_eq!(sealed.commitment(), rec.payload_commitment);
        let salt = r.store().epoch_salt(rec.epoch).unwrap().unwrap();
        let key = master.epoch_key(&salt, &[3; 20], rec.epoch).event_key(seq);
        let slot = Slot {
            recorder: [3; 20],
            epoch: rec.epoch,
            seq,
        };
        let plain = decrypt(&key, &slot, &sealed).unwrap();
        let (_, want) = ev.into_payload();
        assert_eq!(Payload::decode(&plain).unwrap(), want);
        assert!(
            decrypt(
                &key,
                &Slot {
                    seq: seq + 1,
                    ..slot
                },
                &sealed
            )
            .is_err()
        );
    }
}

#[test]
fn key_file_is_private_and_checked() {
    use std::os::unix::fs::PermissionsExt;
    let (_tmp, dir) = initialised([4; 20]);
    let key = dir.join("master.key");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Recorder::open(&dir, Config::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("must be 600"), "{e}");
}

#[test]
fn a_flipped_byte_anywhere_in_the_export_is_caught() {
    let (_tmp, r) = fresh(cfg(10, Durability::Buffered));
    for ev in synth::generate(40, 2) {
        r.record(ev).unwrap();
    }
    r.seal().unwrap();
    let good = export(&r);
    let honest = verify_log(&good);
    assert_eq!(honest.outcome, Outcome::Verified);
    // Skip the start frame's export timestamp, which no hash covers by design.
    let start_len = 1 + 8 + 1 + 21 + 9;
    let mut caught = 0;
    for i in (start_len..good.len()).step_by(7) {
        let mut bad = good.clone();
        bad[i] ^= 0x01;
        let rep = verify_log(&bad);
        // Either the file no longer verifies, or (for the last epoch's header, which nothing
        // later in the file points back to) the epoch roots it commits to changed, which the
        // comparison with the anchored roots catches.
        assert!(
            rep.outcome != Outcome::Verified || rep.epoch_roots != honest.epoch_roots,
            "flip at {i} not caught"
        );
        caught += 1;
    }
    assert!(caught > 500);
}

#[test]
fn event_json_round_trips_through_the_generator() {
    for ev in synth::generate(50, 4) {
        let line = serde_json::to_vec(&ev).unwrap();
        assert_eq!(EventInput::from_json(&line, 1 << 20).unwrap(), ev);
    }
}

mod disclosure {
    use super::*;
    use afr_core::bundle::verify_bundle;

    type Recorded = (
        tempfile::TempDir,
        std::path::PathBuf,
        Recorder,
        Vec<EventInput>,
    );

    fn recorded(n: u64, epoch_size: u64) -> Recorded {
        recorded_with(n, epoch_size, |_, _| {})
    }

    /// Records `n` synthetic events, each first passed to `edit` with its sequence number.
    fn recorded_with(n: u64, epoch_size: u64, edit: impl Fn(u64, &mut EventInput)) -> Recorded {
        let (tmp, dir) = initialised([0xcd; 20]);
        let r = Recorder::open(&dir, cfg(epoch_size, Durability::Group)).unwrap();
        let mut events = synth::generate(n, 21);
        for (i, e) in events.iter_mut().enumerate() {
            edit(i as u64, e);
        }
        for ev in events.clone() {
            r.record(ev).unwrap();
        }
        r.seal().unwrap();
        (tmp, dir, r, events)
    }

    #[test]
    fn bundles_with_keys_open_exactly_the_disclosed_events() {
        let (_tmp, _dir, r, events) = recorded(300, 100);
        let seqs = [17, 42, 100, 101, 102, 250];
        // Epoch 0 was anchored (the anchorer keeps its receipt, opaque to the store); the
        // bundle does not say where (the verifier reads that from the chain), so the receipt
        // changes nothing.
        let receipt = b"the anchorer's receipt of epoch 0, in its own encoding";
        r.store()
            .write_kept(&[KeptOp::Put(Kept::Epoch(0), receipt)])
            .unwrap();
        assert_eq!(
            r.store().kept(Kept::Epoch(0), bytes).unwrap(),
            Some(receipt.to_vec())
        );
        let b = r.disclose(&seqs, true).unwrap();
        assert_eq!(b.headers.len(), 3);
        let bytes = b.encode();
        let rep = verify_bundle(&bytes);
        assert_eq!(rep.outcome, Outcome::Verified, "{:?}", rep.first_failure);
        assert_eq!(rep.events, seqs);
        for (seq, p) in &rep.opened {
            let (_, want) = events[*seq as usize].clone().into_payload();
            assert_eq!(p, &want);
        }
        assert_eq!(rep.opened.len(), seqs.len());
        // Without keys: integrity checks pass, content is withheld.
        let rep = verify_bundle(&r.disclose(&seqs, false).unwrap().encode());
        assert_eq!(rep.outcome, Outcome::Incomplete);
        assert!(rep.opened.is_empty());
        assert_eq!(rep.missing.len(), seqs.len());
    }

    #[test]
    fn tampered_bundles_are_caught() {
        let (_tmp, _dir, r, _) = recorded(300, 100);
        let b = r.disclose(&[17, 42, 250], true).unwrap();
        let good = b.encode();
        // Every single-bit flip after the start frame is caught (the start frame's creation
        // time is informative and covered by no hash).
        let start_frame = 1 + 11 + 1 + 21 + 9;
        for i in (start_frame..good.len()).step_by(11) {
            let mut bad = good.clone();
            bad[i] ^= 0x04;
            let rep = verify_bundle(&bad);
            assert!(
                rep.outcome != Outcome::Verified
                    || rep.epoch_roots != verify_bundle(&good).epoch_roots,
                "flip at {i} not caught"
            );
        }
        // Swapping two events' keys: the key does not open the other event.
        let mut swapped = b.clone();
        let k0 = swapped.events[0].key.clone();
        swapped.events[0].key = swapped.events[1].key.clone();
        swapped.events[1].key = k0;
        let rep = verify_bundle(&swapped.encode());
        assert_eq!(rep.outcome, Outcome::Tampered);
        assert_eq!(rep.first_failure.unwrap().check, Check::PayloadKey);
        // Swapping ciphertexts: the commitment catches it without any key.
        let mut swapped = b.clone();
        let p0 = swapped.events[0].payload.clone();
        swapped.events[0].payload = swapped.events[1].payload.clone();
        swapped.events[1].payload = p0;
        swapped.events.iter_mut().for_each(|e| e.key = None);
        assert_eq!(
            verify_bundle(&swapped.encode())
                .first_failure
                .unwrap()
                .check,
            Check::PayloadCommitment
        );
        // Dropping a header breaks the back-pointer chain.
        let mut dropped = b.clone();
        dropped.headers.remove(1);
        assert_eq!(verify_bundle(&dropped.encode()).outcome, Outcome::Tampered);
    }

    #[test]
    fn unsealed_events_cannot_be_disclosed() {
        let (_tmp, _dir, r, _) = recorded(10, 100);
        for ev in synth::generate(5, 1) {
            let mut ev = ev;
            ev.concurrent_with.clear();
            r.record(ev).unwrap();
        }
        let e = r.disclose(&[12], true).unwrap_err().to_string();
        assert!(e.contains("not sealed"), "{e}");
    }

    fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
        let mut hits = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                hits.extend(files_containing(&p, needle));
            } else if std::fs::read(&p)
                .unwrap()
                .windows(needle.len())
                .any(|w| w == needle)
            {
                hits.push(p);
            }
        }
        hits
    }

    #[test]
    fn an_erasure_interrupted_before_its_scrub_is_finished_when_the_store_opens() {
        let (_tmp, dir, r, _) = recorded(300, 100);
        let salt = r.store().epoch_salt(1).unwrap().unwrap();
        r.store().flush().unwrap();
        // What erase_epoch's batch does, then the process dies before the scrub: the salt is
        // deleted logically, the flag is set, and the files still hold the salt.
        r.store()
            .raw_write(&[
                RawOp::Delete(Column::Keys, &1u64.to_be_bytes()),
                RawOp::Put(Column::Meta, afr_recorder::META_SCRUB_PENDING, &[1u8]),
            ])
            .unwrap();
        drop(r);
        assert!(
            !files_containing(&dir, &salt).is_empty(),
            "before reopening, the files still hold the salt"
        );
        let r = Recorder::open(&dir, cfg(100, Durability::Group)).unwrap();
        assert_eq!(
            r.store().meta(afr_recorder::META_SCRUB_PENDING).unwrap(),
            None
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !files_containing(&dir, &salt).is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "salt still in {:?} after reopening",
                files_containing(&dir, &salt)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    #[test]
    fn erasure_destroys_key_material_on_disk_and_integrity_still_verifies() {
        // A marker only epoch 1's events carry, in indexed fields (approver, environment):
        // the blind index holds only its keyed hash, and erasure deletes the postings.
        const MARKER: &str = "erasure-marker-7c41d9";
        let (_tmp, dir, r, _) = recorded_with(300, 100, |seq, e| {
            if (100..200).contains(&seq) && seq % 10 == 3 {
                e.human_approval = Some(afr_core::event::HumanApproval {
                    approver: format!("{MARKER}@acme.example"),
                    prompt: "Allow?".into(),
                    decision: afr_core::event::Decision::Approved,
                    decided_at_us: 1,
                    signature: None,
                });
                if let Some(c) = e.context_provenance.as_mut() {
                    c.environment = Some(format!("{MARKER}-env"));
                }
            }
        });
        let marked = afr_recorder::query::Query::parse(&format!(
            "human_approval.approver = \"{MARKER}@acme.example\""
        ))
        .unwrap();
        let hits = r.query(&marked).unwrap();
        assert_eq!(hits.matches.len(), 10, "{hits:?}");
        let salt = r.store().epoch_salt(1).unwrap().unwrap();
        let other = r.store().epoch_salt(2).unwrap().unwrap();
        // Push the salt into SST files too, as a long-running store would have.
        r.store().flush().unwrap();
        assert!(
            !files_containing(&dir, &salt).is_empty(),
            "the test must see the salt before erasure"
        );
        assert!(
            files_containing(&dir, MARKER.as_bytes()).is_empty(),
            "the blind index holds no plaintext term, before erasure either"
        );
        assert!(
            afr_recorder::index::indexed_seqs(r.store())
                .unwrap()
                .iter()
                .any(|s| (100..200).contains(s)),
            "the test must see the epoch's postings before erasure"
        );
        r.erase_epoch(1).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let hits = [
                files_containing(&dir, &salt),
                files_containing(&dir, MARKER.as_bytes()),
            ]
            .concat();
            if hits.is_empty() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "salt or index marker still in {hits:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // No index term of the erased epoch remains, and queries say what they cannot see.
        assert!(
            !afr_recorder::index::indexed_seqs(r.store())
                .unwrap()
                .iter()
                .any(|s| (100..200).contains(s))
        );
        let after = r.query(&marked).unwrap();
        assert!(after.matches.is_empty());
        assert_eq!(after.unknown, (100..200).collect::<Vec<_>>());
        assert_eq!(after.erased_epochs, [1]);
        // Other epochs keep their keys.
        assert_eq!(r.store().epoch_salt(2).unwrap(), Some(other));
        // The erasure is itself an event.
        let last = r.next_seq() - 1;
        let b = r.disclose(&[last], true);
        assert!(b.is_err(), "the erasure event is not sealed yet");
        // Until it is sealed, the erasure of epoch 1 cannot be proven: incomplete, not verified.
        let rep = verify_bundle(&r.disclose(&[150], true).unwrap().encode());
        assert_eq!(rep.outcome, Outcome::Incomplete, "{:?}", rep.missing);
        assert!(rep.erased.is_empty());
        assert_eq!(r.store().erase_event(1).unwrap(), Some(last));
        // A client cannot forge one: `afr.` tool names are the recorder's own.
        let mut forged = afr_testkit::synth::generate(1, 5).remove(0);
        forged.intent.tool = "afr.erase".into();
        forged.intent.args = serde_json::json!({"epoch": 2});
        let err = r.record(forged).unwrap_err().to_string();
        assert!(err.contains("reserved"), "{err}");
        r.seal().unwrap();
        // Once sealed, disclosing an erased event brings the afr.erase event along as proof.
        let rep = verify_bundle(&r.disclose(&[150, 250], true).unwrap().encode());
        assert_eq!(rep.erasures, vec![(1, last)]);
        assert_eq!(rep.outcome, Outcome::Verified, "{:?}", rep.first_failure);
        assert_eq!(rep.erased, vec![150]);
        let opened: Vec<u64> = rep.opened.iter().map(|(s, _)| *s).collect();
        assert_eq!(opened, vec![250, last]);
        assert_eq!(rep.opened[1].1.intent.tool, "afr.erase");
        // The whole log still verifies.
        assert_eq!(verify_log(&export(&r)).outcome, Outcome::Verified);
        assert!(r.erase_epoch(1).is_err(), "erasing twice is refused");
        assert!(
            r.erase_epoch(99).is_err(),
            "an unsealed epoch cannot be erased"
        );
    }
}

#[test]
fn an_idempotency_key_records_once_across_restarts() {
    let (_tmp, dir) = initialised([0xab; 20]);
    let events = synth::generate(3, 5);
    let first = {
        let r = Recorder::open(&dir, cfg(100, Durability::Group)).unwrap();
        let a = r.record_idempotent(b"k-1", events[0].clone()).unwrap();
        assert!(!a.duplicate);
        // A retry, even with another event, returns the first receipt and records nothing.
        let again = r.record_idempotent(b"k-1", events[1].clone()).unwrap();
        assert!(again.duplicate);
        assert_eq!(again.receipt, a.receipt);
        assert_eq!(r.next_seq(), 1);
        let b = r.record_idempotent(b"k-2", events[1].clone()).unwrap();
        assert_eq!(b.receipt.seq, 1);
        a.receipt
    };
    let r = Recorder::open(&dir, cfg(100, Durability::Group)).unwrap();
    let again = r.record_idempotent(b"k-1", events[2].clone()).unwrap();
    assert!(again.duplicate);
    assert_eq!(again.receipt, first);
    assert_eq!(r.next_seq(), 2);
    for bad in [&b""[..], &[b'x'; 129][..]] {
        assert!(matches!(
            r.record_idempotent(bad, events[2].clone()),
            Err(RecordError::Invalid(_))
        ));
    }
    assert_eq!(r.next_seq(), 2);
}
