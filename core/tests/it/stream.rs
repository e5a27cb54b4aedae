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
