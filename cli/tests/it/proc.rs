//! Processes the tests start: killed when dropped, their output read on threads, and
//! long-running ones (servers, proxies, receivers) whose stderr lines are read as they come.

use std::{
    io::{BufRead, BufReader, Read},
    process::{Child, Command, Stdio},
    sync::mpsc::{Receiver, RecvTimeoutError, channel},
    time::{Duration, Instant},
};

/// How long a long-running process may take to print the line a test waits for.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The project's venv Python (scripts/setup.sh: the pinned PyPI `mcp` SDK, OpenTelemetry SDK
/// and exporters, Pydantic AI).
pub(super) fn python() -> std::path::PathBuf {
    afr_testkit::installed(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"),
        "scripts/setup.sh",
    )
}

/// A child process killed and reaped when dropped (a failed test leaves nothing running).
pub(super) struct Guard(pub(super) Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads all of `r` on a thread; the bytes arrive on the receiver.
pub(super) fn slurp(mut r: impl Read + Send + 'static) -> Receiver<Vec<u8>> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = r.read_to_end(&mut b);
        let _ = tx.send(b);
    });
    rx
}

/// A long-running process whose stderr lines are read as they come.
pub(super) struct Daemon {
    pub(super) guard: Guard,
    lines: Receiver<String>,
    log: Vec<String>,
}

impl Daemon {
    pub(super) fn spawn(c: &mut Command) -> Daemon {
        let mut child = c
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = BufReader::new(child.stderr.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for l in err.lines() {
                let Ok(l) = l else { return };
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        Daemon {
            guard: Guard(child),
            lines,
            log: Vec::new(),
        }
    }

    /// The first stderr line from now on that `f` accepts, mapped; `None` if the process
    /// closed its stderr (exited) first.
    pub(super) fn wait_for<T>(&mut self, f: impl Fn(&str) -> Option<T>) -> Option<T> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let hit = f(&l);
                    self.log.push(l);
                    if hit.is_some() {
                        return hit;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return None,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no such line within {START_TIMEOUT:?}: {:?}", self.log)
                }
            }
        }
    }

    /// Everything it wrote on stderr so far.
    pub(super) fn stderr(&mut self) -> String {
        while let Ok(l) = self.lines.try_recv() {
            self.log.push(l);
        }
        self.log.join("\n")
    }
}
