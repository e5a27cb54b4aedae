//! Round-trip oracles for every AFR decoder: each takes arbitrary bytes, and panics only if a
//! property of the format is broken. Decoders must never panic, and whatever a decoder accepts
//! must re-encode to exactly the same bytes (one value, one encoding).
//!
//! This file is shared: the libFuzzer targets in `fuzz/fuzz_targets/` call it through the
//! `afr-fuzz` library, and the stable smoke run in `core/tests/it/fuzz_smoke.rs` includes it
//! with `#[path]`. It may use only `std`, `afr_core`, `ciborium` and `serde_json`.

use afr_core::{
    EpochHeader, EventInput, Payload, Record, cbor, crypto::EncryptedPayload,
    event::DEFAULT_MAX_EVENT_BYTES,
};

/// Generic canonical CBOR: `encode(decode(b)) == b` for every accepted `b`.
pub fn cbor_value(data: &[u8]) -> bool {
    let Ok(v) = cbor::from_slice::<ciborium::Value>(data) else {
        return false;
    };
    let again = cbor::to_vec(&v);
    assert_eq!(
        again.as_deref(),
        Ok(data),
        "cbor value {v:?} re-encodes differently"
    );
    true
}

/// Records: the strict decoder accepts only what the encoder writes, and the generic
/// canonical decoder accepts those bytes too.
pub fn record(data: &[u8]) -> bool {
    let Ok(r) = Record::decode(data) else {
        return false;
    };
    assert_eq!(r.encode(), data, "record {r:?} re-encodes differently");
    assert!(
        cbor::from_slice::<ciborium::Value>(data).is_ok(),
        "record is not canonical cbor"
    );
    true
}

/// Epoch headers: round trip, and a header never has zero records.
pub fn epoch_header(data: &[u8]) -> bool {
    let Ok(h) = EpochHeader::decode(data) else {
        return false;
    };
    assert_eq!(h.encode(), data, "header {h:?} re-encodes differently");
    assert!(h.count > 0);
    assert!(
        cbor::from_slice::<ciborium::Value>(data).is_ok(),
        "header is not canonical cbor"
    );
    true
}

/// Sealed payloads: round trip, and the ciphertext holds at least the 16-byte tag.
pub fn sealed_payload(data: &[u8]) -> bool {
    let Ok(p) = EncryptedPayload::decode(data) else {
        return false;
    };
    assert_eq!(p.encode(), data, "sealed payload re-encodes differently");
    assert!(p.ciphertext.len() >= 16);
    assert!(
        cbor::from_slice::<ciborium::Value>(data).is_ok(),
        "sealed payload is not canonical cbor"
    );
    true
}

/// Payload plaintexts: round trip through the generic codec.
pub fn payload(data: &[u8]) -> bool {
    let Ok(p) = Payload::decode(data) else {
        return false;
    };
    let again = p.encode();
    assert_eq!(
        again.as_deref(),
        Ok(data),
        "payload {p:?} re-encodes differently"
    );
    true
}

/// Event JSON: an accepted event re-serialises to JSON that parses to the same event, and its
/// payload survives canonical CBOR.
pub fn event_json(data: &[u8]) -> bool {
    let Ok(ev) = EventInput::from_json(data, DEFAULT_MAX_EVENT_BYTES) else {
        return false;
    };
    let json = match serde_json::to_string(&ev) {
        Ok(s) => s,
        Err(e) => panic!("accepted event does not serialise: {e}"),
    };
    let back = EventInput::from_json(json.as_bytes(), usize::MAX);
    assert_eq!(
        back.as_ref(),
        Ok(&ev),
        "event does not survive JSON: {json}"
    );
    let (_, p) = ev.into_payload();
    let Ok(bytes) = p.encode() else {
        panic!("accepted event's payload does not encode: {p:?}")
    };
    assert_eq!(
        Payload::decode(&bytes).as_ref(),
        Ok(&p),
        "payload does not survive cbor"
    );
    true
}

/// Whole-log exports (`afr-verify log`): any bytes give a report, never a panic; what the full
/// verifier accepts the chain-only configuration accepts too (layers only add checks); an
/// accepted log lists one root per epoch, epochs numbered from 0, and no more events than the
/// file can hold.
pub fn log_file(data: &[u8]) -> bool {
    use afr_core::verify::{Layers, Outcome, verify_log, verify_log_layers};
    let full = verify_log(data);
    if full.outcome == Outcome::Tampered {
        assert!(full.first_failure.is_some(), "tampered without a failure");
        return false;
    }
    assert!(full.first_failure.is_none());
    let chain = verify_log_layers(data, Layers::CHAIN_ONLY);
    assert_ne!(
        chain.outcome,
        Outcome::Tampered,
        "chain-only rejects a log the full verifier accepts: {:?}",
        chain.first_failure
    );
    assert_eq!(full.epoch_roots.len() as u64, full.epochs);
    for (i, (e, _)) in full.epoch_roots.iter().enumerate() {
        assert_eq!(*e, i as u64, "epochs out of order");
    }
    assert!(full.events <= data.len() as u64 / 40);
    assert_eq!(
        full.outcome == Outcome::Incomplete,
        !full.missing.is_empty()
    );
    true
}

/// Disclosure bundles (`afr-verify bundle`): any bytes give a report, never a panic; in an
/// accepted bundle every opened or erased event is a disclosed event, disclosed events are
/// strictly increasing, and epoch roots are listed once each in order.
pub fn bundle_file(data: &[u8]) -> bool {
    use afr_core::{bundle::verify_bundle, verify::Outcome};
    let rep = verify_bundle(data);
    if rep.outcome == Outcome::Tampered {
        assert!(rep.first_failure.is_some(), "tampered without a failure");
        return false;
    }
    assert!(rep.first_failure.is_none());
    assert!(
        rep.events.windows(2).all(|w| w[0] < w[1]),
        "events not increasing"
    );
    for (seq, _) in &rep.opened {
        assert!(rep.events.contains(seq), "opened event {seq} not disclosed");
    }
    for seq in &rep.erased {
        assert!(rep.events.contains(seq), "erased event {seq} not disclosed");
    }
    assert!(rep.epoch_roots.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(rep.outcome == Outcome::Incomplete, !rep.missing.is_empty());
    true
}
