//! The streaming log verifier ([`verify_log_stream`], [`StreamLog`]) decides exactly as the
//! in-memory one, whatever the read size: on every whole-log export of the verifier's named
//! vectors (honest, tampered, truncated, spliced), read 1, 7, 4,096 bytes at a time and all at
//! once, and on every prefix of an honest log. A read error is an error, never a verdict.

use std::path::PathBuf;

use afr_core::{
    export::StreamLog,
    verify::{Layers, verify_frames, verify_log, verify_log_stream},
};

fn logs() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../verifier/testdata"));
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "afr"))
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    out.sort();
    assert!(out.len() >= 15, "the named vectors are missing");
    out
}

fn honest_log() -> Vec<u8> {
    logs()
        .into_iter()
        .find(|(n, _)| n.ends_with("honest-log.afr"))
        .unwrap()
        .1
}

#[test]
fn streaming_decides_as_in_memory_at_every_read_size() {
    for (name, bytes) in logs() {
        let whole = verify_log(&bytes);
        for chunk in [1, 7, 4096, 1 << 20] {
            let mut rd = StreamLog::with_chunk(&bytes[..], chunk);
            let streamed = verify_frames(&mut rd, bytes.len() as u64, Layers::ALL);
            assert_eq!(streamed, whole, "{name}, {chunk}-byte reads");
        }
        assert_eq!(
            verify_log_stream(&bytes[..], bytes.len() as u64).unwrap(),
            whole,
            "{name}"
        );
    }
}

#[test]
fn every_prefix_of_a_log_is_judged_as_in_memory() {
    let bytes = honest_log();
    for cut in (0..bytes.len()).step_by(97) {
        let prefix = &bytes[..cut];
        let mut rd = StreamLog::with_chunk(prefix, 13);
        assert_eq!(
            verify_frames(&mut rd, cut as u64, Layers::ALL),
            verify_log(prefix),
            "prefix of {cut} bytes"
        );
    }
}

/// Fails after `ok` bytes.
struct Broken<'a> {
    data: &'a [u8],
    ok: usize,
}

impl std::io::Read for Broken<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.ok == 0 {
            return Err(std::io::Error::other("disk on fire"));
        }
        let n = buf.len().min(self.ok).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        self.ok -= n;
        Ok(n)
    }
}

#[test]
fn a_read_error_is_an_error_not_a_verdict() {
    let bytes = honest_log();
    let e = verify_log_stream(
        Broken {
            data: &bytes,
            ok: bytes.len() / 2,
        },
        bytes.len() as u64,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "disk on fire");
}

/// The pipelined verifier ([`verify_log_stream`]: reading, hashing and checking on three
/// threads, in batches of 2,048 frames) against the in-memory one, on a log of several
/// batches: honest, with one byte changed at each of 64 places spread over the file, cut at 64
/// places, and with two whole event frames swapped. Same report every time.
#[test]
fn the_pipeline_decides_as_in_memory_across_batches() {
    let (log, _) = crate::fuzz_smoke::honest_files(&[2500, 3000, 1200], 40);
    let judge = |bytes: &[u8], what: &str| {
        let streamed = verify_log_stream(bytes, bytes.len() as u64).unwrap();
        assert_eq!(streamed, verify_log(bytes), "{what}");
        streamed
    };
    let honest = judge(&log, "honest");
    assert_eq!(honest.events, 6740);
    assert_eq!(honest.outcome, afr_core::verify::Outcome::Incomplete); // the unsealed tail
    let mut tampered = 0;
    for k in 0..64 {
        let at = 17 + k * (log.len() - 17) / 64;
        let mut m = log.clone();
        m[at] ^= 0x20;
        if judge(&m, &format!("byte {at} changed")).outcome == afr_core::verify::Outcome::Tampered {
            tampered += 1;
        }
        judge(&log[..at], &format!("cut at {at}"));
    }
    assert!(tampered >= 60, "only {tampered} of 64 changes detected");
    // Two adjacent event frames of the second epoch swapped (a reorder).
    let mut rd = afr_core::export::LogReader::new(&log);
    let mut offsets = Vec::new();
    while let Ok(Some(_)) = rd.next_frame() {
        offsets.push(rd.offset());
    }
    let (a, b, c) = (offsets[3000], offsets[3001], offsets[3002]);
    let mut m = log[..a].to_vec();
    m.extend_from_slice(&log[b..c]);
    m.extend_from_slice(&log[a..b]);
    m.extend_from_slice(&log[c..]);
    let r = judge(&m, "two events swapped");
    assert_eq!(r.outcome, afr_core::verify::Outcome::Tampered);
}
