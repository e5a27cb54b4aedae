//! The anchorer re-derives every header it is about to post from the stored records: a
//! rewritten record or header field in the real RocksDB store stops the pass, naming the
//! epoch and the field, before anything is sent.

use afr_anchorer::{AnchorError, AnchorStore, HeaderField, anchor_pending, signer_from_hex};
use afr_core::{EpochHeader, Hash32, Record, sequencer::SequenceError};
use afr_recorder::{Column, RawOp, Recorder};
use afr_testkit::{DEV_ADDR, anvil, cast_at as cast};

use super::{KEY, deployed, record, recorder};

fn put(r: &Recorder, cf: Column, key: u64, value: &[u8]) {
    let key = key.to_be_bytes();
    r.store().raw_write(&[RawOp::Put(cf, &key, value)]).unwrap();
}

fn delete(r: &Recorder, cf: Column, key: u64) {
    let key = key.to_be_bytes();
    r.store().raw_write(&[RawOp::Delete(cf, &key)]).unwrap();
}

fn header(r: &Recorder, e: u64) -> EpochHeader {
    r.store().epoch(e).unwrap().unwrap()
}

#[test]
fn a_header_its_records_do_not_back_is_never_anchored() {
    let chain = anvil();
    let (rt, settings) = deployed(&chain.url, 64);
    let contract = settings.contract.to_string();
    let tmp = tempfile::tempdir().unwrap();
    let r = recorder(&tmp.path().join("a"), 35); // epochs 0..=2 sealed, 5 events open
    let run = || {
        rt.block_on(anchor_pending(
            r.store(),
            signer_from_hex(KEY).unwrap(),
            &settings,
        ))
    };
    let chain_head = || {
        cast(
            &chain.url,
            &["call", &contract, "head(address)(bool,uint64)", DEV_ADDR],
        )
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
    };
    let nonce = || cast(&chain.url, &["nonce", DEV_ADDR]);
    let refused = |want_epoch: u64, want_field: HeaderField| {
        let before = nonce();
        match run() {
            Err(AnchorError::HeaderMismatch { epoch, field, .. })
                if epoch == want_epoch && field == want_field => {}
            other => {
                panic!("expected a {want_field} mismatch in epoch {want_epoch}, got {other:?}")
            }
        }
        assert_eq!(nonce(), before, "nothing sent");
    };

    // A record of epoch 1 rewritten (a valid record, another timestamp): the next record no
    // longer links to it, and not even the intact epoch 0 goes out.
    let rewrite = |seq: u64| {
        let mut rec = Record::decode(&r.store().record_bytes(seq).unwrap().unwrap()).unwrap();
        rec.timestamp_us += 1;
        put(&r, Column::Records, seq, &rec.encode());
    };
    let good = r.store().record_bytes(13).unwrap().unwrap();
    let before = nonce();
    rewrite(13);
    match run() {
        Err(AnchorError::Sequence {
            epoch: 1,
            source: SequenceError::Broken { seq: 14 },
        }) => {}
        other => panic!("expected a broken link at record 14, got {other:?}"),
    }
    let e = run().unwrap_err().to_string();
    assert!(e.contains("epoch 1") && e.contains("record 14"), "{e}");
    assert_eq!(nonce(), before, "nothing sent");
    put(&r, Column::Records, 13, &good);
    // The epoch's last record rewritten: nothing after it in the epoch to break, so the
    // recomputed Merkle root is what differs.
    let last = r.store().record_bytes(19).unwrap().unwrap();
    rewrite(19);
    refused(1, HeaderField::MerkleRoot);
    put(&r, Column::Records, 19, &last);
    assert_eq!(chain_head(), "false 0", "chain head stays unanchored");
    assert!(r.store().anchor(0).unwrap().is_none());
    // A missing record is named too.
    delete(&r, Column::Records, 13);
    match run() {
        Err(AnchorError::RecordMissing { epoch: 1, seq: 13 }) => {}
        other => panic!("expected record 13 missing, got {other:?}"),
    }
    put(&r, Column::Records, 13, &good);
    assert_eq!(run().unwrap().posted, vec![0, 1, 2]);
    assert_eq!(chain_head(), "true 2");

    // Two more epochs; each header field of the pending ones tampered in turn.
    record(&r, 20, 2); // epochs 3 and 4 seal
    let (h3, h4) = (header(&r, 3), header(&r, 4));
    let x = Hash32([0xaa; 32]);
    let cases = [
        (
            3,
            EpochHeader {
                prev_epoch_root: x,
                ..h3.clone()
            },
            HeaderField::PrevEpochRoot,
        ),
        (
            3,
            EpochHeader {
                first_seq: h3.first_seq + 1,
                ..h3.clone()
            },
            HeaderField::FirstSeq,
        ),
        (
            3,
            EpochHeader {
                recorder: [7; 20],
                ..h3.clone()
            },
            HeaderField::Recorder,
        ),
        (
            4,
            EpochHeader {
                chain_head: x,
                ..h4.clone()
            },
            HeaderField::ChainHead,
        ),
        (
            4,
            EpochHeader {
                merkle_root: x,
                ..h4.clone()
            },
            HeaderField::MerkleRoot,
        ),
        (
            4,
            EpochHeader {
                epoch: 5,
                ..h4.clone()
            },
            HeaderField::Epoch,
        ),
    ];
    for (e, bad, field) in cases {
        let good = header(&r, e);
        put(&r, Column::Epochs, e, &bad.encode());
        refused(e, field);
        assert_eq!(
            chain_head(),
            "true 2",
            "{field}: the chain head stays at epoch 2"
        );
        assert!(r.store().anchor(3).unwrap().is_none());
        put(&r, Column::Epochs, e, &good.encode());
    }
    // Epoch 3 rewritten as a whole (all its own fields consistent, another timestamp): its
    // root changes, so epoch 4's back link no longer matches.
    put(
        &r,
        Column::Epochs,
        3,
        &EpochHeader {
            sealed_at_us: h3.sealed_at_us + 1,
            ..h3.clone()
        }
        .encode(),
    );
    refused(4, HeaderField::PrevEpochRoot);
    put(&r, Column::Epochs, 3, &h3.encode());

    // Restored: both go out.
    assert_eq!(run().unwrap().posted, vec![3, 4]);
    assert_eq!(chain_head(), "true 4");
}
