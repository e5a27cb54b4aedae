//! Every command exits quietly when its reader goes away (`afr query … | head -1`): no panic,
//! no backtrace, no error line; the status a shell reports for SIGPIPE (141).

use std::{
    io::Read,
    process::{Command, Stdio},
};

use super::{afr, init_with_synthetic};

/// Runs `c` with its stdout read for one chunk and then closed; its exit code and stderr.
fn cut_short(c: &mut Command) -> (Option<i32>, String) {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 512];
    assert!(out.read(&mut first).unwrap() > 0, "no output at all");
    drop(out);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (child.wait().unwrap().code(), err)
}

#[test]
fn commands_exit_quietly_when_their_reader_goes_away() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    // Far more output than a pipe buffers (64 KiB), so the writer meets the closed pipe.
    init_with_synthetic(&dir, 2_000);
    for args in [
        &["query", "--json", "seq in 0..100000"][..],
        &["query", "seq in 0..100000"][..],
    ] {
        let (code, err) = cut_short(afr(&dir).args(args));
        assert_eq!(code, Some(141), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("error"),
            "{args:?}: {err}"
        );
    }
}
